"""What does recording use cost a search?

    .venv/bin/python bench/probes/probe_use_cost.py --out bench/results/lifecycle.md [--port P]

One user of 10,000 messages (random 384-d unit vectors, the model all-minilm) beside 100 small tenants of
20,000 messages in all. The app calls `agentmem.search_messages` (k 10; one autocommit call, so each
search is its own transaction with its commit), by vector and hybrid (vector + words), under three
set-ups taken in turns so that none gets a quieter machine:
  - without: `agentmem_private.record_use` replaced by a function that returns at once (the search as it
    was before use was recorded);
  - with, unlogged log: as installed (`agentmem.use_log` is UNLOGGED);
  - with, logged log: `alter table agentmem.use_log set logged`, for comparison.
Between batches the log is folded (`agentmem.apply_use_log()`, timed apart), as the retention job does.
The bench server runs with fsync and synchronous_commit off (throwaway data), so the WAL flush a logged
log would add at commit on a durable server is not in these figures.
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

MODEL, DIM, BIG, SMALL, BATCH, ROUNDS, K = "all-minilm", 384, 10_000, 20_000, 200, 4, 10
LOAD_AT_START = os.getloadavg()[0]
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]

NO_OP = """
create or replace function agentmem_private.record_use(p_tenant text, p_kind text, p_user text, p_ids uuid[])
returns void language plpgsql volatile security invoker set search_path from current
as $$ begin return; end $$"""


def main() -> int:
    args, admin_url, app_url, started = probe_start(__doc__, "agentmem_probe_use_cost")
    rng = np.random.default_rng(7)
    with connect(admin_url) as admin:
        original = admin.execute("select pg_get_functiondef('agentmem_private.record_use(text, text, text, uuid[])'"
                                 "::regprocedure)").fetchone()[0]
        bulk = Bulk(admin, model=MODEL, rng=rng)
        contents = [" ".join(rng.choice(WORDS, 4)) + f" {i}" for i in range(BIG)]
        with bulk.hnsw_dropped(tables=("message_embeddings",)):
            bulk.messages("big", "user", unit_vectors(rng, BIG, DIM), contents=contents)
            bulk.load_messages([(f"s{i % 100}", "user") for i in range(SMALL)], unit_vectors(rng, SMALL, DIM))
        admin.execute("vacuum (analyze) agentmem.messages, agentmem.message_embeddings")

        def set_up(kind: str) -> None:
            admin.execute(NO_OP if kind == "without" else original)
            admin.execute(f"alter table agentmem.use_log set {'logged' if kind == 'with, logged log' else 'unlogged'}")

        kinds = ["without", "with, unlogged log", "with, logged log"]
        modes = ["vector", "hybrid"]
        ms: dict[tuple[str, str], list[float]] = {(k, m): [] for k in kinds for m in modes}
        folds: list[tuple[int, float]] = []
        queries = unit_vectors(rng, ROUNDS * len(kinds) * BATCH, DIM)
        with connect(app_url, tenant="big") as app:
            sql = {
                "vector": "select count(*) from agentmem.search_messages(user_id => 'user', query_embedding => %s, "
                          f"k => {K}, model => '{MODEL}')",
                "hybrid": "select count(*) from agentmem.search_messages(user_id => 'user', query_embedding => %s, "
                          f"k => {K}, model => '{MODEL}', query_text => %s)",
            }
            for q in queries[:50]:   # warm the caches and the plans
                app.execute(sql["vector"], (q,))
            n = 0
            for r in range(ROUNDS):
                for kind in (kinds if r % 2 == 0 else kinds[::-1]):
                    set_up(kind)
                    for _ in range(BATCH):
                        for mode in modes:
                            params = (queries[n],) if mode == "vector" else (queries[n], str(rng.choice(WORDS)))
                            t0 = time.perf_counter()
                            got = app.execute(sql[mode], params).fetchone()[0]
                            ms[(kind, mode)].append((time.perf_counter() - t0) * 1000)
                            assert got == K, got
                        n += 1
                    pending = admin.execute("select count(*) from agentmem.use_log").fetchone()[0]
                    t0 = time.perf_counter()
                    folded = admin.execute("select agentmem.apply_use_log()").fetchone()[0]
                    if pending:
                        folds.append((folded, (time.perf_counter() - t0) * 1000))
                    print(kind, {m: f"{np.median(ms[(kind, m)][-BATCH:]):.2f} ms" for m in modes}, flush=True)
        set_up("with, unlogged log")
        # The hook's own cost in the server, apart from the round trip: record_use of 10 ids, 5,000 times.
        ids = [r[0] for r in admin.execute("select message_id from agentmem.messages where tenant_id = 'big' limit 10")]
        t0 = time.perf_counter()
        admin.execute("select agentmem_private.record_use('big', 'message', 'user', %s::uuid[]) "
                      "from generate_series(1, 5000)", (ids,))
        direct_us = (time.perf_counter() - t0) * 1e6 / 5000
        admin.execute("select agentmem.apply_use_log()")
        used = admin.execute("select count(*), sum(use_count) from agentmem.messages where tenant_id = 'big' "
                             "and use_count > 0").fetchone()
    lines = [
        "## What recording use costs a search",
        "",
        f"{datetime.date.today()}, {os.cpu_count()} cores shared with other work (load average {LOAD_AT_START:.1f} at "
        f"the start, {os.getloadavg()[0]:.1f} at the end), embedded PostgreSQL 18 + pgvector 0.8, fsync and "
        f"synchronous_commit off. Command: `{command()}` ({(time.perf_counter() - started) / 60:.1f} min).",
        "",
        f"A user of {BIG:,} messages ({DIM}-d random unit vectors, four words each) beside {SMALL:,} messages of "
        f"100 small tenants; {ROUNDS} rounds of {BATCH} searches per set-up and mode, `search_messages` k {K}, "
        "one autocommit call each through psycopg, the set-ups taken in turns. Without: `record_use` a no-op.",
        "",
        "| set-up | mode | p50 ms | p95 ms | p50 vs without |",
        "|---|---|---:|---:|---:|",
    ]
    for mode in modes:
        base = p50_p95(ms[("without", mode)])[0]
        for kind in kinds:
            p50, p95 = p50_p95(ms[(kind, mode)])
            lines.append(f"| {kind} | {mode} | {p50:.2f} | {p95:.2f} | {p50 / base:.3f}× |")
    fold_n = sum(f[0] for f in folds)
    fold_ms = sum(f[1] for f in folds)
    lines += [
        "",
        f"The fold (`apply_use_log`, between batches, not in the figures above): {fold_n:,} uses in "
        f"{len(folds)} runs, {fold_ms:.0f} ms in all ({1000 * fold_ms / max(fold_n, 1):.1f} µs per use). "
        f"After the runs {used[0]:,} of the user's messages had been used, {used[1]:,} uses in all.",
        "",
        f"The hook alone, in the server (`record_use` of 10 ids, 5,000 calls in one statement): {direct_us:.1f} µs "
        "per search.",
    ]
    write_report(args.out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
