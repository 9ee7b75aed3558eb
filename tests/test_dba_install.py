"""A DBA who is not a superuser (CREATEROLE, owner of the database) installs agentmem into a second
database of a cluster whose roles another install created (this server's template install), following
the README's words: each refusal is AM041 naming the one statement a superuser runs, that statement
is enough, and what the DBA must act on (LEAKPROOF, pg_cron) is a warning both installers show.
On PostgreSQL 15 (debian15) and 18 (embedded)."""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from pathlib import Path

import psycopg
import pytest

import agentmem
from agentmem import migrate as m
from conftest import ROOT

LEAKPROOF = "alter function pg_catalog.ts_match_vq(tsvector, tsquery) leakproof;"


def readme_superuser_block() -> str:
    """The README's block for the superuser, as written."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Installing and upgrading"):]
    return re.search(r"```sql\n(.*?)```", section, re.S).group(1)


def paste_superuser_block(server, dbname: str) -> None:
    """The README's block for the superuser, pasted into the server's psql in the database (issue 31,
    defect 8: it names no placeholder; the DBA is the database's owner)."""
    run = subprocess.run([server.bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", server.db_url(dbname)],
                         input=readme_superuser_block(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def statement_of(hint: str) -> str:
    """The one statement a refusal's hint names ('Ask a superuser to run "...", then ...')."""
    found = re.findall(r'run "([^"]+)"', hint)
    assert len(found) == 1, hint
    return found[0]


@pytest.fixture
def dba_database(server):
    """A DBA role (LOGIN CREATEROLE, no superuser) owning a new, empty database; the roles
    agentmem_app and agentmem_owner already exist, made by the template's install."""
    role = "agentmem_dba_" + uuid.uuid4().hex[:8]
    name = "agentmem_dbadb_" + uuid.uuid4().hex[:8]
    with psycopg.connect(server.url, autocommit=True) as conn:
        assert conn.execute("select count(*) from pg_roles where rolname in ('agentmem_app', 'agentmem_owner')"
                            ).fetchone() == (2,)
        conn.execute(f"create role {role} login createrole")
        conn.execute(f"create database {name} owner {role}")
        version = conn.info.server_version
    yield role, name, version
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")
        # the DBA's application login first: the DBA granted it its membership
        for login, in conn.execute("select rolname from pg_roles where rolname like %s "
                                   "order by length(rolname) desc", (role + "%",)).fetchall():
            conn.execute(f"drop role {login}")


class Installer:
    """One install attempt as the DBA, by one of the two paths: (sqlstate, hint, warnings)."""

    def __init__(self, server, url: str, path: str, tmp_path):
        self.server, self.url, self.path = server, url, path
        self.script = tmp_path / "agentmem-install.psql"
        self.script.write_text(m.render_psql(m.Source.load(ROOT)))

    def __call__(self) -> tuple[str | None, str | None, list[str]]:
        if self.path == "python":
            migrator = m.Migrator(self.url, m.Source.load(ROOT))
            try:
                migrator.migrate()
            except agentmem.AgentmemError as exc:
                return exc.sqlstate, exc.hint, migrator.warnings
            return None, None, migrator.warnings
        run = subprocess.run([self.server.bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose",
                              "-d", self.url, "-f", str(self.script)], capture_output=True, text=True, timeout=300)
        warnings = re.findall(r"WARNING:  (?:01000: )?(.*)", run.stderr)
        if run.returncode == 0:
            assert "ERROR" not in run.stderr
            return None, None, warnings
        error = re.search(r"ERROR:  (\w{5}): (.*)", run.stderr)
        hint = re.search(r"HINT:  (.*)", run.stderr[run.stderr.index("ERROR:"):])
        return error.group(1), hint.group(1) if hint else None, warnings


def superuser(server, dbname: str, statement: str) -> None:
    with psycopg.connect(server.db_url(dbname), autocommit=True) as conn:
        conn.execute(statement)


def nothing_installed(server, dbname: str) -> bool:
    with psycopg.connect(server.db_url(dbname)) as conn:
        return conn.execute("select to_regnamespace('agentmem') is null and to_regnamespace('agentmem_private') is null"
                            ).fetchone()[0]


@pytest.mark.parametrize("path", ["python", "psql"])
def test_a_non_superuser_dba_installs_into_a_second_database_refused_step_by_step(server, dba_database, path,
                                                                                 tmp_path):
    role, name, version = dba_database
    install = Installer(server, server.db_url(name, role), path, tmp_path)
    readme = readme_superuser_block()
    # 1. pgvector is not a trusted extension: refused before anything is made
    sqlstate, hint, _ = install()
    assert sqlstate == "AM041", hint
    assert statement_of(hint) == "create extension vector;"
    assert nothing_installed(server, name)
    superuser(server, name, statement_of(hint))
    # 2. PostgreSQL 16 and later: the roles another install made are not this DBA's to manage
    if version >= 160000:
        sqlstate, hint, _ = install()
        assert sqlstate == "AM041", hint
        statement = statement_of(hint)
        assert statement == f"grant agentmem_app, agentmem_owner, agentmem_queue, agentmem_worker to {role} with admin option;"
        assert "grant agentmem_app, agentmem_owner, agentmem_queue, agentmem_worker to %I " in readme
        assert nothing_installed(server, name)
        superuser(server, name, statement)  # the README's block runs it: test_following_the_readme_first...
    # 3. installed; the LEAKPROOF mark only a superuser makes is a warning naming its statement
    sqlstate, hint, warnings = install()
    assert sqlstate is None, hint
    leak = [w for w in warnings if "full-text search will not use its GIN index" in w]
    assert leak and LEAKPROOF in leak[0] and LEAKPROOF in readme
    # pg_cron: on a server without it, said; where it is loaded, its settings are hidden from a role
    # that is not a superuser, which is then told nothing
    assert any("pg_cron is not loaded" in w for w in warnings) == (server.name != "debian15")
    with psycopg.connect(server.db_url(name, role)) as conn:
        owners = conn.execute("select distinct pg_get_userbyid(proowner) from pg_proc "
                              "where pronamespace = 'agentmem'::regnamespace and prosecdef").fetchall()
        assert sorted(owners) == [("agentmem_owner",), ("agentmem_queue",)]
    # 4. the DBA makes the application's login, as the README says
    with psycopg.connect(server.db_url(name, role), autocommit=True) as conn:
        conn.execute(f"create role {role}_app login")
        conn.execute("select agentmem.grant_app_role(role_name => %s)", (f"{role}_app",))
        conn.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'acme')", (f"{role}_app",))
    with psycopg.connect(server.db_url(name, f"{role}_app"), autocommit=True) as app:
        app.execute("select agentmem.set_tenant(tenant_id => 'acme')")
        assert app.execute("select agentmem.start_conversation(user_id => 'alice')").fetchone()[0] is not None
    # 5. the superuser's LEAKPROOF statement from the warning: the next upgrade has nothing to say of it
    superuser(server, name, LEAKPROOF)
    sqlstate, _, warnings = install()
    assert sqlstate is None and not any("GIN index" in w for w in warnings)


def test_grant_app_role_refused_is_am041_naming_the_statement(server, dba_database):
    """A DBA who may no longer grant agentmem_app is told the one statement that lets it."""
    role, name, version = dba_database
    superuser(server, name, "create extension vector")
    paste_superuser_block(server, name)
    m.Migrator(server.db_url(name, role), m.Source.load(ROOT)).migrate()
    with psycopg.connect(server.db_url(name), autocommit=True) as conn:
        conn.execute(f"create role {role}_app login")
        if version >= 160000:
            conn.execute(f"revoke agentmem_app from {role}")  # the README's grant, ADMIN OPTION with it
        else:
            conn.execute(f"alter role {role} nocreaterole")
    with psycopg.connect(server.db_url(name, role), autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as info:
            conn.execute("select agentmem.grant_app_role(role_name => %s)", (f"{role}_app",))
        assert info.value.sqlstate == "AM041"
        statement = statement_of(info.value.diag.message_hint)
        expected = (f"grant agentmem_app to {role} with admin option;" if version >= 160000
                    else f"alter role {role} createrole;")
        assert statement == expected
        assert conn.execute("select pg_has_role(%s, 'agentmem_app', 'member')", (f"{role}_app",)).fetchone() == (False,)
    superuser(server, name, statement)
    with psycopg.connect(server.db_url(name, role), autocommit=True) as conn:
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(f"{d.severity_nonlocalized}: {d.message_primary} {d.message_hint}"))
        conn.execute("select agentmem.grant_app_role(role_name => %s)", (f"{role}_app",))
        assert conn.execute("select pg_has_role(%s, 'agentmem_app', 'member')", (f"{role}_app",)).fetchone() == (True,)
        # the login is the superuser's: on PostgreSQL 16+ the DBA may not alter it, and is told the statement
        timeout_warnings = [n for n in notices if n.startswith("WARNING") and "statement_timeout" in n]
        if version >= 160000:
            assert timeout_warnings and f"alter role {role}_app set statement_timeout = '30s';" in timeout_warnings[0]
        else:
            assert timeout_warnings == []


@pytest.mark.parametrize("path", ["python", "psql"])
def test_following_the_readme_first_the_dba_installs_without_a_refusal_or_a_leakproof_warning(server, dba_database,
                                                                                            path, tmp_path):
    role, name, version = dba_database
    superuser(server, name, "create extension if not exists vector")
    paste_superuser_block(server, name)
    sqlstate, hint, warnings = Installer(server, server.db_url(name, role), path, tmp_path)()
    assert sqlstate is None, hint
    assert not any("GIN index" in w for w in warnings)


@pytest.fixture
def own_cluster(server):
    """A cluster of this test's own, where agentmem's roles do not exist yet (the embedded
    PostgreSQL 18; the shared servers' roles are made already)."""
    if server.name != "embedded":
        pytest.skip("a private cluster is an embedded server")
    from agentmem_dev import devserver
    from helpers import free_port
    # under .pgdata/ as the test server's data: pytest makes its own temporary folders private to
    # root at every session start, and the server runs as another user when the tests run as root
    data = ROOT / ".pgdata" / f"cluster-{uuid.uuid4().hex[:8]}"
    url = devserver.start(data, port=free_port(), fast=True)
    try:
        yield url
    finally:
        devserver.stop(data)
        shutil.rmtree(data, ignore_errors=True)


def test_in_a_cluster_without_the_roles_a_createrole_dba_installs_then_a_second_dba_follows_the_readme(
        own_cluster, tmp_path):
    from conftest import Server
    from agentmem_dev import devserver
    cluster = Server("embedded", own_cluster, Path(devserver.bin_path("psql")).parent, False)
    with psycopg.connect(own_cluster, autocommit=True) as conn:
        version = conn.info.server_version
        for dba in ("dba_one", "dba_two", "dba_weak"):
            conn.execute(f"create role {dba} login" + ("" if dba == "dba_weak" else " createrole"))
            conn.execute(f"create database {dba}_db owner {dba}")
    # without CREATEROLE, where the roles are still to be made: the one statement
    superuser(cluster, "dba_weak_db", "create extension vector")
    sqlstate, hint, _ = Installer(cluster, cluster.db_url("dba_weak_db", "dba_weak"), "psql", tmp_path)()
    assert sqlstate == "AM041" and statement_of(hint) == "alter role dba_weak createrole;"
    assert nothing_installed(cluster, "dba_weak_db")
    # the first DBA: the README's statements for a cluster without the roles, then installs, making them
    paste_superuser_block(cluster, "dba_one_db")
    sqlstate, hint, warnings = Installer(cluster, cluster.db_url("dba_one_db", "dba_one"), "python", tmp_path)()
    assert sqlstate is None, hint
    assert not any("GIN index" in w for w in warnings)
    # the second DBA, in another database: the roles are the first DBA's; the README's statements
    paste_superuser_block(cluster, "dba_two_db")
    sqlstate, hint, warnings = Installer(cluster, cluster.db_url("dba_two_db", "dba_two"), "psql", tmp_path)()
    assert sqlstate is None, hint
    with psycopg.connect(cluster.db_url("dba_two_db", "dba_two"), autocommit=True) as conn:
        conn.execute("create role dba_two_app login")
        conn.execute("select agentmem.grant_app_role(role_name => 'dba_two_app')")
        conn.execute("select agentmem.grant_tenant(role_name => 'dba_two_app', tenant_id => 'acme')")
    with psycopg.connect(cluster.db_url("dba_two_db", "dba_two_app"), autocommit=True) as app:
        app.execute("select agentmem.set_tenant(tenant_id => 'acme')")
        assert app.execute("select agentmem.start_conversation(user_id => 'alice')").fetchone()[0] is not None


def test_a_non_superuser_dba_is_told_what_to_ask_a_superuser_for(server, dba_database):
    """Issue 31, defect 5: a DBA who is not a superuser, with no tenant set, reading the views across
    tenants (health, retention_health) or scheduling retention hears AM041 and the one statement a
    superuser runs, not AM001 or a raw 42501 of pg_cron's settings; with a tenant set the views show
    that tenant; once the superuser has run the statement they show every tenant."""
    role, name, version = dba_database
    superuser(server, name, "create extension if not exists vector")
    paste_superuser_block(server, name)
    m.Migrator(server.db_url(name, role), m.Source.load(ROOT)).migrate()
    with psycopg.connect(server.db_url(name), autocommit=True) as conn:  # a job run in two tenants
        for tenant in ("acme", "globex"):
            conn.execute("insert into agentmem.job_runs (tenant_id, job, started_at, error) "
                         "values (%s, 'retention', now(), %s)", (tenant, f"boom in {tenant}"))
    with psycopg.connect(server.db_url(name, role), autocommit=True) as dba:
        for query, what in (("select * from agentmem.health", "agentmem.health"),
                            ("select * from agentmem.retention_health", "agentmem.retention_health")):
            with pytest.raises(psycopg.Error) as info:
                dba.execute(query)
            assert info.value.sqlstate == "AM041" and what in info.value.diag.message_primary
            assert statement_of(info.value.diag.message_hint) == f"alter role {role} bypassrls;"
        with pytest.raises(psycopg.Error) as info:
            dba.execute("select agentmem.schedule_retention()")
        assert info.value.sqlstate == "AM041"
        assert statement_of(info.value.diag.message_hint) == f"alter role {role} bypassrls;"
        # with a tenant: that tenant's rows, and pg_cron's state as a note, not an error
        dba.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'acme')", (role,))
        dba.execute("select agentmem.set_tenant(tenant_id => 'acme')")
        health = dba.execute("select job, last_error from agentmem.health where job = 'retention'").fetchall()
        assert health == [("retention", "boom in acme")]
        note, status = dba.execute("select cron_note, status from agentmem.retention_health").fetchone()
        assert status == "failing" and note
        if server.name == "debian15":  # pg_cron is loaded, in another database, its settings hidden
            assert f'grant pg_read_all_settings to {role};' in note
        else:
            assert "pg_cron is not available" in note
    superuser(server, name, f"alter role {role} bypassrls")
    with psycopg.connect(server.db_url(name, role), autocommit=True) as dba:
        errors = dba.execute("select last_error from agentmem.health where job = 'retention'").fetchone()
        assert errors[0].startswith("boom in")
        assert dba.execute("select count(*) from agentmem.retention_health").fetchone() == (1,)
        with pytest.raises(psycopg.Error) as info:
            dba.execute("select agentmem.schedule_retention()")
        if server.name == "debian15":
            assert info.value.sqlstate == "AM041"
            assert statement_of(info.value.diag.message_hint) == f"grant pg_read_all_settings to {role};"
        else:
            assert info.value.sqlstate == "AM050"
