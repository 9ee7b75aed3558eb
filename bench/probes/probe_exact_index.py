"""What does reading a tenant's whole exact index cost, beside its HNSW index and an exact heap scan?

    .venv/bin/python bench/probes/probe_exact_index.py --out bench/results/exact_index.md [--port P]

The figures behind agentmem's exact index (agentmem.tenant_index_ddl kind => 'exact') and the default
of agentmem.exact_index_max_rows (docs/tuning.md). For random 768-d and clustered 384-d unit vectors
(the two kinds of bench_recall.py), 100,000 rows in one plain table, tenants 'A' (30,000 rows) and
'B' (10,000) interleaved with 1,000 small ones. Each tenant gets the indexes agentmem builds, partial
on the tenant: an IVFFlat index of one list on its normalised vectors as halfvec (the exact index) and
as vector (for comparison), and an HNSW index (m 32, ef_construction 128). Each query (one of the
tenant's vectors plus noise) runs every way back to back, in turn: the exact index, the vector
IVFFlat, HNSW at ef_search 100 / 400 / 750 (iterative scan, relaxed order), and an exact scan of the
heap through a B-tree, each asking for 30 rows re-ranked to 10 by exact distance. The statements are
agentmem's (nearest_messages), without the function around them.

Then the floor that no index goes under: each tenant's normalised halfvecs copied alone into a table
of their own, read whole with and without each one's distance, and their 30 nearest by a plain top-N
sort, serial and with two parallel workers; each query runs every one of those back to back with the
exact index.
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
from pgvector.psycopg import register_vector

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/common.py
from common import database_url, start_server  # noqa: E402

K, N, QUERIES = 10, 100_000, 30
TENANTS = {"A": 30_000, "B": 10_000}
LOAD_AT_START = os.getloadavg()[0]


def vectors(kind: str, dim: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "random":
        v = rng.standard_normal((N, dim), dtype=np.float32)
    else:
        centres = rng.standard_normal((128, dim), dtype=np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        v = centres[rng.integers(0, 128, N)] + rng.standard_normal((N, dim), dtype=np.float32) * (0.35 / np.sqrt(dim))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def query_near(v: np.ndarray, members: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A query: one of the tenant's vectors, chosen at random, plus a little noise, normalised."""
    q = v[rng.choice(members)] + rng.standard_normal(v.shape[1]).astype(np.float32) * 0.02
    return q / np.linalg.norm(q)


def floor(conn: psycopg.Connection, t: str, dim: int, members: np.ndarray, v: np.ndarray) -> dict:
    """What no index can go under: the tenant's normalised halfvecs alone in a table of their own, read
    whole, with and without computing each one's distance, and the 30 nearest by a plain top-N sort
    (serial, and with two parallel workers), each query all ways back to back beside the exact index."""
    norm = f"l2_normalize(embedding::vector({dim}))::halfvec({dim})"
    conn.execute(f'create table "floor {t}" (id uuid, v halfvec({dim}))')
    conn.execute(f'alter table "floor {t}" alter column v set storage plain')
    conn.execute(f'insert into "floor {t}" select id, {norm} from e where tenant_id = %s', (t,))
    conn.execute(f'vacuum analyze "floor {t}"')
    q_ = f"%(q)s::halfvec({dim})"
    ways = {
        "exact index, as above": (f"select id from e where tenant_id = '{t}' and user_id = 'u' "
                                  f"order by {norm} <=> {q_} limit {K + 20}", "off", 0),
        "the halfvecs alone: read": (f'select count(*) from "floor {t}"', "on", 0),
        "the halfvecs alone: read, and each one's distance": (
            f'select count(*) from "floor {t}" where (v <=> {q_}) < 3', "on", 0),
        "the halfvecs alone: 30 nearest (top-N sort)": (
            f'select id from "floor {t}" order by v <=> {q_} limit {K + 20}', "on", 0),
        "the halfvecs alone: 30 nearest, 2 parallel workers": (
            f'select id from "floor {t}" order by v <=> {q_} limit {K + 20}', "on", 2),
    }
    lat: dict = {w: [] for w in ways}
    plans: dict = {}
    qrng = np.random.default_rng(11)
    for j in range(QUERIES + 3):
        q = query_near(v, members, qrng)
        for w in (list(ways) if j % 2 == 0 else list(reversed(ways))):
            sql, sort, workers = ways[w]
            conn.execute("begin")
            conn.execute(f"set local enable_sort = {sort}")
            conn.execute(f"set local max_parallel_workers_per_gather = {workers}")
            if workers:
                conn.execute("set local parallel_setup_cost = 0")
                conn.execute("set local min_parallel_table_scan_size = 0")
            if j == 0:  # its nodes, top down
                lines = [r[0] for r in conn.execute("explain (costs off) " + sql, {"q": q})]
                plans[w] = " → ".join(line.split("->")[-1].strip().split(" on ")[0].split(" using ")[0]
                                      for i, line in enumerate(lines) if i == 0 or "->" in line)
            t0 = time.perf_counter()
            conn.execute(sql, {"q": q}).fetchall()
            ms = (time.perf_counter() - t0) * 1000
            conn.execute("rollback")
            if j >= 3:
                lat[w].append(ms)
    return {w: (float(np.percentile(lat[w], 50)), float(np.percentile(lat[w], 95)), plans[w]) for w in ways}


