"""Security probe: a hostile tenant, hostile inputs, and kill -9 during writes.

    .venv/bin/python bench/bench_security.py --out bench/results/security.md [--quick]

Starts its own embedded PostgreSQL (durable settings: fsync, full_page_writes and
synchronous_commit on, the default of agentmem_dev.devserver; data in
.pgdata/bench-security, a free port unless --port), migrates a fresh database and
works only through the application role (a member of agentmem_app: no superuser,
no BYPASSRLS). The superuser only reads, to check what was really written.

1. Cross-tenant probes: tenant "victim" holds conversations, messages, facts,
   cached answers, hit-log rows and embedding-cache rows. Tenant "attacker", with
   the victim's ids, texts and exact vectors, calls every function that reads or
   writes by id, text or vector, and tries plain SQL on the tables and internals.
   A leak is any victim row returned, or any change to the victim's rows
   (a checksum of every table, per tenant, before and after).
2. Hostile inputs (issue 12 items 5-11): each must raise its agentmem SQLSTATE and
   leave every table as it was. Also timed: the CPU-exhaustion cases of the issue.
3. Fault runs: writers store messages, facts and cached answers through the API;
   the postmaster and every backend get SIGKILL mid-write; the server restarts;
   checked: every acknowledged commit is present, message indexes are gap-free
   with next_index, no embedding without its message or message without its
   embedding; the driver (Memory, timeout 3 s) raised ConnectionLost while the
   server was down and worked on the first call after the restart.

Bounded: a few minutes (--quick: fewer probes and fault runs).
"""

from __future__ import annotations

import argparse
import logging
import datetime as dt
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

import agentmem  # noqa: E402
from agentmem_dev import devserver  # noqa: E402
from agentmem.client import Memory  # noqa: E402
from agentmem.migrate import Migrator, Source  # noqa: E402

MODEL = "all-minilm"
DIM = 384
DBNAME = "agentmem_bench_security"
APP_ROLE = "agentmem_bench_security_app"
ATTACKER_ROLE = "agentmem_bench_security_attacker"  # a login of its own, granted the tenant "attacker" only
DATA = ROOT / ".pgdata" / "bench-security"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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

    # CPU cases of the issue, timed (they must finish; the figures are for this machine)
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


# -- 3. fault runs ----------------------------------------------------------------------------


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


def binding_cost(admin, app_url, cid, rounds: int = 5, calls: int = 2000) -> list[tuple[str, dict[str, float]]]:
    """Microseconds per call of current_tenant() and of a small API call, under each binding mode,
    looped inside the server (no round trip in the figure) and measured side by side: the modes
    alternate, round after round, on one connection of the application role."""
    conn = connect(app_url, "victim")
    admin.execute("select agentmem.set_tenant_binding(mode => 'role')")
    cases = {
        "current_tenant()": "perform agentmem.current_tenant();",
        "recent_messages(n => 3)": f"perform count(*) from agentmem.recent_messages(conversation_id => '{cid}', n => 3);",
        "search_messages(k => 5)": "perform count(*) from agentmem.search_messages(user_id => 'victim-user-0', "
                                   "query_text => 'vault code', k => 5);",
    }
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for mode in ("none", "role", "jwt"):
            admin.execute("select agentmem.set_tenant_binding(mode => %s)", (mode,))
            with conn.transaction():
                conn.execute("select set_config('request.jwt.claims', %s, true)", (json.dumps({"tenant_id": "victim"}),))
                for label, stmt in cases.items():
                    t = time.perf_counter()
                    conn.execute(f"do $bench$ begin for i in 1..{calls} loop {stmt} end loop; end $bench$")
                    times.setdefault((label, mode), []).append((time.perf_counter() - t) / calls * 1e6)
    admin.execute("select agentmem.set_tenant_binding(mode => 'role')")
    conn.close()
    return [(label, {mode: float(np.median(times[(label, mode)])) for mode in ("none", "role", "jwt")})
            for label in cases]


