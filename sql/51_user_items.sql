-- A user's memory item by item: list a user's conversations and facts (keyset
-- pages, newest first), delete one message or one fact, correct one fact. Every
-- deletion and correction leaves a receipt in agentmem.access_log (kind, actor,
-- rows per table, when; no content, no identifier).

create or replace function agentmem_private.access_receipt(p_tenant text, p_kind text, p_rows jsonb)
returns agentmem.access_log
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_row agentmem.access_log;
begin
    insert into agentmem.access_log as a (tenant_id, kind, rows_affected)
    values (p_tenant, p_kind, p_rows)
    returning * into v_row;
    return v_row;
end
$$;

comment on function agentmem_private.access_receipt(text, text, jsonb) is
'Internal: write and return an access-log receipt (export, import, single-item deletion or correction).';

create or replace function agentmem_private.page_cursor(p_at timestamptz, p_id uuid, p_seq bigint default null)
returns text
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select
        ((extract(epoch from p_at) * 1000000)::bigint)::text || '.' || p_id::text
        || coalesce('.' || p_seq::text, '')
$$;

comment on function agentmem_private.page_cursor(timestamptz, uuid, bigint) is
'Internal: the keyset cursor of a listed row: microseconds since the epoch, the id, and (facts with '
'their history) the row''s place among its fact''s versions. Opaque to callers.';

create or replace function agentmem_private.parse_cursor(p_cursor text, p_with_seq boolean)
returns table (at timestamptz, id uuid, seq bigint)
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_parts text[];
begin
    if p_cursor is null then
        return query select 'infinity'::timestamptz, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid,
            9223372036854775807::bigint;
        return;
    end if;
    v_parts := pg_catalog.regexp_match(
        p_cursor,
        case
            when p_with_seq then '^(-?[0-9]{1,18})\.([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.([0-9]{1,19})$'
            else '^(-?[0-9]{1,18})\.([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})()$'
        end
    );
    if v_parts is null or (p_with_seq and v_parts[3]::numeric > 9223372036854775807) then
        raise exception 'after is not a cursor this function returned: %', pg_catalog.left(p_cursor, 100)
        using
            errcode = 'AM020',
            hint = 'Pass the cursor column of the last row of the previous page, or leave after out for the first page.';
    end if;
    return query select
        'epoch'::timestamptz + v_parts[1]::bigint * interval '1 microsecond',
        v_parts[2]::uuid,
        case when p_with_seq then v_parts[3]::bigint end;
end
$$;

comment on function agentmem_private.parse_cursor(text, boolean) is
'Internal: the parts of a keyset cursor (page_cursor); NULL means before the first row. AM020 for a malformed one.';

create or replace function agentmem.list_conversations(
    user_id text,
    after text default null,
    page_size int default 100
) returns table (
    conversation_id uuid,
    title text,
    metadata jsonb,
    message_count bigint,
    first_message_at timestamptz,
    last_message_at timestamptz,
    summary text,
    summary_through int,
    created_at timestamptz,
    updated_at timestamptz,
    cursor text
)
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_after record;
begin
    perform agentmem_private.check_user_id(list_conversations.user_id);
    perform agentmem_private.check_range('page_size', list_conversations.page_size, 1, 1000);
    select * into v_after from agentmem_private.parse_cursor(list_conversations.after, false);
    return query
    select
        c.conversation_id, c.title, c.metadata, coalesce(s.n, 0), s.first_at, s.last_at, c.summary,
        c.summary_through, c.created_at, c.updated_at,
        agentmem_private.page_cursor(c.created_at, c.conversation_id)
    from (
        select cc.*
        from agentmem.conversations as cc
        where
            cc.tenant_id = v_tenant and cc.user_id = list_conversations.user_id
            and (cc.created_at, cc.conversation_id) < (v_after.at, v_after.id)
        order by cc.created_at desc, cc.conversation_id desc
        limit list_conversations.page_size
    ) as c
    left join lateral (
        select pg_catalog.count(*) as n, pg_catalog.min(m.created_at) as first_at, pg_catalog.max(m.created_at) as last_at
        from agentmem.messages as m
        where m.tenant_id = v_tenant and m.conversation_id = c.conversation_id
    ) as s on true
    order by c.created_at desc, c.conversation_id desc;
end
$$;

comment on function agentmem.list_conversations(text, text, int) is
'One page of a user''s conversations in the current tenant, newest first, each with its messages'' count and times and its summary.
Each: id, title, metadata, how many messages, the first and last message''s time, the running summary (and the message_index it covers).
Keyset pages: pass the cursor of the last row as after for the next page (NULL: the first page). Pages
are stable under concurrent writes: a conversation started meanwhile is newer than the cursor and never
shifts a later page, so no row is listed twice or skipped.
page_size: 1 to 1,000 (AM020); AM020 for a blank user_id or one over 256 characters, or an after that
is not a cursor. A user with no conversations gets no rows.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.list_facts(
    user_id text,
    include_superseded boolean default false,
    after text default null,
    page_size int default 100
) returns table (
    fact_id uuid,
    subject text,
    fact text,
    model text,
    source_message_ids uuid[],
    status text,
    valid_from timestamptz,
    valid_to timestamptz,
    recorded_at timestamptz,
    replaced_at timestamptz,
    created_at timestamptz,
    cursor text,
    pinned_at timestamptz,
    use_count bigint,
    last_used_at timestamptz
)
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_after record;
    v_current constant bigint := 9223372036854775807;
