"""The migration guarantees: ledger, lock, checksums, newer-database refusal,
all-or-nothing migrations, prerequisites, and psql path == Python path."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

import agentmem
from agentmem import migrate as m
from agentmem.cli import main as cli
from conftest import ROOT
from helpers import count, run_threads, scratch_database


@pytest.fixture
def empty_db(server):
    """The URL of a database with nothing in it (not cloned from the migrated template)."""
    for name in scratch_database(server, "agentmem_empty_"):
        yield server.db_url(name)


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A copy of the checkout's SQL, for a DBA testing a change with --source."""
    for folder in ("migrations", "sql"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    return tmp_path


def ledger(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute("select version, name, sha256, applied_by_version, applied_via "
                            "from agentmem.schema_migrations order by version").fetchall()


def test_fresh_install_records_each_migration_with_checksum_and_version(empty_db):
    source = m.Source.load(ROOT)
    applied = m.Migrator(empty_db, source).migrate()
    assert applied == [f.path.name for f in source.migrations]
    assert ledger(empty_db) == [(f.number, f.name, f.sha256, agentmem.__version__, "python")
                                for f in source.migrations]


def policies(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute("select oid, polrelid::regclass::text from pg_policy order by 1").fetchall()


def test_rerun_is_a_noop(empty_db):
    m.Migrator(empty_db).migrate()
    before, before_policies = ledger(empty_db), policies(empty_db)
    assert m.Migrator(empty_db).migrate() == []
    assert ledger(empty_db) == before
    # the row-security policies are left alone (no drop and re-create, no table lock) ...
    assert policies(empty_db) == before_policies and len(before_policies) >= 13
    # ... unless one differs from what it should be
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute("alter policy tenant_isolation on agentmem.facts using (true)")
    m.Migrator(empty_db).migrate()
    after = policies(empty_db)
    assert len(after) == len(before_policies)
    assert [r for r in after if r[1] == "agentmem.facts"] != [r for r in before_policies if r[1] == "agentmem.facts"]
    with psycopg.connect(empty_db) as conn:
        assert conn.execute("select qual from pg_policies where tablename = 'facts'").fetchone() == (
            "(tenant_id = ( SELECT agentmem.current_tenant() AS current_tenant))",)


def test_eight_concurrent_migrators_apply_each_migration_once(empty_db):
    results, errors = [], []

    def run():
        try:
            results.append(m.Migrator(empty_db).migrate())
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    run_threads(run, (() for _ in range(8)))
    assert errors == []
    names = [f.path.name for f in m.Source.load(ROOT).migrations]
    # exactly one migrator applied everything; the seven others found nothing to do
    assert sorted(results, key=len) == [[]] * 7 + [names]
    assert [row[0] for row in ledger(empty_db)] == list(range(1, len(names) + 1))


def test_changed_migration_stops_the_run_naming_file_and_both_checksums(empty_db, checkout):
    m.Migrator(empty_db, m.Source.load(checkout)).migrate()
    path = checkout / "migrations" / "0001_foundation.sql"
    old = m.Source.load(checkout).migrations[0].sha256
    path.write_text(path.read_text() + "\n-- an innocent-looking edit\n")
    new = m.Source.load(checkout).migrations[0].sha256
    with pytest.raises(agentmem.ChecksumMismatch) as info:
        m.Migrator(empty_db, m.Source.load(checkout)).migrate()
    text = str(info.value)
    assert "0001_foundation.sql" in text and old in text and new in text
    assert [r.state for r in m.Migrator(empty_db, m.Source.load(checkout)).status()][0] == "changed"


def test_database_migrated_by_newer_code_is_refused(empty_db, checkout):
    m.Migrator(empty_db).migrate()
    with psycopg.connect(empty_db) as conn:
        conn.execute("insert into agentmem.schema_migrations values "
                     "(9999, 'from_the_future', 'x', '99.0.0', 'python')")
    with pytest.raises(agentmem.DatabaseNewer, match="99.0.0"):
        m.Migrator(empty_db).migrate()
    assert "unknown" in [r.state for r in m.Migrator(empty_db).status()]


def test_newer_version_number_alone_is_refused(empty_db):
    m.Migrator(empty_db).migrate()
    with psycopg.connect(empty_db) as conn:
        conn.execute("update agentmem.schema_migrations set applied_by_version = '0.99.0' where version = 1")
    with pytest.raises(agentmem.DatabaseNewer):
        m.Migrator(empty_db).migrate()


def test_migration_failing_half_way_leaves_no_object_and_no_ledger_row(empty_db, checkout):
    n = len(m.Source.load(checkout).migrations) + 1
    (checkout / "migrations" / f"{n:04d}_broken.sql").write_text(
        "create table agentmem.half_way (id int);\n"
        "insert into agentmem.half_way values (1);\n"
        "select 1 / 0;\n")
    with pytest.raises(agentmem.MigrationError, match=f"{n:04d}_broken.sql") as info:
        m.Migrator(empty_db, m.Source.load(checkout)).migrate()
    assert info.value.sqlstate == "22012"
    with psycopg.connect(empty_db) as conn:
        assert conn.execute("select to_regclass('agentmem.half_way')").fetchone()[0] is None
    assert [r[0] for r in ledger(empty_db)] == list(range(1, n))
    states = {r.version: r.state for r in m.Migrator(empty_db, m.Source.load(checkout)).status()}
    assert states[n] == "pending"


def test_badly_named_or_gapped_migrations_are_refused(checkout):
    (checkout / "migrations" / "0042_gap.sql").write_text("select 1;")
    with pytest.raises(agentmem.MigrationError, match="without gaps"):
        m.Source.load(checkout)
    (checkout / "migrations" / "0042_gap.sql").rename(checkout / "migrations" / "Oops.sql")
    with pytest.raises(agentmem.MigrationError, match="badly named"):
        m.Source.load(checkout)



def test_a_file_of_sql_a_frozen_migration_names_exists_or_the_readme_says_where_it_went():
    """Frozen headers cannot be corrected: migrations/README.md's table gives the reader the file."""
    import re
    readme = (ROOT / "migrations" / "README.md").read_text()
    table = readme.split("## Where what a frozen header names lives")[1].split("\n## ")[0]
    rows = {(r[0], r[1]): r[2] for r in
            re.findall(r"^\| `(\d{4}_\w+\.sql)` \| [^|]*`(sql/[\w.]+)`[^|]* \| `(sql/[\w.]+)`", table, re.M)}
    assert rows, "the table has rows"
    for path in sorted((ROOT / "migrations").glob("*.sql")):
        for named in set(re.findall(r"sql/\d\d_\w+\.sql", path.read_text())):
            if not (ROOT / named).exists():
                assert (path.name, named) in rows, f"{path.name} names {named}, which does not exist: " \
                    "add a row to migrations/README.md"
    for (migration, named), there in rows.items():
        assert named in (ROOT / "migrations" / migration).read_text(), (migration, named)
        assert (ROOT / there).exists(), there

def test_status_lists_pending_then_applied(empty_db, capsys):
    # a database without agentmem: said so (exit code 3), not ten migrations pending as if an install failed
    assert cli(["status", "--database-url", empty_db]) == 3
    out = capsys.readouterr().out
    assert "agentmem is not installed in database" in out and "agentmem migrate --database-url" in out
    assert "pending" not in out
    m.Migrator(empty_db, m.Source(ROOT, m.Source.load(ROOT).migrations[:2], ())).migrate()
    assert cli(["status", "--database-url", empty_db]) == 0
    assert "pending" in capsys.readouterr().out
    assert cli(["migrate", "--database-url", empty_db]) == 0
    assert "applied" in capsys.readouterr().out
    cli(["status", "--database-url", empty_db])
    out = capsys.readouterr().out
    assert "pending" not in out and "0001_foundation" in out


def test_cli_reports_errors_with_sqlstate_and_exit_code(empty_db, capsys):
    m.Migrator(empty_db).migrate()
    with psycopg.connect(empty_db) as conn:
        conn.execute("update agentmem.schema_migrations set sha256 = 'tampered' where version = 1")
    assert cli(["migrate", "--database-url", empty_db]) == 1
    assert "tampered" in capsys.readouterr().err


# -- prerequisites -----------------------------------------------------------

def test_role_not_allowed_to_create_vector_gets_a_hint(empty_db, server):
    role = "agentmem_weak_" + uuid.uuid4().hex[:6]
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute(f"create role {role} login")
        conn.execute(f"grant create on database {empty_db.rsplit('/', 1)[1]} to {role}")
    try:
        with pytest.raises(agentmem.InsufficientPrivilege) as info:
            m.Migrator(server.db_url(empty_db.rsplit('/', 1)[1], role)).migrate()
        assert info.value.sqlstate == "AM041"
        assert "create extension vector" in info.value.hint
        with psycopg.connect(empty_db) as conn:  # nothing was left behind
            assert conn.execute("select to_regnamespace('agentmem')").fetchone()[0] is None
    finally:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute(f"drop database if exists \"{empty_db.rsplit('/', 1)[1]}\" with (force)")
            conn.execute(f"drop role {role}")


def test_a_non_superuser_dba_installs_once_made_a_member_of_agentmem_owner(empty_db, server):
    """A DBA who is not a superuser (a managed service's admin): the roles are the cluster's,
    so a second database's DBA must be made a member of agentmem_owner, and is told so."""
    role = "agentmem_dba_" + uuid.uuid4().hex[:6]
    name = empty_db.rsplit("/", 1)[1]
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute("create extension vector")
        conn.execute("select 1 from pg_roles where rolname = 'agentmem_owner'")
        conn.execute(f"create role {role} login createrole")
        conn.execute(f"grant create on database {name} to {role}")
        conn.execute(f"grant agentmem_app to {role} with admin option")
    dba_url = server.db_url(name, role)
    with psycopg.connect(empty_db) as conn:
        version = conn.info.server_version
    try:
        if version >= 160000:  # CREATEROLE no longer grants membership in roles it did not create
            with pytest.raises(agentmem.InsufficientPrivilege) as info:
                m.Migrator(dba_url).migrate()
            statement = f"grant agentmem_app, agentmem_owner, agentmem_queue, agentmem_worker to {role} with admin option;"
            assert info.value.sqlstate == "AM041" and statement in info.value.hint
            with psycopg.connect(empty_db) as conn:  # refused before anything was made
                assert conn.execute("select to_regnamespace('agentmem')").fetchone()[0] is None
            with psycopg.connect(empty_db, autocommit=True) as conn:
                conn.execute(statement)
        m.Migrator(dba_url).migrate()
        with psycopg.connect(dba_url, autocommit=True) as conn:
            owners = conn.execute("select distinct pg_get_userbyid(proowner) from pg_proc "
                                  "where pronamespace = 'agentmem'::regnamespace and prosecdef order by 1").fetchall()
            assert owners == [("agentmem_owner",), ("agentmem_queue",)]
            conn.execute(f"create role {role}_app login")
            conn.execute("select agentmem.grant_app_role(role_name => %s)", (f"{role}_app",))
            conn.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'acme')", (f"{role}_app",))
        with psycopg.connect(server.db_url(name, f"{role}_app"), autocommit=True) as app:
            app.execute("select agentmem.set_tenant(tenant_id => 'acme')")
            cid = app.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
            assert app.execute("select count(*) from agentmem.recent_messages(conversation_id => %s)",
                               (cid,)).fetchone() == (0,)
    finally:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')
            for r in (f"{role}_app", role):
                conn.execute(f"drop role if exists {r}")


@pytest.mark.parametrize("replace, expected", [
    # the same preflight, pointed at an extension this server does not have
    ("'vector'", "pgvector is not installed"),
    # and at a minimum server version this server does not meet
    ("< 150000", "needs PostgreSQL 15 or newer"),
])
def test_missing_prerequisites_raise_am040_with_hint(empty_db, replace, expected):
    preflight = m.BOOTSTRAP_SQL.split("create schema")[0]
    doctored = preflight.replace(replace, "'agentmem_no_such_extension'" if replace == "'vector'"
                                 else "< 9990000")
    with psycopg.connect(empty_db, autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as info:
            conn.execute(doctored)
    err = agentmem.errors.translate(info.value)
    assert isinstance(err, agentmem.PrerequisiteMissing) and err.sqlstate == "AM040"
    assert expected in str(err) and err.hint


# -- the psql path -----------------------------------------------------------

def schema_dump(server, url: str) -> str:
    out = subprocess.run([server.bin("pg_dump"), "--schema-only", "--no-owner", "-d", url],
                         check=True, capture_output=True, text=True).stdout
    return "\n".join(line for line in out.splitlines()
                     if not line.startswith(("-- Dumped", "\\restrict", "\\unrestrict")))


def test_psql_script_is_generated_by_the_cli_and_marked_generated(tmp_path):
    out = tmp_path / "agentmem-install.psql"
    subprocess.run([sys.executable, "-m", "agentmem.cli", "psql-script", "--source", str(ROOT), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    text = out.read_text()
    assert text == m.render_psql(m.Source.load(ROOT))
    assert "GENERATED" in text.splitlines()[0] and "do not edit" in text.splitlines()[1].lower()
    assert not (ROOT / "sql" / "install.psql").exists(), "the generated script does not live among the sources"


def test_psql_path_and_python_path_give_identical_schemas(server, empty_db, tmp_path):
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute('create database "%s"' % (empty_db.rsplit("/", 1)[1] + "_psql"))
    psql_url = empty_db + "_psql"
    try:
        m.Migrator(empty_db).migrate()
        script = tmp_path / "agentmem-install.psql"
        script.write_text(m.render_psql(m.Source.load(ROOT)))
        runs = [subprocess.run([server.bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", psql_url,
                                "-f", str(script)], check=True, capture_output=True, text=True)
                for _ in range(2)]  # install, then a no-op upgrade
        # each ends with its verdict (issue 31, defect 9)
        source = m.Source.load(ROOT)
        n, last = len(source.migrations), source.migrations[-1].number
        for run, applied in zip(runs, (n, 0)):
            assert run.stdout.splitlines()[-1] == (
                f"agentmem {m.__version__} in database {psql_url.rsplit('/', 1)[1]}: applied {applied} migration(s) "
                f"now, {n} in all (the last {last}); definitions re-applied ({len(source.definitions)} files)")
        assert schema_dump(server, psql_url) == schema_dump(server, empty_db)
        assert [r[:4] for r in ledger(psql_url)] == [r[:4] for r in ledger(empty_db)]
        assert {r[4] for r in ledger(psql_url)} == {"psql"}
        # and the Python path accepts a psql-installed database as up to date
        assert m.Migrator(psql_url).migrate() == []
    finally:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute('drop database if exists "%s" with (force)' % psql_url.rsplit("/", 1)[1])


def test_psql_script_refuses_a_changed_migration(server, empty_db, checkout):
    m.Migrator(empty_db, m.Source.load(checkout)).migrate()
    path = checkout / "migrations" / "0001_foundation.sql"
    path.write_text(path.read_text() + "\n-- edited\n")
    script = tmp = checkout / "install.psql"
    tmp.write_text(m.render_psql(m.Source.load(checkout)))
    run = subprocess.run([server.bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", empty_db,
                          "-f", str(script)], capture_output=True, text=True)
    assert run.returncode != 0
    assert "0001_foundation.sql changed after it was applied" in run.stderr


def test_wheel_ships_the_sql_from_the_checkout(tmp_path):
    import sys
    import zipfile
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path), str(ROOT / "python")], check=True, capture_output=True)
    wheel = next(tmp_path.glob("pg_agentmem-*.whl"))  # the distribution pg-agentmem
    names = set(zipfile.ZipFile(wheel).namelist())
    source = m.Source.load(ROOT)
    for f in source.migrations:
        assert f"agentmem/_sql/migrations/{f.path.name}" in names
    for f in source.definitions:
        assert f"agentmem/_sql/sql/{f.path.name}" in names


def test_migrate_can_grant_the_app_role_to_an_existing_login(empty_db, capsys):
    role = "agentmem_cli_app_" + uuid.uuid4().hex[:6]
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute(f"create role {role} login")
    try:
        assert cli(["migrate", "--database-url", empty_db, "--grant-app-role", role]) == 0
        with psycopg.connect(empty_db) as conn:
            assert conn.execute("select pg_has_role(%s, 'agentmem_app', 'member')", (role,)).fetchone()[0]
        assert cli(["migrate", "--database-url", empty_db, "--grant-app-role", "no_such_role_q"]) == 1
        assert "[AM030]" in capsys.readouterr().err
    finally:
        with psycopg.connect(empty_db, autocommit=True) as conn:
            conn.execute(f"drop role {role}")


# -- upgrades -----------------------------------------------------------------

# The last landed release of each schema generation: a database installed by it
# must upgrade to exactly the schema a fresh install gives.
RELEASES = {"0.1.0 (migrations 0001-0005)": "7eb191d"}


def release_source(rev: str, dest: Path) -> m.Source:
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "migrations", "sql"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return m.Source.load(dest)


@pytest.mark.parametrize("rev", list(RELEASES.values()), ids=list(RELEASES))
def test_upgrade_from_a_release_equals_a_fresh_install(server, empty_db, tmp_path, rev):
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute('create database "%s"' % (empty_db.rsplit("/", 1)[1] + "_old"))
    old_url = empty_db + "_old"
    try:
        m.Migrator(old_url, release_source(rev, tmp_path / "old")).migrate()
        with psycopg.connect(old_url, autocommit=True) as conn:  # data written by the old release survives
            conn.execute("select agentmem.set_tenant(tenant_id => 'acme')")
            conn.execute("select agentmem.start_conversation(user_id => 'u1', title => 'kept')")
        assert m.Migrator(old_url).migrate()  # the new migrations apply
        m.Migrator(empty_db).migrate()
        with psycopg.connect(old_url, autocommit=True) as conn:
            # An upgrade keeps any login acting as any tenant, as before (a new installation binds
            # tenants to login roles); the DBA turns binding on with one call.
            assert conn.execute("select agentmem.tenant_binding_mode()").fetchone() == ("none",)
            conn.execute("select agentmem.set_tenant_binding(mode => 'role')")
        with psycopg.connect(empty_db, autocommit=True) as conn:
            assert conn.execute("select agentmem.tenant_binding_mode()").fetchone() == ("role",)
        assert schema_dump(server, old_url) == schema_dump(server, empty_db)
        with psycopg.connect(old_url, autocommit=True) as conn:
            assert conn.execute("select count(*) from agentmem.conversations").fetchone()[0] == 1
            # nothing is left in the public schema under an internal name
            assert conn.execute("select count(*) from pg_proc where pronamespace = 'agentmem'::regnamespace "
                                "and proname like '\\_%'").fetchone()[0] == 0
    finally:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute('drop database if exists "%s" with (force)' % old_url.rsplit("/", 1)[1])


def test_the_migration_brings_existing_rows_forward(admin):
    # every message and embedding has its time; a stored embedding's is its message's
    assert count(admin, "messages", "occurred_at is null") == 0
    assert admin.execute("select count(*) from agentmem.message_embeddings as e join agentmem.messages as m "
                         "using (tenant_id, message_id) where e.occurred_at <> m.occurred_at").fetchone()[0] == 0


def test_0016_keys_tenant_grants_by_the_role_and_drops_those_of_dropped_roles(server, empty_db, tmp_path):
    """Grants kept by role name (0012 to 0014) move to the role's OID; the grants of a role that no longer
    exists are removed, so a role created later under its name does not inherit them. (A role dropped and
    created again before the upgrade cannot be told from the old one: the names were all there was.)"""
    with psycopg.connect(server.url, autocommit=True) as conn:
        for role in ("mig16_kept", "mig16_gone"):
            conn.execute(f"drop role if exists {role}")
            conn.execute(f"create role {role} login")
    try:
        m.Migrator(empty_db, release_source("37d8160", tmp_path / "old")).migrate()  # through 0014
        with psycopg.connect(empty_db, autocommit=True) as conn:
            for role in ("mig16_kept", "mig16_gone"):
                conn.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'acme')", (role,))
            conn.execute("drop role mig16_gone")
        assert m.Migrator(empty_db).migrate()
        with psycopg.connect(empty_db, autocommit=True) as conn:
            assert conn.execute("select g.role_name::text, g.role_oid = r.oid from agentmem.tenant_grants as g "
                                "join pg_roles as r on r.rolname = g.role_name").fetchall() == [("mig16_kept", True)]
            conn.execute("select agentmem.set_tenant_binding(mode => 'role')")
            conn.execute("create role mig16_gone login")  # a new role under the old name
            conn.execute("select agentmem.grant_app_role(role_name => 'mig16_gone')")
        with psycopg.connect(server.db_url(empty_db.rsplit("/", 1)[1], "mig16_gone"), autocommit=True) as conn:
            with pytest.raises(psycopg.Error) as info:
                conn.execute("select agentmem.set_tenant(tenant_id => 'acme')")
            assert info.value.sqlstate == "AM041"
    finally:
        with psycopg.connect(server.url, autocommit=True) as conn:
            for role in ("mig16_kept", "mig16_gone"):
                conn.execute(f"drop role if exists {role}")
