"""Text stored without a vector, the embedding queue and its workers, re-embedding (sql/17_embedding_jobs.sql,
python/agentmem/worker.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from agentmem.worker import Worker
from helpers import count, sqlstate_of, vec, wait_until, worker_login_url

WORKER_ROLE = "agentmem_test_worker"
DOC = "search_document: "


@pytest.fixture
def worker_url(server, dbname, admin):
    """A login role that is a member of agentmem_worker and of nothing else."""
    return worker_login_url(server, dbname, admin, WORKER_ROLE)


@pytest.fixture
def make_worker(worker_url, stub):
    made: list[Worker] = []

    def _make(**kw) -> Worker:
        kw.setdefault("host", stub.host)
        w = Worker(worker_url, **kw)
        made.append(w)
        return w

    yield _make
    for w in made:
        w.close()


def _conversation(app) -> str:
    return app.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]


def _search(app, text: str, k: int = 5, model: str | None = None):
    return app.execute(
        "select message_id, round(similarity::numeric, 5) from agentmem.search_messages(user_id => 'u1', "
        "query_embedding => %s, k => %s, model => %s) order by vector_rank",
        (vec("search_query: " + text), k, model)).fetchall()


def test_text_stored_without_a_vector_is_found_by_words_at_once_and_by_meaning_after_one_pass(
        app, admin, connect, app_url, make_worker, stub):
    cid = _conversation(app)
    texts = ["the invoice for march was paid", "my cat is called pixel", "the train leaves at nine"]
    ids = [app.execute("select message_id from agentmem.store_message(conversation_id => %s, role => 'user', "
                       "content => %s, embedding => null)", (cid, t)).fetchone()[0] for t in texts]
    # queued in the same transaction, found by words at once, not yet by meaning
    assert count(admin, "embedding_jobs") == 3 and count(admin, "message_embeddings") == 0
    words = app.execute("select message_id from agentmem.search_messages(user_id => 'u1', query_text => 'cat pixel')")
    assert [r[0] for r in words.fetchall()] == [ids[1]]
    assert _search(app, "cat pixel") == []

    stats = make_worker().run(once=True)
    assert stats.completed == 3 and count(admin, "embedding_jobs") == 0
    assert sorted(stub.embedded_texts) == sorted(DOC + t for t in texts)

    # the same as storing with the vector directly: same vector, same result
    direct = connect(app_url, tenant="globex")
    cid2 = _conversation(direct)
    ids2 = [direct.execute("select message_id from agentmem.store_message(conversation_id => %s, role => 'user', "
                           "content => %s, embedding => %s)", (cid2, t, vec(DOC + t))).fetchone()[0] for t in texts]
    queued = admin.execute("select message_id, embedding from agentmem.message_embeddings "
                           "where tenant_id = 'acme'").fetchall()
    stored = admin.execute("select message_id, embedding from agentmem.message_embeddings "
                           "where tenant_id = 'globex'").fetchall()
    by_id = dict(stored)
    for mid, v in queued:
        assert np.array_equal(v, by_id[ids2[ids.index(mid)]])
    mine = [(ids.index(m), s) for m, s in _search(app, "my cat")]
    theirs = [(ids2.index(m), s) for m, s in _search(direct, "my cat")]
    assert mine == theirs and mine[0][0] == 1
    # a second pass finds nothing; the embedding cache now holds the texts
    assert make_worker().run(once=True).claimed == 0
    assert count(admin, "embedding_cache", "tenant_id = 'acme'") == 3


def test_store_messages_mixes_rows_with_and_without_vectors(app, admin, make_worker):
    cid = _conversation(app)
    app.execute("select * from agentmem.store_messages(conversation_id => %s, roles => array['user','assistant'], "
                "contents => array['with a vector', 'without one'], embeddings => array[%s::vector, null])",
                (cid, vec(DOC + "with a vector")))
    app.execute("select * from agentmem.store_messages(conversation_id => %s, roles => array['user'], "
                "contents => array['no array at all'], embeddings => null)", (cid,))
    assert count(admin, "message_embeddings") == 1 and count(admin, "embedding_jobs") == 2
    make_worker().run(once=True)
    assert count(admin, "message_embeddings") == 3 and count(admin, "embedding_jobs") == 0


def test_a_fact_without_a_vector_merges_or_contradicts_when_its_vector_arrives(app, admin, make_worker):
    up = ("select fact_id, action from agentmem.upsert_fact(user_id => 'u1', subject => 'home_city', fact => %s, "
          "embedding => %s, source_message_ids => %s::uuid[], merge_threshold => 0.6)")
    s1, s2, s3 = "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002", \
        "00000000-0000-0000-0000-000000000003"
    fid, action = app.execute(up, ("The user lives in Lyon.", None, [s1])).fetchone()
    assert action == "inserted"
    # found by words at once
    assert app.execute("select fact_id from agentmem.recall_facts(user_id => 'u1', query_text => 'Lyon')"
                       ).fetchall() == [(fid,)]
    make_worker().run(once=True)
    assert admin.execute("select embedding is not null from agentmem.facts").fetchone() == (True,)
    # a paraphrase: merged when its vector arrives
    assert app.execute(up, ("The user lives in Lyon, France.", None, [s2])).fetchone() == (fid, "pending")
    assert app.execute("select fact from agentmem.recall_facts(user_id => 'u1', query_text => 'France')"
                       ).fetchall() == [("The user lives in Lyon, France.",)]
    make_worker().run(once=True)
    row = admin.execute("select fact, source_message_ids, embedding is not null from agentmem.facts").fetchone()
    assert row[0] == "The user lives in Lyon, France." and sorted(map(str, row[1])) == [s1, s2] and row[2]
    assert count(admin, "fact_history") == 0
    # a contradiction: the previous version goes to the history when the vector arrives
    assert app.execute(up, ("Berlin", None, [s3])).fetchone() == (fid, "pending")
    assert count(admin, "fact_history") == 0
    make_worker().run(once=True)
    row = admin.execute("select fact, source_message_ids from agentmem.facts").fetchone()
    assert row[0] == "Berlin" and [str(s) for s in row[1]] == [s3]
    assert admin.execute("select fact from agentmem.fact_history").fetchall() == [("The user lives in Lyon, France.",)]


def test_a_cache_entry_without_a_vector_serves_exact_lookups_until_its_vector_arrives(app, admin, make_worker):
    q = "How do I reset my password?"
    app.execute("select * from agentmem.cache_store(question => %s, question_embedding => null, "
                "answer => 'Use the reset link.', intent => 'howto')", (q,))
    lookup = ("select hit, kind from agentmem.cache_lookup(question => %s, question_embedding => %s, "
              "intent => 'howto')")
    assert app.execute(lookup, (q, vec("search_query: " + q))).fetchone() == (True, "exact")
    near = "How do I reset my password ?!"  # normalises to the same key: exact
    other = "how can i reset my password"
    assert app.execute(lookup, (near, vec("search_query: " + near))).fetchone()[0] is True
    assert app.execute(lookup, (other, vec("search_query: " + q))).fetchone()[0] is False
    make_worker().run(once=True)
    assert app.execute(lookup, (other, vec("search_query: " + q))).fetchone() == (True, "semantic")


def test_four_workers_drain_2000_jobs_embedding_each_row_exactly_once(app, admin, make_worker, stub):
    cid = _conversation(app)
    texts = [f"message number {i} about topic {i % 37}" for i in range(2000)]
    for i in range(0, 2000, 500):
        app.execute("select count(*) from agentmem.store_messages(conversation_id => %s, roles => %s, "
                    "contents => %s, embeddings => null)", (cid, ["user"] * 500, texts[i:i + 500]))
    workers = [make_worker(batch_size=50) for _ in range(4)]
    threads = [threading.Thread(target=w.run, kwargs={"once": True}) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sum(w.stats.completed for w in workers) == 2000
    assert all(w.stats.completed > 0 for w in workers), [w.stats.completed for w in workers]
    embedded = stub.embedded_texts
    assert len(embedded) == 2000 and sorted(embedded) == sorted(DOC + t for t in texts)
    assert count(admin, "message_embeddings") == 2000 and count(admin, "embedding_jobs") == 0


def test_a_worker_killed_mid_batch_loses_no_job(app, admin, worker_url, stub, make_worker):
    cid = _conversation(app)
    app.execute("select count(*) from agentmem.store_messages(conversation_id => %s, roles => %s, "
                "contents => %s, embeddings => null)", (cid, ["user"] * 20, [f"text {i}" for i in range(20)]))
    stub.delay = 30.0
    env = dict(os.environ, OLLAMA_HOST=stub.host)
    proc = subprocess.Popen([sys.executable, "-m", "agentmem.cli", "worker", "--database-url", worker_url,
                             "--batch", "8", "--lease", "2", "--ollama-host", stub.host],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: stub.embed_started > 0, what="the worker to be mid-batch")
        assert count(admin, "embedding_jobs", "state = 'running'") == 8
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    stub.delay = 0.0
    wait_until(lambda: count(admin, "embedding_jobs", "lease_until < now()") == 8, what="the lease to expire")
    make_worker().run(once=True)
    assert count(admin, "embedding_jobs") == 0 and count(admin, "message_embeddings") == 20


def test_sigterm_finishes_the_batch_in_hand_then_exits(app, admin, worker_url, stub):
    cid = _conversation(app)
    app.execute("select count(*) from agentmem.store_messages(conversation_id => %s, roles => %s, "
                "contents => %s, embeddings => null)", (cid, ["user"] * 20, [f"text {i}" for i in range(20)]))
    stub.delay = 2.0
    proc = subprocess.Popen([sys.executable, "-m", "agentmem.cli", "worker", "--database-url", worker_url,
                             "--batch", "8", "--ollama-host", stub.host],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: stub.embed_started > 0, what="the worker to be mid-batch")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    # the batch in hand was completed, nothing more was claimed
    assert count(admin, "message_embeddings") == 8
    assert count(admin, "embedding_jobs", "state = 'pending'") == 12
    assert "jobs/s" in proc.stderr.read()


@pytest.mark.parametrize("bad", ["dimension", "zero", "nan", "fewer"])
def test_a_bad_vector_fails_its_job_and_stores_nothing(app, admin, make_worker, bad):
    cid = _conversation(app)
    app.execute("select count(*) from agentmem.store_messages(conversation_id => %s, roles => %s, "
                "contents => %s, embeddings => null)", (cid, ["user"] * 3, ["a one", "a two", "a three"]))

    def embedder(model, dimension, host):
        def embed(texts):
            if bad == "dimension":
                return [np.ones(dimension + 1, dtype=np.float32)] * len(texts)
            if bad == "zero":
                return [np.zeros(dimension, dtype=np.float32)] * len(texts)
            if bad == "nan":
                return [np.full(dimension, np.nan, dtype=np.float32)] * len(texts)
            return [np.ones(dimension, dtype=np.float32)] * (len(texts) - 1)
        return embed

    w = make_worker(embedder=embedder)
    assert w.run_batch() == 3
    assert count(admin, "message_embeddings") == 0 and count(admin, "embedding_cache") == 0
    rows = admin.execute("select state, attempts, last_error from agentmem.embedding_jobs").fetchall()
    assert len(rows) == 3 and all(r[0] == "pending" and r[1] == 1 and r[2] for r in rows), rows
    # and the SQL call refuses what the worker might not check
    token = uuid.uuid4()
    admin.execute("update agentmem.embedding_jobs set state = 'running', lease_token = %s, "
                  "lease_until = now() + interval '1 minute'", (token,))
    jobs = admin.execute("select tenant_id, job_id from agentmem.embedding_jobs").fetchall()
    wconn = w._conn
    assert sqlstate_of(wconn, "select * from agentmem.complete_embedding_jobs(lease_token => %s, tenant_ids => %s, "
                       "job_ids => %s, embeddings => %s)",
                       (token, [j[0] for j in jobs], [j[1] for j in jobs], [vec("x")])) == "AM020"
    assert sqlstate_of(wconn, "select * from agentmem.complete_embedding_jobs(lease_token => %s, tenant_ids => %s, "
                       "job_ids => %s, embeddings => array['[NaN,1]'::vector])",
                       (token, [jobs[0][0]], [jobs[0][1]])) == "22000"
    assert count(admin, "message_embeddings") == 0


def test_an_embedder_that_always_fails_parks_the_job_with_its_error(app, admin, make_worker, stub):
    cid = _conversation(app)
    app.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => 'x', "
                "embedding => null)", (cid,))
    stub.fail_always = True
    w = make_worker()
    w._conn.execute("set agentmem.embedding_retry_base = '0 seconds'")
    w._conn.execute("set agentmem.embedding_max_attempts = 3")
    w.run(once=True)
    state, attempts, error = admin.execute("select state, attempts, last_error from agentmem.embedding_jobs"
                                           ).fetchone()
    assert (state, attempts) == ("failed", 3) and "stub failure" in error
    assert count(admin, "message_embeddings") == 0 and count(admin, "messages") == 1
    assert admin.execute("select failed, last_error is not null from agentmem.embedding_backlog").fetchone() == (1, True)
    health = admin.execute("select backlog, failed, status from agentmem.health where job = 'embedding_queue'"
                           ).fetchone()
    assert health == (0, 1, "failing")
    # a DBA queues it again; it is done once the embedder works
    stub.fail_always = False
    assert admin.execute("select agentmem.retry_embedding_jobs()").fetchone() == (1,)
    w.run(once=True)
    assert count(admin, "message_embeddings") == 1 and count(admin, "embedding_jobs") == 0


def test_a_user_erased_between_claim_and_complete_leaves_nothing(app, admin, make_worker):
    cid = _conversation(app)
    app.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => 'secret', "
                "embedding => null)", (cid,))
    w = make_worker()
    jobs = w._conn.execute("select * from agentmem.claim_embedding_jobs()").fetchall()
    assert len(jobs) == 1 and jobs[0][4] == DOC + "secret"
    app.execute("select agentmem.forget_user(user_id => 'u1')")
    assert count(admin, "embedding_jobs") == 0
    out = w._conn.execute("select * from agentmem.complete_embedding_jobs(lease_token => %s, tenant_ids => %s, "
                          "job_ids => %s, embeddings => %s)",
                          (jobs[0][6], [jobs[0][0]], [jobs[0][1]], [vec("secret")])).fetchall()
    assert out == [(jobs[0][1], "gone")]
    assert count(admin, "message_embeddings") == 0 and count(admin, "embedding_cache") == 0


@pytest.mark.parametrize("call", [
    "select * from agentmem.claim_embedding_jobs()",
    "select * from agentmem.complete_embedding_jobs(lease_token => gen_random_uuid(), tenant_ids => '{}', "
    "job_ids => '{}', embeddings => '{}')",
    "select * from agentmem.fail_embedding_jobs(lease_token => gen_random_uuid(), tenant_ids => '{}', "
    "job_ids => '{}', error => 'x')",
    "select agentmem.embedding_queue_depth()",
    "select * from agentmem.reembed(model => 'all-minilm', tenant_id => 'acme')",
    "select agentmem.switch_default_model(model => 'all-minilm', tenant_id => 'acme')",
    "select * from agentmem.drop_model_vectors(model => 'all-minilm', tenant_id => 'acme')",
    "select * from agentmem.embedding_backlog",
    "select * from agentmem.health",
    "select * from agentmem.embedding_jobs",
])
def test_the_application_role_cannot_reach_the_queue(app, call):
    assert sqlstate_of(app, call) == "42501"


def test_the_worker_role_reaches_nothing_but_its_calls(worker_url, connect):
    conn = connect(worker_url)
    for call in ["select * from agentmem.embedding_jobs", "select * from agentmem.messages",
                 "select agentmem.set_tenant(tenant_id => 'acme')",
                 "select * from agentmem.recent_messages(conversation_id => gen_random_uuid())",
                 "select * from agentmem.reembed(model => 'all-minilm', tenant_id => 'acme')"]:
        assert sqlstate_of(conn, call) == "42501", call
    assert conn.execute("select count(*) from agentmem.claim_embedding_jobs()").fetchone() == (0,)


def test_reembedding_a_tenant_under_search_load_never_returns_fewer_than_k(
        app, admin, connect, app_url, make_worker, stub):
    cid = _conversation(app)
    texts = [f"note {i} on subject {i % 11}" for i in range(60)]
    app.execute("select count(*) from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                "embeddings => %s)", (cid, ["user"] * 60, texts, [vec(DOC + t) for t in texts]))
    app.execute("select * from agentmem.upsert_fact(user_id => 'u1', subject => 'diet', fact => 'vegetarian', "
                "embedding => %s)", (vec(DOC + "vegetarian"),))
    # the re-embed target has another dimension
    assert admin.execute("select jobs from agentmem.reembed(model => 'all-minilm', tenant_id => 'acme')"
                         ).fetchone() == (61,)
    assert sqlstate_of(admin, "select agentmem.switch_default_model(model => 'all-minilm', tenant_id => 'acme')"
                       ) == "AM031"
    short, errors, done = [], [], threading.Event()
    searcher = connect(app_url, tenant="acme")

    def search_load():
        while not done.is_set():
            try:
                # the application's embedder is the old model's until the switch
                n = len(searcher.execute("select * from agentmem.search_messages(user_id => 'u1', "
                                         "query_embedding => %s, k => 10, model => 'nomic-embed-text')",
                                         (vec("search_query: subject 3"),)
                                         ).fetchall())
                if n < 10:
                    short.append(n)
            except psycopg.Error as exc:
                errors.append(exc)

    t = threading.Thread(target=search_load)
    t.start()
    try:
        # a write during the re-embedding is queued for the new model too
        app.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', "
                    "content => 'late note', embedding => %s)", (cid, vec(DOC + "late note")))
        for _ in range(3):
            make_worker(batch_size=16).run(once=True)
        assert count(admin, "embedding_jobs") == 0
        assert admin.execute("select agentmem.switch_default_model(model => 'all-minilm', tenant_id => 'acme')"
                             ).fetchone() == ("all-minilm",)
    finally:
        done.set()
        t.join(30)
    assert short == [] and errors == []
    # searches without a model now use the new one (384 dimensions); the old one goes
    hits = app.execute("select content from agentmem.search_messages(user_id => 'u1', query_embedding => %s, "
                       "k => 3)", (vec("search_query: late note", 384),)).fetchall()
    assert hits[0] == ("late note",)
    assert sqlstate_of(app, "select * from agentmem.search_messages(user_id => 'u1', query_embedding => %s, k => 3)",
                       (vec("x", 768),)) == "AM010"
    assert app.execute("select fact from agentmem.recall_facts(user_id => 'u1', query_embedding => %s)",
                       (vec(DOC + "vegetarian", 384),)).fetchall() == [("vegetarian",)]
    assert sqlstate_of(admin, "select * from agentmem.drop_model_vectors(model => 'all-minilm', tenant_id => 'acme')"
                       ) == "AM031"
    admin.execute("select * from agentmem.drop_model_vectors(model => 'nomic-embed-text', tenant_id => 'acme')")
    for table in ("message_embeddings", "facts", "cache_entries", "embedding_cache", "embedding_jobs"):
        assert count(admin, table, "model = 'nomic-embed-text'") == 0, table
    assert count(admin, "message_embeddings", "model = 'all-minilm'") == 61


def test_an_idle_worker_picks_a_job_up_within_its_poll(app, admin, make_worker):
    w = make_worker(poll=0.5)
    t = threading.Thread(target=w.run)
    t.start()
    try:
        wait_until(lambda: w._listen is not None, what="the worker to listen")
        time.sleep(0.5)  # idle, waiting on LISTEN
        cid = _conversation(app)
        app.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', "
                    "content => 'wake up', embedding => null)", (cid,))
        wait_until(lambda: count(admin, "message_embeddings") == 1, timeout=20, what="the worker's next poll")
    finally:
        w.stop()
        t.join(30)
    assert not t.is_alive()


def test_reembedding_every_tenant_then_dropping_the_model_everywhere(app, admin, connect, app_url, make_worker):
    globex = connect(app_url, tenant="globex")
    for conn in (app, globex):
        cid = _conversation(conn)
        conn.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => 'hi', "
                     "embedding => %s)", (cid, vec(DOC + "hi")))
    admin.execute("select agentmem.register_model(model => 'tiny-embed', dimension => 8)")
    queued = dict(admin.execute("select tenant, jobs from agentmem.reembed(model => 'tiny-embed')").fetchall())
    assert queued == {"acme": 1, "globex": 1}
    assert dict(admin.execute("select tenant_id, pending from agentmem.embedding_backlog").fetchall()) == \
        {"acme": 1, "globex": 1}
    make_worker(model="tiny-embed").run(once=True)
    assert count(admin, "message_embeddings", "model = 'tiny-embed'") == 2
    removed = admin.execute("select tenant, table_name, rows_removed from agentmem.drop_model_vectors("
                            "model => 'tiny-embed')").fetchall()
    assert ("acme", "message_embeddings", 1) in removed and (None, "models", 1) in removed
    assert count(admin, "message_embeddings", "model = 'tiny-embed'") == 0 and count(admin, "reembeddings") == 0
    assert admin.execute("select count(*) from pg_indexes where schemaname = 'agentmem' and indexname like '%tiny%'"
                         ).fetchone() == (0,)
    assert admin.execute("select count(*) from agentmem.models where model = 'tiny-embed'").fetchone() == (0,)
    # the default model is refused
    assert sqlstate_of(admin, "select * from agentmem.drop_model_vectors(model => 'nomic-embed-text')") == "AM031"


def test_the_readme_reembedding_snippet_runs_as_written(admin, app, make_worker):
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("### Re-embedding to a new model", 1)[1]
    snippet = section.split("```sql", 1)[1].split("```", 1)[0]
    cid = _conversation(app)
    app.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => 'hi', "
                "embedding => %s)", (cid, vec(DOC + "hi")))
    statements = [line.split("--")[0].strip().rstrip(";") for line in snippet.strip().splitlines()]
    assert len(statements) == 5
    admin.execute(statements[0])  # register_model
    admin.execute(statements[1])  # reembed
    assert sqlstate_of(admin, statements[3]) == "AM031"  # switch_default_model: not yet
    make_worker(embedder="lexical").run(once=True)
    for statement in statements[2:]:
        admin.execute(statement)
    assert count(admin, "message_embeddings", "model = 'nomic-embed-text'") == 0
    assert count(admin, "message_embeddings", "model = 'mxbai-embed-large'") == 1


def test_a_job_whose_row_expires_goes_with_it(app, admin):
    cid = _conversation(app)
    app.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => 'old', "
                "embedding => null)", (cid,))
    app.execute("select agentmem.set_retention_policy(kind => 'messages', max_age => '1 day')")
    admin.execute("update agentmem.messages set created_at = now() - interval '2 days'")
    assert count(admin, "embedding_jobs") == 1
    admin.execute("select * from agentmem.apply_retention()")
    assert count(admin, "messages") == 0 and count(admin, "embedding_jobs") == 0


def test_the_worker_command_as_the_application_role_says_what_is_missing(app_url):
    out = subprocess.run([sys.executable, "-m", "agentmem.cli", "worker", "--database-url", app_url, "--once"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "42501" in out.stderr and "grant agentmem_worker" in out.stderr


# -- a correction and the old text's job (issue 37, item 1) --------------------------------------

@pytest.mark.parametrize("claimed", ["before", "after"])
def test_a_corrected_fact_never_gets_the_vector_of_the_text_it_corrected(app, admin, worker_url, claimed):
    """upsert_fact without a vector queues a job for its text; update_fact corrects the text (with its
    vector). Whether the worker claimed the job before the correction or comes after it, the old text's
    vector never lands: the held job completes as gone, and no job of the old text is left to claim."""
    fact_id = app.execute("select fact_id from agentmem.upsert_fact(user_id => 'u1', subject => 'diet', "
                          "fact => 'is vegetarian', embedding => null)").fetchone()[0]
    old_vector, new_vector = vec(DOC + "is vegetarian"), vec("eats fish")
    with psycopg.connect(worker_url, autocommit=True) as w:
        register_vector(w)
        if claimed == "before":
            jobs = w.execute("select * from agentmem.claim_embedding_jobs()").fetchall()
            assert [j[4] for j in jobs] == [DOC + "is vegetarian"]
        app.execute("select agentmem.update_fact(fact_id => %s, fact => 'eats fish', embedding => %s)",
                    (fact_id, new_vector))
        if claimed == "after":
            jobs = w.execute("select * from agentmem.claim_embedding_jobs()").fetchall()
            assert jobs == []
        else:
            out = w.execute("select * from agentmem.complete_embedding_jobs(lease_token => %s, tenant_ids => %s, "
                            "job_ids => %s, embeddings => %s)",
                            (jobs[0][6], [jobs[0][0]], [jobs[0][1]], [old_vector])).fetchall()
            assert out == [(jobs[0][1], "gone")]
    assert count(admin, "embedding_jobs") == 0
    stored = admin.execute("select fact, embedding <=> %s, embedding <=> %s from agentmem.facts where fact_id = %s",
                           (new_vector, old_vector, fact_id)).fetchone()
    assert stored[0] == "eats fish" and stored[1] < 1e-6 and stored[2] > 1e-3
    # found by the meaning of the correction, not by the meaning of what it replaced
    hits = app.execute("select fact, similarity from agentmem.recall_facts(user_id => 'u1', query_embedding => %s)",
                       (old_vector,)).fetchall()
    assert all(h[1] < 0.999 for h in hits) and [h[0] for h in hits] == ["eats fish"]


def test_a_correction_during_a_reembedding_queues_the_new_text_in_the_new_model(app, admin, worker_url):
    """A fact's job in a model the tenant is being re-embedded into carries its text: a correction queues
    it again with the new text (the worker holding the old one is told gone)."""
    fact_id = app.execute("select fact_id from agentmem.upsert_fact(user_id => 'u1', subject => 'diet', "
                          "fact => 'is vegetarian', embedding => %s)", (vec("is vegetarian"),)).fetchone()[0]
    admin.execute("select * from agentmem.reembed(model => 'all-minilm', tenant_id => 'acme')")
    with psycopg.connect(worker_url, autocommit=True) as w:
        register_vector(w)
        jobs = [j for j in w.execute("select * from agentmem.claim_embedding_jobs(model => 'all-minilm')").fetchall()
                if j[4].endswith("is vegetarian")]
        assert len(jobs) == 1
        app.execute("select agentmem.update_fact(fact_id => %s, fact => 'eats fish', embedding => %s)",
                    (fact_id, vec("eats fish")))
        out = w.execute("select * from agentmem.complete_embedding_jobs(lease_token => %s, tenant_ids => %s, "
                        "job_ids => %s, embeddings => %s)",
                        (jobs[0][6], [jobs[0][0]], [jobs[0][1]], [vec("is vegetarian", 384)])).fetchall()
        assert out == [(jobs[0][1], "gone")]
        again = w.execute("select input from agentmem.claim_embedding_jobs(model => 'all-minilm')").fetchall()
        assert [a[0] for a in again if "fish" in a[0] or "vegetarian" in a[0]] == [jobs[0][4].replace(
            "is vegetarian", "eats fish")]


# -- the claim and the lease (issue 37, tests that catch what they claim) -----------------------

def test_a_claim_while_another_workers_claim_is_open_gets_other_jobs_at_once(app, admin, worker_url, server):
    """Worker A's claim is still open (its transaction not committed): worker B's claim neither waits for
    A's rows nor fails, and gets the other jobs (FOR UPDATE SKIP LOCKED)."""
    if server.name == "citus":
        pytest.skip("on Citus SKIP LOCKED does not spare a second claim of the same tenant's shard: it waits "
                    "for the first claim's open transaction and, past the claim's lock timeout, fails")
    cid = _conversation(app)
    app.execute("select agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                "embeddings => %s)", (cid, ["user"] * 4, [f"text {i}" for i in range(4)], [None] * 4))
    with psycopg.connect(worker_url) as a, psycopg.connect(worker_url, autocommit=True) as b:
        mine = a.execute("select job_id from agentmem.claim_embedding_jobs(batch_size => 2)").fetchall()
        assert len(mine) == 2  # A's transaction is open: its two rows stay locked
        b.execute("set lock_timeout = '2s'")
        started = time.monotonic()
        theirs = b.execute("select job_id from agentmem.claim_embedding_jobs(batch_size => 10)").fetchall()
        assert time.monotonic() - started < 1.5
        assert len(theirs) == 2 and not set(theirs) & set(mine)
        a.rollback()


