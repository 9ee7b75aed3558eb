"""sql/60_retention.sql and sql/61_retention_cron.sql: retention policies per tenant or default, bounded
batches, run records, the health view, pg_cron."""

from __future__ import annotations

import uuid

import numpy as np
import psycopg
import pytest

import agentmem
from agentmem.admin import Admin
from helpers import add_facts, count, sqlstate_of, vec, wait_until
from helpers import STORE_DATED as STORE

APPLY = "select * from agentmem.apply_retention(batch_size => %s)"


@pytest.fixture(autouse=True)
def tiny_model(admin):
    admin.execute("select agentmem.register_model(model => 'tiny-embed', dimension => 8)")


def run(admin, batch=5000):
    return admin.execute(APPLY, (batch,)).fetchone()


def removed(row) -> dict:
    return row[5]


def test_policies_delete_exactly_the_rows_past_their_age(admin):
    add_facts(admin, "acme", 3, "40 days")
    add_facts(admin, "acme", 2, "20 days")
    add_facts(admin, "globex", 4, "40 days")
    admin.execute("select agentmem.set_default_retention_policy(kind => 'facts', max_age => '30 days')")
    first = run(admin)
    assert removed(first)["facts"] == 7 and first[6] >= 7 and first[7] is None
    assert count(admin, "facts") == 2
    assert count(admin, "facts", "updated_at < now() - interval '30 days'") == 0
    # a second run removes nothing
    assert removed(run(admin))["facts"] == 0 and count(admin, "facts") == 2


def test_a_tenant_policy_overrides_the_default_and_null_keeps_forever(admin, connect, app_url):
    add_facts(admin, "acme", 3, "40 days")
    add_facts(admin, "globex", 3, "40 days")
    add_facts(admin, "initech", 3, "10 days")
    admin.execute("select agentmem.set_default_retention_policy(kind => 'facts', max_age => '30 days')")
    connect(app_url, tenant="acme").execute(
        "select agentmem.set_retention_policy(kind => 'facts', max_age => null)")  # acme keeps its facts
    connect(app_url, tenant="initech").execute(
        "select agentmem.set_retention_policy(kind => 'facts', max_age => '7 days')")
    assert removed(run(admin))["facts"] == 6
    assert admin.execute("select tenant_id, count(*) from agentmem.facts group by 1 order by 1").fetchall() == [
        ("acme", 3)]


def test_batches_stay_within_their_bound(admin):
    add_facts(admin, "acme", 25, "40 days")
    admin.execute("select agentmem.set_default_retention_policy(kind => 'facts', max_age => '1 day')")
    assert [removed(run(admin, 10))["facts"] for _ in range(4)] == [10, 10, 5, 0]
    # the bound holds across tenants with policies of their own too
    add_facts(admin, "acme", 6, "40 days")
    add_facts(admin, "globex", 6, "40 days")
    admin.execute("select agentmem.set_tenant(tenant_id => 'globex')")
    admin.execute("select agentmem.set_retention_policy(kind => 'facts', max_age => '2 days')")
    assert [removed(run(admin, 5))["facts"] for _ in range(4)] == [5, 5, 2, 0]


def test_oldest_rows_go_first(admin):
    add_facts(admin, "acme", 3, "50 days", prefix="old")
    add_facts(admin, "acme", 3, "40 days", prefix="new")
    admin.execute("select agentmem.set_default_retention_policy(kind => 'facts', max_age => '1 day')")
    run(admin, 3)
    assert count(admin, "facts", "subject like 'old%%'") == 0 and count(admin, "facts") == 3


def test_erasure_log_and_job_runs_have_policies_too(admin):
    admin.execute("insert into agentmem.erasure_log (tenant_id, scope, rows_removed, erased_at) "
                  "values ('acme', 'user', '{}', now() - interval '400 days'), ('acme', 'user', '{}', now())")
    admin.execute("insert into agentmem.job_runs (tenant_id, job, started_at, finished_at) "
                  "values ('', 'retention', now() - interval '31 days', now() - interval '31 days')")
    admin.execute("select agentmem.set_default_retention_policy(kind => 'erasure_log', max_age => '365 days')")
    out = removed(run(admin))
    assert out["erasure_log"] == 1 and out["job_runs"] == 1  # job_runs: 30 days by default
    assert count(admin, "erasure_log") == 1 and count(admin, "job_runs") == 1  # this run's record


