"""The first hour in psql: the README's psql section as pasted, `agentmem psql`, `agentmem embed`,
`agentmem dev-server start`, the README's Python example, and a bare `make`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest

from agentmem.lexical import lexical_embedding
from conftest import APP_ROLE, ROOT
from helpers import worker_login_url

BIN = Path(sys.executable).parent
AGENTMEM = str(BIN / "agentmem")
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused


def readme_block(heading: str, lang: str, doc: str = "README.md", index: int = 0) -> str:
    """The first (index: a later) fenced block of a language under a heading of the README (doc:
    another page), as written."""
    text = (ROOT / doc).read_text()
    section = text[text.index(heading):]
    blocks = re.findall(rf"```{lang}\n(.*?)```", section, re.S)
    assert len(blocks) > index, f"no ```{lang} block {index} under {heading!r} in {doc}"
    return blocks[index]


STORED_WITHOUT_VECTOR = "The refund for order 7731 never arrived"


def psql_env(database_url: str, ollama_host: str, worker_url: str) -> dict:
    """What `agentmem psql` gives its psql: agentmem on PATH (no venv activated), the database for
    the model's dimension and prefixes, the worker's login; and where Ollama is."""
    env = {k: v for k, v in os.environ.items() if k not in ("PGOPTIONS", "VIRTUAL_ENV")}
    env["PATH"] = str(BIN) + os.pathsep + "/usr/bin:/bin"
    env["AGENTMEM_DATABASE_URL"] = database_url
    env["AGENTMEM_WORKER_URL"] = worker_url
    env["OLLAMA_HOST"] = ollama_host
    return env


def result_after(out: str, header: str) -> str:
    """The rows psql printed for the query whose column headers are `header`."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if re.fullmatch(header, line.strip()))
    end = next(i for i in range(start, len(lines)) if re.fullmatch(r"\(\d+ rows?\)", lines[i].strip()))
    first = start + 2 if set(lines[start + 1].strip()) <= set("-+") else start + 1  # aligned or -A
    return "\n".join(lines[first:end])


def check_snippet_output(out: str) -> None:
    # the message stored with its vector found twice, by its embedding and by words (the store
    # printed only its index)
    assert out.count("Invoice INV-2291 was charged twice") == 2, out
    # the one stored without a vector found by words at once, and by meaning after the worker's pass
    assert out.count(STORED_WITHOUT_VECTOR) == 2, out
    by_words = result_after(out, r"content\s*\|\s*text_rank")
    assert STORED_WITHOUT_VECTOR in by_words and "INV-2291" not in by_words, out
    by_meaning = result_after(out, r"content\s*\|\s*similarity")
    assert STORED_WITHOUT_VECTOR in by_meaning.splitlines()[0], out  # the nearest to "a refund that never arrived"
    assert "INV-2291" in by_meaning, out


@pytest.mark.parametrize("ollama", ["stub", "unreachable"])
def test_readme_psql_section_runs_as_pasted_through_the_servers_psql(server, dbname, admin, stub, ollama, tmp_path):
    """The fenced block of "Thirty seconds in psql", verbatim, through the server's own psql with
    ON_ERROR_STOP as the application login: with Ollama (the stub, through the real client) and with
    none answering (agentmem embed says it used the offline lexical embedder)."""
    script = tmp_path / "thirty-seconds.sql"
    script.write_text(readme_block("## Thirty seconds in psql", "sql"))
    app_url = server.db_url(dbname, APP_ROLE)
    run = subprocess.run([server.bin("psql"), "-X", "-v", "ON_ERROR_STOP=1", "-d", app_url, "-f", str(script)],
                         capture_output=True, text=True, timeout=120,
                         env=psql_env(app_url, stub.host if ollama == "stub" else UNREACHABLE,
                                      worker_login_url(server, dbname, admin)))
    assert run.returncode == 0, run.stderr
    assert "ERROR" not in run.stderr
    check_snippet_output(run.stdout)
    if ollama == "stub":
        assert "OFFLINE" not in run.stderr
        assert "search_document: Invoice INV-2291 was charged twice" in stub.embedded_texts
        assert "search_query: a refund that never arrived" in stub.embedded_texts
        # the worker embedded the text stored without a vector, with the model's document prefix
        assert f"search_document: {STORED_WITHOUT_VECTOR}" in stub.embedded_texts
    else:
        assert "no Ollama answered at http://127.0.0.1:9" in run.stderr
        assert "OFFLINE LEXICAL embedding" in run.stderr and "nomic-embed-text's 768 dimensions" in run.stderr
        assert "embedding nomic-embed-text with the OFFLINE LEXICAL embedder" in run.stderr  # the worker says so
    assert re.search(r"agentmem worker: embedded [1-9]\d* jobs", run.stderr), run.stderr
    # forget_user erased what the snippet stored
    assert admin.execute("select count(*) from agentmem.messages where tenant_id = 'acme'").fetchone() == (0,)
    assert admin.execute("select count(*) from agentmem.embedding_jobs where tenant_id = 'acme'"
                         ).fetchone() == (0,)
    assert admin.execute("select count(*) from agentmem.conversations where tenant_id = 'acme'").fetchone() == (0,)


