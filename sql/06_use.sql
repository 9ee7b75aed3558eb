-- Use and pins, the part every later file calls: what searches and lookups
-- returned is appended to agentmem.use_log (never a write on the rows they
-- read), folded into use_count / last_used_at by a job; and which rows are
-- pinned, so that every automatic removal and consolidation spares them.
-- The public functions (pin, unpin, apply_use_log) are in 59_lifecycle.sql.

create or replace function agentmem_private.record_use(p_tenant text, p_kind text, p_user text, p_ids uuid[])
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_values text;
begin
    -- A read-only transaction (or a hot standby) reads without recording.
    if p_ids is null or pg_catalog.cardinality(p_ids) = 0
        or pg_catalog.current_setting('transaction_read_only') = 'on' then
        return;
    end if;
    -- Shared, as every writer of a user: a forget_user in flight waits for this row and erases it.
    if p_user is not null then
        perform agentmem_private.lock_user(p_tenant, p_user, false);
    end if;
    -- One item (a cache hit, a search of one result): a static statement, whose plan PL/pgSQL
    -- keeps, not the EXECUTE below, planned at every call.
    if pg_catalog.cardinality(p_ids) = 1 and pg_catalog.array_ndims(p_ids) = 1 then
        if p_ids[pg_catalog.array_lower(p_ids, 1)] is not null then
            insert into agentmem.use_log (tenant_id, kind, item_id, user_id)
            values (p_tenant, p_kind, p_ids[pg_catalog.array_lower(p_ids, 1)], p_user);
        end if;
        return;
    end if;
    -- Without Citus: one static statement (its plan kept) for the whole list.
    if pg_catalog.to_regclass('pg_catalog.pg_dist_partition') is null then
        insert into agentmem.use_log (tenant_id, kind, item_id, user_id)
        select p_tenant, p_kind, i.id, p_user from pg_catalog.unnest(p_ids) as i (id) where i.id is not null;
        return;
    end if;
    -- On Citus a multi-row VALUES, not INSERT ... SELECT: the latter goes to the shards as COPY,
    -- which row-level security refuses.
    v_values := (
        select pg_catalog.string_agg(pg_catalog.format('(%L, %L, %L::uuid, %L)', p_tenant, p_kind, i.id, p_user), ', ')
        from pg_catalog.unnest(p_ids) as i (id)
        where i.id is not null
    );
    if v_values is not null then
        execute 'insert into agentmem.use_log (tenant_id, kind, item_id, user_id) values ' || v_values;
    end if;
end
$$;

comment on function agentmem_private.record_use(text, text, text, uuid[]) is
'Internal: append one use of each of these items (kind message, fact or cached_answer) to agentmem.use_log, '
'one statement (a static insert, or on Citus a multi-row VALUES); nothing in a read-only transaction. Called by the searches and lookups after they return.';

create or replace function agentmem_private.forget_uses(p_tenant text, p_ids uuid[])
returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_n bigint;
begin
    delete from agentmem.use_log as u where u.tenant_id = p_tenant and u.item_id = any(p_ids);
    get diagnostics v_n = row_count;
    return v_n;
end
$$;

comment on function agentmem_private.forget_uses(text, uuid[]) is
'Internal: delete the not yet folded uses of these items (erasure of single items and conversations). Returns rows deleted.';

create or replace function agentmem_private.fold_use_log_of(p_tenant text, p_batch int)
returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_kinds text[];
    v_ids uuid[];
    v_counts bigint[];
    v_last timestamptz[];
    v_taken bigint;
begin
    -- The oldest p_batch uses of the tenant, taken out of the log and summed per item.
    with taken as (
        delete from agentmem.use_log as u
        where u.tenant_id = p_tenant and u.use_id in (
            select l.use_id from agentmem.use_log as l
            where l.tenant_id = p_tenant
            order by l.use_id
            limit p_batch
        )
        returning u.kind, u.item_id, u.used_at
    ),

    per_item as (
        select t.kind, t.item_id, pg_catalog.count(*) as n, pg_catalog.max(t.used_at) as at
        from taken as t
        group by t.kind, t.item_id
    )

    select
        pg_catalog.array_agg(p.kind), pg_catalog.array_agg(p.item_id),
        pg_catalog.array_agg(p.n), pg_catalog.array_agg(p.at), coalesce(pg_catalog.sum(p.n), 0)
    into v_kinds, v_ids, v_counts, v_last, v_taken
    from per_item as p;
    if v_taken = 0 then
        return 0;
    end if;
    -- Items gone since (deleted, expired) are simply not found.
    update agentmem.messages as m
    set use_count = m.use_count + x.n, last_used_at = greatest(m.last_used_at, x.at)
    from rows from (pg_catalog.unnest(v_kinds), pg_catalog.unnest(v_ids), pg_catalog.unnest(v_counts), pg_catalog.unnest(v_last)) as x (kind, id, n, at)
    where x.kind = 'message' and m.tenant_id = p_tenant and m.message_id = x.id;
    update agentmem.facts as f
    set use_count = f.use_count + x.n, last_used_at = greatest(f.last_used_at, x.at)
    from rows from (pg_catalog.unnest(v_kinds), pg_catalog.unnest(v_ids), pg_catalog.unnest(v_counts), pg_catalog.unnest(v_last)) as x (kind, id, n, at)
    where x.kind = 'fact' and f.tenant_id = p_tenant and f.fact_id = x.id;
    update agentmem.cache_entries as e
    set use_count = e.use_count + x.n, last_used_at = greatest(e.last_used_at, x.at)
    from rows from (pg_catalog.unnest(v_kinds), pg_catalog.unnest(v_ids), pg_catalog.unnest(v_counts), pg_catalog.unnest(v_last)) as x (kind, id, n, at)
    where x.kind = 'cached_answer' and e.tenant_id = p_tenant and e.entry_id = x.id;
    return v_taken;
