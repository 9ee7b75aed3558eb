"""The reference cannot go stale: every function of schema agentmem has a runnable example in its comment
(sql/88_api_examples.sql) and every parameter its meaning, and psql runs every example, in order, on a
fresh installation: the DBA's as the superuser, the application's as agentmem_app (tenant acme), the
embedding worker's as agentmem_worker, each statement committed as psql does (on Citus a transaction may
not read what another role wrote in it); the test's database goes afterwards, the roles the examples
create are dropped."""

from __future__ import annotations

import re
import subprocess

import psycopg
import pytest

EXAMPLES_FILE = "sql/88_api_examples.sql"
# Examples that need what a server may lack: run where it has it, skipped where it has not.
NEEDS = {"schedule_retention": "pg_cron", "unschedule_retention": "pg_cron",
         "schedule_index_upkeep": "pg_cron", "unschedule_index_upkeep": "pg_cron",
         "schedule_index_pending": "pg_cron", "unschedule_index_pending": "pg_cron", "distribute": "citus"}
ROLE = {"application": "set role agentmem_app;", "worker": "set role agentmem_worker;", "dba": "reset role;"}


def examples(admin) -> list[tuple[int, str | None, str, str]]:
    """(step, function, example, who runs it), in order; a step of no function runs as the application."""
    return [(step, fn, example, audience or "application") for step, fn, example, audience in admin.execute(
        "select e.step, e.fn, e.example, (select a.audience from agentmem_private.function_audience() as a"
        " join pg_proc as p on p.oid = a.fn where p.proname = e.fn limit 1)"
        " from agentmem_private.api_examples() as e order by e.step")]


def comment_example(comment: str) -> str | None:
    """The "Example:" block of a comment (up to its "Security definer" or "Called by" line), or None."""
    lines = comment.rstrip().splitlines()
    if "Example:" not in lines:
        return None
    block = lines[lines.index("Example:") + 1:]
    while block and block[-1].startswith(("Called by: ", "Security definer: ")):
        block.pop()
    return "\n".join(block)


def missing_examples(names: list[str], listed: set[str]) -> list[str]:
    return [f"agentmem.{name} has no example: add its row to agentmem_private.api_examples() in "
            f"{EXAMPLES_FILE}, after the examples that make what it reads (a few lines of psql)"
            for name in sorted(set(names) - listed)]


def test_every_public_function_has_an_example_in_its_comment(admin):
    names = [n for n, in admin.execute("select proname from pg_proc where pronamespace = 'agentmem'::regnamespace")]
    steps = examples(admin)
    listed = {fn for _, fn, _, _ in steps if fn is not None}
    assert missing_examples(names, listed) == []
    stale = sorted(listed - set(names))
    assert not stale, f"{EXAMPLES_FILE} has examples of functions that do not exist: {stale}"
    for name, comment in admin.execute(
            "select p.proname, obj_description(p.oid, 'pg_proc') from pg_proc as p"
            " where p.pronamespace = 'agentmem'::regnamespace"):
        written = {example for _, fn, example, _ in steps if fn == name}
        assert comment_example(comment) in written, f"the comment of agentmem.{name} does not end with its example"
        assert comment.rstrip().splitlines()[-1].startswith("Called by: "), name
    # the message names the function and the file to edit
    assert missing_examples(["set_tenant", "pin_memory"], {"set_tenant"}) == [
        f"agentmem.pin_memory has no example: add its row to agentmem_private.api_examples() in {EXAMPLES_FILE}, "
        "after the examples that make what it reads (a few lines of psql)"]


def test_every_parameter_has_its_meaning(admin):
    missing = [f"agentmem.{fn}({name})" for fn, name in admin.execute(
        "select p.proname, a.name from pg_proc as p, unnest(p.proargnames, p.proargmodes) as a (name, mode)"
        " where p.pronamespace = 'agentmem'::regnamespace and coalesce(a.mode, 'i') in ('i', 'b', 'v')"
        " and not exists (select from agentmem_private.api_parameters() as m"
        "   where m.parameter = a.name and (m.fn = p.proname or m.fn is null))"
        " and p.proargmodes is not null"
        " union all "
        "select p.proname, a.name from pg_proc as p, unnest(p.proargnames) as a (name)"
        " where p.pronamespace = 'agentmem'::regnamespace and p.proargmodes is null"
        " and not exists (select from agentmem_private.api_parameters() as m"
        "   where m.parameter = a.name and (m.fn = p.proname or m.fn is null))"
        " order by 1, 2")]
    assert not missing, (f"parameters without a meaning: add a row to agentmem_private.api_parameters() in "
                         f"{EXAMPLES_FILE} (fn NULL when it means the same in every function): {missing}")


def feature(admin, name: str) -> bool:
    if name == "citus":
        return admin.execute("select exists (select from pg_extension where extname = 'citus')").fetchone()[0]
    return admin.execute("select exists (select from pg_extension where extname = 'pg_cron')").fetchone()[0]


def script(steps, skip: set[str]) -> str:
    """One psql script: every example in order, each after a marker, as the role that calls it."""
    out = ["\\set ON_ERROR_STOP 1", "\\set QUIET 1"]
    role = None
    for step, fn, example, audience in steps:
        if fn in skip:
            continue
        out.append(f"\\echo '@@ step {step}: {fn or '(a variable)'}'")
        if audience != role:
            out.append(ROLE[audience])
            role = audience
        out.append(example)
    return "\n".join(out + ["reset role;", "\\echo '@@ done'", ""])


def run_psql(server, url: str, text: str, roles: list[str]) -> subprocess.CompletedProcess:
    """psql on the script; then the login roles it created (cluster-wide) are dropped."""
    try:
        return subprocess.run([server.bin("psql"), "-X", "-d", url, "-f", "-"], input=text,
                              capture_output=True, text=True, timeout=300)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            for role in roles:
                if conn.execute("select from pg_roles where rolname = %s", (role,)).fetchone() is not None:
                    conn.execute(f'drop owned by "{role}"')
                    conn.execute(f'drop role "{role}"')


def test_every_example_runs_in_order_on_a_fresh_installation(admin, admin_url, server):
    steps = examples(admin)
    skip = {fn for fn, needs in NEEDS.items() if not feature(admin, needs)}
    made = sorted({r for _, _, example, _ in steps for r in re.findall(r"\bcreate role (\w+)", example)})
    assert made == ["support_bot"]
    run = run_psql(server, admin_url, script(steps, skip), made)
    markers = re.findall(r"^@@ (.*)$", run.stdout, re.M)
    assert run.returncode == 0 and markers[-1:] == ["done"], (
        f"the example of {markers[-1] if markers else '(none)'} failed in {EXAMPLES_FILE}:\n{run.stderr[-3000:]}")
    assert len(markers) == len(steps) - len(skip) + 1
    if skip:
        pytest.skip(f"ran every example but {sorted(skip)} (this server lacks {sorted({NEEDS[f] for f in skip})})")


def test_a_failing_example_is_named(admin, admin_url, server):
    """The check itself: an example that errors stops the run at its own marker."""
    steps = [(1, "set_tenant", "select agentmem.set_tenant(tenant_id => 'acme');", "application"),
             (2, "current_tenant", "select agentmem.no_such_function();", "application"),
             (3, "tenant_binding_mode", "select agentmem.tenant_binding_mode();", "application")]
    run = run_psql(server, admin_url, script(steps, set()), [])
    assert run.returncode != 0
    assert re.findall(r"^@@ (.*)$", run.stdout, re.M)[-1] == "step 2: current_tenant"
    assert "no_such_function" in run.stderr
