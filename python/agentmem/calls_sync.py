"""The calls of Memory: one method per public SQL function the application role may call.

Generated from calls_async.py by scripts/async_to_sync.py: edit calls_async.py and run the script,
never this file.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any, Sequence, TypeVar

from psycopg.types.json import Jsonb

from .params import as_vector, as_vectors, aware
from .rows import (AccessReceipt, CacheEntry, CacheLookup, CacheStore, ContextItem, ConversationSummary, Fact,
                   FactUpsert, FactVersion, ListedFact, ListedMessage, LoggedReceipt, MemoryStatus, Message, MessageHit,
                   Receipt, ReportRow, RetentionPolicy, SampledHit, StoredMessage, TenantGrant, TenantOverview,
                   TopicShift, UserSummary, WindowMessage)
from .statement import Conn, Embedding, Sql, cached_embeddings, lines, nothing, one, rows, value

R = TypeVar("R")


def _model(client: Any, model: str | None) -> str | None:
    """model, else the model of the client's embedder (a client built with one embeds with it, so its
    calls store and search under that model), else None: the installation's default."""
    if model is not None:
        return model
    return getattr(getattr(client, "embedder", None), "model", None)


def _json(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


class Calls:
    """One method per public SQL function the application role may call, each one literal select."""

    embedder: Any

    def run(self, stmt: Sql[R], conn: Conn = None) -> R:
        raise NotImplementedError  # the client's: Memory.run

    # -- tenant -------------------------------------------------------------------------------
    # set_tenant has no method: every call runs set_tenant(tenant_id => ..., local => true) first.

    def current_tenant(self, *, conn: Conn = None) -> str:
        return self.run(value(str, "select agentmem.current_tenant()"), conn)

    def may_act_as(self, tenant_id: str, *, conn: Conn = None) -> bool:
        """Whether this login may act as tenant_id under the installation's tenant binding."""
        return self.run(value(bool, "select agentmem.may_act_as(tenant_id => %s)", tenant_id), conn)

    def tenant_binding_mode(self, *, conn: Conn = None) -> str:
        """How the installation checks tenants: 'role', 'jwt' or 'none'."""
        return self.run(value(str, "select agentmem.tenant_binding_mode()"), conn)

    def my_tenants(self, *, conn: Conn = None) -> list[TenantGrant]:
        """The tenant grants of this login (scope tenant, prefix, or all with tenant_id None)."""
        return self.run(rows(TenantGrant, "select * from agentmem.my_tenants()"), conn)

    def tenant_must_be_local(self, *, conn: Conn = None) -> bool:
        """Whether the DBA requires this login to set its tenant for one transaction only (as this client does)."""
        return self.run(value(bool, "select agentmem.tenant_must_be_local()"), conn)

    # -- conversation memory ------------------------------------------------------------------

    def start_conversation(self, user_id: str, title: str | None = None, metadata: dict | None = None, *,
                           conn: Conn = None) -> uuid.UUID:
        return self.run(value(uuid.UUID, "select agentmem.start_conversation(user_id => %s, title => %s, metadata => %s)",
                              user_id, title, _json(metadata or {})), conn)

    def store_message(self, conversation_id: uuid.UUID | str, role: str, content: str, embedding: Embedding | None, *,
                      model: str | None = None, metadata: dict | None = None,
                      occurred_at: dt.datetime | None = None, conn: Conn = None) -> StoredMessage:
        """occurred_at: when the message happened (imported history), an aware datetime; None: now."""
        return self.run(one(StoredMessage, "select * from agentmem.store_message(conversation_id => %s, role => %s, "
                            "content => %s, embedding => %s, model => %s, metadata => %s, occurred_at => %s)",
                            conversation_id, role, content, as_vector(embedding), _model(self, model), _json(metadata or {}),
                            aware(occurred_at)), conn)

    def store_messages(self, conversation_id: uuid.UUID | str, roles: Sequence[str], contents: Sequence[str],
                       embeddings: Sequence[Embedding | None] | None, *, model: str | None = None,
                       metadata: Sequence[dict] | None = None,
                       occurred_at: Sequence[dt.datetime] | None = None,
                       conn: Conn = None) -> list[StoredMessage]:
        """occurred_at: one aware datetime per message, in time order (imported history); None: now."""
        return self.run(rows(StoredMessage, "select * from agentmem.store_messages(conversation_id => %s, roles => %s, "
                             "contents => %s, embeddings => %b, model => %s, metadata => %s::jsonb[], "
                             "occurred_at => %s::timestamptz[])",
                             conversation_id, list(roles), list(contents),
                             None if embeddings is None else as_vectors(embeddings), _model(self, model),
                             None if metadata is None else [_json(m) for m in metadata],
                             None if occurred_at is None else [aware(t) for t in occurred_at]), conn)

    def recent_messages(self, conversation_id: uuid.UUID | str, n: int = 20, *,
                        since: dt.datetime | None = None, until: dt.datetime | None = None,
                        conn: Conn = None) -> list[Message]:
        """The last n messages, optionally of those that happened in [since, until)."""
        return self.run(rows(Message, "select * from agentmem.recent_messages(conversation_id => %s, n => %s, "
                             "since => %s, until => %s)", conversation_id, n, aware(since), aware(until)), conn)

    def search_messages(self, user_id: str, query_embedding: Embedding | None = None, k: int = 5, *,
                        conversation_id: uuid.UUID | str | None = None, min_similarity: float | None = None,
                        model: str | None = None, query_text: str | None = None, candidate_pool: int = 100,
                        rrf_k: int = 10, since: dt.datetime | None = None, until: dt.datetime | None = None,
                        recency_half_life: dt.timedelta | None = None, use_boost: float | None = None,
                        text_ranking: str = "both", bm25_k1: float = 1.2, bm25_b: float = 0.3,
                        neighbour_weight: float = 0.1, fusion: str = "zscore",
                        conn: Conn = None) -> list[MessageHit]:
        """By embedding, by words (query_text: BM25 and ts_rank), or both fused by standardised scores
        (fusion='rrf': by reciprocal rank); since/until bound when the messages happened ([since, until));
        recency_half_life weighs the score by age."""
        return self.run(rows(MessageHit, "select * from agentmem.search_messages(user_id => %s, query_embedding => %s, "
                             "k => %s, conversation_id => %s, min_similarity => %s::real, model => %s, "
                             "query_text => %s, candidate_pool => %s, rrf_k => %s, since => %s, until => %s, "
                             "recency_half_life => %s, use_boost => %s::real, text_ranking => %s, bm25_k1 => %s, "
                             "bm25_b => %s, neighbour_weight => %s, fusion => %s)",
                             user_id, as_vector(query_embedding), k, conversation_id, min_similarity, _model(self, model),
                             query_text, candidate_pool, rrf_k, aware(since), aware(until), recency_half_life,
                             use_boost, text_ranking, bm25_k1, bm25_b, neighbour_weight, fusion), conn)

    def context_window(self, message_id: uuid.UUID | str, before: int = 3, after: int = 3, *,
                       conn: Conn = None) -> list[Message]:
        return self.run(rows(Message, "select * from agentmem.context_window(message_id => %s, before => %s, after => %s)",
                             message_id, before, after), conn)

    def search_with_context(self, user_id: str, query_embedding: Embedding | None = None, k: int = 3,
                            radius: int = 3, *, model: str | None = None,
                            conversation_id: uuid.UUID | str | None = None, min_similarity: float | None = None,
                            query_text: str | None = None, candidate_pool: int = 100, rrf_k: int = 10,
                            since: dt.datetime | None = None, until: dt.datetime | None = None,
                            recency_half_life: dt.timedelta | None = None, text_ranking: str = "both",
                            bm25_k1: float = 1.2, bm25_b: float = 0.3,
                            neighbour_weight: float = 0.1, fusion: str = "zscore",
                            conn: Conn = None) -> list[WindowMessage]:
        return self.run(rows(WindowMessage, "select * from agentmem.search_with_context(user_id => %s, "
                             "query_embedding => %s, k => %s, radius => %s, model => %s, conversation_id => %s, "
                             "min_similarity => %s::real, query_text => %s, candidate_pool => %s, rrf_k => %s, "
                             "since => %s, until => %s, recency_half_life => %s, text_ranking => %s, "
                             "bm25_k1 => %s, bm25_b => %s, neighbour_weight => %s, fusion => %s)",
                             user_id, as_vector(query_embedding), k, radius, _model(self, model), conversation_id, min_similarity,
                             query_text, candidate_pool, rrf_k, aware(since), aware(until), recency_half_life,
                             text_ranking, bm25_k1, bm25_b, neighbour_weight, fusion), conn)

    def set_summary(self, conversation_id: uuid.UUID | str, summary: str, through_index: int, *,
                    conn: Conn = None) -> None:
        return self.run(nothing("select agentmem.set_summary(conversation_id => %s, summary => %s, through_index => %s)",
                                conversation_id, summary, through_index), conn)

    def short_term_context(self, conversation_id: uuid.UUID | str, keep_last: int = 6, *,
                           conn: Conn = None) -> list[ContextItem]:
        return self.run(rows(ContextItem, "select * from agentmem.short_term_context(conversation_id => %s, "
                             "keep_last => %s)", conversation_id, keep_last), conn)

    # -- conversational RAG: what each turn retrieved ------------------------------------------

    def record_retrieval(self, message_id: uuid.UUID | str, doc_ids: Sequence[str], *,
                         conn: Conn = None) -> int:
        """Record the documents retrieved for a user message (replaces an earlier record); returns how many."""
        return self.run(value(int, "select agentmem.record_retrieval(message_id => %s, doc_ids => %s::text[])",
                              message_id, list(doc_ids)), conn)

    def topic_shift(self, conversation_id: uuid.UUID | str, threshold: float = 0.15, *,
                    conn: Conn = None) -> TopicShift:
        return self.run(one(TopicShift, "select * from agentmem.topic_shift(conversation_id => %s, threshold => %s::real)",
                            conversation_id, threshold), conn)

    def unseen_docs(self, conversation_id: uuid.UUID | str, doc_ids: Sequence[str], lookback: int = 6, *,
                    conn: Conn = None) -> list[str]:
        """The ids not retrieved in the conversation's last `lookback` turns, in the given order."""
        return self.run(value(list, "select agentmem.unseen_docs(conversation_id => %s, doc_ids => %s::text[], "
                              "lookback => %s)", conversation_id, list(doc_ids), lookback), conn)

    # -- models and the embedding cache -------------------------------------------------------

    def get_model(self, model: str, *, conn: Conn = None) -> dict:
        return self.run(one(dict, "select * from agentmem.get_model(model => %s)", model), conn)

    def embedding_cache_lookup(self, model: str | None, texts: Sequence[str], *,
                               conn: Conn = None) -> list[list[float] | None]:
        """One embedding per text (None for a miss), in order."""
        return self.run(rows(dict, "select * from agentmem.embedding_cache_lookup(model => %s, texts => %s)",
                             _model(self, model), list(texts)).then(cached_embeddings), conn)

    def embedding_cache_store(self, model: str | None, texts: Sequence[str], embeddings: Sequence[Embedding], *,
                              conn: Conn = None) -> int:
        """Store embeddings in the tenant's cache; returns how many were new."""
        return self.run(value(int, "select agentmem.embedding_cache_store(model => %s, texts => %s, embeddings => %b)",
                              _model(self, model), list(texts), as_vectors(embeddings)), conn)

    # -- answer cache -------------------------------------------------------------------------

    def cache_lookup(self, question: str, question_embedding: Embedding, *, acl_hash: str = "",
                     prompt_version: str = "", llm_model: str = "", intent: str = "general",
                     model: str | None = None, user_id: str | None = None, conn: Conn = None) -> CacheLookup:
        """Exact, then guarded semantic lookup; one CacheLookup (hit or miss, logged)."""
        return self.run(one(CacheLookup, "select * from agentmem.cache_lookup(question => %s, "
                            "question_embedding => %s::vector, acl_hash => %s, prompt_version => %s, llm_model => %s, "
                            "intent => %s, model => %s, user_id => %s)",
                            question, as_vector(question_embedding), acl_hash, prompt_version, llm_model, intent,
                            _model(self, model), user_id), conn)

    def cache_store(self, question: str, question_embedding: Embedding | None, answer: str, *,
                    source_ids: Sequence[str] = (), intent: str = "general", acl_hash: str = "",
                    prompt_version: str = "", llm_model: str = "", model: str | None = None,
                    user_id: str | None = None, conversation_id: uuid.UUID | str | None = None,
                    safe_to_share: bool = False, ttl: dt.timedelta | None = None,
                    conn: Conn = None) -> CacheStore:
        """Cache an answer; CacheStore says whether it was stored or why not (personalised)."""
        return self.run(one(CacheStore, "select * from agentmem.cache_store(question => %s, "
                            "question_embedding => %s::vector, answer => %s, source_ids => %s::text[], intent => %s, "
                            "acl_hash => %s, prompt_version => %s, llm_model => %s, model => %s, user_id => %s, "
                            "conversation_id => %s, safe_to_share => %s, ttl => %s::interval)",
                            question, as_vector(question_embedding), answer, list(source_ids), intent, acl_hash,
                            prompt_version, llm_model, _model(self, model), user_id, conversation_id, safe_to_share, ttl), conn)

    def normalize_question(self, question: str, *, conn: Conn = None) -> str:
        return self.run(value(str, "select agentmem.normalize_question(question => %s)", question), conn)

    def question_guard_features(self, question: str, *, conn: Conn = None) -> list[str]:
        return self.run(value(list, "select agentmem.question_guard_features(question => %s)", question), conn)

    def question_guard_agrees(self, question: str, other_question: str, *, conn: Conn = None) -> bool:
        return self.run(value(bool, "select agentmem.question_guard_agrees(question => %s, other_question => %s)",
                              question, other_question), conn)

    def corpus_version(self, *, conn: Conn = None) -> int:
        return self.run(value(int, "select agentmem.corpus_version()"), conn)

    def bump_corpus_version(self, *, conn: Conn = None) -> int:
        return self.run(value(int, "select agentmem.bump_corpus_version()"), conn)

    def invalidate_source(self, doc_id: str, *, conn: Conn = None) -> int:
        return self.run(value(int, "select agentmem.invalidate_source(doc_id => %s)", doc_id), conn)

    def sweep_cache(self, batch_size: int = 1000, *, conn: Conn = None) -> int:
        return self.run(value(int, "select agentmem.sweep_cache(batch_size => %s::int)", batch_size), conn)

    def sample_hits(self, n: int = 50, min_similarity: float = 0.85, *,
                    conn: Conn = None) -> list[SampledHit]:
        return self.run(rows(SampledHit, "select * from agentmem.sample_hits(n => %s::int, min_similarity => %s::real)",
                             n, min_similarity), conn)

    def list_cache_entries(self, after: str | None = None, page_size: int = 100, *,
                           conn: Conn = None) -> list[CacheEntry]:
        return self.run(rows(CacheEntry, "select * from agentmem.list_cache_entries(after => %s, "
                             "page_size => %s)", after, page_size), conn)

    def review_hit(self, hit_id: uuid.UUID | str, correct: bool, *, conn: Conn = None) -> None:
        return self.run(nothing("select agentmem.review_hit(hit_id => %s, correct => %s)", hit_id, correct), conn)

    def cache_report(self, cost_uncached: float | Decimal, cost_wrong: float | Decimal, *,
                     thresholds: Sequence[float] | None = None, since: dt.datetime | None = None,
                     conn: Conn = None) -> list[ReportRow]:
        return self.run(rows(ReportRow, "select * from agentmem.cache_report(cost_uncached => %s::numeric, "
                             "cost_wrong => %s::numeric, thresholds => %s::real[], "
                             "since => coalesce(%s::timestamptz, '-infinity'))",
                             cost_uncached, cost_wrong, list(thresholds) if thresholds is not None else None, since), conn)

    # -- facts --------------------------------------------------------------------------------

    def upsert_fact(self, user_id: str, subject: str, fact: str, embedding: Embedding | None,
                    source_message_ids: Sequence[uuid.UUID | str] = (), model: str | None = None,
                    merge_threshold: float = 0.92, *, valid_from: dt.datetime | None = None,
                    valid_to: dt.datetime | None = None, conn: Conn = None) -> FactUpsert:
        """valid_from / valid_to: when the fact was true (aware datetimes); default: from its sources' time."""
        return self.run(one(FactUpsert, "select * from agentmem.upsert_fact(user_id => %s, subject => %s, fact => %s, "
                            "embedding => %s, source_message_ids => %s::uuid[], model => %s, merge_threshold => %s, "
                            "valid_from => %s, valid_to => %s)",
                            user_id, subject, fact, as_vector(embedding), list(source_message_ids), _model(self, model), merge_threshold,
                            aware(valid_from), aware(valid_to)), conn)

    def recall_facts(self, user_id: str, query_embedding: Embedding | None = None, k: int = 5,
                     model: str | None = None, *, query_text: str | None = None, candidate_pool: int = 60,
                     rrf_k: int = 60, since: dt.datetime | None = None, until: dt.datetime | None = None,
                     as_of: dt.datetime | None = None, use_boost: float | None = None,
                     conn: Conn = None) -> list[Fact]:
        """as_of: what was true then; since/until: what was true at some time in [since, until)."""
        return self.run(rows(Fact, "select * from agentmem.recall_facts(user_id => %s, query_embedding => %s, k => %s, "
                             "model => %s, query_text => %s, candidate_pool => %s, rrf_k => %s, since => %s, "
                             "until => %s, as_of => %s, use_boost => %s::real)",
                             user_id, as_vector(query_embedding), k, _model(self, model), query_text, candidate_pool, rrf_k,
                             aware(since), aware(until), aware(as_of), use_boost), conn)

    def fact_history(self, fact_id: uuid.UUID | str, *, conn: Conn = None) -> list[FactVersion]:
        return self.run(rows(FactVersion, "select * from agentmem.fact_history(fact_id => %s)", fact_id), conn)

    # -- a user's memory item by item ---------------------------------------------------------

    def list_conversations(self, user_id: str, after: str | None = None, page_size: int = 100, *,
                           conn: Conn = None) -> list[ConversationSummary]:
        return self.run(rows(ConversationSummary, "select * from agentmem.list_conversations(user_id => %s, after => %s, "
                             "page_size => %s)", user_id, after, page_size), conn)

    def list_facts(self, user_id: str, include_superseded: bool = False, after: str | None = None,
                   page_size: int = 100, *, conn: Conn = None) -> list[ListedFact]:
        return self.run(rows(ListedFact, "select * from agentmem.list_facts(user_id => %s, include_superseded => %s, "
                             "after => %s, page_size => %s)", user_id, include_superseded, after, page_size), conn)

    def list_users(self, after: str | None = None, page_size: int = 100, *,
                   conn: Conn = None) -> list[UserSummary]:
        return self.run(rows(UserSummary, "select * from agentmem.list_users(after => %s, page_size => %s)",
                             after, page_size), conn)

    def list_messages(self, conversation_id: uuid.UUID | str, after: int | None = None, page_size: int = 100, *,
                      conn: Conn = None) -> list[ListedMessage]:
        return self.run(rows(ListedMessage, "select * from agentmem.list_messages(conversation_id => %s, "
                             "after => %s, page_size => %s)", conversation_id, after, page_size), conn)

    def list_access_log(self, after: str | None = None, page_size: int = 100, *,
                        conn: Conn = None) -> list[LoggedReceipt]:
        return self.run(rows(LoggedReceipt, "select * from agentmem.list_access_log(after => %s, "
                             "page_size => %s)", after, page_size), conn)

    def tenant_overview(self, *, conn: Conn = None) -> TenantOverview:
        return self.run(one(TenantOverview, "select * from agentmem.tenant_overview()"), conn)

    def memory_status(self, user_id: str, *, conn: Conn = None) -> MemoryStatus:
        """What the user holds: counts, the embedding jobs waiting, the first and last message's time."""
        return self.run(one(MemoryStatus, "select * from agentmem.memory_status(user_id => %s)", user_id), conn)

    def require_user_item(self, user_id: str, *, conversation_id: uuid.UUID | str | None = None,
                          message_id: uuid.UUID | str | None = None, fact_id: uuid.UUID | str | None = None,
                          conn: Conn = None) -> bool:
        """True when the one id given is the user's item (NotFound otherwise, another user's alike)."""
        return self.run(value(bool, "select agentmem.require_user_item(user_id => %s, conversation_id => %s, "
                              "message_id => %s, fact_id => %s)",
                              user_id, conversation_id, message_id, fact_id), conn)

    def delete_message(self, message_id: uuid.UUID | str, *, conn: Conn = None) -> AccessReceipt:
        return self.run(one(AccessReceipt, "select * from agentmem.delete_message(message_id => %s)", message_id), conn)

    def delete_fact(self, fact_id: uuid.UUID | str, *, conn: Conn = None) -> AccessReceipt:
        return self.run(one(AccessReceipt, "select * from agentmem.delete_fact(fact_id => %s)", fact_id), conn)

    def update_fact(self, fact_id: uuid.UUID | str, fact: str, embedding: Embedding,
                    source_message_ids: Sequence[uuid.UUID | str] = (), *, conn: Conn = None) -> AccessReceipt:
        return self.run(one(AccessReceipt, "select * from agentmem.update_fact(fact_id => %s, fact => %s, embedding => %s, "
                            "source_message_ids => %s::uuid[])", fact_id, fact, as_vector(embedding),
                            [str(s) for s in source_message_ids]), conn)

    def export_user(self, user_id: str, *, conn: Conn = None) -> list[str]:
        """The user's export, one JSON document per line (``"\n".join(lines) + "\n"`` is the file)."""
        return self.run(rows(dict, "select line from agentmem.export_user(user_id => %s)", user_id).then(lines), conn)

    def import_user(self, lines: Sequence[str], *, conn: Conn = None) -> AccessReceipt:
        return self.run(one(AccessReceipt, "select * from agentmem.import_user(lines => %s::text[])", list(lines)), conn)

    # -- pins: exempt from retention and consolidation ------------------------------------------

    def pin(self, kind: str, id: uuid.UUID | str, *, conn: Conn = None) -> dt.datetime:
        """Pin a message, conversation or fact (kind); returns when it was (first) pinned."""
        return self.run(value(dt.datetime, "select agentmem.pin(kind => %s, id => %s)", kind, id), conn)

    def consolidate_facts(self, user_id: str | None = None, *, dry_run: bool = False,
                          min_similarity: float | None = None, max_changes: int | None = None,
                          conn: Conn = None) -> list[dict]:
        """Merge near-duplicate facts into their newer twin's history; one dict per change (run_id, ...)."""
        return self.run(rows(dict, "select * from agentmem.consolidate_facts(user_id => %s, dry_run => %s, "
                             "min_similarity => %s::real, max_changes => %s)",
                             user_id, dry_run, min_similarity, max_changes), conn)

    def undo_consolidation(self, run_id: uuid.UUID | str, *, conn: Conn = None) -> int:
        """Restore what one consolidation run changed; returns the facts restored."""
        return self.run(value(int, "select agentmem.undo_consolidation(run_id => %s)", run_id), conn)

    def set_consolidation(self, min_similarity: float | None, max_changes: int | None = None, *,
                          conn: Conn = None) -> bool:
        """The tenant's consolidation bounds for the scheduled job (None: off); returns whether it is on."""
        return self.run(value(bool, "select agentmem.set_consolidation(min_similarity => %s::real, "
                              "max_changes => %s)", min_similarity, max_changes), conn)

    def set_use_boost(self, weight: float | None, *, conn: Conn = None) -> float | None:
        """The tenant's use boost in search_messages and recall_facts (0 to 0.5; None or 0: off)."""
        return self.run(value(float, "select agentmem.set_use_boost(weight => %s::real)", weight), conn)

    def unpin(self, kind: str, id: uuid.UUID | str, *, conn: Conn = None) -> bool:
        """Unpin a message, conversation or fact (kind); returns whether it was pinned."""
        return self.run(value(bool, "select agentmem.unpin(kind => %s, id => %s)", kind, id), conn)

    # -- forgetting and the tenant's retention policies ---------------------------------------

    def forget_conversation(self, conversation_id: uuid.UUID | str, *, conn: Conn = None) -> Receipt:
        return self.run(one(Receipt, "select * from agentmem.forget_conversation(conversation_id => %s)", conversation_id), conn)

    def forget_user(self, user_id: str, *, conn: Conn = None) -> Receipt:
        return self.run(one(Receipt, "select * from agentmem.forget_user(user_id => %s)", user_id), conn)

    def set_retention_policy(self, kind: str, max_age: dt.timedelta | None, *,
                             conn: Conn = None) -> RetentionPolicy:
        return self.run(one(RetentionPolicy, "select * from agentmem.set_retention_policy(kind => %s, max_age => %s)",
                            kind, max_age), conn)

    def clear_retention_policy(self, kind: str, *, conn: Conn = None) -> bool:
        return self.run(value(bool, "select agentmem.clear_retention_policy(kind => %s)", kind), conn)

    def set_lifecycle_policy(self, kind: str, max_inactive: dt.timedelta | None = None,
                             keep_per_user: int | None = None, combine: str = "and", *,
                             conn: Conn = None) -> RetentionPolicy:
        """Forget by inactivity (combined with max_age by `combine`) and keep at most keep_per_user per user."""
        return self.run(one(RetentionPolicy, "select * from agentmem.set_lifecycle_policy(kind => %s, "
                            "max_inactive => %s, keep_per_user => %s, combine => %s)",
                            kind, max_inactive, keep_per_user, combine), conn)
