"""Checked by mypy (`make lint`), never run: what a type checker sees of the clients.

Memory's methods return values, AsyncMemory's return awaitables, Admin's values;
a wrong argument type is an error. `make lint` fails if any assert_type here is wrong.
"""

from __future__ import annotations

import uuid
from typing import Awaitable, assert_type

from agentmem.admin import Admin
from agentmem.client import AsyncMemory, Memory
from agentmem.rows import CacheLookup, ExtractedFact, Fact, JobRun, MessageHit, StoredMessage, TopicShift


def sync_client(mem: Memory) -> None:
    assert_type(mem.cache_lookup("q", [0.1]), CacheLookup)
    assert_type(mem.search_messages("alice", [0.1], 5), list[MessageHit])
    assert_type(mem.question_guard_agrees("a", "b"), bool)
    assert_type(mem.start_conversation("alice"), uuid.UUID)
    assert_type(mem.remember(uuid.uuid4(), "user", "hi"), StoredMessage)
    assert_type(mem.cached_answer("q"), CacheLookup)
    assert_type(mem.extract_facts("turn", "alice"), list[ExtractedFact])
    assert_type(mem.search_messages("alice", query_text="INV-2291"), list[MessageHit])
    assert_type(mem.recall("alice", "q", hybrid=False), list[MessageHit])
    assert_type(mem.recall_facts_about("alice", "q"), list[Fact])
    assert_type(mem.topic_shift(uuid.uuid4()), TopicShift)
    assert_type(mem.record_retrieval(uuid.uuid4(), ["doc-1"]), int)


async def async_client(mem: AsyncMemory) -> None:
    assert_type(mem.cache_lookup("q", [0.1]), Awaitable[CacheLookup])
    assert_type(await mem.cache_lookup("q", [0.1]), CacheLookup)
    assert_type(await mem.search_messages("alice", [0.1], 5), list[MessageHit])
    assert_type(await mem.remember(uuid.uuid4(), "user", "hi"), StoredMessage)
    assert_type(await mem.cached_answer("q"), CacheLookup)
    assert_type(mem.unseen_docs(uuid.uuid4(), ["doc-1"]), Awaitable[list[str]])
    assert_type(await mem.recall_facts_about("alice", "q"), list[Fact])


def admin_client(dba: Admin) -> None:
    assert_type(dba.apply_retention(10), JobRun)
    assert_type(dba.unschedule_retention(), bool)
    assert_type(dba.set_text_search_config("simple"), bool)
    assert_type(dba.create_tenant_index("acme"), str)
    assert_type(dba.tenants_needing_index(), list[dict])
