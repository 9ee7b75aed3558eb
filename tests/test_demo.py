"""`make demo`'s tour runs through the real API, twice in a row, offline, and says what happened."""

from __future__ import annotations

import re

from agentmem import demo


def _turn(out: str, n: int) -> str:
    """The lines the demo printed for turn n."""
    return out.split(f"  turn {n}: ", 1)[1].split("  turn ", 1)[0].split("\nEvery step", 1)[0]


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
        assert "skipped as already seen ['docs/refunds.md']" in out
        assert "turn 5: 'Does the 14-day refund window also apply to annual plans?'\n    cache HIT (semantic" in out


def test_the_demo_reports_the_subject_change_on_its_turn_and_never_calls_a_miss_cached(server, capsys,
                                                                                         monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    assert demo.run(server.url) == 0
    out = capsys.readouterr().out
    # turn 3 ("How do I rotate an API key?") is where the subject changes, and says so
    assert _turn(out, 3).startswith("'How do I rotate an API key?'")
    assert "subject CHANGED here" in _turn(out, 3)
    assert all("CHANGED" not in _turn(out, n) for n in (1, 2, 4, 5))
    # turn 4 drops the old subject's history and says which turn started the new one
    assert "the window before message 4 (turn 3, where the subject changed) is dropped" in _turn(out, 4)
    # stored and hit are different words: a miss stores its answer, a hit is served
    assert "cached: True" not in out
    for n in (1, 2, 3, 4):
        assert "answer stored in the cache" in _turn(out, n) and "HIT" not in _turn(out, n)
    assert "cache HIT" in _turn(out, 5) and "stored" not in _turn(out, 5)


def test_the_demo_names_what_it_leaves_and_its_cache_report_plots(server, capsys, monkeypatch, tmp_path):
    from agentmem.cli import main
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    assert demo.run(server.url) == 0
    out = capsys.readouterr().out
    words = " ".join(out.split())  # say() wraps lines
    assert "tenant 'docs-co': user 'bob' (10 messages) and 4 cached answer(s); user 'alice' was erased" in words
    assert f"agentmem psql --database-url {demo._with_db(server.url, demo.DEMO_DB)} --tenant docs-co" in out
    # the cache-report command it prints works as printed, the plot included (make venv installs matplotlib)
    command = re.search(r"\.venv/bin/agentmem (cache-report .*)", out).group(1).split()
    png = tmp_path / "cache-report.png"
    command[command.index("--png") + 1] = str(png)
    assert main(command) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "plot written to" in capsys.readouterr().out
