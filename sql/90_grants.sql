-- Grants and ownership, last: re-applied on every install and upgrade, so a
-- function or table added by a later release is covered without another
-- statement.
--
-- The security model (README, "Security model"):
--   agentmem_app    the application's role: USAGE on schema agentmem and
--                   EXECUTE on the public API; no privilege on any table,
--                   view or sequence, nothing in agentmem_private.
--   agentmem_owner  NOLOGIN, not superuser, not BYPASSRLS: owns the API's
--                   security definer functions and holds exactly the table
--                   privileges they need. Tables force row-level security,
--                   so every statement it runs is still confined to the
--                   tenant the caller set.
--   the DBA         owns the schema and the tables and runs the DBA functions
--                   (security invoker, not granted to agentmem_app).

revoke all on schema agentmem from public;
revoke all on schema agentmem_private from public;
grant usage on schema agentmem to agentmem_app, agentmem_owner;
grant usage on schema agentmem_private to agentmem_owner;

-- No table, view or sequence for the application role (nor for public).
revoke all on all tables in schema agentmem from public, agentmem_app;
revoke all on all sequences in schema agentmem from public, agentmem_app;

-- What the API's functions need, and no more: DML on tenant tables; the
-- installation-wide catalogues read-only; erasure receipts append-only;
-- nothing on the ledger or the retention runs (DBA functions write those).
do $owner_tables$
declare
    v_table text;
begin
    for v_table in
        select c.relname
        from pg_catalog.pg_class as c
        where
            c.relnamespace = 'agentmem'::regnamespace and c.relkind in ('r', 'p')
            and c.relname not in ('job_runs', 'erasure_log')
            and exists (
                select from pg_catalog.pg_attribute as a
                where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped
            )
    loop
        execute pg_catalog.format(
            'grant select, insert, update, delete on agentmem.%I to agentmem_owner', v_table
        );
    end loop;
end
$owner_tables$;
revoke all on agentmem.schema_migrations, agentmem.job_runs, agentmem.erasure_log from agentmem_owner;
grant select, insert on agentmem.erasure_log to agentmem_owner;
revoke all on agentmem.models, agentmem.cache_intents, agentmem.text_search_settings from agentmem_owner;
grant select on agentmem.models, agentmem.cache_intents, agentmem.text_search_settings to agentmem_owner;
grant usage, select on all sequences in schema agentmem to agentmem_owner;
revoke all on agentmem.tenant_grants, agentmem.tenant_binding, agentmem.retention_cursors from agentmem_owner;
-- agentmem.may_act_as (security definer) reads the binding for every caller.
grant select on agentmem.tenant_grants, agentmem.tenant_binding to agentmem_owner;
revoke all on agentmem.search_path_health, agentmem.tenant_grant_list from agentmem_owner;
revoke all on agentmem.retention_health, agentmem.tenants_needing_index, agentmem.tenant_indexes
from agentmem_owner;

-- Functions: the API to both roles, internals to the owner only, then the
-- DBA's functions taken back from both.
revoke execute on all functions in schema agentmem from public;
revoke execute on all functions in schema agentmem_private from public;
grant execute on all functions in schema agentmem to agentmem_app, agentmem_owner;
grant execute on all functions in schema agentmem_private to agentmem_owner;
revoke execute on function
agentmem.grant_app_role(text),
agentmem.grant_tenant(text, text, text, boolean),
agentmem.revoke_tenant(text, text, text, boolean),
agentmem.set_tenant_binding(text, text),
agentmem.register_model(text, int, text, text),
agentmem.apply_retention(int),
agentmem.schedule_retention(text),
agentmem.unschedule_retention(),
agentmem.set_default_retention_policy(text, interval),
agentmem.clear_default_retention_policy(text),
agentmem.set_text_search_config(regconfig),
agentmem.tenant_index_ddl(text, text, text, boolean, text),
agentmem.create_tenant_index(text, text, text),
agentmem.drop_tenant_index(text, text, text),
agentmem.measure_tenant_index(text, text),
-- Distributing on Citus is the DBA's (sql/85_distribute.sql).
agentmem.distribute(int),
agentmem.is_distributed()
from agentmem_app, agentmem_owner;

-- Every security definer function of the API belongs to agentmem_owner.
-- Changing a function's owner needs the new owner to hold CREATE on its
-- schema; it holds it only for the length of this block.
do $ownership$
declare
    v_fn regprocedure;
begin
    grant create on schema agentmem to agentmem_owner;
    for v_fn in
        select p.oid::regprocedure
        from pg_catalog.pg_proc as p
        where
            p.pronamespace = 'agentmem'::regnamespace and p.prosecdef
            and p.proowner <> 'agentmem_owner'::regrole
    loop
        execute pg_catalog.format('alter function %s owner to agentmem_owner', v_fn);
    end loop;
    revoke create on schema agentmem from agentmem_owner;
end
$ownership$;
