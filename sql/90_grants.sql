-- Grants last: re-applied on every install and upgrade, so a function or
-- table added by a later release is covered without another statement.

revoke all on schema agentmem from public;
grant usage on schema agentmem to agentmem_app;

revoke execute on all functions in schema agentmem from public;
grant execute on all functions in schema agentmem to agentmem_app;
revoke execute on function agentmem.grant_app_role(text) from agentmem_app;

-- The functions are security invoker, so the application role needs the
-- table privileges; row-level security confines them to the current tenant.
grant select, insert, update, delete on all tables in schema agentmem to agentmem_app;
grant usage, select on all sequences in schema agentmem to agentmem_app;
revoke all on agentmem.schema_migrations from agentmem_app;
revoke execute on function agentmem.register_model(text, int, text, text) from agentmem_app;
revoke execute on function agentmem._ensure_model_indexes(text) from agentmem_app;
-- issue 5: retention runs across tenants and talks to pg_cron: DBA only.
revoke execute on function agentmem.apply_retention(int) from agentmem_app;
revoke execute on function agentmem.schedule_retention(text) from agentmem_app;
revoke execute on function agentmem.unschedule_retention() from agentmem_app;
revoke execute on function agentmem._cron_call(text, text) from agentmem_app;
revoke execute on function agentmem._cron_status() from agentmem_app;
revoke execute on function agentmem._retention_delete(text, text, text, text, int) from agentmem_app;
revoke execute on function agentmem._retention_kind(text, int) from agentmem_app;
revoke all on agentmem.retention_health from agentmem_app;
revoke all on agentmem.job_runs from agentmem_app;
-- The cache intents are the DBA's catalogue: the application reads them only.
revoke insert, update, delete on agentmem.cache_intents from agentmem_app;
-- Distributing on Citus is the DBA's (sql/85_distribute.sql).
revoke execute on function agentmem.distribute(int) from agentmem_app;
