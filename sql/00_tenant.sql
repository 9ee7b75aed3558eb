-- Tenant context: a setting of the session or transaction, as PostgREST and
-- Supabase carry the caller's identity. Every table's RLS policy reads it.

create or replace function agentmem_private.pin_worker_path()
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    -- Citus sends the workers statements that name pg_catalog's functions
    -- unqualified (array_agg, unnest, ...), and a worker resolves them through
    -- its connection's search_path: the calling role's default, where an
    -- exact-type overload planted in a writable schema (public) would win over
    -- pg_catalog's polymorphic one. The path every agentmem function pins is
    -- sent as SET LOCAL, which Citus forwards with the BEGIN of every worker
    -- transaction of this transaction (docs/citus.md); an empty intermediate
    -- result makes even a read in autocommit such a transaction. Once per
    -- transaction. Without Citus in this database: nothing.
    if
        pg_catalog.current_setting('citus.propagate_set_commands', true) is null
        or pg_catalog.current_setting('agentmem.path_propagated', true) = 'on'
        or pg_catalog.to_regprocedure('pg_catalog.create_intermediate_result(text, text)') is null
    then
        return;
    end if;
    perform pg_catalog.set_config('citus.propagate_set_commands', 'local', true);
    execute 'set local search_path = pg_catalog, agentmem, pg_temp';
    execute 'set local agentmem.path_propagated = on';
    perform pg_catalog.create_intermediate_result('agentmem_path', 'select 1 where false');
end
$$;

comment on function agentmem_private.pin_worker_path() is
'Internal: on Citus, send the path every agentmem function pins (pg_catalog, agentmem, pg_temp) to every
worker connection of this transaction as SET LOCAL, so that the statements Citus sends there resolve
no name through a schema another role can write. Called by propagate_tenant (every API call) and
check_sees_every_tenant (the DBA''s calls across tenants, run by their own role). Once per transaction.';

create or replace function agentmem_private.propagate_tenant()
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := nullif(pg_catalog.current_setting('agentmem.tenant_id', true), '');
    -- pin_worker_path's first call in this transaction makes it a coordinated one itself
    v_path_sent boolean := pg_catalog.current_setting('agentmem.path_propagated', true) = 'on';
begin
    -- Citus forwards to the workers SET LOCAL commands only (not set_config,
    -- not session SET), and only with citus.propagate_set_commands = local.
    perform agentmem_private.pin_worker_path();
    perform pg_catalog.set_config('citus.propagate_set_commands', 'local', true);
    execute pg_catalog.format('set local agentmem.tenant_id = %L', v_tenant);
    execute pg_catalog.format('set local agentmem.tenant_propagated = %L', v_tenant);
    -- Citus sends them with the BEGIN of each worker transaction, but sends no
    -- BEGIN for a read outside a transaction block (psql in autocommit): an
    -- empty intermediate result makes this a coordinated transaction, in which
    -- every worker connection begins with them. pin_worker_path made one just
    -- now unless it had run earlier in the transaction: one result, not two.
    if v_path_sent then
        perform pg_catalog.create_intermediate_result('agentmem_tenant', 'select 1 where false');
    end if;
end
$$;

comment on function agentmem_private.propagate_tenant() is
'Internal: for Citus (see agentmem.distribute), re-issue the tenant set for this session or
transaction as SET LOCAL, which Citus forwards to every worker connection of the transaction,
where the row-level security policies of the shards read it. Marks it done for this transaction
(agentmem.tenant_propagated), on the workers too.';

create or replace function agentmem_private.unicode_space()
returns text
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- Unicode's White_Space characters, and the invisible ones often taken for
    -- them (U+180E, U+200B to U+200D, U+2060, U+FEFF), as a bracket expression.
    select '[\u0009-\u000d\u0020\u0085\u00a0\u1680\u180e\u2000-\u200d\u2028\u2029\u202f\u205f\u2060\u3000\ufeff]'::text
$$;

comment on function agentmem_private.unicode_space() is
'Internal: a regular-expression bracket expression matching whitespace of any kind (Unicode White_Space and
the invisible U+180E, U+200B to U+200D, U+2060, U+FEFF), whatever the database''s locale.';

create or replace function agentmem_private.generate_tenant_binding()
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $gen$
declare
    v_mode text;
    v_claim text;
    v_comment text := pg_catalog.obj_description(
        pg_catalog.to_regprocedure('agentmem.tenant_binding_mode()'), 'pg_proc'
    );