def test_each_run_is_recorded_with_counts_and_duration(admin):
    add_facts(admin, "acme", 2, "40 days")
    admin.execute("select agentmem.set_default_retention_policy(kind => 'facts', max_age => '1 day')")
    row = run(admin)
    rec = admin.execute("select job, rows_removed, total_removed, error, finished_at >= started_at "
                        "from agentmem.job_runs where run_id = %s", (row[1],)).fetchone()
    assert rec[0] == "retention" and rec[1]["facts"] == 2 and rec[2] >= 2 and rec[3] is None and rec[4]
    assert set(rec[1]) >= {"messages", "cached_answers", "hit_log", "facts", "erasure_log", "job_runs"}
    health = admin.execute("select last_run_id, last_total_removed, last_error, status, last_run_duration "
                           "from agentmem.retention_health").fetchone()
    assert health[0] == row[1] and health[1] == rec[2] and health[2] is None and health[3] == "ok"
    assert health[4] is not None


def test_a_failing_kind_is_recorded_does_not_stop_the_others_and_shows_in_health(admin, connect, admin_url):
    add_facts(admin, "acme", 2, "40 days")
    admin.execute("insert into agentmem.erasure_log (tenant_id, scope, rows_removed, erased_at) "
                  "values ('acme', 'user', '{}', now() - interval '400 days')")
    admin.execute("select agentmem.set_default_retention_policy(kind => 'facts', max_age => '1 day')")
    admin.execute("select agentmem.set_default_retention_policy(kind => 'erasure_log', max_age => '1 day')")
    holder = connect(admin_url)
    holder.execute("begin")
    holder.execute("lock table agentmem.facts in access exclusive mode")
    runner = connect(admin_url)
    runner.execute("set lock_timeout = '200ms'")
    row = runner.execute(APPLY, (100,)).fetchone()
    holder.execute("rollback")
    assert "facts" in row[7] and "55P03" in row[7]  # lock_not_available, recorded
    assert "facts" not in removed(row) and removed(row)["erasure_log"] == 1
    health = admin.execute("select status, last_error, last_error_at from agentmem.retention_health").fetchone()
    assert health[0] == "failing" and "55P03" in health[1] and health[2] is not None
    # the next good run clears the status, the facts go
    assert removed(run(admin))["facts"] == 2
    assert admin.execute("select status from agentmem.retention_health").fetchone() == ("ok",)


def test_a_concurrent_run_returns_at_once_without_deleting(admin, connect, admin_url):
    add_facts(admin, "acme", 2, "40 days")
    admin.execute("select agentmem.set_default_retention_policy(kind => 'facts', max_age => '1 day')")
    first = connect(admin_url)
    first.execute("begin")
    first.execute(APPLY, (1,))
    second = connect(admin_url).execute(APPLY, (100,)).fetchone()
    assert second[1] is None and "another apply_retention run" in second[7]
    first.execute("commit")
    assert count(admin, "facts") == 1 and count(admin, "job_runs") == 1


def test_the_app_role_may_set_its_own_policy_only(app, admin):
    row = app.execute("select tenant_id, kind, max_age from agentmem.set_retention_policy("
                      "kind => 'messages', max_age => '90 days')").fetchone()
    assert row[:2] == ("acme", "messages")
    app.execute("select agentmem.set_retention_policy(kind => 'messages', max_age => '30 days')")
    assert count(admin, "retention_policies", "tenant_id = 'acme'") == 1
    assert sqlstate_of(app, "select agentmem.set_default_retention_policy(kind => 'messages', max_age => '1 day')") == "42501"
    assert sqlstate_of(app, "select agentmem.apply_retention()") == "42501"
    assert sqlstate_of(app, "select agentmem.schedule_retention()") == "42501"
    assert sqlstate_of(app, "select * from agentmem.retention_health") == "42501"
    assert app.execute("select agentmem.clear_retention_policy(kind => 'messages')").fetchone() == (True,)
    assert app.execute("select agentmem.clear_retention_policy(kind => 'messages')").fetchone() == (False,)
    assert sqlstate_of(app, "select agentmem.clear_default_retention_policy(kind => 'facts')") == "42501"


