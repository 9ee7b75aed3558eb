-- Lifecycle: pins and the use job. A pinned message, conversation or fact is
-- exempt from every automatic removal (retention) and from consolidation; the
-- uses searches and lookups append to agentmem.use_log are folded into
-- use_count / last_used_at by apply_use_log (also run by every apply_retention).
-- The functions the searches and retention call are in 06_use.sql.

create or replace function agentmem_private.pin_target(p_kind text, p_id uuid, p_pinned boolean)
returns timestamptz
language plpgsql
volatile
security invoker
set search_path from current
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_user text;
    v_at timestamptz;
begin
    if p_kind is null or p_kind not in ('message', 'conversation', 'fact') then
        raise exception 'unknown kind of item to pin: %', coalesce(left(p_kind, 100), 'NULL')
        using
            errcode = 'AM020',
            detail = 'Messages, conversations and facts can be pinned.',
            hint = 'Kinds: message, conversation, fact.';
    end if;
    -- The user first (no lock), then the user's lock shared, then the row's.
    v_user := case p_kind
        when 'message' then (select m.user_id from agentmem.messages as m where m.tenant_id = v_tenant and m.message_id = p_id)
        when 'conversation' then (
            select c.user_id from agentmem.conversations as c where c.tenant_id = v_tenant and c.conversation_id = p_id
        )
        else (select f.user_id from agentmem.facts as f where f.tenant_id = v_tenant and f.fact_id = p_id)
    end;
    if v_user is not null then
        perform agentmem_private.lock_user(v_tenant, v_user, false);
    end if;
    -- Pinning a pinned item keeps when it was first pinned.
    if p_kind = 'message' then
        update agentmem.messages as m
        set pinned_at = case when p_pinned then coalesce(m.pinned_at, pg_catalog.now()) end
        where m.tenant_id = v_tenant and m.message_id = p_id
        returning coalesce(m.pinned_at, '-infinity') into v_at;
    elsif p_kind = 'conversation' then
        update agentmem.conversations as c
        set pinned_at = case when p_pinned then coalesce(c.pinned_at, pg_catalog.now()) end
        where c.tenant_id = v_tenant and c.conversation_id = p_id
        returning coalesce(c.pinned_at, '-infinity') into v_at;
    else
        update agentmem.facts as f
        set pinned_at = case when p_pinned then coalesce(f.pinned_at, pg_catalog.now()) end
        where f.tenant_id = v_tenant and f.fact_id = p_id
        returning coalesce(f.pinned_at, '-infinity') into v_at;
    end if;
    if v_at is null then
        raise exception 'no such %: %', p_kind, coalesce(p_id::text, 'NULL')
        using
            errcode = 'AM030',
            detail = 'It is not in the current tenant.',
            hint = 'It may have been deleted, or belong to another tenant.';
    end if;
    return nullif(v_at, '-infinity');
end
$$;

comment on function agentmem_private.pin_target(text, uuid, boolean) is
'Internal: set (keeping an earlier time) or clear pinned_at of one message, conversation or fact of the current tenant, '
'under the user''s lock shared; AM020 for an unknown kind, AM030 for an item not in the tenant. Returns pinned_at.';

create or replace function agentmem.pin(kind text, id anycompatible)
returns timestamptz
language plpgsql
volatile
security definer
set search_path from current
as $$
begin
    return agentmem_private.pin_target(pin.kind, agentmem_private.uuid_arg('id', pin.id), true);
end
$$;

comment on function agentmem.pin(text, anycompatible) is
'Pin one message, conversation or fact of the current tenant, so that no automatic removal (retention by age, inactivity or budget) and no consolidation touches it; returns when it was pinned.
kind: message, conversation (pins every message of it, present and future) or fact; id: its id.
Pinning a pinned item keeps its first time. Erasure (forget_user, forget_conversation, delete_message,
delete_fact) still removes pinned items: a pin protects from the automatic jobs, never from the user.
AM020 for an unknown kind or an id that is not a UUID; AM030 for an item not in the current tenant.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.unpin(kind text, id anycompatible)
returns boolean
language plpgsql
volatile
security definer
set search_path from current
as $$
declare
    v_was boolean;
    v_id uuid := agentmem_private.uuid_arg('id', unpin.id);
    v_tenant text := agentmem.current_tenant();
begin
    v_was := case unpin.kind
        when 'message' then
            (select m.pinned_at is not null from agentmem.messages as m where m.tenant_id = v_tenant and m.message_id = v_id)
        when 'conversation' then (
            select c.pinned_at is not null from agentmem.conversations as c
            where c.tenant_id = v_tenant and c.conversation_id = v_id
        )
        when 'fact' then
            (select f.pinned_at is not null from agentmem.facts as f where f.tenant_id = v_tenant and f.fact_id = v_id)
    end;
    perform agentmem_private.pin_target(unpin.kind, v_id, false);
    return coalesce(v_was, false);
