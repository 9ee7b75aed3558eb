"""Install and upgrade agentmem's schema: the ledger, the lock and the checksums.

Two kinds of SQL file (see README):

* ``migrations/NNNN_snake_name.sql`` run once each, in order, each in its own
  transaction together with its ledger row in ``agentmem.schema_migrations``;
* ``sql/NN_topic.sql`` are idempotent ``create or replace`` definitions,
  re-applied on every run, in name order (grants and schedules last).

The same steps are rendered into one psql script (``render_psql``) so that a
DBA with only psql gets exactly the schema the Python path gives.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import psycopg

from . import __version__
from .errors import ChecksumMismatch, DatabaseNewer, MigrationError, translate

# One bigint for pg_advisory_lock, shared by the Python and the psql paths.
LOCK_KEY = 7_305_102_461_173
MIGRATION_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
DEFINITION_RE = re.compile(r"^(\d{2})_([a-z0-9_]+)\.sql$")

# Runs before any migration, on every run, in both paths. Plain SQL only.
BOOTSTRAP_SQL = r"""
do $preflight$
declare
    v_version int[];
begin
    if current_setting('server_version_num')::int < 150000 then
        raise exception 'agentmem needs PostgreSQL 15 or newer; this server is %',
            current_setting('server_version')
            using errcode = 'AM040',
                  hint = 'Run agentmem on PostgreSQL 15, 16, 17 or 18.';
    end if;
    if not exists (select from pg_catalog.pg_extension where extname = 'vector') then
        if not exists (select from pg_catalog.pg_available_extensions where name = 'vector') then
            raise exception 'pgvector is not installed on this server'
                using errcode = 'AM040',
                      detail = 'The extension "vector" is not in pg_available_extensions.',
                      hint = 'Install pgvector 0.8 or newer on the server '
                             '(e.g. apt install postgresql-17-pgvector), then migrate again.';
        end if;
        begin
            create extension vector;
        exception when insufficient_privilege then
            raise exception 'role % is not allowed to create the extension "vector"', current_user
                using errcode = 'AM041',
                      detail = sqlerrm,
                      hint = 'Ask a superuser to run "create extension vector;" in database '
                             || quote_ident(current_database()) || ', then migrate again.';
        end;
    end if;
    select string_to_array(split_part(extversion, '-', 1), '.')::int[] into v_version
      from pg_catalog.pg_extension where extname = 'vector';
    if v_version < array[0, 8] then
        raise exception 'agentmem needs pgvector 0.8 or newer; this database has %', array_to_string(v_version, '.')
            using errcode = 'AM040',
                  hint = 'Install pgvector 0.8 or newer, run "alter extension vector update;", then migrate again.';
    end if;
end
$preflight$;

-- A DBA who is not a superuser: what the roles need, checked before anything is created, each
-- refusal an AM041 naming the one statement a superuser runs (README, "Installing and upgrading").
do $dba$
declare
    v_me text := pg_catalog.quote_ident(current_user);
    v_createrole boolean;
    v_pg16 boolean := current_setting('server_version_num')::int >= 160000;
    v_app boolean := exists (select from pg_catalog.pg_roles where rolname = 'agentmem_app');
    v_owner boolean := exists (select from pg_catalog.pg_roles where rolname = 'agentmem_owner');
    v_queue boolean := exists (select from pg_catalog.pg_roles where rolname = 'agentmem_queue');
    v_worker boolean := exists (select from pg_catalog.pg_roles where rolname = 'agentmem_worker');
    v_queue_member boolean;
    v_first boolean := true;  -- migration 0001 (which comments on agentmem_app) still to run here
    v_member boolean;
