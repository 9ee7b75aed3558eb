"""``agentmem psql`` and ``agentmem dev-server``: from nothing to a psql prompt on a migrated database.

``agentmem psql`` starts the embedded dev server if needed (or takes ``--database-url`` of a server
you administer), creates the database ``agentmem`` there, migrates it, makes an application login
and opens the server's own psql as that login with a tenant set. The psql session finds
``agentmem`` on its PATH, so that ``\\set vec `agentmem embed --model nomic-embed-text 'some text'```
works in it (``agentmem embed`` is a runtime command, in ``agentmem.cli``).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

DATABASE = "agentmem"          # the dev server's database that has agentmem
APP_LOGIN = "agentmem_app_user"  # the application login, as in docker-compose.yml
WORKER_LOGIN = "agentmem_worker_user"  # the embedding worker's login (role agentmem_worker)
TENANT = "acme"


def with_database(url: str, dbname: str, user: str | None = None) -> str:
    """The same server's URL for another database (and login)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if user:
        netloc = user + "@" + netloc.split("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, "/" + dbname, parts.query, parts.fragment))


def ensure_database(server_url: str, dbname: str = DATABASE) -> str:
    """Create the database if it does not exist; its URL (same login)."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        if conn.execute("select from pg_catalog.pg_database where datname = %s", (dbname,)).fetchone() is None:
            try:
                conn.execute(psycopg.sql.SQL("create database {}").format(psycopg.sql.Identifier(dbname)))
            except psycopg.errors.DuplicateDatabase:  # made meanwhile by another start
                pass
    return with_database(server_url, dbname)


def installed(url: str) -> bool:
    """Whether agentmem's ledger exists in this database."""
    with psycopg.connect(url) as conn:
        return conn.execute("select pg_catalog.to_regclass('agentmem.schema_migrations') is not null").fetchone()[0]


def dev_server_start(data_dir: Path, quiet: bool = False) -> int:
    """`agentmem dev-server start`: the URL of the dev server's database agentmem on stdout;
    on stderr, what to run next when agentmem is not installed there yet."""
    from . import devserver
    url = ensure_database(devserver.start(data_dir))
    print(url)
    if not quiet and not installed(url):
        print(f"agentmem is not installed in database {DATABASE} yet. Next: agentmem migrate --database-url {url}\n"
              "  or: agentmem psql (migrates it, then opens psql there as an application login)", file=sys.stderr)
    return 0


def dev_server_url() -> str:
    from . import devserver
    return devserver.url(dbname=DATABASE)


def _create_login(conn: psycopg.Connection, login: str) -> None:
    """Create the login role (no password, no superuser) unless it exists; a concurrent creator wins."""
    if conn.execute("select from pg_catalog.pg_roles where rolname = %s", (login,)).fetchone() is None:
        try:
            conn.execute(psycopg.sql.SQL("create role {} login").format(psycopg.sql.Identifier(login)))
        except psycopg.errors.DuplicateObject:
            pass


def prepare(admin_url: str, login: str = APP_LOGIN, tenant: str | None = None) -> str:
    """Migrate the database, create the login (no password, no superuser) if it is missing, make it
    an application role and grant it the tenant (tenants are bound to logins). Returns the login's URL."""
    from agentmem.migrate import Migrator, Source
    migrator = Migrator(admin_url, Source.load())
    migrator.migrate()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        _create_login(conn, login)
    migrator.grant_app_role(login)
    if tenant is not None:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => %s)", (login, tenant))
    return with_database(admin_url, urlsplit(admin_url).path.lstrip("/") or DATABASE, login)


def prepare_worker(admin_url: str, login: str = WORKER_LOGIN) -> str | None:
    """Create the worker's login (no password, no superuser) if it is missing and make it a member of
    agentmem_worker, so that `agentmem worker` can run from the psql session. Returns its URL, or None
    (and says why on stderr) where this login may not make it."""
    try:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            _create_login(conn, login)
            conn.execute(psycopg.sql.SQL("grant agentmem_worker to {}").format(psycopg.sql.Identifier(login)))
    except psycopg.Error as exc:
        print(f"agentmem psql: no worker login ({exc.sqlstate}: {exc.diag.message_primary}); "
              f"`agentmem worker` needs a login in role agentmem_worker: a DBA runs "
              f"create role {login} login; grant agentmem_worker to {login};", file=sys.stderr)
        return None
    return with_database(admin_url, urlsplit(admin_url).path.lstrip("/") or DATABASE, login)


def psql(data_dir: Path, database_url: str | None, tenant: str, login: str, psql_bin: str | None,
         psql_args: list[str], quiet: bool = False) -> int:
    """`agentmem psql`: prepare, then replace this process with psql as the application login."""
    from . import devserver
    if database_url:
        admin_url = database_url
        where = "your server"
    else:
        admin_url = ensure_database(devserver.start(data_dir))
        where = "the dev server"
        psql_bin = psql_bin or devserver.bin_path("psql")
    app_url = prepare(admin_url, login, tenant)
    worker_url = prepare_worker(admin_url)
    psql_bin = psql_bin or shutil.which("psql") or devserver.bin_path("psql")
    if psql_args[:1] == ["--"]:
        psql_args = psql_args[1:]
    env = dict(os.environ)
    # The tenant for the whole session (agentmem.set_tenant(tenant_id => ...) changes it); the
    # agentmem command on PATH for psql's backquotes, reading models from this database.
    escaped = tenant.replace("\\", "\\\\").replace(" ", "\\ ")  # PGOPTIONS escapes blanks with backslashes
    env["PGOPTIONS"] = (env.get("PGOPTIONS", "") + f" -c agentmem.tenant_id={escaped}").strip()
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["AGENTMEM_DATABASE_URL"] = app_url
    if worker_url:  # `\\! agentmem worker --once` in psql embeds what was stored without a vector
        env["AGENTMEM_WORKER_URL"] = worker_url
    if not quiet:
        print(f"agentmem psql: database {urlsplit(app_url).path.lstrip('/')} on {where}, migrated; connected as "
              f"the application login {login}, tenant '{tenant}'.\n"
              f"  \\df+ agentmem.*  lists the API; the README's \"Thirty seconds in psql\" runs as pasted.\n"
              + (f"  \\! agentmem worker --once --embedder auto  embeds what was stored without a vector "
                 f"(as {WORKER_LOGIN}).\n" if worker_url else "")
              + f"  The same session from elsewhere: PGOPTIONS='-c agentmem.tenant_id={escaped}' psql {app_url}",
              file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    args = [psql_bin, app_url, *psql_args]
    os.execvpe(psql_bin, args, env)
    return 0  # pragma: no cover - exec does not return

