-- Vector search: the one path by which messages (search_messages), facts
-- (recall_facts) and the answer cache (cache_lookup) find the nearest rows of
-- one tenant and model, in two parts. agentmem_private.vector_search_plan
-- takes the caller's scope (its table, id column, the candidates' condition,
-- a row check) and decides, without searching: it counts the candidates,
-- picks an exact scan, the tenant's own HNSW index (and its exact index) or
-- the model's shared HNSW index, sets hnsw.ef_search from the share of the
-- index the candidates are, and builds the statements, every distance written
-- by agentmem_private.vector_distance. agentmem_private.vector_search runs
-- the plan. A user's count and exact scan run in static statements
-- (agentmem_private.exact_scan) generated at install from the same scope and
-- distance. The rest of this file are the measured limits and index look-ups
-- they use. Figures behind the defaults: docs/tuning.md.

-- Functions of older installs that vector_search stands for: dropped, so that
-- every search reads the one path.
drop function if exists agentmem_private.nearest_messages(text, text, text, int, vector, int, uuid);
drop function if exists agentmem_private.count_user_rows(text, text, text, uuid, int);
drop function if exists agentmem_private.own_index_distance(text, int);
drop function if exists agentmem_private.exact_index_distance(text, int);
drop function if exists agentmem_private.vector_search(
    text, text, text, int, vector, int, text, uuid, text, text, text, bigint, int
);

create or replace function agentmem_private.exact_search_max_rows(p_dim int)
returns int
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- An exact scan costs about the same per row at 384 and 768 dimensions
    -- (one heap page per row: 10,000 rows 76 to 80 ms at 384, 80 to 100 ms
    -- at 768, side by side); 6,000 rows is where it costs what the tenant's
    -- own HNSW index costs at recall@10 >= 0.95 on random 768-d vectors
    -- (docs/tuning.md). p_dim stays for a rule per dimension.
    select coalesce(
        nullif(pg_catalog.current_setting('agentmem.exact_search_max_rows', true), '')::int,
        6000
    )
$$;

comment on function agentmem_private.exact_search_max_rows(int) is
'Internal: how many candidate rows a vector search scans exactly before it turns to an HNSW index:
the setting agentmem.exact_search_max_rows when set, else 6,000 at any dimension (an exact scan costs
about the same per row at 384 and 768 dimensions), the measured point where an exact scan stops being
cheaper than an index scan of the same recall (docs/tuning.md).';

create or replace function agentmem_private.count_max_rows(p_dim int)
returns int
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- Past the exact-scan limit the count goes on, up to 8 times it, so that
    -- hnsw_ef_search knows what share of the index the search filters.
    select least(8::bigint * agentmem_private.exact_search_max_rows(p_dim), 2000000000)::int
$$;

comment on function agentmem_private.count_max_rows(int) is
'Internal: how far a vector search counts its candidate rows (8 times agentmem.exact_search_max_rows):
at or below the exact-scan limit the count decides the exact scan; above it, it is the share of the
index the search filters, for agentmem_private.hnsw_ef_search.';

create or replace function agentmem_private.index_share(p_index text, p_rows bigint)
returns float8
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select least(1.0, greatest(p_rows, 1)::float8 / nullif(greatest(c.reltuples, 0), 0))
    from pg_catalog.pg_class as c
    where c.oid = pg_catalog.to_regclass(pg_catalog.format('agentmem.%I', p_index))
$$;

comment on function agentmem_private.index_share(text, bigint) is
'Internal: the share of an index''s rows (pg_class.reltuples, kept by VACUUM, ANALYZE and CREATE INDEX)
a search filters for: p_rows (the candidate rows counted, at most count_max_rows) over them, at most 1;
NULL when the index has no row count yet.';

create or replace function agentmem_private.index_rows(p_index text)
returns bigint
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select greatest(c.reltuples, 0)::bigint
    from pg_catalog.pg_class as c
    where c.oid = pg_catalog.to_regclass(pg_catalog.format('agentmem.%I', p_index))
$$;

comment on function agentmem_private.index_rows(text) is
'Internal: the rows of an index as of its last VACUUM, ANALYZE or CREATE INDEX (pg_class.reltuples;
0 when never counted); NULL when there is no such index.';

create or replace function agentmem_private.has_other_users(p_tenant text, p_user_id text)
returns boolean
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- Two probes of the B-tree on (tenant_id, user_id, ...): the first user id
    -- below and above this one. Any model counts (the cheap, safe side).
    select
        exists (
            select from agentmem.message_embeddings as e
            where e.tenant_id = p_tenant and e.user_id < p_user_id
        )
        or exists (
            select from agentmem.message_embeddings as e
            where e.tenant_id = p_tenant and e.user_id > p_user_id
        )
$$;

comment on function agentmem_private.has_other_users(text, text) is
'Internal: whether the tenant has message embeddings of any user other than p_user_id (of any model):
two B-tree probes. A user alone in a tenant with its own index searches all of it (share 1), so its
search need not count its rows past the exact-scan limit.';

