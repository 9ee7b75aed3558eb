-- Retrieval records of conversational RAG: which documents each turn retrieved,
-- whether the subject changed (Jaccard overlap of the last two turns' document
-- sets), and which documents a turn has not seen yet.
--
-- A turn is a user message. Documented limits (AM020 out of range, AM021 too large):
--   doc_ids        a one-dimensional array (lower bound 1) of 0 .. 1,000 ids; NULL refused
--   one doc id     1 .. 1,000 characters, not blank, not NULL
--   threshold      0 .. 1
--   lookback       0 .. 1,000 turns

create or replace function agentmem_private.check_doc_ids(p_doc_ids text[])
returns text[]
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_bad text;
begin
    if p_doc_ids is null then
        raise exception 'doc_ids must be an array of document ids, not NULL'
        using errcode = 'AM020', hint = 'Pass ''{}'' for a turn that retrieved nothing.';
    end if;
    if pg_catalog.cardinality(p_doc_ids) = 0 then
        return '{}';
    end if;
    if pg_catalog.array_ndims(p_doc_ids) <> 1 or pg_catalog.array_lower(p_doc_ids, 1) <> 1 then
        raise exception 'doc_ids must be a one-dimensional array indexed from 1'
        using
            errcode = 'AM020',
            detail = pg_catalog.format('Got dimensions %s.', pg_catalog.array_dims(p_doc_ids)),
            hint = 'Pass a plain array such as array[''doc-1'', ''doc-2''].';
    end if;
    if pg_catalog.cardinality(p_doc_ids) > 1000 then
        raise exception 'doc_ids holds % ids; the limit is 1000', pg_catalog.cardinality(p_doc_ids)
        using errcode = 'AM020', hint = 'Record the documents the turn really used, not the whole corpus.';
    end if;
    select d into v_bad from pg_catalog.unnest(p_doc_ids) as d
    where agentmem_private.is_blank(d) limit 1;
    if found then
        raise exception 'doc_ids may not contain NULL or blank ids'
        using errcode = 'AM020', hint = 'Pass the ids your retriever gave each document.';
    end if;
    select d into v_bad from pg_catalog.unnest(p_doc_ids) as d
    where pg_catalog.length(d) > 1000 limit 1;
    if found then
        raise exception 'a document id is too large: % characters, the limit is 1000', pg_catalog.length(v_bad)
        using errcode = 'AM021', hint = 'Use a short stable id (a path, a key), not the document''s text.';
    end if;
    -- Duplicates go; the first occurrence keeps its place.
    return array(
        select u.d from pg_catalog.unnest(p_doc_ids) with ordinality as u (d, ord)
        group by u.d order by pg_catalog.min(u.ord)
    );
end
$$;

comment on function agentmem_private.check_doc_ids(text[]) is
'Internal: check a list of document ids (see the limits of 22_retrievals.sql) and return it without '
'duplicates, in first-seen order.';

create or replace function agentmem_private.check_conversation(p_tenant text, p_conversation_id uuid)
returns void
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_conversation_id is null or not exists (
        select from agentmem.conversations as c
        where c.tenant_id = p_tenant and c.conversation_id = p_conversation_id
    ) then
        perform agentmem_private.conv_not_found(p_conversation_id);
    end if;
end
$$;

comment on function agentmem_private.check_conversation(text, uuid) is
'Internal: AM030 unless the conversation is in the tenant.';

drop function if exists agentmem.record_retrieval(uuid, text[]);

create or replace function agentmem.record_retrieval(message_id anycompatible, doc_ids text[])
returns int
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_message_id uuid := agentmem_private.uuid_arg('message_id', record_retrieval.message_id);
    v_ids text[] := agentmem_private.check_doc_ids(record_retrieval.doc_ids);
    v_msg record;
begin
    select m.role, m.conversation_id, m.message_index into v_msg
    from agentmem.messages as m
    where m.tenant_id = v_tenant and m.message_id = v_message_id;
    if not found then
        raise exception 'message % not found', coalesce(v_message_id::text, 'NULL')
        using
            errcode = 'AM030',
            detail = 'It does not exist in the current tenant.',
            hint = 'Record the retrieval against the user message store_message returned, in the same tenant.';
    end if;
    if v_msg.role <> 'user' then
        raise exception 'message % is a % message; retrievals are recorded against user messages',
            v_message_id, v_msg.role
        using
            errcode = 'AM020',
            hint = 'Pass the id of the user message whose question the documents were retrieved for.';
    end if;
    insert into agentmem.retrievals as r (tenant_id, message_id, conversation_id, message_index, doc_ids)
    values (v_tenant, v_message_id, v_msg.conversation_id, v_msg.message_index, v_ids)
    on conflict on constraint retrievals_pkey do update
        set doc_ids = excluded.doc_ids, created_at = excluded.created_at;
    return pg_catalog.cardinality(v_ids);
end
$$;

comment on function agentmem.record_retrieval(anycompatible, text[]) is
'Record the documents retrieved for one turn, against its user message; returns how many distinct ids were recorded.
Called again for the same message, it replaces the record (a retried turn records what it retrieved last),
so calling it twice with the same ids changes nothing. Duplicate ids are kept once, in first-seen order;
''{}'' records a turn that retrieved nothing. The record goes with its message (erasure, retention).
doc_ids: a one-dimensional array of at most 1,000 ids (AM020), none NULL or blank (AM020), each at most
1,000 characters (AM021). AM030 for a message not in the current tenant; AM020 for a message that is
not a user message.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