begin
    perform agentmem_private.check_user_id(list_facts.user_id);
    perform agentmem_private.check_range('page_size', list_facts.page_size, 1, 1000);
    if list_facts.include_superseded is null then
        raise exception 'include_superseded must be true or false' using errcode = 'AM020';
    end if;
    select * into v_after from agentmem_private.parse_cursor(list_facts.after, list_facts.include_superseded);
    return query
    with f as (
        -- the cursor's own fact (its older versions may follow) and the next page_size facts
        select ff.*
        from agentmem.facts as ff
        where
            ff.tenant_id = v_tenant and ff.user_id = list_facts.user_id and list_facts.include_superseded
            and ff.created_at = v_after.at and ff.fact_id = v_after.id
        union all
        (
            select ff.*
            from agentmem.facts as ff
            where
                ff.tenant_id = v_tenant and ff.user_id = list_facts.user_id
                and (ff.created_at, ff.fact_id) < (v_after.at, v_after.id)
            order by ff.created_at desc, ff.fact_id desc
            limit list_facts.page_size
        )
    ),
    versions as (
        select
            f.fact_id, f.subject, f.fact, f.model, f.source_message_ids, 'current'::text as status,
            f.valid_from, f.valid_to, f.updated_at as recorded_at, null::timestamptz as replaced_at,
            f.created_at, v_current as seq, f.pinned_at, f.use_count, f.last_used_at
        from f
        union all
        select
            h.fact_id, h.subject, h.fact, f.model, h.source_message_ids, h.change,
            h.valid_from, h.valid_to, h.recorded_at, h.replaced_at, f.created_at, h.history_id,
            null::timestamptz, null::bigint, null::timestamptz
        from f
        join agentmem.fact_history as h on h.tenant_id = v_tenant and h.fact_id = f.fact_id
        where list_facts.include_superseded
    )
    select
        v.fact_id, v.subject, v.fact, v.model, v.source_message_ids, v.status, v.valid_from, v.valid_to,
        v.recorded_at, v.replaced_at, v.created_at, agentmem_private.page_cursor(v.created_at, v.fact_id, case when list_facts.include_superseded then v.seq end),
        v.pinned_at, v.use_count, v.last_used_at
    from versions as v
    where (v.created_at, v.fact_id, v.seq) < (v_after.at, v_after.id, coalesce(v_after.seq, v_current))
    order by v.created_at desc, v.fact_id desc, v.seq desc
    limit list_facts.page_size;
end
$$;

comment on function agentmem.list_facts(text, boolean, text, int) is
'One page of a user''s facts in the current tenant, newest first (by when first stored), with their earlier versions on request.
The current fact of each slot (status current); with include_superseded also its earlier versions after it, newest first (status replaced: a contradicting fact took the slot; corrected: update_fact).
valid_from and valid_to: when the version was true in the world, as recall_facts and fact_history
report them (valid_to NULL while it still is); recorded_at: when agentmem wrote this version;
replaced_at: when a later version superseded it (NULL for the current one); created_at: when the fact
was first stored (the order of the pages). pinned_at (agentmem.pin; NULL: not pinned), use_count and
last_used_at (how often and when recall_facts returned it, as folded by the use job): of the current
fact, NULL on its earlier versions.
Keyset pages: pass the cursor of
the last row as after (NULL: the first page); stable under concurrent writes (a fact stored meanwhile
is newer than the cursor). A cursor of a listing with include_superseded is valid only for one with it
(and one without only for one without): AM020 otherwise.
page_size: 1 to 1,000 (AM020); AM020 for a bad user_id, include_superseded NULL, or a malformed after.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

-- Over 100 lines: one deletion in one transaction, forget_user's discipline: a statement per table that
--   derives from the message, counted into one receipt.
create or replace function agentmem.delete_message(message_id anycompatible)
returns agentmem.access_log
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_message_id uuid := agentmem_private.uuid_arg('message_id', delete_message.message_id);
    v_msg agentmem.messages;
    v_user text;
    v_conv agentmem.conversations;
    v_entries uuid[];
    v_questions text[];
    v_removed jsonb := '{}';
    v_n bigint;
