"""Conversation memory benchmark: agentmem vs LangGraph's PostgresStore on the same server and vectors.

    .venv/bin/pip install 'pg-agentmem[bench]'      # langgraph-checkpoint-postgres
    .venv/bin/python bench/bench_conversations.py --out bench/results/conversations.md [--quick]

Measures, at 10k and 100k messages (--quick: 10k only) spread over 1,000 tenants where one
tenant holds 30%:
* store throughput (messages/s with their embedding) through each system's API, one message per
  call and in batches, into the populated tables (HNSW index present); --index-later adds a login
  with agentmem.index_later on in the same turns, then times agentmem.index_pending_vectors; --prepared
  adds this driver with prepare=True (server-side prepared statements, as PostgresStore runs); --floor
  adds FloorStore: what PostgresStore's put writes (a message row, its vector's row and HNSW insert)
  done by one SQL function and nothing else, the floor the other stores are read against;
* search latency p50/p95 and recall@10 against an exact scan, for the big tenant and for small
  tenants, each through its Python API;
* for agentmem, the embedding calls its cache saves on a re-index of 5,000 texts where 2% changed
  (OllamaEmbedder against the test suite's Ollama stub).

Vectors are synthetic (clustered unit vectors, 384 dimensions = the all-minilm model): no model is
needed, both systems get exactly the same vectors. The bulk of each data set is loaded with COPY
into both systems' tables with their HNSW index dropped and rebuilt afterwards (same treatment for
both, same pgvector defaults m=16, ef_construction=64, cosine); what the APIs are measured on is
the store-throughput sample and every search.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg

from agentmem.client import Memory
from pgvector import Vector
from common import (Bulk, command, connect, copy_into_postgresstore, create_tenant_indexes, percentile,
                    start_server, write_report)
from common import fresh_database as _fresh_database

DIM, MODEL, K = 384, "all-minilm", 10
TENANTS, BIG_SHARE = 1000, 0.30
APP_ROLE = "agentmem_bench_app"
SHARES_INDEX = {"agentmem (index_later)", "agentmem (prepare=True)"}  # more logins into the first one's tables
DBNAME = "agentmem_bench_conversations"


def clustered(n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    v = centres[rng.integers(0, len(centres), n)] + rng.standard_normal((n, DIM)).astype(np.float32) * (
        0.35 / np.sqrt(DIM))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


class Dataset:
    def __init__(self, n: int, seed: int = 1):
        rng = np.random.default_rng(seed)
        self.centres = rng.standard_normal((128, DIM)).astype(np.float32)
        self.centres /= np.linalg.norm(self.centres, axis=1, keepdims=True)
        self.vectors = clustered(n, rng, self.centres)
        big = int(n * BIG_SHARE)
        self.tenant = np.empty(n, dtype=np.int32)
        self.tenant[:big] = 0
        self.tenant[big:] = 1 + np.arange(n - big) % (TENANTS - 1)
        rng.shuffle(self.tenant)
        self.ids = [uuid.uuid4() for _ in range(n)]
        self.rng = rng

    @staticmethod
    def name(t: int) -> str:
        return f"t{t:04d}"


def fresh_database(server_url: str, root: Path | None = None) -> tuple[str, str]:
    if root is None:
        return _fresh_database(server_url, DBNAME, app_role=APP_ROLE)
    return _fresh_database(server_url, DBNAME + "_other", app_role=APP_ROLE, root=root)


def load_agentmem(admin: psycopg.Connection, ds: Dataset) -> dict:
    """COPY the data set into agentmem's tables (one conversation per tenant, user 'user') through the
    shared loader, the HNSW index dropped and rebuilt."""
    bulk = Bulk(admin, model=MODEL)
    t0 = time.perf_counter()
    with bulk.hnsw_dropped(tables=["message_embeddings"]):
        bulk.load_messages([(ds.name(t), "user") for t in ds.tenant], ds.vectors, ids=ds.ids,
                           contents=[f"message {i}" for i in range(len(ds.ids))], per_conversation=len(ds.ids))
        t1 = time.perf_counter()
    # as after any bulk load: statistics, visibility map and hint bits now, not
    # an autovacuum of the fresh tables running under the measurements
    admin.execute("vacuum (analyze) agentmem.conversations, agentmem.messages, agentmem.message_embeddings")
    t2 = time.perf_counter()
    return {"copy_s": t1 - t0, "index_s": t2 - t1}


def load_langgraph(admin: psycopg.Connection, ds: Dataset) -> dict:
    """COPY the same data into PostgresStore's tables (namespace (tenant, user), key = message id)."""
    prefixes = [f"{ds.name(t)}.user" for t in ds.tenant]
    took = copy_into_postgresstore(admin, prefixes, ds.ids, [f"message {i}" for i in range(len(prefixes))], ds.vectors)
    return {"copy_s": took["copy_s"], "index_s": took["index_s"] + took["vacuum_s"]}  # as agentmem's: vacuum included