def test_a_completion_with_a_superseded_lease_token_stores_nothing(app, admin, worker_url):
    """A's lease expired and B claimed the job again: A's completion (its token superseded) is gone and
    stores nothing; B's lands."""
    cid = _conversation(app)
    app.execute("select agentmem.store_message(conversation_id => %s, role => 'user', content => 'late', "
                "embedding => null)", (cid,))
    with psycopg.connect(worker_url, autocommit=True) as a, psycopg.connect(worker_url, autocommit=True) as b:
        register_vector(a)
        register_vector(b)
        first = a.execute("select * from agentmem.claim_embedding_jobs(lease => '1 second')").fetchall()
        assert len(first) == 1
        admin.execute("update agentmem.embedding_jobs set lease_until = now() - interval '1 second'")
        second = b.execute("select * from agentmem.claim_embedding_jobs()").fetchall()
        assert [s[1] for s in second] == [first[0][1]] and second[0][6] != first[0][6]
        wrong = vec("something else")
        out = a.execute("select * from agentmem.complete_embedding_jobs(lease_token => %s, tenant_ids => %s, "
                        "job_ids => %s, embeddings => %s)",
                        (first[0][6], [first[0][0]], [first[0][1]], [wrong])).fetchall()
        assert out == [(first[0][1], "gone")]
        assert count(admin, "message_embeddings") == 0 and count(admin, "embedding_cache") == 0
        out = b.execute("select * from agentmem.complete_embedding_jobs(lease_token => %s, tenant_ids => %s, "
                        "job_ids => %s, embeddings => %s)",
                        (second[0][6], [second[0][0]], [second[0][1]], [vec(DOC + "late")])).fetchall()
        assert out == [(second[0][1], "embedded")]
        assert count(admin, "message_embeddings") == 1 and count(admin, "embedding_jobs") == 0


def test_a_listening_application_login_never_hears_of_another_tenants_write(app, admin, connect, app_url):
    """Any login may LISTEN on any channel: an application login listening on the queue's channel hears
    nothing when a tenant stores text without a vector (it heard every such write, with the model)."""
    ear = connect(app_url)
    ear.execute("listen agentmem_embedding_jobs")
    globex = connect(app_url, tenant="globex")
    cid = _conversation(globex)
    globex.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', "
                   "content => 'a secret', embedding => null)", (cid,))
    globex.execute("select * from agentmem.upsert_fact(user_id => 'u1', subject => 's', fact => 'a secret fact', "
                   "embedding => null)")
    globex.execute("select * from agentmem.cache_store(question => 'a secret question?', question_embedding => null, "
                   "answer => 'x')")
    assert count(admin, "embedding_jobs", "tenant_id = 'globex'") == 3
    assert list(ear.notifies(timeout=1.0, stop_after=1)) == []
