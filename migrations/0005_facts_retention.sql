-- 0005 facts and retention: semantic facts with provenance, the history of
-- replaced facts, the erasure log, retention policies and the maintenance job's runs.
-- Row-level security is enabled and forced here (no policy = no rows); the
-- tenant_isolation policies are created by sql/40_facts.sql, because they call
-- agentmem.current_tenant(), which a fresh install defines only after the migrations.

create table agentmem.facts (
    tenant_id text not null,
    fact_id uuid not null default gen_random_uuid(),
    user_id text not null,
    subject text not null,
    fact text not null,
    model text not null references agentmem.models (model),
    embedding vector not null,
    source_message_ids uuid[] not null default '{}',
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    constraint facts_pkey primary key (tenant_id, fact_id),
    constraint facts_subject_ck check (subject = btrim(subject) and subject <> ''),
    constraint facts_fact_ck check (fact <> '')
);

comment on table agentmem.facts is
'Semantic facts about a user, extracted from conversations: one current fact per '
'(user, subject, model), with the ids of the messages it came from. Written by agentmem.upsert_fact.';

-- One current fact per subject slot: the advisory lock in upsert_fact serialises
-- writers, this key makes a second row impossible even without it.
create unique index facts_slot_key on agentmem.facts (tenant_id, user_id, lower(subject), model);
create index facts_user_idx on agentmem.facts (tenant_id, user_id);
create index facts_sources_idx on agentmem.facts using gin (source_message_ids);
create index facts_updated_at_idx on agentmem.facts (updated_at);

alter table agentmem.facts enable row level security;
alter table agentmem.facts force row level security;

create table agentmem.fact_history (
    tenant_id text not null,
    history_id bigint generated always as identity,
    fact_id uuid not null,
    user_id text not null,
    subject text not null,
    fact text not null,
    source_message_ids uuid[] not null default '{}',
    valid_from timestamptz not null,
    replaced_at timestamptz not null default now(),
    constraint fact_history_pkey primary key (tenant_id, history_id),
    constraint fact_history_fact_fk foreign key (tenant_id, fact_id)
    references agentmem.facts (tenant_id, fact_id) on delete cascade
);

comment on table agentmem.fact_history is
'Facts replaced by a contradicting one: the old text and its sources. An entry lives only as long '
'as one of its source messages does (forgetting and retention prune it) and goes with its fact.';

create index fact_history_fact_idx on agentmem.fact_history (tenant_id, fact_id);
create index fact_history_user_idx on agentmem.fact_history (tenant_id, user_id);
create index fact_history_sources_idx on agentmem.fact_history using gin (source_message_ids);

alter table agentmem.fact_history enable row level security;
alter table agentmem.fact_history force row level security;

create table agentmem.erasure_log (
    tenant_id text not null,
    erasure_id uuid not null default gen_random_uuid(),
    scope text not null,
    rows_removed jsonb not null,
    erased_at timestamptz not null default now(),
    constraint erasure_log_pkey primary key (tenant_id, erasure_id),
    constraint erasure_log_scope_ck check (scope in ('user', 'conversation'))
);

comment on table agentmem.erasure_log is
'Receipts of forget_user and forget_conversation: what kind of erasure, rows removed per table, when. '
'Deliberately holds no content and no identifier of what was erased (not even a hash of it).';

create index erasure_log_erased_at_idx on agentmem.erasure_log (erased_at);

alter table agentmem.erasure_log enable row level security;
alter table agentmem.erasure_log force row level security;

-- tenant_id '' is the installation-wide default: set_tenant refuses an empty
-- tenant id, so no tenant can ever read or write those rows through RLS.
create table agentmem.retention_policies (
    tenant_id text not null,
    kind text not null,
    max_age interval,
    updated_at timestamptz not null default now(),
    constraint retention_policies_pkey primary key (tenant_id, kind),
    constraint retention_policies_kind_ck check (
        kind in ('messages', 'cached_answers', 'hit_log', 'facts', 'erasure_log', 'job_runs')
    ),
    constraint retention_policies_max_age_ck check (max_age > interval '0')
);

comment on table agentmem.retention_policies is
'How long each kind of data is kept: a row per (tenant, kind), tenant_id '''' being the installation '
'default. max_age NULL keeps forever (a tenant row with NULL overrides a default). '
'Applied by agentmem.apply_retention.';

-- Installation defaults: the derived logs are bounded out of the box; user
-- content (messages, facts) is kept until a DBA or tenant sets a policy.
insert into agentmem.retention_policies (tenant_id, kind, max_age) values
('', 'hit_log', interval '90 days'),
('', 'job_runs', interval '30 days');

-- After the defaults: a non-superuser owner is bound by forced RLS too.
alter table agentmem.retention_policies enable row level security;
alter table agentmem.retention_policies force row level security;

create table agentmem.job_runs (
    tenant_id text not null,
    run_id bigint generated always as identity,
    job text not null,
    started_at timestamptz not null,
    finished_at timestamptz not null default clock_timestamp(),
    rows_removed jsonb not null default '{}',
    total_removed bigint not null default 0,
    error text,
    constraint job_runs_pkey primary key (tenant_id, run_id)
);

comment on table agentmem.job_runs is
'Runs of agentmem maintenance jobs (apply_retention): rows removed per kind, duration, errors. '
'Installation-wide runs carry tenant_id '''', which no tenant can see. Read through agentmem.retention_health.';

create index job_runs_job_idx on agentmem.job_runs (job, started_at desc);

alter table agentmem.job_runs enable row level security;
alter table agentmem.job_runs force row level security;

-- Retention deletes the oldest rows first across tenants: these serve its
-- default-policy cutoffs (per-tenant policies use the (tenant_id, ...) indexes).
create index messages_created_at_idx on agentmem.messages (created_at);
create index cache_entries_created_at_idx on agentmem.cache_entries (created_at);