create or replace function agentmem_private.hnsw_ef_search(
    p_share float8, p_rows bigint, p_k int, p_shared boolean, p_first boolean default false
) returns int
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- Measured on random 768-d vectors (docs/tuning.md): a tenant's own
    -- index (m 32, ef_construction 128) reaches recall@10 0.95 at ef 40 for
    -- 6,000 rows and at ef 600 for 30,000, so the full ef grows with the rows
    -- (rows / 40); a filtered slice of a share s keeps about s of what the
    -- scan visits (/ s); the shared index (pgvector's m 16) needs twice its
    -- ef (x 2). The first pass (p_first) uses the base alone, which suffices
    -- wherever the neighbours are close (vector_search decides).
    select case
        when nullif(pg_catalog.current_setting('agentmem.ef_search', true), '') is not null
            then pg_catalog.current_setting('agentmem.ef_search', true)::int
        when p_share is null then 1000
        else least(
            1000,
            pg_catalog.ceil(
                case
                    when p_first then greatest(100, 2 * (p_k + 20))
                    else greatest(2 * (p_k + 20), p_rows / 40.0) * case when p_shared then 2 else 1 end
                end
                / greatest(p_share, 0.001)
            )
        )::int
    end
$$;

comment on function agentmem_private.hnsw_ef_search(float8, bigint, int, boolean, boolean) is
'Internal: the hnsw.ef_search of one index search, at most 1,000 (pgvector''s maximum): the setting
agentmem.ef_search when set; 1,000 when the index has no row count (p_share NULL); else
max(2 x (k + 20), rows / 40) / share, twice that through the model''s shared index, or for a first pass
(p_first) max(100, 2 x (k + 20)) / share. p_rows: the candidate rows counted; p_share: their share of the
index (agentmem_private.index_share). Measured: docs/tuning.md.';

create or replace function agentmem_private.escalate_distance()
returns float8
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select coalesce(
        nullif(pg_catalog.current_setting('agentmem.ef_escalate_distance', true), '')::float8, 0.5
    )
$$;

comment on function agentmem_private.escalate_distance() is
'Internal: the cosine distance of the k-th neighbour of a first, cheap index pass above which the search
runs again at the full ef_search: the setting agentmem.ef_escalate_distance, else 0.5 (similarity 0.5).
Neighbours that far are no closer than unrelated rows, the case (random-like data) where a small ef
misses true neighbours (docs/tuning.md).';

create or replace function agentmem_private.tenant_index_name(p_table text, p_tenant text, p_model text)
returns text
language sql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- model names cannot contain '|', so tenant|model is unambiguous
    select p_table || '_t' || pg_catalog.left(pg_catalog.md5(p_tenant || '|' || p_model), 16) || '_hnsw'
$$;

comment on function agentmem_private.tenant_index_name(text, text, text) is
'Internal: the deterministic name of a tenant''s own HNSW index on one table for one model
(table_t<16 hex digits of md5(tenant|model)>_hnsw): searches look it up in pg_class.';

create or replace function agentmem_private.usable_index_expression(p_index text)
returns text
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select case when i.indisvalid and i.indisready then pg_catalog.pg_get_expr(i.indexprs, i.indrelid) end
    from pg_catalog.pg_index as i
    where i.indexrelid = pg_catalog.to_regclass(pg_catalog.format('agentmem.%I', p_index))
$$;

comment on function agentmem_private.usable_index_expression(text) is
'Internal: the indexed expression of an index of the agentmem schema that searches may use (it exists,
is valid and ready: an interrupted CREATE INDEX CONCURRENTLY leaves an invalid one); NULL otherwise.';

create or replace function agentmem_private.has_tenant_index(p_table text, p_tenant text, p_model text)
returns boolean
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- Its expression, l2_normalize(embedding::vector(d))::vector(d), is not the model's
    -- shared index's (embedding::vector(d)): a search written with it can use
    -- no other index. (An index of this name built by an earlier version, on
    -- embedding::vector(d), does not count: create_tenant_index rebuilds it.)
    select coalesce(agentmem_private.usable_index_expression(
        agentmem_private.tenant_index_name(p_table, p_tenant, p_model)
    ) like '%l2_normalize(%', false)
$$;

comment on function agentmem_private.has_tenant_index(text, text, text) is
'Internal: whether the tenant''s own HNSW index of this table and model exists, is valid (an interrupted
CREATE INDEX CONCURRENTLY leaves an invalid one, which searches ignore) and is on
l2_normalize(embedding::vector(d))::vector(d) (agentmem_private.vector_distance, path ''own index'').';

create or replace function agentmem_private.exact_index_name(p_table text, p_tenant text, p_model text)
returns text
language sql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select pg_catalog.left(agentmem_private.tenant_index_name(p_table, p_tenant, p_model), -5) || '_exact'
$$;

comment on function agentmem_private.exact_index_name(text, text, text) is
'Internal: the deterministic name of a tenant''s exact index on one table for one model: its HNSW
index''s (agentmem_private.tenant_index_name) ending in _exact instead of _hnsw.';

create or replace function agentmem_private.has_exact_index(p_table text, p_tenant text, p_model text)
returns boolean
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select agentmem_private.usable_index_expression(
        agentmem_private.exact_index_name(p_table, p_tenant, p_model)
    ) is not null
$$;

comment on function agentmem_private.has_exact_index(text, text, text) is
'Internal: whether the tenant''s exact index of this table and model exists and is valid.';

create or replace function agentmem_private.exact_index_max_rows(p_dim int)
returns bigint
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- A read of the whole exact index costs about rows x dimension; the
    -- default stops where it costs about what a full HNSW pass does (the
    -- measurement: bench/results/exact_index.md): 31,250 rows at 768
    -- dimensions, 62,500 at 384.
    select coalesce(
        nullif(pg_catalog.current_setting('agentmem.exact_index_max_rows', true), '')::bigint,
        24000000 / greatest(p_dim, 1)
    )
$$;

