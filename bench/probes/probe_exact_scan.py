"""Where does an exact scan of one user's rows stop being cheaper than an HNSW index scan?

    .venv/bin/python bench/probes/probe_exact_scan.py --out bench/results/exact_scan.md [--port P]

The figures behind the default of `agentmem.exact_search_max_rows` (docs/tuning.md). For each
dimension (768 = nomic-embed-text, 384 = all-minilm) it loads random unit vectors with COPY: users
holding 1k, 2k, 5k, 10k and 20k rows of one tenant, interleaved in the heap (as rows written over
time are), plus as many rows of other tenants. Then, per user size, p50/p95 of 30 searches through
`agentmem.search_messages` (as the application role, under RLS) with the exact scan forced (setting
at 1,000,000) and with an index forced (setting 0), the latter through the tenant's own HNSW index.
With --recall it measures instead, on 20,000 random 768-d vectors of which one tenant holds 6,000
(30%), recall@10 and p50 of the statement nearest_messages runs, through the tenant's own HNSW index
and through the model's shared one, at several hnsw.ef_search, beside the exact scan: the figures
behind ef_search 400 and the exact-scan default.
With --toast-default the table keeps PostgreSQL's default TOAST threshold (2 kB), which moves every
768-d vector (3 kB) out of line; the migration 0007 raises it so that vectors up to 2,000 dimensions
stay in the heap row.
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))  # bench/common.py
from common import connect, fresh_database  # noqa: E402

DBNAME = "agentmem_probe_exact"
SIZES = (1_000, 2_000, 5_000, 10_000, 20_000)
MODELS = {768: "nomic-embed-text", 384: "all-minilm"}


def load(admin: psycopg.Connection, dim: int, model: str, rng: np.random.Generator) -> dict:
    owners = [("probe", f"u{s}") for s in SIZES for _ in range(s)]
    owners += [(f"other{i % 50}", "x") for i in range(len(owners))]
    order = rng.permutation(len(owners))
    owners = [owners[i] for i in order]
    vecs = rng.standard_normal((len(owners), dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    conv = {key: uuid.uuid4() for key in set(owners)}
    index = admin.execute("select agentmem_private.model_index_name('message_embeddings', %s)", (model,)).fetchone()[0]
    admin.execute(f'drop index if exists agentmem."{index}"')
    ids = [uuid.uuid4() for _ in owners]
    with admin.cursor() as cur:
        with cur.copy("copy agentmem.conversations (tenant_id, conversation_id, user_id, next_index) from stdin") as cp:
            for (t, u), c in conv.items():
                cp.write_row((t, c, u, 1_000_000))
        with cur.copy("copy agentmem.messages (tenant_id, message_id, conversation_id, user_id, message_index, "
                      "role, content) from stdin") as cp:
            for i, (t, u) in enumerate(owners):
                cp.write_row((t, ids[i], conv[(t, u)], u, i, "user", f"m{i}"))
        with cur.copy("copy agentmem.message_embeddings (tenant_id, message_id, model, user_id, conversation_id, "
                      "embedding) from stdin with (format binary)") as cp:
            cp.set_types(["text", "uuid", "text", "text", "uuid", "vector"])
            for i, (t, u) in enumerate(owners):
                cp.write_row((t, ids[i], model, u, conv[(t, u)], vecs[i]))
    admin.execute("set maintenance_work_mem = '512MB'")
    t0 = time.perf_counter()
    admin.execute("select agentmem_private.ensure_model_indexes(%s)", (model,))
    shared_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    admin.execute("select agentmem.create_tenant_index(tenant_id => 'probe', model => %s)", (model,))
    own_s = time.perf_counter() - t0
    admin.execute("vacuum (analyze) agentmem.messages, agentmem.message_embeddings")
    return {"rows": len(owners), "shared_index_s": shared_s, "tenant_index_s": own_s}


def timed(app: psycopg.Connection, user: str, model: str, qs: np.ndarray, limit: int) -> tuple[float, float]:
    app.execute(f"set agentmem.exact_search_max_rows = {limit}")
    lat = []
    for q in qs:
        t0 = time.perf_counter()
        app.execute("select message_id from agentmem.search_messages(user_id => %s, query_embedding => %s, "
                    "k => 10, model => %s)", (user, q, model)).fetchall()
        lat.append((time.perf_counter() - t0) * 1000)
    return float(np.percentile(lat, 50)), float(np.percentile(lat, 95))


def recall_probe(server_url: str, out: Path) -> None:
    dim, model, n, mine_n = 768, MODELS[768], 20_000, 6_000
    rng = np.random.default_rng(21)
    admin_url, _ = fresh_database(server_url, DBNAME)
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    owners = ["solo"] * mine_n + [f"other{i % 7}" for i in range(n - mine_n)]
    order = rng.permutation(n)
    owners, vecs = [owners[i] for i in order], vecs[order]
    ids = [uuid.uuid4() for _ in range(n)]
    conv = {t: uuid.uuid4() for t in set(owners)}
    lines = []
    with connect(admin_url) as admin:
        index = admin.execute("select agentmem_private.model_index_name('message_embeddings', %s)",
                              (model,)).fetchone()[0]
        admin.execute(f'drop index if exists agentmem."{index}"')
        with admin.cursor() as cur:
            with cur.copy("copy agentmem.conversations (tenant_id, conversation_id, user_id, next_index) "
                          "from stdin") as cp:
                for t, c in conv.items():
                    cp.write_row((t, c, "u", n))
            with cur.copy("copy agentmem.messages (tenant_id, message_id, conversation_id, user_id, "
                          "message_index, role, content) from stdin") as cp:
                for i, t in enumerate(owners):
                    cp.write_row((t, ids[i], conv[t], "u", i, "user", "m"))
            with cur.copy("copy agentmem.message_embeddings (tenant_id, message_id, model, user_id, "
                          "conversation_id, embedding) from stdin with (format binary)") as cp:
                cp.set_types(["text", "uuid", "text", "text", "uuid", "vector"])
                for i, t in enumerate(owners):
                    cp.write_row((t, ids[i], model, "u", conv[t], vecs[i]))
        admin.execute("set maintenance_work_mem = '512MB'")
        t0 = time.perf_counter()
        admin.execute("select agentmem_private.ensure_model_indexes(%s)", (model,))
        shared_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        admin.execute("select agentmem.create_tenant_index(tenant_id => 'solo', model => %s)", (model,))
        own_s = time.perf_counter() - t0
        admin.execute("vacuum (analyze) agentmem.message_embeddings")
        mine = [i for i, t in enumerate(owners) if t == "solo"]
        qs = vecs[rng.choice(mine, 20)] + rng.standard_normal((20, dim)).astype(np.float32) * 0.02
        qs /= np.linalg.norm(qs, axis=1, keepdims=True)
        truth = [{ids[mine[j]] for j in np.argsort(-(vecs[mine] @ q))[:10]} for q in qs]
        admin.execute("set enable_sort = off")
        admin.execute("set hnsw.iterative_scan = relaxed_order")
        exact_sql = ("select message_id, embedding <=> %(q)s from agentmem.message_embeddings "
                     "where tenant_id = 'solo' and user_id = 'u' and model = %(m)s order by 2 limit 10")
        index_sql = ("select message_id, d from (select message_id, embedding::vector(768) <=> %(q)s::vector(768) "
                     "as d from agentmem.message_embeddings where {tenant} and user_id = 'u' and model = %(m)s "
                     "order by embedding::vector(768) <=> %(q)s::vector(768) limit 30) as s")

        def run(sql: str, params: dict | None = None) -> tuple[float, float]:
            rec, lat = [], []
            for q, tr in zip(qs, truth):
                t0 = time.perf_counter()
                rows = admin.execute(sql, {"q": q, "m": model, **(params or {})}).fetchall()
                lat.append((time.perf_counter() - t0) * 1000)
                rec.append(len({r[0] for r in sorted(rows, key=lambda r: r[1])[:10]} & tr) / 10)
            return float(np.mean(rec)), float(np.percentile(lat, 50))
        rows = [("exact scan", "-", *run(exact_sql))]
        for ef in (100, 200, 400, 1000):
            admin.execute(f"set hnsw.ef_search = {ef}")
            # the tenant as a literal: the partial index is provable; as the result of a subquery it
            # is not, so the shared index serves it (as it does for a tenant without its own)
            rows.append(("tenant's own index", ef, *run(index_sql.format(tenant="tenant_id = 'solo'"))))
            rec, ms = run(index_sql.format(tenant="tenant_id = (select 'solo')"))
            rows.append(("shared index (30% slice)", ef, rec, ms))
    lines += [f"- {n:,} random 768-d rows, tenant 'solo' holding {mine_n:,} (30%); shared HNSW build "
              f"{shared_s:.1f} s, the tenant's own index {own_s:.1f} s.", "",
              "| path | hnsw.ef_search | recall@10 | p50 ms |", "|---|---:|---:|---:|"]
    lines += [f"| {p} | {ef} | {r:.3f} | {ms:.1f} |" for p, ef, r, ms in rows]
    cmd = "python bench/probes/probe_exact_scan.py " + " ".join(sys.argv[1:])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join([
        "## Recall of each path on random 768-d vectors, by hnsw.ef_search", "",
        f"{datetime.date.today()}, {os.cpu_count()} cores (shared, noisy), embedded PostgreSQL 18 + pgvector. "
        f"Command: `{cmd}`.", "", "The statements nearest_messages runs, as the superuser, k + 20 rows from "
        "the index re-ranked to 10, queries = one of the tenant's vectors plus noise.", ""] + lines) + "\n")
    print(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--database-url")
    parser.add_argument("--port", type=int, default=int(os.environ.get("AGENTMEM_EMBEDDED_PORT", 55452)))
    parser.add_argument("--toast-default", action="store_true", help="keep the 2 kB TOAST threshold")
    parser.add_argument("--dims", default="768,384")
    parser.add_argument("--recall", action="store_true", help="recall by path and ef_search instead")
    args = parser.parse_args()
    if args.database_url:
        server_url = args.database_url
    else:
        from agentmem_dev import devserver
        server_url = devserver.start(ROOT / ".pgdata" / "bench", port=args.port)
    if args.recall:
        recall_probe(server_url, args.out)
        return 0
    rng = np.random.default_rng(5)
    rows, loads = [], {}
    for dim in (int(d) for d in args.dims.split(",")):
        model = MODELS[dim]
        admin_url, app_url = fresh_database(server_url, DBNAME)
        with connect(admin_url) as admin, connect(app_url) as app:
            if args.toast_default:
                admin.execute("alter table agentmem.message_embeddings reset (toast_tuple_target)")
            loads[dim] = load(admin, dim, model, rng)
            print(dim, loads[dim], flush=True)
            app.execute("select agentmem.set_tenant(tenant_id => 'probe')")
            qs = rng.standard_normal((30, dim)).astype(np.float32)
            qs /= np.linalg.norm(qs, axis=1, keepdims=True)
            for size in SIZES:
                timed(app, f"u{size}", model, qs[:5], 10**6)  # warm
                timed(app, f"u{size}", model, qs[:5], 0)
                # side by side, alternating
                ex, ix = [], []
                for q in qs:
                    ex.append(timed(app, f"u{size}", model, q[None], 10**6)[0])
                    ix.append(timed(app, f"u{size}", model, q[None], 0)[0])
                row = (dim, size, np.percentile(ex, 50), np.percentile(ex, 95),
                       np.percentile(ix, 50), np.percentile(ix, 95))
                print(row, flush=True)
                rows.append(row)
    cmd = "python bench/probes/probe_exact_scan.py " + " ".join(sys.argv[1:])
    lines = ["## Exact scan or index: where the default of agentmem.exact_search_max_rows comes from", "",
             f"{datetime.date.today()}, {os.cpu_count()} cores (shared, noisy), embedded PostgreSQL 18 + pgvector. "
             f"Command: `{cmd}`.", "",
             "Random unit vectors; one tenant whose users hold the sizes below, interleaved in the heap with as "
             "many rows of 50 other tenants. Each query through `agentmem.search_messages` as the application "
             "role, exact scan (B-tree on (tenant, user, model) then distances) and index (the tenant's own "
             "HNSW index, iterative scan) back to back. TOAST threshold: "
             + ("PostgreSQL's default (768-d vectors out of line)." if args.toast_default
                else "raised to 8160 bytes by migration 0007 (vectors in the heap row)."), ""]
    for dim, info in loads.items():
        lines.append(f"- {dim}-d: {info['rows']:,} rows; shared HNSW build {info['shared_index_s']:.1f} s, "
                     f"tenant index build {info['tenant_index_s']:.1f} s.")
    lines += ["", "| dim | user's rows | exact p50 / p95 ms | index p50 / p95 ms |", "|---:|---:|---:|---:|"]
    for dim, size, e50, e95, i50, i95 in rows:
        lines.append(f"| {dim} | {size:,} | {e50:.1f} / {e95:.1f} | {i50:.1f} / {i95:.1f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
