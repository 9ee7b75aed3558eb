"""The literal calls: one method per public SQL function the application role may call.

Each method is written once, here, and its body is the call itself: one literal
``select ... from agentmem.fn(name => %s)`` and its parameters, wrapped in a
``Sql`` that also says what to fetch (``one`` row, ``rows``, a ``value``,
``nothing``) and as which row class (``rows.py``). ``@literal`` makes the
method run that statement on whichever client it is read from: on ``Memory`` it
returns the value, on ``AsyncMemory`` an awaitable of it, and a type checker
sees both (``literal.__get__`` is overloaded on the client's kind; ``make lint``
runs mypy on ``tests/typecheck_clients.py``).

Adding a call when a SQL function lands is one method here, e.g.::

    @literal
    def unseen_docs(self, conversation_id: uuid.UUID | str, doc_ids: Sequence[str], lookback: int = 6, *,
                    conn: Conn = None) -> Sql[list[str]]:
        return value(list, "select agentmem.unseen_docs(conversation_id => %s, doc_ids => %s::text[], "
                     "lookback => %s)", conversation_id, list(doc_ids), lookback)

(a new parameter of an existing function, e.g. ``query_text``, is one more
parameter and one more ``name => %s``). ``tests/test_driver.py`` fails while a
function the application role may call has no method here.
"""

from __future__ import annotations

import datetime as dt
import functools
import inspect
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import (TYPE_CHECKING, Any, Awaitable, Callable, Concatenate, Generic, Optional, ParamSpec, Sequence,
                    TypeVar, Union, overload)

import numpy as np
from psycopg.types.json import Jsonb

from ._adapt import as_vector, as_vectors, aware
from .rows import (AccessReceipt, CacheLookup, CacheStore, ContextItem, ConversationSummary, Fact, FactUpsert,
                   FactVersion, ListedFact, Message, MessageHit, Receipt, ReportRow, RetentionPolicy, SampledHit,
                   StoredMessage, TopicShift, WindowMessage)

if TYPE_CHECKING:
    import psycopg

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

# The caller's own connection (a transaction of theirs): psycopg.Connection on Memory, AsyncConnection on
# AsyncMemory.
Conn = Optional[Union["psycopg.Connection[Any]", "psycopg.AsyncConnection[Any]"]]
Embedding = Union[Sequence[float], np.ndarray]


@dataclass(frozen=True)
class Sql(Generic[R]):
    """One literal statement, its parameters, and how its rows become the method's value."""

    query: str
    params: tuple = ()
    fetch: str = "all"            # all | one | scalar | none
    row: Any = None               # a row class (rows.py), or None for dict rows
    post: Callable[[Any], Any] | None = None

    def then(self, post: Callable[[R], T]) -> Sql[T]:
        """The same statement, its value passed through post (e.g. rows -> numpy arrays)."""
        return Sql(self.query, self.params, self.fetch, self.row, post)  # type: ignore[arg-type]


def one(row: type[T], query: str, *params: Any) -> Sql[T]:
    """The first row, as `row` (a dataclass of rows.py, or dict)."""
    return Sql(query, params, "one", None if row is dict else row)


def rows(row: type[T], query: str, *params: Any) -> Sql[list[T]]:
    """Every row, each as `row`."""
    return Sql(query, params, "all", None if row is dict else row)


def value(kind: type[T], query: str, *params: Any) -> Sql[T]:
    """The first column of the first row (`kind` is what it is, for the type checker)."""
    return Sql(query, params, "scalar")


def _lines(found: list[dict]) -> list[str]:
    return [r["line"] for r in found]


def nothing(query: str, *params: Any) -> Sql[None]:
    return Sql(query, params, "none")


class SyncClient:
    """Marks a client whose literal calls return values (Memory, Admin)."""

    def _bind(self, fn: Callable[..., Sql[Any]]) -> Callable[..., Any]:
        raise NotImplementedError


class AsyncClient:
    """Marks a client whose literal calls return awaitables (AsyncMemory)."""

    def _bind(self, fn: Callable[..., Sql[Any]]) -> Callable[..., Any]:
        raise NotImplementedError


