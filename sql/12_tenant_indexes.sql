-- Per-tenant HNSW indexes: a big tenant's own partial index (where tenant_id = T
-- and model = M), so that its searches are no longer a filtered slice of the
-- model's shared index. Built by the DBA; found by searches through a
-- deterministic name in pg_class (no catalogue table to keep in step with DDL
-- the DBA may run by hand, e.g. CREATE INDEX CONCURRENTLY). Figures behind the
-- defaults: README, "Tuning".

create or replace function agentmem_private.exact_search_max_rows(p_dim int)
returns int
language sql
stable
security invoker
set search_path from current
as $$
    -- An exact scan costs rows x dimension; 4,608,000 is 6,000 rows of 768
    -- dimensions, where an exact scan of random vectors cost what the
    -- tenant's own HNSW index cost at recall@10 >= 0.95 (README, "Tuning").
    select coalesce(
        nullif(pg_catalog.current_setting('agentmem.exact_search_max_rows', true), '')::int,
        greatest(100, 4608000 / greatest(p_dim, 1))
    )
$$;

comment on function agentmem_private.exact_search_max_rows(int) is
'Internal: how many candidate rows a vector search scans exactly before it turns to an HNSW index:
the setting agentmem.exact_search_max_rows when set, else 4,608,000 / dimension (6,000 rows at 768
dimensions, 12,000 at 384), the measured point where an exact scan stops being cheaper than an index
scan of the same recall (README, "Tuning").';

