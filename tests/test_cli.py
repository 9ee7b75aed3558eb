"""The ``agentmem`` command's errors a user meets first: no server there (one line, exit 2)."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
