-- Conversation memory, search: the user's similar past messages through the
-- per-model HNSW index (pgvector iterative scans), and hits expanded to their
-- context windows. Limits as documented at the top of sql/20_conversations.sql.

create or replace function agentmem_private.nearest_messages(
    p_tenant text,
    p_user_id text,
    p_model text,
    p_dim int,
    p_embedding vector,
    p_k int,
    p_conversation_id uuid default null
) returns table (message_id uuid, distance float8)
language plpgsql
stable
security invoker
set search_path from current
set "hnsw.iterative_scan" = 'relaxed_order'
set "hnsw.ef_search" = 1000
set enable_sort = off
as $$
declare
    v_exact_max int := agentmem_private.exact_search_max_rows(p_dim);
    v_filter text := case when p_conversation_id is null then '' else 'and e.conversation_id = $4' end;
    v_tenant_filter text;
    v_rows int;
    v_ids uuid[];
    v_distances float8[];
begin
    -- How many candidates, counted through the B-tree on (tenant, user, model)
    -- no further than the exact-scan limit.
    execute pg_catalog.format(
        'select count(*) from (select from agentmem.message_embeddings as e '
        'where e.tenant_id = $2 and e.user_id = $3 and e.model = %L %s limit $6) as s',
        p_model, v_filter
    )
    into v_rows
    using p_embedding, p_tenant, p_user_id, p_conversation_id, p_k, v_exact_max + 1;

    if v_rows > v_exact_max then
        -- An HNSW index: the tenant's own (its predicate names the tenant, so
        -- the tenant goes into the statement as a literal for the planner to
        -- prove it), else the model's shared one (model as a literal, same
        -- reason). Same distance expression as the index; the iterative scan
        -- (relaxed order) goes on until enough rows pass the user filter; sorts
        -- are disabled here so that the planner keeps to the index. The scan
        -- asks for k + 20 rows and keeps the k nearest: relaxed order hands
        -- rows back roughly, not exactly, nearest first.
        v_tenant_filter := case
            when agentmem_private.has_tenant_index('message_embeddings', p_tenant, p_model)
                then pg_catalog.format('e.tenant_id = %L', p_tenant)
            else 'e.tenant_id = $2'
        end;
        execute pg_catalog.format(
            'select (array_agg(h.message_id order by h.distance))[1:$5], (array_agg(h.distance order by h.distance))[1:$5] '
            'from (select e.message_id, e.embedding::vector(%1$s) <=> $1::vector(%1$s) as distance '
            '      from agentmem.message_embeddings as e '
            '      where %4$s and e.user_id = $3 and e.model = %2$L %3$s '
            '      order by e.embedding::vector(%1$s) <=> $1::vector(%1$s) limit $5 + 20) as h',
            p_dim, p_model, v_filter, v_tenant_filter
        )
        into v_ids, v_distances
        using p_embedding, p_tenant, p_user_id, p_conversation_id, p_k;
    end if;
    if v_rows <= v_exact_max or coalesce(cardinality(v_ids), 0) < p_k then
        -- Few candidates (or an index scan that gave up at hnsw.max_scan_tuples):
        -- an exact scan. Its distance expression does not match the index.
        execute pg_catalog.format(
            'select array_agg(h.message_id order by h.distance), array_agg(h.distance order by h.distance) '
            'from (select e.message_id, e.embedding <=> $1 as distance '
            '      from agentmem.message_embeddings as e '
            '      where e.tenant_id = $2 and e.user_id = $3 and e.model = %L %s '
            '      order by 2 limit $5) as h',
            p_model, v_filter
        )
        into v_ids, v_distances
        using p_embedding, p_tenant, p_user_id, p_conversation_id, p_k;
    end if;
    return query select h.message_id, h.distance from unnest(v_ids, v_distances) as h (message_id, distance);
end
$$;

