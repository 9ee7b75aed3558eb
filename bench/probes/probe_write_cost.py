"""What does a tenant's own indexes cost its writes?

    .venv/bin/python bench/probes/probe_write_cost.py --out bench/results/write_cost.md [--port P]

One tenant of 10,000 messages (random 384-d unit vectors, the model all-minilm) beside 100 small tenants
of 20,000 messages in all, in the model's shared HNSW index. The app stores messages into the big tenant
one per call (`Memory.store_message`: the message, its tsvector and its embedding, one transaction),
250 per batch, under three index set-ups taken in turns so that none gets a quieter machine:
  - shared: the model's shared HNSW index only (no index of the tenant's own);
  - own HNSW: plus the tenant's own HNSW index (m 32, ef_construction 128);
  - own HNSW + exact: plus its exact index (IVFFlat of one list on the halfvec), as
    agentmem.create_tenant_index builds them for a tenant of at most exact_index_max_rows rows.
Switching set-ups drops or builds the tenant's indexes between batches (not timed).
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/common.py
from common import Bulk, command, connect, p50_p95, probe_start, unit_vectors, write_report  # noqa: E402

from agentmem.client import Memory  # noqa: E402

MODEL, DIM, BIG, SMALL, BATCH, ROUNDS = "all-minilm", 384, 10_000, 20_000, 250, 4
LOAD_AT_START = os.getloadavg()[0]


def set_up(admin, kind: str) -> None:
    """The tenant's own indexes for one set-up (built in this transaction, as create_tenant_index does)."""
    ddl = "select agentmem.tenant_index_ddl(tenant_id => 'big', model => %s, concurrently => false, kind => %s)"
    if kind == "shared":
        admin.execute("select agentmem.drop_tenant_index(tenant_id => 'big', model => %s)", (MODEL,))
        return
    admin.execute(admin.execute(ddl, (MODEL, "hnsw")).fetchone()[0])
    exact = admin.execute("select agentmem_private.exact_index_name('message_embeddings', 'big', %s)",
                          (MODEL,)).fetchone()[0]
    if kind == "own HNSW + exact":
        admin.execute(admin.execute(ddl, (MODEL, "exact")).fetchone()[0])
    else:
        admin.execute(f"drop index if exists agentmem.{exact}")


def main() -> int:
    args, admin_url, app_url, started = probe_start(__doc__, "agentmem_probe_write_cost")
    rng = np.random.default_rng(5)
    with connect(admin_url) as admin:
        bulk = Bulk(admin, model=MODEL, rng=rng)
        with bulk.hnsw_dropped(tables=("message_embeddings",)):
            bulk.messages("big", "user", unit_vectors(rng, BIG, DIM))
            bulk.load_messages([(f"s{i % 100}", "user") for i in range(SMALL)], unit_vectors(rng, SMALL, DIM))
        admin.execute("set maintenance_work_mem = '1GB'")
        kinds = ["shared", "own HNSW", "own HNSW + exact"]
        per_message: dict[str, list[float]] = {k: [] for k in kinds}
        vecs = unit_vectors(rng, ROUNDS * len(kinds) * BATCH, DIM)
        with Memory.connect(app_url, tenant="big", max_size=1) as mem:
            cid = mem.start_conversation("user")
            n = 0
            for r in range(ROUNDS):
                for kind in (kinds if r % 2 == 0 else kinds[::-1]):
                    set_up(admin, kind)
                    for _ in range(BATCH):
                        t0 = time.perf_counter()
                        mem.store_message(cid, "user", f"message {n}", vecs[n], model=MODEL)
                        per_message[kind].append((time.perf_counter() - t0) * 1000)
                        n += 1
                    print(kind, f"{np.mean(per_message[kind][-BATCH:]):.2f} ms", flush=True)
    base = np.mean(per_message["shared"])
    lines = [
        "## What a tenant's own indexes cost its writes",
        "",
        f"{datetime.date.today()}, {os.cpu_count()} cores shared with other work (load average {LOAD_AT_START:.1f} at "
        f"the start, {os.getloadavg()[0]:.1f} at the end), embedded PostgreSQL 18 + pgvector 0.8. Command: "
        f"`{command()}` ({(time.perf_counter() - started) / 60:.1f} min).",
        "",
        f"A tenant of {BIG:,} messages ({DIM}-d random unit vectors) beside {SMALL:,} of 100 small tenants; "
        f"{ROUNDS} rounds of {BATCH} messages per set-up, one `store_message` per call (message, tsvector, "
        "embedding), the set-ups taken in turns.",
        "",
        "| set-up | mean ms per message | p50 / p95 ms | messages/s | vs shared index only |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind in kinds:
        xs = per_message[kind]
        p50, p95 = p50_p95(xs)
        lines.append(f"| {kind} | {np.mean(xs):.2f} | {p50:.2f} / {p95:.2f} | {1000 / np.mean(xs):.0f} | "
                     f"{np.mean(xs) / base:.2f}× the time |")
    write_report(args.out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
