-- The use boost's fusion: reciprocal rank fusion (agentmem_private.fuse_ranks)
-- with each candidate's score multiplied by its use boost factor. Pure: the
-- caller reads the factors first (a statement of its own, for Citus).

create or replace function agentmem_private.boost_ranks(
    p_vector_ids uuid[],
    p_text_ids uuid[],
    p_rrf_k int,
    p_k int,
    p_boost_ids uuid[],
    p_boost_factors float8[]
) returns table (id uuid, vector_rank int, text_rank int, score double precision)
language sql
immutable
security invoker
rows 10
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- Off (no factors): reciprocal rank fusion, exactly.
    select f.id, f.vector_rank, f.text_rank, f.score
    from agentmem_private.fuse_ranks(p_vector_ids, p_text_ids, p_rrf_k, p_k) as f
    where p_boost_ids is null
    union all
    -- On: every candidate of both lists fused, its score times its factor, the p_k best.
    select b.id, b.vector_rank, b.text_rank, b.score
    from (
        select f.id, f.vector_rank, f.text_rank, f.score * coalesce(x.factor, 1) as score
        from agentmem_private.fuse_ranks(
            p_vector_ids, p_text_ids, p_rrf_k,
            coalesce(pg_catalog.cardinality(p_vector_ids), 0) + coalesce(pg_catalog.cardinality(p_text_ids), 0)
        ) as f
        left join rows from (pg_catalog.unnest(p_boost_ids), pg_catalog.unnest(p_boost_factors)) as x (id, factor) on f.id = x.id
        where p_boost_ids is not null
        order by 4 desc, 2 nulls last, 3, 1
        limit p_k
    ) as b
$$;

comment on function agentmem_private.boost_ranks(uuid[], uuid[], int, int, uuid[], float8[]) is
'Internal: agentmem_private.fuse_ranks when p_boost_ids is NULL; else every candidate fused, its score '
'multiplied by its factor (p_boost_factors, by the id in p_boost_ids; 1 for an id not there), the p_k best, best first.';
