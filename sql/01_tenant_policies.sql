-- Row-level security on every agentmem table that has a tenant_id column:
-- enabled, forced (the owner too) and one tenant_isolation policy keyed to
-- agentmem.current_tenant(). Found from the catalogue on every install, so a
-- table added by a later migration is covered without another statement.
-- (Migrations cannot create these policies: they run before sql/00 defines
-- current_tenant() on a fresh install.)

do $policies$
declare
    v_table text;
begin
    for v_table in
        select c.relname
        from pg_catalog.pg_class as c
        where
            c.relnamespace = 'agentmem'::regnamespace and c.relkind in ('r', 'p')
            and exists (
                select from pg_catalog.pg_attribute as a
                where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped
            )
        order by c.relname
    loop
        execute pg_catalog.format('alter table agentmem.%I enable row level security', v_table);
        execute pg_catalog.format('alter table agentmem.%I force row level security', v_table);
        execute pg_catalog.format('drop policy if exists tenant_isolation on agentmem.%I', v_table);
        execute pg_catalog.format(
            'create policy tenant_isolation on agentmem.%I '
            'using (tenant_id = agentmem.current_tenant()) '
            'with check (tenant_id = agentmem.current_tenant())',
            v_table
        );
    end loop;
end
$policies$;
