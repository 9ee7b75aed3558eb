"""What both clients share about connections: the tenant statement, pipeline mode, the install probe,
the pool's connection options (prepared statements or not), the pool's quiet-socket check, and psycopg's
prepared-statement cache after an aborted pipeline."""

from __future__ import annotations

import select
from typing import Any

import psycopg

from .errors import PrerequisiteMissing

SET_TENANT = "select agentmem.set_tenant(tenant_id => %s, local => true)"
# Pipeline mode needs libpq 14 or newer (psycopg[binary] bundles one); without it, BEGIN ... COMMIT.
PIPELINE = psycopg.Pipeline.is_supported()
# Memory.connect(check=True): the server answers, and this database has agentmem.
PROBE = ("select exists (select from pg_catalog.pg_proc where proname = 'set_tenant' "
         "and pronamespace = pg_catalog.to_regnamespace('agentmem')), pg_catalog.current_database()")


PREPARE_THRESHOLD = 5  # psycopg's default: a statement's fifth run on a connection prepares it


def connection_kwargs(timeout: float, prepare: bool) -> dict[str, Any]:
    """The options of a pool's connections: autocommit, a connect timeout, and psycopg's
    prepare_threshold: None (no server-side prepared statements, safe behind a transaction pooler)
    unless prepare, then psycopg's default (prepared at a statement's fifth run on a connection)."""
    return {"connect_timeout": max(2, round(timeout)), "autocommit": True,
            "prepare_threshold": PREPARE_THRESHOLD if prepare else None}


def require_installed(row: Any) -> None:
    if not row[0]:
        raise PrerequisiteMissing(
            f"agentmem is not installed in database {row[1]}", sqlstate="AM040",
            hint="Install it with `agentmem migrate --database-url URL` (or the psql install script), "
                 "or connect to the database that has it.")


def has_input(conn: Any) -> bool:
    """Whether an idle connection's socket has anything to read: a server that ended the
    session (restart, pg_terminate_backend, crash) left its error or end of stream there."""
    fd = conn.fileno()
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))  # POLLHUP and POLLERR come back unasked
    return bool(select.select([fd], [], [], 0)[0])


def forget_prepared(conn: Any) -> None:
    """After an error in a pipeline: forget which statements this connection has prepared (and
    deallocate them all before its next statement). A statement psycopg was preparing when the
    pipeline aborted (its Parse skipped after the error, e.g. a refused set_tenant) stays in
    psycopg's cache as prepared, and its next use fails with 'prepared statement "_pg3_N" does
    not exist'."""
    prepared = getattr(conn, "_prepared", None)  # psycopg's PrepareManager
    if prepared is not None:
        prepared.clear()