def make_queries(ds: Dataset, n: int) -> np.ndarray:
    q = ds.vectors[ds.rng.integers(0, len(ds.vectors), n)] + ds.rng.standard_normal((n, DIM)).astype(
        np.float32) * 0.02
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def exact_top(ds: Dataset, tenant: int, q: np.ndarray) -> set:
    idx = np.flatnonzero(ds.tenant == tenant)
    best = idx[np.argsort(-(ds.vectors[idx] @ q))[:K]]
    return {str(ds.ids[i]) for i in best}


def bench_search(ds: Dataset, mem: Memory, lg_store, queries: np.ndarray, tenants: list[int],
                 lookup: dict) -> dict:
    # Each query runs on both systems back to back (which one first alternates),
    # so that both share whatever else the machine is doing at that moment.
    lat: dict = {"agentmem": [], "langgraph": []}
    rec: dict = {"agentmem": [], "langgraph": []}
    short = {"agentmem": 0, "langgraph": 0}
    for n, (q, t) in enumerate(zip(queries, tenants)):
        truth = exact_top(ds, t, q)
        for system in (("agentmem", "langgraph") if n % 2 == 0 else ("langgraph", "agentmem")):
            t0 = time.perf_counter()
            if system == "agentmem":
                got = [str(h.message_id) for h in
                       mem.for_tenant(ds.name(t)).search_messages("user", q, K, model=MODEL)]
            else:
                key = f"q{len(lookup)}"
                lookup[key] = q
                got = [item.key for item in lg_store.search((ds.name(t), "user"), query=key, limit=K)]
            lat[system].append((time.perf_counter() - t0) * 1000)
            short[system] += len(got) < min(K, len(truth))
            rec[system].append(len(truth & set(got)) / min(K, len(truth)))
    return {system: {"p50": percentile(lat[system], 50), "p95": percentile(lat[system], 95),
                     "recall": float(np.mean(rec[system])), "short": short[system], "n": len(lat[system])}
            for system in lat}


def turns(n: int, first, second):
    """Both, in an order that alternates with n."""
    return (first, second) if n % 2 == 0 else (second, first)


def rotated(n: int, items: list) -> list:
    """items in an order that turns with n: each goes first, second, ... in turn."""
    k = n % len(items)
    return items[k:] + items[:k]


