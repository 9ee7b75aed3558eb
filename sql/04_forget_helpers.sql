-- What forgetting shares with facts (40), the forget_* functions (50) and
-- retention (60): what goes when messages or texts go, and the receipt every
-- erasure leaves in agentmem.erasure_log. Forget is the verb of the API; an
-- erasure is what one call does, and erasure_log holds its receipts.

create or replace function agentmem_private.forget_text_hashes(p_tenant text, p_texts text[])
returns bigint
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_count bigint;
begin
    -- The embedding cache is keyed by the sha256 of the exact text embedded,
    -- which callers pass with or without the model's document/query prefix:
    -- every variant goes, by primary key.
    with variant as (
        select distinct m.model, pg_catalog.sha256(pg_catalog.convert_to(p.prefix || t.txt, 'UTF8')) as h
        from pg_catalog.unnest(p_texts) as t (txt)
        cross join agentmem.models as m
        cross join lateral (values (''), (m.document_prefix), (m.query_prefix)) as p (prefix)
        where t.txt is not null
    ),

    gone as (
        delete from agentmem.embedding_cache as c
        using variant as v
        where c.tenant_id = p_tenant and c.model = v.model and c.text_sha256 = v.h
        returning 1
    )

    select pg_catalog.count(*) into v_count from gone;
    return v_count;
end
$$;

comment on function agentmem_private.forget_text_hashes(text, text[]) is
'Internal: delete the embedding cache rows of these texts (raw and with every model''s prefixes). '
'Returns how many.';

create or replace function agentmem_private.forget_receipt(p_tenant text, p_scope text, p_removed jsonb)
returns agentmem.erasure_log
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_row agentmem.erasure_log;
begin
    insert into agentmem.erasure_log as e (tenant_id, scope, rows_removed)
    values (p_tenant, p_scope, p_removed)
    returning * into v_row;
    return v_row;
end
$$;

comment on function agentmem_private.forget_receipt(text, text, jsonb) is
'Internal: write and return the erasure receipt.';

create or replace function agentmem_private.prune_fact_sources(p_tenant text, p_message_ids uuid[], p_delete_orphans boolean)
returns jsonb
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_deleted bigint := 0;
    v_unlinked bigint := 0;
    v_history bigint := 0;
begin
    if p_message_ids is null or pg_catalog.cardinality(p_message_ids) = 0 then
        return pg_catalog.jsonb_build_object('facts', 0, 'facts_unlinked', 0, 'fact_history', 0);
    end if;
    -- History entries live only as long as one of their sources does.
    with gone as (
        delete from agentmem.fact_history as h
        where
            h.tenant_id = p_tenant and h.source_message_ids && p_message_ids
            and h.source_message_ids <@ p_message_ids
        returning 1
    )
    select pg_catalog.count(*) into v_history from gone;
    update agentmem.fact_history as h
    set source_message_ids = array(select s from pg_catalog.unnest(h.source_message_ids) as s where s <> all(p_message_ids))
    where h.tenant_id = p_tenant and h.source_message_ids && p_message_ids;

    if p_delete_orphans then
        with gone as (
            delete from agentmem.facts as f
            where
                f.tenant_id = p_tenant and f.source_message_ids && p_message_ids
                and f.source_message_ids <@ p_message_ids
            returning 1
        )
        select pg_catalog.count(*) into v_deleted from gone;
    end if;
    with changed as (
        update agentmem.facts as f
        set source_message_ids = array(select s from pg_catalog.unnest(f.source_message_ids) as s where s <> all(p_message_ids))
        where f.tenant_id = p_tenant and f.source_message_ids && p_message_ids
        returning 1
    )
    select pg_catalog.count(*) into v_unlinked from changed;
    return pg_catalog.jsonb_build_object('facts', v_deleted, 'facts_unlinked', v_unlinked, 'fact_history', v_history);
end
$$;

comment on function agentmem_private.prune_fact_sources(text, uuid[], boolean) is
'Internal: the messages p_message_ids are gone. Delete history entries left without a source, '
'unlink them from the remaining history and facts, and (p_delete_orphans) delete facts whose every '
'source was among them. Returns counts per table.';

create or replace function agentmem_private.lock_user(p_tenant text, p_user_id text, p_exclusive boolean)
returns void
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    -- One key per (tenant, user): the tenant's length first, so no two pairs
    -- make the same text (tenant 'rt/x' user 'y' is '4/rt/x/y', tenant 'rt'
    -- user 'x/y' is '2/rt/x/y'). Two pairs whose texts hash alike only wait
    -- for each other; they never share data.
    v_key bigint := pg_catalog.hashtextextended(
        pg_catalog.format('agentmem.user/%s/%s/%s', pg_catalog.length(p_tenant), p_tenant, p_user_id), 12
    );
begin
    if p_exclusive then
        perform pg_catalog.pg_advisory_xact_lock(v_key);
    else
        perform pg_catalog.pg_advisory_xact_lock_shared(v_key);
    end if;
end
$$;

comment on function agentmem_private.lock_user(text, text, boolean) is
'Internal: the per-(tenant, user) transaction advisory lock that serialises erasure against writers.
Every function that writes rows of a user (start_conversation, store_messages, upsert_fact, and
cache_store/cache_lookup given a user_id) takes it shared, before any row lock; forget_user takes it
exclusive, first. So an erasure waits for every write of that user in flight and sees it, and a write
that starts during the erasure runs after it: nothing committed before the erasure survives it.';
