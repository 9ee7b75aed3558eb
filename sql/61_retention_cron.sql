-- Retention, continued: pg_cron scheduling and the health view.

create or replace function agentmem_private.cron_job_name()
returns text
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select 'agentmem-retention:' || pg_catalog.current_database()
$$;

comment on function agentmem_private.cron_job_name() is
'Internal: the name of this database''s retention job in pg_cron.';

-- pg_cron runs its jobs from one database (cron.database_name) and can only be
-- created there. When that is another database, the cron schema is out of reach
-- of plain SQL; dblink (PostgreSQL contrib) is the one portable way to call
-- cron.schedule_in_database from here. We do not create dblink ourselves (it is
-- not a trusted extension and opens outbound connections): when it is missing
-- the error gives the exact statement to run in the cron database instead.
-- cron_call takes the job's call for its hints (p_call) since there are two jobs.
drop function if exists agentmem_private.cron_call(text, text);

-- cron.database_name is a setting only superusers and members of
-- pg_read_all_settings may read (42501 for anyone else, even with missing_ok).
-- A DBA who is not a superuser learns it from the catalogue where pg_cron is
-- created in this database (pg_cron refuses to be created anywhere else), and
-- otherwise hears which grant a superuser makes.
create or replace function agentmem_private.cron_database(p_call text)
returns text
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    return pg_catalog.current_setting('cron.database_name', true);
exception when insufficient_privilege then
    if exists (select from pg_catalog.pg_extension where extname = 'pg_cron') then
        return pg_catalog.current_database();
    end if;
    raise exception 'role % may not read cron.database_name, pg_cron''s database', current_user
    using
        errcode = 'AM041',
        detail = 'pg_cron is loaded, and its settings are readable only by superusers and members of pg_read_all_settings.',
        hint = pg_catalog.format(
            'Ask a superuser to run "grant pg_read_all_settings to %I;", or to schedule the job; or call %s '
            'from any scheduler.', current_user, p_call
        );
end
$$;

comment on function agentmem_private.cron_database(text) is
'Internal: pg_cron''s database (cron.database_name): NULL where pg_cron is not loaded; this database where
the setting is hidden from the role but pg_cron is created here; AM041 naming the grant a superuser makes
otherwise (p_call: the job''s call, for the hint).';

create or replace function agentmem_private.cron_call(p_sql text, p_columns text, p_call text)
returns setof record
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_cron_db text := agentmem_private.cron_database(p_call);
    v_dblink name;
    v_conninfo text;
begin
    if v_cron_db is null then
        raise exception 'pg_cron is not available on this server'
        using
            errcode = 'AM050',
            detail = 'pg_cron is not in shared_preload_libraries, so nothing would run the job.',
            hint = 'Call ' || p_call || ' from any scheduler (cron, a systemd timer, a Kubernetes '
            || 'CronJob, your application) every few minutes as a superuser or BYPASSRLS role: it is safe to run too often.';
    end if;
    if v_cron_db = pg_catalog.current_database() then
        if not exists (select from pg_catalog.pg_extension where extname = 'pg_cron') then
            raise exception 'pg_cron is loaded but its extension is not created in database %', v_cron_db
            using
                errcode = 'AM050',
                hint = 'Run "create extension pg_cron;" in this database, or call ' || p_call || ' from any scheduler.';
        end if;
        begin
            return query execute p_sql;
        exception when insufficient_privilege then
            raise exception 'role % may not use pg_cron: %', current_user, sqlerrm
            using
                errcode = 'AM041',
                hint = pg_catalog.format(
                    'Ask a superuser to run "grant usage on schema cron to %I;", or to schedule the job; or call '
                    '%s from any scheduler.', current_user, p_call
                );
        end;
        return;
    end if;
    select n.nspname into v_dblink
    from pg_catalog.pg_extension as e inner join pg_catalog.pg_namespace as n on e.extnamespace = n.oid
    where e.extname = 'dblink';
    if v_dblink is null then
        raise exception 'pg_cron lives in database %, and extension dblink is not installed in database %',
            v_cron_db, pg_catalog.current_database()
        using
            errcode = 'AM050',
            detail = 'Reaching pg_cron''s functions from another database needs dblink.',
            hint = pg_catalog.format(
                'Either run "create extension dblink;" here and call again, or run this in database %I: %s; '
                'or call %s from any scheduler.',
                v_cron_db, p_sql, p_call
            );
    end if;
    -- The address pg_cron itself uses (cron.host), this server's port, the
    -- calling role; agentmem.cron_conninfo overrides it (e.g. to add a password).
    v_conninfo := coalesce(
        nullif(pg_catalog.current_setting('agentmem.cron_conninfo', true), ''),
        pg_catalog.format(
            'dbname=%s host=%s port=%s user=%s application_name=agentmem',
            v_cron_db, coalesce(nullif(pg_catalog.current_setting('cron.host', true), ''), 'localhost'),
            pg_catalog.current_setting('port'), current_user
        )
    );
    return query execute pg_catalog.format('select * from %I.dblink($1, $2) as t(%s)', v_dblink, p_columns)
    using v_conninfo, p_sql;