begin
    select b.mode, b.jwt_claim into v_mode, v_claim from agentmem.tenant_binding as b;
    -- The mode as a constant function: immutable without arguments, the
    -- planner evaluates it once when it plans a statement and folds the
    -- result in, so a call under mode none pays nothing for the binding.
    -- Replacing the function invalidates every cached plan that folded it.
    -- On a Citus worker the mode is none: only the coordinator connects to the
    -- workers (as agentmem_owner or the DBA), and it checked the tenant before
    -- it sent the tenant on (a worker could not read the grants from a shard
    -- query anyway: they are a reference table).
    execute pg_catalog.format($f$
        create or replace function agentmem.tenant_binding_mode()
        returns text language sql immutable parallel safe security invoker
        set search_path = pg_catalog, agentmem, pg_temp
        as %L
    $f$, case
        when pg_catalog.to_regclass('pg_catalog.pg_dist_local_group') is null
            then pg_catalog.format('select %L::pg_catalog.text', coalesce(v_mode, 'none'))
        else pg_catalog.format(
            'select case when (select g.groupid from pg_catalog.pg_dist_local_group as g) = 0 '
            'then %L::pg_catalog.text else ''none'' end', coalesce(v_mode, 'none')
        )
    end);
    execute pg_catalog.format($f$
        create or replace function agentmem_private.tenant_jwt_claim()
        returns text[] language sql immutable parallel safe security invoker
        set search_path = pg_catalog, agentmem, pg_temp
        as %L
    $f$, pg_catalog.format('select %L::pg_catalog.text[]', pg_catalog.string_to_array(coalesce(v_claim, 'tenant_id'), '.')));
    -- its example (sql/88_api_examples.sql writes it at install) kept
    execute pg_catalog.format(
        'comment on function agentmem.tenant_binding_mode() is %L',
        'The installation''s tenant binding mode: role, jwt or none (agentmem.set_tenant_binding).
A constant function generated from agentmem.tenant_binding, which the planner folds. On a Citus worker
it is none: the coordinator checked the tenant before it sent it on.'
        || coalesce(pg_catalog.substring(v_comment, E'(\nExample:\n.*)\nCalled by: '), '')
        || E'\nCalled by: the application (agentmem_app).'
    );
    comment on function agentmem_private.tenant_jwt_claim() is
    'Internal: the path of the tenant claim in request.jwt.claims (agentmem.tenant_binding.jwt_claim split at
dots), generated by agentmem_private.generate_tenant_binding.';
end
$gen$;

comment on function agentmem_private.generate_tenant_binding() is
'Internal: (re)create agentmem.tenant_binding_mode() and tenant_jwt_claim() from the row of
agentmem.tenant_binding, as constant functions the planner folds.';

select agentmem_private.generate_tenant_binding();

-- Whether current_tenant() may trust its mark of a checked tenant: false here,
-- regenerated at the end of every install (sql/90_grants.sql) from whether
-- every security definer function agentmem_owner owns resets the mark.
create or replace function agentmem_private.tenant_mark_trusted()
returns boolean
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select false
$$;

comment on function agentmem_private.tenant_mark_trusted() is
'Internal: whether agentmem.current_tenant() trusts agentmem.tenant_checked, its mark of a tenant checked in
this call of an API function: true once every security definer function agentmem_owner owns resets the
mark on entry (a SET clause sql/90_grants.sql puts on each), a constant regenerated at every install.';

create or replace function agentmem.may_act_as(tenant_id text)
returns boolean
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_claims jsonb;
    v_claim jsonb;
    v_role pg_catalog.pg_roles;
