"""Benchmark: erasing a user, and retention throughput while searches keep running.

    .venv/bin/python bench/bench_forget.py --out bench/results/forget.md [--quick]

Starts its own embedded PostgreSQL (port 55433, data in .pgdata/bench-forget) unless
--database-url is given, migrates a fresh database and measures:

1. forget_user on a user with 10,000 messages (with embeddings), 1,000 facts and
   1,000 cached answers (plus hit-log rows), among other users' data;
2. apply_retention on 100,000 expired messages (with embeddings) in batches,
   rows per second, while a second connection keeps running search_messages for
   another user; that search's latency during retention vs. without it.

Vectors are the lexical stub embedding (768 dims, nomic-embed-text's slot): the
timings are about the database, not about the embedding model.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
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

DIM = 768


def rand_vecs(rng, n):
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def connect(url):
    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    return conn


def load_messages(conn, tenant, user, n, rng, age_days=0, per_conv=500):
    """n messages (with embeddings) of one user via the batch API, optionally backdated."""
    conn.execute("select agentmem.set_tenant(tenant_id => %s)", (tenant,))
    ids = []
    for start in range(0, n, per_conv):
        size = min(per_conv, n - start)
        conv = conn.execute("select agentmem.start_conversation(user_id => %s)", (user,)).fetchone()[0]
        vecs = rand_vecs(rng, size)
        rows = conn.execute(
            "select message_id from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
            "embeddings => %s::vector[])",
            (conv, ["user"] * size, [f"{user} message {start + i} {uuid.uuid4().hex[:8]}" for i in range(size)],
             [v for v in vecs])).fetchall()
        ids += [r[0] for r in rows]
    if age_days:
        conn.execute("update agentmem.messages set created_at = now() - %s * interval '1 day' "
                     "where tenant_id = %s and user_id = %s", (age_days, tenant, user))
    return ids


def load_user(conn, tenant, user, n_msgs, n_facts, n_answers, rng):
    ids = load_messages(conn, tenant, user, n_msgs, rng)
    fv = rand_vecs(rng, n_facts)
    for i in range(n_facts):
        conn.execute("select * from agentmem.upsert_fact(user_id => %s, subject => %s, fact => %s, "
                     "embedding => %s, source_message_ids => %s::uuid[])",
                     (user, f"s{i}", f"{user} fact {i}", fv[i], [ids[i % len(ids)]]))
    av = rand_vecs(rng, n_answers)
    for i in range(n_answers):
        q = f"{user} question {i} {uuid.uuid4().hex[:6]}"
        conn.execute("select * from agentmem.cache_store(question => %s, question_embedding => %s, "
                     "answer => 'an answer', user_id => %s, safe_to_share => true)", (q, av[i], user))
        if i % 4 == 0:
            conn.execute("select * from agentmem.cache_lookup(question => %s, question_embedding => %s, "
                         "user_id => %s)", (q, av[i], user))


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def search_loop(url, stop, lat, rng_seed):
    rng = np.random.default_rng(rng_seed)
    conn = connect(url)
    conn.execute("select agentmem.set_tenant(tenant_id => 'other')")
    qs = rand_vecs(rng, 64)
    i = 0
    while not stop.is_set():
        t = time.perf_counter()
        conn.execute("select count(*) from agentmem.search_messages(user_id => 'reader', query_embedding => %s, "
                     "k => 10)", (qs[i % 64],)).fetchone()
        lat.append((time.perf_counter() - t) * 1000)
        i += 1
    conn.close()


def measure_searches(url, seconds):
    lat, stop = [], threading.Event()
    t = threading.Thread(target=search_loop, args=(url, stop, lat, 7))
    t.start()
    time.sleep(seconds)
    stop.set()
    t.join()
    return lat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "bench/results/forget.md"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--database-url")
    args = ap.parse_args()
    scale = 10 if args.quick else 1
    n_msgs, n_facts, n_answers = 10_000 // scale, 1_000 // scale, 1_000 // scale
    n_expired, batch = 100_000 // scale, 5_000 // (scale if args.quick else 1)
    rng = np.random.default_rng(1)

    if args.database_url:
        server_url = args.database_url
    else:
        server_url = devserver.start(ROOT / ".pgdata" / "bench-forget", port=55433)
    dbname = "agentmem_bench_forget"
    with psycopg.connect(server_url, autocommit=True) as c:
        c.execute(f"drop database if exists {dbname} with (force)")
        c.execute(f"create database {dbname}")
    url = server_url.rsplit("/", 1)[0] + "/" + dbname
    Migrator(url, Source.load(ROOT)).migrate()
    conn = connect(url)  # superuser: apply_retention needs to see every tenant

    # -- 1. erase a user ---------------------------------------------------------
    t0 = time.perf_counter()
    load_user(conn, "acme", "victim", n_msgs, n_facts, n_answers, rng)
    load_user(conn, "acme", "bystander", n_msgs // 5, n_facts // 5, n_answers // 5, rng)
    load_s = time.perf_counter() - t0
    conn.execute("vacuum analyze")
    conn.execute("select agentmem.set_tenant(tenant_id => 'acme')")
    t = time.perf_counter()
    receipt = conn.execute("select rows_removed from agentmem.forget_user(user_id => 'victim')").fetchone()[0]
    forget_s = time.perf_counter() - t
    total_removed = sum(v for v in receipt.values())

    # -- 2. retention under search load -----------------------------------------
    t0 = time.perf_counter()
    load_messages(conn, "other", "reader", 20_000 // scale, rng)  # the searched, unexpired data
    load_messages(conn, "acme", "old", n_expired, rng, age_days=400, per_conv=1000)
    load2_s = time.perf_counter() - t0
    conn.execute("vacuum analyze")
    conn.execute("select agentmem.set_tenant(tenant_id => 'acme')")
    conn.execute("select agentmem.set_retention_policy(kind => 'messages', max_age => '365 days')")
    conn.execute("reset agentmem.tenant_id")
    window = 5 if args.quick else 15
    idle = measure_searches(url, window)

    lat, stop = [], threading.Event()
    searcher = threading.Thread(target=search_loop, args=(url, stop, lat, 7))
    searcher.start()
    time.sleep(0.5)
    lat.clear()
    runs, removed = 0, 0
    t = time.perf_counter()
    while True:
        row = conn.execute("select (rows_removed ->> 'messages')::bigint, error "
                           "from agentmem.apply_retention(batch_size => %s)", (batch,)).fetchone()
        runs += 1
        assert row[1] is None, row[1]
        removed += row[0]
        if row[0] == 0:
            break
    retention_s = time.perf_counter() - t
    stop.set()
    searcher.join()
    left = conn.execute("select count(*) from agentmem.messages where user_id = 'old'").fetchone()[0]

    nproc = os.cpu_count()
    cmd = "python bench/bench_forget.py " + " ".join(sys.argv[1:])
    pgver = conn.execute("show server_version").fetchone()[0]
    report = f"""# Forgetting and retention benchmark

- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC}
- machine: {nproc} CPU cores (`nproc`), shared with other jobs; PostgreSQL {pgver} (embedded), pgvector
- command: `{cmd}`{" (quick: sizes / 10)" if args.quick else ""}
- vectors: random unit vectors, 768 dimensions (model slot nomic-embed-text); HNSW index per model

## Erasing a user (`agentmem.forget_user`)

| user's data | time |
|---|---|
| {n_msgs:,} messages with embeddings, {n_facts:,} facts, {n_answers:,} cached answers (+{n_answers // 4:,} hit-log rows); another user with a fifth of that in the same tenant | **{forget_s * 1000:,.0f} ms** for {total_removed:,} rows in one transaction |

Receipt: `{receipt}`

## Retention (`agentmem.apply_retention`) on {n_expired:,} expired messages

| measure | value |
|---|---|
| batch size per call | {batch:,} |
| calls until nothing left | {runs} |
| rows removed (messages; embeddings go by cascade) | {removed:,} (left: {left}) |
| wall time | {retention_s:.1f} s |
| **throughput** | **{removed / retention_s:,.0f} messages/s** (each with its embedding row and HNSW entry) |

## Search latency of another tenant while retention runs

`search_messages(k => 10)` for a user with {20_000 // scale:,} messages, one connection in a loop.

| | searches | p50 | p95 | p99 |
|---|---|---|---|---|
| without retention ({window} s) | {len(idle)} | {statistics.median(idle):.1f} ms | {percentile(idle, 95):.1f} ms | {percentile(idle, 99):.1f} ms |
| during retention | {len(lat)} | {statistics.median(lat):.1f} ms | {percentile(lat, 95):.1f} ms | {percentile(lat, 99):.1f} ms |
| ratio (during / without) | | {statistics.median(lat) / statistics.median(idle):.2f}x | {percentile(lat, 95) / percentile(idle, 95):.2f}x | |

Loading took {load_s + load2_s:.0f} s (not measured above).
"""
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(report)
    print(report)
    conn.close()


if __name__ == "__main__":
    main()
