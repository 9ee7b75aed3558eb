-- Scale-out on Citus: every table with a tenant_id column distributed by it and
-- colocated with agentmem.conversations, the installation-wide catalogues as
-- reference tables (a copy on every node). Found from the catalogue, so a
-- tenant table added by a later migration is distributed by the next call (and
-- by the block at the end of this file on every upgrade of a distributed
-- installation). The ledger agentmem.schema_migrations stays a local table on
-- the coordinator: only installers read it, always through the coordinator.

-- The steps of agentmem.distribute, in the order it takes them, in its one transaction.

create or replace function agentmem_private.distribute_plan()
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    create temporary table if not exists pg_temp.agentmem_distribute_plan (
        relid regclass primary key, kind text not null, done boolean not null
    ) on commit drop;
    create temporary table if not exists pg_temp.agentmem_distribute_fks (
        conname text primary key, relid regclass not null, def text not null, sets_columns boolean not null
    ) on commit drop;
    truncate pg_temp.agentmem_distribute_plan, pg_temp.agentmem_distribute_fks;
    execute $plan$
        insert into pg_temp.agentmem_distribute_plan (relid, kind, done)
        select
            c.oid::regclass,
            case when t.has_tenant then 'distributed' else 'reference' end,
            p.logicalrelid is not null
        from pg_catalog.pg_class as c
        cross join lateral (
            select exists (
                select from pg_catalog.pg_attribute as a
                where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped
            ) as has_tenant
        ) as t
        left join pg_catalog.pg_dist_partition as p on c.oid = p.logicalrelid
        where
            c.relnamespace = 'agentmem'::regnamespace and c.relkind in ('r', 'p')
            and c.oid <> 'agentmem.schema_migrations'::regclass
    $plan$;
end
$$;

comment on function agentmem_private.distribute_plan() is
'Internal: a step of agentmem.distribute: the plan, in temporary tables dropped at commit: every agentmem table '
'(distributed when it has tenant_id, else a reference table) and whether Citus has it already.';

create or replace function agentmem_private.distribute_policies()
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_table regclass;
begin
    -- Citus refuses sub-selects in policies (sql/01_row_security.sql reads
    -- current_tenant() once per statement with one): call it directly instead.
    for v_table in
        select pg_catalog.format('agentmem.%I', p.tablename)::regclass
        from pg_catalog.pg_policies as p
        where
            p.schemaname = 'agentmem' and p.policyname = 'tenant_isolation'
            and (p.qual like '%SELECT%' or p.with_check like '%SELECT%')
    loop
        execute pg_catalog.format(
            'alter policy tenant_isolation on %s using (tenant_id = agentmem.current_tenant()) '
            'with check (tenant_id = agentmem.current_tenant())', v_table
        );
    end loop;
end
$$;

comment on function agentmem_private.distribute_policies() is
'Internal: a step of agentmem.distribute: the tenant_isolation policies call current_tenant() directly (Citus '
'refuses their sub-selects).';

create or replace function agentmem_private.distribute_drop_foreign_keys()
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_fk record;
begin
    -- Citus cannot turn tables joined by foreign keys into distributed and
    -- reference tables one at a time: drop the keys that touch a table about to
    -- change, remembering their exact definitions, and re-create them after.
    insert into pg_temp.agentmem_distribute_fks (conname, relid, def, sets_columns)
    select
        k.conname::text, k.conrelid::regclass, pg_catalog.pg_get_constraintdef(k.oid),
        k.confdeltype in ('n', 'd') or k.confupdtype in ('n', 'd')
    from pg_catalog.pg_constraint as k
    where
        k.contype = 'f' and k.connamespace = 'agentmem'::regnamespace
        and exists (
            select from pg_temp.agentmem_distribute_plan as p
            where not p.done and p.relid in (k.conrelid, k.confrelid)
        );
    for v_fk in select f.conname, f.relid from pg_temp.agentmem_distribute_fks as f order by f.conname loop
        execute pg_catalog.format('alter table %s drop constraint %I', v_fk.relid, v_fk.conname);
    end loop;
end
$$;

