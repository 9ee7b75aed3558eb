"""The heaviest calls the documented limits allow: time and backend memory.

    .venv/bin/python bench/probes/probe_limits.py --out bench/results/limits.md [--port P]

Each call runs as the application login on a fresh connection; its backend's private memory (RssAnon of
/proc/<pid>/status: the heap, not the shared buffers it touches) is sampled every 5 ms while the call
runs, and the peak above the value before the call is reported, with the wall time. The calls:
  - store_messages of 10,000 messages of 1,000 characters each, with 384-d vectors (refused now), and of
    the most messages a call takes;
  - store_messages of 100 messages of 100,000 characters (one word: too long to index), each with
    metadata of about 73 KB nested 32 levels (the deepest allowed) (refused now), and of the most such
    messages a call takes;
  - import_user of the largest file one call takes (messages of 100,000 characters with 100,000
    characters of metadata), and of 30 lines of 8 MiB (refused);
  - the CLI's import (`agentmem import`) of a user's file of 60 MB: pieces of one call each, in one
    transaction (the backend's peak over all the pieces).
The server is the benchmarks' embedded PostgreSQL (the machine's server must run locally: /proc).
"""

from __future__ import annotations

import datetime
import io
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/common.py
from common import APP_ROLE, command, connect, probe_start, unit_vectors, write_report  # noqa: E402

MODEL, DIM = "all-minilm", 384
LOAD_AT_START = os.getloadavg()[0]
MiB = 1024 * 1024


def rss_anon(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int) -> float:
    """The process's CPU time (user + system), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Peak:
    """The backend's RssAnon sampled every 5 ms while the block runs: the peak above the start."""

    def __init__(self, conn: psycopg.Connection):
        self.pid = conn.execute("select pg_backend_pid()").fetchone()[0]

    def __enter__(self):
        self.start = rss_anon(self.pid)
        self.cpu0 = cpu_seconds(self.pid)
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        self.t0 = time.perf_counter()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_anon(self.pid))
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_anon(self.pid))
        self.mb = (self.peak - self.start) / MiB
        self.cpu = cpu_seconds(self.pid) - self.cpu0
        return False


def nested(depth: int, size: int) -> dict:
    """A JSON object nested `depth` levels whose text is about `size` characters."""
    doc: dict = {"leaf": "x" * max(0, size - 12 * depth)}
    for i in range(depth - 1):
        doc = {f"l{i}": doc}
    return doc


def run(app_url: str, label: str, query: str, params) -> dict:
    """One call on a fresh connection: wall time (the client's encoding and sending of the arguments
    included), the time in the call (clock_timestamp() before and after it, in one statement: the
    arguments already received), the backend's memory peak, the outcome."""
    timed = f"select clock_timestamp() as t0, (select count(*) from ({query}) as q) as n, clock_timestamp() as t1"
    inner = None
    with connect(app_url, "probe") as conn:
        conn.execute("select agentmem.start_conversation(user_id => 'warm-up')")
        with Peak(conn) as p:
            try:
                t0, _, t1 = conn.execute(timed, params).fetchone()
                inner = (t1 - t0).total_seconds()
                outcome = "stored"
            except psycopg.Error as exc:
                outcome = f"refused: {exc.diag.sqlstate}"
        conn.execute("select agentmem.forget_user(user_id => 'u1')")
    print(f"{label}: {p.seconds:.2f} s ({inner} s in the call, {p.cpu:.2f} s CPU), +{p.mb:.0f} MB, {outcome}",
          flush=True)
    return {"label": label, "s": p.seconds, "inner": inner, "cpu": p.cpu, "mb": p.mb, "outcome": outcome}


def conversation(app_url: str) -> str:
    with connect(app_url, "probe") as conn:
        return str(conn.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0])


def store_batch(app_url: str, n: int, chars: int, meta: dict | None, rng) -> tuple[str, tuple]:
    cid = conversation(app_url)
    vecs = [v for v in unit_vectors(rng, n, DIM)]
    metas = [json.dumps(meta)] * n if meta is not None else None
    return (
        "select * from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
        "embeddings => %s, model => %s, metadata => %s::jsonb[])",
        (cid, ["user"] * n, [("%06d " % i) + "y" * (chars - 7) for i in range(n)], vecs, MODEL, metas),
    )


def export_file(n_msgs: int, chars: int, meta: dict, rng, user: str = "u1") -> list[str]:
    """A user's export of one conversation of n_msgs messages (written here, as export_user writes it)."""
    cid = str(uuid.uuid4())
    now = "2026-01-01T00:00:00+00:00"
    lines = [json.dumps({"type": "header", "format": "agentmem-export", "format_version": 1, "scope": "user",
                         "tenant_id": "probe", "user_id": user, "models": [{"model": MODEL, "dimension": DIM}]}),
             json.dumps({"type": "conversation", "conversation_id": cid, "user_id": user, "title": None,
                         "metadata": {}, "next_index": n_msgs, "created_at": now, "updated_at": now})]
    for i, v in enumerate(unit_vectors(rng, n_msgs, DIM)):
        lines.append(json.dumps({
            "type": "message", "message_id": str(uuid.uuid4()), "conversation_id": cid, "user_id": user,
            "message_index": i, "role": "user", "content": ("%06d " % i) + "z" * (chars - 7), "metadata": meta,
            "created_at": now, "occurred_at": now,
            "embeddings": [{"model": MODEL, "embedding": "[" + ",".join(f"{x:.6f}" for x in v) + "]",
                            "created_at": now}]}))
    lines.append(json.dumps({"type": "end", "rows": len(lines) - 1}))
    return lines


