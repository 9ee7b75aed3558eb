-- The access log (exports, imports, single deletions and corrections) is a
-- kind of data with a retention policy of its own, 'access_log', aged by
-- logged_at (its index access_log_logged_at_idx exists): it grew without bound.

alter table agentmem.retention_policies drop constraint retention_policies_kind_ck;
alter table agentmem.retention_policies add constraint retention_policies_kind_ck check (
    kind in ('messages', 'cached_answers', 'hit_log', 'facts', 'erasure_log', 'job_runs', 'access_log')
);