def bench_store(ds: Dataset, mems: dict[str, Memory], lg_store, sample: int, lookup: dict) -> dict:
    """Messages per second of each agentmem (mems: this checkout's, and --other's when given) and of
    PostgresStore, one message per call and in batches of 250, taking turns by chunks of 250."""
    from langgraph.store.base import PutOp
    rng = np.random.default_rng(99)
    vecs = clustered(sample, rng, ds.centres)
    texts = [f"throughput message {i}" for i in range(sample)]
    for t, v in zip(texts, vecs):
        lookup[t] = v
    writers = {}
    for n, (system, mem) in enumerate(mems.items()):
        m = mem.for_tenant("tput")
        # Each system writes into an index of its own, except this checkout's
        # logins (index_later, prepare=True), which share agentmem's: they get
        # vectors of their own from the same clusters. The same vector already
        # in an HNSW index is a cheap insert (pgvector adds the row to the
        # element it finds), which made index_pending_vectors, moving copies of
        # what the first login had indexed, look 3 to 5 times cheaper a vector.
        own = clustered(sample, np.random.default_rng(99 + n), ds.centres) if system in SHARES_INDEX else vecs
        writers[system] = (m, m.start_conversation("user"), own)
    half = sample // 2
    systems = [*mems, "langgraph"]
    spent = {(system, mode): 0.0 for system in systems for mode in ("one per call", "batches of 250")}

    def timed(key, fn):
        t0 = time.perf_counter()
        fn()
        spent[key] += time.perf_counter() - t0

    def one(system, chunk):
        if system == "langgraph":
            for j in chunk:
                lg_store.put(("tput", "user"), f"k{j}", {"text": texts[j]})
        else:
            m, cid, own = writers[system]
            for j in chunk:
                m.store_message(cid, "user", texts[j], own[j], model=MODEL)

    def batch(system, j):
        if system == "langgraph":
            lg_store.batch([PutOp(("tput", "user"), f"k{x}", {"text": texts[x]}) for x in range(j.start, j.stop)])
        else:
            m, cid, own = writers[system]
            m.store_messages(cid, ["user"] * len(texts[j]), texts[j], list(own[j]), model=MODEL)

    # The systems take turns by chunks of 250 messages (which one first turns),
    # so that none gets a quieter machine or a warmer cache.
    for n, i in enumerate(range(0, half, 250)):
        chunk = range(i, min(i + 250, half))
        for system in rotated(n, systems):
            timed((system, "one per call"), lambda system=system: one(system, chunk))
    for n, i in enumerate(range(half, sample, 250)):
        j = slice(i, min(i + 250, sample))
        for system in rotated(n, systems):
            timed((system, "batches of 250"), lambda system=system: batch(system, j))
    return {key: (half if key[1] == "one per call" else sample - half) / s for key, s in spent.items()}


def bench_cache(app_url: str) -> dict:
    from agentmem_dev.ollama_stub import OllamaStub
    from agentmem.embed import OllamaEmbedder
    stub = OllamaStub().start()
    try:
        emb = OllamaEmbedder(MODEL, host=stub.host, batch_size=100)
        with Memory.connect(app_url, tenant="reindex", embedder=emb, max_size=2) as mem:
            texts = [f"document {i} about topic {i % 37} and item {i * 7 % 101}" for i in range(5000)]
            t0 = time.perf_counter()
            mem.embed_documents(texts)
            first_s, first_texts, first_calls = time.perf_counter() - t0, len(stub.embedded_texts), len(stub.embed_calls)
            changed = list(texts)
            for i in range(0, 5000, 50):  # 2% changed
                changed[i] = texts[i] + " (edited)"
            stub.reset()
            t0 = time.perf_counter()
            mem.embed_documents(changed)
            return {"texts": 5000, "first_texts": first_texts, "first_calls": first_calls, "first_s": first_s,
                    "second_texts": len(stub.embedded_texts), "second_calls": len(stub.embed_calls),
                    "second_s": time.perf_counter() - t0}
    finally:
        stub.stop()


