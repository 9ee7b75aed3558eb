-- Embedding jobs: text stored without a vector (embedding => NULL) is queued
-- here in the writing transaction and embedded by workers (`agentmem worker`),
-- which claim batches under a lease (FOR UPDATE SKIP LOCKED), complete them
-- with vectors checked like any embedding, or fail them (retried with
-- exponential backoff, parked as failed after the retry limit).
--
-- Who sees what. The application role never reaches the queue. Workers log in
-- as members of agentmem_worker, which may execute claim_embedding_jobs,
-- complete_embedding_jobs and fail_embedding_jobs and nothing else. Those are
-- security definer functions owned by agentmem_queue (NOLOGIN, not BYPASSRLS):
-- a second permissive policy, queue_access, lets that role alone see every
-- tenant's rows of agentmem.embedding_jobs, so that a claim can pick the oldest
-- work across tenants. Every other table it touches (the embedding cache, the
-- rows the vectors go to) it reaches only after setting the job's tenant for
-- the transaction, through the ordinary tenant_isolation policy. A worker
-- learns a job's tenant id, text and model, and nothing else.
--
-- Re-embedding: agentmem.reembed queues a tenant's rows for a second model
-- while searches keep using the first; agentmem.switch_default_model changes
-- the tenant's default once nothing is missing (AM031 before);
-- agentmem.drop_model_vectors removes the old model's rows (and, for the whole
-- installation, its indexes and registry entry). DBA functions, security
-- invoker, not granted to the application role.

create or replace function agentmem_private.embedding_max_attempts()
returns int
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select coalesce(nullif(pg_catalog.current_setting('agentmem.embedding_max_attempts', true), '')::int, 5)
$$;

comment on function agentmem_private.embedding_max_attempts() is
'Internal: how many times a job is tried before it is parked as failed: setting '
'agentmem.embedding_max_attempts, else 5.';

create or replace function agentmem_private.embedding_retry_delay(p_attempts int)
returns interval
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select least(
        coalesce(nullif(pg_catalog.current_setting('agentmem.embedding_retry_base', true), '')::interval, interval '10 seconds')
        * pg_catalog.power(2, greatest(p_attempts - 1, 0))::int,
        interval '1 hour'
    )
$$;

comment on function agentmem_private.embedding_retry_delay(int) is
'Internal: the wait before a failed job''s next try: agentmem.embedding_retry_base (default 10 seconds) '
'doubled per attempt already made, at most an hour.';

create or replace function agentmem_private.embedding_job_models(p_tenant text, p_model text, p_has_vector boolean)
returns text[]
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    -- PL/pgSQL, not SQL: every write calls it, and the statement's plan is
    -- kept for the session (a SQL function with a SET clause is planned at
    -- every call before PostgreSQL 18).
    -- A write with its vector (the common case): the re-embeddings alone,
    -- without the union (one row per model: the key is (tenant_id, model)).
    if p_has_vector then
        return array(
            select r.model from agentmem.reembeddings as r
            where r.tenant_id = p_tenant and r.from_model = p_model and r.model <> p_model
        );
    end if;
    return array(
        select p_model
        union
        select r.model from agentmem.reembeddings as r
        where r.tenant_id = p_tenant and r.from_model = p_model and r.model <> p_model
    );
end
$$;

comment on function agentmem_private.embedding_job_models(text, text, boolean) is
'Internal: the models a write of p_model must queue jobs for: p_model itself when the write brought '
'no vector, and every model the tenant is being re-embedded into from p_model (agentmem.reembed).';

create or replace function agentmem_private.enqueue_embedding_jobs(
    p_tenant text,
    p_kind text,
    p_ids uuid[],
    p_contents text[],
    p_models text[],
    p_payload jsonb default null
) returns int
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_model text;
    v_n int := 0;
begin
    if coalesce(pg_catalog.cardinality(p_models), 0) = 0 or coalesce(pg_catalog.cardinality(p_ids), 0) = 0 then
        return 0;
    end if;
    foreach v_model in array p_models loop
        -- One multi-row insert with literal values, routed to the tenant's
        -- shard on Citus (store_messages says why). A row queued again (a
        -- fact rewritten before its vector came) starts afresh, keeping the
        -- first payload: the version the vector is to be compared with.
        for v_from in 1..pg_catalog.cardinality(p_ids) by 100 loop
            execute 'insert into agentmem.embedding_jobs as j (tenant_id, model, '
                || pg_catalog.quote_ident(p_kind || '_id') || ', content, payload) values '
                || (
                    select pg_catalog.string_agg(pg_catalog.format(
                        '(%L, %L, %L::uuid, %L, %L::jsonb)', p_tenant, v_model, p_ids[g.i], p_contents[g.i],
                        case when v_model = p_models[1] then p_payload end
                    ), ', ' order by g.i)
                    from pg_catalog.generate_series(v_from, least(v_from + 99, pg_catalog.cardinality(p_ids))) as g (i)
                )
                || ' on conflict on constraint embedding_jobs_row_model_key do update set'
                || ' content = excluded.content, payload = coalesce(excluded.payload, j.payload),'
                || ' state = ''pending'', attempts = 0, run_after = excluded.run_after, lease_until = null,'
                || ' lease_token = null, last_error = null';
        end loop;
        v_n := v_n + pg_catalog.cardinality(p_ids);
        -- No NOTIFY: any login may LISTEN on any channel, and a notification
        -- at a tenant's write would tell every application login when some
        -- tenant stored text without a vector. Idle workers poll instead.
    end loop;
    return v_n;
end
$$;

comment on function agentmem_private.enqueue_embedding_jobs(text, text, uuid[], text[], text[], jsonb) is
'Internal: queue one embedding job per row (p_kind message, fact or entry; p_ids with their texts) and '
'model, in the writing transaction; no NOTIFY (any login could LISTEN and learn when a tenant writes): '
'idle workers poll. A row already queued for a model is queued again from scratch. p_payload '
'goes to the first model''s jobs.';

create or replace function agentmem_private.set_job_tenant(p_tenant text)
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    perform pg_catalog.set_config('agentmem.tenant_id', p_tenant, true);
    perform agentmem.current_tenant();
end
$$;

comment on function agentmem_private.set_job_tenant(text) is
'Internal: set a job''s tenant for the rest of the transaction (its rows are then reached through the '
'ordinary tenant_isolation policy; on Citus current_tenant() makes the setting reach the workers).';

create or replace function agentmem_private.set_queue_tenant()
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    -- Matches no job (tenant ids have no such prefix in practice, and it would
    -- not matter: queue_access lets every job through anyway). current_tenant()
    -- makes it reach the Citus workers, where the shards' policies read it.
    perform pg_catalog.set_config('agentmem.tenant_id', 'agentmem:queue', true);
    perform agentmem.current_tenant();
