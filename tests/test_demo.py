"""`make demo`'s tour runs through the real API, twice in a row, offline, and says what happened."""

from __future__ import annotations

import re

from agentmem_dev import demo
from agentmem_dev.shell import with_database


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


def _act(out: str, title: str) -> str:
    """The lines the demo printed for one act."""
    return out.split(f"== {title}\n", 1)[1].split("\n== ", 1)[0]


WORKER_TEXT = "My invoice PDF still shows our old company address."


def _check_worker_act(out: str, embedder: str, rank: str) -> None:
    act = _act(out, "4. text in, embeddings by the worker")
    words = " ".join(act.split())  # say() wraps lines
    assert "(embedding => null)" in words and "an embedding job for it is queued in the same transaction" in words
    assert "by words at once ('company address'): FOUND" in act
    assert "by meaning ('is the address on the invoice PDF old'): not yet: no vector" in act
    assert (f"as agentmem_demo_worker, a login in role agentmem_worker, with the demo's embedder {embedder}): "
            "claimed 1 job(s) under a lease, embedded 1 text(s), completed 1; backlog now 0.") in words
    assert f"by meaning ('is the address on the invoice PDF old'): FOUND, rank {rank}" in act


def test_the_demo_stores_text_alone_and_its_worker_embeds_it(server, capsys, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    assert demo.run(server.url) == 0
    _check_worker_act(capsys.readouterr().out, "agentmem-lexical-768", "1, similarity")


def test_with_ollama_the_demos_worker_embeds_through_it_with_the_document_prefix(server, stub, capsys,
                                                                               monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", stub.host)
    assert demo.run(server.url) == 0
    out = capsys.readouterr().out
    assert "Ollama answered at" in out
    _check_worker_act(out, "nomic-embed-text", "")  # in the top 3: the stub's vectors are lexical too
    # the worker embedded the text through Ollama, once, with the model's document prefix
    assert stub.embedded_texts.count(f"search_document: {WORKER_TEXT}") == 1


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
    assert f"agentmem psql --database-url {with_database(server.url, demo.DEMO_DB)} --tenant docs-co" in out
    # the cache-report command it prints works as printed, the plot included (make venv installs matplotlib)
    command = re.search(r"\.venv/bin/agentmem (cache-report .*)", out).group(1).split()
    png = tmp_path / "cache-report.png"
    command[command.index("--png") + 1] = str(png)
    assert main(command) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "plot written to" in capsys.readouterr().out


def test_demo_web_serves_the_chat_page_at_the_url_it_prints(server):
    """`agentmem demo --web` (make demo-web): one command, the page's URL printed, the page offline."""
    import argparse
    import http.cookiejar
    import os
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    import psycopg

    from agentmem_dev.cli import DEMO
    from helpers import free_port_url, wait_until
    parser = argparse.ArgumentParser()
    DEMO.arguments(parser)
    assert parser.parse_args(["--web"]).chat_database == "agentmem_chat"
    # Not the default database: it is kept between runs, and one a server kept from an earlier checkout
    # (a migration still being written) would stop the page on its checksum, as it should.
    chat_db = os.environ.get("AGENTMEM_TEST_DBNAME", "agentmem_test") + "_chat"

    def drop_chat_db():
        with psycopg.connect(server.db_url("postgres"), autocommit=True) as conn:
            conn.execute(f'drop database if exists "{chat_db}" with (force)')

    drop_chat_db()
    env = dict(os.environ, OLLAMA_HOST=free_port_url("http://127.0.0.1:1"))
    proc = subprocess.Popen([str(Path(sys.executable).parent / "agentmem"), "demo", "--web", "--database-url",
                             server.url, "--port", "0", "--chat-database", chat_db], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    try:
        out, deadline = "", time.monotonic() + 90
        while "/chat?tenant=docs-co&token=" not in out and time.monotonic() < deadline and proc.poll() is None:
            out += proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/chat\?tenant=docs-co&token=\S+", out)
        assert url, out
        assert f"database {chat_db}, login agentmem_demo_app, tenant docs-co" in out
        assert "the offline lexical embedder agentmem-lexical-768" in out and "TEMPLATE generator" in out
        port = int(re.search(r":(\d+)/chat", url.group(0)).group(1))
        wait_until(lambda: _listening(port), what="the page's server listening")  # uvicorn starts after the print
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        with opener.open(url.group(0), timeout=30) as response:   # the token, then the page without it
            page = response.read().decode()
            assert response.url.endswith("/chat?tenant=docs-co")
        assert "Offline stand-ins." not in page and 'id="user-id"' in page  # asks for a user id first
        with opener.open(response.url + "&user=ada", timeout=30) as response:
            assert "Offline stand-ins." in response.read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        drop_chat_db()


def _listening(port: int) -> bool:
    import socket
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