end
$$;

comment on function agentmem_private.cron_call(text, text, text) is
'Internal: run a query against pg_cron''s schema, here or (through dblink) in cron.database_name. '
'p_columns is the column definition list of its result; p_call the job''s call, which the hints of its '
'errors say to run from any other scheduler. Raises AM050 when pg_cron is out of reach.';

create or replace function agentmem_private.cron_schedule(p_jobname text, p_schedule text, p_call text)
returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_sql text;
    v_jobid bigint;
begin
    if agentmem_private.is_blank(p_schedule) or pg_catalog.length(p_schedule) > 200 then
        raise exception 'schedule must be a cron expression of at most 200 characters, e.g. */15 * * * *'
        using
            errcode = 'AM020',
            detail = pg_catalog.format('Got %s.', coalesce(pg_catalog.quote_literal(pg_catalog.left(p_schedule, 60)), 'NULL')),
            hint = 'Five fields: minute, hour, day of month, month, day of week (''* * * * *'': every minute), '
                'or pg_cron''s ''N seconds''.';
    end if;
    if agentmem_private.cron_database(p_call) = pg_catalog.current_database() then
        v_sql := pg_catalog.format('select cron.schedule(%L, %L, %L)', p_jobname, p_schedule, 'select ' || p_call);
    else
        v_sql := pg_catalog.format(
            'select cron.schedule_in_database(%L, %L, %L, %L)',
            p_jobname, p_schedule, 'select ' || p_call, pg_catalog.current_database()
        );
    end if;
    select t.jobid into v_jobid from agentmem_private.cron_call(v_sql, 'jobid bigint', p_call) as t (jobid bigint);
    return v_jobid;
end
$$;

comment on function agentmem_private.cron_schedule(text, text, text) is
'Internal: register (or re-register) the pg_cron job p_jobname of this database: "select p_call" on the
cron schedule p_schedule (AM020 when blank or over 200 characters), as the calling role; pg_cron''s job id.';

create or replace function agentmem_private.cron_unschedule(p_jobname text, p_call text)
returns boolean
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_removed bigint;
begin
    select t.n into v_removed
    from agentmem_private.cron_call(
        pg_catalog.format(
            'select pg_catalog.count(cron.unschedule(j.jobid)) from cron.job as j where j.jobname = %L and j.database = %L',
            p_jobname, pg_catalog.current_database()
        ),
        'n bigint', p_call
    ) as t (n bigint);
    return v_removed > 0;
end
$$;

comment on function agentmem_private.cron_unschedule(text, text) is
'Internal: remove the pg_cron job p_jobname of this database; whether there was one (p_call: as cron_call).';

create or replace function agentmem.schedule_retention(schedule text default '*/15 * * * *')
returns bigint
language sql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- The job runs apply_retention as this role: one that cannot see every
    -- tenant would fail on every run, so it is refused now.
    select agentmem_private.cron_schedule(
        agentmem_private.cron_job_name(), schedule_retention.schedule, 'agentmem.apply_retention()'
    )
    where agentmem_private.check_sees_every_tenant(
        'agentmem.schedule_retention', 'the job runs agentmem.apply_retention as this role, which deletes across tenants',
        pg_catalog.format(
            'Ask a superuser to run "alter role %I bypassrls;", or to schedule it as themselves.', current_user
        )
    )
$$;

comment on function agentmem.schedule_retention(text) is
'Register (or re-register) this database''s retention job with pg_cron, on the given cron schedule.
It runs "select agentmem.apply_retention()" as the calling role (a superuser or BYPASSRLS role).
When pg_cron lives in
another database (cron.database_name) it calls cron.schedule_in_database there through dblink, which must
be installed here; otherwise AM050 with the exact statement to run in the cron database. Without pg_cron,
AM050 whose hint says to call agentmem.apply_retention() from any scheduler. Returns pg_cron''s job id.
AM041, with the statement a superuser runs in the hint, for a role that does not see every tenant (the
job would fail on every run: alter role ... bypassrls), that may not read cron.database_name (grant
pg_read_all_settings) or use pg_cron''s schema (grant usage on schema cron).
Called by: the DBA (granted to no role).';

create or replace function agentmem.unschedule_retention()
returns boolean
language sql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select agentmem_private.cron_unschedule(agentmem_private.cron_job_name(), 'agentmem.apply_retention()')
$$;

comment on function agentmem.unschedule_retention() is
'Remove this database''s retention job from pg_cron. Returns whether there was one.
Raises AM050 like agentmem.schedule_retention when pg_cron is out of reach.
Called by: the DBA (granted to no role).';

