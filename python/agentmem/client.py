"""The thin driver: one method per SQL function, the tenant set per transaction.

``Memory`` (sync, over a ``psycopg_pool.ConnectionPool``) and ``AsyncMemory``
(asyncio, over an ``AsyncConnectionPool``) share every API method: the methods
live in feature mixins (``_conversations``, ``_cache``, ``_facts``) and each is
one literal ``select ... from agentmem.fn(name => %s)`` handed to ``_call``,
which the sync client runs at once and the async client returns as a coroutine.

Every call runs in a transaction that starts with
``agentmem.set_tenant(tenant_id => %s, local => true)``, so a pooled
connection never carries one request's tenant into the next. Pass ``conn=`` to
run a call inside a transaction of your own (a savepoint is used).
"""

from __future__ import annotations

import weakref
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from pgvector.psycopg import register_vector, register_vector_async
from psycopg.rows import class_row, dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ._cache import CacheAPI
from ._conversations import ConversationAPI
from ._facts import FactsAPI
from ._adapt import check_params
from .errors import InvalidTenant, translate

SET_TENANT = "select agentmem.set_tenant(tenant_id => %s, local => true)"


def _row_factory(row: Any):
    if row is None:
        return dict_row
    return class_row(row)


def _shape(rows: list, fetch: str):
    """The rows of a call as the method wants them: all, one (or None), a scalar, or nothing."""
    if fetch == "none":
        return None
    if fetch == "all":
        return rows
    first = rows[0] if rows else None
    if fetch == "scalar" and first is not None:
        return next(iter(first.values())) if isinstance(first, dict) else first
    return first


class _Base:
    def __init__(self, pool, *, tenant: str, embedder=None):
        if not tenant:
            raise InvalidTenant("a client needs a tenant: Memory(pool, tenant='...')")
        self.pool = pool
        self.tenant = tenant
        self.embedder = embedder

    def for_tenant(self, tenant: str):
        """The same client (same pool and embedder) working on another tenant."""
        return type(self)(self.pool, tenant=tenant, embedder=self.embedder)


class Memory(ConversationAPI, CacheAPI, FactsAPI, _Base):
    """Synchronous client. ``Memory.connect(url, tenant=...)`` opens its own pool."""

    _registered: "weakref.WeakSet[psycopg.Connection]"

    def __init__(self, pool: ConnectionPool, *, tenant: str, embedder=None):
        super().__init__(pool, tenant=tenant, embedder=embedder)
        self._registered = weakref.WeakSet()

    @classmethod
    def connect(cls, conninfo: str, *, tenant: str, embedder=None, min_size: int = 1,
                max_size: int = 10, timeout: float = 10.0) -> "Memory":
        """Open a pool. ``timeout`` (seconds) bounds how long a call waits for a connection
        (and each connection attempt); past it the call raises ``ConnectionLost``. Connections
        are checked when taken from the pool, so after a server restart the next call works:
        the pool's reconnection attempts (backing off 1, 2, 4 s ...) give up after ``timeout``
        too, so the next call starts a fresh attempt instead of waiting out a long back-off."""
        pool = ConnectionPool(conninfo, min_size=min_size, max_size=max_size, open=True,
                              configure=register_vector, check=ConnectionPool.check_connection,
                              timeout=timeout, reconnect_timeout=timeout,
                              kwargs={"connect_timeout": max(2, round(timeout))})
        return cls(pool, tenant=tenant, embedder=embedder)

    def close(self) -> None:
        self.pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextmanager
    def _transaction(self, conn: psycopg.Connection | None):
        if conn is None:
            with self.pool.connection() as pooled, pooled.transaction():
                yield pooled
        else:
            if conn not in self._registered:
                register_vector(conn)
                self._registered.add(conn)
            with conn.transaction():
                yield conn

    def _call(self, query: str, params: Any = None, *, fetch: str = "all", row: Any = None,
              conn: psycopg.Connection | None = None, post=None):
        check_params(params)
        try:
            with self._transaction(conn) as c:
                c.execute(SET_TENANT, (self.tenant,))
                with c.cursor(row_factory=_row_factory(row)) as cur:
                    cur.execute(query, params)
                    result = _shape(cur.fetchall(), fetch)
        except psycopg.Error as exc:
            raise translate(exc) from exc
        return post(result) if post else result


class AsyncMemory(ConversationAPI, CacheAPI, FactsAPI, _Base):
    """asyncio client: the same methods as Memory, each awaited."""

    def __init__(self, pool: AsyncConnectionPool, *, tenant: str, embedder=None):
        super().__init__(pool, tenant=tenant, embedder=embedder)
        self._registered = weakref.WeakSet()

    @classmethod
    async def connect(cls, conninfo: str, *, tenant: str, embedder=None, min_size: int = 1,
                      max_size: int = 10, timeout: float = 10.0) -> "AsyncMemory":
        """As Memory.connect: ``timeout`` bounds the wait for a connection (ConnectionLost past
        it); connections are checked when taken from the pool."""
        pool = AsyncConnectionPool(conninfo, min_size=min_size, max_size=max_size, open=False,
                                   configure=register_vector_async,
                                   check=AsyncConnectionPool.check_connection,
                                   timeout=timeout, reconnect_timeout=timeout,
                                   kwargs={"connect_timeout": max(2, round(timeout))})
        await pool.open()
        return cls(pool, tenant=tenant, embedder=embedder)

    async def close(self) -> None:
        await self.pool.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    @asynccontextmanager
    async def _transaction(self, conn: psycopg.AsyncConnection | None):
        if conn is None:
            async with self.pool.connection() as pooled, pooled.transaction():
                yield pooled
        else:
            if conn not in self._registered:
                await register_vector_async(conn)
                self._registered.add(conn)
            async with conn.transaction():
                yield conn

    async def _call(self, query: str, params: Any = None, *, fetch: str = "all", row: Any = None,
                    conn: psycopg.AsyncConnection | None = None, post=None):
        check_params(params)
        try:
            async with self._transaction(conn) as c:
                await c.execute(SET_TENANT, (self.tenant,))
                async with c.cursor(row_factory=_row_factory(row)) as cur:
                    await cur.execute(query, params)
                    result = _shape(await cur.fetchall(), fetch)
        except psycopg.Error as exc:
            raise translate(exc) from exc
        return post(result) if post else result
