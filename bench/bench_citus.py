"""agentmem on the three-node Citus cluster against a single node, same machine, same data.

    bash scripts/citus.sh install && bash scripts/citus.sh start
    .venv/bin/python bench/bench_citus.py --out bench/results/citus.md [--messages 100000 --tenants 1000]

Two databases on the coordinator's server (PostgreSQL 18 + Citus 14.0.1 from scripts/citus.sh):
``agentmem_bench_single``, a plain database there (no citus extension: one node), and
``agentmem_bench_cluster``, made on all three nodes and distributed by tenant. Both get the same
synthetic vectors (384 dimensions, clustered, unit length), spread evenly over the tenants, bulk-loaded
by COPY (agentmem_dev.bulk; loading 100,000 messages through the API would take most of an hour on this
machine); then, through the API as the application role, one driver-style transaction per call
(set_tenant local, then the call), each for a random tenant:
* store throughput: batches of 100 (store_messages) and one message per call (store_message);
* search p50/p95: search_messages k=10.
Measured when a fifth of the tenants are loaded and when all are, each call on both systems back to
back (which goes first alternates). The machine has 2 cores shared by all three nodes and the client: the figures show the
cluster's overhead (routing, a network hop per statement), not its speed-up. The projection at the
end says what it assumes."""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "tests"))

import citus_cluster  # noqa: E402
from agentmem_dev.bulk import Bulk  # noqa: E402
from agentmem.migrate import Migrator, Source  # noqa: E402

DIM, MODEL, K, BATCH = 384, "all-minilm", 10, 100
APP_ROLE = "agentmem_bench_app"


