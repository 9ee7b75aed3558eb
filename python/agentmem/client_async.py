"""AsyncMemory: the asyncio tenant-bound client. ``client_sync.py`` (Memory) is generated from this file.

A client is its calls (``calls_async.AsyncCalls``: one method per public SQL function the
application role may call), the methods that embed text first (here: ``remember``, ``recall``,
``recall_facts_about``, ``cached_answer``, ``store_answer``, ``extract_facts``, and
``embed_documents`` / ``embed_queries``), and the runner (here): every call is sent behind
``agentmem.set_tenant(tenant_id => %s, local => true)`` in one pipeline on an autocommit
connection: the statements are one implicit transaction (everything up to the protocol's Sync), so
the tenant ends with the call and a pooled connection never carries one request's tenant into the
next. One round trip per call (bench/results/driver_overhead.md). If set_tenant fails, the call is
not run. Pass ``conn=`` to run a call inside a transaction of your own (a savepoint is used). With
a libpq older than 14 (no pipeline mode) each call runs in a transaction of its own instead.

``claims`` (a dict): a verified token's claims, set as ``request.jwt.claims`` for the transaction
(``set_config(..., true)``) before the tenant, as PostgREST does, so that an installation in the
``jwt`` binding mode checks the tenant against them (docs/security.md). ``statements()`` gives the
calls as unrun statements for ``run_together`` (several calls in one transaction, one round trip).

The DBA's operations belong to no tenant: see ``admin.Admin``.
"""

from __future__ import annotations

import datetime as dt
import uuid
import weakref
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Sequence, TypeVar

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from . import connections
from ._extraction import DEFAULT_CHAT_MODEL, FactExtractionError, chat_messages, parse_facts, reply_content, turn_time
from .calls_async import AsyncCalls
from .connections import PROBE, SET_CLAIMS, SET_TENANT, connection_kwargs, forget_prepared, has_input, require_installed
from .embed import (CACHE_BATCH, Embedder, aembed_prefixed, embed_as_given, import_ollama, merge_cached, misses_of,
                    prefixes_texts, require_embedder)
from .errors import InvalidTenant, UnknownModel, translate
from .params import aware, check_params
from .rows import CacheLookup, CacheStore, ExtractedFact, Fact, MessageHit, StoredMessage
from .statement import Sql

R = TypeVar("R")


async def acheck_idle(conn: psycopg.AsyncConnection) -> None:
    """The pool's check on checkout, without a round trip when the socket is quiet.

    psycopg_pool's own check (an empty query) costs a round trip per call. A connection the
    server closed has its farewell or end of stream waiting on the socket; only then is the
    empty query sent, which raises, and the pool replaces the connection."""
    if conn.closed or has_input(conn):
        await AsyncConnectionPool.check_connection(conn)


class AsyncStatements(AsyncCalls):
    """The calls of a client, each returning its statement unrun (AsyncMemory.statements)."""

    def __init__(self, embedder: Any = None):
        self.embedder = embedder

    async def run(self, stmt: Sql[R], conn: Any = None) -> Any:
        return stmt


