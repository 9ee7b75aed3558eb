-- 0020 term statistics for BM25: how many of a user's messages hold each word
-- (term_stats) and how many messages and words the user has (term_totals), so
-- that the words branch of message search can weigh a rare word above a
-- common one (inverse document frequency) and normalise by length. Derived
-- from messages.content_tsv and kept current by every writer of messages
-- (sql/13_bm25.sql); never exported (an import rebuilds them). Kept per
-- conversation and summed per user by the search: writers of one conversation
-- are already serialised by its row lock, so the counts add no wait between
-- writers of one user's different conversations.
-- Filled here for the messages already stored.

create table agentmem.term_stats (
    tenant_id text not null,
    user_id text not null,
    term text not null,
    conversation_id uuid not null,
    messages int not null,
    constraint term_stats_pkey primary key (tenant_id, user_id, term, conversation_id)
);

comment on table agentmem.term_stats is
'For BM25: per conversation of a user, the number of its messages whose content_tsv holds each lexeme '
'(summed over the user''s conversations: the document frequency). Derived from messages; kept by the '
'writers of messages (agentmem_private.count_terms).';

create table agentmem.term_totals (
    tenant_id text not null,
    user_id text not null,
    conversation_id uuid not null,
    messages bigint not null,
    words bigint not null,
    constraint term_totals_pkey primary key (tenant_id, user_id, conversation_id)
);

comment on table agentmem.term_totals is
'For BM25: per conversation of a user, the number of messages and the sum of their lengths (distinct '
'lexemes of content_tsv), summed per user for the average length. Derived from messages; kept with term_stats.';

alter table agentmem.term_stats enable row level security;
alter table agentmem.term_stats force row level security;
alter table agentmem.term_totals enable row level security;
alter table agentmem.term_totals force row level security;

-- The messages already stored, counted as agentmem_private.count_terms
-- counts them (on Citus the new tables are filled here on the coordinator,
-- then distributed with their rows by the install's agentmem.distribute).
insert into agentmem.term_stats (tenant_id, user_id, term, conversation_id, messages)
select
    m.tenant_id,
    m.user_id,
    t.lexeme,
    m.conversation_id,
    count(*)::int as messages
from agentmem.messages as m
cross join lateral unnest(m.content_tsv) as t (lexeme, positions, weights)
group by m.tenant_id, m.user_id, t.lexeme, m.conversation_id;

insert into agentmem.term_totals (tenant_id, user_id, conversation_id, messages, words)
select
    m.tenant_id,
    m.user_id,
    m.conversation_id,
    count(*) as messages,
    sum(length(m.content_tsv)) as words
from agentmem.messages as m
group by m.tenant_id, m.user_id, m.conversation_id;
