"""The vector search of two checkouts side by side: each query timed on both, back to back, in turn.

    .venv/bin/python bench/probes/probe_search_path.py --other /work/main --out bench/results/search_path.md

Two databases on one embedded server, the same rows in each (20,000 clustered 384-d messages over 100
tenants, one tenant holding 40%; facts and cache entries of a small user), one migrated from this
checkout's migrations/ and sql/, the other from --other's. Every search runs through SQL as the
application role (set_tenant once per connection), on each database in turn (which goes first turns
with the query): search_messages of a small user (exact scan), of a 1,000-message user (exact scan),
of the 40% user through the model's shared index (its tenant has two users), and through its tenant's
own indexes (agentmem.create_tenant_index); recall_facts; cache_lookup (a semantic hit). The ratio is
this checkout's p50 over the other's: at 1.00 they take the same time. Each database is loaded with its
own checkout's bulk loader (its columns are its schema's). With --in-server N
each search is also timed inside the server, N calls in a DO block on each database in turn (no client
round trip, the steadier measure on a loaded machine):

    .venv/bin/python bench/probe_search_path.py --other ../base --in-server 100 --out bench/results/search_path.md
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]  # bench/
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(HERE))

from agentmem.migrate import Migrator, Source  # noqa: E402
from common import APP_ROLE, as_login, command, connect, database_url, percentile, write_report  # noqa: E402

MODEL, DIM, N, K = "all-minilm", 384, 20_000, 10


def clustered(rng, n: int) -> np.ndarray:
    centres = rng.standard_normal((64, DIM)).astype(np.float32)
    v = centres[rng.integers(0, 64, n)] + rng.standard_normal((n, DIM)).astype(np.float32) * 0.35
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def bulk_of(root: Path):
    """The bulk loader of a checkout (its messages' columns are its schema's), wherever it keeps it."""
    path = next(p for p in (root / "python/dev/agentmem_dev/bulk.py", root / "python/agentmem/_bulk.py") if p.exists())
    spec = importlib.util.spec_from_file_location(f"bulk_{abs(hash(root))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def database(server_url: str, name: str, root: Path, owners, vectors) -> tuple[str, str]:
    with connect(server_url) as conn:
        conn.execute(f"drop database if exists {name} with (force)")
        conn.execute(f"create database {name}")
    admin_url = database_url(server_url, name)
    Migrator(admin_url, Source.load(root)).migrate()
    with connect(admin_url) as admin:
        if not admin.execute("select 1 from pg_roles where rolname = %s", (APP_ROLE,)).fetchone():
            admin.execute(f"create role {APP_ROLE} login")
        admin.execute("select agentmem.grant_app_role(role_name => %s)", (APP_ROLE,))
        # tenants are bound to logins: the benchmark's login acts as its own tenants (a checkout
        # without agentmem.grant_tenant lets any login set any tenant)
        if admin.execute("select to_regproc('agentmem.grant_tenant')").fetchone()[0]:
            admin.execute("select agentmem.grant_tenant(role_name => %s, all_tenants => true)", (APP_ROLE,))
        bulk = bulk_of(root).Bulk(admin, model=MODEL, rng=np.random.default_rng(1))
        with bulk.hnsw_dropped(tables=("message_embeddings",)):
            bulk.load_messages(owners, vectors)
        admin.execute("vacuum (analyze) agentmem.messages, agentmem.message_embeddings")
    app_url = as_login(admin_url, APP_ROLE)
    with connect(app_url, tenant="t1") as app:
        for i, v in enumerate(vectors[:300]):
            app.execute("select * from agentmem.upsert_fact(user_id => 'u', subject => %s, fact => %s, "
                        "embedding => %s, model => %s)", (f"subject {i}", f"fact {i}", v, MODEL))
            app.execute("select * from agentmem.cache_store(question => %s, question_embedding => %s, "
                        "answer => %s, model => %s)", (f"what about thing {i}?", v, f"answer {i}", MODEL))
    return admin_url, app_url


def in_server(conns, statement: str, args_before: tuple, calls: int) -> dict[str, float]:
    """The median over 9 rounds of one DO block's ms per call of the statement, on each side in turn (no
    round trip: what the server spends). Query vectors are random, made in the block on both sides."""
    got: list[float] = []
    for c in conns.values():
        c.add_notice_handler(lambda d: got.append(float(d.message_primary.split()[1])))
    call = statement.replace("%s", "{}").format(*(f"'{a}'" for a in args_before), "v")
    block = f"""do $probe$ declare t0 timestamptz; v vector; x record;
    begin
        for j in 1..{calls + 10} loop
            if j = 11 then t0 := clock_timestamp(); end if;
            v := (select array_agg(random()::real - 0.5) from generate_series(1, {DIM}))::vector({DIM});
            select * into x from ({call}) as s;
        end loop;
        raise notice 'ms %', extract(epoch from clock_timestamp() - t0) * 1000 / {calls};
    end $probe$"""
    rounds: dict[str, list[float]] = {"this": [], "other": []}
    for r in range(9):
        for side in ("this", "other") if r % 2 else ("other", "this"):
            got.clear()
            conns[side].execute(block)
            rounds[side].append(got[0])
    return {side: statistics.median(t) for side, t in rounds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--other", type=Path, required=True, help="the other checkout (its migrations/ and sql/)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--in-server", type=int, default=0, metavar="N",
                        help="also time each search in the server: N calls in a DO block per round, 9 rounds")
    parser.add_argument("--database-url", help="a server to use (default: an embedded one on --port)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("AGENTMEM_EMBEDDED_PORT", 55452)))
    args = parser.parse_args()
    if args.database_url:
        server_url = args.database_url
    else:
        from agentmem_dev import devserver
        server_url = devserver.start(ROOT / ".pgdata" / "bench", port=args.port)
    started, load = time.perf_counter(), os.getloadavg()[0]
    rng = np.random.default_rng(0)
    vectors = clustered(rng, N)
    big = int(N * 0.4)
    owners = ([("big", "alice")] * big + [("big", "bob")] * 200 + [("mid", "carol")] * 1_000
              + [(f"t{i % 100}", "u") for i in range(N - big - 1_200)])
    order = rng.permutation(N)
    owners, vectors = [owners[i] for i in order], vectors[order]
    near = {o: vectors[[i for i, x in enumerate(owners) if x == o]] for o in (("big", "alice"), ("t1", "u"),
                                                                            ("mid", "carol"))}
    dbs = {"this": database(server_url, "agentmem_probe_path_this", ROOT, owners, vectors),
           "other": database(server_url, "agentmem_probe_path_other", args.other, owners, vectors)}

    search = ("select count(*) from agentmem.search_messages(user_id => %s, query_embedding => %s, k => 10, "
              "model => 'all-minilm')")
    facts = ("select count(*) from agentmem.recall_facts(user_id => 'u', query_embedding => %s, k => 10, "
             "model => 'all-minilm')")
    cache = ("select hit from agentmem.cache_lookup(question => 'what about thing 7, again?', "
             "question_embedding => %s, model => 'all-minilm')")
    cases = [
        ("search_messages, 200-message user (exact scan)", "t1", search, ("u",), ("t1", "u")),
        ("search_messages, 1,000-message user (exact scan)", "mid", search, ("carol",), ("mid", "carol")),
        ("search_messages, 8,000-message user (shared index)", "big", search, ("alice",), ("big", "alice")),
        ("recall_facts, 300-fact user (exact scan)", "t1", facts, (), ("t1", "u")),
        ("cache_lookup, 300-entry key (exact scan, semantic hit)", "t1", cache, (), ("t1", "u")),
        ("search_messages, 8,000-message user (tenant's own indexes)", "big", search, ("alice",), ("big", "alice")),
    ]
    rows = []
    for label, tenant, statement, args_before, owner in cases:
        if "own indexes" in label:
            for admin_url, _ in dbs.values():
                with connect(admin_url) as admin:
                    admin.execute("select agentmem.create_tenant_index(tenant_id => 'big', model => %s)", (MODEL,))
        conns = {k: connect(app, tenant=tenant) for k, (_, app) in dbs.items()}
        times: dict[str, list[float]] = {"this": [], "other": []}
        qrng = np.random.default_rng(5)
        mine = near[owner]
        for q in range(args.queries + 10):
            v = mine[qrng.integers(0, len(mine))] + qrng.standard_normal(DIM).astype(np.float32) * 0.05
            v = v / np.linalg.norm(v)
            got = {}
            for side in (("this", "other") if q % 2 else ("other", "this")):
                t0 = time.perf_counter()
                got[side] = conns[side].execute(statement, (*args_before, v)).fetchall()
                if q >= 10:  # the first ten warm the caches
                    times[side].append((time.perf_counter() - t0) * 1000)
            assert got["this"] == got["other"], (label, got)
        p = {s: (statistics.median(t), percentile(t, 95)) for s, t in times.items()}
        row = (f"| {label} | {p['this'][0]:.2f} / {p['this'][1]:.2f} | {p['other'][0]:.2f} / "
               f"{p['other'][1]:.2f} | {p['this'][0] / p['other'][0]:.2f}× |")
        if args.in_server:
            loop = in_server(conns, statement, args_before, args.in_server)
            row += f" {loop['this']:.3f} | {loop['other']:.3f} | {loop['this'] / loop['other']:.2f}× |"
        for c in conns.values():
            c.close()
        rows.append(row)
        print(rows[-1], flush=True)
    today = datetime.date.today().isoformat()
    text = "\n".join([
        "## The vector search of two checkouts, side by side", "",
        f"{today}, 2 cores shared with other work (load average {load:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end), embedded PostgreSQL + pgvector. Command: `{command()}` "
        f"({(time.perf_counter() - started) / 60:.1f} min). This checkout against `{args.other}`; each "
        f"statement through SQL as the application role, {args.queries} queries per row, each on both "
        "databases back to back (same rows, same answers, checked), the first of the two turning.", "",
        *([f"In the server (last three columns): {args.in_server} calls in one DO block, random query vectors "
           "made in the block, 9 rounds on each database in turn; the median round's ms per call.", ""]
          if args.in_server else []),
        "| search | this p50 / p95 ms | other p50 / p95 ms | p50 ratio |"
        + (" in server, this ms | other ms | ratio |" if args.in_server else ""),
        "|---|---:|---:|---:|" + ("---:|---:|---:|" if args.in_server else ""), *rows, ""])
    write_report(args.out, text)


if __name__ == "__main__":
    main()