comment on function agentmem_private.nearest_messages(text, text, text, int, vector, int, uuid) is
'Internal: the vector branch of message search. The user''s p_k nearest message embeddings of one model
(ids and cosine distances, nearest first): at or below agentmem.exact_search_max_rows candidates an
exact scan; above it the tenant''s own HNSW index when it has one (agentmem.create_tenant_index),
else the model''s shared HNSW index, with iterative scans; an exact scan when the index stops short.';

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
security definer
set search_path from current
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_model text := coalesce(search_messages.model, agentmem_private.default_model());
    v_dim int;
begin
    perform agentmem_private.check_user_id(search_messages.user_id);
    perform agentmem_private.check_range('k', search_messages.k, 1, 1000);
    if search_messages.min_similarity not between -1 and 1 or search_messages.min_similarity = 'NaN' then
        raise exception 'min_similarity must be between -1 and 1, got %', search_messages.min_similarity
        using errcode = 'AM020', hint = 'It is a cosine similarity; NULL means no threshold.';
    end if;
    v_dim := agentmem_private.check_embedding(v_model, search_messages.query_embedding);
    if search_messages.conversation_id is not null and not exists (
        select from agentmem.conversations as c
        where
            c.tenant_id = v_tenant and c.conversation_id = search_messages.conversation_id
            and c.user_id = search_messages.user_id
    ) then
        perform agentmem_private.conv_not_found(search_messages.conversation_id);
    end if;

    return query
    select
        m.message_id, m.conversation_id, m.message_index, m.role, m.content, m.metadata, m.created_at,
        (1 - h.distance)::real
    from agentmem_private.nearest_messages(
        v_tenant, search_messages.user_id, v_model, v_dim, search_messages.query_embedding,
        search_messages.k, search_messages.conversation_id
    ) as h
    inner join agentmem.messages as m on m.tenant_id = v_tenant and m.message_id = h.message_id
    where search_messages.min_similarity is null or 1 - h.distance >= search_messages.min_similarity
    order by h.distance, m.message_id;
end
$$;

comment on function agentmem.search_messages(text, vector, int, uuid, real, text) is
'The user''s k past messages most similar to query_embedding, in the current tenant, most similar first.
Returns k rows whenever k matching rows exist, however small the tenant is beside the others:
up to agentmem.exact_search_max_rows candidates (a setting; by default 4,608,000 / dimension, i.e.
6,000 rows at 768 dimensions, 12,000 at 384) an exact scan of the user''s messages; above it the
tenant''s own HNSW index when a DBA built one (agentmem.create_tenant_index), else the model''s shared
HNSW index, with pgvector iterative scans, and an exact scan should the index stop short of k rows.
similarity is cosine similarity (1 = same direction); min_similarity (-1 to 1) drops weaker hits;
conversation_id limits the search to one conversation of the user (AM030 if it is not one).
k: 1 to 1,000 (AM020); AM010/AM011 for a bad query embedding or model, as for store_message.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.';

create or replace function agentmem.context_window(
    message_id uuid,
    before int default 3,
    after int default 3
) returns setof agentmem.message_row
language plpgsql
stable
security definer
set search_path from current
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_conversation uuid;
    v_index int;
begin
    perform agentmem_private.check_range('before', context_window.before, 0, 100);
    perform agentmem_private.check_range('after', context_window.after, 0, 100);
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
before, after: 0 to 100 (AM020). AM030 for a message not in the current tenant.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.';

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
security definer
set search_path from current
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
begin
    perform agentmem_private.check_range('radius', search_with_context.radius, 0, 100);
    return query
    with hits as materialized (
        select h.message_id, h.conversation_id, h.message_index, h.similarity
        from agentmem.search_messages(
            user_id => search_with_context.user_id,
            query_embedding => search_with_context.query_embedding,
            k => search_with_context.k,
            conversation_id => search_with_context.conversation_id,
            min_similarity => search_with_context.min_similarity,
            model => search_with_context.model
        ) as h
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
radius: 0 to 100 (AM020); k and the rest as for search_messages.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.';
