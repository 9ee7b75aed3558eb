"""The answer cache through the Python driver (sync and async), embedding with an embedder."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

import agentmem
from agentmem.client import AsyncMemory, Memory
from agentmem.lexical import LexicalEmbedder


def embedder():
    return LexicalEmbedder(model="all-minilm", dim=384)


def test_store_and_cached_answer_through_the_sync_driver(app_url):
    with Memory.connect(app_url, tenant="acme", embedder=embedder(), max_size=2) as mem:
        stored = mem.store_answer("How do I reset my password?", "Use the reset link.",
                                  source_ids=["kb-1"], user_id="u1", ttl=dt.timedelta(hours=2))
        assert stored.stored and stored.entry_id and stored.reason is None
        hit = mem.cached_answer("how do I reset my password")
        assert hit.hit and hit.kind == "exact" and hit.answer == "Use the reset link."
        assert hit.source_ids == ["kb-1"]
        miss = mem.cached_answer("How do I reset my password after 30 days?")
        assert not miss.hit and miss.reason
        refused = mem.store_answer("When is my renewal?", "Dear Maria, on 2024-05-01.")
        assert not refused.stored and "personalised" in refused.reason
        assert mem.normalize_question("What's UP?") == "whats up"
        assert mem.question_guard_features("two dollars") == ["cur:usd", "num:2"]
        mem.review_hit(hit.hit_id, True)
        assert [s.hit_id for s in mem.sample_hits(10)] == []  # the only served hit is reviewed
        report = mem.cache_report(0.02, 5, thresholds=[0.9, 0.95])
        assert [round(r.threshold, 2) for r in report] == [0.9, 0.95]
        assert report[0].queries == 2 and report[0].hits == 1 and report[0].reviewed == 1
        assert mem.bump_corpus_version() == 1 and mem.corpus_version() == 1
        assert not mem.cached_answer("How do I reset my password?").hit
        assert mem.sweep_cache() == 1
        assert mem.invalidate_source("kb-1") == 0
        with pytest.raises(agentmem.InvalidArgument):
            mem.store_answer("Question?", "Answer.", intent="no-such-intent")
        with pytest.raises(agentmem.NotFound):
            mem.review_hit("00000000-0000-0000-0000-000000000000", False)


def test_cache_lookup_with_a_given_embedding_and_errors_mapped(app_url):
    with Memory.connect(app_url, tenant="acme", max_size=1) as mem:
        with pytest.raises(agentmem.EmbedderError, match="no embedder"):
            mem.cached_answer("no embedder here")
        with pytest.raises(agentmem.InvalidEmbedding):
            mem.cache_lookup("Question?", [0.1, 0.2], model="all-minilm")
        with pytest.raises(agentmem.InvalidEmbedding):
            mem.cache_store("Question?", [float("nan")] * 384, "Answer.", model="all-minilm")
        r = mem.cache_lookup("Question?", [0.1] * 768)  # default model, 768 dimensions
        assert not r.hit and r.hit_id


def test_async_driver(app_url):
    async def go():
        mem = await AsyncMemory.connect(app_url, tenant="acme", embedder=embedder(), max_size=1)
        try:
            stored = await mem.store_answer("Where is the office?", "On the first floor.")
            hit = await mem.cached_answer("where is the office")
            return stored.stored, hit.hit, hit.kind
        finally:
            await mem.close()
    assert asyncio.run(go()) == (True, True, "exact")


def test_cli_cache_report_prints_a_table_and_plots(app_url, admin_url, tmp_path, capsys):
    from agentmem.cli import main
    with Memory.connect(app_url, tenant="acme", embedder=embedder(), max_size=1) as mem:
        mem.store_answer("How do I reset my password?", "Use the reset link.")
        hit = mem.cached_answer("How do I reset my password?")
        mem.review_hit(hit.hit_id, True)
    assert main(["cache-report", "--database-url", app_url, "--tenant", "acme",
                 "--cost-uncached", "0.02", "--cost-wrong", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["threshold", "queries", "hits", "reviewed", "wrong", "hits/1000", "wrong/1000",
                              "net/1000"]
    assert out[11].split()[:3] == ["0.95", "1", "1"] and out[11].split()[-1] == "20.00"
    png = tmp_path / "report.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert main(["cache-report", "--database-url", app_url, "--tenant", "acme", "--cost-uncached", "0.02",
                     "--cost-wrong", "5", "--png", str(png)]) == 2
        assert "matplotlib" in capsys.readouterr().err
    else:
        assert main(["cache-report", "--database-url", app_url, "--tenant", "acme", "--cost-uncached", "0.02",
                     "--cost-wrong", "5", "--png", str(png)]) == 0
        assert png.read_bytes()[:4] == b"\x89PNG"


def test_async_cached_answer_embeds_once_through_the_embedding_cache(app_url, stub):
    import asyncio

    from agentmem.client import AsyncMemory
    from agentmem.embed import OllamaEmbedder

    async def go():
        mem = await AsyncMemory.connect(app_url, tenant="acme", max_size=2,
                                        embedder=OllamaEmbedder(model="nomic-embed-text", host=stub.host))
        try:
            stored = await mem.store_answer("How do I export my data?", "Use the export button.",
                                            safe_to_share=True)
            found = await mem.cached_answer("How do I export my data?")
            return stored, found
        finally:
            await mem.close()

    stored, found = asyncio.run(go())
    assert stored.stored and found.hit and found.kind == "exact"
    # one Ollama call: the lookup's embedding came from the embedding cache, same query prefix
    assert stub.embedded_texts == ["search_query: How do I export my data?"]
