"""Search recall for every user size: agentmem vs LangGraph's PostgresStore, same server, same vectors.

    .venv/bin/pip install -e './python[dev,bench]'      # langgraph-checkpoint-postgres
    .venv/bin/python bench/bench_recall.py --out bench/results/recall.md [--quick] [--large]

Data sets (each in a fresh database holding both systems' tables):
* 100,000 random unit vectors of 768 dimensions (nomic-embed-text's size; the hardest case for HNSW);
* 100,000 clustered unit vectors of 384 dimensions (all-minilm's size; structured like real text);
* with --large, 1,000,000 clustered 384-d vectors (long: the HNSW builds take most of it).
--quick: 20,000 vectors of each kind instead of 100,000.

Four users, each alone in its tenant, hold 0.1%, 1%, 10% and 30% of the rows; the rest is spread over
1,000 small tenants. Rows of all tenants are interleaved in the heap. Bulk data is loaded with COPY into
both systems' tables with their HNSW index dropped and rebuilt afterwards (pgvector defaults, cosine;
build times reported); then, as a DBA would, every tenant that agentmem.tenants_needing_index lists gets
its own index (agentmem.create_tenant_index, build times reported). Each query (a vector of the user's
own plus noise) runs on both systems back to back through their Python APIs, in an order that turns with
the query. PostgresStore runs twice: as it comes (pgvector's defaults: hnsw.ef_search 40, no iterative
scan) and tuned as far as pgvector's settings go (`TUNED`: ef_search 1000, the most pgvector allows, and
relaxed iterative scans, so that a filtered search goes on until it has its rows): the question being
whether agentmem is faster "with recall at least as high", the tuned store is the one that comes closest.
Recall@10 is against an exact scan of the user's vectors (numpy).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from agentmem.client import Memory  # noqa: E402
from agentmem.migrate import Migrator, Source  # noqa: E402
from common import (APP_ROLE, as_login, command, connect, copy_into_postgresstore, create_tenant_indexes,  # noqa: E402
                    database_url, fresh_database, sized_server, warm)

K = 10
SHARES = (0.001, 0.01, 0.10, 0.30)
SMALL_TENANTS = 1000
DBNAME = "agentmem_bench_recall"  # one database per data set: agentmem_bench_recall_<kind>_<n>
MODELS = {768: "nomic-embed-text", 384: "all-minilm"}
LOAD_AT_START = os.getloadavg()[0]
# PostgresStore tuned as far as pgvector's settings go, on every connection of its own (libpq options)
TUNED = {"hnsw.ef_search": "1000", "hnsw.iterative_scan": "relaxed_order"}
SYSTEMS = ("agentmem", "langgraph", "tuned")


def pct(values, p):
    return float(np.percentile(np.asarray(values), p))


class Dataset:
    def __init__(self, kind: str, n: int, dim: int, seed: int = 1):
        rng = np.random.default_rng(seed)
        self.kind, self.n, self.dim, self.model = kind, n, dim, MODELS[dim]
        if kind == "random":
            v = rng.standard_normal((n, dim), dtype=np.float32)
        else:
            centres = rng.standard_normal((128, dim), dtype=np.float32)
            centres /= np.linalg.norm(centres, axis=1, keepdims=True)
            v = centres[rng.integers(0, 128, n)] + rng.standard_normal((n, dim), dtype=np.float32) * (
                0.35 / np.sqrt(dim))
        self.vectors = v / np.linalg.norm(v, axis=1, keepdims=True)
        tenant = np.empty(n, dtype=np.int32)
        at = 0
        for i, share in enumerate(SHARES):
            size = int(n * share)
            tenant[at:at + size] = i
            at += size
        tenant[at:] = len(SHARES) + np.arange(n - at) % SMALL_TENANTS
        rng.shuffle(tenant)  # interleaved in the heap
        self.tenant = tenant
        self.ids = [uuid.uuid4() for _ in range(n)]
        self.rng = rng
        self.members = {i: np.flatnonzero(tenant == i) for i in range(len(SHARES))}

    @staticmethod
    def name(t: int) -> str:
        return f"share{SHARES[t]:g}" if t < len(SHARES) else f"small{t:04d}"

    def queries(self, t: int, n: int) -> np.ndarray:
        own = self.vectors[self.rng.choice(self.members[t], n)]
        q = own + self.rng.standard_normal((n, self.dim), dtype=np.float32) * 0.02
        return q / np.linalg.norm(q, axis=1, keepdims=True)

    def truth(self, t: int, q: np.ndarray) -> set:
        idx = self.members[t]
        return {str(self.ids[i]) for i in idx[np.argsort(-(self.vectors[idx] @ q))[:K]]}

    def kth_distance(self, t: int, q: np.ndarray) -> float:
        """The cosine distance of the user's K-th nearest row: past 0.5 agentmem's cheap first pass is
        not trusted (agentmem.ef_escalate_distance) and the search reads on."""
        return float(1 - np.sort(self.vectors[self.members[t]] @ q)[-K])


def dbname(kind: str, n: int) -> str:
    return f"{DBNAME}_{kind}_{n}"


def urls(server_url: str, db: str) -> tuple[str, str]:
    admin_url = database_url(server_url, db)
    return admin_url, as_login(admin_url, APP_ROLE)


def reuse_dataset(admin, ds: "Dataset") -> None:
    """--reuse: the four users' rows as loaded by an earlier run (ids are random, so read them back)."""
    rows = admin.execute("select tenant_id, message_id, embedding from agentmem.message_embeddings "
                         "where tenant_id like 'share%%' and model = %s", (ds.model,)).fetchall()
    names = [ds.name(t) for t in range(len(SHARES))]
    ds.tenant = np.array([names.index(t) for t, _, _ in rows], dtype=np.int32)
    ds.ids = [m for _, m, _ in rows]
    ds.vectors = np.array([v.to_numpy() for _, _, v in rows], dtype=np.float32)
    ds.members = {i: np.flatnonzero(ds.tenant == i) for i in range(len(SHARES))}


