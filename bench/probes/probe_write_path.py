"""Where one store_message spends its time, statement by statement, beside other checkouts (--other).

    git archive main | tar -x -C /tmp/main          # the checkout this branch started from
    git archive 980f3a0 | tar -x -C /tmp/before     # main before the embedding queue, tenant binding, time columns
    .venv/bin/python bench/probes/probe_write_path.py --other /tmp/main --other /tmp/before \
        --out bench/results/write_path.md

One database per checkout on the bench server, each migrated from that checkout's migrations/ and sql/
and loaded by its own checkout's bulk loader with the same 10,000 messages over 100 tenants (384-d
clustered unit vectors, the model's shared HNSW index built), then vacuumed. The application login
(granted every tenant where the checkout binds tenants to logins, as a new installation does; a checkout
without binding lets any login act as any tenant) appends one message at a time to one conversation of
tenant t1.

1. The whole call: --calls store_message calls in one DO block (no round trip in the figure), 9 rounds,
   the databases in turn; the median round's microseconds per call. This checkout also runs under
   binding mode none in the same rounds (set_tenant_binding between rounds), which isolates the binding.
2. Statement by statement: a second login of each database runs with auto_explain (log_min_duration 0,
   log_nested_statements, reported as WARNINGs: store_messages runs with client_min_messages = warning, which
   silences a NOTICE raised inside it) and track_functions = all, for --explain calls. Every
   statement the executor runs is timed (its inclusive time: a statement's time holds the functions and
   policies it runs, e.g. the row-level security sub-select's current_tenant()), and pg_stat_user_functions
   gives each function's self time. Both instruments add their own overhead, the same on every side.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench/common.py
sys.path.insert(0, str(HERE))
from common import ROOT, as_login, command, connect, database_url, explained, start_server, write_report  # noqa: E402
from probe_search_path import bulk_of, clustered  # noqa: E402

from agentmem.migrate import Migrator, Source  # noqa: E402

MODEL, DIM, N = "all-minilm", 384, 10_000
LOGIN, EXPLAIN_LOGIN = "agentmem_probe_write_app", "agentmem_probe_write_explain"
STORE = ("select * from agentmem.store_message(conversation_id => {cid}, role => 'user', "
         "content => 'message ' || j || ' about the weather in Lisbon', embedding => v, model => 'all-minilm')")


def database(server_url: str, name: str, root: Path) -> tuple[str, dict[str, str], str]:
    """Migrate, load, create the two logins; the admin URL, each login's URL, and the conversation id."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")
        conn.execute(f"create database {name}")
    admin_url = database_url(server_url, name)
    Migrator(admin_url, Source.load(root)).migrate()
    urls = {}
    with connect(admin_url) as admin:
        for login in (LOGIN, EXPLAIN_LOGIN):
            if not admin.execute("select 1 from pg_roles where rolname = %s", (login,)).fetchone():
                admin.execute(f"create role {login} login")
            admin.execute("select agentmem.grant_app_role(role_name => %s)", (login,))
            if admin.execute("select to_regproc('agentmem.grant_tenant')").fetchone()[0]:
                admin.execute("select agentmem.grant_tenant(role_name => %s, all_tenants => true)", (login,))
            urls[login] = as_login(admin_url, login)
        admin.execute(f"alter role {EXPLAIN_LOGIN} in database {name} set session_preload_libraries = 'auto_explain'")
        for setting, value in (("auto_explain.log_min_duration", "0"), ("auto_explain.log_nested_statements", "on"),
                               ("auto_explain.log_level", "warning"), ("track_functions", "all")):
            admin.execute(f"alter role {EXPLAIN_LOGIN} in database {name} set {setting} = '{value}'")
        rng = np.random.default_rng(0)
        owners = [(f"t{i % 100}", "u") for i in range(N)]
        bulk = bulk_of(root).Bulk(admin, model=MODEL, rng=np.random.default_rng(1))
        with bulk.hnsw_dropped(tables=("message_embeddings",)):
            bulk.load_messages(owners, clustered(rng, N))
        admin.execute("vacuum (analyze) agentmem.messages, agentmem.message_embeddings, agentmem.conversations")
    with connect(urls[LOGIN], tenant="t1") as app:
        cid = app.execute("select agentmem.start_conversation(user_id => 'writer')").fetchone()[0]
    return admin_url, urls, str(cid)


