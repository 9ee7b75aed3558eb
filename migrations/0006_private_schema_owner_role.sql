-- 0006 the API as the only door: a private schema for internal helpers, the
-- role agentmem_owner that the API's security definer functions run as, and
-- the functions whose names or signatures change.

create schema if not exists agentmem_private;

comment on schema agentmem_private is
'agentmem internals: helper functions of the public API. Not part of the API; '
'the application role has no privilege here.';

revoke all on schema agentmem_private from public;

-- The owner of the API's functions: no login, not superuser, not BYPASSRLS,
-- so forced row-level security binds it like any other role.
do $roles$
begin
    if not exists (select from pg_catalog.pg_roles where rolname = 'agentmem_owner') then
        begin
            create role agentmem_owner nologin nosuperuser nobypassrls;
            comment on role agentmem_owner is
            'agentmem: owns the API''s security definer functions and holds the table privileges they '
            'need; cannot log in; forced row-level security binds it.';
        exception when insufficient_privilege then
            raise exception 'role % may not create the role agentmem_owner', current_user
            using
                errcode = 'AM041',
                detail = sqlerrm,
                hint = 'Ask a superuser to run "create role agentmem_owner nologin nobypassrls; '
                || 'grant agentmem_owner to ' || quote_ident(current_user) || ';", then migrate again.';
        end;
    end if;
    -- (It may log in only where agentmem.distribute() made it: on a Citus cluster
    -- the coordinator opens worker connections as the definer functions' owner.)
    if exists (
        select from pg_catalog.pg_roles
        where rolname = 'agentmem_owner' and (rolsuper or rolbypassrls)
    ) then
        raise exception 'role agentmem_owner must not be a superuser or bypass row-level security'
        using
            errcode = 'AM041',
            hint = 'alter role agentmem_owner nosuperuser nobypassrls; then migrate again.';
    end if;
    -- The installer re-creates the API's functions on every upgrade, which
    -- needs membership in their owner.
    if not pg_catalog.pg_has_role(current_user, 'agentmem_owner', 'usage') then
        begin
            execute pg_catalog.format('grant agentmem_owner to %I', current_user);
        exception when insufficient_privilege then
            raise exception 'role % is not a member of agentmem_owner and may not make itself one', current_user
            using
                errcode = 'AM041',
                detail = sqlerrm,
                hint = 'Ask a superuser to run "grant agentmem_owner to ' || quote_ident(current_user)
                || ';", then migrate again.';
        end;
    end if;
end
$roles$;

-- Helpers named agentmem._* move to agentmem_private (re-created by sql/);
-- cascade drops what referred to them (function defaults, the health view),
-- all of which sql/ re-creates in the same upgrade.
do $helpers$
declare
    v_fn regprocedure;
begin
    for v_fn in
        select p.oid::regprocedure
        from pg_catalog.pg_proc as p
        where p.pronamespace = 'agentmem'::regnamespace and p.proname like '\_%'
    loop
        execute pg_catalog.format('drop function if exists %s cascade', v_fn);
    end loop;
end
$helpers$;

-- The embedding cache's functions get names apart from the answer cache's.
drop function if exists agentmem.cached_embeddings(text, text[]);
drop function if exists agentmem.cache_embeddings(text, text[], vector[]);
-- The installation default retention policy has DBA functions of its own.
drop function if exists agentmem.set_retention_policy(text, interval, boolean);
drop function if exists agentmem.clear_retention_policy(text, boolean);
