-- The DBA's management of big tenants' own indexes: the statements that build
-- them (tenant_index_ddl), the calls that build, measure and drop them, and the
-- views of the tenants that need one (tenants_needing_index) and of those built
-- (tenant_indexes). Searches find them by their deterministic names in pg_class
-- (sql/11_vector_search.sql), so there is no catalogue table to keep in step
-- with DDL the DBA may run by hand (e.g. CREATE INDEX CONCURRENTLY). Figures
-- behind the defaults: docs/tuning.md.

create or replace function agentmem_private.embedding_tables()
returns setof text
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select c.relname::text
    from pg_catalog.pg_class as c
    where
        c.relnamespace = 'agentmem'::regnamespace and c.relkind = 'r'
        and exists (
            select from pg_catalog.pg_attribute as a
            where
                a.attrelid = c.oid and a.attname = 'embedding' and not a.attisdropped
                and a.atttypid = agentmem_private.vector_type()
        )
        and exists (
            select from pg_catalog.pg_attribute as a
            where a.attrelid = c.oid and a.attname = 'model' and not a.attisdropped
        )
        and exists (
            select from pg_catalog.pg_attribute as a
            where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped
        )
    order by 1
$$;

comment on function agentmem_private.embedding_tables() is
'Internal: the agentmem tables with tenant_id, model and embedding columns (those a tenant index can cover).';

create or replace function agentmem_private.check_tenant_index_args(
    p_tenant text, p_model text, p_table text
) returns int
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_tenant is null or p_tenant = '' or pg_catalog.length(p_tenant) > 128 then
        raise exception 'tenant_id must be a non-empty text of at most 128 characters'
        using errcode = 'AM002', hint = 'Pass the id of the tenant the index is for.';
    end if;
    if p_table is null or p_table not in (select t from agentmem_private.embedding_tables() as t) then
        raise exception 'table_name is not an agentmem table with embeddings: %', coalesce(p_table, 'NULL')
        using
            errcode = 'AM020',
            detail = 'Tables with embeddings: '
            || (select pg_catalog.string_agg(t, ', ') from agentmem_private.embedding_tables() as t),
            hint = 'message_embeddings (search_messages), facts (recall_facts) or cache_entries (cache_lookup).';
    end if;
    return (agentmem.get_model(p_model)).dimension;
end
$$;

comment on function agentmem_private.check_tenant_index_args(text, text, text) is
'Internal: check the arguments of the tenant-index functions (AM002, AM020, AM011); return the model''s dimension.';

create or replace function agentmem_private.tenant_index_build(out m int, out ef_construction int)
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- Stronger than pgvector's defaults (m 16, ef_construction 64): a tenant's
    -- own index is built once for a big tenant, and on random 768-d vectors
    -- the default graph does not reach recall@10 0.95 at any ef_search
    -- (docs/tuning.md).
    select
        coalesce(nullif(pg_catalog.current_setting('agentmem.tenant_index_m', true), '')::int, 32),
        coalesce(nullif(pg_catalog.current_setting('agentmem.tenant_index_ef_construction', true), '')::int, 128)
$$;

comment on function agentmem_private.tenant_index_build() is
'Internal: the HNSW build parameters of a tenant''s own index: the settings agentmem.tenant_index_m and
agentmem.tenant_index_ef_construction, else m = 32, ef_construction = 128 (docs/tuning.md).';

create or replace function agentmem.tenant_index_ddl(
    tenant_id text,
    model text default null,
    table_name text default 'message_embeddings',
    concurrently boolean default true,
    kind text default 'hnsw'
) returns text
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_model text := coalesce(tenant_index_ddl.model, agentmem_private.default_model());
    v_dim int := agentmem_private.check_tenant_index_args(tenant_index_ddl.tenant_id, v_model, tenant_index_ddl.table_name);
    v_create text := pg_catalog.format(
        'create index %sif not exists ',
        case when coalesce(tenant_index_ddl.concurrently, true) then 'concurrently ' else '' end
    );
