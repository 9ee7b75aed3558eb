"""What do many tenants with their own indexes cost everyone else's searches and writes?

    .venv/bin/python bench/probes/probe_many_tenant_indexes.py --out bench/results/many_tenant_indexes.md [--port P]

A tenant's own indexes are partial indexes of the one message_embeddings table (docs/vector_search.md: partial
index, not partitioning). PostgreSQL opens (and locks) every index of a table when it plans a statement on
it and when it inserts a row into it, and tests every partial index's predicate against each row inserted.
So the question a DBA asks before giving hundreds of tenants their own indexes: what does the 400th index
cost the searches and writes that do not use it?

Data: a big tenant of 10,000 messages with its own indexes (agentmem.create_tenant_index), 100 small tenants
of 200 messages each, and up to 200 more tenants of 60 messages, each given its own indexes (an HNSW and an
exact index: two indexes a tenant) step by step: 0, 50 and 200 such tenants, then back down to 50 and 0
(agentmem.drop_tenant_index), so that a drift of the machine shows as a difference between the two passes.
Random 384-d unit vectors, the model all-minilm. At each step, through the driver (`Memory`), in turns:
  - small search: `search_messages` of a small tenant's user (200 messages: an exact scan, cached plan);
  - big search: `search_messages` of the big tenant's user (its own indexes: a statement planned per call);
  - store: `store_message` into a small tenant (one message per call: an insert into every index's table).
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/common.py
from common import command, connect, load_interleaved, p50_p95, probe_start, unit_vectors, write_report  # noqa: E402

from agentmem.client import Memory  # noqa: E402

MODEL, DIM, BIG, SMALL, SMALL_ROWS, INDEXED_ROWS, QUERIES = "all-minilm", 384, 10_000, 100, 200, 60, 200
STEPS = (0, 50, 200, 50, 0)
LOAD_AT_START = os.getloadavg()[0]
CALLS = ("small search", "big search", "store")


def set_indexed(admin, have: int, want: int) -> tuple[int, float]:
    """Give tenants i0..i<want-1> their own indexes (or drop those past want); the count and seconds taken."""
    t0 = time.perf_counter()
    for i in range(have, want):
        admin.execute("select agentmem.create_tenant_index(tenant_id => %s, model => %s)", (f"i{i:03d}", MODEL))
    for i in range(want, have):
        admin.execute("select agentmem.drop_tenant_index(tenant_id => %s, model => %s)", (f"i{i:03d}", MODEL))
    return want, time.perf_counter() - t0


def main() -> int:
    args, admin_url, app_url, started = probe_start(__doc__, "agentmem_probe_many_tenant_indexes")
    rng = np.random.default_rng(23)
    owners = [("big", "user")] * BIG + [(f"s{i % SMALL}", "user") for i in range(SMALL * SMALL_ROWS)]
    owners += [(f"i{i % STEPS[2]:03d}", "user") for i in range(STEPS[2] * INDEXED_ROWS)]
    with connect(admin_url) as admin:
        load_interleaved(admin, owners, rng, MODEL, DIM)
        admin.execute("select agentmem.create_tenant_index(tenant_id => 'big', model => %s)", (MODEL,))
        queries = unit_vectors(rng, QUERIES, DIM)
        writes = unit_vectors(rng, QUERIES * len(STEPS), DIM)
        times: dict[tuple[int, int, str], list[float]] = {}
        builds: list[tuple[int, int, float]] = []
        have, n = 0, 0
        with Memory.connect(app_url, tenant="s0", max_size=1) as mem:
            small, big, writer = mem.for_tenant("s0"), mem.for_tenant("big"), mem.for_tenant("s1")
            cid = writer.start_conversation("user")
            for step, want in enumerate(STEPS):
                before = have
                have, seconds = set_indexed(admin, have, want)
                builds.append((before, want, seconds))
                indexes = admin.execute("select count(*) from pg_index where indrelid = "
                                        "'agentmem.message_embeddings'::regclass").fetchone()[0]
                for j, q in enumerate(queries):
                    for call in CALLS[j % 3:] + CALLS[:j % 3]:
                        t0 = time.perf_counter()
                        if call == "small search":
                            hits = small.search_messages("user", q, k=10, model=MODEL)
                        elif call == "big search":
                            hits = big.search_messages("user", q, k=10, model=MODEL)
                        else:
                            writer.store_message(cid, "user", f"message {n}", writes[n], model=MODEL)
                            n += 1
                            hits = [None] * 10
                        ms = (time.perf_counter() - t0) * 1000
                        if len(hits) != 10:
                            raise SystemExit(f"{call} returned {len(hits)} rows")
                        if j >= 3:  # warm-up: the first calls after the indexes changed re-plan
                            times.setdefault((step, indexes, call), []).append(ms)
                print(step, want, indexes, {c: round(float(np.median(times[(step, indexes, c)])), 2) for c in CALLS},
                      flush=True)
    lines = [
        "## What many tenants' own indexes cost the searches and writes that do not use them",
        "",
        f"{datetime.date.today()}, {os.cpu_count()} cores shared with other work (load average {LOAD_AT_START:.1f} at "
        f"the start, {os.getloadavg()[0]:.1f} at the end), embedded PostgreSQL 18 + pgvector 0.8. Command: "
        f"`{command()}` ({(time.perf_counter() - started) / 60:.1f} min).",
        "",
        f"message_embeddings holds {len(owners):,} rows ({DIM}-d random unit vectors): a big tenant of {BIG:,} with "
        f"its own indexes, {SMALL} small tenants of {SMALL_ROWS}, and {STEPS[2]} tenants of {INDEXED_ROWS} given "
        "their own indexes (agentmem.create_tenant_index: HNSW + exact index, two per tenant) step by step, up and "
        f"then down again. At each step {QUERIES - 3} calls of each kind through `Memory`, in turns (after 3 "
        "warm-up calls each). Indexes: all of message_embeddings' (primary key, user B-tree, the two models' "
        "shared HNSW indexes, the big tenant's two, and the indexed tenants').",
        "",
        "| step | tenants with own indexes | indexes on message_embeddings | "
        + " | ".join(f"{c} p50 / p95 ms" for c in CALLS) + " |",
        "|---:|---:|---:|" + "---:|" * len(CALLS),
    ]
    for step, want in enumerate(STEPS):
        key = next(k for k in times if k[0] == step)
        cells = " | ".join("{:.2f} / {:.2f}".format(*p50_p95(times[(step, key[1], c)])) for c in CALLS)
        lines.append(f"| {step + 1} | {want + 1} | {key[1]} | {cells} |")
    lines += ["", "Building or dropping the tenants' indexes between steps (not timed in the table): "
              + "; ".join(f"{a} → {b} tenants {s:.1f} s" for a, b, s in builds if a != b) + "."]
    write_report(args.out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
