"""The conveniences: embed text with the client's embedder, then make literal calls.

``remember`` (store_message), ``recall`` (search_messages) and
``recall_facts_about`` (recall_facts), both hybrid by default (the query's words
searched too), ``cached_answer`` (cache_lookup), ``store_answer`` (cache_store)
and ``extract_facts`` (one Ollama chat call, then upsert_fact per fact in one
transaction). The embedder
is anything with ``embed_documents(texts)`` / ``embed_query(text)`` and a
``model`` naming a registered model; ``OllamaEmbedder`` also uses the client's
embedding cache and model prefixes. Each has a sync body (``Conveniences``, on
``Memory``) and an async one (``AsyncConveniences``, on ``AsyncMemory``) that
embeds without blocking the event loop.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, Sequence

from ._adapt import aembed_texts, aware, embed_texts, require_embedder
from ._extraction import (DEFAULT_CHAT_MODEL, FactExtractionError, chat_messages, parse_facts, reply_content,
                          turn_time)
from .calls import AsyncClient, Calls, SyncClient
from .rows import CacheLookup, CacheStore, ExtractedFact, Fact, MessageHit, StoredMessage


def _chat_error(chat_model: str, exc: Exception) -> FactExtractionError:
    return FactExtractionError(f"the chat call to {chat_model} failed: {exc}")


class Conveniences(Calls, SyncClient):
    """Sync methods that embed text with the client's embedder, then make literal calls."""

    embedder: Any

    def remember(self, conversation_id: uuid.UUID | str, role: str, content: str, *,
                 metadata: dict | None = None, conn: Any = None) -> StoredMessage:
        """Embed `content` (document prefix, embedding cache first) and store the message."""
        model = require_embedder(self).model
        vector = embed_texts(self, "embed_documents", [content])[0]
        return self.store_message(conversation_id, role, content, vector, model=model, metadata=metadata, conn=conn)

    def recall(self, user_id: str, query: str, k: int = 5, *, conversation_id: uuid.UUID | str | None = None,
               min_similarity: float | None = None, hybrid: bool = True, conn: Any = None) -> list[MessageHit]:
        """Embed `query` (query prefix) and search the user's past messages.

        hybrid (default): the query's words are searched too (full text), fused with the vector
        search by reciprocal rank; hybrid=False searches by the embedding alone.
        """
        model = require_embedder(self).model
        vector = embed_texts(self, "embed_queries", [query])[0]
        return self.search_messages(user_id, vector, k, conversation_id=conversation_id,
                                    min_similarity=min_similarity, model=model,
                                    query_text=query if hybrid else None, conn=conn)

    def recall_facts_about(self, user_id: str, query: str, k: int = 5, *, hybrid: bool = True,
                           conn: Any = None) -> list[Fact]:
        """Embed `query` (query prefix) and recall the user's facts; hybrid as for recall."""
        model = require_embedder(self).model
        vector = embed_texts(self, "embed_queries", [query])[0]
        return self.recall_facts(user_id, vector, k, model, query_text=query if hybrid else None, conn=conn)

    def cached_answer(self, question: str, *, acl_hash: str = "", prompt_version: str = "", llm_model: str = "",
                      intent: str = "general", user_id: str | None = None, conn: Any = None) -> CacheLookup:
        """Embed the question (query prefix, embedding cache first), then cache_lookup."""
        model = require_embedder(self).model
        vector = embed_texts(self, "embed_queries", [question])[0]
        return self.cache_lookup(question, vector, acl_hash=acl_hash, prompt_version=prompt_version,
                                 llm_model=llm_model, intent=intent, model=model, user_id=user_id, conn=conn)

    def store_answer(self, question: str, answer: str, *, source_ids: Sequence[str] = (), intent: str = "general",
                     acl_hash: str = "", prompt_version: str = "", llm_model: str = "", user_id: str | None = None,
                     conversation_id: uuid.UUID | str | None = None, safe_to_share: bool = False,
                     ttl: dt.timedelta | None = None, conn: Any = None) -> CacheStore:
        """Embed the question exactly as cached_answer does, then cache_store."""
        model = require_embedder(self).model
        vector = embed_texts(self, "embed_queries", [question])[0]
        return self.cache_store(question, vector, answer, source_ids=source_ids, intent=intent, acl_hash=acl_hash,
                                prompt_version=prompt_version, llm_model=llm_model, model=model, user_id=user_id,
                                conversation_id=conversation_id, safe_to_share=safe_to_share, ttl=ttl, conn=conn)

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
        import ollama
        host = ollama_host or getattr(self.embedder, "host", None)
        try:
            response = ollama.Client(host=host).chat(model=chat_model, messages=chat_messages(turn, occurred_at),
                                                     format="json", options={"temperature": 0})
        except (ollama.ResponseError, ConnectionError, OSError) as exc:
            raise _chat_error(chat_model, exc) from exc
        facts = parse_facts(reply_content(response), aware(occurred_at) or turn_time(turn))
        if not facts:
            return []
        vectors = embed_texts(self, "embed_documents", [f["fact"] for f in facts])
        model = model or getattr(self.embedder, "model", None)
        out = []
        with self._transaction(conn) as c:  # type: ignore[attr-defined]
            for f, vec in zip(facts, vectors):
                r = self.upsert_fact(user_id, f["subject"], f["fact"], vec, source_message_ids, model,
                                     valid_from=f.get("valid_from"), conn=c)
                out.append(ExtractedFact(f["subject"], f["fact"], r.fact_id, r.action, r.similarity))
        return out