def loop_block(cid: str, calls: int) -> str:
    return f"""do $probe$ declare t0 timestamptz; v vector; x record;
    begin
        v := (select array_agg(random()::real - 0.5) from generate_series(1, {DIM}))::vector({DIM});
        for j in 1..{calls + 10} loop
            if j = 11 then t0 := clock_timestamp(); end if;
            {STORE.format(cid=f"'{cid}'")} into x;
        end loop;
        raise notice 'us %', extract(epoch from clock_timestamp() - t0) * 1e6 / {calls};
    end $probe$"""


def whole_call(sides: dict, calls: int) -> dict[str, float]:
    """Median µs per call over 9 rounds; side 'this, mode none' switches the binding around its round."""
    got: list[float] = []
    rounds: dict[str, list[float]] = defaultdict(list)
    conns = {}
    for side, s in sides.items():
        conns[side] = connect(s["urls"][LOGIN], tenant="t1")
        conns[side].add_notice_handler(lambda d: got.append(float(d.message_primary.split()[1])))
    order = list(sides)
    for r in range(9):
        for side in (order if r % 2 else order[::-1]):
            s = sides[side]
            if s.get("mode"):
                with connect(s["admin"]) as admin:
                    admin.execute("select agentmem.set_tenant_binding(mode => %s)", (s["mode"],))
            try:
                got.clear()
                conns[side].execute(loop_block(s["cid"], calls))
                rounds[side].append(got[0])
            finally:
                if s.get("mode"):
                    with connect(s["admin"]) as admin:
                        admin.execute("select agentmem.set_tenant_binding(mode => 'role')")
    for c in conns.values():
        c.close()
    return {side: statistics.median(t) for side, t in rounds.items()}


def label(query: str) -> str:
    """A statement's text on one line, shortened."""
    q = re.sub(r"\s+", " ", query).strip()
    q = re.sub(r"'[0-9a-f-]{36}'", "'…'", q)
    q = re.sub(r"'\[[^']*\]'", "'[…]'", q)
    q = re.sub(r"'message \d+ [^']*'", "'…'", q)
    return q if len(q) <= 150 else q[:147] + "…"


