-- Semantic facts: one current fact per (user, subject) slot and model, merged
-- when a near-duplicate arrives, replaced (with history) when contradicted.

-- Signatures and result types of older installs (before validity periods).
drop function if exists agentmem.upsert_fact(text, text, text, vector, uuid[], text, double precision);
drop function if exists agentmem.recall_facts(text, vector, int, text, text, int, int);
drop function if exists agentmem.fact_history(uuid);
do $$
begin
    if exists (
        select from pg_catalog.pg_proc as p
        where
            p.oid = pg_catalog.to_regprocedure('agentmem.fact_history(anycompatible)')
            and not 'valid_to' = any(p.proargnames)
    ) then
        drop function agentmem.fact_history(anycompatible);
    end if;
end
$$;
drop function if exists agentmem_private.text_match_facts(text, text, text, tsquery, int);

create or replace function agentmem_private.enqueue_fact_jobs(
    p_tenant text,
    p_fact_id uuid,
    p_fact text,
    p_model text,
    p_has_vector boolean,
    p_payload jsonb
) returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_models text[] := agentmem_private.embedding_job_models(p_tenant, p_model, p_has_vector);
begin
    if pg_catalog.cardinality(v_models) > 0 then
        -- The fact's own model first: the payload goes to its job.
        perform agentmem_private.enqueue_embedding_jobs(
            p_tenant, 'fact', array[p_fact_id], array[p_fact],
            array(select p_model where not p_has_vector union all select m from pg_catalog.unnest(v_models) as m where m <> p_model),
            p_payload
        );
    end if;
end
$$;

comment on function agentmem_private.enqueue_fact_jobs(text, uuid, text, text, boolean, jsonb) is
'Internal: queue the embedding jobs of a fact upsert_fact wrote: in its model when it came without a
vector (p_payload: the version to compare with), in every model the tenant is being re-embedded into.';

create or replace function agentmem_private.check_fact_subject(p_subject text)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if agentmem_private.is_blank(p_subject) then
        raise exception 'subject must be a non-empty text'
        using errcode = 'AM020', hint = 'A subject names the slot a fact fills, e.g. home_city or diet.';
    end if;
    if pg_catalog.length(pg_catalog.btrim(p_subject)) > 200 then
        raise exception 'subject is % characters long; the limit is 200', pg_catalog.length(pg_catalog.btrim(p_subject))
        using errcode = 'AM021', hint = 'A subject is a short key, not a sentence.';
    end if;
end
$$;

comment on function agentmem_private.check_fact_subject(text) is
'Internal: AM020 for a NULL or blank fact subject, AM021 for one over 200 characters (trimmed).';

create or replace function agentmem_private.check_fact_text(p_fact text)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if agentmem_private.is_blank(p_fact) then
        raise exception 'fact must be a non-empty text'
        using errcode = 'AM020', hint = 'Pass one standalone statement, e.g. "The user lives in Lyon."';
    end if;
    if pg_catalog.length(p_fact) > 4000 then
        raise exception 'fact is % characters long; the limit is 4000', pg_catalog.length(p_fact)
        using errcode = 'AM021', hint = 'Split it into several standalone facts.';
    end if;
end
$$;

comment on function agentmem_private.check_fact_text(text) is
'Internal: AM020 for a NULL or blank fact, AM021 for one over 4,000 characters.';

-- Over 100 lines: one write under the slot's lock, whose outcomes (inserted, deferred, merged,
--   contradicted and replaced) are branches reading the one row locked at the top; split, the lock and the
--   row would have to travel between functions.
create or replace function agentmem.upsert_fact(
    user_id text,
    subject text,
    fact text,
    embedding vector default null,
    source_message_ids uuid[] default '{}',
    model text default null,
    merge_threshold double precision default 0.92,
    valid_from timestamptz default null,
    valid_to timestamptz default null
) returns table (fact_id uuid, action text, similarity real)
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_model text := coalesce(upsert_fact.model, agentmem_private.default_model());
    v_subject text := pg_catalog.btrim(upsert_fact.subject);
    v_sources uuid[];
    v_old agentmem.facts;
    v_similarity real;
    v_payload jsonb;
    v_from timestamptz := upsert_fact.valid_from;
