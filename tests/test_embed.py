"""OllamaEmbedder (real ollama client against the stub), the embedding cache, and the driver's
remember/recall and conversation methods, sync and async."""

from __future__ import annotations

import asyncio

import numpy as np
import psycopg
import pytest

import agentmem
from agentmem.client import AsyncMemory, Memory
from agentmem.embed import OllamaEmbedder
from agentmem.lexical import lexical_embedding


def test_cache_sql_stores_and_finds_many_texts_per_tenant(app, admin, connect, app_url):
    v = [np.asarray(lexical_embedding(t, 384), dtype=np.float32) for t in ("a", "b")]
    assert app.execute("select agentmem.embedding_cache_store(model => 'all-minilm', texts => %s, embeddings => %s)",
                       (["a", "b"], v)).fetchone() == (2,)
    assert app.execute("select agentmem.embedding_cache_store(model => 'all-minilm', texts => %s, embeddings => %s)",
                       (["a", "c"], v)).fetchone() == (1,)
    rows = app.execute("select ord, embedding from agentmem.embedding_cache_lookup(model => 'all-minilm', texts => %s)",
                       (["b", "zzz", "a"],)).fetchall()
    assert [r[0] for r in rows] == [1, 2, 3] and rows[1][1] is None
    assert np.allclose(rows[0][1].to_numpy(), v[1]) and np.allclose(rows[2][1].to_numpy(), v[0])
    # another tenant sees none of it, and no HNSW index is built on the cache
    other = connect(app_url, tenant="globex")
    assert all(r[0] is None for r in other.execute(
        "select embedding from agentmem.embedding_cache_lookup(model => 'all-minilm', texts => %s)", (["a"],)))
    assert admin.execute("select count(*) from pg_indexes where tablename = 'embedding_cache' "
                         "and indexdef like '%%hnsw%%'").fetchone() == (0,)


@pytest.mark.parametrize("texts, vectors, code", [
    ([], "none", "AM020"),
    (["a", None], "2", "AM020"),
    (["a", "b"], "1", "AM020"),
    (["a"], "wrongdim", "AM010"),
    (["a"], "zero", "AM010"),
])
def test_cache_sql_refuses_bad_input_and_stores_nothing(app, admin, texts, vectors, code):
    good = np.asarray(lexical_embedding("x", 384), dtype=np.float32)
    vecs = {"2": [good, good], "1": [good], "wrongdim": [np.ones(5, dtype=np.float32)],
            "zero": [np.zeros(384, dtype=np.float32)]}.get(vectors, [])
    with pytest.raises(psycopg.Error) as info:
        app.execute("select agentmem.embedding_cache_store(model => 'all-minilm', texts => %s::text[], "
                    "embeddings => %s::vector[])", (texts, vecs))
    assert info.value.sqlstate == code
    assert admin.execute("select count(*) from agentmem.embedding_cache").fetchone() == (0,)
    with pytest.raises(psycopg.Error) as info:
        app.execute("select * from agentmem.embedding_cache_lookup(model => 'no-such', texts => %s)", (["a"],))
    assert info.value.sqlstate == "AM011"


def test_embedder_applies_prefixes_and_the_cache_saves_calls(stub, app_url):
    emb = OllamaEmbedder("nomic-embed-text", host=stub.host, batch_size=2)
    with Memory.connect(app_url, tenant="acme", embedder=emb) as mem:
        texts = ["one fish", "two fish", "red fish", "blue fish", "one fish"]
        first = emb.embed_documents(texts, memory=mem)
        assert len(first) == 5 and all(len(v) == 768 for v in first)
        # registry prefixes; a text twice in one call is embedded once
        assert stub.embedded_texts[0] == "search_document: one fish"
        assert len(stub.embed_calls) == 2 and len(stub.embedded_texts) == 4  # 4 misses, batches of 2
        assert np.allclose(first[0], first[4])
        calls = len(stub.embed_calls)
        again = emb.embed_documents(texts[:4], memory=mem)
        assert len(stub.embed_calls) == calls  # all cached: no call
        assert all(np.allclose(a, b) for a, b in zip(again, first))
        emb.embed_documents(["one fish", "green fish"], memory=mem)
        assert stub.embed_calls[-1]["input"] == ["search_document: green fish"]  # only the miss
        q = emb.embed_query("fish", memory=mem)
        assert stub.embed_calls[-1]["input"] == ["search_query: fish"] and len(q) == 768
        # the cache is the tenant's
        before = len(stub.embed_calls)
        emb.embed_documents(["one fish"], memory=mem.for_tenant("globex"))
        assert len(stub.embed_calls) == before + 1