begin
    if (select r.rolsuper from pg_catalog.pg_roles as r where r.rolname = current_user) then
        return;
    end if;
    select r.rolcreaterole into v_createrole from pg_catalog.pg_roles as r where r.rolname = current_user;
    if pg_catalog.to_regclass('agentmem.schema_migrations') is not null then
        execute 'select not exists (select from agentmem.schema_migrations where version = 1)' into v_first;
    end if;
    if pg_catalog.to_regnamespace('agentmem') is null
       and not pg_catalog.has_database_privilege(current_database(), 'create') then
        raise exception 'role % may not create the schema agentmem in database %', current_user, current_database()
            using errcode = 'AM041',
                  detail = 'Installing creates the schemas agentmem and agentmem_private.',
                  hint = 'Ask a superuser (or the database''s owner) to run "grant create on database '
                         || pg_catalog.quote_ident(current_database()) || ' to ' || v_me || ';", then migrate again.';
    end if;
    if not (v_app and v_owner and v_queue and v_worker) and not v_createrole then
        raise exception 'role % needs CREATEROLE to install agentmem', current_user
            using errcode = 'AM041',
                  detail = 'The roles agentmem_app, agentmem_owner, agentmem_queue and agentmem_worker do not all '
                           || 'exist yet in this cluster.',
                  hint = 'Ask a superuser to run "alter role ' || v_me || ' createrole;", then migrate again.';
    end if;
    if not v_pg16 then
        -- PostgreSQL 15: CREATEROLE comments on agentmem_app (migration 0001) and grants the
        -- membership of agentmem_owner that re-owning the API's functions needs.
        v_member := v_owner and pg_catalog.pg_has_role(current_user, 'agentmem_owner', 'member');
        v_queue_member := v_queue and pg_catalog.pg_has_role(current_user, 'agentmem_queue', 'member');
        if not v_createrole
           and ((v_app and v_first) or (v_owner and not v_member) or (v_queue and not v_queue_member)) then
            raise exception 'role % needs CREATEROLE to install agentmem here', current_user
                using errcode = 'AM041',
                      detail = 'On PostgreSQL 15 managing agentmem''s roles, which exist already, '
                               || 'needs CREATEROLE.',
                      hint = 'Ask a superuser to run "alter role ' || v_me || ' createrole;", then migrate again.';
        end if;
    else
        -- PostgreSQL 16 and later: CREATEROLE manages only the roles one holds ADMIN OPTION on (those
        -- one created). Migration 0001 comments on agentmem_app and grant_app_role grants it: ADMIN
        -- OPTION on agentmem_app. Re-owning the API's functions: SET on agentmem_owner, or ADMIN
        -- OPTION on it to grant that to oneself.
        -- The embedding queue (migration 0011): SET on agentmem_queue, which owns the queue's
        -- functions, and ADMIN OPTION on agentmem_worker, to make worker logins its members.
        v_member := v_owner and pg_catalog.pg_has_role(current_user, 'agentmem_owner', 'set');
        v_queue_member := v_queue and pg_catalog.pg_has_role(current_user, 'agentmem_queue', 'set');
        if (v_app and v_first and not pg_catalog.pg_has_role(current_user, 'agentmem_app', 'member with admin option'))
           or (v_owner and not v_member
               and not pg_catalog.pg_has_role(current_user, 'agentmem_owner', 'member with admin option'))
           or (v_queue and not v_queue_member
               and not pg_catalog.pg_has_role(current_user, 'agentmem_queue', 'member with admin option'))
           or (v_worker and not pg_catalog.pg_has_role(current_user, 'agentmem_worker', 'member with admin option')) then
            raise exception 'role % may not manage agentmem''s roles, which another role created', current_user
                using errcode = 'AM041',
                      detail = 'On PostgreSQL 16 and later CREATEROLE manages only the roles one created or holds '
                               || 'ADMIN OPTION on; another database''s install created agentmem_app, agentmem_owner, '
                               || 'agentmem_queue and agentmem_worker.',
                      hint = 'Ask a superuser to run "grant agentmem_app, agentmem_owner, agentmem_queue, '
                             || 'agentmem_worker to ' || v_me || ' with admin option;", then migrate again.';
        end if;
    end if;
    if v_owner and not v_member then
        execute pg_catalog.format('grant agentmem_owner to %I', current_user);
    end if;
