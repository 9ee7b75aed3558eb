-- 0024: the answer cache's key counted and scanned through its live entries.
--
-- A semantic lookup reads the entries of its key that can serve: with a
-- vector, not withdrawn by a review, unexpired. The B-tree it counts and
-- scans them through now holds only entries with a vector that are not
-- withdrawn, and carries expiry after the key's columns: "unexpired" is a
-- range of the index, not a test of each entry's row. Before, every entry of
-- the key was read past its vector to its expiry and withdrawal columns (at
-- 1,000,000 entries over 1,000 tenants, about a fifth of the key's scan).
-- The count of a key is the count of its live entries, the candidates a scan
-- reads, and stays an index-only scan.

create index cache_entries_live_scope_idx on agentmem.cache_entries (
    tenant_id, model, acl_hash, prompt_version, llm_model, corpus_version, expires_at
) where embedding is not null and withdrawn_at is null;

drop index agentmem.cache_entries_vector_scope_idx;
