-- 0011 embedding jobs: text stored without a vector is embedded later by a
-- worker. A queue of jobs per (row, model), the roles that work it, each
-- tenant's default model, the re-embeddings in progress and a per-minute count
-- of finished jobs. facts and cache_entries may hold a row whose embedding has
-- not arrived yet (NULL until a worker completes its job).
-- Row-level security is enabled and forced here (no policy = no rows); the
-- policies are created by the definitions, which run after the migrations.

do $roles$
declare
    v_role text;
begin
    foreach v_role in array array['agentmem_worker', 'agentmem_queue'] loop
        if not exists (select from pg_catalog.pg_roles where rolname = v_role) then
            begin
                execute pg_catalog.format('create role %I nologin nosuperuser nobypassrls', v_role);
            exception when insufficient_privilege then
                raise exception 'role % may not create the role %', current_user, v_role
                using
                    errcode = 'AM041',
                    detail = sqlerrm,
                    hint = 'Ask a superuser to run "create role ' || v_role || ' nologin nobypassrls;", '
                    || 'then migrate again.';
            end;
            execute pg_catalog.format('comment on role %I is %L', v_role, case v_role
                when 'agentmem_worker'
                    then 'agentmem embedding workers: may call the queue functions (claim, complete, fail) '
                    || 'and nothing else.'
                else 'agentmem: owns the queue functions; the only role that sees every tenant''s embedding jobs, '
                    || 'and nothing else.'
            end);
        end if;
    end loop;
    if exists (
        select from pg_catalog.pg_roles
        where rolname in ('agentmem_worker', 'agentmem_queue') and (rolsuper or rolbypassrls)
    ) then
        raise exception 'roles agentmem_worker and agentmem_queue must not be superusers or bypass row-level security'
        using
            errcode = 'AM041',
            hint = 'alter role ... nosuperuser nobypassrls; then migrate again.';
    end if;
    -- The installer makes agentmem_queue the owner of the queue's functions,
    -- which needs membership in it.
    if not pg_catalog.pg_has_role(current_user, 'agentmem_queue', 'usage') then
        begin
            execute pg_catalog.format('grant agentmem_queue to %I', current_user);
        exception when insufficient_privilege then
            raise exception 'role % is not a member of agentmem_queue and may not make itself one', current_user
            using
                errcode = 'AM041',
                detail = sqlerrm,
                hint = 'Ask a superuser to run "grant agentmem_queue to ' || quote_ident(current_user)
                || ';", then migrate again.';
        end;
    end if;
end
$roles$;

alter table agentmem.facts alter column embedding drop not null;
alter table agentmem.cache_entries alter column embedding drop not null;

create table agentmem.embedding_jobs (
    tenant_id text not null,
    job_id uuid not null default gen_random_uuid(),
    model text not null,
    message_id uuid,
    fact_id uuid,
    entry_id uuid,
    row_id uuid generated always as (coalesce(message_id, fact_id, entry_id)) stored,
    content text not null,
    payload jsonb,
    state text not null default 'pending',
    attempts int not null default 0,
    run_after timestamptz not null default now(),
    lease_until timestamptz,
    lease_token uuid,
    last_error text,
    enqueued_at timestamptz not null default now(),
    constraint embedding_jobs_pkey primary key (tenant_id, job_id),
    constraint embedding_jobs_row_model_key unique (tenant_id, row_id, model),
    constraint embedding_jobs_model_fk foreign key (model) references agentmem.models (model),
    constraint embedding_jobs_message_fk foreign key (tenant_id, message_id)
    references agentmem.messages (tenant_id, message_id) on delete cascade,
    constraint embedding_jobs_fact_fk foreign key (tenant_id, fact_id)
    references agentmem.facts (tenant_id, fact_id) on delete cascade,
    constraint embedding_jobs_entry_fk foreign key (tenant_id, entry_id)
    references agentmem.cache_entries (tenant_id, entry_id) on delete cascade,
    constraint embedding_jobs_one_row_ck check (num_nonnulls(message_id, fact_id, entry_id) = 1),
    constraint embedding_jobs_state_ck check (state in ('pending', 'running', 'failed')),
    constraint embedding_jobs_attempts_ck check (attempts >= 0),
    constraint embedding_jobs_lease_ck check ((state = 'running') = (lease_token is not null))
);

comment on table agentmem.embedding_jobs is
'Embedding jobs: one per (row, model) whose vector a worker is to compute. content is the text to '
'embed (without the model''s document prefix); payload what the row''s write left for when the vector '
'arrives (a fact''s previous version). pending jobs wait for run_after; running ones hold a lease '
'(lease_token, lease_until) and come back when it expires; failed ones are parked with last_error. '
'A job goes with its row (foreign keys cascade). Read through agentmem.embedding_backlog.';

create index embedding_jobs_ready_idx on agentmem.embedding_jobs (model, run_after) where state <> 'failed';
create index embedding_jobs_tenant_idx on agentmem.embedding_jobs (tenant_id, model, state, run_after);

alter table agentmem.embedding_jobs enable row level security;
alter table agentmem.embedding_jobs force row level security;

create table agentmem.embedding_job_counts (
    tenant_id text not null,
    model text not null,
    minute timestamptz not null,
    completed int not null default 0,
    failed int not null default 0,
    constraint embedding_job_counts_pkey primary key (tenant_id, model, minute)
);

comment on table agentmem.embedding_job_counts is
'Embedding jobs finished per tenant, model and minute (completed, parked as failed): the rate in '
'agentmem.embedding_backlog. Rows older than a day are removed by the completing calls.';

alter table agentmem.embedding_job_counts enable row level security;
alter table agentmem.embedding_job_counts force row level security;

create table agentmem.tenant_settings (
    tenant_id text not null,
    default_model text references agentmem.models (model),
    updated_at timestamptz not null default now(),
    constraint tenant_settings_pkey primary key (tenant_id)
);

comment on table agentmem.tenant_settings is
'Per-tenant settings: the embedding model a call uses when it names none (NULL: the installation '
'default). Changed with agentmem.switch_default_model once the tenant''s rows are all embedded in it.';

alter table agentmem.tenant_settings enable row level security;
alter table agentmem.tenant_settings force row level security;

create table agentmem.reembeddings (
    tenant_id text not null,
    model text not null references agentmem.models (model),
    from_model text not null references agentmem.models (model),
    started_at timestamptz not null default now(),
    constraint reembeddings_pkey primary key (tenant_id, model),
    constraint reembeddings_models_ck check (model <> from_model)
);

comment on table agentmem.reembeddings is
'Re-embeddings in progress: every row of the tenant in from_model is (to be) embedded in model too, '
'and every write of the tenant queues a job for model until agentmem.drop_model_vectors ends it.';

alter table agentmem.reembeddings enable row level security;
alter table agentmem.reembeddings force row level security;
