"""agentmem.index_later: a message's vector joins the HNSW index later (migration 0023).

With the setting on, store_message(s) write the vector to pending_embedding (embedding NULL: in no index)
and agentmem.index_pending_vectors moves it into embedding, where the indexes take it. Until then every
search reads the user's pending vectors exactly: on the exact path (its distance reads either column) and
on every index path (a pending scan merged by distance). agentmem.index_later_max_rows bounds them per
conversation (conversations.pending_vectors). Erasure, export and the worker see the pending vector as the message's.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from agentmem.admin import Admin
from helpers import bulk_load, count, random_unit, sqlstate_of, start_conversation, wait_until

TINY = "tiny-index-later"
STORE = ("select message_id from agentmem.store_message(conversation_id => %s, role => 'user', content => %s, "
         "embedding => %s, model => %s)")
SEARCH = ("select message_id from agentmem.search_messages(user_id => %s, query_embedding => %s, k => %s, "
          "model => %s)")


def pending(admin, tenant: str = "acme") -> int:
    return count(admin, "message_embeddings", "tenant_id = %s and embedding is null", (tenant,))


@pytest.fixture
def tiny(admin):
    admin.execute("select agentmem.register_model(model => %s, dimension => 8)", (TINY,))
    return TINY


def test_off_by_default_and_on_writes_pending(admin, app, tiny):
    cid = start_conversation(app)
    v = random_unit(3, 8, seed=1)
    app.execute(STORE, (cid, "indexed at once", v[0], tiny))
    assert pending(admin) == 0
    app.execute("set agentmem.index_later = on")
    mid = app.execute(STORE, (cid, "indexed later", v[1], tiny)).fetchone()[0]
    app.execute("select * from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                "embeddings => %s, model => %s)", (cid, ["user", "assistant"], ["a", "b"], [v[2], None], tiny))
    row = admin.execute("select embedding is null, pending_embedding is not null from agentmem.message_embeddings "
                        "where message_id = %s", (mid,)).fetchone()
    assert row == (True, True)
    assert pending(admin) == 2  # the single message and the batch's one vector (the other is queued)
    # exactly one of the two columns holds a vector
    assert sqlstate_of(admin, "update agentmem.message_embeddings set embedding = pending_embedding "
                              "where message_id = %s", (mid,)) == "23514"


@pytest.mark.parametrize("exact_max", [100000, 0], ids=["exact scan", "index"])
def test_pending_vectors_are_found_on_every_path(admin, app, tiny, exact_max):
    """The search returns the same nearest messages with the vectors pending as after they are indexed,
    on the exact scan and through the shared index (exact_search_max_rows 0)."""
    base = random_unit(200, 8, seed=2)
    bulk_load(admin, [("acme", "alice")] * 200, base, model=tiny)
    cid = start_conversation(app, "alice")
    fresh = random_unit(30, 8, seed=3)
    app.execute("set agentmem.index_later = on")
    ids = [app.execute(STORE, (cid, f"fresh {i}", v, tiny)).fetchone()[0] for i, v in enumerate(fresh)]
    assert pending(admin) == 30
    app.execute(f"set agentmem.exact_search_max_rows = {exact_max}")
    before = []
    for v in fresh[:10]:
        got = [r[0] for r in app.execute(SEARCH, ("alice", v, 5, tiny)).fetchall()]
        assert got[0] == ids[list(map(tuple, fresh)).index(tuple(v))], "a pending message is its own nearest"
        before.append(got)
    assert admin.execute("select agentmem.index_pending_vectors()").fetchone()[0] == 30
    assert pending(admin) == 0
    after = [[r[0] for r in app.execute(SEARCH, ("alice", v, 5, tiny)).fetchall()] for v in fresh[:10]]
    assert after == before


def test_index_path_merges_pending_by_distance(admin, app, tiny):
    """Through the index, a pending vector nearer than every indexed one comes first, and one farther than
    the k-th indexed neighbour stays out."""
    base = random_unit(300, 8, seed=4)
    bulk_load(admin, [("acme", "alice")] * 300, base, model=tiny)
    cid = start_conversation(app, "alice")
    q = base[0]
    near = q + 0.001 * random_unit(1, 8, seed=5)[0]
    app.execute("set agentmem.index_later = on")
    near_id = app.execute(STORE, (cid, "near", near / np.linalg.norm(near), tiny)).fetchone()[0]
    far_id = app.execute(STORE, (cid, "far", -q, tiny)).fetchone()[0]
    app.execute("set agentmem.exact_search_max_rows = 0")
    got = [r[0] for r in app.execute(SEARCH, ("alice", q, 5, tiny)).fetchall()]
    assert len(got) == 5 and near_id in got[:2] and far_id not in got


def test_pending_vectors_are_bounded_per_conversation(admin, app, tiny):
    cid = start_conversation(app, "alice")
    v = random_unit(12, 8, seed=6)
    app.execute("set agentmem.index_later = on")
    app.execute("set agentmem.index_later_max_rows = 3")
    for i in range(5):
        app.execute(STORE, (cid, f"m{i}", v[i], tiny))
    assert pending(admin) == 3  # the last two went to the index at once
    # a batch larger than the room left is indexed whole
    app.execute("select * from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                "embeddings => %s, model => %s)", (cid, ["user"] * 4, ["b"] * 4, list(v[5:9]), tiny))
    assert pending(admin) == 3
    # another conversation has room of its own
    other = start_conversation(app, "alice")
    app.execute(STORE, (other, "another", v[9], tiny))
    assert pending(admin) == 4
    # the job empties both: their writes wait again
    assert admin.execute("select agentmem.index_pending_vectors()").fetchone()[0] == 4
    assert admin.execute("select array_agg(pending_vectors) from agentmem.conversations "
                         "where tenant_id = 'acme'").fetchone()[0] == [0, 0]
    for i in range(3):
        app.execute(STORE, (cid, f"again {i}", v[10 + i % 2], tiny))
    assert pending(admin) == 3


def test_a_bad_setting_is_am020_and_stores_nothing(app, tiny):
    cid = start_conversation(app)
    app.execute("set agentmem.index_later = maybe")
    with pytest.raises(psycopg.Error) as info:
        app.execute(STORE, (cid, "x", random_unit(1, 8, seed=7)[0], tiny))
    assert info.value.sqlstate == "AM020"
    assert "on or off" in info.value.diag.message_primary and info.value.diag.message_hint
    app.execute("reset agentmem.index_later")
    assert app.execute("select count(*) from agentmem.recent_messages(conversation_id => %s)", (cid,)).fetchone()[0] == 0


def test_index_pending_vectors_limits_and_checks(admin, admin_url, app, tiny):
    cid = start_conversation(app)
    app.execute("set agentmem.index_later = on")
    for i, v in enumerate(random_unit(5, 8, seed=8)):
        app.execute(STORE, (cid, f"m{i}", v, tiny))
    assert admin.execute("select agentmem.index_pending_vectors(max_rows => 2)").fetchone()[0] == 2
    assert pending(admin) == 3
    with Admin.connect(admin_url) as dba:  # the DBA's driver
        assert dba.index_pending_vectors() == 3
        assert dba.index_pending_vectors(max_rows=10) == 0
    # each run recorded: agentmem.health shows when the job last ran
    runs = admin.execute("select rows_removed->>'vectors_indexed' from agentmem.job_runs where job = 'index_pending' "
                         "order by run_id").fetchall()
    assert [r[0] for r in runs] == ["2", "3", "0"]
    assert admin.execute("select last_run_at is not null and status <> 'failing' from agentmem.health "
                         "where job = 'index_pending'").fetchone() == (True,)
    assert sqlstate_of(admin, "select agentmem.index_pending_vectors(max_rows => 0)") == "AM020"
    # the application may not call it (a DBA's job across tenants)
    assert sqlstate_of(app, "select agentmem.index_pending_vectors()") == "42501"


def test_health_shows_the_vectors_waiting_and_behind_when_the_job_does_not_run(admin, app, connect, app_url, tiny):
    def health():
        return admin.execute("select backlog, status, last_run_at is not null from agentmem.health "
                             "where job = 'index_pending'").fetchall()

    def age_runs():  # the job's runs 11 minutes old (a literal time: Citus refuses a stable expression of a column)
        admin.execute("update agentmem.job_runs set started_at = %s where job = 'index_pending'",
                      (admin.execute("select now() - interval '11 minutes'").fetchone()[0],))

    admin.execute("select agentmem.index_pending_vectors()")
    admin.execute("delete from agentmem.job_runs where job = 'index_pending'")
    assert health() == []  # nothing waits and the job never ran: no row
    cid = start_conversation(app)
    app.execute("set agentmem.index_later = on")
    v = random_unit(3, 8, seed=21)
    for i in range(2):
        app.execute(STORE, (cid, f"w{i}", v[i], tiny))
    other = connect(app_url, tenant="globex")  # another tenant's vector counts too (the DBA's view)
    other.execute("set agentmem.index_later = on")
    other.execute(STORE, (start_conversation(other, "bob"), "w2", v[2], tiny))
    assert health() == [(3, "behind", False)]  # waiting, and no job has ever run
    admin.execute("select agentmem.index_pending_vectors(max_rows => 1)")
    assert health() == [(2, "ok", True)]  # it ran just now
    age_runs()
    assert health() == [(2, "behind", True)]
    admin.execute("select agentmem.index_pending_vectors()")
    age_runs()
    assert health() == [(0, "ok", True)]  # nothing waits: an idle job is not behind


def test_erasure_export_and_tenants_see_pending_vectors(admin, app, connect, app_url, tiny):
    cid = start_conversation(app, "alice")
    v = random_unit(2, 8, seed=9)
    app.execute("set agentmem.index_later = on")
    app.execute(STORE, (cid, "kept for export", v[0], tiny))
    lines = [r[0] for r in app.execute("select line from agentmem.export_user(user_id => 'alice')").fetchall()]
    exported = [json.loads(line) for line in lines if "kept for export" in line]
    assert [e["model"] for e in exported[0]["embeddings"]] == [tiny]
    assert np.allclose(np.array(json.loads(exported[0]["embeddings"][0]["embedding"])), v[0], atol=1e-6)
    # another tenant's search never sees acme's pending vector
    other = connect(app_url, tenant="globex")
    other_cid = start_conversation(other, "alice")
    other.execute(STORE, (other_cid, "globex's", v[1], tiny))
    assert [r[0] for r in other.execute(SEARCH, ("alice", v[0], 5, tiny)).fetchall()] == \
        [r[0] for r in other.execute(SEARCH, ("alice", v[1], 5, tiny)).fetchall()]
    assert len(other.execute(SEARCH, ("alice", v[0], 5, tiny)).fetchall()) == 1
    app.execute("select agentmem.forget_user(user_id => 'alice')")
    assert pending(admin, "acme") == 0 and count(admin, "message_embeddings", "tenant_id = 'acme'") == 0


def test_writers_and_the_fold_together_lose_nothing(admin, app_url, connect, tiny):
    """Four writers with index_later on while the fold runs again and again: every vector ends in
    embedding once the last fold has run, none in both columns, none lost."""
    errors: list[BaseException] = []
    stop = threading.Event()
    vectors = random_unit(160, 8, seed=10)

    def write(w: int) -> None:
        try:
            with psycopg.connect(app_url, autocommit=True) as conn:
                register_vector(conn)
                conn.execute("select agentmem.set_tenant(tenant_id => 'acme')")
                conn.execute("set agentmem.index_later = on")
                cid = start_conversation(conn, f"user{w}")
                for i in range(40):
                    conn.execute(STORE, (cid, f"w{w} m{i}", vectors[w * 40 + i], tiny))
        except BaseException as e:  # noqa: BLE001 - recorded for the test
            errors.append(e)

    def fold() -> None:
        try:
            with psycopg.connect(admin.info.dsn, autocommit=True) as conn:
                while not stop.is_set():
                    conn.execute("select agentmem.index_pending_vectors(max_rows => 7)")
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    folder = threading.Thread(target=fold)
    folder.start()
    writers = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    folder.join()
    assert errors == []
    admin.execute("select agentmem.index_pending_vectors()")
    assert count(admin, "message_embeddings", "tenant_id = 'acme'") == 160
    assert pending(admin) == 0
    assert count(admin, "message_embeddings", "pending_embedding is not null") == 0


def test_the_job_never_waits_for_a_row_another_transaction_holds(admin, admin_url, app, connect, tiny):
    """A pending row locked by another transaction (an erasure in flight, a writer) is skipped, not waited
    for; the next run moves it. Its conversation's count, held by that writer, stays as it was."""
    cid = start_conversation(app, "alice")
    app.execute("set agentmem.index_later = on")
    for i, v in enumerate(random_unit(3, 8, seed=11)):
        app.execute(STORE, (cid, f"m{i}", v, tiny))
    holder = connect(admin_url)
    holder.execute("begin")
    # (the tenant named: Citus locks rows of one shard only)
    held = holder.execute("select message_id from agentmem.message_embeddings where tenant_id = 'acme' "
                          "and embedding is null order by message_id limit 1 for update").fetchone()[0]
    holder.execute("select from agentmem.conversations where tenant_id = 'acme' and conversation_id = %s for update",
                   (cid,))
    job = connect(admin_url)
    job.execute("set lock_timeout = '2s'")  # a wait would fail the call with 55P03
    assert job.execute("select agentmem.index_pending_vectors()").fetchone()[0] == 2
    assert admin.execute("select message_id from agentmem.message_embeddings where embedding is null").fetchall() \
        == [(held,)]
    holder.execute("rollback")
    assert job.execute("select agentmem.index_pending_vectors()").fetchone()[0] == 1
    assert pending(admin) == 0
    assert admin.execute("select pending_vectors from agentmem.conversations where conversation_id = %s",
                         (cid,)).fetchone()[0] == 0


