-- The runnable example of every function of schema agentmem, and the meaning of every parameter:
-- what docs/api.md shows beside each signature, and what `\df+ agentmem.*` shows in the comment.
--
-- agentmem_private.api_examples() lists the examples in the order they run: one psql session on a
-- fresh installation, as its DBA, the application (tenant acme, user alice) and the embedding worker
-- would call them; a later example reads what an earlier one stored, through psql variables (\gset):
-- :'vec' (a vector of the default model's dimension), :'conversation_id', :'message_id', :'fact_id',
-- :'hit_id', :'lease_token'... tests/test_api_examples.py runs them all, in this order, in one
-- transaction it rolls back, and fails on a public function without an example (or a parameter
-- without its meaning in api_parameters()) and on an example that errors.
--
-- The block at the end writes each example into its function's comment, as an "Example:" block
-- before the comment's last lines ("Security definer: ...", "Called by: ..."), so the grants
-- (sql/90_grants.sql) still read the last line. Re-running it changes nothing.
--
-- A new public function: add its row below, at the place where what it reads exists (after the
-- examples that make it), a few lines of psql; its parameters' meanings in api_parameters().

-- Over 100 lines: a table of data, one example per row, not steps.
create or replace function agentmem_private.api_examples()
returns table (step integer, fn text, example text)
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $examples$
    select
        (pg_catalog.row_number() over ())::integer as step,
        e.fn,
        e.example
    from (
        values
        -- The DBA, once: the installation, its models, its application login.
        ('is_distributed', $x$select agentmem.is_distributed();$x$),
        ('register_model', $x$select model, dimension from agentmem.register_model(model => 'mxbai-embed-large', dimension => 1024);$x$),
        ('set_text_search_config', $x$select agentmem.set_text_search_config(config => 'english');$x$),
        ('set_tenant_binding', $x$select mode, jwt_claim from agentmem.set_tenant_binding(mode => 'role');$x$),
        ('grant_app_role', $x$create role support_bot login;
select agentmem.grant_app_role(role_name => 'support_bot');$x$),
        ('grant_tenant', $x$select agentmem.grant_tenant(role_name => 'support_bot', tenant_id => 'acme');$x$),
        ('revoke_tenant', $x$select agentmem.revoke_tenant(role_name => 'support_bot', tenant_id => 'acme');$x$),
        ('require_local_tenant', $x$select agentmem.require_local_tenant(role_name => 'support_bot');$x$),
        ('set_default_retention_policy', $x$select kind, max_age from agentmem.set_default_retention_policy(kind => 'hit_log', max_age => '90 days');$x$),
        ('clear_default_retention_policy', $x$select agentmem.clear_default_retention_policy(kind => 'hit_log');$x$),
        -- The application: its tenant first.
        ('set_tenant', $x$select agentmem.set_tenant(tenant_id => 'acme');$x$),
        ('current_tenant', $x$select agentmem.current_tenant();$x$),
        ('may_act_as', $x$select agentmem.may_act_as(tenant_id => 'acme');$x$),
        ('tenant_binding_mode', $x$select agentmem.tenant_binding_mode();$x$),
        ('tenant_must_be_local', $x$select agentmem.tenant_must_be_local();$x$),
        ('my_tenants', $x$select tenant_id, scope, binding_mode from agentmem.my_tenants();$x$),
        ('get_model', $x$select model, dimension, query_prefix from agentmem.get_model(model => 'nomic-embed-text');$x$),
        (null, $x$-- :'vec', a vector of the tenant's default model's dimension (an embedder makes real ones:
-- \set vec `agentmem embed 'text'`)
select pg_catalog.array_fill(0.1, array[m.dimension])::vector as vec
from agentmem.tenant_overview() as o, agentmem.get_model(model => o.default_model) as m \gset$x$),
        -- Conversations.
        ('start_conversation', $x$select agentmem.start_conversation(user_id => 'alice', title => 'Trip to Lisbon') as conversation_id \gset$x$),
        ('store_message', $x$select message_id, message_index from agentmem.store_message(
    conversation_id => :'conversation_id', role => 'user',
    content => 'I fly to Lisbon on Friday; book a hotel near the river.', embedding => :'vec') \gset$x$),
        ('store_messages', $x$select message_index from agentmem.store_messages(
    conversation_id => :'conversation_id', roles => array['assistant', 'user'],
    contents => array['Booked: Hotel Tejo, three nights.', 'Thanks! I am vegetarian, by the way.'],
    embeddings => array[:'vec', null]::vector[]);$x$),
        ('recent_messages', $x$select message_index, role, content from agentmem.recent_messages(conversation_id => :'conversation_id', n => 10);$x$),
        ('context_window', $x$select message_index, content from agentmem.context_window(message_id => :'message_id', before => 1, after => 2);$x$),
        ('set_summary', $x$select agentmem.set_summary(conversation_id => :'conversation_id', summary => 'Alice flies to Lisbon; hotel booked.', through_index => 1);$x$),
        ('short_term_context', $x$select kind, role, content from agentmem.short_term_context(conversation_id => :'conversation_id', keep_last => 2);$x$),
        ('list_messages', $x$select message_index, role, content from agentmem.list_messages(conversation_id => :'conversation_id', page_size => 50);$x$),
        ('list_conversations', $x$select conversation_id, title, message_count, cursor from agentmem.list_conversations(user_id => 'alice', page_size => 20);$x$),
        ('list_users', $x$select user_id, conversations, messages, cursor from agentmem.list_users(page_size => 20);$x$),
        ('search_messages', $x$select content, similarity from agentmem.search_messages(user_id => 'alice', query_embedding => :'vec', query_text => 'hotel in Lisbon', k => 5);$x$),
        ('search_with_context', $x$select window_rank, message_index, is_hit, content from agentmem.search_with_context(user_id => 'alice', query_text => 'hotel', k => 1, radius => 1);$x$),
        -- Retrieval-augmented generation: what was retrieved for which turn.
        ('record_retrieval', $x$select agentmem.record_retrieval(message_id => :'message_id', doc_ids => array['kb/hotels', 'kb/lisbon']);$x$),
        ('topic_shift', $x$select * from agentmem.topic_shift(conversation_id => :'conversation_id');$x$),
        ('unseen_docs', $x$select agentmem.unseen_docs(conversation_id => :'conversation_id', doc_ids => array['kb/hotels', 'kb/trains']);$x$),
        -- The answer cache.
        ('normalize_question', $x$select agentmem.normalize_question(question => '  How do I RESET my password?? ');$x$),
        ('question_guard_features', $x$select agentmem.question_guard_features(question => 'Can I get a refund after 30 days?');$x$),
        ('question_guard_agrees', $x$-- false: a cached answer about 14 days never answers a question about 30
select agentmem.question_guard_agrees(question => 'Can I get a refund after 30 days?', other_question => 'Refund after 14 days?');$x$),
        ('corpus_version', $x$select agentmem.corpus_version();$x$),
        ('cache_store', $x$select stored, entry_id, reason from agentmem.cache_store(
    question => 'How do I reset my password?', question_embedding => :'vec',
    answer => 'Settings, then Security, then Reset password.', source_ids => array['kb/password'],
    safe_to_share => true);$x$),
        ('cache_lookup', $x$select hit, kind, similarity, answer from agentmem.cache_lookup(question => 'How do I reset my password?', question_embedding => :'vec');$x$),
        ('sample_hits', $x$select hit_id, question_asked, matched_question from agentmem.sample_hits(n => 1, min_similarity => 0) \gset$x$),
        ('review_hit', $x$select agentmem.review_hit(hit_id => :'hit_id', correct => true);$x$),
        ('cache_report', $x$select threshold, hits, reviewed_wrong, net_value_per_1000 from agentmem.cache_report(cost_uncached => 0.01, cost_wrong => 0.50);$x$),
        ('list_cache_entries', $x$select question, answer, lookups, cursor from agentmem.list_cache_entries(page_size => 20);$x$),
        ('invalidate_source', $x$select agentmem.invalidate_source(doc_id => 'kb/password');$x$),
        ('bump_corpus_version', $x$select agentmem.bump_corpus_version();$x$),
        ('sweep_cache', $x$select agentmem.sweep_cache(batch_size => 1000);$x$),
        ('embedding_cache_store', $x$select agentmem.embedding_cache_store(model => 'nomic-embed-text', texts => array['hotel in Lisbon'], embeddings => array[:'vec']::vector[]);$x$),
        ('embedding_cache_lookup', $x$select ord, embedding is not null as cached from agentmem.embedding_cache_lookup(model => 'nomic-embed-text', texts => array['hotel in Lisbon', 'never seen']);$x$),
        -- Facts.
        ('upsert_fact', $x$select fact_id, action from agentmem.upsert_fact(user_id => 'alice', subject => 'diet', fact => 'Alice is vegetarian.', embedding => :'vec') \gset$x$),
        ('recall_facts', $x$select subject, fact, score from agentmem.recall_facts(user_id => 'alice', query_embedding => :'vec', query_text => 'food', k => 3);$x$),
        ('list_facts', $x$select fact_id, subject, fact, status from agentmem.list_facts(user_id => 'alice');$x$),
        -- Consolidation: a near-duplicate (the same words under another subject), merged then restored.
        (null, $x$select fact_id as twin_fact_id from agentmem.upsert_fact(user_id => 'alice', subject => 'food', fact => 'Alice is vegetarian!', embedding => :'vec') \gset$x$),
        ('set_consolidation', $x$select agentmem.set_consolidation(min_similarity => 0.95, max_changes => 100);$x$),
        ('consolidate_facts', $x$select run_id, older_fact, newer_fact, reason from agentmem.consolidate_facts(user_id => 'alice') \gset$x$),
        ('undo_consolidation', $x$select agentmem.undo_consolidation(run_id => :'run_id') as facts_restored;$x$),
        ('pin', $x$select agentmem.pin(kind => 'fact', id => :'fact_id');$x$),
        ('unpin', $x$select agentmem.unpin(kind => 'fact', id => :'fact_id');$x$),
        ('set_use_boost', $x$select agentmem.set_use_boost(weight => 0.1);$x$),
        ('update_fact', $x$select kind, rows_affected from agentmem.update_fact(fact_id => :'fact_id', fact => 'Alice is vegan.', embedding => :'vec');$x$),
        ('fact_history', $x$select fact, valid_from, replaced_at from agentmem.fact_history(fact_id => :'fact_id');$x$),
        -- A user's memory item by item, and the tenant's.
        ('memory_status', $x$select conversations, messages, facts, embeddings_pending from agentmem.memory_status(user_id => 'alice');$x$),
        ('tenant_overview', $x$select users, messages, facts, default_model, embedding_pending from agentmem.tenant_overview();$x$),
        ('require_user_item', $x$select agentmem.require_user_item(user_id => 'alice', conversation_id => :'conversation_id');$x$),
        ('set_retention_policy', $x$select kind, max_age from agentmem.set_retention_policy(kind => 'messages', max_age => '365 days');$x$),
        ('set_lifecycle_policy', $x$select kind, max_inactive, keep_per_user from agentmem.set_lifecycle_policy(kind => 'messages', max_inactive => '180 days', keep_per_user => 10000);$x$),
        ('clear_retention_policy', $x$select agentmem.clear_retention_policy(kind => 'messages');$x$),
        ('export_user', $x$select line from agentmem.export_user(user_id => 'alice');$x$),
        ('import_user', $x$select kind, rows_affected from agentmem.import_user(lines => array(select line from agentmem.export_user(user_id => 'alice')));$x$),
        -- The embedding worker: the user message stored without a vector is its job.
        ('embedding_queue_depth', $x$select agentmem.embedding_queue_depth();$x$),
        ('claim_embedding_jobs', $x$select lease_token, array_agg(tenant_id) as tenant_ids, array_agg(job_id) as job_ids, count(*) as jobs
from agentmem.claim_embedding_jobs(batch_size => 10) group by lease_token \gset$x$),
        ('complete_embedding_jobs', $x$select job_id, outcome from agentmem.complete_embedding_jobs(
    lease_token => :'lease_token', tenant_ids => :'tenant_ids', job_ids => :'job_ids',
    embeddings => array_fill(:'vec'::vector, array[:jobs]));$x$),
        ('fail_embedding_jobs', $x$select job_id, outcome from agentmem.fail_embedding_jobs(
    lease_token => :'lease_token', tenant_ids => :'tenant_ids', job_ids => :'job_ids', error => 'embedder timed out');$x$),
        -- The DBA: tenants' own indexes, models, maintenance, whole tenants.
        ('tenant_index_ddl', $x$select agentmem.tenant_index_ddl(tenant_id => 'acme');$x$),
        ('create_tenant_index', $x$select agentmem.create_tenant_index(tenant_id => 'acme');$x$),
        ('measure_tenant_index', $x$select sampled, far, first_pass from agentmem.measure_tenant_index(tenant_id => 'acme');$x$),
        ('drop_tenant_index', $x$select agentmem.drop_tenant_index(tenant_id => 'acme');$x$),
        ('apply_index_upkeep', $x$select job, rows_removed, error from agentmem.apply_index_upkeep(max_builds => 1);$x$),
        ('index_pending_vectors', $x$select agentmem.index_pending_vectors(max_rows => 100000);$x$),
        ('set_default_lifecycle_policy', $x$select kind, max_inactive from agentmem.set_default_lifecycle_policy(kind => 'facts', max_inactive => '2 years');$x$),
        ('apply_use_log', $x$select agentmem.apply_use_log(batch_size => 100000);$x$),
        ('preview_retention', $x$select kind, tenant_id, would_remove from agentmem.preview_retention(batch_size => 5000);$x$),
        ('apply_consolidation', $x$select job, rows_removed, error from agentmem.apply_consolidation();$x$),
        ('apply_retention', $x$select job, rows_removed, error from agentmem.apply_retention(batch_size => 5000);$x$),
        ('reembed', $x$select tenant, jobs from agentmem.reembed(model => 'all-minilm', tenant_id => 'acme');$x$),
        ('retry_embedding_jobs', $x$select agentmem.retry_embedding_jobs(tenant_id => 'acme');$x$),
        ('switch_default_model', $x$-- once the workers have embedded what reembed queued (else AM031 says what is missing)
select agentmem.switch_default_model(model => 'nomic-embed-text', tenant_id => 'acme');$x$),
        ('drop_model_vectors', $x$select tenant, table_name, rows_removed from agentmem.drop_model_vectors(model => 'mxbai-embed-large');$x$),
        ('export_tenant', $x$select count(*) as lines from agentmem.export_tenant(tenant_id => 'acme');$x$),
        ('import_tenant', $x$select agentmem.import_tenant(tenant_id => 'acme-copy', lines => array(select line from agentmem.export_tenant(tenant_id => 'acme')));$x$),
        ('schedule_retention', $x$select agentmem.schedule_retention(schedule => '*/15 * * * *');$x$),
        ('unschedule_retention', $x$select agentmem.unschedule_retention();$x$),
        ('schedule_index_upkeep', $x$select agentmem.schedule_index_upkeep(schedule => '23 * * * *', max_builds => 1);$x$),
        ('unschedule_index_upkeep', $x$select agentmem.unschedule_index_upkeep();$x$),
        ('schedule_index_pending', $x$select agentmem.schedule_index_pending(schedule => '* * * * *', max_rows => 100000);$x$),
        ('unschedule_index_pending', $x$select agentmem.unschedule_index_pending();$x$),
        ('distribute', $x$select table_name, distribution from agentmem.distribute();$x$),
        -- The application, last: deleting and forgetting.
        ('list_access_log', $x$select kind, actor, rows_affected, logged_at from agentmem.list_access_log(page_size => 20);$x$),
        ('delete_message', $x$select kind, rows_affected from agentmem.delete_message(message_id => :'message_id');$x$),
        ('delete_fact', $x$select kind, rows_affected from agentmem.delete_fact(fact_id => :'fact_id');$x$),
        ('forget_conversation', $x$select scope, rows_removed from agentmem.forget_conversation(conversation_id => :'conversation_id');$x$),
        ('forget_user', $x$select scope, rows_removed from agentmem.forget_user(user_id => 'alice');$x$)
    ) as e (fn, example)
$examples$;

comment on function agentmem_private.api_examples() is
'Internal: the runnable example of every function of schema agentmem (fn; NULL for a step that sets a psql
variable the later ones read), in the order they run in one psql session on a fresh installation.
sql/88_api_examples.sql writes each into its function''s comment; tests/test_api_examples.py runs them.';

