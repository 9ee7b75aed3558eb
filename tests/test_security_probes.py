"""Security probes: a hostile tenant, hostile inputs, and kill -9 during writes (marker ``slow``).

    make test-slow                          # or: pytest -q -m slow tests/test_security_probes.py

Deselected by default (tests/conftest.py); CI runs them after the embedded leg. They start their
own embedded PostgreSQL (durable settings: fsync, full_page_writes and synchronous_commit on, the
dev server's default; data under pytest's tmp_path, a free port), whatever ``--server`` says, since
the fault runs kill it. The database is migrated fresh and every call goes through an application
login (a member of agentmem_app: no superuser, no BYPASSRLS); the superuser only reads, to check
what was really written.

1. Cross-tenant probes: tenant "victim" holds conversations, messages, facts, cached answers,
   hit-log rows and embedding-cache rows. Tenant "attacker", on a login of its own granted that
   tenant only, with the victim's ids, texts and exact vectors, calls every function that reads or
   writes by id, text or vector, and tries plain SQL on the tables and internals. A leak is any
   victim row returned, or any change to the victim's rows (a checksum of every table, per tenant,
   before and after).
2. Hostile inputs: each raises its agentmem SQLSTATE and leaves every table as it was (an md5 of
   every table's rows, where tests/test_hostile.py compares row counts). The CPU-exhaustion cases
   run to the end inside the application role's statement_timeout.
3. Tenant binding: every way of acting as the victim from the attacker's login, under binding modes
   role and jwt; and the heaviest calls within the documented limits finish inside the
   statement_timeout.
4. Fault runs: writers store messages, facts and cached answers through the API; the postmaster and
   every backend get SIGKILL mid-write; the server restarts; checked: every acknowledged commit is
   present, message indexes are gap-free with next_index, no embedding without its message or
   message without its embedding; the driver (Memory, timeout 3 s) raises ConnectionLost while the
   server is down and works on the first call after the restart.

The figures (probe counts, the CPU cases' and heaviest calls' seconds, each fault run) are printed:
``-s`` shows them. bench/results/security.md is a dated record of one run; what the tenant binding
costs per call is measured by bench/probes/probe_binding_cost.py.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

import agentmem
from agentmem_dev import devserver
from agentmem.client import Memory
from agentmem.migrate import Migrator, Source
from helpers import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
MODEL = "all-minilm"
DIM = 384
DBNAME = "agentmem_security_probes"
APP_ROLE = "agentmem_security_probes_app"
ATTACKER_ROLE = "agentmem_security_probes_attacker"  # a login of its own, granted the tenant "attacker" only
VICTIM_USERS = 8
FAULT_RUNS = 5
FAULT_SECONDS = 3.0


def rand_vec(rng) -> np.ndarray:
    v = rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def connect(url: str, tenant: str | None = None) -> psycopg.Connection:
    conn = psycopg.connect(url, autocommit=True, connect_timeout=5)
    register_vector(conn)
    if tenant:
        conn.execute("select agentmem.set_tenant(tenant_id => %s)", (tenant,))
    return conn


def checksums(admin) -> dict[str, str]:
    """md5 of every agentmem table's rows, per table (the superuser sees every tenant)."""
    tables = [r[0] for r in admin.execute(
        "select relname from pg_class where relnamespace = 'agentmem'::regnamespace and relkind = 'r' "
        "order by 1").fetchall()]
    return {t: admin.execute(f"select md5(coalesce(string_agg(x::text, '|' order by x::text), '')) "
                             f"from agentmem.{t} as x").fetchone()[0] for t in tables}


def victim_checksums(admin) -> dict[str, str]:
    tables = [r[0] for r in admin.execute(
        "select c.relname from pg_class as c where c.relnamespace = 'agentmem'::regnamespace and c.relkind = 'r' "
        "and exists (select from pg_attribute as a where a.attrelid = c.oid and a.attname = 'tenant_id') "
        "order by 1").fetchall()]
    return {t: admin.execute(f"select md5(coalesce(string_agg(x::text, '|' order by x::text), '')) "
                             f"from agentmem.{t} as x where x.tenant_id = 'victim'").fetchone()[0] for t in tables}


# -- 1. cross-tenant probes -------------------------------------------------------------------