begin
    select m.user_id into v_user
    from agentmem.messages as m
    where m.tenant_id = v_tenant and m.message_id = v_message_id;
    if not found then
        raise exception 'message % not found', coalesce(v_message_id::text, 'NULL')
        using
            errcode = 'AM030', detail = 'It does not exist in the current tenant.',
            hint = 'It may have been deleted already, or belong to another tenant.';
    end if;
    -- forget_user's discipline: the user's lock exclusive first (every write
    -- of the user in flight is waited for; later ones wait for this one), then
    -- the conversation's row, which store_messages and set_summary lock too.
    perform agentmem_private.lock_user(v_tenant, v_user, true);
    select m.* into v_msg
    from agentmem.messages as m
    where m.tenant_id = v_tenant and m.message_id = v_message_id;
    if not found then
        raise exception 'message % not found', v_message_id
        using errcode = 'AM030', hint = 'It was deleted while this call waited for the user''s lock.';
    end if;
    select c.* into v_conv
    from agentmem.conversations as c
    where c.tenant_id = v_tenant and c.conversation_id = v_msg.conversation_id
    for update;

    -- Cached answers that cite the message as a source, or were written in its
    -- conversation with its text as their question or answer.
    select coalesce(pg_catalog.array_agg(e.entry_id), '{}'), coalesce(pg_catalog.array_agg(e.question), '{}') || coalesce(pg_catalog.array_agg(e.answer), '{}')
    into v_entries, v_questions
    from agentmem.cache_entries as e
    where
        e.tenant_id = v_tenant
        and (
            e.entry_id in (
                select s.entry_id from agentmem.cache_entry_sources as s
                where s.tenant_id = v_tenant and s.doc_id = v_msg.message_id::text
            )
            or (e.conversation_id = v_msg.conversation_id and (e.question = v_msg.content or e.answer = v_msg.content))
        );
    -- The user's own lookups that asked the message's text go; other lookups
    -- forget the matched question of a deleted entry.
    delete from agentmem.cache_hits as h
    where
        h.tenant_id = v_tenant and h.user_id = v_user
        and (h.question_asked = v_msg.content or h.entry_id = any(v_entries));
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('cache_hits', v_n);
    update agentmem.cache_hits as h
    set matched_question = null, entry_id = null
    where
        h.tenant_id = v_tenant
        and (h.entry_id = any(v_entries) or h.matched_question = any(v_questions) or h.matched_question = v_msg.content);
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('cache_hits_unlinked', v_n);
    v_removed := v_removed || pg_catalog.jsonb_build_object(
        'cache_entries', agentmem_private.delete_cache_entries(v_tenant, v_entries)
    );

    -- Facts whose only source it was go; others lose the link.
    v_removed := v_removed || agentmem_private.prune_fact_sources(v_tenant, array[v_msg.message_id], true);
    v_removed := v_removed || pg_catalog.jsonb_build_object(
        'embedding_cache', agentmem_private.forget_text_hashes(v_tenant, array[v_msg.content] || v_questions)
    );
    delete from agentmem.retrievals as r where r.tenant_id = v_tenant and r.message_id = v_msg.message_id;
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('retrievals', v_n);
    delete from agentmem.message_embeddings as me where me.tenant_id = v_tenant and me.message_id = v_msg.message_id;
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('message_embeddings', v_n);
    perform agentmem_private.count_messages(v_tenant, array[v_msg.message_id], -1);
    delete from agentmem.messages as m where m.tenant_id = v_tenant and m.message_id = v_msg.message_id;
    v_removed := v_removed || pg_catalog.jsonb_build_object('messages', 1);
    -- Uses not yet folded of it and of the cached answers that went with it.
    perform agentmem_private.forget_uses(v_tenant, v_msg.message_id || v_entries);

    -- A running summary that covers the message may repeat it: it goes, and
    -- the next set_summary starts afresh. message_index is never reused.
    if v_conv.summary_through is not null and v_msg.message_index <= v_conv.summary_through then
        update agentmem.conversations as c
        set summary = null, summary_through = null, updated_at = pg_catalog.now()
        where c.tenant_id = v_tenant and c.conversation_id = v_conv.conversation_id;
        v_removed := v_removed || pg_catalog.jsonb_build_object('summaries', 1);
    else
        update agentmem.conversations as c
        set updated_at = pg_catalog.now()
        where c.tenant_id = v_tenant and c.conversation_id = v_conv.conversation_id;
        v_removed := v_removed || pg_catalog.jsonb_build_object('summaries', 0);
    end if;
    return agentmem_private.access_receipt(v_tenant, 'delete_message', v_removed);
end
$$;

comment on function agentmem.delete_message(anycompatible) is
'Delete one message of the current tenant and everything derived from it, in one transaction; returns the receipt.
The receipt is kept in agentmem.access_log: rows per table, the role, when; no content, no id.
Goes with it: its embeddings, its retrieval record, cached answers citing it as a source (its id in
source_ids) or written in its conversation with its text as question or answer (and the asker''s logged
lookups of its text; other lookups forget the matched question), facts whose only source it was
(other facts and fact history lose the link), embedding-cache rows of its text.
message_index: the other messages keep theirs, so the conversation has a gap where it was; indexes are
never reused (the next message gets the next one), and retrieval records, summaries and callers that
hold indexes stay right. The running summary: when it covers the message (message_index <=
summary_through) it is cleared (summary and summary_through NULL; summaries = 1 in the receipt), since
it may repeat the message; the summariser writes a new one with set_summary.
Concurrency: takes the user''s erasure lock exclusive, as forget_user does, then the conversation''s
row: writes of the user in flight finish first, writes that start meanwhile run after it.
AM030 for a message not in the current tenant; AM020 for a message_id that is not a UUID.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem_private.lock_fact(p_tenant text, p_fact_id uuid)
returns agentmem.facts
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_user text;
    v_row agentmem.facts;
