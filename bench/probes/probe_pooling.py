"""What do server-side prepared statements save the driver, and what does a transaction pooler add?

    .venv/bin/python bench/probes/probe_pooling.py --out bench/results/pooling.md [--port P] [--pooler-port Q]

The driver prepares no statement on the server by default (psycopg's prepare_threshold=None), so that it
works behind a transaction pooler; Memory.connect(prepare=True) keeps psycopg's default (a statement run
five times on a connection is prepared there). Three calls, each run three ways back to back, in an order
that turns with the query:
  - direct, prepare=False: Memory on a direct connection, the default;
  - direct, prepare=True: Memory on a direct connection, statements prepared;
  - PgBouncer, prepare=False: Memory through Debian's PgBouncer (pool_mode = transaction, started here by
    scripts/pgbouncer.sh on --pooler-port, in .pgdata/pgbouncer-probe) in front of the same server.
The calls: current_tenant (the smallest call: what parsing and planning the outer statement costs),
search_messages (k 10, 384-d, a user of 100 messages among 10,000 of 100 other tenants) and store_message.
Each way uses one pooled connection (max_size=1), the driver's one round trip per call.
"""

from __future__ import annotations

import datetime
import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/common.py
from common import ROOT, command, connect, load_interleaved, p50_p95, unit_vectors, write_report  # noqa: E402
from common import fresh_database, start_server  # noqa: E402

from agentmem.client import Memory  # noqa: E402

MODEL, DIM, OTHERS, USER_ROWS, QUERIES = "all-minilm", 384, 10_000, 100, 400
LOAD_AT_START = os.getloadavg()[0]
WAYS = ("direct, prepare=False", "direct, prepare=True", "PgBouncer, prepare=False")