def seed_victim(app_url, rng, n_users):
    v = connect(app_url, "victim")
    data = {"users": [], "convs": [], "msgs": [], "texts": [], "vecs": [], "facts": [], "questions": [],
            "hits": [], "entries": []}
    for u in range(n_users):
        user = f"victim-user-{u}"
        cid = v.execute("select agentmem.start_conversation(user_id => %s, title => 'secret')", (user,)).fetchone()[0]
        data["users"].append(user)
        data["convs"].append(cid)
        for i in range(3):
            text, vec = f"victim secret {u}-{i}: the vault code is {rng.integers(1e6)}", rand_vec(rng)
            mid = v.execute("select message_id from agentmem.store_message(conversation_id => %s, role => 'user', "
                            "content => %s, embedding => %s, model => %s)", (cid, text, vec, MODEL)).fetchone()[0]
            data["msgs"].append(mid)
            data["texts"].append(text)
            data["vecs"].append(vec)
        v.execute("select agentmem.set_summary(conversation_id => %s, summary => 'secret summary', "
                  "through_index => 2)", (cid,))
        fid = v.execute("select fact_id from agentmem.upsert_fact(user_id => %s, subject => 'vault', "
                        "fact => 'The vault code is 1234', embedding => %s, model => %s, "
                        "source_message_ids => array[%s::uuid])", (user, data["vecs"][-1], MODEL, mid)).fetchone()[0]
        data["facts"].append(fid)
        q = f"What is the vault code of user {u}?"
        eid = v.execute("select entry_id from agentmem.cache_store(question => %s, question_embedding => %s, "
                        "answer => 'It is 1234.', source_ids => array['doc-victim'], model => %s, user_id => %s, "
                        "safe_to_share => true)", (q, data["vecs"][-1], MODEL, user)).fetchone()[0]
        data["entries"].append(eid)
        data["questions"].append(q)
        hid = v.execute("select hit_id from agentmem.cache_lookup(question => %s, question_embedding => %s, "
                        "model => %s, user_id => %s)", (q, data["vecs"][-1], MODEL, user)).fetchone()[0]
        data["hits"].append(hid)
        v.execute("select agentmem.embedding_cache_store(model => %s, texts => array[%s], embeddings => array[%s])",
                  (MODEL, data["texts"][-1], data["vecs"][-1]))
    v.close()
    return data


def cross_tenant_probes(app_url, admin, data) -> dict:
    a = connect(app_url, "attacker")  # the attacker's own login (ATTACKER_ROLE), bound to its tenant
    probes = leaks = 0
    notes: list[str] = []
    before = victim_checksums(admin)
    secret_texts = set(data["texts"]) | set(data["questions"]) | {"secret summary", "It is 1234.",
                                                                "The vault code is 1234"}

    def probe(label, query, params=None):
        nonlocal probes, leaks
        probes += 1
        try:
            with a.transaction():
                rows = a.execute(query, params).fetchall() if a.execute else []
        except psycopg.Error:
            return  # refused: no leak
        flat = repr(rows)
        if any(s in flat for s in secret_texts) or any(str(x) in flat for x in data["msgs"] + data["facts"]
                                                          + data["entries"] + data["hits"]):
            leaks += 1
            notes.append(f"{label}: {flat[:120]}")

    for u, user in enumerate(data["users"]):
        cid = data["convs"][u]
        for i in range(3):
            k = 3 * u + i
            mid, vec, text = data["msgs"][k], data["vecs"][k], data["texts"][k]
            probe("search_messages", "select * from agentmem.search_messages(user_id => %s, query_embedding => %s, "
                  "model => %s)", (user, vec, MODEL))
            probe("search_with_context", "select * from agentmem.search_with_context(user_id => %s, "
                  "query_embedding => %s, model => %s)", (user, vec, MODEL))
            probe("context_window", "select * from agentmem.context_window(message_id => %s)", (mid,))
            probe("embedding_cache_lookup", "select * from agentmem.embedding_cache_lookup(model => %s, "
                  "texts => array[%s]) where embedding is not null", (MODEL, text))
            probe("store_messages into victim conversation", "select * from agentmem.store_message("
                  "conversation_id => %s, role => 'user', content => 'x', embedding => %s, model => %s)",
                  (cid, vec, MODEL))
            probe("recall_facts", "select * from agentmem.recall_facts(user_id => %s, query_embedding => %s, "
                  "model => %s)", (user, vec, MODEL))
            probe("cache_lookup by vector", "select * from agentmem.cache_lookup(question => %s, "
                  "question_embedding => %s, model => %s) where hit", ("vault code?", vec, MODEL))
            probe("plain select on messages", "select content from agentmem.messages where message_id = %s", (mid,))
            probe("plain update on messages", "update agentmem.messages set content = 'x' where message_id = %s "
                  "returning content", (mid,))
        probe("recent_messages", "select * from agentmem.recent_messages(conversation_id => %s)", (cid,))
        probe("short_term_context", "select * from agentmem.short_term_context(conversation_id => %s)", (cid,))
        probe("set_summary", "select agentmem.set_summary(conversation_id => %s, summary => 'x', "
              "through_index => 0)", (cid,))
        probe("forget_conversation", "select * from agentmem.forget_conversation(conversation_id => %s)", (cid,))
        probe("forget_user", "select * from agentmem.forget_user(user_id => %s)", (user,))
        probe("fact_history", "select * from agentmem.fact_history(fact_id => %s)", (data["facts"][u],))
        probe("cache_lookup exact", "select * from agentmem.cache_lookup(question => %s, question_embedding => %s, "
              "model => %s) where hit", (data["questions"][u], data["vecs"][3 * u + 2], MODEL))
        probe("review_hit", "select agentmem.review_hit(hit_id => %s, correct => false)", (data["hits"][u],))
        probe("invalidate_source", "select agentmem.invalidate_source(doc_id => 'doc-victim') where false", None)
        probe("sample_hits", "select * from agentmem.sample_hits(min_similarity => -1)")
        probe("cache_report", "select * from agentmem.cache_report(cost_uncached => 1, cost_wrong => 1) "
              "where queries > 0")
        probe("corpus_version", "select agentmem.corpus_version() where agentmem.corpus_version() <> 0")
        for table in ("conversations", "messages", "message_embeddings", "facts", "fact_history", "cache_entries",
                      "cache_hits", "embedding_cache", "erasure_log", "models", "cache_intents",
                      "corpus_versions", "retention_policies"):
            probe(f"select from {table}", f"select * from agentmem.{table}")
        probe("set_config tenant", "select set_config('agentmem.tenant_id', 'victim', true), "
              "* from agentmem.recent_messages(conversation_id => %s)", (cid,))
        probe("set_config malformed tenant", "select set_config('agentmem.tenant_id', E' victim\\n', true), "
              "agentmem.start_conversation(user_id => 'x')")
        probe("internal helper", "select agentmem_private.forget_text_hashes('victim', array[%s])", (data["texts"][0],))
        probe("lock table", "lock table agentmem.messages in access exclusive mode")
        probe("DBA function", "select agentmem.apply_retention()")
        probe("register_model", "select agentmem.register_model(model => 'evil', dimension => 3)")
    a.close()
    changed = [t for t, h in victim_checksums(admin).items() if before[t] != h]
    if changed:
        leaks += 1
        notes.append(f"victim rows changed in {changed}")
    return {"probes": probes, "leaks": leaks, "notes": notes}


