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


class LoginUnusable(Exception):
    """The login cannot connect (a server that asks for passwords, and none known for it): one line."""


def uses_passwords(admin_url: str) -> bool:
    """Whether the server asked this connection for a password: then it asks the logins made here too."""
    with psycopg.connect(admin_url) as conn:
        return bool(conn.pgconn.used_password)


def pgpass_file() -> Path:
    """Where libpq reads passwords: PGPASSFILE, else ~/.pgpass."""
    return Path(os.environ.get("PGPASSFILE") or Path.home() / ".pgpass")


def _remember_password(url: str, login: str, password: str) -> Path:
    """Add the login's password to the password file (mode 0600), for this host, port and database:
    psql and every libpq program then connect as it without being given the password."""
    parts = urlsplit(url)

    def esc(value: str) -> str:
        return value.replace("\\", "\\\\").replace(":", "\\:")
    line = ":".join(esc(v) for v in (parts.hostname or "localhost", str(parts.port or 5432),
                                     parts.path.lstrip("/") or "*", login, password))
    path = pgpass_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as f:
        f.write(line + "\n")
    os.chmod(path, 0o600)
    return path


def _create_login(conn: psycopg.Connection, login: str, with_password: bool = False) -> str | None:
    """Create the login role (no superuser) unless it exists; a concurrent creator wins. With
    with_password (a server that asks for passwords) it gets a generated one, which is returned."""
    if conn.execute("select from pg_catalog.pg_roles where rolname = %s", (login,)).fetchone() is not None:
        return None
    import secrets
    password = secrets.token_urlsafe(24) if with_password else None
    try:
        if password is None:
            conn.execute(psycopg.sql.SQL("create role {} login").format(psycopg.sql.Identifier(login)))
        else:
            conn.execute(psycopg.sql.SQL("create role {} login password {}").format(
                psycopg.sql.Identifier(login), psycopg.sql.Literal(password)))
    except psycopg.errors.DuplicateObject:
        return None
    return password


def _login_url(admin_url: str, login: str) -> str:
    return with_database(admin_url, urlsplit(admin_url).path.lstrip("/") or DATABASE, login)


def _made(admin_url: str, login: str, password: str | None) -> None:
    """A login made with a generated password: the password goes to the password file, and is said."""
    if password is not None:
        path = _remember_password(admin_url, login, password)
        print(f"agentmem psql: the server asks for passwords: made the login {login} with a generated password, "
              f"kept in {path}", file=sys.stderr)


def check_login(url: str, login: str) -> None:
    """Connect as the login (libpq finds a password in the password file): LoginUnusable when the server
    refuses it, before anyone is told it is connected."""
    try:
        psycopg.connect(url, connect_timeout=10).close()
    except psycopg.OperationalError as exc:
        if exc.sqlstate not in ("28P01", "28000") and "password" not in str(exc):
            raise
        raise LoginUnusable(
            f"the server asks {login} for a password, and none is known here: add its password to "
            f"{pgpass_file()} (host:port:database:{login}:password), or pass --login with a name that does "
            f"not exist yet to have one made with a generated password") from None


def prepare(admin_url: str, login: str = APP_LOGIN, tenant: str | None = None,
            with_password: bool = False) -> str:
    """Migrate the database, create the login (no superuser; with with_password a generated password,
    kept in the password file) if it is missing, make it an application role and grant it the tenant
    (tenants are bound to logins). Returns the login's URL (no password in it)."""
    from agentmem.migrate import Migrator, Source
    migrator = Migrator(admin_url, Source.load())
    migrator.migrate()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        password = _create_login(conn, login, with_password)
    _made(admin_url, login, password)
    migrator.grant_app_role(login)
    if tenant is not None:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => %s)", (login, tenant))
    return _login_url(admin_url, login)


def prepare_worker(admin_url: str, login: str = WORKER_LOGIN, with_password: bool = False) -> str | None:
    """Create the worker's login (no superuser; a generated password as prepare's) if it is missing and
    make it a member of agentmem_worker, so that `agentmem worker` can run from the psql session.
    Returns its URL, or None (and says why on stderr) where this login may not make it."""
    try:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            password = _create_login(conn, login, with_password)
            conn.execute(psycopg.sql.SQL("grant agentmem_worker to {}").format(psycopg.sql.Identifier(login)))
    except psycopg.Error as exc:
        print(f"agentmem psql: no worker login ({exc.sqlstate}: {exc.diag.message_primary}); "
              f"`agentmem worker` needs a login in role agentmem_worker: a DBA runs "
              f"create role {login} login; grant agentmem_worker to {login};", file=sys.stderr)
        return None
    _made(admin_url, login, password)
    return _login_url(admin_url, login)


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
    with_password = uses_passwords(admin_url)
    app_url = prepare(admin_url, login, tenant, with_password)
    worker_url = prepare_worker(admin_url, with_password=with_password)
    if with_password:  # a PGPASSWORD was the DBA's: the logins' passwords are in the password file
        os.environ.pop("PGPASSWORD", None)
    try:
        check_login(app_url, login)
    except LoginUnusable as exc:
        print(f"agentmem psql: {exc}", file=sys.stderr)
        return 2
    if worker_url is not None:
        try:
            check_login(worker_url, WORKER_LOGIN)
        except LoginUnusable as exc:
            print(f"agentmem psql: no worker URL: {exc}", file=sys.stderr)
            worker_url = None
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

