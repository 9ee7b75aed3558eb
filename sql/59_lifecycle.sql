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
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_user text;
    v_at timestamptz;
    v_now timestamptz;
begin
    if p_kind is null or p_kind not in ('message', 'conversation', 'fact') then
        raise exception 'unknown kind of item to pin: %', coalesce(pg_catalog.left(p_kind, 100), 'NULL')
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
    -- Pinning a pinned item keeps when it was first pinned. The time is a value, not now() in the
    -- statement: Citus refuses a non-immutable function inside CASE or COALESCE sent to the shards.
    v_now := case when p_pinned then pg_catalog.now() end;
    if p_kind = 'message' then
        update agentmem.messages as m
        set pinned_at = case when v_now is not null then coalesce(m.pinned_at, v_now) end
        where m.tenant_id = v_tenant and m.message_id = p_id
        returning coalesce(m.pinned_at, '-infinity') into v_at;
    elsif p_kind = 'conversation' then
        update agentmem.conversations as c
        set pinned_at = case when v_now is not null then coalesce(c.pinned_at, v_now) end
        where c.tenant_id = v_tenant and c.conversation_id = p_id
        returning coalesce(c.pinned_at, '-infinity') into v_at;
    else
        update agentmem.facts as f
        set pinned_at = case when v_now is not null then coalesce(f.pinned_at, v_now) end
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
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    return agentmem_private.pin_target(pin.kind, agentmem_private.uuid_arg('id', pin.id), true);
end
$$;

comment on function agentmem.pin(text, anycompatible) is
'Pin one message, conversation or fact of the current tenant against every automatic removal and consolidation; returns when it was pinned.
No retention (by age, inactivity or budget) and no consolidation touches a pinned item.
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
set search_path = pg_catalog, agentmem, pg_temp
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
set search_path = pg_catalog, agentmem, pg_temp
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
'Fold the recorded uses (agentmem.use_log) into use_count and last_used_at of messages, facts and cached answers; returns how many uses were folded.
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
set search_path = pg_catalog, agentmem, pg_temp
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
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_row agentmem.retention_policies;
    v_default_age interval;
begin
    if p_kind is null or p_kind not in ('messages', 'facts', 'cached_answers') then
        raise exception 'inactivity and budgets apply to messages, facts and cached_answers, not %', coalesce(pg_catalog.left(p_kind, 100), 'NULL')
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
        raise exception 'combine must be and or or, got %', coalesce(pg_catalog.left(p_combine, 100), 'NULL')
        using
            errcode = 'AM020',
            hint = 'and: a row goes when it is both too old and inactive; or: when it is either.';
    end if;
    -- A new tenant row starts from the installation default's max_age (a tenant row replaces the default),
    -- read first: Citus refuses a subquery inside INSERT ... VALUES.
    if p_tenant <> '' then
        select d.max_age into v_default_age from agentmem.retention_policies as d
        where d.tenant_id = '' and d.kind = p_kind;
    end if;
    insert into agentmem.retention_policies as p (tenant_id, kind, max_age, max_inactive, keep_per_user, combine)
    values (p_tenant, p_kind, v_default_age, p_max_inactive, p_keep_per_user, p_combine)
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
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    return agentmem_private.put_lifecycle_policy(
        agentmem.current_tenant(), set_lifecycle_policy.kind, set_lifecycle_policy.max_inactive,
        set_lifecycle_policy.keep_per_user, set_lifecycle_policy.combine
    );
end
$$;

comment on function agentmem.set_lifecycle_policy(text, interval, int, text) is
'Forget the current tenant''s messages, facts or cached answers by inactivity and a per-user budget as well as by age.
Sets max_inactive, keep_per_user and combine of its retention policy for that kind.
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
set search_path = pg_catalog, agentmem, pg_temp
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
'Set the inactivity limit, per-user budget and combination of the installation''s default policy of one kind of data.
It applies to every tenant without a policy of its own; DBA only (AM041 otherwise).
Arguments and errors as agentmem.set_lifecycle_policy.
Called by: the DBA (granted to no role).';

