-- Grants and ownership, last: re-applied on every install and upgrade, so a
-- function or table added by a later release is covered without another
-- statement.
--
-- The security model (README, "Security model"; docs/security.md):
--   agentmem_app    the application's role: USAGE on schema agentmem and
--                   EXECUTE on the functions whose comment ends "Called by:
--                   the application"; no privilege on any table, view or
--                   sequence, nothing in agentmem_private.
--   agentmem_worker the embedding worker's role: EXECUTE on the functions
--                   "Called by: the embedding worker" (owned by the NOLOGIN
--                   agentmem_queue), nothing else.
--   agentmem_owner  NOLOGIN, not superuser, not BYPASSRLS: owns the API's
--                   security definer functions and holds exactly the table
--                   privileges they need. Tables force row-level security,
--                   so every statement it runs is still confined to the
--                   tenant the caller set.
--   the DBA         owns the schema and the tables and runs the functions
--                   "Called by: the DBA" (security invoker, granted to no role).

-- Who calls each function of schema agentmem: the last line of its comment.
create or replace function agentmem_private.function_audience()
returns table (fn regprocedure, audience text)
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select
        p.oid::regprocedure as fn,
        d.audience
    from pg_catalog.pg_proc as p
    left join (
        values
        ('Called by: the application (agentmem_app).', 'application'),
        ('Called by: the embedding worker (agentmem_worker).', 'worker'),
        ('Called by: the DBA (granted to no role).', 'dba')
    ) as d (line, audience)
        on d.line = pg_catalog.substring(
            pg_catalog.rtrim(pg_catalog.obj_description(p.oid, 'pg_proc'), E' \n'), '[^\n]*$'
        )
    where
        p.pronamespace = 'agentmem'::regnamespace
        and not exists (
            select from pg_catalog.pg_depend as e
            where e.classid = 'pg_catalog.pg_proc'::regclass and e.objid = p.oid and e.deptype = 'e'
        )
$$;

comment on function agentmem_private.function_audience() is
'Internal: every function of schema agentmem with who calls it, from the last line of its comment: application (EXECUTE to agentmem_app), worker (to agentmem_worker) or dba (to no role); NULL when the comment ends in none of the three lines.
sql/90_grants.sql grants from it and stops the install on a NULL; the tests and docs/api.md read it.';

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
revoke all on agentmem.tenant_grants, agentmem.tenant_binding, agentmem.retention_cursors,
agentmem.local_tenant_logins from agentmem_owner;
-- agentmem.may_act_as and tenant_must_be_local (security definer) read the binding for every caller.
grant select on agentmem.tenant_grants, agentmem.tenant_binding, agentmem.local_tenant_logins to agentmem_owner;
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
grant update (embedding, pending_embedding) on agentmem.message_embeddings to agentmem_queue;
grant update (embedding) on agentmem.cache_entries to agentmem_queue;
grant select on agentmem.cache_entries to agentmem_queue;
grant select, insert, update on agentmem.facts to agentmem_queue;
grant usage, select on all sequences in schema agentmem to agentmem_queue;
grant usage on schema agentmem to agentmem_queue, agentmem_worker;
grant usage on schema agentmem_private to agentmem_queue;

-- Functions: closed by default. Every function of schema agentmem declares who
-- calls it on the last line of its comment, one of the three lines of
-- agentmem_private.function_audience() (sql/README.md, "Adding a function");
-- EXECUTE goes to that role and is taken from the others. The install stops on
-- a function without a declaration. Only what differs is granted or revoked, so
-- a second run changes nothing (not even the order of an ACL).
revoke execute on all functions in schema agentmem from public;
revoke execute on all functions in schema agentmem_private from public;
grant execute on all functions in schema agentmem_private to agentmem_owner;
do $audience$
declare
    v_undeclared text;
    v_statement text;