def run(server_url: str, kind: str, dim: int) -> dict:
    db = f"agentmem_probe_exact_index_{kind}"
    with psycopg.connect(server_url, autocommit=True) as c:
        c.execute(f"drop database if exists {db} with (force)")
        c.execute(f"create database {db}")
    conn = psycopg.connect(database_url(server_url, db), autocommit=True)
    # Never server-side prepared: a generic plan of `order by v <=> $1::halfvec(d)` casts $1 once per row
    # (found on the top-N sort below: 43 ms where a plan with the value as a constant takes 24); agentmem's
    # own statements go through EXECUTE, planned with their values.
    conn.prepare_threshold = None
    conn.execute("create extension vector")
    register_vector(conn)
    rng = np.random.default_rng(1)
    v = vectors(kind, dim, rng)
    tenant = np.array([t for t, n in TENANTS.items() for _ in range(n)]
                      + [f"s{i % 1000}" for i in range(N - sum(TENANTS.values()))])
    rng.shuffle(tenant)  # interleaved in the heap, as rows written over time are
    ids = [uuid.uuid4() for _ in range(N)]
    conn.execute("create table e (tenant_id text, user_id text, id uuid, embedding vector)")
    conn.execute("alter table e alter column embedding set storage plain")  # in the heap row, as agentmem's
    with conn.cursor().copy("copy e from stdin with (format binary)") as cp:
        cp.set_types(["text", "text", "uuid", "vector"])
        for i in range(N):
            cp.write_row((tenant[i], "u", ids[i], v[i]))
    conn.execute("create index on e (tenant_id, user_id)")
    conn.execute("set maintenance_work_mem = '1GB'")
    norm = f"l2_normalize(embedding::vector({dim}))"
    indexes = {"exact": ("ivfflat", f"{norm}::halfvec({dim})", "halfvec_cosine_ops", "lists = 1"),
               "ivfflat vector": ("ivfflat", f"{norm}::vector({dim})", "vector_cosine_ops", "lists = 1"),
               "hnsw": ("hnsw", f"{norm}::vector({dim})", "vector_cosine_ops", "m = 32, ef_construction = 128")}
    builds: dict = {}
    for t in TENANTS:
        for name, (am, expr, ops, with_) in indexes.items():
            t0 = time.perf_counter()
            conn.execute(f'create index "{name} {t}" on e using {am} (({expr}) {ops}) with ({with_}) '
                         f"where tenant_id = '{t}'")
            size = conn.execute(f"""select pg_relation_size('"{name} {t}"')""").fetchone()[0]
            builds[f"{name} {t}"] = (time.perf_counter() - t0, size)
    conn.execute("vacuum analyze e")
    conn.execute("set work_mem = '64MB'")  # as nearest_messages sets it
    hnsw = f"{norm}::vector({dim}) <=> %(q)s::vector({dim})"
    ways = {
        "exact index (IVFFlat, 1 list, halfvec)": ("exact", f"{norm}::halfvec({dim}) <=> %(q)s::halfvec({dim})", 0),
        "IVFFlat, 1 list, vector": ("ivfflat vector", hnsw, 0),
        "HNSW m 32, ef_search 100": ("hnsw", hnsw, 100),
        "HNSW m 32, ef_search 400": ("hnsw", hnsw, 400),
        "HNSW m 32, ef_search 750": ("hnsw", hnsw, 750),
        "exact heap scan (B-tree)": (None, "embedding <=> %(q)s", 0),
    }
    out: dict = {"kind": kind, "dim": dim, "builds": builds, "tenants": {}}
    for t, n in TENANTS.items():
        members = np.flatnonzero(tenant == t)
        lat: dict = {w: [] for w in ways}
        rec: dict = {w: [] for w in ways}
        qrng = np.random.default_rng(7)
        for j in range(QUERIES + 3):
            q = query_near(v, members, qrng)
            truth = {ids[i] for i in members[np.argsort(-(v[members] @ q))[:K]]}
            for w in (list(ways) if j % 2 == 0 else list(reversed(ways))):
                index, expr, ef = ways[w]
                # only the index asked for may serve the statement: the others are dropped in a
                # transaction rolled back after it
                conn.execute("begin")
                for other in indexes:
                    if other != index:
                        conn.execute(f'drop index "{other} {t}"')
                conn.execute("set local enable_sort = " + ("off" if index else "on"))
                if ef:
                    conn.execute(f"set local hnsw.ef_search = {ef}")
                    conn.execute("set local hnsw.iterative_scan = relaxed_order")
                sql = (f"select id from (select id, embedding <=> %(q)s as d from e where tenant_id = '{t}' "
                       f"and user_id = 'u' order by {expr} limit {K + 20}) as h order by d limit {K}")
                t0 = time.perf_counter()
                got = {r[0] for r in conn.execute(sql, {"q": q}).fetchall()}
                ms = (time.perf_counter() - t0) * 1000
                conn.execute("rollback")
                if j >= 3:  # warm-up first
                    lat[w].append(ms)
                    rec[w].append(len(got & truth) / K)
        out["tenants"][t] = {"rows": n, "ways": {w: (float(np.percentile(lat[w], 50)), float(np.percentile(lat[w], 95)),
                                                      float(np.mean(rec[w]))) for w in ways},
                             "floor": floor(conn, t, dim, members, v)}
        print(kind, t, out["tenants"][t], flush=True)
    conn.close()
    with psycopg.connect(server_url, autocommit=True) as c:
        c.execute(f"drop database if exists {db} with (force)")
    return out