comment on function agentmem_private.distribute_drop_foreign_keys() is
'Internal: a step of agentmem.distribute: the foreign keys touching a table about to change dropped, their '
'definitions kept in the plan''s temporary table for distribute_restore_foreign_keys.';

create or replace function agentmem_private.distribute_tables(p_shard_count int)
returns table (table_name text, distribution text, note text)
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_colocate constant regclass := 'agentmem.conversations'::regclass;
    v_table regclass;
    v_kind text;
begin
    if not exists (select from pg_temp.agentmem_distribute_plan where relid = v_colocate and done) then
        perform pg_catalog.create_distributed_table(
            v_colocate, 'tenant_id', colocate_with => 'none',
            shard_count => coalesce(p_shard_count, pg_catalog.current_setting('citus.shard_count')::int)
        );
        perform pg_catalog.truncate_local_data_after_distributing_table(v_colocate);
        table_name := 'conversations';
        distribution := 'distributed by tenant_id';
        note := null;
        return next;
    end if;
    for v_table, v_kind in
        select p.relid, p.kind from pg_temp.agentmem_distribute_plan as p
        where not p.done and p.relid <> v_colocate
        order by p.kind desc, p.relid::text
    loop
        if v_kind = 'reference' then
            perform pg_catalog.create_reference_table(v_table);
            distribution := 'reference table';
        else
            perform pg_catalog.create_distributed_table(v_table, 'tenant_id', colocate_with => v_colocate::text);
            distribution := 'distributed by tenant_id';
        end if;
        -- The rows were copied to the shards; free the coordinator's copy.
        perform pg_catalog.truncate_local_data_after_distributing_table(v_table);
        table_name := (select c.relname::text from pg_catalog.pg_class as c where c.oid = v_table);
        note := null;
        return next;
    end loop;
end
$$;

comment on function agentmem_private.distribute_tables(int) is
'Internal: a step of agentmem.distribute: conversations distributed by tenant_id first, then every other table '
'of the plan, colocated with it or as a reference table; one row per table changed.';

create or replace function agentmem_private.distribute_restore_foreign_keys()
returns table (table_name text, distribution text, note text)
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_fk record;
begin
    for v_fk in select f.* from pg_temp.agentmem_distribute_fks as f order by f.conname loop
        if v_fk.sets_columns then
            -- Citus refuses ON DELETE/UPDATE SET NULL or SET DEFAULT on a key
            -- that includes the distribution column (cache_hits_entry_fk). The
            -- functions that delete the referenced rows clear the column instead.
            table_name := (select c.relname::text from pg_catalog.pg_class as c where c.oid = v_fk.relid);
            distribution := 'foreign key not re-created';
            note := pg_catalog.format('%s: %s (Citus refuses it; agentmem''s functions keep it true)',
                v_fk.conname, v_fk.def);
            return next;
            continue;
        end if;
        execute pg_catalog.format('alter table %s add constraint %I %s', v_fk.relid, v_fk.conname, v_fk.def);
    end loop;
end
$$;

comment on function agentmem_private.distribute_restore_foreign_keys() is
'Internal: a step of agentmem.distribute: the dropped foreign keys re-created as they were, but those Citus '
'refuses (a row for each).';

create or replace function agentmem_private.distribute_functions()
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_fn regprocedure;
begin
    -- The functions run on the workers too: the policies call current_tenant(),
    -- and a query Citus sends whole to a worker runs the agentmem functions in
    -- it there (and the internal helpers they call). Functions created before
    -- the schemas were distributed exist on the coordinator only; later ones
    -- Citus creates everywhere by itself.
    for v_fn in execute $fns$
        select p.oid::regprocedure from pg_catalog.pg_proc as p
        where
            p.pronamespace in ('agentmem'::regnamespace, 'agentmem_private'::regnamespace)
            and p.prokind = 'f'
            and not exists (
                select from pg_catalog.pg_dist_object as o
                where o.classid = 'pg_catalog.pg_proc'::regclass and o.objid = p.oid
            )
        order by p.oid
    $fns$ loop
        perform pg_catalog.create_distributed_function(v_fn);
    end loop;
end
$$;

comment on function agentmem_private.distribute_functions() is
'Internal: a step of agentmem.distribute: every agentmem function not yet on the workers created there.';