def test_agentmem_psql_migrates_and_opens_psql_as_an_application_login_with_a_tenant(server, dbname, stub,
                                                                                    tmp_path):
    """One command from a database to a psql prompt: migrated (again: idempotent), a login made and
    made an application role, the tenant set, agentmem on psql's PATH; then the README's snippet."""
    login = "agentmem_psql_" + uuid.uuid4().hex[:8]
    query = tmp_path / "who.sql"
    query.write_text("select current_user as login, agentmem.current_tenant() as tenant,"
                     " pg_has_role(current_user, 'agentmem_app', 'member') as app,"
                     " (select rolsuper or rolbypassrls from pg_roles where rolname = current_user) as bypasses;\n"
                     + readme_block("## Thirty seconds in psql", "sql"))
    env = {k: v for k, v in os.environ.items() if k not in ("PGOPTIONS", "AGENTMEM_DATABASE_URL")}
    env["OLLAMA_HOST"] = stub.host
    env["PATH"] = "/usr/bin:/bin"  # no venv on PATH: agentmem psql puts its own there for psql
    try:
        run = subprocess.run([AGENTMEM, "psql", "--database-url", server.db_url(dbname), "--login", login,
                              "--tenant", "acme", "--psql", server.bin("psql"), "--",
                              "-X", "-v", "ON_ERROR_STOP=1", "-A", "-F", "|", "-f", str(query)],
                             capture_output=True, text=True, timeout=180, env=env)
        assert run.returncode == 0, run.stderr
        assert f"{login}|acme|t|f" in run.stdout
        assert f"connected as the application login {login}, tenant 'acme'" in run.stderr
        # it made a worker login and told psql its URL: the snippet's `\\! agentmem worker` ran as it
        assert "agentmem worker --once --embedder auto  embeds what was stored without a vector" in run.stderr
        assert re.search(r"agentmem worker: embedded [1-9]\d* jobs", run.stderr), run.stderr
        check_snippet_output(run.stdout)
    finally:
        with psycopg.connect(server.db_url(dbname), autocommit=True) as conn:
            conn.execute(f'drop role if exists "{login}"')


def embed(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "AGENTMEM_DATABASE_URL"}
    env.update(env_extra or {})
    return subprocess.run([AGENTMEM, "embed", *args], capture_output=True, text=True, timeout=60, env=env)


def literal(text: str) -> np.ndarray:
    assert text.startswith("[") and text.endswith("]") and " " not in text
    return np.asarray([float(x) for x in text[1:-1].split(",")], dtype=np.float32)


def test_embed_prints_a_vector_literal_with_the_models_prefixes(app_url, app, stub):
    doc = embed("--model", "nomic-embed-text", "--database-url", app_url, "--ollama-host", stub.host,
                "Invoice INV-2291 was charged twice")
    assert doc.returncode == 0, doc.stderr
    assert doc.stderr == ""
    vector = literal(doc.stdout.strip())
    expected = np.asarray(lexical_embedding("search_document: Invoice INV-2291 was charged twice", 768),
                          dtype=np.float32)
    assert np.array_equal(vector, expected)  # every float32 read back exactly
    query = embed("--query", "--model", "nomic-embed-text", "--database-url", app_url, "--ollama-host", stub.host,
                  "charged twice")
    assert stub.embedded_texts[-1] == "search_query: charged twice"
    # what it prints is a vector psql and the server take as they are
    assert app.execute("select vector_dims(%s::text::vector)", (query.stdout.strip(),)).fetchone() == (768,)


