-- Conversation memory: conversations, messages written with their embedding in
-- one statement, tenant-scoped vector search, context windows, the short-term
-- window with a running summary.
--
-- Documented limits (checked by every function, AM020 out of range, AM021 too large):
--   user_id             1 .. 256 characters
--   title               at most 1,000 characters (AM021)
--   content, summary    1 .. 100,000 characters, not blank: whitespace of any kind only (AM021 above)
--   metadata            a JSON object of at most 100,000 characters as text (AM021), 32 levels deep
--   arrays              one-dimensional, lower bound 1 (AM020)
--   messages per batch  1 .. 1,000 (store_messages_max(); AM020), and at most 10,000,000 characters of
--                       contents and metadata in all (store_messages_max_chars(); AM021)
--   k, n                1 .. 1,000
--   before, after, radius  0 .. 100
--   keep_last           0 .. 1,000
--   min_similarity      -1 .. 1 (cosine similarity)
--   occurred_at         finite, at most 1 day after now(); within a conversation never earlier than
--                       the message before it (AM020)

-- Signatures and result types of older installs: store_message(s) without
-- occurred_at, recent_messages without since/until, short_term_context
-- without occurred_at in its rows.
-- (Id arguments are anycompatible: a malformed id is AM020 naming it, see
-- agentmem_private.uuid_arg.)
drop function if exists agentmem.store_messages(uuid, text[], text[], vector[], text, jsonb[]);
drop function if exists agentmem.store_messages(anycompatible, text[], text[], vector[], text, jsonb[]);
drop function if exists agentmem.store_message(uuid, text, text, vector, text, jsonb);
drop function if exists agentmem.store_message(anycompatible, text, text, vector, text, jsonb);
drop function if exists agentmem.recent_messages(uuid, int);
drop function if exists agentmem.recent_messages(anycompatible, int);
drop function if exists agentmem.short_term_context(uuid, int);
do $$
begin
    if exists (
        select from pg_catalog.pg_proc as p
        where
            p.oid = pg_catalog.to_regprocedure('agentmem.short_term_context(anycompatible, int)')
            and not 'occurred_at' = any(p.proargnames)
    ) then
        drop function agentmem.short_term_context(anycompatible, int);
    end if;
end
$$;

create or replace function agentmem_private.store_messages_max()
returns int
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$ select 1000 $$;

comment on function agentmem_private.store_messages_max() is
'Internal: the most messages one store_messages call takes: 1,000 (each message''s vector goes into the
model''s HNSW index in the call, about 1 ms apiece; docs/limits.md).';

create or replace function agentmem_private.store_messages_max_chars()
returns bigint
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$ select 10000000::bigint $$;

comment on function agentmem_private.store_messages_max_chars() is
'Internal: the most characters of contents and metadata (as text) one store_messages call takes:
10,000,000 (docs/limits.md).';

create or replace function agentmem_private.check_role(p_what text, p_role text)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_role is null or p_role not in ('user', 'assistant', 'tool', 'system') then
        raise exception '%unknown role %', p_what, coalesce(pg_catalog.quote_literal(p_role), 'NULL')
        using errcode = 'AM020', hint = 'role is one of user, assistant, tool, system.';
    end if;
end
$$;

comment on function agentmem_private.check_role(text, text) is
'Internal: AM020 unless a message''s role is one of user, assistant, tool, system (p_what: a prefix for
the message, e.g. ''message 3: '').';

create or replace function agentmem_private.check_title(p_title text)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if pg_catalog.length(p_title) > 1000 then
        raise exception 'title is too large: % characters, the limit is 1000', pg_catalog.length(p_title)
        using errcode = 'AM021';
    end if;
end
$$;

comment on function agentmem_private.check_title(text) is
'Internal: AM021 for a conversation title over 1,000 characters (NULL: no title).';

