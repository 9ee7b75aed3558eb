-- Index upkeep: the DBA's tenant-index step (sql/12_tenant_indexes.sql) taken
-- by a job. agentmem.apply_index_upkeep builds the own indexes of tenants that
-- crossed agentmem.tenant_index_min_rows (agentmem.tenants_needing_index) and
-- drops those searches no longer use (agentmem.tenant_indexes), bounded per
-- run, each run recorded in agentmem.job_runs beside retention's; pg_cron runs
-- it where present (agentmem.schedule_index_upkeep), any scheduler otherwise.

create or replace function agentmem_private.index_upkeep_max_build_rows()
returns bigint
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select coalesce(
        nullif(pg_catalog.current_setting('agentmem.index_upkeep_max_build_rows', true), '')::bigint, 50000
    )
$$;

comment on function agentmem_private.index_upkeep_max_build_rows() is
'Internal: the most rows of one table and model a tenant may hold for agentmem.apply_index_upkeep to build
its indexes itself (a plain CREATE INDEX, which blocks writes to the table while it builds): the setting
agentmem.index_upkeep_max_build_rows, else 50,000. Bigger tenants are left, with their CREATE INDEX
CONCURRENTLY statements, for the DBA.';

-- Over 100 lines: one job run: the drops, the builds and the measures, three short loops that fill one
--   record of agentmem.job_runs together.
create or replace function agentmem.apply_index_upkeep(max_builds int default 1)
returns agentmem.job_runs
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_started timestamptz := pg_catalog.clock_timestamp();
    v_max_rows bigint := agentmem_private.index_upkeep_max_build_rows();
    v_index record;
    v_tenant record;
    v_built_tenants int := 0;
    v_dropped text[] := '{}';
    v_built text[] := '{}';
    v_measured text[] := '{}';
    v_left jsonb := '[]';
    v_errors text[] := '{}';
    v_row agentmem.job_runs;
    v_citus_mode text;
