"""Semantic facts, forgetting and retention (issue 5): driver methods, one literal call per SQL function.

Each method returns ``self._call(...)``, which the sync client runs at once and the
async client returns as a coroutine; see client.py.

``extract_facts`` is the one method with Python work before the calls: one Ollama
chat call turns a conversation turn into standalone facts (JSON, validated here),
the embedder embeds them, and they are upserted in one transaction. A malformed
reply raises FactExtractionError and stores nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any, Sequence

from ._adapt import aembed_texts, as_vector, embed_texts, is_async, require_embedder
from .errors import AgentmemError

DEFAULT_CHAT_MODEL = "llama3.2"
MAX_FACTS_PER_TURN = 20

EXTRACTION_PROMPT = """You extract durable facts about the USER from one conversation turn.
Reply with JSON only: {"facts": [{"subject": "...", "fact": "..."}]}.
- subject: a short snake_case key naming what the fact is about (home_city, diet, employer, pet_name).
  Use the same key for a fact that updates an earlier one.
- fact: one standalone sentence about the user that makes sense without the conversation.
- Only facts the user states or confirms about themselves; no opinions of the assistant, no small talk.
- No facts: {"facts": []}."""


class FactExtractionError(AgentmemError):
    """The chat model's reply was not a valid list of facts (nothing was stored)."""


@dataclass(frozen=True)
class FactUpsert:
    fact_id: uuid.UUID
    action: str            # inserted | merged | replaced
    similarity: float | None


@dataclass(frozen=True)
class ExtractedFact:
    subject: str
    fact: str
    fact_id: uuid.UUID
    action: str
    similarity: float | None


@dataclass(frozen=True)
class Fact:
    fact_id: uuid.UUID
    subject: str
    fact: str
    similarity: float | None      # None unless the vector branch found it
    source_message_ids: list[uuid.UUID]
    updated_at: dt.datetime
    vector_rank: int | None       # rank in each branch (1 = best), None where it did not find it
    text_rank: int | None
    score: float                  # fused score: sum of 1 / (rrf_k + rank) over the branches


@dataclass(frozen=True)
class FactVersion:
    subject: str
    fact: str
    source_message_ids: list[uuid.UUID]
    valid_from: dt.datetime
    replaced_at: dt.datetime


@dataclass(frozen=True)
class Receipt:
    """What an erasure removed: counts per table and when. No content, no identifier of the subject."""

    tenant_id: str
    erasure_id: uuid.UUID
    scope: str
    rows_removed: dict[str, int]
    erased_at: dt.datetime


@dataclass(frozen=True)
class RetentionPolicy:
    tenant_id: str
    kind: str
    max_age: dt.timedelta | None
    updated_at: dt.datetime


@dataclass(frozen=True)
class JobRun:
    tenant_id: str | None
    run_id: int | None
    job: str
    started_at: dt.datetime
    finished_at: dt.datetime
    rows_removed: dict[str, int]
    total_removed: int
    error: str | None


def parse_facts(reply: str) -> list[dict[str, str]]:
    """Validate the chat model's reply: ``{"facts": [{"subject", "fact"}, ...]}`` or a bare list."""
    try:
        data = json.loads(reply)
    except (TypeError, ValueError) as exc:
        raise FactExtractionError(f"the chat model's reply is not JSON: {exc}",
                                  detail=f"reply: {str(reply)[:200]!r}") from None
    if isinstance(data, dict) and set(data) == {"facts"}:
        data = data["facts"]
    if not isinstance(data, list):
        raise FactExtractionError("the chat model's reply is not a list of facts",
                                  detail=f"expected {{\"facts\": [...]}} or [...], got: {str(reply)[:200]!r}")
    if len(data) > MAX_FACTS_PER_TURN:
        raise FactExtractionError(f"the chat model returned {len(data)} facts; at most "
                                  f"{MAX_FACTS_PER_TURN} are accepted from one turn")
    facts = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or set(item) != {"subject", "fact"}:
            raise FactExtractionError(f"fact #{i + 1} is not an object with exactly 'subject' and 'fact'",
                                      detail=f"got: {json.dumps(item)[:200]}")
        subject, fact = item["subject"], item["fact"]
        if not isinstance(subject, str) or not isinstance(fact, str) or not subject.strip() or not fact.strip():
            raise FactExtractionError(f"fact #{i + 1} has an empty or non-text subject or fact",
                                      detail=f"got: {json.dumps(item)[:200]}")
        facts.append({"subject": subject.strip(), "fact": fact.strip()})
    return facts


