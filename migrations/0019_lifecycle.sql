-- 0019 lifecycle: use recorded, pins.
-- messages, facts and cache_entries gain use_count and last_used_at: how often and when a search or
-- lookup last returned them. They are not written by the searches themselves: a search appends the ids
-- it returned to use_log, and a job folds the log into these columns.
-- messages, conversations and facts gain pinned_at: a pinned item is exempt from every automatic
-- removal and from consolidation.
-- use_log is UNLOGGED: uses are statistics, so the log stays off the write-ahead log (a read-only
-- search does not wait for a WAL flush at commit); a crash empties it, losing the uses not yet folded.

alter table agentmem.messages
add column use_count bigint not null default 0,
add column last_used_at timestamptz,
add column pinned_at timestamptz;

alter table agentmem.messages add constraint messages_use_count_ck check (use_count >= 0);

comment on column agentmem.messages.use_count is
'How many times a search returned this message (folded in from agentmem.use_log by the use job).';
comment on column agentmem.messages.last_used_at is
'When a search last returned this message (folded in from agentmem.use_log); NULL: never.';
comment on column agentmem.messages.pinned_at is
'When the message was pinned (agentmem.pin); NULL: not pinned. Pinned messages are exempt from retention.';

alter table agentmem.facts
add column use_count bigint not null default 0,
add column last_used_at timestamptz,
add column pinned_at timestamptz;

alter table agentmem.facts add constraint facts_use_count_ck check (use_count >= 0);

comment on column agentmem.facts.use_count is
'How many times recall_facts returned this fact (folded in from agentmem.use_log by the use job).';
comment on column agentmem.facts.last_used_at is
'When recall_facts last returned this fact (folded in from agentmem.use_log); NULL: never.';
comment on column agentmem.facts.pinned_at is
'When the fact was pinned (agentmem.pin); NULL: not pinned. Pinned facts are exempt from retention and consolidation.';

alter table agentmem.cache_entries
add column use_count bigint not null default 0,
add column last_used_at timestamptz;

alter table agentmem.cache_entries add constraint cache_entries_use_count_ck check (use_count >= 0);

comment on column agentmem.cache_entries.use_count is
'How many times cache_lookup served this entry (folded in from agentmem.use_log by the use job).';
comment on column agentmem.cache_entries.last_used_at is
'When cache_lookup last served this entry (folded in from agentmem.use_log); NULL: never.';

alter table agentmem.conversations add column pinned_at timestamptz;

comment on column agentmem.conversations.pinned_at is
'When the conversation was pinned (agentmem.pin); NULL: not pinned. Its messages are exempt from retention.';

create unlogged table agentmem.use_log (
    tenant_id text not null,
    use_id bigint generated always as identity,
    kind text not null,
    item_id uuid not null,
    user_id text,
    used_at timestamptz not null default now(),
    constraint use_log_pkey primary key (tenant_id, use_id),
    constraint use_log_kind_ck check (kind in ('message', 'fact', 'cached_answer'))
);

comment on table agentmem.use_log is
'Uses not yet folded: one row per item a search or lookup returned (kind, item id, the user, when). '
'Append-only; agentmem.apply_use_log (and every apply_retention run) folds it into use_count and '
'last_used_at and deletes what it folded. Unlogged: a crash empties it (uses not yet folded are lost).';

create index use_log_item_idx on agentmem.use_log (tenant_id, item_id);

alter table agentmem.use_log enable row level security;
alter table agentmem.use_log force row level security;