create or replace function agentmem_private.cron_status()
returns table (
    cron_jobid bigint,
    cron_schedule text,
    cron_active boolean,
    cron_last_status text,
    cron_last_start timestamptz,
    cron_last_end timestamptz,
    cron_last_message text,
    cron_note text
)
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_hint text;
begin
    return query
    select *, null::text
    from agentmem_private.cron_call(
        pg_catalog.format(
            'select j.jobid, j.schedule, j.active, d.status, d.start_time, d.end_time, d.return_message '
            'from cron.job as j left join lateral ('
            '  select r.status, r.start_time, r.end_time, r.return_message from cron.job_run_details as r'
            '  where r.jobid = j.jobid order by r.runid desc limit 1'
            ') as d on true '
            'where j.jobname = %L and j.database = %L',
            agentmem_private.cron_job_name(), pg_catalog.current_database()
        ),
        'jobid bigint, schedule text, active boolean, status text, start_time timestamptz, '
        'end_time timestamptz, return_message text',
        'agentmem.apply_retention()'
    ) as t (
        jobid bigint, schedule text, active boolean, status text, start_time timestamptz,
        end_time timestamptz, return_message text
    );
    if not found then
        return query select null::bigint, null::text, null::boolean, null::text, null::timestamptz,
            null::timestamptz, null::text, 'not scheduled'::text;
    end if;
exception when sqlstate 'AM050' or sqlstate 'AM041' then
    -- pg_cron out of reach, or hidden from this role (AM041: the note says what to ask a superuser for)
    get stacked diagnostics v_hint = pg_exception_hint;
    return query select null::bigint, null::text, null::boolean, null::text, null::timestamptz,
        null::timestamptz, null::text,
        sqlerrm || case when sqlstate = 'AM041' then coalesce('. ' || nullif(v_hint, ''), '') else '' end;
end
$$;

comment on function agentmem_private.cron_status() is
'Internal: pg_cron''s view of this database''s retention job and its last run, or a note saying why '
'there is none (not scheduled, pg_cron out of reach).';

-- Read through a function: on Citus the workers run parts of it, and the
-- function first sends them the pinned search_path (agentmem_private.pin_worker_path),
-- which a plain view cannot.
create or replace function agentmem_private.retention_health_rows()
returns table (
    last_run_id bigint,
    last_run_at timestamptz,
    last_rows_removed jsonb,
    last_total_removed bigint,
    last_error text,
    last_error_at timestamptz,
    cron_jobid bigint,
    cron_schedule text,
    cron_active boolean,
    cron_last_status text,
    cron_last_start timestamptz,
    cron_last_end timestamptz,
    cron_last_message text,
    cron_note text,
    last_run_duration interval,
    status text
)
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
begin
    perform agentmem_private.pin_worker_path();
    return query
        with
        last_run as (
            select j.* from agentmem.job_runs as j
            where j.job = 'retention' and (select agentmem_private.check_health_reader('agentmem.retention_health'))
            order by j.started_at desc, j.run_id desc
            limit 1
        ),

        last_error as (
            select pg_catalog.max(j.started_at) as last_error_at from agentmem.job_runs as j
            where
                j.job = 'retention' and j.error is not null
                and (select agentmem_private.check_health_reader('agentmem.retention_health'))
        ),

        cron as (
            select * from agentmem_private.cron_status()
        )

        select
            r.run_id as last_run_id,
            r.started_at as last_run_at,
            r.rows_removed as last_rows_removed,
            r.total_removed as last_total_removed,
            r.error as last_error,
            e.last_error_at,
            c.cron_jobid,
            c.cron_schedule,
            c.cron_active,
            c.cron_last_status,
            c.cron_last_start,
            c.cron_last_end,
            c.cron_last_message,
            c.cron_note,
            r.finished_at - r.started_at as last_run_duration,
            case
                when c.cron_last_status = 'failed' then 'failing'
                when r.error is not null then 'failing'
                when r.run_id is null then 'never run'
                else 'ok'
            end as status
        from cron as c
        cross join last_error as e
        left join last_run as r on true;
end
$$;

comment on function agentmem_private.retention_health_rows() is
'Internal: the rows of the view agentmem.retention_health.';

create or replace view agentmem.retention_health
with (security_invoker = true) as
select
    r.last_run_id,
    r.last_run_at,
    r.last_rows_removed,
    r.last_total_removed,
    r.last_error,
    r.last_error_at,
    r.cron_jobid,
    r.cron_schedule,
    r.cron_active,
    r.cron_last_status,
    r.cron_last_start,
    r.cron_last_end,
    r.cron_last_message,
    r.cron_note,
    r.last_run_duration,
    r.status
from agentmem_private.retention_health_rows() as r;

comment on view agentmem.retention_health is
'Health of the retention job: agentmem''s last run (rows removed per kind, duration, error) and pg_cron''s own '
'last run of the job from cron.job_run_details when pg_cron is in reach. status is failing when either '
'the last run recorded an error or pg_cron reports the last run failed. For the DBA (reads across tenants).';
