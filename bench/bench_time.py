"""Event time benchmark: LoCoMo stored with its session dates, time-bounded search latency.

    .venv/bin/python bench/bench_time.py --out bench/results/time.md [--user-rows 20000] [--quick]
        [--database-url URL | --port P]

Quality, on ../shared/data/locomo_tune.json (or $AGENTMEM_SHARED_DATA): each LoCoMo conversation is one
user with one agentmem conversation, each turn stored through agentmem.store_messages as
"speaker: text" with occurred_at = its session's date and time (LoCoMo's session_N_date_time) plus 30 s
per turn. Embeddings: all-MiniLM-L6-v2 (bench_hybrid's model and embedding cache; registered as
all-minilm), as bench_hybrid. Each question of categories 1-4 whose evidence ids resolve is searched
hybrid (query_embedding and query_text) through agentmem.search_messages (k 5) and
agentmem.search_with_context (k 5, radius 3); evidence recall per category, as the share of each
question's evidence turns found, averaged. For category 2 (temporal), the share of questions whose
returned context holds an evidence turn carrying its session's date (occurred_at), beside what the
same context says by created_at alone (the day of the import). The recency weight
(recency_half_life) at several half-lives, on every category.

Latency: one tenant, a user of --user-rows messages (one every 72 minutes over 1,000 days: random
384-d vectors, words from a small vocabulary) beside as many of other users; search_messages k 10,
vector only and hybrid, unbounded and with windows holding 1% and 10% of the user's rows, at random
positions (and 40%, which goes through the HNSW index), interleaved on one connection; p50/p95 of the
round trip, and whether every window that holds k rows gave k.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from agentmem_dev.bulk import WORDS, Bulk  # noqa: E402
from agentmem.lexical import lexical_embedding  # noqa: E402
from agentmem.migrate import Migrator, Source  # noqa: E402

MODEL, DIM = "lexical-384", 384
APP_ROLE = "agentmem_bench_app"
DBNAME = "agentmem_bench_time"
UTC = dt.timezone.utc


def data_file() -> Path:
    d = Path(os.environ.get("AGENTMEM_SHARED_DATA", ROOT.parent / "shared" / "data"))
    return d / "locomo_tune.json"


def load_locomo():
    """[(user, [(dia_id, text, occurred_at, session date)])], [(user, question, evidence ids, category)]."""
    convs, questions = [], []
    for sample in json.loads(data_file().read_text(encoding="utf-8")):
        c = sample["conversation"]
        sessions = sorted((int(m.group(1)), k) for k in c if (m := re.fullmatch(r"session_(\d+)", k)))
        turns = []
        for _, k in sessions:
            start = dt.datetime.strptime(c[k + "_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
            for j, t in enumerate(c[k]):
                turns.append((t["dia_id"], f"{t['speaker']}: {t['text']}", start + dt.timedelta(seconds=30 * j),
                              start.date()))
        # a few sessions are dated before the one before them: kept in session order, each turn no
        # earlier than the turn before (agentmem's rule within a conversation)
        fixed, last = [], None
        for dia, text, at, day in turns:
            at = at if last is None or at >= last else last
            fixed.append((dia, text, at, day))
            last = at
        convs.append((sample["sample_id"], fixed))
        ids = {t[0] for t in fixed}
        for q in sample["qa"]:
            ev = [re.sub(r"^D:", "D", e.strip()) for x in q.get("evidence") or [] for e in x.split(";")]
            ev = [e for e in ev if e != "D"]
            if q.get("category") in (1, 2, 3, 4) and ev and all(e in ids for e in ev):
                questions.append((sample["sample_id"], q["question"], set(ev), q["category"]))
    return convs, questions


def embed(text: str) -> np.ndarray:
    return np.asarray(lexical_embedding(text, DIM), dtype=np.float32)


# LoCoMo is embedded with all-MiniLM-L6-v2 (bench_hybrid's model and cache), registered as all-minilm.
LOCOMO_MODEL = "all-minilm"


def minilm(texts: list[str]) -> np.ndarray:
    from bench_hybrid import embed as minilm_embed
    return minilm_embed(texts)


def server_url(args) -> str:
    """--database-url, else the benchmarks' own embedded server (bench/common.py) on --port."""
    if args.database_url:
        return args.database_url
    sys.path.insert(0, str(ROOT / "bench"))
    from common import start_server
    return start_server(args.port)


