"""The inspector's chat page (/chat, python/agentmem/inspect/chat.py and chat_session.py): its logic
(ChatRoom: one Turn per message, facts recalled and extracted, offline and on the Ollama stub) and the
page in headless Chromium: three messages answered, an extracted fact in the sidebar, each reply's steps
with their milliseconds; a reload bringing history and memory back; "clear chat" starting a new
conversation whose question about a fact is answered from it; a repeated question answered from the
(per-user) cache and saying so; markup shown as text; offline stand-ins said under every reply; forms
refused without their CSRF token. ``make screenshots`` writes docs/inspect/chat.png from here."""

from __future__ import annotations

import json
import re

import pytest

from agentmem.client import Memory
from agentmem.inspect.chat_session import (FACTS_HEADER, OFFLINE_MODEL, ChatRoom, choose_models, content_words,
                                           pattern_facts, user_scope)
from agentmem.turn import DEFAULT_CHAT_MODEL
from agentmem.turn_parts import CONDENSE_PROMPT, SUMMARY_PROMPT
from helpers import count, free_port_url


def assistant(body: dict) -> str | None:
    """The stub's chat replies for a chat: facts by the offline patterns (as JSON), condensation as the
    question itself, a summary, and answers that cite the facts given in the prompt."""
    messages = body.get("messages") or []
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    last = messages[-1]["content"] if messages else ""
    if (body.get("options") or {}).get("num_predict") == 1:
        return "pong"                                     # choose_models' probe
    if body.get("format") == "json":                      # extract_facts
        said = "\n".join(line[len("user: "):] for line in last.splitlines() if line.startswith("user: "))
        return json.dumps({"facts": pattern_facts(said)})
    if system == CONDENSE_PROMPT:
        return last.split("Latest question: ", 1)[1].split("\n", 1)[0]
    if system == SUMMARY_PROMPT:
        return "The user talked about themselves."
    facts = system.split(FACTS_HEADER + "\n", 1)[1].split("\n\n", 1)[0].splitlines() if FACTS_HEADER in system else []
    cited = [line.split("] ", 1)[1] for line in facts if content_words(line) & content_words(last)]
    return "From memory: " + " ".join(cited) if cited else f"Stub answer to: {last}"


@pytest.fixture
def lexical_model(admin):
    admin.execute("select agentmem.register_model(model => %s, dimension => 768)", (OFFLINE_MODEL,))


def room_and_memory(app_url, host: str, embedder: str = "auto"):
    models, emb = choose_models(host, embedder=embedder)
    mem = Memory.connect(app_url, tenant="acme", embedder=emb, max_size=2)
    return ChatRoom(models, emb), mem


def test_offline_the_chat_runs_on_the_lexical_embedder_and_templates_and_says_so(app_url, admin, lexical_model):
    room, mem = room_and_memory(app_url, free_port_url("http://127.0.0.1:1"))
    with mem:
        assert room.models.chat_model is None and "TEMPLATE generator" in room.models.note
        first = room.send(mem, "ada", "My name is Ada and I live in Lisbon.")
        assert first.models_note == room.models.short == ("OFFLINE lexical embedder, OFFLINE template answers, "
                                                          "no condenser")
        assert {(f.subject, f.action) for f in first.facts_extracted} == {("name", "inserted"), ("home_city", "inserted")}
        assert [s.name for s in first.steps][:2] == ["current conversation", "recall_facts"]
        assert first.steps[-1].name == "extract_facts" and all(s.ms >= 0 for s in first.steps)
        answer = room.send(mem, "ada", "Where do I live?")
        assert answer.answer.startswith("From what I remember about you: The user lives in Lisbon.")
        assert any(f.subject == "home_city" for f in answer.facts_used)
        page = room.page(mem, "ada")
        assert [m.role for m in page.messages] == ["user", "assistant"] * 2
        assert page.messages[-1].turn is answer and page.last_turn is answer
        assert {(f.subject, f.fact) for f in page.facts if f.status == "current"} == {
            ("name", "The user's name is Ada."), ("home_city", "The user lives in Lisbon.")}
        # a generic answer from the documents is cached offline too, and the repeat says where it came from
        docs = room.send(mem, "ada", "What is the refund window?")
        assert docs.answer == "From docs/refunds.md: Refunds are possible within 14 days from the invoice date."
        assert "answer cached" in docs.cache_note
        repeat = room.send(mem, "ada", "What is the refund window?")
        assert repeat.cache_hit and repeat.answer == docs.answer and repeat.models_note == room.models.short
    assert count(admin, "facts", "user_id = 'ada'") == 2