begin
    select
        pg_catalog.string_agg(
            pg_catalog.format('agentmem.%s(%s)', p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)),
            ', ' order by p.proname
        )
    into v_undeclared
    from agentmem_private.function_audience() as a
    inner join pg_catalog.pg_proc as p on a.fn = p.oid
    where a.audience is null;
    if v_undeclared is not null then
        raise exception 'the comment of % does not say who calls it', v_undeclared
        using
            errcode = '42P17',
            detail = 'The last line of the comment of every function of schema agentmem says who calls it; '
            || 'the grants follow it, and a function without it would be granted to no one.',
            hint = 'End the function''s comment with one of: '
            || 'Called by: the application (agentmem_app). | '
            || 'Called by: the embedding worker (agentmem_worker). | '
            || 'Called by: the DBA (granted to no role). (sql/README.md, "Adding a function")';
    end if;
    for v_statement in
        select
            pg_catalog.format(
                case when g.wanted then 'grant execute on function %s to %I' else 'revoke execute on function %s from %I' end,
                g.fn, g.role_name
            )
        from (
            select
                a.fn,
                r.role_name,
                r.role_name = any(case a.audience
                    when 'application' then array['agentmem_app', 'agentmem_owner']
                    when 'worker' then array['agentmem_worker']
                    else array[]::text[]
                end) as wanted,
                exists (
                    select from pg_catalog.aclexplode(p.proacl) as x
                    where x.grantee = r.role_name::regrole and x.privilege_type = 'EXECUTE'
                ) as held
            from agentmem_private.function_audience() as a
            inner join pg_catalog.pg_proc as p on a.fn = p.oid
            cross join (values ('agentmem_app'), ('agentmem_owner'), ('agentmem_worker')) as r (role_name)
        ) as g
        where g.wanted <> g.held
        order by g.fn::text, g.role_name
    loop
        execute v_statement;
    end loop;
end
$audience$;
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
                case a.audience when 'worker' then 'agentmem_queue' else 'agentmem_owner' end as owner
            from pg_catalog.pg_proc as p
            inner join agentmem_private.function_audience() as a on p.oid = a.fn
            where p.prosecdef
        ) as o
        where o.proowner <> o.owner::regrole
    loop
        execute pg_catalog.format('alter function %s owner to %I', v_fn, v_owner);
    end loop;
    revoke create on schema agentmem from agentmem_owner, agentmem_queue;
end
$ownership$;

-- Every security definer function agentmem_owner owns resets
-- agentmem.tenant_checked on entry (and restores it on exit): within one call
-- of such a function, agentmem.current_tenant() checks the tenant's binding
-- once and trusts the mark it leaves there for the call's later statements;
-- a value the session set itself is never seen inside one. Re-applied on every
-- install: create or replace drops a function's SET clauses. A DBA who is not
-- a superuser may put that setting in a SET clause only once a superuser
-- granted it (PostgreSQL refuses a placeholder setting otherwise): until then
-- the mark is not trusted (agentmem_private.tenant_mark_trusted() is false)
-- and every statement looks the grants up, and the install warns.
do $tenant_checked$
declare
    v_fn regprocedure;
    v_missing bigint;
begin
    for v_fn in
        select p.oid::regprocedure
        from pg_catalog.pg_proc as p
        where
            p.prosecdef
            and p.proowner = 'agentmem_owner'::regrole
            and not coalesce('agentmem.tenant_checked=' = any(p.proconfig), false)
        order by 1
    loop
        begin
            execute pg_catalog.format('alter function %s set agentmem.tenant_checked = %L', v_fn, '');
        exception when insufficient_privilege then
            exit;
        end;
    end loop;
    select pg_catalog.count(*) into v_missing
    from pg_catalog.pg_proc as p
    where
        p.prosecdef
        and p.proowner = 'agentmem_owner'::regrole
        and not coalesce('agentmem.tenant_checked=' = any(p.proconfig), false);
    execute pg_catalog.format($f$
        create or replace function agentmem_private.tenant_mark_trusted()
        returns boolean language sql immutable parallel safe security invoker
        set search_path = pg_catalog, agentmem, pg_temp
        as %L
    $f$, pg_catalog.format('select %L::pg_catalog.bool', v_missing = 0));
    if v_missing > 0 then
        raise warning 'the tenant binding is checked at every statement of a call, not once per call'
        using
            detail = pg_catalog.format('Role %s may not put the setting agentmem.tenant_checked in the SET clause '
                || 'of %s of agentmem''s functions.', current_user, v_missing),
            hint = pg_catalog.format('Ask a superuser to run "grant set on parameter agentmem.tenant_checked to %I;", '
                || 'then install again.', current_user);
    end if;
end
$tenant_checked$;