begin
    perform agentmem_private.check_user_id(upsert_fact.user_id);
    perform agentmem_private.check_fact_subject(v_subject);
    perform agentmem_private.check_fact_text(upsert_fact.fact);
    if upsert_fact.merge_threshold is null or upsert_fact.merge_threshold = 'NaN'
        or upsert_fact.merge_threshold not between 0::float8 and 1::float8 then
        raise exception 'merge_threshold must be between 0 and 1, got %',
            coalesce(upsert_fact.merge_threshold::text, 'NULL')
        using errcode = 'AM020';
    end if;
    perform agentmem_private.check_array('source_message_ids', upsert_fact.source_message_ids, 10000);
    if pg_catalog.array_position(upsert_fact.source_message_ids, null) is not null then
        raise exception 'source_message_ids contains NULL'
        using errcode = 'AM020', hint = 'Pass the ids of the messages the fact was extracted from.';
    end if;
    -- No vector: the fact is stored at once and queued for the workers; its
    -- merge or contradiction check runs when the vector arrives.
    if upsert_fact.embedding is null then
        perform agentmem.get_model(v_model);
    else
        perform agentmem_private.check_embedding(v_model, upsert_fact.embedding);
    end if;
    v_sources := array(select distinct s from pg_catalog.unnest(coalesce(upsert_fact.source_message_ids, '{}')) as s order by s);
    -- When it became true: as given, else when its latest source message
    -- happened, else now.
    if v_from is null then
        select pg_catalog.max(m.occurred_at) into v_from
        from agentmem.messages as m
        where m.tenant_id = v_tenant and m.message_id = any(v_sources);
        v_from := coalesce(v_from, pg_catalog.now());
    end if;
    if not pg_catalog.isfinite(v_from) or not coalesce(pg_catalog.isfinite(upsert_fact.valid_to), true)
        or upsert_fact.valid_to <= v_from then
        raise exception 'the validity period [%, %) is not a period of time', v_from, coalesce(upsert_fact.valid_to::text, 'open')
        using
            errcode = 'AM020',
            detail = 'valid_from and valid_to must be finite, and valid_to (NULL: still true) after valid_from.',
            hint = 'Pass when the fact became true (valid_from) and, if it no longer is, when it stopped (valid_to).';
    end if;

    -- The user's lock (shared) first: forget_user waits for this write.
    perform agentmem_private.lock_user(v_tenant, upsert_fact.user_id, false);
    -- Serialise writers of one slot: two sessions upserting the same fact at
    -- once must leave one row, and a merge must see the other's sources.
    perform pg_catalog.pg_advisory_xact_lock(
        pg_catalog.hashtextextended(
            pg_catalog.format(
                'agentmem.fact/%s/%s/%s/%s/%s', pg_catalog.length(v_tenant), v_tenant, pg_catalog.length(upsert_fact.user_id),
                upsert_fact.user_id, pg_catalog.lower(v_subject)
            ), 5
        )
    );

    select f.* into v_old
    from agentmem.facts as f
    where
        f.tenant_id = v_tenant and f.user_id = upsert_fact.user_id
        and pg_catalog.lower(f.subject) = pg_catalog.lower(v_subject) and f.model = v_model
    for update;

    if not found then
        insert into agentmem.facts as f (
            tenant_id, user_id, subject, fact, model, embedding, source_message_ids, valid_from, valid_to
        )
        values (
            v_tenant, upsert_fact.user_id, v_subject, upsert_fact.fact, v_model, upsert_fact.embedding, v_sources,
            v_from, upsert_fact.valid_to
        )
        returning f.fact_id into upsert_fact.fact_id;
        perform agentmem_private.enqueue_fact_jobs(v_tenant, upsert_fact.fact_id, upsert_fact.fact, v_model,
            upsert_fact.embedding is not null, null);
        action := 'inserted';
        similarity := null;
        return next;
        return;
    end if;

    if upsert_fact.embedding is null then
        -- Deferred: the new text replaces the row's now (found by words at
        -- once); what it is compared with when its vector comes is the last
        -- embedded version (kept by the job while rewrites pile up).
        if v_old.embedding is not null then
            v_payload := pg_catalog.jsonb_build_object(
                'prev_subject', v_old.subject, 'prev_fact', v_old.fact, 'prev_sources', pg_catalog.to_jsonb(v_old.source_message_ids),
                'prev_valid_from', v_old.valid_from, 'prev_valid_to', v_old.valid_to,
                'prev_recorded_at', v_old.updated_at, 'prev_embedding', v_old.embedding::text,
                'merge_threshold', upsert_fact.merge_threshold, 'new_sources', pg_catalog.to_jsonb(v_sources)
            );
        else
            select j.payload || pg_catalog.jsonb_build_object('new_sources', pg_catalog.to_jsonb(array(
                select distinct s from pg_catalog.unnest(
                    array(select pg_catalog.jsonb_array_elements_text(j.payload -> 'new_sources'))::uuid [] || v_sources
                ) as s order by s
            )))
            into v_payload
            from agentmem.embedding_jobs as j
            where j.tenant_id = v_tenant and j.fact_id = v_old.fact_id and j.model = v_model and j.payload is not null;
        end if;
        update agentmem.facts as f
        set
            subject = v_subject,
            fact = upsert_fact.fact,
            embedding = null,
            source_message_ids = array(
                select distinct s from pg_catalog.unnest(f.source_message_ids || v_sources) as s order by s
            ),
            valid_from = v_from,
            valid_to = upsert_fact.valid_to,
            updated_at = pg_catalog.now()
        where f.tenant_id = v_tenant and f.fact_id = v_old.fact_id;
        perform agentmem_private.enqueue_fact_jobs(v_tenant, v_old.fact_id, upsert_fact.fact, v_model, false, v_payload);
        fact_id := v_old.fact_id;
        action := 'pending';
        similarity := null;
        return next;
        return;
    end if;

    if v_old.embedding is null then
        -- A vector onto a fact still waiting for its own: merged into it
        -- (newest wording, all sources); its queued job is dropped.
        delete from agentmem.embedding_jobs as j
        where j.tenant_id = v_tenant and j.fact_id = v_old.fact_id and j.model = v_model;
        update agentmem.facts as f
        set
            subject = v_subject,
            fact = upsert_fact.fact,
            embedding = upsert_fact.embedding,
            source_message_ids = array(
                select distinct s from pg_catalog.unnest(f.source_message_ids || v_sources) as s order by s
            ),
            valid_from = least(f.valid_from, v_from),
            valid_to = upsert_fact.valid_to,
            updated_at = pg_catalog.now()
        where f.tenant_id = v_tenant and f.fact_id = v_old.fact_id;
        perform agentmem_private.enqueue_fact_jobs(v_tenant, v_old.fact_id, upsert_fact.fact, v_model, true, null);
        fact_id := v_old.fact_id;
        action := 'merged';
        similarity := null;
        return next;
        return;
    end if;

    v_similarity := (1::float8 - agentmem_private.cosine_distance(v_old.embedding, upsert_fact.embedding))::real;
    fact_id := v_old.fact_id;
    similarity := v_similarity;
    -- A NaN similarity (a degenerate vector stored before check_embedding
    -- refused them) never merges: NaN >= x is true in PostgreSQL.
    if v_similarity <> 'NaN' and v_similarity >= upsert_fact.merge_threshold then
        -- The same fact said again: keep one row, newest wording, all sources.
        update agentmem.facts as f
        set
            fact = upsert_fact.fact,
            embedding = upsert_fact.embedding,
            source_message_ids = array(
                select distinct s from pg_catalog.unnest(f.source_message_ids || v_sources) as s order by s
            ),
            valid_from = least(f.valid_from, v_from),
            valid_to = upsert_fact.valid_to,
            updated_at = pg_catalog.now()
        where f.tenant_id = v_tenant and f.fact_id = v_old.fact_id;
        action := 'merged';
    else
        -- A contradiction: the new fact fills the slot, the old one goes to
        -- the history with its own sources (and lives only as long as they do),
        -- its validity closed where the new one begins. A new fact that began
        -- no later than the old one would overlap it: refused.
        if upsert_fact.valid_from is null and v_from <= v_old.valid_from then
            -- a start nobody gave (its sources', or now in the transaction
            -- that stored the old one): just after the old one's
            v_from := v_old.valid_from + interval '1 microsecond';
        end if;
        if v_from <= v_old.valid_from then
            raise exception 'the new fact about % begins (%) no later than the one it contradicts (%)',
                v_subject, v_from, v_old.valid_from
            using
                errcode = 'AM032',
                detail = 'One subject holds one value at a time: the periods of a subject''s facts never overlap.',
                hint = 'Pass valid_from, when the new fact became true, after the current one''s valid_from.';
        end if;
        insert into agentmem.fact_history as h (
            tenant_id, fact_id, user_id, subject, fact, source_message_ids, valid_from, valid_to, recorded_at
        )
        values (
            v_tenant, v_old.fact_id, v_old.user_id, v_old.subject, v_old.fact,
            v_old.source_message_ids, v_old.valid_from, least(coalesce(v_old.valid_to, v_from), v_from),
            v_old.updated_at
        );
        update agentmem.facts as f
        set
            subject = v_subject,
            fact = upsert_fact.fact,
            embedding = upsert_fact.embedding,
            source_message_ids = v_sources,
            valid_from = v_from,
            valid_to = upsert_fact.valid_to,
            updated_at = pg_catalog.now()
        where f.tenant_id = v_tenant and f.fact_id = v_old.fact_id;
        action := 'replaced';
    end if;
    perform agentmem_private.enqueue_fact_jobs(v_tenant, v_old.fact_id, upsert_fact.fact, v_model, true, null);
    return next;
