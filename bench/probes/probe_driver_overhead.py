"""What does the Python driver add to a call, beside the call itself?

    .venv/bin/python bench/probes/probe_driver_overhead.py --out bench/results/driver_overhead.md [--port P]

One search (`search_messages`, k 10, 384-d random unit vectors, the model all-minilm) for two users: one of
100 messages and one of 3,000 (both an exact scan of the user's rows), beside 20,000 messages of 100 small
tenants. Each query runs three ways, back to back, in an order that turns with the query:
  - bare call: one statement on an open autocommit connection whose session already has the tenant (no pool,
    no tenant per call: the least a client can do, one round trip);
  - explicit transaction: a driver that opens a transaction per call (`ExplicitMemory` below, the same methods): on a
    psycopg_pool pool with its own check (an empty query) on checkout, then BEGIN, set_tenant(local => true),
    the call, COMMIT: five round trips;
  - Memory: `Memory.search_messages` (set_tenant and the call in one pipeline on an autocommit
    connection, one round trip; the pool's checkout looks at the socket instead of querying).
A write is measured the same way (`store_message` into a conversation of the user's, 384-d embedding).
"""

from __future__ import annotations

import datetime
import itertools
import os
import sys
import time
from pathlib import Path

import numpy as np
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/common.py
from common import command, connect, load_interleaved, p50_p95, probe_start, unit_vectors, write_report  # noqa: E402

from agentmem.client import Memory  # noqa: E402
from agentmem.connections import SET_TENANT  # noqa: E402
from agentmem.params import check_params  # noqa: E402

MODEL, DIM, OTHERS, QUERIES = "all-minilm", 384, 20_000, 300
USERS = {"u100": 100, "u3000": 3000}
LOAD_AT_START = os.getloadavg()[0]
SEARCH = ("select * from agentmem.search_messages(user_id => %s, query_embedding => %s, k => %s, "
          "model => %s)")
STORE = ("select * from agentmem.store_message(conversation_id => %s, role => %s, content => %s, "
         "embedding => %s, model => %s)")


class ExplicitMemory(Memory):
    """The driver before one round trip: a pool that checks each connection with a query, and each call
    in a transaction of its own that sets the tenant first."""

    @classmethod
    def connect(cls, conninfo: str, *, tenant: str, embedder=None, min_size: int = 1, max_size: int = 10,
                timeout: float = 10.0) -> "ExplicitMemory":
        pool = ConnectionPool(conninfo, min_size=min_size, max_size=max_size, open=True,
                              configure=register_vector, check=ConnectionPool.check_connection, timeout=timeout)
        return cls(pool, tenant=tenant, embedder=embedder)

    def run(self, stmt, conn=None):
        check_params(stmt.params)
        with self.pool.connection() as c, c.transaction():
            c.execute(SET_TENANT, (self.tenant,))
            with c.cursor(row_factory=stmt.row_factory()) as cur:
                cur.execute(stmt.query, stmt.params)
                rows = cur.fetchall()
        return stmt.result(rows)


def main() -> int:
    args, admin_url, app_url, started = probe_start(__doc__, "agentmem_probe_driver")
    rng = np.random.default_rng(11)
    owners = [(f"s{i % 100}", "user") for i in range(OTHERS)]
    for user, n in USERS.items():
        owners += [(user, "user")] * n
    with connect(admin_url) as admin:
        load_interleaved(admin, owners, rng, MODEL, DIM)

    times: dict[tuple[str, str, str], list[float]] = {}
    bare = connect(app_url)
    old = ExplicitMemory.connect(app_url, tenant="u100", max_size=1)
    mem = Memory.connect(app_url, tenant="u100", max_size=1)

    try:
        for user in USERS:
            bare.execute("select agentmem.set_tenant(tenant_id => %s)", (user,))
            client, explicit = mem.for_tenant(user), old.for_tenant(user)
            cid = client.start_conversation("user")
            queries = unit_vectors(rng, QUERIES + 5, DIM)
            ways = {
                "bare call": lambda q: bare.execute(SEARCH, ("user", q, 10, MODEL)).fetchall(),
                "explicit transaction": lambda q: explicit.search_messages("user", q, 10, model=MODEL),
                "Memory": lambda q: client.search_messages("user", q, 10, model=MODEL),
            }
            writes = {
                "bare call": lambda v: bare.execute(STORE, (cid, "user", "a message", v, MODEL)).fetchall(),
                "explicit transaction": lambda v: explicit.store_message(cid, "user", "a message", v, model=MODEL),
                "Memory": lambda v: client.store_message(cid, "user", "a message", v, model=MODEL),
            }
            for op, fns in (("search", ways), ("store_message", writes)):
                for j, q in enumerate(queries):
                    names = list(fns)
                    for name in itertools.islice(itertools.cycle(names), j % 3, j % 3 + 3):
                        t0 = time.perf_counter()
                        got = fns[name](q)
                        ms = (time.perf_counter() - t0) * 1000
                        assert got, (op, name)
                        if j >= 5:  # warm-up
                            times.setdefault((user, op, name), []).append(ms)
                    if j % 100 == 0:
                        print(user, op, j, flush=True)
    finally:
        mem.close()
        old.close()
        bare.close()

    lines = [
        "## What the driver adds to a call",
        "",
        f"{datetime.date.today()}, {os.cpu_count()} cores shared with other work (load average {LOAD_AT_START:.1f} at "
        f"the start, {os.getloadavg()[0]:.1f} at the end), embedded PostgreSQL 18 + pgvector 0.8, client and "
        f"server on one machine (TCP on 127.0.0.1). Command: `{command()}` "
        f"({(time.perf_counter() - started) / 60:.1f} min).",
        "",
        f"Users of {', '.join(f'{n:,}' for n in USERS.values())} messages ({DIM}-d random unit vectors) among "
        f"{OTHERS:,} of 100 other tenants; {QUERIES} queries (and {QUERIES} writes) per user, each run the three "
        "ways back to back in turns. Bare call: one statement on an open connection whose session has the tenant. "
        "Explicit transaction: a transaction per call (pool check, BEGIN, set_tenant, call, COMMIT). "
        "Memory: the driver (set_tenant and the call in one pipeline, one round trip).",
        "",
        "| user | call | bare call p50 / p95 ms | explicit transaction | Memory | Memory minus bare (p50) | "
        "explicit minus Memory (p50) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for user in USERS:
        for op in ("search", "store_message"):
            cells = {name: p50_p95(times[(user, op, name)]) for name in ("bare call", "explicit transaction",
                                                                          "Memory")}
            lines.append(
                f"| {USERS[user]:,} messages | {op} | "
                + " | ".join(f"{p50:.2f} / {p95:.2f}" for p50, p95 in cells.values())
                + f" | {cells['Memory'][0] - cells['bare call'][0]:+.2f} ms"
                + f" | {cells['explicit transaction'][0] - cells['Memory'][0]:+.2f} ms |")
    write_report(args.out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
