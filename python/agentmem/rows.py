"""What the SQL functions return, as small dataclasses (one per row type), by feature."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
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
    score: float                  # fused score: sum of 1 / (rrf_k + rank) over the branches


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
