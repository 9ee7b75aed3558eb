-- Row-level security on every agentmem table that has a tenant_id column:
-- enabled, forced (the owner and agentmem_owner too) and one tenant_isolation
-- policy keyed to agentmem.current_tenant(), as a sub-select: evaluated once
-- per statement (an InitPlan), not once per row, since it checks the tenant
-- binding (agentmem.may_act_as) each time it runs. On a Citus cluster, which
-- refuses sub-selects in policies, the policy calls it directly. Found from the catalogue on every
-- install, so a table added by a later migration is covered without another
-- statement; a table already in that state is not touched (no lock taken).
-- (Migrations cannot create these policies: they run before sql/00 defines
-- current_tenant() on a fresh install.)

do $policies$
declare
    v_table record;
    v_expected text := '(tenant_id = ( SELECT agentmem.current_tenant() AS current_tenant))';
    v_using text := '(tenant_id = (select agentmem.current_tenant()))';
    v_distributed boolean := false;
    v_search_path text := pg_catalog.current_setting('search_path');
begin
    -- Citus refuses sub-selects in the policies of distributed tables: there
    -- the policy calls current_tenant() itself (agentmem.distribute() rewrites
    -- it before it distributes a table).
    if pg_catalog.to_regclass('pg_catalog.pg_dist_partition') is not null then
        execute 'select exists (select from pg_catalog.pg_dist_partition '
            'where logicalrelid = pg_catalog.to_regclass(''agentmem.conversations''))'
        into v_distributed;
    end if;
    if v_distributed then
        v_expected := '(tenant_id = agentmem.current_tenant())';
        v_using := '(tenant_id = agentmem.current_tenant())';
    end if;
    -- Policies are compared as deparsed text, which names agentmem only when
    -- it is not on the search_path: deparse with pg_catalog alone.
    perform pg_catalog.set_config('search_path', 'pg_catalog', true);
    for v_table in
        select
            c.relname,
            c.relrowsecurity,
            c.relforcerowsecurity,
            p.policyname,
            p.qual,
            p.with_check
        from pg_catalog.pg_class as c
        left join pg_catalog.pg_policies as p
            on p.schemaname = 'agentmem' and p.tablename = c.relname and p.policyname = 'tenant_isolation'
        where
            c.relnamespace = 'agentmem'::regnamespace and c.relkind in ('r', 'p')
            and exists (
                select from pg_catalog.pg_attribute as a
                where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped
            )
        order by c.relname
    loop
        if not v_table.relrowsecurity then
            execute pg_catalog.format('alter table agentmem.%I enable row level security', v_table.relname);
        end if;
        if not v_table.relforcerowsecurity then
            execute pg_catalog.format('alter table agentmem.%I force row level security', v_table.relname);
        end if;
        if v_table.policyname is null
            or v_table.qual is distinct from v_expected
            or v_table.with_check is distinct from v_expected then
            execute pg_catalog.format('drop policy if exists tenant_isolation on agentmem.%I', v_table.relname);
            execute pg_catalog.format(
                'create policy tenant_isolation on agentmem.%I using %s with check %s',
                v_table.relname, v_using, v_using
            );
        end if;
    end loop;
    perform pg_catalog.set_config('search_path', v_search_path, true);
end
$policies$;
