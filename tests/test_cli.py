"""The ``agentmem`` command's errors a user meets first (no server there: one line, exit 2), its help, and
how it finds the development commands (the entry-point group agentmem.commands, no import between the two
packages' command modules)."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest

from conftest import ROOT
from helpers import free_port_url

COMMANDS = [
    ["status"],
    ["migrate"],
    ["distribute"],
    ["docs"],
    ["cache-report", "--tenant", "acme", "--cost-uncached", "1", "--cost-wrong", "1"],
    ["demo"],
    ["mcp", "--tenant", "acme", "--user", "alice"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_an_unreachable_server_is_one_line_and_exit_2(server, command):
    url = free_port_url(server.db_url("postgres"))
    done = subprocess.run([sys.executable, "-m", "agentmem.cli", *command, "--database-url", url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done
    assert done.stdout == "" or command[0] == "demo"  # the demo's title comes first
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("agentmem: cannot connect to the database: ") and "refused" in lines[0]


def test_a_missing_database_or_login_is_one_line_and_exit_2(server):
    for url in (server.db_url("agentmem_no_such_database"), server.db_url("postgres", "agentmem_no_such_login")):
        done = subprocess.run([sys.executable, "-m", "agentmem.cli", "status", "--database-url", url],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
        assert "does not exist" in done.stderr


def test_cache_report_png_without_matplotlib_names_the_extra(app_url, tmp_path, capsys, monkeypatch):
    from agentmem.cli import main
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert main(["cache-report", "--database-url", app_url, "--tenant", "acme", "--cost-uncached", "1",
                 "--cost-wrong", "1", "--png", str(tmp_path / "r.png")]) == 2
    err = capsys.readouterr().err
    assert "plot extra" in err and "pg-agentmem[plot]" in err
    assert not (tmp_path / "r.png").exists()


def agentmem(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentmem.cli", *args], capture_output=True, text=True,
                          timeout=120, **kw)


def one_line(done: subprocess.CompletedProcess) -> str:
    """The one line a refused command wrote on stderr (exit code 2, no traceback)."""
    assert done.returncode == 2, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_export_and_import_a_user_cannot_are_one_line_and_exit_2(app, app_url, admin_url, tmp_path):
    """Issue 31, defect 6: a whole tenant's export or import as the application login, and a file that
    is not there, say what to do in one line (exit 2), no traceback."""
    conv = app.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    app.execute("select agentmem.store_message(conversation_id => %s, role => 'user', content => 'hello', "
                "embedding => null, model => 'all-minilm')", (conv,))
    line = one_line(agentmem("export", "--database-url", app_url, "--tenant", "acme"))
    assert line.startswith("agentmem export: ") and "--user" in line and "BYPASSRLS" in line
    tenant_file = tmp_path / "acme.jsonl"
    done = agentmem("export", "--database-url", admin_url, "--tenant", "acme", "-o", str(tenant_file))
    assert done.returncode == 0, done.stderr
    line = one_line(agentmem("import", str(tenant_file), "--database-url", app_url))
    assert line.startswith("agentmem import: this is a tenant's export") and "--user" in line
    missing = tmp_path / "nothing-here.jsonl"
    line = one_line(agentmem("import", str(missing), "--database-url", app_url, "--tenant", "acme"))
    assert line == f"agentmem import: cannot read {missing}: No such file or directory"
    line = one_line(agentmem("export", "--database-url", app_url, "--tenant", "acme", "--user", "u1",
                             "-o", str(tmp_path / "no-such-dir" / "u1.jsonl")))
    assert line.startswith("agentmem export: cannot write ")
    # what the application login may do still works
    user_file = tmp_path / "u1.jsonl"
    assert agentmem("export", "--database-url", app_url, "--tenant", "acme", "--user", "u1",
                    "-o", str(user_file)).returncode == 0
    assert agentmem("import", str(user_file), "--database-url", app_url, "--tenant", "acme").returncode == 0


def test_the_worker_on_an_unreachable_server_is_one_line_and_exit_2(server):
    """Issue 31, defect 10: exit code 2 for a connection failure, as every command."""
    url = free_port_url(server.db_url("postgres"))
    line = one_line(agentmem("worker", "--once", "--embedder", "lexical", "--database-url", url))
    assert line.startswith("agentmem: cannot connect to the database: ") and "refused" in line


def test_every_command_has_a_description_and_every_option_a_help():
    """Issue 31, defect 10: `agentmem CMD --help` says what the command does and what each option is."""
    import argparse

    from agentmem.cli import build_parser, installed_commands
    parser, _ = build_parser(installed_commands())
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    missing = []
    for name, command in sub.choices.items():
        if not command.description:
            missing.append(name)
        missing += [f"{name} {a.option_strings or a.dest}" for a in command._actions
                    if not a.help and not isinstance(a, argparse._HelpAction)]
    assert missing == []
    assert {"migrate", "worker", "export", "import", "dev-server", "psql"} <= set(sub.choices)


def imported_modules(path) -> set[str]:
    """The modules a Python file imports, at its top or inside a function."""
    import ast
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_the_runtime_command_imports_no_development_module_and_the_development_one_no_runtime_command():
    """No import circle: agentmem.cli finds the development commands as entry points (group agentmem.commands,
    python/dev/pyproject.toml) and imports nothing of agentmem_dev; agentmem_dev.cli imports nothing of
    agentmem.cli."""
    runtime = imported_modules(ROOT / "python" / "agentmem" / "cli.py")
    assert not [m for m in runtime if m.split(".")[0] == "agentmem_dev"], runtime
    assert "agentmem.cli" not in imported_modules(ROOT / "python" / "dev" / "agentmem_dev" / "cli.py")
    # importing the runtime command (and running a runtime command's parse) loads no development module
    probe = ("import sys, agentmem.cli as c; c.installed_commands(); "
             "print(sorted(m for m in sys.modules if m.startswith('agentmem_dev')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done


def test_the_development_commands_are_found_by_their_entry_points_and_run(admin_url, tmp_path, capsys):
    from agentmem.cli import DEV_COMMANDS, installed_commands, main
    from agentmem_dev.cli import Command
    commands = installed_commands()
    assert set(DEV_COMMANDS) <= set(commands), "make venv installs python/dev, whose pyproject declares them"
    assert all(isinstance(commands[name].load(), Command) for name in DEV_COMMANDS)
    out = tmp_path / "api.md"
    assert main(["docs", "--database-url", admin_url, "-o", str(out)]) == 0
    assert out.read_text().startswith("<!-- GENERATED")
    with pytest.raises(SystemExit) as exited:
        main(["dev-server", "--help"])
    assert exited.value.code == 0 and "--data-dir" in capsys.readouterr().out


def test_without_the_development_package_its_commands_say_what_to_install(monkeypatch, capsys):
    import agentmem.cli
    monkeypatch.setattr(agentmem.cli, "installed_commands", lambda: {})
    assert agentmem.cli.main(["docs", "-o", "x.md"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "agentmem docs: a development command, in the package pg-agentmem-dev, which is not installed: "
        "pip install pg-agentmem-dev (in a checkout: make venv)"]
    import argparse
    parser, handlers = agentmem.cli.build_parser({})
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {c.dest: c.help for c in sub._choices_actions}
    assert handlers == {} and helps["docs"].endswith("[pip install pg-agentmem-dev]")


def test_dev_server_start_quiet_prints_only_the_url(server):
    """Issue 31, defect 9: `make demo` starts the dev server with --quiet, so it does not speak of the
    database agentmem, which the demo does not use."""
    makefile = (ROOT / "Makefile").read_text()
    demo = makefile[makefile.index("\ndemo:"):].split("\n\n")[0]
    assert "dev-server start --quiet" in demo
    if server.name != "embedded":
        pytest.skip("the dev server is the embedded one")
    # the suite's own embedded server, already running: start reuses it
    data = str(ROOT / ".pgdata" / "test")
    with psycopg.connect(server.db_url("postgres"), autocommit=True) as conn:
        conn.execute("drop database if exists agentmem with (force)")  # agentmem is not installed there
    loud = agentmem("dev-server", "start", "--data-dir", data)
    quiet = agentmem("dev-server", "start", "--quiet", "--data-dir", data)
    assert loud.returncode == quiet.returncode == 0, (loud.stderr, quiet.stderr)
    assert "agentmem is not installed in database agentmem" in loud.stderr
    assert quiet.stderr == "" and quiet.stdout == loud.stdout and quiet.stdout.startswith("postgresql://")