comment on function agentmem_private.exact_index_max_rows(int) is
'Internal: the most rows a tenant''s exact index may hold to be built by agentmem.create_tenant_index and
read by a search: the setting agentmem.exact_index_max_rows, else 24,000,000 / dimension (31,250 rows at
768 dimensions, 62,500 at 384): about the size up to which reading all of it costs less than a full
HNSW pass (docs/tuning.md, bench/results/exact_index.md).';

create or replace function agentmem_private.exact_index_first_pass(p_table text, p_tenant text, p_model text)
returns text
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select pg_catalog.substring(pg_catalog.obj_description(pg_catalog.to_regclass(pg_catalog.format(
        'agentmem.%I', agentmem_private.exact_index_name(p_table, p_tenant, p_model)
    )), 'pg_class'), '^agentmem first pass: (exact|hnsw)\M')
$$;

comment on function agentmem_private.exact_index_first_pass(text, text, text) is
'Internal: the first pass recorded on the tenant''s exact index, ''exact'' (searches read that index
first, without an HNSW pass) or ''hnsw'': its comment, written by agentmem.measure_tenant_index (or by a
DBA in the same form), begins ''agentmem first pass: exact'' or ''agentmem first pass: hnsw''. NULL when
it records none (never measured) or there is no such index.';

-- table_name is new in 0023's install (pending vectors): one signature.
drop function if exists agentmem_private.vector_distance(text, int);

create or replace function agentmem_private.vector_distance(path text, dimension int, table_name text default null)
returns text
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- Each index answers only an ORDER BY of its own expression: the shared
    -- index's is embedding::vector(d), a tenant's own HNSW index's
    -- l2_normalize(embedding::vector(d))::vector(d) (not the shared one's, so
    -- the planner cannot take the shared index for it: with the same
    -- expression it did whenever its cost came out lower, e.g. at ef_search 300
    -- for a 6,000-row tenant of 20,000 rows, at recall 0.73 instead of 0.99),
    -- its exact index's the same in half precision. The exact scan's (no cast)
    -- matches no index.
    -- pgvector's type, function and operator are qualified with its schema
    -- (agentmem_private.vector_schema says why).
    -- A message's vector waits in pending_embedding (embedding NULL, in no
    -- index) while agentmem.index_later holds it back from the index: the
    -- exact scan of messages reads whichever is set, 'pending scan' the
    -- pending ones only.
    select case vector_distance.path
        when 'exact scan' then case
            when vector_distance.table_name = 'message_embeddings'
                then pg_catalog.format('coalesce(e.embedding, e.pending_embedding) operator(%1$I.<=>) $1', s.name)
            else pg_catalog.format('e.embedding operator(%1$I.<=>) $1', s.name)
        end
        when 'pending scan' then pg_catalog.format('e.pending_embedding operator(%1$I.<=>) $1', s.name)
        when 'shared index' then pg_catalog.format(
            'e.embedding::%2$I.vector(%1$s) operator(%2$I.<=>) $1::%2$I.vector(%1$s)', vector_distance.dimension, s.name
        )
        when 'own index'
            then pg_catalog.format(
                '%2$I.l2_normalize(e.embedding::%2$I.vector(%1$s))::%2$I.vector(%1$s) operator(%2$I.<=>) $1::%2$I.vector(%1$s)',
                vector_distance.dimension, s.name
            )
        when 'exact index'
            then pg_catalog.format(
                '%2$I.l2_normalize(e.embedding::%2$I.vector(%1$s))::%2$I.halfvec(%1$s) operator(%2$I.<=>) $1::%2$I.halfvec(%1$s)',
                vector_distance.dimension, s.name
            )
    end
    from (select agentmem_private.vector_schema() as name) as s
$$;

comment on function agentmem_private.vector_distance(text, int, text) is
'Internal: the cosine distance of a row (alias e) to the query embedding ($1), as SQL text, in the form
the search path reads: ''exact scan'' (e.embedding <=> $1, no index; of table_name message_embeddings,
coalesce(e.embedding, e.pending_embedding)), ''pending scan'' (e.pending_embedding: the vectors
agentmem.index_later holds back from the index), ''shared index'' (the model''s HNSW
index, on embedding::vector(d)), ''own index'' (a tenant''s HNSW index, on
l2_normalize(embedding::vector(d))::vector(d), which l2_normalize does not change the cosine distance of)
or ''exact index'' (a tenant''s exact index, the same in half precision: an ORDER BY only, its rows
re-ranked by the exact scan''s distance). NULL for any other path. The one place a search''s distance is
written: tests/test_vector_search.py fails on any other function that writes one.';