def test_embed_without_ollama_says_what_it_used(app_url):
    run = embed("--model", "all-minilm", "--database-url", app_url, "--ollama-host", UNREACHABLE, "a refund")
    assert run.returncode == 0, run.stderr
    assert "no Ollama answered at http://127.0.0.1:9" in run.stderr
    assert "OFFLINE LEXICAL" in run.stderr and "all-minilm's 384 dimensions" in run.stderr
    assert np.array_equal(literal(run.stdout.strip()),
                          np.asarray(lexical_embedding("a refund", 384), dtype=np.float32))
    offline = embed("--offline", "--model", "all-minilm", "--database-url", app_url, "a refund")
    assert offline.stdout == run.stdout and "--offline was given" in offline.stderr


def test_embed_errors_exit_non_zero_with_one_message(app_url):
    unknown = embed("--model", "no-such-model", "--database-url", app_url, "--ollama-host", UNREACHABLE, "x")
    assert unknown.returncode == 1 and "[AM011]" in unknown.stderr and "Traceback" not in unknown.stderr
    assert unknown.stdout == ""
    nodb = embed("--model", "nomic-embed-text", "--ollama-host", UNREACHABLE, "x")
    assert nodb.returncode == 2 and "dimension of nomic-embed-text" in nodb.stderr and nodb.stdout == ""


def test_dev_server_start_prints_the_url_of_its_database_agentmem_and_what_to_run_next(server, tmp_path):
    if server.name != "embedded":
        pytest.skip("the dev server is the embedded PostgreSQL; once is enough")
    from helpers import free_port
    env = dict(os.environ, AGENTMEM_EMBEDDED_PORT=str(free_port()))
    data = ROOT / ".pgdata" / f"dev-{uuid.uuid4().hex[:8]}"  # not in pytest's root-only temporary folders

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([AGENTMEM, *args], capture_output=True, text=True, timeout=120, env=env)

    try:
        first = cli("dev-server", "start", "--data-dir", str(data))
        assert first.returncode == 0, first.stderr
        url = first.stdout.strip()
        assert url.endswith("/agentmem")
        assert f"Next: agentmem migrate --database-url {url}" in first.stderr and "agentmem psql" in first.stderr
        status = cli("status", "--database-url", url)
        assert status.returncode == 3 and "agentmem is not installed in database agentmem" in status.stdout
        assert cli("migrate", "--database-url", url).returncode == 0
        again = cli("dev-server", "start", "--data-dir", str(data))
        assert again.stdout.strip() == url and again.stderr == ""
        assert cli("dev-server", "url").stdout.strip() == url
        assert cli("status", "--database-url", url).returncode == 0
    finally:
        cli("dev-server", "stop", "--data-dir", str(data))
        shutil.rmtree(data, ignore_errors=True)


def test_readme_python_example_runs(app_url, stub, monkeypatch):
    """The driver section's example, as written but for the database's address; then used."""
    code = readme_block("## The Python driver", "python")
    assert "postgresql://my_app_login@db/mydb" in code
    monkeypatch.setenv("OLLAMA_HOST", stub.host)
    namespace: dict = {}
    exec(compile(code.replace("postgresql://my_app_login@db/mydb", app_url), "README.md", "exec"), namespace)
    mem = namespace["mem"]
    try:
        conversation = mem.start_conversation("alice", title="Billing")
        mem.remember(conversation, "user", "Invoice INV-2291 was charged twice")
        hits = mem.recall("alice", "charged twice", k=1)
        assert [h.content for h in hits] == ["Invoice INV-2291 was charged twice"]
        assert "search_document: Invoice INV-2291 was charged twice" in stub.embedded_texts
    finally:
        mem.close()


def test_a_bare_make_lists_the_targets_and_runs_nothing():
    run = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    for target in ("make demo", "make psql", "make test", "make lint", "make migrate", "make status"):
        assert target in run.stdout
    assert "pytest" not in run.stdout and "agentmem" not in run.stderr
    # the targets CI and the README name still do what they did
    for target, command in (("test", "pytest -q tests"), ("demo", "agentmem demo"), ("psql", "agentmem psql")):
        dry = subprocess.run(["make", "--no-print-directory", "-n", "-C", str(ROOT), target],
                             capture_output=True, text=True, timeout=60)
        assert dry.returncode == 0 and command in dry.stdout, (target, dry.stdout, dry.stderr)