begin
    if tenant_index_ddl.kind is not distinct from 'hnsw' then
        return v_create || pg_catalog.format(
            '%I on agentmem.%I using hnsw ((%3$I.l2_normalize(embedding::%3$I.vector(%4$s))::%3$I.vector(%4$s)) %3$I.vector_cosine_ops) '
            'with (m = %5$s, ef_construction = %6$s) where tenant_id = %7$L and model = %8$L',
            agentmem_private.tenant_index_name(tenant_index_ddl.table_name, tenant_index_ddl.tenant_id, v_model),
            tenant_index_ddl.table_name, agentmem_private.vector_schema(), v_dim,
            (agentmem_private.tenant_index_build()).m, (agentmem_private.tenant_index_build()).ef_construction,
            tenant_index_ddl.tenant_id, v_model
        );
    end if;
    if tenant_index_ddl.kind is distinct from 'exact' or tenant_index_ddl.table_name <> 'message_embeddings' then
        raise exception 'kind must be ''hnsw'', or ''exact'' for message_embeddings: %',
            coalesce(tenant_index_ddl.kind, 'NULL') || ' for ' || tenant_index_ddl.table_name
        using
            errcode = 'AM020',
            detail = 'An exact index serves the second pass of message search only.',
            hint = 'kind => ''hnsw'' (any table) or kind => ''exact'' (table_name => ''message_embeddings'').';
    end if;
    return v_create || pg_catalog.format(
        '%I on agentmem.%I using ivfflat ((%3$I.l2_normalize(embedding::%3$I.vector(%4$s))::%3$I.halfvec(%4$s)) %3$I.halfvec_cosine_ops) '
        'with (lists = 1) where tenant_id = %5$L and model = %6$L',
        agentmem_private.exact_index_name(tenant_index_ddl.table_name, tenant_index_ddl.tenant_id, v_model),
        tenant_index_ddl.table_name, agentmem_private.vector_schema(), v_dim, tenant_index_ddl.tenant_id, v_model
    );
end
$$;

comment on function agentmem.tenant_index_ddl(text, text, text, boolean, text) is
'The statement that builds one of a tenant''s own indexes (partial: where tenant_id = T and model = M), for the DBA to run.
kind ''hnsw'' (the default): an HNSW index on l2_normalize(embedding::vector(d))::vector(d), cosine, with
m = 32 and ef_construction = 128 (settings agentmem.tenant_index_m, agentmem.tenant_index_ef_construction;
pgvector''s defaults do not reach recall@10 0.95 on hard data: docs/tuning.md).
kind ''exact'' (message_embeddings only): the tenant''s exact index, an IVFFlat index with one list on
l2_normalize(embedding::vector(d))::halfvec(d): a search whose first HNSW pass comes back far reads all
of it (the tenant''s rows sorted by distance, nothing missed) instead of a second, slower HNSW pass.
Worth it up to agentmem.exact_index_max_rows rows (by default 24,000,000 / dimension); a search
ignores a bigger one.
With concurrently (the default) it is CREATE INDEX CONCURRENTLY, which does not block
writes but cannot run inside a transaction or a function: run it from psql. Searches use the index
once it is valid; should the build fail, drop the invalid index with agentmem.drop_tenant_index.
table_name: message_embeddings (default), facts or cache_entries; any other table or kind: AM020;
AM011 for an unknown model; AM002 for an empty tenant id.
Called by: the DBA (granted to no role).';

create or replace function agentmem.measure_tenant_index(
    tenant_id text,
    model text default null
) returns table (sampled int, far int, first_pass text)
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
set "hnsw.iterative_scan" = 'relaxed_order'
set "hnsw.ef_search" = 40
set enable_sort = off
as $$
declare
    v_model text := coalesce(measure_tenant_index.model, agentmem_private.default_model());
    v_dim int;
    v_k constant int := 10;
    v_far float8 := agentmem_private.escalate_distance();
    v_embedding agentmem.message_embeddings.embedding%type;
    v_distance float8;
    v_caller_tenant text;