create or replace function agentmem_private.embedding_tables()
returns setof text
language sql
stable
security invoker
set search_path from current
as $$
    select c.relname::text
    from pg_catalog.pg_class as c
    where
        c.relnamespace = 'agentmem'::regnamespace and c.relkind = 'r'
        and exists (
            select from pg_catalog.pg_attribute as a
            where
                a.attrelid = c.oid and a.attname = 'embedding' and not a.attisdropped
                and a.atttypid = 'vector'::regtype
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

create or replace function agentmem_private.tenant_index_name(p_table text, p_tenant text, p_model text)
returns text
language sql
immutable
security invoker
set search_path from current
as $$
    -- model names cannot contain '|', so tenant|model is unambiguous
    select p_table || '_t' || left(md5(p_tenant || '|' || p_model), 16) || '_hnsw'
$$;

comment on function agentmem_private.tenant_index_name(text, text, text) is
'Internal: the deterministic name of a tenant''s own HNSW index on one table for one model
(table_t<16 hex digits of md5(tenant|model)>_hnsw): searches look it up in pg_class.';

create or replace function agentmem_private.has_tenant_index(p_table text, p_tenant text, p_model text)
returns boolean
language sql
stable
security invoker
set search_path from current
as $$
    select coalesce((
        select i.indisvalid and i.indisready
        from pg_catalog.pg_index as i
        where i.indexrelid = pg_catalog.to_regclass(
            pg_catalog.format('agentmem.%I', agentmem_private.tenant_index_name(p_table, p_tenant, p_model))
        )
    ), false)
$$;

comment on function agentmem_private.has_tenant_index(text, text, text) is
'Internal: whether the tenant''s own HNSW index of this table and model exists and is valid
(an interrupted CREATE INDEX CONCURRENTLY leaves an invalid one, which searches ignore).';

create or replace function agentmem_private.check_tenant_index_args(
    p_tenant text, p_model text, p_table text
) returns int
language plpgsql
stable
security invoker
set search_path from current
as $$
begin
    if p_tenant is null or p_tenant = '' or length(p_tenant) > 128 then
        raise exception 'tenant_id must be a non-empty text of at most 128 characters'
        using errcode = 'AM002', hint = 'Pass the id of the tenant the index is for.';
    end if;
    if p_table is null or p_table not in (select t from agentmem_private.embedding_tables() as t) then
        raise exception 'table_name is not an agentmem table with embeddings: %', coalesce(p_table, 'NULL')
        using
            errcode = 'AM020',
            detail = 'Tables with embeddings: '
            || (select string_agg(t, ', ') from agentmem_private.embedding_tables() as t),
            hint = 'message_embeddings (search_messages), facts (recall_facts) or cache_entries (cache_lookup).';
    end if;
    return (agentmem.get_model(p_model)).dimension;
end
$$;

comment on function agentmem_private.check_tenant_index_args(text, text, text) is
'Internal: check the arguments of the tenant-index functions (AM002, AM020, AM011); return the model''s dimension.';

create or replace function agentmem.tenant_index_ddl(
    tenant_id text,
    model text default null,
    table_name text default 'message_embeddings',
    concurrently boolean default true
) returns text
language plpgsql
stable
security invoker
set search_path from current
as $$
declare
    v_model text := coalesce(tenant_index_ddl.model, agentmem_private.default_model());
    v_dim int := agentmem_private.check_tenant_index_args(tenant_index_ddl.tenant_id, v_model, tenant_index_ddl.table_name);
begin
    return pg_catalog.format(
        'create index %sif not exists %I on agentmem.%I using hnsw ((embedding::vector(%s)) vector_cosine_ops) '
        'where tenant_id = %L and model = %L',
        case when coalesce(tenant_index_ddl.concurrently, true) then 'concurrently ' else '' end,
        agentmem_private.tenant_index_name(tenant_index_ddl.table_name, tenant_index_ddl.tenant_id, v_model),
        tenant_index_ddl.table_name, v_dim, tenant_index_ddl.tenant_id, v_model
    );
end
$$;

comment on function agentmem.tenant_index_ddl(text, text, text, boolean) is
'The statement that builds a tenant''s own HNSW index (partial: where tenant_id = T and model = M), for
the DBA to run. With concurrently (the default) it is CREATE INDEX CONCURRENTLY, which does not block
writes but cannot run inside a transaction or a function: run it from psql. Searches use the index
once it is valid; should the build fail, drop the invalid index with agentmem.drop_tenant_index.
table_name: message_embeddings (default), facts or cache_entries (AM020 otherwise); AM011 for an
unknown model; AM002 for an empty tenant id. For the DBA; not granted to agentmem_app.';

create or replace function agentmem.create_tenant_index(
    tenant_id text,
    model text default null,
    table_name text default 'message_embeddings'
) returns text
language plpgsql
volatile
security invoker
set search_path from current
as $$
declare
    v_model text := coalesce(create_tenant_index.model, agentmem_private.default_model());
    v_name text;
begin
    perform agentmem_private.check_tenant_index_args(create_tenant_index.tenant_id, v_model, create_tenant_index.table_name);
    v_name := agentmem_private.tenant_index_name(create_tenant_index.table_name, create_tenant_index.tenant_id, v_model);
    if to_regclass(pg_catalog.format('agentmem.%I', v_name)) is not null
        and not agentmem_private.has_tenant_index(create_tenant_index.table_name, create_tenant_index.tenant_id, v_model) then
        execute pg_catalog.format('drop index agentmem.%I', v_name);   -- left invalid by a failed concurrent build
    end if;
    execute agentmem.tenant_index_ddl(
        tenant_id => create_tenant_index.tenant_id, model => v_model,
        table_name => create_tenant_index.table_name, concurrently => false
    );
    return v_name;
end
$$;

comment on function agentmem.create_tenant_index(text, text, text) is
'Build a tenant''s own HNSW index (partial: where tenant_id = T and model = M) inside the current
transaction, and return its name; searches of that tenant use it from then on. Idempotent.
A function runs in a transaction, so this is a plain CREATE INDEX: it blocks writes to the table for
the length of the build (measured: README, "Tuning"). Fine for a tenant of some 10,000s of rows; for
bigger ones run the CREATE INDEX CONCURRENTLY of agentmem.tenant_index_ddl from psql instead.
Arguments and errors as for tenant_index_ddl. For the DBA; not granted to agentmem_app.';

create or replace function agentmem.drop_tenant_index(
    tenant_id text,
    model text default null,
    table_name text default 'message_embeddings'
) returns boolean
language plpgsql
volatile
security invoker
set search_path from current
as $$
declare
    v_model text := coalesce(drop_tenant_index.model, agentmem_private.default_model());
    v_name text;
begin
    perform agentmem_private.check_tenant_index_args(drop_tenant_index.tenant_id, v_model, drop_tenant_index.table_name);
    v_name := agentmem_private.tenant_index_name(drop_tenant_index.table_name, drop_tenant_index.tenant_id, v_model);
    if to_regclass(pg_catalog.format('agentmem.%I', v_name)) is null then
        return false;
    end if;
    execute pg_catalog.format('drop index agentmem.%I', v_name);
    return true;
end
$$;

comment on function agentmem.drop_tenant_index(text, text, text) is
'Drop a tenant''s own HNSW index (valid or left invalid by a failed concurrent build); its searches go
back to the model''s shared index. Returns false when there was none. Erasing a tenant''s rows does not
need it (an index of an erased tenant is empty); drop it to reclaim its space.
Arguments and errors as for tenant_index_ddl. For the DBA; not granted to agentmem_app.';

create or replace view agentmem.tenants_needing_index
with (security_invoker = true) as
with
sizes as (
    select
        'message_embeddings'::text as table_name,
        e.tenant_id,
        e.model,
        count(*) as row_count
    from agentmem.message_embeddings as e
    group by e.tenant_id, e.model
    union all
    select
        'facts' as table_name,
        f.tenant_id,
        f.model,
        count(*) as row_count
    from agentmem.facts as f
    group by f.tenant_id, f.model
    union all
    select
        'cache_entries' as table_name,
        c.tenant_id,
        c.model,
        count(*) as row_count
    from agentmem.cache_entries as c
    group by c.tenant_id, c.model
)

select
    s.table_name,
    s.tenant_id,
    s.model,
    s.row_count,
    agentmem.tenant_index_ddl(
        tenant_id => s.tenant_id, model => s.model, table_name => s.table_name
    ) as create_statement
from sizes as s
inner join agentmem.models as m on s.model = m.model
where
    s.row_count > coalesce(
        nullif(pg_catalog.current_setting('agentmem.tenant_index_min_rows', true), '')::bigint,
        agentmem_private.exact_search_max_rows(m.dimension)
    )
    and not agentmem_private.has_tenant_index(s.table_name, s.tenant_id, s.model)
order by s.row_count desc;

comment on view agentmem.tenants_needing_index is
'Tenants holding more rows of one table and model than a search scans exactly (setting
agentmem.tenant_index_min_rows, by default agentmem.exact_search_max_rows: 6,000 rows at 768
dimensions, 12,000 at 384) without an index of their own, biggest first, with the CREATE INDEX
CONCURRENTLY to run for each. Counts every row: a scan of the three embedding tables, meant for the DBA now and then.';