def load_agentmem(admin, ds: Dataset) -> dict:
    index = admin.execute("select agentmem_private.model_index_name('message_embeddings', %s)",
                          (ds.model,)).fetchone()[0]
    admin.execute(f'drop index if exists agentmem."{index}"')
    tenants = np.unique(ds.tenant)
    conv = {int(t): uuid.uuid4() for t in tenants}
    counts = np.bincount(ds.tenant)
    next_idx = np.zeros(len(counts), dtype=np.int64)
    t0 = time.perf_counter()
    with admin.cursor() as cur:
        with cur.copy("copy agentmem.conversations (tenant_id, conversation_id, user_id, next_index) from stdin") as cp:
            for t in tenants:
                cp.write_row((ds.name(int(t)), conv[int(t)], "user", int(counts[t])))
        with cur.copy("copy agentmem.messages (tenant_id, message_id, conversation_id, user_id, message_index, "
                      "role, content) from stdin") as cp:
            for i, t in enumerate(ds.tenant):
                cp.write_row((ds.name(int(t)), ds.ids[i], conv[int(t)], "user", int(next_idx[t]), "user", f"m{i}"))
                next_idx[t] += 1
        with cur.copy("copy agentmem.message_embeddings (tenant_id, message_id, model, user_id, conversation_id, "
                      "embedding) from stdin with (format binary)") as cp:
            cp.set_types(["text", "uuid", "text", "text", "uuid", "vector"])
            for i, t in enumerate(ds.tenant):
                cp.write_row((ds.name(int(t)), ds.ids[i], ds.model, "user", conv[int(t)], ds.vectors[i]))
    t1 = time.perf_counter()
    admin.execute("select agentmem_private.ensure_model_indexes(%s)", (ds.model,))
    t2 = time.perf_counter()
    admin.execute("vacuum (analyze) agentmem.conversations, agentmem.messages, agentmem.message_embeddings")
    return {"copy_s": t1 - t0, "index_s": t2 - t1}


def tenant_indexes(admin, ds: Dataset) -> list:
    """The DBA's step: indexes of their own for the tenants agentmem.tenants_needing_index lists, built by
    this code's agentmem.create_tenant_index (its HNSW index, and its exact index where the tenant is small
    enough; any earlier ones dropped first), with the build times."""
    for t in range(len(SHARES)):
        admin.execute("select agentmem.drop_tenant_index(tenant_id => %s, model => %s)", (ds.name(t), ds.model))
    return create_tenant_indexes(admin, ds.model)


def load_langgraph(admin, ds: Dataset) -> dict:
    prefixes = [f"{ds.name(int(t))}.user" for t in ds.tenant]
    took = copy_into_postgresstore(admin, prefixes, ds.ids, [f"m{i}" for i in range(len(prefixes))], ds.vectors)
    return {"copy_s": took["copy_s"], "index_s": took["index_s"]}