begin
    v_dim := agentmem_private.check_tenant_index_args(measure_tenant_index.tenant_id, v_model, 'message_embeddings');
    -- Its sample is of this tenant, whoever runs it; the caller's tenant is
    -- given back before returning (as create_tenant_index).
    v_caller_tenant := pg_catalog.current_setting('agentmem.tenant_id', true);
    perform agentmem.set_tenant(tenant_id => measure_tenant_index.tenant_id, local => true);
    if not agentmem_private.has_tenant_index('message_embeddings', measure_tenant_index.tenant_id, v_model)
        or not agentmem_private.has_exact_index('message_embeddings', measure_tenant_index.tenant_id, v_model) then
        raise exception 'tenant % has no valid pair of own indexes of model % to measure',
            measure_tenant_index.tenant_id, v_model
        using
            errcode = 'AM030',
            detail = 'Both its HNSW index and its exact index of message_embeddings must exist and be valid.',
            hint = 'Build them with agentmem.create_tenant_index (which measures them too), or with the two '
            'statements of agentmem.tenant_index_ddl, then measure.';
    end if;
    -- The first pass of a search of the whole tenant, as vector_search runs
    -- it: hnsw.ef_search of a first pass, k = 10 (+ 1 for the sampled row,
    -- which finds itself) and its 20 more rows.
    perform pg_catalog.set_config('hnsw.ef_search', agentmem_private.hnsw_ef_search(
        p_share => 1,
        p_rows => agentmem_private.index_rows(
            agentmem_private.tenant_index_name('message_embeddings', measure_tenant_index.tenant_id, v_model)
        ),
        p_k => v_k, p_shared => false, p_first => true
    )::text, true);
    sampled := 0;
    far := 0;
    for v_embedding in
        select e.embedding from agentmem.message_embeddings as e
        where e.tenant_id = measure_tenant_index.tenant_id and e.model = v_model and e.embedding is not null
        order by pg_catalog.random() limit 32
    loop
        execute pg_catalog.format(
            'select (pg_catalog.array_agg(h.distance order by h.distance))[$2 + 1] '
            'from (select %1$s as distance from agentmem.message_embeddings as e '
            '      where e.tenant_id = %2$L and e.model = %3$L order by %1$s limit $2 + 21) as h',
            agentmem_private.vector_distance(path => 'own index', dimension => v_dim), measure_tenant_index.tenant_id, v_model
        )
        into v_distance
        using v_embedding, v_k;
        sampled := sampled + 1;
        if v_distance is null or v_distance > v_far then
            far := far + 1;
        end if;
    end loop;
    first_pass := case when sampled > 0 and 2 * far >= sampled then 'exact' else 'hnsw' end;
    execute pg_catalog.format(
        'comment on index agentmem.%I is %L',
        agentmem_private.exact_index_name('message_embeddings', measure_tenant_index.tenant_id, v_model),
        pg_catalog.format(
            'agentmem first pass: %s (measured %s: for %s of %s sampled messages the 10th neighbour through the '
            'HNSW index is farther than cosine distance %s)',
            first_pass, pg_catalog.to_char(pg_catalog.now(), 'YYYY-MM-DD'), far, sampled, v_far
        )
    );
    perform pg_catalog.set_config('agentmem.tenant_id', coalesce(v_caller_tenant, ''), true);
    return next;
end
$$;

