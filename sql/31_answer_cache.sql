-- Answer cache: corpus versions, intents, store, lookup (exact, then semantic
-- with the guard), invalidation by source document and sweeping.

create or replace function agentmem.corpus_version()
returns bigint
language plpgsql
stable
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    -- The tenant as a value, not a call in the query: Citus routes the query
    -- to the tenant's shard only when it sees the value.
    v_tenant text := agentmem.current_tenant();
    v_version bigint;
begin
    select cv.version into v_version from agentmem.corpus_versions as cv where cv.tenant_id = v_tenant;
    return coalesce(v_version, 0);
end
$$;

comment on function agentmem.corpus_version() is
'The current tenant''s corpus version (0 until the first bump).
Only answers cached under this version are served.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem.bump_corpus_version()
returns bigint
language sql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
    insert into agentmem.corpus_versions as cv (tenant_id, version)
    values (agentmem.current_tenant(), 1)
    on conflict on constraint corpus_versions_pkey do update
        set version = cv.version + 1, updated_at = excluded.updated_at
    returning cv.version
$$;

comment on function agentmem.bump_corpus_version() is
'Start a new corpus version for the current tenant and return it.
Every answer cached under an older version stops being served at once; sweep_cache removes them later.
Call it when the documents behind the answers change as a whole (re-index, new release of the docs).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem_private.cache_intent(p_intent text)
returns agentmem.cache_intents
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_row agentmem.cache_intents;
begin
    select * into v_row from agentmem.cache_intents as ci where ci.intent = p_intent;
    if not found then
        raise exception 'unknown cache intent: %', coalesce(pg_catalog.left(p_intent, 100), 'NULL')
        using
            errcode = 'AM020',
            detail = 'Known intents: '
            || (select pg_catalog.string_agg(ci.intent, ', ' order by ci.intent) from agentmem.cache_intents as ci),
            hint = 'Use one of them, or ask the DBA to add a row to agentmem.cache_intents.';
    end if;
    return v_row;
end
$$;

comment on function agentmem_private.cache_intent(text) is
'Internal: the cache_intents row of an intent; AM020 for an unknown intent.';

create or replace function agentmem_private.cache_check_question(p_question text, p_what text default 'question')
returns text
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_norm text;
begin
    if p_question is null then
        raise exception '% is missing', p_what using errcode = 'AM020';
    end if;
    if pg_catalog.octet_length(p_question) > 4194304 then
        raise exception '% is % bytes; the cache accepts up to 4 MiB', p_what, pg_catalog.octet_length(p_question)
        using errcode = 'AM021', hint = 'Questions that long are not worth caching.';
    end if;
    v_norm := agentmem.normalize_question(p_question);
    if v_norm = '' then
        raise exception '% is empty (nothing but blanks and punctuation)', p_what
        using errcode = 'AM020', hint = 'Pass the text of the question as the user asked it.';
    end if;
    return v_norm;
end
$$;

comment on function agentmem_private.cache_check_question(text, text) is
'Internal: AM020 for a missing or empty question, AM021 over 4 MiB; returns the normalised question.';

create or replace function agentmem_private.cache_check_sources(p_source_ids text[])
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    perform agentmem_private.check_array('source_ids', p_source_ids, 1000);
    if p_source_ids is null or pg_catalog.array_position(p_source_ids, null) is not null
        or exists (select from pg_catalog.unnest(p_source_ids) as d where agentmem_private.is_blank(d)) then
        raise exception 'source_ids may not be NULL or contain NULL or blank ids'
        using errcode = 'AM020', hint = 'Pass the ids of the documents the answer was written from, or ''{}''.';
    end if;
    if exists (select from pg_catalog.unnest(p_source_ids) as d where pg_catalog.length(d) > 1000) then
        raise exception 'a source id is over 1000 characters'
        using errcode = 'AM021', hint = 'Pass the document''s id, not the document.';
    end if;
end
$$;