begin
    select f.user_id into v_user from agentmem.facts as f where f.tenant_id = p_tenant and f.fact_id = p_fact_id;
    if found then
        perform agentmem_private.lock_user(p_tenant, v_user, true);
        select f.* into v_row from agentmem.facts as f where f.tenant_id = p_tenant and f.fact_id = p_fact_id for update;
    end if;
    if v_row.fact_id is null then
        raise exception 'fact % not found', coalesce(p_fact_id::text, 'NULL')
        using
            errcode = 'AM030', detail = 'It does not exist in the current tenant.',
            hint = 'It may have been deleted already, or belong to another tenant; list_facts lists a user''s facts.';
    end if;
    return v_row;
end
$$;

comment on function agentmem_private.lock_fact(text, uuid) is
'Internal: the fact, locked: its user''s erasure lock exclusive, then its row. AM030 when it is not in the tenant.';

create or replace function agentmem.delete_fact(fact_id anycompatible)
returns agentmem.access_log
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_fact agentmem.facts := agentmem_private.lock_fact(v_tenant, agentmem_private.uuid_arg('fact_id', delete_fact.fact_id));
    v_texts text[];
    v_removed jsonb := '{}';
    v_n bigint;
begin
    v_texts := array[v_fact.fact] || coalesce(array(
        select h.fact from agentmem.fact_history as h where h.tenant_id = v_tenant and h.fact_id = v_fact.fact_id
    ), '{}');
    delete from agentmem.fact_history as h where h.tenant_id = v_tenant and h.fact_id = v_fact.fact_id;
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('fact_history', v_n);
    delete from agentmem.facts as f where f.tenant_id = v_tenant and f.fact_id = v_fact.fact_id;
    v_removed := v_removed || pg_catalog.jsonb_build_object('facts', 1);
    perform agentmem_private.forget_uses(v_tenant, array[v_fact.fact_id]);
    v_removed := v_removed || pg_catalog.jsonb_build_object('embedding_cache', agentmem_private.forget_text_hashes(v_tenant, v_texts));
    return agentmem_private.access_receipt(v_tenant, 'delete_fact', v_removed);
end
$$;

comment on function agentmem.delete_fact(anycompatible) is
'Delete one fact of the current tenant with its whole history and cached embeddings; returns the receipt.
Its history is every earlier version; the embedding-cache rows of their texts go too; the receipt is kept in agentmem.access_log (no content, no id).
Takes the user''s erasure lock exclusive, as forget_user does. AM030 for a fact not in the current tenant; AM020 for a fact_id that is not a UUID.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.update_fact(
    fact_id anycompatible,
    fact text,
    embedding vector,
    source_message_ids uuid[] default '{}'
) returns agentmem.access_log
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_fact_id uuid := agentmem_private.uuid_arg('fact_id', update_fact.fact_id);
    v_old agentmem.facts;
    v_sources uuid[];
    v_removed jsonb := '{}';
begin
    -- the same rules as upsert_fact's (AM020 blank, AM021 over 4,000 characters)
    perform agentmem_private.check_fact_text(update_fact.fact);
    perform agentmem_private.check_array('source_message_ids', update_fact.source_message_ids, 10000);
    if update_fact.source_message_ids is null or pg_catalog.array_position(update_fact.source_message_ids, null) is not null then
        raise exception 'source_message_ids may not be NULL or contain NULL'
        using errcode = 'AM020', hint = 'Pass the ids of the messages the correction comes from, or ''{}''.';
    end if;
    v_old := agentmem_private.lock_fact(v_tenant, v_fact_id);
    perform agentmem_private.check_embedding(v_old.model, update_fact.embedding);
    v_sources := array(select distinct s from pg_catalog.unnest(update_fact.source_message_ids) as s order by s);
    insert into agentmem.fact_history as h (
        tenant_id, fact_id, user_id, subject, fact, source_message_ids, valid_from, valid_to, recorded_at, change
    ) values (
        v_tenant, v_old.fact_id, v_old.user_id, v_old.subject, v_old.fact, v_old.source_message_ids,
        -- the period the wrong version claimed (it was never true: no as_of or window finds it)
        v_old.valid_from, coalesce(v_old.valid_to, greatest(pg_catalog.now(), v_old.valid_from + interval '1 microsecond')),
        v_old.updated_at, 'corrected'
    );
    update agentmem.facts as f
    set fact = update_fact.fact, embedding = update_fact.embedding, source_message_ids = v_sources, updated_at = pg_catalog.now()
    where f.tenant_id = v_tenant and f.fact_id = v_old.fact_id;
    -- The old text's embedding jobs must never land on the corrected fact: its
    -- job in its own model goes (the correction brings its vector; a worker
    -- holding it is told gone), and its jobs in the models the tenant is being
    -- re-embedded into are queued again for the new text (a new lease: the
    -- worker holding the old one is told gone).
    delete from agentmem.embedding_jobs as j
    where j.tenant_id = v_tenant and j.fact_id = v_old.fact_id and j.model = v_old.model;
    delete from agentmem.embedding_jobs as j
    where j.tenant_id = v_tenant and j.fact_id = v_old.fact_id and j.model <> v_old.model;
    perform agentmem_private.enqueue_fact_jobs(v_tenant, v_old.fact_id, update_fact.fact, v_old.model, true, null);
    v_removed := pg_catalog.jsonb_build_object(
        'facts_updated', 1,
        'fact_history', 1,
        'embeddings_replaced', 1,
        'embedding_cache', case
            when v_old.fact = update_fact.fact then 0
            else agentmem_private.forget_text_hashes(v_tenant, array[v_old.fact])
        end
    );
    return agentmem_private.access_receipt(v_tenant, 'update_fact', v_removed);