FLOOR_SQL = """
create schema floor_probe;
create table floor_probe.messages (
    tenant_id text not null, conversation_id uuid not null, message_id bigint generated by default as identity,
    role text not null, content text not null, primary key (tenant_id, conversation_id, message_id));
create table floor_probe.vectors (
    tenant_id text not null, conversation_id uuid not null, message_id bigint not null,
    embedding vector(%(dim)s) not null, primary key (tenant_id, conversation_id, message_id));
create function floor_probe.store_messages(p_tenant text, p_conversation uuid, p_roles text[], p_contents text[],
                                           p_embeddings vector[])
returns setof bigint language sql volatile as $$
    with u as (
        select nextval(pg_get_serial_sequence('floor_probe.messages', 'message_id')) as id, r, c, e
        from unnest(p_roles, p_contents, p_embeddings) as u (r, c, e)),
    m as (
        insert into floor_probe.messages (tenant_id, conversation_id, message_id, role, content)
        select p_tenant, p_conversation, u.id, u.r, u.c from u)
    insert into floor_probe.vectors (tenant_id, conversation_id, message_id, embedding)
    select p_tenant, p_conversation, u.id, u.e from u
    returning message_id
$$;
create function floor_probe.store_message(p_tenant text, p_conversation uuid, p_role text, p_content text,
                                          p_embedding vector)
returns bigint language sql volatile as $$
    with m as (
        insert into floor_probe.messages (tenant_id, conversation_id, role, content)
        values (p_tenant, p_conversation, p_role, p_content) returning message_id)
    insert into floor_probe.vectors (tenant_id, conversation_id, message_id, embedding)
    select p_tenant, p_conversation, m.message_id, p_embedding from m
    returning message_id
$$;
"""


class FloorStore:
    """What PostgresStore's put writes (the message's row, its vector's row and that vector's HNSW insert,
    pgvector's defaults) in one round trip of a SQL function, on an autocommit connection, the vector sent in
    binary as this driver sends it; nothing else (no tenant check, row-level security, text index, word counts,
    ordering or time rules, and none of LangGraph's code): the floor the other stores' rates are read against.
    bench_store drives it as it drives Memory."""

    def __init__(self, url: str):
        self.conn = connect(url)
        self.tenant = None

    @staticmethod
    def load(admin: psycopg.Connection) -> None:
        """The schema, and the bench's 10,000 (or 100,000) vectors copied from PostgresStore's table, then its
        HNSW index built and both tables vacuumed, as each system's bulk load is."""
        admin.execute("drop schema if exists floor_probe cascade")
        admin.execute(FLOOR_SQL % {"dim": DIM})
        admin.execute("insert into floor_probe.messages (tenant_id, conversation_id, role, content) "
                      "select split_part(v.prefix, '.', 1), '00000000-0000-0000-0000-000000000000', 'user', v.key "
                      "from store_vectors as v order by v.prefix, v.key")
        admin.execute("insert into floor_probe.vectors (tenant_id, conversation_id, message_id, embedding) "
                      "select m.tenant_id, m.conversation_id, m.message_id, v.embedding "
                      "from floor_probe.messages as m inner join store_vectors as v on v.key = m.content")
        admin.execute("create index on floor_probe.vectors using hnsw (embedding vector_cosine_ops)")
        admin.execute("vacuum (analyze) floor_probe.messages, floor_probe.vectors")

    def for_tenant(self, tenant: str) -> "FloorStore":
        self.tenant = tenant
        return self

    def start_conversation(self, user: str) -> uuid.UUID:
        return uuid.uuid4()

    def store_message(self, conversation_id, role, content, embedding, model=None) -> int:
        return self.conn.execute(
            "select floor_probe.store_message(p_tenant => %s, p_conversation => %s, p_role => %s, p_content => %s, "
            "p_embedding => %b)", (self.tenant, conversation_id, role, content, Vector(embedding))).fetchone()[0]

    def store_messages(self, conversation_id, roles, contents, embeddings, model=None) -> list:
        return self.conn.execute(
            "select floor_probe.store_messages(p_tenant => %s, p_conversation => %s, p_roles => %s, "
            "p_contents => %s, p_embeddings => %b)",
            (self.tenant, conversation_id, list(roles), list(contents), [Vector(e) for e in embeddings])).fetchall()

    def close(self) -> None:
        self.conn.close()