@pytest.mark.parametrize("call", [
    "select agentmem.schedule_index_pending(schedule => ' ')",
    "select agentmem.schedule_index_pending(max_rows => 0)",
    "select agentmem.schedule_index_pending(max_rows => null)",
])
def test_scheduling_the_job_refuses_bad_arguments(admin, call):
    with pytest.raises(psycopg.Error) as info:
        admin.execute(call)
    # each refusal says what it got and what to pass
    assert info.value.sqlstate == "AM020" and info.value.diag.message_detail and info.value.diag.message_hint
    assert ("Five fields" if "schedule =>" in call else "max_rows => a value from 1 to 100000000") \
        in info.value.diag.message_hint


def test_scheduling_the_job_is_the_dbas_and_needs_every_tenant(app, admin, server, dbname):
    for call in ("select agentmem.schedule_index_pending()", "select agentmem.unschedule_index_pending()"):
        assert sqlstate_of(app, call) == "42501"
    role = "agentmem_pending_dba"
    admin.execute(f"create role {role} login")
    admin.execute(f"grant {admin.info.user}, agentmem_owner to {role}")
    try:
        with psycopg.connect(server.db_url(dbname, role), autocommit=True) as dba:
            with pytest.raises(psycopg.Error) as info:  # the job would see no tenant: refused before pg_cron
                dba.execute("select agentmem.schedule_index_pending()")
            assert info.value.sqlstate == "AM041" and "bypassrls" in info.value.diag.message_hint
    finally:
        admin.execute(f"drop role {role}")