-- Over 100 lines: a table of data, one parameter per row, not steps.
create or replace function agentmem_private.api_parameters()
returns table (fn text, parameter text, meaning text)
language sql
immutable
parallel safe
security invoker
set search_path = pg_catalog, agentmem, pg_temp
as $parameters$
    select
        p.fn,
        p.parameter,
        p.meaning
    from (
        values
        -- A parameter means the same in every function that takes it (fn NULL) ...
        (null, 'tenant_id', 'the tenant (1 to 128 characters)'),
        (null, 'user_id', 'the user whose memory it is (1 to 256 characters)'),
        (null, 'conversation_id', 'a conversation''s id (a uuid or its text)'),
        (null, 'message_id', 'a message''s id (a uuid or its text)'),
        (null, 'fact_id', 'a fact''s id (a uuid or its text)'),
        (null, 'hit_id', 'a cache hit''s id, from sample_hits (a uuid or its text)'),
        (null, 'model', 'an embedding model registered in agentmem.models; NULL: the tenant''s default model'),
        (null, 'embedding', 'the text''s vector, in the model''s dimension; NULL: the embedding worker makes it'),
        (null, 'embeddings', 'one vector per text, in the model''s dimension (NULL elements: the worker makes them)'),
        (null, 'query_embedding', 'the query''s vector, in the model''s dimension; NULL: words only (query_text)'),
        (null, 'query_text', 'the query''s words for the full-text branch; NULL: vectors only'),
        (null, 'k', 'how many results at most'),
        (null, 'min_similarity', 'leave out vector matches below this cosine similarity'),
        (null, 'candidate_pool', 'candidates each branch (vector, words) ranks before they are fused'),
        (null, 'rrf_k', 'the constant of reciprocal rank fusion (search_messages: with fusion rrf): larger flattens the ranks'' weight'),
        (null, 'since', 'only what happened at or after this time'),
        (null, 'until', 'only what happened before this time'),
        (null, 'recency_half_life', 'halve a match''s score per this age; NULL: no recency weight'),
        (null, 'metadata', 'a JSON object kept with the row'),
        (null, 'after', 'the cursor of the last row of the previous page; NULL: the first page'),
        (null, 'page_size', 'rows per page (1 to 1,000)'),
        (null, 'batch_size', 'rows (or jobs) handled per call at most'),
        (null, 'role_name', 'an existing login role'),
        (null, 'tenant_prefix', 'every tenant whose id starts with this text'),
        (null, 'all_tenants', 'every tenant'),
        (null, 'kind', 'what the policy covers: messages, cached_answers, hit_log, facts, erasure_log, job_runs or access_log'),
        (null, 'max_age', 'rows older than this are deleted by apply_retention'),
        (null, 'doc_ids', 'the ids of documents of your corpus'),
        (null, 'question', 'the user''s question, as asked'),
        (null, 'question_embedding', 'the question''s vector; NULL: matched by its normalised text only'),
        (null, 'acl_hash', 'what the asker may see (e.g. a hash of their groups): an answer is shared only within it'),
        (null, 'prompt_version', 'your prompt''s version: an answer of another version never matches'),
        (null, 'llm_model', 'the generating model: an answer of another model never matches'),
        (null, 'intent', 'an intent registered in agentmem.cache_intents (its threshold and time to live)'),
        (null, 'lease_token', 'the token claim_embedding_jobs returned with the jobs'),
        (null, 'tenant_ids', 'each job''s tenant, as claimed'),
        (null, 'job_ids', 'the jobs, as claimed'),
        (null, 'lines', 'the JSON Lines of an export, one array element each'),
        (null, 'schedule', 'a pg_cron schedule (five cron fields)'),
        (null, 'max_builds', 'indexes built per call at most'),
        (null, 'table_name', 'the embedding table: message_embeddings, facts or cache_entries'),
        (null, 'source_message_ids', 'the messages the fact was drawn from'),
        (null, 'fact', 'the fact, one sentence'),
        (null, 'subject', 'what the fact is about; one current fact per subject and user'),
        (null, 'valid_from', 'when the fact became true in the world; NULL: now'),
        (null, 'valid_to', 'when it stopped being true; NULL: still true'),
        (null, 'as_of', 'the facts as they were known at this time; NULL: now'),
        (null, 'text_ranking', 'how the words branch ranks: both (BM25 and ts_rank as two fused lists), bm25 or ts_rank'),
        (null, 'bm25_k1', 'BM25''s k1, 0 to 10: with bm25_b, how much a long message is discounted (each word counts once)'),
        (null, 'bm25_b', 'BM25 length normalisation, 0 (none) to 1 (full)'),
        (null, 'neighbour_weight', 'hybrid search: the share, 0 to 1, of the fused scores of the candidates up to two turns before and after that each candidate gains; 0: off'),
        (null, 'fusion', 'how a hybrid search fuses its lists: zscore (their scores standardised over the candidates and summed) or rrf (reciprocal rank, with rrf_k)'),
        (null, 'use_boost', 'the weight of recent and frequent use, 0 to 0.5 (a factor 1 to 1 + use_boost); NULL: the tenant''s setting (agentmem.set_use_boost); 0: off'),
        (null, 'max_inactive', 'a row not returned by any search or lookup for this long may go; NULL: no such limit'),
        (null, 'keep_per_user', 'keep at most this many rows per user, the most used and recent first; NULL: no budget'),
        (null, 'combine', 'and: a row goes when every limit set holds; or: when any does'),
        (null, 'max_changes', 'at most this many facts merged in one run (1 to 10,000); NULL: the tenant''s setting, else 100'),
        (null, 'run_id', 'a consolidation run''s id, from consolidate_facts or agentmem.consolidation_runs'),
        ('pin', 'id', 'the message''s, conversation''s or fact''s id (a uuid or its text)'),
        ('unpin', 'id', 'the message''s, conversation''s or fact''s id (a uuid or its text)'),
        ('consolidate_facts', 'dry_run', 'true: record and return the pairs, change nothing'),
        ('set_use_boost', 'weight', 'the tenant''s use boost, 0 to 0.5; NULL or 0: off'),
        -- ... unless a row names the function.
        ('set_tenant', 'local', 'for the current transaction only (a pooled connection); false: for the session'),
        ('grant_tenant', 'tenant_id', 'the one tenant granted'),
        ('revoke_tenant', 'tenant_id', 'the one tenant revoked'),
        ('require_local_tenant', 'required', 'true: the login must set its tenant with local => true'),
        ('set_tenant_binding', 'mode', 'role (a login acts for the tenants granted to it), jwt (and the token''s claim names it) or none'),
        ('set_tenant_binding', 'jwt_claim', 'the claim naming the tenant in request.jwt.claims, a dotted path; NULL: tenant_id'),
        ('register_model', 'model', 'the model''s name, as the embedder knows it'),
        ('register_model', 'dimension', 'its vectors'' dimension'),
        ('register_model', 'document_prefix', 'text put before a document when embedding it (e.g. search_document: )'),
        ('register_model', 'query_prefix', 'text put before a query when embedding it (e.g. search_query: )'),
        ('tenant_index_ddl', 'concurrently', 'the statement builds without blocking writes (CREATE INDEX CONCURRENTLY)'),
        ('tenant_index_ddl', 'kind', 'hnsw (an HNSW index) or exact (a one-list index read whole)'),
        ('set_text_search_config', 'config', 'a text search configuration (e.g. english, simple)'),
        ('embedding_cache_lookup', 'texts', 'the texts whose vectors to look up'),
        ('embedding_cache_store', 'texts', 'the texts embedded'),
        ('embedding_cache_store', 'embeddings', 'one vector per text, in the model''s dimension'),
        ('claim_embedding_jobs', 'model', 'claim only this model''s jobs; NULL: any model''s, oldest first'),
        ('claim_embedding_jobs', 'lease', 'how long the claim holds the jobs before another worker may take them'),
        ('complete_embedding_jobs', 'embeddings', 'one vector per job, in the job''s dimension'),
        ('fail_embedding_jobs', 'error', 'why the embedder failed (kept on the job, shown in tenant_overview)'),
        ('embedding_queue_depth', 'model', 'count only this model''s jobs; NULL: every model''s'),
        ('reembed', 'model', 'the model to embed with'),
        ('reembed', 'from_model', 'the model whose texts to embed again; NULL: the tenant''s default'),
        ('reembed', 'tenant_id', 'one tenant; NULL: every tenant'),
        ('retry_embedding_jobs', 'model', 'one model''s failed jobs; NULL: every model''s'),
        ('retry_embedding_jobs', 'tenant_id', 'one tenant''s; NULL: every tenant''s'),
        ('switch_default_model', 'model', 'the tenant''s new default model'),
        ('drop_model_vectors', 'model', 'the model whose vectors to delete (not the default of a tenant)'),
        ('drop_model_vectors', 'tenant_id', 'one tenant; NULL: every tenant'),
        ('start_conversation', 'title', 'a title to show; NULL: none'),
        ('store_message', 'role', 'who spoke: user, assistant, system or tool'),
        ('store_message', 'content', 'the message''s text'),
        ('store_message', 'occurred_at', 'when it was said; NULL: now'),
        ('store_messages', 'roles', 'one role per message: user, assistant, system or tool'),
        ('store_messages', 'contents', 'one text per message'),
        ('store_messages', 'metadata', 'one JSON object per message; NULL: none'),
        ('store_messages', 'occurred_at', 'one time per message; NULL: now'),
        ('recent_messages', 'n', 'how many of the latest messages'),
        ('context_window', 'before', 'messages before it'),
        ('context_window', 'after', 'messages after it'),
        ('short_term_context', 'keep_last', 'the latest messages given whole, after the summary'),
        ('set_summary', 'summary', 'the running summary of the conversation'),
        ('set_summary', 'through_index', 'the message_index of the last message the summary covers'),
        ('list_messages', 'after', 'the message_index of the last message of the previous page; NULL: the first page'),
        ('list_facts', 'include_superseded', 'also the facts replaced or deleted (with their status)'),
        ('search_with_context', 'k', 'how many matches, each with its window'),
        ('search_with_context', 'radius', 'messages on each side of a match'),
        ('record_retrieval', 'doc_ids', 'the documents retrieved for this message'),
        ('topic_shift', 'threshold', 'an overlap of the recent turns'' documents below this is a shift'),
        ('unseen_docs', 'doc_ids', 'the documents retrieved now'),
        ('unseen_docs', 'lookback', 'how many earlier turns to look at'),
        ('question_guard_agrees', 'other_question', 'the cached question it would match'),
        ('cache_store', 'answer', 'the answer to keep; NULL: nothing is stored'),
        ('cache_store', 'source_ids', 'the documents the answer rests on (invalidate_source withdraws it)'),
        ('cache_store', 'model', 'the embedding model of question_embedding; NULL: the tenant''s default'),
        ('cache_store', 'user_id', 'the asker; a personal answer is kept for this user only'),
        ('cache_store', 'conversation_id', 'the conversation it was asked in (for forget_conversation)'),
        ('cache_store', 'safe_to_share', 'you vouch that the answer holds nothing personal (else personal markers keep it per user)'),
        ('cache_store', 'ttl', 'how long it is served; NULL: the intent''s time to live'),
        ('cache_lookup', 'model', 'the embedding model of question_embedding; NULL: the tenant''s default'),
        ('cache_lookup', 'user_id', 'the asker: their personal answers match too'),
        ('cache_report', 'cost_uncached', 'what one call of your LLM costs (a hit saves it)'),
        ('cache_report', 'cost_wrong', 'what one wrong cached answer costs'),
        ('cache_report', 'thresholds', 'the similarity thresholds to report; NULL: 0.85 to 0.99 by 0.01'),
        ('cache_report', 'since', 'only lookups at or after this time'),
        ('invalidate_source', 'doc_id', 'a document that changed: every answer resting on it is withdrawn'),
        ('sample_hits', 'n', 'how many hits to sample for review'),
        ('sample_hits', 'min_similarity', 'only hits at or above this similarity'),
        ('review_hit', 'correct', 'whether the cached answer was right for the question asked'),
        ('upsert_fact', 'merge_threshold', 'a fact of the subject this similar or more is replaced rather than added'),
        ('update_fact', 'fact', 'the corrected fact'),
        ('update_fact', 'embedding', 'the corrected fact''s vector, in its model''s dimension'),
        ('recall_facts', 'since', 'only facts valid at some time at or after this'),
        ('recall_facts', 'until', 'only facts valid at some time before this'),
        ('require_user_item', 'conversation_id', 'a conversation that must be the user''s'),
        ('require_user_item', 'message_id', 'a message that must be the user''s'),
        ('require_user_item', 'fact_id', 'a fact that must be the user''s'),
        ('import_tenant', 'tenant_id', 'the tenant to import into'),
        ('apply_retention', 'batch_size', 'rows deleted per table per call at most'),
        ('index_pending_vectors', 'max_rows', 'vectors moved into the index per call at most'),
        ('schedule_index_pending', 'max_rows', 'vectors each run of the job moves into the index at most'),
        ('sweep_cache', 'batch_size', 'expired or withdrawn entries deleted per call at most'),
        ('distribute', 'shard_count', 'shards per distributed table; NULL: citus.shard_count')
    ) as p (fn, parameter, meaning)
