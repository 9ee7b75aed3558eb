-- Conversation memory, search: the user's similar past messages through the
-- per-model HNSW index (pgvector iterative scans), and hits expanded to their
-- context windows. Limits as documented at the top of sql/20_conversations.sql.

create or replace function agentmem.search_messages(
    user_id text,
    query_embedding vector,
    k int default 5,
    conversation_id uuid default null,
    min_similarity real default null,
    model text default null
) returns setof agentmem.message_hit
language plpgsql
stable
security invoker
set search_path from current
set "hnsw.iterative_scan" = 'relaxed_order'
set "hnsw.ef_search" = 400
set enable_sort = off
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_model text := coalesce(search_messages.model, agentmem._default_model());
    v_exact_max int := coalesce(
        nullif(pg_catalog.current_setting('agentmem.exact_search_max_rows', true), '')::int, 100
    );
    v_filter text := case when search_messages.conversation_id is null then '' else 'and e.conversation_id = $4' end;
    v_dim int;
    v_rows int;
    v_ids uuid[];
    v_distances float8[];
begin
    perform agentmem._check_user_id(search_messages.user_id);
    perform agentmem._check_range('k', search_messages.k, 1, 1000);
    if search_messages.min_similarity not between -1 and 1 or search_messages.min_similarity = 'NaN' then
        raise exception 'min_similarity must be between -1 and 1, got %', search_messages.min_similarity
        using errcode = 'AM020', hint = 'It is a cosine similarity; NULL means no threshold.';
    end if;
    v_dim := agentmem._check_embedding(v_model, search_messages.query_embedding);
    if search_messages.conversation_id is not null and not exists (
        select from agentmem.conversations as c
        where
            c.tenant_id = v_tenant and c.conversation_id = search_messages.conversation_id
            and c.user_id = search_messages.user_id
    ) then
        perform agentmem._conv_not_found(search_messages.conversation_id);
    end if;

    -- How many candidates, counted no further than the exact-scan limit.
    execute pg_catalog.format(
        'select count(*) from (select from agentmem.message_embeddings as e '
        'where e.tenant_id = $2 and e.user_id = $3 and e.model = %L %s limit $6) as s',
        v_model, v_filter
    )
    into v_rows
    using search_messages.query_embedding, v_tenant, search_messages.user_id,
    search_messages.conversation_id, search_messages.k, v_exact_max + 1;

    if v_rows > v_exact_max then
        -- The model's partial HNSW index: same expression, model as a literal
        -- so that the index predicate is provable. The iterative scan (relaxed
        -- order) goes on until k rows pass the tenant/user filter; sorts are
        -- disabled in this function so that the planner keeps to the index.
        -- ef_search 400 (function setting): at 100k messages a tenant holding
        -- 30% got recall@10 0.92 with 100, 0.99 with 300, 0.997 with 400, for
        -- 1.3 -> 2.6 ms p50 inside the server (bench/results/conversations.md).
        execute pg_catalog.format(
            'select array_agg(h.message_id order by h.distance), array_agg(h.distance order by h.distance) '
            'from (select e.message_id, e.embedding::vector(%1$s) <=> $1::vector(%1$s) as distance '
            '      from agentmem.message_embeddings as e '
            '      where e.tenant_id = $2 and e.user_id = $3 and e.model = %2$L %3$s '
            '      order by e.embedding::vector(%1$s) <=> $1::vector(%1$s) limit $5) as h',
            v_dim, v_model, v_filter
        )
        into v_ids, v_distances
        using search_messages.query_embedding, v_tenant, search_messages.user_id,
        search_messages.conversation_id, search_messages.k;
    end if;
    if v_rows <= v_exact_max or coalesce(cardinality(v_ids), 0) < search_messages.k then
        -- Few candidates (or an index scan that gave up at hnsw.max_scan_tuples):
        -- an exact scan. Its distance expression does not match the index.
        execute pg_catalog.format(
            'select array_agg(h.message_id order by h.distance), array_agg(h.distance order by h.distance) '
            'from (select e.message_id, e.embedding <=> $1 as distance '
            '      from agentmem.message_embeddings as e '
            '      where e.tenant_id = $2 and e.user_id = $3 and e.model = %L %s '
            '      order by 2 limit $5) as h',
            v_model, v_filter
        )
        into v_ids, v_distances
        using search_messages.query_embedding, v_tenant, search_messages.user_id,
        search_messages.conversation_id, search_messages.k;
    end if;

    return query
    select
        m.message_id, m.conversation_id, m.message_index, m.role, m.content, m.metadata, m.created_at,
        (1 - h.distance)::real
    from unnest(v_ids, v_distances) as h (message_id, distance)
    inner join agentmem.messages as m on m.tenant_id = v_tenant and m.message_id = h.message_id
    where search_messages.min_similarity is null or 1 - h.distance >= search_messages.min_similarity
    order by h.distance, m.message_id;
end
$$;

