-- 0003 conversations: episodic memory. Conversations, their messages with a
-- gap-free index, the messages' embeddings in a narrow table of their own
-- (one partial HNSW index per registered model, built by sql/80_model_indexes.sql)
-- and a tenant-scoped cache of embeddings keyed by the sha256 of the exact text.
-- Row-level security is enabled and forced here; the tenant_isolation policies
-- are created by sql/20_conversations.sql, because they call
-- agentmem.current_tenant(), which a fresh install defines only after the
-- migrations (sql/00_tenant.sql). Until then the tables deny every row.

create table agentmem.conversations (
    tenant_id text not null,
    conversation_id uuid not null default gen_random_uuid(),
    user_id text not null,
    title text,
    metadata jsonb not null default '{}',
    summary text,
    summary_through int,
    next_index int not null default 0,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    constraint conversations_pkey primary key (tenant_id, conversation_id),
    constraint conversations_next_index_ck check (next_index >= 0),
    constraint conversations_summary_ck check ((summary is null) = (summary_through is null))
);

comment on table agentmem.conversations is
'One conversation of one user. next_index is the message_index the next message gets: '
'it is incremented under the row lock of the inserting transaction, so indexes are gap-free. '
'summary covers the messages with message_index <= summary_through.';

create index conversations_user_idx on agentmem.conversations (tenant_id, user_id, created_at);

alter table agentmem.conversations enable row level security;
alter table agentmem.conversations force row level security;

create table agentmem.messages (
    tenant_id text not null,
    message_id uuid not null default gen_random_uuid(),
    conversation_id uuid not null,
    user_id text not null,
    message_index int not null,
    role text not null,
    content text not null,
    metadata jsonb not null default '{}',
    created_at timestamptz not null default now(),
    constraint messages_pkey primary key (tenant_id, message_id),
    constraint messages_conversation_index_key unique (tenant_id, conversation_id, message_index),
    constraint messages_conversation_fk foreign key (tenant_id, conversation_id)
    references agentmem.conversations (tenant_id, conversation_id) on delete cascade,
    constraint messages_role_ck check (role in ('user', 'assistant', 'tool', 'system')),
    constraint messages_message_index_ck check (message_index >= 0)
);

comment on table agentmem.messages is
'The messages of conversations. user_id is copied from the conversation: filtering by user '
'and erasure of a user need it without a join.';

create index messages_user_idx on agentmem.messages (tenant_id, user_id, created_at);

alter table agentmem.messages enable row level security;
alter table agentmem.messages force row level security;

create table agentmem.message_embeddings (
    tenant_id text not null,
    message_id uuid not null,
    model text not null,
    user_id text not null,
    conversation_id uuid not null,
    embedding vector not null,
    created_at timestamptz not null default now(),
    constraint message_embeddings_pkey primary key (tenant_id, message_id, model),
    constraint message_embeddings_message_fk foreign key (tenant_id, message_id)
    references agentmem.messages (tenant_id, message_id) on delete cascade,
    constraint message_embeddings_model_fk foreign key (model) references agentmem.models (model)
);

comment on table agentmem.message_embeddings is
'One embedding per message and model (two models coexist while a store is re-embedded). '
'user_id and conversation_id are copied from the message so that a search filters without a join. '
'Each registered model has a partial HNSW cosine index on (embedding::vector(dim)) where model = M.';

create index message_embeddings_user_idx on agentmem.message_embeddings (tenant_id, user_id, model, conversation_id);

alter table agentmem.message_embeddings enable row level security;
alter table agentmem.message_embeddings force row level security;

create table agentmem.embedding_cache (
    tenant_id text not null,
    model text not null,
    text_sha256 bytea not null,
    cached_vector vector not null,
    created_at timestamptz not null default now(),
    constraint embedding_cache_pkey primary key (tenant_id, model, text_sha256),
    constraint embedding_cache_model_fk foreign key (model) references agentmem.models (model),
    constraint embedding_cache_sha256_ck check (length(text_sha256) = 32)
);

comment on table agentmem.embedding_cache is
'Embeddings already computed, keyed by model and the sha256 of the exact text embedded '
'(prefix included). No TTL: an embedding of the same text by the same model cannot go stale. '
'Tenant-scoped on purpose: a shared cache would let one tenant probe whether another embedded '
'a given text. The vector column is not named embedding, so no HNSW index is built on it.';

alter table agentmem.embedding_cache enable row level security;
alter table agentmem.embedding_cache force row level security;

-- Result types of the API (composite types, so a function may have an input
-- named like one of its result columns, e.g. conversation_id).
create type agentmem.message_row as (
    message_id uuid,
    conversation_id uuid,
    message_index int,
    role text,
    content text,
    metadata jsonb,
    created_at timestamptz
);

comment on type agentmem.message_row is
'A message as recent_messages and context_window return it.';

create type agentmem.message_hit as (
    message_id uuid,
    conversation_id uuid,
    message_index int,
    role text,
    content text,
    metadata jsonb,
    created_at timestamptz,
    similarity real
);

comment on type agentmem.message_hit is
'A message found by search_messages, with its cosine similarity to the query.';

create type agentmem.message_in_window as (
    window_rank int,
    conversation_id uuid,
    message_id uuid,
    message_index int,
    role text,
    content text,
    metadata jsonb,
    created_at timestamptz,
    is_hit boolean,
    similarity real,
    window_similarity real
);

comment on type agentmem.message_in_window is
'A message of a context window returned by search_with_context: window_rank (1 = best window), '
'is_hit and similarity (NULL unless it is a hit), window_similarity (the best hit of its window).';