-- Forgetting by inactivity and by a per-user budget: a retention policy of messages, facts or cached
-- answers may also remove what has not been used for max_inactive (last use, else its age's time),
-- combined with max_age by combine ('and': every limit set must hold; 'or': any), and keep at most
-- keep_per_user of a user's rows (the most recently used or written first). Pinned rows are exempt.
alter table agentmem.retention_policies
add column max_inactive interval,
add column combine text not null default 'and',
add column keep_per_user int;

alter table agentmem.retention_policies
add constraint retention_policies_lifecycle_ck check (
    (max_inactive is null or max_inactive > interval '0')
    and combine in ('and', 'or')
    and (keep_per_user is null or keep_per_user > 0)
    and ((max_inactive is null and keep_per_user is null) or kind in ('messages', 'facts', 'cached_answers'))
);

comment on column agentmem.retention_policies.max_inactive is
'Remove rows not used (returned by a search or lookup) for this long: their last use, else the time their age is measured from. NULL: no limit.';
comment on column agentmem.retention_policies.combine is
'How max_age and max_inactive combine: and (a row goes when every limit set holds), or (when any does).';
comment on column agentmem.retention_policies.keep_per_user is
'Keep at most this many rows of the kind per user (pinned ones not counted): the most recently used '
'(else written) first, then the most used. NULL: no budget.';

-- A bounded boost in ranking for recently and often used memories, off by default: a tenant's weight
-- (NULL: off), which a search may override. search_messages and recall_facts gain use_boost: their
-- old signatures are dropped here and created again.
alter table agentmem.tenant_settings add column use_boost real;

alter table agentmem.tenant_settings
add constraint tenant_settings_use_boost_ck check (use_boost >= 0 and use_boost <= 0.5);

comment on column agentmem.tenant_settings.use_boost is
'The weight of use and recency in search_messages and recall_facts (0 to 0.5; NULL or 0: off): a '
'candidate''s score is multiplied by a factor between 1 and 1 + use_boost (agentmem.set_use_boost).';

drop function if exists agentmem.search_messages(
    text, vector, int, anycompatible, real, text, text, int, int, timestamptz, timestamptz, interval
);
drop function if exists agentmem.recall_facts(
    text, vector, int, text, text, int, int, timestamptz, timestamptz, timestamptz
);
-- list_messages and list_facts gain pinned_at, use_count and last_used_at (what the inspector shows).
drop function if exists agentmem.list_messages(anycompatible, int, int);
drop function if exists agentmem.list_facts(text, boolean, text, int);

-- Consolidation that supersedes, never destroys: a near-duplicate fact of a user goes into the history
-- of the newer one (change 'merged', its period closed) and the newer one's sources become the union.
-- Each run is recorded (consolidation_runs) with what it changed (consolidation_changes: the merged
-- fact's row as it was, the newer one's sources before), so that an undo restores exactly that.
alter table agentmem.fact_history drop constraint fact_history_change_ck;

alter table agentmem.fact_history
add constraint fact_history_change_ck check (change in ('replaced', 'corrected', 'merged'));

alter table agentmem.tenant_settings
add column consolidate_min_similarity real,
add column consolidate_max_changes int;

alter table agentmem.tenant_settings
add constraint tenant_settings_consolidate_ck check (
    (consolidate_min_similarity is null or (consolidate_min_similarity >= 0.8 and consolidate_min_similarity <= 1))
    and (consolidate_max_changes is null or consolidate_max_changes between 1 and 10000)
);

comment on column agentmem.tenant_settings.consolidate_min_similarity is
'Consolidation of near-duplicate facts: the least cosine similarity of two facts of one user whose subjects '
'are the same once normalised (0.8 to 1); NULL: the tenant is not consolidated by the scheduled job.';
comment on column agentmem.tenant_settings.consolidate_max_changes is
'Consolidation: at most this many facts merged per run (1 to 10,000; NULL: 100).';

create table agentmem.consolidation_runs (
    tenant_id text not null,
    run_id uuid not null default gen_random_uuid(),
    user_id text,
    dry_run boolean not null,
    min_similarity real not null,
    max_changes int not null,
    changes int not null default 0,
    started_at timestamptz not null default now(),
    undone_at timestamptz,
    constraint consolidation_runs_pkey primary key (tenant_id, run_id)
);

comment on table agentmem.consolidation_runs is
'Runs of fact consolidation: whose facts (user_id NULL: every user of the tenant), dry run or not, the '
'bounds used, how many facts were merged, and when the run was undone.';

create index consolidation_runs_user_idx on agentmem.consolidation_runs (tenant_id, user_id);

alter table agentmem.consolidation_runs enable row level security;
alter table agentmem.consolidation_runs force row level security;

create table agentmem.consolidation_changes (
    tenant_id text not null,
    run_id uuid not null,
    older_fact_id uuid not null,
    newer_fact_id uuid not null,
    user_id text not null,
    similarity real,
    reason text not null,
    older_row jsonb,
    newer_sources_before uuid[],
    history_id bigint,
    constraint consolidation_changes_pkey primary key (tenant_id, run_id, older_fact_id),
    constraint consolidation_changes_run_fk foreign key (tenant_id, run_id)
    references agentmem.consolidation_runs (tenant_id, run_id) on delete cascade,
    -- The merged fact's text (older_row) lives no longer than the fact it went into, or its history row.
    constraint consolidation_changes_newer_fk foreign key (tenant_id, newer_fact_id)
    references agentmem.facts (tenant_id, fact_id) on delete cascade,
    constraint consolidation_changes_history_fk foreign key (tenant_id, history_id)
    references agentmem.fact_history (tenant_id, history_id) on delete cascade,
    constraint consolidation_changes_reason_ck check (reason in ('same subject', 'same text'))
);

comment on table agentmem.consolidation_changes is
'What a consolidation run merged: the older fact (its whole row as it was, older_row; NULL in a dry run) '
'into the newer one (whose sources before are newer_sources_before), the history row it became, and why. '
'A change goes with the newer fact or its history row (erasure, retention, an undo): no copy of a text outlives it.';

create index consolidation_changes_user_idx on agentmem.consolidation_changes (tenant_id, user_id);

alter table agentmem.consolidation_changes enable row level security;
alter table agentmem.consolidation_changes force row level security;
