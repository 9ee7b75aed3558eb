-- Answer cache review: a sample of the lookup log for people to judge, their
-- verdicts, and the threshold report that turns the verdicts into a choice.

create or replace function agentmem.sample_hits(n int default 50, min_similarity real default 0.85)
returns table (
    hit_id uuid, kind text, similarity real, question_asked text, matched_question text, answer text,
    created_at timestamptz
)
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    perform agentmem_private.check_range('n', sample_hits.n, 1, 10000);
    perform agentmem_private.check_similarity('min_similarity', sample_hits.min_similarity);
    return query
    select h.hit_id, h.kind, h.similarity, h.question_asked, h.matched_question, e.answer, h.created_at
    from agentmem.cache_hits as h
    left join agentmem.cache_entries as e on e.tenant_id = h.tenant_id and e.entry_id = h.entry_id
    where
        h.tenant_id = (select agentmem.current_tenant()) and h.reviewed_correct is null
        and (h.kind <> 'miss' or (h.guard_passed and h.similarity <> 'NaN' and h.similarity >= sample_hits.min_similarity))
    order by pg_catalog.random()
    limit sample_hits.n;
end
$$;

comment on function agentmem.sample_hits(int, real) is
'A random review sample of n unreviewed served hits and guard-passing near misses, with the answer when the entry still exists.
A near miss: a candidate with similarity >= min_similarity that a lower threshold would have served.
Record verdicts with review_hit; cache_report prices thresholds from them.
n: 1 to 10,000; min_similarity: -1 to 1, not NULL or NaN (AM020).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

drop function if exists agentmem.review_hit(uuid, boolean);

create or replace function agentmem.review_hit(hit_id anycompatible, correct boolean)
returns void
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_hit_id uuid := agentmem_private.uuid_arg('hit_id', review_hit.hit_id);
    v_tenant text := agentmem.current_tenant();
    v_entry uuid;
    v_kind text;
    v_wrong boolean;
    v_now timestamptz := pg_catalog.now();
begin
    if correct is null then
        raise exception 'correct must be true or false' using errcode = 'AM020';
    end if;
    update agentmem.cache_hits as h
    set reviewed_correct = review_hit.correct, reviewed_at = pg_catalog.now()
    where h.tenant_id = v_tenant and h.hit_id = v_hit_id
    returning h.entry_id, h.kind into v_entry, v_kind;
    if not found then
        raise exception 'no cache hit %', v_hit_id using errcode = 'AM030';
    end if;
    -- A served answer judged wrong is withdrawn at once; it is back in service
    -- only when no served hit of it is judged wrong any more (a verdict changed).
    if v_entry is not null and v_kind in ('exact', 'semantic') then
        v_wrong := exists (
            select from agentmem.cache_hits as h
            where
                h.tenant_id = v_tenant and h.entry_id = v_entry and h.kind in ('exact', 'semantic')
                and not h.reviewed_correct
        );
        -- (the time as a value: Citus refuses now() inside CASE/COALESCE of a distributed update)
        update agentmem.cache_entries as e
        set withdrawn_at = case when v_wrong then coalesce(e.withdrawn_at, v_now) end
        where e.tenant_id = v_tenant and e.entry_id = v_entry;
    end if;
end
$$;

comment on function agentmem.review_hit(anycompatible, boolean) is
'Record a reviewer''s verdict on a logged hit: was the cached answer right for the question asked?
A verdict of wrong (correct => false) on a served hit (exact or semantic) withdraws its entry at once: exact and semantic lookups never serve it again (they miss, or serve another entry), and it is kept, with its verdicts, for cache_report (column withdrawn) until it expires or is swept.
Changing every
wrong verdict of that entry to right puts it back in service. A verdict on a miss withdraws nothing.
AM020 for correct => NULL; AM030 for an unknown hit (or another tenant''s).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

