-- 0008 full text: message content and facts get a stored tsvector column and a
-- GIN index, so that search can match words as well as embeddings; the text
-- search configuration is an installation setting (english by default), kept
-- in a catalogue that the DBA function set_text_search_config changes.
-- Cost on upgrade: adding a stored generated column rewrites agentmem.messages
-- and agentmem.facts (ACCESS EXCLUSIVE lock for the length of the rewrite and
-- of the GIN builds).
-- The search functions gain parameters and result columns: their old
-- signatures are dropped here and re-created with the new ones.

create table agentmem.text_search_settings (
    singleton boolean primary key default true,
    config text not null default 'pg_catalog.english',
    updated_at timestamptz not null default now(),
    constraint text_search_settings_singleton_ck check (singleton)
);

comment on table agentmem.text_search_settings is
'The text search configuration of the full-text columns (messages.content_tsv, facts.fact_tsv) and of '
'the queries against them: one row, a schema-qualified configuration name. Installation-wide (no '
'tenant data); changed only with agentmem.set_text_search_config, which rebuilds the columns.';

insert into agentmem.text_search_settings (singleton, config) values (true, 'pg_catalog.english');

alter table agentmem.messages
add column content_tsv tsvector generated always as (to_tsvector('pg_catalog.english'::regconfig, content)) stored;

comment on column agentmem.messages.content_tsv is
'The words of content under the installation''s text search configuration (agentmem.text_search_settings).';

create index messages_content_tsv_idx on agentmem.messages using gin (content_tsv);

alter table agentmem.facts
add column fact_tsv tsvector generated always as (
    to_tsvector('pg_catalog.english'::regconfig, subject || ' ' || fact)
) stored;

comment on column agentmem.facts.fact_tsv is
'The words of subject and fact under the installation''s text search configuration.';

create index facts_fact_tsv_idx on agentmem.facts using gin (fact_tsv);

-- New result columns (which branch found a row, at what rank, the fused score).
alter type agentmem.message_hit
add attribute vector_rank int,
add attribute text_rank int,
add attribute score double precision;

alter type agentmem.message_in_window
add attribute vector_rank int,
add attribute text_rank int,
add attribute score double precision,
add attribute window_score double precision;

drop function if exists agentmem.search_messages(text, vector, int, uuid, real, text);
drop function if exists agentmem.search_with_context(text, vector, int, int, text, uuid, real);
drop function if exists agentmem.recall_facts(text, vector, int, text);
