-- 0009 tenant indexes: what exact scans and per-tenant HNSW indexes need.
-- Embedding rows keep their vector in the heap row up to 8160 bytes (2,000
-- dimensions) instead of PostgreSQL's 2 kB TOAST threshold, which moved every
-- vector of more than ~500 dimensions out of line: an exact scan of a user's
-- rows then paid one TOAST fetch per row. Rows written before this migration
-- keep their out-of-line vectors until rewritten (VACUUM FULL).
-- A B-tree on the answer cache's lookup scope, so that a small scope is
-- counted and scanned exactly instead of being a filtered slice of the
-- model's HNSW index. Per-tenant HNSW indexes themselves are built by the DBA
-- (agentmem.create_tenant_index or the statement of agentmem.tenant_index_ddl).

alter table agentmem.message_embeddings set (toast_tuple_target = 8160);
alter table agentmem.facts set (toast_tuple_target = 8160);
alter table agentmem.cache_entries set (toast_tuple_target = 8160);

create index cache_entries_scope_idx on agentmem.cache_entries (
    tenant_id, model, acl_hash, prompt_version, llm_model, corpus_version
);
