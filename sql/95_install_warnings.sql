-- What the DBA must act on, said at the end of every install and upgrade as a
-- WARNING, which both installers show (the psql script hides mere notices;
-- `agentmem migrate` prints warnings): besides the full-text index's LEAKPROOF
-- mark (sql/16_text_search.sql), a server without pg_cron, where nothing
-- applies the retention policies unless the DBA schedules it elsewhere.
do $cron$
begin
    if pg_catalog.current_setting('cron.database_name', true) is null then
        raise warning 'pg_cron is not loaded on this server: retention policies take effect only when something calls %',
            'agentmem.apply_retention()'
        using hint = 'Run "select agentmem.apply_retention();" every few minutes from any scheduler, as a superuser '
        || 'or BYPASSRLS role; or add pg_cron to shared_preload_libraries, restart the server and run '
        || '"select agentmem.schedule_retention();".';
    end if;
end
$cron$;
