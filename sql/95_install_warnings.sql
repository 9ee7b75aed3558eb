-- What the DBA must act on, said at the end of every install and upgrade as a
-- WARNING, which both installers show (the psql script hides mere notices;
-- `agentmem migrate` prints warnings): besides the full-text index's LEAKPROOF
-- mark (sql/16_text_search.sql), a server without pg_cron, where nothing
-- applies the retention policies unless the DBA schedules it elsewhere. Only
-- a role that may read pg_cron's settings (a superuser, pg_read_all_settings)
-- can tell; for others this says nothing.
do $cron$
declare
    v_loaded boolean;
begin
    begin
        v_loaded := pg_catalog.current_setting('cron.database_name', true) is not null;
    exception when insufficient_privilege then
        v_loaded := null;
    end;
    if not v_loaded then
        raise warning 'pg_cron is not loaded on this server: retention policies take effect only when something calls %',
            'agentmem.apply_retention()'
        using hint = 'Run "select agentmem.apply_retention();" every few minutes from any scheduler, as a superuser '
        || 'or BYPASSRLS role; or add pg_cron to shared_preload_libraries, restart the server and run '
        || '"select agentmem.schedule_retention();".';
    end if;
end
$cron$;