comment on function agentmem.measure_tenant_index(text, text) is
'Measure how a tenant''s searches should start, and record it on its exact index (its COMMENT).
Up to 32 of the tenant''s messages of the model, sampled at random, are searched for through its HNSW
index as a search''s cheap first pass does (k = 10). Where most come back far (the 10th neighbour farther
than cosine distance 0.5, agentmem.ef_escalate_distance: random-like data, where HNSW needs a slow second
pass), its searches skip that first pass and read the exact index straight away (first_pass ''exact'');
else they keep the first pass (''hnsw''), and read the exact index only when a pass comes back far.
Returns sampled, far and first_pass. agentmem.create_tenant_index runs it; after building the indexes
with the CREATE INDEX CONCURRENTLY statements of agentmem.tenant_index_ddl, run it yourself, and again
when the tenant''s data has changed in kind. A DBA may also write the comment by hand: one beginning
''agentmem first pass: exact'' makes searches read the exact index first.
AM030 when the tenant has no valid HNSW and exact index of message_embeddings for the model; AM002 and
AM011 as for tenant_index_ddl. It samples that tenant''s rows only (no BYPASSRLS needed).
Called by: the DBA (granted to no role).';

create or replace function agentmem.create_tenant_index(
    tenant_id text,
    model text default null,
    table_name text default 'message_embeddings'
) returns text
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_model text;
    v_dim int;
    v_name text;
    v_exact text;
    v_rows bigint;
    v_caller_tenant text;
    v_citus_mode text := pg_catalog.current_setting('citus.multi_shard_modify_mode', true);
begin
    -- On Citus, DDL on a distributed table after a read of a reference table it has a foreign key to
    -- (models, read for the default model and the checks) must go shard by shard in the same
    -- transaction (as in apply_index_upkeep): set before the first read; the caller's mode given back.
    if agentmem.is_distributed() then
        perform pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    end if;
    v_model := coalesce(create_tenant_index.model, agentmem_private.default_model());
    v_dim := agentmem_private.check_tenant_index_args(create_tenant_index.tenant_id, v_model, create_tenant_index.table_name);
    -- Its reads are of this tenant, whoever runs it: a DBA role under
    -- row-level security (no BYPASSRLS) counts the tenant's rows, not none
    -- (AM001) nor those of another tenant set before. set_tenant also hands
    -- it to the workers on Citus. The caller's tenant is given back before
    -- returning. (A SET clause would do it, but a function's SET of a
    -- placeholder setting needs a superuser to create the function.)
    v_caller_tenant := pg_catalog.current_setting('agentmem.tenant_id', true);
    perform agentmem.set_tenant(tenant_id => create_tenant_index.tenant_id, local => true);
    v_name := agentmem_private.tenant_index_name(create_tenant_index.table_name, create_tenant_index.tenant_id, v_model);
    if pg_catalog.to_regclass(pg_catalog.format('agentmem.%I', v_name)) is not null
        and not agentmem_private.has_tenant_index(create_tenant_index.table_name, create_tenant_index.tenant_id, v_model) then
        -- left invalid by a failed concurrent build, or built by an earlier version on another expression
        execute pg_catalog.format('drop index agentmem.%I', v_name);
    end if;
    execute agentmem.tenant_index_ddl(
        tenant_id => create_tenant_index.tenant_id, model => v_model,
        table_name => create_tenant_index.table_name, concurrently => false
    );
    if create_tenant_index.table_name = 'message_embeddings' then
        v_exact := agentmem_private.exact_index_name(create_tenant_index.table_name, create_tenant_index.tenant_id, v_model);
        if pg_catalog.to_regclass(pg_catalog.format('agentmem.%I', v_exact)) is not null
            and not agentmem_private.has_exact_index(create_tenant_index.table_name, create_tenant_index.tenant_id, v_model) then
            execute pg_catalog.format('drop index agentmem.%I', v_exact);
        end if;
        select pg_catalog.count(*) into v_rows from (
            select from agentmem.message_embeddings as e
            where e.tenant_id = create_tenant_index.tenant_id and e.model = v_model
            limit agentmem_private.exact_index_max_rows(v_dim) + 1
        ) as s;
        if v_rows <= agentmem_private.exact_index_max_rows(v_dim) then
            execute agentmem.tenant_index_ddl(
                tenant_id => create_tenant_index.tenant_id, model => v_model,
                table_name => create_tenant_index.table_name, concurrently => false, kind => 'exact'
            );
            perform agentmem.measure_tenant_index(tenant_id => create_tenant_index.tenant_id, model => v_model);
        end if;
    end if;
    perform pg_catalog.set_config('agentmem.tenant_id', coalesce(v_caller_tenant, ''), true);
    if v_citus_mode is not null then
        perform pg_catalog.set_config('citus.multi_shard_modify_mode', v_citus_mode, true);
    end if;
    return v_name;