def _turn_text(turn: Any) -> str:
    if isinstance(turn, str):
        text = turn
    elif isinstance(turn, dict) and "content" in turn:
        text = f"{turn.get('role', 'user')}: {turn['content']}"
    elif isinstance(turn, Sequence):
        text = "\n".join(f"{m['role']}: {m['content']}" for m in turn)
    else:
        raise TypeError("turn must be a text or a list of {'role', 'content'} messages")
    if not text.strip():
        raise FactExtractionError("the turn is empty: there is nothing to extract facts from")
    return text


def _chat_messages(turn: Any) -> list[dict[str, str]]:
    return [{"role": "system", "content": EXTRACTION_PROMPT},
            {"role": "user", "content": "Conversation turn:\n" + _turn_text(turn)}]


def _reply_content(response: Any) -> str:
    message = response["message"] if not hasattr(response, "message") else response.message
    return message["content"] if isinstance(message, dict) else message.content


class FactsAPI:
    # -- facts -----------------------------------------------------------------
    def upsert_fact(self, user_id: str, subject: str, fact: str, embedding, source_message_ids=(),
                    model: str | None = None, merge_threshold: float = 0.92, conn=None):
        return self._call(
            "select * from agentmem.upsert_fact(user_id => %s, subject => %s, fact => %s, embedding => %s, "
            "source_message_ids => %s::uuid[], model => %s, merge_threshold => %s)",
            (user_id, subject, fact, as_vector(embedding), list(source_message_ids), model, merge_threshold),
            fetch="one", row=FactUpsert, conn=conn)

    def recall_facts(self, user_id: str, query_embedding=None, k: int = 5, model: str | None = None, conn=None,
                     *, query_text: str | None = None, candidate_pool: int = 60, rrf_k: int = 60):
        return self._call(
            "select * from agentmem.recall_facts(user_id => %s, query_embedding => %s, k => %s, model => %s, "
            "query_text => %s, candidate_pool => %s, rrf_k => %s)",
            (user_id, as_vector(query_embedding), k, model, query_text, candidate_pool, rrf_k),
            fetch="all", row=Fact, conn=conn)

    def recall_facts_about(self, user_id: str, query: str, k: int = 5, *, hybrid: bool = True, conn=None):
        """Embed `query` with self.embedder (query prefix) and recall the user's facts.

        hybrid (default): the query's words are searched too, fused by reciprocal rank;
        hybrid=False searches by the embedding alone.
        """
        embedder = require_embedder(self)
        text = query if hybrid else None
        if is_async(self):
            return self._arecall_facts_about(embedder, user_id, query, text, k, conn)
        vector = embed_texts(self, "embed_queries", [query])[0]
        return self.recall_facts(user_id, vector, k, embedder.model, conn=conn, query_text=text)

    async def _arecall_facts_about(self, embedder, user_id, query, text, k, conn):
        vector = (await aembed_texts(self, "embed_queries", [query]))[0]
        return await self.recall_facts(user_id, vector, k, embedder.model, conn=conn, query_text=text)

    def fact_history(self, fact_id, conn=None):
        return self._call("select * from agentmem.fact_history(fact_id => %s)", (fact_id,),
                          fetch="all", row=FactVersion, conn=conn)

    # -- forgetting --------------------------------------------------------------
    def forget_conversation(self, conversation_id, conn=None):
        return self._call("select * from agentmem.forget_conversation(conversation_id => %s)",
                          (conversation_id,), fetch="one", row=Receipt, conn=conn)

    def forget_user(self, user_id: str, conn=None):
        return self._call("select * from agentmem.forget_user(user_id => %s)", (user_id,),
                          fetch="one", row=Receipt, conn=conn)

    # -- retention -------------------------------------------------------------
    def set_retention_policy(self, kind: str, max_age: dt.timedelta | None, conn=None):
        return self._call("select * from agentmem.set_retention_policy(kind => %s, max_age => %s)",
                          (kind, max_age), fetch="one", row=RetentionPolicy, conn=conn)

    def clear_retention_policy(self, kind: str, conn=None):
        return self._call("select agentmem.clear_retention_policy(kind => %s)", (kind,), fetch="scalar", conn=conn)

    def apply_retention(self, batch_size: int = 5000, conn=None):
        return self._call("select * from agentmem.apply_retention(batch_size => %s)", (batch_size,),
                          fetch="one", row=JobRun, conn=conn)

    def schedule_retention(self, schedule: str = "*/15 * * * *", conn=None):
        return self._call("select agentmem.schedule_retention(schedule => %s)", (schedule,),
                          fetch="scalar", conn=conn)

    def unschedule_retention(self, conn=None):
        return self._call("select agentmem.unschedule_retention()", fetch="scalar", conn=conn)

    def retention_health(self, conn=None):
        return self._call("select * from agentmem.retention_health", fetch="one", conn=conn)

    # -- extraction ------------------------------------------------------------
    def extract_facts(self, turn, user_id: str, *, source_message_ids=(), chat_model: str = DEFAULT_CHAT_MODEL,
                      ollama_host: str | None = None, model: str | None = None, conn=None):
        """Extract the user's facts from one turn (one chat call), embed and upsert them in one transaction.

        Returns one ExtractedFact per fact (with the upsert's action). Raises
        FactExtractionError, storing nothing, when the reply is not a valid list
        of {"subject", "fact"} objects.
        """
        if is_async(self):
            return self._extract_facts_async(turn, user_id, source_message_ids, chat_model, ollama_host,
                                             model, conn)
        import ollama
        host = ollama_host or getattr(self.embedder, "host", None)
        try:
            response = ollama.Client(host=host).chat(model=chat_model, messages=_chat_messages(turn),
                                                     format="json", options={"temperature": 0})
        except (ollama.ResponseError, ConnectionError, OSError) as exc:
            raise FactExtractionError(f"the chat call to {chat_model} failed: {exc}") from exc
        facts = parse_facts(_reply_content(response))
        if not facts:
            return []
        vectors = embed_texts(self, "embed_documents", [f["fact"] for f in facts])
        model = model or getattr(self.embedder, "model", None)
        out = []
        with self._transaction(conn) as c:
            for f, vec in zip(facts, vectors):
                r = self.upsert_fact(user_id, f["subject"], f["fact"], vec, source_message_ids, model, conn=c)
                out.append(ExtractedFact(f["subject"], f["fact"], r.fact_id, r.action, r.similarity))
        return out

    async def _extract_facts_async(self, turn, user_id, source_message_ids, chat_model, ollama_host, model, conn):
        import ollama
        host = ollama_host or getattr(self.embedder, "host", None)
        try:
            response = await ollama.AsyncClient(host=host).chat(
                model=chat_model, messages=_chat_messages(turn), format="json", options={"temperature": 0})
        except (ollama.ResponseError, ConnectionError, OSError) as exc:
            raise FactExtractionError(f"the chat call to {chat_model} failed: {exc}") from exc
        facts = parse_facts(_reply_content(response))
        if not facts:
            return []
        vectors = await aembed_texts(self, "embed_documents", [f["fact"] for f in facts])
        model = model or getattr(self.embedder, "model", None)
        out = []
        async with self._transaction(conn) as c:
            for f, vec in zip(facts, vectors):
                r = await self.upsert_fact(user_id, f["subject"], f["fact"], vec, source_message_ids, model, conn=c)
                out.append(ExtractedFact(f["subject"], f["fact"], r.fact_id, r.action, r.similarity))
        return out