begin
    if may_act_as.tenant_id is null then
        return false;
    end if;
    if agentmem.tenant_binding_mode() = 'none' then
        return true;
    end if;
    -- Both modes: the login role holds a grant of the tenant (one index scan
    -- over the login's grants). Mode jwt: and the verified token's claim names it.
    if exists (
        select from agentmem.tenant_grants as g
        where
            g.role_oid = pg_catalog.to_regrole(pg_catalog.quote_ident(session_user))::pg_catalog.oid
            and (
                g.scope = 'all'
                or (g.scope = 'tenant' and g.tenant = may_act_as.tenant_id)
                or (g.scope = 'prefix' and pg_catalog.starts_with(may_act_as.tenant_id, g.tenant))
            )
    ) then
        if agentmem.tenant_binding_mode() = 'role' then
            return true;
        end if;
        begin
            v_claims := nullif(pg_catalog.current_setting('request.jwt.claims', true), '')::jsonb;
        exception when invalid_text_representation then
            v_claims := null;
        end;
        v_claim := v_claims #> agentmem_private.tenant_jwt_claim();
        if pg_catalog.jsonb_typeof(v_claim) = 'string' and v_claim #>> '{}' = may_act_as.tenant_id then
            return true;
        end if;
        if pg_catalog.jsonb_typeof(v_claim) = 'array' and v_claim @> pg_catalog.jsonb_build_array(may_act_as.tenant_id) then
            return true;
        end if;
    end if;
    -- Who is bound by nothing: superusers and BYPASSRLS roles (row-level
    -- security does not confine them anyway), the DBA who owns the schema, and
    -- agentmem_owner, which logs in only on a Citus cluster, from the
    -- coordinator to the workers, where the coordinator checked the tenant.
    select r.* into v_role from pg_catalog.pg_roles as r where r.rolname = session_user;
    return v_role.rolsuper or v_role.rolbypassrls or session_user = 'agentmem_owner'
        or pg_catalog.pg_has_role(
            session_user,
            (select n.nspowner from pg_catalog.pg_namespace as n where n.nspname = 'agentmem'),
            'usage'
        );
end
$$;

comment on function agentmem.may_act_as(text) is
'Whether this session may act as the tenant tenant_id under the installation''s tenant binding.
Mode role: the session''s login role (session_user, which SET ROLE does not change; the role itself, by
its OID: a role created again under a dropped role''s name holds none of its grants) holds a grant of
the tenant, of a prefix of it or of every tenant (agentmem.grant_tenant). Mode jwt: that, and the claim
named in agentmem.tenant_binding (default tenant_id; a dotted path reaches into objects) of
request.jwt.claims is that tenant or an array holding it (the gateway''s login, e.g. PostgREST''s
authenticator, is granted the tenants its tokens may name). Mode none: any tenant. Superusers, BYPASSRLS roles, the owner of
schema agentmem and agentmem_owner may act as any tenant. agentmem.current_tenant() raises AM041 where
this is false. It reads agentmem.tenant_grants and agentmem.tenant_binding (catalogues without row-level
security) and nothing else.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

-- Over 100 lines: the one place the tenant rules and the binding are checked, on every call of the API
--   (the id, the grants, the mark of a checked tenant, Citus' propagation); a helper call for each would
--   cost every call.
create or replace function agentmem.current_tenant()
returns text
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := pg_catalog.current_setting('agentmem.tenant_id', true);
    v_bound boolean := false;
    v_checked boolean := false;
begin
    if v_tenant is null or v_tenant = '' then
        raise exception 'no agentmem tenant is set'
        using
            errcode = 'AM001',
            detail = 'agentmem never reads or writes across tenants.',
            hint = 'Call agentmem.set_tenant(tenant_id => ...) first '
            || '(local => true inside a transaction on a pooled connection).';
    end if;
    -- Checked already in this call of an agentmem function (the mark, see
    -- below): this very value passed every rule and the binding then, and no
    -- statement of the session ran since. The rules' regular expressions are
    -- skipped too (each statement's row-level security calls this: 8 calls a
    -- store_message). Nested ifs: only agentmem_owner may call the helper.
    if current_user = 'agentmem_owner' and agentmem.tenant_binding_mode() <> 'none' then
        if agentmem_private.tenant_mark_trusted() then
            v_checked := coalesce(pg_catalog.current_setting('agentmem.tenant_checked', true) = v_tenant, false);
        end if;
    end if;
    -- The setting can also be made with set_config or SET: the rules hold
    -- whichever way it was set.
    -- Whitespace of any kind: agentmem_private.unicode_space(), written out
    -- (the application role, which calls this, cannot reach agentmem_private).
    if v_checked then
        null;
    elsif pg_catalog.length(v_tenant) > 128
        or v_tenant ~ '^[\u0009-\u000d\u0020\u0085\u00a0\u1680\u180e\u2000-\u200d\u2028\u2029\u202f\u205f\u2060\u3000\ufeff]|[\u0009-\u000d\u0020\u0085\u00a0\u1680\u180e\u2000-\u200d\u2028\u2029\u202f\u205f\u2060\u3000\ufeff]$'
        or v_tenant ~ '[[:cntrl:]]' then
        raise exception 'tenant_id is not acceptable: %', pg_catalog.left(v_tenant, 40)
        using
            errcode = 'AM002',
            detail = 'A tenant id has 1 to 128 characters, no leading or trailing whitespace of any kind '
            || '(Unicode spaces included) and no control characters.',
            hint = 'Use a stable identifier such as an organisation id or slug.';
    end if;
    -- The binding (agentmem.may_act_as), however the setting was made. Inside
    -- agentmem's definer functions, where it runs most, current_user is
    -- agentmem_owner, which reads the login's grants itself: the same probe as
    -- may_act_as, without a second function call.
    if agentmem.tenant_binding_mode() <> 'none' then
        -- The embedding queue's functions (owned by agentmem_queue, NOLOGIN) set
        -- each job's own tenant before they touch its row: the worker's login
        -- is bound to no tenant, and may set none through the API.
        v_bound := v_checked or current_user = 'agentmem_queue';
        -- The mark (v_checked, above): every security
        -- definer function agentmem_owner owns resets agentmem.tenant_checked
        -- on entry (its SET clause, sql/90_grants.sql), and restores it on
        -- exit; no statement of the session runs in between, so what a session
        -- puts there itself is never read here (current_user is the session's
        -- own role outside those functions).
        -- (An installation where not every one of them carries the reset never
        -- trusts the mark: agentmem_private.tenant_mark_trusted(), read only
        -- as agentmem_owner, which alone may call it.)
        if not v_bound and agentmem.tenant_binding_mode() = 'role' and current_user = 'agentmem_owner' then
            v_bound := exists (
                select from agentmem.tenant_grants as g
                where
                    g.role_oid = pg_catalog.to_regrole(pg_catalog.quote_ident(session_user))::pg_catalog.oid
                    and (
                        g.scope = 'all'
                        or (g.scope = 'tenant' and g.tenant = v_tenant)
                        or (g.scope = 'prefix' and pg_catalog.starts_with(v_tenant, g.tenant))
                    )
            );
        end if;
    end if;
    if agentmem.tenant_binding_mode() <> 'none' and not v_bound and not agentmem.may_act_as(v_tenant) then
        raise exception 'this session may not act as tenant %', pg_catalog.left(v_tenant, 40)
        using
            errcode = 'AM041',
            detail = case agentmem.tenant_binding_mode()
                when 'role' then pg_catalog.format('Tenants are bound to login roles; role %s holds no grant of this tenant.',
                    session_user)
                else pg_catalog.format('Tenants are bound to a claim of the token in request.jwt.claims '
                    || '(agentmem.tenant_binding names it): it does not name this tenant, or login %s holds no grant of it.',
                    session_user)
            end,
            hint = case agentmem.tenant_binding_mode()
                when 'role' then pg_catalog.format('A DBA grants it: select agentmem.grant_tenant(role_name => %L, tenant_id => %L);',
                    session_user, pg_catalog.left(v_tenant, 40))
                else 'Set the tenant the verified token''s claim names; a DBA grants the gateway''s login its tenants '
                || '(agentmem.grant_tenant).'
            end;
    end if;
    -- For the rest of this call of the function (see above): the following
    -- statements' row-level security reads the tenant without the grant lookup.
    if agentmem.tenant_binding_mode() <> 'none' and not v_checked and current_user = 'agentmem_owner' then
        if agentmem_private.tenant_mark_trusted() then
            perform pg_catalog.set_config('agentmem.tenant_checked', v_tenant, true);
        end if;
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
Raises AM001 when none is set (no agentmem call ever falls back to all tenants), AM002 when the
setting agentmem.tenant_id, however it was made, breaks the tenant-id rules of set_tenant, and AM041
when the installation binds tenants to identities (agentmem.set_tenant_binding) and this session may
not act as that tenant (agentmem.may_act_as).
Row-level security policies on every agentmem table compare tenant_id with it.
On Citus it also makes the tenant reach the workers (agentmem_private.propagate_tenant).
Called by: the application (agentmem_app).';

create or replace function agentmem.set_tenant(
    tenant_id text,
    local boolean default false
) returns text
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if tenant_id is null or tenant_id = '' then
        raise exception 'tenant_id must be a non-empty text'
        using
            errcode = 'AM002',
            hint = 'Pass the id of the tenant whose data this session works on.';
    end if;
    if not coalesce(local, false) and agentmem.tenant_must_be_local() then
        raise exception 'login % may set a tenant for the current transaction only', session_user
        using
            errcode = 'AM042',
            detail = 'The DBA requires it of this login (agentmem.require_local_tenant): a tenant set for the '
            || 'session would outlive the transaction on a pooled connection and serve the next client.',
            hint = 'Call agentmem.set_tenant(tenant_id => ..., local => true) inside the transaction '
            || '(BEGIN ... COMMIT, or the one implicit transaction of a pipeline).';
    end if;
    perform pg_catalog.set_config('agentmem.tenant_id', tenant_id, coalesce(local, false));
    -- On Citus, the tenant goes to the workers again after every set_tenant: a
    -- SET LOCAL sent from a savepoint since released (the driver's conn= calls)
    -- does not reach a worker connection opened later in the transaction.
    perform pg_catalog.set_config('agentmem.tenant_propagated', '', true);
    -- One set of rules, in current_tenant(); a refused id is rolled back with
    -- the statement that tried to set it.
    return agentmem.current_tenant();
end
$$;

comment on function agentmem.set_tenant(text, boolean) is
'Set the tenant that every following agentmem call works on.
With local => true the setting lasts until the end of the current transaction
(what pooled connections should use); otherwise until the end of the session.
local => true outside a transaction block lasts for that one statement only: PostgreSQL cannot tell
it from the first statement of a pipeline or a multi-statement query, where it lasts for the rest of it
(docs/pooling.md), so it is not refused.
Raises AM042 for local => false where the DBA requires a transaction-local tenant of this login
(agentmem.require_local_tenant), AM002 for an empty or malformed tenant id (1 to 128 characters, no leading or
trailing whitespace of any kind, no control characters), and AM041 when the installation binds tenants
(agentmem.set_tenant_binding) and this session may not act as that tenant; a refused id is not set.
Called by: the application (agentmem_app).';

create or replace function agentmem_private.search_path_schemas()
returns text[]
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- The path agentmem's functions pin (every one the same; read from this
    -- function's own), without pg_catalog, which only superusers can write,
    -- and pg_temp, never searched for functions and operators.
    select array(
        select pg_catalog.btrim(s.name, ' "')
        from pg_catalog.pg_proc as p
        cross join lateral pg_catalog.unnest(p.proconfig) as c (setting)
        cross join lateral pg_catalog.regexp_split_to_table(pg_catalog.substr(c.setting, pg_catalog.length('search_path=') + 1), ',')
            with ordinality as s (name, ord)
        where
            p.oid = 'agentmem_private.search_path_schemas()'::regprocedure
            and c.setting like 'search_path=%'
            and pg_catalog.btrim(s.name, ' "') not in ('pg_catalog', 'pg_temp', '$user')
        order by s.ord
    )
    -- pgvector's schema: never on the pinned path (agentmem_private.vector_schema
    -- says why), but installs and upgrades resolve names through it.
    || array(
        select n.nspname::text
        from pg_catalog.pg_extension as e
        inner join pg_catalog.pg_namespace as n on e.extnamespace = n.oid
        where e.extname = 'vector' and n.nspname <> 'agentmem'
    )
$$;

comment on function agentmem_private.search_path_schemas() is
'Internal: the schemas of the search_path pinned on agentmem''s functions, without pg_catalog and pg_temp,
and pgvector''s schema, through which installs and upgrades resolve names.';

create or replace function agentmem_private.search_path_writers()
returns table (schema_name text, role_name text, problem text, fix text)
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- Trusted: superusers, agentmem_owner, roles with the privileges of
    -- agentmem's owner (the DBA), and those of the schema's owner unless they
    -- are application roles (an application login that owns the database owns
    -- its schema public on PostgreSQL 15 and later). Anyone else who can create a function or an operator
    -- in a schema of the path (or owns one there) could have agentmem's
    -- definer functions, and the DBA's, call it.
    with path as (
        select n.oid, n.nspname::text as schema_name, n.nspowner
        from pg_catalog.unnest(agentmem_private.search_path_schemas()) with ordinality as s (name, ord)
        inner join pg_catalog.pg_namespace as n on n.nspname = s.name
    ),
    dba as (
        select n.nspowner from pg_catalog.pg_namespace as n where n.nspname = 'agentmem'
    ),
    untrusted as (
        select p.oid as nsp, r.oid, r.rolname::text as rolname
        from path as p
        cross join pg_catalog.pg_roles as r
        where
            not r.rolsuper and r.rolname not in ('agentmem_owner', 'agentmem_queue')
            and not pg_catalog.pg_has_role(r.oid, (select d.nspowner from dba as d), 'usage')
            and (
                (
                    pg_catalog.to_regrole('agentmem_app') is not null
                    and pg_catalog.pg_has_role(r.oid, 'agentmem_app', 'member')
                )
                or not pg_catalog.pg_has_role(r.oid, p.nspowner, 'usage')
            )
    ),
    public_create as (
        select p.schema_name
        from path as p
        inner join pg_catalog.pg_namespace as n on p.oid = n.oid
        cross join lateral pg_catalog.aclexplode(n.nspacl) as a
        where a.grantee = 0 and a.privilege_type = 'CREATE'
    )
    select
        p.schema_name, 'PUBLIC', 'every role may create objects in this schema',
        pg_catalog.format('revoke create on schema %I from public;', p.schema_name)
    from public_create as p
    union all
    select
        p.schema_name, u.rolname,
        case when pg_catalog.pg_has_role(u.oid, p.nspowner, 'usage')
            then 'owns this schema (or is a member of its owner) and is an agentmem application role'
            else 'may create objects in this schema' end,
        case when pg_catalog.pg_has_role(u.oid, p.nspowner, 'usage')
            then pg_catalog.format('alter schema %I owner to %I;', p.schema_name,
                (select d.nspowner::regrole::text from dba as d))
            else pg_catalog.format('revoke create on schema %I from %I;', p.schema_name, u.rolname) end
    from path as p
    inner join untrusted as u on p.oid = u.nsp and pg_catalog.has_schema_privilege(u.oid, p.oid, 'create')
    where
        p.schema_name not in (select pc.schema_name from public_create as pc)
        or pg_catalog.pg_has_role(u.oid, p.nspowner, 'usage')
    union all
    select
        p.schema_name, u.rolname,
        pg_catalog.format('owns function %s', pg_catalog.format('%I.%I(%s)', p.schema_name, f.proname, pg_catalog.pg_get_function_identity_arguments(f.oid))),
        pg_catalog.format('alter function %s owner to %I;  -- or drop it', pg_catalog.format('%I.%I(%s)', p.schema_name, f.proname, pg_catalog.pg_get_function_identity_arguments(f.oid)),
            (select d.nspowner::regrole::text from dba as d))
    from path as p
    inner join pg_catalog.pg_proc as f on f.pronamespace = p.oid
    inner join untrusted as u on p.oid = u.nsp and f.proowner = u.oid
    union all
    select
        p.schema_name, u.rolname,
        pg_catalog.format('owns operator %s', pg_catalog.format('%I.%s(%s, %s)', p.schema_name, o.oprname, o.oprleft::regtype, o.oprright::regtype)),
        pg_catalog.format('alter operator %s owner to %I;  -- or drop it', pg_catalog.format('%I.%s(%s, %s)', p.schema_name, o.oprname, o.oprleft::regtype, o.oprright::regtype),
            (select d.nspowner::regrole::text from dba as d))
    from path as p
    inner join pg_catalog.pg_operator as o on o.oprnamespace = p.oid
    inner join untrusted as u on p.oid = u.nsp and o.oprowner = u.oid
$$;

comment on function agentmem_private.search_path_writers() is
'Internal: who, besides superusers, agentmem_owner and the owners (the DBA), may create functions or
operators in a schema of agentmem''s pinned search_path, or owns one there, with the statement that fixes
each. Empty when the path is safe. Read by agentmem.search_path_health, grant_app_role and the installer.';

create or replace view agentmem.search_path_health as
select
    w.schema_name,
    w.role_name,
    w.problem,
    w.fix
from agentmem_private.search_path_writers() as w;

comment on view agentmem.search_path_health is
'One row per role (or PUBLIC) that could put a function or an operator in a schema of the search_path
agentmem''s functions pin (pg_catalog, agentmem, pgvector''s schema), where agentmem''s security definer
functions and the DBA''s functions would call it; fix is the statement that removes the risk. Empty when
safe. The installer and agentmem.grant_app_role refuse (AM041) while it has rows.';

create or replace function agentmem_private.check_search_path(p_what text)
returns void
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_rows text;
    v_fixes text;
begin
    select
        pg_catalog.string_agg(pg_catalog.format('%s: %s %s', w.schema_name, w.role_name, w.problem), '; '),
        pg_catalog.string_agg(distinct w.fix, ' ')
    into v_rows, v_fixes
    from agentmem_private.search_path_writers() as w;
    if v_rows is not null then
        raise exception '% refused: a role other than the owner may write a schema of agentmem''s search_path', p_what
        using
            errcode = 'AM041',
            detail = v_rows || '. agentmem''s security definer functions (and the DBA''s) would call what they put there.',
            hint = 'Run: ' || v_fixes;
    end if;
end
$$;

comment on function agentmem_private.check_search_path(text) is
'Internal: AM041, with the statements that fix it as the hint, while agentmem.search_path_health has rows.';

create or replace function agentmem.grant_app_role(role_name text)
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
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
    -- After the grant: the role, now an application role, may not write the path.
    perform agentmem_private.check_search_path(pg_catalog.format('grant_app_role(%L)', role_name));
    -- A bound on every statement of the role, unless the DBA set one.
    if not exists (
        select from pg_catalog.pg_db_role_setting as s
        cross join lateral pg_catalog.unnest(s.setconfig) as c (setting)
        where
            s.setrole = (select r.oid from pg_catalog.pg_roles as r where r.rolname = grant_app_role.role_name)
            and s.setdatabase in (0, (select d.oid from pg_catalog.pg_database as d where d.datname = pg_catalog.current_database()))
            and c.setting like 'statement\_timeout=%'
    ) then
        begin
            execute pg_catalog.format('alter role %I set statement_timeout = %L', role_name, '30s');
        exception when insufficient_privilege then
            -- A login another role created (PostgreSQL 16+: ADMIN OPTION on it is needed): the
            -- grant stands; the bound is the superuser's to set.
            raise warning 'role % is an application role now, without agentmem''s statement_timeout', role_name
            using
                detail = sqlerrm,
                hint = pg_catalog.format('Ask a superuser to run "alter role %I set statement_timeout = ''30s'';".',
                    role_name);
        end;
    end if;
end
$$;

comment on function agentmem.grant_app_role(text) is
'Make an existing login role an agentmem application role (member of agentmem_app).
Refuses superusers and BYPASSRLS roles, which row-level security would not confine (AM020); says which
statement a superuser runs when the caller may not grant agentmem_app (AM041); refuses (AM041) while a
role other than the owner may write a schema of agentmem''s search_path (agentmem.search_path_health).
Gives the role statement_timeout = 30s (alter role ... set) unless the role already has a
statement_timeout of its own (a WARNING names the statement where the caller may not alter the role).
Called by: the DBA (granted to no role).';

create or replace function agentmem_private.bypasses_rls()
returns boolean
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
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
set search_path = pg_catalog, agentmem, pg_temp
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
    -- Run by the DBA's own role (a superuser, say): on Citus, the workers
    -- resolve names for it through the pinned path, not the role's own.
    perform agentmem_private.pin_worker_path();
    return true;
end
$$;

comment on function agentmem_private.check_sees_every_tenant(text, text, text) is
'Internal: true when the current role sees every tenant''s rows (agentmem_private.bypasses_rls); raises
AM041 otherwise, naming p_what, with p_why in its detail and p_hint as its hint. For what works across
tenants: agentmem.apply_retention, agentmem.tenants_needing_index.';

-- Tenants bound to identities: the DBA's grants and the installation's mode.

create or replace function agentmem_private.check_tenant_id(p_what text, p_tenant text)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_tenant is null or p_tenant = '' or pg_catalog.length(p_tenant) > 128
        or p_tenant ~ ('^' || agentmem_private.unicode_space() || '|' || agentmem_private.unicode_space() || '$')
        or p_tenant ~ '[[:cntrl:]]' then
        raise exception '% is not acceptable: %', p_what, coalesce(pg_catalog.left(p_tenant, 40), 'NULL')
        using
            errcode = 'AM002',
            detail = 'A tenant id has 1 to 128 characters, no leading or trailing whitespace of any kind '
            || '(Unicode spaces included) and no control characters.',
            hint = 'Use a stable identifier such as an organisation id or slug.';
    end if;
end
$$;

comment on function agentmem_private.check_tenant_id(text, text) is
'Internal: AM002 unless p_tenant is a tenant id by the rules of agentmem.current_tenant().';

create or replace function agentmem_private.tenant_grant_scope(
    p_tenant_id text, p_tenant_prefix text, p_all_tenants boolean
) returns table (scope text, tenant text)
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if (p_tenant_id is not null)::int + (p_tenant_prefix is not null)::int + coalesce(p_all_tenants, false)::int <> 1 then
        raise exception 'pass exactly one of tenant_id, tenant_prefix and all_tenants => true'
        using
            errcode = 'AM020',
            hint = 'e.g. tenant_id => ''acme'', or tenant_prefix => ''eu/'', or all_tenants => true for a trusted service.';
    end if;
    if p_tenant_id is not null then
        perform agentmem_private.check_tenant_id('tenant_id', p_tenant_id);
        return query select 'tenant'::text, p_tenant_id;
    elsif p_tenant_prefix is not null then
        perform agentmem_private.check_tenant_id('tenant_prefix', p_tenant_prefix);
        return query select 'prefix'::text, p_tenant_prefix;
    else
        return query select 'all'::text, ''::text;
    end if;
end
$$;

comment on function agentmem_private.tenant_grant_scope(text, text, boolean) is
'Internal: the (scope, tenant) row of agentmem.tenant_grants for the arguments of grant_tenant and revoke_tenant;
AM020 unless exactly one is given, AM002 for a malformed id or prefix.';

create or replace function agentmem.grant_tenant(
    role_name text,
    tenant_id text default null,
    tenant_prefix text default null,
    all_tenants boolean default false
) returns boolean
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_scope text;
    v_tenant text;
begin
    if grant_tenant.role_name is null
        or not exists (select from pg_catalog.pg_roles as r where r.rolname = grant_tenant.role_name) then
        raise exception 'no such role: %', coalesce(grant_tenant.role_name, 'NULL')
        using
            errcode = 'AM030',
            hint = 'Grant tenants to the login role the application connects as (create role app login ...).';
    end if;
    select s.scope, s.tenant into v_scope, v_tenant
    from agentmem_private.tenant_grant_scope(grant_tenant.tenant_id, grant_tenant.tenant_prefix, grant_tenant.all_tenants) as s;
    perform agentmem_private.drop_orphan_tenant_grants();
    insert into agentmem.tenant_grants as g (role_name, role_oid, scope, tenant)
    values (grant_tenant.role_name, pg_catalog.to_regrole(pg_catalog.quote_ident(grant_tenant.role_name))::pg_catalog.oid,
        v_scope, v_tenant)
    on conflict on constraint tenant_grants_pkey do nothing;
    return found;
end
$$;

comment on function agentmem.grant_tenant(text, text, text, boolean) is
'Let the login role role_name act as a tenant, as every tenant of a prefix, or as every tenant.
Exactly one of tenant_id (that tenant), tenant_prefix (every tenant whose id starts with it) or all_tenants => true (every tenant: for a trusted service such as a worker).
Checked by agentmem.current_tenant() when the installation binds tenants to roles
(agentmem.set_tenant_binding(mode => ''role'')), from the next statement on. The grant belongs to the
role itself (its OID): a rename keeps it; DROP ROLE ends it (a role created again under that name holds
none of it), and its row goes at the next grant_tenant, revoke_tenant or agentmem migrate. Returns false when the role
held that grant already. AM030 for an unknown role, AM020 unless exactly one scope is given, AM002 for a
malformed id or prefix.
Called by: the DBA (granted to no role).';

create or replace function agentmem.revoke_tenant(
    role_name text,
    tenant_id text default null,
    tenant_prefix text default null,
    all_tenants boolean default false
) returns boolean
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_scope text;
    v_tenant text;
begin
    select s.scope, s.tenant into v_scope, v_tenant
    from agentmem_private.tenant_grant_scope(revoke_tenant.tenant_id, revoke_tenant.tenant_prefix, revoke_tenant.all_tenants) as s;
    perform agentmem_private.drop_orphan_tenant_grants();
    delete from agentmem.tenant_grants as g
    where
        g.role_oid = pg_catalog.to_regrole(pg_catalog.quote_ident(revoke_tenant.role_name))::pg_catalog.oid
        and g.scope = v_scope and g.tenant = v_tenant;
    return found;
end
$$;

comment on function agentmem.revoke_tenant(text, text, text, boolean) is
'Take back a grant of agentmem.grant_tenant (the same arguments).
Sessions of the role lose the tenant at
their next statement that reads it (a transaction already running keeps what it read). Returns whether
a grant was removed.
Called by: the DBA (granted to no role).';

create or replace function agentmem_private.drop_orphan_tenant_grants()
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_orphans oid[];
begin
    -- An event trigger does not see DROP ROLE: the grants of a dropped role
    -- match no session from then on (they are keyed by its OID), and their
    -- rows go here. The catalogue is read apart from the tables (on Citus
    -- they are reference tables, which a statement does not join with a
    -- catalogue of the coordinator).
    select pg_catalog.array_agg(k.role_oid) into v_orphans
    from (
        select g.role_oid from agentmem.tenant_grants as g
        union
        select l.role_oid from agentmem.local_tenant_logins as l
    ) as k;
    select pg_catalog.array_agg(o.role_oid) into v_orphans
    from pg_catalog.unnest(v_orphans) as o (role_oid)
    where not exists (select from pg_catalog.pg_roles as r where r.oid = o.role_oid);
    if v_orphans is not null then
        delete from agentmem.tenant_grants as g where g.role_oid = any(v_orphans);
        delete from agentmem.local_tenant_logins as l where l.role_oid = any(v_orphans);
    end if;
end
$$;

comment on function agentmem_private.drop_orphan_tenant_grants() is
'Internal: delete the tenant grants and the local-tenant requirements of roles that no longer exist (by
OID). Run by grant_tenant, revoke_tenant, require_local_tenant and every install or upgrade.';

select agentmem_private.drop_orphan_tenant_grants();

create or replace function agentmem.require_local_tenant(role_name text, required boolean default true)
returns boolean
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if require_local_tenant.role_name is null
        or not exists (select from pg_catalog.pg_roles as r where r.rolname = require_local_tenant.role_name) then
        raise exception 'no such role: %', coalesce(require_local_tenant.role_name, 'NULL')
        using
            errcode = 'AM030',
            hint = 'Name the login role the application connects as through the pool.';
    end if;
    perform agentmem_private.drop_orphan_tenant_grants();
    if coalesce(require_local_tenant.required, true) then
        insert into agentmem.local_tenant_logins as l (role_oid, role_name)
        values (pg_catalog.to_regrole(pg_catalog.quote_ident(require_local_tenant.role_name))::pg_catalog.oid,
            require_local_tenant.role_name)
        on conflict (role_oid) do nothing;
    else
        delete from agentmem.local_tenant_logins as l
        where l.role_oid = pg_catalog.to_regrole(pg_catalog.quote_ident(require_local_tenant.role_name))::pg_catalog.oid;
    end if;
    return found;
end
$$;

comment on function agentmem.require_local_tenant(text, boolean) is
'Require (required => true, the default) or stop requiring that login role_name set tenants per transaction.
When required, agentmem.set_tenant with local => false raises AM042 for that login, whose hint names
local => true (the tenant then lasts for the current transaction only). For a login behind a pool (PgBouncer in transaction mode, an application pool that
does not reset connections), where a session''s tenant would serve the next client. It binds set_tenant
only: a SET or set_config of agentmem.tenant_id for the session is not seen (docs/pooling.md). Keyed by
the role''s OID (a rename keeps it). Takes effect at the login''s next set_tenant. Returns whether it
changed anything. AM030 for an unknown role.
Called by: the DBA (granted to no role).';

create or replace function agentmem.tenant_must_be_local()
returns boolean
language sql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select exists (
        select from agentmem.local_tenant_logins as l
        where l.role_oid = pg_catalog.to_regrole(pg_catalog.quote_ident(session_user))::pg_catalog.oid
    )
$$;

comment on function agentmem.tenant_must_be_local() is
'Whether this session''s login role may set tenants for one transaction only (agentmem.require_local_tenant).
When true, agentmem.set_tenant with local => false raises AM042 for this login (session_user). It reads
agentmem.local_tenant_logins (a catalogue without row-level security) for the session''s own login only.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

-- The columns keep their order (a view is replaced in place): role_name first.
create or replace view agentmem.tenant_grant_list as
select  -- noqa: ST06
    coalesce(r.rolname, g.role_name) as role_name,
    g.scope,
    g.granted_at,
    g.granted_by,
    b.mode as binding_mode,
    nullif(g.tenant, '') as tenant,
    r.oid is not null as role_exists,
    coalesce(r.rolcanlogin, false) as role_can_login,
    l.role_oid is not null as local_tenant_only
from agentmem.tenant_grants as g
cross join agentmem.tenant_binding as b
left join pg_catalog.pg_roles as r on g.role_oid = r.oid
left join agentmem.local_tenant_logins as l on g.role_oid = l.role_oid
order by coalesce(r.rolname, g.role_name), g.scope, g.tenant;

comment on view agentmem.tenant_grant_list is
'The tenants granted to login roles (agentmem.grant_tenant): scope tenant, prefix or all; whether the role
still exists and can log in (role_name is its name now: grants belong to the role''s OID); whether it
must set its tenant for one transaction only (agentmem.require_local_tenant); and the installation''s binding mode (agentmem.set_tenant_binding), which says
whether the grants are checked. For the DBA.';

create or replace function agentmem.set_tenant_binding(mode text, jwt_claim text default null)
returns agentmem.tenant_binding
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_row agentmem.tenant_binding;
    v_old text := (select b.mode from agentmem.tenant_binding as b);
    v_open bigint;
begin
    if set_tenant_binding.mode is null or set_tenant_binding.mode not in ('none', 'role', 'jwt') then
        raise exception 'unknown tenant binding mode: %', coalesce(pg_catalog.left(set_tenant_binding.mode, 40), 'NULL')
        using
            errcode = 'AM020',
            hint = 'Modes: role (grants of the login role), jwt (a claim of request.jwt.claims), none (any tenant).';
    end if;
    if set_tenant_binding.jwt_claim is not null and (
        set_tenant_binding.jwt_claim !~ '^[A-Za-z0-9_:/-]+(\.[A-Za-z0-9_:/-]+)*$' or pg_catalog.length(set_tenant_binding.jwt_claim) > 200
    ) then
        raise exception 'jwt_claim must be a claim name, or a dotted path such as app_metadata.tenant_id'
        using errcode = 'AM020', hint = 'Letters, digits, _ : / - between dots; at most 200 characters.';
    end if;
    update agentmem.tenant_binding as b
    set
        mode = set_tenant_binding.mode,
        jwt_claim = coalesce(set_tenant_binding.jwt_claim, b.jwt_claim),
        updated_at = pg_catalog.now();
    perform agentmem_private.generate_tenant_binding();
    -- A session learns of the new mode (a replaced function) at its next
    -- transaction: one already open may keep the old mode until it ends
    -- (counted where pg_stat_activity shows it: superusers, pg_read_all_stats).
    select pg_catalog.count(*) into v_open
    from pg_catalog.pg_stat_activity as a
    where
        a.datname = pg_catalog.current_database() and a.pid <> pg_catalog.pg_backend_pid()
        and a.backend_type = 'client backend' and a.xact_start is not null;
    if v_old is distinct from set_tenant_binding.mode and v_open > 0 then
        raise notice 'agentmem: % session% of this database % in an open transaction, which may keep tenant binding mode % until it ends',
            v_open, case when v_open > 1 then 's' else '' end, case when v_open > 1 then 'are' else 'is' end, v_old
        using hint = 'The change holds for every transaction that starts after this one commits. To end the '
        || 'older ones: select pg_terminate_backend(pid) from pg_stat_activity where datname = pg_catalog.current_database() '
        || 'and xact_start < pg_catalog.now() and pid <> pg_backend_pid();';
    end if;
    select b.* into v_row from agentmem.tenant_binding as b;
    return v_row;
end
$$;

comment on function agentmem.set_tenant_binding(text, text) is
'Choose how agentmem.current_tenant() checks the tenant a session sets: mode role, jwt or none.
role: the login role''s grants (agentmem.grant_tenant); jwt: the claim jwt_claim (default tenant_id or as set before) of request.jwt.claims, a string or an array of tenant ids (a dotted path reaches into objects); none: any tenant.
Takes effect for every transaction that starts after it commits. A transaction already open keeps the
mode it started with until it ends (PostgreSQL delivers the replaced agentmem.tenant_binding_mode() to a
session between transactions, or when it first locks a table in the transaction): after a switch from none
it may still set an ungranted tenant, so a NOTICE counts the sessions of this database in an open
transaction (those pg_stat_activity shows the caller) and its hint says how to end them. AM020 for an
unknown mode or a malformed claim name.
Called by: the DBA (granted to no role).';

create or replace function agentmem.my_tenants()
returns table (tenant_id text, scope text, granted_at timestamptz, binding_mode text)
language sql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select
        nullif(g.tenant, ''), g.scope, g.granted_at,
        (select b.mode from agentmem.tenant_binding as b)
    from agentmem.tenant_grants as g
    -- by the login's identity, as may_act_as: a role created again under a dropped one's name has none
    where g.role_oid = pg_catalog.to_regrole(pg_catalog.quote_ident(session_user))::pg_catalog.oid
    order by g.scope = 'all' desc, g.tenant, g.scope
$$;

comment on function agentmem.my_tenants() is
'The tenant grants of this session''s login role (session_user), with the installation''s binding mode.
Each tenant it may act as (scope tenant), prefix (scope prefix: every tenant starting with it) or all (tenant_id NULL).
What a door (agentmem inspect, an MCP server) offers its login: under binding mode role the grants
decide (agentmem.may_act_as); under none every tenant may be set; under jwt the token''s claim must name
it too. Superusers, BYPASSRLS roles and the schema''s owner may act as any tenant without a grant (no row
here). No tenant need be set: it reads only the calling login''s own rows of agentmem.tenant_grants and
the binding mode of agentmem.tenant_binding (catalogues without row-level security).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';