create or replace function agentmem_private.vector_search_scope(
    table_name text,
    tenant_id text,
    model text,
    user_id text default null,
    acl_hash text default null,
    prompt_version text default null,
    llm_model text default null,
    corpus_version text default null
) returns text
language sql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- Each argument but table_name is an SQL expression: a quoted value
    -- (the scope a caller passes to vector_search) or a parameter (exact_scan's).
    select pg_catalog.format('e.tenant_id = %s and e.model = %s', vector_search_scope.tenant_id, vector_search_scope.model)
        -- facts and cached answers stored without a vector wait for a worker (embedding => NULL)
        || case when vector_search_scope.table_name <> 'message_embeddings' then ' and e.embedding is not null' else '' end
        || case when vector_search_scope.user_id is not null
            then pg_catalog.format(' and e.user_id = %s', vector_search_scope.user_id) else ''
        end
        || case when vector_search_scope.acl_hash is not null
            then pg_catalog.format(
                ' and e.acl_hash = %s and e.prompt_version = %s and e.llm_model = %s and e.corpus_version = %s',
                vector_search_scope.acl_hash, vector_search_scope.prompt_version, vector_search_scope.llm_model,
                vector_search_scope.corpus_version
            )
            else ''
        end
$$;

comment on function agentmem_private.vector_search_scope(text, text, text, text, text, text, text, text) is
'Internal: the SQL condition (on alias e) of a vector search''s scope in one table: the tenant and model,
a vector present (facts and cache entries), the user (user_id) and the cache''s key (acl_hash,
prompt_version, llm_model, corpus_version). Each argument but table_name is an SQL expression (a quoted
value or a parameter); a NULL user_id or acl_hash leaves that part out. The scope each caller of
agentmem_private.vector_search passes (search_messages, recall_facts, cache_nearest: quoted values) and
agentmem_private.exact_scan''s (parameters), the one place it is written.';

create or replace function agentmem_private.cache_live_check()
returns text
language sql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- a cached answer serves while unexpired and not withdrawn by a review
    -- (review_hit): the entries cache_entries_live_scope_idx holds, expiry a
    -- range of it (migration 0024)
    select ' and e.expires_at > pg_catalog.now() and e.withdrawn_at is null'
$$;

comment on function agentmem_private.cache_live_check() is
'Internal: the SQL condition (on alias e, starting with '' and'') of a cache entry that can serve:
unexpired, not withdrawn. Part of agentmem_private.cache_row_check, and the condition under which
exact_scan counts a key (an index-only scan of cache_entries_live_scope_idx); the one place it is
written.';

create or replace function agentmem_private.cache_row_check(question_max_bytes text)
returns text
language sql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- an entry that can serve (cache_live_check), and only a question the
    -- guard reads whole is a candidate
    select agentmem_private.cache_live_check()
        || pg_catalog.format(
            ' and (%1$s is null or pg_catalog.octet_length(e.question) <= %1$s)',
            coalesce(cache_row_check.question_max_bytes, 'null::int')
        )
$$;

comment on function agentmem_private.cache_row_check(text) is
'Internal: the SQL condition (on alias e, starting with '' and'') a cache entry meets to be a semantic
candidate: unexpired, not withdrawn (agentmem_private.cache_live_check), its question at most
question_max_bytes bytes (an SQL expression: a quoted number or a parameter; NULL: no limit). Checked on
every row a vector search of the cache reads (vector_search''s statements and exact_scan''s); the one
place it is written.';

-- exact_scan took no cache key before 0021's install (a new signature).
drop function if exists agentmem_private.exact_scan(vector, text, text, text, text, int, int, int);

-- agentmem_private.exact_scan: static statements (PL/pgSQL keeps them
-- prepared, and after five calls reuses a generic plan: the B-tree on the
-- tenant and user serves them whatever the values) for the count and the
-- exact scan of a user's messages or facts, the searches of small users. Its
-- body is generated here from vector_search_scope and vector_distance, so that
-- the scope and the distance stay written once; vector_search calls it where
-- the scope is all there is (no conversation, window or row check), and
-- writes every other statement itself. Measured against EXECUTE of the same
-- statements: bench/results/search_path.md.
do $generate$
declare
    v_branches text := '';
    v_table text;
    v_id text;
    v_where text;
    v_check text;
begin
    foreach v_table in array array['message_embeddings', 'facts', 'cache_entries'] loop
        v_id := case v_table when 'message_embeddings' then 'message_id' when 'facts' then 'fact_id' else 'entry_id' end;
        -- a user's messages or facts; the cache's key (no user), its entries
        -- in service and of at most question_max_bytes (cache_row_check),
        -- counted by those in service (cache_live_check: an index-only scan)
        v_where := agentmem_private.vector_search_scope(
            table_name => v_table, tenant_id => 'exact_scan.tenant_id', model => 'exact_scan.model',
            user_id => case when v_table <> 'cache_entries' then 'exact_scan.user_id' end,
            acl_hash => case when v_table = 'cache_entries' then 'exact_scan.acl_hash' end,
            prompt_version => 'exact_scan.prompt_version', llm_model => 'exact_scan.llm_model',
            corpus_version => 'exact_scan.corpus_version'
        );
        v_check := case when v_table = 'cache_entries'
            then agentmem_private.cache_row_check(question_max_bytes => 'exact_scan.question_max_bytes') else '' end;
        v_branches := v_branches || pg_catalog.format(
            $branch$
    %5$s exact_scan.table_name = %1$L then
        if exact_scan.count_limit is not null then
            select pg_catalog.count(*) into exact_scan.candidates
            from (select from agentmem.%1$I as e where %3$s%7$s limit exact_scan.count_limit) as s;
        end if;
        if exact_scan.k is not null and coalesce(exact_scan.candidates <= exact_scan.scan_max, true) then
            select pg_catalog.array_agg(h.id order by h.distance), pg_catalog.array_agg(h.distance order by h.distance)
            into exact_scan.ids, exact_scan.distances
            from (
                select e.%2$I as id, %4$s as distance from agentmem.%1$I as e
                where %3$s%6$s order by %4$s limit exact_scan.k
            ) as h;
        end if;$branch$,
            v_table, v_id, v_where,
            agentmem_private.vector_distance(path => 'exact scan', dimension => null, table_name => v_table),
            case when v_branches = '' then 'if' else 'elsif' end,
            v_check,
            case when v_table = 'cache_entries' then agentmem_private.cache_live_check() else '' end
        );
    end loop;
    execute pg_catalog.format(
        $function$
create or replace function agentmem_private.exact_scan(
    query_embedding vector,
    table_name text,
    tenant_id text,
    model text,
    user_id text,
    k int,
    count_limit int,
    scan_max int,
    acl_hash text default null,
    prompt_version text default null,
    llm_model text default null,
    corpus_version bigint default null,
    question_max_bytes int default null,
    out candidates int,
    out ids uuid[],
    out distances float8[]
)
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $body$
begin%s
    else
        raise exception 'exact_scan: %% is not a table it scans', exact_scan.table_name
        using errcode = 'AM020', hint = 'message_embeddings, facts or cache_entries.';
    end if;
end
$body$
$function$,
        v_branches
    );
end
$generate$;

comment on function agentmem_private.exact_scan(
    vector, text, text, text, text, int, int, int, text, text, text, bigint, int
) is
'Internal: a user''s count and exact scan in message_embeddings or facts (tenant, model and user only),
or of a key of the answer cache (tenant, model, acl_hash, prompt_version, llm_model, corpus_version; no
user; the entries that pass agentmem_private.cache_row_check with question_max_bytes), in
static statements, generated at install from agentmem_private.vector_search_scope and
agentmem_private.vector_distance (path ''exact scan''). candidates: the rows counted, up to count_limit
(NULL: not counted; of a cache key, its entries in service: agentmem_private.cache_live_check); ids and
distances: the k nearest, nearest first, when k is given and the count is NULL or at most scan_max (else
NULL). The query embedding is its first argument ($1 of the distance).';

-- The vector_search of earlier installs, which knew each table, its id column and its filters by name:
-- each caller now passes its own scope (the function below).
drop function if exists agentmem_private.vector_search(
    text, text, text, int, vector, int, text, uuid, text, text, text, bigint, int, timestamptz, timestamptz, text
);

create or replace function agentmem_private.vector_search_statement(
    path text,
    table_name text,
    id_column text,
    scope text,
    row_check text,
    dimension int
) returns text
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    -- The query embedding is $1 and k $2 (EXECUTE ... USING): a plan for
    -- these values, never a generic one. An index pass asks for k + 20 rows
    -- and keeps the k nearest (relaxed order hands rows back roughly, not
    -- exactly, nearest first); the exact index's rows are re-ranked by the
    -- exact scan's distance.
    select case
        when vector_search_statement.path in ('exact scan', 'pending scan') then pg_catalog.format(
            'select pg_catalog.array_agg(h.id order by h.distance), pg_catalog.array_agg(h.distance order by h.distance) '
            'from (select e.%1$I as id, %2$s as distance from agentmem.%3$I as e '
            '      where %4$s%5$s%6$s order by %2$s limit $2) as h',
            vector_search_statement.id_column,
            agentmem_private.vector_distance(
                path => vector_search_statement.path, dimension => vector_search_statement.dimension,
                table_name => vector_search_statement.table_name
            ),
            vector_search_statement.table_name, vector_search_statement.scope,
            -- the pending vectors (message_embeddings_pending_idx)
            case when vector_search_statement.path = 'pending scan' then ' and e.embedding is null' else '' end,
            coalesce(vector_search_statement.row_check, '')
        )
        when vector_search_statement.path in ('own index', 'shared index', 'exact index') then pg_catalog.format(
            'select (pg_catalog.array_agg(h.id order by h.distance))[1:$2], (pg_catalog.array_agg(h.distance order by h.distance))[1:$2] '
            'from (select e.%1$I as id, %2$s as distance from agentmem.%3$I as e '
            '      where %4$s%5$s order by %6$s limit $2 + 20) as h',
            vector_search_statement.id_column,
            agentmem_private.vector_distance(
                path => case when vector_search_statement.path = 'exact index' then 'exact scan' else vector_search_statement.path end,
                dimension => vector_search_statement.dimension, table_name => vector_search_statement.table_name
            ),
            vector_search_statement.table_name, vector_search_statement.scope,
            coalesce(vector_search_statement.row_check, ''),
            agentmem_private.vector_distance(path => vector_search_statement.path, dimension => vector_search_statement.dimension)
        )
    end
$$;

comment on function agentmem_private.vector_search_statement(text, text, text, text, text, int) is
'Internal: the SQL text of one pass of a vector search, taking the query embedding as $1 and k as $2.
It returns two arrays (ids, distances), nearest first. path: ''exact scan'' (the k nearest by the
exact distance), ''pending scan'' (the same among the vectors agentmem.index_later holds back from the
index), ''own index'', ''shared index'' or ''exact index'' (the k + 20 nearest in that index''s
order, the k nearest of them kept); NULL for any other path. table_name and id_column: the caller''s table
of schema agentmem and its id; scope: the candidates'' SQL condition on alias e; row_check: a condition
starting with '' and'', checked on every row read (NULL: none). Distances: agentmem_private.vector_distance.';

-- Over 100 lines: one decision read top to bottom (the lone user, the count, the exact scan, the index,
--   its ef_search, the exact index, the statements), each step reading what the one before it found.
create or replace function agentmem_private.vector_search_plan(
    table_name text,
    id_column text,
    tenant_id text,
    model text,
    dimension int,
    k int,
    scope text,
    row_check text default null,
    static_scan boolean default false,
    lone_user text default null,
    counted int default null,
    tenant_has_index boolean default null,
    user_alone boolean default null,
    out path text,
    out then_path text,
    out candidates int,
    out exact_max int,
    out count_limit int,
    out static boolean,
    out own_index boolean,
    out alone boolean,
    out index_name text,
    out ef_search int,
    out ef_search_full int,
    out statement text,
    out then_statement text,
    out exact_statement text
)
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_share float8;
    v_exact_index boolean;
begin
    if vector_search_plan.table_name is null or vector_search_plan.id_column is null or vector_search_plan.scope is null then
        raise exception 'vector_search_plan: table_name, id_column and scope are required'
        using errcode = 'AM020', hint = 'The caller passes its own table, id column and scope (an SQL condition on e).';
    end if;
    exact_max := agentmem_private.exact_search_max_rows(vector_search_plan.dimension);
    static := coalesce(vector_search_plan.static_scan, false);
    own_index := vector_search_plan.tenant_has_index;
    alone := vector_search_plan.user_alone;
    candidates := vector_search_plan.counted;
    -- A user alone in a tenant with its own index (two B-tree probes find no
    -- other user) has the index's rows (pg_class.reltuples, kept by VACUUM,
    -- ANALYZE and CREATE INDEX) and searches all of it, share 1: no count (a
    -- third of such a user's search in the server: 0.75 of 2.4 ms for 30,000
    -- rows, 100k clustered 384-d). Only the caller knows that its scope is
    -- all of a user's rows (lone_user, with the static statements' scope).
    -- Whether the tenant has its own index is looked up once: here when the
    -- shortcut may apply, else only once the count says an index is needed.
    if alone is null then
        alone := static and vector_search_plan.lone_user is not null;
        if alone then
            own_index := agentmem_private.has_tenant_index(
                vector_search_plan.table_name, vector_search_plan.tenant_id, vector_search_plan.model
            );
            alone := own_index
                and not agentmem_private.has_other_users(vector_search_plan.tenant_id, vector_search_plan.lone_user);
        end if;
    end if;
    if alone then
        index_name := agentmem_private.tenant_index_name(
            vector_search_plan.table_name, vector_search_plan.tenant_id, vector_search_plan.model
        );
        if candidates is null and agentmem_private.index_rows(index_name) > exact_max then
            candidates := agentmem_private.index_rows(index_name);
        end if;
    end if;
    -- Anyone else is counted, once, through the table's B-tree (tenant, user,
    -- ... or the cache's scope) up to count_max_rows (8 times the exact-scan
    -- limit): whether to scan exactly, and past the limit the share of the
    -- index the search filters, for hnsw.ef_search. A lone user whose index
    -- counts no more rows than the limit is counted too, to the limit only (an
    -- index not yet analysed since its tenant grew must not send a big user
    -- to the exact scan). The static statements (agentmem_private.exact_scan)
    -- count and scan in one call: the plan leaves their count to the run,
    -- which plans again with it (counted) when it is over the limit.
    if candidates is null then
        count_limit := case
            when alone then exact_max
            else greatest(exact_max, agentmem_private.count_max_rows(vector_search_plan.dimension))
        end + 1;
        if static then
            path := 'exact scan';
            return;
        end if;
        execute pg_catalog.format(
            'select pg_catalog.count(*) from (select from agentmem.%I as e where %s limit %s) as s',
            vector_search_plan.table_name, vector_search_plan.scope, count_limit
        )
        into candidates;
    end if;
    -- Few candidates, or an index scan that gives up at hnsw.max_scan_tuples:
    -- an exact scan, through the table's B-tree on the tenant.
    if not static then
        exact_statement := agentmem_private.vector_search_statement(
            path => 'exact scan', table_name => vector_search_plan.table_name, id_column => vector_search_plan.id_column,
            scope => vector_search_plan.scope, row_check => vector_search_plan.row_check,
            dimension => vector_search_plan.dimension
        );
    end if;
    if candidates <= exact_max then
        path := 'exact scan';
        statement := exact_statement;
        return;
    end if;
    -- An HNSW index: the tenant's own, else the model's shared one. A first
    -- pass at a small hnsw.ef_search, again at the full one (grown with the
    -- candidates and their share of the index) when the k-th neighbour is no
    -- closer than unrelated rows (escalate_distance), where a small ef misses
    -- true neighbours. A tenant with an exact index (create_tenant_index builds
    -- one for message_embeddings of up to exact_index_max_rows) reads it
    -- instead of that second pass: every row of the tenant in one sequential
    -- read, sorted by distance; a tenant whose first passes mostly come back
    -- far, as measure_tenant_index found on its rows, reads it straight away.
    own_index := coalesce(own_index, agentmem_private.has_tenant_index(
        vector_search_plan.table_name, vector_search_plan.tenant_id, vector_search_plan.model
    ));
    index_name := case
        when own_index then coalesce(index_name, agentmem_private.tenant_index_name(
            vector_search_plan.table_name, vector_search_plan.tenant_id, vector_search_plan.model
        ))
        else agentmem_private.model_index_name(vector_search_plan.table_name, vector_search_plan.model)
    end;
    path := case when own_index then 'own index' else 'shared index' end;
    -- a lone user's rows are already the index's, or counted past them
    v_share := case when alone then 1 else agentmem_private.index_share(index_name, candidates) end;
    ef_search := agentmem_private.hnsw_ef_search(
        p_share => v_share, p_rows => candidates, p_k => vector_search_plan.k, p_shared => not own_index, p_first => true
    );
    ef_search_full := agentmem_private.hnsw_ef_search(
        p_share => v_share, p_rows => candidates, p_k => vector_search_plan.k, p_shared => not own_index, p_first => false
    );
    v_exact_index := own_index
        and agentmem_private.has_exact_index(vector_search_plan.table_name, vector_search_plan.tenant_id, vector_search_plan.model)
        and agentmem_private.index_rows(agentmem_private.exact_index_name(
            vector_search_plan.table_name, vector_search_plan.tenant_id, vector_search_plan.model
        )) <= agentmem_private.exact_index_max_rows(vector_search_plan.dimension);
    if v_exact_index and coalesce(agentmem_private.exact_index_first_pass(
        vector_search_plan.table_name, vector_search_plan.tenant_id, vector_search_plan.model
    ) = 'exact', false) then
        path := 'exact index';
    end if;
    then_path := case
        when path = 'exact index' then null
        when v_exact_index then 'exact index'
        when ef_search < ef_search_full then path
    end;
    statement := agentmem_private.vector_search_statement(
        path => path, table_name => vector_search_plan.table_name, id_column => vector_search_plan.id_column,
        scope => vector_search_plan.scope, row_check => vector_search_plan.row_check,
        dimension => vector_search_plan.dimension
    );
    then_statement := case
        when then_path = path then statement
        when then_path is not null then agentmem_private.vector_search_statement(
            path => then_path, table_name => vector_search_plan.table_name, id_column => vector_search_plan.id_column,
            scope => vector_search_plan.scope, row_check => vector_search_plan.row_check,
            dimension => vector_search_plan.dimension
        )
    end;