class AsyncMemory(AsyncCalls):
    """asyncio tenant-bound client: each method runs its call(s) and returns the value."""

    def __init__(self, pool: Any, *, tenant: str, embedder: Embedder | None = None, claims: dict | None = None):
        if not tenant:
            raise InvalidTenant("a client needs a tenant: Memory(pool, tenant='...')")
        self.pool: AsyncConnectionPool = pool
        self.tenant = tenant
        self.embedder: Embedder | None = embedder
        self.claims = claims
        self._registered: weakref.WeakSet = weakref.WeakSet()

    def for_tenant(self, tenant: str, *, claims: dict | None = None) -> AsyncMemory:
        """The same client (same pool and embedder) working on another tenant, with a verified token's
        claims set for each of its transactions when given (request.jwt.claims)."""
        return type(self)(self.pool, tenant=tenant, embedder=self.embedder, claims=claims)

    def statements(self) -> AsyncCalls:
        """The calls as statements, not run: ``await mem.statements().store_message(...)`` is the
        ``Sql`` that ``run_together`` runs in one transaction with others."""
        return AsyncStatements(self.embedder)

    @classmethod
    async def connect(cls, conninfo: str, *, tenant: str, embedder: Embedder | None = None, min_size: int = 1,
                      max_size: int = 10, timeout: float = 10.0, check: bool = True,
                      prepare: bool = False) -> AsyncMemory:
        """Open a pool. ``timeout`` (seconds) bounds how long a call waits for a connection
        (and each connection attempt); past it the call raises ``ConnectionLost``. Connections
        are checked when taken from the pool (check_idle), so after a server restart the next call works:
        the pool's reconnection attempts (backing off 1, 2, 4 s ...) give up after ``timeout``
        too, so the next call starts a fresh attempt instead of waiting out a long back-off.

        ``check`` (default): connect once first, so that a wrong host, port, database or password
        fails here (``ConnectionLost``, or psycopg's error for a refused login) and a database
        without agentmem raises ``PrerequisiteMissing``, instead of the first call failing; and
        read the embedder's prefixes from the registry, so that no call waits for them.
        ``check=False`` opens the pool without waiting (e.g. to start before the server does).

        ``prepare`` (default False): no server-side prepared statements (psycopg's
        ``prepare_threshold=None``), so the client works behind a transaction pooler (PgBouncer in
        transaction mode, Supavisor, RDS Proxy), where the next transaction may land on a server
        connection that never saw the statement. ``prepare=True`` keeps psycopg's default (a statement
        run five times on a connection is prepared there): only on a direct connection or a session
        pool; docs/pooling.md gives what each choice costs."""
        if check:
            try:
                async with await psycopg.AsyncConnection.connect(
                        conninfo, connect_timeout=max(2, round(timeout)), autocommit=True) as probe:
                    installed = await (await probe.execute(PROBE)).fetchone()
            except psycopg.Error as exc:
                raise translate(exc) from exc
            require_installed(installed)
        pool = AsyncConnectionPool(conninfo, min_size=min_size, max_size=max_size, open=False,
                                   configure=register_vector_async, check=acheck_idle,
                                   timeout=timeout, reconnect_timeout=timeout,
                                   kwargs=connection_kwargs(timeout, prepare))
        await pool.open()
        client = cls(pool, tenant=tenant, embedder=embedder)
        if check:
            await client._read_prefixes()
        return client

    async def close(self) -> None:
        await self.pool.close()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -- the runner ---------------------------------------------------------------------------------

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

    async def run(self, stmt: Sql[R], conn: Any = None) -> R:
        """Run one literal statement for this client's tenant (in conn's transaction when given)."""
        return (await self.run_together([stmt], conn))[0]

    async def run_together(self, stmts: Sequence[Sql[Any]], conn: Any = None) -> list[Any]:
        """Run literal statements for this client's tenant in one transaction, their values in order:
        one round trip on a pooled connection (set_tenant and the statements in one pipeline)."""
        for stmt in stmts:
            check_params(stmt.params)
        try:
            if conn is None and connections.PIPELINE:
                async with self.pool.connection() as c:
                    cursors = [c.cursor(row_factory=stmt.row_factory()) for stmt in stmts]
                    try:
                        async with c.pipeline():
                            if self.claims is not None:
                                await c.execute(SET_CLAIMS, (Jsonb(self.claims),))
                            await c.execute(SET_TENANT, (self.tenant,))
                            for cur, stmt in zip(cursors, stmts):
                                await cur.execute(stmt.query, stmt.params)
                    except psycopg.Error:
                        forget_prepared(c)
                        raise
                    found = [await cur.fetchall() for cur in cursors]
            else:
                async with self._transaction(conn) as c:
                    if self.claims is not None:
                        await c.execute(SET_CLAIMS, (Jsonb(self.claims),))
                    await c.execute(SET_TENANT, (self.tenant,))
                    found = []
                    for stmt in stmts:
                        async with c.cursor(row_factory=stmt.row_factory()) as cur:
                            await cur.execute(stmt.query, stmt.params)
                            found.append(await cur.fetchall())
        except psycopg.Error as exc:
            raise translate(exc) from exc
        return [stmt.result(rows) for stmt, rows in zip(stmts, found)]

    # -- embedding with the client's embedder -------------------------------------------------------

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embeddings of texts to store, with the client's embedder (document prefix, cache first)."""
        return await self._embed("document", list(texts))

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embeddings of search queries, with the client's embedder (query prefix, cache first)."""
        return await self._embed("query", list(texts))

    async def _embed(self, kind: str, texts: list[str]) -> list[list[float]]:
        """An embedder with ``embed(texts)`` (OllamaEmbedder) gets the registry's prefixes and the
        tenant's embedding cache from the client; any other is called as is (embed_documents /
        embed_query)."""
        embedder = require_embedder(self)
        if not prefixes_texts(embedder):
            return embed_as_given(embedder, kind, texts)
        if not texts:
            return []
        if embedder.document_prefix is None or embedder.query_prefix is None:
            embedder.use_registry_prefixes(await self.get_model(embedder.model))
        prefixed = embedder.prefixed(kind, texts)
        if not embedder.use_cache:
            return await aembed_prefixed(embedder, prefixed)
        cached: list[list[float] | None] = []
        for i in range(0, len(prefixed), CACHE_BATCH):
            cached += await self.embedding_cache_lookup(embedder.model, prefixed[i:i + CACHE_BATCH])
        misses = misses_of(prefixed, cached)
        fresh = await aembed_prefixed(embedder, misses) if misses else []
        for i in range(0, len(misses), CACHE_BATCH):
            await self.embedding_cache_store(embedder.model, misses[i:i + CACHE_BATCH], fresh[i:i + CACHE_BATCH])
        return merge_cached(prefixed, cached, misses, fresh)

    async def _read_prefixes(self) -> None:
        """Give the embedder the prefixes it lacks from the registry (get_model): at connect, else at its
        first use. An unregistered model is left to its first use to raise UnknownModel."""
        embedder = self.embedder
        if embedder is None or not prefixes_texts(embedder):
            return
        if embedder.document_prefix is None or embedder.query_prefix is None:
            try:
                embedder.use_registry_prefixes(await self.get_model(embedder.model))
            except UnknownModel:
                pass

    # -- calls that embed text first ----------------------------------------------------------------

    async def remember(self, conversation_id: uuid.UUID | str, role: str, content: str, *,
                       metadata: dict | None = None, conn: Any = None) -> StoredMessage:
        """Embed `content` (document prefix, embedding cache first) and store the message."""
        model = require_embedder(self).model
        vector = (await self.embed_documents([content]))[0]
        return await self.store_message(conversation_id, role, content, vector, model=model, metadata=metadata,
                                        conn=conn)

    async def recall(self, user_id: str, query: str, k: int = 5, *,
                     conversation_id: uuid.UUID | str | None = None, min_similarity: float | None = None,
                     hybrid: bool = True, conn: Any = None) -> list[MessageHit]:
        """Embed `query` (query prefix) and search the user's past messages.

        hybrid (default): the query's words are searched too (full text), fused with the vector
        search (standardised scores, summed); hybrid=False searches by the embedding alone.
        """
        model = require_embedder(self).model
        vector = (await self.embed_queries([query]))[0]
        return await self.search_messages(user_id, vector, k, conversation_id=conversation_id,
                                          min_similarity=min_similarity, model=model,
                                          query_text=query if hybrid else None, conn=conn)

    async def recall_facts_about(self, user_id: str, query: str, k: int = 5, *, hybrid: bool = True,
                                 conn: Any = None) -> list[Fact]:
        """Embed `query` (query prefix) and recall the user's facts; hybrid as for recall."""
        model = require_embedder(self).model
        vector = (await self.embed_queries([query]))[0]
        return await self.recall_facts(user_id, vector, k, model, query_text=query if hybrid else None, conn=conn)

    async def cached_answer(self, question: str, *, acl_hash: str = "", prompt_version: str = "",
                            llm_model: str = "", intent: str = "general", user_id: str | None = None,
                            conn: Any = None) -> CacheLookup:
        """Embed the question (query prefix, embedding cache first), then cache_lookup."""
        model = require_embedder(self).model
        vector = (await self.embed_queries([question]))[0]
        return await self.cache_lookup(question, vector, acl_hash=acl_hash, prompt_version=prompt_version,
                                       llm_model=llm_model, intent=intent, model=model, user_id=user_id, conn=conn)

    async def store_answer(self, question: str, answer: str, *, source_ids: Sequence[str] = (),
                           intent: str = "general", acl_hash: str = "", prompt_version: str = "",
                           llm_model: str = "", user_id: str | None = None,
                           conversation_id: uuid.UUID | str | None = None, safe_to_share: bool = False,
                           ttl: dt.timedelta | None = None, conn: Any = None) -> CacheStore:
        """Embed the question exactly as cached_answer does, then cache_store."""
        model = require_embedder(self).model
        vector = (await self.embed_queries([question]))[0]
        return await self.cache_store(question, vector, answer, source_ids=source_ids, intent=intent,
                                      acl_hash=acl_hash, prompt_version=prompt_version, llm_model=llm_model,
                                      model=model, user_id=user_id, conversation_id=conversation_id,
                                      safe_to_share=safe_to_share, ttl=ttl, conn=conn)

    async def extract_facts(self, turn: Any, user_id: str, *, source_message_ids: Sequence[uuid.UUID | str] = (),
                            chat_model: str = DEFAULT_CHAT_MODEL, ollama_host: str | None = None,
                            model: str | None = None, occurred_at: dt.datetime | None = None,
                            conn: Any = None) -> list[ExtractedFact]:
        """Extract the user's facts from one turn (one chat call), embed and upsert them in one transaction.

        The model is told when the turn happened (occurred_at, else that of the turn's last message
        when it carries one) so that "since last week" becomes a date: a fact's valid_from from the
        reply is checked (an ISO date, not after the turn) and passed to upsert_fact; without one the
        fact is valid from its source messages' time.

        Returns one ExtractedFact per fact (with the upsert's action). Raises
        FactExtractionError, storing nothing, when the reply is not a valid list
        of {"subject", "fact"} objects.
        """
        ollama = import_ollama()
        host = ollama_host or getattr(self.embedder, "host", None)
        try:
            response = await ollama.AsyncClient(host=host).chat(
                model=chat_model, messages=chat_messages(turn, occurred_at), format="json",
                options={"temperature": 0})
        except (ollama.ResponseError, ConnectionError, OSError) as exc:
            raise FactExtractionError(f"the chat call to {chat_model} failed: {exc}") from exc
        facts = parse_facts(reply_content(response), aware(occurred_at) or turn_time(turn))
        if not facts:
            return []
        vectors = await self.embed_documents([f["fact"] for f in facts])
        model = model or getattr(self.embedder, "model", None)
        out = []
        async with self._transaction(conn) as c:
            for f, vec in zip(facts, vectors):
                r = await self.upsert_fact(user_id, f["subject"], f["fact"], vec, source_message_ids, model,
                                           valid_from=f.get("valid_from"), conn=c)
                out.append(ExtractedFact(f["subject"], f["fact"], r.fact_id, r.action, r.similarity))
        return out
