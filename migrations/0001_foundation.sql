-- 0001 foundation: the application role and the schema's default privileges.
-- The schema itself and the ledger are created by the installer's bootstrap.

do $roles$
begin
    if not exists (select from pg_catalog.pg_roles where rolname = 'agentmem_app') then
        begin
            create role agentmem_app nologin nobypassrls;
        exception when insufficient_privilege then
            raise exception 'role % may not create the role agentmem_app', current_user
            using
                errcode = 'AM041',
                detail = sqlerrm,
                hint = 'Ask a superuser to run "create role agentmem_app nologin nobypassrls;", '
                || 'then migrate again.';
        end;
    end if;
end
$roles$;

comment on role agentmem_app is
'agentmem application role: may call the agentmem API; every row it sees is scoped to one tenant by RLS.';

revoke all on schema agentmem from public;