end
$$;

comment on function agentmem.create_tenant_index(text, text, text) is
'Build a tenant''s own HNSW index inside the current transaction and return its name; the tenant''s searches use it from then on.
The index is partial (where tenant_id = T and model = M): the statement of agentmem.tenant_index_ddl.
For message_embeddings, and a tenant of at most agentmem.exact_index_max_rows rows
of the model, also its exact index (tenant_index_ddl with kind => ''exact''; a second of build for
30,000 rows). Idempotent; an index of that name left invalid, or built by an earlier version on
another expression, is dropped and rebuilt.
A function runs in a transaction, so this is a plain CREATE INDEX: it blocks writes to the table for
the length of the build (measured: docs/tuning.md). Fine for a tenant of some 10,000s of rows; for
bigger ones run the CREATE INDEX CONCURRENTLY of agentmem.tenant_index_ddl from psql instead.
It reads that tenant''s rows only, so the installer may run it without BYPASSRLS (a managed service''s
admin, say); the current tenant is left as it was.
Arguments and errors as for tenant_index_ddl.
Called by: the DBA (granted to no role).';

create or replace function agentmem.drop_tenant_index(
    tenant_id text,
    model text default null,
    table_name text default 'message_embeddings'
) returns boolean
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_model text;
    v_name text;
    v_dropped boolean := false;
    v_citus_mode text := pg_catalog.current_setting('citus.multi_shard_modify_mode', true);
begin
    -- On Citus: shard by shard, as create_tenant_index.
    if agentmem.is_distributed() then
        perform pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    end if;
    v_model := coalesce(drop_tenant_index.model, agentmem_private.default_model());
    perform agentmem_private.check_tenant_index_args(drop_tenant_index.tenant_id, v_model, drop_tenant_index.table_name);
    foreach v_name in array array[
        agentmem_private.tenant_index_name(drop_tenant_index.table_name, drop_tenant_index.tenant_id, v_model),
        agentmem_private.exact_index_name(drop_tenant_index.table_name, drop_tenant_index.tenant_id, v_model)
    ] loop
        if pg_catalog.to_regclass(pg_catalog.format('agentmem.%I', v_name)) is not null then
            execute pg_catalog.format('drop index agentmem.%I', v_name);
            v_dropped := true;
        end if;
    end loop;
    if v_citus_mode is not null then
        perform pg_catalog.set_config('citus.multi_shard_modify_mode', v_citus_mode, true);
    end if;
    return v_dropped;
end
$$;

comment on function agentmem.drop_tenant_index(text, text, text) is
'Drop a tenant''s own indexes of one table and model; its searches go back to the model''s shared index.
Both its HNSW index and its exact index, valid or left invalid by a failed concurrent build.
Returns false
when there was none. Erasing a tenant''s rows does not need it (an index of an erased tenant is empty);
drop it to reclaim its space.
Arguments and errors as for tenant_index_ddl.
Called by: the DBA (granted to no role).';

create or replace function agentmem_private.tenant_sizes()
returns table (table_name text, tenant_id text, model text, row_count bigint)
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    -- Checked before the counts are planned: for a role under row-level
    -- security the planner already evaluates current_tenant() (AM001 when no
    -- tenant is set), and with one set the counts would be that tenant's.
    perform agentmem_private.check_sees_every_tenant(
        'agentmem.tenants_needing_index', 'it would count one tenant''s rows at most',
        'Run it as a superuser or a role with BYPASSRLS (the installer, usually).'
    );
    return query
    select
        'message_embeddings'::text,
        e.tenant_id,
        e.model,
        pg_catalog.count(*)
    from agentmem.message_embeddings as e
    group by e.tenant_id, e.model
    union all
    select
        'facts',
        f.tenant_id,
        f.model,
        pg_catalog.count(*)
    from agentmem.facts as f
    group by f.tenant_id, f.model
    union all
    select
        'cache_entries',
        c.tenant_id,
        c.model,
        pg_catalog.count(*)
    from agentmem.cache_entries as c
    group by c.tenant_id, c.model;