def path_of(admin, ds: Dataset, t: int) -> str:
    limit = admin.execute("select agentmem_private.exact_search_max_rows(%s)", (ds.dim,)).fetchone()[0]
    if len(ds.members[t]) <= limit:
        return "exact scan"
    own, exact, first = admin.execute(
        "select agentmem_private.has_tenant_index('message_embeddings', %(t)s, %(m)s), "
        "agentmem_private.has_exact_index('message_embeddings', %(t)s, %(m)s), "
        "agentmem_private.exact_index_first_pass('message_embeddings', %(t)s, %(m)s) = 'exact'",
        {"t": ds.name(t), "m": ds.model}).fetchone()
    if not own:
        return "shared index"
    if exact and first:
        return "tenant's exact index (measured far)"
    return "tenant's own index" + (" (+ exact index)" if exact else "")


def run_dataset(server_url: str, kind: str, n: int, dim: int, queries: int, reuse: bool = False,
                keep: bool = False) -> dict:
    from langgraph.store.postgres import PostgresStore
    print(f"--- {kind} {dim}-d, {n:,} vectors", flush=True)
    ds = Dataset(kind, n, dim)
    sidecar = ROOT / ".pgdata" / f"bench_recall_{kind}_{n}.json"
    db = dbname(kind, n)
    if reuse:  # this code's sql/ on the data an earlier run loaded
        admin_url, app_url = urls(server_url, db)
        Migrator(admin_url, Source.load(ROOT)).migrate()
    else:
        admin_url, app_url = fresh_database(server_url, db)
    lookup: dict = {}

    def embed(texts):
        return [lookup[t].tolist() for t in texts]

    out: dict = {"kind": kind, "n": n, "dim": dim, "sizes": []}
    with connect(admin_url) as admin, Memory.connect(app_url, tenant="x", max_size=2) as mem, \
            PostgresStore.from_conn_string(admin_url, index={"dims": dim, "embed": embed, "fields": ["text"],
                                                             "distance_type": "cosine"}) as lg, \
            PostgresStore.from_conn_string(
                make_conninfo(admin_url, options=" ".join(f"-c {k}={v}" for k, v in TUNED.items())),
                index={"dims": dim, "embed": embed, "fields": ["text"], "distance_type": "cosine"}) as tuned:
        lg.setup()
        for name, value in TUNED.items():  # the options reached the server (else the run means nothing)
            got = tuned.conn.execute("select current_setting(%s) as v", (name,)).fetchone()["v"]
            if got != value:
                raise SystemExit(f"the tuned PostgresStore runs with {name} = {got}, not {value}")
        # room for a 1M-vector HNSW graph: pgvector builds far slower once it no longer fits
        admin.execute("set maintenance_work_mem = '4GB'")
        loads: dict = {}
        if reuse:  # the data and shared indexes of an earlier run of the same data set, its load figures
            loads = json.loads(sidecar.read_text())
            out["agentmem_load"], out["langgraph_load"] = loads["agentmem"], loads["langgraph"]
            reuse_dataset(admin, ds)
        else:
            out["agentmem_load"] = load_agentmem(admin, ds)
            print("agentmem loaded", out["agentmem_load"], flush=True)
            out["langgraph_load"] = load_langgraph(admin, ds)
            print("langgraph loaded", out["langgraph_load"], flush=True)
            sidecar.write_text(json.dumps({"agentmem": out["agentmem_load"], "langgraph": out["langgraph_load"]}))
        if keep and reuse and "own" in loads:
            # the tenants' indexes of the earlier run (built by create_tenant_index then), its build times;
            # any missing built now, and every tenant's first pass measured by this code
            done = {tenant for tenant, _ in create_tenant_indexes(admin, ds.model)}  # each measured by it
            for t in range(len(SHARES)):
                if ds.name(t) in done:
                    continue
                if admin.execute("select agentmem_private.has_exact_index('message_embeddings', %s, %s)",
                                 (ds.name(t), ds.model)).fetchone()[0]:
                    admin.execute("select agentmem.measure_tenant_index(tenant_id => %s, model => %s)",
                                  (ds.name(t), ds.model))
            out["agentmem_load"]["own"] = loads["own"]
        else:
            out["agentmem_load"]["own"] = tenant_indexes(admin, ds)
            if sidecar.exists():
                sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "own": out["agentmem_load"]["own"]}))
        out["own_kept"] = keep and reuse and "own" in loads
        print("tenant indexes", out["agentmem_load"]["own"], flush=True)
        out["reused"] = reuse
        out["warm_s"], out["warm_mode"] = warm(admin)
        out["shared_buffers"] = admin.execute("select current_setting('shared_buffers')").fetchone()[0]
        print(f"warmed in {out['warm_s']:.1f} s ({out['warm_mode']})", flush=True)
        for t in range(len(SHARES)):
            qs = ds.queries(t, queries + 3)
            lat: dict[str, list[float]] = {system: [] for system in SYSTEMS}
            rec: dict[str, list[float]] = {system: [] for system in SYSTEMS}
            short = dict.fromkeys(SYSTEMS, 0)
            for j, q in enumerate(qs):
                truth = ds.truth(t, q)
                for system in SYSTEMS[j % 3:] + SYSTEMS[:j % 3]:
                    t0 = time.perf_counter()
                    if system == "agentmem":
                        got = [str(h.message_id) for h in
                               mem.for_tenant(ds.name(t)).search_messages("user", q, K, model=ds.model)]
                    else:
                        key = f"q{len(lookup)}"
                        lookup[key] = q
                        store = lg if system == "langgraph" else tuned
                        # PostgresStore keeps a namespace as its labels joined by '.'
                        got = [it.key for it in store.search((*ds.name(t).split("."), "user"), query=key,
                                                             limit=K)]
                    ms = (time.perf_counter() - t0) * 1000
                    if j < 3:
                        continue  # warm-up
                    lat[system].append(ms)
                    short[system] += len(got) < K
                    rec[system].append(len(truth & set(got)) / K)
            row = {"share": SHARES[t], "rows": len(ds.members[t]), "path": path_of(admin, ds, t),
                   "kth": float(np.median([ds.kth_distance(t, q) for q in qs]))}
            for system in lat:
                row[system] = {"p50": pct(lat[system], 50), "p95": pct(lat[system], 95),
                               "recall": float(np.mean(rec[system])), "short": short[system]}
            print(row, flush=True)
            out["sizes"].append(row)
    return out