end
$$;

comment on function agentmem_private.set_queue_tenant() is
'Internal: set a tenant for the queue''s statements across tenants (agentmem_queue sees every job through '
'the policy queue_access; tenant_isolation, applying too, needs a tenant set to evaluate at all).';

-- The worker's calls -------------------------------------------------------

create or replace function agentmem.claim_embedding_jobs(
    model text default null,
    batch_size int default 64,
    lease interval default '5 minutes'
) returns table (
    tenant_id text, job_id uuid, job_model text, dimension int, input text, cached_embedding vector, lease_token uuid
)
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_model text := claim_embedding_jobs.model;
    v_token uuid := pg_catalog.gen_random_uuid();
    v_left int := claim_embedding_jobs.batch_size;
    v_max int := agentmem_private.embedding_max_attempts();
    v_tenant text;
    v_got int;
    v_prefix record;
begin
    perform agentmem_private.check_range('batch_size', claim_embedding_jobs.batch_size, 1, 1000);
    if claim_embedding_jobs.lease is null or claim_embedding_jobs.lease not between interval '1 second' and interval '1 day' then
        raise exception 'lease must be between 1 second and 1 day, got %', coalesce(claim_embedding_jobs.lease::text, 'NULL')
        using errcode = 'AM020', hint = 'Take a lease longer than a batch takes to embed.';
    end if;
    if v_model is not null then
        perform agentmem.get_model(v_model);
    end if;
    -- The statements across tenants see every job through the policy
    -- queue_access; tenant_isolation, which applies too, needs some tenant
    -- set (it matches no job: queue_access is what lets them through).
    perform agentmem_private.set_queue_tenant();
    -- Jobs whose lease expired as often as they may be tried: their worker
    -- died or hung each time. Parked, with that said.
    update agentmem.embedding_jobs as j
    set state = 'failed', lease_token = null, lease_until = null,
        -- (immutable expressions only: Citus runs no stable function on a column in an UPDATE)
        last_error = 'the lease expired ' || j.attempts::text || ' times (the worker died or hung mid-batch)'
    where j.state = 'running' and j.lease_until < pg_catalog.now() and j.attempts >= v_max
        and (v_model is null or j.model = v_model);
    if v_model is null then
        select j.model into v_model
        from agentmem.embedding_jobs as j
        where (j.state = 'pending' and j.run_after <= pg_catalog.now()) or (j.state = 'running' and j.lease_until < pg_catalog.now())
        order by j.run_after
        limit 1;
        if v_model is null then
            return;
        end if;
    end if;
    select m.document_prefix, m.query_prefix, m.dimension into v_prefix from agentmem.models as m where m.model = v_model;
    -- Tenants with ready work, the longest waiting first; then per tenant a
    -- claim of its oldest jobs (one shard on Citus, where FOR UPDATE works on
    -- single-shard statements only). SKIP LOCKED: concurrent workers take
    -- disjoint jobs and never wait for each other.
    for v_tenant in
        select j.tenant_id from agentmem.embedding_jobs as j
        where j.model = v_model
            and ((j.state = 'pending' and j.run_after <= pg_catalog.now()) or (j.state = 'running' and j.lease_until < pg_catalog.now()))
        group by j.tenant_id
        order by pg_catalog.min(j.run_after), j.tenant_id
        limit claim_embedding_jobs.batch_size
    loop
        perform agentmem_private.set_job_tenant(v_tenant);
        return query
        with picked as (
            select j.tenant_id, j.job_id from agentmem.embedding_jobs as j
            where j.tenant_id = v_tenant and j.model = v_model
                and ((j.state = 'pending' and j.run_after <= pg_catalog.now()) or (j.state = 'running' and j.lease_until < pg_catalog.now()))
            order by j.run_after, j.job_id
            limit v_left
            for update skip locked
        ),

        claimed as (
            update agentmem.embedding_jobs as j
            set state = 'running', lease_token = v_token, attempts = j.attempts + 1,
                lease_until = pg_catalog.now() + claim_embedding_jobs.lease
            from picked as p
            where j.tenant_id = p.tenant_id and j.job_id = p.job_id
            returning
                j.tenant_id, j.job_id, j.model,
                case when j.entry_id is null then v_prefix.document_prefix else v_prefix.query_prefix end
                || j.content as input
        )

        select c.tenant_id, c.job_id, c.model, v_prefix.dimension, c.input, ec.cached_vector, v_token
        from claimed as c
        left join agentmem.embedding_cache as ec
            on ec.tenant_id = v_tenant and ec.model = v_model and ec.text_sha256 = pg_catalog.sha256(pg_catalog.convert_to(c.input, 'UTF8'));
        get diagnostics v_got = row_count;
        v_left := v_left - v_got;
        exit when v_left <= 0;
    end loop;
    perform pg_catalog.set_config('agentmem.tenant_id', '', true);
end
$$;

comment on function agentmem.claim_embedding_jobs(text, int, interval) is
'Claim up to batch_size embedding jobs of one model for a worker, under a lease that keeps other claims off them.
The model: model, or the model of the oldest ready job. After the lease the jobs are claimed again (a worker that died loses no job).
Jobs are taken oldest first across tenants, never twice at
once (FOR UPDATE SKIP LOCKED). Returns per job: its tenant, id, model and the model''s dimension, the text to embed with the
model''s prefix (document prefix; query prefix for an answer-cache question), the vector the tenant''s
embedding cache already holds for that text (NULL on a miss), and the lease token that
complete_embedding_jobs and fail_embedding_jobs need. A job whose lease expired
agentmem.embedding_max_attempts times (default 5) is parked as failed.
batch_size 1..1,000 and lease 1 second..1 day (AM020); AM011 unknown model.
Security definer: runs as agentmem_queue, the one role that sees every tenant''s embedding jobs; other tables it reaches only under the job''s tenant.
Called by: the embedding worker (agentmem_worker).';

create or replace function agentmem_private.embedding_job_failed(
    p_job agentmem.embedding_jobs,
    p_error text
) returns text
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_state text := case when p_job.attempts >= agentmem_private.embedding_max_attempts() then 'failed' else 'pending' end;
begin
    update agentmem.embedding_jobs as j
    set state = v_state, lease_token = null, lease_until = null, last_error = pg_catalog.left(p_error, 2000),
        run_after = pg_catalog.now() + agentmem_private.embedding_retry_delay(p_job.attempts)
    where j.tenant_id = p_job.tenant_id and j.job_id = p_job.job_id;
    if v_state = 'failed' then
        insert into agentmem.embedding_job_counts as c (tenant_id, model, minute, failed)
        values (p_job.tenant_id, p_job.model, pg_catalog.date_trunc('minute', pg_catalog.now()), 1)
        on conflict on constraint embedding_job_counts_pkey do update set failed = c.failed + 1;
    end if;
    return case when v_state = 'failed' then 'failed' else 'retry' end;