# -- 2. hostile inputs ------------------------------------------------------------------------

def export_lines(user: str, messages, vector, occurred_at: str = "2026-01-01T00:00:00+00:00") -> list[str]:
    """A user's export of one conversation holding `messages` ((content, metadata) pairs, each with `vector`),
    as export_user writes it."""
    cid, now = str(uuid.uuid4()), "2026-01-01T00:00:00+00:00"
    emb = "[" + ",".join(f"{x:.6f}" for x in vector) + "]"
    lines = [json.dumps({"type": "header", "format": "agentmem-export", "format_version": 1, "scope": "user",
                         "tenant_id": "x", "user_id": user}),
             json.dumps({"type": "conversation", "conversation_id": cid, "user_id": user, "metadata": {},
                         "next_index": len(messages), "created_at": now, "updated_at": now})]
    for i, (content, metadata) in enumerate(messages):
        lines.append(json.dumps({"type": "message", "message_id": str(uuid.uuid4()), "conversation_id": cid,
                                 "user_id": user, "message_index": i, "role": "user", "content": content,
                                 "metadata": metadata, "created_at": now, "occurred_at": occurred_at,
                                 "embeddings": [{"model": MODEL, "embedding": emb, "created_at": now}]}))
    lines.append(json.dumps({"type": "end", "rows": len(lines) - 1}))
    return lines