comment on function agentmem.search_messages(text, vector, int, uuid, real, text) is
'The user''s k past messages most similar to query_embedding, in the current tenant, most similar first.
Returns k rows whenever k matching rows exist, however small the tenant is beside the others:
above agentmem.exact_search_max_rows candidates (a setting, default 100) it uses the model''s HNSW
index with pgvector iterative scans; at or below it, or should the index scan stop short of k rows,
an exact scan of the user''s messages (faster and exact for so few rows).
similarity is cosine similarity (1 = same direction); min_similarity (-1 to 1) drops weaker hits;
conversation_id limits the search to one conversation of the user (AM030 if it is not one).
k: 1 to 1,000 (AM020); AM010/AM011 for a bad query embedding or model, as for store_message.';

create or replace function agentmem.context_window(
    message_id uuid,
    before int default 3,
    after int default 3
) returns setof agentmem.message_row
language plpgsql
stable
security invoker
set search_path from current
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_conversation uuid;
    v_index int;
begin
    perform agentmem._check_range('before', context_window.before, 0, 100);
    perform agentmem._check_range('after', context_window.after, 0, 100);
    select m.conversation_id, m.message_index into v_conversation, v_index
    from agentmem.messages as m
    where m.tenant_id = v_tenant and m.message_id = context_window.message_id;
    if not found then
        raise exception 'message % not found', coalesce(context_window.message_id::text, 'NULL')
        using
            errcode = 'AM030',
            detail = 'It does not exist in the current tenant.',
            hint = 'Pass a message_id returned by search_messages or store_message.';
    end if;
    return query
    select m.message_id, m.conversation_id, m.message_index, m.role, m.content, m.metadata, m.created_at
    from agentmem.messages as m
    where
        m.tenant_id = v_tenant and m.conversation_id = v_conversation
        and m.message_index between v_index - context_window.before and v_index + context_window.after
    order by m.message_index;
end
$$;

comment on function agentmem.context_window(uuid, int, int) is
'The messages around one message of its conversation, in order: message_index between
index - before and index + after (fewer at the start and end of the conversation).
before, after: 0 to 100 (AM020). AM030 for a message not in the current tenant.';

create or replace function agentmem.search_with_context(
    user_id text,
    query_embedding vector,
    k int default 3,
    radius int default 3,
    model text default null,
    conversation_id uuid default null,
    min_similarity real default null
) returns setof agentmem.message_in_window
language plpgsql
stable
security invoker
set search_path from current
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_ids uuid[];
    v_conversations uuid[];
    v_indexes int[];
    v_similarities real[];
begin
    perform agentmem._check_range('radius', search_with_context.radius, 0, 100);
    -- The hits first, on their own: Citus sends the windows' query whole to the
    -- tenant's worker, where a call of search_messages inside it could not run.
    select array_agg(h.message_id), array_agg(h.conversation_id), array_agg(h.message_index), array_agg(h.similarity)
    into v_ids, v_conversations, v_indexes, v_similarities
    from agentmem.search_messages(
        user_id => search_with_context.user_id,
        query_embedding => search_with_context.query_embedding,
        k => search_with_context.k,
        conversation_id => search_with_context.conversation_id,
        min_similarity => search_with_context.min_similarity,
        model => search_with_context.model
    ) as h;
    return query
    with hits as materialized (
        select u.message_id, u.conversation_id, u.message_index, u.similarity
        from unnest(v_ids, v_conversations, v_indexes, v_similarities)
            as u (message_id, conversation_id, message_index, similarity)
    ),

    spans as (
        select
            h.conversation_id,
            h.similarity,
            greatest(h.message_index - search_with_context.radius, 0) as lo,
            h.message_index + search_with_context.radius as hi
        from hits as h
    ),

    -- gaps and islands: a span starts a new window unless it overlaps or
    -- touches a previous span of the same conversation
    marked as (
        select
            s.*,
            case
                when s.lo <= max(s.hi) over (
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
            sum(mk.starts) over (partition by mk.conversation_id order by mk.lo, mk.hi) as grp
        from marked as mk
    ),

    windows as (
        select g.conversation_id, min(g.lo) as lo, max(g.hi) as hi, max(g.similarity) as best
        from grouped as g
        group by g.conversation_id, g.grp
    ),

    ranked as (
        select
            w.*,
            (row_number() over (order by w.best desc, w.conversation_id, w.lo))::int as wrank
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
        r.best
    from ranked as r
    inner join agentmem.messages as m
        on
            m.tenant_id = v_tenant and m.conversation_id = r.conversation_id
            and m.message_index between r.lo and r.hi
    left join hits as h on h.message_id = m.message_id
    order by r.wrank, m.message_index;
end
$$;

comment on function agentmem.search_with_context(text, vector, int, int, text, uuid, real) is
'search_messages, each of the top-k hits expanded to the messages within radius of it, in one call.
Windows of one conversation that overlap or touch are merged into one, so no message appears twice.
One row per message: window_rank (1 = the window with the best hit), is_hit and the hit''s similarity,
window_similarity (its best hit). Rows come by window_rank, then message_index.
radius: 0 to 100 (AM020); k and the rest as for search_messages.';