end
$$;

comment on function agentmem_private.embedding_job_failed(agentmem.embedding_jobs, text) is
'Internal: record a failed try of a job: retried after agentmem_private.embedding_retry_delay, or parked '
'as failed once it has been tried agentmem.embedding_max_attempts times. Returns retry or failed.';

create or replace function agentmem_private.apply_fact_vector(p_job agentmem.embedding_jobs, p_embedding vector)
returns text
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_fact agentmem.facts;
    v_similarity real;
    v_prev agentmem.facts.embedding%type;
    v_prev_sources uuid [];
    v_new_sources uuid [];
    v_prev_from timestamptz;
    v_prev_to timestamptz;
    v_prev_recorded timestamptz;
begin
    select f.* into v_fact from agentmem.facts as f
    where f.tenant_id = p_job.tenant_id and f.fact_id = p_job.fact_id
    for update;
    if v_fact.model <> p_job.model then
        -- A re-embedding: the fact's copy in the job's model mirrors it.
        insert into agentmem.facts as f (
            tenant_id, user_id, subject, fact, model, embedding, source_message_ids, created_at, updated_at,
            valid_from, valid_to
        ) values (
            v_fact.tenant_id, v_fact.user_id, v_fact.subject, v_fact.fact, p_job.model, p_embedding,
            v_fact.source_message_ids, v_fact.created_at, v_fact.updated_at, v_fact.valid_from, v_fact.valid_to
        )
        on conflict (tenant_id, user_id, pg_catalog.lower(subject), model) do update
            set subject = excluded.subject, fact = excluded.fact, embedding = excluded.embedding,
            source_message_ids = excluded.source_message_ids, updated_at = excluded.updated_at,
            valid_from = excluded.valid_from, valid_to = excluded.valid_to;
        return 'copied';
    end if;
    if p_job.payload is null or p_job.payload ->> 'prev_embedding' is null then
        update agentmem.facts as f set embedding = p_embedding
        where f.tenant_id = p_job.tenant_id and f.fact_id = p_job.fact_id;
        return 'embedded';
    end if;
    -- The near-duplicate merge or contradiction check upsert_fact deferred:
    -- the previous version (payload) against the text the vector is of.
    v_prev := p_job.payload ->> 'prev_embedding';
    v_similarity := (1::float8 - agentmem_private.cosine_distance(v_prev, p_embedding))::real;
    -- (values computed first: Citus takes no stable function in CASE/COALESCE of an UPDATE)
    v_prev_from := (p_job.payload ->> 'prev_valid_from')::timestamptz;
    if v_similarity <> 'NaN' and v_similarity >= (p_job.payload ->> 'merge_threshold')::double precision then
        -- the same fact said again: true since the earlier of the two starts
        update agentmem.facts as f
        set embedding = p_embedding, valid_from = least(f.valid_from, v_prev_from)
        where f.tenant_id = p_job.tenant_id and f.fact_id = p_job.fact_id;
        return 'merged';
    end if;
    -- A contradiction: the previous version's validity closes where the new
    -- one begins, which must come after the previous one began (the periods of
    -- one fact never overlap: moved to just after it where it does not).
    if v_fact.valid_from <= v_prev_from then
        v_fact.valid_from := v_prev_from + interval '1 microsecond';
        update agentmem.facts as f set valid_from = v_fact.valid_from
        where f.tenant_id = p_job.tenant_id and f.fact_id = p_job.fact_id;
    end if;
    -- Values computed first: Citus takes no subquery in an INSERT ... VALUES.
    v_prev_sources := array(select pg_catalog.jsonb_array_elements_text(p_job.payload -> 'prev_sources'))::uuid [];
    v_prev_to := least(coalesce((p_job.payload ->> 'prev_valid_to')::timestamptz, v_fact.valid_from), v_fact.valid_from);
    v_prev_recorded := coalesce((p_job.payload ->> 'prev_recorded_at')::timestamptz, pg_catalog.now());
    v_new_sources := array(select pg_catalog.jsonb_array_elements_text(p_job.payload -> 'new_sources'))::uuid [];
    insert into agentmem.fact_history as h (
        tenant_id, fact_id, user_id, subject, fact, source_message_ids, valid_from, valid_to, recorded_at
    ) values (
        v_fact.tenant_id, v_fact.fact_id, v_fact.user_id, p_job.payload ->> 'prev_subject', p_job.payload ->> 'prev_fact',
        v_prev_sources, v_prev_from, v_prev_to, v_prev_recorded
    );
    update agentmem.facts as f
    set embedding = p_embedding, source_message_ids = v_new_sources
    where f.tenant_id = p_job.tenant_id and f.fact_id = p_job.fact_id;
    return 'replaced';
end
$$;

comment on function agentmem_private.apply_fact_vector(agentmem.embedding_jobs, vector) is
'Internal: store the vector of a fact''s job. In the fact''s own model: the vector, and when the write '
'replaced an embedded version (payload), the near-duplicate merge or contradiction check of upsert_fact '
'(merged: both versions'' sources stay; replaced: the previous version goes to fact_history and the '
'fact keeps the new sources). In another model (a re-embedding): the fact''s copy in that model.';

-- Over 100 lines: one batch loop whose branches per job (a message, a fact, a cached answer; done, gone
--   or requeued) share the tenant and model set once per change, and the counts upserted as it ends.
create or replace function agentmem.complete_embedding_jobs(
    lease_token uuid,
    tenant_ids text[],
    job_ids uuid[],
    embeddings vector[]
) returns table (job_id uuid, outcome text)
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_n int := agentmem_private.check_array('job_ids', complete_embedding_jobs.job_ids, 1000);
    v_job agentmem.embedding_jobs;
    v_dim int;
    v_outcome text;
    v_input text;
    v_prefix text;
    v_vec agentmem.message_embeddings.embedding%type;
    v_tenant text;
    v_model text;
    v_count record;
    v_models record;
    -- Completed jobs per (tenant, model), counted at the end of the call.
    v_done_tenants text [] := '{}';
    v_done_models text [] := '{}';