def fresh_database(base_url: str) -> tuple[str, str]:
    with psycopg.connect(base_url, autocommit=True) as c:
        c.execute(f"drop database if exists {DBNAME} with (force)")
        c.execute(f"create database {DBNAME}")
        if not c.execute("select 1 from pg_roles where rolname = %s", (APP_ROLE,)).fetchone():
            c.execute(f"create role {APP_ROLE} login")
    admin_url = base_url.rsplit("/", 1)[0] + "/" + DBNAME
    Migrator(admin_url, Source.load(ROOT)).migrate()
    with psycopg.connect(admin_url, autocommit=True) as c:
        c.execute("select agentmem.grant_app_role(role_name => %s)", (APP_ROLE,))
        # tenants are bound to logins: the benchmark's login acts as its own tenants
        c.execute("select agentmem.grant_tenant(role_name => %s, all_tenants => true)", (APP_ROLE,))
        c.execute("select agentmem.register_model(model => %s, dimension => %s)", (MODEL, DIM))
    scheme, rest = admin_url.split("://", 1)
    return admin_url, f"{scheme}://{APP_ROLE}@{rest.split('@', 1)[1]}"


def connect(url: str, tenant: str | None = None) -> psycopg.Connection:
    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    if tenant:
        conn.execute("select agentmem.set_tenant(tenant_id => %s)", (tenant,))
    return conn


# -- quality -----------------------------------------------------------------------------------

def store(app, convs) -> dict:
    """message_id -> (dia_id, session date)."""
    where = {}
    for user, turns in convs:
        cid = app.execute("select agentmem.start_conversation(user_id => %s)", (user,)).fetchone()[0]
        rows = app.execute("select * from agentmem.store_messages(conversation_id => %s, roles => %s, "
                           "contents => %s, embeddings => %s, model => %s, occurred_at => %s)",
                           (cid, ["user"] * len(turns), [t[1] for t in turns], list(minilm([t[1] for t in turns])),
                            LOCOMO_MODEL, [t[2] for t in turns])).fetchall()
        for t, (mid, _) in zip(turns, rows):
            where[mid] = (t[0], t[3])
    return where


def quality(app, questions, where, half_life=None):
    per = {c: [0.0, 0.0, 0] for c in (1, 2, 3, 4)}
    dated = {"occurred_at": 0, "created_at": 0, "n": 0}
    vecs = minilm([q for _, q, _, _ in questions])
    for (user, q, ev, cat), v in zip(questions, vecs):
        hits = app.execute("select message_id from agentmem.search_messages(user_id => %s, query_embedding => %s, "
                           "query_text => %s, k => 5, model => %s, recency_half_life => %s)",
                           (user, v, q, LOCOMO_MODEL, half_life)).fetchall()
        win = app.execute("select message_id, occurred_at, created_at from agentmem.search_with_context("
                          "user_id => %s, query_embedding => %s, query_text => %s, k => 5, radius => 3, "
                          "model => %s, recency_half_life => %s)", (user, v, q, LOCOMO_MODEL, half_life)).fetchall()
        top = {where[h[0]][0] for h in hits}
        wdias = {where[h[0]][0] for h in win}
        per[cat][0] += len(ev & top) / len(ev)
        per[cat][1] += len(ev & wdias) / len(ev)
        per[cat][2] += 1
        if cat == 2:
            dated["n"] += 1
            ev_rows = [(where[h[0]], h[1], h[2]) for h in win if where[h[0]][0] in ev]
            dated["occurred_at"] += any(o.astimezone(UTC).date() == day for (_, day), o, _ in ev_rows)
            dated["created_at"] += any(c.astimezone(UTC).date() == day for (_, day), _, c in ev_rows)
    return {c: (a / n, b / n, n) for c, (a, b, n) in per.items()}, dated


