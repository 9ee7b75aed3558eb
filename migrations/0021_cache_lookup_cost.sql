-- 0021: what a cache lookup costs at 1,000,000 entries.
--
-- The B-tree a semantic lookup counts its key through holds only the entries
-- with a vector (embedding is not null), the condition of every vector search
-- of the cache: the count is an index-only scan. Before, each of the key's
-- entries was read from the heap to check its vector (at 1,000,000 entries
-- over 1,000 tenants, 0.85 ms of a semantic lookup's 3.7). An entry stored
-- without a vector waits for the embedding workers and is found by exact
-- lookups only (cache_entries_key_uq) until then.
--
-- cache_hits_entry_fk goes: every lookup logs itself in cache_hits, and the
-- key's check locked the entry's row (FOR KEY SHARE, a write to the entry's
-- heap page) at each one, about 0.1 ms of a lookup. What its ON DELETE SET
-- NULL did, the functions that delete cache entries do themselves (they
-- clear the hits' entry_id), as they always have on Citus, where the key
-- cannot exist. A hit logged while its entry is deleted keeps an entry_id
-- that names no entry: read as "the entry is gone", as a NULL one is.

create index cache_entries_vector_scope_idx on agentmem.cache_entries (
    tenant_id, model, acl_hash, prompt_version, llm_model, corpus_version
) where embedding is not null;

drop index agentmem.cache_entries_scope_idx;

alter table agentmem.cache_hits drop constraint if exists cache_hits_entry_fk;
