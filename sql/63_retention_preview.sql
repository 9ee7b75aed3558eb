-- The dry run of retention: what apply_retention would remove now, by running
-- its own steps (the fold of uses, each kind's deletion) in a subtransaction
-- that is rolled back. After 60_retention.sql, whose deletion it runs.

create or replace function agentmem.preview_retention(batch_size int default 5000)
returns table (kind text, tenant_id text, would_remove bigint, ids text[])
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
#variable_conflict use_column
declare
    v_found jsonb := '[]';
    v_kind text;
    v_spec text[];
begin
    perform agentmem_private.check_range('batch_size', preview_retention.batch_size, 1, 1000000);
    perform agentmem_private.check_sees_every_tenant(
        'agentmem.preview_retention', 'retention works across tenants',
        'Run it as a superuser or a role with BYPASSRLS.'
    );
    -- The real run's own steps (the fold of uses, then each kind's deletion, in its order), in a
    -- subtransaction rolled back at the end: what it lists is what apply_retention would remove now.
    begin
        perform pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('agentmem.apply_retention', 5));
        perform agentmem_private.fold_use_log(least(preview_retention.batch_size::bigint * 20, 10000000)::int);
        foreach v_spec slice 1 in array array[
            ['messages', 'messages', 'message_id', 'created_at'],
            ['cached_answers', 'cache_entries', 'entry_id', 'created_at'],
            ['hit_log', 'cache_hits', 'hit_id', 'created_at'],
            ['facts', 'facts', 'fact_id', 'updated_at'],
            ['erasure_log', 'erasure_log', 'erasure_id', 'erased_at'],
            ['job_runs', 'job_runs', 'run_id', 'finished_at'],
            ['access_log', 'access_log', 'access_id', 'logged_at']
        ] loop
            v_kind := v_spec[1];
            v_found := v_found || coalesce((
                select pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                    'kind', v_kind, 'tenant_id', g.tenant_id, 'ids', g.ids
                ))
                from (
                    select d.tenant_id, pg_catalog.array_agg(d.key order by d.key) as ids
                    from agentmem_private.retention_delete(v_kind, v_spec[2], v_spec[3], v_spec[4], preview_retention.batch_size) as d
                    group by d.tenant_id
                ) as g
            ), '[]');
        end loop;
        raise exception using errcode = 'AM099', message = 'preview_retention: rolled back';
    exception when sqlstate 'AM099' then
        null;
    end;
    return query
    select
        x ->> 'kind', x ->> 'tenant_id', pg_catalog.jsonb_array_length(x -> 'ids')::bigint,
        array(select pg_catalog.jsonb_array_elements_text(x -> 'ids'))
    from pg_catalog.jsonb_array_elements(v_found) as x
    order by 1, 2;
end
$$;

comment on function agentmem.preview_retention(int) is
'A dry run of apply_retention: what its policies would remove now, per kind and tenant (rows and their ids), removing nothing.
It runs the real run''s steps (the fold of uses, then each kind''s deletion with the same batch_size, the
same turn across tenants, pins exempt) in a subtransaction it rolls back, so an apply_retention with the
same batch_size run next, with nothing written in between, removes exactly these rows. Not listed: the
answer cache''s sweep of expired entries, and fact history that goes with its last source message.
batch_size 1 to 1,000,000 (AM020). Waits for a running apply_retention. Runs as a superuser or BYPASSRLS
role (AM041 otherwise).
Called by: the DBA (granted to no role).';
