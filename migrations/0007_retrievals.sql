-- 0007 retrieval records: the documents an application retrieved for each
-- user message (one row per turn, the document ids as an array), so that a
-- conversation can tell when its subject changed and avoid sending the same
-- document twice. A record lives exactly as long as its message: the foreign
-- key cascades, so erasure and retention of messages take the records along.

create table agentmem.retrievals (
    tenant_id text not null,
    message_id uuid not null,
    conversation_id uuid not null,
    message_index int not null,
    doc_ids text[] not null,
    created_at timestamptz not null default now(),
    constraint retrievals_pkey primary key (tenant_id, message_id),
    constraint retrievals_message_fk foreign key (tenant_id, message_id)
    references agentmem.messages (tenant_id, message_id) on delete cascade,
    constraint retrievals_doc_ids_ck check (
        cardinality(doc_ids) <= 1000
        and (cardinality(doc_ids) = 0 or (array_ndims(doc_ids) = 1 and array_lower(doc_ids, 1) = 1))
    )
);

comment on table agentmem.retrievals is
'The documents retrieved for one user message (a turn), in retrieval order, without duplicates. '
'conversation_id and message_index are copied from the message (both never change), so the last '
'turns of a conversation are read from this table''s index without a join. Deleted with its message.';

create index retrievals_conversation_idx on agentmem.retrievals (tenant_id, conversation_id, message_index);

alter table agentmem.retrievals enable row level security;
alter table agentmem.retrievals force row level security;

create type agentmem.topic_shift_row as (
    overlap real,
    shifted boolean,
    turns_compared int,
    since_message_index int
);

comment on type agentmem.topic_shift_row is
'What topic_shift returns: the Jaccard overlap of the last two recorded turns'' document sets (NULL with '
'fewer than two), whether it is below the threshold, how many recorded turns were compared (0 to 2), and '
'the message_index of the last recorded turn''s user message (NULL without records).';