def report(results: list[dict], elapsed: float) -> str:
    lines = ["## Reading a tenant's exact index, beside its HNSW index and an exact heap scan", "",
             f"{datetime.date.today()}, {os.cpu_count()} cores shared with other work (load average "
             f"{LOAD_AT_START:.1f} at the start, {os.getloadavg()[0]:.1f} at the end), embedded PostgreSQL 18 + "
             f"pgvector 0.8. Command: `python bench/probes/probe_exact_index.py --out bench/results/exact_index.md` "
             f"({elapsed / 60:.1f} min).", "",
             "100,000 unit vectors in one table, tenants A (30,000 rows) and B (10,000) interleaved with 1,000 "
             "small ones; every index partial on its tenant. Each query runs every way back to back, in turn; "
             f"{QUERIES} queries per tenant; 30 rows from the index re-ranked to 10 by exact distance; recall@10 "
             "against numpy.", ""]
    for r in results:
        lines += [f"### {r['kind']} vectors, {r['dim']} dimensions", "",
                  "Builds: " + "; ".join(f"{name} {secs:.1f} s, {size / 2**20:.0f} MB"
                                         for name, (secs, size) in r["builds"].items()) + ".", "",
                  "| way | " + " | ".join(f"tenant {t} ({x['rows']:,} rows): p50 / p95 ms, recall@10"
                                         for t, x in r["tenants"].items()) + " |",
                  "|---|" + "---:|" * len(r["tenants"])]
        ways = next(iter(r["tenants"].values()))["ways"]
        for w in ways:
            cells = []
            for x in r["tenants"].values():
                p50, p95, recall = x["ways"][w]
                cells.append(f"{p50:.1f} / {p95:.1f}, {recall:.3f}")
            lines.append(f"| {w} | " + " | ".join(cells) + " |")
        lines += ["", "The floor: each tenant's normalised halfvecs alone in a table of their own (no other "
                  "tenant's rows, no other column), each way back to back with the exact index:", "",
                  "| way | " + " | ".join(f"tenant {t}: p50 / p95 ms" for t in r["tenants"]) + " | plan (tenant A) |",
                  "|---|" + "---:|" * len(r["tenants"]) + "---|"]
        first = next(iter(r["tenants"].values()))["floor"]
        for w in first:
            lines.append(f"| {w} | " + " | ".join(f"{x['floor'][w][0]:.1f} / {x['floor'][w][1]:.1f}"
                                                   for x in r["tenants"].values()) + f" | `{first[w][2]}` |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--port", type=int, default=int(os.environ.get("AGENTMEM_EMBEDDED_PORT", 55452)))
    args = parser.parse_args()
    server_url = start_server(args.port)
    started = time.perf_counter()
    results = [run(server_url, "random", 768), run(server_url, "clustered", 384)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report(results, time.perf_counter() - started))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
