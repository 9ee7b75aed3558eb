"""Benchmark: erasing a user, and retention throughput while searches keep running.

    .venv/bin/python bench/bench_forget.py --out bench/results/forget.md [--quick]

Starts its own embedded PostgreSQL (port 55435, data in .pgdata/bench) unless
--database-url is given, migrates a fresh database and measures only API calls:

1. agentmem.forget_user on a user with 10,000 messages (with embeddings and
   embedding-cache rows), 1,000 facts and 1,000 cached answers (plus two hit-log
   rows each), in a tenant that holds four other users of the same size (whose
   data must be untouched afterwards: asserted, table by table);
2. agentmem.apply_retention (default batch 5,000 per call, until nothing is
   left) on 100,000 expired messages with embeddings, while a second connection
   (the application role) keeps calling agentmem.search_messages for a user of
   another tenant; that search's latency p50/p95 without retention, during it
   and right after it, side by side in the same run.

Loading. The data is written with COPY straight into agentmem's private tables as
the superuser (loading 170k messages through store_messages, each one inserted
into the HNSW index, took ~12 minutes on 2 cores). The loader keeps every
invariant the functions rely on: gap-free message_index per conversation and
conversations.next_index, user_id (and conversation_id) copied onto messages and
message_embeddings, the model registered (all-minilm, 384 dimensions), tenant_id
everywhere, created_at backdated for expired rows (messages, their embeddings,
conversations), facts' source_message_ids pointing to real messages of the user
(sorted, distinct), cache_entries with question_norm = normalize_question(question)
and question_key = its sha256, corpus_version = the tenant's, cache_entry_sources
for every source id, hit-log rows shaped as cache_lookup writes them, and
embedding-cache rows keyed by the sha256 of the message text. The per-model HNSW
indexes are dropped for the load and rebuilt by agentmem_private.ensure_model_indexes,
then ANALYZE. A checker asserts those invariants on the loaded data, and a small
API-path sanity check stores the same shape of data for one user through
store_messages, embedding_cache_store, upsert_fact, cache_store and cache_lookup and
for another through the bulk loader: both are found by search_messages with their
own vectors and forget_user returns the same receipt for both.

Vectors are random unit vectors (numpy): the timings are about the database, not
about the embedding model.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from agentmem import devserver  # noqa: E402
from agentmem.migrate import Migrator, Source  # noqa: E402

MODEL = "all-minilm"
DIM = 384
PORT = 55435
DBNAME = "agentmem_bench_forget"
APP_ROLE = "agentmem_bench_app"
EMBEDDING_TABLES = ("message_embeddings", "facts", "cache_entries")
USER_TABLES = ("conversations", "messages", "message_embeddings", "facts", "fact_history",
               "cache_entries", "cache_hits")
WORDS = ("order invoice refund shipping delay password account login upgrade plan price discount "
         "warranty return address phone email schedule meeting report export import backup restore "
         "error crash update version install license renew cancel trial support ticket agent").split()


def rand_vecs(rng, n):
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def connect(url):
    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    return conn


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


# -- bulk loader ---------------------------------------------------------------

class Bulk:
    """COPY a user's data straight into the private tables (superuser), invariants kept."""

    def __init__(self, conn, rng):
        self.conn, self.rng = conn, rng
        phrases = rng.choice(WORDS, size=(997, 12))
        self.phrases = [" ".join(p) for p in phrases]
        conn.execute("create temp table if not exists stage_cache (entry_id uuid, user_id text, "
                     "conversation_id uuid, question text, answer text, embedding vector, doc text, "
                     "created_at timestamptz)")

    def user(self, tenant, user, n_msgs, per_conv=500, n_facts=0, n_answers=0, hits_per_answer=2,
             age_days=0, embedding_cache=True):
        """Returns (message ids, conversation ids, message vectors)."""
        now = dt.datetime.now(dt.timezone.utc)
        base = now - dt.timedelta(days=age_days) if age_days else now
        # created_at: expired rows spread over one hour, from base on; others at load time
        ts = [base + dt.timedelta(seconds=3600 * i / max(n_msgs, 1)) for i in range(n_msgs)] if age_days \
            else [now] * n_msgs
        sizes = [min(per_conv, n_msgs - s) for s in range(0, n_msgs, per_conv)]
        convs = [uuid.uuid4() for _ in sizes]
        ids = [uuid.uuid4() for _ in range(n_msgs)]
        vecs = rand_vecs(self.rng, n_msgs)
        contents = [f"{self.phrases[i % len(self.phrases)]} ({user} #{i})" for i in range(n_msgs)]
        conv_of, index_of = [], []
        for c, size in zip(convs, sizes):
            conv_of += [c] * size
            index_of += list(range(size))
        with self.conn.cursor() as cur:
            with cur.copy("copy agentmem.conversations (tenant_id, conversation_id, user_id, title, next_index, "
                          "created_at, updated_at) from stdin") as cp:
                start = 0
                for c, size in zip(convs, sizes):
                    cp.write_row((tenant, c, user, f"conversation of {user}", size, ts[start], ts[start + size - 1]))
                    start += size
            with cur.copy("copy agentmem.messages (tenant_id, message_id, conversation_id, user_id, message_index, "
                          "role, content, created_at) from stdin") as cp:
                for i in range(n_msgs):
                    cp.write_row((tenant, ids[i], conv_of[i], user, index_of[i],
                                  "user" if index_of[i] % 2 == 0 else "assistant", contents[i], ts[i]))
            with cur.copy("copy agentmem.message_embeddings (tenant_id, message_id, model, user_id, conversation_id, "
                          "embedding, created_at) from stdin with (format binary)") as cp:
                cp.set_types(["text", "uuid", "text", "text", "uuid", "vector", "timestamptz"])
                for i in range(n_msgs):
                    cp.write_row((tenant, ids[i], MODEL, user, conv_of[i], vecs[i], ts[i]))
            if embedding_cache:  # what the driver leaves behind: the embedding of each text it embedded
                with cur.copy("copy agentmem.embedding_cache (tenant_id, model, text_sha256, cached_vector, "
                              "created_at) from stdin with (format binary)") as cp:
                    cp.set_types(["text", "text", "bytea", "vector", "timestamptz"])
                    for i in range(n_msgs):
                        cp.write_row((tenant, MODEL, hashlib.sha256(contents[i].encode()).digest(), vecs[i], ts[i]))
            if n_facts:
                fvecs = rand_vecs(self.rng, n_facts)
                with cur.copy("copy agentmem.facts (tenant_id, fact_id, user_id, subject, fact, model, embedding, "
                              "source_message_ids, created_at, updated_at) from stdin with (format binary)") as cp:
                    cp.set_types(["text", "uuid", "text", "text", "text", "text", "vector", "uuid[]",
                                  "timestamptz", "timestamptz"])
                    for i in range(n_facts):
                        src = sorted({ids[int(j)] for j in self.rng.integers(0, n_msgs, 1 + i % 3)})
                        cp.write_row((tenant, uuid.uuid4(), user, f"subject {i}", f"{user} fact {i}: "
                                      f"{self.phrases[(7 * i) % len(self.phrases)]}", MODEL, fvecs[i], src,
                                      ts[0], ts[0]))
            if n_answers:
                avecs = rand_vecs(self.rng, n_answers)
                with cur.copy("copy stage_cache from stdin with (format binary)") as cp:
                    cp.set_types(["uuid", "text", "uuid", "text", "text", "vector", "text", "timestamptz"])
                    for i in range(n_answers):
                        cp.write_row((uuid.uuid4(), user, convs[i % len(convs)],
                                      f"{user.capitalize()} asks: how do I {self.phrases[(3 * i) % 997]}? (#{i})",
                                      f"an answer about {self.phrases[(5 * i) % 997]}", avecs[i],
                                      f"doc-{i % 50}", ts[0]))
                cur.execute(
                    "insert into agentmem.cache_entries (tenant_id, entry_id, question, question_norm, question_key, "
                    "  corpus_version, intent, answer, model, embedding, source_ids, user_id, conversation_id, "
                    "  created_at, expires_at) "
                    "select %(t)s, s.entry_id, s.question, n.norm, sha256(convert_to(n.norm, 'UTF8')), "
                    "  coalesce((select v.version from agentmem.corpus_versions as v where v.tenant_id = %(t)s), 0), "
                    "  'general', s.answer, %(m)s, s.embedding, array[s.doc], s.user_id, s.conversation_id, "
                    "  s.created_at, s.created_at + interval '7 days' "
                    "from stage_cache as s cross join lateral (select agentmem.normalize_question(s.question)) "
                    "  as n (norm)", {"t": tenant, "m": MODEL})
                cur.execute("insert into agentmem.cache_entry_sources (tenant_id, doc_id, entry_id) "
                            "select %s, s.doc, s.entry_id from stage_cache as s", (tenant,))
                # the hit log as cache_lookup writes an exact hit
                cur.execute("insert into agentmem.cache_hits (tenant_id, entry_id, kind, similarity, intent, "
                            "  question_asked, matched_question, user_id, created_at) "
                            "select e.tenant_id, e.entry_id, 'exact', 1, e.intent, e.question, e.question, "
                            "  e.user_id, e.created_at "
                            "from agentmem.cache_entries as e cross join generate_series(1, %s) "
                            "where e.tenant_id = %s and e.user_id = %s", (hits_per_answer, tenant, user))
                cur.execute("truncate stage_cache")
        return ids, convs, vecs