def by_statement(s: dict, calls: int) -> tuple[list[tuple[str, float, float]], list[tuple[str, float, float, float]]]:
    """auto_explain's statements ((label, calls per store_message, mean µs each), in the order first seen)
    and pg_stat_user_functions ((function, calls per store_message, self µs, total µs per store_message))."""
    notes: list[str] = []
    with connect(s["urls"][EXPLAIN_LOGIN], tenant="t1") as conn:
        conn.add_notice_handler(lambda d: notes.append(d.message_primary))
        stmt = (STORE.format(cid="%s").replace("' || j || '", " ")
                .replace("embedding => v", "embedding => %s::vector"))
        vec = "[" + ",".join(str(x) for x in np.random.default_rng(3).standard_normal(DIM).round(4)) + "]"
        for _ in range(20):  # warm-up
            conn.execute(stmt, (s["cid"], vec))
        conn.execute("select pg_stat_force_next_flush()")
        conn.execute("select 1")
        with connect(s["admin"]) as admin:
            admin.execute("select pg_stat_reset()")
        notes.clear()
        for _ in range(calls):
            conn.execute(stmt, (s["cid"], vec))
        conn.execute("select pg_stat_force_next_flush()")
        conn.execute("select 1")
    time.sleep(1.5)
    stats: dict[str, list[float]] = defaultdict(list)
    order: list[str] = []
    for note in notes:
        found = explained(note)
        if not found:
            continue
        key = label(found[1])
        if key not in stats:
            order.append(key)
        stats[key].append(found[0] * 1000)
    statements = [(k, len(stats[k]) / calls, statistics.mean(stats[k])) for k in order]
    with connect(s["admin"]) as admin:
        admin.execute("select pg_stat_clear_snapshot()")
        rows = admin.execute(
            "select schemaname || '.' || funcname, calls, self_time, total_time from pg_stat_user_functions "
            "where schemaname in ('agentmem', 'agentmem_private') order by self_time desc").fetchall()
    functions = [(f, c / calls, st * 1000 / calls, tt * 1000 / calls) for f, c, st, tt in rows]
    return statements, functions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--other", type=Path, action="append", required=True,
                        help="another checkout (its migrations/ and sql/); may be given twice or more")
    parser.add_argument("--out", required=True)
    parser.add_argument("--calls", type=int, default=300, help="store_message calls per round of the whole-call loop")
    parser.add_argument("--explain", type=int, default=200, help="calls timed statement by statement")
    parser.add_argument("--port", type=int, default=int(os.environ.get("AGENTMEM_EMBEDDED_PORT", 55452)))
    args = parser.parse_args()
    server_url = start_server(args.port)
    started, load = time.perf_counter(), os.getloadavg()[0]
    sides: dict[str, dict] = {}
    others = {f"other {i + 1} ({root.name})": root for i, root in enumerate(args.other)}
    for n, (side, root) in enumerate((("this", ROOT), *others.items())):
        name = f"agentmem_probe_write_{n}"
        admin_url, urls, cid = database(server_url, name, root)
        sides[side] = {"admin": admin_url, "urls": urls, "cid": cid}
        print(side, "loaded", flush=True)
    sides["this, binding none"] = dict(sides["this"], mode="none")
    whole = whole_call(sides, args.calls)
    print("whole call µs", whole, flush=True)
    base = list(others)[-1]
    detail = {side: by_statement(sides[side], args.explain) for side in ("this", *others)}

    today = datetime.date.today().isoformat()
    lines = [
        "## Where one store_message spends its time", "",
        f"{today}, 2 cores shared with other work (load average {load:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end), embedded PostgreSQL + pgvector. Command: `{command()}` "
        f"({(time.perf_counter() - started) / 60:.1f} min). This checkout against "
        + ", ".join(f"{side}: `{root}`" for side, root in others.items()) + ".", "",
        "One database per checkout on one server, the same 10,000 messages over 100 tenants in each (384-d, the shared HNSW "
        "index built), one message at a time appended to one conversation by the application login (this "
        "checkout: binding mode role, the login granted every tenant).", "",
        f"### The whole call ({args.calls} calls in a DO block, 9 rounds in turn, the median round)", "",
        f"| database | µs per store_message | vs {base} |", "|---|---:|---:|",
        *(f"| {side} | {us:.0f} | {us / whole[base]:.2f}× |" for side, us in whole.items()), "",
    ]
    for side, (statements, functions) in detail.items():
        lines += [f"### Statement by statement: {side} ({args.explain} calls, auto_explain, inclusive µs)", "",
                  "| statement (in the order they finish; a statement's time holds what runs inside it) | "
                  "per call | µs each |", "|---|---:|---:|",
                  *(f"| `{k.replace('|', '¦')}` | {n:.2f} | {us:.1f} |" for k, n, us in statements), "",
                  f"Functions ({side}, track_functions = all, µs per store_message):", "",
                  "| function | calls per store_message | self µs | total µs |", "|---|---:|---:|---:|",
                  *(f"| {f} | {c:.2f} | {st:.1f} | {tt:.1f} |" for f, c, st, tt in functions), ""]
    write_report(args.out, "\n".join(lines))


if __name__ == "__main__":
    main()
