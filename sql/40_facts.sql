-- Semantic facts: one current fact per (user, subject) slot and model, merged
-- when a near-duplicate arrives, replaced (with history) when contradicted.

create or replace function agentmem.upsert_fact(
    user_id text,
    subject text,
    fact text,
    embedding vector,
    source_message_ids uuid[] default '{}',
    model text default null,
    merge_threshold double precision default 0.92
) returns table (fact_id uuid, action text, similarity real)
language plpgsql
volatile
security definer
set search_path from current
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_model text := coalesce(upsert_fact.model, agentmem_private.default_model());
    v_subject text := btrim(upsert_fact.subject);
    v_sources uuid[];
    v_old agentmem.facts;
    v_similarity real;
begin
    perform agentmem_private.check_user_id(upsert_fact.user_id);
    if v_subject is null or v_subject = '' then
        raise exception 'subject must be a non-empty text'
        using errcode = 'AM020', hint = 'A subject names the slot a fact fills, e.g. home_city or diet.';
    end if;
    if upsert_fact.fact is null or btrim(upsert_fact.fact) = '' then
        raise exception 'fact must be a non-empty text'
        using errcode = 'AM020', hint = 'Pass one standalone statement, e.g. "The user lives in Lyon."';
    end if;
    if length(v_subject) > 200 then
        raise exception 'subject is % characters long; the limit is 200', length(v_subject)
        using errcode = 'AM021', hint = 'A subject is a short key, not a sentence.';
    end if;
    if length(upsert_fact.fact) > 4000 then
        raise exception 'fact is % characters long; the limit is 4000', length(upsert_fact.fact)
        using errcode = 'AM021', hint = 'Split it into several standalone facts.';
    end if;
    if upsert_fact.merge_threshold is null or upsert_fact.merge_threshold not between 0 and 1 then
        raise exception 'merge_threshold must be between 0 and 1, got %',
            coalesce(upsert_fact.merge_threshold::text, 'NULL')
        using errcode = 'AM020';
    end if;
    if array_position(upsert_fact.source_message_ids, null) is not null then
        raise exception 'source_message_ids contains NULL'
        using errcode = 'AM020', hint = 'Pass the ids of the messages the fact was extracted from.';
    end if;
    perform agentmem_private.check_embedding(v_model, upsert_fact.embedding);
    v_sources := array(select distinct s from unnest(coalesce(upsert_fact.source_message_ids, '{}')) as s order by s);

    -- Serialise writers of one slot: two sessions upserting the same fact at
    -- once must leave one row, and a merge must see the other's sources.
    perform pg_catalog.pg_advisory_xact_lock(
        pg_catalog.hashtextextended(
            pg_catalog.format('agentmem.fact/%s/%s/%s', v_tenant, upsert_fact.user_id, lower(v_subject)), 5
        )
    );

    select f.* into v_old
    from agentmem.facts as f
    where
        f.tenant_id = v_tenant and f.user_id = upsert_fact.user_id
        and lower(f.subject) = lower(v_subject) and f.model = v_model
    for update;

    if not found then
        insert into agentmem.facts as f (tenant_id, user_id, subject, fact, model, embedding, source_message_ids)
        values (v_tenant, upsert_fact.user_id, v_subject, upsert_fact.fact, v_model, upsert_fact.embedding, v_sources)
        returning f.fact_id into upsert_fact.fact_id;
        action := 'inserted';
        similarity := null;
        return next;
        return;
    end if;

    v_similarity := (1 - (v_old.embedding <=> upsert_fact.embedding))::real;
    fact_id := v_old.fact_id;
    similarity := v_similarity;
    if v_similarity >= upsert_fact.merge_threshold then
        -- The same fact said again: keep one row, newest wording, all sources.
        update agentmem.facts as f
        set
            fact = upsert_fact.fact,
            embedding = upsert_fact.embedding,
            source_message_ids = array(
                select distinct s from unnest(f.source_message_ids || v_sources) as s order by s
            ),
            updated_at = now()
        where f.tenant_id = v_tenant and f.fact_id = v_old.fact_id;
        action := 'merged';
    else
        -- A contradiction: the new fact fills the slot, the old one goes to
        -- the history with its own sources (and lives only as long as they do).
        insert into agentmem.fact_history as h (
            tenant_id, fact_id, user_id, subject, fact, source_message_ids, valid_from
        )
        values (
            v_tenant, v_old.fact_id, v_old.user_id, v_old.subject, v_old.fact,
            v_old.source_message_ids, v_old.updated_at
        );
        update agentmem.facts as f
        set
            subject = v_subject,
            fact = upsert_fact.fact,
            embedding = upsert_fact.embedding,
            source_message_ids = v_sources,
            updated_at = now()
        where f.tenant_id = v_tenant and f.fact_id = v_old.fact_id;
        action := 'replaced';
    end if;
    return next;
end
$$;