def hostile_inputs(app_url, admin, rng) -> dict:
    conn = connect(app_url, "hostile")
    good = rand_vec(rng)
    cid = conn.execute("select agentmem.start_conversation(user_id => 'h')").fetchone()[0]
    conn.execute("select agentmem.store_message(conversation_id => %s, role => 'user', content => 'x', "
                 "embedding => %s, model => %s)", (cid, good, MODEL))
    degenerate = {"1e-30 components": np.full(DIM, 1e-30, np.float32),
                  "1e38 components": np.full(DIM, 1e38, np.float32),
                  "subnormal norm": np.full(DIM, 1e-21, np.float32),
                  "zero vector": np.zeros(DIM, np.float32),
                  "wrong dimension": np.ones(DIM - 1, np.float32)}
    vector_calls = {
        "store_message": "select agentmem.store_message(conversation_id => %(cid)s, role => 'user', "
                         "content => 'hi', embedding => %(v)s, model => 'all-minilm')",
        "store_messages": "select agentmem.store_messages(conversation_id => %(cid)s, roles => '{user}', "
                          "contents => '{hi}', embeddings => array[%(v)s::vector], model => 'all-minilm')",
        "search_messages": "select * from agentmem.search_messages(user_id => 'h', query_embedding => %(v)s, "
                           "model => 'all-minilm')",
        "search_with_context": "select * from agentmem.search_with_context(user_id => 'h', "
                               "query_embedding => %(v)s, model => 'all-minilm')",
        "upsert_fact": "select * from agentmem.upsert_fact(user_id => 'h', subject => 's', fact => 'f', "
                       "embedding => %(v)s, model => 'all-minilm')",
        "recall_facts": "select * from agentmem.recall_facts(user_id => 'h', query_embedding => %(v)s, "
                        "model => 'all-minilm')",
        "cache_store": "select * from agentmem.cache_store(question => 'q?', question_embedding => %(v)s, "
                       "answer => 'a', model => 'all-minilm')",
        "cache_lookup": "select * from agentmem.cache_lookup(question => 'q?', question_embedding => %(v)s, "
                        "model => 'all-minilm')",
        "embedding_cache_store": "select agentmem.embedding_cache_store(model => 'all-minilm', texts => '{hi}', "
                                 "embeddings => array[%(v)s::vector])",
    }
    cases: list[tuple[str, str, object, str]] = []
    for fn, q in vector_calls.items():
        for kind, v in degenerate.items():
            cases.append((f"{fn}: {kind}", q, {"cid": cid, "v": v}, "AM010"))
    blank = "\t\n\r\f\v "
    g = good
    cases += [
        ("content blank", "select agentmem.store_message(conversation_id => %s, role => 'user', content => %s, "
         "embedding => %s, model => 'all-minilm')", (cid, blank, g), "AM020"),
        ("summary blank", "select agentmem.set_summary(conversation_id => %s, summary => %s, through_index => 0)",
         (cid, blank), "AM020"),
        ("fact blank", "select agentmem.upsert_fact(user_id => 'h', subject => 's', fact => %s, embedding => %s, "
         "model => 'all-minilm')", (blank, g), "AM020"),
        ("subject blank", "select agentmem.upsert_fact(user_id => 'h', subject => %s, fact => 'f', "
         "embedding => %s, model => 'all-minilm')", (blank, g), "AM020"),
        ("answer blank", "select agentmem.cache_store(question => 'q?', question_embedding => %s, answer => %s, "
         "model => 'all-minilm')", (g, blank), "AM020"),
        ("answer 50 MB", "select agentmem.cache_store(question => 'q?', question_embedding => %s, answer => %s, "
         "model => 'all-minilm')", (g, "a" * 50_000_000), "AM021"),
        ("forget_user tab newline", "select agentmem.forget_user(user_id => %s)", ("\t\n",), "AM020"),
        ("cache_store user_id 300 chars", "select agentmem.cache_store(question => 'q?', question_embedding => %s, "
         "answer => 'a', model => 'all-minilm', user_id => %s)", (g, "u" * 300), "AM020"),
        ("cache_lookup user_id blank", "select agentmem.cache_lookup(question => 'q?', question_embedding => %s, "
         "model => 'all-minilm', user_id => %s)", (g, "  "), "AM020"),
        ("metadata [0:1] smuggle", "select agentmem.store_messages(conversation_id => %s, roles => '{user,user}', "
         "contents => '{a,b}', embeddings => array[%s::vector, %s::vector], model => 'all-minilm', "
         "metadata => '[0:1]={\"[1,2]\",\"{}\"}'::jsonb[])", (cid, g, g), "AM020"),
        ("metadata 300k via lower bound 0", "select agentmem.store_messages(conversation_id => %s, "
         "roles => '[0:0]={user}', contents => '[0:0]={a}', embeddings => array[%s::vector], "
         "model => 'all-minilm')", (cid, g), "AM020"),
        ("2-D roles", "select agentmem.store_messages(conversation_id => %s, roles => '{{user}}', "
         "contents => '{{a}}', embeddings => array[%s::vector], model => 'all-minilm')", (cid, g), "AM020"),
        ("texts lower bound 2", "select agentmem.embedding_cache_lookup(model => 'all-minilm', "
         "texts => '[2:2]={a}')", None, "AM020"),
        ("source_ids lower bound 0", "select agentmem.cache_store(question => 'q?', question_embedding => %s, "
         "answer => 'a', source_ids => '[0:0]={d}', model => 'all-minilm')", (g,), "AM020"),
        ("metadata 5000 deep", "select agentmem.start_conversation(user_id => 'h', metadata => %s::jsonb)",
         ('{"a":' * 4999 + "{}" + "}" * 4999,), "AM020"),
        ("metadata 33 deep", "select agentmem.start_conversation(user_id => 'h', metadata => %s::jsonb)",
         ('{"a":' * 32 + "{}" + "}" * 32,), "AM020"),
        ("sample_hits NaN", "select * from agentmem.sample_hits(min_similarity => 'NaN')", None, "AM020"),
        ("sample_hits 5", "select * from agentmem.sample_hits(min_similarity => 5)", None, "AM020"),
        ("cache_report NaN cost", "select * from agentmem.cache_report(cost_uncached => 'NaN', cost_wrong => 1)",
         None, "AM020"),
        ("cache_report infinite cost", "select * from agentmem.cache_report(cost_uncached => 1, "
         "cost_wrong => 'Infinity')", None, "AM020"),
        ("cache_report {NaN}", "select * from agentmem.cache_report(cost_uncached => 1, cost_wrong => 1, "
         "thresholds => '{NaN}')", None, "AM020"),
        ("cache_report {2,-1}", "select * from agentmem.cache_report(cost_uncached => 1, cost_wrong => 1, "
         "thresholds => '{2,-1}')", None, "AM020"),
        ("cache_report since NULL", "select * from agentmem.cache_report(cost_uncached => 1, cost_wrong => 1, "
         "since => null)", None, "AM020"),
        ("question_guard_features 20 MB", "select agentmem.question_guard_features(question => %s)",
         ("how many " * 2_300_000,), "AM021"),
        ("normalize_question over 4 MiB", "select agentmem.normalize_question(question => %s)",
         ("q" * 4_194_305,), "AM021"),
        ("set_config malformed tenant", "select set_config('agentmem.tenant_id', E' evil\\nten''ant ', false), "
         "agentmem.start_conversation(user_id => 'x')", None, "AM002"),
        ("store_messages 10,000 messages", "select agentmem.store_messages(conversation_id => %s, roles => %s, "
         "contents => %s, embeddings => null, model => 'all-minilm')", (cid, ["user"] * 10_000, ["x" * 1000] * 10_000),
         "AM020"),
        ("store_messages 100 x 100,000 characters", "select agentmem.store_messages(conversation_id => %s, "
         "roles => %s, contents => %s, embeddings => null, model => 'all-minilm')",
         (cid, ["user"] * 101, ["x" * 100_000] * 101), "AM021"),
        ("import_user 17 lines of 1 MiB", "select agentmem.import_user(lines => %s::text[])",
         (export_lines("h", [("x" * 1_048_000, {})] * 17, good),), "AM021"),
        ("import_user content over 100,000", "select agentmem.import_user(lines => %s::text[])",
         (export_lines("h", [("x" * 100_001, {})], good),), "AM021"),
        ("import_user occurred_at 2999", "select agentmem.import_user(lines => %s::text[])",
         (export_lines("h", [("hi", {})], good, occurred_at="2999-01-01T00:00:00+00:00"),), "AM020"),
    ]
    refused = 0
    failures: list[str] = []
    for label, query, params, sqlstate in cases:
        before = checksums(admin)
        got = None
        try:
            conn.execute(query, params)
        except psycopg.Error as exc:
            got = exc.sqlstate
        conn.execute("select agentmem.set_tenant(tenant_id => 'hostile')")
        clean = got == sqlstate and checksums(admin) == before
        refused += clean
        if not clean:
            failures.append(f"{label}: got {got}, expected {sqlstate}")

    # CPU-exhaustion cases, timed: they finish inside the application role's statement_timeout
    timings = []
    names = " ".join(f"x Nm{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{chr(97 + i // 676 % 26)}"
                     for i in range(10000))
    for label, query, params in [
        ("cache_store: 10,000 names in the answer, 1 MB question",
         "select stored from agentmem.cache_store(question => %s, question_embedding => %s, answer => %s, "
         "model => 'all-minilm')", ("what " * 200_000, g, names[:100_000])),
        ("cache_lookup: 4 MiB question, after 5 cached 4 MiB questions",
         "select hit from agentmem.cache_lookup(question => %s, question_embedding => %s, model => 'all-minilm')",
         ("why " * 1_048_000, g)),
        ("question_guard_features: 16 kB (the limit)",
         "select agentmem.question_guard_features(question => %s)", (("not twenty 5 " * 2000)[:16384],)),
    ]:
        if label.startswith("cache_lookup"):
            for i in range(5):
                conn.execute("select agentmem.cache_store(question => %s, question_embedding => %s, "
                             "answer => 'a', model => 'all-minilm', safe_to_share => true)",
                             (f"{i} " + "how " * 1_048_000, g))
        t0 = time.perf_counter()
        conn.execute(query, params)
        timings.append((label, time.perf_counter() - t0))
    conn.close()
    return {"tried": len(cases), "refused": refused, "failures": failures, "timings": timings}


