-- Full-text search: the installation's text search configuration, how a
-- caller's words become a query (never tsquery syntax), and the DBA function
-- that switches the configuration (a rewrite of the full-text columns).

create or replace function agentmem_private.text_search_config()
returns regconfig
language sql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
    select s.config::regconfig from agentmem.text_search_settings as s
$$;

comment on function agentmem_private.text_search_config() is
'Internal: the installation''s text search configuration (agentmem.text_search_settings).';

create or replace function agentmem_private.text_terms(p_text text)
returns text[]
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_words tsvector;
begin
    if p_text is null then
        return null;
    end if;
    -- The words of the text as the columns index them (same configuration:
    -- stop words dropped, stemmed).
    v_words := pg_catalog.to_tsvector(agentmem_private.text_search_config(), p_text);
    if pg_catalog.length(v_words) = 0 then
        return null;
    end if;
    if pg_catalog.length(v_words) <= 64 then
        -- The common case: every word, without ordering them by position.
        return pg_catalog.tsvector_to_array(v_words);
    end if;
    -- More than 64 distinct words: the first 64 by position.
    return array(
        select t.lexeme
        from pg_catalog.unnest(v_words) as t (lexeme, positions, weights)
        cross join lateral pg_catalog.unnest(t.positions) as p (position)
        group by t.lexeme
        order by pg_catalog.min(p.position), t.lexeme
        limit 64
    );
end
$$;

comment on function agentmem_private.text_terms(text) is
'Internal: the words of a caller''s text that a search looks for: its distinct lexemes under the
installation''s configuration (stop words dropped, stemmed), at most 64 (the first 64 by position).
NULL when the text holds no searchable word.';

create or replace function agentmem_private.terms_query(p_terms text[])
returns tsquery
language plpgsql
immutable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    -- PL/pgSQL, not SQL: its statement's plan is kept for the session.
    -- The words OR-ed. Each lexeme is quoted, so & | ! : * ( ) < >
    -- are characters of a word, never operators. The order of the terms
    -- changes neither what matches nor ts_rank (it sorts them).
    return nullif(pg_catalog.array_to_string(
        array(
            select '''' || pg_catalog.replace(pg_catalog.replace(w.lexeme, '\', '\\'), '''', '''''') || ''''
            from pg_catalog.unnest(p_terms) with ordinality as w (lexeme, n)
            order by w.n
        ),
        ' | '
    ), '')::tsquery;
end
$$;

comment on function agentmem_private.terms_query(text[]) is
'Internal: the full-text query of these lexemes (text_terms'' result), OR-ed, each quoted; NULL for none.
text_query''s second half, for a caller that needs the terms too (search_messages: BM25 reads them).';

create or replace function agentmem_private.text_query(p_text text)
returns tsquery
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    return agentmem_private.terms_query(agentmem_private.text_terms(p_text));
end
$$;

comment on function agentmem_private.text_query(text) is
'Internal: the full-text query for a caller''s text: its words (text_terms: distinct lexemes under the
installation''s configuration, stop words dropped, stemmed, at most the first 64 by position), OR-ed (a
message matching any of them is a candidate; ts_rank ranks those matching more of them, and more often,
first). Operators and quotes in the text are characters of words, never tsquery syntax.
NULL when the text holds no searchable word (NULL, blank, punctuation or stop words only).';

create or replace function agentmem_private.check_search_query(
    p_function text,
    p_model text,
    p_embedding vector,
    p_text text,
    p_candidate_pool int,
    p_rrf_k int
) returns int
language plpgsql
stable
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
begin
    perform agentmem_private.check_range('candidate_pool', p_candidate_pool, 1, 1000);
    perform agentmem_private.check_range('rrf_k', p_rrf_k, 0, 1000);
    if p_embedding is null and p_text is null then
        raise exception '% needs query_embedding, query_text or both', p_function
        using
            errcode = 'AM020',
            hint = 'Pass query_text => ''words to find'' to search by words (e.g. from psql), '
            || 'query_embedding => the embedded question, or both for hybrid search.';
    end if;
    if pg_catalog.length(p_text) > 100000 then
        raise exception 'query_text is too large: % characters, the limit is 100000', pg_catalog.length(p_text)
        using errcode = 'AM021', hint = 'Search with the question itself, not a document.';
    end if;
    if p_embedding is not null then
        return agentmem_private.check_embedding(p_model, p_embedding);
    end if;
    return null;
end
$$;

comment on function agentmem_private.check_search_query(text, text, vector, text, int, int) is
'Internal: the query arguments every hybrid search shares: candidate_pool 1..1,000 and rrf_k 0..1,000
(AM020), an embedding, a text or both (AM020), a text of at most 100,000 characters (AM021), a valid
embedding of the model (AM010/AM011). Returns the embedding''s dimension, NULL without one.';

-- Search_messages' fusion of three lists before fuse_lists (sql/13_bm25.sql; fusion 'zscore', issue 35),
-- in its two signatures.
drop function if exists agentmem_private.fuse_ranks(uuid[], uuid[], uuid[], int, int);
drop function if exists agentmem_private.fuse_ranks(uuid[], uuid[], uuid[], int, int, uuid[], double precision[]);