def index_later_url(url: str) -> str:
    """The application login's URL with agentmem.index_later on for its sessions, and room for the whole
    sample of the benchmark's one writing conversation (agentmem.index_later_max_rows, default 1,000)."""
    return (url + ("&" if "?" in url else "?")
            + "options=-c%20agentmem.index_later%3Don%20-c%20agentmem.index_later_max_rows%3D100000")


def run_size(server_url: str, n: int, sample: int, queries_per_class: int, other: Path | None = None,
             index_later: bool = False, prepared: bool = False, floor: bool = False) -> dict:
    from langgraph.store.postgres import PostgresStore
    print(f"--- {n:,} messages", flush=True)
    ds = Dataset(n)
    admin_url, app_url = fresh_database(server_url)
    lookup: dict = {}
    mems: dict[str, Memory] = {}
    if other is not None:  # the same data in a database migrated from the other checkout, for its store rates
        other_admin_url, other_app_url = fresh_database(server_url, other)
        with connect(other_admin_url) as other_admin:
            other_admin.execute("set maintenance_work_mem = '512MB'")
            load_agentmem(other_admin, ds)
        mems[f"agentmem ({other.name})"] = Memory.connect(other_app_url, tenant="t0000", max_size=2)

    def embed(texts):
        return [lookup[t].tolist() for t in texts]

    if index_later:  # this checkout's login with the vectors' index inserts left to index_pending_vectors
        mems["agentmem (index_later)"] = Memory.connect(index_later_url(app_url), tenant="t0000", max_size=2)
    if prepared:  # the driver with server-side prepared statements, as PostgresStore runs (prepare_threshold 0)
        mems["agentmem (prepare=True)"] = Memory.connect(app_url, tenant="t0000", max_size=2, prepare=True)
    result: dict = {"n": n}
    with connect(admin_url) as admin, Memory.connect(app_url, tenant="t0000", max_size=2) as mem, \
            PostgresStore.from_conn_string(admin_url, index={"dims": DIM, "embed": embed, "fields": ["text"],
                                                             "distance_type": "cosine"}) as lg:
        lg.setup()
        admin.execute("set maintenance_work_mem = '512MB'")
        result["load_agentmem"] = load_agentmem(admin, ds)
        print("agentmem loaded", result["load_agentmem"], flush=True)
        result["load_langgraph"] = load_langgraph(admin, ds)
        print("langgraph loaded", result["load_langgraph"], flush=True)
        if floor:
            FloorStore.load(admin)
            mems["floor"] = FloorStore(admin_url)
        result["own_indexes"] = create_tenant_indexes(admin, MODEL)
        print("tenant indexes", result["own_indexes"], flush=True)
        result["store"] = bench_store(ds, {"agentmem": mem, **mems}, lg, sample, lookup)
        if index_later:  # the job that pays the index inserts index_later left out of the calls
            pending = admin.execute("select count(*) from agentmem.message_embeddings where embedding is null").fetchone()[0]
            t0 = time.perf_counter()
            moved = admin.execute("select agentmem.index_pending_vectors()").fetchone()[0]
            result["index_pending"] = {"pending": pending, "moved": moved, "s": time.perf_counter() - t0}
            print("index_pending_vectors", result["index_pending"], flush=True)
        for m in mems.values():
            m.close()
        print("store", result["store"], flush=True)
        counts = np.bincount(ds.tenant, minlength=TENANTS)
        small = [int(t) for t in ds.rng.choice(np.arange(1, TENANTS), queries_per_class)]
        for label, tenants in (("big tenant (30%)", [0] * queries_per_class),
                               (f"small tenants ({int(np.median(counts[1:]))} messages each)", small)):
            qs = make_queries(ds, queries_per_class)
            # warm both
            bench_search(ds, mem, lg, qs[:5], tenants[:5], lookup)
            result.setdefault("search", {})[label] = bench_search(ds, mem, lg, qs, tenants, lookup)
            print(label, result["search"][label], flush=True)
        result["cache"] = bench_cache(app_url) if n == 10_000 else None
    return result