begin
    perform agentmem_private.check_array('tenant_ids', complete_embedding_jobs.tenant_ids, 1000);
    perform agentmem_private.check_array('embeddings', complete_embedding_jobs.embeddings, 1000);
    if coalesce(pg_catalog.cardinality(complete_embedding_jobs.tenant_ids), 0) <> v_n
        or coalesce(pg_catalog.cardinality(complete_embedding_jobs.embeddings), 0) <> v_n then
        raise exception 'tenant_ids, job_ids and embeddings must be arrays of the same length'
        using
            errcode = 'AM020',
            detail = pg_catalog.format('tenant_ids: %s, job_ids: %s, embeddings: %s',
                coalesce(pg_catalog.cardinality(complete_embedding_jobs.tenant_ids), 0), v_n,
                coalesce(pg_catalog.cardinality(complete_embedding_jobs.embeddings), 0)),
            hint = 'Pass one vector per claimed job, in the order of job_ids; nothing was stored.';
    end if;
    for i in 1..v_n loop
        job_id := complete_embedding_jobs.job_ids[i];
        -- A local copy: statements get one vector, not the array subscripted.
        v_vec := complete_embedding_jobs.embeddings[i];
        -- A batch is claimed tenant by tenant: the tenant is set when it changes.
        if v_tenant is distinct from complete_embedding_jobs.tenant_ids[i] then
            v_tenant := complete_embedding_jobs.tenant_ids[i];
            perform agentmem_private.set_job_tenant(v_tenant);
        end if;
        select j.* into v_job from agentmem.embedding_jobs as j
        where j.tenant_id = complete_embedding_jobs.tenant_ids[i] and j.job_id = complete_embedding_jobs.job_ids[i]
            and j.lease_token = complete_embedding_jobs.lease_token and j.state = 'running'
        for update;
        if not found then
            -- The row was erased (its job went with it), the job was queued
            -- again by a rewrite, or the lease expired and another took it.
            outcome := 'gone';
            return next;
            continue;
        end if;
        -- The model is looked up when it changes (a batch has one).
        if v_model is distinct from v_job.model then
            select m.dimension, m.document_prefix, m.query_prefix into v_models
            from agentmem.models as m where m.model = v_job.model;
            v_model := v_job.model;
        end if;
        v_dim := v_models.dimension;
        v_prefix := case when v_job.entry_id is null then v_models.document_prefix else v_models.query_prefix end;
        begin
            perform agentmem_private.check_embedding_of(v_job.model, v_dim, v_vec);
        exception when sqlstate 'AM010' then
            outcome := agentmem_private.embedding_job_failed(v_job, sqlerrm);
            return next;
            continue;
        end;
        if v_job.message_id is not null then
            insert into agentmem.message_embeddings as e (
                tenant_id, message_id, model, user_id, conversation_id, embedding, occurred_at
            )
            select m.tenant_id, m.message_id, v_job.model, m.user_id, m.conversation_id, v_vec, m.occurred_at
            from agentmem.messages as m
            where m.tenant_id = v_job.tenant_id and m.message_id = v_job.message_id
            on conflict on constraint message_embeddings_pkey do update
                set embedding = excluded.embedding, pending_embedding = null;
            v_outcome := 'embedded';
        elsif v_job.fact_id is not null then
            v_outcome := agentmem_private.apply_fact_vector(v_job, v_vec);
        else
            update agentmem.cache_entries as e set embedding = v_vec
            where e.tenant_id = v_job.tenant_id and e.entry_id = v_job.entry_id and e.model = v_job.model;
            v_outcome := 'embedded';
        end if;
        v_input := v_prefix || v_job.content;
        insert into agentmem.embedding_cache (tenant_id, model, text_sha256, cached_vector)
        values (v_job.tenant_id, v_job.model, pg_catalog.sha256(pg_catalog.convert_to(v_input, 'UTF8')), v_vec)
        on conflict on constraint embedding_cache_pkey do nothing;
        delete from agentmem.embedding_jobs as j where j.tenant_id = v_job.tenant_id and j.job_id = v_job.job_id;
        v_done_tenants := v_done_tenants || v_job.tenant_id;
        v_done_models := v_done_models || v_job.model;
        outcome := v_outcome;
        return next;
    end loop;
    -- The counts of completed jobs, one upsert per (tenant, model) as the call
    -- ends: workers completing the same tenant at once hold its count row only
    -- from here to their commit (a row locked at the first job would make them
    -- take turns for the whole batch), and in one order (no deadlock). Old
    -- counts go (a day of minutes per tenant and model at most). One shard per
    -- statement on Citus.
    for v_count in
        select d.t, d.m, pg_catalog.count(*)::int as n
        from rows from (pg_catalog.unnest(v_done_tenants), pg_catalog.unnest(v_done_models)) as d (t, m)
        group by d.t, d.m
        order by d.t, d.m
    loop
        if v_tenant is distinct from v_count.t then
            v_tenant := v_count.t;
            perform agentmem_private.set_job_tenant(v_tenant);
        end if;
        insert into agentmem.embedding_job_counts as c (tenant_id, model, minute, completed)
        values (v_count.t, v_count.m, pg_catalog.date_trunc('minute', pg_catalog.now()), v_count.n)
        on conflict on constraint embedding_job_counts_pkey do update set completed = c.completed + excluded.completed;
        delete from agentmem.embedding_job_counts as c
        where c.tenant_id = v_count.t and c.model = v_count.m and c.minute < pg_catalog.now() - interval '1 day';
    end loop;
    perform pg_catalog.set_config('agentmem.tenant_id', '', true);
end
$$;

comment on function agentmem.complete_embedding_jobs(uuid, text[], uuid[], vector[]) is
'Complete claimed embedding jobs with their vectors: embeddings[i] is the vector of job_ids[i] of tenant tenant_ids[i], claimed under lease_token.
Each vector is checked as every embedding is (the model''s
dimension, a norm that is not zero, subnormal or infinite in float32): a bad one stores nothing and
counts as a failed try of its job (retried with backoff, parked as failed after the retry limit).
A good one goes to its row (a message''s embedding, a fact, a cached question; a fact''s deferred merge
or contradiction check runs now) and to the tenant''s embedding cache, and the job is done.
Returns per job: embedded, merged, replaced or copied (a fact), retry or failed (bad vector), gone
(its row was erased, it was queued again by a rewrite, or its lease was lost: nothing stored).
AM020 when the three arrays differ in length (nothing stored); NaN or infinite components are refused
by pgvector (22000) before the call.
Security definer: runs as agentmem_queue, the one role that sees every tenant''s embedding jobs; other tables it reaches only under the job''s tenant.
Called by: the embedding worker (agentmem_worker).';