def test_without_pg_cron_scheduling_says_to_call_index_pending_vectors(admin):
    if admin.execute("select current_setting('cron.database_name', true)").fetchone()[0] is not None:
        pytest.skip("pg_cron is loaded on this server")
    with pytest.raises(psycopg.Error) as info:
        admin.execute("select agentmem.schedule_index_pending(max_rows => 500)")
    assert info.value.sqlstate == "AM050"
    assert "agentmem.index_pending_vectors(max_rows => 500)" in info.value.diag.message_hint


def test_pg_cron_runs_the_job_which_indexes_the_pending_vectors(cron_db, admin, app, dbname, tiny):
    """Waits for pg_cron (it schedules by the minute): about 1-2 minutes."""
    cid = start_conversation(app)
    app.execute("set agentmem.index_later = on")
    for i, v in enumerate(random_unit(4, 8, seed=31)):
        app.execute(STORE, (cid, f"c{i}", v, tiny))
    assert pending(admin) == 4
    admin.execute("create extension if not exists dblink")
    jobid = admin.execute("select agentmem.schedule_index_pending(max_rows => 3)").fetchone()[0]
    assert cron_db.execute("select jobname, schedule, command, database from cron.job where jobid = %s",
                           (jobid,)).fetchone() == (
        f"agentmem-index-pending:{dbname}", "* * * * *", "select agentmem.index_pending_vectors(max_rows => 3)", dbname)
    assert admin.execute("select agentmem.schedule_index_pending(max_rows => 3)").fetchone()[0] == jobid  # replaced
    wait_until(lambda: pending(admin) < 4, timeout=150, interval=2, what="pg_cron to index the pending vectors")
    assert admin.execute("select agentmem.unschedule_index_pending()").fetchone() == (True,)
    runs = [r[0] for r in admin.execute("select rows_removed->>'vectors_indexed' from agentmem.job_runs "
                                        "where job = 'index_pending' order by run_id").fetchall()]
    assert runs[0] == "3" and pending(admin) == 4 - sum(map(int, runs))  # max_rows per run, as scheduled
    assert admin.execute("select agentmem.unschedule_index_pending()").fetchone() == (False,)
