"""Benchmark: export and import of a user's memory, and a tenant's export streamed.

    .venv/bin/python bench/bench_export.py --out bench/results/export.md [--quick] [--database-url URL]

Without --database-url it starts its own embedded PostgreSQL (data in .pgdata/bench, port
$AGENTMEM_EMBEDDED_PORT or 55436) and migrates a fresh database.

1. A user with 10,000 messages (with embeddings, all-minilm 384 dimensions, conversations of 500),
   1,000 facts (each with one history entry) and 200 cached answers is bulk loaded (bench's Bulk: COPY
   into the tables, the HNSW indexes in place, as an import finds them): the original bulk load.
2. `agentmem export --tenant acme --user alice -o FILE` (the CLI, in a child process): seconds and the
   child's peak resident memory (wait4's ru_maxrss).
3. forget_user, then `agentmem import FILE --tenant acme` (child process): seconds and peak memory;
   then the export again, which must equal the first apart from the header's time (asserted).
4. A tenant of 10 such users' messages (100,000 messages; --quick: 2 users) exported with
   `agentmem export --tenant big` (streamed through a cursor): seconds, peak memory, bytes.

Ratios are measured side by side in this one run (the machine is noisy): import / bulk load.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from common import ROOT, Bulk, command, connect, fresh_database, start_server, unit_vectors, write_report

MODEL = "all-minilm"
DBNAME = "agentmem_bench_export"
AGENTMEM = str(ROOT / ".venv" / "bin" / "agentmem")


# Linux carries a process's peak RSS across exec: a child forked from this (large) process would report
# this process's size. A small launcher forks the CLI instead and reports the CLI's own peak.
LAUNCHER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def child(args: list[str]) -> tuple[float, float]:
    """Run the CLI; its wall seconds and peak resident memory in MiB."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, AGENTMEM, *args], capture_output=True, text=True,
                         check=True).stdout.split()
    seconds = time.perf_counter() - t0
    if out[0] != "0":
        raise SystemExit(f"agentmem {' '.join(args)} failed ({out[0]})")
    return seconds, int(out[1]) / 1024


def load_user(admin, bulk: Bulk, rng, tenant: str, user: str, n_msgs: int, n_facts: int, n_answers: int) -> float:
    t0 = time.perf_counter()
    bulk.user(tenant, user, n_msgs, 500, n_facts, n_answers, 0, embedding_cache=False)
    # one history entry per fact (the old text, as upsert_fact leaves it on a contradiction)
    admin.execute("insert into agentmem.fact_history (tenant_id, fact_id, user_id, subject, fact, source_message_ids, "
                  "valid_from) select tenant_id, fact_id, user_id, subject, 'before: ' || fact, source_message_ids, "
                  "created_at - interval '1 day' from agentmem.facts where tenant_id = %s and user_id = %s",
                  (tenant, user))
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--database-url")
    args = parser.parse_args()
    n_msgs, n_facts, n_answers = 10_000, 1_000, 200
    tenant_users = 2 if args.quick else 10
    rng = np.random.default_rng(7)
    wall0 = time.perf_counter()
    server = args.database_url or start_server(int(os.environ.get("AGENTMEM_EMBEDDED_PORT", 55436)))
    admin_url, app_url = fresh_database(server, DBNAME)
    assert app_url is not None
    admin = connect(admin_url)
    bulk = Bulk(admin, model=MODEL, rng=rng)
    admin.execute("select agentmem.set_tenant(tenant_id => 'acme')")
    bulk_s = load_user(admin, bulk, rng, "acme", "alice", n_msgs, n_facts, n_answers)
    admin.execute("analyze")
    counts = dict(admin.execute(
        "select 'messages', count(*) from agentmem.messages union all select 'facts', count(*) from agentmem.facts "
        "union all select 'fact_history', count(*) from agentmem.fact_history union all "
        "select 'cache_entries', count(*) from agentmem.cache_entries").fetchall())

    work = ROOT / ".pgdata" / "bench_export"
    work.mkdir(parents=True, exist_ok=True)
    first, again = work / "alice.jsonl", work / "alice-again.jsonl"
    export_s, export_mib = child(["export", "--database-url", app_url, "--tenant", "acme", "--user", "alice",
                                  "-o", str(first), "--no-progress"])
    lines = first.read_text().count("\n")
    size_mib = first.stat().st_size / 2**20
    app = connect(app_url, tenant="acme")
    t0 = time.perf_counter()
    app.execute("select agentmem.forget_user(user_id => 'alice')")
    forget_s = time.perf_counter() - t0
    import_s, import_mib = child(["import", str(first), "--database-url", app_url, "--tenant", "acme",
                                  "--no-progress"])
    child(["export", "--database-url", app_url, "--tenant", "acme", "--user", "alice", "-o", str(again),
           "--no-progress"])
    a, b = first.read_text().split("\n"), again.read_text().split("\n")
    assert a[1:] == b[1:], "the export after import differs from the first"

    # a tenant of tenant_users users, streamed
    print(f"user: bulk {bulk_s:.1f} s, export {export_s:.1f} s / {export_mib:.0f} MiB, "
          f"import {import_s:.1f} s / {import_mib:.0f} MiB", flush=True)
    with bulk.hnsw_dropped():   # the tenant's load is not measured: no index to maintain while loading
        for k in range(tenant_users):
            bulk.user("big", f"user-{k}", n_msgs, 500, 0, 0, 0, embedding_cache=False)
    tenant_file = work / "big.jsonl"
    tenant_s, tenant_mib = child(["export", "--database-url", admin_url, "--tenant", "big", "-o", str(tenant_file),
                                  "--no-progress"])
    tenant_size = tenant_file.stat().st_size / 2**20
    for f in (first, again, tenant_file):
        f.unlink()

    report = f"""# Export and import of a user's memory

Command: `{command()}`
Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, total {time.perf_counter() - wall0:.0f} s wall;
embedded PostgreSQL 18 + pgvector, 2 cores shared with other work (noisy: compare the ratio, not the seconds).

One user: {counts['messages']:,} messages with embeddings ({MODEL}, 384 dimensions), {counts['facts']:,} facts with
{counts['fact_history']:,} history entries, {counts['cache_entries']:,} cached answers; the file has {lines:,} lines,
{size_mib:.1f} MiB.

| step | seconds | client peak memory (MiB) |
|---|---:|---:|
| original bulk load (COPY, HNSW indexes in place) | {bulk_s:.1f} | - |
| `agentmem export --user alice` | {export_s:.1f} | {export_mib:.0f} |
| forget_user (before the import) | {forget_s:.1f} | - |
| `agentmem import alice.jsonl` | {import_s:.1f} | {import_mib:.0f} |

Import / original bulk load: **{import_s / bulk_s:.2f}x** (target: within 2x).
The export after the import equals the first apart from the header's time (asserted).

Tenant of {tenant_users} users, {tenant_users * n_msgs:,} messages, streamed through a cursor
(`agentmem export --tenant big`): {tenant_s:.1f} s, client peak memory {tenant_mib:.0f} MiB, {tenant_size:.0f} MiB written.
Client memory is the CLI process's peak resident set (wait4's ru_maxrss of the CLI, started by a
small launcher so that the benchmark's own size is not counted): Python, psycopg and one batch of
1,000 lines for an export, which is why the tenant's export needs no more than the user's; the
import holds the user's file in memory (import_user takes it in one call).
"""
    write_report(args.out, report)
    print(report)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
