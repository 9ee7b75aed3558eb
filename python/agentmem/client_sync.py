"""Memory: the synchronous tenant-bound client.

Generated from client_async.py by scripts/async_to_sync.py: edit client_async.py and run the script,
never this file.
"""

from __future__ import annotations

import datetime as dt
import uuid
import weakref
from contextlib import contextmanager
from typing import Any, Iterator, Sequence, TypeVar

import psycopg
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from . import connections
from ._extraction import DEFAULT_CHAT_MODEL, FactExtractionError, chat_messages, parse_facts, reply_content, turn_time
from .calls_sync import Calls
from .connections import PROBE, SET_CLAIMS, SET_TENANT, connection_kwargs, forget_prepared, has_input, require_installed
from .embed import (CACHE_BATCH, Embedder, embed_prefixed, embed_as_given, import_ollama, merge_cached, misses_of,
                    prefixes_texts, require_embedder)
from .errors import InvalidTenant, UnknownModel, translate
from .params import aware, check_params
from .rows import CacheLookup, CacheStore, ExtractedFact, Fact, MessageHit, StoredMessage
from .statement import Sql

R = TypeVar("R")


def check_idle(conn: psycopg.Connection) -> None:
    """The pool's check on checkout, without a round trip when the socket is quiet.

    psycopg_pool's own check (an empty query) costs a round trip per call. A connection the
    server closed has its farewell or end of stream waiting on the socket; only then is the
    empty query sent, which raises, and the pool replaces the connection."""
    if conn.closed or has_input(conn):
        ConnectionPool.check_connection(conn)


class Statements(Calls):
    """The calls of a client, each returning its statement unrun (Memory.statements)."""

    def __init__(self, embedder: Any = None):
        self.embedder = embedder

    def run(self, stmt: Sql[R], conn: Any = None) -> Any:
        return stmt