begin
    perform agentmem_private.check_range('max_builds', apply_index_upkeep.max_builds, 0, 1000);
    perform agentmem_private.check_sees_every_tenant(
        'agentmem.apply_index_upkeep', 'it builds and drops the indexes of every tenant',
        'Run it (or schedule it with agentmem.schedule_index_upkeep) as a superuser or a role with BYPASSRLS.'
    );
    -- Safe to run too often: a second concurrent run returns at once.
    if not pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended('agentmem.apply_index_upkeep', 5)) then
        v_row.job := 'index_upkeep';
        v_row.started_at := v_started;
        v_row.finished_at := pg_catalog.clock_timestamp();
        v_row.rows_removed := '{}';
        v_row.total_removed := 0;
        v_row.error := 'skipped: another apply_index_upkeep run is in progress';
        return v_row;
    end if;
    -- On Citus, DDL on a distributed table after a read of a reference table
    -- it has a foreign key to (models, read by the views below) must go shard
    -- by shard in the same transaction; the caller's mode is given back at the end.
    v_citus_mode := pg_catalog.current_setting('citus.multi_shard_modify_mode', true);
    if agentmem.is_distributed() then
        perform pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    end if;

    -- 1. Drops: an index searches do not use (agentmem.tenant_indexes, needed
    -- false) still costs every write to its table. Left invalid by a failed
    -- concurrent build, or an exact index of a tenant grown past
    -- exact_index_max_rows: dropped. A tenant that shrank keeps its indexes
    -- until it is under three quarters of tenant_index_min_rows, so that one
    -- moving about the threshold is not built and dropped by turns. Under the
    -- function's lock_timeout, a drop that would queue behind a long
    -- transaction on the table gives up, and the next run tries again.
    for v_index in
        select l.index_name, l.index_kind, l.is_valid, l.tenant_rows, m.dimension
        from agentmem_private.tenant_index_list() as l
        left join agentmem.models as m on l.model = m.model
        where not l.needed
        order by l.table_name, l.tenant_id, l.model, l.index_kind
    loop
        continue when v_index.is_valid and v_index.dimension is not null
            and v_index.tenant_rows > agentmem_private.tenant_index_min_rows(v_index.dimension) * 3 / 4
            and not (v_index.index_kind = 'exact'
                and v_index.tenant_rows > agentmem_private.exact_index_max_rows(v_index.dimension));
        begin
            execute pg_catalog.format('drop index if exists agentmem.%I', v_index.index_name);
            v_dropped := v_dropped || v_index.index_name;
        exception when others then
            v_errors := v_errors || pg_catalog.format('drop %s: %s (SQLSTATE %s)', v_index.index_name, sqlerrm, sqlstate);
        end;
    end loop;

    -- 2. Builds: the tenants agentmem.tenants_needing_index lists, biggest
    -- first, at most max_builds of them per run, each by
    -- agentmem.create_tenant_index (its HNSW index, for messages its exact
    -- index too, then measured). A function runs in a transaction, so these
    -- are plain CREATE INDEX: they block writes to the table while they build
    -- (bench/results/index_upkeep.md). A tenant of more than
    -- index_upkeep_max_build_rows rows is left, with the CREATE INDEX
    -- CONCURRENTLY statements for the DBA to run from psql.
    for v_tenant in
        select
            n.table_name, n.tenant_id, n.model, pg_catalog.max(n.row_count) as row_count,
            pg_catalog.array_agg(n.create_statement order by n.index_kind desc) as statements,
            pg_catalog.bool_and(n.index_kind = 'measure') as measure_only
        from agentmem.tenants_needing_index as n
        group by n.table_name, n.tenant_id, n.model
        order by pg_catalog.max(n.row_count) desc, n.table_name, n.tenant_id, n.model
    loop
        if v_tenant.measure_only then
            -- both indexes built by hand (concurrently), never measured
            begin
                perform agentmem.measure_tenant_index(tenant_id => v_tenant.tenant_id, model => v_tenant.model);
                v_measured := v_measured || v_tenant.tenant_id;
            exception when others then
                v_errors := v_errors || pg_catalog.format(
                    'measure %s: %s (SQLSTATE %s)', v_tenant.tenant_id, sqlerrm, sqlstate
                );
            end;
            continue;
        end if;
        if v_tenant.row_count > v_max_rows or v_built_tenants >= apply_index_upkeep.max_builds then
            v_left := v_left || pg_catalog.jsonb_build_object(
                'table_name', v_tenant.table_name, 'tenant_id', v_tenant.tenant_id, 'model', v_tenant.model,
                'row_count', v_tenant.row_count,
                'reason', case when v_tenant.row_count > v_max_rows then 'too big to build in a transaction'
                    else 'max_builds reached' end,
                'statements', pg_catalog.to_jsonb(v_tenant.statements)
            );
            continue;
        end if;
        v_built_tenants := v_built_tenants + 1;
        begin
            perform agentmem.create_tenant_index(
                tenant_id => v_tenant.tenant_id, model => v_tenant.model, table_name => v_tenant.table_name
            );
            v_built := v_built || array(
                select i.index_name from (values
                    (agentmem_private.tenant_index_name(v_tenant.table_name, v_tenant.tenant_id, v_tenant.model)),
                    (agentmem_private.exact_index_name(v_tenant.table_name, v_tenant.tenant_id, v_tenant.model))
                ) as i (index_name)
                where pg_catalog.to_regclass(pg_catalog.format('agentmem.%I', i.index_name)) is not null
            );
        exception when others then
            v_errors := v_errors || pg_catalog.format(
                'build %s of %s: %s (SQLSTATE %s)', v_tenant.table_name, v_tenant.tenant_id, sqlerrm, sqlstate
            );
        end;
    end loop;

    if v_citus_mode is not null then
        perform pg_catalog.set_config('citus.multi_shard_modify_mode', v_citus_mode, true);
    end if;
    insert into agentmem.job_runs as r (tenant_id, job, started_at, finished_at, rows_removed, total_removed, error)
    values (
        '', 'index_upkeep', v_started, pg_catalog.clock_timestamp(),
        pg_catalog.jsonb_build_object(
            'built', v_built, 'dropped', v_dropped, 'measured', v_measured, 'left', v_left
        ),
        pg_catalog.cardinality(v_dropped),
        nullif(pg_catalog.array_to_string(v_errors, '; '), '')
    )
    returning * into v_row;
    return v_row;
end
$$;