class literal(Generic[P, R]):
    """A method whose body returns one ``Sql``; read from a client, it runs it there."""

    def __init__(self, fn: Callable[Concatenate[Any, P], Sql[R]]) -> None:
        self.fn = fn
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]
        signature = inspect.signature(fn)
        self.signature = signature.replace(parameters=list(signature.parameters.values())[1:])

    @overload
    def __get__(self, obj: None, owner: type) -> literal[P, R]: ...
    @overload
    def __get__(self, obj: SyncClient, owner: type) -> Callable[P, R]: ...
    @overload
    def __get__(self, obj: AsyncClient, owner: type) -> Callable[P, Awaitable[R]]: ...

    def __get__(self, obj: Any, owner: type) -> Any:
        if obj is None:
            return self
        method = obj._bind(self.fn)
        functools.update_wrapper(method, self.fn)
        method.__signature__ = self.signature
        del method.__wrapped__
        return method


def _model(client: Any, model: str | None) -> str | None:
    """model, else the model of the client's embedder (a client built with one embeds with it, so its
    calls store and search under that model), else None: the installation's default."""
    if model is not None:
        return model
    return getattr(getattr(client, "embedder", None), "model", None)


def _json(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


def _cache_rows(found: list[dict]) -> list[np.ndarray | None]:
    """embedding_cache_lookup rows -> one numpy embedding (or None for a miss) per text, in order."""
    return [None if r["embedding"] is None else r["embedding"].to_numpy() for r in found]


class Calls:
    """One method per public SQL function the application role may call, each one literal select."""

    # -- tenant -------------------------------------------------------------------------------
    # set_tenant has no method: every call runs set_tenant(tenant_id => ..., local => true) first.

    @literal
    def current_tenant(self, *, conn: Conn = None) -> Sql[str]:
        return value(str, "select agentmem.current_tenant()")

    @literal
    def may_act_as(self, tenant_id: str, *, conn: Conn = None) -> Sql[bool]:
        """Whether this login may act as tenant_id under the installation's tenant binding."""
        return value(bool, "select agentmem.may_act_as(tenant_id => %s)", tenant_id)

    @literal
    def tenant_binding_mode(self, *, conn: Conn = None) -> Sql[str]:
        """How the installation checks tenants: 'role', 'jwt' or 'none'."""
        return value(str, "select agentmem.tenant_binding_mode()")

    # -- conversation memory ------------------------------------------------------------------

    @literal
    def start_conversation(self, user_id: str, title: str | None = None, metadata: dict | None = None, *,
                           conn: Conn = None) -> Sql[uuid.UUID]:
        return value(uuid.UUID, "select agentmem.start_conversation(user_id => %s, title => %s, metadata => %s)",
                     user_id, title, _json(metadata or {}))

    @literal
    def store_message(self, conversation_id: uuid.UUID | str, role: str, content: str, embedding: Embedding | None, *,
                      model: str | None = None, metadata: dict | None = None,
                      occurred_at: dt.datetime | None = None, conn: Conn = None) -> Sql[StoredMessage]:
        """occurred_at: when the message happened (imported history), an aware datetime; None: now."""
        return one(StoredMessage, "select * from agentmem.store_message(conversation_id => %s, role => %s, "
                   "content => %s, embedding => %s, model => %s, metadata => %s, occurred_at => %s)",
                   conversation_id, role, content, as_vector(embedding), _model(self, model), _json(metadata or {}),
                   aware(occurred_at))

    @literal
    def store_messages(self, conversation_id: uuid.UUID | str, roles: Sequence[str], contents: Sequence[str],
                       embeddings: Sequence[Embedding | None] | None, *, model: str | None = None,
                       metadata: Sequence[dict] | None = None,
                       occurred_at: Sequence[dt.datetime] | None = None,
                       conn: Conn = None) -> Sql[list[StoredMessage]]:
        """occurred_at: one aware datetime per message, in time order (imported history); None: now."""
        return rows(StoredMessage, "select * from agentmem.store_messages(conversation_id => %s, roles => %s, "
                    "contents => %s, embeddings => %s, model => %s, metadata => %s::jsonb[], "
                    "occurred_at => %s::timestamptz[])",
                    conversation_id, list(roles), list(contents),
                    None if embeddings is None else as_vectors(embeddings), _model(self, model),
                    None if metadata is None else [_json(m) for m in metadata],
                    None if occurred_at is None else [aware(t) for t in occurred_at])

    @literal
    def recent_messages(self, conversation_id: uuid.UUID | str, n: int = 20, *,
                        since: dt.datetime | None = None, until: dt.datetime | None = None,
                        conn: Conn = None) -> Sql[list[Message]]:
        """The last n messages, optionally of those that happened in [since, until)."""
        return rows(Message, "select * from agentmem.recent_messages(conversation_id => %s, n => %s, "
                    "since => %s, until => %s)", conversation_id, n, aware(since), aware(until))

    @literal
    def search_messages(self, user_id: str, query_embedding: Embedding | None = None, k: int = 5, *,
                        conversation_id: uuid.UUID | str | None = None, min_similarity: float | None = None,
                        model: str | None = None, query_text: str | None = None, candidate_pool: int = 60,
                        rrf_k: int = 60, since: dt.datetime | None = None, until: dt.datetime | None = None,
                        recency_half_life: dt.timedelta | None = None,
                        conn: Conn = None) -> Sql[list[MessageHit]]:
        """By embedding, by words (query_text), or both fused by reciprocal rank; since/until bound
        when the messages happened ([since, until)); recency_half_life weighs the score by age."""
        return rows(MessageHit, "select * from agentmem.search_messages(user_id => %s, query_embedding => %s, "
                    "k => %s, conversation_id => %s, min_similarity => %s::real, model => %s, "
                    "query_text => %s, candidate_pool => %s, rrf_k => %s, since => %s, until => %s, "
                    "recency_half_life => %s)",
                    user_id, as_vector(query_embedding), k, conversation_id, min_similarity, _model(self, model),
                    query_text, candidate_pool, rrf_k, aware(since), aware(until), recency_half_life)

    @literal
    def context_window(self, message_id: uuid.UUID | str, before: int = 3, after: int = 3, *,
                       conn: Conn = None) -> Sql[list[Message]]:
        return rows(Message, "select * from agentmem.context_window(message_id => %s, before => %s, after => %s)",
                    message_id, before, after)

    @literal
    def search_with_context(self, user_id: str, query_embedding: Embedding | None = None, k: int = 3,
                            radius: int = 3, *, model: str | None = None,
                            conversation_id: uuid.UUID | str | None = None, min_similarity: float | None = None,
                            query_text: str | None = None, candidate_pool: int = 60, rrf_k: int = 60,
                            since: dt.datetime | None = None, until: dt.datetime | None = None,
                            recency_half_life: dt.timedelta | None = None,
                            conn: Conn = None) -> Sql[list[WindowMessage]]:
        return rows(WindowMessage, "select * from agentmem.search_with_context(user_id => %s, "
                    "query_embedding => %s, k => %s, radius => %s, model => %s, conversation_id => %s, "
                    "min_similarity => %s::real, query_text => %s, candidate_pool => %s, rrf_k => %s, "
                    "since => %s, until => %s, recency_half_life => %s)",
                    user_id, as_vector(query_embedding), k, radius, _model(self, model), conversation_id, min_similarity,
                    query_text, candidate_pool, rrf_k, aware(since), aware(until), recency_half_life)

    @literal
    def set_summary(self, conversation_id: uuid.UUID | str, summary: str, through_index: int, *,
                    conn: Conn = None) -> Sql[None]:
        return nothing("select agentmem.set_summary(conversation_id => %s, summary => %s, through_index => %s)",
                       conversation_id, summary, through_index)

    @literal
    def short_term_context(self, conversation_id: uuid.UUID | str, keep_last: int = 6, *,
                           conn: Conn = None) -> Sql[list[ContextItem]]:
        return rows(ContextItem, "select * from agentmem.short_term_context(conversation_id => %s, "
                    "keep_last => %s)", conversation_id, keep_last)

    # -- conversational RAG: what each turn retrieved ------------------------------------------

    @literal
    def record_retrieval(self, message_id: uuid.UUID | str, doc_ids: Sequence[str], *,
                         conn: Conn = None) -> Sql[int]:
        """Record the documents retrieved for a user message (replaces an earlier record); returns how many."""
        return value(int, "select agentmem.record_retrieval(message_id => %s, doc_ids => %s::text[])",
                     message_id, list(doc_ids))

    @literal
    def topic_shift(self, conversation_id: uuid.UUID | str, threshold: float = 0.15, *,
                    conn: Conn = None) -> Sql[TopicShift]:
        return one(TopicShift, "select * from agentmem.topic_shift(conversation_id => %s, threshold => %s::real)",
                   conversation_id, threshold)

    @literal
    def unseen_docs(self, conversation_id: uuid.UUID | str, doc_ids: Sequence[str], lookback: int = 6, *,
                    conn: Conn = None) -> Sql[list[str]]:
        """The ids not retrieved in the conversation's last `lookback` turns, in the given order."""
        return value(list, "select agentmem.unseen_docs(conversation_id => %s, doc_ids => %s::text[], "
                     "lookback => %s)", conversation_id, list(doc_ids), lookback)

    # -- models and the embedding cache -------------------------------------------------------

    @literal
    def get_model(self, model: str, *, conn: Conn = None) -> Sql[dict]:
        return one(dict, "select * from agentmem.get_model(model => %s)", model)

    @literal
    def embedding_cache_lookup(self, model: str | None, texts: Sequence[str], *,
                               conn: Conn = None) -> Sql[list[np.ndarray | None]]:
        """One embedding per text (None for a miss), in order."""
        return rows(dict, "select * from agentmem.embedding_cache_lookup(model => %s, texts => %s)",
                    _model(self, model), list(texts)).then(_cache_rows)

    @literal
    def embedding_cache_store(self, model: str | None, texts: Sequence[str], embeddings: Sequence[Embedding], *,
                              conn: Conn = None) -> Sql[int]:
        """Store embeddings in the tenant's cache; returns how many were new."""
        return value(int, "select agentmem.embedding_cache_store(model => %s, texts => %s, embeddings => %s)",
                     _model(self, model), list(texts), as_vectors(embeddings))

    # -- answer cache -------------------------------------------------------------------------

    @literal
    def cache_lookup(self, question: str, question_embedding: Embedding, *, acl_hash: str = "",
                     prompt_version: str = "", llm_model: str = "", intent: str = "general",
                     model: str | None = None, user_id: str | None = None, conn: Conn = None) -> Sql[CacheLookup]:
        """Exact, then guarded semantic lookup; one CacheLookup (hit or miss, logged)."""
        return one(CacheLookup, "select * from agentmem.cache_lookup(question => %s, "
                   "question_embedding => %s::vector, acl_hash => %s, prompt_version => %s, llm_model => %s, "
                   "intent => %s, model => %s, user_id => %s)",
                   question, as_vector(question_embedding), acl_hash, prompt_version, llm_model, intent,
                   _model(self, model), user_id)

    @literal
    def cache_store(self, question: str, question_embedding: Embedding | None, answer: str, *,
                    source_ids: Sequence[str] = (), intent: str = "general", acl_hash: str = "",
                    prompt_version: str = "", llm_model: str = "", model: str | None = None,
                    user_id: str | None = None, conversation_id: uuid.UUID | str | None = None,
                    safe_to_share: bool = False, ttl: dt.timedelta | None = None,
                    conn: Conn = None) -> Sql[CacheStore]:
        """Cache an answer; CacheStore says whether it was stored or why not (personalised)."""
        return one(CacheStore, "select * from agentmem.cache_store(question => %s, "
                   "question_embedding => %s::vector, answer => %s, source_ids => %s::text[], intent => %s, "
                   "acl_hash => %s, prompt_version => %s, llm_model => %s, model => %s, user_id => %s, "
                   "conversation_id => %s, safe_to_share => %s, ttl => %s::interval)",
                   question, as_vector(question_embedding), answer, list(source_ids), intent, acl_hash,
                   prompt_version, llm_model, _model(self, model), user_id, conversation_id, safe_to_share, ttl)

    @literal
    def normalize_question(self, question: str, *, conn: Conn = None) -> Sql[str]:
        return value(str, "select agentmem.normalize_question(question => %s)", question)

    @literal
    def question_guard_features(self, question: str, *, conn: Conn = None) -> Sql[list[str]]:
        return value(list, "select agentmem.question_guard_features(question => %s)", question)

    @literal
    def question_guard_agrees(self, question: str, other_question: str, *, conn: Conn = None) -> Sql[bool]:
        return value(bool, "select agentmem.question_guard_agrees(question => %s, other_question => %s)",
                     question, other_question)

    @literal
    def corpus_version(self, *, conn: Conn = None) -> Sql[int]:
        return value(int, "select agentmem.corpus_version()")

    @literal
    def bump_corpus_version(self, *, conn: Conn = None) -> Sql[int]:
        return value(int, "select agentmem.bump_corpus_version()")

    @literal
    def invalidate_source(self, doc_id: str, *, conn: Conn = None) -> Sql[int]:
        return value(int, "select agentmem.invalidate_source(doc_id => %s)", doc_id)

    @literal
    def sweep_cache(self, batch_size: int = 1000, *, conn: Conn = None) -> Sql[int]:
        return value(int, "select agentmem.sweep_cache(batch_size => %s::int)", batch_size)

    @literal
    def sample_hits(self, n: int = 50, min_similarity: float = 0.85, *,
                    conn: Conn = None) -> Sql[list[SampledHit]]:
        return rows(SampledHit, "select * from agentmem.sample_hits(n => %s::int, min_similarity => %s::real)",
                    n, min_similarity)

    @literal
    def review_hit(self, hit_id: uuid.UUID | str, correct: bool, *, conn: Conn = None) -> Sql[None]:
        return nothing("select agentmem.review_hit(hit_id => %s, correct => %s)", hit_id, correct)

    @literal
    def cache_report(self, cost_uncached: float | Decimal, cost_wrong: float | Decimal, *,
                     thresholds: Sequence[float] | None = None, since: dt.datetime | None = None,
                     conn: Conn = None) -> Sql[list[ReportRow]]:
        return rows(ReportRow, "select * from agentmem.cache_report(cost_uncached => %s::numeric, "
                    "cost_wrong => %s::numeric, thresholds => %s::real[], "
                    "since => coalesce(%s::timestamptz, '-infinity'))",
                    cost_uncached, cost_wrong, list(thresholds) if thresholds is not None else None, since)

    # -- facts --------------------------------------------------------------------------------

    @literal
    def upsert_fact(self, user_id: str, subject: str, fact: str, embedding: Embedding | None,
                    source_message_ids: Sequence[uuid.UUID | str] = (), model: str | None = None,
                    merge_threshold: float = 0.92, *, valid_from: dt.datetime | None = None,
                    valid_to: dt.datetime | None = None, conn: Conn = None) -> Sql[FactUpsert]:
        """valid_from / valid_to: when the fact was true (aware datetimes); default: from its sources' time."""
        return one(FactUpsert, "select * from agentmem.upsert_fact(user_id => %s, subject => %s, fact => %s, "
                   "embedding => %s, source_message_ids => %s::uuid[], model => %s, merge_threshold => %s, "
                   "valid_from => %s, valid_to => %s)",
                   user_id, subject, fact, as_vector(embedding), list(source_message_ids), _model(self, model), merge_threshold,
                   aware(valid_from), aware(valid_to))

    @literal
    def recall_facts(self, user_id: str, query_embedding: Embedding | None = None, k: int = 5,
                     model: str | None = None, *, query_text: str | None = None, candidate_pool: int = 60,
                     rrf_k: int = 60, since: dt.datetime | None = None, until: dt.datetime | None = None,
                     as_of: dt.datetime | None = None, conn: Conn = None) -> Sql[list[Fact]]:
        """as_of: what was true then; since/until: what was true at some time in [since, until)."""
        return rows(Fact, "select * from agentmem.recall_facts(user_id => %s, query_embedding => %s, k => %s, "
                    "model => %s, query_text => %s, candidate_pool => %s, rrf_k => %s, since => %s, "
                    "until => %s, as_of => %s)",
                    user_id, as_vector(query_embedding), k, _model(self, model), query_text, candidate_pool, rrf_k,
                    aware(since), aware(until), aware(as_of))

    @literal
    def fact_history(self, fact_id: uuid.UUID | str, *, conn: Conn = None) -> Sql[list[FactVersion]]:
        return rows(FactVersion, "select * from agentmem.fact_history(fact_id => %s)", fact_id)

    # -- a user's memory item by item ---------------------------------------------------------

    @literal
    def list_conversations(self, user_id: str, after: str | None = None, page_size: int = 100, *,
                           conn: Conn = None) -> Sql[list[ConversationSummary]]:
        return rows(ConversationSummary, "select * from agentmem.list_conversations(user_id => %s, after => %s, "
                    "page_size => %s)", user_id, after, page_size)

    @literal
    def list_facts(self, user_id: str, include_superseded: bool = False, after: str | None = None,
                   page_size: int = 100, *, conn: Conn = None) -> Sql[list[ListedFact]]:
        return rows(ListedFact, "select * from agentmem.list_facts(user_id => %s, include_superseded => %s, "
                    "after => %s, page_size => %s)", user_id, include_superseded, after, page_size)

    @literal
    def delete_message(self, message_id: uuid.UUID | str, *, conn: Conn = None) -> Sql[AccessReceipt]:
        return one(AccessReceipt, "select * from agentmem.delete_message(message_id => %s)", message_id)

    @literal
    def delete_fact(self, fact_id: uuid.UUID | str, *, conn: Conn = None) -> Sql[AccessReceipt]:
        return one(AccessReceipt, "select * from agentmem.delete_fact(fact_id => %s)", fact_id)

    @literal
    def update_fact(self, fact_id: uuid.UUID | str, fact: str, embedding: Embedding,
                    source_message_ids: Sequence[uuid.UUID | str] = (), *, conn: Conn = None) -> Sql[AccessReceipt]:
        return one(AccessReceipt, "select * from agentmem.update_fact(fact_id => %s, fact => %s, embedding => %s, "
                   "source_message_ids => %s::uuid[])", fact_id, fact, as_vector(embedding),
                   [str(s) for s in source_message_ids])

    @literal
    def export_user(self, user_id: str, *, conn: Conn = None) -> Sql[list[str]]:
        """The user's export, one JSON document per line (``"\n".join(lines) + "\n"`` is the file)."""
        return rows(dict, "select line from agentmem.export_user(user_id => %s)", user_id).then(_lines)

    @literal
    def import_user(self, lines: Sequence[str], *, conn: Conn = None) -> Sql[AccessReceipt]:
        return one(AccessReceipt, "select * from agentmem.import_user(lines => %s::text[])", list(lines))

    # -- forgetting and the tenant's retention policies ---------------------------------------

    @literal
    def forget_conversation(self, conversation_id: uuid.UUID | str, *, conn: Conn = None) -> Sql[Receipt]:
        return one(Receipt, "select * from agentmem.forget_conversation(conversation_id => %s)", conversation_id)

    @literal
    def forget_user(self, user_id: str, *, conn: Conn = None) -> Sql[Receipt]:
        return one(Receipt, "select * from agentmem.forget_user(user_id => %s)", user_id)

    @literal
    def set_retention_policy(self, kind: str, max_age: dt.timedelta | None, *,
                             conn: Conn = None) -> Sql[RetentionPolicy]:
        return one(RetentionPolicy, "select * from agentmem.set_retention_policy(kind => %s, max_age => %s)",
                   kind, max_age)

    @literal
    def clear_retention_policy(self, kind: str, *, conn: Conn = None) -> Sql[bool]:
        return value(bool, "select agentmem.clear_retention_policy(kind => %s)", kind)
