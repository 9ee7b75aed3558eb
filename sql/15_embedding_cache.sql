-- The embedding cache: embeddings already computed, keyed by (model, sha256 of
-- the exact text embedded). Many texts per call in both directions, so a
-- re-index asks once and embeds only the misses. Tenant-scoped (see the table).

create or replace function agentmem_private.cache_check_texts(p_texts text[])
returns int
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_n int := agentmem_private.check_array('texts', p_texts, 10000);
    v_big int;
begin
    if v_n not between 1 and 10000 then
        raise exception 'texts must hold 1 to 10000 texts, got %', v_n
        using errcode = 'AM020', hint = 'Split a larger batch into several calls.';
    end if;
    if pg_catalog.array_position(p_texts, null) is not null then
        raise exception 'texts[%] is NULL', pg_catalog.array_position(p_texts, null)
        using errcode = 'AM020';
    end if;
    select u.ord into v_big
    from pg_catalog.unnest(p_texts) with ordinality as u (txt, ord)
    where pg_catalog.octet_length(u.txt) > 4194304
    limit 1;
    if v_big is not null then
        raise exception 'texts[%] is % bytes; the limit is 4 MiB', v_big, pg_catalog.octet_length(p_texts[v_big])
        using errcode = 'AM021', hint = 'No embedding model reads texts that long; embed a shorter text.';
    end if;
    return v_n;
end
$$;

comment on function agentmem_private.cache_check_texts(text[]) is
'Internal: AM020 unless texts is a one-dimensional array (lower bound 1) of 1 to 10,000 non-NULL texts,
AM021 for a text over 4 MiB; returns its length.';

create or replace function agentmem.embedding_cache_lookup(
    model text,
    texts text[]
) returns table (ord int, embedding vector)
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_model text := coalesce(embedding_cache_lookup.model, agentmem_private.default_model());
begin
    perform agentmem_private.cache_check_texts(embedding_cache_lookup.texts);
    perform agentmem.get_model(v_model);
    -- One primary-key probe per text (a scalar subquery), whatever the
    -- statistics say: a join planned on stale statistics (a cache filled a
    -- moment ago, before autoanalyze) became a nested loop recomputing sha256
    -- for every pair, 13 s for 5,000 texts instead of 30 ms.
    return query
    select
        t.ord::int,
        (
            select c.cached_vector
            from agentmem.embedding_cache as c
            where c.tenant_id = v_tenant and c.model = v_model and c.text_sha256 = t.sha
        )
    from (
        select u.ord, pg_catalog.sha256(pg_catalog.convert_to(u.txt, 'UTF8')) as sha
        from pg_catalog.unnest(embedding_cache_lookup.texts) with ordinality as u (txt, ord)
    ) as t
    order by t.ord;
end
$$;

comment on function agentmem.embedding_cache_lookup(text, text[]) is
'Look up many texts in the embedding cache of the current tenant at once.
One row per text, in order: ord (1-based position in texts) and the cached embedding, NULL for a miss.
Texts are matched exactly (sha256 of their UTF-8 bytes), so pass them with the model''s prefix if
they were embedded with it. texts: 1 to 10,000 non-NULL texts, a one-dimensional array from index 1
(AM020), each at most 4 MiB (AM021); AM011 for an unknown model
(default: agentmem_private.default_model()).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.embedding_cache_store(
    model text,
    texts text[],
    embeddings vector[]
) returns int
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_model text := coalesce(embedding_cache_store.model, agentmem_private.default_model());
    v_n int := agentmem_private.cache_check_texts(embedding_cache_store.texts);
    v_vector_schema text := agentmem_private.vector_schema();
    v_stored int := 0;
    v_new int;
    v_dim int;
begin
    if agentmem_private.check_array('embeddings', embedding_cache_store.embeddings, 10000) <> v_n then
        raise exception 'texts and embeddings must be arrays of the same length (% and %)',
            v_n, coalesce(pg_catalog.cardinality(embedding_cache_store.embeddings), 0)
        using errcode = 'AM020';
    end if;
    v_dim := (agentmem.get_model(v_model)).dimension;
    for i in 1..v_n loop
        perform agentmem_private.check_embedding_of(v_model, v_dim, embedding_cache_store.embeddings[i]);
    end loop;
    -- One multi-row insert for each 1,000 texts, the values written into it as
    -- literals (store_messages says why).
    for v_from in 1..v_n by 1000 loop
        execute 'insert into agentmem.embedding_cache as c (tenant_id, model, text_sha256, cached_vector) values '
            || (
                select pg_catalog.string_agg(pg_catalog.format(
                    '(%L, %L, %L::bytea, %L::%I.vector)', v_tenant, v_model,
                    pg_catalog.sha256(pg_catalog.convert_to(embedding_cache_store.texts[g.i], 'UTF8')), embedding_cache_store.embeddings[g.i],
                    v_vector_schema
                ), ', ' order by g.i)
                from pg_catalog.generate_series(v_from, least(v_from + 999, v_n)) as g (i)
            )
            || ' on conflict on constraint embedding_cache_pkey do nothing';
        get diagnostics v_new = row_count;
        v_stored := v_stored + v_new;
    end loop;
    return v_stored;
end
$$;

comment on function agentmem.embedding_cache_store(text, text[], vector[]) is
'Store many embeddings in the embedding cache of the current tenant; returns how many were new.
embeddings[i] is the embedding of texts[i] by model. A text already cached is left as it is
(the same text and model give the same embedding: no TTL). All or nothing: AM020 for arrays of
different lengths, not one-dimensional from index 1, NULL texts or more than 10,000; AM021 for a text
over 4 MiB; AM011/AM010 for an unknown model or a bad embedding (as check_embedding: also a norm
that is zero, subnormal or not finite in float32). The embedding cache names no user: forget_user
deletes the rows of the user''s texts by their hash, but does not serialise against this function.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';
