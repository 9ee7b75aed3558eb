"""Answer cache (issue 4): driver methods, one literal call per SQL function.

Each method returns ``self._call(...)``, which the sync client runs at once and the
async client returns as a coroutine; see client.py. ``cached_answer`` and
``store_answer`` first embed the question with ``self.embedder`` (anything with
``embed_query(text) -> list[float]`` and a ``model`` attribute naming a registered
model); with AsyncMemory that embedding call runs before the coroutine is returned.
"""

from __future__ import annotations

import datetime as _dt
import uuid as _uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Sequence

from ._adapt import aembed_texts, as_vector, embed_texts, is_async, require_embedder


@dataclass
class CacheLookup:
    hit: bool
    kind: str | None
    similarity: float | None
    matched_question: str | None
    entry_id: _uuid.UUID | None
    answer: str | None
    source_ids: list[str] | None
    hit_id: _uuid.UUID
    reason: str | None


@dataclass
class CacheStore:
    stored: bool
    entry_id: _uuid.UUID | None
    reason: str | None
    expires_at: _dt.datetime | None


@dataclass
class SampledHit:
    hit_id: _uuid.UUID
    kind: str
    similarity: float | None
    question_asked: str
    matched_question: str | None
    answer: str | None
    created_at: _dt.datetime


@dataclass
class ReportRow:
    threshold: float
    queries: int
    hits: int
    reviewed: int
    reviewed_wrong: int
    hits_per_1000: Decimal | None
    wrong_per_1000: Decimal | None
    net_value_per_1000: Decimal | None


class CacheAPI:
    # -- lookup and store ---------------------------------------------------------------------

    def cache_lookup(self, question: str, question_embedding: Sequence[float], *, acl_hash: str = "",
                     prompt_version: str = "", llm_model: str = "", intent: str = "general",
                     model: str | None = None, user_id: str | None = None, conn=None):
        """Exact, then guarded semantic lookup; one CacheLookup (hit or miss, logged)."""
        return self._call(
            "select * from agentmem.cache_lookup(question => %s, question_embedding => %s::vector, "
            "acl_hash => %s, prompt_version => %s, llm_model => %s, intent => %s, "
            "model => %s, user_id => %s)",
            (question, as_vector(question_embedding), acl_hash, prompt_version, llm_model, intent, model, user_id),
            fetch="one", row=CacheLookup, conn=conn)

    def cache_store(self, question: str, question_embedding: Sequence[float], answer: str, *,
                    source_ids: Sequence[str] = (), intent: str = "general", acl_hash: str = "",
                    prompt_version: str = "", llm_model: str = "", model: str | None = None,
                    user_id: str | None = None, conversation_id: _uuid.UUID | str | None = None,
                    safe_to_share: bool = False, ttl: _dt.timedelta | None = None, conn=None):
        """Cache an answer; CacheStore says whether it was stored or why not (personalised)."""
        return self._call(
            "select * from agentmem.cache_store(question => %s, question_embedding => %s::vector, "
            "answer => %s, source_ids => %s::text[], intent => %s, acl_hash => %s, prompt_version => %s, "
            "llm_model => %s, model => %s, user_id => %s, "
            "conversation_id => %s::uuid, safe_to_share => %s, ttl => %s::interval)",
            (question, as_vector(question_embedding), answer, list(source_ids), intent, acl_hash, prompt_version,
             llm_model, model, user_id, conversation_id, safe_to_share, ttl),
            fetch="one", row=CacheStore, conn=conn)

    def cached_answer(self, question: str, *, acl_hash: str = "", prompt_version: str = "",
                      llm_model: str = "", intent: str = "general", user_id: str | None = None, conn=None):
        """Embed the question with self.embedder (query prefix, embedding cache first), then cache_lookup."""
        kwargs = dict(acl_hash=acl_hash, prompt_version=prompt_version, llm_model=llm_model, intent=intent,
                      model=require_embedder(self).model, user_id=user_id, conn=conn)
        if is_async(self):
            return self._then(self.cache_lookup, question, kwargs)
        return self.cache_lookup(question, embed_texts(self, "embed_queries", [question])[0], **kwargs)

    def store_answer(self, question: str, answer: str, *, source_ids: Sequence[str] = (),
                     intent: str = "general", acl_hash: str = "", prompt_version: str = "",
                     llm_model: str = "", user_id: str | None = None,
                     conversation_id: _uuid.UUID | str | None = None, safe_to_share: bool = False,
                     ttl: _dt.timedelta | None = None, conn=None):
        """Embed the question exactly as cached_answer does, then cache_store."""
        kwargs = dict(answer=answer, source_ids=source_ids, intent=intent, acl_hash=acl_hash,
                      prompt_version=prompt_version, llm_model=llm_model, model=require_embedder(self).model,
                      user_id=user_id, conversation_id=conversation_id, safe_to_share=safe_to_share, ttl=ttl,
                      conn=conn)
        if is_async(self):
            return self._then(self.cache_store, question, kwargs)
        return self.cache_store(question, embed_texts(self, "embed_queries", [question])[0], **kwargs)

    async def _then(self, call, question: str, kwargs: dict):
        """Async variant: embed without blocking the event loop, then the call."""
        return await call(question, (await aembed_texts(self, "embed_queries", [question]))[0], **kwargs)

    # -- text functions -----------------------------------------------------------------------

    def normalize_question(self, question: str, *, conn=None):
        return self._call("select agentmem.normalize_question(question => %s)", (question,),
                          fetch="scalar", conn=conn)

    def question_guard_features(self, question: str, *, conn=None):
        return self._call("select agentmem.question_guard_features(question => %s)", (question,),
                          fetch="scalar", conn=conn)

    # -- freshness ----------------------------------------------------------------------------

    def corpus_version(self, *, conn=None):
        return self._call("select agentmem.corpus_version()", fetch="scalar", conn=conn)

    def bump_corpus_version(self, *, conn=None):
        return self._call("select agentmem.bump_corpus_version()", fetch="scalar", conn=conn)

    def invalidate_source(self, doc_id: str, *, conn=None):
        return self._call("select agentmem.invalidate_source(doc_id => %s)", (doc_id,), fetch="scalar",
                          conn=conn)

    def sweep_cache(self, batch_size: int = 1000, *, conn=None):
        return self._call("select agentmem.sweep_cache(batch_size => %s::int)", (batch_size,), fetch="scalar",
                          conn=conn)

    # -- review -------------------------------------------------------------------------------

    def sample_hits(self, n: int = 50, min_similarity: float = 0.85, *, conn=None):
        return self._call("select * from agentmem.sample_hits(n => %s::int, min_similarity => %s::real)",
                          (n, min_similarity), fetch="all", row=SampledHit, conn=conn)

    def review_hit(self, hit_id: _uuid.UUID | str, correct: bool, *, conn=None):
        return self._call("select agentmem.review_hit(hit_id => %s::uuid, correct => %s)", (hit_id, correct),
                          fetch="none", conn=conn)

    def cache_report(self, cost_uncached: float | Decimal, cost_wrong: float | Decimal, *,
                     thresholds: Sequence[float] | None = None, since: _dt.datetime | None = None, conn=None):
        return self._call(
            "select * from agentmem.cache_report(cost_uncached => %s::numeric, cost_wrong => %s::numeric, "
            "thresholds => %s::real[], since => coalesce(%s::timestamptz, '-infinity'))",
            (cost_uncached, cost_wrong, list(thresholds) if thresholds is not None else None, since),
            fetch="all", row=ReportRow, conn=conn)