end
$$;

comment on function agentmem_private.tenant_sizes() is
'Internal: the rows of each tenant and model in each embedding table (message_embeddings, facts,
cache_entries), for agentmem.tenants_needing_index; AM041 for a role that does not see every tenant
(agentmem_private.check_sees_every_tenant).';

create or replace function agentmem_private.tenant_index_min_rows(p_dim int)
returns bigint
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select coalesce(
        nullif(pg_catalog.current_setting('agentmem.tenant_index_min_rows', true), '')::bigint,
        agentmem_private.exact_search_max_rows(p_dim)
    )
$$;

comment on function agentmem_private.tenant_index_min_rows(int) is
'Internal: the rows of one table and model past which a tenant should have its own indexes: the setting
agentmem.tenant_index_min_rows when set, else agentmem.exact_search_max_rows (a search scans fewer exactly).';

-- Read through a function: on Citus the workers run parts of it, and the
-- function first sends them the pinned search_path (agentmem_private.pin_worker_path),
-- which a plain view cannot.
create or replace function agentmem_private.tenants_needing_index_rows()
returns table (
    table_name text,
    tenant_id text,
    model text,
    row_count bigint,
    create_statement text,
    index_kind text
)
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
begin
    perform agentmem_private.pin_worker_path();
    return query
        with
        -- materialized: on a Citus cluster the counts are a distributed query, and the rest (the
        -- DDL each row calls for) runs on the coordinator, never inside a shard's query
        sizes as materialized (
            select
                t.table_name,
                t.tenant_id,
                t.model,
                t.row_count
            from agentmem_private.tenant_sizes() as t
        )

        -- index_kind last: a view's columns are only ever added at the end
        select  -- noqa: ST06
            s.table_name,
            s.tenant_id,
            s.model,
            s.row_count,
            case k.kind
                when 'measure'
                    then
                        pg_catalog.format(
                            'select * from agentmem.measure_tenant_index(tenant_id => %L, model => %L)', s.tenant_id, s.model
                        )
                else agentmem.tenant_index_ddl(
                    tenant_id => s.tenant_id, model => s.model, table_name => s.table_name, kind => k.kind
                )
            end as create_statement,
            k.kind as index_kind
        from sizes as s
        inner join agentmem.models as m on s.model = m.model
        cross join (values ('hnsw'), ('exact'), ('measure')) as k (kind)
        where
            s.row_count > agentmem_private.tenant_index_min_rows(m.dimension)
            and case k.kind
                when 'hnsw' then not agentmem_private.has_tenant_index(s.table_name, s.tenant_id, s.model)
                when 'exact'
                    then
                        s.table_name = 'message_embeddings'
                        and s.row_count <= agentmem_private.exact_index_max_rows(m.dimension)
                        and not agentmem_private.has_exact_index(s.table_name, s.tenant_id, s.model)
                else
                    -- both indexes built (by hand, with the concurrent statements) but never measured
                    s.table_name = 'message_embeddings'
                    and s.row_count <= agentmem_private.exact_index_max_rows(m.dimension)
                    and agentmem_private.has_tenant_index(s.table_name, s.tenant_id, s.model)
                    and agentmem_private.has_exact_index(s.table_name, s.tenant_id, s.model)
                    and agentmem_private.exact_index_first_pass(s.table_name, s.tenant_id, s.model) is null
            end
        order by s.row_count desc, s.table_name asc, s.tenant_id asc, s.model asc, k.kind desc;
end
$$;

