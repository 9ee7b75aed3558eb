"""The floor under cache_lookup at scale: what any guarded, logged semantic lookup must do, timed beside
cache_lookup and the plain pgvector threshold query on the rows a ``bench_cache.py --scale`` run left
(agentmem_bench_cache_scale on the bench server).

    .venv/bin/python bench/bench_cache.py --port P --scale 1000000 --scale-tenants 1000 --out /tmp/x.md
    .venv/bin/python bench/probes/probe_cache_floor.py --port P --lookups 300

Per lookup (semantic hit and miss, the same questions and vectors as bench_cache.py's), each timed in
the server (clock_timestamp around it in a pg_temp function), in turn, which goes first rotating, after
one untimed lookup and plain query of the tenant (its rows read once, so that the first system timed does not pay alone):

- plain: bench_cache.py's plain threshold query (the tenant's nearest question if its similarity is >= 0.9,
  the threshold a parameter as there);
- plain + log: the same, then one insert of the lookup into public.plain_hits, a copy of
  cache_hits' columns, defaults and indexes without row-level security (the one write a logged
  lookup must make);
- plain + log + guard: the same, with the asked question's guard reading
  (agentmem.question_guard_features) worked out first, as a guarded lookup must;
- cache_lookup.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import CACHE_SCALE_DB as DB  # noqa: E402
from common import CACHE_SCALE_WORDS as WORDS  # noqa: E402
from common import cache_scale_question as question  # noqa: E402
from common import APP_ROLE, as_login, cache_scale_stored, connect, database_url, p50_p95, start_server  # noqa: E402


TIMERS = """
create or replace function pg_temp.t_cache(q text, v vector) returns float8 language plpgsql as $$
declare t0 timestamptz := clock_timestamp(); k text;
begin
    select l.kind into k from agentmem.cache_lookup(question => q, question_embedding => v, model => 'all-minilm') as l;
    return extract(epoch from clock_timestamp() - t0) * 1000;
end $$;
create or replace function pg_temp.t_plain(t text, q text, v vector, min_similarity float8, log boolean,
                                           guard boolean)
returns float8 language plpgsql as $$
declare t0 timestamptz := clock_timestamp(); a text; f text[];
begin
    if guard then
        f := agentmem.question_guard_features(question => q);
    end if;
    select p.answer into a from plain_cache as p
    where p.tenant_id = t and (p.embedding <=> v) <= 1 - min_similarity
    order by p.embedding <=> v limit 1;
    if log then
        insert into public.plain_hits (tenant_id, entry_id, kind, similarity, guard_passed, threshold, intent,
                                       question_asked, matched_question)
        values (t, null, case when a is null then 'miss' else 'semantic' end, 0.95, true, 0.9, 'general', q, a);
    end if;
    return extract(epoch from clock_timestamp() - t0) * 1000;
end $$
"""



def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--lookups", type=int, default=300)
    ap.add_argument("--per", type=int, default=1000, help="entries per tenant of the --scale run")
    args = ap.parse_args()
    server = start_server(args.port)
    admin_url = database_url(server, DB)
    with connect(admin_url) as admin:
        admin.execute("create table if not exists public.plain_hits "
                      "(like agentmem.cache_hits including defaults including constraints including indexes)")
        admin.execute(f"grant insert on public.plain_hits to {APP_ROLE}")
    # the vectors bench_cache.py drew for tenants 0..199 (the same generator, in the same order)
    stored = cache_scale_stored(args.per)
    r2 = np.random.default_rng(7)
    app = connect(as_login(admin_url, APP_ROLE))
    app.execute(TIMERS)
    systems = ["plain", "plain + log", "plain + log + guard", "cache_lookup"]
    times: dict[tuple[str, str], list[float]] = {}
    for i in range(args.lookups + 20):
        t = int(r2.integers(0, 200))
        k = int(r2.integers(0, 20))
        near = stored[t][k] + r2.standard_normal(384).astype(np.float32) * 0.01
        far = r2.standard_normal(384).astype(np.float32)
        cases = {"semantic hit": ("please, " + question(t, k), near / np.linalg.norm(near)),
                 "miss": (f"what is the {WORDS[i % 16]} of workspace {t} on day {i}", far / np.linalg.norm(far))}
        app.execute("select agentmem.set_tenant(tenant_id => %s)", (f"c{t:04d}",))
        # the tenant's rows read once untimed, so that the first system timed does not pay for them alone
        app.execute("select pg_temp.t_cache(%s, %s)", cases["miss"])
        app.execute("select pg_temp.t_plain(%s, %s, %s, 0.9, false, false)", (f"c{t:04d}", *cases["miss"]))
        order = systems[i % 4:] + systems[:i % 4]
        for outcome, (q, v) in cases.items():
            for system in order:
                if system == "cache_lookup":
                    ms = app.execute("select pg_temp.t_cache(%s, %s)", (q, v)).fetchone()[0]
                else:
                    ms = app.execute("select pg_temp.t_plain(%s, %s, %s, 0.9, %s, %s)",
                                     (f"c{t:04d}", q, v, "log" in system, "guard" in system)).fetchone()[0]
                if i >= 20:  # the first twenty warm the caches
                    times.setdefault((outcome, system), []).append(ms)
    app.close()
    print("| outcome | " + " | ".join(f"{s} p50 / p95 ms" for s in systems) + " |")
    print("|---|" + "---:|" * len(systems))
    for outcome in ("semantic hit", "miss"):
        cells = []
        for s in systems:
            p50, p95 = p50_p95(times[(outcome, s)])
            cells.append(f"{p50:.2f} / {p95:.2f}")
        print(f"| {outcome} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