def test_a_taken_port_is_one_line_naming_its_variable_and_a_default_one_moves(server):
    """Issue 31, defect 1: another checkout's server on the dev server's port is one line naming
    AGENTMEM_EMBEDDED_PORT (exit 2, nothing initialised); the test server, on its default port, takes a
    free one (conftest passes or_any_free_port unless AGENTMEM_TEST_PORT was set); `make clean` stops
    the test server too."""
    if server.name != "embedded":
        pytest.skip("the dev server is the embedded PostgreSQL; once is enough")
    import socket

    from agentmem_dev import devserver
    data = ROOT / ".pgdata" / f"dev-{uuid.uuid4().hex[:8]}"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = dict(os.environ, AGENTMEM_EMBEDDED_PORT=str(port))
        try:
            for command in (["dev-server", "start"], ["psql"]):
                done = subprocess.run([AGENTMEM, *command, "--data-dir", str(data)], capture_output=True,
                                      text=True, timeout=120, env=env)
                assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
                (line,) = done.stderr.splitlines()
                assert f"port {port} " in line and "AGENTMEM_EMBEDDED_PORT=" in line, line
            assert not (data / "PG_VERSION").exists()
            with pytest.raises(devserver.PortInUse, match="AGENTMEM_TEST_PORT"):
                devserver.start(data, port=port, fast=True, port_variable="AGENTMEM_TEST_PORT")
            url = devserver.start(data, port=port, fast=True, or_any_free_port=True)
            assert f":{port}/" not in url
            with psycopg.connect(url) as conn:
                assert conn.execute("select 1").fetchone() == (1,)
        finally:
            devserver.stop(data)
            shutil.rmtree(data, ignore_errors=True)
    clean = subprocess.run(["make", "--no-print-directory", "-n", "-C", str(ROOT), "clean"],
                           capture_output=True, text=True, timeout=60)
    assert "dev-server stop --data-dir .pgdata/test" in clean.stdout
    assert clean.stdout.index(".pgdata/test") < clean.stdout.index("rm -rf .pgdata")
    for variable in ("AGENTMEM_TEST_PORT", "AGENTMEM_EMBEDDED_PORT"):
        assert variable in (ROOT / "README.md").read_text() and variable in (ROOT / "tests" / "README.md").read_text()


def test_agentmem_psql_on_a_server_that_asks_for_passwords(server, tmp_path):
    """Issue 31, defect 3: on a server that asks for passwords, `agentmem psql --database-url` makes its
    logins with generated passwords kept in the password file (PGPASSFILE), and psql connects; a login
    that exists with a password not known here is one line and exit 2, before "connected"."""
    if server.name != "embedded":
        pytest.skip("a server of its own, on the embedded PostgreSQL")
    from agentmem_dev import devserver

    from helpers import free_port
    data = ROOT / ".pgdata" / f"pw-{uuid.uuid4().hex[:8]}"
    port = free_port()
    try:
        url = devserver.start(data, port=port, fast=True)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("alter role postgres password 'dba-secret'")
            conn.execute("create database agentmem_pw")
            (data / "pg_hba.conf").write_text("host all all 127.0.0.1/32 scram-sha-256\n")
            conn.execute("select pg_reload_conf()")
        admin_url = f"postgresql://postgres:dba-secret@127.0.0.1:{port}/agentmem_pw"
        pgpass = tmp_path / "pgpass"
        env = dict(os.environ, PGPASSFILE=str(pgpass), HOME=str(tmp_path))
        env.pop("PGPASSWORD", None)

        def agentmem_psql(**extra) -> subprocess.CompletedProcess:
            return subprocess.run([AGENTMEM, "psql", "--database-url", admin_url, "--psql", server.bin("psql"),
                                   "--", "-X", "-A", "-t", "-c", "select agentmem.current_tenant()"],
                                  capture_output=True, text=True, timeout=300, env={**env, **extra})

        first = agentmem_psql()
        assert first.returncode == 0 and first.stdout.strip() == "acme", first
        assert "generated password" in first.stderr and str(pgpass) in first.stderr
        lines = pgpass.read_text().splitlines()
        assert [line.split(":")[3] for line in lines] == ["agentmem_app_user", "agentmem_worker_user"]
        assert all(line.startswith(f"127.0.0.1:{port}:agentmem_pw:") for line in lines)
        assert pgpass.stat().st_mode & 0o777 == 0o600
        with psycopg.connect(url.replace("postgresql://postgres@", "postgresql://postgres:dba-secret@")) as conn:
            assert conn.execute("select count(*) from pg_roles where rolname in ('agentmem_app_user', "
                                "'agentmem_worker_user') and rolpassword is null").fetchone() == (0,)
        # again: the logins exist, their passwords are in the file
        again = agentmem_psql()
        assert again.returncode == 0 and again.stdout.strip() == "acme", again
        # a PGPASSWORD given for the DBA is not sent as the application login's
        assert agentmem_psql(PGPASSWORD="dba-secret").stdout.strip() == "acme"
        # another password file: the logins exist, no password is known for them
        lost = agentmem_psql(PGPASSFILE=str(tmp_path / "empty"))
        assert lost.returncode == 2 and lost.stdout == "", lost
        assert "connected" not in lost.stderr and "Traceback" not in lost.stderr
        (line,) = lost.stderr.splitlines()
        assert "agentmem_app_user" in line and "password" in line and "--login" in line
    finally:
        devserver.stop(data)
        shutil.rmtree(data, ignore_errors=True)


