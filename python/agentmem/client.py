"""The tenant-bound clients: ``Memory`` (sync) and ``AsyncMemory`` (asyncio).

A client is three things, each in its own module:

* the literal calls (``calls.Calls``): one method per public SQL function the
  application role may call, each one literal ``select ... from agentmem.fn(name => %s)``;
* the conveniences (``conveniences``): embed text with the client's embedder,
  then make literal calls (``remember``, ``recall``, ``recall_facts_about``,
  ``cached_answer``, ``store_answer``, ``extract_facts``);
* the runner (here): every call is sent behind
  ``agentmem.set_tenant(tenant_id => %s, local => true)`` in one pipeline on an
  autocommit connection: the two statements are one implicit transaction
  (everything up to the protocol's Sync), so the tenant ends with the call and
  a pooled connection never carries one request's tenant into the next. One
  round trip, where BEGIN, set_tenant, the call and COMMIT were four (with the
  pool's check, five): 0.5 to 0.7 ms less per call (bench/probes/probe_driver_overhead.py).
  If set_tenant fails, the call is not run. Pass ``conn=`` to run a call inside
  a transaction of your own (a savepoint is used). With a libpq older than 14
  (no pipeline mode) each call runs in a transaction of its own instead.

The DBA's operations (retention runs and schedules, default policies, models,
grants, text search configuration, tenants' own indexes) are not here: they
belong to no tenant, see ``admin.Admin``.
"""

from __future__ import annotations

import select
import weakref
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Callable, Iterator

import psycopg
from pgvector.psycopg import register_vector, register_vector_async
from psycopg.rows import class_row, dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ._adapt import check_params
from .calls import Sql
from .conveniences import AsyncConveniences, Conveniences
from .errors import InvalidTenant, PrerequisiteMissing, translate

SET_TENANT = "select agentmem.set_tenant(tenant_id => %s, local => true)"


def forget_prepared(conn: Any) -> None:
    """After an error in a pipeline: forget which statements this connection has prepared (and
    deallocate them all before its next statement). A statement psycopg was preparing when the
    pipeline aborted (its Parse skipped after the error, e.g. a refused set_tenant) stays in
    psycopg's cache as prepared, and its next use fails with 'prepared statement "_pg3_N" does
    not exist'."""
    prepared = getattr(conn, "_prepared", None)  # psycopg's PrepareManager
    if prepared is not None:
        prepared.clear()
# Pipeline mode needs libpq 14 or newer (psycopg[binary] bundles one); without it, BEGIN ... COMMIT.
PIPELINE = psycopg.Pipeline.is_supported()
# Memory.connect(check=True): the server answers, and this database has agentmem.
PROBE = ("select exists (select from pg_catalog.pg_proc where proname = 'set_tenant' "
         "and pronamespace = pg_catalog.to_regnamespace('agentmem')), pg_catalog.current_database()")


def _require_installed(row: Any) -> None:
    if not row[0]:
        raise PrerequisiteMissing(
            f"agentmem is not installed in database {row[1]}", sqlstate="AM040",
            hint="Install it with `agentmem migrate --database-url URL` (or the psql install script), "
                 "or connect to the database that has it.")


def _has_input(conn: Any) -> bool:
    """Whether an idle connection's socket has anything to read: a server that ended the
    session (restart, pg_terminate_backend, crash) left its error or end of stream there."""
    fd = conn.fileno()
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))  # POLLHUP and POLLERR come back unasked
    return bool(select.select([fd], [], [], 0)[0])


def check_idle(conn: psycopg.Connection) -> None:
    """The pool's check on checkout, without a round trip when the socket is quiet.

    psycopg_pool's own check (an empty query) cost a round trip per call. A connection the
    server closed has its farewell or end of stream waiting on the socket; only then is the
    empty query sent, which raises, and the pool replaces the connection."""
    if conn.closed or _has_input(conn):
        ConnectionPool.check_connection(conn)


async def acheck_idle(conn: psycopg.AsyncConnection) -> None:
    """check_idle for the asyncio pool."""
    if conn.closed or _has_input(conn):
        await AsyncConnectionPool.check_connection(conn)


def row_factory(row: Any):
    return dict_row if row is None else class_row(row)


def shape(stmt: Sql[Any], rows: list) -> Any:
    """The rows of a statement as its method returns them: all, one (or None), a scalar, or nothing."""
    if stmt.fetch == "none":
        return None
    if stmt.fetch == "all":
        result: Any = rows
    else:
        result = rows[0] if rows else None
        if stmt.fetch == "scalar" and result is not None:
            result = next(iter(result.values())) if isinstance(result, dict) else result
    return stmt.post(result) if stmt.post else result


class _Tenant:
    def __init__(self, pool: Any, *, tenant: str, embedder: Any = None):
        if not tenant:
            raise InvalidTenant("a client needs a tenant: Memory(pool, tenant='...')")
        self.pool = pool
        self.tenant = tenant
        self.embedder = embedder
        self._registered: weakref.WeakSet = weakref.WeakSet()

    def for_tenant(self, tenant: str):
        """The same client (same pool and embedder) working on another tenant."""
        return type(self)(self.pool, tenant=tenant, embedder=self.embedder)


