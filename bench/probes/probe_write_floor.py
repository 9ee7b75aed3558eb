"""One message per call against its floor: where store_message's time goes beyond what PostgresStore's
put writes (a message row, its vector's row and HNSW insert, done by one SQL function), on the database
a ``bench_conversations.py --floor`` run left (agentmem_bench_conversations on the bench server, with its
floor_probe schema).

    .venv/bin/python bench/bench_conversations.py --quick --floor --port P --out /tmp/x.md
    .venv/bin/python bench/probes/probe_write_floor.py --port P --calls 1000 --out FILE

1. From the client, one message per call, the ways taking turns by 50 calls (which goes first rotating),
   random unit vectors of 384 dimensions, each way its own tenant and conversation:
   - floor: floor_probe.store_message (the message's row and its vector's row, the HNSW insert;
     bench_conversations.FloorStore), one statement on an autocommit connection, the vector in binary;
   - store_message, bare: agentmem.store_message as one statement on an autocommit connection of the
     application login whose session already has the tenant (set_tenant once);
   - store_message with set_tenant: set_tenant(local => true) and the call in one pipeline (the driver's
     round trip, without the driver);
   - Memory.store_message: the driver.
2. In the server, run first (both HNSW indexes having had the same inserts): 200 calls in a DO block, each
   way with and without its HNSW insert (store_message with agentmem.index_later on; the floor with its
   index dropped in a transaction rolled back after), in turn, 5 rounds, the median round (no round trip,
   no commit per call).
3. store_message's statements (auto_explain with nested statements and log_analyze, timing off, logged at
   WARNING because store_messages runs with client_min_messages = warning), µs per call; the instrument
   adds its own overhead to each statement.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np
from pgvector import Vector

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import APP_ROLE, as_login, command, connect, database_url, explained, start_server, write_report  # noqa: E402

from agentmem.client import Memory  # noqa: E402

DB, MODEL, DIM = "agentmem_bench_conversations", "all-minilm", 384
STORE = ("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => %s, "
         "embedding => %b, model => 'all-minilm')")
FLOOR = ("select floor_probe.store_message(p_tenant => %s, p_conversation => %s, p_role => 'user', "
         "p_content => %s, p_embedding => %b)")
RANDOM_VECTOR = f"(select pg_catalog.array_agg(random()::real - 0.5) from generate_series(1, {DIM}))::vector"


def urls(port: int) -> tuple[str, str]:
    admin_url = database_url(start_server(port), DB)
    return admin_url, as_login(admin_url, APP_ROLE)


def from_client(admin_url: str, app_url: str, calls: int, rng: np.random.Generator) -> dict[str, list[float]]:
    vecs = rng.standard_normal((calls * 4, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    mem = Memory.connect(app_url, tenant="floor-memory", max_size=2)
    mem_cid = mem.start_conversation("user")
    bare = connect(app_url, tenant="floor-bare")
    bare_cid = bare.execute("select agentmem.start_conversation(user_id => 'user')").fetchone()[0]
    piped = connect(app_url, tenant="floor-piped")
    piped_cid = piped.execute("select agentmem.start_conversation(user_id => 'user')").fetchone()[0]
    floor = connect(admin_url)
    floor_cid = uuid.uuid4()

    def run(way: str, j: int) -> float:
        text, v = f"floor probe message {j}", Vector(vecs[j])
        t0 = time.perf_counter()
        if way == "floor":
            floor.execute(FLOOR, ("floor-probe", floor_cid, text, v))
        elif way == "store_message, bare":
            bare.execute(STORE, (bare_cid, text, v)).fetchall()
        elif way == "store_message with set_tenant (one pipeline)":
            with piped.pipeline():
                piped.execute("select agentmem.set_tenant(tenant_id => %s, local => true)", ("floor-piped",))
                cur = piped.execute(STORE, (piped_cid, text, v))
            cur.fetchall()
        else:
            mem.store_message(mem_cid, "user", text, vecs[j], model=MODEL)
        return time.perf_counter() - t0

    ways = ["floor", "store_message, bare", "store_message with set_tenant (one pipeline)", "Memory.store_message"]
    spent: dict[str, list[float]] = {w: [] for w in ways}
    j = 0
    for r in range(calls // 50):
        for way in ways[r % 4:] + ways[:r % 4]:
            for _ in range(50):
                spent[way].append(run(way, j))
                j += 1
    mem.close()
    for c in (bare, piped, floor):
        c.close()
    return spent


def in_server(admin_url: str, app_url: str, rounds: int = 5, calls: int = 200) -> dict[str, float]:
    """µs per call of each loop (the median round), the loops in turn, which goes first rotating. Without the
    HNSW insert: store_message with agentmem.index_later on (the vector written to pending_embedding), and the
    floor with its HNSW index dropped in a transaction rolled back after the loop."""
    app = connect(app_url, tenant="floor-do")
    admin = connect(admin_url)
    cid = app.execute("select agentmem.start_conversation(user_id => 'user')").fetchone()[0]
    store = (f"perform * from agentmem.store_message(conversation_id => '{cid}', role => 'user', "
             "content => 'message ' || j || ' about the weather in Lisbon', embedding => v, model => 'all-minilm');")
    floor = (f"perform floor_probe.store_message(p_tenant => 'floor-do', p_conversation => '{cid}', p_role => 'user', "
             "p_content => 'message ' || j || ' about the weather in Lisbon', p_embedding => v);")

    def loop(conn, body: str) -> float:
        t0 = time.perf_counter()
        conn.execute(f"do $$ declare v vector; begin for j in 1..{calls} loop v := {RANDOM_VECTOR}; {body} "
                     "end loop; end $$")
        return (time.perf_counter() - t0) / calls

    def store_later() -> float:
        app.execute("set agentmem.index_later = on")
        app.execute("set agentmem.index_later_max_rows = 1000000")
        try:
            return loop(app, store)
        finally:
            app.execute("reset agentmem.index_later")

    def floor_unindexed() -> float:
        admin.execute("begin")
        try:
            admin.execute("drop index floor_probe.vectors_embedding_idx")
            return loop(admin, floor)
        finally:
            admin.execute("rollback")

    loops = {
        "store_message": lambda: loop(app, store),
        "floor": lambda: loop(admin, floor),
        "store_message, no HNSW insert (agentmem.index_later on)": store_later,
        "floor, no HNSW insert (its index dropped)": floor_unindexed,
        "the random vector alone": lambda: loop(admin, ""),
    }
    names = list(loops)
    took: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            took[name].append(loops[name]())
    app.close()
    admin.close()
    return {k: statistics.median(v) for k, v in took.items()}


def statements(admin_url: str, calls: int, rng: np.random.Generator) -> list[tuple[str, float, float]]:
    conn = connect(admin_url, tenant="floor-explain")
    cid = conn.execute("select agentmem.start_conversation(user_id => 'user')").fetchone()[0]
    notes: list[str] = []
    conn.add_notice_handler(lambda d: notes.append(d.message_primary or ""))
    conn.execute("load 'auto_explain'")
    for setting, value in (("auto_explain.log_min_duration", "0"), ("auto_explain.log_nested_statements", "on"),
                           ("auto_explain.log_analyze", "on"), ("auto_explain.log_timing", "off"),
                           ("auto_explain.log_level", "warning")):
        conn.execute(f"set {setting} = '{value}'")
    for j in range(calls):
        v = rng.standard_normal(DIM).astype(np.float32)
        conn.execute(STORE, (cid, f"message {j} about the weather in Lisbon", Vector(v / np.linalg.norm(v))))
    conn.close()
    total: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter = collections.Counter()
    for note in notes:
        found = explained(note)
        if found:
            text = " ".join(found[1].split())[:100]
            total[text] += found[0]
            count[text] += 1
    return [(text, t / calls * 1000, count[text] / calls) for text, t in sorted(total.items(), key=lambda x: -x[1])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--port", type=int, default=int(os.environ.get("AGENTMEM_EMBEDDED_PORT", 55452)))
    parser.add_argument("--calls", type=int, default=1000, help="calls of each way from the client")
    parser.add_argument("--explain", type=int, default=200, help="calls timed statement by statement")
    args = parser.parse_args()
    admin_url, app_url = urls(args.port)
    with connect(admin_url) as admin:
        if not admin.execute("select to_regproc('floor_probe.store_message')").fetchone()[0]:
            raise SystemExit(f"{DB} has no floor_probe schema: run bench/bench_conversations.py --quick --floor "
                             f"--port {args.port} first")
    load = os.getloadavg()[0]
    started = time.perf_counter()
    rng = np.random.default_rng(11)
    server = in_server(admin_url, app_url)  # first: both HNSW indexes have had the same inserts so far
    client = from_client(admin_url, app_url, args.calls, rng)
    explained = statements(admin_url, args.explain, rng)
    floor_p50 = statistics.median(client["floor"])
    lines = [
        "## One message per call against its floor", "",
        f"{datetime.date.today()}, {os.cpu_count()} cores (load average {load:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end). Command: `{command()}` "
        f"({(time.perf_counter() - started) / 60:.1f} min), on the database of a `bench_conversations.py --quick --floor` run.",
        "", f"### From the client ({args.calls} calls each, taking turns by 50)", "",
        "| way | p50 ms | mean ms | per second | p50 over the floor's |", "|---|---:|---:|---:|---:|"]
    for way, xs in client.items():
        lines.append(f"| {way} | {statistics.median(xs) * 1e3:.3f} | {statistics.mean(xs) * 1e3:.3f} | "
                     f"{len(xs) / sum(xs):,.0f} | {statistics.median(xs) / floor_p50:.2f}× |")
    lines += ["", "### In the server (200 calls in a DO block, 5 rounds in turn, the median; run first, when both HNSW "
              "indexes had had the same inserts)", "",
              "| loop | µs per call |", "|---|---:|"]
    lines += [f"| {name} | {us * 1e6:,.0f} |" for name, us in server.items()]
    lines += ["", f"### store_message's statements ({args.explain} calls, auto_explain, inclusive µs per call)", "",
              "| statement | µs per call | runs per call |", "|---|---:|---:|"]
    lines += [f"| `{text.replace('|', '/')}` | {us:,.1f} | {n:.1f} |" for text, us, n in explained[:25]]
    write_report(args.out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