end
$dba$;

-- The schemas of the search_path agentmem's functions pin (agentmem and
-- pgvector's; pg_catalog only superusers write) must be writable by no role
-- but their owners, the installer and superusers: whatever a caller put there,
-- agentmem's security definer functions and the DBA's would call. The same
-- rule as agentmem.search_path_health, checked before anything is changed.
do $search_path$
declare
    v_dba oid := coalesce(
        (select n.nspowner from pg_catalog.pg_namespace as n where n.nspname = 'agentmem'),
        (select r.oid from pg_catalog.pg_roles as r where r.rolname = current_user));
    v_app oid := (select r.oid from pg_catalog.pg_roles as r where r.rolname = 'agentmem_app');
    v_rows text;
    v_fixes text;
begin
    with path as (
        select n.oid, n.nspname::text as schema_name, n.nspowner, n.nspacl
        from pg_catalog.pg_namespace as n
        where n.nspname = 'agentmem'
           or n.oid = (select e.extnamespace from pg_catalog.pg_extension as e where e.extname = 'vector')
    ),
    untrusted as (
        -- per schema: not a superuser, agentmem_owner or the DBA (the owner of
        -- schema agentmem), and an application role or without the privileges
        -- of the schema's owner.
        select p.oid as nsp, r.oid, r.rolname::text as rolname
        from path as p cross join pg_catalog.pg_roles as r
        where not r.rolsuper and r.rolname not in ('agentmem_owner', 'agentmem_queue')
          and not pg_catalog.pg_has_role(r.oid, v_dba, 'usage')
          and ((v_app is not null and pg_catalog.pg_has_role(r.oid, v_app, 'member'))
               or not pg_catalog.pg_has_role(r.oid, p.nspowner, 'usage'))
    ),
    risk as (
        select p.schema_name, 'PUBLIC may create objects in it' as problem,
               pg_catalog.format('revoke create on schema %I from public;', p.schema_name) as fix
        from path as p cross join lateral pg_catalog.aclexplode(p.nspacl) as a
        where a.grantee = 0 and a.privilege_type = 'CREATE'
        union all
        select p.schema_name,
               pg_catalog.format('role %s may create objects in it', u.rolname),
               case when pg_catalog.pg_has_role(u.oid, p.nspowner, 'usage')
                    then pg_catalog.format('alter schema %I owner to %I;', p.schema_name, v_dba::regrole::text)
                    else pg_catalog.format('revoke create on schema %I from %I;', p.schema_name, u.rolname) end
        from path as p join untrusted as u on u.nsp = p.oid and pg_catalog.has_schema_privilege(u.oid, p.oid, 'create')
        where not exists (select from pg_catalog.aclexplode(p.nspacl) as a
                          where a.grantee = 0 and a.privilege_type = 'CREATE')
           or pg_catalog.pg_has_role(u.oid, p.nspowner, 'usage')
        union all
        select p.schema_name, pg_catalog.format('role %s owns function %s', u.rolname, pg_catalog.format('%I.%I(%s)', p.schema_name, f.proname, pg_catalog.pg_get_function_identity_arguments(f.oid))),
               pg_catalog.format('alter function %s owner to %I;', pg_catalog.format('%I.%I(%s)', p.schema_name, f.proname, pg_catalog.pg_get_function_identity_arguments(f.oid)), v_dba::regrole::text)
        from path as p join pg_catalog.pg_proc as f on f.pronamespace = p.oid join untrusted as u on u.nsp = p.oid and f.proowner = u.oid
        union all
        select p.schema_name, pg_catalog.format('role %s owns operator %s', u.rolname, pg_catalog.format('%I.%s(%s, %s)', p.schema_name, o.oprname, o.oprleft::regtype, o.oprright::regtype)),
               pg_catalog.format('alter operator %s owner to %I;', pg_catalog.format('%I.%s(%s, %s)', p.schema_name, o.oprname, o.oprleft::regtype, o.oprright::regtype), v_dba::regrole::text)
        from path as p join pg_catalog.pg_operator as o on o.oprnamespace = p.oid join untrusted as u on u.nsp = p.oid and o.oprowner = u.oid
    )
    select pg_catalog.string_agg(schema_name || ': ' || problem, '; '), pg_catalog.string_agg(distinct fix, ' ')
      into v_rows, v_fixes from risk;
    if v_rows is not null then
        raise exception 'agentmem will not install here: a role other than the owner may write a schema of agentmem''s search_path'
            using errcode = 'AM041',
                  detail = v_rows || '. agentmem''s security definer functions (and the DBA''s) would call '
                           || 'functions and operators put there.',
                  hint = 'Run as the owner: ' || v_fixes || ' Then migrate again.';
    end if;