create or replace function agentmem.fail_embedding_jobs(
    lease_token uuid,
    tenant_ids text[],
    job_ids uuid[],
    error text
) returns table (job_id uuid, outcome text)
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_n int := agentmem_private.check_array('job_ids', fail_embedding_jobs.job_ids, 1000);
    v_job agentmem.embedding_jobs;
begin
    if coalesce(pg_catalog.cardinality(fail_embedding_jobs.tenant_ids), 0) <> v_n then
        raise exception 'tenant_ids and job_ids must be arrays of the same length'
        using errcode = 'AM020';
    end if;
    if agentmem_private.is_blank(fail_embedding_jobs.error) then
        raise exception 'error must say why the jobs failed'
        using errcode = 'AM020', hint = 'Pass the embedder''s error message.';
    end if;
    for i in 1..v_n loop
        job_id := fail_embedding_jobs.job_ids[i];
        perform agentmem_private.set_job_tenant(fail_embedding_jobs.tenant_ids[i]);
        select j.* into v_job from agentmem.embedding_jobs as j
        where j.tenant_id = fail_embedding_jobs.tenant_ids[i] and j.job_id = fail_embedding_jobs.job_ids[i]
            and j.lease_token = fail_embedding_jobs.lease_token and j.state = 'running'
        for update;
        if not found then
            outcome := 'gone';
        else
            outcome := agentmem_private.embedding_job_failed(v_job, fail_embedding_jobs.error);
        end if;
        return next;
    end loop;
    perform pg_catalog.set_config('agentmem.tenant_id', '', true);
end
$$;

comment on function agentmem.fail_embedding_jobs(uuid, text[], uuid[], text) is
'Report claimed embedding jobs as failed with the embedder''s error: each is tried again after a backoff, or parked as failed.
The backoff: agentmem.embedding_retry_base (default 10 seconds), doubled per attempt, at most an hour; after agentmem.embedding_max_attempts tries (default 5) a job is parked as failed with the error, visible in agentmem.embedding_backlog.
Returns per job retry, failed, or gone (no longer held under lease_token).
AM020 for arrays of different lengths or a blank error.
Security definer: runs as agentmem_queue, the one role that sees every tenant''s embedding jobs; other tables it reaches only under the job''s tenant.
Called by: the embedding worker (agentmem_worker).';

create or replace function agentmem.embedding_queue_depth(model text default null)
returns bigint
language plpgsql
volatile
security definer
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_n bigint;
begin
    perform agentmem_private.set_queue_tenant();
    select pg_catalog.count(*) into v_n from agentmem.embedding_jobs as j
    where j.state <> 'failed' and (embedding_queue_depth.model is null or j.model = embedding_queue_depth.model);
    perform pg_catalog.set_config('agentmem.tenant_id', '', true);
    return v_n;
end
$$;

comment on function agentmem.embedding_queue_depth(text) is
'How many embedding jobs of a model (NULL: of every model) are waiting or running, across tenants: the backlog a worker logs.
A count only; agentmem.embedding_backlog has the detail for the DBA.
Security definer: runs as agentmem_queue, the one role that sees every tenant''s embedding jobs; other tables it reaches only under the job''s tenant.
Called by: the embedding worker (agentmem_worker).';

-- The DBA's calls ------------------------------------------------------------

create or replace function agentmem_private.tenants_of(p_tenant_id text, p_what text)
returns setof text
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    if p_tenant_id is not null then
        return next p_tenant_id;
        return;
    end if;
    perform agentmem_private.check_sees_every_tenant(
        p_what, 'without tenant_id it works on every tenant',
        'Name one tenant (tenant_id => ...), or run it as a role with BYPASSRLS.'
    );
    return query
    select c.tenant_id from agentmem.conversations as c
    union
    select f.tenant_id from agentmem.facts as f
    union
    select e.tenant_id from agentmem.cache_entries as e
    union
    select j.tenant_id from agentmem.embedding_jobs as j
    union
    select r.tenant_id from agentmem.reembeddings as r;
end
$$;

comment on function agentmem_private.tenants_of(text, text) is
'Internal: p_tenant_id, or (NULL) every tenant with rows, for a role that sees every tenant (AM041 otherwise).';

create or replace function agentmem.reembed(
    model text,
    from_model text default null,
    tenant_id text default null
) returns table (tenant text, jobs bigint)
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_from text := coalesce(reembed.from_model, agentmem_private.default_model());
    v_tenant text;
    v_n bigint;
    v_m bigint;
begin
    perform agentmem.get_model(reembed.model);
    perform agentmem.get_model(v_from);
    if reembed.model = v_from then
        raise exception 'model and from_model are both %', v_from
        using errcode = 'AM020', hint = 'Name the model to re-embed into (register it first with register_model).';
    end if;
    for v_tenant in select t from agentmem_private.tenants_of(reembed.tenant_id, 'agentmem.reembed') as t loop
        perform agentmem.set_tenant(v_tenant, true);
        insert into agentmem.reembeddings as r (tenant_id, model, from_model)
        values (v_tenant, reembed.model, v_from)
        on conflict on constraint reembeddings_pkey do update set from_model = excluded.from_model;
        -- Every message embedded in from_model and not yet in model.
        insert into agentmem.embedding_jobs as j (tenant_id, model, message_id, content)
        select m.tenant_id, reembed.model, m.message_id, m.content
        from agentmem.messages as m
        where m.tenant_id = v_tenant
            and exists (
                select from agentmem.message_embeddings as e
                where e.tenant_id = v_tenant and e.message_id = m.message_id and e.model = v_from
            )
            and not exists (
                select from agentmem.message_embeddings as e
                where e.tenant_id = v_tenant and e.message_id = m.message_id and e.model = reembed.model
            )
        on conflict on constraint embedding_jobs_row_model_key do nothing;
        get diagnostics v_n = row_count;
        -- Every fact of from_model (its copy in model is rewritten).
        insert into agentmem.embedding_jobs as j (tenant_id, model, fact_id, content)
        select f.tenant_id, reembed.model, f.fact_id, f.fact
        from agentmem.facts as f
        where f.tenant_id = v_tenant and f.model = v_from
        on conflict on constraint embedding_jobs_row_model_key do nothing;
        get diagnostics v_m = row_count;
        perform pg_catalog.pg_notify('agentmem_embedding_jobs', reembed.model);
        tenant := v_tenant;
        jobs := v_n + v_m;
        return next;
    end loop;
end
$$;