class Memory(Conveniences, _Tenant):
    """Synchronous tenant-bound client: each method runs its call(s) at once and returns the value."""

    pool: ConnectionPool

    @classmethod
    def connect(cls, conninfo: str, *, tenant: str, embedder: Any = None, min_size: int = 1,
                max_size: int = 10, timeout: float = 10.0, check: bool = True) -> "Memory":
        """Open a pool. ``timeout`` (seconds) bounds how long a call waits for a connection
        (and each connection attempt); past it the call raises ``ConnectionLost``. Connections
        are checked when taken from the pool (check_idle), so after a server restart the next call works:
        the pool's reconnection attempts (backing off 1, 2, 4 s ...) give up after ``timeout``
        too, so the next call starts a fresh attempt instead of waiting out a long back-off.

        ``check`` (default): connect once first, so that a wrong host, port, database or password
        fails here (``ConnectionLost``, or psycopg's error for a refused login) and a database
        without agentmem raises ``PrerequisiteMissing``, instead of the first call failing.
        ``check=False`` opens the pool without waiting (e.g. to start before the server does)."""
        if check:
            try:
                with psycopg.connect(conninfo, connect_timeout=max(2, round(timeout)), autocommit=True) as probe:
                    installed = probe.execute(PROBE).fetchone()
            except psycopg.Error as exc:
                raise translate(exc) from exc
            _require_installed(installed)
        pool = ConnectionPool(conninfo, min_size=min_size, max_size=max_size, open=True,
                              configure=register_vector, check=check_idle,
                              timeout=timeout, reconnect_timeout=timeout,
                              kwargs={"connect_timeout": max(2, round(timeout)), "autocommit": True})
        return cls(pool, tenant=tenant, embedder=embedder)

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextmanager
    def _transaction(self, conn: Any) -> Iterator[psycopg.Connection]:
        if conn is None:
            with self.pool.connection() as pooled, pooled.transaction():
                yield pooled
        else:
            if conn not in self._registered:
                register_vector(conn)
                self._registered.add(conn)
            with conn.transaction():
                yield conn

    def run(self, stmt: Sql[Any], conn: Any = None) -> Any:
        """Run one literal statement for this client's tenant (in conn's transaction when given)."""
        check_params(stmt.params)
        try:
            if conn is None and PIPELINE:
                with self.pool.connection() as c, c.cursor(row_factory=row_factory(stmt.row)) as cur:
                    try:
                        with c.pipeline():
                            c.execute(SET_TENANT, (self.tenant,))
                            cur.execute(stmt.query, stmt.params)
                    except psycopg.Error:
                        forget_prepared(c)
                        raise
                    rows = cur.fetchall()
            else:
                with self._transaction(conn) as c:
                    c.execute(SET_TENANT, (self.tenant,))
                    with c.cursor(row_factory=row_factory(stmt.row)) as cur:
                        cur.execute(stmt.query, stmt.params)
                        rows = cur.fetchall()
        except psycopg.Error as exc:
            raise translate(exc) from exc
        return shape(stmt, rows)

    def _bind(self, fn: Callable[..., Sql[Any]]) -> Callable[..., Any]:
        def method(*args: Any, **kwargs: Any) -> Any:
            return self.run(fn(self, *args, **kwargs), kwargs.get("conn"))
        return method


class AsyncMemory(AsyncConveniences, _Tenant):
    """asyncio tenant-bound client: the same methods as Memory, each returning an awaitable."""

    pool: AsyncConnectionPool

    @classmethod
    async def connect(cls, conninfo: str, *, tenant: str, embedder: Any = None, min_size: int = 1,
                      max_size: int = 10, timeout: float = 10.0, check: bool = True) -> "AsyncMemory":
        """As Memory.connect: ``timeout`` bounds the wait for a connection (ConnectionLost past
        it); connections are checked when taken from the pool; ``check`` connects once first."""
        if check:
            try:
                async with await psycopg.AsyncConnection.connect(
                        conninfo, connect_timeout=max(2, round(timeout)), autocommit=True) as probe:
                    installed = await (await probe.execute(PROBE)).fetchone()
            except psycopg.Error as exc:
                raise translate(exc) from exc
            _require_installed(installed)
        pool = AsyncConnectionPool(conninfo, min_size=min_size, max_size=max_size, open=False,
                                   configure=register_vector_async, check=acheck_idle,
                                   timeout=timeout, reconnect_timeout=timeout,
                                   kwargs={"connect_timeout": max(2, round(timeout)), "autocommit": True})
        await pool.open()
        return cls(pool, tenant=tenant, embedder=embedder)

    async def close(self) -> None:
        await self.pool.close()

    async def __aenter__(self) -> "AsyncMemory":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @asynccontextmanager
    async def _transaction(self, conn: Any) -> AsyncIterator[psycopg.AsyncConnection]:
        if conn is None:
            async with self.pool.connection() as pooled, pooled.transaction():
                yield pooled
        else:
            if conn not in self._registered:
                await register_vector_async(conn)
                self._registered.add(conn)
            async with conn.transaction():
                yield conn

    async def run(self, stmt: Sql[Any], conn: Any = None) -> Any:
        """Run one literal statement for this client's tenant (in conn's transaction when given)."""
        check_params(stmt.params)
        try:
            if conn is None and PIPELINE:
                async with self.pool.connection() as c, c.cursor(row_factory=row_factory(stmt.row)) as cur:
                    try:
                        async with c.pipeline():
                            await c.execute(SET_TENANT, (self.tenant,))
                            await cur.execute(stmt.query, stmt.params)
                    except psycopg.Error:
                        forget_prepared(c)
                        raise
                    rows = await cur.fetchall()
            else:
                async with self._transaction(conn) as c:
                    await c.execute(SET_TENANT, (self.tenant,))
                    async with c.cursor(row_factory=row_factory(stmt.row)) as cur:
                        await cur.execute(stmt.query, stmt.params)
                        rows = await cur.fetchall()
        except psycopg.Error as exc:
            raise translate(exc) from exc
        return shape(stmt, rows)

    def _bind(self, fn: Callable[..., Sql[Any]]) -> Callable[..., Any]:
        async def method(*args: Any, **kwargs: Any) -> Any:
            return await self.run(fn(self, *args, **kwargs), kwargs.get("conn"))
        return method
