-- Conversation memory, search: the user's past messages by meaning (the vector
-- search of sql/11_vector_search.sql), by words (full text) or both, and hits
-- expanded to their context windows. Limits as documented at the top of sql/20_conversations.sql.

-- Signatures of older installs (before since / until / recency_half_life).
drop function if exists agentmem_private.text_match_messages(text, text, tsquery, int, uuid);
drop function if exists agentmem.search_messages(text, vector, int, uuid, real, text, text, int, int);
drop function if exists agentmem.search_with_context(text, vector, int, int, text, uuid, real, text, int, int);
drop function if exists agentmem.search_messages(text, vector, int, anycompatible, real, text, text, int, int);
drop function if exists agentmem.search_with_context(text, vector, int, int, text, anycompatible, real, text, int, int);
-- Before text_ranking / bm25_k1 / bm25_b (0020).
drop function if exists agentmem.search_messages(
    text, vector, int, anycompatible, real, text, text, int, int, timestamptz, timestamptz, interval
);
drop function if exists agentmem.search_with_context(
    text, vector, int, int, text, anycompatible, real, text, int, int, timestamptz, timestamptz, interval
);
-- The two halves of today's search_messages as each first came (use_boost, 0019; text_ranking, 0020).
drop function if exists agentmem.search_messages(
    text, vector, int, anycompatible, real, text, text, int, int, timestamptz, timestamptz, interval, real
);
drop function if exists agentmem.search_messages(
    text, vector, int, anycompatible, real, text, text, int, int, timestamptz, timestamptz, interval, text, float8, float8
);

-- Before neighbour_weight (issue 35).
drop function if exists agentmem.search_messages(
    text, vector, int, anycompatible, real, text, text, int, int, timestamptz, timestamptz, interval, real, text, float8, float8
);
drop function if exists agentmem.search_with_context(
    text, vector, int, int, text, anycompatible, real, text, int, int, timestamptz, timestamptz, interval, text, float8, float8
);
-- Before fusion (issue 35).
drop function if exists agentmem.search_messages(
    text, vector, int, anycompatible, real, text, text, int, int, timestamptz, timestamptz, interval, real, text, float8, float8, float8
);
drop function if exists agentmem.search_with_context(
    text, vector, int, int, text, anycompatible, real, text, int, int, timestamptz, timestamptz, interval, text, float8, float8, float8
);