comment on function agentmem.reembed(text, text, text) is
'Re-embed a tenant (tenant_id), or every tenant (NULL), into another model: queue a job for every message and fact of from_model.
Every tenant needs a role that sees every tenant (AM041 otherwise). A job in model is queued for every message embedded in from_model (default: the installation''s default model) and every fact of from_model, and from now on for every write in from_model too.
Searches keep using from_model meanwhile; the backlog shows in
agentmem.embedding_backlog; agentmem.switch_default_model then makes model the tenant''s default, and
agentmem.drop_model_vectors removes from_model''s rows. Answer-cache entries are not re-embedded: they
are short-lived, and after the switch new ones are stored in the new model.
Returns the jobs queued per tenant. AM011 unknown model, AM020 model = from_model.
Called by: the DBA (granted to no role).';

create or replace function agentmem_private.missing_in_model(p_tenant text, p_model text)
returns bigint
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select
        (
            select pg_catalog.count(*) from agentmem.messages as m
            where m.tenant_id = p_tenant
                and exists (
                    select from agentmem.message_embeddings as e
                    where e.tenant_id = p_tenant and e.message_id = m.message_id
                )
                and not exists (
                    select from agentmem.message_embeddings as e
                    where e.tenant_id = p_tenant and e.message_id = m.message_id and e.model = p_model
                )
        )
        + (
            select pg_catalog.count(*) from agentmem.facts as f
            where f.tenant_id = p_tenant and f.model <> p_model
                and not exists (
                    select from agentmem.facts as g
                    where g.tenant_id = p_tenant and g.user_id = f.user_id and pg_catalog.lower(g.subject) = pg_catalog.lower(f.subject)
                        and g.model = p_model and g.embedding is not null
                )
        )
        + (
            select pg_catalog.count(*) from agentmem.embedding_jobs as j
            where j.tenant_id = p_tenant and j.model = p_model
        )
$$;

comment on function agentmem_private.missing_in_model(text, text) is
'Internal: how many of a tenant''s rows p_model still lacks: embedded messages without a p_model '
'embedding, facts of other models without an embedded p_model copy, and p_model jobs not done '
'(pending, running or failed).';

create or replace function agentmem.switch_default_model(model text, tenant_id text)
returns text
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_missing bigint;
begin
    perform agentmem.get_model(switch_default_model.model);
    perform agentmem.set_tenant(switch_default_model.tenant_id, true);
    v_missing := agentmem_private.missing_in_model(switch_default_model.tenant_id, switch_default_model.model);
    if v_missing > 0 then
        raise exception 'tenant % still has % rows without an embedding in %',
            switch_default_model.tenant_id, v_missing, switch_default_model.model
        using
            errcode = 'AM031',
            detail = 'Searches in the new model would miss them.',
            hint = 'Queue them with agentmem.reembed(model => ...), let the workers drain the backlog '
            || '(agentmem.embedding_backlog; failed jobs: agentmem.retry_embedding_jobs), then switch.';
    end if;
    insert into agentmem.tenant_settings as s (tenant_id, default_model)
    values (switch_default_model.tenant_id, switch_default_model.model)
    on conflict on constraint tenant_settings_pkey do update
        set default_model = excluded.default_model, updated_at = excluded.updated_at;
    return switch_default_model.model;
end
$$;

comment on function agentmem.switch_default_model(text, text) is
'Make model the default embedding model of a tenant, once every row of the tenant is embedded in it.
The default is the model every call of the tenant that names none uses, reads and writes alike.
Refused with AM031
while any is missing (rows not yet re-embedded, jobs pending or failed). Returns the model.
AM011 unknown model, AM002 bad tenant id.
Called by: the DBA (granted to no role).';

create or replace function agentmem.drop_model_vectors(model text, tenant_id text default null)
returns table (tenant text, table_name text, rows_removed bigint)
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_tenant text;
    v_n bigint;
    v_table text;
begin
    if drop_model_vectors.tenant_id is null and agentmem.is_distributed() then
        -- Citus: the index drops and the delete from the reference table models need every
        -- statement of this transaction to run over one connection per node.
        perform pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    end if;
    perform agentmem.get_model(drop_model_vectors.model);
    for v_tenant in select t from agentmem_private.tenants_of(drop_model_vectors.tenant_id, 'agentmem.drop_model_vectors') as t loop
        perform agentmem.set_tenant(v_tenant, true);
        if agentmem_private.default_model() = drop_model_vectors.model then
            raise exception 'model % is the default model of tenant %', drop_model_vectors.model, v_tenant
            using
                errcode = 'AM031',
                detail = 'Its searches and writes use it.',
                hint = 'Switch the tenant first: agentmem.switch_default_model(model => ..., tenant_id => ...).';
        end if;
        tenant := v_tenant;
        delete from agentmem.message_embeddings as e where e.tenant_id = v_tenant and e.model = drop_model_vectors.model;
        get diagnostics v_n = row_count;
        table_name := 'message_embeddings';
        rows_removed := v_n;
        return next;
        -- A fact's history follows it to its copy in the tenant's default model.
        update agentmem.fact_history as h
        set fact_id = g.fact_id
        from agentmem.facts as f, agentmem.facts as g
        where h.tenant_id = v_tenant and f.tenant_id = v_tenant and g.tenant_id = v_tenant
            and h.fact_id = f.fact_id and f.model = drop_model_vectors.model
            and g.user_id = f.user_id and pg_catalog.lower(g.subject) = pg_catalog.lower(f.subject)
            and g.model = agentmem_private.default_model();
        delete from agentmem.facts as f where f.tenant_id = v_tenant and f.model = drop_model_vectors.model;
        get diagnostics v_n = row_count;
        table_name := 'facts';
        rows_removed := v_n;
        return next;
        -- the hits of the entries that go forget them (no foreign key does it;
        -- what agentmem_private.unlink_cache_hits does, defined later)
        update agentmem.cache_hits as h
        set entry_id = null
        where h.tenant_id = v_tenant and h.entry_id in (
            select e.entry_id from agentmem.cache_entries as e
            where e.tenant_id = v_tenant and e.model = drop_model_vectors.model
        );
        delete from agentmem.cache_entries as e where e.tenant_id = v_tenant and e.model = drop_model_vectors.model;
        get diagnostics v_n = row_count;
        table_name := 'cache_entries';
        rows_removed := v_n;
        return next;
        delete from agentmem.embedding_cache as c where c.tenant_id = v_tenant and c.model = drop_model_vectors.model;
        get diagnostics v_n = row_count;
        table_name := 'embedding_cache';
        rows_removed := v_n;
        return next;
        delete from agentmem.embedding_jobs as j where j.tenant_id = v_tenant and j.model = drop_model_vectors.model;
        delete from agentmem.reembeddings as r
        where r.tenant_id = v_tenant and (r.model = drop_model_vectors.model or r.from_model = drop_model_vectors.model);
        delete from agentmem.embedding_job_counts as c where c.tenant_id = v_tenant and c.model = drop_model_vectors.model;
    end loop;
    if drop_model_vectors.tenant_id is null then
        -- The whole installation: the model's indexes and its registry entry go too.
        perform pg_catalog.set_config('agentmem.tenant_id', '', true);

        if agentmem_private.default_model() = drop_model_vectors.model then
            raise exception 'model % is the installation''s default model', drop_model_vectors.model
            using
                errcode = 'AM031',
                hint = 'Set agentmem.default_model (alter database ... set agentmem.default_model = ...) first.';
        end if;
        for v_table in
            select c.relname::text from pg_catalog.pg_class as c
            where c.relnamespace = 'agentmem'::regnamespace and c.relkind = 'r'
                and pg_catalog.to_regclass(pg_catalog.format(
                    'agentmem.%I', agentmem_private.model_index_name(c.relname, drop_model_vectors.model)
                )) is not null
        loop
            execute pg_catalog.format(
                'drop index agentmem.%I', agentmem_private.model_index_name(v_table, drop_model_vectors.model)
            );
        end loop;
        delete from agentmem.models as m where m.model = drop_model_vectors.model;
        tenant := null;
        table_name := 'models';
        rows_removed := 1;
        return next;
    end if;
