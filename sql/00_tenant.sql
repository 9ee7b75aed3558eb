-- Tenant context: a setting of the session or transaction, as PostgREST and
-- Supabase carry the caller's identity. Every table's RLS policy reads it.

create or replace function agentmem_private.propagate_tenant()
returns void
language plpgsql
volatile
security invoker
set search_path from current
as $$
declare
    v_tenant text := nullif(pg_catalog.current_setting('agentmem.tenant_id', true), '');
begin
    -- Citus forwards to the workers SET LOCAL commands only (not set_config,
    -- not session SET), and only with citus.propagate_set_commands = local.
    perform pg_catalog.set_config('citus.propagate_set_commands', 'local', true);
    execute pg_catalog.format('set local agentmem.tenant_id = %L', v_tenant);
    execute pg_catalog.format('set local agentmem.tenant_propagated = %L', v_tenant);
    -- Citus sends them with the BEGIN of each worker transaction, but sends no
    -- BEGIN for a read outside a transaction block (psql in autocommit): an
    -- empty intermediate result makes this a coordinated transaction, in which
    -- every worker connection begins with them.
    perform pg_catalog.create_intermediate_result('agentmem_tenant', 'select 1 where false');
end
$$;

comment on function agentmem_private.propagate_tenant() is
'Internal: for Citus (see agentmem.distribute), re-issue the tenant set for this session or
transaction as SET LOCAL, which Citus forwards to every worker connection of the transaction,
where the row-level security policies of the shards read it. Marks it done for this transaction
(agentmem.tenant_propagated), on the workers too.';

create or replace function agentmem.current_tenant()
returns text
language plpgsql
stable
security invoker
set search_path from current
as $$
declare
    v_tenant text := pg_catalog.current_setting('agentmem.tenant_id', true);