end
$$;

comment on function agentmem_private.vector_search_plan(
    text, text, text, text, int, int, text, text, boolean, text, int, boolean, boolean
) is
'Internal: how a vector search of the caller''s scope will run, decided without running it: its path, the statements it built and their parameters.
The caller''s scope: table_name and id_column (its table of schema agentmem and id), tenant_id, model,
dimension, k, scope (the candidates'' SQL condition on alias e, values as literals: counted), row_check (a
condition starting with '' and'', checked on every row read, not counted), static_scan (scope and
row_check are exactly agentmem_private.exact_scan''s for the table: a user''s rows, a cache key) and
lone_user (the user whose every row of message_embeddings the scope is: the lone user''s shortcut).
counted, tenant_has_index and user_alone: what an earlier plan of the same search and its count found.
path: ''exact scan'' (at or below exact_max = agentmem.exact_search_max_rows candidates), ''own index''
(the tenant''s HNSW index, agentmem.create_tenant_index), ''shared index'' (the model''s) or ''exact
index'' (the tenant''s exact index, read first when measure_tenant_index found its first passes far);
then_path: the pass after a first one that comes back far (agentmem_private.escalate_distance): the exact
index, or the same index at ef_search_full; candidates: the rows counted (up to count_limit) or a lone
user''s index rows, NULL when static statements are to count them (static, path ''exact scan''); own_index:
whether the tenant has its own index (NULL: not looked up); alone: the lone user''s shortcut taken;
index_name; ef_search and ef_search_full (agentmem_private.hnsw_ef_search); statement, then_statement and
exact_statement (the exact scan when an index stops short; NULL when static):
agentmem_private.vector_search_statement''s text. Run by agentmem_private.vector_search.';