def report(results: list[dict], args, elapsed: float) -> str:
    cmd = command()
    lines = [
        "## Conversation memory: agentmem vs LangGraph PostgresStore",
        "",
        f"{datetime.date.today()}, {os.cpu_count()} cores (shared), embedded PostgreSQL 18 + pgvector. "
        f"Command: `{cmd}` ({elapsed / 60:.1f} min).",
        "",
        f"Data: N messages over {TENANTS:,} tenants, one tenant holding 30% and the rest spread evenly; one "
        f"user per tenant; synthetic clustered unit vectors of {DIM} dimensions (the all-minilm model), the same "
        "vectors in both systems. Bulk data loaded with COPY into each system's tables with its HNSW index "
        "rebuilt afterwards (both: pgvector defaults, cosine), then `vacuum (analyze)` of both systems' tables. "
        "Store throughput: the systems take turns by chunks of 250 messages, which goes first turning; searches: each query runs on "
        "both systems back to back, alternating which goes first. Searches go through each system's Python API "
        "(agentmem: `Memory.search_messages`, set_tenant and the call in one round trip, one transaction, under RLS; LangGraph: "
        "`PostgresStore.search` on the namespace (tenant, user), embedding function = a dict lookup). "
        "Recall@10 is against an exact scan of the tenant's vectors; 'short' counts searches that returned "
        "fewer than k rows although k existed.",
        "",
    ]
    for r in results:
        n = r["n"]
        lines += [f"### {n:,} messages", "",
                  f"Bulk load (COPY + HNSW build): agentmem {r['load_agentmem']['copy_s']:.1f} s + "
                  f"{r['load_agentmem']['index_s']:.1f} s, PostgresStore {r['load_langgraph']['copy_s']:.1f} s + "
                  f"{r['load_langgraph']['index_s']:.1f} s. The DBA's step, agentmem's own indexes for the "
                  "tenants `agentmem.tenants_needing_index` lists (`agentmem.create_tenant_index`): "
                  + (", ".join(f"{t} {secs:.1f} s" for t, secs in r["own_indexes"]) or "none listed") + ".", "",
                  ]
        others = sorted({system for system, _ in r["store"]} - {"agentmem", "langgraph"})
        lines += ["| store throughput (messages/s, with embedding) | agentmem | PostgresStore | ratio |"
                  + "".join(f" {o} | its ratio |" for o in others),
                  "|---|---:|---:|---:|" + "---:|---:|" * len(others)]
        for mode in ("one per call", "batches of 250"):
            a, b = r["store"][("agentmem", mode)], r["store"][("langgraph", mode)]
            lines.append(f"| {mode} | {a:,.0f} | {b:,.0f} | {a / b:.2f}× |"
                         + "".join(f" {r['store'][(o, mode)]:,.0f} | {r['store'][(o, mode)] / b:.2f}× |"
                                   for o in others))
        if "agentmem (prepare=True)" in others:
            lines += ["", "agentmem (prepare=True): this checkout's driver connected with `prepare=True` (psycopg "
                          "prepares a statement run five times on a connection), as PostgresStore runs "
                          "(`prepare_threshold=0`); the driver's default, `prepare=False`, is what works behind a "
                          "transaction pooler (docs/pooling.md), at one parse and plan per call.", ""]
        if "floor" in others:
            lines += ["", "floor: `FloorStore`, what PostgresStore's put writes (the message's row, its vector's "
                          "row and that vector's HNSW insert, pgvector's defaults, into tables holding the same "
                          "vectors) by one SQL function in one round trip, the vector in binary, autocommit; "
                          "nothing else: PostgresStore's SQL work without LangGraph's code around it, the floor the "
                          "other rates are read against.", ""]
        own = {"agentmem (index_later)", "agentmem (prepare=True)", "floor"}
        if set(others) - own:
            lines += ["", f"{', '.join(o for o in others if o not in own)}: the same data in a "
                          "database migrated from that checkout (`--other`), written by this checkout's driver in "
                          "the same turns.", ""]
        if "index_pending" in r:
            p = r["index_pending"]
            lines += ["", "agentmem (index_later): this checkout's login with `agentmem.index_later = on` (each "
                          "vector written to pending_embedding, no HNSW insert in the call; `index_later_max_rows` 100,000 so that "
                          "the one writing conversation's whole sample waits), into the same tables "
                          "in the same turns, with vectors of its own from the same clusters (a copy of a vector "
                          f"already in the index is a cheap insert). Afterwards `agentmem.index_pending_vectors()` moved the {p['moved']:,} "
                          f"pending vectors ({p['pending']:,} counted) into the index in {p['s']:.2f} s "
                          f"({p['moved'] / max(p['s'], 1e-9):,.0f} per second): the index inserts the calls left out, "
                          "paid by the job.", ""]
        lines += ["", "| search, k=10 | agentmem p50 / p95 ms | recall@10 | short | "
                      "PostgresStore p50 / p95 ms | recall@10 | short | p95 ratio |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for label, s in r["search"].items():
            a, b = s["agentmem"], s["langgraph"]
            lines.append(f"| {label}, {a['n']} queries | {a['p50']:.2f} / {a['p95']:.2f} | {a['recall']:.3f} | "
                         f"{a['short']} | {b['p50']:.2f} / {b['p95']:.2f} | {b['recall']:.3f} | {b['short']} | "
                         f"{b['p95'] / a['p95']:.1f}× faster |")
        lines.append("")
        c = r.get("cache")
        if c:
            saved = c["texts"] - c["second_texts"]
            lines += ["Embedding cache on a re-index of 5,000 texts where 2% changed (OllamaEmbedder, batch 100, "
                      "against the Ollama stub): first pass embedded "
                      f"{c['first_texts']:,} texts in {c['first_calls']} requests ({c['first_s']:.2f} s); the "
                      f"re-index embedded {c['second_texts']:,} texts in {c['second_calls']} request(s) "
                      f"({c['second_s']:.2f} s): {saved:,} of {c['texts']:,} embeddings "
                      f"({saved / c['texts']:.0%}) came from the cache.", ""]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true", help="10k messages only")
    parser.add_argument("--database-url", help="a server to use (default: an embedded one on --port)")
    parser.add_argument("--port", type=int, default=55452)
    parser.add_argument("--other", type=Path, help="another checkout whose store rates run in the same turns")
    parser.add_argument("--index-later", action="store_true",
                        help="also store through a login with agentmem.index_later on, then time index_pending_vectors")
    parser.add_argument("--store-sample", type=int, default=1000,
                        help="messages stored by each system at 10,000 (half one per call, half in batches)")
    parser.add_argument("--prepared", action="store_true",
                        help="also store through the driver with prepare=True (server-side prepared statements)")
    parser.add_argument("--floor", action="store_true",
                        help="also store through FloorStore: PostgresStore's SQL work (a message row, its vector's "
                             "row and HNSW insert) by one SQL function and nothing else")
    args = parser.parse_args()
    try:
        import langgraph.store.postgres  # noqa: F401
    except ImportError:
        raise SystemExit("bench_conversations needs langgraph-checkpoint-postgres: "
                         "pip install 'pg-agentmem[bench]' (or pip install langgraph-checkpoint-postgres)")
    server_url = args.database_url or start_server(args.port)
    started = time.perf_counter()
    results = [run_size(server_url, 10_000, args.store_sample, 100, args.other, args.index_later, args.prepared,
                        args.floor)]
    if not args.quick:
        results.append(run_size(server_url, 100_000, 2 * args.store_sample, 100, args.other, args.index_later,
                                args.prepared, args.floor))
    write_report(args.out, report(results, args, time.perf_counter() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