def main() -> int:
    args, admin_url, app_url, started = probe_start(__doc__, "agentmem_probe_limits")
    rng = np.random.default_rng(9)
    with connect(admin_url) as admin:
        admin.execute("select agentmem.register_model(model => %s, dimension => %s)", (MODEL, DIM))
        batch, max_chars, per_call = admin.execute(
            "select agentmem_private.store_messages_max(), agentmem_private.store_messages_max_chars(), "
            "agentmem_private.import_max_call_bytes()").fetchone()
    meta = nested(32, 73_000)
    per_message = 100_000 + len(json.dumps(meta))
    big_batch = max_chars // per_message
    results = []
    for n in (10_000, batch):
        q, p = store_batch(app_url, n, 1000, None, rng)
        results.append(run(app_url, f"store_messages: {n:,} messages of 1,000 characters, 384-d vectors", q, p))
    for n in (100, big_batch):
        q, p = store_batch(app_url, n, 100_000, meta, rng)
        results.append(run(app_url, f"store_messages: {n:,} messages of 100,000 characters (one word), metadata of "
                           f"{len(json.dumps(meta)) // 1000} KB nested 32 levels", q, p))
    # the largest import one call takes: messages of 100,000 characters and 100,000 characters of metadata
    small_meta = {"k": "m" * 99_000}
    one = len(export_file(1, 100_000, small_meta, rng)[2].encode()) + 1
    fits = max(1, (per_call - 2000) // one - 1)
    lines = export_file(fits, 100_000, small_meta, rng)
    size = sum(len(x.encode()) for x in lines)
    results.append(run(app_url, f"import_user: {len(lines)} lines, {size / MiB:.1f} MiB (the most one call takes)",
                       "select * from agentmem.import_user(lines => %s::text[])", (lines,)))
    huge = export_file(1, 100_000, small_meta, rng)
    doc = json.loads(huge[2])
    doc["content"] = "w" * (8 * MiB - 2000)
    huge = [huge[0], huge[1]]
    for i in range(30):
        d = dict(doc, message_id=str(uuid.uuid4()), message_index=i)
        huge.append(json.dumps(d))
    huge.append(json.dumps({"type": "end", "rows": len(huge) - 1}))
    size = sum(len(x.encode()) for x in huge)
    results.append(run(app_url, f"import_user: 30 lines of 8 MiB, {size / MiB:.0f} MiB in all",
                       "select * from agentmem.import_user(lines => %s::text[])", (huge,)))
    # the CLI: a 60 MB file in pieces of one call each, in one transaction
    from agentmem import transfer
    lines = export_file(max(1, (60 * MiB) // one), 100_000, small_meta, rng)
    size = sum(len(x.encode()) for x in lines)
    holder: dict = {}

    def cli() -> None:
        holder["r"] = transfer.import_file(app_url, io.StringIO("\n".join(lines) + "\n"), tenant="probe")

    with connect(admin_url) as admin:
        t = threading.Thread(target=cli)
        peak_mb, t0 = 0.0, time.perf_counter()
        t.start()
        base: dict[int, int] = {}
        while t.is_alive():
            for (pid,) in admin.execute("select pid from pg_stat_activity where datname = current_database() "
                                        "and usename = %s", (APP_ROLE,)).fetchall():
                try:
                    now = rss_anon(pid)
                except FileNotFoundError:
                    continue
                base.setdefault(pid, now)
                peak_mb = max(peak_mb, (now - base[pid]) / MiB)
            time.sleep(0.005)
        t.join()
        secs = time.perf_counter() - t0
        admin.execute("select agentmem.set_tenant(tenant_id => 'probe')")
        admin.execute("select agentmem.forget_user(user_id => 'u1')")
    label = f"agentmem import (CLI): {len(lines)} lines, {size / MiB:.0f} MiB, in pieces, one transaction"
    print(f"{label}: {secs:.2f} s, +{peak_mb:.0f} MB, {holder.get('r')}", flush=True)
    results.append({"label": label, "s": secs, "inner": None, "cpu": None, "mb": peak_mb,
                    "outcome": f"stored ({holder.get('r', {}).get('messages', '?')} messages)"})

    out = [
        "## The heaviest calls within the documented limits: time and backend memory",
        "",
        f"{datetime.date.today()}, {os.cpu_count()} cores shared with other work (load average {LOAD_AT_START:.1f} at "
        f"the start, {os.getloadavg()[0]:.1f} at the end), embedded PostgreSQL 18 + pgvector 0.8. Command: "
        f"`{command()}` ({(time.perf_counter() - started) / 60:.1f} min).",
        "",
        "Memory: the peak of the backend's private memory (RssAnon of /proc/<pid>/status, sampled every 5 ms) "
        "above its value before the call, receiving the arguments included. Wall time: from the client's "
        "call to its result, the encoding and sending of the arguments included; in the call: "
        "clock_timestamp() before and after it in one statement (a refused call: none); CPU: the backend's user "
        "and system time over the call (/proc/<pid>/stat), what the call costs whatever else the machine runs. "
        "Target: under 5 s "
        "and 256 MB each on an idle machine; this one was shared (load average above). The limits are those "
        "of [docs/limits.md](../../docs/limits.md).",
        "",
        "| call | seconds (wall) | seconds in the call | backend CPU seconds | backend MB | outcome |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in results:
        inner = "" if r["inner"] is None else f"{r['inner']:.2f}"
        cpu = "" if r["cpu"] is None else f"{r['cpu']:.2f}"
        out.append(f"| {r['label']} | {r['s']:.2f} | {inner} | {cpu} | {r['mb']:.0f} | {r['outcome']} |")
    write_report(args.out, "\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