comment on function agentmem.apply_index_upkeep(int) is
'One run of the index upkeep job: build the own indexes of tenants big enough to pay for one, drop those no longer used.
Recorded in agentmem.job_runs (job ''index_upkeep''; rows_removed holds what it did: built and dropped index names, measured tenants, and left: the tenants it did not build, with why and their CREATE INDEX CONCURRENTLY statements; total_removed counts the indexes dropped; error lists what failed, which does not stop the rest).
Builds: the tenants agentmem.tenants_needing_index lists (more rows of a table and model than
agentmem.tenant_index_min_rows), biggest first, at most max_builds per run (0 to 1,000; default 1), each by
agentmem.create_tenant_index, so a plain CREATE INDEX that blocks writes to that table while it builds;
tenants of more than agentmem.index_upkeep_max_build_rows rows (default 50,000) are left for the DBA''s
concurrent statements. Indexes built by hand but never measured are measured.
Drops: the indexes agentmem.tenant_indexes says searches ignore (left invalid, an exact index of a tenant
past agentmem.exact_index_max_rows, a tenant that shrank under three quarters of
agentmem.tenant_index_min_rows).
Each lock waits at most 5 s (lock_timeout): a build or drop that would queue behind a long transaction
gives up until the next run. Safe to run too often: a concurrent run returns at once, a run with nothing
to do changes nothing. Runs as a superuser or BYPASSRLS role (AM041 otherwise); schedule it with
agentmem.schedule_index_upkeep or call it from any scheduler.
Called by: the DBA (granted to no role).';

create or replace function agentmem.schedule_index_upkeep(
    schedule text default '23 * * * *',
    max_builds int default 1
) returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    perform agentmem_private.check_range('max_builds', schedule_index_upkeep.max_builds, 0, 1000);
    return agentmem_private.cron_schedule(
        'agentmem-index-upkeep:' || pg_catalog.current_database(), schedule_index_upkeep.schedule,
        pg_catalog.format('agentmem.apply_index_upkeep(max_builds => %s)', schedule_index_upkeep.max_builds)
    );
end
$$;

comment on function agentmem.schedule_index_upkeep(text, int) is
'Register (or re-register) this database''s index upkeep job with pg_cron; returns pg_cron''s job id.
It runs "select agentmem.apply_index_upkeep(max_builds => N)" on the given cron schedule (default hourly, at 23 minutes past), as the calling role (a superuser or BYPASSRLS role).
Where pg_cron
lives as for agentmem.schedule_retention (through dblink from another database; AM050 with the statement
to run there, or without pg_cron, saying to call apply_index_upkeep from any scheduler). AM020 for a blank
schedule or max_builds outside 0 to 1,000.
Called by: the DBA (granted to no role).';

create or replace function agentmem.unschedule_index_upkeep()
returns boolean
language sql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select agentmem_private.cron_unschedule(
        'agentmem-index-upkeep:' || pg_catalog.current_database(), 'agentmem.apply_index_upkeep()'
    )
$$;

comment on function agentmem.unschedule_index_upkeep() is
'Remove this database''s index upkeep job from pg_cron; returns whether there was one.
AM050 as
agentmem.schedule_index_upkeep when pg_cron is out of reach.
Called by: the DBA (granted to no role).';

-- The vectors agentmem.index_later holds back from the index (pending_embedding)
-- moved into embedding, where the HNSW indexes take them: the job that pays
-- their index inserts away from the writers' calls.
create or replace function agentmem.index_pending_vectors(max_rows int default 100000)
returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text;
    v_left bigint := index_pending_vectors.max_rows;
    v_n bigint;
    v_conversations uuid[];
    v_messages uuid[];
    v_models text[];
    v_started timestamptz := pg_catalog.clock_timestamp();