create or replace function agentmem_private.check_occurred_at(p_what text, p_at timestamptz)
returns void
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_at is null then
        raise exception '%occurred_at is NULL', p_what
        using
            errcode = 'AM020',
            detail = 'A batch gives a time for every message or for none.',
            hint = 'Pass occurred_at => NULL for the whole batch to store its messages as happening now.';
    end if;
    if not pg_catalog.isfinite(p_at) or p_at > pg_catalog.now() + interval '1 day' then
        raise exception '%occurred_at % is not a time a message can have happened', p_what, p_at
        using
            errcode = 'AM020',
            detail = 'occurred_at must be finite and at most 1 day after the current time.',
            hint = 'Pass when the message was said, with its time zone (e.g. 2023-05-08 13:56:00+00).';
    end if;
end
$$;

comment on function agentmem_private.check_occurred_at(text, timestamptz) is
'Internal: raise AM020 for an occurred_at that is NULL, infinite or more than 1 day after now().';

create or replace function agentmem_private.conv_not_found(p_conversation_id uuid)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    raise exception 'conversation % not found', coalesce(p_conversation_id::text, 'NULL')
    using
        errcode = 'AM030',
        detail = 'It does not exist in the current tenant.',
        hint = 'Start one with agentmem.start_conversation(user_id => ...), and check the tenant.';
end
$$;

comment on function agentmem_private.conv_not_found(uuid) is
'Internal: raise AM030 for a conversation that is not in the current tenant (never saying whether '
'it exists elsewhere).';

create or replace function agentmem_private.check_conversation_of_user(
    p_tenant text, p_conversation_id uuid, p_user_id text
)
returns void
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_owner text;
begin
    select c.user_id into v_owner
    from agentmem.conversations as c
    where c.tenant_id = p_tenant and c.conversation_id = p_conversation_id;
    if not found then
        perform agentmem_private.conv_not_found(p_conversation_id);
    end if;
    if v_owner <> p_user_id then
        raise exception 'conversation % is not a conversation of user %', p_conversation_id, pg_catalog.quote_literal(p_user_id)
        using
            errcode = 'AM030',
            detail = 'It belongs to another user of the current tenant.',
            hint = 'Pass a conversation that start_conversation returned for this user_id, or leave conversation_id out.';
    end if;
end
$$;

comment on function agentmem_private.check_conversation_of_user(text, uuid, text) is
'Internal: raise AM030 for a conversation that is not in the current tenant, or that is another '
'user''s (saying so).';

create or replace function agentmem.start_conversation(
    user_id text,
    title text default null,
    metadata jsonb default '{}'
) returns uuid
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_id uuid;
begin
    perform agentmem_private.check_user_id(start_conversation.user_id);
    perform agentmem_private.lock_user(v_tenant, start_conversation.user_id, false);
    perform agentmem_private.check_title(start_conversation.title);
    insert into agentmem.conversations as c (tenant_id, user_id, title, metadata)
    values (
        v_tenant, start_conversation.user_id, start_conversation.title,
        agentmem_private.check_metadata('metadata', start_conversation.metadata)
    )
    returning c.conversation_id into v_id;
    return v_id;
end
$$;

comment on function agentmem.start_conversation(text, text, jsonb) is
'Start a conversation of a user in the current tenant; returns its id.
user_id: 1 to 256 characters (AM020); title: at most 1,000 characters (AM021);
metadata: a JSON object (AM020) of at most 100,000 characters (AM021), nested at most 32 levels (AM020).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem_private.index_later(p_pending int, p_n int)
returns boolean
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_setting text := pg_catalog.lower(pg_catalog.btrim(coalesce(pg_catalog.current_setting('agentmem.index_later', true), '')));
begin
    if p_n = 0 or v_setting in ('', 'off', 'false', 'no', '0') then
        return false;
    elsif v_setting not in ('on', 'true', 'yes', '1') then
        raise exception 'agentmem.index_later must be on or off, got %', pg_catalog.quote_literal(pg_catalog.left(v_setting, 100))
        using
            errcode = 'AM020',
            detail = 'It chooses whether a stored message''s vector joins the HNSW index at once (off) or later, moved there by the DBA''s job index_pending_vectors (on).',
            hint = 'Set it to on or off, or reset it (docs/tuning.md).';
    end if;
    -- the conversation's vectors waiting for the index (its pending_vectors):
    -- every search of its user reads them exactly, so past the limit a write
    -- indexes its vectors at once
    return coalesce(p_pending, 0) + p_n
        <= coalesce(nullif(pg_catalog.current_setting('agentmem.index_later_max_rows', true), '')::int, 1000);
