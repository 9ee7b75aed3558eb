-- Forgetting: erase a conversation or a user everywhere, in one transaction,
-- and keep a receipt (counts per table, when; no content) in the erasure log.

drop function if exists agentmem.forget_conversation(uuid);

create or replace function agentmem.forget_conversation(conversation_id anycompatible)
returns agentmem.erasure_log
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_conversation_id uuid := agentmem_private.uuid_arg('conversation_id', forget_conversation.conversation_id);
    v_user text;
    v_ids uuid[];
    v_texts text[];
    v_questions text[];
    v_entries uuid[];
    v_removed jsonb := '{}';
    v_n bigint;
begin
    -- The row lock makes concurrent writers of this conversation wait, then
    -- find it gone: no message can be added behind the erasure's back.
    select c.user_id into v_user
    from agentmem.conversations as c
    where c.tenant_id = v_tenant and c.conversation_id = v_conversation_id
    for update;
    if not found then
        raise exception 'no such conversation: %', coalesce(v_conversation_id::text, 'NULL')
        using errcode = 'AM030', hint = 'It may have been forgotten already, or belong to another tenant.';
    end if;
    select pg_catalog.array_agg(m.message_id), pg_catalog.array_agg(m.content) into v_ids, v_texts
    from agentmem.messages as m
    where m.tenant_id = v_tenant and m.conversation_id = v_conversation_id;
    v_ids := coalesce(v_ids, '{}');
    v_texts := coalesce(v_texts, '{}');

    -- Cached answers written from it, and the hit log's copies of their questions.
    select pg_catalog.array_agg(e.entry_id), pg_catalog.array_agg(e.question) || pg_catalog.array_agg(e.answer) into v_entries, v_questions
    from agentmem.cache_entries as e
    where e.tenant_id = v_tenant and e.conversation_id = v_conversation_id;
    v_entries := coalesce(v_entries, '{}');
    v_questions := coalesce(v_questions, '{}');
    -- The user's own lookups that asked this conversation's questions go; other
    -- users' hits that matched one of its cached questions keep their own
    -- question but forget the matched one.
    with gone as (
        delete from agentmem.cache_hits as h
        where
            h.tenant_id = v_tenant
            and (h.user_id = v_user or h.user_id is null)
            and (h.entry_id = any(v_entries) or h.question_asked = any(v_texts))
        returning 1
    )
    select pg_catalog.count(*) into v_n from gone;
    v_removed := v_removed || pg_catalog.jsonb_build_object('cache_hits', v_n);
    update agentmem.cache_hits as h
    set matched_question = null, entry_id = null
    where
        h.tenant_id = v_tenant
        and (h.entry_id = any(v_entries) or h.matched_question = any(v_questions) or h.matched_question = any(v_texts));
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('cache_hits_unlinked', v_n);
    delete from agentmem.cache_entries as e where e.tenant_id = v_tenant and e.entry_id = any(v_entries);
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('cache_entries', v_n);

    -- Facts: those whose every source was here go, the others lose these links.
    v_removed := v_removed || agentmem_private.prune_fact_sources(v_tenant, v_ids, true);

    v_removed := v_removed || pg_catalog.jsonb_build_object(
        'embedding_cache', agentmem_private.forget_text_hashes(v_tenant, v_texts || v_questions)
    );
    delete from agentmem.retrievals as r
    where r.tenant_id = v_tenant and r.conversation_id = v_conversation_id;
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('retrievals', v_n);
    delete from agentmem.message_embeddings as me where me.tenant_id = v_tenant and me.message_id = any(v_ids);
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('message_embeddings', v_n);
    perform agentmem_private.count_messages(v_tenant, v_ids, -1);
    delete from agentmem.messages as m
    where m.tenant_id = v_tenant and m.conversation_id = v_conversation_id;
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('messages', v_n);
    delete from agentmem.conversations as c
    where c.tenant_id = v_tenant and c.conversation_id = v_conversation_id;
    v_removed := v_removed || pg_catalog.jsonb_build_object('conversations', 1);
    -- Uses not yet folded of its messages and cached answers.
    v_removed := v_removed || pg_catalog.jsonb_build_object('use_log', agentmem_private.forget_uses(v_tenant, v_ids || v_entries));
    return agentmem_private.forget_receipt(v_tenant, 'conversation', v_removed);
end
$$;

comment on function agentmem.forget_conversation(anycompatible) is
'Erase one conversation of the current tenant, in one transaction, and return the receipt.
The conversation, its messages, their embeddings and retrieval records go; facts whose every source message was in it
are deleted and other facts (and fact history) lose those links; cached answers written from it go,
with the hit log''s copies of their questions; embedding-cache rows of its texts go. The receipt
(rows removed per table, when; no content, no id of what was erased) is kept in agentmem.erasure_log.
Raises AM030 for a conversation that does not exist in the current tenant.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

-- Over 100 lines: one erasure in one transaction under the user's exclusive lock: a delete per table, in
--   the order their keys require, counted into one receipt.
create or replace function agentmem.forget_user(user_id text)
returns agentmem.erasure_log
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_ids uuid[];
    v_texts text[];
    v_questions text[];
    v_removed jsonb := '{}';
    v_pruned jsonb;
    v_n bigint;
    v_table text;