create or replace function agentmem.distribute(shard_count int default null)
returns table (table_name text, distribution text, note text)
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if not exists (select from pg_catalog.pg_extension where extname = 'citus') then
        raise exception 'Citus is not installed in database %', pg_catalog.current_database()
        using
            errcode = 'AM040',
            detail = 'agentmem.distribute() distributes the agentmem tables by tenant_id with Citus; '
            || 'the extension "citus" is not in pg_extension.',
            hint = 'Install Citus 12 or newer, add it to shared_preload_libraries, run "create extension citus;" '
            || 'on the coordinator and every worker, register the workers (citus_add_node), then call this again.';
    end if;
    if distribute.shard_count is not null then
        perform agentmem_private.check_range('shard_count', distribute.shard_count, 1, 64000);
    end if;
    -- One distributor at a time; everything below is one transaction.
    perform pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('agentmem.distribute'));
    -- Citus creates shards over one connection per worker inside this transaction.
    perform pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    perform agentmem_private.distribute_plan();
    -- The tenant binding's mode, now that Citus is here: none on the workers.
    perform agentmem_private.generate_tenant_binding();
    perform agentmem_private.distribute_policies();
    perform agentmem_private.distribute_drop_foreign_keys();
    return query select * from agentmem_private.distribute_tables(distribute.shard_count);
    return query select * from agentmem_private.distribute_restore_foreign_keys();
    perform agentmem_private.distribute_functions();

    -- Citus opens the worker connections of a security definer function as
    -- the function's owner: the API's owner must be able to log in, on a
    -- distributed installation only (on one server it stays NOLOGIN). It has no
    -- password; allow it in the workers' pg_hba.conf from the coordinator's
    -- address only (docs/citus.md). Citus propagates the
    -- ALTER ROLE to every node.
    alter role agentmem_owner login;
    -- So must the owner of the embedding queue's functions (sql/17_embedding_jobs.sql).
    alter role agentmem_queue login;
    -- The statements Citus sends to the workers name pg_catalog's functions
    -- unqualified (array_agg(...), not pg_catalog.array_agg(...)); a worker
    -- resolves them through its connection's search_path, which is the
    -- role's default, '"$user", public' unless set: an exact-type overload
    -- planted in public by a login with CREATE there would win over
    -- pg_catalog's polymorphic one and run as the owner. The path every
    -- agentmem function pins, set for the two roles Citus connects as, on
    -- every node (Citus propagates ALTER ROLE ... SET) and for new
    -- connections (Citus keeps open ones: this runs before any query of
    -- theirs in a fresh distribution; see docs/citus.md).
    alter role agentmem_owner set search_path = pg_catalog, agentmem, pg_temp;
    alter role agentmem_queue set search_path = pg_catalog, agentmem, pg_temp;
end
$$;

comment on function agentmem.distribute(int) is
'Distribute this agentmem installation on Citus: every tenant table by tenant_id, colocated, and the installation-wide catalogues as reference tables.
Every agentmem table with a tenant_id column is colocated with agentmem.conversations (so one tenant''s rows of every table are on one worker and each call for one tenant runs on that worker); the catalogues are models, cache_intents and text_search_settings.
The ledger schema_migrations stays
on the coordinator.
Foreign keys are re-created with their names and definitions, except those Citus refuses
(ON DELETE SET NULL on a key with tenant_id: cache_hits_entry_fk), which agentmem''s functions uphold.
Every agentmem function is created on the workers too (Citus runs some of them there).
Makes agentmem_owner a login role: Citus connects to the workers as the owner of the security
definer function running; restrict that login to the coordinator in the workers'' pg_hba.conf.
shard_count: shards per distributed table (default citus.shard_count); fixed once distributed.
Idempotent: a second call distributes only tables added since and returns no row for the others.
Returns one row per table it changed. For the DBA, on the coordinator; one transaction.
Raises AM040 when Citus is not installed in this database.
Called by: the DBA (granted to no role).';

-- On every install or upgrade of a distributed installation: distribute the
-- tenant tables and catalogues a migration added since.
do $redistribute$
begin
    if agentmem.is_distributed() then
        perform agentmem.distribute();
    end if;
end
$redistribute$;