end
$$;

comment on function agentmem.update_fact(anycompatible, text, vector, uuid[]) is
'Correct one fact of the current tenant by hand: the new text and embedding replace the old, which goes to the fact''s history.
The embedding is of the same model; the old version is kept as a correction (list_facts with include_superseded shows it with status corrected).
The old embedding is overwritten and the
embedding-cache rows of the old text go. An embedding job of the old text still queued or held by a worker
never lands: in the fact''s model it is dropped (its worker''s completion comes back gone), in a model
the tenant is being re-embedded into it is queued again for the new text. source_message_ids: the messages the correction comes from
(default none: a correction by hand). Returns the receipt (kept in agentmem.access_log; no content).
Takes the user''s erasure lock exclusive, as forget_user does. Errors: AM030 a fact not in the current
tenant; AM020 a fact_id that is not a UUID, a blank fact or bad source_message_ids; AM021 a fact over 4,000 characters; AM010 an
embedding that is not one of the fact''s model.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

-- The tenant as a whole, for a door that shows it (agentmem inspect): its users, a
-- conversation's messages, its access and erasure receipts, its counts. Keyset pages.

create or replace function agentmem.list_users(
    after text default null,
    page_size int default 100
) returns table (
    user_id text,
    conversations bigint,
    messages bigint,
    facts bigint,
    last_message_at timestamptz,
    cursor text
)
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
begin
    perform agentmem_private.check_range('page_size', list_users.page_size, 1, 1000);
    if list_users.after is not null then
        perform agentmem_private.check_user_id(list_users.after);
    end if;
    -- A skip scan: the next user id after the last one, read from the indexes
    -- of conversations and facts by (tenant_id, user_id), page_size times.
    return query
    with recursive u (uid) as (
        select least(
            (
                select pg_catalog.min(c.user_id) from agentmem.conversations as c
                where c.tenant_id = v_tenant and c.user_id > coalesce(list_users.after, '')
            ),
            (
                select pg_catalog.min(f.user_id) from agentmem.facts as f
                where f.tenant_id = v_tenant and f.user_id > coalesce(list_users.after, '')
            )
        )
        union all
        select least(
            (
                select pg_catalog.min(c.user_id) from agentmem.conversations as c
                where c.tenant_id = v_tenant and c.user_id > u.uid
            ),
            (
                select pg_catalog.min(f.user_id) from agentmem.facts as f
                where f.tenant_id = v_tenant and f.user_id > u.uid
            )
        )
        from u
        where u.uid is not null
    ),

    page as (
        select u.uid from u
        where u.uid is not null
        limit list_users.page_size
    )

    select
        p.uid,
        (
            select pg_catalog.count(*) from agentmem.conversations as c
            where c.tenant_id = v_tenant and c.user_id = p.uid
        ),
        (
            select pg_catalog.count(*) from agentmem.messages as m
            where m.tenant_id = v_tenant and m.user_id = p.uid
        ),
        (
            select pg_catalog.count(*) from agentmem.facts as f
            where f.tenant_id = v_tenant and f.user_id = p.uid
        ),
        (
            select pg_catalog.max(m.occurred_at) from agentmem.messages as m
            where m.tenant_id = v_tenant and m.user_id = p.uid
        ),
        p.uid
    from page as p
    order by p.uid;
end
$$;

