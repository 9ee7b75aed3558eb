-- The model registry's functions and the embedding checks every table shares.

-- pgvector's objects, named with its schema. agentmem's functions pin the path
-- pg_catalog, agentmem, pg_temp and never the extension's schema (often public):
-- a schema others may write would let them plant an exact-type overload (a
-- function or an operator) that beats pg_catalog's, and the definer functions
-- (and the DBA's) would run it (CVE-2018-1058). So every reference to
-- pgvector's types, functions and operators inside a function is qualified
-- with the schema read here, and the three calls the checks need are wrappers
-- generated below with the schema written in.
create or replace function agentmem_private.vector_schema()
returns text
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select n.nspname::text
    from pg_catalog.pg_extension as e
    inner join pg_catalog.pg_namespace as n on e.extnamespace = n.oid
    where e.extname = 'vector'
$$;

comment on function agentmem_private.vector_schema() is
'Internal: the schema pgvector is installed in, with which agentmem''s functions qualify its types,
functions and operators (it is not on their search_path).';

create or replace function agentmem_private.vector_type()
returns regtype
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select pg_catalog.to_regtype(pg_catalog.format('%I.vector', agentmem_private.vector_schema()))
$$;

comment on function agentmem_private.vector_type() is
'Internal: pgvector''s type vector (the type of every embedding column).';

do $vector$
begin
    execute pg_catalog.format($f$
        create or replace function agentmem_private.vector_dims(p_vector %1$I.vector)
        returns int
        language sql
        immutable
        strict
        security invoker
        set search_path = pg_catalog, agentmem, pg_temp
        as 'select %1$I.vector_dims(p_vector)'
    $f$, agentmem_private.vector_schema());
    execute pg_catalog.format($f$
        create or replace function agentmem_private.vector_norm(p_vector %1$I.vector)
        returns double precision
        language sql
        immutable
        strict
        security invoker
        set search_path = pg_catalog, agentmem, pg_temp
        as 'select %1$I.vector_norm(p_vector)'
    $f$, agentmem_private.vector_schema());
    execute pg_catalog.format($f$
        create or replace function agentmem_private.cosine_distance(p_a %1$I.vector, p_b %1$I.vector)
        returns double precision
        language sql
        immutable
        strict
        security invoker
        set search_path = pg_catalog, agentmem, pg_temp
        as 'select p_a operator(%1$I.<=>) p_b'
    $f$, agentmem_private.vector_schema());
end
$vector$;

comment on function agentmem_private.vector_dims(vector) is
'Internal: pgvector''s vector_dims, qualified with its schema (generated on every install).';
comment on function agentmem_private.vector_norm(vector) is
'Internal: pgvector''s vector_norm, qualified with its schema (generated on every install).';
comment on function agentmem_private.cosine_distance(vector, vector) is
'Internal: pgvector''s cosine distance (operator <=>), qualified with its schema (generated on every install).';

create or replace function agentmem_private.model_index_name(p_table text, p_model text)
returns text
language sql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select pg_catalog.left(p_table || '_' || pg_catalog.regexp_replace(pg_catalog.lower(p_model), '[^a-z0-9]+', '_', 'g'), 50)
        || '_' || pg_catalog.left(pg_catalog.md5(p_model), 6) || '_hnsw'
$$;

comment on function agentmem_private.model_index_name(text, text) is
'Internal: the name of the per-model HNSW index of one table.';

create or replace function agentmem_private.ensure_model_indexes(p_model text)
returns int
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_dim int;
    v_table text;
    v_made int := 0;
begin
    select dimension into v_dim from agentmem.models where model = p_model;
    for v_table in
        select c.relname
        from pg_catalog.pg_class as c
        where
            c.relnamespace = 'agentmem'::regnamespace and c.relkind = 'r'
            and exists (
                select from pg_catalog.pg_attribute as a
                where a.attrelid = c.oid and a.attname = 'embedding' and not a.attisdropped
                    and a.atttypid = agentmem_private.vector_type()
            )
            and exists (
                select from pg_catalog.pg_attribute as a
                where a.attrelid = c.oid and a.attname = 'model' and not a.attisdropped
            )
        order by c.relname
    loop
        if pg_catalog.to_regclass(pg_catalog.format('agentmem.%I', agentmem_private.model_index_name(v_table, p_model))) is null then
            execute pg_catalog.format(
                'create index %I on agentmem.%I using hnsw ((embedding::%I.vector(%s)) %I.vector_cosine_ops) '
                'where model = %L',
                agentmem_private.model_index_name(v_table, p_model), v_table, agentmem_private.vector_schema(), v_dim,
                agentmem_private.vector_schema(), p_model
            );
            v_made := v_made + 1;
        end if;
    end loop;
    return v_made;
end
$$;

comment on function agentmem_private.ensure_model_indexes(text) is
'Internal: create the missing per-model HNSW indexes (cosine, partial on model) of every agentmem table '
'that has model and embedding columns. Returns how many it created.';

create or replace function agentmem.register_model(
    model text,
    dimension int,
    document_prefix text default '',
    query_prefix text default ''
) returns agentmem.models
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_row agentmem.models;
begin
    if model is null or model !~ '^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$' then
        raise exception 'model name is not acceptable: %', coalesce(model, 'NULL')
        using
            errcode = 'AM020',
            hint = 'Use the name the embedding service knows the model by, e.g. nomic-embed-text.';
    end if;
    if dimension is null or dimension not between 1 and 2000 then
        raise exception 'dimension must be between 1 and 2000, got %', coalesce(dimension::text, 'NULL')
        using
            errcode = 'AM020',
            detail = 'pgvector''s HNSW index on type vector supports up to 2,000 dimensions.';
    end if;
    if pg_catalog.length(document_prefix) > 1000 or pg_catalog.length(query_prefix) > 1000 then
        raise exception 'document_prefix and query_prefix are limited to 1000 characters'
        using errcode = 'AM021', hint = 'A prefix is a short instruction such as ''search_document: ''.';
    end if;
    select * into v_row from agentmem.models as m where m.model = register_model.model;
    if found and v_row.dimension <> register_model.dimension then
        raise exception 'model % is registered with % dimensions, not %', model, v_row.dimension, dimension
        using
            errcode = 'AM031',
            hint = 'Register the new version under another name and re-embed into it.';
    end if;
    insert into agentmem.models as m (model, dimension, document_prefix, query_prefix)
    values (
        register_model.model, register_model.dimension,
        coalesce(register_model.document_prefix, ''), coalesce(register_model.query_prefix, '')
    )
    on conflict on constraint models_pkey do update
        set document_prefix = excluded.document_prefix, query_prefix = excluded.query_prefix
    returning * into v_row;
    perform agentmem_private.ensure_model_indexes(v_row.model);
    return v_row;
end
$$;

comment on function agentmem.register_model(text, int, text, text) is
'Register an embedding model (or update its prefixes) and build its HNSW indexes.
model: 1 to 100 characters of [A-Za-z0-9._:/-] (AM020); dimension 1 to 2,000 (AM020); each prefix at
most 1,000 characters (AM021). Two models may coexist while a store is re-embedded: each has its own partial
HNSW index per table.
Called by: the DBA (granted to no role).';

create or replace function agentmem.get_model(model text)
returns agentmem.models
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_row agentmem.models;
begin
    select * into v_row from agentmem.models as m where m.model = get_model.model;
    if not found then
        raise exception 'unknown embedding model: %', coalesce(pg_catalog.left(model, 100), 'NULL')
        using
            errcode = 'AM011',
            detail = 'Registered models: ' || (select pg_catalog.string_agg(m.model, ', ' order by m.model) from agentmem.models as m),
            hint = 'A DBA registers it with agentmem.register_model(model => ..., dimension => ...).';
    end if;
    return v_row;
end
$$;

comment on function agentmem.get_model(text) is
'The registry entry of one embedding model: dimension and document/query prefixes.
Raises AM011 for a model that is not registered (model names have at most 100 characters).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem_private.check_embedding_of(p_model text, p_dim int, p_embedding vector)
returns int
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_dim int := p_dim;
    v_norm2 double precision;
begin
    if p_embedding is null then
        raise exception 'embedding is missing'
        using errcode = 'AM010', hint = 'Pass the embedding of the text, made with model ' || p_model || '.';
    end if;
    if agentmem_private.vector_dims(p_embedding) <> v_dim then
        raise exception 'embedding has % dimensions; model % has %', agentmem_private.vector_dims(p_embedding), p_model, v_dim
        using
            errcode = 'AM010',
            hint = 'Embed with the model named in the call, or name the model the vector came from.';
    end if;
    -- pgvector compares in float32: a squared norm under FLT_MIN (zero or
    -- subnormal) or over FLT_MAX (not finite) makes cosine similarity NaN or a
    -- meaningless +/-1. vector_norm adds in double, so it sees both.
    v_norm2 := agentmem_private.vector_norm(p_embedding) ^ 2::float8;
    if v_norm2 = 0::float8 then
        raise exception 'embedding is the zero vector'
        using
            errcode = 'AM010',
            detail = 'Cosine similarity is undefined for a zero vector.',
            hint = 'Check the embedding service: it returned no signal for this text.';
    end if;
    if v_norm2 < 1.1754943508222875e-38::float8 or v_norm2 > 3.4028234663852886e38::float8 or v_norm2 = 'NaN' then
        raise exception 'embedding has a norm of %: zero, subnormal or not finite in float32', agentmem_private.vector_norm(p_embedding)
        using
            errcode = 'AM010',
            detail = 'pgvector computes cosine similarity in float32, where this norm gives NaN or a clamped 1.',
            hint = 'Normalise the embedding, or check the embedding service''s output.';
    end if;
    return v_dim;
end
$$;

comment on function agentmem_private.check_embedding_of(text, int, vector) is
'Internal: check_embedding for a model already looked up (p_dim its dimension): what a batch calls for
each of its vectors after one look-up of the model (on Citus each look-up of the reference table
models is a distributed query of its own).';

-- PL/pgSQL, not SQL: an SQL function with a SET clause is planned at every
-- call; this one keeps its plans for the session.
create or replace function agentmem_private.check_embedding(p_model text, p_embedding vector)
returns int
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    return agentmem_private.check_embedding_of(p_model, (agentmem.get_model(p_model)).dimension, p_embedding);
end
$$;

comment on function agentmem_private.check_embedding(text, vector) is
'Internal: raise AM011 for an unknown model, AM010 for a missing or wrong-dimension embedding or one '
'whose norm is zero, subnormal or not finite in float32 (squared norm outside [FLT_MIN, FLT_MAX]); '
'return the model''s dimension. Every function that takes a vector calls it. NaN and infinite '
'components never get here: pgvector refuses them on input (SQLSTATE 22000).';

create or replace function agentmem_private.default_model()
returns text
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select coalesce(
        -- Read only with a tenant set: row-level security needs one.
        case when nullif(pg_catalog.current_setting('agentmem.tenant_id', true), '') is not null then (
            select s.default_model from agentmem.tenant_settings as s
            where s.tenant_id = pg_catalog.current_setting('agentmem.tenant_id', true)
        ) end,
        nullif(pg_catalog.current_setting('agentmem.default_model', true), ''),
        'nomic-embed-text'
    )
$$;

comment on function agentmem_private.default_model() is
'Internal: the model a call uses when it names none: the current tenant''s (agentmem.switch_default_model),
else setting agentmem.default_model, else nomic-embed-text.';