def main() -> int:
    import argparse
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--port", type=int, default=int(os.environ.get("AGENTMEM_EMBEDDED_PORT", 55452)))
    parser.add_argument("--pooler-port", type=int, default=int(os.environ.get("AGENTMEM_POOLER_PORT", 55421)) + 1)
    args = parser.parse_args()
    started = time.perf_counter()
    admin_url, app_url = fresh_database(start_server(args.port), "agentmem_probe_pooling")
    assert app_url is not None
    rng = np.random.default_rng(7)
    owners = [(f"s{i % 100}", "user") for i in range(OTHERS)] + [("u100", "user")] * USER_ROWS
    with connect(admin_url) as admin:
        load_interleaved(admin, owners, rng, MODEL, DIM)
        version = admin.execute("show server_version").fetchone()[0]
    env = {**os.environ, "AGENTMEM_POOLER_PORT": str(args.pooler_port),
           "AGENTMEM_POOLER_UPSTREAM_PORT": str(args.port),
           "AGENTMEM_POOLER_DIR": str(ROOT / ".pgdata" / "pgbouncer-probe")}
    script = str(ROOT / "scripts" / "pgbouncer.sh")
    pooler = subprocess.run(["bash", script, "start"], env=env, check=True, capture_output=True,
                            text=True).stdout.strip()
    bouncer = subprocess.run(["pgbouncer", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    pooled_url = f"{pooler.replace('://', '://agentmem_bench_app@')}/agentmem_probe_pooling"
    clients = {
        WAYS[0]: Memory.connect(app_url, tenant="u100", max_size=1),
        WAYS[1]: Memory.connect(app_url, tenant="u100", max_size=1, prepare=True),
        WAYS[2]: Memory.connect(pooled_url, tenant="u100", max_size=1),
    }
    times: dict[tuple[str, str], list[float]] = {}
    planning: dict[str, list[float]] = {}
    try:
        cids = {way: mem.start_conversation("user") for way, mem in clients.items()}
        queries = unit_vectors(rng, QUERIES + 10, DIM)
        calls = {
            "current_tenant": lambda way, q: clients[way].current_tenant(),
            "search_messages": lambda way, q: clients[way].search_messages("user", q, 10, model=MODEL),
            "store_message": lambda way, q: clients[way].store_message(cids[way], "user", "a message", q,
                                                                       model=MODEL),
        }
        for op, fn in calls.items():
            for j, q in enumerate(queries):
                for way in itertools.islice(itertools.cycle(WAYS), j % 3, j % 3 + 3):
                    t0 = time.perf_counter()
                    got = fn(way, q)
                    ms = (time.perf_counter() - t0) * 1000
                    assert got, (op, way)
                    if j >= 10:  # warm-up: prepared from the fifth run on
                        times.setdefault((op, way), []).append(ms)
            print(op, flush=True)
        # What a prepared statement saves, measured by the server: the planning time of each call's
        # statement (parse and analysis come on top, and are smaller), as the application login.
        with connect(app_url, tenant="u100") as bare:
            cid = bare.execute("select agentmem.start_conversation(user_id => 'user')").fetchone()[0]
            statements = {
                "current_tenant": ("select agentmem.current_tenant()", ()),
                "search_messages": ("select * from agentmem.search_messages(user_id => %s, query_embedding => %s, "
                                    "k => %s, model => %s)", ("user", queries[0], 10, MODEL)),
                "store_message": ("select * from agentmem.store_message(conversation_id => %s, role => %s, "
                                  "content => %s, embedding => %s, model => %s)",
                                  (cid, "user", "a message", queries[0], MODEL)),
            }
            for op, (sql, params) in statements.items():
                for _ in range(100):
                    plan = bare.execute("explain (analyze, summary, format json) " + sql, params).fetchone()[0]
                    planning.setdefault(op, []).append(plan[0]["Planning Time"])
    finally:
        for mem in clients.values():
            mem.close()
        subprocess.run(["bash", script, "stop"], env=env, check=False)

    lines = [
        "## Prepared statements and a transaction pooler: what each choice costs a call",
        "",
        f"{datetime.date.today()}, {os.cpu_count()} cores shared with other work (load average {LOAD_AT_START:.1f} "
        f"at the start, {os.getloadavg()[0]:.1f} at the end), embedded PostgreSQL {version} + pgvector, "
        f"{bouncer} (pool_mode = transaction), client, pooler and server on one machine (TCP on 127.0.0.1). "
        f"Command: `{command()}` ({(time.perf_counter() - started) / 60:.1f} min).",
        "",
        f"A user of {USER_ROWS} messages ({DIM}-d random unit vectors) among {OTHERS:,} of 100 other tenants; "
        f"{QUERIES} runs of each call per way, the three ways back to back in turns, one pooled connection "
        "each. direct: Memory on a direct connection; prepare=True: statements prepared on the server from "
        "their fifth run (psycopg's default); PgBouncer: Memory through PgBouncer in transaction mode, "
        "where only prepare=False works (prepare=True fails with 'prepared statement \"_pg3_0\" already "
        "exists' once a call lands on another server connection: tests/test_pooling.py).",
        "",
        "The minimum is the cost of a call with the least interference from other work on the machine.",
        "",
        "| call | " + " | ".join(f"{w}: min / p50 / p95 ms" for w in WAYS)
        + " | prepare=True saves (min; p50) | PgBouncer adds (min; p50) |",
        "|---|" + "---:|" * (len(WAYS) + 2),
    ]
    for op in calls:
        cells = {way: (min(times[(op, way)]), *p50_p95(times[(op, way)])) for way in WAYS}
        d, p, b = cells[WAYS[0]], cells[WAYS[1]], cells[WAYS[2]]
        lines.append(
            f"| {op} | " + " | ".join(f"{lo:.3f} / {p50:.3f} / {p95:.3f}" for lo, p50, p95 in cells.values())
            + f" | {d[0] - p[0]:+.3f}; {d[1] - p[1]:+.3f} ms"
            + f" | {b[0] - d[0]:+.3f}; {b[1] - d[1]:+.3f} ms |")
    lines += [
        "",
        "What a prepared statement can save at most, as the server measures it: the planning time of each "
        "call's statement (EXPLAIN ANALYZE's Planning Time, 100 runs, as the application login, the tenant set "
        "for the session).",
        "",
        "| call | planning min / p50 ms |",
        "|---|---:|",
    ]
    for op, xs in planning.items():
        lines.append(f"| {op} | {min(xs):.3f} / {p50_p95(xs)[0]:.3f} |")
    write_report(args.out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