end
$$;

comment on function agentmem.drop_model_vectors(text, text) is
'Remove a model''s vectors from a tenant (tenant_id) or from every tenant (NULL), and everything else the model holds there.
Every tenant needs a role that sees every tenant (AM041 otherwise). Removed: message embeddings, facts (their history moves to the fact''s copy in the tenant''s default model), answer-cache entries and cached embeddings of the model, its jobs, and the re-embeddings from or to it.
For every tenant, also the model''s HNSW indexes and its registry
entry (a tenant''s own index of it: agentmem.drop_tenant_index). Returns rows removed per tenant and
table. Refused with AM031 for a tenant''s (or the installation''s) default model: switch first.
Called by: the DBA (granted to no role).';

create or replace function agentmem.retry_embedding_jobs(model text default null, tenant_id text default null)
returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_tenant text;
    v_total bigint := 0;
    v_n bigint;
begin
    for v_tenant in select t from agentmem_private.tenants_of(retry_embedding_jobs.tenant_id, 'agentmem.retry_embedding_jobs') as t loop
        perform agentmem.set_tenant(v_tenant, true);
        update agentmem.embedding_jobs as j
        set state = 'pending', attempts = 0, run_after = pg_catalog.now(), last_error = null
        where j.tenant_id = v_tenant and j.state = 'failed'
            and (retry_embedding_jobs.model is null or j.model = retry_embedding_jobs.model);
        get diagnostics v_n = row_count;
        v_total := v_total + v_n;
    end loop;
    perform pg_catalog.pg_notify('agentmem_embedding_jobs', coalesce(retry_embedding_jobs.model, ''));
    return v_total;
end
$$;

comment on function agentmem.retry_embedding_jobs(text, text) is
'Queue the failed embedding jobs of a model (NULL: all) of a tenant (NULL: every tenant) again; returns how many.
Their tries are reset; every tenant needs a role that sees every tenant.
Called by: the DBA (granted to no role).';

-- Read through a function: on Citus the workers run parts of it, and the
-- function first sends them the pinned search_path (agentmem_private.pin_worker_path),
-- which a plain view cannot.
create or replace function agentmem_private.embedding_backlog_rows()
returns table (
    tenant_id text,
    model text,
    pending bigint,
    running bigint,
    failed bigint,
    oldest timestamptz,
    last_error text,
    per_minute numeric
)
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
begin
    perform agentmem_private.pin_worker_path();
    return query
        select
            j.tenant_id,
            j.model,
            pg_catalog.count(*) filter (where j.state = 'pending') as pending,
            pg_catalog.count(*) filter (where j.state = 'running') as running,
            pg_catalog.count(*) filter (where j.state = 'failed') as failed,
            pg_catalog.min(j.enqueued_at) filter (where j.state <> 'failed') as oldest,
            (pg_catalog.array_agg(j.last_error order by j.run_after desc) filter (where j.last_error is not null))[1] as last_error,
            (
                select pg_catalog.round(coalesce(pg_catalog.sum(c.completed), 0) / 5.0, 1) from agentmem.embedding_job_counts as c
                where c.tenant_id = j.tenant_id and c.model = j.model and c.minute >= pg_catalog.date_trunc('minute', pg_catalog.now()) - interval '5 minutes'
            ) as per_minute
        from agentmem.embedding_jobs as j
        group by j.tenant_id, j.model;
end
$$;

comment on function agentmem_private.embedding_backlog_rows() is
'Internal: the rows of the view agentmem.embedding_backlog.';

create or replace view agentmem.embedding_backlog
with (security_invoker = true) as
select
    r.tenant_id,
    r.model,
    r.pending,
    r.running,
    r.failed,
    r.oldest,
    r.last_error,
    r.per_minute
from agentmem_private.embedding_backlog_rows() as r;

comment on view agentmem.embedding_backlog is
'The embedding queue per tenant and model: jobs pending, running (under a lease), failed (parked after
the retry limit, last_error says why), the time the oldest unfinished job was queued, and jobs
completed per minute over the last five. A tenant and model with no job has no row. For the DBA: with
row-level security it shows the current tenant''s rows only, as a role that sees every tenant all.';

create or replace function agentmem_private.check_health_reader(p_what text)
returns boolean
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    -- A view for the DBA reads tables under row-level security: a role that
    -- sees every tenant (superuser, BYPASSRLS) reads them all, a role with a
    -- tenant set that tenant's rows; any other would fail on AM001 (set a
    -- tenant), which is not what a DBA looking across tenants needs to hear.
    if agentmem_private.bypasses_rls()
        or coalesce(pg_catalog.current_setting('agentmem.tenant_id', true), '') <> '' then
        -- On Citus the workers resolve the view's names through the pinned path.
        perform agentmem_private.pin_worker_path();
        return true;
    end if;
    raise exception '% reads every tenant, and role % sees none: it is subject to row-level security', p_what, current_user
    using
        errcode = 'AM041',
        detail = 'A DBA who is not a superuser sees no tenant''s rows without BYPASSRLS, which only a superuser grants.',
        hint = pg_catalog.format(
            'Ask a superuser to run "alter role %I bypassrls;" (every tenant), or set a tenant first '
            '(select agentmem.set_tenant(tenant_id => ...)) to see that tenant''s rows only.',
            current_user
        );