begin
    perform agentmem_private.check_user_id(forget_user.user_id);
    -- Every writer of this user holds the user's lock shared until it commits:
    -- taking it exclusive waits for them all, and makes those that come later
    -- wait until this erasure commits. Nothing written before survives it.
    perform agentmem_private.lock_user(v_tenant, forget_user.user_id, true);
    -- Lock the user's conversations too: a concurrent store_message waits
    -- for this transaction and then finds its conversation gone (AM030), so
    -- no message is left behind without its conversation.
    perform from agentmem.conversations as c
    where c.tenant_id = v_tenant and c.user_id = forget_user.user_id
    for update;

    select pg_catalog.array_agg(m.message_id), pg_catalog.array_agg(m.content) into v_ids, v_texts
    from agentmem.messages as m
    where m.tenant_id = v_tenant and m.user_id = forget_user.user_id;
    v_ids := coalesce(v_ids, '{}');
    select
        coalesce(pg_catalog.array_agg(e.question), '{}') || coalesce(pg_catalog.array_agg(e.answer), '{}')
    into v_questions
    from agentmem.cache_entries as e
    where e.tenant_id = v_tenant and e.user_id = forget_user.user_id;
    v_texts := coalesce(v_texts, '{}') || v_questions
        || coalesce(array(
            select f.fact from agentmem.facts as f
            where f.tenant_id = v_tenant and f.user_id = forget_user.user_id
        ), '{}')
        || coalesce(array(
            select h.fact from agentmem.fact_history as h
            where h.tenant_id = v_tenant and h.user_id = forget_user.user_id
        ), '{}')
        || coalesce(array(
            select h.question_asked from agentmem.cache_hits as h
            where h.tenant_id = v_tenant and h.user_id = forget_user.user_id
        ), '{}');

    delete from agentmem.cache_hits as h where h.tenant_id = v_tenant and h.user_id = forget_user.user_id;
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('cache_hits', v_n);
    -- Other users' lookups keep their own question but forget the user's.
    update agentmem.cache_hits as h
    set matched_question = null, entry_id = null
    where
        h.tenant_id = v_tenant
        and (
            h.entry_id in (
                select e.entry_id from agentmem.cache_entries as e
                where e.tenant_id = v_tenant and e.user_id = forget_user.user_id
            )
            or h.matched_question = any(v_questions)
        );
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('cache_hits_unlinked', v_n);
    delete from agentmem.cache_entries as e where e.tenant_id = v_tenant and e.user_id = forget_user.user_id;
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('cache_entries', v_n);

    delete from agentmem.fact_history as h where h.tenant_id = v_tenant and h.user_id = forget_user.user_id;
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('fact_history', v_n);
    delete from agentmem.facts as f where f.tenant_id = v_tenant and f.user_id = forget_user.user_id;
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('facts', v_n);
    -- Facts of anyone else that cite the user's messages lose those links, and
    -- those whose every source was the user's go: counted with the user's own.
    v_pruned := agentmem_private.prune_fact_sources(v_tenant, v_ids, true);
    v_removed := v_removed || pg_catalog.jsonb_build_object(
        'facts', (v_removed ->> 'facts')::bigint + (v_pruned ->> 'facts')::bigint,
        'fact_history', (v_removed ->> 'fact_history')::bigint + (v_pruned ->> 'fact_history')::bigint,
        'facts_unlinked', (v_pruned ->> 'facts_unlinked')::bigint
    );

    v_removed := v_removed || pg_catalog.jsonb_build_object('embedding_cache', agentmem_private.forget_text_hashes(v_tenant, v_texts));
    delete from agentmem.retrievals as r where r.tenant_id = v_tenant and r.message_id = any(v_ids);
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('retrievals', v_n);
    delete from agentmem.message_embeddings as me where me.tenant_id = v_tenant and me.user_id = forget_user.user_id;
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('message_embeddings', v_n);
    delete from agentmem.messages as m where m.tenant_id = v_tenant and m.user_id = forget_user.user_id;
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('messages', v_n);
    delete from agentmem.conversations as c where c.tenant_id = v_tenant and c.user_id = forget_user.user_id;
    get diagnostics v_n = row_count;
    v_removed := v_removed || pg_catalog.jsonb_build_object('conversations', v_n);

    -- Any other table with a user_id column (added by a later release) is
    -- covered without editing this function.
    for v_table in
        select c.relname
        from pg_catalog.pg_class as c
        where
            c.relnamespace = 'agentmem'::regnamespace and c.relkind in ('r', 'p')
            and exists (
                select from pg_catalog.pg_attribute as a
                where a.attrelid = c.oid and a.attname = 'user_id' and not a.attisdropped
            )
            and exists (
                select from pg_catalog.pg_attribute as a
                where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped
            )
            and not v_removed ? c.relname::text
        order by c.relname
    loop
        execute pg_catalog.format('delete from agentmem.%I as t where t.tenant_id = $1 and t.user_id::text = $2', v_table)
        using v_tenant, forget_user.user_id;
        get diagnostics v_n = row_count;
        v_removed := v_removed || pg_catalog.jsonb_build_object(v_table, v_n);
    end loop;
    return agentmem_private.forget_receipt(v_tenant, 'user', v_removed);
end
$$;

comment on function agentmem.forget_user(text) is
'Erase everything derived from one user of the current tenant, in every agentmem table, in one transaction.
That is: conversations, messages, their embeddings and retrieval records, facts and fact history, cached answers the user''s conversations wrote and the hit log''s copies of the user''s questions, embedding-cache rows of the user''s texts, and rows of any other table with a user_id column.
Returns the receipt (rows removed
per table, when; no content and no identifier of the user), also kept in agentmem.erasure_log.
Serialised against every writer of the user (a per-(tenant, user) advisory lock that every writing
function takes): writes in flight are waited for and erased, writes that start during the erasure
run after it. The receipt counts every deleted row by kind, including other users'' facts (and fact
history) deleted because their every source message was the user''s (facts, fact_history) and the
facts that only lost links to them (facts_unlinked). Raises AM020 for a blank user_id (whitespace
only) or one over 256 characters; erasing a user with no data returns a receipt of zeros.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';
