"""`make demo`'s tour runs through the real API, twice in a row, offline."""

from __future__ import annotations

from agentmem import demo


def test_demo_runs_twice_and_tells_the_truth_about_its_embedder(server, capsys, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # nothing answers there
    for _ in range(2):
        assert demo.run(server.url) == 0
        out = capsys.readouterr().out
        assert "lexical (shared words), not semantic" in out
        assert "finds 0 messages" in out                      # other tenant sees nothing
        assert "[AM001]" in out                               # no tenant, no rows
        assert "HIT (exact" in out and "miss (guard" in out
        assert "Recall for alice now finds 0 messages" in out
        # the conversational-RAG act: condensed follow-up (canned, and it says so), a topic shift
        # dropping the window, a document skipped as already seen, a paraphrase served from the cache
        assert "the condenser is CANNED" in out
        assert "condensed (canned rewrite (offline, no model)): 'Does the 14-day refund window" in out
        assert "topic SHIFT" in out and "skipped as already seen ['docs/refunds.md']" in out
        assert "turn 5: 'Does the 14-day refund window also apply to annual plans?'\n    cache HIT (semantic" in out
