-- Grants and ownership, last: re-applied on every install and upgrade, so a
-- function or table added by a later release is covered without another
-- statement.
--
-- The security model (README, "Security model"; docs/security.md):
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
            and c.relname not in ('job_runs', 'erasure_log', 'access_log')
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
revoke all on agentmem.schema_migrations, agentmem.job_runs, agentmem.erasure_log, agentmem.access_log
from agentmem_owner;
grant select, insert on agentmem.erasure_log, agentmem.access_log to agentmem_owner;
-- An export's header names the installed version: two columns of the ledger, read-only.
grant select (version, applied_by_version) on agentmem.schema_migrations to agentmem_owner;
revoke all on agentmem.models, agentmem.cache_intents, agentmem.text_search_settings
from agentmem_owner, agentmem_queue;
grant select on agentmem.models, agentmem.cache_intents, agentmem.text_search_settings to agentmem_owner;
grant usage, select on all sequences in schema agentmem to agentmem_owner;
revoke all on agentmem.tenant_grants, agentmem.tenant_binding, agentmem.retention_cursors from agentmem_owner;
-- agentmem.may_act_as (security definer) reads the binding for every caller.
grant select on agentmem.tenant_grants, agentmem.tenant_binding to agentmem_owner;
revoke all on agentmem.search_path_health, agentmem.tenant_grant_list from agentmem_owner;
revoke all on agentmem.retention_health, agentmem.tenants_needing_index, agentmem.tenant_indexes,
agentmem.embedding_backlog, agentmem.health
from agentmem_owner;

-- The queue's owner (sql/17_embedding_jobs.sql): every tenant's jobs through
-- its own policy; the rows the vectors go to only under a tenant it sets.
revoke all on all tables in schema agentmem from agentmem_worker;
grant select, update, delete on agentmem.embedding_jobs to agentmem_queue;
grant select, insert, update, delete on agentmem.embedding_job_counts to agentmem_queue;
grant select on agentmem.messages, agentmem.models, agentmem.tenant_settings to agentmem_queue;
grant select, insert on agentmem.embedding_cache, agentmem.message_embeddings, agentmem.fact_history
to agentmem_queue;
grant update (embedding) on agentmem.message_embeddings, agentmem.cache_entries to agentmem_queue;
grant select on agentmem.cache_entries to agentmem_queue;
grant select, insert, update on agentmem.facts to agentmem_queue;
grant usage, select on all sequences in schema agentmem to agentmem_queue;
grant usage on schema agentmem to agentmem_queue, agentmem_worker;
grant usage on schema agentmem_private to agentmem_queue;

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
agentmem.apply_index_upkeep(int),
agentmem.schedule_index_upkeep(text, int),
agentmem.unschedule_index_upkeep(),
-- A whole tenant's export and import (sql/55_export.sql).
agentmem.export_tenant(text),
agentmem.import_tenant(text, text[]),
-- Distributing on Citus is the DBA's (sql/85_distribute.sql).
agentmem.distribute(int),
agentmem.is_distributed(),
-- Re-embedding is the DBA's; the queue is the workers' (sql/17_embedding_jobs.sql).
agentmem.reembed(text, text, text),
agentmem.switch_default_model(text, text),
agentmem.drop_model_vectors(text, text),
agentmem.retry_embedding_jobs(text, text),
agentmem.claim_embedding_jobs(text, int, interval),
agentmem.complete_embedding_jobs(uuid, text[], uuid[], vector[]),
agentmem.fail_embedding_jobs(uuid, text[], uuid[], text),
agentmem.embedding_queue_depth(text)
from agentmem_app, agentmem_owner;
revoke execute on all functions in schema agentmem from agentmem_worker;
grant execute on function
agentmem.claim_embedding_jobs(text, int, interval),
agentmem.complete_embedding_jobs(uuid, text[], uuid[], vector[]),
agentmem.fail_embedding_jobs(uuid, text[], uuid[], text),
agentmem.embedding_queue_depth(text)
to agentmem_worker;
grant execute on function agentmem.get_model(text), agentmem.current_tenant(), agentmem.tenant_binding_mode(),
agentmem.may_act_as(text) to agentmem_queue;
grant execute on all functions in schema agentmem_private to agentmem_queue;

-- Every security definer function of the API belongs to agentmem_owner, but
-- the worker's calls, which belong to agentmem_queue.
-- Changing a function's owner needs the new owner to hold CREATE on its
-- schema; it holds it only for the length of this block.
do $ownership$
declare
    v_fn regprocedure;
    v_owner text;
begin
    grant create on schema agentmem to agentmem_owner, agentmem_queue;
    for v_fn, v_owner in
        select o.fn, o.owner
        from (
            select
                p.oid::regprocedure as fn,
                p.proowner,
                case
                    when p.proname in (
                        'claim_embedding_jobs', 'complete_embedding_jobs', 'fail_embedding_jobs', 'embedding_queue_depth'
                    )
                        then 'agentmem_queue'
                    else 'agentmem_owner'
                end as owner
            from pg_catalog.pg_proc as p
            where p.pronamespace = 'agentmem'::regnamespace and p.prosecdef
        ) as o
        where o.proowner <> o.owner::regrole
    loop
        execute pg_catalog.format('alter function %s owner to %I', v_fn, v_owner);
    end loop;
    revoke create on schema agentmem from agentmem_owner, agentmem_queue;
end
$ownership$;