comment on function agentmem_private.tenants_needing_index_rows() is
'Internal: the rows of the view agentmem.tenants_needing_index.';

create or replace view agentmem.tenants_needing_index
with (security_invoker = true) as
select
    r.table_name,
    r.tenant_id,
    r.model,
    r.row_count,
    r.create_statement,
    r.index_kind
from agentmem_private.tenants_needing_index_rows() as r;

comment on view agentmem.tenants_needing_index is
'Tenants holding more rows of one table and model than a search scans exactly (setting
agentmem.tenant_index_min_rows, by default agentmem.exact_search_max_rows: 6,000 rows) without their own
indexes, biggest first: a row per missing index (index_kind ''hnsw''; for message_embeddings of at most
agentmem.exact_index_max_rows rows also ''exact''), with the CREATE INDEX CONCURRENTLY to run for it
(create_statement); and, once both are built, index_kind ''measure'' until the tenant is measured, with
the call of agentmem.measure_tenant_index to run.
Counts every row: a scan of the three embedding tables, meant for the DBA now and then, as a role that
sees every tenant (a superuser or BYPASSRLS; AM041 for any other).';

create or replace function agentmem_private.tenant_index_list()
returns table (
    table_name text,
    tenant_id text,
    model text,
    index_kind text,
    index_name text,
    is_valid boolean,
    size_bytes bigint,
    first_pass text,
    tenant_rows bigint,
    needed boolean,
    drop_statement text
)
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_caller_tenant text := pg_catalog.current_setting('agentmem.tenant_id', true);
    v_distributed boolean := agentmem.is_distributed();
    v_index record;
    v_match text[];
    v_dim int;
    v_counted text[];
