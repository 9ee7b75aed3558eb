"""sql/62_index_upkeep.sql: the index upkeep job builds tenants' own indexes and drops unused ones.

A tenant past agentmem.tenant_index_min_rows gets its indexes from one run, one that shrank loses
them, a run straight after changes nothing; runs are bounded (max_builds, index_upkeep_max_build_rows)
and recorded in agentmem.job_runs; pg_cron runs the job (the debian15 leg).
"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from helpers import bulk_load, sqlstate_of, wait_until

TINY = "tiny-upkeep"
UPKEEP = "select * from agentmem.apply_index_upkeep(max_builds => %s)"


@pytest.fixture
def tiny(admin):
    admin.execute("select agentmem.register_model(model => %s, dimension => 8)", (TINY,))
    admin.execute("set agentmem.tenant_index_min_rows = 20")


def messages(admin, tenant: str, n: int, seed: int = 0, user: str = "alice"):
    v = np.random.default_rng(seed).standard_normal((n, 8)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return bulk_load(admin, [(tenant, user)] * n, v, model=TINY, rebuild_index=False)


def own_indexes(admin) -> set[tuple[str, str, bool]]:
    """(tenant, kind, valid) of every tenant's own index."""
    return {(r[0], r[1], r[2]) for r in admin.execute(
        "select tenant_id, index_kind, is_valid from agentmem.tenant_indexes")}


def upkeep(admin, max_builds: int = 1) -> dict:
    row = admin.execute(UPKEEP, (max_builds,)).fetchone()
    assert row[2] == "index_upkeep" and row[7] is None, row[7]  # job, no error
    return row[5]  # rows_removed: what the run did


def test_a_tenant_past_the_threshold_gets_its_indexes_one_that_shrank_loses_them(admin, app, tiny):
    messages(admin, "big", 30)
    messages(admin, "small", 10, seed=1)
    assert own_indexes(admin) == set()
    first = upkeep(admin)
    names = {n for (n,) in admin.execute(
        "select unnest(array[agentmem_private.tenant_index_name('message_embeddings', 'big', %s), "
        "agentmem_private.exact_index_name('message_embeddings', 'big', %s)])", (TINY, TINY))}
    assert set(first["built"]) == names and first["dropped"] == [] and first["left"] == []
    assert own_indexes(admin) == {("big", "hnsw", True), ("big", "exact", True)}
    # measured, as create_tenant_index does: searches know how to start
    assert admin.execute("select first_pass from agentmem.tenant_indexes where index_kind = 'exact'"
                         ).fetchone()[0] in ("hnsw", "exact")
    # the tenant's searches use them (the DBA's step, taken by the job)
    app.execute("select agentmem.set_tenant(tenant_id => 'big')")
    app.execute("set agentmem.exact_search_max_rows = 0")
    assert len(app.execute("select * from agentmem.search_messages(user_id => 'alice', query_embedding => %s, "
                           "k => 5, model => %s)", (np.eye(8, dtype=np.float32)[0], TINY)).fetchall()) == 5

    # a run straight after changes nothing
    second = upkeep(admin)
    assert second == {"built": [], "dropped": [], "measured": [], "left": []}
    assert own_indexes(admin) == {("big", "hnsw", True), ("big", "exact", True)}

    # the tenant shrinks: at 16 rows (over three quarters of 20) it keeps them, at 10 it loses them
    admin.execute("delete from agentmem.messages where tenant_id = 'big' and message_index >= 16")
    assert upkeep(admin)["dropped"] == []
    admin.execute("delete from agentmem.messages where tenant_id = 'big' and message_index >= 10")
    third = upkeep(admin)
    assert set(third["dropped"]) == names and third["built"] == []
    assert own_indexes(admin) == set()
    assert upkeep(admin) == {"built": [], "dropped": [], "measured": [], "left": []}
    runs = admin.execute("select total_removed from agentmem.job_runs where job = 'index_upkeep' "
                         "order by run_id").fetchall()
    assert runs == [(0,), (0,), (0,), (2,), (0,)]


def test_runs_are_bounded_and_say_what_they_left(admin, tiny):
    messages(admin, "a", 40)
    messages(admin, "b", 30, seed=1)
    messages(admin, "c", 25, seed=2)
    admin.execute("set agentmem.index_upkeep_max_build_rows = 35")
    run = upkeep(admin, max_builds=1)
    assert [(x["tenant_id"], x["reason"]) for x in run["left"]] == [
        ("a", "too big to build in a transaction"), ("c", "max_builds reached")]
    assert run["left"][0]["row_count"] == 40
    assert run["left"][0]["statements"][0].startswith("create index concurrently if not exists ")
    assert {t for t, _, _ in own_indexes(admin)} == {"b"}  # the biggest it may build
    second = upkeep(admin, max_builds=5)
    assert [x["tenant_id"] for x in second["left"]] == ["a"] and second["dropped"] == []
    assert {t for t, _, _ in own_indexes(admin)} == {"b", "c"}
    # the DBA runs the big tenant's statements (concurrently, from psql); the next run measures them
    for statement in run["left"][0]["statements"]:
        admin.execute(statement)
    assert upkeep(admin)["measured"] == ["a"]
    assert upkeep(admin, max_builds=0) == {"built": [], "dropped": [], "measured": [], "left": []}