class AsyncConveniences(Calls, AsyncClient):
    """Async methods that embed text with the client's embedder, then make literal calls."""

    embedder: Any

    async def remember(self, conversation_id: uuid.UUID | str, role: str, content: str, *,
                       metadata: dict | None = None, conn: Any = None) -> StoredMessage:
        """Embed `content` (document prefix, embedding cache first) and store the message."""
        model = require_embedder(self).model
        vector = (await aembed_texts(self, "embed_documents", [content]))[0]
        return await self.store_message(conversation_id, role, content, vector, model=model, metadata=metadata,
                                        conn=conn)

    async def recall(self, user_id: str, query: str, k: int = 5, *,
                     conversation_id: uuid.UUID | str | None = None, min_similarity: float | None = None,
                     hybrid: bool = True, conn: Any = None) -> list[MessageHit]:
        """Embed `query` (query prefix) and search the user's past messages; hybrid as for Memory.recall."""
        model = require_embedder(self).model
        vector = (await aembed_texts(self, "embed_queries", [query]))[0]
        return await self.search_messages(user_id, vector, k, conversation_id=conversation_id,
                                          min_similarity=min_similarity, model=model,
                                          query_text=query if hybrid else None, conn=conn)

    async def recall_facts_about(self, user_id: str, query: str, k: int = 5, *, hybrid: bool = True,
                                 conn: Any = None) -> list[Fact]:
        """Embed `query` (query prefix) and recall the user's facts; hybrid as for Memory.recall."""
        model = require_embedder(self).model
        vector = (await aembed_texts(self, "embed_queries", [query]))[0]
        return await self.recall_facts(user_id, vector, k, model, query_text=query if hybrid else None, conn=conn)

    async def cached_answer(self, question: str, *, acl_hash: str = "", prompt_version: str = "",
                            llm_model: str = "", intent: str = "general", user_id: str | None = None,
                            conn: Any = None) -> CacheLookup:
        """Embed the question (query prefix, embedding cache first), then cache_lookup."""
        model = require_embedder(self).model
        vector = (await aembed_texts(self, "embed_queries", [question]))[0]
        return await self.cache_lookup(question, vector, acl_hash=acl_hash, prompt_version=prompt_version,
                                       llm_model=llm_model, intent=intent, model=model, user_id=user_id, conn=conn)

    async def store_answer(self, question: str, answer: str, *, source_ids: Sequence[str] = (),
                           intent: str = "general", acl_hash: str = "", prompt_version: str = "",
                           llm_model: str = "", user_id: str | None = None,
                           conversation_id: uuid.UUID | str | None = None, safe_to_share: bool = False,
                           ttl: dt.timedelta | None = None, conn: Any = None) -> CacheStore:
        """Embed the question exactly as cached_answer does, then cache_store."""
        model = require_embedder(self).model
        vector = (await aembed_texts(self, "embed_queries", [question]))[0]
        return await self.cache_store(question, vector, answer, source_ids=source_ids, intent=intent,
                                      acl_hash=acl_hash, prompt_version=prompt_version, llm_model=llm_model,
                                      model=model, user_id=user_id, conversation_id=conversation_id,
                                      safe_to_share=safe_to_share, ttl=ttl, conn=conn)

    async def extract_facts(self, turn: Any, user_id: str, *, source_message_ids: Sequence[uuid.UUID | str] = (),
                            chat_model: str = DEFAULT_CHAT_MODEL, ollama_host: str | None = None,
                            model: str | None = None, occurred_at: dt.datetime | None = None,
                            conn: Any = None) -> list[ExtractedFact]:
        """As Memory.extract_facts, with the chat call and the embeddings awaited."""
        import ollama
        host = ollama_host or getattr(self.embedder, "host", None)
        try:
            response = await ollama.AsyncClient(host=host).chat(
                model=chat_model, messages=chat_messages(turn, occurred_at), format="json",
                options={"temperature": 0})
        except (ollama.ResponseError, ConnectionError, OSError) as exc:
            raise _chat_error(chat_model, exc) from exc
        facts = parse_facts(reply_content(response), aware(occurred_at) or turn_time(turn))
        if not facts:
            return []
        vectors = await aembed_texts(self, "embed_documents", [f["fact"] for f in facts])
        model = model or getattr(self.embedder, "model", None)
        out = []
        async with self._transaction(conn) as c:  # type: ignore[attr-defined]
            for f, vec in zip(facts, vectors):
                r = await self.upsert_fact(user_id, f["subject"], f["fact"], vec, source_message_ids, model,
                                           valid_from=f.get("valid_from"), conn=c)
                out.append(ExtractedFact(f["subject"], f["fact"], r.fact_id, r.action, r.similarity))
        return out
