-- Retention: policies in a table, one idempotent maintenance call, pg_cron to
-- run it, and a health view.
--
-- Privileges. apply_retention deletes across all tenants, so it runs as a role
-- that bypasses row-level security: a superuser (the usual pg_cron job owner)
-- or a role with BYPASSRLS. It is security invoker on purpose: a security
-- definer function would run as the schema owner, who is subject to the forced
-- RLS policies like anyone else unless it is itself a superuser, so definer
-- rights would buy nothing but a wider attack surface. The application role may
-- not execute it (sql/90_grants.sql); it raises AM041 for a role that would
-- only see one tenant's rows.

create or replace function agentmem_private.put_retention_policy(p_tenant text, p_kind text, p_max_age interval)
returns agentmem.retention_policies
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_row agentmem.retention_policies;
begin
    if p_kind is null or p_kind not in ('messages', 'cached_answers', 'hit_log', 'facts', 'erasure_log', 'job_runs', 'access_log') then
        raise exception 'unknown kind of data: %', coalesce(pg_catalog.left(p_kind, 100), 'NULL')
        using
            errcode = 'AM020',
            hint = 'Kinds: messages, cached_answers, hit_log, facts, erasure_log, job_runs, access_log.';
    end if;
    if p_max_age is not null and p_max_age <= interval '0' then
        raise exception 'max_age must be a positive interval, got %', p_max_age
        using errcode = 'AM020', hint = 'Pass NULL to keep this kind of data forever.';
    end if;
    insert into agentmem.retention_policies as p (tenant_id, kind, max_age)
    values (p_tenant, p_kind, p_max_age)
    on conflict on constraint retention_policies_pkey do update
        set max_age = excluded.max_age, updated_at = excluded.updated_at
    returning * into v_row;
    return v_row;
end
$$;