end
$$;

comment on function agentmem_private.fold_use_log_of(text, int) is
'Internal: fold at most p_batch of one tenant''s oldest uses into use_count and last_used_at of their '
'messages, facts and cached answers, deleting them from agentmem.use_log in the same transaction '
'(uses of items gone since are dropped). Returns the uses folded.';

create or replace function agentmem_private.fold_use_log(p_batch int)
returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text;
    v_total bigint := 0;
begin
    -- One fold at a time: a concurrent one returns at once (the uses wait for the next).
    if not pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended('agentmem.apply_use_log', 5)) then
        return 0;
    end if;
    -- Every tenant with uses in turn, each at most what is left of the batch.
    for v_tenant in select distinct u.tenant_id from agentmem.use_log as u order by u.tenant_id loop
        exit when v_total >= p_batch;
        v_total := v_total + agentmem_private.fold_use_log_of(v_tenant, (p_batch - v_total)::int);
    end loop;
    return v_total;
end
$$;

comment on function agentmem_private.fold_use_log(int) is
'Internal: fold at most p_batch uses of every tenant into the used rows (agentmem_private.fold_use_log_of), '
'one run at a time (advisory lock; a concurrent run returns 0). Returns the uses folded. Needs a role that sees every tenant.';

create or replace function agentmem_private.unpinned_check(p_table text, p_alias text)
returns text
language sql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select case p_table
        when 'messages' then pg_catalog.format(
            ' and %1$I.pinned_at is null and not exists (select from agentmem.conversations as pc'
            ' where pc.tenant_id = %1$I.tenant_id and pc.conversation_id = %1$I.conversation_id'
            ' and pc.pinned_at is not null)', p_alias
        )
        when 'facts' then pg_catalog.format(' and %I.pinned_at is null', p_alias)
        when 'conversations' then pg_catalog.format(' and %I.pinned_at is null', p_alias)
        else ''
    end
$$;

comment on function agentmem_private.unpinned_check(text, text) is
'Internal: the SQL condition (starting with '' and'', or empty) that keeps pinned rows of p_table (alias p_alias) '
'out of an automatic removal: a pinned message or one of a pinned conversation, a pinned fact or conversation.';

create or replace function agentmem_private.use_boost_weight(p_tenant text, p_weight real)
returns float8
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_weight real := p_weight;
begin
    if v_weight is null then
        select s.use_boost into v_weight from agentmem.tenant_settings as s where s.tenant_id = p_tenant;
    elsif v_weight = 'NaN' or v_weight < 0 or v_weight > 0.5 then
        raise exception 'use_boost must be between 0 and 0.5, got %', v_weight
        using
            errcode = 'AM020',
            detail = 'A candidate''s score is multiplied by a factor between 1 and 1 + use_boost.',
            hint = 'Pass 0 to turn it off for this call, NULL for the tenant''s setting.';
    end if;
    return nullif(v_weight, 0);
end
$$;

comment on function agentmem_private.use_boost_weight(text, real) is
'Internal: the use boost''s weight of a search: p_weight when given (AM020 outside 0 to 0.5), else the tenant''s '
'setting (tenant_settings.use_boost); NULL when off (NULL or 0).';

create or replace function agentmem_private.use_boost_factor(
    p_weight float8, p_last_used timestamptz, p_created timestamptz, p_use_count bigint, p_now timestamptz
) returns float8
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- 1 + weight * signal, the signal in [0, 1]: 0.5 for use (halved each 7 days since the last use,
    -- 0 if never used), 0.3 for creation (halved each 30 days), 0.2 for the count (1 - 1 / (1 + ln(1 + n))).
    select 1 + least(greatest(coalesce(p_weight, 0), 0), 0.5) * least(greatest(
        -- Never used: no use term (greatest() skips a NULL, so it must not see one).
        case when p_last_used is null then 0 else 0.5 * pg_catalog.power(
            0.5::float8, greatest(extract(epoch from p_now - p_last_used)::float8, 0) / (7 * 86400)
        ) end
        + case when p_created is null then 0 else 0.3 * pg_catalog.power(
            0.5::float8, greatest(extract(epoch from p_now - p_created)::float8, 0) / (30 * 86400)
        ) end
        + 0.2 * (1 - 1 / (1 + pg_catalog.ln(1 + greatest(coalesce(p_use_count, 0), 0)::float8))),
        0), 1)
$$;

comment on function agentmem_private.use_boost_factor(float8, timestamptz, timestamptz, bigint, timestamptz) is
'Internal: the use boost''s factor of a candidate, always between 1 and 1 + p_weight (p_weight clamped to 0..0.5): '
'1 + p_weight * (0.5 * 0.5^(days since last use / 7) + 0.3 * 0.5^(days since created / 30) + 0.2 * (1 - 1 / (1 + ln(1 + use count)))).';
