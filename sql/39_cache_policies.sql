-- The tenant_isolation policy of every answer cache table (re-created on every
-- install: the policies call agentmem.current_tenant(), defined in sql/00).

drop policy if exists tenant_isolation on agentmem.corpus_versions;
create policy tenant_isolation on agentmem.corpus_versions
using (tenant_id = agentmem.current_tenant())
with check (tenant_id = agentmem.current_tenant());

drop policy if exists tenant_isolation on agentmem.cache_entries;
create policy tenant_isolation on agentmem.cache_entries
using (tenant_id = agentmem.current_tenant())
with check (tenant_id = agentmem.current_tenant());

drop policy if exists tenant_isolation on agentmem.cache_entry_sources;
create policy tenant_isolation on agentmem.cache_entry_sources
using (tenant_id = agentmem.current_tenant())
with check (tenant_id = agentmem.current_tenant());

drop policy if exists tenant_isolation on agentmem.cache_hits;
create policy tenant_isolation on agentmem.cache_hits
using (tenant_id = agentmem.current_tenant())
with check (tenant_id = agentmem.current_tenant());
