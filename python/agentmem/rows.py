"""What the SQL functions return, as small dataclasses (one per row type), by feature."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any
from decimal import Decimal

# -- conversation memory -----------------------------------------------------------------------

@dataclass(frozen=True)
class StoredMessage:
    message_id: uuid.UUID
    message_index: int


@dataclass(frozen=True)
class Message:
    message_id: uuid.UUID
    conversation_id: uuid.UUID
    message_index: int
    role: str
    content: str
    metadata: dict
    created_at: dt.datetime       # when agentmem stored it
    occurred_at: dt.datetime      # when it happened (given for imported history, else = stored)


@dataclass(frozen=True)
class MessageHit(Message):
    similarity: float | None      # None unless the vector branch found it
    vector_rank: int | None       # rank in each branch (1 = best), None where it did not find it
    text_rank: int | None
    score: float                  # fused score, 0 or more (docs/search.md)


@dataclass(frozen=True)
class WindowMessage:
    window_rank: int
    conversation_id: uuid.UUID
    message_id: uuid.UUID
    message_index: int
    role: str
    content: str
    metadata: dict
    created_at: dt.datetime
    is_hit: bool
    similarity: float | None
    window_similarity: float | None
    vector_rank: int | None
    text_rank: int | None
    score: float | None
    window_score: float
    occurred_at: dt.datetime


@dataclass(frozen=True)
class ContextItem:
    kind: str  # 'summary' or 'message'
    message_id: uuid.UUID | None
    message_index: int
    role: str
    content: str
    metadata: dict
    created_at: dt.datetime
    occurred_at: dt.datetime | None  # the summary row: that of the last message it covers


@dataclass(frozen=True)
class TopicShift:
    overlap: float | None       # Jaccard overlap of the last two recorded turns (None with fewer)
    shifted: bool               # overlap < threshold
    turns_compared: int         # 0, 1 or 2 recorded turns found
    since_message_index: int | None  # the last recorded turn's user message


# -- answer cache ------------------------------------------------------------------------------

@dataclass
class CacheLookup:
    hit: bool
    kind: str | None
    similarity: float | None
    matched_question: str | None
    entry_id: uuid.UUID | None
    answer: str | None
    source_ids: list[str] | None
    hit_id: uuid.UUID
    reason: str | None


@dataclass
class CacheStore:
    stored: bool
    entry_id: uuid.UUID | None
    reason: str | None
    expires_at: dt.datetime | None


@dataclass
class SampledHit:
    hit_id: uuid.UUID
    kind: str
    similarity: float | None
    question_asked: str
    matched_question: str | None
    answer: str | None
    created_at: dt.datetime


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
    withdrawn: int = 0


# -- facts, forgetting, retention --------------------------------------------------------------

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
    valid_from: dt.datetime       # when it was true in the world: [valid_from, valid_to)
    valid_to: dt.datetime | None  # None while it still is


@dataclass(frozen=True)
class FactVersion:
    subject: str
    fact: str
    source_message_ids: list[uuid.UUID]
    valid_from: dt.datetime       # when this version was true in the world
    valid_to: dt.datetime
    recorded_at: dt.datetime      # when agentmem recorded it, and recorded the one that replaced it
    replaced_at: dt.datetime


@dataclass(frozen=True)
class ConversationSummary:
    """A conversation as list_conversations returns it; cursor is the `after` of the next page."""

    conversation_id: uuid.UUID
    title: str | None
    metadata: dict
    message_count: int
    first_message_at: dt.datetime | None
    last_message_at: dt.datetime | None
    summary: str | None
    summary_through: int | None
    created_at: dt.datetime
    updated_at: dt.datetime
    cursor: str


@dataclass(frozen=True)
class ListedFact:
    """A fact (status current) or one of its earlier versions (replaced, corrected), as list_facts returns it."""

    fact_id: uuid.UUID
    subject: str
    fact: str
    model: str
    source_message_ids: list[uuid.UUID]
    status: str
    valid_from: dt.datetime           # when this version was true in the world: [valid_from, valid_to),
    valid_to: dt.datetime | None      # as recall_facts and fact_history say; None while it still is
    recorded_at: dt.datetime          # when agentmem wrote this version
    replaced_at: dt.datetime | None   # when a later version superseded it; None for the current one
    created_at: dt.datetime           # when the fact was first stored (the listing's order)
    cursor: str
    pinned_at: dt.datetime | None = None      # agentmem.pin; None: not pinned (and on earlier versions)
    use_count: int | None = None              # how often recall_facts returned it (None on earlier versions)
    last_used_at: dt.datetime | None = None


@dataclass(frozen=True)
class MemoryStatus:
    """What one user holds (agentmem.memory_status): all zeros for a user with nothing stored."""

    tenant_id: str
    conversations: int
    messages: int
    facts: int
    embeddings_pending: int       # jobs of the user's rows waiting or running
    embeddings_failed: int        # parked after the retry limit
    oldest_pending: dt.datetime | None
    first_message_at: dt.datetime | None
    last_message_at: dt.datetime | None


@dataclass(frozen=True)
class AccessReceipt:
    """What an export, import, single-item deletion or correction did: kind, the database role, rows per
    table, when. No content, no identifier of the user or item."""

    tenant_id: str
    access_id: uuid.UUID
    kind: str
    actor: str
    rows_affected: dict[str, int]
    logged_at: dt.datetime


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
    max_inactive: dt.timedelta | None = None
    combine: str = "and"
    keep_per_user: int | None = None


@dataclass(frozen=True)
class JobRun:
    """A run of a maintenance job (agentmem.job_runs): for 'retention', rows_removed counts the rows
    removed per kind; for 'index_upkeep', it lists the indexes built and dropped, the tenants
    measured and those left (see agentmem.apply_index_upkeep)."""

    tenant_id: str | None
    run_id: int | None
    job: str
    started_at: dt.datetime
    finished_at: dt.datetime
    rows_removed: dict[str, Any]
    total_removed: int
    error: str | None


# -- the tenant as a whole (a door's view: agentmem inspect) -----------------------------------

@dataclass(frozen=True)
class TenantGrant:
    """One tenant grant of the calling login (my_tenants): scope tenant, prefix, or all (tenant_id None)."""

    tenant_id: str | None
    scope: str
    granted_at: dt.datetime
    binding_mode: str


@dataclass(frozen=True)
class UserSummary:
    """A user as list_users returns it; cursor (the user id) is the `after` of the next page."""

    user_id: str
    conversations: int
    messages: int
    facts: int
    last_message_at: dt.datetime | None
    cursor: str


@dataclass(frozen=True)
class ListedMessage:
    """A message as list_messages returns it: embedded_models empty while it has no embedding."""

    message_id: uuid.UUID
    user_id: str
    message_index: int
    role: str
    content: str
    metadata: dict
    created_at: dt.datetime
    occurred_at: dt.datetime
    embedded_models: list[str]
    pinned_at: dt.datetime | None = None      # agentmem.pin; None: not pinned itself
    use_count: int = 0                        # how often a search returned it (folded by the use job)
    last_used_at: dt.datetime | None = None


@dataclass(frozen=True)
class LoggedReceipt:
    """A receipt of list_access_log: an access (export, import, deletion, correction) or an erasure."""

    log_id: uuid.UUID
    kind: str
    actor: str | None
    rows_affected: dict[str, Any]
    logged_at: dt.datetime
    cursor: str


@dataclass(frozen=True)
class CacheEntry:
    """A cached answer as list_cache_entries returns it."""

    entry_id: uuid.UUID
    question: str
    answer: str
    source_ids: list[str]
    intent: str
    model: str
    corpus_version: int
    current_corpus: bool
    prompt_version: str
    llm_model: str
    user_id: str | None
    created_at: dt.datetime
    expires_at: dt.datetime
    withdrawn_at: dt.datetime | None
    lookups: int
    reviewed_wrong: int
    cursor: str


@dataclass(frozen=True)
class TenantOverview:
    """The current tenant in one row (tenant_overview)."""

    tenant_id: str
    users: int
    conversations: int
    messages: int
    facts: int
    cache_entries: int
    cache_lookups: int
    default_model: str
    corpus_version: int
    embedding_pending: int
    embedding_running: int
    embedding_failed: int
    embedding_oldest: dt.datetime | None
    embedding_last_error: str | None
