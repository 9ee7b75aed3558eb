-- BM25 for the words branch of message search: the statistics it needs (per
-- user: how many messages hold each word, how many messages and words there
-- are; tables term_stats and term_totals, kept per conversation and summed:
-- writers of one conversation already queue on its row lock, so the counts
-- make no writer wait for another conversation's), kept current by every writer of
-- messages through count_terms / count_messages / recount_terms, and the
-- scoring itself (word_match_messages), used by search_messages
-- (sql/21_conversation_search.sql).
--
-- BM25 of a message for the query's words w:
--   sum over w in the message of idf(w) * (k1 + 1) / (1 + k1 * (1 - b + b * len / avg_len))
--   idf(w) = ln(1 + (N - df(w) + 0.5) / (df(w) + 0.5))
-- that is BM25 with every term frequency 1: a chat message seldom repeats a
-- word, and counting occurrences (unnest of every candidate's tsvector) made
-- the branch twice as slow for the same figures on LoCoMo (0.561 / 0.553 top 5
-- by words alone). len: the message's distinct words (length(content_tsv));
-- N, df, avg_len: the user's messages (term_totals, term_stats). The user is
-- the scope of every search.

create or replace function agentmem_private.check_text_ranking(p_ranking text, p_k1 double precision, p_b double precision)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_ranking is null or p_ranking not in ('both', 'bm25', 'ts_rank') then
        raise exception 'text_ranking must be ''both'', ''bm25'' or ''ts_rank'', got %', coalesce(pg_catalog.quote_literal(p_ranking), 'NULL')
        using
            errcode = 'AM020',
            detail = 'It chooses how the words branch ranks: BM25, ts_rank, or both as two lists of the fusion.',
            hint = 'Leave it out for ''both'' (the default).';
    end if;
    if p_k1 is null or p_k1 = 'NaN' or p_k1 not between 0 and 10 then
        raise exception 'bm25_k1 must be between 0 and 10, got %', coalesce(p_k1::text, 'NULL')
        using
            errcode = 'AM020',
            detail = 'With b, k1 sets how much a message''s length discounts its words (each word counts once).',
            hint = 'The default, 1.2, suits chat messages; 0.5 to 2 is the usual range.';
    end if;
    if p_b is null or p_b = 'NaN' or p_b not between 0 and 1 then
        raise exception 'bm25_b must be between 0 and 1, got %', coalesce(p_b::text, 'NULL')
        using
            errcode = 'AM020',
            detail = 'b is the weight of length normalisation: 0 none, 1 full.',
            hint = 'The default, 0.3, was measured on LoCoMo (bench/results/hybrid.md).';
    end if;
end
$$;

comment on function agentmem_private.check_text_ranking(text, double precision, double precision) is
'Internal: AM020 unless text_ranking is ''both'', ''bm25'' or ''ts_rank'', 0 <= bm25_k1 <= 10 and
0 <= bm25_b <= 1 (NULL and NaN refused).';

create or replace function agentmem_private.count_terms(
    p_tenant text, p_user text, p_conversation_id uuid, p_docs tsvector[], p_sign int
)
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_n bigint := p_sign * coalesce(pg_catalog.cardinality(p_docs), 0);
    v_words bigint;
    v_terms text[];
    v_counts int[];
begin
    if v_n = 0 then
        return;
    end if;
    select p_sign * coalesce(pg_catalog.sum(pg_catalog.length(d.doc)), 0) into v_words
    from pg_catalog.unnest(p_docs) as d (doc);
    -- The conversation's totals row first, then the words in their order:
    -- every writer takes the locks in this order (no deadlock).
    insert into agentmem.term_totals as t (tenant_id, user_id, conversation_id, messages, words)
    values (p_tenant, p_user, p_conversation_id, v_n, v_words)
    on conflict on constraint term_totals_pkey do update
        set messages = t.messages + excluded.messages, words = t.words + excluded.words;
    select pg_catalog.array_agg(w.term order by w.term), pg_catalog.array_agg(w.n order by w.term)
    into v_terms, v_counts
    from (
        select x.lexeme as term, p_sign * pg_catalog.count(*)::int as n
        from pg_catalog.unnest(p_docs) as d (doc)
        cross join lateral pg_catalog.unnest(d.doc) as x (lexeme, positions, weights)
        group by x.lexeme
    ) as w;
    if v_terms is not null and pg_catalog.to_regclass('pg_catalog.pg_dist_partition') is null then
        -- Without Citus: a static statement, its plan kept for the session
        -- (the dynamic one below is planned at every call).
        insert into agentmem.term_stats as s (tenant_id, user_id, term, conversation_id, messages)
        select p_tenant, p_user, w.term, p_conversation_id, w.n
        from rows from (pg_catalog.unnest(v_terms), pg_catalog.unnest(v_counts)) with ordinality as w (term, n, i)
        order by w.i
        on conflict on constraint term_stats_pkey do update set messages = s.messages + excluded.messages;
    elsif v_terms is not null then
        -- One multi-row VALUES: Citus routes it to the tenant's shard as one
        -- statement (an insert ... select from unnest would go as COPY,
        -- refused under row-level security).
        execute 'insert into agentmem.term_stats as s (tenant_id, user_id, term, conversation_id, messages) values '
            || (
                select pg_catalog.string_agg(
                    pg_catalog.format('(%L, %L, %L, %L::uuid, %s)', p_tenant, p_user, w.term, p_conversation_id, w.n), ', ' order by w.i
                )
                from rows from (pg_catalog.unnest(v_terms), pg_catalog.unnest(v_counts)) with ordinality as w (term, n, i)
            )
            || ' on conflict on constraint term_stats_pkey do update set messages = s.messages + excluded.messages';
    end if;
    if p_sign < 0 then
        delete from agentmem.term_stats as s
        where
            s.tenant_id = p_tenant and s.user_id = p_user and s.term = any(v_terms)
            and s.conversation_id = p_conversation_id and s.messages <= 0;
        delete from agentmem.term_totals as t
        where
            t.tenant_id = p_tenant and t.user_id = p_user and t.conversation_id = p_conversation_id
            and t.messages <= 0;
    end if;
end
$$;

comment on function agentmem_private.count_terms(text, text, uuid, tsvector[], int) is
'Internal: add (p_sign 1) or remove (p_sign -1) messages of one conversation, given by their content_tsv,
to or from the user''s BM25 statistics (term_totals, term_stats); rows falling to 0 are deleted. Its
row locks are the conversation''s: only writers of that conversation, who queue on its row anyway,
wait for them.';

create or replace function agentmem_private.count_messages(p_tenant text, p_ids uuid[], p_sign int)
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_user text;
    v_conversation uuid;
    v_docs tsvector[];
begin
    -- Read before a delete or after an insert: the messages must exist.
    for v_user, v_conversation, v_docs in
        select m.user_id, m.conversation_id, pg_catalog.array_agg(m.content_tsv)
        from agentmem.messages as m
        where m.tenant_id = p_tenant and m.message_id = any(p_ids)
        group by m.user_id, m.conversation_id
        order by m.user_id, m.conversation_id
    loop
        perform agentmem_private.count_terms(p_tenant, v_user, v_conversation, v_docs, p_sign);
    end loop;
end
$$;

comment on function agentmem_private.count_messages(text, uuid[], int) is
'Internal: count_terms for stored messages by id (p_sign 1 after they are inserted, -1 before they are
deleted), per conversation.';

create or replace function agentmem_private.recount_terms(p_tenant text, p_user text)
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_user text;
    v_conversation uuid;
begin
    -- p_user NULL: every user of the tenant (after an import of a tenant).
    delete from agentmem.term_stats as s where s.tenant_id = p_tenant and (p_user is null or s.user_id = p_user);
    delete from agentmem.term_totals as t where t.tenant_id = p_tenant and (p_user is null or t.user_id = p_user);
    for v_user, v_conversation in
        select distinct m.user_id, m.conversation_id from agentmem.messages as m
        where m.tenant_id = p_tenant and (p_user is null or m.user_id = p_user)
        order by m.user_id, m.conversation_id
    loop
        perform agentmem_private.count_terms(
            p_tenant, v_user, v_conversation,
            array(
                select m.content_tsv from agentmem.messages as m
                where m.tenant_id = p_tenant and m.conversation_id = v_conversation
            ),
            1
        );
    end loop;
end
$$;

comment on function agentmem_private.recount_terms(text, text) is
'Internal: rebuild the BM25 statistics of one user (or, p_user NULL, every user) of a tenant from their
messages: after an import, or a switch of the text search configuration.';

create or replace function agentmem_private.bm25_rest(p_doc tsvector, p_words tsquery[], p_idf double precision[])
returns double precision
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select coalesce(pg_catalog.sum(w.idf), 0)
    from rows from (pg_catalog.unnest(p_words[9:]), pg_catalog.unnest(p_idf[9:])) as w (word, idf)
    where p_doc @@ w.word
$$;

comment on function agentmem_private.bm25_rest(tsvector, tsquery[], double precision[]) is
'Internal: bm25_words'' sum for the words after the eighth: the idf of each of p_words[9:] that p_doc
holds.';

-- Inlined into the statement that calls it (one SQL expression, not strict, no
-- sub-select, no settings): a query's first eight words as eight tests of the row
-- in place of a sub-select over the words for every row (0.4 ms of a LoCoMo search
-- of 419 messages; text_terms gives at most 8 words for 9 questions in 10). A word
-- past the array's end is NULL: no match, 0. Inlining takes a function without
-- settings, so instead of a pinned search_path every operator and function in it
-- is named with its schema (tests/test_tenant.py checks both).
create or replace function agentmem_private.bm25_words(p_doc tsvector, p_words tsquery[], p_idf double precision[])
returns double precision
language sql
immutable
parallel safe
security invoker
as $$
    select
        case when p_doc operator(pg_catalog.@@) p_words[1] then p_idf[1] else 0 end
        operator(pg_catalog.+) case when p_doc operator(pg_catalog.@@) p_words[2] then p_idf[2] else 0 end
        operator(pg_catalog.+) case when p_doc operator(pg_catalog.@@) p_words[3] then p_idf[3] else 0 end
        operator(pg_catalog.+) case when p_doc operator(pg_catalog.@@) p_words[4] then p_idf[4] else 0 end
        operator(pg_catalog.+) case when p_doc operator(pg_catalog.@@) p_words[5] then p_idf[5] else 0 end
        operator(pg_catalog.+) case when p_doc operator(pg_catalog.@@) p_words[6] then p_idf[6] else 0 end
        operator(pg_catalog.+) case when p_doc operator(pg_catalog.@@) p_words[7] then p_idf[7] else 0 end
        operator(pg_catalog.+) case when p_doc operator(pg_catalog.@@) p_words[8] then p_idf[8] else 0 end
        operator(pg_catalog.+) case
            when pg_catalog.cardinality(p_words) operator(pg_catalog.>) 8
                then agentmem_private.bm25_rest(p_doc, p_words, p_idf)
            else 0
        end
$$;

comment on function agentmem_private.bm25_words(tsvector, tsquery[], double precision[]) is
'Internal: BM25''s sum of idf over the query''s words that a message holds (each word once): p_words
are the words as one-word queries, p_idf their idf in the same order; 0 for none. Inlined into the
calling statement, so it pins no search_path: every operator and function in it is schema-qualified.';

-- Earlier installs returned the two rankings as rows (message_id, ts_rank_rank, bm25_rank),
-- which search_messages sorted again into its lists.
drop function if exists agentmem_private.word_match_messages(
    text, text, tsquery, text[], int, uuid, timestamptz, timestamptz, double precision, double precision
);

-- Before the lists' scores (search_messages' fusion 'zscore'): another return type.
drop function if exists agentmem_private.word_match_ranks(
    text, text, tsquery, text[], int, uuid, timestamptz, timestamptz, double precision, double precision
);