INVARIANTS = {
    "conversations.next_index = message count = max(message_index) + 1, min 0": """
        select count(*) from agentmem.conversations as c
        left join (select m.tenant_id, m.conversation_id, count(*) as n, min(m.message_index) as lo,
                          max(m.message_index) as hi
                   from agentmem.messages as m group by 1, 2) as s using (tenant_id, conversation_id)
        where c.tenant_id = any(%(t)s)
          and (c.next_index <> coalesce(s.n, 0) or coalesce(s.lo, 0) <> 0 or coalesce(s.hi, -1) <> c.next_index - 1)""",
    "messages.user_id = its conversation's": """
        select count(*) from agentmem.messages as m join agentmem.conversations as c using (tenant_id, conversation_id)
        where m.tenant_id = any(%(t)s) and m.user_id <> c.user_id""",
    "one all-minilm embedding per message, user_id/conversation_id/created_at copied": """
        select count(*) from agentmem.messages as m
        left join agentmem.message_embeddings as e on e.tenant_id = m.tenant_id and e.message_id = m.message_id
        where m.tenant_id = any(%(t)s)
          and (e.message_id is null or e.model <> 'all-minilm' or e.user_id <> m.user_id
               or e.conversation_id <> m.conversation_id or e.created_at <> m.created_at
               or vector_dims(e.embedding) <> 384)""",
    "facts' sources are the user's real messages, sorted and distinct": """
        select count(*) from agentmem.facts as f
        where f.tenant_id = any(%(t)s) and (
            f.source_message_ids <> array(select distinct s from unnest(f.source_message_ids) as s order by s)
            or exists (select from unnest(f.source_message_ids) as s where not exists (
                select from agentmem.messages as m
                where m.tenant_id = f.tenant_id and m.message_id = s and m.user_id = f.user_id)))""",
    "cache_entries: question_norm/question_key/corpus_version as cache_store writes them": """
        select count(*) from agentmem.cache_entries as e
        where e.tenant_id = any(%(t)s) and (
            e.question_norm <> agentmem.normalize_question(e.question)
            or e.question_key <> sha256(convert_to(e.question_norm, 'UTF8'))
            or e.corpus_version <> coalesce((select v.version from agentmem.corpus_versions as v
                                             where v.tenant_id = e.tenant_id), 0))""",
    "cache_entry_sources = cache_entries.source_ids": """
        select count(*) from agentmem.cache_entries as e
        where e.tenant_id = any(%(t)s) and e.source_ids <> array(
            select s.doc_id from agentmem.cache_entry_sources as s
            where s.tenant_id = e.tenant_id and s.entry_id = e.entry_id order by s.doc_id)""",
    "embedding_cache rows are the sha256 of a message text": """
        select count(*) from agentmem.embedding_cache as c
        left join (select distinct m.tenant_id, sha256(convert_to(m.content, 'UTF8')) as h
                   from agentmem.messages as m where m.tenant_id = any(%(t)s)) as m
            on m.tenant_id = c.tenant_id and m.h = c.text_sha256
        where c.tenant_id = any(%(t)s) and m.h is null""",
}