# -- 3. tenant binding and the heaviest calls --------------------------------------------------

def binding_probes(attacker_url, admin, data) -> dict:
    """Every way of acting as the victim from the attacker's login (granted the tenant "attacker" only),
    each followed by reads and writes of the victim's rows: a leak is a row returned or a change."""
    a = psycopg.connect(attacker_url, autocommit=True)
    register_vector(a)
    before = victim_checksums(admin)
    probes = leaks = 0
    notes: list[str] = []
    cid, mid, vec = data["convs"][0], data["msgs"][0], data["vecs"][0]
    reads = [
        ("recent_messages", "select content from agentmem.recent_messages(conversation_id => %s)", (cid,)),
        ("search_messages", "select content from agentmem.search_messages(user_id => %s, query_embedding => %s, "
         "model => %s)", (data["users"][0], vec, MODEL)),
        ("context_window", "select content from agentmem.context_window(message_id => %s)", (mid,)),
        ("store_message", "select message_id from agentmem.store_message(conversation_id => %s, role => 'user', "
         "content => 'x', embedding => %s, model => %s)", (cid, vec, MODEL)),
        ("forget_conversation", "select * from agentmem.forget_conversation(conversation_id => %s)", (cid,)),
    ]
    forged = json.dumps({"tenant_id": "victim", "app_metadata": {"tenant_id": "victim"}})
    routes = [
        ("set_tenant", ["select agentmem.set_tenant(tenant_id => 'victim')"]),
        ("set_tenant local", ["select agentmem.set_tenant(tenant_id => 'victim', local => true)"]),
        ("set_config session", ["select set_config('agentmem.tenant_id', 'victim', false)"]),
        ("set_config local", ["select set_config('agentmem.tenant_id', 'victim', true)"]),
        ("SET", ["set agentmem.tenant_id = 'victim'"]),
        ("SET LOCAL", ["set local agentmem.tenant_id = 'victim'"]),
        ("SET ROLE agentmem_app then SET", ["set local role agentmem_app", "set local agentmem.tenant_id = 'victim'"]),
        ("forged request.jwt.claims then SET", [f"select set_config('request.jwt.claims', '{forged}', true)",
                                                 "set local agentmem.tenant_id = 'victim'"]),
        ("propagated marker then SET", ["set local agentmem.tenant_propagated = 'victim'",
                                        "set local agentmem.tenant_id = 'victim'"]),
    ] + [(f"lookalike victim+U+{ord(c):04X}", [f"select set_config('agentmem.tenant_id', 'victim{c}', true)"])
         for c in "\u00a0\u3000\u2028\u2003\u200b\ufeff"]
    for mode in ("role", "jwt"):
        admin.execute("select agentmem.set_tenant_binding(mode => %s, jwt_claim => 'tenant_id')", (mode,))
        for label, setup in routes:
            for what, query, params in reads:
                probes += 1
                try:
                    with a.transaction():
                        for stmt in setup:
                            a.execute(stmt)
                        rows = a.execute(query, params).fetchall()
                except psycopg.Error:
                    continue  # refused
                if rows and "victim secret" in repr(rows) or what in ("store_message", "forget_conversation"):
                    leaks += 1
                    notes.append(f"binding {mode}: {label} then {what}: {repr(rows)[:100]}")
            a.execute("reset agentmem.tenant_id")
    admin.execute("select agentmem.set_tenant_binding(mode => 'role')")
    a.close()
    if victim_checksums(admin) != before:
        leaks += 1
        notes.append("binding probes: the victim's rows changed")
    return {"probes": probes, "leaks": leaks, "notes": notes}