end
$search_path$;

create schema if not exists agentmem;
comment on schema agentmem is 'agentmem: memory and answer caching for LLM agents. The API is the functions; tables are private.';

create table if not exists agentmem.schema_migrations (
    version int primary key,
    name text not null,
    sha256 text not null,
    applied_by_version text not null,
    applied_via text not null,
    applied_at timestamptz not null default now()
);
comment on table agentmem.schema_migrations is
    'Ledger of applied migrations: one row per migrations/NNNN_name.sql, written in the migration''s transaction.';
"""

# The session search_path under which migrations and definitions are created;
# functions capture it with "set search_path from current".
SEARCH_PATH_SQL = (
    "select pg_catalog.format('set search_path = pg_catalog, agentmem, %I, pg_temp', n.nspname) "
    "from pg_catalog.pg_extension e join pg_catalog.pg_namespace n on n.oid = e.extnamespace "
    "where e.extname = 'vector'"
)

# Loads pgvector's library into the session (its type input does), so that its
# settings (hnsw.ef_search, hnsw.iterative_scan, ...) are defined before the
# definitions pin them on functions: for a role that is not a superuser,
# PostgreSQL refuses to pin a setting of a library that is not loaded yet.
LOAD_VECTOR_SQL = "select '[1]'::vector"


@dataclass(frozen=True)
class SqlFile:
    number: int
    name: str
    path: Path
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@dataclass(frozen=True)
class Source:
    """The migrations and definitions of one release (or one checkout)."""

    root: Path
    migrations: tuple[SqlFile, ...]
    definitions: tuple[SqlFile, ...]

    @classmethod
    def load(cls, root: Path | str | None = None) -> "Source":
        root = Path(root) if root is not None else default_root()
        migrations = _load(root / "migrations", MIGRATION_RE)
        for expected, m in enumerate(migrations, start=1):
            if m.number != expected:
                raise MigrationError(
                    f"migration numbers must run 1, 2, 3, ... without gaps: found {m.path.name} "
                    f"where {expected:04d}_*.sql was expected",
                    hint="Number the new migration after the last one; never renumber a landed one.")
        return cls(root, tuple(migrations), tuple(_load(root / "sql", DEFINITION_RE)))


def _load(folder: Path, pattern: re.Pattern[str]) -> list[SqlFile]:
    if not folder.is_dir():
        raise MigrationError(f"no such folder: {folder}",
                             hint="--source must point at a checkout holding migrations/ and sql/.")
    files = []
    for path in sorted(folder.glob("*.sql")):
        match = pattern.match(path.name)
        if not match:
            raise MigrationError(f"badly named SQL file: {path}",
                                 hint=f"Names must match {pattern.pattern}.")
        files.append(SqlFile(int(match.group(1)), match.group(2), path, path.read_text()))
    return files


def default_root() -> Path:
    """The SQL shipped in the installed package, or the checkout in development."""
    packaged = resources.files("agentmem") / "_sql"
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "migrations").is_dir():
        return checkout
    raise MigrationError("agentmem's SQL files are missing from this installation",
                         hint="Reinstall the package, or pass --source with a checkout.")


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text.split("+")[0])[:3])


@dataclass(frozen=True)
class MigrationStatus:
    version: int
    name: str
    state: str  # applied | pending | changed | unknown
    applied_at: object = None
    applied_by_version: str | None = None


def _run_file(conn: psycopg.Connection, f: SqlFile, kind: str) -> None:
    """Run one SQL file inside the caller's transaction; a failure names the file."""
    try:
        conn.execute(f.text)
    except psycopg.Error as exc:
        raise MigrationError(
            f"{kind} {f.path.name} failed and was rolled back: {exc.diag.message_primary or exc}",
            sqlstate=exc.sqlstate, detail=exc.diag.message_detail, hint=exc.diag.message_hint) from exc