def check_invariants(conn, tenants):
    bad = {name: conn.execute(sql, {"t": tenants}).fetchone()[0] for name, sql in INVARIANTS.items()}
    assert not any(bad.values()), f"bulk data breaks invariants: {bad}"
    return list(INVARIANTS)


def user_counts(conn, tenant, user):
    return {t: conn.execute(f"select count(*) from agentmem.{t} where tenant_id = %s and user_id = %s",
                            (tenant, user)).fetchone()[0] for t in USER_TABLES}


def table_counts(conn):
    tables = [r[0] for r in conn.execute(
        "select c.relname from pg_class as c where c.relnamespace = 'agentmem'::regnamespace "
        "and c.relkind = 'r' order by 1")]
    return {t: conn.execute(f"select count(*) from agentmem.{t}").fetchone()[0] for t in tables}


# -- API-path sanity check -----------------------------------------------------

def api_user(conn, tenant, user, n_msgs, per_conv, n_facts, n_answers, rng):
    """The same shape of data as Bulk.user, written through the API (tenant set on conn)."""
    conn.execute("select agentmem.set_tenant(tenant_id => %s)", (tenant,))
    ids, vecs_all = [], []
    for start in range(0, n_msgs, per_conv):
        size = min(per_conv, n_msgs - start)
        conv = conn.execute("select agentmem.start_conversation(user_id => %s)", (user,)).fetchone()[0]
        vecs = rand_vecs(rng, size)
        contents = [f"{user} says {start + i}" for i in range(size)]
        rows = conn.execute(
            "select message_id from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
            "embeddings => %s::vector[], model => %s)",
            (conv, ["user", "assistant"] * (size // 2) + ["user"] * (size % 2), contents, list(vecs),
             MODEL)).fetchall()
        conn.execute("select agentmem.embedding_cache_store(model => %s, texts => %s, embeddings => %s::vector[])",
                     (MODEL, contents, list(vecs)))
        ids += [r[0] for r in rows]
        vecs_all.append(vecs)
    fv = rand_vecs(rng, n_facts)
    for i in range(n_facts):
        src = sorted({ids[int(j)] for j in rng.integers(0, n_msgs, 1 + i % 3)})
        conn.execute("select * from agentmem.upsert_fact(user_id => %s, subject => %s, fact => %s, embedding => %s, "
                     "source_message_ids => %s::uuid[], model => %s)",
                     (user, f"subject {i}", f"{user} fact {i}", fv[i], src, MODEL))
    av = rand_vecs(rng, n_answers)
    for i in range(n_answers):
        q = f"{user.capitalize()} asks: how do I do thing {i}?"
        r = conn.execute("select stored from agentmem.cache_store(question => %s, question_embedding => %s, "
                         "answer => 'an answer', source_ids => %s, model => %s, user_id => %s, "
                         "safe_to_share => true)", (q, av[i], [f"doc-{i % 50}"], MODEL, user)).fetchone()
        assert r[0]
        for _ in range(2):
            hit = conn.execute("select hit, kind from agentmem.cache_lookup(question => %s, question_embedding => %s, "
                               "model => %s, user_id => %s)", (q, av[i], MODEL, user)).fetchone()
            assert hit == (True, "exact"), hit
    conn.execute("reset agentmem.tenant_id")
    return ids, np.concatenate(vecs_all)


def sanity(admin, app, bulk, rng, n=300):
    """API path vs. bulk path: same checks, same search behaviour, same erasure receipt."""
    t0 = time.perf_counter()
    api_ids, api_vecs = api_user(app, "sanity", "api-user", n, 100, n // 10, n // 10, rng)
    bulk_ids, _, bulk_vecs = bulk.user("sanity", "bulk-user", n, 100, n // 10, n // 10, 2)
    return {"load_s": time.perf_counter() - t0, "api": (api_ids, api_vecs), "bulk": (bulk_ids, bulk_vecs)}


def sanity_finish(admin, app, s):
    out = {}
    app.execute("select agentmem.set_tenant(tenant_id => 'sanity')")
    admin.execute("select agentmem.set_tenant(tenant_id => 'sanity')")
    for user, (ids, vecs) in (("api-user", s["api"]), ("bulk-user", s["bulk"])):
        found = 0
        for j in (0, len(ids) // 2, len(ids) - 1):  # its own vector finds the message first
            row = app.execute("select message_id, similarity from agentmem.search_messages(user_id => %s, "
                              "query_embedding => %s, k => 5, model => %s)", (user, vecs[j], MODEL)).fetchone()
            assert row[0] == ids[j] and row[1] > 0.999, (user, row)
            found += 1
        receipt = admin.execute("select rows_removed from agentmem.forget_user(user_id => %s)", (user,)).fetchone()[0]
        left = user_counts(admin, "sanity", user)
        assert not any(left.values()), (user, left)
        out[user] = {"searches_ok": found, "receipt": receipt}
    assert out["api-user"]["receipt"] == out["bulk-user"]["receipt"], out
    assert admin.execute("select count(*) from agentmem.embedding_cache where tenant_id = 'sanity'").fetchone()[0] == 0
    admin.execute("reset agentmem.tenant_id")
    app.execute("reset agentmem.tenant_id")
    return out


# -- searches in another thread -------------------------------------------------

class Searcher(threading.Thread):
    """search_messages in a loop through the application role; latencies in phases."""

    def __init__(self, app_url, tenant, user, seed=7):
        super().__init__(daemon=True)
        self.conn = connect(app_url)
        self.conn.execute("select agentmem.set_tenant(tenant_id => %s)", (tenant,))
        self.user = user
        self.qs = rand_vecs(np.random.default_rng(seed), 256)
        self.phase = None
        self.lat = {}
        self.stop = threading.Event()
        self.error = None

    def run(self):
        i = 0
        try:
            while not self.stop.is_set():
                phase = self.phase
                t = time.perf_counter()
                n = self.conn.execute("select count(*) from agentmem.search_messages(user_id => %s, "
                                      "query_embedding => %s, k => 10, model => %s)",
                                      (self.user, self.qs[i % 256], MODEL)).fetchone()[0]
                ms = (time.perf_counter() - t) * 1000
                assert n == 10, n
                if phase is not None and phase == self.phase:  # a search straddling two phases is dropped
                    self.lat.setdefault(phase, []).append(ms)
                i += 1
        except Exception as exc:  # reported by the main thread
            self.error = exc
        finally:
            self.conn.close()

    def window(self, phase, seconds):
        self.phase = phase
        time.sleep(seconds)
        self.phase = None


# -- main --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "bench/results/forget.md"))
    ap.add_argument("--quick", action="store_true", help="sizes / 10")
    ap.add_argument("--database-url", help="a server to use instead of the embedded one")
    args = ap.parse_args()
    scale = 10 if args.quick else 1
    n_msgs, n_facts, n_answers = 10_000 // scale, 1_000 // scale, 1_000 // scale
    n_others, n_linked = 4, 250 // scale
    n_expired, n_reader, batch = 100_000 // scale, 20_000 // scale, 5_000 // scale
    window = 3 if args.quick else 10  # the window right after retention is half of it
    gap, calls_per_burst = (0.5, 3) if args.quick else (1.5, 3)
    rng = np.random.default_rng(1)
    wall0 = time.perf_counter()

    server_url = args.database_url or devserver.start(ROOT / ".pgdata" / "bench", port=PORT, fast=True)  # throwaway data: fsync etc. off, on purpose
    with psycopg.connect(server_url, autocommit=True) as c:
        c.execute(f"drop database if exists {DBNAME} with (force)")
        c.execute(f"create database {DBNAME}")
    url = server_url.rsplit("/", 1)[0] + "/" + DBNAME
    Migrator(url, Source.load(ROOT)).migrate()
    admin = connect(url)  # superuser: loads the tables, runs apply_retention (sees every tenant)
    if not admin.execute("select 1 from pg_roles where rolname = %s", (APP_ROLE,)).fetchone():
        admin.execute(f"create role {APP_ROLE} login")
    admin.execute("select agentmem.grant_app_role(role_name => %s)", (APP_ROLE,))
    user = url.split("//", 1)[1].split("@", 1)[0]
    app_url = url.replace(f"//{user}@", f"//{APP_ROLE}@", 1)
    app = connect(app_url)
    bulk = Bulk(admin, rng)

    # -- load -------------------------------------------------------------------------
    t0 = time.perf_counter()
    s = sanity(admin, app, bulk, rng)  # API-path user first, with the HNSW indexes in place
    index_names = [admin.execute("select agentmem_private.model_index_name(%s, %s)", (t, MODEL)).fetchone()[0]
                   for t in EMBEDDING_TABLES]
    for name in index_names:
        admin.execute(f'drop index agentmem."{name}"')
    bulk.user("acme", "victim", n_msgs, 500, n_facts, n_answers, 2)
    others = [f"user-{k}" for k in range(1, n_others + 1)]
    for u in others:
        bulk.user("acme", u, n_msgs, 500, n_facts, n_answers, 2)
    # other users' lookups that matched the victim's cached questions (forget_user unlinks them)
    admin.execute("insert into agentmem.cache_hits (tenant_id, entry_id, kind, similarity, guard_passed, threshold, "
                  "  intent, question_asked, matched_question, user_id) "
                  "select e.tenant_id, e.entry_id, 'semantic', 0.97, true, 0.95, e.intent, "
                  "  'user-1 asks something close ' || row_number() over (), e.question, 'user-1' "
                  "from agentmem.cache_entries as e where e.tenant_id = 'acme' and e.user_id = 'victim' "
                  "order by e.entry_id limit %s", (n_linked,))
    bulk.user("other", "reader", n_reader, 1000)
    per = n_expired // 10
    for k in range(10):
        bulk.user("archive", f"archivist-{k}", per, 1000, age_days=400)
    copy_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    admin.execute("set maintenance_work_mem = '1GB'")
    made = admin.execute("select agentmem_private.ensure_model_indexes(%s)", (MODEL,)).fetchone()[0]
    assert made == len(index_names), made
    admin.execute("reset maintenance_work_mem")
    index_s = time.perf_counter() - t1
    admin.execute("analyze")
    checks = check_invariants(admin, ["sanity", "acme", "other", "archive"])
    sane = sanity_finish(admin, app, s)
    load_s = time.perf_counter() - t0
    print(f"loaded in {load_s:.0f} s (COPY {copy_s:.0f} s, HNSW build {index_s:.0f} s)", flush=True)

    # -- 1. erase a user --------------------------------------------------------------
    load_avg = os.getloadavg()  # the machine is shared: how busy it was when the measurements began
    victim_before = user_counts(admin, "acme", "victim")
    others_before = {u: user_counts(admin, "acme", u) for u in others}
    all_before = table_counts(admin)
    victim_sources = admin.execute(
        "select count(*) from agentmem.cache_entry_sources as s join agentmem.cache_entries as e "
        "using (tenant_id, entry_id) where e.tenant_id = 'acme' and e.user_id = 'victim'").fetchone()[0]
    admin.execute("select agentmem.set_tenant(tenant_id => 'acme')")
    t = time.perf_counter()
    receipt = admin.execute("select rows_removed from agentmem.forget_user(user_id => 'victim')").fetchone()[0]
    forget_s = time.perf_counter() - t
    admin.execute("reset agentmem.tenant_id")
    assert not any(user_counts(admin, "acme", "victim").values())
    assert {u: user_counts(admin, "acme", u) for u in others} == others_before, "another user's data changed"
    all_after = table_counts(admin)
    removed_per_table = {k: all_before[k] - all_after[k] for k in all_before if all_before[k] != all_after[k]}
    # every table shrank by exactly the receipt's count; the receipt itself is the one new erasure_log row
    expect = {k: v for k, v in receipt.items() if k in all_before and v}
    expect["erasure_log"] = -1
    expect["cache_entry_sources"] = victim_sources  # by cascade with their entries (not in the receipt)
    assert removed_per_table == expect, (removed_per_table, receipt)
    unlinked = admin.execute("select count(*) from agentmem.cache_hits where tenant_id = 'acme' and "
                             "user_id = 'user-1' and kind = 'semantic' and entry_id is null "
                             "and matched_question is null").fetchone()[0]
    assert unlinked == n_linked == receipt["cache_hits_unlinked"], (unlinked, receipt)
    total_removed = sum(v for k, v in receipt.items() if k != "cache_hits_unlinked")

    # -- 2. retention under search load ----------------------------------------------
    admin.execute("select agentmem.set_tenant(tenant_id => 'archive')")
    admin.execute("select agentmem.set_retention_policy(kind => 'messages', max_age => '365 days')")
    admin.execute("reset agentmem.tenant_id")
    kept_before = admin.execute("select tenant_id, count(*) from agentmem.messages group by 1 order by 1").fetchall()
    searcher = Searcher(app_url, "other", "reader")
    searcher.start()
    time.sleep(1)  # warm-up, not recorded
    # Interleaved, so that both phases see the same background load of a shared machine:
    # a window without retention, a burst of retention calls, a window without, ...
    searcher.window("without retention", gap)
    runs, removed, per_call, bursts, done = 0, 0, [], 0, False
    retention_s = 0.0
    while not done:
        searcher.phase = "during retention"
        t = time.perf_counter()
        for _ in range(calls_per_burst):
            c0 = time.perf_counter()
            row = admin.execute("select (rows_removed ->> 'messages')::bigint, error "
                                "from agentmem.apply_retention(batch_size => %s)", (batch,)).fetchone()
            per_call.append(time.perf_counter() - c0)
            runs += 1
            assert row[1] is None, row[1]
            assert row[0] <= batch, row
            removed += row[0]
            if row[0] == 0:
                done = True
                break
        retention_s += time.perf_counter() - t
        bursts += 1
        searcher.phase = None
        if not done:
            searcher.window("without retention", gap)
    searcher.window("right after retention (no vacuum yet)", window / 2)
    searcher.stop.set()
    searcher.join()
    if searcher.error:
        raise searcher.error
    left = admin.execute("select (select count(*) from agentmem.messages where tenant_id = 'archive'), "
                         "(select count(*) from agentmem.message_embeddings where tenant_id = 'archive'), "
                         "(select count(*) from agentmem.embedding_cache where tenant_id = 'archive')").fetchone()
    assert removed == n_expired and left == (0, 0, 0), (removed, left)
    kept_after = admin.execute("select tenant_id, count(*) from agentmem.messages group by 1 order by 1").fetchall()
    assert [r for r in kept_before if r[0] != "archive"] == kept_after, (kept_before, kept_after)
    total_s = time.perf_counter() - wall0

    # -- report ---------------------------------------------------------------------------
    nproc = os.cpu_count()
    pgver = admin.execute("show server_version").fetchone()[0]
    pgvector = admin.execute("select extversion from pg_extension where extname = 'vector'").fetchone()[0]
    cmd = ".venv/bin/python bench/bench_forget.py " + " ".join(sys.argv[1:])
    lat = searcher.lat
    rows = []
    base = lat["without retention"]
    for phase, xs in lat.items():
        ratio = "" if phase == "without retention" else \
            f"{statistics.median(xs) / statistics.median(base):.2f}x / {percentile(xs, 95) / percentile(base, 95):.2f}x"
        rows.append(f"| {phase} | {len(xs)} | {statistics.median(xs):.1f} ms | {percentile(xs, 95):.1f} ms | "
                    f"{percentile(xs, 99):.1f} ms | {ratio} |")
    victim_rows = ", ".join(f"{k} {v:,}" for k, v in victim_before.items())
    sane_receipt = sane["api-user"]["receipt"]
    report = f"""# Forgetting and retention benchmark

- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC}
- machine: {nproc} CPU cores (`nproc`), shared with other jobs (load average {load_avg[0]:.1f} / {load_avg[1]:.1f} / {load_avg[2]:.1f} when measuring began); PostgreSQL {pgver} (embedded), pgvector {pgvector}
- command: `{cmd}`{" (quick: sizes / 10)" if args.quick else ""}
- vectors: random unit vectors, 384 dimensions (model all-minilm), one partial HNSW cosine index per table
- whole run: {total_s:.0f} s, of which loading {load_s:.0f} s (COPY {copy_s:.0f} s, HNSW build {index_s:.0f} s; not measured below)

## Erasing a user (`agentmem.forget_user`)

Tenant `acme` holds the victim and {n_others} other users of the same size; tenants `other` and `archive`
hold {n_reader + n_expired:,} more messages. The victim's rows before: {victim_rows};
plus {n_msgs:,} embedding-cache rows, and {n_linked} hit-log rows of another user that matched the victim's
cached questions.

| user's data | time |
|---|---|
| {n_msgs:,} messages with embeddings, {n_facts:,} facts, {n_answers:,} cached answers (+{2 * n_answers:,} hit-log rows), {n_msgs:,} embedding-cache rows | **{forget_s * 1000:,.0f} ms** for {total_removed:,} rows removed in one transaction (+{receipt['cache_hits_unlinked']} other users' hit-log rows unlinked) |

One call, timed from the client (a single measurement, not a median).
Receipt: `{receipt}`

Checked after the call: the victim has no row left in any table; each of the {n_others} other users has exactly
the rows it had, table by table; every table shrank by exactly the receipt's count (the erasure log grew by one
receipt); the other user's {n_linked} hit-log rows that matched the victim's questions lost entry and question.

## Retention (`agentmem.apply_retention`) on {n_expired:,} expired messages

{n_expired:,} messages of 10 users in tenant `archive` (conversations of 1,000 messages), created 400 days ago,
each with its embedding and its embedding-cache row; the tenant's policy keeps messages 365 days.

| measure | value |
|---|---|
| batch size per call | {batch:,} |
| calls until nothing left | {runs} (last one removes 0), in {bursts} bursts of up to {calls_per_burst} |
| time per call (p50 / max) | {statistics.median(per_call) * 1000:,.0f} ms / {max(per_call) * 1000:,.0f} ms |
| rows removed | {removed:,} messages, with their {n_expired:,} embeddings (cascade) and {n_expired:,} embedding-cache rows (left: {left[0]}, {left[1]}, {left[2]}) |
| time in retention bursts | {retention_s:.1f} s |
| **throughput** | **{removed / retention_s:,.0f} messages/s** (each with its embedding and embedding-cache row) |

Other tenants' messages untouched (asserted). Deleted rows' HNSW entries are reclaimed only by VACUUM
(autovacuum, which stays on), not counted here.

## Search latency of another tenant while retention runs

`search_messages(k => 10, model => 'all-minilm')` through the application role (RLS on) for the user `reader`
({n_reader:,} messages, tenant `other`; the HNSW index holds every tenant's vectors), one connection in a loop
in a second thread, random query vectors. Same run, interleaved so that both phases share the machine's
background load: {gap:g} s without retention, a burst of {calls_per_burst} retention calls, {gap:g} s without, ...
until retention is done; then {window / 2:g} s right after it. A search straddling two phases is dropped.

| phase | searches | p50 | p95 | p99 | p50 / p95 vs. without |
|---|---|---|---|---|---|
{chr(10).join(rows)}

## How the data was loaded, and why it is trusted

COPY straight into the private tables as the superuser, then the HNSW indexes rebuilt with
`agentmem_private.ensure_model_indexes('all-minilm')` and ANALYZE; only the API calls above are timed. Checked on the
loaded data before measuring (each is a query that must count 0 violations):
{chr(10).join("- " + c for c in checks)}

API-path sanity check in the same run: one user's {300:,} messages (3 conversations), {30} facts, {30} cached answers
(each looked up twice) and embedding-cache rows written through `store_messages`, `embedding_cache_store`,
`upsert_fact`, `cache_store` and `cache_lookup`, the same shape for another user through the bulk loader.
For both, `search_messages` (application role) returns the message whose own vector is the query first
(similarity > 0.999), and `forget_user` returns the same receipt, leaving nothing:
`{sane_receipt}`.
"""
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(report)
    print(report)
    app.close()
    admin.close()


if __name__ == "__main__":
    main()