def test_psql_md_export_and_import_run_as_pasted(server, dbname, app, admin, tmp_path):
    """Issue 31, defect 11: docs/psql.md's export and import blocks, verbatim, through the server's psql
    as the application login: alice's memory of tenant acme comes back whole in tenant globex, and a
    second import changes nothing."""
    from helpers import start_conversation, store_message, upsert
    conv = start_conversation(app, "alice", title="Billing")
    for text in ("Invoice INV-2291 was charged twice", "a line with a tab\tand \\ a backslash, \"quotes\""):
        store_message(app, conv, text)
    upsert(app, "alice", "diet", "The user is vegetarian")
    heading = "## Export and import from psql"

    def psql(tenant: str, block: int) -> subprocess.CompletedProcess:
        script = tmp_path / f"block{block}.sql"
        script.write_text(readme_block(heading, "sql", doc="docs/psql.md", index=block))
        return subprocess.run([server.bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d",
                               server.db_url(dbname, APP_ROLE), "-f", str(script)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PGOPTIONS=f"-c agentmem.tenant_id={tenant}"))
    exported = psql("acme", 0)
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "alice.jsonl").read_text().count("\n") >= 5
    for _ in range(2):
        imported = psql("globex", 1)
        assert imported.returncode == 0, imported.stderr

    def memory(tenant: str) -> list:
        return admin.execute("select m.content from agentmem.messages as m where m.tenant_id = %s "
                             "and m.user_id = 'alice' order by m.message_index", (tenant,)).fetchall() + \
            admin.execute("select f.fact from agentmem.facts as f where f.tenant_id = %s and f.user_id = 'alice'",
                          (tenant,)).fetchall()
    assert memory("globex") == memory("acme") and len(memory("acme")) == 3


def test_the_readme_creates_the_login_it_grants():
    """Issue 31, defect 8: the install block makes my_app_login before --grant-app-role names it."""
    block = readme_block("**With Python.**", "sh")
    lines = block.splitlines()
    made = next(i for i, line in enumerate(lines) if "create role my_app_login login" in line)
    granted = next(i for i, line in enumerate(lines) if "--grant-app-role my_app_login" in line)
    assert made < granted


def test_pg15_script_keeps_its_apt_changes_scoped():
    """Issue 31, defect 13: scripts/pg15-debian.sh installs only what is missing, never upgrades a
    package for its own sake and lists the upgrades apt needs first (AGENTMEM_PG15_NO_UPGRADE=1 stops
    there), writes nothing into /etc/apt (trixie's source list is a private apt configuration) and
    removes the entry its earlier versions left; its header says all this."""
    script = (ROOT / "scripts" / "pg15-debian.sh").read_text()
    header = script.split("set -euo pipefail")[0]
    for said in ("--no-upgrade", "AGENTMEM_PG15_NO_UPGRADE=1", "nothing is added to /etc/apt", "is removed"):
        assert said in header, said
    installs = [line for line in script.splitlines()
                if re.search(r"apt-get (-\S+ )*install ", line) and "die " not in line]
    assert installs and all("--no-upgrade" in line for line in installs), installs
    assert not re.search(r">>?\s*\"?/etc/apt", script) and "tee /etc/apt" not in script
    assert re.search(r'rm -f "\$OLD_SRC_LIST"', script)
    assert "Dir::Etc::SourceList=$APT_PRIVATE" in script and "Dir::State::Lists=$APT_PRIVATE" in script
    run = subprocess.run(["bash", "-n", str(ROOT / "scripts" / "pg15-debian.sh")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
