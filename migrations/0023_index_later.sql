-- 0023: a message's vector may join the HNSW index later.
--
-- An HNSW insert is most of what storing one message costs. With the
-- setting agentmem.index_later on, a message's vector is written to
-- pending_embedding (embedding NULL: no HNSW or IVFFlat index holds a NULL)
-- and a job moves it into embedding, where the indexes take it in bulk;
-- until then every search reads the pending vectors of its scope exactly
-- (found through message_embeddings_pending_idx), so a message is
-- searchable as soon as its call returns. Exactly one of the two columns
-- holds the vector.

alter table agentmem.message_embeddings
alter column embedding drop not null,
add column pending_embedding vector,
add constraint message_embeddings_one_vector check ((embedding is null) <> (pending_embedding is null));

comment on column agentmem.message_embeddings.pending_embedding is
'The vector of a message stored with agentmem.index_later on, until agentmem.index_pending_vectors moves it into embedding (then NULL); exactly one of embedding and pending_embedding is set.';

create index message_embeddings_pending_idx on agentmem.message_embeddings (tenant_id, user_id, model)
where embedding is null;

-- The conversation counts its vectors waiting (store_messages adds to it
-- under the row lock it already takes; index_pending_vectors sets it back to
-- 0 once none is left): agentmem.index_later_max_rows bounds them without a
-- count at every write.
alter table agentmem.conversations add column pending_vectors int not null default 0;

comment on column agentmem.conversations.pending_vectors is
'How many of the conversation''s message vectors wait in pending_embedding (agentmem.index_later): added to by store_messages, set to 0 by agentmem.index_pending_vectors once none is left; a bound, not an exact count (a delete leaves it higher, a write racing the job may leave it lower until the next run).';