@pytest.mark.parametrize("kind, age", [("nonsense", "1 day"), (None, "1 day"), ("facts", "0 days"),
                                       ("facts", "-1 day")])
def test_bad_policies_are_refused_and_store_nothing(app, admin, kind, age):
    before = count(admin, "retention_policies")
    assert sqlstate_of(app, "select agentmem.set_retention_policy(kind => %s, max_age => %s::interval)",
                       (kind, age)) == "AM020"
    assert count(admin, "retention_policies") == before


@pytest.mark.parametrize("batch", [0, None, 1000001])
def test_apply_retention_refuses_a_bad_batch_size(admin, batch):
    assert sqlstate_of(admin, "select agentmem.apply_retention(batch_size => %s)", (batch,)) == "AM020"
    assert count(admin, "job_runs") == 0


def test_a_role_confined_by_rls_may_not_apply_retention(admin):
    role = "agentmem_test_maint_" + uuid.uuid4().hex[:6]
    admin.execute(f"create role {role} nologin")
    try:
        admin.execute(f"grant agentmem_app to {role}")
        admin.execute(f"grant execute on function agentmem.apply_retention(int) to {role}")
        # a DBA-like role that reaches the internals but is confined by RLS
        admin.execute(f"grant usage on schema agentmem_private to {role}")
        admin.execute(f"grant execute on all functions in schema agentmem_private to {role}")
        admin.execute(f"set role {role}")
        with pytest.raises(psycopg.Error) as info:
            admin.execute("select agentmem.apply_retention()")
        admin.execute("reset role")
        assert info.value.sqlstate == "AM041" and "BYPASSRLS" in info.value.diag.message_hint
    finally:
        admin.execute("reset role")
        admin.execute(f"revoke execute on function agentmem.apply_retention(int) from {role}")
        admin.execute(f"drop owned by {role}")
        admin.execute(f"drop role {role}")


# -- without pg_cron ------------------------------------------------------------

def test_without_pg_cron_scheduling_says_to_call_apply_retention_from_any_scheduler(admin, server):
    if admin.execute("select current_setting('cron.database_name', true)").fetchone()[0] is not None:
        pytest.skip("pg_cron is loaded on this server")
    for call in ("select agentmem.schedule_retention()", "select agentmem.unschedule_retention()"):
        with pytest.raises(psycopg.Error) as info:
            admin.execute(call)
        assert info.value.sqlstate == "AM050"
        assert "agentmem.apply_retention()" in info.value.diag.message_hint
    with Admin.connect(server.db_url(admin.info.dbname)) as dba:
        with pytest.raises(agentmem.PrerequisiteMissing):
            dba.schedule_retention("*/5 * * * *")
        with pytest.raises(agentmem.PrerequisiteMissing):
            dba.unschedule_retention()
    health = admin.execute("select cron_note, status from agentmem.retention_health").fetchone()
    assert health == ("pg_cron is not available on this server", "never run")


def test_schedule_refuses_an_empty_schedule(admin):
    assert sqlstate_of(admin, "select agentmem.schedule_retention(schedule => ' ')") == "AM020"


# -- with pg_cron (the debian15 leg) ------------------------------------------------

def job_of(cron_db, dbname):
    return cron_db.execute("select jobid, jobname, schedule, command, database, active from cron.job "
                           "where database = %s", (dbname,)).fetchall()