begin
    perform agentmem_private.check_range('max_rows', index_pending_vectors.max_rows, 1, 100000000);
    perform agentmem_private.check_sees_every_tenant(
        'agentmem.index_pending_vectors', 'it indexes the pending vectors of every tenant',
        'Run it as a superuser or a role with BYPASSRLS, e.g. from pg_cron every minute (docs/tuning.md).'
    );
    -- Tenant by tenant (one shard at a time on Citus), at most v_left rows
    -- each. It never waits for a row another transaction holds (skip locked:
    -- a concurrent run, an erasure in flight, a writer of the conversation):
    -- the next run moves or resets what was skipped, and no lock order of
    -- its own can deadlock with theirs.
    for v_tenant in
        select distinct e.tenant_id from agentmem.message_embeddings as e where e.embedding is null order by e.tenant_id
    loop
        -- the rows, locked here first (an IN subquery with a limit and skip
        -- locked may be run again by the update's plan and move more)
        select pg_catalog.array_agg(p.message_id), pg_catalog.array_agg(p.model), pg_catalog.array_agg(distinct p.conversation_id)
        into v_messages, v_models, v_conversations
        from (
            select e.message_id, e.model, e.conversation_id from agentmem.message_embeddings as e
            where e.tenant_id = v_tenant and e.embedding is null
            limit v_left
            for update skip locked
        ) as p;
        update agentmem.message_embeddings as e
        set embedding = e.pending_embedding, pending_embedding = null
        from rows from (pg_catalog.unnest(v_messages), pg_catalog.unnest(v_models)) as p (message_id, model)
        where e.tenant_id = v_tenant and e.message_id = p.message_id and e.model = p.model and e.embedding is null;
        get diagnostics v_n = row_count;
        -- the conversations left with nothing pending count 0 again (one a
        -- writer holds is left as it is: its count stays a bound)
        v_conversations := array(
            select x.conversation_id from agentmem.conversations as x
            where x.tenant_id = v_tenant and x.conversation_id = any(v_conversations) and x.pending_vectors <> 0
            for update skip locked
        );
        update agentmem.conversations as c
        set pending_vectors = 0
        where
            c.tenant_id = v_tenant and c.conversation_id = any(v_conversations)
            and not exists (
                select from agentmem.message_embeddings as e
                where e.tenant_id = v_tenant and e.conversation_id = c.conversation_id and e.embedding is null
            );
        v_left := v_left - v_n;
        exit when v_left <= 0;
    end loop;
    -- Every run is recorded: agentmem.health shows the job index_pending and when it last ran.
    insert into agentmem.job_runs (tenant_id, job, started_at, finished_at, rows_removed, total_removed)
    values (
        '', 'index_pending', v_started, pg_catalog.clock_timestamp(),
        pg_catalog.jsonb_build_object('vectors_indexed', index_pending_vectors.max_rows - v_left), 0
    );
    return index_pending_vectors.max_rows - v_left;
end
$$;

comment on function agentmem.index_pending_vectors(int) is
'Move the message vectors that agentmem.index_later held back into the HNSW indexes; returns how many were moved.
At most max_rows (1 to 100,000,000; default 100,000) per call, tenant by tenant. Until then every search
reads a user''s pending vectors exactly, so nothing is missed; agentmem.index_later_max_rows bounds them per
conversation. Schedule it where index_later is on, e.g. every minute with pg_cron; each run is recorded in
agentmem.job_runs as job index_pending (rows_removed: vectors_indexed), which agentmem.health shows. Runs as
a superuser or BYPASSRLS role (AM041 otherwise) because it works across tenants.
Called by: the DBA (granted to no role).';

create or replace function agentmem.schedule_index_pending(
    schedule text default '* * * * *',
    max_rows int default 100000
) returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    perform agentmem_private.check_range('max_rows', schedule_index_pending.max_rows, 1, 100000000);
    -- The job runs index_pending_vectors as this role: one that cannot see
    -- every tenant would fail on every run, so it is refused now.
    perform agentmem_private.check_sees_every_tenant(
        'agentmem.schedule_index_pending', 'the job runs agentmem.index_pending_vectors as this role, across tenants',
        pg_catalog.format(
            'Ask a superuser to run "alter role %I bypassrls;", or to schedule it as themselves.', current_user
        )
    );
    return agentmem_private.cron_schedule(
        'agentmem-index-pending:' || pg_catalog.current_database(), schedule_index_pending.schedule,
        pg_catalog.format('agentmem.index_pending_vectors(max_rows => %s)', schedule_index_pending.max_rows)
    );
end
$$;

comment on function agentmem.schedule_index_pending(text, int) is
'Register (or re-register) this database''s job that moves pending vectors into the indexes with pg_cron; returns its job id.
It runs "select agentmem.index_pending_vectors(max_rows => N)" on the given cron schedule (default every
minute), as the calling role (a superuser or BYPASSRLS role: AM041 otherwise, the job would fail on every
run). Schedule it wherever agentmem.index_later is on. Where pg_cron lives as for
agentmem.schedule_retention (through dblink from another database; AM050 with the statement to run there,
or without pg_cron, saying to call index_pending_vectors from any scheduler). AM020 for a blank schedule or
max_rows outside 1 to 100,000,000.
Called by: the DBA (granted to no role).';

create or replace function agentmem.unschedule_index_pending()
returns boolean
language sql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select agentmem_private.cron_unschedule(
        'agentmem-index-pending:' || pg_catalog.current_database(), 'agentmem.index_pending_vectors()'
    )
$$;

comment on function agentmem.unschedule_index_pending() is
'Remove this database''s pending-vector job from pg_cron; returns whether there was one.
AM050 as agentmem.schedule_index_pending when pg_cron is out of reach.
Called by: the DBA (granted to no role).';