begin
    if v_tenant is null or v_tenant = '' then
        raise exception 'no agentmem tenant is set'
        using
            errcode = 'AM001',
            detail = 'agentmem never reads or writes across tenants.',
            hint = 'Call agentmem.set_tenant(tenant_id => ...) first '
            || '(local => true inside a transaction on a pooled connection).';
    end if;
    -- The setting can also be made with set_config or SET: the rules hold
    -- whichever way it was set.
    if length(v_tenant) > 128 or v_tenant <> btrim(v_tenant, E' \t\n\r\f\v') or v_tenant ~ '[[:cntrl:]]' then
        raise exception 'tenant_id is not acceptable: %', left(v_tenant, 40)
        using
            errcode = 'AM002',
            detail = 'A tenant id has 1 to 128 characters, no leading or trailing blanks '
            || 'and no control characters.',
            hint = 'Use a stable identifier such as an organisation id or slug.';
    end if;
    -- On Citus (loaded when its setting exists, and created in this database),
    -- once per transaction and tenant. Only a role that can reach the helper
    -- does it (the API's owner, the DBA): the application role runs no query
    -- on tables itself, and set_tenant, which it calls, checks the id only.
    if
        pg_catalog.current_setting('citus.propagate_set_commands', true) is not null
        and pg_catalog.current_setting('agentmem.tenant_propagated', true) is distinct from v_tenant
        and pg_catalog.to_regprocedure('pg_catalog.create_intermediate_result(text, text)') is not null
        and pg_catalog.has_schema_privilege('agentmem_private', 'usage')
    then
        perform agentmem_private.propagate_tenant();
    end if;
    return v_tenant;
end
$$;

comment on function agentmem.current_tenant() is
'The tenant set by agentmem.set_tenant for this session or transaction.
Raises AM001 when none is set (no agentmem call ever falls back to all tenants) and AM002 when the
setting agentmem.tenant_id, however it was made, breaks the tenant-id rules of set_tenant.
Row-level security policies on every agentmem table compare tenant_id with it.
On Citus it also makes the tenant reach the workers (agentmem_private.propagate_tenant).';

create or replace function agentmem.set_tenant(
    tenant_id text,
    local boolean default false
) returns text
language plpgsql
volatile
security invoker
set search_path from current
as $$
begin
    if tenant_id is null or tenant_id = '' then
        raise exception 'tenant_id must be a non-empty text'
        using
            errcode = 'AM002',
            hint = 'Pass the id of the tenant whose data this session works on.';
    end if;
    perform pg_catalog.set_config('agentmem.tenant_id', tenant_id, coalesce(local, false));
    -- One set of rules, in current_tenant(); a refused id is rolled back with
    -- the statement that tried to set it.
    return agentmem.current_tenant();
end
$$;

comment on function agentmem.set_tenant(text, boolean) is
'Set the tenant that every following agentmem call works on.
With local => true the setting lasts until the end of the current transaction
(what pooled connections should use); otherwise until the end of the session.
Raises AM002 for an empty or malformed tenant id (1 to 128 characters, no leading or
trailing whitespace, no control characters).';

create or replace function agentmem.grant_app_role(role_name text)
returns void
language plpgsql
volatile
security invoker
set search_path from current
as $$
begin
    if role_name is null or not exists (select from pg_catalog.pg_roles where rolname = role_name) then
        raise exception 'no such role: %', coalesce(role_name, 'NULL')
        using
            errcode = 'AM030',
            hint = 'Create the login role first, e.g. create role app login password ''...'';';
    end if;
    if exists (
        select from pg_catalog.pg_roles
        where rolname = role_name and (rolsuper or rolbypassrls)
    ) then
        raise exception 'role % bypasses row-level security and cannot be an agentmem application role',
            role_name
        using
            errcode = 'AM020',
            detail = 'Superusers and BYPASSRLS roles would see every tenant''s rows.',
            hint = 'Use an ordinary login role for the application.';
    end if;
    begin
        execute pg_catalog.format('grant agentmem_app to %I', role_name);
    exception when insufficient_privilege then
        raise exception 'role % may not grant agentmem_app to %', current_user, role_name
        using
            errcode = 'AM041',
            detail = sqlerrm,
            hint = 'Ask a superuser to run "'
            || case
                when pg_catalog.current_setting('server_version_num')::int >= 160000
                    then 'grant agentmem_app to ' || pg_catalog.quote_ident(current_user) || ' with admin option;'
                else 'alter role ' || pg_catalog.quote_ident(current_user) || ' createrole;'
            end
            || '", then grant again.';
    end;
end
$$;

comment on function agentmem.grant_app_role(text) is
'Make an existing login role an agentmem application role (member of agentmem_app).
Refuses superusers and BYPASSRLS roles, which row-level security would not confine (AM020), and
says which statement a superuser runs when the caller may not grant agentmem_app (AM041).
For the DBA; not executable by the application role.';

create or replace function agentmem_private.bypasses_rls()
returns boolean
language sql
stable
security invoker
set search_path from current
as $$
    select coalesce((select r.rolsuper or r.rolbypassrls from pg_catalog.pg_roles as r where r.rolname = current_user), false)
$$;

comment on function agentmem_private.bypasses_rls() is
'Internal: whether the current role sees every tenant''s rows (superuser or BYPASSRLS).';

create or replace function agentmem_private.check_sees_every_tenant(p_what text, p_why text, p_hint text)
returns boolean
language plpgsql
stable
security invoker
set search_path from current
as $$
begin
    -- A role under row-level security sees the current tenant's rows or none
    -- (AM001): what works across tenants would see one tenant, or fail
    -- telling the DBA to set one. Said plainly instead.
    if not agentmem_private.bypasses_rls() then
        raise exception '% must run as a role that sees every tenant', p_what
        using
            errcode = 'AM041',
            detail = pg_catalog.format('Role %s is subject to row-level security; %s.', current_user, p_why),
            hint = p_hint;
    end if;
    return true;
end
$$;

comment on function agentmem_private.check_sees_every_tenant(text, text, text) is
'Internal: true when the current role sees every tenant''s rows (agentmem_private.bypasses_rls); raises
AM041 otherwise, naming p_what, with p_why in its detail and p_hint as its hint. For what works across
tenants: agentmem.apply_retention, agentmem.tenants_needing_index.';