def test_without_dblink_the_error_gives_the_exact_statement_for_the_cron_database(cron_db, admin, pg_cron):
    dbname = admin.info.dbname
    assert pg_cron != dbname
    with pytest.raises(psycopg.Error) as info:
        admin.execute("select agentmem.schedule_retention(schedule => '*/5 * * * *')")
    err = info.value
    assert err.sqlstate == "AM050" and "dblink" in err.diag.message_primary
    hint = err.diag.message_hint
    assert "agentmem.apply_retention()" in hint
    statement = hint[hint.index("select cron.schedule_in_database("):hint.index("; or call")]
    # the DBA runs it where pg_cron lives: the job is registered for this database
    cron_db.execute(statement)
    assert [(j[1], j[2], j[3], j[4]) for j in job_of(cron_db, dbname)] == [
        (f"agentmem-retention:{dbname}", "*/5 * * * *", "select agentmem.apply_retention()", dbname)]


def test_schedule_and_unschedule_through_dblink(cron_db, admin):
    dbname = admin.info.dbname
    admin.execute("create extension if not exists dblink")
    jobid = admin.execute("select agentmem.schedule_retention()").fetchone()[0]
    assert job_of(cron_db, dbname) == [(jobid, f"agentmem-retention:{dbname}", "*/15 * * * *",
                                        "select agentmem.apply_retention()", dbname, True)]
    # scheduling again replaces the schedule: still one job
    admin.execute("select agentmem.schedule_retention(schedule => '*/5 * * * *')")
    jobs = job_of(cron_db, dbname)
    assert len(jobs) == 1 and jobs[0][2] == "*/5 * * * *"
    health = admin.execute("select cron_jobid, cron_schedule, cron_active, cron_note, status "
                           "from agentmem.retention_health").fetchone()
    assert health == (jobs[0][0], "*/5 * * * *", True, None, "never run")
    assert admin.execute("select agentmem.unschedule_retention()").fetchone() == (True,)
    assert job_of(cron_db, dbname) == []
    assert admin.execute("select agentmem.unschedule_retention()").fetchone() == (False,)
    assert admin.execute("select cron_note from agentmem.retention_health").fetchone() == ("not scheduled",)


def wait_for_run(cron_db, jobid, after_runid, deadline_s):
    return wait_until(lambda: cron_db.execute(
        "select runid, status, return_message from cron.job_run_details "
        "where jobid = %s and runid > %s and status in ('succeeded', 'failed') "
        "order by runid limit 1", (jobid, after_runid)).fetchone(),
        timeout=deadline_s, interval=2, what=f"pg_cron to run job {jobid}")


def test_the_scheduled_job_really_runs_and_a_failing_run_shows_in_health(cron_db, admin, connect, admin_url):
    """Waits for pg_cron (it schedules by the minute): up to two runs, about 1-2 minutes."""
    dbname = admin.info.dbname
    add_facts(admin, "acme", 3, "40 days")
    admin.execute("select agentmem.set_default_retention_policy(kind => 'facts', max_age => '1 day')")
    admin.execute("create extension if not exists dblink")
    jobid = admin.execute("select agentmem.schedule_retention(schedule => '* * * * *')").fetchone()[0]

    runid, status, message = wait_for_run(cron_db, jobid, 0, 130)
    assert status == "succeeded", message
    assert count(admin, "facts") == 0  # the job deleted them, in this database
    rec = admin.execute("select rows_removed from agentmem.job_runs where job = 'retention'").fetchall()
    assert len(rec) == 1 and rec[0][0]["facts"] == 3
    health = admin.execute("select status, cron_last_status, last_total_removed from agentmem.retention_health"
                           ).fetchone()
    assert health[0] == "ok" and health[1] == "succeeded" and health[2] >= 3

    # Now make the next run fail for real: it cannot write its run record within
    # the database's lock_timeout while a session holds a conflicting lock.
    admin.execute(f'alter database "{dbname}" set lock_timeout = \'1s\'')
    holder = connect(admin_url)
    holder.execute("begin")
    holder.execute("lock table agentmem.job_runs in share mode")
    try:
        _, status, message = wait_for_run(cron_db, jobid, runid, 130)
    finally:
        holder.execute("rollback")
        admin.execute(f'alter database "{dbname}" reset lock_timeout')
    assert status == "failed" and "lock" in message
    health = admin.execute("select status, cron_last_status, cron_last_message from agentmem.retention_health"
                           ).fetchone()
    assert health[0] == "failing" and health[1] == "failed" and "lock" in health[2]
    assert admin.execute("select agentmem.unschedule_retention()").fetchone() == (True,)