end
$$;

comment on function agentmem.unpin(text, anycompatible) is
'Unpin one message, conversation or fact of the current tenant, so that retention may remove it again; returns whether it was pinned.
kind: message, conversation or fact; id: its id. Unpinning a conversation leaves its messages pinned
one by one as they were. AM020 for an unknown kind or an id that is not a UUID; AM030 for an item not
in the current tenant.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.apply_use_log(batch_size int default 100000)
returns bigint
language plpgsql
volatile
security invoker
set search_path from current
as $$
declare
    v_started timestamptz := pg_catalog.clock_timestamp();
    v_folded bigint;
begin
    perform agentmem_private.check_range('batch_size', apply_use_log.batch_size, 1, 10000000);
    perform agentmem_private.check_sees_every_tenant(
        'agentmem.apply_use_log', 'it folds the uses of every tenant',
        'Run it as a superuser or a role with BYPASSRLS; every apply_retention run folds the uses too.'
    );
    v_folded := agentmem_private.fold_use_log(apply_use_log.batch_size);
    -- A run is recorded (agentmem.health shows the job use_log), unless a concurrent one held the log.
    if v_folded > 0 or pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended('agentmem.apply_use_log', 5)) then
        insert into agentmem.job_runs (tenant_id, job, started_at, finished_at, rows_removed, total_removed)
        values ('', 'use_log', v_started, pg_catalog.clock_timestamp(), pg_catalog.jsonb_build_object('uses_folded', v_folded), 0);
    end if;
    return v_folded;
end
$$;

comment on function agentmem.apply_use_log(int) is
'Fold the uses searches and lookups recorded (agentmem.use_log) into use_count and last_used_at of the messages, facts and cached answers they returned; returns how many uses were folded.
At most batch_size uses (1 to 10,000,000; default 100,000) per call, every tenant in turn, oldest first;
uses of items deleted since are dropped. One run at a time: a concurrent call returns 0 at once. Every
apply_retention run folds too (its rows_removed carries use_log: the uses folded), so the retention
schedule keeps the columns current; call this for fresher counts. Each run is recorded in
agentmem.job_runs as job use_log (rows_removed: uses_folded), so agentmem.health shows it (a call that
found another run holding the log records nothing). Runs as a superuser or BYPASSRLS role (AM041
otherwise) because it works across tenants.
Called by: the DBA (granted to no role).';

create or replace function agentmem_private.retention_due(
    p_table text, p_key text, p_time text, p_policy agentmem.retention_policies, p_scope text
) returns text
language plpgsql
immutable
security invoker
set search_path from current
as $$
declare
    v_limits text[] := '{}';
    v_due text;
begin
    if p_policy.max_age is not null then
        v_limits := v_limits || pg_catalog.format('t.%I < pg_catalog.now() - %L::interval', p_time, p_policy.max_age);
    end if;
    -- Inactive: no use for that long; a row never used counts from its time.
    if p_policy.max_inactive is not null then
        v_limits := v_limits || pg_catalog.format(
            'coalesce(t.last_used_at, t.%I) < pg_catalog.now() - %L::interval', p_time, p_policy.max_inactive
        );
    end if;
    if pg_catalog.cardinality(v_limits) > 0 then
        v_due := '(' || pg_catalog.array_to_string(v_limits, case p_policy.combine when 'or' then ' or ' else ' and ' end) || ')';
    end if;
    -- Over the budget: beyond the keep_per_user best of its user (pinned rows not counted),
    -- best = used or written most recently, then used most often.
    if p_policy.keep_per_user is not null then
        v_due := coalesce(v_due || ' or ', '') || pg_catalog.format(
            't.%1$I in (select b.k from (select x.%1$I as k, pg_catalog.row_number() over ('
            'partition by x.tenant_id, x.user_id order by coalesce(x.last_used_at, x.%2$I) desc, x.use_count desc, '
            'x.%1$I desc) as rn from agentmem.%3$I as x where %4$s%5$s) as b where b.rn > %6$s)',
            p_key, p_time, p_table, p_scope, agentmem_private.unpinned_check(p_table, 'x'), p_policy.keep_per_user
        );
    end if;
    return coalesce('(' || v_due || ')', 'false');
end
$$;

comment on function agentmem_private.retention_due(text, text, text, agentmem.retention_policies, text) is
'Internal: the SQL condition on a row t of p_table (key p_key, age measured from p_time) that a retention policy removes: '
'older than max_age, unused for max_inactive (last_used_at, else p_time), both or either (combine), or beyond '
'the keep_per_user best of its user among the rows p_scope (a condition on x) selects. ''false'' for a policy of no limit.';