def test_on_ollama_facts_are_extracted_remembered_after_clear_and_a_repeat_hits_the_users_cache(
        app_url, admin, stub):
    stub.chat_responder = assistant
    room, mem = room_and_memory(app_url, stub.host)
    with mem:
        assert room.models.chat_model == DEFAULT_CHAT_MODEL and "TEMPLATE" not in room.models.note
        room.send(mem, "bo", "Hello, I live in Porto.")
        assert [f.fact for f in room.page(mem, "bo").facts] == ["The user lives in Porto."]
        assert room.page(mem, "bo").facts[0].new
        first = room.page(mem, "bo").conversation_id
        new = room.clear(mem, "bo")
        assert new != first and room.clear(mem, "bo") == new      # an empty conversation is not ended again
        page = room.page(mem, "bo")
        assert page.messages == [] and [c.conversation_id for c in page.earlier] == [first]
        assert [f.fact for f in page.facts] == ["The user lives in Porto."] and not page.facts[0].new
        answer = room.send(mem, "bo", "Which city do I live in?")
        assert answer.answer == "From memory: The user lives in Porto. (since " + answer.facts_used[0].valid_from.strftime(
            "%Y-%m-%d") + ")"
        assert not answer.cache_hit and answer.recalled  # the earlier conversation's message was recalled
        recalled = room.page(mem, "bo").recalled
        assert "Hello, I live in Porto." in [r.content for r in recalled] and all(r.new for r in recalled)
        again = room.send(mem, "bo", "What is the refund window?")
        # after a later turn it is no longer new (new: first recalled by the latest turn)
        assert not [r for r in room.page(mem, "bo").recalled if r.content == "Hello, I live in Porto." and r.new]
        repeat = room.send(mem, "bo", "What is the refund window?")
        assert not again.cache_hit and repeat.cache_hit and repeat.matched_question == "What is the refund window?"
        assert repeat.answer == again.answer and "answered from the cache (exact" in repeat.cache_note
        assert [s.name for s in repeat.steps] == ["current conversation", "recall_facts", "embed question",
                                                  "cache_lookup", "embed messages", "store_messages"]
        # another user asking the same question is not served bo's answer
        assert not room.send(mem, "cy", "What is the refund window?").cache_hit
        # a contradicting fact replaces the old one, which stays listed with the period it held
        moved = room.send(mem, "bo", "I live in Madrid now.")
        assert [(f.fact, f.action) for f in moved.facts_extracted] == [("The user lives in Madrid.", "replaced")]
        rows = room.page(mem, "bo").facts
        assert [(f.fact, f.status == "current", f.new, f.valid_to is None) for f in rows] == [
            ("The user lives in Madrid.", True, True, True), ("The user lives in Porto.", False, False, False)]
    assert count(admin, "cache_entries", "acl_hash = %s", (user_scope("bo"),)) >= 1


def test_a_turn_shows_documents_skipped_as_already_seen_and_the_topic_shift(app_url, stub):
    stub.chat_responder = assistant
    room, mem = room_and_memory(app_url, stub.host)
    with mem:
        room.send(mem, "di", "What is the refund window?")
        second = room.send(mem, "di", "Does the refund window apply to annual plans?")
        assert second.docs_skipped == ["docs/refunds.md"] and second.docs_used == ["docs/annual-plans.md"]
        room.send(mem, "di", "How do I rotate an API key?")
        shifted = room.send(mem, "di", "Does rotating the API key break running jobs?")
        assert shifted.topic_shifted and "shifted" in shifted.topic_note


# -- the page, in headless Chromium ------------------------------------------------------------


def say(page, text: str) -> None:
    """Type a message and send it; the page comes back with the reply."""
    page.fill("#message", text)
    with page.expect_navigation():
        page.click("#send")
    assert page.locator("#chat-error").count() == 0 and page.locator("#message").count() == 1, page.content()


def replies(page) -> list[str]:
    return [t.strip() for t in page.locator("#messages li.msg.assistant .content").all_inner_texts()]


def facts(page) -> list[str]:
    return page.locator("#facts .fact-text").all_inner_texts()