end
$$;

comment on function agentmem_private.check_health_reader(text) is
'Internal: true when the current role may read the DBA''s views across tenants (superuser or BYPASSRLS),
or has a tenant set (it then sees that tenant''s rows); AM041 naming p_what otherwise, whose hint names
the statement a superuser runs. Called as a one-time filter before any table is read.';

-- The vectors agentmem.index_later holds back (62_index_upkeep.sql moves them):
-- the job's row of agentmem.health, with how many wait.
create or replace function agentmem_private.index_pending_health()
returns table (
    job text,
    last_run_at timestamptz,
    last_error text,
    last_error_at timestamptz,
    backlog bigint,
    failed bigint,
    status text
)
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    with runs as materialized (
        select j.run_id, j.started_at, j.error from agentmem.job_runs as j where j.job = 'index_pending'
    ),

    last_run as (
        select
            pg_catalog.max(runs.started_at) as last_run_at,
            (pg_catalog.array_agg(runs.error order by runs.started_at desc, runs.run_id desc))[1] as last_error,
            pg_catalog.max(runs.started_at) filter (where runs.error is not null) as last_error_at
        from runs
    ),

    -- read through the partial index message_embeddings_pending_idx
    pending as materialized (
        select pg_catalog.count(*) as waiting from agentmem.message_embeddings as e where e.embedding is null
    )

    select
        'index_pending',
        l.last_run_at,
        l.last_error,
        l.last_error_at,
        p.waiting,
        null::bigint,
        case
            when l.last_error is not null then 'failing'
            when p.waiting > 0 and (l.last_run_at is null or l.last_run_at < pg_catalog.now() - interval '10 minutes')
                then 'behind'
            else 'ok'
        end
    from last_run as l cross join pending as p
    -- no row while the job never ran and nothing waits (index_later unused)
    where l.last_run_at is not null or p.waiting > 0
$$;

comment on function agentmem_private.index_pending_health() is
'Internal: the row index_pending of agentmem.health: the last run of index_pending_vectors, backlog = the
vectors agentmem.index_later holds back, behind when some wait and the job has not run for 10 minutes.';

-- The view reads through a function: on Citus the workers run parts of it, and
-- the function sends them the pinned search_path first (check_health_reader,
-- agentmem_private.pin_worker_path), which a plain view cannot.
create or replace function agentmem_private.health_rows()
returns table (
    job text,
    last_run_at timestamptz,
    last_error text,
    last_error_at timestamptz,
    backlog bigint,
    failed bigint,
    status text
)
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
begin
    -- Materialised: on Citus they are read from the shards once, and the rest
    -- runs on the coordinator (ordered aggregates of distributed tables are not
    -- pushed down). The reader check comes first: before row-level security's
    -- check of the tenant, so a DBA without one hears what to ask for.
    perform agentmem_private.check_health_reader('agentmem.health');
    return query
        with runs as materialized (
            select
                j.job,
                j.run_id,
                j.started_at,
                j.error
            from agentmem.job_runs as j
        ),

        jobs as materialized (
            select
                j.state,
                j.enqueued_at,
                j.run_after,
                j.last_error
            from agentmem.embedding_jobs as j
        ),

        counts as materialized (
            select
                pg_catalog.max(c.minute) filter (where c.completed > 0) as last_completed,
                pg_catalog.max(c.minute) filter (where c.failed > 0) as last_failed
            from agentmem.embedding_job_counts as c
        )

        select
            r.job,
            r.last_run_at,
            r.last_error,
            r.last_error_at,
            null::bigint as backlog,
            null::bigint as failed,
            case when r.last_error is not null then 'failing' else 'ok' end as status
        from (
            select
                runs.job,
                pg_catalog.max(runs.started_at) as last_run_at,
                (pg_catalog.array_agg(runs.error order by runs.started_at desc, runs.run_id desc))[1] as last_error,
                pg_catalog.max(runs.started_at) filter (where runs.error is not null) as last_error_at
            from runs
            where runs.job <> 'index_pending'
            group by runs.job
        ) as r
        union all
        select p.job, p.last_run_at, p.last_error, p.last_error_at, p.backlog, p.failed, p.status
        from agentmem_private.index_pending_health() as p
        union all
        select
            'embedding_queue' as job,
            (select counts.last_completed from counts) as last_run_at,
            (
                select jobs.last_error from jobs
                where jobs.last_error is not null
                order by jobs.run_after desc limit 1
            ) as last_error,
            (select counts.last_failed from counts) as last_error_at,
            (
                select pg_catalog.count(*) from jobs
                where jobs.state <> 'failed'
            ) as backlog,
            (
                select pg_catalog.count(*) from jobs
                where jobs.state = 'failed'
            ) as failed,
            case
                when exists (
                    select from jobs
                    where jobs.state = 'failed'
                ) then 'failing'
                when exists (
                    select from jobs
                    where jobs.state <> 'failed' and jobs.enqueued_at < pg_catalog.now() - interval '10 minutes'
                ) then 'behind'
                else 'ok'
            end as status;
end
$$;

comment on function agentmem_private.health_rows() is
'Internal: the rows of the view agentmem.health, after agentmem_private.check_health_reader.';

create or replace view agentmem.health
with (security_invoker = true) as
select
    h.job,
    h.last_run_at,
    h.last_error,
    h.last_error_at,
    h.backlog,
    h.failed,
    h.status
from agentmem_private.health_rows() as h;

comment on view agentmem.health is
'Every background job of agentmem, one row each: the runs recorded in job_runs (retention, index
upkeep, ...: last run, its error, the last run with an error; status failing when the last run
failed); index_pending (index_pending_vectors) also with backlog = vectors agentmem.index_later holds
back, behind when some wait and the job has not run for 10 minutes or never ran; and the embedding queue (last minute a job completed, the latest error, backlog = jobs not
done, failed = jobs parked after the retry limit; status failing with parked jobs, behind when a job
has waited over 10 minutes). For the DBA (reads across tenants).';

-- The queue's own policy: agentmem_queue (the owner of the worker's calls) sees
-- every tenant's jobs. No other role, and no other table.
do $queue_policy$
begin
    if not exists (
        select from pg_catalog.pg_policies as p
        where p.schemaname = 'agentmem' and p.tablename = 'embedding_jobs' and p.policyname = 'queue_access'
            and p.roles = '{agentmem_queue}' and p.qual = 'true' and p.with_check = 'true'
    ) then
        drop policy if exists queue_access on agentmem.embedding_jobs;
        create policy queue_access on agentmem.embedding_jobs to agentmem_queue using (true) with check (true);
    end if;
end
$queue_policy$;