def worst_calls(admin, app_url) -> list[tuple[str, float]]:
    """The heaviest calls known, under custom and generic plans (a pooled connection's): unseen_docs over 100 turns x 1,000 recorded ids of 909 characters (the documented
    limits allow 1,000 turns), and cache_report with 1,000 thresholds over a 50,000-row hit log; the largest
    store_messages calls and import_user call the limits allow (docs/limits.md)."""
    out = []
    admin.execute("select agentmem.set_tenant(tenant_id => 'heavy')")
    cid = admin.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    admin.execute("reset agentmem.tenant_id")
    admin.execute("insert into agentmem.messages (tenant_id, conversation_id, user_id, message_index, role, content) "
                  "select 'heavy', %s, 'u1', i, 'user', 'turn ' || i from generate_series(0, 99) as i", (cid,))
    admin.execute("update agentmem.conversations set next_index = 100 where tenant_id = 'heavy'")
    admin.execute("insert into agentmem.retrievals (tenant_id, message_id, conversation_id, message_index, doc_ids) "
                  "select m.tenant_id, m.message_id, m.conversation_id, m.message_index, "
                  "array(select lpad((m.message_index * 1000 + d)::text, 909, 'x') from generate_series(0, 999) as d) "
                  "from agentmem.messages as m where m.tenant_id = 'heavy'")
    admin.execute("insert into agentmem.cache_hits (tenant_id, kind, similarity, guard_passed, intent, question_asked, "
                  "reviewed_correct) select 'heavy', case when i % 10 = 0 then 'exact' else 'semantic' end, "
                  "(0.8 + (i % 200) / 1000.0)::real, true, 'default', 'q' || i, "
                  "case when i % 11 = 0 then i % 2 = 0 end from generate_series(1, 50000) as i")
    conn = connect(app_url, "heavy")
    asked = [str(99_000 + d).rjust(909, "x") for d in range(500)] + [f"new-{d}".rjust(909, "y") for d in range(500)]
    for plan in ("force_custom_plan", "force_generic_plan"):
        conn.execute(f"set plan_cache_mode = {plan}")
        secs = []
        for _ in range(7):
            t = time.perf_counter()
            conn.execute("select agentmem.unseen_docs(conversation_id => %s, doc_ids => %s, lookback => 1000)",
                         (cid, asked)).fetchone()
            secs.append(time.perf_counter() - t)
        out.append((f"unseen_docs, 100 turns x 1,000 ids of 909 chars, {plan.split('_')[1]} plan, "
                    "slowest of 7 calls", max(secs)))
    conn.execute("set plan_cache_mode = auto")
    thresholds = [round(0.8 + i / 5000, 4) for i in range(1000)]
    for label, th in (("cache_report, 15 default thresholds, 50,000 logged lookups", None),
                      ("cache_report, 1,000 thresholds, 50,000 logged lookups", thresholds)):
        t = time.perf_counter()
        conn.execute("select count(*) from agentmem.cache_report(cost_uncached => 1, cost_wrong => 10, "
                     "thresholds => %s::real[])", (th,)).fetchone()
        out.append((label, time.perf_counter() - t))
    # The largest writes the limits allow (docs/limits.md), each its own conversation
    rng = np.random.default_rng(3)
    meta = {"leaf": "m" * 72_600}
    for _ in range(31):
        meta = {"l": meta}   # 32 levels, about 73 KB
    per_message = 100_000 + len(json.dumps(meta))
    max_n, max_chars = admin.execute("select agentmem_private.store_messages_max(), "
                                    "agentmem_private.store_messages_max_chars()").fetchone()
    for label, n, contents, metadata in (
            (f"store_messages: {max_n:,} messages of 1,000 characters with vectors", max_n, ["y" * 1000] * max_n, None),
            (f"store_messages: {max_chars // per_message} messages of 100,000 characters (one word), 73 KB metadata "
             "nested 32 levels", max_chars // per_message, ["y" * 100_000] * (max_chars // per_message),
             [json.dumps(meta)] * (max_chars // per_message))):
        c = conn.execute("select agentmem.start_conversation(user_id => 'u2')").fetchone()[0]
        t = time.perf_counter()
        conn.execute("select count(*) from agentmem.store_messages(conversation_id => %s, roles => %s, "
                     "contents => %s, embeddings => %s, model => 'all-minilm', metadata => %s::jsonb[])",
                     (c, ["user"] * n, contents, [rand_vec(rng) for _ in range(n)], metadata))
        out.append((label, time.perf_counter() - t))
    limit = admin.execute("select agentmem_private.import_max_call_bytes()").fetchone()[0]
    one = export_lines("u3", [("z" * 100_000, {"k": "m" * 99_000})], rand_vec(rng))
    fits = (limit - 4000) // (len(one[2].encode()) + 1)
    lines = export_lines("u3", [("z" * 100_000, {"k": "m" * 99_000})] * fits, rand_vec(rng))
    t = time.perf_counter()
    conn.execute("select agentmem.import_user(lines => %s::text[])", (lines,))
    out.append((f"import_user: {len(lines)} lines, {sum(len(x.encode()) for x in lines) / 2 ** 20:.1f} MiB (a call's "
                "most)", time.perf_counter() - t))
    conn.execute("select agentmem.forget_user(user_id => 'u2')")
    conn.execute("select agentmem.forget_user(user_id => 'u3')")
    conn.close()
    # Gone again: its messages have no embeddings, which the fault runs would count as orphans.
    admin.execute("delete from agentmem.conversations where tenant_id = 'heavy'")
    admin.execute("delete from agentmem.cache_hits where tenant_id = 'heavy'")
    return out


# -- 4. fault runs ----------------------------------------------------------------------------

def kill_server(data: Path) -> None:
    """SIGKILL the postmaster and every backend at once (a crash, not a shutdown)."""
    pid = int((data / "postmaster.pid").read_text().splitlines()[0])
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry.name))
    for p in [pid] + children:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{p}").exists() and "zombie" not in Path(f"/proc/{p}/status").read_text()
              for p in [pid] + children if Path(f"/proc/{p}").exists()) and time.monotonic() < deadline:
        time.sleep(0.1)