def worst_calls(admin, app_url) -> list[tuple[str, float]]:
    """The heaviest calls at the sizes the probes of issue 26 found them at, on a pooled connection's
    generic plans: unseen_docs over 100 turns x 1,000 recorded ids of 909 characters (the documented
    limits allow 1,000 turns), and cache_report with 1,000 thresholds over a 50,000-row hit log."""
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
                    "slowest of 7 calls (was 91 s from the 6th call)", max(secs)))
    conn.execute("set plan_cache_mode = auto")
    thresholds = [round(0.8 + i / 5000, 4) for i in range(1000)]
    for label, th in (("cache_report, 15 default thresholds, 50,000 logged lookups (was 0.21 s)", None),
                      ("cache_report, 1,000 thresholds, 50,000 logged lookups (was 15.6 s)", thresholds)):
        t = time.perf_counter()
        conn.execute("select count(*) from agentmem.cache_report(cost_uncached => 1, cost_wrong => 10, "
                     "thresholds => %s::real[])", (th,)).fetchone()
        out.append((label, time.perf_counter() - t))
    conn.close()
    # Gone again: its messages have no embeddings, which the fault runs would count as orphans.
    admin.execute("delete from agentmem.conversations where tenant_id = 'heavy'")
    admin.execute("delete from agentmem.cache_hits where tenant_id = 'heavy'")
    return out

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
    devserver.start(data, port=port)
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "security.md"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args()
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)  # the reconnection noise of the fault runs
    started = time.perf_counter()
    rng = np.random.default_rng(12)
    port = args.port or free_port()
    base = devserver.start(DATA, port=port)  # durable (the default): the fault runs need it
    port = int(base.rsplit(":", 1)[1].split("/")[0])
    with psycopg.connect(base, autocommit=True) as c:
        c.execute(f"drop database if exists {DBNAME} with (force)")
        c.execute(f"create database {DBNAME}")
    admin_url = base.rsplit("/", 1)[0] + f"/{DBNAME}"
    app_url = base.rsplit("/", 1)[0].replace("postgres@", f"{APP_ROLE}@") + f"/{DBNAME}"
    Migrator(admin_url, Source.load(ROOT)).migrate()
    admin = connect(admin_url)
    if not admin.execute("select 1 from pg_roles where rolname = %s", (APP_ROLE,)).fetchone():
        admin.execute(f"create role {APP_ROLE} login")
    admin.execute("select agentmem.grant_app_role(role_name => %s)", (APP_ROLE,))
    if not admin.execute("select 1 from pg_roles where rolname = %s", (ATTACKER_ROLE,)).fetchone():
        admin.execute(f"create role {ATTACKER_ROLE} login")
    admin.execute("select agentmem.grant_app_role(role_name => %s)", (ATTACKER_ROLE,))
    # Tenants bound to logins (a new installation's default): the victim's application may act as its
    # tenants, the attacker's login as "attacker" only.
    for tenant in ("victim", "hostile", "faults", "heavy"):
        admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => %s)", (APP_ROLE, tenant))
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'attacker')", (ATTACKER_ROLE,))
    attacker_url = app_url.replace(f"{APP_ROLE}@", f"{ATTACKER_ROLE}@")
    timeout = admin.execute("select setconfig from pg_db_role_setting where setrole = %s::regrole",
                            (APP_ROLE,)).fetchone()[0]

    data = seed_victim(app_url, rng, 3 if args.quick else 8)
    cross = cross_tenant_probes(attacker_url, admin, data)
    print(f"cross-tenant: {cross['probes']} probes, {cross['leaks']} leaks", flush=True)
    hostile = hostile_inputs(app_url, admin, rng)
    print(f"hostile inputs: {hostile['refused']}/{hostile['tried']} refused cleanly", flush=True)
    binding = binding_probes(attacker_url, admin, data)
    print(f"tenant binding: {binding['probes']} probes, {binding['leaks']} leaks", flush=True)
    cost = binding_cost(admin, app_url, data["convs"][0], rounds=3 if args.quick else 5)
    print(f"binding cost: {cost}", flush=True)
    worst = worst_calls(admin, app_url)
    print(f"worst calls: {worst}", flush=True)
    admin.close()
    runs = []
    for run in range(2 if args.quick else 5):
        runs.append(fault_run(app_url, admin_url, DATA, port, run, rng, 2.0 if args.quick else 3.0))
        print(f"fault run {run + 1}: {runs[-1]}", flush=True)
    devserver.stop(DATA)
    elapsed = time.perf_counter() - started

    ok_runs = sum(1 for r in runs if r["missing"] == 0 and r["gaps"] == 0 and r["orphans"] == 0
                  and r["recovered"] and r["down_error"] == "ConnectionLost")
    cmd = "python bench/bench_security.py" + (" --quick" if args.quick else "")
    lines = [
        "## Security: a hostile tenant, hostile inputs, kill -9 during writes",
        "",
        f"{dt.date.today()}, {os.cpu_count()} cores, embedded PostgreSQL 18 (durable settings), "
        f"{elapsed:.0f} s in all. Command: `{cmd}`. Every call as the application role "
        "(member of agentmem_app, no superuser, no BYPASSRLS).",
        "",
        "| check | result | target |",
        "|---|---|---|",
        f"| cross-tenant probes (reads and writes by the victim's ids, texts and exact vectors; plain SQL; "
        f"internals; set_config) | {cross['probes']} probes, **{cross['leaks']} leaks** | 0 leaks |",
        f"| hostile inputs refused with their SQLSTATE and nothing written | **{hostile['refused']} of "
        f"{hostile['tried']}** | all |",
        f"| tenant binding (issue 26): the attacker's login, granted its own tenant, acts as the victim by "
        f"set_tenant, set_config, SET, SET LOCAL, SET ROLE, forged JWT claims, the propagation marker and "
        f"6 Unicode lookalikes, then reads or writes the victim's rows; modes role and jwt | "
        f"{binding['probes']} probes, **{binding['leaks']} leaks** | 0 leaks |",
        f"| kill -9 of the server during writes: every acknowledged commit present, gap-free message "
        f"indexes, no orphan embeddings, ConnectionLost while down, first call after restart works | "
        f"**{ok_runs} of {len(runs)} runs** | all |",
        "",
    ]
    if cross["notes"] or hostile["failures"] or binding["notes"]:
        lines += ["Findings:", ""] + [f"- {n}" for n in cross["notes"] + hostile["failures"] + binding["notes"]] + [""]
    lines += ["Cost of the tenant binding (microseconds per call, looped inside the server by the application "
              "role, the median of 5 alternating rounds; the check runs in every current_tenant(), which every "
              "call reads and every row-level security policy reads once per statement):", "",
              "| call | none | role | jwt |", "|---|---|---|---|"]
    lines += [f"| {label} | {t['none']:.0f} | {t['role']:.0f} | {t['jwt']:.0f} |" for label, t in cost]
    lines += ["", "Mode none is agentmem without binding (the mode is a constant the planner folds). Under role and jwt "
              "each current_tenant() looks up the login's grants (an index probe, and under jwt a JSON lookup); "
              "it is not cached, since a cache kept in a setting could be forged by the session."]
    lines += ["", f"Heaviest calls within the documented limits (the application role's statement_timeout, set by "
              f"grant_app_role: {', '.join(timeout or [])}):", "", "| call | seconds |", "|---|---|"]
    lines += [f"| {label} | {secs:.2f} |" for label, secs in worst]
    lines += ["", "unseen_docs grows linearly with what the looked-at turns recorded: at the documented limit of "
              "1,000 turns of 1,000 ids of 1,000 characters (about 1 GB recorded in one conversation, not built "
              "here) these figures give about 10 s, inside the 30 s statement_timeout.", ""]
    lines += ["Fault runs (4 writers: store_message, upsert_fact every 3rd, cache_store every 5th):", "",
              "| run | acknowledged writes | missing after restart | index gaps | orphan embeddings | "
              "call while down | its wait (s) | first call after restart |",
              "|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(runs, 1):
        lines.append(f"| {i} | {r['acked']} | {r['missing']} | {r['gaps']} | {r['orphans']} | {r['down_error']} | "
                     f"{r['down_wait']:.1f} | {'works' if r['recovered'] else 'FAILS'} |")
    lines += ["", "CPU cases of issue 12 (were 14.8 s, over 30 s and 6.6-30 s), single calls on this machine:", "",
              "| call | seconds |", "|---|---|"]
    lines += [f"| {label} | {secs:.2f} |" for label, secs in hostile["timings"]]
    lines += ["", "The wait while down is the client's `timeout` (3 s here), not psycopg_pool's 30 s default.", ""]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}")
    return 0 if (cross["leaks"] == 0 and binding["leaks"] == 0 and hostile["refused"] == hostile["tried"]
                 and ok_runs == len(runs)) else 1


if __name__ == "__main__":
    sys.exit(main())
