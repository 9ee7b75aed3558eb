-- The embedding cache: embeddings already computed, keyed by (model, sha256 of
-- the exact text embedded). Many texts per call in both directions, so a
-- re-index asks once and embeds only the misses. Tenant-scoped (see the table).

create or replace function agentmem._cache_check_texts(p_texts text[])
returns int
language plpgsql
immutable
security invoker
set search_path from current
as $$
declare
    v_n int := coalesce(cardinality(p_texts), 0);
begin
    if v_n not between 1 and 10000 or array_ndims(p_texts) <> 1 then
        raise exception 'texts must hold 1 to 10000 texts, got %', v_n
        using errcode = 'AM020', hint = 'Split a larger batch into several calls.';
    end if;
    if array_position(p_texts, null) is not null then
        raise exception 'texts[%] is NULL', array_position(p_texts, null)
        using errcode = 'AM020';
    end if;
    return v_n;
end
$$;

comment on function agentmem._cache_check_texts(text[]) is
'Internal: AM020 unless texts is a one-dimensional array of 1 to 10,000 non-NULL texts; returns its length.';

create or replace function agentmem.cached_embeddings(
    model text,
    texts text[]
) returns table (ord int, embedding vector)
language plpgsql
stable
security invoker
set search_path from current
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_model text := coalesce(cached_embeddings.model, agentmem._default_model());
begin
    perform agentmem._cache_check_texts(cached_embeddings.texts);
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
        select u.ord, sha256(convert_to(u.txt, 'UTF8')) as sha
        from unnest(cached_embeddings.texts) with ordinality as u (txt, ord)
    ) as t
    order by t.ord;
end
$$;

comment on function agentmem.cached_embeddings(text, text[]) is
'Look up many texts in the embedding cache of the current tenant at once.
One row per text, in order: ord (1-based position in texts) and the cached embedding, NULL for a miss.
Texts are matched exactly (sha256 of their UTF-8 bytes), so pass them with the model''s prefix if
they were embedded with it. texts: 1 to 10,000 non-NULL texts (AM020); AM011 for an unknown model
(default: agentmem._default_model()).';

create or replace function agentmem.cache_embeddings(
    model text,
    texts text[],
    embeddings vector[]
) returns int
language plpgsql
volatile
security invoker
set search_path from current
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_model text := coalesce(cache_embeddings.model, agentmem._default_model());
    v_n int := agentmem._cache_check_texts(cache_embeddings.texts);
    v_stored int := 0;
    v_new int;
begin
    if coalesce(cardinality(cache_embeddings.embeddings), 0) <> v_n
        or array_ndims(cache_embeddings.embeddings) <> 1 then
        raise exception 'texts and embeddings must be arrays of the same length (% and %)',
            v_n, coalesce(cardinality(cache_embeddings.embeddings), 0)
        using errcode = 'AM020';
    end if;
    for i in 1..v_n loop
        perform agentmem._check_embedding(v_model, cache_embeddings.embeddings[i]);
    end loop;
    -- Row by row: Citus runs insert ... select from an array as COPY, which
    -- row-level security refuses; a single-row insert goes to the tenant's shard.
    for i in 1..v_n loop
        insert into agentmem.embedding_cache as c (tenant_id, model, text_sha256, cached_vector)
        values (v_tenant, v_model, sha256(convert_to(cache_embeddings.texts[i], 'UTF8')), cache_embeddings.embeddings[i])
        on conflict on constraint embedding_cache_pkey do nothing;
        get diagnostics v_new = row_count;
        v_stored := v_stored + v_new;
    end loop;
    return v_stored;
end
$$;

comment on function agentmem.cache_embeddings(text, text[], vector[]) is
'Store many embeddings in the embedding cache of the current tenant; returns how many were new.
embeddings[i] is the embedding of texts[i] by model. A text already cached is left as it is
(the same text and model give the same embedding: no TTL). All or nothing: AM020 for arrays of
different lengths, NULL texts or more than 10,000; AM011/AM010 for an unknown model or a bad embedding.';