def fault_run(app_url, admin_url, data: Path, port: int, run: int, rng, seconds: float) -> dict:
    acked_msgs: list[tuple] = []
    acked_facts: list[tuple] = []
    acked_entries: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()
    setup = connect(app_url, "faults")
    convs = [setup.execute("select agentmem.start_conversation(user_id => %s)", (f"w{run}-{i}",)).fetchone()[0]
             for i in range(4)]
    setup.close()

    def writer(i):
        try:
            conn = connect(app_url, "faults")
            n = 0
            while not stop.is_set():
                n += 1
                mid, idx = conn.execute(
                    "select message_id, message_index from agentmem.store_message(conversation_id => %s, "
                    "role => 'user', content => %s, embedding => %s, model => %s)",
                    (convs[i], f"run {run} writer {i} message {n}", rand_vec(np.random.default_rng(n)), MODEL)
                ).fetchone()
                with lock:
                    acked_msgs.append((convs[i], idx, mid))
                if n % 3 == 0:
                    fid = conn.execute("select fact_id from agentmem.upsert_fact(user_id => %s, subject => %s, "
                                       "fact => 'x', embedding => %s, model => %s)",
                                       (f"w{run}-{i}", f"s{n}", rand_vec(np.random.default_rng(n)),
                                        MODEL)).fetchone()[0]
                    with lock:
                        acked_facts.append(fid)
                if n % 5 == 0:
                    eid = conn.execute("select entry_id from agentmem.cache_store(question => %s, "
                                       "question_embedding => %s, answer => 'a', model => %s, "
                                       "safe_to_share => true)", (f"run {run} w{i} q{n}?",
                                                                  rand_vec(np.random.default_rng(n)),
                                                                  MODEL)).fetchone()[0]
                    with lock:
                        acked_entries.append(eid)
        except psycopg.Error:
            return  # the crash

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    mem = Memory.connect(app_url, tenant="faults", timeout=3)
    mem.recent_messages(convs[0], n=1)
    for t in threads:
        t.start()
    time.sleep(seconds)
    kill_server(data)
    stop.set()
    for t in threads:
        t.join(30)
    t0 = time.perf_counter()
    try:
        mem.recent_messages(convs[0], n=1)
        down_error = "none"
    except agentmem.ConnectionLost:
        down_error = "ConnectionLost"
    except Exception as exc:  # reported, not hidden
        down_error = type(exc).__name__
    down_wait = time.perf_counter() - t0
    devserver.start(data, port=port, fast=False)
    try:
        mem.recent_messages(convs[0], n=1)
        recovered = True
    except Exception as exc:  # reported in the table
        print(f"first call after restart: {exc!r}", flush=True)
        recovered = False
    mem.close()

    admin = connect(admin_url)
    missing_msgs = sum(1 for cid, idx, mid in acked_msgs if not admin.execute(
        "select 1 from agentmem.messages where conversation_id = %s and message_index = %s and message_id = %s",
        (cid, idx, mid)).fetchone())
    missing_facts = sum(1 for f in acked_facts if not admin.execute(
        "select 1 from agentmem.facts where fact_id = %s", (f,)).fetchone())
    missing_entries = sum(1 for e in acked_entries if not admin.execute(
        "select 1 from agentmem.cache_entries where entry_id = %s", (e,)).fetchone())
    gaps = admin.execute(
        "select count(*) from agentmem.conversations as c where c.next_index <> "
        "(select count(*) from agentmem.messages as m where m.tenant_id = c.tenant_id "
        " and m.conversation_id = c.conversation_id) or exists (select from agentmem.messages as m "
        " where m.tenant_id = c.tenant_id and m.conversation_id = c.conversation_id "
        " and m.message_index not between 0 and c.next_index - 1)").fetchone()[0]
    orphans = admin.execute(
        "select (select count(*) from agentmem.message_embeddings as e where not exists (select from "
        "agentmem.messages as m where m.tenant_id = e.tenant_id and m.message_id = e.message_id)) + "
        "(select count(*) from agentmem.messages as m where not exists (select from agentmem.message_embeddings "
        "as e where e.tenant_id = m.tenant_id and e.message_id = m.message_id))").fetchone()[0]
    admin.close()
    return {"acked": len(acked_msgs) + len(acked_facts) + len(acked_entries),
            "missing": missing_msgs + missing_facts + missing_entries, "gaps": gaps, "orphans": orphans,
            "down_error": down_error, "down_wait": down_wait, "recovered": recovered}




