-- 0013 user memory: a user's memory seen, corrected one item at a time,
-- exported and imported, and a wrong cached answer withdrawn.
-- cache_entries.withdrawn_at: set when a reviewer judges a served answer wrong;
-- a withdrawn entry is never served again and stays for the report.
-- fact_history.change: whether a version was replaced by a contradicting fact
-- or corrected by hand.
-- access_log: who exported, imported or deleted single items, when, what kind
-- and how many rows (no content, no identifier of the user).
-- cache_report gains a result column (entries withdrawn): its old signature
-- is dropped here and created again.

alter table agentmem.cache_entries add column withdrawn_at timestamptz;

comment on column agentmem.cache_entries.withdrawn_at is
'When a reviewer judged an answer served from this entry wrong (review_hit with correct => false): '
'from then on lookups never serve it; it is kept for the report until it expires or is swept.';

alter table agentmem.fact_history add column change text not null default 'replaced';

alter table agentmem.fact_history
add constraint fact_history_change_ck check (change in ('replaced', 'corrected'));

comment on column agentmem.fact_history.change is
'replaced: a contradicting fact took the slot (upsert_fact); corrected: the fact was corrected by hand (update_fact).';

create table agentmem.access_log (
    tenant_id text not null,
    access_id uuid not null default gen_random_uuid(),
    kind text not null,
    actor text not null default session_user,
    rows_affected jsonb not null,
    logged_at timestamptz not null default now(),
    constraint access_log_pkey primary key (tenant_id, access_id),
    constraint access_log_kind_ck check (
        kind in (
            'export_user', 'export_tenant', 'import_user', 'import_tenant',
            'delete_message', 'delete_fact', 'update_fact'
        )
    )
);

comment on table agentmem.access_log is
'Receipts of exports, imports and single-item deletions and corrections: what kind, the database role that '
'did it (actor: the session user), rows per table, when. Like erasure_log it holds no content and no '
'identifier of the user or item.';

create index access_log_logged_at_idx on agentmem.access_log (logged_at);

alter table agentmem.access_log enable row level security;
alter table agentmem.access_log force row level security;

-- Keyset pagination of a user's conversations and facts, newest first.
create index conversations_user_keyset_idx on agentmem.conversations (tenant_id, user_id, created_at, conversation_id);
create index facts_user_keyset_idx on agentmem.facts (tenant_id, user_id, created_at, fact_id);

drop function if exists agentmem.cache_report(numeric, numeric, real[], timestamptz);