def vectors(n: int, rng: np.random.Generator) -> np.ndarray:
    centres = rng.standard_normal((64, DIM)).astype(np.float32)
    v = centres[rng.integers(0, 64, n)] + rng.standard_normal((n, DIM)).astype(np.float32) * 0.35 / np.sqrt(DIM)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def setup(coordinator: str, name: str, distributed: bool) -> tuple[str, str]:
    parts = coordinator.rsplit("/", 1)[0]
    if distributed:
        url = citus_cluster.create_database(coordinator, name)
    else:
        with psycopg.connect(coordinator, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')
            conn.execute(f'create database "{name}"')
        url = f"{parts}/{name}"
    Migrator(url, Source.load(ROOT)).migrate()
    with psycopg.connect(url, autocommit=True) as conn:
        if not conn.execute("select 1 from pg_roles where rolname = %s", (APP_ROLE,)).fetchone():
            conn.execute(f"create role {APP_ROLE} login")
        conn.execute("select agentmem.grant_app_role(role_name => %s)", (APP_ROLE,))
        # tenants are bound to logins: the benchmark's login acts as its own tenants
        conn.execute("select agentmem.grant_tenant(role_name => %s, all_tenants => true)", (APP_ROLE,))
        if distributed:
            conn.execute("select agentmem.distribute()")
    return url, url.replace("postgres@", f"{APP_ROLE}@")


def connect(url: str) -> psycopg.Connection:
    conn = psycopg.connect(url)
    register_vector(conn)
    return conn


def in_tenant(conn: psycopg.Connection, tenant: str, sql: str, args: tuple):
    with conn.transaction():
        conn.execute("select agentmem.set_tenant(tenant_id => %s, local => true)", (tenant,))
        return conn.execute(sql, args).fetchall()


def measure(systems: dict[str, tuple], names: list[str], searches: int, singles: int, batches: int,
            rng: np.random.Generator) -> dict[str, dict]:
    """Through the API as the application role, each call for a random tenant among names, made on
    every system back to back (which goes first alternates): batches of BATCH messages
    (store_messages), one message per call (store_message), then searches."""
    fresh = vectors(batches * BATCH + singles, rng)
    labels = list(systems)
    lat: dict[str, dict[str, list[float]]] = {label: {"batch": [], "single": [], "search": []} for label in labels}

    def each(i: int, kind: str, sql: str, args) -> None:
        for label in labels if i % 2 == 0 else labels[::-1]:
            conn, conv = systems[label]
            t, call = args
            s = time.perf_counter()
            in_tenant(conn, t, sql, call(conv))
            lat[label][kind].append(time.perf_counter() - s)

    for b in range(batches):
        t = names[rng.integers(len(names))]
        rows = list(fresh[b * BATCH:(b + 1) * BATCH])
        each(b, "batch", "select count(*) from agentmem.store_messages(conversation_id => %s, roles => %s, "
             "contents => %s, embeddings => %s, model => %s)",
             (t, lambda conv, t=t, rows=rows, b=b: (conv[t], ["user"] * BATCH, [f"batch {b} #{i}" for i in range(BATCH)],
                                                   rows, MODEL)))
    for q in range(singles):
        t = names[rng.integers(len(names))]
        v = fresh[batches * BATCH + q]
        each(q, "single", "select * from agentmem.store_message(conversation_id => %s, role => 'user', "
             "content => 'one more', embedding => %s, model => %s)", (t, lambda conv, t=t, v=v: (conv[t], v, MODEL)))
    for q, v in enumerate(vectors(searches, rng)):
        t = names[rng.integers(len(names))]
        each(q, "search", "select * from agentmem.search_messages(user_id => 'u', query_embedding => %s, "
             "k => %s, model => %s)", (t, lambda conv, v=v: (v, K, MODEL)))
    out = {}
    for label, d in lat.items():
        out[label] = {"batched": batches * BATCH / sum(d["batch"]), "single": len(d["single"]) / sum(d["single"]),
                      "store_p50": float(np.percentile(d["single"], 50)) * 1000,
                      "store_p95": float(np.percentile(d["single"], 95)) * 1000,
                      "p50": float(np.percentile(d["search"], 50)) * 1000,
                      "p95": float(np.percentile(d["search"], 95)) * 1000}
    return out


def run(systems: dict[str, tuple[str, str]], n: int, tenants: int, searches: int, singles: int, batches: int,
        seed: int) -> dict[str, dict]:
    """n messages over the tenants (user 'u' of each, contiguous blocks), bulk-loaded by COPY as the
    superuser with the HNSW index rebuilt after (agentmem_dev.bulk, the invariants the API keeps), into
    every system; measured when a fifth of the tenants are loaded and again when all are, each call
    on every system back to back."""
    vecs = vectors(n, np.random.default_rng(seed))
    names = [f"tenant-{i:05d}" for i in range(tenants)]
    owner = np.arange(n) * tenants // n
    out: dict[str, dict] = {label: {"by_tenants": {}, "load_s": 0.0} for label in systems}
    conns = {}
    for label, (admin_url, app_url) in systems.items():
        admin = connect(admin_url)
        admin.autocommit = True
        conns[label] = (admin, connect(app_url), Bulk(admin, model=MODEL), {})
    done = 0
    for stage in (max(tenants // 5, 1), tenants):
        end = int(np.searchsorted(owner, stage))
        for label, (admin, conn, bulk, conv) in conns.items():
            t0 = time.perf_counter()
            with bulk.hnsw_dropped(tables=("message_embeddings",)):
                bulk.load_messages([(names[o], "u") for o in owner[done:end]], vecs[done:end])
            out[label]["load_s"] += time.perf_counter() - t0
            for t in names[:stage]:
                if t not in conv:
                    conv[t] = in_tenant(conn, t, "select agentmem.start_conversation(user_id => 'u')", ())[0][0]
        done = end
        res = measure({label: (conn, conv) for label, (_, conn, _, conv) in conns.items()}, names[:stage],
                      searches, singles, batches, np.random.default_rng(seed + stage))
        for label, r in res.items():
            r["messages"] = end
            out[label]["by_tenants"][stage] = r
            print(f"  {label}: {stage} tenants, {end:,} messages: {r}", flush=True)
    for admin, conn, _, _ in conns.values():
        admin.close()
        conn.close()
    return {label: {**o, **o["by_tenants"][tenants]} for label, o in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coordinator", default="postgresql://postgres@127.0.0.1:55430/postgres")
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--searches", type=int, default=500)
    ap.add_argument("--singles", type=int, default=500)
    ap.add_argument("--batches", type=int, default=30, help="store_messages calls of 100 messages per measurement")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "citus.md")
    args = ap.parse_args()
    # The cluster's database first: a role created there is created on the workers too.
    urls = {distributed: setup(args.coordinator, name, distributed)
            for name, distributed in (("agentmem_bench_cluster", True), ("agentmem_bench_single", False))}
    t0 = time.perf_counter()
    results = run({"single node": urls[False], "cluster (coordinator + 2 workers)": urls[True]},
                  args.messages, args.tenants, args.searches, args.singles, args.batches, seed=7)
    print(f"{time.perf_counter() - t0:.0f} s", flush=True)
    single, cluster = results.values()
    cmd = " ".join(["bench/bench_citus.py"] + sys.argv[1:])
    lines = [
        "# agentmem on Citus: a three-node cluster against a single node",
        "",
        f"`.venv/bin/python {cmd}`, {datetime.date.today()}: {args.messages:,} messages over "
        f"{args.tenants:,} tenants (evenly, in contiguous blocks), 384-dimensional synthetic vectors, bulk-loaded by COPY "
        f"(single node {single['load_s']:.0f} s, cluster {cluster['load_s']:.0f} s, HNSW builds included); every figure "
        f"below is of calls through the API as the application role, each to a random loaded tenant ({args.batches} "
        f"store_messages calls of {BATCH}, {args.singles} store_message calls, {args.searches} searches per "
        "measurement, each call made on both systems back to back). Both databases live on the same machine (2 cores, shared by the three nodes and the "
        "client): PostgreSQL 18.6 + pgvector 0.8 + Citus 14.0.1; the single node is a plain database on the "
        "coordinator's server. Every call is one driver-style transaction (set_tenant local, then the call).",
        "",
        "| | single node | cluster | cluster / single |",
        "|---|---:|---:|---:|",
        f"| store, batches of {BATCH} (messages/s) | {single['batched']:.0f} | {cluster['batched']:.0f} | "
        f"{cluster['batched'] / single['batched']:.2f} |",
        f"| store, one message per call (messages/s) | {single['single']:.0f} | {cluster['single']:.0f} | "
        f"{cluster['single'] / single['single']:.2f} |",
        f"| store, one message, p50 (ms) | {single['store_p50']:.1f} | {cluster['store_p50']:.1f} | "
        f"{cluster['store_p50'] / single['store_p50']:.2f} |",
        f"| search k={K}, p50 (ms) | {single['p50']:.1f} | {cluster['p50']:.1f} | {cluster['p50'] / single['p50']:.2f} |",
        f"| search k={K}, p95 (ms) | {single['p95']:.1f} | {cluster['p95']:.1f} | {cluster['p95'] / single['p95']:.2f} |",
        "",
        "## As the tenants grow",
        "",
        "The same calls measured twice in the run: when a fifth of the tenants had their messages "
        "loaded, and when all had (the calls go to random tenants among those loaded).",
        "",
        "| tenants (messages) | store p50 / p95 ms, single | cluster | search p50 / p95 ms, single | cluster |",
        "|---:|---:|---:|---:|---:|",
    ]
    for t in single["by_tenants"]:
        a, b = single["by_tenants"][t], cluster["by_tenants"][t]
        lines.append(f"| {t:,} ({a['messages']:,}) | {a['store_p50']:.1f} / {a['store_p95']:.1f} | "
                     f"{b['store_p50']:.1f} / {b['store_p95']:.1f} | {a['p50']:.1f} / {a['p95']:.1f} | "
                     f"{b['p50']:.1f} / {b['p95']:.1f} |")
    lines += [
        "",
        "## Projection for N workers",
        "",
    ]
    # Per call: the single node's latency is the work itself (w); the cluster's extra latency is the
    # coordinator's planning and routing plus the hops (c). With N workers on their own cores, tenants
    # spread evenly, and the coordinator on its own cores, a workload of one call at a time per client
    # saturates at min(N * cores_w / w, cores_c / c_cpu) calls/s.
    w_store, w_search = 1000 / single["single"], single["p50"]
    c_store = max(1000 / cluster["single"] - w_store, 0.01)
    c_search = max(cluster["p50"] - w_search, 0.01)
    lines += [
        "Assumptions: the single node's per-call time is the work a worker does (store "
        f"{w_store:.1f} ms, search {w_search:.1f} ms); the cluster's extra time per call is the coordinator's "
        f"(store +{c_store:.1f} ms, search +{c_search:.1f} ms), counted entirely as coordinator CPU (an upper "
        "bound: part of it is waiting on loopback round trips); each worker and the coordinator have 4 cores "
        "of their own; tenants spread evenly (no hot tenant); every worker holds its share of the HNSW indexes "
        "in memory. Calls per second then are min(N x 4 / worker time, 4 / coordinator time):",
        "",
        "| workers | store calls/s | search calls/s |",
        "|---:|---:|---:|",
    ]
    for n in (1, 2, 4, 8, 16):
        st = min(n * 4000 / w_store, 4000 / c_store)
        se = min(n * 4000 / w_search, 4000 / c_search)
        lines.append(f"| {n} | {st:,.0f} | {se:,.0f} |")
    lines += [
        "",
        "Where the coordinator term is the minimum, more workers stop helping: add coordinator cores, or let "
        "the application connect to the workers too (Citus runs queries from any node when metadata is "
        "synced, as here), which removes the coordinator from the path.",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