create or replace function agentmem_private.put_lifecycle_policy(
    p_tenant text, p_kind text, p_max_inactive interval, p_keep_per_user int, p_combine text
) returns agentmem.retention_policies
language plpgsql
volatile
security invoker
set search_path from current
as $$
declare
    v_row agentmem.retention_policies;
begin
    if p_kind is null or p_kind not in ('messages', 'facts', 'cached_answers') then
        raise exception 'inactivity and budgets apply to messages, facts and cached_answers, not %', coalesce(left(p_kind, 100), 'NULL')
        using
            errcode = 'AM020',
            detail = 'Only these kinds record their use.',
            hint = 'Limit the other kinds by age with set_retention_policy.';
    end if;
    if p_max_inactive is not null and p_max_inactive <= interval '0' then
        raise exception 'max_inactive must be a positive interval, got %', p_max_inactive
        using errcode = 'AM020', hint = 'Pass NULL for no inactivity limit.';
    end if;
    if p_keep_per_user is not null then
        perform agentmem_private.check_range('keep_per_user', p_keep_per_user, 1, 100000000);
    end if;
    if p_combine is null or p_combine not in ('and', 'or') then
        raise exception 'combine must be and or or, got %', coalesce(left(p_combine, 100), 'NULL')
        using
            errcode = 'AM020',
            hint = 'and: a row goes when it is both too old and inactive; or: when it is either.';
    end if;
    -- A new tenant row starts from the installation default's max_age (a tenant row replaces the default).
    insert into agentmem.retention_policies as p (tenant_id, kind, max_age, max_inactive, keep_per_user, combine)
    values (
        p_tenant, p_kind,
        (select d.max_age from agentmem.retention_policies as d where d.tenant_id = '' and d.kind = p_kind and p_tenant <> ''),
        p_max_inactive, p_keep_per_user, p_combine
    )
    on conflict on constraint retention_policies_pkey do update
        set
            max_inactive = excluded.max_inactive, keep_per_user = excluded.keep_per_user,
            combine = excluded.combine, updated_at = excluded.updated_at
    returning * into v_row;
    return v_row;
end
$$;