# -- latency -----------------------------------------------------------------------------------

def fill(admin, user_rows: int) -> tuple[dt.datetime, dt.datetime]:
    """Tenant 'lat': user 'big' with user_rows messages over 1,000 days, users other0..9 as many."""
    rng = np.random.default_rng(24)
    bulk = Bulk(admin, model=MODEL, rng=rng)
    start = dt.datetime(2021, 1, 1, tzinfo=UTC)
    step = dt.timedelta(days=1000) / user_rows
    owners = [("lat", "big")] * user_rows + [("lat", f"other{i % 10}") for i in range(user_rows)]
    times = [start + i * step for i in range(user_rows)] + \
            [start + (i // 10) * 10 * step for i in range(user_rows)]
    vecs = rng.standard_normal((2 * user_rows, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    with bulk.hnsw_dropped(tables=["message_embeddings"], maintenance_work_mem="256MB"):
        bulk.load_messages(owners, vecs, occurred_at=times, per_conversation=500)
    admin.execute("vacuum analyze agentmem.messages, agentmem.message_embeddings")
    return start, start + dt.timedelta(days=1000)


def latency(app, start, end, user_rows, queries: int, seed: int = 7):
    rng = np.random.default_rng(seed)
    span = end - start
    out: dict[str, list[float]] = {}
    short = 0
    sql = ("select count(*) from agentmem.search_messages(user_id => 'big', query_embedding => %s, "
           "query_text => %s, k => 10, model => %s, since => %s, until => %s)")
    cases = [("unbounded", None), ("1% window", 0.01), ("10% window", 0.10), ("40% window", 0.40)]
    for n in range(queries):
        v = rng.standard_normal(DIM).astype(np.float32)
        v /= np.linalg.norm(v)
        words = " ".join(rng.choice(WORDS, 3))
        for mode in ("vector only", "hybrid"):
            order = cases if n % 2 == 0 else cases[::-1]
            for name, share in order:
                if share is None:
                    since = until = None
                else:
                    lo = rng.uniform(0, 1 - share)
                    since, until = start + lo * span, start + (lo + share) * span
                t0 = time.perf_counter()
                got = app.execute(sql, (v, words if mode == "hybrid" else None, MODEL, since, until)).fetchone()[0]
                out.setdefault(f"{mode}, {name}", []).append((time.perf_counter() - t0) * 1000)
                if mode == "vector only" and got < 10:
                    short += 1
    return {k: (float(np.percentile(t, 50)), float(np.percentile(t, 95)), len(t)) for k, t in out.items()}, short


# -- report ------------------------------------------------------------------------------------

NOTE = ('Reading: a window of up to agentmem.exact_search_max_rows candidates (6,000 by default; the 1% '
        'and 10% windows at up to 50,000 rows of the user) is counted and scanned exactly through the B-tree '
        'on (tenant_id, user_id, model, occurred_at); the unbounded search reads the shared HNSW index, which '
        'on random vectors (no close neighbours) runs its second pass at the full ef_search (README, '
        '"Tuning"): hence those far below unbounded. A window above the exact-scan limit (40%) reads the HNSW '
        'index with the window as its filter (iterative scan); tests/test_conversation_search.py checks that it returns k '
        'rows at the boundaries.')

HALF_LIVES = [None, dt.timedelta(days=7), dt.timedelta(days=30), dt.timedelta(days=180)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "time.md")
    ap.add_argument("--user-rows", type=int, default=20000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--quick", action="store_true", help="5,000 rows of the user, 20 queries")
    ap.add_argument("--database-url", help="a server to use (default: the benchmarks' embedded one on --port)")
    ap.add_argument("--port", type=int, default=int(os.environ.get("AGENTMEM_EMBEDDED_PORT", "55446")))
    args = ap.parse_args()
    if args.quick:
        args.user_rows, args.queries = 5000, 20
    t_start = time.perf_counter()
    convs, questions = load_locomo()
    admin_url, app_url = fresh_database(server_url(args))
    admin = connect(admin_url)
    app = connect(app_url, "locomo")
    where = store(app, convs)
    runs = {}
    for h in HALF_LIVES:
        runs[h] = quality(app, questions, where, h)
    lapp = connect(app_url, "lat")
    start, end = fill(admin, args.user_rows)
    lat, short = latency(lapp, start, end, args.user_rows, args.queries)
    load = os.getloadavg()
    elapsed = time.perf_counter() - t_start

    names = {1: "1 multi-hop", 2: "2 temporal", 3: "3 open-domain", 4: "4 single-hop"}
    lines = ["# Event time: LoCoMo with its dates, time-bounded search", "",
             f"Command: `.venv/bin/python bench/bench_time.py --out {args.out} "
             f"--user-rows {args.user_rows} --queries {args.queries}` on a dev server "
             f"(embedded PostgreSQL 18 + pgvector, 2 shared cores; {elapsed:.0f} s; load average at the end "
             f"{load[0]:.1f}).", "",
             f"LoCoMo `locomo_tune.json`: {sum(len(t) for _, t in convs):,} turns, each stored with its session's "
             f"date (occurred_at); {len(questions):,} questions of categories 1-4. Embeddings: all-MiniLM-L6-v2 "
             "(as bench/results/hybrid.md). Searches hybrid (vector + words), k 5.", "",
             "## Evidence recall per category, and the recency weight", "",
             "| recency_half_life | " + " | ".join(f"{names[c]}: top 5 / top 5 ±3" for c in (1, 2, 3, 4)) + " |",
             "|---|" + "---|" * 4]
    for h, (per, _) in runs.items():
        label = "off (default)" if h is None else f"{h.days} days"
        lines.append(f"| {label} | " + " | ".join(f"{per[c][0]:.3f} / {per[c][1]:.3f}" for c in (1, 2, 3, 4)) + " |")
    per0, dated = runs[None]
    lines += ["", "Questions per category: " + ", ".join(f"{names[c]} {per0[c][2]}" for c in (1, 2, 3, 4)) + ".", "",
              "## Temporal questions: does the returned context carry the date?", "",
              f"Of {dated['n']} category-2 questions, the context search_with_context returned (k 5, radius 3, "
              "hybrid) holds an evidence turn whose date is its session's:", "",
              "| the date a row carries | share of category-2 questions |", "|---|---|",
              f"| occurred_at (this feature) | {dated['occurred_at'] / dated['n']:.3f} |",
              f"| created_at (all a row carried before: the day of the import) | "
              f"{dated['created_at'] / dated['n']:.3f} |", "",
              "The first figure equals the share of these questions whose context holds an evidence turn at all: "
              "every returned row now carries the date the turn was said.", "",
              "## Latency: time-bounded beside unbounded, one run", "",
              f"Tenant `lat`: user `big` with {args.user_rows:,} messages over 1,000 days, 10 other users with "
              f"{args.user_rows:,} more (random 384-d vectors, the model's shared HNSW index); {args.queries} "
              "queries, each unbounded and in a window of 1%, 10% and 40% of the user's rows at a random position, "
              "interleaved (40%: above the exact-scan limit from 15,000 rows of the user, through the HNSW "
              "index). search_messages k 10, round trip in ms.", "",
              "| search | p50 ms | p95 ms | p50 / unbounded p50 | n |", "|---|---|---|---|---|"]
    for mode in ("vector only", "hybrid"):
        base = lat[f"{mode}, unbounded"][0]
        for name in ("unbounded", "1% window", "10% window", "40% window"):
            p50, p95, n = lat[f"{mode}, {name}"]
            lines.append(f"| {mode}, {name} | {p50:.2f} | {p95:.2f} | {p50 / base:.2f} | {n} |")
    lines += ["", f"Vector searches that returned fewer than k = 10 rows though the window held more: {short}.", "",
              NOTE, "", "Recency weight: compare each half-life's row with the first (off) above; it is off by "
              "default, and should be turned on only where it raises recall on the application's own questions.", ""]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