drop function if exists agentmem.topic_shift(uuid, real);

create or replace function agentmem.topic_shift(conversation_id anycompatible, threshold real default 0.15)
returns agentmem.topic_shift_row
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_conversation_id uuid := agentmem_private.uuid_arg('conversation_id', topic_shift.conversation_id);
    v_last agentmem.retrievals;
    v_prev agentmem.retrievals;
    v_row agentmem.topic_shift_row;
    v_inter int;
    v_union int;
begin
    if topic_shift.threshold is null or not topic_shift.threshold between 0 and 1 then
        raise exception 'threshold must be between 0 and 1, got %', coalesce(topic_shift.threshold::text, 'NULL')
        using errcode = 'AM020', hint = 'About 0.15 separates a follow-up from a new subject.';
    end if;
    perform agentmem_private.check_conversation(v_tenant, v_conversation_id);
    select r.* into v_last
    from agentmem.retrievals as r
    where r.tenant_id = v_tenant and r.conversation_id = v_conversation_id
    order by r.message_index desc
    limit 1;
    if not found then
        v_row := row(null, false, 0, null);
        return v_row;
    end if;
    select r.* into v_prev
    from agentmem.retrievals as r
    where
        r.tenant_id = v_tenant and r.conversation_id = v_conversation_id
        and r.message_index < v_last.message_index
    order by r.message_index desc
    limit 1;
    if not found then
        v_row := row(null, false, 1, v_last.message_index);
        return v_row;
    end if;
    select
        pg_catalog.count(*) filter (where s.in_last and s.in_prev),
        pg_catalog.count(*)
    into v_inter, v_union
    from (
        select d.id, pg_catalog.bool_or(d.src = 1) as in_last, pg_catalog.bool_or(d.src = 2) as in_prev
        from (
            select l.id, 1 as src from pg_catalog.unnest(v_last.doc_ids) as l (id)
            union all
            select p.id, 2 as src from pg_catalog.unnest(v_prev.doc_ids) as p (id)
        ) as d
        group by d.id
    ) as s;
    v_row.overlap := case when v_union = 0 then 0 else v_inter::real / v_union end;
    v_row.shifted := v_row.overlap < topic_shift.threshold;
    v_row.turns_compared := 2;
    v_row.since_message_index := v_last.message_index;
    return v_row;
end
$$;

comment on function agentmem.topic_shift(anycompatible, real) is
'Whether a conversation''s subject changed: the Jaccard overlap of the documents of its last two recorded turns, against threshold.
overlap = |A and B| / |A or B| of the document sets of the last two turns recorded by record_retrieval; shifted = overlap < threshold.
With fewer than two recorded turns: overlap NULL, shifted false. Two turns that both retrieved nothing
(an empty union) count as no overlap (0). turns_compared says how many records were found (0 to 2);
since_message_index is the message_index of the last recorded turn''s user message: on a shift, that
turn started the new subject, and the history before it belongs to the old one.
threshold: 0 to 1 (AM020). AM030 for a conversation not in the current tenant.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

drop function if exists agentmem.unseen_docs(uuid, text[], int);

create or replace function agentmem.unseen_docs(conversation_id anycompatible, doc_ids text[], lookback int default 6)
returns text[]
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_conversation_id uuid := agentmem_private.uuid_arg('conversation_id', unseen_docs.conversation_id);
    v_ids text[] := agentmem_private.check_doc_ids(unseen_docs.doc_ids);
    v_unseen text[];
begin
    perform agentmem_private.check_range('lookback', unseen_docs.lookback, 0, 1000);
    perform agentmem_private.check_conversation(v_tenant, v_conversation_id);
    if unseen_docs.lookback = 0 or pg_catalog.cardinality(v_ids) = 0 then
        return v_ids;
    end if;
    -- One statement, planned for these arguments on every call (EXECUTE): the
    -- ids looked for (at most 1,000) are hashed and each id recorded in the
    -- lookback turns probes them once, so the cost is linear in what was
    -- recorded, whichever plan PL/pgSQL would have cached for the session.
    execute $q$
        with wanted as (
            select u.id, u.ord from pg_catalog.unnest($3) with ordinality as u (id, ord)
        ),
        turns as (
            select m.message_id
            from agentmem.messages as m
            where
                m.tenant_id = $1 and m.conversation_id = $2 and m.role = 'user'
            order by m.message_index desc
            limit $4
        ),
        seen as (
            select distinct w.id
            from turns as t
            inner join agentmem.retrievals as r on r.tenant_id = $1 and r.message_id = t.message_id
            cross join lateral pg_catalog.unnest(r.doc_ids) as d (id)
            inner join wanted as w on d.id = w.id
        )
        select array(
            select w.id from wanted as w
            where not exists (select from seen as s where s.id = w.id)
            order by w.ord
        )
    $q$ into v_unseen using v_tenant, v_conversation_id, v_ids, unseen_docs.lookback;
    return v_unseen;
end
$$;

comment on function agentmem.unseen_docs(anycompatible, text[], int) is
'The given document ids minus those retrieved (record_retrieval) in the conversation''s last lookback turns, in the given order.
Its turns: user messages, recorded or not; no duplicates.
Call it before storing the new user message, so that the turns looked at are the previous ones.
doc_ids: as for record_retrieval (AM020/AM021); lookback: 0 to 1,000 turns (AM020), 0 filters nothing.
AM030 for a conversation not in the current tenant.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';