comment on function agentmem.list_users(text, int) is
'One page of the current tenant''s users in user_id order, each with its conversations, messages, current facts and last message''s time.
A user: every user id with a conversation or a fact; the counts: how many conversations, messages and current facts.
Keyset pages: pass the cursor of the last row (its user_id) as after (NULL: the first page); a user who
appears meanwhile is listed on the page where its id falls, none is listed twice. Each page reads the
next ids from the (tenant_id, user_id) indexes, so its cost is that of its own users, not the tenant''s.
page_size: 1 to 1,000 (AM020); AM020 for an after that is blank or over 256 characters.
A tenant with no data gets no rows.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.list_messages(
    conversation_id anycompatible,
    after int default null,
    page_size int default 100
) returns table (
    message_id uuid,
    user_id text,
    message_index int,
    role text,
    content text,
    metadata jsonb,
    created_at timestamptz,
    occurred_at timestamptz,
    embedded_models text[],
    pinned_at timestamptz,
    use_count bigint,
    last_used_at timestamptz
)
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_conversation_id uuid := agentmem_private.uuid_arg('conversation_id', list_messages.conversation_id);
begin
    perform agentmem_private.check_range('page_size', list_messages.page_size, 1, 1000);
    if list_messages.after is not null then
        perform agentmem_private.check_range('after', list_messages.after, 0, 2147483647);
    end if;
    if not exists (
        select from agentmem.conversations as c
        where c.tenant_id = v_tenant and c.conversation_id = v_conversation_id
    ) then
        perform agentmem_private.conv_not_found(v_conversation_id);
    end if;
    return query
    select
        m.message_id, m.user_id, m.message_index, m.role, m.content, m.metadata,
        m.created_at, m.occurred_at,
        coalesce(
            (
                select pg_catalog.array_agg(e.model order by e.model) from agentmem.message_embeddings as e
                where e.tenant_id = v_tenant and e.message_id = m.message_id
            ),
            '{}'
        ),
        m.pinned_at, m.use_count, m.last_used_at
    from agentmem.messages as m
    where
        m.tenant_id = v_tenant and m.conversation_id = v_conversation_id
        and m.message_index > coalesce(list_messages.after, -1)
    order by m.message_index
    limit list_messages.page_size;
end
$$;

comment on function agentmem.list_messages(anycompatible, int, int) is
'One page of a conversation''s messages in the current tenant, in order, with when each happened and was stored and its models.
In message_index order; its models: those it is embedded in (empty: not embedded yet, found by words only until the worker embeds it).
pinned_at: when the message was pinned (agentmem.pin; NULL: not pinned, though a pinned conversation
keeps all its messages); use_count and last_used_at: how often and when a search returned it (folded
in by the use job).
Keyset pages: pass the message_index of the last row as after (NULL: from the start); indexes are
never reused, so a page never shifts. page_size: 1 to 1,000, after: 0 or more (AM020); AM020 for a
conversation_id that is not a UUID, AM030 for a conversation not in the current tenant.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.list_access_log(
    after text default null,
    page_size int default 100
) returns table (
    log_id uuid,
    kind text,
    actor text,
    rows_affected jsonb,
    logged_at timestamptz,
    cursor text
)
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_after record;
begin
    perform agentmem_private.check_range('page_size', list_access_log.page_size, 1, 1000);
    select * into v_after from agentmem_private.parse_cursor(list_access_log.after, false);
    return query
    select r.id, r.kind, r.actor, r.rows_affected, r.at, agentmem_private.page_cursor(r.at, r.id)
    from (
        (
            select a.access_id as id, a.kind, a.actor, a.rows_affected, a.logged_at as at
            from agentmem.access_log as a
            where a.tenant_id = v_tenant and (a.logged_at, a.access_id) < (v_after.at, v_after.id)
            order by a.logged_at desc, a.access_id desc
            limit list_access_log.page_size
        )
        union all
        (
            select
                e.erasure_id, 'forget_' || e.scope, null::text, e.rows_removed, e.erased_at
            from agentmem.erasure_log as e
            where e.tenant_id = v_tenant and (e.erased_at, e.erasure_id) < (v_after.at, v_after.id)
            order by e.erased_at desc, e.erasure_id desc
            limit list_access_log.page_size
        )
    ) as r
    order by r.at desc, r.id desc
    limit list_access_log.page_size;
end
$$;

comment on function agentmem.list_access_log(text, int) is
'One page of the current tenant''s receipts, newest first: exports, imports, single deletions, corrections and erasures.
From agentmem.access_log (kind, the login that did it, rows per table) and agentmem.erasure_log (kind forget_user or forget_conversation, actor NULL, rows removed per table).
No receipt holds content or an identifier of the user or item. Keyset pages: pass the cursor of the
last row as after (NULL: the first page); a receipt written meanwhile is newer than the cursor.
page_size: 1 to 1,000 (AM020); AM020 for an after that is not a cursor.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.tenant_overview()
returns table (
    tenant_id text,
    users bigint,
    conversations bigint,
    messages bigint,
    facts bigint,
    cache_entries bigint,
    cache_lookups bigint,
    default_model text,
    corpus_version bigint,
    embedding_pending bigint,
    embedding_running bigint,
    embedding_failed bigint,
    embedding_oldest timestamptz,
    embedding_last_error text
)
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    -- Read before the counts, not in their statement: on Citus a statement that reads distributed
    -- tables is sent to a worker, where a nested read of another one fails.
    v_model text := agentmem_private.default_model();
    v_version bigint := agentmem.corpus_version();