comment on function agentmem_private.put_lifecycle_policy(text, text, interval, int, text) is
'Internal: check and write the inactivity limit, budget and combination of one retention policy (tenant '''' is the installation default).';

create or replace function agentmem.set_lifecycle_policy(
    kind text, max_inactive interval default null, keep_per_user int default null, combine text default 'and'
) returns agentmem.retention_policies
language plpgsql
volatile
security definer
set search_path from current
as $$
begin
    return agentmem_private.put_lifecycle_policy(
        agentmem.current_tenant(), set_lifecycle_policy.kind, set_lifecycle_policy.max_inactive,
        set_lifecycle_policy.keep_per_user, set_lifecycle_policy.combine
    );
end
$$;

comment on function agentmem.set_lifecycle_policy(text, interval, int, text) is
'Forget the current tenant''s messages, facts or cached answers by inactivity and by a per-user budget as well as by age: sets max_inactive, keep_per_user and combine of its retention policy for that kind.
max_inactive: a row not returned by any search or lookup for that long goes (its last use, else its
age''s time: created_at of messages and cached answers, updated_at of facts); combine ''and'' (default)
removes only rows both older than max_age and inactive (each limit that is set must hold), ''or'' rows
that are either. keep_per_user: keep at most that many rows per user (1 to 100,000,000; cached answers
without a user count as one user), the most recently used or written first, then the most used; the
rest go whatever their age. Pinned rows (agentmem.pin) are never removed and not counted. max_age stays
as set_retention_policy set it (a new row starts from the installation default''s). NULL max_inactive
and keep_per_user: no such limit. Applied by apply_retention; agentmem.preview_retention lists what a run
would remove. AM020 for another kind, a non-positive max_inactive, a budget out of range or another combine.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.set_default_lifecycle_policy(
    kind text, max_inactive interval default null, keep_per_user int default null, combine text default 'and'
) returns agentmem.retention_policies
language plpgsql
volatile
security invoker
set search_path from current
as $$
begin
    if not agentmem_private.bypasses_rls() then
        raise exception 'only a DBA may set the installation''s default lifecycle policy'
        using
            errcode = 'AM041',
            detail = 'The default applies to every tenant, so it needs a superuser or a BYPASSRLS role.',
            hint = 'Set a policy for the current tenant with agentmem.set_lifecycle_policy.';
    end if;
    return agentmem_private.put_lifecycle_policy(
        '', set_default_lifecycle_policy.kind, set_default_lifecycle_policy.max_inactive,
        set_default_lifecycle_policy.keep_per_user, set_default_lifecycle_policy.combine
    );
end
$$;

comment on function agentmem.set_default_lifecycle_policy(text, interval, int, text) is
'Set the inactivity limit, per-user budget and combination of the installation default policy of messages, facts or cached answers, for every tenant without a policy of its own (DBA only: AM041 otherwise).
Arguments and errors as agentmem.set_lifecycle_policy.
Called by: the DBA (granted to no role).';

create or replace function agentmem.preview_retention(batch_size int default 5000)
returns table (kind text, tenant_id text, would_remove bigint, ids text[])
language plpgsql
volatile
security invoker
set search_path from current
as $$
#variable_conflict use_column
declare
    v_found jsonb := '[]';
    v_kind text;
    v_spec text[];
begin
    perform agentmem_private.check_range('batch_size', preview_retention.batch_size, 1, 1000000);
    perform agentmem_private.check_sees_every_tenant(
        'agentmem.preview_retention', 'retention works across tenants',
        'Run it as a superuser or a role with BYPASSRLS.'
    );
    -- The real run's own steps (the fold of uses, then each kind's deletion, in its order), in a
    -- subtransaction rolled back at the end: what it lists is what apply_retention would remove now.
    begin
        perform pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('agentmem.apply_retention', 5));
        perform agentmem_private.fold_use_log(least(preview_retention.batch_size::bigint * 20, 10000000)::int);
        foreach v_spec slice 1 in array array[
            ['messages', 'messages', 'message_id', 'created_at'],
            ['cached_answers', 'cache_entries', 'entry_id', 'created_at'],
            ['hit_log', 'cache_hits', 'hit_id', 'created_at'],
            ['facts', 'facts', 'fact_id', 'updated_at'],
            ['erasure_log', 'erasure_log', 'erasure_id', 'erased_at'],
            ['job_runs', 'job_runs', 'run_id', 'finished_at']
        ] loop
            v_kind := v_spec[1];
            v_found := v_found || coalesce((
                select pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                    'kind', v_kind, 'tenant_id', g.tenant_id, 'ids', g.ids
                ))
                from (
                    select d.tenant_id, pg_catalog.array_agg(d.key order by d.key) as ids
                    from agentmem_private.retention_delete(v_kind, v_spec[2], v_spec[3], v_spec[4], preview_retention.batch_size) as d
                    group by d.tenant_id
                ) as g
            ), '[]');
        end loop;
        raise exception using errcode = 'AM099', message = 'preview_retention: rolled back';
    exception when sqlstate 'AM099' then
        null;
    end;
    return query
    select
        x ->> 'kind', x ->> 'tenant_id', pg_catalog.jsonb_array_length(x -> 'ids')::bigint,
        array(select pg_catalog.jsonb_array_elements_text(x -> 'ids'))
    from pg_catalog.jsonb_array_elements(v_found) as x
    order by 1, 2;
end
$$;

comment on function agentmem.preview_retention(int) is
'A dry run of apply_retention: what its policies would remove now, per kind and tenant (rows and their ids), removing nothing.
It runs the real run''s steps (the fold of uses, then each kind''s deletion with the same batch_size, the
same turn across tenants, pins exempt) in a subtransaction it rolls back, so an apply_retention with the
same batch_size run next, with nothing written in between, removes exactly these rows. Not listed: the
answer cache''s sweep of expired entries, and fact history that goes with its last source message.
batch_size 1 to 1,000,000 (AM020). Waits for a running apply_retention. Runs as a superuser or BYPASSRLS
role (AM041 otherwise).
Called by: the DBA (granted to no role).';

create or replace function agentmem.set_use_boost(weight real)
returns real
language plpgsql
volatile
security definer
set search_path from current
as $$
declare
    v_tenant text := agentmem.current_tenant();
begin
    if set_use_boost.weight is not null then
        perform agentmem_private.use_boost_weight(v_tenant, set_use_boost.weight);
    end if;
    insert into agentmem.tenant_settings as s (tenant_id, use_boost)
    values (v_tenant, nullif(set_use_boost.weight, 0))
    on conflict on constraint tenant_settings_pkey do update
        set use_boost = excluded.use_boost, updated_at = excluded.updated_at;
    return nullif(set_use_boost.weight, 0);
end
$$;

comment on function agentmem.set_use_boost(real) is
'Set the current tenant''s use boost: the weight with which search_messages and recall_facts favour memories used or created lately and used often, when a call passes no use_boost; returns it (NULL: off).
weight 0 to 0.5 (AM020 outside): each candidate''s score is multiplied by a factor between 1 and
1 + weight (agentmem_private.use_boost_factor: 0.5 for the last use, halved each 7 days; 0.3 for
creation, halved each 30 days; 0.2 for the count); NULL or 0 turns it off (the default), and results
are then exactly those without it. A factor, never a filter. Measure it on your data before turning it
on (bench/results/lifecycle.md).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';
