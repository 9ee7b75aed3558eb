-- Answer cache upkeep and review: invalidation by source document, sweeping,
-- the review sample of the lookup log and the threshold report.

create or replace function agentmem._unlink_cache_hits(p_tenant text, p_entry_ids uuid[])
returns void
language sql
volatile
security invoker
set search_path from current
as $$
    update agentmem.cache_hits as h
    set entry_id = null
    where h.tenant_id = p_tenant and h.entry_id = any(p_entry_ids)
$$;

comment on function agentmem._unlink_cache_hits(text, uuid[]) is
'Internal: clear cache_hits.entry_id of the lookups that hit these entries, before they are deleted.
On one server cache_hits_entry_fk (on delete set null) does it too; on Citus that key cannot exist
(agentmem.distribute), and every function that deletes cache entries calls this first.';

create or replace function agentmem.invalidate_source(doc_id text)
returns bigint
language plpgsql
volatile
security invoker
set search_path from current
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_ids uuid[];
    v_count bigint;
begin
    if invalidate_source.doc_id is null or invalidate_source.doc_id = '' then
        raise exception 'doc_id is missing' using errcode = 'AM020';
    end if;
    v_ids := array(
        select s.entry_id from agentmem.cache_entry_sources as s
        where s.tenant_id = v_tenant and s.doc_id = invalidate_source.doc_id
    );
    perform agentmem._unlink_cache_hits(v_tenant, v_ids);
    delete from agentmem.cache_entries as e
    where e.tenant_id = v_tenant and e.entry_id = any(v_ids);
    get diagnostics v_count = row_count;
    return v_count;
end
$$;

comment on function agentmem.invalidate_source(text) is
'Remove every cached answer of the current tenant that cited the document doc_id; returns how many.
Goes through the reverse index cache_entry_sources (no scan of the cache).';

create or replace function agentmem.sweep_cache(batch_size int default 1000)
returns bigint
language plpgsql
volatile
security invoker
set search_path from current
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_version bigint := agentmem.corpus_version();
    v_ids uuid[];
    v_count bigint;
begin
    perform agentmem._check_range('batch_size', sweep_cache.batch_size, 1, 100000);
    v_ids := array(
        select x.entry_id from (
            (select d.entry_id from agentmem.cache_entries as d
                where d.tenant_id = v_tenant and d.expires_at <= now()
                limit sweep_cache.batch_size)
            union
            (select d.entry_id from agentmem.cache_entries as d
                where d.tenant_id = v_tenant and d.corpus_version < v_version
                limit sweep_cache.batch_size)
        ) as x
        limit sweep_cache.batch_size
    );
    perform agentmem._unlink_cache_hits(v_tenant, v_ids);
    delete from agentmem.cache_entries as e where e.tenant_id = v_tenant and e.entry_id = any(v_ids);
    get diagnostics v_count = row_count;
    return v_count;
end
$$;

comment on function agentmem.sweep_cache(int) is
'Delete up to batch_size expired or superseded (older corpus version) entries of the current tenant;
returns how many. One bounded batch per call, so it is safe to run often (e.g. from pg_cron):
call it again while it returns batch_size. Expired and superseded entries are never served anyway.';

create or replace function agentmem.sample_hits(n int default 50, min_similarity real default 0.85)
returns table (
    hit_id uuid, kind text, similarity real, question_asked text, matched_question text, answer text,
    created_at timestamptz
)
language plpgsql
volatile
security invoker
set search_path from current
as $$
begin
    perform agentmem._check_range('n', sample_hits.n, 1, 10000);
    return query
    select h.hit_id, h.kind, h.similarity, h.question_asked, h.matched_question, e.answer, h.created_at
    from agentmem.cache_hits as h
    left join agentmem.cache_entries as e on e.tenant_id = h.tenant_id and e.entry_id = h.entry_id
    where
        h.tenant_id = agentmem.current_tenant() and h.reviewed_correct is null
        and (h.kind <> 'miss' or (h.guard_passed and h.similarity >= sample_hits.min_similarity))
    order by random()
    limit sample_hits.n;
end
$$;

comment on function agentmem.sample_hits(int, real) is
'A random review sample of n unreviewed served hits and guard-passing near misses (candidates with
similarity >= min_similarity that a lower threshold would have served), with the answer when the
entry still exists. Record verdicts with review_hit; cache_report prices thresholds from them.';

create or replace function agentmem.review_hit(hit_id uuid, correct boolean)
returns void
language plpgsql
volatile
security invoker
set search_path from current
as $$
begin
    if correct is null then
        raise exception 'correct must be true or false' using errcode = 'AM020';
    end if;
    update agentmem.cache_hits as h
    set reviewed_correct = review_hit.correct, reviewed_at = now()
    where h.tenant_id = agentmem.current_tenant() and h.hit_id = review_hit.hit_id;
    if not found then
        raise exception 'no cache hit %', review_hit.hit_id using errcode = 'AM030';
    end if;
end
$$;

comment on function agentmem.review_hit(uuid, boolean) is
'Record a reviewer''s verdict on a logged hit: was the cached answer right for the question asked?
AM030 for an unknown hit (or another tenant''s).';

create or replace function agentmem.cache_report(
    cost_uncached numeric,
    cost_wrong numeric,
    thresholds real[] default null,
    since timestamptz default '-infinity'
) returns table (
    threshold real, queries bigint, hits bigint, reviewed bigint, reviewed_wrong bigint,
    hits_per_1000 numeric, wrong_per_1000 numeric, net_value_per_1000 numeric
)
language plpgsql
stable
security invoker
set search_path from current
as $$
begin
    if cost_uncached is null or cost_wrong is null or cost_uncached < 0 or cost_wrong < 0 then
        raise exception 'cost_uncached and cost_wrong must be numbers >= 0' using errcode = 'AM020';
    end if;
    return query
    with t as (
        select x::real as threshold
        from unnest(coalesce(
            cache_report.thresholds,
            array(select (g / 100.0)::real from generate_series(85, 99) as g)
        )) as x
    ),
    h as (
        select hh.kind, hh.similarity, hh.guard_passed, hh.reviewed_correct
        from agentmem.cache_hits as hh
        where hh.tenant_id = agentmem.current_tenant() and hh.created_at >= cache_report.since
    ),
    per as (
        select
            t.threshold,
            (select count(*) from h) as queries,
            count(h.kind) as hits,
            count(h.reviewed_correct) as reviewed,
            count(*) filter (where not h.reviewed_correct) as reviewed_wrong
        from t
        left join h
            on h.kind = 'exact' or (h.guard_passed and h.similarity >= t.threshold)
        group by t.threshold
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
        round(r.hpk, 2), round(r.wpk, 2),
        round((r.hpk - r.wpk) * cache_report.cost_uncached - r.wpk * cache_report.cost_wrong, 2)
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
(a right hit saves one LLM call; a wrong hit costs cost_wrong). NULL where nothing was reviewed.';