comment on function agentmem_private.cache_check_sources(text[]) is
'Internal: AM020 unless source_ids is a one-dimensional array of at most 1,000 ids, none NULL or blank; '
'AM021 for an id over 1,000 characters.';

create or replace function agentmem_private.cache_check_scope(p_acl_hash text, p_prompt_version text, p_llm_model text)
returns void
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_acl_hash is null or p_prompt_version is null or p_llm_model is null then
        raise exception 'acl_hash, prompt_version and llm_model may not be NULL'
        using errcode = 'AM020', hint = 'Leave them out (default '''') for a single-scope application.';
    end if;
    if pg_catalog.length(p_acl_hash) > 200 or pg_catalog.length(p_prompt_version) > 200 or pg_catalog.length(p_llm_model) > 200 then
        raise exception 'acl_hash, prompt_version and llm_model are limited to 200 characters'
        using errcode = 'AM020', hint = 'Pass a hash of the ACL, not the ACL itself.';
    end if;
end
$$;

comment on function agentmem_private.cache_check_scope(text, text, text) is
'Internal: AM020 unless acl_hash, prompt_version and llm_model are non-NULL and at most 200 characters.';

create or replace function agentmem_private.cache_nearest(
    p_tenant text,
    p_model text,
    p_dimension int,
    p_embedding vector,
    p_k int,
    p_acl_hash text,
    p_prompt_version text,
    p_llm_model text,
    p_corpus_version bigint,
    p_question_max_bytes int,
    out ids uuid[],
    out distances float8[]
)
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_exact_max int := agentmem_private.exact_search_max_rows(p_dimension);
    v_scan record;
begin
    -- A key of at most agentmem.exact_search_max_rows entries (every key of a
    -- cache of 1,000,000 entries over 1,000 tenants): counted, to one past the
    -- limit, and scanned in exact_scan's static statements, whose plans
    -- PL/pgSQL keeps (both through cache_entries_live_scope_idx, the count
    -- an index-only scan),
    -- without vector_search's EXECUTEs, planned at every call, and its SET
    -- clauses. A larger key: vector_search, which counts on and reads an HNSW index.
    v_scan := agentmem_private.exact_scan(
        query_embedding => p_embedding, table_name => 'cache_entries', tenant_id => p_tenant, model => p_model,
        user_id => null, k => p_k, count_limit => v_exact_max + 1, scan_max => v_exact_max,
        acl_hash => p_acl_hash, prompt_version => p_prompt_version, llm_model => p_llm_model,
        corpus_version => p_corpus_version, question_max_bytes => p_question_max_bytes
    );
    if v_scan.candidates <= v_exact_max then
        ids := coalesce(v_scan.ids, '{}');
        distances := coalesce(v_scan.distances, '{}');
        return;
    end if;
    select pg_catalog.array_agg(n.id order by n.distance, n.id), pg_catalog.array_agg(n.distance order by n.distance, n.id)
    into ids, distances
    from agentmem_private.vector_search(
        table_name => 'cache_entries', id_column => 'entry_id', tenant_id => p_tenant, model => p_model,
        dimension => p_dimension, query_embedding => p_embedding, k => p_k,
        scope => agentmem_private.vector_search_scope(
            table_name => 'cache_entries', tenant_id => pg_catalog.quote_literal(p_tenant),
            model => pg_catalog.quote_literal(p_model), acl_hash => pg_catalog.quote_literal(p_acl_hash),
            prompt_version => pg_catalog.quote_nullable(p_prompt_version),
            llm_model => pg_catalog.quote_nullable(p_llm_model), corpus_version => pg_catalog.quote_nullable(p_corpus_version)
        ),
        -- unexpired, not withdrawn, of a question the guard reads whole
        row_check => agentmem_private.cache_row_check(question_max_bytes => p_question_max_bytes::text),
        static_scan => true, acl_hash => p_acl_hash, prompt_version => p_prompt_version,
        llm_model => p_llm_model, corpus_version => p_corpus_version, question_max_bytes => p_question_max_bytes
    ) as n;
end
$$;

comment on function agentmem_private.cache_nearest(text, text, int, vector, int, text, text, text, bigint, int) is
'Internal: the p_k entries of one cache key nearest a question''s vector (ids and cosine distances,
nearest first), the semantic candidates of cache_lookup: entries with a vector, unexpired, not withdrawn,
of a question of at most p_question_max_bytes. A key of at most agentmem.exact_search_max_rows entries
is counted and scanned exactly by agentmem_private.exact_scan (static statements, plans kept); a larger
one goes to agentmem_private.vector_search (its HNSW path).';

drop function if exists agentmem.cache_store(text, vector, text, text[], text, text, text, text, text, text, uuid, boolean, interval);

-- Over 100 lines: the checks of a cached answer's every argument, then one insert with its guard features.
create or replace function agentmem.cache_store(
    question text,
    question_embedding vector default null,
    answer text default null,
    source_ids text[] default '{}',
    intent text default 'general',
    acl_hash text default '',
    prompt_version text default '',
    llm_model text default '',
    model text default null,
    user_id text default null,
    conversation_id anycompatible default null::uuid,
    safe_to_share boolean default false,
    ttl interval default null
) returns table (stored boolean, entry_id uuid, reason text, expires_at timestamptz)
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_conversation_id uuid := agentmem_private.uuid_arg('conversation_id', cache_store.conversation_id);
    v_model text := coalesce(cache_store.model, agentmem_private.default_model());
    v_norm text := agentmem_private.cache_check_question(cache_store.question);
    v_intent agentmem.cache_intents := agentmem_private.cache_intent(cache_store.intent);
    v_ttl interval := coalesce(cache_store.ttl, v_intent.ttl);
    v_markers text[];
    v_entry uuid;
    v_sources text[] := array(select distinct s from pg_catalog.unnest(cache_store.source_ids) as s order by s);
    v_expires timestamptz;
    v_guard record;
begin
    perform agentmem_private.cache_check_scope(cache_store.acl_hash, cache_store.prompt_version, cache_store.llm_model);
    -- No vector: stored and served by exact lookups at once, queued for the
    -- workers; semantic lookups find it once its vector has come.
    if cache_store.question_embedding is null then
        perform agentmem.get_model(v_model);
    else
        perform agentmem_private.check_embedding(v_model, cache_store.question_embedding);
    end if;
    perform agentmem_private.check_text('answer', cache_store.answer, 100000);
    if cache_store.user_id is not null then
        perform agentmem_private.check_user_id(cache_store.user_id);
    end if;
    if v_ttl <= interval '0' then
        raise exception 'ttl must be positive, got %', v_ttl
        using errcode = 'AM020', hint = 'Leave ttl out to use the intent''s TTL (' || v_intent.ttl || ').';
    end if;
    perform agentmem_private.cache_check_sources(cache_store.source_ids);
    if not coalesce(cache_store.safe_to_share, false) then
        v_markers := agentmem_private.personal_markers(cache_store.answer, cache_store.question);
        if pg_catalog.cardinality(v_markers) > 0 then
            return query select
                false, null::uuid,
                'answer looks personalised: it contains '
                || pg_catalog.array_to_string(v_markers[1:5], ', ')
                || ', not in the question; pass safe_to_share => true if it is fit for everyone',
                null::timestamptz;
            return;
        end if;
    end if;
    -- A row of a user: the user's erasure lock, shared (see forget_user).
    if cache_store.user_id is not null then
        perform agentmem_private.lock_user(v_tenant, cache_store.user_id, false);
    end if;
    v_expires := pg_catalog.now() + v_ttl;
    -- The guard's reading of the question, once here rather than at every lookup that meets it.
    v_guard := agentmem_private.entry_guard(cache_store.question);
    insert into agentmem.cache_entries as e (
        tenant_id, question, question_norm, question_key, acl_hash, corpus_version, prompt_version,
        llm_model, intent, answer, model, embedding, source_ids, user_id, conversation_id, expires_at,
        guard_version, guard_tokens, guard_features
    ) values (
        v_tenant, cache_store.question, v_norm, pg_catalog.sha256(pg_catalog.convert_to(v_norm, 'UTF8')), cache_store.acl_hash,
        agentmem.corpus_version(), cache_store.prompt_version, cache_store.llm_model, v_intent.intent,
        cache_store.answer, v_model, cache_store.question_embedding,
        v_sources,
        cache_store.user_id, v_conversation_id, v_expires,
        v_guard.guard_version, v_guard.guard_tokens, v_guard.guard_features
    )
    on conflict on constraint cache_entries_key_uq do update
        set question = excluded.question, intent = excluded.intent, answer = excluded.answer,
        guard_version = excluded.guard_version, guard_tokens = excluded.guard_tokens,
        guard_features = excluded.guard_features,
        embedding = excluded.embedding, source_ids = excluded.source_ids, user_id = excluded.user_id,
        conversation_id = excluded.conversation_id, created_at = excluded.created_at, expires_at = excluded.expires_at,
        withdrawn_at = null
    returning e.entry_id into v_entry;
    delete from agentmem.cache_entry_sources as s
    where s.tenant_id = v_tenant and s.entry_id = v_entry and s.doc_id <> all(cache_store.source_ids);
    -- One multi-row insert, the values written into it as literals
    -- (store_messages says why).
    if pg_catalog.cardinality(v_sources) > 0 then
        execute 'insert into agentmem.cache_entry_sources (tenant_id, doc_id, entry_id) values '
            || (
                select pg_catalog.string_agg(pg_catalog.format('(%L, %L, %L::uuid)', v_tenant, d.doc_id, v_entry), ', ')
                from pg_catalog.unnest(v_sources) as d (doc_id)
            )
            || ' on conflict on constraint cache_entry_sources_pkey do nothing';
    end if;
    if cache_store.question_embedding is null then
        perform agentmem_private.enqueue_embedding_jobs(
            v_tenant, 'entry', array[v_entry], array[cache_store.question], array[v_model]
        );
    else
        -- A vector now: a job still queued for an earlier store of this key is moot.
        delete from agentmem.embedding_jobs as j
        where j.tenant_id = v_tenant and j.entry_id = v_entry and j.model = v_model;
    end if;
    return query select true, v_entry, null::text, v_expires;
end
$$;

comment on function agentmem.cache_store(
    text, vector, text, text[], text, text, text, text, text, text, anycompatible, boolean, interval
) is
'Cache an answer to a question; returns whether it was stored, the entry id, or the reason it was not.
Keyed on the current tenant, acl_hash, the tenant''s corpus version, prompt_version, llm_model (the
generating model) and the normalised question: storing the same question again in the same key
replaces the answer (one entry, safe under concurrent stores) and puts a withdrawn entry back in service. TTL: ttl, else the intent''s.
Refuses (stored => false, a reason, nothing written) an answer that looks personalised: dates,
currency amounts or capitalised names that the question does not contain; safe_to_share => true
overrides. source_ids are the documents the answer was written from (see invalidate_source);
user_id and conversation_id record whose conversation it came from.
question_embedding => NULL (the default: leave it out): the entry is stored and served to exact lookups at once, and queued for the
embedding workers (the question with the model''s query prefix); semantic lookups find it once its
vector has come.
Limits: question at most 4 MiB, and only questions up to 16 kB are offered to semantic lookups (a
longer one is served by exact match only); answer (required, though declared with a default so that
question_embedding may be left out) 1 to 100,000 characters, not blank; source_ids a
one-dimensional array (from index 1) of at most 1,000 ids of 1 to 1,000 characters; acl_hash,
prompt_version, llm_model at most 200 characters; user_id NULL or the user-id rule of every function
(1 to 256 characters, not blank), so that forget_user can always erase the entry. The personal-marker
scan is linear in the answer and reads at most 16 kB of the question.
Errors: AM020 empty or blank question or answer, unknown intent, ttl <= 0, NULL or blank source id,
bad array, bad user_id, scope over 200 characters; AM021 question over 4 MiB, answer over 100,000
characters, a source id over 1,000; AM010/AM011 bad embedding (as check_embedding: also a norm that is
zero, subnormal or not finite in float32) or model.
With a user_id it takes that user''s erasure lock shared (see forget_user).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem_private.refresh_cache_guards(p_tenant text, p_entry_ids uuid[])
returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_version text := agentmem_private.guard_version();
    v_count bigint := 0;
    v_n bigint;
    v_row record;
    v_guard record;
begin
    -- One entry at a time, the values computed first (Citus routes each update to the tenant's
    -- shard). Only an entry whose stored reading is not the installed guard's: one that a
    -- concurrent cache_store wrote meanwhile is left as it is.
    for v_row in
        select e.entry_id, e.question from agentmem.cache_entries as e
        where
            e.tenant_id = p_tenant and e.entry_id = any(p_entry_ids)
            and e.guard_version is distinct from v_version
    loop
        v_guard := agentmem_private.entry_guard(v_row.question);
        update agentmem.cache_entries as e
        set guard_version = v_guard.guard_version, guard_tokens = v_guard.guard_tokens,
            guard_features = v_guard.guard_features
        where
            e.tenant_id = p_tenant and e.entry_id = v_row.entry_id
            and e.guard_version is distinct from v_version;
        get diagnostics v_n = row_count;
        v_count := v_count + v_n;
    end loop;
    return v_count;
end
$$;

comment on function agentmem_private.refresh_cache_guards(text, uuid[]) is
'Internal: work out again and store the guard''s reading (agentmem_private.entry_guard) of these entries
of the tenant whose stored reading is not the installed guard''s (guard_version() differs or is NULL);
returns how many were updated. cache_lookup calls it for a stale candidate; a DBA may call it over a
tenant''s entries after an upgrade that changed the guard, so that lookups need not.';

-- Over 100 lines: one lookup read top to bottom: the exact hit, then the nearest entries of the key
-- (agentmem_private.cache_nearest) through the guard, each outcome logged and returned where it is decided.
create or replace function agentmem.cache_lookup(
    question text,
    question_embedding vector,
    acl_hash text default '',
    prompt_version text default '',
    llm_model text default '',
    intent text default 'general',
    model text default null,
    user_id text default null
) returns table (
    hit boolean, kind text, similarity real, matched_question text, entry_id uuid, answer text,
    source_ids text[], hit_id uuid, reason text
)
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_model text := coalesce(cache_lookup.model, agentmem_private.default_model());
    v_norm text := agentmem_private.cache_check_question(cache_lookup.question);
    v_intent agentmem.cache_intents := agentmem_private.cache_intent(cache_lookup.intent);
    v_dim int;
    v_version bigint := agentmem.corpus_version();
    v_entry agentmem.cache_entries;
    v_features text[];      -- the asked question's guard features and tokens, worked out once
    v_tokens text[];
    v_cand_tokens text[];
    v_cand_features text[];
    v_guard_version text := agentmem_private.guard_version();
    v_cand record;
    v_best_entry uuid;
    v_best_similarity real;
    v_best_question text;
    v_best_guard boolean;
    v_hit_id uuid;
    v_ids uuid[];
    v_distances float8[];
begin
    perform agentmem_private.cache_check_scope(cache_lookup.acl_hash, cache_lookup.prompt_version, cache_lookup.llm_model);
    v_dim := agentmem_private.check_embedding(v_model, cache_lookup.question_embedding);
    if cache_lookup.user_id is not null then
        perform agentmem_private.check_user_id(cache_lookup.user_id);
        -- The lookup logs the user's question: the user's erasure lock, shared.
        perform agentmem_private.lock_user(v_tenant, cache_lookup.user_id, false);
    end if;
    -- 1. exact: the normalised question in the full key
    select e.* into v_entry
    from agentmem.cache_entries as e
    where
        e.tenant_id = v_tenant and e.question_key = pg_catalog.sha256(pg_catalog.convert_to(v_norm, 'UTF8'))
        and e.acl_hash = cache_lookup.acl_hash and e.corpus_version = v_version
        and e.prompt_version = cache_lookup.prompt_version and e.llm_model = cache_lookup.llm_model
        and e.expires_at > pg_catalog.now() and e.question_norm = v_norm
        and e.withdrawn_at is null
    order by e.created_at desc
    limit 1;
    if found then
        insert into agentmem.cache_hits as h (
            tenant_id, entry_id, kind, similarity, intent, question_asked, matched_question, user_id
        ) values (
            v_tenant, v_entry.entry_id, 'exact', 1, v_intent.intent, cache_lookup.question, v_entry.question,
            cache_lookup.user_id
        )
        returning h.hit_id into v_hit_id;
        perform agentmem_private.record_use(v_tenant, 'cached_answer', cache_lookup.user_id, array[v_entry.entry_id]);
        return query select
            true, 'exact'::text, 1::real, v_entry.question, v_entry.entry_id, v_entry.answer,
            v_entry.source_ids, v_hit_id, null::text;
        return;
    end if;
    -- 2. semantic: the nearest questions in the same key; the first one over the threshold that
    --    carries the same guard features is the hit
    -- A question longer than the guard reads is served by exact match only.
    if not v_intent.high_stakes and pg_catalog.octet_length(cache_lookup.question) <= agentmem_private.guard_max_bytes() then
        v_tokens := agentmem_private.guard_tokens(cache_lookup.question);
        v_features := agentmem_private.guard_features(v_tokens);
        -- The nearest questions in the key, unexpired and of at most the guard's size
        -- (agentmem_private.cache_nearest: an exact scan of a small key, counted through
        -- cache_entries_live_scope_idx; above agentmem.exact_search_max_rows entries
        -- vector_search, the tenant's own HNSW index, else the model's). Their ids first, into variables: on a Citus
        -- cluster a statement that both reads a distributed table and calls a function that
        -- reads one is sent whole to a worker, where the nested query fails.
        select n.ids, n.distances into v_ids, v_distances
        from agentmem_private.cache_nearest(
            p_tenant => v_tenant, p_model => v_model, p_dimension => v_dim,
            p_embedding => cache_lookup.question_embedding, p_k => 5,
            p_acl_hash => cache_lookup.acl_hash, p_prompt_version => cache_lookup.prompt_version,
            p_llm_model => cache_lookup.llm_model, p_corpus_version => v_version,
            p_question_max_bytes => agentmem_private.guard_max_bytes()
        ) as n;
        for v_cand in
            select
                e.entry_id, e.question, e.answer, e.source_ids, ci.threshold, ci.high_stakes,
                e.guard_version, e.guard_tokens, e.guard_features,
                (1 - n.distance)::real as similarity
            from rows from (pg_catalog.unnest(v_ids), pg_catalog.unnest(v_distances)) with ordinality as n (id, distance, nearness)
            inner join agentmem.cache_entries as e on e.tenant_id = v_tenant and e.entry_id = n.id
            inner join agentmem.cache_intents as ci on e.intent = ci.intent
            order by n.nearness
        loop
            if v_cand.high_stakes then
                continue;           -- a high-stakes entry is served from an exact match only
            end if;
            if v_cand.similarity = 'NaN' then
                continue;           -- never a hit, nor a best candidate: NaN >= x is true in PostgreSQL
            end if;
            -- The candidate's reading stored by cache_store; worked out again (and
            -- stored) when an older guard, or none, read it.
            if v_cand.guard_version is not distinct from v_guard_version then
                v_cand_tokens := v_cand.guard_tokens;
                v_cand_features := v_cand.guard_features;
            else
                v_cand_tokens := agentmem_private.guard_tokens(v_cand.question);
                v_cand_features := agentmem_private.guard_features(v_cand_tokens);
                perform agentmem_private.refresh_cache_guards(v_tenant, array[v_cand.entry_id]);
            end if;
            if agentmem_private.guard_agrees(v_features, v_tokens, v_cand_features, v_cand_tokens) then
                if v_cand.similarity >= greatest(v_intent.threshold, v_cand.threshold) then
                    insert into agentmem.cache_hits as h (
                        tenant_id, entry_id, kind, similarity, guard_passed, threshold, intent,
                        question_asked, matched_question, user_id
                    ) values (
                        v_tenant, v_cand.entry_id, 'semantic', v_cand.similarity, true, v_intent.threshold,
                        v_intent.intent, cache_lookup.question, v_cand.question, cache_lookup.user_id
                    )
                    returning h.hit_id into v_hit_id;
                    perform agentmem_private.record_use(v_tenant, 'cached_answer', cache_lookup.user_id, array[v_cand.entry_id]);
                    return query select
                        true, 'semantic'::text, v_cand.similarity, v_cand.question, v_cand.entry_id,
                        v_cand.answer, v_cand.source_ids, v_hit_id, null::text;
                    return;
                end if;
                if v_best_entry is null or not v_best_guard then
                    v_best_entry := v_cand.entry_id;
                    v_best_similarity := v_cand.similarity;
                    v_best_question := v_cand.question;
                    v_best_guard := true;
                end if;
            elsif v_best_entry is null then
                v_best_entry := v_cand.entry_id;
                v_best_similarity := v_cand.similarity;
                v_best_question := v_cand.question;
                v_best_guard := false;
            end if;
        end loop;
    end if;
    -- 3. a miss, logged with its best candidate so that lower thresholds can be priced
    insert into agentmem.cache_hits as h (
        tenant_id, entry_id, kind, similarity, guard_passed, threshold, intent, question_asked,
        matched_question, user_id
    ) values (
        v_tenant, v_best_entry, 'miss', v_best_similarity, v_best_guard, v_intent.threshold, v_intent.intent,
        cache_lookup.question, v_best_question, cache_lookup.user_id
    )
    returning h.hit_id into v_hit_id;
    return query select
        false, null::text, v_best_similarity, v_best_question, null::uuid, null::text, null::text[], v_hit_id,
        case
            when v_intent.high_stakes then 'high-stakes intent: exact matches only'
            when pg_catalog.octet_length(cache_lookup.question) > agentmem_private.guard_max_bytes()
                then 'question over 16 kB: exact matches only'
            when v_best_entry is null then 'no cached question in this scope'
            when v_best_guard then 'nearest question below the threshold'
            else 'guard: the questions differ in numbers, dates, amounts, negation or quantifiers'
        end;
end
$$;

comment on function agentmem.cache_lookup(text, vector, text, text, text, text, text, text) is
'Look a question up in the answer cache: one row, hit or miss.
1. Exact: the normalised question (normalize_question) in the full key: current tenant, acl_hash,
   the tenant''s corpus version, prompt_version, llm_model; not expired, not withdrawn (review_hit).
2. Semantic, only when exact misses and the intent is not high-stakes: the nearest cached questions in
   the same key, not withdrawn (an exact scan up to agentmem.exact_search_max_rows entries in service in the key, above it the
   tenant''s own HNSW index when a DBA built one, else the model''s); the nearest one with cosine similarity at or above the threshold
   (the larger of the asking and the cached intent''s) that passes the guard with the asked question
   (question_guard_agrees: the same question_guard_features, negation scope compared on shared words)
   is the hit. A candidate over the threshold with other numbers, dates, amounts,
   negation or quantifiers is a miss.
A question over 16 kB (16,384 bytes) is served by exact match only, and cached questions over 16 kB
are never semantic candidates: the guard reads no more. A NaN similarity is never a hit.
Every lookup is logged in cache_hits (kind exact, semantic or miss, with the best candidate of a miss).
A hit does not extend the entry''s life. Returns hit, kind, similarity, matched_question, entry_id,
answer, source_ids, hit_id (for review_hit) and, for a miss, the reason.
Limits: question at most 4 MiB (AM021); acl_hash, prompt_version, llm_model at most 200 characters;
user_id NULL or 1 to 256 characters, not blank (AM020); with a user_id it takes that user''s erasure
lock shared (see forget_user).
Errors: AM020 empty question, unknown intent, bad user_id; AM010/AM011 bad embedding or model.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem_private.unlink_cache_hits(p_tenant text, p_entry_ids uuid[])
returns void
language sql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    update agentmem.cache_hits as h
    set entry_id = null
    where h.tenant_id = p_tenant and h.entry_id = any(p_entry_ids)
$$;

comment on function agentmem_private.unlink_cache_hits(text, uuid[]) is
'Internal: clear cache_hits.entry_id of the lookups that hit these entries, before they are deleted.
No foreign key does it (migration 0021 dropped cache_hits_entry_fk: its check locked the entry at every
lookup; Citus never had it): every function that deletes cache entries calls this, or clears the
column itself.';

create or replace function agentmem_private.delete_cache_entries(p_tenant text, p_entry_ids uuid[])
returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_count bigint;
begin
    perform agentmem_private.unlink_cache_hits(p_tenant, p_entry_ids);
    delete from agentmem.cache_entries as e where e.tenant_id = p_tenant and e.entry_id = any(p_entry_ids);
    get diagnostics v_count = row_count;
    return v_count;
end
$$;

comment on function agentmem_private.delete_cache_entries(text, uuid[]) is
'Internal: delete these cache entries of the tenant, their hits unlinked first
(agentmem_private.unlink_cache_hits); returns how many were deleted.';

create or replace function agentmem.invalidate_source(doc_id text)
returns bigint
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_ids uuid[];
begin
    perform agentmem_private.check_text('doc_id', invalidate_source.doc_id, 1000);
    v_ids := array(
        select s.entry_id from agentmem.cache_entry_sources as s
        where s.tenant_id = v_tenant and s.doc_id = invalidate_source.doc_id
    );
    return agentmem_private.delete_cache_entries(v_tenant, v_ids);
end
$$;

comment on function agentmem.invalidate_source(text) is
'Remove every cached answer of the current tenant that cited the document doc_id; returns how many.
Goes through the reverse index cache_entry_sources (no scan of the cache).
doc_id: 1 to 1,000 characters, not blank (AM020/AM021).
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';

create or replace function agentmem_private.sweep_cache_of(p_tenant text, p_batch int)
returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_version bigint;
    v_ids uuid[];
begin
    select coalesce(pg_catalog.max(cv.version), 0) into v_version
    from agentmem.corpus_versions as cv where cv.tenant_id = p_tenant;
    v_ids := array(
        select x.entry_id from (
            (select d.entry_id from agentmem.cache_entries as d
                where d.tenant_id = p_tenant and d.expires_at <= pg_catalog.now()
                limit p_batch)
            union
            (select d.entry_id from agentmem.cache_entries as d
                where d.tenant_id = p_tenant and d.corpus_version < v_version
                limit p_batch)
        ) as x
        limit p_batch
    );
    return agentmem_private.delete_cache_entries(p_tenant, v_ids);
end
$$;

comment on function agentmem_private.sweep_cache_of(text, int) is
'Internal: delete up to p_batch expired or superseded entries of tenant p_tenant, as the caller
(agentmem.sweep_cache as the owner for the current tenant; apply_retention as the DBA for each tenant,
so that on Citus one role modifies the shards in its transaction).';

create or replace function agentmem.sweep_cache(batch_size int default 1000)
returns bigint
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text := agentmem.current_tenant();
begin
    perform agentmem_private.check_range('batch_size', sweep_cache.batch_size, 1, 100000);
    return agentmem_private.sweep_cache_of(v_tenant, sweep_cache.batch_size);
end
$$;

comment on function agentmem.sweep_cache(int) is
'Delete up to batch_size expired or superseded (older corpus version) entries of the current tenant; returns how many.
One bounded batch per call, so it is safe to run often (e.g. from pg_cron):
call it again while it returns batch_size. Expired and superseded entries are never served anyway.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.
Called by: the application (agentmem_app).';