def report(results: list[dict], elapsed: float, large_run: bool) -> str:
    lines = [
        "## Search recall for every user size: agentmem vs LangGraph PostgresStore",
        "",
        f"{datetime.date.today()}, {os.cpu_count()} cores shared with other work (load average "
        f"{LOAD_AT_START:.1f} at the start, {os.getloadavg()[0]:.1f} at the end), embedded PostgreSQL 18 + pgvector 0.8. "
        f"Command: `{command()}` ({elapsed / 60:.1f} min).",
        "",
        "Four users, each alone in its tenant, hold 0.1%, 1%, 10% and 30% of the rows; the rest is spread "
        "over 1,000 small tenants, all interleaved in the heap. Both systems get the same vectors, loaded "
        "with COPY and their shared HNSW index rebuilt afterwards (pgvector defaults m=16, "
        "ef_construction=64, cosine); then every tenant listed by `agentmem.tenants_needing_index` gets its "
        "own indexes (`agentmem.create_tenant_index`: HNSW m=32, ef_construction=128, on l2_normalize(embedding); "
        "and an exact index, IVFFlat of one list on its halfvec, for tenants of at most "
        "`agentmem.exact_index_max_rows` rows, which `agentmem.measure_tenant_index`, run by create_tenant_index, "
        "makes the first read of a tenant whose sampled HNSW passes mostly came back far). "
        "agentmem's hnsw.ef_search is its own choice per search (docs/tuning.md). Each query (one of the user's vectors plus noise) runs "
        "on both systems back to back through their Python APIs (agentmem: `Memory.search_messages`, set_tenant "
        "and the call in one round trip and one transaction, RLS; LangGraph: `PostgresStore.search` on the namespace (tenant, user)), "
        "in an order that turns with the query, after every table and index of both systems was read into memory "
        "(pg_prewarm: into shared_buffers where they fit in 90% of it, else the OS page cache): a server whose "
        "memory holds its data, not this machine's disk. Recall@10 against an exact scan (numpy); 'short' = searches that "
        "returned fewer than 10 rows. Path = what agentmem's search did for that user. PostgresStore runs twice: "
        "as it comes (pgvector's defaults: hnsw.ef_search 40, no iterative scan), and 'tuned' as far as pgvector's "
        "settings go, on its own connection (" + ", ".join(f"{k} = {v}" for k, v in TUNED.items()) + "; ef_search "
        "1000 is pgvector's maximum): the PostgresStore that comes closest to agentmem's recall. Each ratio is "
        "that store's p50 over agentmem's.",
        "",
    ]
    for r in results:
        a, lg = r["agentmem_load"], r["langgraph_load"]
        own = ", ".join(f"{t} {s:.1f} s" for t, s in a["own"]) or "none listed"
        earlier = (" (COPY and shared index loaded by an earlier run of this script, `--reuse`: its figures; "
                   "sql/ re-applied and tenants' indexes "
                   + ("kept from an earlier run, its build times, first passes measured again by this run)"
                      if r.get("own_kept") else "rebuilt by this run)")) if r.get("reused") else ""
        lines += [f"### {r['n']:,} {r['kind']} vectors, {r['dim']} dimensions", "",
                  f"Load{earlier}: agentmem COPY {a['copy_s']:.1f} s + shared HNSW build {a['index_s']:.1f} s; "
                  f"tenants' own indexes: {own}. PostgresStore COPY {lg['copy_s']:.1f} s + HNSW build "
                  f"{lg['index_s']:.1f} s. Both read into "
                  + ("shared_buffers" if r.get("warm_mode") == "buffer" else "the OS page cache")
                  + f" ({r.get('shared_buffers')}) in {r.get('warm_s', 0):.1f} s.", "",
                  "| user holds | rows | 10th neighbour (cosine distance, p50) | agentmem path | agentmem p50 / p95 ms | recall@10 | short | "
                  "PostgresStore p50 / p95 ms | recall@10 | short | p50 ratio | "
                  "PostgresStore tuned p50 / p95 ms | recall@10 | short | p50 ratio |",
                  "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for s in r["sizes"]:
            am = s["agentmem"]
            cells = "".join(f" {pg['p50']:.1f} / {pg['p95']:.1f} | {pg['recall']:.3f} | {pg['short']} | "
                            f"{pg['p50'] / am['p50']:.2f}× |" for pg in (s["langgraph"], s["tuned"]))
            lines.append(f"| {s['share']:.1%} | {s['rows']:,} | {s['kth']:.2f} | {s['path']} | "
                         f"{am['p50']:.1f} / {am['p95']:.1f} | {am['recall']:.3f} | {am['short']} |{cells}")
        lines.append("")
    if not large_run:
        lines += ["The 1,000,000-vector run (`--large`) was not part of this run.", ""]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true", help="20,000 vectors of each kind")
    parser.add_argument("--large", action="store_true", help="also 1,000,000 clustered 384-d vectors")
    parser.add_argument("--only", choices=("random", "clustered"), help="one kind of vectors only")
    parser.add_argument("--queries", type=int, default=40, help="queries per user size")
    parser.add_argument("--reuse", action="store_true",
                        help="search the data sets an earlier run left loaded (their COPY and shared HNSW "
                             "indexes), instead of loading them; sql/ is re-applied and tenants' indexes rebuilt")
    parser.add_argument("--keep-tenant-indexes", action="store_true",
                        help="with --reuse: keep the tenants' indexes the earlier run built (its build times are "
                             "reported) instead of rebuilding them; their first pass is measured again")
    parser.add_argument("--shared-buffers",
                        help="restart the bench server with this shared_buffers first (ALTER SYSTEM; it stays), "
                             "e.g. 10GB for --large, so that both systems' relations stay in memory once warmed")
    parser.add_argument("--database-url", help="a server to use (default: an embedded one on --port)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("AGENTMEM_EMBEDDED_PORT", 55452)))
    args = parser.parse_args()
    try:
        import langgraph.store.postgres  # noqa: F401
    except ImportError:
        raise SystemExit("bench_recall needs langgraph-checkpoint-postgres: pip install -e './python[bench]'")
    if args.database_url:
        server_url = args.database_url
    else:
        from agentmem_dev import devserver
        server_url = sized_server(devserver.start(ROOT / ".pgdata" / "bench", port=args.port), args.shared_buffers)
    n = 20_000 if args.quick else 100_000
    runs = [("random", n, 768), ("clustered", n, 384)]
    if args.only:
        runs = [r for r in runs if r[0] == args.only]
    if args.large:
        runs.append(("clustered", 1_000_000, 384))
    started = time.perf_counter()
    results = [run_dataset(server_url, kind, size, dim, args.queries,
                           reuse=args.reuse and (ROOT / ".pgdata" / f"bench_recall_{kind}_{size}.json").exists(),
                           keep=args.keep_tenant_indexes)
               for kind, size, dim in runs]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report(results, time.perf_counter() - started, args.large))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
