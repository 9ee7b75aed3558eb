"""OllamaEmbedder (real ollama client against the stub), the embedding cache, and the driver's
remember/recall and conversation methods, sync and async."""

from __future__ import annotations


import numpy as np
import psycopg
import pytest

import agentmem
from agentmem.client import Memory
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
        first = mem.embed_documents(texts)
        assert len(first) == 5 and all(len(v) == 768 for v in first)
        # registry prefixes; a text twice in one call is embedded once
        assert stub.embedded_texts[0] == "search_document: one fish"
        assert len(stub.embed_calls) == 2 and len(stub.embedded_texts) == 4  # 4 misses, batches of 2
        assert np.allclose(first[0], first[4])
        calls = len(stub.embed_calls)
        again = mem.embed_documents(texts[:4])
        assert len(stub.embed_calls) == calls  # all cached: no call
        assert all(np.allclose(a, b) for a, b in zip(again, first))
        mem.embed_documents(["one fish", "green fish"])
        assert stub.embed_calls[-1]["input"] == ["search_document: green fish"]  # only the miss
        q = mem.embed_queries(["fish"])[0]
        assert stub.embed_calls[-1]["input"] == ["search_query: fish"] and len(q) == 768
        # the cache is the tenant's
        before = len(stub.embed_calls)
        mem.for_tenant("globex").embed_documents(["one fish"])
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