create or replace function agentmem.set_use_boost(weight real)
returns real
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
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
'Set the current tenant''s use boost, the weight given to memories used or created lately and used often; returns it (NULL: off).
search_messages and recall_facts apply it when a call passes no use_boost.
weight 0 to 0.5 (AM020 outside): each candidate''s score is multiplied by a factor between 1 and
1 + weight (agentmem_private.use_boost_factor: 0.5 for the last use, halved each 7 days; 0.3 for
creation, halved each 30 days; 0.2 for the count); NULL or 0 turns it off (the default), and results
are then exactly those without it. A factor, never a filter. Measure it on your data before turning it
on (bench/results/lifecycle.md).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem_private.normalised_subject(p_subject text)
returns text
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select pg_catalog.btrim(pg_catalog.regexp_replace(pg_catalog.lower(p_subject), '[^[:alnum:]]+', ' ', 'g'))
$$;

comment on function agentmem_private.normalised_subject(text) is
'Internal: a subject as consolidation compares it: lower case, every run of other characters than letters and digits one space, trimmed.';

create or replace function agentmem_private.word_jaccard(p_a text, p_b text)
returns float8
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    with a as (
        select distinct w from pg_catalog.regexp_split_to_table(pg_catalog.lower(p_a), '[^[:alnum:]]+') as w where w <> ''
    ),

    b as (
        select distinct w from pg_catalog.regexp_split_to_table(pg_catalog.lower(p_b), '[^[:alnum:]]+') as w where w <> ''
    )

    select coalesce(
        (select pg_catalog.count(*) from a inner join b using (w))::float8
        / nullif((select pg_catalog.count(*) from (select w from a union select w from b) as u), 0),
        0
    )
$$;

comment on function agentmem_private.word_jaccard(text, text) is
'Internal: the Jaccard similarity of two texts'' sets of words (lower case, letters and digits): 1 for the same words.';

create or replace function agentmem_private.consolidate_user_facts(
    p_tenant text, p_user text, p_run uuid, p_dry boolean, p_min_similarity real, p_max int
) returns int
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_pair record;
    v_done uuid[] := '{}';
    v_old agentmem.facts;
    v_new agentmem.facts;
    v_history bigint;
    v_n int := 0;