end
$$;

comment on function agentmem_private.index_later(int, int) is
'Internal: whether store_messages writes p_n vectors to pending_embedding (the index takes them later):
agentmem.index_later is on (AM020 for a value other than on/off/true/false/yes/no/1/0) and the
conversation''s pending vectors (p_pending, conversations.pending_vectors) stay within
agentmem.index_later_max_rows (default 1,000) with them.';

-- Over 100 lines: the checks of each array and element (each with its own AM code, DETAIL and HINT), then
-- one write under the conversation's lock; the per-element checks are what makes it long.
create or replace function agentmem.store_messages(
    conversation_id anycompatible,
    roles text[],
    contents text[],
    embeddings vector[],
    model text default null,
    metadata jsonb[] default null,
    occurred_at timestamptz[] default null
) returns table (message_id uuid, message_index int)
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
-- to_tsvector's notice of a word over 2,047 characters would carry the whole insert as its context
set client_min_messages = warning
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_conversation_id uuid := agentmem_private.uuid_arg('conversation_id', store_messages.conversation_id);
    v_model text := coalesce(store_messages.model, agentmem_private.default_model());
    v_n int := coalesce(pg_catalog.cardinality(store_messages.roles), 0);
    v_vector_schema text;   -- pgvector's schema, for a batch's literals (read there only)
    v_what text;
    v_first int;
    v_user text;
    v_ids uuid[];
    v_tsv tsvector;         -- one message's words, as its insert returned them (BM25's counts)
    v_later boolean;        -- the vectors go to pending_embedding (agentmem.index_later)
    v_pending int;          -- the conversation's vectors waiting for the index
    v_from int;
    v_to int;
    v_dim int;
    v_queued int[];
    v_jobs text[];
    v_times timestamptz[];
    v_last timestamptz;
    v_max int := agentmem_private.store_messages_max();
    v_chars bigint;
    v_lens int[];
    v_piece bigint;