class Migrator:
    def __init__(self, conninfo: str, source: Source | None = None):
        self.conninfo = conninfo
        self.source = source or Source.load()
        # What the last migrate() said the DBA must act on (the SQL's WARNINGs: a missing pg_cron,
        # the LEAKPROOF mark only a superuser can make), each "message" or "message\nHINT: hint".
        self.warnings: list[str] = []

    def _warning(self, diag: psycopg.errors.Diagnostic) -> None:
        if diag.severity_nonlocalized == "WARNING" and diag.message_primary:
            text = diag.message_primary + (f"\nHINT: {diag.message_hint}" if diag.message_hint else "")
            if text not in self.warnings:
                self.warnings.append(text)

    def _connect(self) -> psycopg.Connection:
        return psycopg.connect(self.conninfo, autocommit=True)

    def _ledger(self, conn: psycopg.Connection) -> dict[int, tuple]:
        exists = conn.execute("select to_regclass('agentmem.schema_migrations') is not null").fetchone()[0]
        if not exists:
            return {}
        rows = conn.execute(
            "select version, name, sha256, applied_at, applied_by_version "
            "from agentmem.schema_migrations order by version").fetchall()
        return {r[0]: r for r in rows}

    def installed(self) -> bool:
        """Whether agentmem's ledger exists in the database (an install has at least begun)."""
        try:
            with self._connect() as conn:
                return conn.execute("select to_regclass('agentmem.schema_migrations') is not null").fetchone()[0]
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def status(self) -> list[MigrationStatus]:
        with self._connect() as conn:
            ledger = self._ledger(conn)
        out = []
        known = {m.number: m for m in self.source.migrations}
        for m in self.source.migrations:
            row = ledger.get(m.number)
            if row is None:
                out.append(MigrationStatus(m.number, m.name, "pending"))
            else:
                state = "applied" if row[2] == m.sha256 else "changed"
                out.append(MigrationStatus(m.number, m.name, state, row[3], row[4]))
        for version, row in ledger.items():
            if version not in known:
                out.append(MigrationStatus(version, row[1], "unknown", row[3], row[4]))
        return out

    def _check_ledger(self, ledger: dict[int, tuple]) -> None:
        known = {m.number: m for m in self.source.migrations}
        newer = [r for v, r in ledger.items()
                 if v not in known or _version_tuple(r[4]) > _version_tuple(__version__)]
        if newer:
            r = newer[-1]
            raise DatabaseNewer(
                f"the database was migrated by agentmem {r[4]} (migration {r[0]:04d}_{r[1]}), "
                f"newer than this code ({__version__})",
                hint="Upgrade the agentmem package; never run older code against a newer schema.")
        for m in self.source.migrations:
            row = ledger.get(m.number)
            if row is not None and row[2] != m.sha256:
                raise ChecksumMismatch(
                    f"migration {m.path.name} changed after it was applied: "
                    f"applied sha256 {row[2]}, file sha256 {m.sha256}",
                    detail=f"file: {m.path}",
                    hint="Migrations are append-only: restore the file and put the change in a new migration.")

    def grant_app_role(self, role: str) -> None:
        """Make an existing login role a member of agentmem_app (agentmem.grant_app_role)."""
        try:
            with self._connect() as conn:
                conn.execute("select agentmem.grant_app_role(role_name => %s)", (role,))
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def distributed(self) -> str:
        """'yes (Citus, N workers)' or 'no': whether agentmem.distribute() has run here."""
        try:
            with self._connect() as conn:
                if not conn.execute("select to_regprocedure('agentmem.is_distributed()') is not null").fetchone()[0]:
                    return "no"
                if not conn.execute("select agentmem.is_distributed()").fetchone()[0]:
                    return "no"
                workers = conn.execute("select count(*) from pg_catalog.pg_dist_node "
                                       "where noderole = 'primary' and groupid <> 0").fetchone()[0]
                return f"yes (Citus, {workers} worker{'s' if workers != 1 else ''})"
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def security(self) -> list[str]:
        """Lines for ``agentmem status``: the tenant binding and the search path's health."""
        try:
            with self._connect() as conn:
                if conn.execute("select to_regclass('agentmem.search_path_health') is null").fetchone()[0]:
                    return ["tenant binding: not installed (run agentmem migrate)"]
                mode = conn.execute("select agentmem.tenant_binding_mode()").fetchone()[0]
                grants = conn.execute("select count(*) from agentmem.tenant_grants").fetchone()[0]
                lines = [f"tenant binding: {mode} ({grants} grant{'s' if grants != 1 else ''})"
                         + ("; any application login may act as any tenant: "
                            "select agentmem.set_tenant_binding(mode => 'role'); binds them" if mode == "none" else "")]
                rows = conn.execute("select schema_name, role_name, problem, fix "
                                    "from agentmem.search_path_health").fetchall()
                if not rows:
                    lines.append("search path: safe (no role but the owners and superusers can write its schemas)")
                for schema, role, problem, fix in rows:
                    lines.append(f"search path: UNSAFE: schema {schema}: {role} {problem}; fix: {fix}")
                return lines
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def distribute(self, shard_count: int | None = None) -> list[tuple[str, str, str | None]]:
        """Distribute the installation on Citus (agentmem.distribute); the rows it returns."""
        try:
            with self._connect() as conn:
                if not conn.execute("select to_regprocedure('agentmem.distribute(int)') is not null").fetchone()[0]:
                    raise MigrationError("agentmem is not installed in this database (or predates distribute): "
                                         "run agentmem migrate first")
                return conn.execute("select table_name, distribution, note "
                                    "from agentmem.distribute(shard_count => %s)", (shard_count,)).fetchall()
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def migrate(self) -> list[str]:
        """Apply pending migrations, then every definition file. Returns the applied names."""
        applied: list[str] = []
        self.warnings = []
        try:
            with self._connect() as conn:
                conn.add_notice_handler(self._warning)
                conn.execute("select pg_advisory_lock(%s)", (LOCK_KEY,))
                try:
                    with conn.transaction():
                        conn.execute(BOOTSTRAP_SQL)
                    ledger = self._ledger(conn)
                    self._check_ledger(ledger)
                    conn.execute(conn.execute(SEARCH_PATH_SQL).fetchone()[0])
                    for m in self.source.migrations:
                        if m.number in ledger:
                            continue
                        with conn.transaction():
                            conn.execute(
                                "insert into agentmem.schema_migrations "
                                "(version, name, sha256, applied_by_version, applied_via) "
                                "values (%s, %s, %s, %s, 'python')",
                                (m.number, m.name, m.sha256, __version__))
                            _run_file(conn, m, "migration")
                        applied.append(m.path.name)
                    with conn.transaction():
                        conn.execute(LOAD_VECTOR_SQL)
                        for d in self.source.definitions:
                            _run_file(conn, d, "definitions file")
                finally:
                    if not conn.closed and conn.info.transaction_status == 0:
                        conn.execute("select pg_advisory_unlock(%s)", (LOCK_KEY,))
        except psycopg.Error as exc:
            raise translate(exc) from exc
        return applied