create or replace function agentmem_private.fuse_ranks(
    p_vector_ids uuid[],
    p_text_ids uuid[],
    p_rrf_k int,
    p_k int
) returns table (id uuid, vector_rank int, text_rank int, score double precision)
language sql
immutable
security invoker
-- At most p_k rows (5 by default): told so, the planner joins them to
-- messages or facts by primary key instead of hashing the tenant's rows
-- (3.7 of a vector-only search's 6.4 ms at 100,000 messages; 25 ms of a
-- 10,000-message user's search).
rows 10
set search_path = pg_catalog, agentmem, pg_temp
as $$
    with vec as (
        select v.id, v.vector_rank::int as vector_rank
        from pg_catalog.unnest(p_vector_ids) with ordinality as v (id, vector_rank)
    ),

    txt as (
        select x.id, x.text_rank::int as text_rank
        from pg_catalog.unnest(p_text_ids) with ordinality as x (id, text_rank)
    )

    select
        coalesce(v.id, x.id),
        v.vector_rank,
        x.text_rank,
        coalesce(1.0::float8 / (p_rrf_k + v.vector_rank), 0) + coalesce(1.0::float8 / (p_rrf_k + x.text_rank), 0)
    from vec as v
    full join txt as x on v.id = x.id
    order by 4 desc, 2 nulls last, 3, 1
    limit p_k
$$;

comment on function agentmem_private.fuse_ranks(uuid[], uuid[], int, int) is
'Internal: reciprocal rank fusion of two ranked id lists (best first; either may be NULL or empty):
score = sum over the lists holding an id of 1 / (p_rrf_k + its rank); the p_k best, best first,
ties by vector rank, then text rank. With one list, its own order.';

create or replace function agentmem.set_text_search_config(config regconfig)
returns boolean
language plpgsql
volatile
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $$
declare
    v_name text;
    v_old text;
    v_tenant text;
begin
    if set_text_search_config.config is null then
        raise exception 'config must be a text search configuration, not NULL'
        using
            errcode = 'AM020',
            hint = 'e.g. agentmem.set_text_search_config(config => ''simple''); \dF in psql lists them.';
    end if;
    select pg_catalog.format('%I.%I', n.nspname, c.cfgname) into v_name
    from pg_catalog.pg_ts_config as c
    inner join pg_catalog.pg_namespace as n on c.cfgnamespace = n.oid
    where c.oid = set_text_search_config.config;

    select s.config into v_old from agentmem.text_search_settings as s for update;
    if v_old::regconfig = set_text_search_config.config then
        return false;
    end if;

    -- Generated columns cannot follow a setting: drop and add them again with
    -- the new configuration as a constant (a rewrite of both tables), then
    -- rebuild their GIN indexes.
    lock table agentmem.messages, agentmem.facts in access exclusive mode;
    alter table agentmem.messages drop column content_tsv;
    execute pg_catalog.format(
        'alter table agentmem.messages add column content_tsv tsvector '
        'generated always as (pg_catalog.to_tsvector(%L::regconfig, content)) stored',
        v_name
    );
    create index messages_content_tsv_idx on agentmem.messages using gin (content_tsv);
    comment on column agentmem.messages.content_tsv is
    'The words of content under the installation''s text search configuration (agentmem.text_search_settings).';

    alter table agentmem.facts drop column fact_tsv;
    execute pg_catalog.format(
        'alter table agentmem.facts add column fact_tsv tsvector '
        'generated always as (pg_catalog.to_tsvector(%L::regconfig, subject || '' '' || fact)) stored',
        v_name
    );
    create index facts_fact_tsv_idx on agentmem.facts using gin (fact_tsv);
    comment on column agentmem.facts.fact_tsv is
    'The words of subject and fact under the installation''s text search configuration.';

    -- The BM25 statistics count the new configuration's lexemes.
    -- (One call per statement: on Citus a statement reading messages may not
    -- call a function that reads them too.)
    for v_tenant in select distinct m.tenant_id from agentmem.messages as m order by 1 loop
        perform agentmem_private.recount_terms(v_tenant, null);
    end loop;

    update agentmem.text_search_settings as s set config = v_name, updated_at = pg_catalog.now();
    return true;
end
$$;

comment on function agentmem.set_text_search_config(regconfig) is
'Switch the text search configuration of full-text search (DBA only), e.g. to ''simple'' for mixed languages.
''simple'': no stemming, no stop words; or another language''s configuration.
Rebuilds messages.content_tsv and facts.fact_tsv with the new configuration and their GIN indexes:
a rewrite of both tables under an ACCESS EXCLUSIVE lock, so every read and write of messages and
facts waits for it (minutes for millions of messages); run it in a maintenance window.
Queries use the new configuration as soon as the transaction commits. Returns false, doing nothing,
when the configuration is already the current one. AM020 for NULL. Needs to own the tables.
Called by: the DBA (granted to no role).';

-- Row-level security and the GIN index. Under forced RLS the planner may use
-- an index for a condition only if the condition's function is LEAKPROOF (it
-- could otherwise see rows the policy rejects before the policy runs), and
-- ts_match_vq, behind tsvector @@ tsquery, is not marked so. It cannot leak:
-- it returns true or false, and the only errors it can raise (stack depth,
-- out of memory) depend on the query, which agentmem_private.text_query
-- builds, never on a row's contents. So the installer marks it LEAKPROOF in
-- this database when it runs as a superuser (only a superuser may), and the
-- text branch takes the GIN index. Otherwise the text branch still works,
-- reading the user's own rows through (tenant_id, user_id) and testing each,
-- and this WARNING tells the DBA the statement to run (a warning, so that
-- both installers show it: the psql script hides mere notices).
do $leakproof$
begin
    if (select not p.proleakproof from pg_catalog.pg_proc as p where p.oid = 'pg_catalog.ts_match_vq'::regproc) then
        if (select r.rolsuper from pg_catalog.pg_roles as r where r.rolname = current_user) then
            alter function pg_catalog.ts_match_vq(tsvector, tsquery) leakproof;
        else
            raise warning 'full-text search will not use its GIN index under row-level security until a superuser runs: %',
                'alter function pg_catalog.ts_match_vq(tsvector, tsquery) leakproof;'
            using hint = 'See docs/security.md, "Search by words under row-level security".';
        end if;
    end if;
end
$leakproof$;
