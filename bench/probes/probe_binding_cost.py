"""What does binding tenants to logins cost a call, under each binding mode (none, role, jwt)?

    .venv/bin/python bench/probes/probe_binding_cost.py --out bench/results/binding_cost.md [--port P] [--rounds 5]

On the bench server (a fresh database): tenant "victim" holds 8 users of 3 messages each (384-d random unit
vectors), the application's login is granted that tenant only (as a new installation binds tenants to
logins). Microseconds per call of current_tenant() and of two small API calls, looped inside the server
(2,000 calls in a DO block: no round trip in the figure), the modes alternating round after round on one
connection of the application login; the median of the rounds. The security probes that check the binding
refuses every other route are tests/test_security_probes.py.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/common.py
from common import as_login, command, connect, fresh_database, start_server, unit_vectors, write_report  # noqa: E402

MODEL, DIM, USERS = "all-minilm", 384, 8
LOGIN = "agentmem_probe_binding_app"
MODES = ("none", "role", "jwt")


def setup(port: int) -> tuple[str, str, str]:
    """The admin URL, the application login's URL, and one conversation of the victim's."""
    admin_url, _ = fresh_database(start_server(port), "agentmem_probe_binding_cost", app_role=None)
    with connect(admin_url) as admin:
        if not admin.execute("select 1 from pg_roles where rolname = %s", (LOGIN,)).fetchone():
            admin.execute(f"create role {LOGIN} login")
        admin.execute("select agentmem.grant_app_role(role_name => %s)", (LOGIN,))
        admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'victim')", (LOGIN,))
    app_url = as_login(admin_url, LOGIN)
    rng = np.random.default_rng(12)
    vectors = iter(unit_vectors(rng, 3 * USERS, DIM))
    with connect(app_url, "victim") as app:
        first = None
        for u in range(USERS):
            cid = app.execute("select agentmem.start_conversation(user_id => %s, title => 'secret')",
                              (f"victim-user-{u}",)).fetchone()[0]
            first = first or cid
            for i in range(3):
                app.execute("select agentmem.store_message(conversation_id => %s, role => 'user', content => %s, "
                            "embedding => %s, model => %s)",
                            (cid, f"victim secret {u}-{i}: the vault code is {rng.integers(1e6)}", next(vectors),
                             MODEL))
    return admin_url, app_url, str(first)


def binding_cost(admin, app_url, cid, rounds: int = 5, calls: int = 2000) -> list[tuple[str, dict[str, float]]]:
    """Microseconds per call of each case under each mode, the median of `rounds` alternating rounds."""
    conn = connect(app_url, "victim")
    cases = {
        "current_tenant()": "perform agentmem.current_tenant();",
        "recent_messages(n => 3)": f"perform count(*) from agentmem.recent_messages(conversation_id => '{cid}', n => 3);",
        "search_messages(k => 5)": "perform count(*) from agentmem.search_messages(user_id => 'victim-user-0', "
                                   "query_text => 'vault code', k => 5);",
    }
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for mode in MODES:
            admin.execute("select agentmem.set_tenant_binding(mode => %s)", (mode,))
            with conn.transaction():
                conn.execute("select set_config('request.jwt.claims', %s, true)", (json.dumps({"tenant_id": "victim"}),))
                for label, stmt in cases.items():
                    t = time.perf_counter()
                    conn.execute(f"do $bench$ begin for i in 1..{calls} loop {stmt} end loop; end $bench$")
                    times.setdefault((label, mode), []).append((time.perf_counter() - t) / calls * 1e6)
    admin.execute("select agentmem.set_tenant_binding(mode => 'role')")
    conn.close()
    return [(label, {mode: float(np.median(times[(label, mode)])) for mode in MODES}) for label in cases]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--port", type=int, default=int(os.environ.get("AGENTMEM_EMBEDDED_PORT", 55452)))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    admin_url, app_url, cid = setup(args.port)
    with connect(admin_url) as admin:
        cost = binding_cost(admin, app_url, cid, rounds=args.rounds)
    lines = ["## What binding tenants to logins costs a call", "",
             f"{datetime.date.today()}, {os.cpu_count()} cores shared with other work (load average {load:.1f} at "
             f"the start, {os.getloadavg()[0]:.1f} at the end), embedded PostgreSQL + pgvector. "
             f"Command: `{command()}`.", "",
             f"Microseconds per call, looped inside the server by the application login, the median of "
             f"{args.rounds} alternating rounds; the check runs in every current_tenant(), which every call reads and "
             "every row-level security policy reads once per statement:", "",
             "| call | none | role | jwt |", "|---|---|---|---|"]
    lines += [f"| {label} | {t['none']:.0f} | {t['role']:.0f} | {t['jwt']:.0f} |" for label, t in cost]
    lines += ["", "Mode none is agentmem without binding (the mode is a constant the planner folds). Under role and "
              "jwt each current_tenant() looks up the login's grants (an index probe, and under jwt a JSON lookup); "
              "it is not cached, since a cache kept in a setting could be forged by the session.", ""]
    write_report(args.out, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