def render_psql(source: Source | None = None) -> str:
    """One psql script that does what Migrator.migrate does (run with ON_ERROR_STOP=1)."""
    source = source or Source.load()
    known = ", ".join(str(m.number) for m in source.migrations) or "0"
    out = [
        f"-- agentmem {__version__}: install or upgrade with only psql. GENERATED from migrations/ and sql/",
        "-- by `agentmem psql-script` (make psql-script); DO NOT EDIT. Run it as the schema owner:",
        "--   psql -v ON_ERROR_STOP=1 -d DATABASE -f agentmem-install.psql",
        "\\set ON_ERROR_STOP 1",
        "set client_min_messages = warning;",
        f"do $lock$ begin perform pg_advisory_lock({LOCK_KEY}); end $lock$;",
        "begin;",
        BOOTSTRAP_SQL.strip(),
        "commit;",
        "select count(*) as agentmem_before from agentmem.schema_migrations \\gset",
        "do $check$",
        "declare r record;",
        "begin",
        "    select * into r from agentmem.schema_migrations",
        f"     where version not in ({known})",
        "        or string_to_array(regexp_replace(split_part(applied_by_version, '+', 1), '[^0-9.]', '', 'g'), '.')::int[]",
        f"           > string_to_array('{'.'.join(map(str, _version_tuple(__version__)))}', '.')::int[]",
        "     order by version desc limit 1;",
        "    if found then",
        f"        raise exception 'the database was migrated by agentmem % (migration %), newer than this script ({__version__})',",
        "            r.applied_by_version, r.version",
        "            using hint = 'Use the install script of the newer release.';",
        "    end if;",
        "end",
        "$check$;",
        SEARCH_PATH_SQL + " \\gset agentmem_",
        # \gset names the variable after the column: "format"
        ":agentmem_format;",
    ]
    for m in source.migrations:
        out += [
            "",
            f"-- migration {m.path.name}",
            "begin;",
            f"select exists (select from agentmem.schema_migrations where version = {m.number}) "
            "as agentmem_done \\gset",
            "\\if :agentmem_done",
            "do $check$ begin",
            f"    if (select sha256 from agentmem.schema_migrations where version = {m.number}) <> '{m.sha256}' then",
            f"        raise exception 'migration {m.path.name} changed after it was applied: applied sha256 %, file sha256 {m.sha256}',",
            f"            (select sha256 from agentmem.schema_migrations where version = {m.number})",
            "            using hint = 'Migrations are append-only: restore the file and put the change in a new migration.';",
            "    end if;",
            "end $check$;",
            "\\else",
            "insert into agentmem.schema_migrations (version, name, sha256, applied_by_version, applied_via)",
            f"values ({m.number}, '{m.name}', '{m.sha256}', '{__version__}', 'psql');",
            m.text.rstrip(),
            "\\endif",
            "commit;",
        ]
    out += ["", "-- idempotent definitions, re-applied on every install and upgrade", "begin;",
            LOAD_VECTOR_SQL + " \\gset agentmem_loaded_"]
    for d in source.definitions:
        out += [f"-- sql/{d.path.name}", d.text.rstrip()]
    out += ["commit;", f"do $lock$ begin perform pg_advisory_unlock({LOCK_KEY}); end $lock$;",
            # The verdict, one line, as `agentmem migrate` prints it.
            "select pg_catalog.format('agentmem %s in database %s: applied %s migration(s) now, %s in all "
            f"(the last %s); definitions re-applied ({len(source.definitions)} files)', '{__version__}', "
            "current_database(), count(*) - :agentmem_before, count(*), max(version)) as agentmem_verdict "
            "from agentmem.schema_migrations \\gset",
            "\\echo :agentmem_verdict", ""]
    return "\n".join(out)


def format_status(rows: list[MigrationStatus]) -> str:
    lines = [f"{'migration':<40} {'state':<8} {'applied at':<32} by"]
    for r in rows:
        lines.append(f"{r.version:04d}_{r.name:<35} {r.state:<8} {str(r.applied_at or ''):<32} "
                     f"{r.applied_by_version or ''}")
    return "\n".join(lines)
