-- 0004 answer cache: cached LLM answers keyed on tenant, ACL hash and the
-- caller's versions; intents with thresholds and tiered TTLs; the per-tenant
-- corpus version; the reverse index of source documents; the lookup log.
-- Row-level security is enabled and forced here (no policy = no rows); the
-- tenant_isolation policies are in sql/32_cache_policies.sql, because they call
-- agentmem.current_tenant(), which the definitions create after the migrations.

create table agentmem.cache_intents (
    intent text primary key,
    threshold real not null default 0.95,
    ttl interval not null,
    high_stakes boolean not null default false,
    description text not null default '',
    constraint cache_intents_intent_ck check (intent ~ '^[a-z][a-z0-9_.-]{0,62}$'),
    constraint cache_intents_threshold_ck check (threshold > 0 and threshold <= 1),
    constraint cache_intents_ttl_ck check (ttl > interval '0')
);

comment on table agentmem.cache_intents is
'Intents of cached questions: semantic threshold, time to live, and whether the intent is high-stakes '
'(served from an exact match only). Installation-wide catalogue the DBA edits, no tenant data: '
'therefore no tenant_id and no row-level security (exempt in tests/test_tenant.py).';

insert into agentmem.cache_intents (intent, threshold, ttl, high_stakes, description) values
('general', 0.95, interval '7 days', false, 'Default: questions about stable product knowledge.'),
('faq', 0.95, interval '30 days', false, 'Curated frequently asked questions; answers change rarely.'),
('howto', 0.95, interval '14 days', false, 'How-to and troubleshooting steps.'),
('status', 0.97, interval '1 hour', false, 'Time-sensitive questions (service status, stock, schedules).'),
('billing', 0.95, interval '1 day', true, 'Prices, invoices, refunds: exact matches only.'),
('cancellation', 0.95, interval '1 day', true, 'Cancelling or ending a contract: exact matches only.'),
('security', 0.95, interval '6 hours', true, 'Accounts, access, credentials: exact matches only.'),
('compliance', 0.95, interval '1 day', true, 'Legal, privacy and regulatory questions: exact matches only.');

create table agentmem.corpus_versions (
    tenant_id text not null,
    version bigint not null,
    updated_at timestamptz not null default now(),
    constraint corpus_versions_pkey primary key (tenant_id),
    constraint corpus_versions_version_ck check (version >= 0)
);

comment on table agentmem.corpus_versions is
'The current corpus (index) version of each tenant; a tenant without a row is at version 0. '
'Cached answers written under an older version are never served and are removed by sweep_cache.';

alter table agentmem.corpus_versions enable row level security;
alter table agentmem.corpus_versions force row level security;

create table agentmem.cache_entries (
    tenant_id text not null,
    entry_id uuid not null default gen_random_uuid(),
    question text not null,
    question_norm text not null,
    question_key bytea not null,
    acl_hash text not null default '',
    corpus_version bigint not null,
    prompt_version text not null default '',
    llm_model text not null default '',
    intent text not null references agentmem.cache_intents (intent),
    answer text not null,
    model text not null references agentmem.models (model),
    embedding vector not null,
    source_ids text[] not null default '{}',
    user_id text,
    conversation_id uuid,
    created_at timestamptz not null default now(),
    expires_at timestamptz not null,
    constraint cache_entries_pkey primary key (tenant_id, entry_id),
    constraint cache_entries_key_uq unique (
        tenant_id, question_key, acl_hash, corpus_version, prompt_version, llm_model, model
    ),
    constraint cache_entries_key_ck check (octet_length(question_key) = 32),
    constraint cache_entries_scope_ck check (
        length(acl_hash) <= 200 and length(prompt_version) <= 200 and length(llm_model) <= 200
    )
);

comment on table agentmem.cache_entries is
'Cached answers. Keyed on tenant, ACL hash, corpus version, prompt version, generating model (llm_model) '
'and the sha256 of the normalised question (question_key: the raw text is never indexed). '
'model/embedding is the question''s embedding (one HNSW index per registered model). '
'user_id and conversation_id record whose conversation the answer was written from (for erasure).';

create index cache_entries_expires_idx on agentmem.cache_entries (tenant_id, expires_at);
create index cache_entries_version_idx on agentmem.cache_entries (tenant_id, corpus_version);
create index cache_entries_user_idx on agentmem.cache_entries (tenant_id, user_id) where user_id is not null;
create index cache_entries_conversation_idx on agentmem.cache_entries (tenant_id, conversation_id)
where conversation_id is not null;

alter table agentmem.cache_entries enable row level security;
alter table agentmem.cache_entries force row level security;

create table agentmem.cache_entry_sources (
    tenant_id text not null,
    doc_id text not null,
    entry_id uuid not null,
    constraint cache_entry_sources_pkey primary key (tenant_id, doc_id, entry_id),
    constraint cache_entry_sources_entry_fk foreign key (tenant_id, entry_id)
    references agentmem.cache_entries (tenant_id, entry_id) on delete cascade
);

comment on table agentmem.cache_entry_sources is
'Reverse index: which cached answers cite which source document, so invalidate_source needs no scan.';

create index cache_entry_sources_entry_idx on agentmem.cache_entry_sources (tenant_id, entry_id);

alter table agentmem.cache_entry_sources enable row level security;
alter table agentmem.cache_entry_sources force row level security;

create table agentmem.cache_hits (
    tenant_id text not null,
    hit_id uuid not null default gen_random_uuid(),
    entry_id uuid,
    kind text not null,
    similarity real,
    guard_passed boolean,
    threshold real,
    intent text not null,
    question_asked text not null,
    matched_question text,
    user_id text,
    created_at timestamptz not null default now(),
    reviewed_correct boolean,
    reviewed_at timestamptz,
    constraint cache_hits_pkey primary key (tenant_id, hit_id),
    constraint cache_hits_kind_ck check (kind in ('exact', 'semantic', 'miss')),
    constraint cache_hits_entry_fk foreign key (tenant_id, entry_id)
    references agentmem.cache_entries (tenant_id, entry_id) on delete set null (entry_id)
);

comment on table agentmem.cache_hits is
'Log of cache lookups: every hit (kind exact or semantic) and every miss (kind miss), with the best '
'semantic candidate a miss had (similarity, matched_question, whether the guard passed), so that a '
'reviewed sample can price thresholds below the one in force. matched_question is a copy: the entry '
'may be gone (entry_id is then null). user_id is the asker (for erasure).';

create index cache_hits_entry_idx on agentmem.cache_hits (tenant_id, entry_id) where entry_id is not null;
create index cache_hits_created_idx on agentmem.cache_hits (tenant_id, created_at);
create index cache_hits_user_idx on agentmem.cache_hits (tenant_id, user_id) where user_id is not null;

alter table agentmem.cache_hits enable row level security;
alter table agentmem.cache_hits force row level security;