# -- the tests ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def probe_server(tmp_path_factory):
    """A durable embedded server of this module's own, a fresh migrated database, the application's
    and the attacker's logins; tenants bound to logins (a new installation's default)."""
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)  # the reconnection noise of the fault runs
    data = tmp_path_factory.mktemp("security") / "pg"
    base = devserver.start(data, port=free_port(), fast=False)  # durable: the fault runs need it
    try:
        port = int(base.rsplit(":", 1)[1].split("/")[0])
        with psycopg.connect(base, autocommit=True) as c:
            c.execute(f"drop database if exists {DBNAME} with (force)")
            c.execute(f"create database {DBNAME}")
        admin_url = base.rsplit("/", 1)[0] + f"/{DBNAME}"
        app_url = base.rsplit("/", 1)[0].replace("postgres@", f"{APP_ROLE}@") + f"/{DBNAME}"
        Migrator(admin_url, Source.load(ROOT)).migrate()
        with connect(admin_url) as admin:
            for role in (APP_ROLE, ATTACKER_ROLE):
                if not admin.execute("select 1 from pg_roles where rolname = %s", (role,)).fetchone():
                    admin.execute(f"create role {role} login")
                admin.execute("select agentmem.grant_app_role(role_name => %s)", (role,))
            # the victim's application may act as its tenants, the attacker's login as "attacker" only
            for tenant in ("victim", "hostile", "faults", "heavy"):
                admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => %s)", (APP_ROLE, tenant))
            admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'attacker')", (ATTACKER_ROLE,))
            timeout = admin.execute("select setconfig from pg_db_role_setting where setrole = %s::regrole",
                                    (APP_ROLE,)).fetchone()[0]
        yield SimpleNamespace(data=data, port=port, admin_url=admin_url, app_url=app_url,
                              attacker_url=app_url.replace(f"{APP_ROLE}@", f"{ATTACKER_ROLE}@"),
                              timeout=timeout, rng=np.random.default_rng(12))
    finally:
        devserver.stop(data)


@pytest.fixture(scope="module")
def victim(probe_server):
    return seed_victim(probe_server.app_url, probe_server.rng, VICTIM_USERS)


@pytest.fixture
def admin_conn(probe_server):
    conn = connect(probe_server.admin_url)
    yield conn
    conn.close()


def test_the_attacker_reads_and_changes_nothing_of_the_victim(probe_server, victim, admin_conn):
    cross = cross_tenant_probes(probe_server.attacker_url, admin_conn, victim)
    print(f"cross-tenant: {cross['probes']} probes, {cross['leaks']} leaks")
    assert cross["probes"] == 58 * VICTIM_USERS
    assert cross["leaks"] == 0, cross["notes"]


def test_hostile_inputs_are_refused_with_their_sqlstate_and_write_nothing(probe_server, admin_conn):
    hostile = hostile_inputs(probe_server.app_url, admin_conn, probe_server.rng)
    print(f"hostile inputs: {hostile['refused']}/{hostile['tried']} refused cleanly")
    for label, secs in hostile["timings"]:
        print(f"  {label}: {secs:.2f} s")
    assert hostile["failures"] == []
    assert hostile["refused"] == hostile["tried"] == 76


def test_no_route_binds_the_attackers_login_to_the_victims_tenant(probe_server, victim, admin_conn):
    binding = binding_probes(probe_server.attacker_url, admin_conn, victim)
    print(f"tenant binding: {binding['probes']} probes, {binding['leaks']} leaks")
    assert binding["probes"] == 2 * 15 * 5  # modes x routes x reads and writes
    assert binding["leaks"] == 0, binding["notes"]


def test_the_heaviest_calls_finish_inside_the_statement_timeout(probe_server, admin_conn):
    assert probe_server.timeout and any(s.startswith("statement_timeout=") for s in probe_server.timeout)
    worst = worst_calls(admin_conn, probe_server.app_url)  # a call over the timeout raises QueryCanceled
    print(f"heaviest calls ({', '.join(probe_server.timeout)}):")
    for label, secs in worst:
        print(f"  {label}: {secs:.2f} s")
    assert len(worst) == 7


@pytest.mark.parametrize("run", range(FAULT_RUNS))
def test_kill_9_during_writes_loses_no_acknowledged_commit(probe_server, run):
    r = fault_run(probe_server.app_url, probe_server.admin_url, probe_server.data, probe_server.port, run,
                  probe_server.rng, FAULT_SECONDS)
    print(f"fault run {run + 1}: {r}")
    assert r["acked"] > 0
    assert (r["missing"], r["gaps"], r["orphans"]) == (0, 0, 0), r
    assert r["down_error"] == "ConnectionLost", r
    assert r["recovered"], r