comment on function agentmem_private.put_retention_policy(text, text, interval) is
'Internal: check and write one retention policy row (tenant '''' is the installation default).';

create or replace function agentmem.set_retention_policy(kind text, max_age interval)
returns agentmem.retention_policies
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    return agentmem_private.put_retention_policy(agentmem.current_tenant(), kind, max_age);
end
$$;

comment on function agentmem.set_retention_policy(text, interval) is
'Keep one kind of the current tenant''s data (messages, cached_answers, hit_log, facts, erasure_log, job_runs, access_log) at most max_age; it overrides the installation default (agentmem.set_default_retention_policy).
max_age NULL keeps that kind forever. Raises AM020 for an unknown kind or a non-positive age.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.clear_retention_policy(kind text)
returns boolean
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    delete from agentmem.retention_policies as p
    where p.tenant_id = (select agentmem.current_tenant()) and p.kind = clear_retention_policy.kind;
    return found;
end
$$;

comment on function agentmem.clear_retention_policy(text) is
'Remove the current tenant''s policy for one kind, so the installation default applies again.
Returns whether a policy was removed.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.set_default_retention_policy(kind text, max_age interval)
returns agentmem.retention_policies
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if not agentmem_private.bypasses_rls() then
        raise exception 'only a DBA may set the installation''s default retention policy'
        using
            errcode = 'AM041',
            detail = 'The default applies to every tenant, so it needs a superuser or a BYPASSRLS role.',
            hint = 'Set a policy for the current tenant with agentmem.set_retention_policy.';
    end if;
    return agentmem_private.put_retention_policy('', kind, max_age);
end
$$;

comment on function agentmem.set_default_retention_policy(text, interval) is
'Keep one kind of data at most max_age in every tenant without a policy of its own (DBA only).
It needs a superuser or BYPASSRLS role (AM041 otherwise) and is not granted to agentmem_app.
max_age NULL keeps
it forever. Raises AM020 for an unknown kind or a non-positive age.
Called by: the DBA (granted to no role).';

create or replace function agentmem.clear_default_retention_policy(kind text)
returns boolean
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if not agentmem_private.bypasses_rls() then
        raise exception 'only a DBA may clear the installation''s default retention policy'
        using errcode = 'AM041', hint = 'Clear the current tenant''s policy with agentmem.clear_retention_policy.';
    end if;
    delete from agentmem.retention_policies as p
    where p.tenant_id = '' and p.kind = clear_default_retention_policy.kind;
    return found;
end
$$;

comment on function agentmem.clear_default_retention_policy(text) is
'Remove the installation default policy for one kind (DBA only, AM041 otherwise; not granted to agentmem_app).
Returns whether a policy was removed.
Called by: the DBA (granted to no role).';

-- Over 100 lines: one statement per pass, built once: tenants with a policy of their own, then the
-- default's tenants in turn from the cursor (fairness), with pins exempt and each row's detail returned.
create or replace function agentmem_private.retention_delete(
    p_kind text, p_table text, p_key text, p_time text, p_batch int
) returns table (tenant_id text, key text, detail text)
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_left int := p_batch;
    v_done int;
    v_default agentmem.retention_policies;
    v_own text[];
    v_policy agentmem.retention_policies;
    v_sql text;
    v_cursor text;
    v_last text;
    v_pass int;
    v_row record;
    -- Citus refuses FOR UPDATE in a query over many shards; there the
    -- advisory lock of apply_retention alone keeps runs apart.
    v_lock text := case when agentmem.is_distributed() then '' else ' for update of t skip locked' end;
begin
    -- One statement per policy, so the time column's index serves each cutoff.
    v_sql := pg_catalog.format(
        'with victim as ('
        '  select t.tenant_id, t.%1$I as k from agentmem.%2$I as t'
        '  where t.tenant_id = any($1) and %%s%6$s'
        '  order by t.%3$I limit $3%5$s'
        ') '
        'delete from agentmem.%2$I as t using victim as v '
        'where t.tenant_id = v.tenant_id and t.%1$I = v.k '
        'returning t.tenant_id, t.%1$I::text, %4$s',
        p_key, p_table, p_time,
        case p_table when 'messages' then 't.conversation_id::text || t.content' else 'null::text' end, v_lock,
        -- Pinned rows are never removed (agentmem_private.unpinned_check).
        agentmem_private.unpinned_check(p_table, 't')
    );
    -- Fair across tenants: tenants with a policy of their own are served in
    -- turn, starting after the last one the previous run served (the cursor
    -- of agentmem.retention_cursors), so a tenant with more expired rows than
    -- the batch takes one run's batch and the next run serves those after it.
    -- Every tenant's expired rows go within as many runs as there are tenants
    -- with expired rows, whatever the others hold.
    -- With an installation default as well, the tenants with a policy of
    -- their own get half the batch first, so neither group starves the other.
    select p.* into v_default from agentmem.retention_policies as p where p.tenant_id = '' and p.kind = p_kind;
    if num_nonnulls(v_default.max_age, v_default.max_inactive, v_default.keep_per_user) = 0 then
        v_default := null;
    end if;
    if v_default.kind is not null then
        v_left := greatest(p_batch / 2, 1);
    end if;
    v_cursor := coalesce((select c.last_tenant from agentmem.retention_cursors as c
                          where c.kind = p_kind and c.policy = 'own'), '');
    for v_policy in
        select p.* from agentmem.retention_policies as p
        where p.kind = p_kind and p.tenant_id <> '' and num_nonnulls(p.max_age, p.max_inactive, p.keep_per_user) > 0
        order by p.tenant_id <= v_cursor, p.tenant_id
    loop
        exit when v_left <= 0;
        -- What is due: age, inactivity, the budget (agentmem_private.retention_due).
        return query execute pg_catalog.format(v_sql, agentmem_private.retention_due(
            p_table, p_key, p_time, v_policy, 'x.tenant_id = any($1)'
        )) using array[v_policy.tenant_id], v_policy.max_age, v_left;
        get diagnostics v_done = row_count;
        v_left := v_left - v_done;
        v_last := v_policy.tenant_id;
    end loop;
    if v_last is not null then
        insert into agentmem.retention_cursors as c (kind, policy, last_tenant)
        values (p_kind, 'own', v_last)
        on conflict on constraint retention_cursors_pkey do update
            set last_tenant = excluded.last_tenant, updated_at = excluded.updated_at;
    end if;
    if v_default.kind is null then
        return;
    end if;
    v_left := p_batch - (greatest(p_batch / 2, 1) - v_left);
    if v_left <= 0 then
        return;
    end if;
    v_own := array(select p.tenant_id from agentmem.retention_policies as p where p.kind = p_kind and p.tenant_id <> '');
    -- The tenants under the default, in turn as well: one tenant at a time in
    -- tenant order from after the cursor (a tenant's oldest rows first), then
    -- from the start.
    v_cursor := coalesce((select c.last_tenant from agentmem.retention_cursors as c
                          where c.kind = p_kind and c.policy = 'default'), '');
    v_last := null;
    for v_pass in 1..2 loop
        exit when v_left <= 0;
        for v_row in execute pg_catalog.format(
            'with victim as ('
            '  select t.tenant_id, t.%1$I as k from agentmem.%2$I as t'
            '  where t.tenant_id <> all($1) and %8$s and t.tenant_id %6$s $4%7$s'
            '  order by t.tenant_id, t.%3$I limit $3%5$s'
            ') '
            'delete from agentmem.%2$I as t using victim as v '
            'where t.tenant_id = v.tenant_id and t.%1$I = v.k '
            'returning t.tenant_id as tenant, t.%1$I::text as k, %4$s as d',
            p_key, p_table, p_time,
            case p_table when 'messages' then 't.conversation_id::text || t.content' else 'null::text' end, v_lock,
            case v_pass when 1 then '>' else '<=' end,
            agentmem_private.unpinned_check(p_table, 't'),
            agentmem_private.retention_due(p_table, p_key, p_time, v_default, 'x.tenant_id <> all($1)')
        ) using v_own, v_default.max_age, v_left, v_cursor loop
            tenant_id := v_row.tenant;
            key := v_row.k;
            detail := v_row.d;
            return next;
            v_left := v_left - 1;
            -- The last tenant served: the greatest of this pass.
            v_last := case when v_pass = 2 and v_last > v_cursor then v_row.tenant else greatest(v_last, v_row.tenant) end;
        end loop;
    end loop;
    if v_last is not null then
        insert into agentmem.retention_cursors as c (kind, policy, last_tenant)
        values (p_kind, 'default', v_last)
        on conflict on constraint retention_cursors_pkey do update
            set last_tenant = excluded.last_tenant, updated_at = excluded.updated_at;
    end if;
end
$$;

comment on function agentmem_private.retention_delete(text, text, text, text, int) is
'Internal: delete at most p_batch rows of agentmem.p_table older than their tenant''s policy '
'for p_kind (or the default), skipping rows locked by others, in turn across tenants: tenants with a '
'policy of their own (half the batch when there is a default) and those under the default each from '
'after the last tenant the previous run served (agentmem.retention_cursors), so every tenant''s '
'expired rows go within as many runs as tenants have expired rows. Returns what it deleted (detail: '
'for messages, the conversation_id (36 characters) followed by the content; NULL otherwise: '
'Citus allows only immutable functions in RETURNING).';

create or replace function agentmem_private.retention_kind(p_kind text, p_batch int)
returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_count bigint := 0;
    v_tenant text;
    v_ids uuid[];
    v_texts text[];
    v_user text;
    v_conversation uuid;
    v_docs tsvector[];
    v_config regconfig := agentmem_private.text_search_config();
begin
    case p_kind
        when 'messages' then
            -- Their embeddings and retrieval records go by cascade; fact history
            -- whose every source expired goes too, and facts lose the dangling
            -- links (facts themselves have their own policy).
            -- Their embedding-cache rows go as well.
            for v_tenant, v_ids, v_texts in
                with gone as (
                    select g.tenant_id, g.key, g.detail
                    from agentmem_private.retention_delete('messages', 'messages', 'message_id', 'created_at', p_batch) as g
                )
                select gone.tenant_id, pg_catalog.array_agg(gone.key::uuid), pg_catalog.array_agg(gone.detail)
                from gone group by gone.tenant_id
            loop
                v_count := v_count + pg_catalog.cardinality(v_ids);
                perform agentmem_private.prune_fact_sources(v_tenant, v_ids, false);
                perform agentmem_private.forget_text_hashes(
                    v_tenant, array(select pg_catalog.substr(d, 37) from pg_catalog.unnest(v_texts) as d)
                );
                -- The BM25 statistics lose the messages' words (their content_tsv,
                -- recomputed from the content as the column is), per conversation.
                for v_conversation, v_docs in
                    select pg_catalog.left(d, 36)::uuid, pg_catalog.array_agg(pg_catalog.to_tsvector(v_config, pg_catalog.substr(d, 37)))
                    from pg_catalog.unnest(v_texts) as d group by 1 order by 1
                loop
                    select c.user_id into v_user from agentmem.conversations as c
                    where c.tenant_id = v_tenant and c.conversation_id = v_conversation;
                    if found then
                        perform agentmem_private.count_terms(v_tenant, v_user, v_conversation, v_docs, -1);
                    end if;
                end loop;
            end loop;
        when 'cached_answers' then
            -- cache_hits.entry_id of the removed entries: set null here (no
            -- foreign key does it).
            for v_tenant, v_ids in
                select g.tenant_id, pg_catalog.array_agg(g.key::uuid)
                from agentmem_private.retention_delete('cached_answers', 'cache_entries', 'entry_id', 'created_at', p_batch) as g
                group by g.tenant_id
            loop
                v_count := v_count + pg_catalog.cardinality(v_ids);
                perform agentmem_private.unlink_cache_hits(v_tenant, v_ids);
            end loop;
        when 'hit_log' then
            select pg_catalog.count(*) into v_count
            from agentmem_private.retention_delete('hit_log', 'cache_hits', 'hit_id', 'created_at', p_batch);
        when 'facts' then
            select pg_catalog.count(*) into v_count
            from agentmem_private.retention_delete('facts', 'facts', 'fact_id', 'updated_at', p_batch);
        when 'erasure_log' then
            select pg_catalog.count(*) into v_count
            from agentmem_private.retention_delete('erasure_log', 'erasure_log', 'erasure_id', 'erased_at', p_batch);
        when 'job_runs' then
            select pg_catalog.count(*) into v_count
            from agentmem_private.retention_delete('job_runs', 'job_runs', 'run_id', 'finished_at', p_batch);
        when 'access_log' then
            select pg_catalog.count(*) into v_count
            from agentmem_private.retention_delete('access_log', 'access_log', 'access_id', 'logged_at', p_batch);
    end case;
    return v_count;
end
$$;

comment on function agentmem_private.retention_kind(text, int) is
'Internal: apply the retention policies of one kind of data, at most p_batch rows. Returns rows removed.';

create or replace function agentmem.apply_retention(batch_size int default 5000)
returns agentmem.job_runs
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_started timestamptz := pg_catalog.clock_timestamp();
    v_kind text;
    v_count bigint;
    v_n bigint;
    v_tenant text;
    v_removed jsonb := '{}';
    v_total bigint := 0;
    v_errors text[] := '{}';
    v_row agentmem.job_runs;
begin
    perform agentmem_private.check_range('batch_size', apply_retention.batch_size, 1, 1000000);
    perform agentmem_private.check_sees_every_tenant(
        'agentmem.apply_retention', 'retention deletes across tenants',
        'Run it (or schedule it with agentmem.schedule_retention) as a superuser or a role with BYPASSRLS.'
    );
    -- Safe to run too often: a second concurrent run returns at once.
    if not pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended('agentmem.apply_retention', 5)) then
        v_row.job := 'retention';
        v_row.started_at := v_started;
        v_row.finished_at := pg_catalog.clock_timestamp();
        v_row.rows_removed := '{}';
        v_row.total_removed := 0;
        v_row.error := 'skipped: another apply_retention run is in progress';
        return v_row;
    end if;
    -- Uses first (agentmem_private.fold_use_log), so that what was used counts as used.
    begin
        v_removed := v_removed || pg_catalog.jsonb_build_object(
            'use_log', agentmem_private.fold_use_log(least(apply_retention.batch_size::bigint * 20, 10000000)::int)
        );
    exception when others then
        v_errors := v_errors || pg_catalog.format('use_log: %s (SQLSTATE %s)', sqlerrm, sqlstate);
    end;
    foreach v_kind in array array['messages', 'cached_answers', 'hit_log', 'facts', 'erasure_log', 'job_runs', 'access_log'] loop
        begin
            v_count := agentmem_private.retention_kind(v_kind, apply_retention.batch_size);
            v_removed := v_removed || pg_catalog.jsonb_build_object(v_kind, v_count);
            v_total := v_total + v_count;
        exception when others then
            v_errors := v_errors || pg_catalog.format('%s: %s (SQLSTATE %s)', v_kind, sqlerrm, sqlstate);
        end;
    end loop;
    -- The answer cache's own sweep (expired and superseded entries) runs in the
    -- same job, once per tenant that has something to sweep, as this role (not
    -- through the security definer agentmem.sweep_cache: on Citus one
    -- transaction may not modify a shard as two roles).
    begin
        v_count := 0;
        for v_tenant in
            select distinct e.tenant_id
            from agentmem.cache_entries as e
            left join agentmem.corpus_versions as c on e.tenant_id = c.tenant_id
            where e.expires_at <= pg_catalog.now() or e.corpus_version < c.version
        loop
            exit when v_count >= apply_retention.batch_size;
            v_n := agentmem_private.sweep_cache_of(v_tenant, least(apply_retention.batch_size - v_count, 100000)::int);
            v_count := v_count + v_n;
        end loop;
        v_removed := v_removed || pg_catalog.jsonb_build_object('cache_sweep', v_count);
        v_total := v_total + v_count;
    exception when others then
        v_errors := v_errors || pg_catalog.format('cache_sweep: %s (SQLSTATE %s)', sqlerrm, sqlstate);
    end;
    insert into agentmem.job_runs as r (tenant_id, job, started_at, finished_at, rows_removed, total_removed, error)
    values (
        '', 'retention', v_started, pg_catalog.clock_timestamp(), v_removed, v_total,
        nullif(pg_catalog.array_to_string(v_errors, '; '), '')
    )
    returning * into v_row;
    return v_row;
end
$$;

comment on function agentmem.apply_retention(int) is
'Delete what the retention policies say is too old, at most batch_size rows per kind per call, then sweep the answer cache.
Oldest first.
Safe to run too often (a concurrent run returns at once;
a run with nothing to do removes nothing) and records each run in agentmem.job_runs (rows removed per
kind, duration, errors: a failing kind does not stop the others). Messages go with their embeddings
and retrieval records (by cascade);
fact history whose sources all expired goes with them. Pinned rows (agentmem.pin) are never removed;
a policy may add inactivity and a per-user budget (agentmem.set_lifecycle_policy); the uses searches
recorded are folded first (rows_removed.use_log: uses folded), and agentmem.preview_retention lists what
a run would remove. Runs as a superuser or BYPASSRLS role (AM041
otherwise) because it works across tenants; schedule it with agentmem.schedule_retention or call it
from any scheduler.
Called by: the DBA (granted to no role).';