-- Before its scores (search_messages' fusion 'zscore'): another return type.
drop function if exists agentmem_private.text_match_messages(text, text, tsquery, int, uuid, timestamptz, timestamptz);

create or replace function agentmem_private.text_match_messages(
    p_tenant text,
    p_user_id text,
    p_query tsquery,
    p_k int,
    p_conversation_id uuid default null,
    p_since timestamptz default null,
    p_until timestamptz default null
) returns table (message_id uuid, text_rank int, text_score double precision)
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
set enable_bitmapscan = on
as $$
declare
    v_rows int;
begin
    -- A user with few messages is read through the (tenant_id, user_id)
    -- index and each row tested: the GIN index's posting lists hold every
    -- tenant's rows with the words, so at 100,000 messages a common word
    -- made the bitmap path 3x slower (10.2 ms against 3.4 ms for a user of
    -- 419 messages; about 8 microseconds per row tested and ranked). Bitmap
    -- scans (the only way GIN is read) are switched off for that statement;
    -- the function's own setting restores them when it returns.
    -- A time window is counted too (the B-tree on (tenant_id, user_id,
    -- occurred_at)): a narrow one of a big user is read row by row like a
    -- small user, through that index.
    if p_since is null and p_until is null then
        select pg_catalog.count(*) into v_rows from (
            select from agentmem.messages as m
            where m.tenant_id = p_tenant and m.user_id = p_user_id
            limit 1001
        ) as s;
    else
        select pg_catalog.count(*) into v_rows from (
            select from agentmem.messages as m
            where
                m.tenant_id = p_tenant and m.user_id = p_user_id
                and m.occurred_at >= coalesce(p_since, '-infinity') and m.occurred_at < coalesce(p_until, 'infinity')
            limit 1001
        ) as s;
    end if;
    if v_rows <= 1000 then
        perform pg_catalog.set_config('enable_bitmapscan', 'off', true);
    end if;
    if v_rows <= 1000 and p_since is null and p_until is null then
        -- Static statements, so that PL/pgSQL keeps them prepared (a user's
        -- rows through the B-tree, whatever the words) instead of an EXECUTE
        -- formatted, parsed and planned on every call; with text_query's
        -- shortcut, hybrid search at 100,000 messages went from 7.9 to 7.2 ms
        -- (p50, same run, bench/bench_hybrid.py's data).
        if p_conversation_id is null then
            return query
            select r.message_id, (pg_catalog.row_number() over (order by r.score desc, r.message_id))::int, r.score::float8
            from (
                select m.message_id, pg_catalog.ts_rank(m.content_tsv, p_query) as score
                from agentmem.messages as m
                where m.tenant_id = p_tenant and m.user_id = p_user_id and m.content_tsv @@ p_query
                order by 2 desc, 1 limit p_k
            ) as r;
        else
            return query
            select r.message_id, (pg_catalog.row_number() over (order by r.score desc, r.message_id))::int, r.score::float8
            from (
                select m.message_id, pg_catalog.ts_rank(m.content_tsv, p_query) as score
                from agentmem.messages as m
                where
                    m.tenant_id = p_tenant and m.user_id = p_user_id and m.content_tsv @@ p_query
                    and m.conversation_id = p_conversation_id
                order by 2 desc, 1 limit p_k
            ) as r;
        end if;
        return;
    end if;
    -- A bigger user, or a time window: planned with the query's own tsquery
    -- and window (execute; the window's bounds as literals), so that the
    -- planner weighs the GIN index on content_tsv against the user's B-tree
    -- indexes (bitmap scans off for a window of up to 1,000 rows, as above).
    return query execute pg_catalog.format(
        'select r.message_id, (pg_catalog.row_number() over (order by r.score desc, r.message_id))::int, r.score::float8 '
        'from (select m.message_id, pg_catalog.ts_rank(m.content_tsv, $3) as score '
        '      from agentmem.messages as m '
        '      where m.tenant_id = $1 and m.user_id = $2 and m.content_tsv @@ $3 %s%s%s '
        '      order by 2 desc, 1 limit $4) as r '
        'order by 2',
        case when p_conversation_id is null then '' else 'and m.conversation_id = $5' end,
        case when p_since is null then '' else pg_catalog.format(' and m.occurred_at >= %L::timestamptz', p_since) end,
        case when p_until is null then '' else pg_catalog.format(' and m.occurred_at < %L::timestamptz', p_until) end
    )
    using p_tenant, p_user_id, p_query, p_k, p_conversation_id;
end
$$;

comment on function agentmem_private.text_match_messages(text, text, tsquery, int, uuid, timestamptz, timestamptz) is
'Internal: the full-text branch of message search. The user''s p_k messages best matching p_query
(ts_rank on messages.content_tsv), with their rank (1 = best) and ts_rank, optionally in one conversation and in
a time window (occurred_at >= p_since and < p_until; either NULL: unbounded on that side).
A user of up to 1,000 messages is read through the (tenant_id, user_id) index, by statements whose
plans are kept; a bigger one is planned per call with the query, so that it can take the GIN index.';

create or replace function agentmem_private.check_neighbour_weight(p_weight double precision)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_weight is null or p_weight = 'NaN' or p_weight not between 0 and 1 then
        raise exception 'neighbour_weight must be between 0 and 1, got %', coalesce(p_weight::text, 'NULL')
        using
            errcode = 'AM020',
            detail = 'Each candidate of a hybrid search gains this share of the fused scores of the candidates up to two turns before and after it.',
            hint = 'The default, 0.1, was measured on LoCoMo (bench/results/hybrid.md); 0 turns it off.';
    end if;
end
$$;

comment on function agentmem_private.check_neighbour_weight(double precision) is
'Internal: AM020 unless 0 <= neighbour_weight <= 1 (NULL and NaN refused).';

-- Before fusion (issue 35).
drop function if exists agentmem_private.search_messages_ranked(
    text, vector, int, anycompatible, real, text, text, int, int, timestamptz, timestamptz, interval, real, text, float8, float8, float8, int
);

-- search_messages itself (agentmem.search_messages is a call of it): search_with_context reads more of
-- its ranking than the hits it returns, whose use alone is recorded (record_k).
-- Over 100 lines: the branches of a hybrid search (vector; words by BM25 and ts_rank) and their fusion,
-- each read into variables first, with the recency and use weights and the use recorded of what it returns.
create or replace function agentmem_private.search_messages_ranked(
    user_id text,
    query_embedding vector default null,
    k int default 5,
    conversation_id anycompatible default null::uuid,
    min_similarity real default null,
    model text default null,
    query_text text default null,
    candidate_pool int default 100,
    rrf_k int default 10,
    since timestamptz default null,
    until timestamptz default null,
    recency_half_life interval default null,
    use_boost real default null,
    text_ranking text default 'both',
    bm25_k1 double precision default 1.2,
    bm25_b double precision default 0.3,
    neighbour_weight double precision default 0.1,
    record_k int default null,
    fusion text default 'zscore'
) returns setof agentmem.message_hit
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_conversation_id uuid := agentmem_private.uuid_arg('conversation_id', search_messages_ranked.conversation_id);
    v_model text := coalesce(search_messages_ranked.model, agentmem_private.default_model());
    v_dim int;
    v_query tsquery;
    v_terms text[];
    v_pool int := greatest(search_messages_ranked.candidate_pool, search_messages_ranked.k);
    v_vec_ids uuid[];
    v_vec_distances float8[];
    v_txt_ids uuid[];
    v_txt_scores float8[];
    v_bm25_ids uuid[];
    v_bm25_scores float8[];
    v_now timestamptz := coalesce(search_messages_ranked.until, pg_catalog.now());
    v_half_life float8;
    v_hit agentmem.message_hit;
    v_used uuid[] := '{}';
    v_boost float8;
    v_nb_ids uuid[];
    v_nb_givers uuid[];
begin
    perform agentmem_private.check_user_id(search_messages_ranked.user_id);
    perform agentmem_private.check_range('k', search_messages_ranked.k, 1, 1000);
    perform agentmem_private.check_window(search_messages_ranked.since, search_messages_ranked.until);
    v_half_life := agentmem_private.check_half_life(search_messages_ranked.recency_half_life);
    v_boost := agentmem_private.use_boost_weight(v_tenant, search_messages_ranked.use_boost);
    if search_messages_ranked.min_similarity is not null then
        perform agentmem_private.check_similarity('min_similarity', search_messages_ranked.min_similarity);
    end if;
    v_dim := agentmem_private.check_search_query(
        'search_messages', v_model, search_messages_ranked.query_embedding, search_messages_ranked.query_text, search_messages_ranked.candidate_pool, search_messages_ranked.rrf_k
    );
    if v_conversation_id is not null then
        perform agentmem_private.check_conversation_of_user(v_tenant, v_conversation_id, search_messages_ranked.user_id);
    end if;
    perform agentmem_private.check_text_ranking(search_messages_ranked.text_ranking, search_messages_ranked.bm25_k1, search_messages_ranked.bm25_b);
    perform agentmem_private.check_neighbour_weight(search_messages_ranked.neighbour_weight);
    perform agentmem_private.check_fusion(search_messages_ranked.fusion);
    -- the words once: the query, and BM25's terms
    v_terms := agentmem_private.text_terms(search_messages_ranked.query_text);
    v_query := agentmem_private.terms_query(v_terms);

    if v_query is null and search_messages_ranked.query_embedding is null then
        raise notice 'search_messages: query_text holds no searchable word, so nothing was searched'
        using
            detail = 'Blank text, punctuation and stop words of the text search configuration are not indexed.',
            hint = 'Search with other words, or pass query_embedding as well.';
        return;
    end if;

    -- Each branch's ranked ids first, into variables: on a Citus cluster a
    -- statement that both reads a distributed table and calls a function that
    -- reads one is sent whole to a worker, where the nested query fails.
    if search_messages_ranked.query_embedding is not null then
        select
            pg_catalog.array_agg(n.id order by n.distance, n.id),
            pg_catalog.array_agg(n.distance order by n.distance, n.id)
        into v_vec_ids, v_vec_distances
        from agentmem_private.vector_search(
            table_name => 'message_embeddings', id_column => 'message_id', tenant_id => v_tenant, model => v_model,
            dimension => v_dim, query_embedding => search_messages_ranked.query_embedding,
            k => case when v_query is null and v_half_life is null and v_boost is null then search_messages_ranked.k else v_pool end,
            -- the user's messages, narrowed to a conversation and to a time window
            -- [since, until) by when they happened (occurred_at, counted through the
            -- B-tree on (tenant_id, user_id, model, occurred_at)); without either,
            -- all of the user's rows: exact_scan's static statements, and the lone
            -- user's shortcut
            scope => agentmem_private.vector_search_scope(
                table_name => 'message_embeddings', tenant_id => pg_catalog.quote_literal(v_tenant),
                model => pg_catalog.quote_literal(v_model), user_id => pg_catalog.quote_literal(search_messages_ranked.user_id)
            )
            || case when v_conversation_id is not null
                then pg_catalog.format(' and e.conversation_id = %L', v_conversation_id) else ''
            end
            || case when search_messages_ranked.since is not null
                then pg_catalog.format(' and e.occurred_at >= %L::timestamptz', search_messages_ranked.since) else ''
            end
            || case when search_messages_ranked.until is not null
                then pg_catalog.format(' and e.occurred_at < %L::timestamptz', search_messages_ranked.until) else ''
            end,
            static_scan => v_conversation_id is null and search_messages_ranked.since is null and search_messages_ranked.until is null,
            lone_user => search_messages_ranked.user_id, user_id => search_messages_ranked.user_id
        ) as n
        -- A NaN distance (a degenerate vector stored before check_embedding refused
        -- them) is never a hit: NaN >= x is true in PostgreSQL.
        where n.distance <> 'NaN' and (search_messages_ranked.min_similarity is null
            or 1 - n.distance >= search_messages_ranked.min_similarity);
    end if;
    if v_query is not null and search_messages_ranked.text_ranking = 'ts_rank' then
        select pg_catalog.array_agg(x.message_id order by x.text_rank), pg_catalog.array_agg(x.text_score order by x.text_rank)
        into v_txt_ids, v_txt_scores
        from agentmem_private.text_match_messages(
            v_tenant, search_messages_ranked.user_id, v_query,
            case when search_messages_ranked.query_embedding is null and v_half_life is null and v_boost is null
                then search_messages_ranked.k else v_pool end,
            v_conversation_id, search_messages_ranked.since, search_messages_ranked.until
        ) as x;
    elsif v_query is not null then
        -- BM25 (sql/13_bm25.sql), with ts_rank's list beside it for 'both'.
        select
            case when search_messages_ranked.text_ranking = 'both' then x.ts_rank_ids end, x.bm25_ids,
            case when search_messages_ranked.text_ranking = 'both' then x.ts_rank_scores end, x.bm25_scores
        into v_txt_ids, v_bm25_ids, v_txt_scores, v_bm25_scores
        from agentmem_private.word_match_ranks(
            v_tenant, search_messages_ranked.user_id, v_query, v_terms, v_pool,
            v_conversation_id, search_messages_ranked.since, search_messages_ranked.until, search_messages_ranked.bm25_k1, search_messages_ranked.bm25_b
        ) as x;
    end if;

    -- Neighbour evidence (hybrid search only): a question's words often match
    -- the turn before or after the one that answers it, so each of the best
    -- candidates gains neighbour_weight times the fused scores of those up to
    -- two turns before and after it in its conversation (message_index), read
    -- into variables first (for Citus, as above). One sort of the pool by
    -- position and a window over it: a self-join of the pool was a nested loop
    -- (37 ms at 100,000 messages). LoCoMo at 0.1: top 5 0.579 -> 0.608, top 10
    -- 0.662 -> 0.687, session recall 0.935 -> 0.928 (bench/results/hybrid.md;
    -- 0.15 and more cost more session recall and multi-hop); by words alone it
    -- lowered multi-hop and open-domain, so a text-only search is left as it was.
    if v_query is not null and search_messages_ranked.query_embedding is not null and search_messages_ranked.neighbour_weight > 0 then
        -- (fuse_lists sums each taker's gifts in one order, whatever this one)
        select pg_catalog.array_agg(p.id), pg_catalog.array_agg(g.giver)
        into v_nb_ids, v_nb_givers
        from (
            select
                m.message_id as id,
                pg_catalog.array_agg(m.message_id) over (
                    partition by m.conversation_id order by m.message_index
                    range between 2 preceding and 2 following exclude current row
                ) as near
            -- the positions by one index scan over the ids (a join of the fused
            -- pool to messages was planned as a nested loop: 3 ms at 100,000
            -- messages); the best 20 of each list give and take (on LoCoMo the
            -- same figures as the whole pool, for a third of the rows)
            from agentmem.messages as m
            where m.tenant_id = v_tenant and m.message_id = any(v_vec_ids[1:20] || v_txt_ids[1:20] || v_bm25_ids[1:20])
        ) as p
        cross join lateral pg_catalog.unnest(p.near) as g (giver);
    end if;

    -- Fused (agentmem_private.fuse_lists): by the lists' standardised scores
    -- ('zscore'), or by reciprocal rank ('rrf': score =
    -- sum over the branches of 1 / (rrf_k + rank)); with one list, its order.
    -- Each row is returned as it comes and its id kept: the use recorded (agentmem_private.record_use)
    -- is of the rows returned, from the one fusion.
    if v_half_life is null and v_boost is null then
        for v_hit in
        select
            m.message_id, m.conversation_id, m.message_index, m.role, m.content, m.metadata, m.created_at,
            (1 - v_vec_distances[f.vector_rank])::real,
            f.vector_rank,
            f.text_rank,
            f.score,
            m.occurred_at
        from agentmem_private.fuse_lists(
            search_messages_ranked.fusion, v_vec_ids, v_vec_distances, v_txt_ids, v_txt_scores, v_bm25_ids, v_bm25_scores,
            search_messages_ranked.rrf_k, search_messages_ranked.k, search_messages_ranked.neighbour_weight, v_nb_ids, v_nb_givers
        ) as f
        inner join agentmem.messages as m on m.tenant_id = v_tenant and m.message_id = f.id
        order by f.score desc, f.vector_rank nulls last, f.text_rank, m.message_id
        loop
            v_used := v_used || v_hit.message_id;
            return next v_hit;
        end loop;
        perform agentmem_private.record_use(
            v_tenant, 'message', search_messages_ranked.user_id, v_used[1:coalesce(search_messages_ranked.record_k, search_messages_ranked.k)]
        );
        return;
    end if;
    -- With a recency weight: every candidate of the pool fused, its score
    -- halved for each half-life of age (from until, else now), the k best.
    for v_hit in
    select w.*
    from (
        select
            m.message_id, m.conversation_id, m.message_index, m.role, m.content, m.metadata, m.created_at,
            (1 - v_vec_distances[f.vector_rank])::real as similarity,
            f.vector_rank,
            f.text_rank,
            -- A row older than 1,000 half-lives weighs 0: 0.5 ^ 1,075 is below
            -- the smallest double, and power() and * raise 22003 on an underflow.
            -- No half-life (the use boost alone): the fused score as it is.
            case
                when v_half_life is null then f.score
                when greatest(extract(epoch from v_now - m.occurred_at)::float8, 0::float8) / v_half_life < 1000::float8
                    then f.score * pg_catalog.power(
                        0.5::float8,
                        greatest(extract(epoch from v_now - m.occurred_at)::float8, 0::float8) / v_half_life
                    )
                else 0::float8
            end
            -- the use boost (agentmem_private.use_boost_factor): 1 to 1 + use_boost, never a filter
            * agentmem_private.use_boost_factor(v_boost, m.last_used_at, m.created_at, m.use_count, v_now) as score,
            m.occurred_at
        from agentmem_private.fuse_lists(
            search_messages_ranked.fusion, v_vec_ids, v_vec_distances, v_txt_ids, v_txt_scores, v_bm25_ids, v_bm25_scores,
            search_messages_ranked.rrf_k,
            coalesce(pg_catalog.cardinality(v_vec_ids), 0) + coalesce(pg_catalog.cardinality(v_txt_ids), 0)
            + coalesce(pg_catalog.cardinality(v_bm25_ids), 0),
            search_messages_ranked.neighbour_weight, v_nb_ids, v_nb_givers
        ) as f
        inner join agentmem.messages as m on m.tenant_id = v_tenant and m.message_id = f.id
    ) as w
    order by w.score desc, w.vector_rank nulls last, w.text_rank, w.message_id
    limit search_messages_ranked.k
    loop
        v_used := v_used || v_hit.message_id;
        return next v_hit;
    end loop;
    perform agentmem_private.record_use(
        v_tenant, 'message', search_messages_ranked.user_id, v_used[1:coalesce(search_messages_ranked.record_k, search_messages_ranked.k)]
    );
end
$$;

comment on function agentmem_private.search_messages_ranked(
    text, vector, int, anycompatible, real, text, text, int, int, timestamptz, timestamptz, interval, real, text, double precision, double precision,
    double precision, int, text
) is
'Internal: agentmem.search_messages (see its comment), whose use record covers the first record_k rows
returned (NULL: all k): search_with_context reads more of the ranking than the hits it returns.';

create or replace function agentmem.search_messages(
    user_id text,
    query_embedding vector default null,
    k int default 5,
    conversation_id anycompatible default null::uuid,
    min_similarity real default null,
    model text default null,
    query_text text default null,
    candidate_pool int default 100,
    rrf_k int default 10,
    since timestamptz default null,
    until timestamptz default null,
    recency_half_life interval default null,
    use_boost real default null,
    text_ranking text default 'both',
    bm25_k1 double precision default 1.2,
    bm25_b double precision default 0.3,
    neighbour_weight double precision default 0.1,
    fusion text default 'zscore'
) returns setof agentmem.message_hit
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    return query select h.* from agentmem_private.search_messages_ranked(
        user_id => search_messages.user_id,
        query_embedding => search_messages.query_embedding,
        k => search_messages.k,
        conversation_id => search_messages.conversation_id,
        min_similarity => search_messages.min_similarity,
        model => search_messages.model,
        query_text => search_messages.query_text,
        candidate_pool => search_messages.candidate_pool,
        rrf_k => search_messages.rrf_k,
        since => search_messages.since,
        until => search_messages.until,
        recency_half_life => search_messages.recency_half_life,
        use_boost => search_messages.use_boost,
        text_ranking => search_messages.text_ranking,
        bm25_k1 => search_messages.bm25_k1,
        bm25_b => search_messages.bm25_b,
        neighbour_weight => search_messages.neighbour_weight,
        fusion => search_messages.fusion
    ) as h;
end
$$;

comment on function agentmem.search_messages(
    text, vector, int, anycompatible, real, text, text, int, int, timestamptz, timestamptz, interval, real, text, double precision, double precision,
    double precision, text
) is
'The user''s k past messages best matching a query embedding, a query text or both, in the current tenant, best first.
- query_embedding only: the k most similar messages (today''s vector search). Returns k rows whenever
  k matching rows exist, however small the tenant is beside the others: up to
  agentmem.exact_search_max_rows candidates (a setting; by default 6,000) an exact scan of the user''s
  messages; above it the tenant''s
  own HNSW index when a DBA built one (agentmem.create_tenant_index), else the model''s shared HNSW
  index, with pgvector iterative scans, and an exact scan should the index stop short of k rows.
- query_text only (query_embedding NULL, e.g. from psql): full-text search over
  messages.content_tsv; any of the text''s words (at most its first 64 distinct ones, stemmed under
  the installation''s text search configuration, stop words dropped) makes a candidate. Punctuation
  such as & | ! :* quotes and backslashes is never query syntax. text_ranking (default ''both'')
  ranks the candidates by BM25 (''bm25'': a rare word of the user''s messages weighs more; bm25_b
  and bm25_k1 set how much a long message is discounted, each word counting once; per-user
  statistics kept by every write, sql/13_bm25.sql), by ts_rank (''ts_rank''), or both as two lists
  fused as below (''both'').
- both (hybrid): each list (vector; words by BM25 and/or ts_rank) takes its best candidate_pool
  messages (at least k), the candidates, fused by fusion:
  ''zscore'' (the default): each list''s scores standardised over the candidates and summed, so that a
  score says how many standard deviations a message stands above what each list gives a message it did
  not return (0 for the words; for the vector, its least similarity less the mean gap between its
  similarities). A word found in one message of many outweighs a middling vector hit; a list that
  cannot tell its candidates apart (all its scores equal) gives each of them 1. Scores are 0 or more.
  ''rrf'': by reciprocal rank, score = the sum over the lists of 1 / (rrf_k + rank), a list that
  missed a row adding nothing (rrf_k is read by ''rrf'' only).
- neighbour_weight (0 to 1, default 0.1; 0: off), hybrid search only: each of the best 20 of each
  list gains neighbour_weight times the sum of the fused scores of those up to two turns before and
  after it in its conversation (message_index +-1, +-2); a question''s words often match the turn
  next to the one that answers it. Only candidates gain: no message outside the pool comes back.
- neither: AM020. A text with no searchable word (blank, punctuation or stop words only) falls back to
  the vector branch when there is an embedding; without one it returns no rows and raises a NOTICE.
Each row: similarity (cosine, NULL unless the vector branch found it), vector_rank and text_rank
(NULL where a branch did not find it; text_rank the better of the BM25 and ts_rank ranks), score (the
fused score).
min_similarity (-1 to 1) applies to the vector branch only: it drops weaker vector candidates, never
a row the text branch found. conversation_id limits both branches to one conversation of the user
(AM030 if it is not in the tenant, or is another user''s; AM020 if it is not a UUID). model selects the embeddings of the vector branch; the text branch searches
every message of the user.
since / until: only messages that happened in [since, until) (occurred_at >= since, inclusive, and
< until, exclusive; either NULL: unbounded on that side; since after until: AM020), applied inside each
branch (the exact scan, the tenant''s and the shared HNSW index, the words), so that k rows come back
whenever the window holds k matching rows. Each row carries occurred_at (when the message happened)
beside created_at (when it was stored).
recency_half_life (NULL by default: off): a positive interval; each candidate of the pool (of both
branches) has its score multiplied by 0.5 ^ (age / recency_half_life), age = (until, else now) minus
occurred_at (0 for a later message; a message older than 1,000 half-lives weighs 0), and the k best of those come back (with one branch too).
use_boost (0 to 0.5; NULL: the tenant''s setting, agentmem.set_use_boost, off unless set; 0: off): each
candidate of the pool has its score multiplied by a factor between 1 and 1 + use_boost, higher for a
message used lately (returned by a search; halved each 7 days), created lately (halved each 30 days)
and used often; the k best come back. A factor, never a filter: any candidate may still come back.
Off, the results are exactly those without it. Each row returned counts as used (use_count and
last_used_at, folded in by the use job; nothing is recorded in a read-only transaction).
Defaults measured on LoCoMo (bench/results/hybrid.md): candidate_pool 100, fusion ''zscore'', text_ranking
''both'', bm25_k1 1.2, bm25_b 0.3, neighbour_weight 0.1 (rrf_k 10 for fusion ''rrf'').
Limits: k 1 to 1,000; candidate_pool 1 to 1,000; rrf_k 0 to 1,000; use_boost 0 to 0.5; text_ranking
''both'', ''bm25'' or ''ts_rank''; bm25_k1 0 to 10; bm25_b 0 to 1; neighbour_weight 0 to 1; fusion ''zscore'' or ''rrf''
(AM020, with DETAIL and HINT for the last five);
query_text at most 100,000 characters (AM021); AM010/AM011 for a bad query embedding or model.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

drop function if exists agentmem.context_window(uuid, int, int);

create or replace function agentmem.context_window(
    message_id anycompatible,
    before int default 3,
    after int default 3
) returns setof agentmem.message_row
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_message_id uuid := agentmem_private.uuid_arg('message_id', context_window.message_id);
    v_conversation uuid;
    v_index int;
begin
    perform agentmem_private.check_range('before', context_window.before, 0, 100);
    perform agentmem_private.check_range('after', context_window.after, 0, 100);
    select m.conversation_id, m.message_index into v_conversation, v_index
    from agentmem.messages as m
    where m.tenant_id = v_tenant and m.message_id = v_message_id;
    if not found then
        raise exception 'message % not found', coalesce(v_message_id::text, 'NULL')
        using
            errcode = 'AM030',
            detail = 'It does not exist in the current tenant.',
            hint = 'Pass a message_id returned by search_messages or store_message.';
    end if;
    return query
    select m.message_id, m.conversation_id, m.message_index, m.role, m.content, m.metadata, m.created_at, m.occurred_at
    from agentmem.messages as m
    where
        m.tenant_id = v_tenant and m.conversation_id = v_conversation
        and m.message_index between v_index - context_window.before and v_index + context_window.after
    order by m.message_index;
end
$$;

comment on function agentmem.context_window(anycompatible, int, int) is
'The messages around one message of its conversation, in order: message_index from index - before to index + after.
Fewer at the start and end of the conversation.
Each has occurred_at (when it happened) and created_at (when it was stored).
before, after: 0 to 100 (AM020). AM030 for a message not in the current tenant.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

-- Over 100 lines: search_messages' arguments passed through, then one statement that widens the hits
-- into their windows (Citus sends it whole to the tenant's worker); the argument list is most of it.
create or replace function agentmem.search_with_context(
    user_id text,
    query_embedding vector default null,
    k int default 3,
    radius int default 3,
    model text default null,
    conversation_id anycompatible default null::uuid,
    min_similarity real default null,
    query_text text default null,
    candidate_pool int default 100,
    rrf_k int default 10,
    since timestamptz default null,
    until timestamptz default null,
    recency_half_life interval default null,
    text_ranking text default 'both',
    bm25_k1 double precision default 1.2,
    bm25_b double precision default 0.3,
    neighbour_weight double precision default 0.1,
    fusion text default 'zscore'
) returns setof agentmem.message_in_window
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_ids uuid[];
    v_conversations uuid[];
    v_indexes int[];
    v_similarities real[];
    v_vector_ranks int[];
    v_text_ranks int[];
    v_scores double precision[];
begin
    perform agentmem_private.check_range('radius', search_with_context.radius, 0, 100);
    -- The arguments search_messages checks, checked here too: the plan below
    -- may never run search_messages (a hash join over no messages skips it).
    perform agentmem_private.check_user_id(search_with_context.user_id);
    perform agentmem_private.uuid_arg('conversation_id', search_with_context.conversation_id);
    perform agentmem_private.check_range('k', search_with_context.k, 1, 1000);
    perform agentmem_private.check_window(search_with_context.since, search_with_context.until);
    perform agentmem_private.check_half_life(search_with_context.recency_half_life);
    perform agentmem_private.check_text_ranking(search_with_context.text_ranking, search_with_context.bm25_k1, search_with_context.bm25_b);
    perform agentmem_private.check_neighbour_weight(search_with_context.neighbour_weight);
    perform agentmem_private.check_fusion(search_with_context.fusion);
    if search_with_context.min_similarity is not null then
        perform agentmem_private.check_similarity('min_similarity', search_with_context.min_similarity);
    end if;
    if search_with_context.query_embedding is not null then
        perform agentmem_private.check_embedding(
            coalesce(search_with_context.model, agentmem_private.default_model()), search_with_context.query_embedding
        );
    end if;
    -- The ranking first, on its own: Citus sends the windows' query whole to the
    -- tenant's worker, where a call of search_messages inside it could not run.
    -- Its best k are the hits (their use recorded, as search_messages records
    -- them); the next 25 only say where a window should lean.
    select
        pg_catalog.array_agg(h.message_id order by h.n), pg_catalog.array_agg(h.conversation_id order by h.n),
        pg_catalog.array_agg(h.message_index order by h.n), pg_catalog.array_agg(h.similarity order by h.n),
        pg_catalog.array_agg(h.vector_rank order by h.n), pg_catalog.array_agg(h.text_rank order by h.n),
        pg_catalog.array_agg(h.score order by h.n)
    into v_ids, v_conversations, v_indexes, v_similarities, v_vector_ranks, v_text_ranks, v_scores
    from agentmem_private.search_messages_ranked(
        user_id => search_with_context.user_id,
        query_embedding => search_with_context.query_embedding,
        k => least(search_with_context.k + 25, 1000),
        record_k => search_with_context.k,
        conversation_id => search_with_context.conversation_id,
        min_similarity => search_with_context.min_similarity,
        model => search_with_context.model,
        query_text => search_with_context.query_text,
        candidate_pool => search_with_context.candidate_pool,
        rrf_k => search_with_context.rrf_k,
        since => search_with_context.since,
        until => search_with_context.until,
        recency_half_life => search_with_context.recency_half_life,
        text_ranking => search_with_context.text_ranking,
        bm25_k1 => search_with_context.bm25_k1,
        bm25_b => search_with_context.bm25_b,
        neighbour_weight => search_with_context.neighbour_weight,
        fusion => search_with_context.fusion
    ) with ordinality as h (
        message_id, conversation_id, message_index, role, content, metadata, created_at, similarity, vector_rank,
        text_rank, score, occurred_at, n
    );
    return query
    with ranking as materialized (
        select
            u.message_id, u.conversation_id, u.message_index, u.similarity, u.vector_rank, u.text_rank, u.score, u.n
        from rows from (pg_catalog.unnest(v_ids), pg_catalog.unnest(v_conversations), pg_catalog.unnest(v_indexes), pg_catalog.unnest(v_similarities), pg_catalog.unnest(v_vector_ranks), pg_catalog.unnest(v_text_ranks), pg_catalog.unnest(v_scores))
            with ordinality as u (message_id, conversation_id, message_index, similarity, vector_rank, text_rank, score, n)
    ),

    hits as materialized (
        select r.* from ranking as r where r.n <= search_with_context.k
    ),

    -- Each window may lean one turn toward the side where the rest of the
    -- ranking scored more (the fused scores of the next 25 after the hits
    -- inside it; a tie keeps it centred, else the earlier side): LoCoMo, top 5
    -- with windows of 3: 0.772 -> 0.783, no category lower (bench/results/hybrid.md).
    spans as (
        select
            h.conversation_id,
            h.similarity,
            h.score,
            greatest(h.message_index - search_with_context.radius + l.shift, 0) as lo,
            h.message_index + search_with_context.radius + l.shift as hi
        from hits as h
        cross join lateral (
            select sh.shift
            from (values (-1), (0), (1)) as sh (shift)
            where sh.shift = 0 or search_with_context.radius > 0
            order by
                (
                    select coalesce(pg_catalog.sum(o.score), 0)
                    from ranking as o
                    where
                        o.n > search_with_context.k and o.conversation_id = h.conversation_id
                        and o.message_index between h.message_index - search_with_context.radius + sh.shift
                        and h.message_index + search_with_context.radius + sh.shift
                ) desc,
                pg_catalog.abs(sh.shift),
                sh.shift
            limit 1
        ) as l
    ),

    -- gaps and islands: a span starts a new window unless it overlaps or
    -- touches a previous span of the same conversation
    marked as (
        select
            s.*,
            case
                when s.lo <= pg_catalog.max(s.hi) over (
                    partition by s.conversation_id order by s.lo, s.hi
                    rows between unbounded preceding and 1 preceding
                ) + 1 then 0
                else 1
            end as starts
        from spans as s
    ),

    grouped as (
        select
            mk.*,
            pg_catalog.sum(mk.starts) over (partition by mk.conversation_id order by mk.lo, mk.hi) as grp
        from marked as mk
    ),

    windows as (
        select
            g.conversation_id, pg_catalog.min(g.lo) as lo, pg_catalog.max(g.hi) as hi, pg_catalog.max(g.similarity) as best,
            pg_catalog.max(g.score) as best_score
        from grouped as g
        group by g.conversation_id, g.grp
    ),

    ranked as (
        select
            w.*,
            (pg_catalog.row_number() over (order by w.best_score desc, w.best desc nulls last, w.conversation_id, w.lo))::int
                as wrank
        from windows as w
    )

    select
        r.wrank,
        m.conversation_id,
        m.message_id,
        m.message_index,
        m.role,
        m.content,
        m.metadata,
        m.created_at,
        h.message_id is not null,
        h.similarity,
        r.best,
        h.vector_rank,
        h.text_rank,
        h.score,
        r.best_score,
        m.occurred_at
    from ranked as r
    inner join agentmem.messages as m
        on
            m.tenant_id = v_tenant and m.conversation_id = r.conversation_id
            and m.message_index between r.lo and r.hi
    left join hits as h on h.message_id = m.message_id
    order by r.wrank, m.message_index;
end
$$;

comment on function agentmem.search_with_context(
    text, vector, int, int, text, anycompatible, real, text, int, int, timestamptz, timestamptz, interval, text, double precision, double precision,
    double precision, text
) is
'search_messages, each of the top-k hits expanded to the messages within radius of it, in one call.
A window spans 2 x radius + 1 turns around its hit and may lean one turn toward the side where more of
the search''s ranking scored (the fused scores of the next 25 after the hits inside it; a tie keeps it
centred): the hit is always inside. Windows of one conversation that overlap or touch are merged into
one, so no message appears twice. The use recorded is of the k hits, as for search_messages.
Searches by query_embedding, query_text or both (hybrid), exactly as search_messages does.
One row per message: window_rank (1 = the window with the best fused score), is_hit and the hit''s
similarity (NULL unless the vector branch found it), vector_rank, text_rank and score of a hit (NULL
for the context around it), window_similarity (the best similarity of its hits) and window_score
(the best fused score of its hits, by which windows are ranked). Rows come by window_rank, then
message_index.
since / until bound the hits (as for search_messages); the context around a hit is the conversation''s,
whenever it happened. Every row carries occurred_at, when its message happened. recency_half_life: as
for search_messages.
radius: 0 to 100 (AM020); k, query_text, candidate_pool, rrf_k, text_ranking, bm25_k1, bm25_b,
neighbour_weight, fusion and the rest as for search_messages (and with its defaults).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';
