"""Where one cache_lookup spends its time, statement by statement, in the database a
``bench_cache.py --scale`` run left (agentmem_bench_cache_scale on the bench server).

    .venv/bin/python bench/bench_cache.py --port P --scale 1000000 --scale-tenants 1000 --out /tmp/x.md
    .venv/bin/python bench/probes/probe_cache_lookup.py --port P --lookups 100

A login of its own (agentmem_bench_explain, granted every tenant) runs with auto_explain (log_min_duration
0, nested statements, reported as NOTICEs) and track_functions = all, and looks up, in tenants c0000 to
c0199, the questions bench_cache.py stored there (exact hit), a reworded one with a near vector (semantic
hit) and an unrelated one (miss): per outcome, every statement's mean inclusive µs per lookup, and the
functions' self time (pg_stat_user_functions). The instruments add their own overhead.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import CACHE_SCALE_DB as DB  # noqa: E402
from common import CACHE_SCALE_WORDS as WORDS  # noqa: E402
from common import cache_scale_question as question  # noqa: E402
from common import as_login, cache_scale_stored, connect, database_url, explained, start_server  # noqa: E402

LOGIN = "agentmem_bench_explain"



def label(q: str) -> str:
    q = " ".join(q.split())
    q = re.sub(r"'\[[^']*\]'", "'[…]'", q)
    q = re.sub(r"'c\d{4}'", "'c…'", q)
    q = q.split(" Query Parameters:")[0]
    return q if len(q) <= 140 else q[:137] + "…"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--lookups", type=int, default=100)
    ap.add_argument("--per", type=int, default=1000, help="entries per tenant of the --scale run")
    args = ap.parse_args()
    server = start_server(args.port)
    admin_url = database_url(server, DB)
    with connect(admin_url) as admin:
        if not admin.execute("select 1 from pg_roles where rolname = %s", (LOGIN,)).fetchone():
            admin.execute(f"create role {LOGIN} login")
        admin.execute("select agentmem.grant_app_role(role_name => %s)", (LOGIN,))
        admin.execute("select agentmem.grant_tenant(role_name => %s, all_tenants => true)", (LOGIN,))
        admin.execute(f"alter role {LOGIN} in database {DB} set session_preload_libraries = 'auto_explain'")
        for setting, value in (("auto_explain.log_min_duration", "0"), ("auto_explain.log_nested_statements", "on"),
                               ("auto_explain.log_level", "notice"), ("track_functions", "all")):
            admin.execute(f"alter role {LOGIN} in database {DB} set {setting} = '{value}'")
    url = as_login(admin_url, LOGIN)
    # the vectors bench_cache.py drew for tenants 0..199 (the same generator, in the same order)
    stored = cache_scale_stored(args.per)
    r2 = np.random.default_rng(5)
    notes: list[str] = []
    out: dict[str, dict[str, list[float]]] = {}
    funcs: dict[str, list[tuple]] = {}
    totals: dict[str, list[float]] = defaultdict(list)
    admin = connect(admin_url)
    with connect(url) as conn:
        conn.add_notice_handler(lambda d: notes.append(d.message_primary))
        for outcome in ("exact hit", "semantic hit", "miss"):
            stats: dict[str, list[float]] = defaultdict(list)
            conn.execute("select pg_stat_force_next_flush()")
            admin.execute("select pg_stat_reset()")
            for i in range(args.lookups + 10):
                t = int(r2.integers(0, 200))
                k = int(r2.integers(0, 20))
                if outcome == "exact hit":
                    q, v = question(t, k), stored[t][k]
                elif outcome == "semantic hit":
                    v = stored[t][k] + r2.standard_normal(384).astype(np.float32) * 0.01
                    q, v = "please, " + question(t, k), v / np.linalg.norm(v)
                else:
                    v = r2.standard_normal(384).astype(np.float32)
                    q, v = f"what is the {WORDS[i % 16]} of workspace {t} on day {i}", v / np.linalg.norm(v)
                conn.execute("select agentmem.set_tenant(tenant_id => %s)", (f"c{t:04d}",))
                notes.clear()
                kind = conn.execute("select kind, hit from agentmem.cache_lookup(question => %s, question_embedding => %s, model => 'all-minilm')",
                                    (q, v)).fetchone()
                if i < 10:
                    continue
                for note in notes:
                    found = explained(note)
                    if found:
                        stats[label(found[1])].append(found[0] * 1000)
                totals[outcome].append(kind[0] or "miss")
            out[outcome] = stats
            conn.execute("select pg_stat_force_next_flush()")
            conn.execute("select 1")
            time.sleep(1)
            admin.execute("select pg_stat_clear_snapshot()")
            funcs[outcome] = admin.execute(
                "select schemaname || '.' || funcname, calls, self_time, total_time from pg_stat_user_functions "
                "where schemaname in ('agentmem', 'agentmem_private') order by self_time desc limit 12").fetchall()
    for outcome, stats in out.items():
        kinds = totals[outcome]
        print(f"\n### {outcome} ({args.lookups} lookups: " +
              ", ".join(f"{k} {kinds.count(k)}" for k in sorted(set(kinds))) + "; mean inclusive µs per lookup)\n")
        print("| statement | per lookup | µs each | p95 µs |")
        print("|---|---:|---:|---:|")
        for key, xs in stats.items():
            xs_sorted = sorted(xs)
            print(f"| `{key.replace('|', '¦')}` | {len(xs) / args.lookups:.2f} | {statistics.mean(xs):.1f} | "
                  f"{xs_sorted[int(0.95 * (len(xs) - 1))]:.1f} |")
        print(f"\nfunctions ({outcome}; µs per lookup, self / total):\n")
        print("| function | calls per lookup | self µs | total µs |")
        print("|---|---:|---:|---:|")
        for f, c, st, tt in funcs[outcome]:
            print(f"| {f} | {c / (args.lookups + 10):.2f} | {st * 1000 / (args.lookups + 10):.1f} | "
                  f"{tt * 1000 / (args.lookups + 10):.1f} |")
    admin.close()


if __name__ == "__main__":
    main()