create or replace function agentmem_private.merge_pending(
    table_name text,
    id_column text,
    scope text,
    row_check text,
    dimension int,
    query_embedding vector,
    k int,
    inout ids uuid[],
    inout distances float8[]
)
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_pending_ids uuid[];
    v_pending_distances float8[];
begin
    -- The scope's pending vectors (message_embeddings_pending_idx), the k
    -- nearest by the exact distance, then the k nearest of both lists.
    execute agentmem_private.vector_search_statement(
        path => 'pending scan', table_name => merge_pending.table_name, id_column => merge_pending.id_column,
        scope => merge_pending.scope, row_check => merge_pending.row_check, dimension => merge_pending.dimension
    ) into v_pending_ids, v_pending_distances using merge_pending.query_embedding, merge_pending.k;
    if pg_catalog.cardinality(v_pending_ids) > 0 then
        select pg_catalog.array_agg(m.id order by m.distance), pg_catalog.array_agg(m.distance order by m.distance)
        into merge_pending.ids, merge_pending.distances
        from (
            select a.id, a.distance
            from (
                select u.id, u.distance
                from rows from (pg_catalog.unnest(merge_pending.ids), pg_catalog.unnest(merge_pending.distances)) as u (id, distance)
                union all
                select u.id, u.distance
                from rows from (pg_catalog.unnest(v_pending_ids), pg_catalog.unnest(v_pending_distances)) as u (id, distance)
            ) as a
            order by a.distance
            limit merge_pending.k
        ) as m;
    end if;
