"""Checked by mypy (`make lint`), never run: what a type checker sees of the clients.

Memory's methods return values, AsyncMemory's return coroutines, Admin's values;
a wrong argument type is an error. `make lint` fails if any assert_type here is wrong,
and each `type: ignore[...]` below must stay needed (warn_unused_ignores).
"""
# mypy: warn-unused-ignores

from __future__ import annotations

import uuid
from typing import Any, Coroutine, assert_type

import numpy as np
from pgvector import Vector

from agentmem.admin import Admin
from agentmem.client import AsyncMemory, Memory
from agentmem.rows import CacheLookup, ExtractedFact, Fact, JobRun, MessageHit, StoredMessage, TopicShift
from agentmem.embed import Embedder, OllamaEmbedder
from agentmem.lexical import LexicalEmbedder
from agentmem.turn import AsyncTurn, Turn, TurnResult


def sync_client(mem: Memory) -> None:
    assert_type(mem.cache_lookup("q", [0.1]), CacheLookup)
    assert_type(mem.cache_lookup("q", np.zeros(3, dtype=np.float32)), CacheLookup)
    assert_type(mem.cache_lookup("q", Vector([0.1])), CacheLookup)
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
    assert_type(mem.embed_queries(["q"]), list[list[float]])
    assert_type(mem.embedding_cache_lookup("m", ["q"]), list[list[float] | None])
    assert_type(Turn(mem, retriever=lambda q: [])(uuid.uuid4(), "alice", "q"), TurnResult)
    # the typed seams: a Turn's client is its Memory, a client's embedder an Embedder
    assert_type(Turn(mem, retriever=lambda q: []).memory, Memory)
    assert_type(mem.embedder, Embedder | None)
    assert_type(Turn(mem, retriever=lambda q: []).memory.search_messages("alice", [0.1], 5), list[MessageHit])
    Turn(42, retriever=lambda q: [])  # type: ignore[arg-type]
    Memory(mem.pool, tenant="acme", embedder="nomic-embed-text")  # type: ignore[arg-type]
    Memory(mem.pool, tenant="acme", embedder=LexicalEmbedder())
    Memory(mem.pool, tenant="acme", embedder=OllamaEmbedder("nomic-embed-text"))
    mem.record_retrieval(uuid.uuid4(), ["doc-1"], lookback=3)  # type: ignore[call-arg]
    mem.start_conversation(42)  # type: ignore[arg-type]
    mem.cache_lookup("q", "0.1,0.2")  # type: ignore[arg-type]


async def async_client(mem: AsyncMemory) -> None:
    await assert_type(mem.cache_lookup("q", [0.1]), Coroutine[Any, Any, CacheLookup])
    assert_type(await mem.cache_lookup("q", [0.1]), CacheLookup)
    assert_type(await mem.search_messages("alice", [0.1], 5), list[MessageHit])
    assert_type(await mem.remember(uuid.uuid4(), "user", "hi"), StoredMessage)
    assert_type(await mem.cached_answer("q"), CacheLookup)
    await assert_type(mem.unseen_docs(uuid.uuid4(), ["doc-1"]), Coroutine[Any, Any, list[str]])
    assert_type(await mem.recall_facts_about("alice", "q"), list[Fact])
    assert_type(await mem.embed_documents(["d"]), list[list[float]])
    assert_type(await AsyncTurn(mem, retriever=lambda q: [])(uuid.uuid4(), "alice", "q"), TurnResult)
    assert_type(AsyncTurn(mem, retriever=lambda q: []).memory, AsyncMemory)
    await mem.start_conversation(42)  # type: ignore[arg-type]


def admin_client(dba: Admin) -> None:
    assert_type(dba.apply_retention(10), JobRun)
    assert_type(dba.unschedule_retention(), bool)
    assert_type(dba.set_text_search_config("simple"), bool)
    assert_type(dba.create_tenant_index("acme"), str)
    assert_type(dba.tenants_needing_index(), list[dict])
    dba.apply_retention("ten")  # type: ignore[arg-type]
