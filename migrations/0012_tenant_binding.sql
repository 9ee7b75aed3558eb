-- 0012 tenant binding: which login may act as which tenant.
-- agentmem.tenant_grants holds the DBA's grants (a role and one tenant, a
-- tenant prefix, or every tenant); agentmem.tenant_binding holds the one row
-- that says how a tenant setting is checked: 'role' (against the grants of
-- the session's login role), 'jwt' (against a claim of request.jwt.claims) or
-- 'none'. A new installation starts with 'role'; an installation upgraded to
-- this migration keeps working as it did, with 'none', and is told how to turn
-- binding on. agentmem.retention_cursors remembers, per kind of data, the last
-- tenant a retention run served, so the next run starts after it.
-- Installation-wide catalogues: no tenant_id column (not under row-level
-- security; reference tables on Citus, so every worker reads them).

create table agentmem.tenant_binding (
    singleton boolean primary key default true check (singleton),
    mode text not null check (mode in ('none', 'role', 'jwt')),
    jwt_claim text not null default 'tenant_id' check (jwt_claim <> '' and length(jwt_claim) <= 200),
    updated_at timestamptz not null default now()
);

comment on table agentmem.tenant_binding is
'How agentmem.current_tenant() checks the tenant a session sets (one row; installation-wide catalogue).
mode: none (any tenant), role (grants of the login role in agentmem.tenant_grants), jwt (the claim
jwt_claim of request.jwt.claims). Change it with agentmem.set_tenant_binding.';

insert into agentmem.tenant_binding (mode)
select case when pg_catalog.to_regprocedure('agentmem.current_tenant()') is null then 'role' else 'none' end;

create table agentmem.tenant_grants (
    role_name name not null,
    scope text not null check (scope in ('tenant', 'prefix', 'all')),
    tenant text not null default '',
    granted_at timestamptz not null default now(),
    granted_by name not null default current_user,
    constraint tenant_grants_pkey primary key (role_name, scope, tenant),
    constraint tenant_grants_all_check check ((scope = 'all') = (tenant = ''))
);

comment on table agentmem.tenant_grants is
'Tenants granted to login roles (agentmem.grant_tenant): scope tenant (exactly that id), prefix (every id
starting with it) or all (every tenant, tenant ''''). Installation-wide catalogue.';

create table agentmem.retention_cursors (
    kind text not null,
    policy text not null check (policy in ('own', 'default')),
    last_tenant text not null,
    updated_at timestamptz not null default now(),
    constraint retention_cursors_pkey primary key (kind, policy)
);

comment on table agentmem.retention_cursors is
'Per kind of data and group of policies (tenants'' own, the installation default): the last tenant a
retention run served; the next run starts after it. Installation-wide catalogue.';

do $notice$
begin
    if (select b.mode from agentmem.tenant_binding as b) = 'none' then
        raise notice using
            message = 'agentmem: tenant binding is off in this upgraded installation: any application login may set any tenant, as before',
            hint = 'Grant each login its tenants (select agentmem.grant_tenant(role_name => ''app'', tenant_id => ''acme'');), '
            || 'then turn binding on: select agentmem.set_tenant_binding(mode => ''role''); (or mode => ''jwt'' behind PostgREST).';
    end if;
end
$notice$;