$parameters$;

comment on function agentmem_private.api_parameters() is
'Internal: the meaning of each parameter of the functions of schema agentmem: a row with fn NULL holds for
every function taking that parameter, one naming the function for that function. docs/api.md shows them in
each function''s parameter table; tests/test_api_examples.py fails on a parameter without one.';

-- Each function's example into its comment: an "Example:" block before the comment's last lines
-- ("Security definer: ...", "Called by: ..."), replacing the one a previous install wrote; a comment
-- already as it should be is not touched.
do $write_examples$
declare
    v_fn record;
    v_lines text[];
    v_tail int;
    v_start int;
    v_comment text;
begin
    for v_fn in
        select
            p.oid::regprocedure as fn,
            e.example,
            coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '') as old_comment
        from pg_catalog.pg_proc as p
        inner join agentmem_private.api_examples() as e on p.proname = e.fn
        where p.pronamespace = 'agentmem'::regnamespace
    loop
        v_lines := pg_catalog.string_to_array(pg_catalog.rtrim(v_fn.old_comment, E' \n'), E'\n');
        v_tail := pg_catalog.cardinality(v_lines);
        -- the last lines stay last: "Called by: ...", and the "Security definer: ..." line before it
        if v_lines[v_tail] like 'Called by: %' then
            v_tail := v_tail - 1;
            if v_lines[v_tail] like 'Security definer: %' then
                v_tail := v_tail - 1;
            end if;
        end if;
        v_start := coalesce(pg_catalog.array_position(v_lines, 'Example:'), v_tail + 1);
        v_comment := pg_catalog.array_to_string(
            v_lines[1:least(v_start - 1, v_tail)]
            || array['Example:']
            || pg_catalog.string_to_array(v_fn.example, E'\n')
            || v_lines[v_tail + 1:], E'\n'
        );
        if v_comment is distinct from v_fn.old_comment then
            execute pg_catalog.format('comment on function %s is %L', v_fn.fn, v_comment);
        end if;
    end loop;
end
$write_examples$;