begin
    return query
    select
        v_tenant,
        (
            select pg_catalog.count(*) from (
                select c.user_id from agentmem.conversations as c where c.tenant_id = v_tenant
                union
                select f.user_id from agentmem.facts as f where f.tenant_id = v_tenant
            ) as u
        ),
        (select pg_catalog.count(*) from agentmem.conversations as c where c.tenant_id = v_tenant),
        (select pg_catalog.count(*) from agentmem.messages as m where m.tenant_id = v_tenant),
        (select pg_catalog.count(*) from agentmem.facts as f where f.tenant_id = v_tenant),
        (select pg_catalog.count(*) from agentmem.cache_entries as e where e.tenant_id = v_tenant),
        (select pg_catalog.count(*) from agentmem.cache_hits as h where h.tenant_id = v_tenant),
        v_model,
        v_version,
        j.pending, j.running, j.failed, j.oldest, j.last_error
    from (
        select
            pg_catalog.count(*) filter (where q.state = 'pending') as pending,
            pg_catalog.count(*) filter (where q.state = 'running') as running,
            pg_catalog.count(*) filter (where q.state = 'failed') as failed,
            pg_catalog.min(q.enqueued_at) filter (where q.state <> 'failed') as oldest,
            (pg_catalog.array_agg(q.last_error order by q.run_after desc) filter (where q.last_error is not null))[1]
            as last_error
        from agentmem.embedding_jobs as q
        where q.tenant_id = v_tenant
    ) as j;
end
$$;

comment on function agentmem.tenant_overview() is
'The current tenant in one row: its users, conversations, messages, facts, cache, default model, corpus version and embedding backlog.
Users: ids with a conversation or a fact; facts: current ones; cache: cached answers and logged cache lookups; the backlog: jobs pending, running, failed after the retry limit, the oldest unfinished one, the latest error.
Counts are exact (index scans of the tenant''s rows: milliseconds for 100,000 messages, growing with the
tenant). The installation-wide health of background jobs is agentmem.health, for the DBA.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.list_cache_entries(
    after text default null,
    page_size int default 100
) returns table (
    entry_id uuid,
    question text,
    answer text,
    source_ids text[],
    intent text,
    model text,
    corpus_version bigint,
    current_corpus boolean,
    prompt_version text,
    llm_model text,
    user_id text,
    created_at timestamptz,
    expires_at timestamptz,
    withdrawn_at timestamptz,
    lookups bigint,
    reviewed_wrong bigint,
    cursor text
)
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_version bigint := agentmem.corpus_version();
    v_after record;
begin
    perform agentmem_private.check_range('page_size', list_cache_entries.page_size, 1, 1000);
    select * into v_after from agentmem_private.parse_cursor(list_cache_entries.after, false);
    return query
    select
        e.entry_id, e.question, e.answer, e.source_ids, e.intent, e.model, e.corpus_version,
        e.corpus_version = v_version, e.prompt_version, e.llm_model, e.user_id, e.created_at, e.expires_at,
        e.withdrawn_at, h.lookups, h.wrong,
        agentmem_private.page_cursor(e.created_at, e.entry_id)
    from (
        select ce.*
        from agentmem.cache_entries as ce
        where ce.tenant_id = v_tenant and (ce.created_at, ce.entry_id) < (v_after.at, v_after.id)
        order by ce.created_at desc, ce.entry_id desc
        limit list_cache_entries.page_size
    ) as e
    left join lateral (
        select pg_catalog.count(*) as lookups, pg_catalog.count(*) filter (where ch.reviewed_correct = false) as wrong
        from agentmem.cache_hits as ch
        where ch.tenant_id = v_tenant and ch.entry_id = e.entry_id
    ) as h on true
    order by e.created_at desc, e.entry_id desc;
end
$$;

comment on function agentmem.list_cache_entries(text, int) is
'One page of the current tenant''s answer cache, newest first, each entry with its question, answer and what it was stored and served under.
Each entry: its question, answer, the documents it cites (source_ids), intent, embedding model, corpus version (current_corpus: whether it is the tenant''s current one, else sweep_cache removes it), prompt version and generating model, the user whose turn stored it, when it was stored and expires (its TTL), whether a wrong verdict withdrew it (withdrawn_at), and how many logged lookups matched it and were judged wrong.
Keyset pages: pass the cursor of the last row as after (NULL: the first page); an entry stored
meanwhile is newer than the cursor. Expired entries are listed until sweep_cache or retention removes
them (expires_at in the past). page_size: 1 to 1,000 (AM020); AM020 for an after that is not a cursor.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

-- A door serving one user (the MCP server, a web page): what the user holds, and whether an item
-- named by id is that user's, so that a door acts on its own user's items only.