end
$$;

comment on function agentmem.upsert_fact(
    text, text, text, vector, uuid[], text, double precision, timestamptz, timestamptz
) is
'Store a fact about a user: insert, merge a near-duplicate, or replace a contradiction.
A user has one current fact per subject (case-insensitive) and model. When that slot
already holds a fact whose cosine similarity to the new one is at or above
merge_threshold (default 0.92: paraphrases of one statement), the row is kept, takes
the new wording and the union of both source lists ("merged"). Below it, the new fact
is a contradiction: it replaces the text and sources, and the old text goes to
agentmem.fact_history, which keeps it only as long as one of its source messages lives
("replaced").
valid_from / valid_to: when the fact was true in the world, [valid_from, valid_to), valid_to NULL while
it still is. valid_from defaults to when its latest source message happened (occurred_at), else now.
A merge keeps the earlier valid_from and takes the new valid_to; a replacement closes the old fact''s
validity where the new one begins (its valid_to: the new valid_from, or its own if earlier) and
refuses (AM032) a valid_from given no later than that of the fact it contradicts, which would overlap it
(a defaulted one is moved to 1 microsecond after it).
Both finite, valid_to after valid_from (AM020). Concurrent calls for one slot are serialised by an advisory lock, so they
leave one row. Returns the fact id, the action and the similarity to the previous text.
embedding => NULL (the default: leave it out): the fact is stored at once (found by words) and queued for the embedding workers.
Into an empty slot it is "inserted"; onto an embedded fact it is "pending": the new text and the
union of the sources are stored now, and the near-duplicate merge or contradiction check runs when
its vector arrives (a contradiction then moves the previous version to fact_history, its validity
closed where the new one begins, and keeps the new sources only; a merge keeps the earlier valid_from). Until then a search by meaning does not find the fact. A write with a vector onto
a fact still waiting for its own is merged into it.
Raises AM020 for an empty or blank (whitespace only) user, subject or fact, NULL source ids,
source_message_ids not one-dimensional from index 1 or over 10,000 ids, AM021 for a subject over
200 or a fact over 4,000 characters, AM010/AM011 for a bad embedding or model.
Takes the user''s erasure lock shared (see forget_user).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem_private.fact_window_check(p_since timestamptz, p_until timestamptz, p_alias text)
returns text
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- The one place a fact's time window is written: recall_facts passes it to
    -- the vector search (agentmem_private.vector_search's row_check) and the
    -- words branch reads it.
    select case when p_since is not null or p_until is not null then pg_catalog.format(
        ' and (pg_catalog.tstzrange(%3$I.valid_from, %3$I.valid_to) && pg_catalog.tstzrange(%1$L::timestamptz, %2$L::timestamptz)'
        ' or exists (select from agentmem.fact_history as fh where fh.tenant_id = %3$I.tenant_id'
        ' and fh.fact_id = %3$I.fact_id and fh.change = ''replaced'' and pg_catalog.tstzrange(fh.valid_from, fh.valid_to)'
        ' && pg_catalog.tstzrange(%1$L::timestamptz, %2$L::timestamptz))) ',
        p_since, p_until, p_alias
    ) else ' ' end
$$;

comment on function agentmem_private.fact_window_check(timestamptz, timestamptz, text) is
'Internal: the SQL condition (on p_alias, a row of the facts table) that a fact has a version, current or
replaced, true at some time in [p_since, p_until) (either NULL: unbounded); a blank when both are NULL.';

create or replace function agentmem_private.text_match_facts(
    p_tenant text,
    p_user_id text,
    p_model text,
    p_query tsquery,
    p_k int,
    p_since timestamptz default null,
    p_until timestamptz default null
) returns table (fact_id uuid, text_rank int)
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    return query execute
    'select r.fact_id, (pg_catalog.row_number() over (order by r.score desc, r.fact_id))::int '
    'from (select f.fact_id, pg_catalog.ts_rank(f.fact_tsv, $4) as score '
    '      from agentmem.facts as f '
    '      where f.tenant_id = $1 and f.user_id = $2 and f.model = $3 and f.fact_tsv @@ $4 '
    || agentmem_private.fact_window_check(p_since => p_since, p_until => p_until, p_alias => 'f')
    || '      order by 2 desc, 1 limit $5) as r '
    'order by 2'
    using p_tenant, p_user_id, p_model, p_query, p_k;
end
$$;

comment on function agentmem_private.text_match_facts(text, text, text, tsquery, int, timestamptz, timestamptz) is
'Internal: the full-text branch of recall_facts. The user''s p_k facts of one model best matching
p_query (ts_rank on facts.fact_tsv, GIN index), with their rank (1 = best); with a window, only facts
with a version true in it (agentmem_private.fact_window_check).';

-- Over 100 lines: the two branches of a hybrid search and their fusion, each read into variables first
--   (Citus refuses a nested distributed read), then the versions true in the time window: steps of one
--   query, in order.
create or replace function agentmem.recall_facts(
    user_id text,
    query_embedding vector default null,
    k int default 5,
    model text default null,
    query_text text default null,
    candidate_pool int default 60,
    rrf_k int default 60,
    since timestamptz default null,
    until timestamptz default null,
    as_of timestamptz default null,
    use_boost real default null
) returns table (
    fact_id uuid,
    subject text,
    fact text,
    similarity real,
    source_message_ids uuid[],
    updated_at timestamptz,
    vector_rank int,
    text_rank int,
    score double precision,
    valid_from timestamptz,
    valid_to timestamptz
)
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_model text := coalesce(recall_facts.model, agentmem_private.default_model());
    v_dim int;
    v_query tsquery;
    v_vec_ids uuid[];
    v_vec_similarities real[];
    v_txt_ids uuid[];
    v_pool int := greatest(recall_facts.candidate_pool, recall_facts.k);
    v_since timestamptz := coalesce(recall_facts.as_of, recall_facts.since);
    v_until timestamptz := coalesce(recall_facts.as_of + interval '1 microsecond', recall_facts.until);
    v_boost float8;
    v_boost_ids uuid[];
    v_boost_factors float8[];
    v_ids uuid[];
    v_vector_ranks int[];
    v_text_ranks int[];
    v_scores float8[];
begin
    perform agentmem_private.check_user_id(recall_facts.user_id);
    perform agentmem_private.check_range('k', recall_facts.k, 1, 100);
    perform agentmem_private.check_window(recall_facts.since, recall_facts.until);
    if recall_facts.as_of is not null and (recall_facts.since is not null or recall_facts.until is not null) then
        raise exception 'as_of and since / until are two ways of asking when: pass one'
        using
            errcode = 'AM020',
            hint = 'as_of => t asks what was true at t; since / until what was true at some time between.';
    end if;
    if not coalesce(pg_catalog.isfinite(recall_facts.as_of), true) then
        raise exception 'as_of must be a finite time, got %', recall_facts.as_of
        using errcode = 'AM020';
    end if;
    v_dim := agentmem_private.check_search_query(
        'recall_facts', v_model, recall_facts.query_embedding, recall_facts.query_text, recall_facts.candidate_pool, recall_facts.rrf_k
    );
    v_boost := agentmem_private.use_boost_weight(v_tenant, recall_facts.use_boost);
    v_query := agentmem_private.text_query(recall_facts.query_text);
    if v_query is null and recall_facts.query_embedding is null then
        raise notice 'recall_facts: query_text holds no searchable word, so nothing was searched'
        using
            detail = 'Blank text, punctuation and stop words of the text search configuration are not indexed.',
            hint = 'Search with other words, or pass query_embedding as well.';
        return;
    end if;

    -- Each branch's ranked ids first, into variables: on a Citus cluster a
    -- statement that both reads a distributed table and calls a function that
    -- reads one is sent whole to a worker, where the nested query fails.
    if recall_facts.query_embedding is not null then
        select
            pg_catalog.array_agg(n.id order by n.distance, n.id),
            pg_catalog.array_agg((1 - n.distance)::real order by n.distance, n.id)
        into v_vec_ids, v_vec_similarities
        from agentmem_private.vector_search(
            table_name => 'facts', id_column => 'fact_id', tenant_id => v_tenant, model => v_model, dimension => v_dim,
            query_embedding => recall_facts.query_embedding,
            k => case when v_query is null and v_boost is null then recall_facts.k else v_pool end,
            scope => agentmem_private.vector_search_scope(
                table_name => 'facts', tenant_id => pg_catalog.quote_literal(v_tenant),
                model => pg_catalog.quote_literal(v_model), user_id => pg_catalog.quote_literal(recall_facts.user_id)
            ),
            -- a version of the fact true in the window, checked on every row read
            row_check => nullif(agentmem_private.fact_window_check(p_since => v_since, p_until => v_until, p_alias => 'e'), ' '),
            static_scan => v_since is null and v_until is null, user_id => recall_facts.user_id
        ) as n;
    end if;
    if v_query is not null then
        select pg_catalog.array_agg(x.fact_id order by x.text_rank) into v_txt_ids
        from agentmem_private.text_match_facts(
            v_tenant, recall_facts.user_id, v_model, v_query,
            case when recall_facts.query_embedding is null and v_boost is null then recall_facts.k else v_pool end,
            v_since, v_until
        ) as x;
    end if;

    -- The use boost: each candidate's factor (agentmem_private.use_boost_factor), read first.
    if v_boost is not null then
        select
            pg_catalog.array_agg(f.fact_id),
            pg_catalog.array_agg(agentmem_private.use_boost_factor(v_boost, f.last_used_at, f.created_at, f.use_count, pg_catalog.now()))
        into v_boost_ids, v_boost_factors
        from agentmem.facts as f
        where f.tenant_id = v_tenant and f.fact_id = any(coalesce(v_vec_ids, '{}') || coalesce(v_txt_ids, '{}'));
        v_boost_ids := coalesce(v_boost_ids, '{}');
    end if;
    -- Fused by reciprocal rank: score = sum over the branches of 1 / (rrf_k + rank);
    -- with one branch, its order (times the use boost's factor when on: agentmem_private.boost_ranks).
    -- Fused once, into variables: the rows returned and the use recorded come from the one fusion.
    select
        pg_catalog.array_agg(b.id), pg_catalog.array_agg(b.vector_rank), pg_catalog.array_agg(b.text_rank),
        pg_catalog.array_agg(b.score)
    into v_ids, v_vector_ranks, v_text_ranks, v_scores
    from agentmem_private.boost_ranks(
        v_vec_ids, v_txt_ids, recall_facts.rrf_k, recall_facts.k, v_boost_ids, v_boost_factors
    ) as b;
    -- With a window, each fact in the version true in it: the current one
    -- when it is, else the latest replaced one that is.
    return query
    select
        f.fact_id, coalesce(v.subject, f.subject), coalesce(v.fact, f.fact), v_vec_similarities[u.vector_rank],
        coalesce(v.source_message_ids, f.source_message_ids), f.updated_at,
        u.vector_rank, u.text_rank, u.score,
        coalesce(v.valid_from, f.valid_from), case when v.fact is null then f.valid_to else v.valid_to end
    from rows from (
        pg_catalog.unnest(v_ids), pg_catalog.unnest(v_vector_ranks), pg_catalog.unnest(v_text_ranks),
        pg_catalog.unnest(v_scores)
    ) as u (id, vector_rank, text_rank, score)
    inner join agentmem.facts as f on f.tenant_id = v_tenant and f.fact_id = u.id
    left join lateral (
        select h.subject, h.fact, h.source_message_ids, h.valid_from, h.valid_to
        from agentmem.fact_history as h
        where
            (v_since is not null or v_until is not null)
            and not pg_catalog.tstzrange(f.valid_from, f.valid_to) && pg_catalog.tstzrange(v_since, v_until)
            and h.tenant_id = v_tenant and h.fact_id = f.fact_id and h.change = 'replaced'
            and pg_catalog.tstzrange(h.valid_from, h.valid_to) && pg_catalog.tstzrange(v_since, v_until)
        order by h.valid_from desc
        limit 1
    ) as v on true
    order by u.score desc, u.vector_rank nulls last, u.text_rank, f.fact_id;
    -- Use recorded: the ids returned (agentmem_private.record_use).
    perform agentmem_private.record_use(v_tenant, 'fact', recall_facts.user_id, v_ids);
end
$$;

comment on function agentmem.recall_facts(
    text, vector, int, text, text, int, int, timestamptz, timestamptz, timestamptz, real
) is
'The user''s facts best matching a query embedding, a query text or both, best first, with their sources.
Searches the current tenant and one model''s facts only. query_embedding only: the most similar facts,
by the vector search of search_messages (an exact scan up to agentmem.exact_search_max_rows facts of
the user, above it the tenant''s own HNSW index when a DBA built one, else the model''s, with iterative
scans, so a small user among many still gets k rows).
query_text only (e.g. from psql): full-text search of subject and fact (GIN index, ts_rank, any of
the text''s words, operators never syntax). Both (hybrid): each branch''s best candidate_pool facts
(at least k) fused by reciprocal rank, score = 1 / (rrf_k + vector_rank) + 1 / (rrf_k + text_rank).
Neither: AM020. A text with no searchable word falls back to the vector branch when there is an
embedding, else returns no rows with a NOTICE. similarity is NULL unless the vector branch found the
fact; vector_rank / text_rank are NULL where a branch did not find it.
Time: each row carries valid_from / valid_to, when the fact was true in the world (valid_to NULL: still
true). as_of => t: only facts true at t, each in the version true then (valid_from <= t < valid_to),
e.g. where the user lived in 2021 after moving since. since / until: facts true at some time in
[since, until) (either NULL: unbounded), each in the latest version true in it. Applied inside both
branches; a fact is found by its current text and embedding and answered in its version of then.
as_of with since / until, since after until, or an infinite as_of: AM020.
use_boost (0 to 0.5, AM020 outside; NULL: the tenant''s setting, agentmem.set_use_boost, off unless
set; 0: off): every candidate of both branches has its score multiplied by a factor between 1 and
1 + use_boost, higher for a fact used lately (halved each 7 days), created lately (halved each 30 days)
and used often; the k best come back. A factor, never a filter; off, the results are exactly those
without it. Each fact returned counts as used (use_count, last_used_at; folded in by the use job).
Raises AM020 for an empty user, k outside 1..100, candidate_pool outside 1..1,000, rrf_k outside
0..1,000; AM021 for a query_text over 100,000 characters; AM010/AM011 for a bad embedding or model.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.fact_history(fact_id anycompatible)
returns table (
    subject text,
    fact text,
    source_message_ids uuid[],
    valid_from timestamptz,
    valid_to timestamptz,
    recorded_at timestamptz,
    replaced_at timestamptz
)
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_fact_id uuid := agentmem_private.uuid_arg('fact_id', fact_history.fact_id);
begin
    if not exists (select from agentmem.facts as f where f.tenant_id = v_tenant and f.fact_id = v_fact_id) then
        raise exception 'no such fact: %', coalesce(v_fact_id::text, 'NULL')
        using errcode = 'AM030';
    end if;
    return query
    select h.subject, h.fact, h.source_message_ids, h.valid_from, h.valid_to, h.recorded_at, h.replaced_at
    from agentmem.fact_history as h
    where h.tenant_id = v_tenant and h.fact_id = v_fact_id
    order by h.valid_from, h.history_id;
end
$$;

comment on function agentmem.fact_history(anycompatible) is
'What a fact said before contradicting facts replaced it, oldest first, with the sources of each version.
Both times of each version: valid_from / valid_to, when it was true in the world; recorded_at /
replaced_at, when agentmem recorded it and when it recorded the fact that replaced it. The current
version is recall_facts''s (its valid_from, valid_to).
Entries whose source messages are all gone have been pruned. Raises AM030 for an unknown fact.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';