-- Over 100 lines: the checks of its arguments, then one statement: the log read once, bucketed by
--   threshold, joined with the verdicts.
create or replace function agentmem.cache_report(
    cost_uncached numeric,
    cost_wrong numeric,
    thresholds real[] default null,
    since timestamptz default '-infinity'
) returns table (
    threshold real, queries bigint, hits bigint, reviewed bigint, reviewed_wrong bigint,
    hits_per_1000 numeric, wrong_per_1000 numeric, net_value_per_1000 numeric, withdrawn bigint
)
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    -- numeric has NaN (and, from PostgreSQL 14, infinities): 'NaN' < 0 is false.
    if cost_uncached is null or cost_wrong is null or cost_uncached = 'NaN' or cost_wrong = 'NaN'
        or cost_uncached not between 0 and 1e15 or cost_wrong not between 0 and 1e15 then
        raise exception 'cost_uncached and cost_wrong must be finite numbers >= 0, got % and %',
            coalesce(cost_uncached::text, 'NULL'), coalesce(cost_wrong::text, 'NULL')
        using errcode = 'AM020', hint = 'Costs are per query, in any currency; at most 1e15.';
    end if;
    if cache_report.since is null then
        raise exception 'since may not be NULL'
        using errcode = 'AM020', hint = 'Leave it out to report on the whole log (''-infinity'').';
    end if;
    if cache_report.thresholds is not null then
        perform agentmem_private.check_array('thresholds', cache_report.thresholds, 1000);
        if pg_catalog.cardinality(cache_report.thresholds) = 0 or exists (
            select from pg_catalog.unnest(cache_report.thresholds) as x
            where x is null or x = 'NaN' or x not between -1 and 1
        ) then
            raise exception 'thresholds must be 1 to 1000 cosine similarities between -1 and 1'
            using errcode = 'AM020', hint = 'NULL, NaN and values out of range are refused; leave it out for 0.85 to 0.99.';
        end if;
    end if;
    -- One pass over the log: each logged lookup counts for the number of
    -- thresholds it reaches (width_bucket, a binary search in the sorted
    -- thresholds), grouped; the hits at threshold i are the lookups reaching i
    -- or more. The cost is the log's rows, whatever the number of thresholds.
    return query
    with t as (
        select x.threshold, pg_catalog.row_number() over (order by x.threshold) as i
        from (
            select distinct y::real as threshold
            from pg_catalog.unnest(coalesce(
                cache_report.thresholds,
                array(select (g / 100.0)::real from pg_catalog.generate_series(85, 99) as g)
            )) as y
        ) as x
    ),
    ts as (
        select pg_catalog.array_agg(t.threshold order by t.threshold) as a, pg_catalog.count(*) as k from t
    ),
    b as (
        select
            case
                when hh.kind = 'exact' then ts.k
                when hh.guard_passed and hh.similarity <> 'NaN' then pg_catalog.width_bucket(hh.similarity, ts.a)
                else 0
            end as reach,
            pg_catalog.count(*) as n,
            pg_catalog.count(hh.reviewed_correct) as rv,
            pg_catalog.count(*) filter (where not hh.reviewed_correct) as rw
        from agentmem.cache_hits as hh
        cross join ts
        where hh.tenant_id = (select agentmem.current_tenant()) and hh.created_at >= cache_report.since
        group by 1
    ),
    per as (
        select
            t.threshold,
            (select coalesce(pg_catalog.sum(b.n), 0) from b)::bigint as queries,
            coalesce(pg_catalog.sum(pg_catalog.sum(b.n)) over w, 0)::bigint as hits,
            coalesce(pg_catalog.sum(pg_catalog.sum(b.rv)) over w, 0)::bigint as reviewed,
            coalesce(pg_catalog.sum(pg_catalog.sum(b.rw)) over w, 0)::bigint as reviewed_wrong
        from t
        left join b on t.i = b.reach
        group by t.threshold, t.i
        window w as (order by t.i desc rows between unbounded preceding and current row)
    ),
    r as (
        select
            per.*,
            case when per.queries > 0 then 1000.0 * per.hits / per.queries else 0 end as hpk,
            case
                when per.queries = 0 then 0
                when per.reviewed = 0 then null
                else 1000.0 * per.hits * per.reviewed_wrong / per.reviewed / per.queries
            end as wpk
        from per
    )
    select
        r.threshold, r.queries, r.hits, r.reviewed, r.reviewed_wrong,
        pg_catalog.round(r.hpk, 2), pg_catalog.round(r.wpk, 2),
        pg_catalog.round((r.hpk - r.wpk) * cache_report.cost_uncached - r.wpk * cache_report.cost_wrong, 2),
        (
            select pg_catalog.count(*) from agentmem.cache_entries as e
            where
                e.tenant_id = agentmem.current_tenant() and e.withdrawn_at is not null
                and e.withdrawn_at >= cache_report.since
        )
    from r
    order by r.threshold;
end
$$;

comment on function agentmem.cache_report(numeric, numeric, real[], timestamptz) is
'Per candidate threshold (default 0.85 to 0.99 by 0.01): hits, wrong hits and net value per 1,000 queries.
From the lookup log of the current tenant since "since": queries = every logged lookup;
hits(t) = exact hits + lookups whose best candidate passed the guard with similarity >= t
(served hits and near misses a threshold of t would have served);
wrong rate(t) = reviewed_wrong(t) / reviewed(t) from the reviewed sample at that threshold;
hits_per_1000 = 1000 * hits / queries;  wrong_per_1000 = hits_per_1000 * wrong rate;
net_value_per_1000 = (hits_per_1000 - wrong_per_1000) * cost_uncached - wrong_per_1000 * cost_wrong
(a right hit saves one LLM call; a wrong hit costs cost_wrong). NULL where nothing was reviewed.
withdrawn: entries taken out of service since "since" because a served answer was judged wrong (the
same number on every row).
AM020 for a cost that is NULL, NaN, infinite, negative or over 1e15, for since => NULL, and for
thresholds that are empty, not one-dimensional from index 1, over 1,000, or hold NULL, NaN or a
value outside -1..1. One pass over the log: the cost grows with the logged lookups, not with the number
of thresholds (duplicates count once).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';