def test_an_index_left_invalid_is_dropped_and_built_again(admin, tiny):
    messages(admin, "big", 30)
    upkeep(admin)
    name = admin.execute("select agentmem_private.tenant_index_name('message_embeddings', 'big', %s)",
                         (TINY,)).fetchone()[0]
    admin.execute("update pg_index set indisvalid = false where indexrelid = %s::regclass", (f"agentmem.{name}",))
    run = upkeep(admin)
    assert name in run["dropped"] and name in run["built"]
    assert ("big", "hnsw", True) in own_indexes(admin)


@pytest.mark.parametrize("call, code", [
    ("select * from agentmem.apply_index_upkeep(max_builds => -1)", "AM020"),
    ("select * from agentmem.apply_index_upkeep(max_builds => null)", "AM020"),
    ("select agentmem.schedule_index_upkeep(schedule => ' ')", "AM020"),
    ("select agentmem.schedule_index_upkeep(max_builds => 1001)", "AM020"),
])
def test_bad_arguments_are_refused(admin, call, code):
    assert sqlstate_of(admin, call) == code


def test_the_app_role_cannot_run_or_schedule_it_and_a_dba_under_rls_is_told_why(app, admin, server, dbname):
    for call in ("select * from agentmem.apply_index_upkeep()", "select agentmem.schedule_index_upkeep()",
                 "select agentmem.unschedule_index_upkeep()"):
        assert sqlstate_of(app, call) == "42501"
    role = "agentmem_upkeep_dba"
    admin.execute(f"create role {role} login")
    admin.execute(f"grant {admin.info.user}, agentmem_owner to {role}")
    try:
        with psycopg.connect(server.db_url(dbname, role), autocommit=True) as dba:
            with pytest.raises(psycopg.Error) as info:
                dba.execute("select * from agentmem.apply_index_upkeep()")
            assert info.value.sqlstate == "AM041" and "schedule_index_upkeep" in info.value.diag.message_hint
    finally:
        admin.execute(f"drop role {role}")


def test_without_pg_cron_scheduling_says_to_call_apply_index_upkeep(admin):
    if admin.execute("select current_setting('cron.database_name', true)").fetchone()[0] is not None:
        pytest.skip("pg_cron is loaded on this server")
    with pytest.raises(psycopg.Error) as info:
        admin.execute("select agentmem.schedule_index_upkeep()")
    assert info.value.sqlstate == "AM050" and "agentmem.apply_index_upkeep(max_builds => 1)" in info.value.diag.message_hint


# -- with pg_cron (the debian15 leg) ------------------------------------------------

def test_pg_cron_runs_the_upkeep_job_which_builds_the_index(cron_db, admin, dbname, tiny):
    """Waits for pg_cron (it schedules by the minute): about 1-2 minutes."""
    # the job's own session does not see this session's settings: the database's
    admin.execute(f'alter database "{dbname}" set agentmem.tenant_index_min_rows = 20')
    messages(admin, "big", 30)
    admin.execute("create extension if not exists dblink")
    jobid = admin.execute("select agentmem.schedule_index_upkeep(schedule => '* * * * *', max_builds => 2)"
                          ).fetchone()[0]
    assert cron_db.execute("select jobname, schedule, command, database from cron.job where jobid = %s",
                           (jobid,)).fetchone() == (
        f"agentmem-index-upkeep:{dbname}", "* * * * *", "select agentmem.apply_index_upkeep(max_builds => 2)", dbname)
    # scheduling again replaces it; retention's job is another
    assert admin.execute("select agentmem.schedule_index_upkeep(schedule => '* * * * *', max_builds => 2)"
                         ).fetchone()[0] == jobid
    status, message = wait_until(lambda: cron_db.execute(
        "select status, return_message from cron.job_run_details where jobid = %s "
        "and status in ('succeeded', 'failed') order by runid limit 1", (jobid,)).fetchone(),
        timeout=150, interval=2, what="pg_cron to run the upkeep job")
    assert status == "succeeded", message
    assert own_indexes(admin) == {("big", "hnsw", True), ("big", "exact", True)}
    assert admin.execute("select rows_removed -> 'built' from agentmem.job_runs where job = 'index_upkeep' "
                         "order by run_id limit 1").fetchone()[0]
    assert admin.execute("select agentmem.unschedule_index_upkeep()").fetchone() == (True,)
    assert admin.execute("select agentmem.unschedule_index_upkeep()").fetchone() == (False,)
    admin.execute(f'alter database "{dbname}" reset agentmem.tenant_index_min_rows')