create or replace function agentmem.memory_status(user_id text)
returns table (
    tenant_id text,
    conversations bigint,
    messages bigint,
    facts bigint,
    embeddings_pending bigint,
    embeddings_failed bigint,
    oldest_pending timestamptz,
    first_message_at timestamptz,
    last_message_at timestamptz
)
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
begin
    perform agentmem_private.check_user_id(memory_status.user_id);
    return query
    with jobs as (
        select j.state, j.enqueued_at
        from agentmem.embedding_jobs as j
        inner join agentmem.messages as m
            on m.tenant_id = j.tenant_id and m.message_id = j.message_id
        where j.tenant_id = v_tenant and m.tenant_id = v_tenant and m.user_id = memory_status.user_id
        union all
        select j.state, j.enqueued_at
        from agentmem.embedding_jobs as j
        inner join agentmem.facts as f
            on f.tenant_id = j.tenant_id and f.fact_id = j.fact_id
        where j.tenant_id = v_tenant and f.tenant_id = v_tenant and f.user_id = memory_status.user_id
    )
    select
        v_tenant,
        (select pg_catalog.count(*) from agentmem.conversations as c
            where c.tenant_id = v_tenant and c.user_id = memory_status.user_id),
        m.n,
        (select pg_catalog.count(*) from agentmem.facts as f
            where f.tenant_id = v_tenant and f.user_id = memory_status.user_id),
        (select pg_catalog.count(*) from jobs where jobs.state <> 'failed'),
        (select pg_catalog.count(*) from jobs where jobs.state = 'failed'),
        (select pg_catalog.min(jobs.enqueued_at) from jobs where jobs.state <> 'failed'),
        m.first_at,
        m.last_at
    from (
        select pg_catalog.count(*) as n, pg_catalog.min(mm.occurred_at) as first_at, pg_catalog.max(mm.occurred_at) as last_at
        from agentmem.messages as mm
        where mm.tenant_id = v_tenant and mm.user_id = memory_status.user_id
    ) as m;
end
$$;

comment on function agentmem.memory_status(text) is
'What one user of the current tenant holds: conversations, messages, facts, embedding jobs waiting or failed, and the first and last message''s time.
tenant_id: the tenant it counted in; facts: current ones; jobs: those of the user''s messages and facts still waiting (pending or running) or parked as failed, with the oldest waiting job''s time.
A user with nothing stored gets one row of zeros (so "no memory at all" can be told from a search that
matched nothing). Counts the user''s rows through the (tenant_id, user_id) indexes: milliseconds for
10,000s of messages. AM020 for a blank user_id or one over 256 characters.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.require_user_item(
    user_id text,
    conversation_id anycompatible default null::uuid,
    message_id anycompatible default null::uuid,
    fact_id anycompatible default null::uuid
) returns boolean
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_conversation uuid := agentmem_private.uuid_arg('conversation_id', require_user_item.conversation_id);
    v_message uuid := agentmem_private.uuid_arg('message_id', require_user_item.message_id);
    v_fact uuid := agentmem_private.uuid_arg('fact_id', require_user_item.fact_id);
    v_what text;
begin
    perform agentmem_private.check_user_id(require_user_item.user_id);
    if (v_conversation is not null)::int + (v_message is not null)::int + (v_fact is not null)::int <> 1 then
        raise exception 'pass exactly one of conversation_id, message_id and fact_id'
        using errcode = 'AM020', hint = 'e.g. require_user_item(user_id => ''alice'', message_id => ''...'').';
    end if;
    if v_conversation is not null and exists (
        select from agentmem.conversations as c
        where c.tenant_id = v_tenant and c.conversation_id = v_conversation and c.user_id = require_user_item.user_id
    ) or v_message is not null and exists (
        select from agentmem.messages as m
        where m.tenant_id = v_tenant and m.message_id = v_message and m.user_id = require_user_item.user_id
    ) or v_fact is not null and exists (
        select from agentmem.facts as f
        where f.tenant_id = v_tenant and f.fact_id = v_fact and f.user_id = require_user_item.user_id
    ) then
        return true;
    end if;
    v_what := case
        when v_conversation is not null then 'conversation ' || v_conversation
        when v_message is not null then 'message ' || v_message
        else 'fact ' || v_fact
    end;
    raise exception '% not found for this user', v_what
    using
        errcode = 'AM030',
        detail = 'It does not exist in the current tenant, or belongs to another user.',
        hint = 'Pass an id a listing or a search returned for this user.';
end
$$;

comment on function agentmem.require_user_item(text, anycompatible, anycompatible, anycompatible) is
'True when the one item named (conversation_id, message_id or fact_id) is user_id''s in the current tenant, else AM030.
AM030 for another user''s item and a missing one alike (the error tells nothing of other users).
For a door serving one user (the MCP server): called first in the transaction of a call that takes
an id (store_message, short_term_context, delete_message, delete_fact), it confines that call to the
user''s own items. AM020 for an id that is not a UUID, none or more than one id, or a bad user_id.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';