begin
    if v_conversation_id is null then
        perform agentmem_private.conv_not_found(null);
    end if;
    -- Element i of each array is the i-th that unnest reads only when every
    -- array is one-dimensional and starts at 1.
    -- One statement for the five (left to right: the first bad array raises).
    perform
        agentmem_private.check_array('roles', store_messages.roles, v_max),
        agentmem_private.check_array('contents', store_messages.contents, v_max),
        agentmem_private.check_array('embeddings', store_messages.embeddings, v_max),
        agentmem_private.check_array('metadata', store_messages.metadata, v_max),
        agentmem_private.check_array('occurred_at', store_messages.occurred_at, v_max);
    if v_n not between 1 and v_max or pg_catalog.array_ndims(store_messages.roles) <> 1 then
        raise exception 'a batch holds 1 to % messages, got %', v_max, v_n
        using errcode = 'AM020', hint = 'Split a larger import into several calls.';
    end if;
    if coalesce(pg_catalog.cardinality(store_messages.contents), 0) <> v_n
        or coalesce(pg_catalog.cardinality(store_messages.embeddings), v_n) <> v_n
        or coalesce(pg_catalog.cardinality(store_messages.metadata), v_n) <> v_n
        or coalesce(pg_catalog.cardinality(store_messages.occurred_at), v_n) <> v_n
        or pg_catalog.array_ndims(store_messages.contents) <> 1 then
        raise exception 'roles, contents, embeddings (and metadata, occurred_at if given) must be arrays of the same length'
        using
            errcode = 'AM020',
            detail = pg_catalog.format(
                'roles: %s, contents: %s, embeddings: %s, metadata: %s, occurred_at: %s', v_n,
                coalesce(pg_catalog.cardinality(store_messages.contents), 0),
                coalesce(pg_catalog.cardinality(store_messages.embeddings)::text, 'NULL'),
                coalesce(pg_catalog.cardinality(store_messages.metadata)::text, 'NULL'),
                coalesce(pg_catalog.cardinality(store_messages.occurred_at)::text, 'NULL')
            );
    end if;
    -- The call's size, before any message is read: contents and metadata as
    -- text, each message's length kept to cut the inserts into pieces.
    v_lens := array(
        select coalesce(pg_catalog.length(store_messages.contents[g.i]), 0) + coalesce(pg_catalog.length(store_messages.metadata[g.i]::text), 0)
        from pg_catalog.generate_series(1, v_n) as g (i)
        order by g.i
    );
    select pg_catalog.sum(x) into v_chars from pg_catalog.unnest(v_lens) as x;
    if v_chars > agentmem_private.store_messages_max_chars() then
        raise exception 'the batch holds % characters of contents and metadata; the limit is % per call',
            v_chars, agentmem_private.store_messages_max_chars()
        using
            errcode = 'AM021',
            detail = pg_catalog.format('%s messages.', v_n),
            hint = 'Split the batch into several calls (docs/limits.md).';
    end if;
    -- The model's dimension; get_model raises AM011 for an unknown model.
    select m.dimension into v_dim from agentmem.models as m where m.model = v_model;
    if not found then
        v_dim := (agentmem.get_model(v_model)).dimension;
    end if;
    for i in 1..v_n loop
        v_what := case when v_n = 1 then '' else pg_catalog.format('message %s: ', i) end;
        -- One statement for the four, in this order. No vector: the message
        -- is queued for the workers (below).
        perform
            agentmem_private.check_role(v_what, store_messages.roles[i]),
            agentmem_private.check_text(v_what || 'content', store_messages.contents[i], 100000),
            case when store_messages.embeddings[i] is not null then
                agentmem_private.check_embedding_of(v_model, v_dim, store_messages.embeddings[i])
            end,
            agentmem_private.check_metadata(v_what || 'metadata', store_messages.metadata[i]);
        if store_messages.occurred_at is not null then
            perform agentmem_private.check_occurred_at(v_what, store_messages.occurred_at[i]);
            if i > 1 and store_messages.occurred_at[i] < store_messages.occurred_at[i - 1] then
                raise exception '%occurred_at % is earlier than the message before it (%)',
                    v_what, store_messages.occurred_at[i], store_messages.occurred_at[i - 1]
                using
                    errcode = 'AM020',
                    detail = 'Within a conversation, messages happen in the order of their message_index.',
                    hint = 'Sort the batch by time; messages of one moment may share it.';
            end if;
        end if;
    end loop;

    -- The user's lock (shared) before the conversation's row lock, in the
    -- order forget_user takes them; a conversation's user never changes.
    select c.user_id, c.pending_vectors into v_user, v_pending
    from agentmem.conversations as c
    where c.tenant_id = v_tenant and c.conversation_id = v_conversation_id;
    if not found then
        perform agentmem_private.conv_not_found(v_conversation_id);
    end if;
    perform agentmem_private.lock_user(v_tenant, v_user, false);
    -- With agentmem.index_later on, the vectors wait in pending_embedding
    -- for agentmem.index_pending_vectors (no index insert in this call),
    -- counted on the conversation (read before its row lock: a bound, not a
    -- count two writers keep exact). The messages without a vector are
    -- queued for the workers (below).
    if v_n = 1 then
        v_queued := case when store_messages.embeddings[1] is null then array[1] else '{}'::int[] end;
    else
        v_queued := array(select g.i from pg_catalog.generate_series(1, v_n) as g (i) where store_messages.embeddings[g.i] is null);
    end if;
    v_later := agentmem_private.index_later(v_pending, v_n - pg_catalog.cardinality(v_queued));
    -- The row lock on the conversation serialises writers of one conversation
    -- until commit; a rolled-back insert rolls next_index back with it: no gap.
    update agentmem.conversations as c
    set
        next_index = c.next_index + v_n, updated_at = pg_catalog.now(),
        pending_vectors = c.pending_vectors + case when v_later then v_n - pg_catalog.cardinality(v_queued) else 0 end
    where c.tenant_id = v_tenant and c.conversation_id = v_conversation_id
    returning c.next_index - v_n, c.user_id into v_first, v_user;
    if not found then
        perform agentmem_private.conv_not_found(v_conversation_id);
    end if;
    -- When the messages happened: as given, never before the conversation's
    -- last message; without times, now, or that last message's time if it
    -- is later (an import may reach up to a day ahead).
    select m.occurred_at into v_last
    from agentmem.messages as m
    where
        m.tenant_id = v_tenant and m.conversation_id = v_conversation_id
        and m.message_index = v_first - 1;
    if store_messages.occurred_at is null then
        v_times := pg_catalog.array_fill(greatest(pg_catalog.now(), v_last), array[v_n]);
    else
        if store_messages.occurred_at[1] < v_last then
            raise exception '%occurred_at % is earlier than the conversation''s last message (%, message_index %)',
                case when v_n = 1 then '' else 'message 1: ' end, store_messages.occurred_at[1], v_last, v_first - 1
            using
                errcode = 'AM020',
                detail = 'Within a conversation, messages happen in the order of their message_index.',
                hint = 'Import a history in time order, or into a conversation of its own.';
        end if;
        v_times := store_messages.occurred_at;
    end if;

    if v_n = 1 then
        -- One message (store_message, an agent's every turn): two static
        -- statements, their plans cached for the session, the vector passed
        -- as it came (no text round trip); a one-row VALUES with the tenant's
        -- id routes to its shard on Citus as cache_store's insert does.
        v_ids := array[pg_catalog.gen_random_uuid()];
        insert into agentmem.messages as m (
            tenant_id, message_id, conversation_id, user_id, message_index, role, content, metadata, occurred_at
        ) values (
            v_tenant, v_ids[1], v_conversation_id, v_user, v_first, store_messages.roles[1],
            store_messages.contents[1], coalesce(store_messages.metadata[1], '{}'::jsonb), v_times[1]
        )
        returning m.content_tsv into v_tsv;
        if store_messages.embeddings[1] is not null and v_later then
            insert into agentmem.message_embeddings as e (
                tenant_id, message_id, model, user_id, conversation_id, pending_embedding, occurred_at
            ) values (
                v_tenant, v_ids[1], v_model, v_user, v_conversation_id, store_messages.embeddings[1], v_times[1]
            );
        elsif store_messages.embeddings[1] is not null then
            insert into agentmem.message_embeddings as e (
                tenant_id, message_id, model, user_id, conversation_id, embedding, occurred_at
            ) values (
                v_tenant, v_ids[1], v_model, v_user, v_conversation_id, store_messages.embeddings[1], v_times[1]
            );
        end if;
    else
        -- One multi-row insert per table for each piece of at most 100 messages
        -- and about 1,000,000 characters of contents and metadata (a statement of
        -- about 1 MB: the parser, the plan and an error's context each hold a
        -- copy of it), the values written into it as quoted literals (%L), each cast to its
        -- column's type: Citus routes a VALUES list whose rows all carry the
        -- tenant's id to the tenant's shard as one statement. Not insert ... select from unnest, which Citus runs through
        -- COPY, refused under row-level security; not array parameters subscripted
        -- per row ($2[i]), which Citus copies whole for every reference (a batch
        -- of 100 took 2.5 s).
        v_ids := array(select pg_catalog.gen_random_uuid() from pg_catalog.generate_series(1, v_n));
        v_vector_schema := agentmem_private.vector_schema();
        v_from := 1;
        while v_from <= v_n loop
            v_to := v_from;
            v_piece := v_lens[v_from];
            while v_to < v_n and v_to - v_from < 99 and v_piece + v_lens[v_to + 1] <= 1000000 loop
                v_to := v_to + 1;
                v_piece := v_piece + v_lens[v_to];
            end loop;
            execute 'insert into agentmem.messages '
                || '(tenant_id, message_id, conversation_id, user_id, message_index, role, content, metadata, occurred_at) '
                || 'values '
                || (
                    select pg_catalog.string_agg(pg_catalog.format(
                        '(%L, %L::uuid, %L::uuid, %L, %s, %L, %L, %L::jsonb, %L::timestamptz)',
                        v_tenant, v_ids[g.i], v_conversation_id, v_user, v_first + g.i - 1,
                        store_messages.roles[g.i], store_messages.contents[g.i],
                        coalesce(store_messages.metadata[g.i], '{}'::jsonb), v_times[g.i]
                    ), ', ' order by g.i)
                    from pg_catalog.generate_series(v_from, v_to) as g (i)
                );
            if pg_catalog.cardinality(v_queued) = 0
                or exists (select from pg_catalog.generate_series(v_from, v_to) as g (i) where store_messages.embeddings[g.i] is not null) then
                execute 'insert into agentmem.message_embeddings '
                    || '(tenant_id, message_id, model, user_id, conversation_id, '
                    || case when v_later then 'pending_embedding' else 'embedding' end || ', occurred_at) values '
                    || (
                        select pg_catalog.string_agg(pg_catalog.format(
                            '(%L, %L::uuid, %L, %L, %L::uuid, %L::%I.vector, %L::timestamptz)',
                            v_tenant, v_ids[g.i], v_model, v_user, v_conversation_id, store_messages.embeddings[g.i],
                            v_vector_schema, v_times[g.i]
                        ), ', ' order by g.i)
                        from pg_catalog.generate_series(v_from, v_to) as g (i)
                        where store_messages.embeddings[g.i] is not null
                    );
            end if;
            v_from := v_to + 1;
        end loop;
    end if;
    -- The user's word statistics for BM25 (sql/13_bm25.sql): one message's
    -- words as its insert returned them, a batch's read back per conversation.
    if v_n = 1 then
        perform agentmem_private.count_terms(v_tenant, v_user, v_conversation_id, array[v_tsv], 1);
    else
        perform agentmem_private.count_messages(v_tenant, v_ids, 1);
    end if;
    -- Embedding jobs, in this transaction: for the messages without a vector,
    -- and for every model the tenant is being re-embedded into.
    v_jobs := agentmem_private.embedding_job_models(v_tenant, v_model, pg_catalog.cardinality(v_queued) = 0);
    if pg_catalog.cardinality(v_jobs) > 0 then
        if pg_catalog.cardinality(v_queued) > 0 then
            perform agentmem_private.enqueue_embedding_jobs(
                v_tenant, 'message', array(select v_ids[q] from pg_catalog.unnest(v_queued) as q),
                array(select store_messages.contents[q] from pg_catalog.unnest(v_queued) as q), array[v_model]
            );
        end if;
        perform agentmem_private.enqueue_embedding_jobs(
            v_tenant, 'message', v_ids, store_messages.contents, array(select x from pg_catalog.unnest(v_jobs) as x where x <> v_model)
        );
    end if;
    if v_n = 1 then
        message_id := v_ids[1];
        message_index := v_first;
        return next;
        return;
    end if;
    return query
    select v_ids[g.i], v_first + g.i - 1 from pg_catalog.generate_series(1, v_n) as g (i)
    order by g.i;
end
$$;

comment on function agentmem.store_messages(anycompatible, text[], text[], vector[], text, jsonb[], timestamptz[]) is
'Store a batch of messages (an import) at the end of a conversation, each with its embedding.
roles[i], contents[i], embeddings[i], metadata[i] and occurred_at[i] (optional) describe message i; the messages get
consecutive message_index values in array order. Every array must be one-dimensional with lower
bound 1 (AM020). All or nothing: one bad message stores none.
embeddings may be NULL, or hold NULLs: those messages are stored, found by words at once, and queued
for the embedding workers in the same transaction (agentmem worker; agentmem.embedding_backlog); a
search by meaning finds them once their vector has come.
Returns (message_id, message_index) per message, in order. 1 to 1,000 messages per call (AM020), of at
most 10,000,000 characters of contents and metadata (as text) in all (AM021; docs/limits.md);
see store_message for the checks of each message and the rule of occurred_at. occurred_at: NULL (the
batch happens now) or a time for every message (a NULL element: AM020), in the order of the batch
(a time earlier than the one before it: AM020). AM030 for a conversation not in the current tenant.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.store_message(
    conversation_id anycompatible,
    role text,
    content text,
    embedding vector default null,
    model text default null,
    metadata jsonb default '{}',
    occurred_at timestamptz default null
) returns table (message_id uuid, message_index int)
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    -- PL/pgSQL, not SQL: the statement's plan is kept for the session
    -- (PostgreSQL before 18 plans a SQL function's body at every call).
    return query
    select s.message_id, s.message_index
    from agentmem.store_messages(
        conversation_id => store_message.conversation_id,
        roles => array[store_message.role],
        contents => array[store_message.content],
        embeddings => array[store_message.embedding],
        model => store_message.model,
        metadata => array[store_message.metadata],
        occurred_at => case when store_message.occurred_at is not null then array[store_message.occurred_at] end
    ) as s;
end
$$;

comment on function agentmem.store_message(anycompatible, text, text, vector, text, jsonb, timestamptz) is
'Append a message and its embedding to a conversation, in one statement; returns its id and index.
A message is never searchable half-written, and a rejected message stores nothing.
embedding => NULL (the default: leave it out) stores the message without a vector: it is found by words (query_text) at once and
an embedding job is queued in the same transaction; once a worker (agentmem worker) has embedded it
with the model''s document prefix, it is found by meaning exactly as if the vector had been passed.
message_index counts up per conversation (0, 1, 2, ...) under concurrent writers, never reused: a
message deleted by delete_message leaves a gap.
occurred_at: when the message happened, for imported history (what since/until of the searches bound
and every result reports; created_at stays the time agentmem stored it, by which retention measures
age). NULL: now, or the conversation''s last message''s time if that is later. Given: finite and at
most 1 day after now(), and never earlier than the conversation''s last message (AM020). A time
zone-less text (''2023-05-08 10:00'') is read in the session''s TimeZone, as PostgreSQL reads any
timestamptz; the Python driver refuses a naive datetime.
Errors: AM030 conversation not in the current tenant; AM020 role not one of user, assistant, tool,
system, or NULL/blank content (whitespace of any kind only), or metadata that is not a JSON object
or is nested more than 32 levels deep; AM021 content over 100,000 characters or metadata over 100,000;
AM011 unknown model (default: agentmem_private.default_model()); AM010 wrong-dimension
embedding, or one whose norm is zero, subnormal or not finite in float32; 22000 (from pgvector) NaN or
infinite components.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.recent_messages(
    conversation_id anycompatible,
    n int default 20,
    since timestamptz default null,
    until timestamptz default null
) returns setof agentmem.message_row
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_conversation_id uuid := agentmem_private.uuid_arg('conversation_id', recent_messages.conversation_id);
begin
    perform agentmem_private.check_range('n', recent_messages.n, 1, 1000);
    if not exists (
        select from agentmem.conversations as c
        where c.tenant_id = v_tenant and c.conversation_id = v_conversation_id
    ) then
        perform agentmem_private.conv_not_found(v_conversation_id);
    end if;
    perform agentmem_private.check_window(recent_messages.since, recent_messages.until);
    return query
    select r.message_id, r.conversation_id, r.message_index, r.role, r.content, r.metadata, r.created_at, r.occurred_at
    from (
        select m.*
        from agentmem.messages as m
        where
            m.tenant_id = v_tenant and m.conversation_id = v_conversation_id
            and (recent_messages.since is null or m.occurred_at >= recent_messages.since)
            and (recent_messages.until is null or m.occurred_at < recent_messages.until)
        order by m.message_index desc
        limit recent_messages.n
    ) as r
    order by r.message_index;
end
$$;

comment on function agentmem.recent_messages(anycompatible, int, timestamptz, timestamptz) is
'The last n messages of a conversation (the short-term window), oldest first.
Each has occurred_at (when it happened) and created_at (when it was stored). since / until: only messages with
occurred_at >= since and < until (inclusive since, exclusive until; either NULL: unbounded on that
side; since not before until: AM020), the last n of those.
n: 1 to 1,000 (AM020). AM030 for a conversation not in the current tenant.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

drop function if exists agentmem.set_summary(uuid, text, int);

create or replace function agentmem.set_summary(
    conversation_id anycompatible,
    summary text,
    through_index int
) returns void
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_conversation_id uuid := agentmem_private.uuid_arg('conversation_id', set_summary.conversation_id);
    v_row agentmem.conversations;
begin
    perform agentmem_private.check_text('summary', set_summary.summary, 100000);
    select * into v_row
    from agentmem.conversations as c
    where c.tenant_id = v_tenant and c.conversation_id = v_conversation_id
    for update;
    if not found then
        perform agentmem_private.conv_not_found(v_conversation_id);
    end if;
    if set_summary.through_index is null or set_summary.through_index not between 0 and v_row.next_index - 1 then
        raise exception 'through_index must be the index of a message of the conversation (0 to %), got %',
            v_row.next_index - 1, coalesce(set_summary.through_index::text, 'NULL')
        using errcode = 'AM020', hint = 'Pass the message_index of the last message the summary covers.';
    end if;
    if set_summary.through_index < v_row.summary_through then
        raise exception 'the stored summary already covers messages through %; this one only through %',
            v_row.summary_through, set_summary.through_index
        using
            errcode = 'AM031',
            detail = 'A running summary only moves forward, so a slow summariser cannot overwrite a newer one.',
            hint = 'Summarise again from the stored summary (short_term_context returns it).';
    end if;
    update agentmem.conversations as c
    set summary = set_summary.summary, summary_through = set_summary.through_index, updated_at = pg_catalog.now()
    where c.tenant_id = v_tenant and c.conversation_id = v_conversation_id;
end
$$;

comment on function agentmem.set_summary(anycompatible, text, int) is
'Store the running summary of a conversation: it covers the messages with message_index <= through_index.
summary: 1 to 100,000 characters (AM020/AM021); through_index: an index the conversation has (AM020),
not below the stored summary''s (AM031: a summary only moves forward). AM030 for a conversation not
in the current tenant.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.short_term_context(
    conversation_id anycompatible,
    keep_last int default 6
) returns table (
    kind text,
    message_id uuid,
    message_index int,
    role text,
    content text,
    metadata jsonb,
    created_at timestamptz,
    occurred_at timestamptz
)
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_conversation_id uuid := agentmem_private.uuid_arg('conversation_id', short_term_context.conversation_id);
    v_row agentmem.conversations;
begin
    perform agentmem_private.check_range('keep_last', short_term_context.keep_last, 0, 1000);
    select * into v_row
    from agentmem.conversations as c
    where c.tenant_id = v_tenant and c.conversation_id = v_conversation_id;
    if not found then
        perform agentmem_private.conv_not_found(v_conversation_id);
    end if;
    return query
    select x.kind, x.message_id, x.message_index, x.role, x.content, x.metadata, x.created_at, x.occurred_at
    from (
        select
            0 as part, 'summary'::text as kind, null::uuid as message_id, v_row.summary_through as message_index,
            'system'::text as role, v_row.summary as content, '{}'::jsonb as metadata,
            v_row.updated_at as created_at,
            (
                select m.occurred_at from agentmem.messages as m
                where
                    m.tenant_id = v_tenant and m.conversation_id = v_conversation_id
                    and m.message_index = v_row.summary_through
            ) as occurred_at
        where v_row.summary is not null
        union all
        select 1, 'message', m.message_id, m.message_index, m.role, m.content, m.metadata, m.created_at, m.occurred_at
        from agentmem.messages as m
        where
            m.tenant_id = v_tenant and m.conversation_id = v_conversation_id
            and m.message_index >= v_row.next_index - short_term_context.keep_last
    ) as x
    order by x.part, x.message_index;
end
$$;

comment on function agentmem.short_term_context(anycompatible, int) is
'What to put in the prompt: the running summary, then the last keep_last messages verbatim.
The summary is a first row of kind ''summary'', role system, message_index = the last index it covers; the messages are rows of kind ''message'', oldest first.
Each row has occurred_at, when it happened (the summary row: that of the last message it covers), for a
prompt to date the messages where a history spans days. The summary row is absent until set_summary is
called. When the summary''s
message_index + 1 is below the first message''s index, the messages between are in neither: time
to summarise again. keep_last: 0 to 1,000 (AM020). AM030 for a conversation not in the current tenant.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';