begin
    -- Writers of the user wait (and the user's erasure waits for this run).
    if not p_dry then
        perform agentmem_private.lock_user(p_tenant, p_user, false);
    end if;
    -- Pairs of the user's current facts in one model, neither pinned, the older without a history of
    -- its own: the same subject once normalised and a cosine similarity of at least p_min_similarity,
    -- or the same words (Jaccard >= 0.9). Best first; each fact in one change per run.
    for v_pair in
        select
            o.fact_id as older, n.fact_id as newer,
            (1 - agentmem_private.cosine_distance(o.embedding, n.embedding))::real as similarity,
            case
                when agentmem_private.normalised_subject(o.subject) = agentmem_private.normalised_subject(n.subject)
                    and 1 - agentmem_private.cosine_distance(o.embedding, n.embedding) >= p_min_similarity then 'same subject'
                else 'same text'
            end as reason
        from agentmem.facts as o
        inner join agentmem.facts as n
            on
                n.tenant_id = o.tenant_id and n.user_id = o.user_id and n.model = o.model
                and n.fact_id <> o.fact_id
                and (n.updated_at, n.created_at, n.fact_id) > (o.updated_at, o.created_at, o.fact_id)
        where
            o.tenant_id = p_tenant and o.user_id = p_user
            and o.pinned_at is null and n.pinned_at is null and o.valid_to is null and n.valid_to is null
            and o.embedding is not null and n.embedding is not null
            and not exists (select from agentmem.fact_history as h where h.tenant_id = p_tenant and h.fact_id = o.fact_id)
            and (
                (
                    agentmem_private.normalised_subject(o.subject) = agentmem_private.normalised_subject(n.subject)
                    and 1 - agentmem_private.cosine_distance(o.embedding, n.embedding) >= p_min_similarity
                )
                or agentmem_private.word_jaccard(o.fact, n.fact) >= 0.9
            )
        order by 3 desc, o.fact_id, n.fact_id
    loop
        exit when v_n >= p_max;
        continue when v_pair.older = any(v_done) or v_pair.newer = any(v_done);
        v_done := v_done || v_pair.older || v_pair.newer;
        if p_dry then
            insert into agentmem.consolidation_changes (
                tenant_id, run_id, older_fact_id, newer_fact_id, user_id, similarity, reason
            ) values (p_tenant, p_run, v_pair.older, v_pair.newer, p_user, v_pair.similarity, v_pair.reason);
            v_n := v_n + 1;
            continue;
        end if;
        -- Both rows locked, then checked again: a concurrent writer's change wins, the pair waits.
        select f.* into v_old from agentmem.facts as f
        where f.tenant_id = p_tenant and f.fact_id = v_pair.older and f.pinned_at is null and f.valid_to is null
        for update;
        select f.* into v_new from agentmem.facts as f
        where f.tenant_id = p_tenant and f.fact_id = v_pair.newer and f.pinned_at is null and f.valid_to is null
        for update;
        continue when v_old.fact_id is null or v_new.fact_id is null
            or exists (select from agentmem.fact_history as h where h.tenant_id = p_tenant and h.fact_id = v_old.fact_id);
        insert into agentmem.fact_history as h (
            tenant_id, fact_id, user_id, subject, fact, source_message_ids, valid_from, valid_to, recorded_at,
            replaced_at, change
        ) values (
            p_tenant, v_new.fact_id, p_user, v_old.subject, v_old.fact, v_old.source_message_ids, v_old.valid_from,
            greatest(pg_catalog.now(), v_old.valid_from + interval '1 microsecond'), v_old.updated_at,
            pg_catalog.now(), 'merged'
        )
        returning h.history_id into v_history;
        update agentmem.facts as f
        set source_message_ids = array(
            select distinct s from pg_catalog.unnest(v_new.source_message_ids || v_old.source_message_ids) as s order by s
        )
        where f.tenant_id = p_tenant and f.fact_id = v_new.fact_id;
        insert into agentmem.consolidation_changes (
            tenant_id, run_id, older_fact_id, newer_fact_id, user_id, similarity, reason, older_row,
            newer_sources_before, history_id
        ) values (
            p_tenant, p_run, v_old.fact_id, v_new.fact_id, p_user, v_pair.similarity, v_pair.reason,
            pg_catalog.to_jsonb(v_old), v_new.source_message_ids, v_history
        );
        delete from agentmem.facts as f where f.tenant_id = p_tenant and f.fact_id = v_old.fact_id;
        v_n := v_n + 1;
        v_old := null;
        v_new := null;
    end loop;
    return v_n;
end
$$;

comment on function agentmem_private.consolidate_user_facts(text, text, uuid, boolean, real, int) is
'Internal: merge at most p_max near-duplicate facts of one user (same normalised subject and a cosine of at '
'least p_min_similarity, or the same words) into their newer twin: the older goes into the newer one''s '
'history (change merged, its period closed now), the newer one''s sources become the union, each change '
'recorded in consolidation_changes under p_run. Pinned facts, facts whose period is closed and older facts '
'with a history of their own are left alone. A dry run only records the pairs. Returns the changes.';

create or replace function agentmem_private.consolidate_tenant(
    p_tenant text, p_user text, p_dry boolean, p_min_similarity real, p_max int
) returns uuid
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_run uuid;
    v_min real;
    v_max int;
    v_user text;
    v_n int := 0;
begin
    select s.consolidate_min_similarity, s.consolidate_max_changes into v_min, v_max
    from agentmem.tenant_settings as s where s.tenant_id = p_tenant;
    v_min := coalesce(p_min_similarity, v_min, 0.95);
    v_max := coalesce(p_max, v_max, 100);
    if v_min = 'NaN' or v_min < 0.8 or v_min > 1 then
        raise exception 'min_similarity must be between 0.8 and 1, got %', v_min
        using errcode = 'AM020', hint = 'Near-duplicates are very similar: 0.95 is the default.';
    end if;
    perform agentmem_private.check_range('max_changes', v_max, 1, 10000);
    insert into agentmem.consolidation_runs (tenant_id, user_id, dry_run, min_similarity, max_changes)
    values (p_tenant, p_user, p_dry, v_min, v_max)
    returning run_id into v_run;
    for v_user in
        select distinct f.user_id from agentmem.facts as f
        where f.tenant_id = p_tenant and (p_user is null or f.user_id = p_user)
        order by f.user_id
    loop
        exit when v_n >= v_max;
        v_n := v_n + agentmem_private.consolidate_user_facts(p_tenant, v_user, v_run, p_dry, v_min, v_max - v_n);
    end loop;
    update agentmem.consolidation_runs as r set changes = v_n where r.tenant_id = p_tenant and r.run_id = v_run;
    return v_run;
end
$$;

comment on function agentmem_private.consolidate_tenant(text, text, boolean, real, int) is
'Internal: one consolidation run over one user (or every user) of a tenant within its bounds (the '
'arguments, else tenant_settings, else 0.95 and 100); records the run; returns its id.';

create or replace function agentmem.consolidate_facts(
    user_id text default null, dry_run boolean default false, min_similarity real default null,
    max_changes int default null
) returns table (
    run_id uuid, older_fact_id uuid, newer_fact_id uuid, similarity real, reason text, older_fact text, newer_fact text
)
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_run uuid;
begin
    if consolidate_facts.user_id is not null then
        perform agentmem_private.check_user_id(consolidate_facts.user_id);
    end if;
    if consolidate_facts.dry_run is null then
        raise exception 'dry_run must be true or false' using errcode = 'AM020';
    end if;
    v_run := agentmem_private.consolidate_tenant(
        v_tenant, consolidate_facts.user_id, consolidate_facts.dry_run, consolidate_facts.min_similarity,
        consolidate_facts.max_changes
    );
    return query
    select
        c.run_id, c.older_fact_id, c.newer_fact_id, c.similarity, c.reason,
        coalesce(c.older_row ->> 'fact', o.fact), n.fact
    from agentmem.consolidation_changes as c
    left join agentmem.facts as o on o.tenant_id = v_tenant and o.fact_id = c.older_fact_id
    left join agentmem.facts as n on n.tenant_id = v_tenant and n.fact_id = c.newer_fact_id
    where c.tenant_id = v_tenant and c.run_id = v_run
    order by c.similarity desc, c.older_fact_id;
end
$$;

comment on function agentmem.consolidate_facts(text, boolean, real, int) is
'Merge near-duplicate facts of one user (or every user of the current tenant), superseding and never deleting; returns each change.
The older of two goes into the newer one''s history with its period closed, the newer one''s sources
become the union, nothing is lost.
Near-duplicates: two current facts of one user and model whose subjects are the same once normalised
(case, spaces and punctuation aside) with a cosine similarity of at least min_similarity (0.8 to 1;
NULL: the tenant''s setting, else 0.95), or whose texts have the same words (Jaccard of 0.9 or more).
At most max_changes facts merged (1 to 10,000; NULL: the tenant''s setting, else 100). Never touches a
pinned fact, a fact whose period is closed, an older fact with a history of its own, or another
user''s or tenant''s facts. dry_run => true records and returns the pairs and changes nothing. Each run
is recorded (agentmem.consolidation_runs) with what it changed; agentmem.undo_consolidation(run_id)
restores exactly that. Concurrent writers of the user wait for it; a fact changed since the pairs were
found is left for the next run. AM020 for a bad argument.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.undo_consolidation(run_id anycompatible)
returns int
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_tenant text := agentmem.current_tenant();
    v_run_id uuid := agentmem_private.uuid_arg('run_id', undo_consolidation.run_id);
    v_run agentmem.consolidation_runs;
    v_change agentmem.consolidation_changes;
    v_user text;
    v_n int := 0;
    v_added uuid[];
    v_sources uuid[];
begin
    select r.* into v_run from agentmem.consolidation_runs as r
    where r.tenant_id = v_tenant and r.run_id = v_run_id
    for update;
    if v_run.run_id is null then
        raise exception 'no such consolidation run: %', v_run_id
        using errcode = 'AM030', hint = 'It may belong to another tenant.';
    end if;
    if v_run.undone_at is not null or v_run.dry_run then
        raise exception 'consolidation run % changed nothing to undo', v_run_id
        using
            errcode = 'AM031',
            detail = case when v_run.dry_run then 'It was a dry run.' else 'It was undone already.' end;
    end if;
    for v_user in
        select distinct c.user_id from agentmem.consolidation_changes as c
        where c.tenant_id = v_tenant and c.run_id = v_run_id order by 1
    loop
        perform agentmem_private.lock_user(v_tenant, v_user, false);
    end loop;
    for v_change in
        select c.* from agentmem.consolidation_changes as c
        where c.tenant_id = v_tenant and c.run_id = v_run_id
        order by c.history_id desc
    loop
        -- The newer fact as the run left it, and the history row it wrote: else something changed since.
        if not exists (
            select from agentmem.facts as f
            where f.tenant_id = v_tenant and f.fact_id = v_change.newer_fact_id
        ) or not exists (
            select from agentmem.fact_history as h
            where h.tenant_id = v_tenant and h.history_id = v_change.history_id
        ) then
            raise exception 'consolidation run % cannot be undone: fact % changed since', v_run_id, v_change.newer_fact_id
            using
                errcode = 'AM031',
                detail = 'The fact it merged into, or the history row it wrote, is gone.',
                hint = 'Nothing was undone. The merged fact''s text is in the history of the newer one (fact_history).';
        end if;
        delete from agentmem.fact_history as h where h.tenant_id = v_tenant and h.history_id = v_change.history_id;
        -- The sources the run added go again (those added by others since stay). Computed first, then
        -- written as a value: Citus cannot plan the subquery inside the UPDATE.
        v_added := array(
            select pg_catalog.jsonb_array_elements_text(v_change.older_row -> 'source_message_ids')
        )::uuid[];
        select f.source_message_ids into v_sources from agentmem.facts as f
        where f.tenant_id = v_tenant and f.fact_id = v_change.newer_fact_id;
        v_sources := array(
            select distinct s.id from pg_catalog.unnest(v_sources) as s (id)
            where s.id = any(v_change.newer_sources_before) or not s.id = any(v_added)
            order by s.id
        );
        update agentmem.facts as f
        set source_message_ids = v_sources
        where f.tenant_id = v_tenant and f.fact_id = v_change.newer_fact_id;
        -- The merged fact's row as it was (import_insert skips a row whose key or subject is taken).
        if agentmem_private.import_insert('agentmem.facts', v_tenant, pg_catalog.jsonb_build_array(v_change.older_row)) = 0 then
            raise exception 'consolidation run % cannot be undone: the subject of fact % is taken', v_run_id, v_change.older_fact_id
            using
                errcode = 'AM031',
                detail = 'The user has a fact of that subject again.',
                hint = 'Nothing was undone.';
        end if;
        v_n := v_n + 1;
    end loop;
    update agentmem.consolidation_runs as r set undone_at = pg_catalog.now()
    where r.tenant_id = v_tenant and r.run_id = v_run_id;
    return v_n;
end
$$;

comment on function agentmem.undo_consolidation(anycompatible) is
'Undo one consolidation run of the current tenant, restoring every fact it merged exactly; returns the facts restored.
Each merged fact is back as it was (same id, text, embedding, sources, times), the run''s history rows
go, and the newer facts lose the sources it added.
The run''s record stays (agentmem.consolidation_runs, undone_at set); its changes go with the history rows
they wrote. All or nothing: AM031 when a newer fact or a history row it wrote is gone, or a merged fact''s subject is
taken again, and for a dry run or a run undone already; AM030 for a run not in the current tenant;
AM020 for an id that is not a UUID.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.apply_consolidation()
returns agentmem.job_runs
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_started timestamptz := pg_catalog.clock_timestamp();
    v_tenant text;
    v_run uuid;
    v_merged jsonb := '{}';
    v_total bigint := 0;
    v_errors text[] := '{}';
    v_row agentmem.job_runs;
begin
    perform agentmem_private.check_sees_every_tenant(
        'agentmem.apply_consolidation', 'it consolidates the facts of every tenant that asked for it',
        'Run it as a superuser or a role with BYPASSRLS, or call agentmem.consolidate_facts as the tenant.'
    );
    -- Every tenant with a consolidation setting, each in a subtransaction: one failing does not stop the others.
    for v_tenant in
        select s.tenant_id from agentmem.tenant_settings as s
        where s.consolidate_min_similarity is not null
        order by s.tenant_id
    loop
        begin
            v_run := agentmem_private.consolidate_tenant(v_tenant, null, false, null, null);
            v_total := v_total + (
                select r.changes from agentmem.consolidation_runs as r where r.tenant_id = v_tenant and r.run_id = v_run
            );
        exception when others then
            v_errors := v_errors || pg_catalog.format('%s: %s (SQLSTATE %s)', v_tenant, sqlerrm, sqlstate);
        end;
    end loop;
    v_merged := pg_catalog.jsonb_build_object('facts_merged', v_total);
    insert into agentmem.job_runs as r (tenant_id, job, started_at, finished_at, rows_removed, total_removed, error)
    values (
        '', 'consolidation', v_started, pg_catalog.clock_timestamp(), v_merged, 0,
        nullif(pg_catalog.array_to_string(v_errors, '; '), '')
    )
    returning * into v_row;
    return v_row;
end
$$;

comment on function agentmem.apply_consolidation() is
'Consolidate the facts of every tenant whose settings ask for it (agentmem.set_consolidation), one run per tenant; records the job''s run.
Each run is agentmem.consolidate_facts of every user within the tenant''s bounds; agentmem.health shows the job.
rows_removed carries facts_merged (merged facts go into history; nothing is removed) and total_removed
is 0; a failing tenant is named in error and does not stop the others. Each tenant''s run is in
agentmem.consolidation_runs and can be undone by the tenant (agentmem.undo_consolidation). Schedule it
with pg_cron or any scheduler. Runs as a superuser or BYPASSRLS role (AM041 otherwise).
Called by: the DBA (granted to no role).';

create or replace function agentmem.set_consolidation(min_similarity real, max_changes int default null)
returns boolean
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
begin
    if set_consolidation.min_similarity is not null and (
        set_consolidation.min_similarity = 'NaN' or set_consolidation.min_similarity not between 0.8 and 1
    ) then
        raise exception 'min_similarity must be between 0.8 and 1, got %', set_consolidation.min_similarity
        using errcode = 'AM020', hint = 'Near-duplicates are very similar: 0.95 is a good start; NULL turns it off.';
    end if;
    if set_consolidation.max_changes is not null then
        perform agentmem_private.check_range('max_changes', set_consolidation.max_changes, 1, 10000);
    end if;
    insert into agentmem.tenant_settings as s (tenant_id, consolidate_min_similarity, consolidate_max_changes)
    values (v_tenant, set_consolidation.min_similarity, set_consolidation.max_changes)
    on conflict on constraint tenant_settings_pkey do update
        set
            consolidate_min_similarity = excluded.consolidate_min_similarity,
            consolidate_max_changes = excluded.consolidate_max_changes,
            updated_at = excluded.updated_at;
    return set_consolidation.min_similarity is not null;
end
$$;

comment on function agentmem.set_consolidation(real, int) is
'Set the current tenant''s bounds of fact consolidation and let the scheduled job (agentmem.apply_consolidation) consolidate it; returns whether it is on.
min_similarity: the least cosine similarity of two facts with the same normalised subject (0.8 to 1);
NULL turns the scheduled consolidation off. max_changes: at most that many facts merged per run (1 to
10,000; NULL: 100). AM020 outside these bounds.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';