end
$$;

comment on function agentmem_private.merge_pending(text, text, text, text, int, vector, int, uuid[], float8[]) is
'Internal: an index search''s ids and distances (nearest first) merged with the scope''s vectors that
agentmem.index_later holds back from the index (message_embeddings.pending_embedding, read exactly: a
''pending scan''); the k nearest of both, nearest first. Called by agentmem_private.vector_search.';

create or replace function agentmem_private.vector_search(
    table_name text,
    id_column text,
    tenant_id text,
    model text,
    dimension int,
    query_embedding vector,
    k int,
    scope text,
    row_check text default null,
    static_scan boolean default false,
    lone_user text default null,
    user_id text default null,
    acl_hash text default null,
    prompt_version text default null,
    llm_model text default null,
    corpus_version bigint default null,
    question_max_bytes int default null
) returns table (id uuid, distance float8)
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
set "hnsw.iterative_scan" = 'relaxed_order'
set "hnsw.ef_search" = 1000
set enable_sort = off
set work_mem = '64MB'
as $$
declare
    v_plan record;
    v_scan record;
    v_ids uuid[];
    v_distances float8[];
begin
    v_plan := agentmem_private.vector_search_plan(
        table_name => vector_search.table_name, id_column => vector_search.id_column,
        tenant_id => vector_search.tenant_id, model => vector_search.model, dimension => vector_search.dimension,
        k => vector_search.k, scope => vector_search.scope, row_check => vector_search.row_check,
        static_scan => vector_search.static_scan, lone_user => vector_search.lone_user
    );
    if v_plan.static and v_plan.candidates is null then
        -- the count and, at or below the limit, the exact scan in one call of
        -- static statements: done unless the count says an index
        v_scan := agentmem_private.exact_scan(
            query_embedding => vector_search.query_embedding, table_name => vector_search.table_name,
            tenant_id => vector_search.tenant_id, model => vector_search.model, user_id => vector_search.user_id,
            k => vector_search.k, count_limit => v_plan.count_limit, scan_max => v_plan.exact_max,
            acl_hash => vector_search.acl_hash, prompt_version => vector_search.prompt_version,
            llm_model => vector_search.llm_model, corpus_version => vector_search.corpus_version,
            question_max_bytes => vector_search.question_max_bytes
        );
        if v_scan.candidates <= v_plan.exact_max then
            return query select u.id, u.distance from rows from (pg_catalog.unnest(v_scan.ids), pg_catalog.unnest(v_scan.distances)) as u (id, distance);
            return;
        end if;
        v_plan := agentmem_private.vector_search_plan(
            table_name => vector_search.table_name, id_column => vector_search.id_column,
            tenant_id => vector_search.tenant_id, model => vector_search.model, dimension => vector_search.dimension,
            k => vector_search.k, scope => vector_search.scope, row_check => vector_search.row_check,
            static_scan => vector_search.static_scan, lone_user => vector_search.lone_user,
            counted => v_scan.candidates, tenant_has_index => v_plan.own_index, user_alone => v_plan.alone
        );
    end if;
    if v_plan.path <> 'exact scan' then
        -- sorts off (the SET clause): the planner keeps to the index; hnsw.ef_search restored on return
        perform pg_catalog.set_config('hnsw.ef_search', v_plan.ef_search::text, true);
        execute v_plan.statement into v_ids, v_distances using vector_search.query_embedding, vector_search.k;
        if v_plan.then_path is not null and not (coalesce(pg_catalog.cardinality(v_distances), 0) >= vector_search.k
                                                and v_distances[vector_search.k] <= agentmem_private.escalate_distance()) then
            if v_plan.then_path <> 'exact index' then
                perform pg_catalog.set_config('hnsw.ef_search', v_plan.ef_search_full::text, true);
            end if;
            execute v_plan.then_statement into v_ids, v_distances using vector_search.query_embedding, vector_search.k;
        end if;
    end if;
    if v_plan.path = 'exact scan' or coalesce(pg_catalog.cardinality(v_ids), 0) < vector_search.k then
        if v_plan.static then
            v_scan := agentmem_private.exact_scan(
                query_embedding => vector_search.query_embedding, table_name => vector_search.table_name,
                tenant_id => vector_search.tenant_id, model => vector_search.model, user_id => vector_search.user_id,
                k => vector_search.k, count_limit => null, scan_max => null,
                acl_hash => vector_search.acl_hash, prompt_version => vector_search.prompt_version,
                llm_model => vector_search.llm_model, corpus_version => vector_search.corpus_version,
                question_max_bytes => vector_search.question_max_bytes
            );
            v_ids := v_scan.ids;
            v_distances := v_scan.distances;
        else
            execute v_plan.exact_statement into v_ids, v_distances using vector_search.query_embedding, vector_search.k;
        end if;
    elsif vector_search.table_name = 'message_embeddings' then  -- and the vectors index_later holds back
        select p.ids, p.distances into v_ids, v_distances from agentmem_private.merge_pending(
            table_name => vector_search.table_name, id_column => vector_search.id_column, scope => vector_search.scope,
            row_check => vector_search.row_check, dimension => vector_search.dimension,
            query_embedding => vector_search.query_embedding, k => vector_search.k, ids => v_ids, distances => v_distances
        ) as p;
    end if;
    return query select u.id, u.distance from rows from (pg_catalog.unnest(v_ids), pg_catalog.unnest(v_distances)) as u (id, distance);
end
$$;

comment on function agentmem_private.vector_search(
    text, text, text, text, int, vector, int, text, text, boolean, text, text, text, text, text, bigint, int
) is
'Internal: the k rows of the caller''s scope nearest a query embedding (ids and cosine distances, nearest first), as agentmem_private.vector_search_plan decides.
The one vector search of search_messages, recall_facts and cache_lookup: each passes its own scope
(table_name, id_column, scope, row_check, static_scan, lone_user: vector_search_plan says what each is)
and, for agentmem_private.exact_scan''s static statements, their key (user_id; acl_hash, prompt_version,
llm_model, corpus_version, question_max_bytes). It runs the plan: a static count and exact scan in one
call (planned again with the count when that is over the limit), or the plan''s statements through
EXECUTE ... USING (the query embedding $1, k $2), an index''s first pass at the plan''s ef_search and,
when its k-th neighbour is farther than agentmem_private.escalate_distance, its then_statement; an exact
scan when an index stops short of k rows. Of message_embeddings, an index''s rows are merged with the
scope''s vectors that agentmem.index_later holds back from the index (a ''pending scan'').';
