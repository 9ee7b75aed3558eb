"""Index upkeep by itself: a big user's search before and after one agentmem.apply_index_upkeep run,
beside the same user after the DBA's manual agentmem.create_tenant_index step.

    .venv/bin/python bench/bench_index_upkeep.py --out bench/results/index_upkeep.md

24,000 random unit vectors of 768 dimensions (nomic-embed-text's size, the hardest case for HNSW): a user
alone in its tenant holds 30% (7,200 rows), the rest is spread over 1,000 small tenants, all interleaved
in the heap; loaded with COPY, the model's shared HNSW index built after (pgvector's defaults). The user's
searches (one of its vectors plus noise, k = 10, search_messages through SQL as the application role,
set_tenant once per connection) are timed in three states: before any tenant index (the shared index with
escalating ef_search), after one upkeep run (which builds what agentmem.tenants_needing_index lists), and
after dropping those indexes and building them with the manual step instead. Recall@10 is against an
exact scan (numpy). Also timed: the upkeep run (its builds block writes to message_embeddings for that
long) and a second run straight after, which has nothing to do.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
sys.path.insert(0, str(HERE))

from common import (Bulk, command, connect, fresh_database, p50_p95, start_server,  # noqa: E402
                    write_report)

N, SHARE, SMALL_TENANTS, DIM, K = 24_000, 0.30, 1000, 768, 10
MODEL = "nomic-embed-text"
DBNAME = "agentmem_bench_index_upkeep"
SEARCH = ("select message_id from agentmem.search_messages(user_id => 'alice', query_embedding => %s, "
          "k => %s, model => %s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="the same run (make bench --quick): it is small")
    parser.add_argument("--database-url", help="a server to use (default: an embedded one on --port)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("AGENTMEM_EMBEDDED_PORT", 55452)))
    args = parser.parse_args()
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    server_url = args.database_url or start_server(args.port)
    admin_url, app_url = fresh_database(server_url, DBNAME)

    rng = np.random.default_rng(24)
    vectors = rng.standard_normal((N, DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    mine = int(N * SHARE)
    owners = [("big", "alice")] * mine + [(f"small{i % SMALL_TENANTS:04d}", "alice") for i in range(N - mine)]
    order = rng.permutation(N)
    owners, vectors = [owners[i] for i in order], vectors[order]
    ids = [uuid.uuid4() for _ in range(N)]
    members = np.array([i for i, o in enumerate(owners) if o[0] == "big"])

    with connect(admin_url) as admin:
        t0 = time.perf_counter()
        bulk = Bulk(admin, model=MODEL, rng=rng)
        with bulk.hnsw_dropped(tables=("message_embeddings",)):
            bulk.load_messages(owners, vectors, ids=ids)
        admin.execute("vacuum (analyze) agentmem.messages, agentmem.message_embeddings")
        load_s = time.perf_counter() - t0

    qrng = np.random.default_rng(5)
    picks = qrng.choice(members, args.queries)
    queries = vectors[picks] + qrng.standard_normal((args.queries, DIM), dtype=np.float32) * 0.02
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    truth = [{ids[i] for i in members[np.argsort(-(vectors[members] @ q))[:K]]} for q in queries]

    def measure(label: str) -> dict:
        with connect(app_url, tenant="big") as app:
            for q in queries[:5]:  # warm
                app.execute(SEARCH, (q, K, MODEL)).fetchall()
            times, recalls = [], []
            for q, want in zip(queries, truth):
                t = time.perf_counter()
                got = {r[0] for r in app.execute(SEARCH, (q, K, MODEL)).fetchall()}
                times.append((time.perf_counter() - t) * 1000)
                recalls.append(len(got & want) / K)
        p50, p95 = p50_p95(times)
        row = {"label": label, "p50": p50, "p95": p95, "recall": float(np.mean(recalls)), "load": os.getloadavg()[0]}
        print(row, flush=True)
        return row

    rows = [measure("before: no tenant index (the model's shared index)")]
    with connect(admin_url) as admin:
        t0 = time.perf_counter()
        run = admin.execute("select rows_removed, error from agentmem.apply_index_upkeep()").fetchone()
        upkeep_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = admin.execute("select rows_removed, error from agentmem.apply_index_upkeep()").fetchone()
        again_s = time.perf_counter() - t0
    rows.append(measure("after one apply_index_upkeep run"))
    with connect(admin_url) as admin:
        admin.execute("select agentmem.drop_tenant_index(tenant_id => 'big', model => %s)", (MODEL,))
        t0 = time.perf_counter()
        admin.execute("select agentmem.create_tenant_index(tenant_id => 'big', model => %s)", (MODEL,))
        manual_s = time.perf_counter() - t0
    rows.append(measure("after the manual create_tenant_index step"))

    manual = rows[2]["p50"]
    table = ["| state | p50 / p95 ms | recall@10 | p50 / manual step's | load average |",
             "|---|---:|---:|---:|---:|"]
    table += [f"| {r['label']} | {r['p50']:.1f} / {r['p95']:.1f} | {r['recall']:.3f} | {r['p50'] / manual:.2f}× "
              f"| {r['load']:.1f} |" for r in rows]
    text = "\n".join([
        "## Index upkeep by itself: a 30% user before and after one upkeep run", "",
        f"{datetime.date.today().isoformat()}, 2 cores shared with other work (load average {load_start:.1f} at "
        f"the start, {os.getloadavg()[0]:.1f} at the end), embedded PostgreSQL + pgvector. Command: `{command()}` "
        f"({(time.perf_counter() - started) / 60:.1f} min).", "",
        f"{N:,} random unit vectors of {DIM} dimensions; user alice alone in tenant big holds {mine:,} "
        f"({SHARE:.0%}); the rest over {SMALL_TENANTS:,} small tenants, interleaved in the heap (COPY and the "
        f"shared HNSW build: {load_s:.1f} s). {args.queries} searches per state (k = {K}, one of the user's "
        "vectors plus noise, search_messages through SQL as the application role). Target: the p50 after "
        "one upkeep run within 1.3× of the p50 after the manual step.", "",
        *table, "",
        f"The upkeep run took {upkeep_s:.1f} s (built {run[0]['built']}, error {run[1]!r}): its plain CREATE INDEX "
        "blocks writes to message_embeddings for that long. A second run straight after took "
        f"{again_s * 1000:.0f} ms and did nothing (built {again[0]['built']}, dropped {again[0]['dropped']}). "
        f"The manual create_tenant_index took {manual_s:.1f} s.", ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