def test_chat_page_three_messages_reload_clear_cache_and_markup(app_url, stub, inspector, page):
    stub.chat_responder = assistant
    server = inspector(embedder="auto", ollama_host=stub.host)
    page.set_default_timeout(10_000)
    page.login(server, "/chat", tenant="acme")
    page.fill("#user-id", "ana")
    with page.expect_navigation():
        page.click("#start-chat")
    assert page.inner_text("#chat-user") == "ana" and page.locator("#no-messages").count() == 1
    say(page, "Hi, I live in Lisbon.")
    say(page, "What is the refund window?")
    say(page, "Does the refund window apply to annual plans?")
    assert replies(page) == ["Stub answer to: Hi, I live in Lisbon.", "Stub answer to: What is the refund window?",
                             "Stub answer to: Does the refund window apply to annual plans?"]
    # the fact the first turn extracted is in the sidebar, with its validity
    assert facts(page) == ["The user lives in Lisbon."]
    assert "valid from" in page.inner_text("#facts") and "still valid" in page.inner_text("#facts")
    # under each reply: its steps, each with its milliseconds; the third skipped a document already sent
    turns = page.locator("#messages li.msg.assistant .turn")
    assert turns.count() == 3
    for i in range(3):
        rows = turns.nth(i).locator("tr.step")
        names = [rows.nth(j).locator("td").nth(0).text_content() for j in range(rows.count())]
        assert {"recall_facts", "cache_lookup", "search_with_context", "generate", "store_messages",
                "extract_facts"} <= set(names)
        assert all(re.fullmatch(r"\d+\.\d", rows.nth(j).locator("td").nth(1).text_content())
                   for j in range(rows.count()))
    assert "skipped as already seen: docs/refunds.md" in turns.nth(2).inner_text()
    assert "Offline stand-ins." not in page.inner_text("#models")
    assert "models: Ollama nomic-embed-text, llama3.2, llama3.2:1b" in turns.nth(0).inner_text()

    # reload with the same user id: history and memory are back
    page.goto(server.url("/chat", tenant="acme", user="ana"))
    assert len(replies(page)) == 3 and facts(page) == ["The user lives in Lisbon."]
    first_conversation = page.inner_text("#conversation-id")

    # clear chat: a new conversation, the facts stay, and a question about one is answered from it
    with page.expect_navigation():
        page.click("#clear")
    assert page.locator("#no-messages").count() == 1 and facts(page) == ["The user lives in Lisbon."]
    assert page.inner_text("#conversation-id") != first_conversation
    assert "3 messages" not in page.inner_text("#earlier") and "6 messages" in page.inner_text("#earlier")
    say(page, "Which city do I live in?")
    assert replies(page)[-1].startswith("From memory: The user lives in Lisbon.")
    assert "[home_city] The user lives in Lisbon." in page.inner_text("#latest .facts-used")

    # a repeated question: the cache answers, and the reply says so and which question it matched
    say(page, "what is the refund window")
    latest = page.inner_text("#latest")
    assert replies(page)[-1] == "Stub answer to: What is the refund window?"
    assert "answered from the cache" in latest and "What is the refund window?" in page.inner_text("#latest .matched")

    # markup in a message is text: no element made, no script run
    say(page, 'I like <b id="bold">bold</b><script>window.pwned = 1</script>')
    assert page.locator("#bold").count() == 0 and page.evaluate("typeof window.pwned") == "undefined"
    said = page.locator("#messages li.msg.user .content").all_inner_texts()[-1]
    assert said == 'I like <b id="bold">bold</b><script>window.pwned = 1</script>'


def test_chat_page_offline_says_so_under_every_reply(app_url, lexical_model, inspector, page):
    server = inspector(embedder="auto", ollama_host=free_port_url("http://127.0.0.1:1"))
    page.set_default_timeout(10_000)
    page.login(server, "/chat", tenant="acme", user="ada")
    assert "Offline stand-ins." in page.inner_text("#models")
    say(page, "Hi! My name is Ada and I live in Lisbon.")
    say(page, "What is the refund window?")
    with page.expect_navigation():
        page.click("#clear")
    say(page, "Where do I live?")
    say(page, "What is the refund window?")
    assert replies(page) == ["From what I remember about you: The user lives in Lisbon.",
                             "From docs/refunds.md: Refunds are possible within 14 days from the invoice date."]
    notes = page.locator("#messages .models-note").all_inner_texts()
    assert len(notes) == 2 and all("OFFLINE lexical embedder, OFFLINE template answers" in n for n in notes)
    assert "answered from the cache" in page.inner_text("#latest")
    assert sorted(facts(page)) == ["The user lives in Lisbon.", "The user's name is Ada."]
    page.shot("chat")


def test_chat_forms_need_their_csrf_token_and_an_empty_message_is_refused(app_url, stub, inspector, page):
    server = inspector(embedder="lexical", ollama_host=free_port_url("http://127.0.0.1:1"))
    page.set_default_timeout(10_000)
    page.login(server, "/chat", tenant="acme", user="eve")
    assert "Offline stand-ins." in page.inner_text("#models") and "TEMPLATE" in page.inner_text("#models")
    # offline, on a database where the lexical model is not registered: the page says what to do, and
    # keeps the message in the box
    page.fill("#message", "hello")
    with page.expect_console_errors() as errors, page.expect_navigation():
        page.click("#send")
    assert "status of 400" in " ".join(errors)
    assert "register_model" in page.inner_text("#chat-error") and page.input_value("#message") == "hello"
    token = page.input_value("#send-form input[name=csrf_token]")
    empty = page.request.post(server.url("/chat/send", tenant="acme"),
                              form={"csrf_token": token, "user": "eve", "message": "   "})
    assert empty.status == 400 and "Not sent: the message is empty." in empty.text()
    refused = page.request.post(server.url("/chat/send", tenant="acme"), form={"user": "eve", "message": "hi"})
    assert refused.status == 403
    refused = page.request.post(server.url("/chat/send", tenant="acme"),
                                form={"csrf_token": page.input_value("#clear-form input[name=csrf_token]"),
                                      "user": "eve", "message": "hi"})
    assert refused.status == 403  # the token of another form
    refused = page.request.post(server.url("/chat/clear", tenant="acme"), form={"user": "eve"})
    assert refused.status == 403
