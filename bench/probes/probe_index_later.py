"""What do vectors waiting for the index (agentmem.index_later) cost a search?

    .venv/bin/python bench/probes/probe_index_later.py --out bench/results/write_path.md [--port P]

One user of 20,000 messages (random 384-d unit vectors, the model all-minilm) beside 20,000 of 100 other
tenants, in the model's shared HNSW index. search_messages k=10 through the index path, with 0, 100 and
1,000 of the user's vectors waiting in pending_embedding (written by store_message with
agentmem.index_later on), the set-ups taken in turns by rounds of 100 queries; then
agentmem.index_pending_vectors, timed, moves the pending ones into the index. p50 / p95 of the round trip.
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

MODEL, DIM, BIG, OTHERS, ROUNDS, QUERIES = "all-minilm", 384, 20_000, 20_000, 4, 100
LOAD_AT_START = os.getloadavg()[0]
SEARCH = ("select message_id from agentmem.search_messages(user_id => 'big', query_embedding => %s, k => 10, "
          "model => 'all-minilm')")
STORE = ("select message_id from agentmem.store_message(conversation_id => %s, role => 'user', content => %s, "
         "embedding => %s, model => 'all-minilm')")


def main() -> int:
    args, admin_url, app_url, started = probe_start(__doc__, "agentmem_probe_index_later")
    rng = np.random.default_rng(3)
    with connect(admin_url) as admin:
        bulk = Bulk(admin, model=MODEL, rng=rng)
        with bulk.hnsw_dropped(tables=("message_embeddings",)):
            bulk.messages("acme", "big", unit_vectors(rng, BIG, DIM))
            bulk.load_messages([(f"s{i % 100}", "user") for i in range(OTHERS)], unit_vectors(rng, OTHERS, DIM))
        admin.execute("vacuum analyze agentmem.message_embeddings")
    app = connect(app_url, tenant="acme")
    cid = app.execute("select agentmem.start_conversation(user_id => 'big')").fetchone()[0]
    app.execute("set agentmem.index_later = on")
    pending_sets = {0: [], 100: [], 1000: []}
    times: dict[int, list[float]] = {n: [] for n in pending_sets}
    queries = unit_vectors(rng, QUERIES * ROUNDS * len(pending_sets), DIM)
    qi = 0
    written = 0
    plans = set()
    for rnd in range(ROUNDS):
        order = list(pending_sets) if rnd % 2 == 0 else list(reversed(pending_sets))
        for n in order:
            # bring the user's pending vectors to n: write the missing ones, or fold and write again
            with connect(admin_url) as admin:
                have = admin.execute("select count(*) from agentmem.message_embeddings where embedding is null").fetchone()[0]
                if have > n:
                    admin.execute("select agentmem.index_pending_vectors()")
                    have = 0
            for v in unit_vectors(rng, n - have, DIM):
                app.execute(STORE, (cid, f"pending {written}", v))
                written += 1
            for _ in range(QUERIES):
                q = queries[qi]
                qi += 1
                t0 = time.perf_counter()
                app.execute(SEARCH, (q,)).fetchall()
                times[n].append((time.perf_counter() - t0) * 1000)
    with connect(admin_url) as admin:  # the job, timed on 1,000 waiting vectors
        have = admin.execute("select count(*) from agentmem.message_embeddings where embedding is null").fetchone()[0]
        for v in unit_vectors(rng, 1000 - have, DIM):
            app.execute(STORE, (cid, f"pending {written}", v))
            written += 1
        have = admin.execute("select count(*) from agentmem.message_embeddings where embedding is null").fetchone()[0]
        t0 = time.perf_counter()
        moved = admin.execute("select agentmem.index_pending_vectors()").fetchone()[0]
        fold_s = time.perf_counter() - t0
    app.close()

    lines = [
        "## What vectors waiting for the index cost a search (agentmem.index_later)",
        "",
        f"{datetime.date.today()}, {os.cpu_count()} cores shared with other work (load average {LOAD_AT_START:.1f} at the "
        f"start, {os.getloadavg()[0]:.1f} at the end), embedded PostgreSQL + pgvector. Command: `{command()}` "
        f"({(time.perf_counter() - started) / 60:.1f} min).",
        "",
        f"One user of {BIG:,} messages ({DIM}-d random unit vectors) beside {OTHERS:,} of 100 other tenants, the "
        f"model's shared HNSW index; search_messages k=10 (the index path: {BIG:,} candidates are over "
        "exact_search_max_rows), with the user's vectors waiting in pending_embedding as given, written by "
        f"store_message with agentmem.index_later on; {ROUNDS} rounds of {QUERIES} queries per set-up, in turns.",
        "",
        "| vectors waiting | search p50 / p95 ms | p50 vs none |",
        "|---:|---:|---:|",
    ]
    base = p50_p95(times[0])[0]
    for n, ts in times.items():
        p50, p95 = p50_p95(ts)
        lines.append(f"| {n:,} | {p50:.2f} / {p95:.2f} | {p50 / base:.2f}× |")
    lines += ["", f"Then agentmem.index_pending_vectors() moved {moved:,} pending vectors ({have:,} counted) into the "
              f"index in {fold_s:.2f} s ({moved / max(fold_s, 1e-9):,.0f} per second).", ""]
    write_report(args.out, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