comment on function agentmem.upsert_fact(text, text, text, vector, uuid[], text, double precision) is
'Store a fact about a user: insert, merge a near-duplicate, or replace a contradiction.
A user has one current fact per subject (case-insensitive) and model. When that slot
already holds a fact whose cosine similarity to the new one is at or above
merge_threshold (default 0.92: paraphrases of one statement), the row is kept, takes
the new wording and the union of both source lists ("merged"). Below it, the new fact
is a contradiction: it replaces the text and sources, and the old text goes to
agentmem.fact_history, which keeps it only as long as one of its source messages lives
("replaced"). Concurrent calls for one slot are serialised by an advisory lock, so they
leave one row. Returns the fact id, the action and the similarity to the previous text.
Raises AM020 for an empty user, subject or fact or NULL source ids, AM021 for a subject
over 200 or a fact over 4,000 characters, AM010/AM011 for a bad embedding or model.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.';

create or replace function agentmem.recall_facts(
    user_id text,
    query_embedding vector,
    k int default 5,
    model text default null
) returns table (
    fact_id uuid,
    subject text,
    fact text,
    similarity real,
    source_message_ids uuid[],
    updated_at timestamptz
)
language plpgsql
stable
security definer
set search_path from current
set "hnsw.iterative_scan" = 'relaxed_order'
set "hnsw.ef_search" = 1000
set enable_sort = off
as $$
declare
    v_tenant text := agentmem.current_tenant();
    v_model text := coalesce(recall_facts.model, agentmem_private.default_model());
    v_dim int;
    v_rows int;
begin
    perform agentmem_private.check_user_id(recall_facts.user_id);
    perform agentmem_private.check_range('k', recall_facts.k, 1, 100);
    v_dim := agentmem_private.check_embedding(v_model, recall_facts.query_embedding);
    -- As message search: few candidates are scanned exactly (B-tree on
    -- (tenant, user)); more go through the tenant's own HNSW index when it has
    -- one, else the model's shared one, asking for k + 20 rows and keeping the
    -- k nearest (relaxed order).
    select count(*) into v_rows from (
        select from agentmem.facts as f
        where f.tenant_id = v_tenant and f.user_id = recall_facts.user_id and f.model = v_model
        limit agentmem_private.exact_search_max_rows(v_dim) + 1
    ) as s;
    if v_rows <= agentmem_private.exact_search_max_rows(v_dim) then
        return query
        select f.fact_id, f.subject, f.fact, (1 - (f.embedding <=> recall_facts.query_embedding))::real,
            f.source_message_ids, f.updated_at
        from agentmem.facts as f
        where f.tenant_id = v_tenant and f.user_id = recall_facts.user_id and f.model = v_model
        order by f.embedding <=> recall_facts.query_embedding, f.fact_id
        limit recall_facts.k;
        return;
    end if;
    return query execute pg_catalog.format(
        'select r.fact_id, r.subject, r.fact, r.similarity, r.source_message_ids, r.updated_at '
        'from ('
        '  select f.fact_id, f.subject, f.fact, (1 - (f.embedding::vector(%1$s) <=> $1::vector(%1$s)))::real as similarity,'
        '         f.source_message_ids, f.updated_at, f.embedding::vector(%1$s) <=> $1::vector(%1$s) as distance'
        '  from agentmem.facts as f'
        '  where f.model = %2$L and %3$s and f.user_id = $4'
        '  order by f.embedding::vector(%1$s) <=> $1::vector(%1$s)'
        '  limit $5 + 20'
        ') as r order by r.distance, r.fact_id limit $5',
        v_dim, v_model,
        case
            when agentmem_private.has_tenant_index('facts', v_tenant, v_model)
                then pg_catalog.format('f.tenant_id = %L', v_tenant)
            else 'f.tenant_id = $3'
        end
    ) using recall_facts.query_embedding, v_model, v_tenant, recall_facts.user_id, recall_facts.k;
end
$$;

comment on function agentmem.recall_facts(text, vector, int, text) is
'The user''s facts most similar to a query embedding, most similar first, with their sources.
Searches the current tenant only: an exact scan of the user''s facts up to
agentmem.exact_search_max_rows of them (as search_messages), above it the tenant''s own HNSW index
when a DBA built one (agentmem.create_tenant_index, table_name => ''facts''), else the model''s
shared one, with iterative scans. Raises AM020 for an empty user or k outside 1..100,
AM010/AM011 for a bad embedding or model.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.';

create or replace function agentmem.fact_history(fact_id uuid)
returns table (subject text, fact text, source_message_ids uuid[], valid_from timestamptz, replaced_at timestamptz)
language plpgsql
stable
security definer
set search_path from current
as $$
declare
    v_tenant text := agentmem.current_tenant();
begin
    if not exists (select from agentmem.facts as f where f.tenant_id = v_tenant and f.fact_id = fact_history.fact_id) then
        raise exception 'no such fact: %', coalesce(fact_history.fact_id::text, 'NULL')
        using errcode = 'AM030';
    end if;
    return query
    select h.subject, h.fact, h.source_message_ids, h.valid_from, h.replaced_at
    from agentmem.fact_history as h
    where h.tenant_id = v_tenant and h.fact_id = fact_history.fact_id
    order by h.replaced_at, h.history_id;
end
$$;

comment on function agentmem.fact_history(uuid) is
'What a fact said before contradicting facts replaced it, oldest first, with the sources of each version.
Entries whose source messages are all gone have been pruned. Raises AM030 for an unknown fact.
Security definer: runs as agentmem_owner because the application role holds no privilege on tables or internals; forced row-level security still confines it to the current tenant.';
