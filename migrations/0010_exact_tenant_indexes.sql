-- 0010 exact tenant indexes: agentmem.tenant_index_ddl takes a kind ('hnsw'
-- or 'exact': a tenant's IVFFlat index of one list, which a message search
-- reads whole where HNSW would need a second, slow pass). Its earlier
-- signature, without kind, is dropped; it is created again with kind.
-- The view agentmem.tenants_needing_index, which calls it, is dropped with it
-- and created again, with a column index_kind.

drop view if exists agentmem.tenants_needing_index;
drop function if exists agentmem.tenant_index_ddl(text, text, text, boolean);
