"""Conversation memory (issue 3): driver methods, one literal call per SQL function.

Each method returns ``self._call(...)``, which the sync client runs at once and the
async client returns as a coroutine; see client.py. ``remember`` and ``recall``
embed first (with ``self.embedder``), so they have a sync and an async body.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence
from uuid import UUID

from ._adapt import aembed_texts, as_vector, as_vectors, embed_texts, is_async, require_embedder


@dataclass(frozen=True)
class StoredMessage:
    message_id: UUID
    message_index: int


@dataclass(frozen=True)
class Message:
    message_id: UUID
    conversation_id: UUID
    message_index: int
    role: str
    content: str
    metadata: dict
    created_at: datetime


@dataclass(frozen=True)
class MessageHit(Message):
    similarity: float | None      # None unless the vector branch found it
    vector_rank: int | None       # rank in each branch (1 = best), None where it did not find it
    text_rank: int | None
    score: float                  # fused score: sum of 1 / (rrf_k + rank) over the branches


@dataclass(frozen=True)
class WindowMessage:
    window_rank: int
    conversation_id: UUID
    message_id: UUID
    message_index: int
    role: str
    content: str
    metadata: dict
    created_at: datetime
    is_hit: bool
    similarity: float | None
    window_similarity: float | None
    vector_rank: int | None
    text_rank: int | None
    score: float | None
    window_score: float


@dataclass(frozen=True)
class ContextItem:
    kind: str  # 'summary' or 'message'
    message_id: UUID | None
    message_index: int
    role: str
    content: str
    metadata: dict
    created_at: datetime


@dataclass(frozen=True)
class TopicShift:
    overlap: float | None       # Jaccard overlap of the last two recorded turns (None with fewer)
    shifted: bool               # overlap < threshold
    turns_compared: int         # 0, 1 or 2 recorded turns found
    since_message_index: int | None  # the last recorded turn's user message


def _as_json(value: Any):
    from psycopg.types.json import Jsonb
    return None if value is None else Jsonb(value)


def _cache_rows(rows):
    """embedding_cache_lookup rows -> one numpy embedding (or None for a miss) per text, in order."""
    return [None if r["embedding"] is None else r["embedding"].to_numpy() for r in rows]


class ConversationAPI:
    # -- one literal call per SQL function -------------------------------------------------

    def start_conversation(self, user_id: str, title: str | None = None, metadata: dict | None = None,
                           *, conn=None):
        return self._call("select agentmem.start_conversation(user_id => %s, title => %s, metadata => %s)",
                          (user_id, title, _as_json(metadata or {})), fetch="scalar", conn=conn)

    def store_message(self, conversation_id: UUID, role: str, content: str, embedding, *,
                      model: str | None = None, metadata: dict | None = None, conn=None):
        return self._call("select * from agentmem.store_message(conversation_id => %s, role => %s, "
                          "content => %s, embedding => %s, model => %s, metadata => %s)",
                          (conversation_id, role, content, as_vector(embedding), model, _as_json(metadata or {})),
                          fetch="one", row=StoredMessage, conn=conn)

    def store_messages(self, conversation_id: UUID, roles: Sequence[str], contents: Sequence[str],
                       embeddings: Sequence, *, model: str | None = None,
                       metadata: Sequence[dict] | None = None, conn=None):
        return self._call("select * from agentmem.store_messages(conversation_id => %s, roles => %s, "
                          "contents => %s, embeddings => %s, model => %s, metadata => %s::jsonb[])",
                          (conversation_id, list(roles), list(contents), as_vectors(embeddings), model,
                           None if metadata is None else [_as_json(m) for m in metadata]),
                          fetch="all", row=StoredMessage, conn=conn)

    def recent_messages(self, conversation_id: UUID, n: int = 20, *, conn=None):
        return self._call("select * from agentmem.recent_messages(conversation_id => %s, n => %s)",
                          (conversation_id, n), fetch="all", row=Message, conn=conn)

    def search_messages(self, user_id: str, query_embedding=None, k: int = 5, *,
                        conversation_id: UUID | None = None, min_similarity: float | None = None,
                        model: str | None = None, query_text: str | None = None, candidate_pool: int = 60,
                        rrf_k: int = 60, conn=None):
        return self._call("select * from agentmem.search_messages(user_id => %s, query_embedding => %s, "
                          "k => %s, conversation_id => %s, min_similarity => %s::real, model => %s, "
                          "query_text => %s, candidate_pool => %s, rrf_k => %s)",
                          (user_id, as_vector(query_embedding), k, conversation_id, min_similarity, model,
                           query_text, candidate_pool, rrf_k),
                          fetch="all", row=MessageHit, conn=conn)

    def context_window(self, message_id: UUID, before: int = 3, after: int = 3, *, conn=None):
        return self._call("select * from agentmem.context_window(message_id => %s, before => %s, after => %s)",
                          (message_id, before, after), fetch="all", row=Message, conn=conn)

    def search_with_context(self, user_id: str, query_embedding=None, k: int = 3, radius: int = 3, *,
                            model: str | None = None, conversation_id: UUID | None = None,
                            min_similarity: float | None = None, query_text: str | None = None,
                            candidate_pool: int = 60, rrf_k: int = 60, conn=None):
        return self._call("select * from agentmem.search_with_context(user_id => %s, query_embedding => %s, "
                          "k => %s, radius => %s, model => %s, conversation_id => %s, min_similarity => %s::real, "
                          "query_text => %s, candidate_pool => %s, rrf_k => %s)",
                          (user_id, as_vector(query_embedding), k, radius, model, conversation_id, min_similarity,
                           query_text, candidate_pool, rrf_k),
                          fetch="all", row=WindowMessage, conn=conn)

    def set_summary(self, conversation_id: UUID, summary: str, through_index: int, *, conn=None):
        return self._call("select agentmem.set_summary(conversation_id => %s, summary => %s, through_index => %s)",
                          (conversation_id, summary, through_index), fetch="none", conn=conn)

    def short_term_context(self, conversation_id: UUID, keep_last: int = 6, *, conn=None):
        return self._call("select * from agentmem.short_term_context(conversation_id => %s, keep_last => %s)",
                          (conversation_id, keep_last), fetch="all", row=ContextItem, conn=conn)

    def embedding_cache_lookup(self, model: str | None, texts: Sequence[str], *, conn=None):
        """One embedding per text (None for a miss), in order."""
        return self._call("select * from agentmem.embedding_cache_lookup(model => %s, texts => %s)",
                          (model, list(texts)), fetch="all", conn=conn, post=_cache_rows)

    def embedding_cache_store(self, model: str | None, texts: Sequence[str], embeddings: Sequence, *, conn=None):
        """Store embeddings in the tenant's cache; returns how many were new."""
        return self._call("select agentmem.embedding_cache_store(model => %s, texts => %s, embeddings => %s)",
                          (model, list(texts), as_vectors(embeddings)), fetch="scalar", conn=conn)

    def record_retrieval(self, message_id: UUID, doc_ids: Sequence[str], *, conn=None):
        """Record the documents retrieved for a user message (replaces an earlier record); returns how many."""
        return self._call("select agentmem.record_retrieval(message_id => %s, doc_ids => %s::text[])",
                          (message_id, list(doc_ids)), fetch="scalar", conn=conn)

    def topic_shift(self, conversation_id: UUID, threshold: float = 0.15, *, conn=None):
        return self._call("select * from agentmem.topic_shift(conversation_id => %s, threshold => %s::real)",
                          (conversation_id, threshold), fetch="one", row=TopicShift, conn=conn)

    def unseen_docs(self, conversation_id: UUID, doc_ids: Sequence[str], lookback: int = 6, *, conn=None):
        """The ids not retrieved in the conversation's last `lookback` turns, in the given order."""
        return self._call("select agentmem.unseen_docs(conversation_id => %s, doc_ids => %s::text[], "
                          "lookback => %s)", (conversation_id, list(doc_ids), lookback), fetch="scalar", conn=conn)

    def get_model(self, model: str, *, conn=None):
        return self._call("select * from agentmem.get_model(model => %s)", (model,), fetch="one", conn=conn)

    # -- embed, then call ---------------------------------------------------------------------

    def remember(self, conversation_id: UUID, role: str, content: str, *, metadata: dict | None = None,
                 conn=None):
        """Embed `content` with self.embedder (document prefix, cache first) and store the message."""
        embedder = require_embedder(self)
        if is_async(self):
            return self._aremember(embedder, conversation_id, role, content, metadata, conn)
        vector = embed_texts(self, "embed_documents", [content])[0]
        return self.store_message(conversation_id, role, content, vector, model=embedder.model,
                                  metadata=metadata, conn=conn)

    async def _aremember(self, embedder, conversation_id, role, content, metadata, conn):
        vector = (await aembed_texts(self, "embed_documents", [content]))[0]
        return await self.store_message(conversation_id, role, content, vector, model=embedder.model,
                                        metadata=metadata, conn=conn)

    def recall(self, user_id: str, query: str, k: int = 5, *, conversation_id: UUID | None = None,
               min_similarity: float | None = None, hybrid: bool = True, conn=None):
        """Embed `query` with self.embedder (query prefix) and search the user's past messages.

        hybrid (default): the query's words are searched too (full text), fused with the vector
        search by reciprocal rank; hybrid=False searches by the embedding alone.
        """
        embedder = require_embedder(self)
        text = query if hybrid else None
        if is_async(self):
            return self._arecall(embedder, user_id, query, text, k, conversation_id, min_similarity, conn)
        vector = embed_texts(self, "embed_queries", [query])[0]
        return self.search_messages(user_id, vector, k, conversation_id=conversation_id, query_text=text,
                                    min_similarity=min_similarity, model=embedder.model, conn=conn)

    async def _arecall(self, embedder, user_id, query, text, k, conversation_id, min_similarity, conn):
        vector = (await aembed_texts(self, "embed_queries", [query]))[0]
        return await self.search_messages(user_id, vector, k, conversation_id=conversation_id, query_text=text,
                                          min_similarity=min_similarity, model=embedder.model, conn=conn)
