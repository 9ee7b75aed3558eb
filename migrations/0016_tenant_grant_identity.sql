-- 0016 tenant grants bound to the role's identity, and logins whose tenant
-- lasts one transaction.
-- agentmem.tenant_grants gains role_oid, the granted role's OID, which keys
-- the grants instead of its name: a role dropped and created again under the
-- same name is another role and holds none of the old one's grants; a renamed
-- role keeps its grants. role_name stays as the name the role had when it was
-- granted. Grants of roles that no longer exist are removed here (their names
-- in a NOTICE); a grant whose name a role holds now goes to that role (a role
-- dropped and created again before this upgrade cannot be told from the old).
-- agentmem.local_tenant_logins lists the login roles that may set a tenant
-- only for the current transaction (set_tenant's local => true), one row per
-- role, keyed by its OID. Installation-wide catalogue: no tenant_id column
-- (not under row-level security; a reference table on Citus).

alter table agentmem.tenant_grants add column role_oid oid;

-- One role at a time, the catalogue read apart from the table (a reference
-- table on Citus, which a statement does not join with a coordinator's
-- catalogue).
do $identity$
declare
    v_name name;
    v_gone text[] := '{}';
begin
    for v_name in select distinct g.role_name from agentmem.tenant_grants as g order by 1 loop
        if pg_catalog.to_regrole(pg_catalog.quote_ident(v_name)) is null then
            delete from agentmem.tenant_grants as g where g.role_name = v_name;
            v_gone := v_gone || v_name::text;
        else
            update agentmem.tenant_grants as g
            set role_oid = pg_catalog.to_regrole(pg_catalog.quote_ident(v_name))::oid
            where g.role_name = v_name;
        end if;
    end loop;
    if v_gone <> '{}' then
        raise notice 'agentmem: removed the tenant grants of roles that no longer exist: %',
            pg_catalog.array_to_string(v_gone, ', ');
    end if;
end
$identity$;

alter table agentmem.tenant_grants alter column role_oid set not null;
alter table agentmem.tenant_grants drop constraint tenant_grants_pkey;
alter table agentmem.tenant_grants add constraint tenant_grants_pkey primary key (role_oid, scope, tenant);

comment on column agentmem.tenant_grants.role_oid is
'The OID of the granted role: its identity, which a rename keeps and a role created again under the same
name does not have.';

comment on column agentmem.tenant_grants.role_name is
'The name the role had when it was granted (agentmem.tenant_grant_list shows its name now).';

create table agentmem.local_tenant_logins (
    role_oid oid primary key,
    role_name name not null,
    required_at timestamptz not null default now(),
    required_by name not null default current_user
);

comment on table agentmem.local_tenant_logins is
'Login roles whose tenant may last one transaction only (agentmem.require_local_tenant): set_tenant with
local => false raises AM042 for them. Keyed by the role''s OID. Installation-wide catalogue.';