begin
    -- A tenant's own index is found by its deterministic name and read back
    -- from its predicate (where tenant_id = T and model = M, as tenant_index_ddl
    -- writes it); an index whose predicate does not give back its own name is
    -- not one of them (a DBA's own partial index, say) and is left out.
    for v_index in
        select
            t.relname::text as table_name,
            c.relname::text as index_name,
            c.oid as index_oid,
            i.indisvalid and i.indisready as is_valid,
            pg_catalog.pg_get_expr(i.indpred, i.indrelid) as predicate
        from pg_catalog.pg_index as i
        inner join pg_catalog.pg_class as c on i.indexrelid = c.oid
        inner join pg_catalog.pg_class as t on i.indrelid = t.oid
        where
            c.relnamespace = 'agentmem'::regnamespace
            and t.relname in ('message_embeddings', 'facts', 'cache_entries')
            and c.relname ~ '_t[0-9a-f]{16}_(hnsw|exact)$'
        order by 1, 2
    loop
        v_match := pg_catalog.regexp_match(
            v_index.predicate,
            '^\(\(tenant_id = ''((?:[^'']|'''')*)''::text\) AND \(model = ''((?:[^'']|'''')*)''::text\)\)$'
        );
        continue when v_match is null;
        table_name := v_index.table_name;
        tenant_id := pg_catalog.replace(v_match[1], '''''', '''');
        model := pg_catalog.replace(v_match[2], '''''', '''');
        index_kind := case when v_index.index_name like '%\_hnsw' then 'hnsw' else 'exact' end;
        continue when v_index.index_name <> case index_kind
            when 'hnsw' then agentmem_private.tenant_index_name(table_name, tenant_id, model)
            else agentmem_private.exact_index_name(table_name, tenant_id, model)
        end;
        index_name := v_index.index_name;
        is_valid := v_index.is_valid;
        -- on Citus the coordinator's index is empty: its shards hold the rows
        size_bytes := case when not v_distributed then pg_catalog.pg_relation_size(v_index.index_oid) end;
        first_pass := case
            when index_kind = 'exact' then agentmem_private.exact_index_first_pass(table_name, tenant_id, model)
        end;
        -- The tenant's rows of the table and model, whoever runs it: a DBA under
        -- row-level security counts them with the tenant set (as
        -- create_tenant_index); the caller's tenant is given back at the end.
        -- Counted once for a tenant's two indexes (their names sort together).
        if v_counted is distinct from array[table_name, tenant_id, model] then
            perform agentmem.set_tenant(tenant_id => tenant_id, local => true);
            execute pg_catalog.format(
                'select pg_catalog.count(*) from agentmem.%I as e where e.tenant_id = $1 and e.model = $2', table_name
            )
            into tenant_rows
            using tenant_id, model;
            v_counted := array[table_name, tenant_id, model];
            select m.dimension into v_dim from agentmem.models as m where m.model = tenant_index_list.model;
        end if;
        needed := is_valid and v_dim is not null
            and tenant_rows > agentmem_private.tenant_index_min_rows(v_dim)
            and (index_kind = 'hnsw' or tenant_rows <= agentmem_private.exact_index_max_rows(v_dim));
        drop_statement := case
            when not needed then pg_catalog.format('drop index concurrently if exists agentmem.%I', index_name)
        end;
        return next;
    end loop;
    perform pg_catalog.set_config('agentmem.tenant_id', coalesce(v_caller_tenant, ''), true);
end
$$;

comment on function agentmem_private.tenant_index_list() is
'Internal: every tenant''s own index, for agentmem.tenant_indexes, with the tenant''s rows counted under
its own tenant (so that a DBA without BYPASSRLS counts them too).';

-- Read through a function: on Citus the workers run parts of it, and the
-- function first sends them the pinned search_path (agentmem_private.pin_worker_path),
-- which a plain view cannot.
create or replace function agentmem_private.tenant_indexes_rows()
returns table (
    table_name text,
    tenant_id text,
    model text,
    index_kind text,
    index_name text,
    is_valid boolean,
    size_bytes bigint,
    first_pass text,
    tenant_rows bigint,
    needed boolean,
    drop_statement text
)
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
begin
    perform agentmem_private.pin_worker_path();
    return query
        select
            l.table_name,
            l.tenant_id,
            l.model,
            l.index_kind,
            l.index_name,
            l.is_valid,
            l.size_bytes,
            l.first_pass,
            l.tenant_rows,
            l.needed,
            l.drop_statement
        from agentmem_private.tenant_index_list() as l
        order by l.needed asc, l.tenant_rows desc, l.table_name asc, l.tenant_id asc, l.model asc, l.index_kind asc;
end
$$;

comment on function agentmem_private.tenant_indexes_rows() is
'Internal: the rows of the view agentmem.tenant_indexes.';

create or replace view agentmem.tenant_indexes
with (security_invoker = true) as
select
    r.table_name,
    r.tenant_id,
    r.model,
    r.index_kind,
    r.index_name,
    r.is_valid,
    r.size_bytes,
    r.first_pass,
    r.tenant_rows,
    r.needed,
    r.drop_statement
from agentmem_private.tenant_indexes_rows() as r;

comment on view agentmem.tenant_indexes is
'Every tenant''s own index (built by agentmem.create_tenant_index or by the statements of
agentmem.tenants_needing_index), what it costs and whether searches still use it, those to drop first.
Each row: table_name, tenant_id, model; index_kind ''hnsw'' or ''exact''; index_name; is_valid (false:
left by a failed CREATE INDEX CONCURRENTLY, ignored by searches); size_bytes (NULL on Citus, whose
shards hold it); first_pass (an exact index''s, as agentmem.measure_tenant_index recorded it);
tenant_rows (the tenant''s rows of that table and model now); needed (valid, and the tenant still past
agentmem.tenant_index_min_rows, an exact index also within agentmem.exact_index_max_rows: else searches
ignore it); drop_statement (when not needed: the DROP INDEX CONCURRENTLY to run from psql).
An index no search uses still costs every write to its table (docs/tuning.md): an erased tenant''s,
say, or one whose tenant retention shrank. Counts each listed tenant''s rows under that tenant (no
BYPASSRLS needed). For the DBA; not granted to agentmem_app.';