def test_embedder_without_a_client_uses_constructor_prefixes(stub):
    emb = OllamaEmbedder("all-minilm", host=stub.host, document_prefix="doc: ", query_prefix="q: ")
    emb.embed_documents(["x"])
    emb.embed_query("y")
    assert stub.embedded_texts == ["doc: x", "q: y"]


def test_embedder_errors_are_clear(stub):
    with pytest.raises(agentmem.EmbedderError) as info:
        OllamaEmbedder("not-pulled", host=stub.host).embed_documents(["x"])
    assert "ollama pull not-pulled" in info.value.hint
    with pytest.raises(agentmem.EmbedderError) as info:
        OllamaEmbedder("all-minilm", host="http://127.0.0.1:9", timeout=5).embed_documents(["x"])
    assert "unreachable" in str(info.value) and "OLLAMA_HOST" in info.value.hint
    stub.fail_next = 500
    with pytest.raises(agentmem.EmbedderError) as info:
        OllamaEmbedder("all-minilm", host=stub.host).embed_documents(["x"])
    assert "HTTP 500" in str(info.value)


def test_remember_and_recall_through_the_driver(stub, app_url, admin):
    emb = OllamaEmbedder("all-minilm", host=stub.host)
    with Memory.connect(app_url, tenant="acme", embedder=emb) as mem:
        cid = mem.start_conversation("alice", title="pets", metadata={"channel": "web"})
        stored = mem.remember(cid, "user", "my dog is called Rex", metadata={"turn": 1})
        assert stored.message_index == 0
        mem.remember(cid, "assistant", "Rex is a nice name for a dog")
        mem.remember(cid, "user", "I also like chess")
        hits = mem.recall("alice", "what is my dog called", k=2)
        assert [h.content for h in hits][0] == "my dog is called Rex" and hits[0].similarity > 0
        assert hits[0].metadata == {"turn": 1}
        assert [m.message_index for m in mem.recent_messages(cid, n=2)] == [1, 2]
        assert [m.message_index for m in mem.context_window(stored.message_id, before=0, after=1)] == [0, 1]
        rows = mem.store_messages(cid, ["user", "assistant"], ["a", "b"],
                                  emb.embed_documents(["a", "b"], memory=mem), model="all-minilm",
                                  metadata=[{"i": 1}, {"i": 2}])
        assert [r.message_index for r in rows] == [3, 4]
        mem.set_summary(cid, "alice has a dog, Rex", 2)
        ctx = mem.short_term_context(cid, keep_last=2)
        assert [(c.kind, c.message_index) for c in ctx] == [("summary", 2), ("message", 3), ("message", 4)]
        windows = mem.search_with_context("alice", emb.embed_query("dog Rex", memory=mem), k=1, radius=1,
                                          model="all-minilm")
        assert {w.message_index for w in windows} == {0, 1} or {w.message_index for w in windows} == {0, 1, 2}
        with pytest.raises(agentmem.NotFound):
            mem.for_tenant("globex").recent_messages(cid)
        with pytest.raises(agentmem.InvalidArgument):
            mem.remember(cid, "robot", "hi")
        with pytest.raises(agentmem.ContentTooLarge):
            mem.remember(cid, "user", "x " * 60_000)
    assert admin.execute("select count(*) from agentmem.messages").fetchone() == (5,)


def test_remember_without_an_embedder_says_so(app_url):
    with Memory.connect(app_url, tenant="acme") as mem:
        with pytest.raises(agentmem.EmbedderError):
            mem.recall("alice", "anything")


def test_async_client_parity(stub, app_url):
    async def go():
        emb = OllamaEmbedder("all-minilm", host=stub.host)
        mem = await AsyncMemory.connect(app_url, tenant="acme", embedder=emb)
        try:
            cid = await mem.start_conversation("alice")
            first = await mem.remember(cid, "user", "the meeting is on Tuesday")
            await mem.remember(cid, "assistant", "noted, Tuesday")
            hits = await mem.recall("alice", "when is the meeting", k=1)
            recent = await mem.recent_messages(cid)
            calls = len(stub.embed_calls)
            await mem.recall("alice", "when is the meeting", k=1)  # the query's embedding is cached
            cached = len(stub.embed_calls) == calls
            try:
                await mem.recent_messages(cid, n=0)
            except agentmem.InvalidArgument:
                bad = True
            return first, hits, recent, cached, bad
        finally:
            await mem.close()
    first, hits, recent, cached, bad = asyncio.run(go())
    assert first.message_index == 0 and hits[0].content == "the meeting is on Tuesday"
    assert [m.message_index for m in recent] == [0, 1] and cached and bad