-- Over 100 lines: one pass over the user's matching messages that ranks them two ways (ts_rank and BM25)
-- from the same rows, with the per-user statistics read once; split, the rows would be read twice.
create or replace function agentmem_private.word_match_ranks(
    p_tenant text,
    p_user_id text,
    p_query tsquery,
    p_terms text[],
    p_k int,
    p_conversation_id uuid,
    p_since timestamptz,
    p_until timestamptz,
    p_k1 double precision,
    p_b double precision
) returns table (ts_rank_ids uuid[], bm25_ids uuid[], ts_rank_scores double precision[], bm25_scores double precision[])
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
set enable_bitmapscan = on
as $$
declare
    v_n float8;
    v_avg float8;
    v_idf float8[];
    v_rows int;
    -- Each word as a one-word query: a message holds it when it matches.
    v_words tsquery[] := array(
        select ('''' || pg_catalog.replace(pg_catalog.replace(w.term, '\', '\\'), '''', '''''') || '''')::tsquery
        from pg_catalog.unnest(p_terms) with ordinality as w (term, i)
        order by w.i
    );
begin
    select pg_catalog.sum(t.messages), pg_catalog.sum(t.words)::float8 / greatest(pg_catalog.sum(t.messages), 1)
    into v_n, v_avg
    from agentmem.term_totals as t
    where t.tenant_id = p_tenant and t.user_id = p_user_id;
    v_n := coalesce(v_n, 0);
    v_avg := greatest(coalesce(v_avg, 1), 1);
    v_idf := array(
        select pg_catalog.ln(1 + (v_n - coalesce(d.df, 0) + 0.5) / (coalesce(d.df, 0) + 0.5))
        from pg_catalog.unnest(p_terms) with ordinality as w (term, i)
        left join lateral (
            select pg_catalog.sum(s.messages)::float8 as df
            from agentmem.term_stats as s
            where s.tenant_id = p_tenant and s.user_id = p_user_id and s.term = w.term
        ) as d on true
        order by w.i
    );
    -- A user (or a time window) of up to 1,000 messages is read through the
    -- (tenant_id, user_id) index and each row tested, as text_match_messages
    -- does and for the same reason (the GIN index's posting lists hold every
    -- tenant's rows with the words); counted as it counts them.
    if p_since is null and p_until is null then
        select pg_catalog.count(*) into v_rows from (
            select from agentmem.messages as m
            where m.tenant_id = p_tenant and m.user_id = p_user_id
            limit 1001
        ) as s;
    else
        select pg_catalog.count(*) into v_rows from (
            select from agentmem.messages as m
            where
                m.tenant_id = p_tenant and m.user_id = p_user_id
                and m.occurred_at >= coalesce(p_since, '-infinity') and m.occurred_at < coalesce(p_until, 'infinity')
            limit 1001
        ) as s;
    end if;
    if v_rows <= 1000 then
        perform pg_catalog.set_config('enable_bitmapscan', 'off', true);
    end if;
    -- Both lists, ids and scores as arrays, from one pass over the matching
    -- messages (each scored once, then the p_k best by each taken by a top-N
    -- sort): no rows for the caller to sort again.
    if v_rows <= 1000 and p_since is null and p_until is null then
        return query
        with s as materialized (
            select
                m.message_id,
                pg_catalog.ts_rank(m.content_tsv, p_query)::float8 as ts,
                (p_k1 + 1) / (1 + p_k1 * (1 - p_b + p_b * pg_catalog.length(m.content_tsv) / v_avg))
                * agentmem_private.bm25_words(m.content_tsv, v_words, v_idf) as bm25
            from agentmem.messages as m
            where
                m.tenant_id = p_tenant and m.user_id = p_user_id and m.content_tsv @@ p_query
                and (p_conversation_id is null or m.conversation_id = p_conversation_id)
        )

        select a.ids, b.ids, a.scores, b.scores
        from
            (
                select pg_catalog.array_agg(x.message_id order by x.ts desc, x.message_id) as ids,
                    pg_catalog.array_agg(x.ts order by x.ts desc, x.message_id) as scores
                from (select s.message_id, s.ts from s order by s.ts desc, s.message_id limit p_k) as x
            ) as a,
            (
                select pg_catalog.array_agg(x.message_id order by x.bm25 desc, x.message_id) as ids,
                    pg_catalog.array_agg(x.bm25 order by x.bm25 desc, x.message_id) as scores
                from (select s.message_id, s.bm25 from s order by s.bm25 desc, s.message_id limit p_k) as x
            ) as b;
        return;
    end if;
    -- A bigger user, or a time window: planned with the query's own words and
    -- window, so that the planner weighs the GIN index against the B-trees.
    return query execute pg_catalog.format(
        'with s as materialized ('
        '  select m.message_id, pg_catalog.ts_rank(m.content_tsv, $3)::float8 as ts,'
        '    ($6 + 1) / (1 + $6 * (1 - $7 + $7 * pg_catalog.length(m.content_tsv) / $8))'
        '    * agentmem_private.bm25_words(m.content_tsv, $9, $10) as bm25'
        '  from agentmem.messages as m'
        '  where m.tenant_id = $1 and m.user_id = $2 and m.content_tsv @@ $3 %s%s%s'
        ') '
        'select a.ids, b.ids, a.scores, b.scores from'
        '  (select pg_catalog.array_agg(x.message_id order by x.ts desc, x.message_id) as ids,'
        '     pg_catalog.array_agg(x.ts order by x.ts desc, x.message_id) as scores'
        '   from (select s.message_id, s.ts from s order by s.ts desc, s.message_id limit $4) as x) as a,'
        '  (select pg_catalog.array_agg(x.message_id order by x.bm25 desc, x.message_id) as ids,'
        '     pg_catalog.array_agg(x.bm25 order by x.bm25 desc, x.message_id) as scores'
        '   from (select s.message_id, s.bm25 from s order by s.bm25 desc, s.message_id limit $4) as x) as b',
        case when p_conversation_id is null then '' else 'and m.conversation_id = $5' end,
        case when p_since is null then '' else pg_catalog.format(' and m.occurred_at >= %L::timestamptz', p_since) end,
        case when p_until is null then '' else pg_catalog.format(' and m.occurred_at < %L::timestamptz', p_until) end
    )
    using p_tenant, p_user_id, p_query, p_k, p_conversation_id, p_k1, p_b, v_avg, v_words, v_idf;
end
$$;

comment on function agentmem_private.word_match_ranks(text, text, tsquery, text[], int, uuid, timestamptz, timestamptz, double precision, double precision) is
'Internal: the words branch of message search, ranked two ways in one pass over the user''s messages
matching p_query (the OR of p_terms; optionally in one conversation and a time window): by ts_rank
and by BM25 (k1 p_k1, b p_b, each word counting once; statistics of term_stats and term_totals, see
the top of sql/13_bm25.sql). One row: the ids of the p_k best by each, best first (ties by id), and
their scores in the same order; NULL arrays when no message matches.';

-- Over 100 lines: one statement over the candidates (each list's spread, the two fusions, the neighbour
-- evidence); split into functions, the lists would be unnested and grouped again for each.
create or replace function agentmem_private.fuse_lists(
    p_fusion text,
    p_vector_ids uuid[],
    p_vector_distances double precision[],
    p_text_ids uuid[],
    p_text_scores double precision[],
    p_bm25_ids uuid[],
    p_bm25_scores double precision[],
    p_rrf_k int,
    p_k int,
    p_neighbour_weight double precision default 0,
    p_takers uuid[] default null,
    p_givers uuid[] default null
) returns table (id uuid, vector_rank int, text_rank int, score double precision)
language sql
immutable
security invoker
-- At most p_k rows (a search's k, often 10): the planner's estimate.
rows 10
set search_path = pg_catalog, agentmem, pg_temp
as $$
    with listed as (
        select v.id, v.r::int as vr, null::int as tr, null::int as br, 1 - v.d as xv, null::float8 as xt, null::float8 as xb
        from rows from (pg_catalog.unnest(p_vector_ids), pg_catalog.unnest(p_vector_distances)) with ordinality as v (id, d, r)
        union all
        select t.id, null, t.r::int, null, null, t.s, null
        from rows from (pg_catalog.unnest(p_text_ids), pg_catalog.unnest(p_text_scores)) with ordinality as t (id, s, r)
        union all
        select b.id, null, null, b.r::int, null, null, b.s
        from rows from (pg_catalog.unnest(p_bm25_ids), pg_catalog.unnest(p_bm25_scores)) with ordinality as b (id, s, r)
    ),

    -- the candidates: every id of any list, its rank and value in each
    per_id as (
        select
            l.id, pg_catalog.min(l.vr) as vr, pg_catalog.min(l.tr) as tr, pg_catalog.min(l.br) as br,
            pg_catalog.max(l.xv) as xv, pg_catalog.max(l.xt) as xt, pg_catalog.max(l.xb) as xb
        from listed as l
        group by l.id
    ),

    -- 'zscore': each list's values over the nc candidates, a candidate the
    -- list did not return taking what it can have there: 0 for the words (no
    -- word of the query); for the vector cv, the least similarity of the
    -- list's own less the mean gap between its own (where the next one down
    -- would be: so that its weakest still counts, and a recency or use
    -- weight, which multiplies, can still lift it). From each list's own
    -- values: how many, their sum and sum of squares (summed in the list's
    -- order, so that one search gives one score to the last bit), least and
    -- greatest.
    lists as (
        select
            v.n as nv, v.s as sv, v.q as qv, v.lo as minv, v.hi as maxv, v.lo - (v.hi - v.lo) / greatest(v.n, 1) as cv,
            t.n as nt, t.s as st, t.q as qt, t.lo as mint, t.hi as maxt,
            b.n as nb, b.s as sb, b.q as qb, b.lo as minb, b.hi as maxb
        from
            (
                select
                    pg_catalog.count(1 - x.d)::float8 as n, pg_catalog.sum(1 - x.d) as s,
                    pg_catalog.sum((1 - x.d) * (1 - x.d)) as q, pg_catalog.min(1 - x.d) as lo, pg_catalog.max(1 - x.d) as hi
                from pg_catalog.unnest(p_vector_distances) as x (d)
            ) as v,
            (
                select
                    pg_catalog.count(x.s)::float8 as n, pg_catalog.sum(x.s) as s, pg_catalog.sum(x.s * x.s) as q,
                    pg_catalog.min(x.s) as lo, pg_catalog.max(x.s) as hi
                from pg_catalog.unnest(p_text_scores) as x (s)
            ) as t,
            (
                select
                    pg_catalog.count(x.s)::float8 as n, pg_catalog.sum(x.s) as s, pg_catalog.sum(x.s * x.s) as q,
                    pg_catalog.min(x.s) as lo, pg_catalog.max(x.s) as hi
                from pg_catalog.unnest(p_bm25_scores) as x (s)
            ) as b
    ),

    counted as (
        select p.*, pg_catalog.count(*) over () as nc
        from per_id as p
    ),

    -- each list's standard deviation over the candidates (its mean's square
    -- taken from the mean of squares), NULL where all its values are equal:
    -- tested exactly, not by the deviation, whose rounding is not 0 (the
    -- vector's floor then equals its values; the words' floor, 0, is a value
    -- where a candidate is not the list's)
    deviation as (
        select
            c.id, c.vr, c.tr, c.br, c.xv, c.xt, c.xb, l.cv,
            case when l.minv < l.maxv then pg_catalog.sqrt(greatest(
                (l.qv + (c.nc - l.nv) * l.cv * l.cv) / c.nc - pg_catalog.power((l.sv + (c.nc - l.nv) * l.cv) / c.nc, 2), 0
            )) end as dv,
            case when l.mint < l.maxt or (l.nt < c.nc and l.maxt <> 0) then
                pg_catalog.sqrt(greatest(l.qt / c.nc - pg_catalog.power(l.st / c.nc, 2), 0))
            end as dt,
            case when l.minb < l.maxb or (l.nb < c.nc and l.maxb <> 0) then
                pg_catalog.sqrt(greatest(l.qb / c.nc - pg_catalog.power(l.sb / c.nc, 2), 0))
            end as db
        from counted as c
        cross join lists as l
    ),

    base as materialized (
        select
            d.id,
            d.vr,
            least(d.tr, d.br) as tr,
            case when p_fusion = 'rrf' then
                -- the sum over the lists holding it of 1 / (rrf_k + its rank)
                coalesce(1.0::float8 / (p_rrf_k + d.vr), 0) + coalesce(1.0::float8 / (p_rrf_k + d.tr), 0)
                + coalesce(1.0::float8 / (p_rrf_k + d.br), 0)
            else
                -- the sum of its standardised values up to one constant: over
                -- the lists holding it, (value - the floor) / deviation, 0 or
                -- more; a list that cannot tell the candidates apart (all its
                -- values equal: every candidate its own, or only one) gives
                -- each of its own 1
                case when d.xv is null then 0 when d.dv > 0 then (d.xv - d.cv) / d.dv else 1 end
                + case when d.xt is null then 0 when d.dt > 0 then d.xt / d.dt else 1 end
                + case when d.xb is null then 0 when d.db > 0 then d.xb / d.db else 1 end
            end as score
        from deviation as d
    ),

    -- neighbour evidence: each taker gains p_neighbour_weight times the
    -- fused scores of its givers
    bonus as (
        select n.taker, pg_catalog.sum(b.score order by n.giver) as gift
        from rows from (pg_catalog.unnest(p_takers), pg_catalog.unnest(p_givers)) as n (taker, giver)
        inner join base as b on b.id = n.giver
        group by n.taker
    )

    select b.id, b.vr, b.tr, b.score + coalesce(p_neighbour_weight * n.gift, 0)
    from base as b
    left join bonus as n on n.taker = b.id
    order by 4 desc, 2 nulls last, 3, 1
    limit p_k
$$;

comment on function agentmem_private.fuse_lists(
    text, uuid[], double precision[], uuid[], double precision[], uuid[], double precision[], int, int, double precision,
    uuid[], uuid[]
) is
'Internal: search_messages'' fusion of its three ranked lists: the vector (ids and cosine distances), the
words by ts_rank and by BM25 (ids and scores); any may be NULL or empty. The candidates are the ids of
any list. p_fusion ''rrf'': score = the sum over the lists holding a candidate of 1 / (p_rrf_k + its
rank). ''zscore'': each list''s values standardised over the candidates (a candidate the list did not
return taking 0 for the words; for the vector, the vector list''s least similarity less the mean gap
between its similarities) and summed; up to a
constant, the sum over the lists holding it of (value - that floor) / the list''s standard deviation (0
or more; a list whose values are all equal gives each of its own 1). Neighbour evidence: the candidate p_takers[i] gains
p_neighbour_weight times the score of the candidate p_givers[i]. The p_k best, best first, ties by
vector rank, then words rank; text_rank is the better of the two words ranks.';

create or replace function agentmem_private.check_fusion(p_fusion text)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_fusion is null or p_fusion not in ('zscore', 'rrf') then
        raise exception 'fusion must be ''zscore'' or ''rrf'', got %', coalesce(pg_catalog.quote_literal(pg_catalog.left(p_fusion, 40)), 'NULL')
        using
            errcode = 'AM020',
            detail = 'It chooses how a search''s lists (vector; words by BM25 and ts_rank) are fused: by their '
            || 'standardised scores (''zscore'') or by reciprocal rank (''rrf'', with rrf_k).',
            hint = 'Leave it out for ''zscore'' (the default, measured on LoCoMo: bench/results/hybrid.md).';
    end if;
end
$$;

comment on function agentmem_private.check_fusion(text) is
'Internal: AM020 unless fusion is ''zscore'' or ''rrf'' (NULL refused).';