# -- messages, cached answers and the hit log (issues 3 and 4's tables) -------------

def test_message_retention_takes_embeddings_cache_rows_and_fact_history_with_it(app, admin):
    conv = app.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    ids = [app.execute("select message_id from agentmem.store_message(conversation_id => %s, role => 'user', "
                       "content => %s, embedding => %s)", (conv, f"msg {i}", vec(f"msg {i}"))).fetchone()[0]
           for i in range(5)]
    app.execute("select agentmem.embedding_cache_store(model => 'nomic-embed-text', texts => %s, embeddings => %s)",
                (["msg 0", "msg 4"], [vec("msg 0"), vec("msg 4")]))
    app.execute("select * from agentmem.upsert_fact(user_id => 'u1', subject => 'x', fact => 'The user is vegan', "
                "embedding => %s, source_message_ids => %s)", (vec("The user is vegan"), [ids[0]]))
    app.execute("select * from agentmem.upsert_fact(user_id => 'u1', subject => 'x', fact => 'The user eats fish', "
                "embedding => %s, source_message_ids => %s)", (vec("The user eats fish"), [ids[0], ids[4]]))
    admin.execute("update agentmem.messages set created_at = now() - interval '100 days' where message_id = any(%s)",
                  (ids[:3],))
    app.execute("select agentmem.set_retention_policy(kind => 'messages', max_age => '90 days')")
    assert removed(run(admin))["messages"] == 3
    assert sorted(r[0] for r in admin.execute("select message_id from agentmem.messages")) == sorted(ids[3:])
    assert count(admin, "message_embeddings") == 2
    assert count(admin, "embedding_cache") == 1  # "msg 0" went with its message, "msg 4" stays
    assert count(admin, "fact_history") == 0  # "vegan" came only from an expired message
    assert admin.execute("select source_message_ids from agentmem.facts").fetchone() == ([ids[4]],)
    assert removed(run(admin))["messages"] == 0


def test_cached_answers_and_hit_log_retention_and_the_cache_sweep(app, admin):
    for i in range(3):
        q = f"question number {i}"
        app.execute("select * from agentmem.cache_store(question => %s, question_embedding => %s, answer => 'a', "
                    "safe_to_share => true)", (q, vec(q)))
        app.execute("select * from agentmem.cache_lookup(question => %s, question_embedding => %s)", (q, vec(q)))
    admin.execute("update agentmem.cache_entries set created_at = now() - interval '10 days' "
                  "where question = 'question number 0'")
    admin.execute("update agentmem.cache_entries set expires_at = now() - interval '1 second' "
                  "where question = 'question number 1'")  # expired: the cache's own sweep takes it
    admin.execute("update agentmem.cache_hits set created_at = now() - interval '100 days' "
                  "where question_asked = 'question number 2'")  # default hit_log policy: 90 days
    app.execute("select agentmem.set_retention_policy(kind => 'cached_answers', max_age => '7 days')")
    row = run(admin)
    out = removed(row)
    assert row[7] is None
    assert out["cached_answers"] == 1 and out["cache_sweep"] == 1 and out["hit_log"] == 1
    assert [r[0] for r in admin.execute("select question from agentmem.cache_entries")] == ["question number 2"]
    assert count(admin, "cache_hits") == 2
    again = removed(run(admin))
    assert again["cached_answers"] == again["cache_sweep"] == again["hit_log"] == 0


def test_retention_measures_age_by_when_agentmem_stored_a_message(admin, app):
    cid = app.execute("select agentmem.start_conversation(user_id => 'fred')").fetchone()[0]
    app.execute(STORE, (cid, ["user"], ["an old memory"], [np.ones(768, dtype=np.float32)], ["2019-01-01 00:00+00"]))
    admin.execute("select agentmem.set_default_retention_policy(kind => 'messages', max_age => '30 days')")
    admin.execute("select * from agentmem.apply_retention(batch_size => 1000)")
    assert count(admin, "messages", "conversation_id = %s", (cid,)) == 1