class Memory(Calls):
    """asyncio tenant-bound client: each method runs its call(s) and returns the value."""

    def __init__(self, pool: Any, *, tenant: str, embedder: Embedder | None = None, claims: dict | None = None):
        if not tenant:
            raise InvalidTenant("a client needs a tenant: Memory(pool, tenant='...')")
        self.pool: ConnectionPool = pool
        self.tenant = tenant
        self.embedder: Embedder | None = embedder
        self.claims = claims
        self._registered: weakref.WeakSet = weakref.WeakSet()

    def for_tenant(self, tenant: str, *, claims: dict | None = None) -> Memory:
        """The same client (same pool and embedder) working on another tenant, with a verified token's
        claims set for each of its transactions when given (request.jwt.claims)."""
        return type(self)(self.pool, tenant=tenant, embedder=self.embedder, claims=claims)

    def statements(self) -> Calls:
        """The calls as statements, not run: ``mem.statements().store_message(...)`` is the
        ``Sql`` that ``run_together`` runs in one transaction with others."""
        return Statements(self.embedder)

    @classmethod
    def connect(cls, conninfo: str, *, tenant: str, embedder: Embedder | None = None, min_size: int = 1,
                max_size: int = 10, timeout: float = 10.0, check: bool = True,
                prepare: bool = False) -> Memory:
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
                with psycopg.Connection.connect(
                        conninfo, connect_timeout=max(2, round(timeout)), autocommit=True) as probe:
                    installed = (probe.execute(PROBE)).fetchone()
            except psycopg.Error as exc:
                raise translate(exc) from exc
            require_installed(installed)
        pool = ConnectionPool(conninfo, min_size=min_size, max_size=max_size, open=False,
                              configure=register_vector, check=check_idle,
                              timeout=timeout, reconnect_timeout=timeout,
                              kwargs=connection_kwargs(timeout, prepare))
        pool.open()
        client = cls(pool, tenant=tenant, embedder=embedder)
        if check:
            client._read_prefixes()
        return client

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the runner ---------------------------------------------------------------------------------

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

    def run(self, stmt: Sql[R], conn: Any = None) -> R:
        """Run one literal statement for this client's tenant (in conn's transaction when given)."""
        return (self.run_together([stmt], conn))[0]

    def run_together(self, stmts: Sequence[Sql[Any]], conn: Any = None) -> list[Any]:
        """Run literal statements for this client's tenant in one transaction, their values in order:
        one round trip on a pooled connection (set_tenant and the statements in one pipeline)."""
        for stmt in stmts:
            check_params(stmt.params)
        try:
            if conn is None and connections.PIPELINE:
                with self.pool.connection() as c:
                    cursors = [c.cursor(row_factory=stmt.row_factory()) for stmt in stmts]
                    try:
                        with c.pipeline():
                            if self.claims is not None:
                                c.execute(SET_CLAIMS, (Jsonb(self.claims),))
                            c.execute(SET_TENANT, (self.tenant,))
                            for cur, stmt in zip(cursors, stmts):
                                cur.execute(stmt.query, stmt.params)
                    except psycopg.Error:
                        forget_prepared(c)
                        raise
                    found = [cur.fetchall() for cur in cursors]
            else:
                with self._transaction(conn) as c:
                    if self.claims is not None:
                        c.execute(SET_CLAIMS, (Jsonb(self.claims),))
                    c.execute(SET_TENANT, (self.tenant,))
                    found = []
                    for stmt in stmts:
                        with c.cursor(row_factory=stmt.row_factory()) as cur:
                            cur.execute(stmt.query, stmt.params)
                            found.append(cur.fetchall())
        except psycopg.Error as exc:
            raise translate(exc) from exc
        return [stmt.result(rows) for stmt, rows in zip(stmts, found)]

    # -- embedding with the client's embedder -------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embeddings of texts to store, with the client's embedder (document prefix, cache first)."""
        return self._embed("document", list(texts))

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embeddings of search queries, with the client's embedder (query prefix, cache first)."""
        return self._embed("query", list(texts))

    def _embed(self, kind: str, texts: list[str]) -> list[list[float]]:
        """An embedder with ``embed(texts)`` (OllamaEmbedder) gets the registry's prefixes and the
        tenant's embedding cache from the client; any other is called as is (embed_documents /
        embed_query)."""
        embedder = require_embedder(self)
        if not prefixes_texts(embedder):
            return embed_as_given(embedder, kind, texts)
        if not texts:
            return []
        if embedder.document_prefix is None or embedder.query_prefix is None:
            embedder.use_registry_prefixes(self.get_model(embedder.model))
        prefixed = embedder.prefixed(kind, texts)
        if not embedder.use_cache:
            return embed_prefixed(embedder, prefixed)
        cached: list[list[float] | None] = []
        for i in range(0, len(prefixed), CACHE_BATCH):
            cached += self.embedding_cache_lookup(embedder.model, prefixed[i:i + CACHE_BATCH])
        misses = misses_of(prefixed, cached)
        fresh = embed_prefixed(embedder, misses) if misses else []
        for i in range(0, len(misses), CACHE_BATCH):
            self.embedding_cache_store(embedder.model, misses[i:i + CACHE_BATCH], fresh[i:i + CACHE_BATCH])
        return merge_cached(prefixed, cached, misses, fresh)

    def _read_prefixes(self) -> None:
        """Give the embedder the prefixes it lacks from the registry (get_model): at connect, else at its
        first use. An unregistered model is left to its first use to raise UnknownModel."""
        embedder = self.embedder
        if embedder is None or not prefixes_texts(embedder):
            return
        if embedder.document_prefix is None or embedder.query_prefix is None:
            try:
                embedder.use_registry_prefixes(self.get_model(embedder.model))
            except UnknownModel:
                pass

    # -- calls that embed text first ----------------------------------------------------------------

    def remember(self, conversation_id: uuid.UUID | str, role: str, content: str, *,
                 metadata: dict | None = None, conn: Any = None) -> StoredMessage:
        """Embed `content` (document prefix, embedding cache first) and store the message."""
        model = require_embedder(self).model
        vector = (self.embed_documents([content]))[0]
        return self.store_message(conversation_id, role, content, vector, model=model, metadata=metadata,
                                  conn=conn)

    def recall(self, user_id: str, query: str, k: int = 5, *,
               conversation_id: uuid.UUID | str | None = None, min_similarity: float | None = None,
               hybrid: bool = True, conn: Any = None) -> list[MessageHit]:
        """Embed `query` (query prefix) and search the user's past messages.

        hybrid (default): the query's words are searched too (full text), fused with the vector
        search (standardised scores, summed); hybrid=False searches by the embedding alone.
        """
        model = require_embedder(self).model
        vector = (self.embed_queries([query]))[0]
        return self.search_messages(user_id, vector, k, conversation_id=conversation_id,
                                    min_similarity=min_similarity, model=model,
                                    query_text=query if hybrid else None, conn=conn)

    def recall_facts_about(self, user_id: str, query: str, k: int = 5, *, hybrid: bool = True,
                           conn: Any = None) -> list[Fact]:
        """Embed `query` (query prefix) and recall the user's facts; hybrid as for recall."""
        model = require_embedder(self).model
        vector = (self.embed_queries([query]))[0]
        return self.recall_facts(user_id, vector, k, model, query_text=query if hybrid else None, conn=conn)

    def cached_answer(self, question: str, *, acl_hash: str = "", prompt_version: str = "",
                      llm_model: str = "", intent: str = "general", user_id: str | None = None,
                      conn: Any = None) -> CacheLookup:
        """Embed the question (query prefix, embedding cache first), then cache_lookup."""
        model = require_embedder(self).model
        vector = (self.embed_queries([question]))[0]
        return self.cache_lookup(question, vector, acl_hash=acl_hash, prompt_version=prompt_version,
                                 llm_model=llm_model, intent=intent, model=model, user_id=user_id, conn=conn)

    def store_answer(self, question: str, answer: str, *, source_ids: Sequence[str] = (),
                     intent: str = "general", acl_hash: str = "", prompt_version: str = "",
                     llm_model: str = "", user_id: str | None = None,
                     conversation_id: uuid.UUID | str | None = None, safe_to_share: bool = False,
                     ttl: dt.timedelta | None = None, conn: Any = None) -> CacheStore:
        """Embed the question exactly as cached_answer does, then cache_store."""
        model = require_embedder(self).model
        vector = (self.embed_queries([question]))[0]
        return self.cache_store(question, vector, answer, source_ids=source_ids, intent=intent,
                                acl_hash=acl_hash, prompt_version=prompt_version, llm_model=llm_model,
                                model=model, user_id=user_id, conversation_id=conversation_id,
                                safe_to_share=safe_to_share, ttl=ttl, conn=conn)

    def extract_facts(self, turn: Any, user_id: str, *, source_message_ids: Sequence[uuid.UUID | str] = (),
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
            response = ollama.Client(host=host).chat(
                model=chat_model, messages=chat_messages(turn, occurred_at), format="json",
                options={"temperature": 0})
        except (ollama.ResponseError, ConnectionError, OSError) as exc:
            raise FactExtractionError(f"the chat call to {chat_model} failed: {exc}") from exc
        facts = parse_facts(reply_content(response), aware(occurred_at) or turn_time(turn))
        if not facts:
            return []
        vectors = self.embed_documents([f["fact"] for f in facts])
        model = model or getattr(self.embedder, "model", None)
        out = []
        with self._transaction(conn) as c:
            for f, vec in zip(facts, vectors):
                r = self.upsert_fact(user_id, f["subject"], f["fact"], vec, source_message_ids, model,
                                     valid_from=f.get("valid_from"), conn=c)
                out.append(ExtractedFact(f["subject"], f["fact"], r.fact_id, r.action, r.similarity))
        return out
