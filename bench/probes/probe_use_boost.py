"""The use boost on LoCoMo by category: search_messages with use_boost off and on, over a replayed history of use.

    .venv/bin/python bench/probes/probe_use_boost.py --out /tmp/use_boost.md [--weights 0.1,0.25,0.5]
        [--database-url URL | --port P]

Data: ../shared/data/locomo_tune.json (or $AGENTMEM_SHARED_DATA), each LoCoMo conversation one user
with one agentmem conversation, each turn stored through agentmem.store_messages as "speaker: text"
with its all-MiniLM-L6-v2 embedding (bench_hybrid's model and embedding cache, registered as
all-minilm) and occurred_at = its session's date (bench_time's reading: session_N_date_time plus 30 s
per turn). The whole timeline is moved so that the last session ends a day before the run, and each
turn's created_at is set to its occurred_at: as if every session had been stored when it happened and
the questions were asked the day after the last one. Then the use boost's creation term (halved each
30 days) tells recent sessions from old ones, as it would in a live installation.

LoCoMo has no record of use, so one is replayed: each conversation's questions (categories 1-4 whose
evidence ids resolve) are asked in their order through agentmem.search_messages (hybrid: the query's
embedding and its text, k 10, use_boost => w), and agentmem.apply_use_log folds the uses after every
question, so each question is ranked with the uses of the questions before it (the turns those
returned: used lately, and more often). w = 0 is the boost off: results exactly today's. For each w the
uses are reset first (use_count 0, last_used_at NULL, the log emptied). The whole is repeated on
--runs fresh databases (new random message ids: ties of the fusion fall otherwise) and averaged. Figure: the share of each
question's evidence turns inside the top 5 and top 10, averaged over the questions of a category (as
../shared/data/README.md counts), and the difference from w = 0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import bench_time  # noqa: E402
from bench_hybrid import embed  # noqa: E402

DBNAME = "agentmem_bench_use_boost"
TENANT = "locomo"
MODEL = "all-minilm"
NAMES = {1: "1 multi-hop", 2: "2 temporal", 3: "3 open-domain", 4: "4 single-hop"}


def load(app, admin, convs, vectors) -> dict:
    """Store the turns with their session dates moved to end a day ago; message_id -> dia_id."""
    last = max(at for _, turns in convs for _, _, at, _ in turns)
    shift = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1) - last
    where, i = {}, 0
    for user, turns in convs:
        cid = app.execute("select agentmem.start_conversation(user_id => %s)", (user,)).fetchone()[0]
        vecs = vectors[i:i + len(turns)]
        i += len(turns)
        rows = app.execute(
            "select * from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
            "embeddings => %s, model => %s, occurred_at => %s)",
            (cid, ["user"] * len(turns), [t for _, t, _, _ in turns], list(vecs), MODEL,
             [at + shift for _, _, at, _ in turns])).fetchall()
        for (dia, *_), (mid, _) in zip(turns, rows):
            where[mid] = dia
    # stored when it happened (the creation term of the boost reads created_at)
    admin.execute("update agentmem.messages set created_at = occurred_at where tenant_id = %s", (TENANT,))
    admin.execute("analyze")
    return where


def replay(app, admin, questions, qvecs, where, weight: float) -> dict:
    """{category: [top5 share, top10 share] summed, count}; uses reset first, folded after each question."""
    admin.execute("delete from agentmem.use_log")
    admin.execute("update agentmem.messages set use_count = 0, last_used_at = null where tenant_id = %s", (TENANT,))
    sums: dict[int, list[float]] = {}
    for (user, q, ev, cat), v in zip(questions, qvecs):
        hits = [where[r[0]] for r in app.execute(
            "select message_id from agentmem.search_messages(user_id => %s, query_embedding => %s, "
            "query_text => %s, k => 10, model => %s, use_boost => %s::real)", (user, v, q, MODEL, weight))]
        s = sums.setdefault(cat, [0.0, 0.0, 0])
        s[0] += len(ev & set(hits[:5])) / len(ev)
        s[1] += len(ev & set(hits[:10])) / len(ev)
        s[2] += 1
        admin.execute("select agentmem.apply_use_log()")
    return sums


def report(args, weights, results, n_q, n_turns, seconds) -> str:
    cats = sorted(results[0.0])
    lines = [
        "## The use boost on LoCoMo, by category",
        "",
        f"{dt.date.today().isoformat()}, embedded PostgreSQL 18 + pgvector 0.8, 2 cores shared with other work. "
        f"Command: `.venv/bin/python bench/probes/probe_use_boost.py --out FILE --weights "
        f"{','.join(str(w) for w in weights if w)} --runs {args.runs}` ({seconds / 60:.1f} min).",
        "",
        f"{n_turns} LoCoMo turns (5 conversations, all-MiniLM-L6-v2, stored with their session dates, the "
        f"timeline ending a day ago, created_at = occurred_at), {n_q} questions of categories 1-4 asked in "
        "order per conversation through `search_messages` (hybrid, k 10, `use_boost => w`), the uses folded "
        "after each question (`apply_use_log`), so that each question is ranked with the uses of those "
        "before it. Share of each question's evidence turns in the top 5 / top 10, averaged per category "
        f"and over {args.runs} runs (each a fresh database: new random message ids, which order ties); in "
        "brackets the difference from w = 0 (off: today's results exactly), paired within each run.",
        "",
        "| category | questions | " + " | ".join(f"w = {w} top 5 | w = {w} top 10" for w in weights) + " |",
        "|---|---:|" + "---:|---:|" * len(weights),
    ]

    def row(name, pick):
        base = pick(results[0.0])
        cells = []
        for w in weights:
            t5, t10, n = pick(results[w])
            if w == 0:
                cells += [f"{t5 / n:.3f}", f"{t10 / n:.3f}"]
            else:
                cells += [f"{t5 / n:.3f} ({(t5 - base[0]) / n:+.3f})", f"{t10 / n:.3f} ({(t10 - base[1]) / n:+.3f})"]
        return f"| {name} | {base[2]} | " + " | ".join(cells) + " |"

    for c in cats:
        lines.append(row(NAMES.get(c, str(c)), lambda r, c=c: r[c]))
    lines.append(row("all", lambda r: [sum(x[0] for x in r.values()), sum(x[1] for x in r.values()),
                                        sum(x[2] for x in r.values())]))
    lowered = sorted({NAMES.get(c, str(c)) for w in weights if w for c in cats
                      if results[w][c][0] < results[0.0][c][0] - 1e-9 or results[w][c][1] < results[0.0][c][1] - 1e-9})
    lines += ["", "Categories some weight lowers (top 5 or top 10): " + (", ".join(lowered) or "none") + "."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--weights", default="0.1,0.25,0.5", help="use_boost weights besides 0 (0 to 0.5)")
    parser.add_argument("--database-url", help="a server to use (default: the benchmarks' embedded one on --port)")
    parser.add_argument("--port", type=int, default=55452)
    parser.add_argument("--runs", type=int, default=3,
                        help="fresh databases (new random message ids, so other ties) averaged over (default 3)")
    args = parser.parse_args()
    weights = [0.0] + [float(w) for w in args.weights.split(",") if float(w) > 0]
    started = time.perf_counter()
    convs, questions = bench_time.load_locomo()
    turns = [t for _, ts in convs for _, t, _, _ in ts]
    vectors = embed(turns)
    qvecs = embed([q for _, q, _, _ in questions])
    bench_time.DBNAME = DBNAME
    base = bench_time.server_url(args)
    results: dict[float, dict[int, list[float]]] = {w: {} for w in weights}
    spread: dict[float, list[float]] = {w: [] for w in weights}   # per run: all questions' top 5, minus off
    for run in range(args.runs):
        admin_url, app_url = bench_time.fresh_database(base)
        admin, app = bench_time.connect(admin_url), bench_time.connect(app_url, TENANT)
        where = load(app, admin, convs, vectors)
        this = {}
        for w in weights:
            this[w] = replay(app, admin, questions, qvecs, where, w)
            print(run, w, {c: (round(s[0] / s[2], 3), round(s[1] / s[2], 3)) for c, s in sorted(this[w].items())},
                  flush=True)
            for c, s in this[w].items():
                acc = results[w].setdefault(c, [0.0, 0.0, 0])
                acc[0] += s[0] / args.runs
                acc[1] += s[1] / args.runs
                acc[2] = s[2]
        for w in weights:
            spread[w].append(sum(s[0] for s in this[w].values()) / len(questions)
                             - sum(s[0] for s in this[0.0].values()) / len(questions))
        admin.close()
        app.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = report(args, weights, results, len(questions), len(turns), time.perf_counter() - started)
    text += ("\nPer run (" + str(args.runs) + " fresh databases), all questions' top 5 minus off: "
             + "; ".join(f"w = {w}: " + ", ".join(f"{d:+.3f}" for d in spread[w]) for w in weights if w) + ".\n")
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
