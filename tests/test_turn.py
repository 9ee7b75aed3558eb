"""A whole conversational-RAG turn: condense (through the Ollama stub's /api/chat) and Turn / AsyncTurn."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentmem.client import AsyncMemory, Memory
from agentmem.embed import OllamaEmbedder
from agentmem.turn import (
    DEFAULT_CONDENSE_MODEL, AsyncTurn, CannedCondenser, Condensed, GenerationRequest, OllamaCondenser, Turn,
    condense,
)
from helpers import count

CORPUS = {
    "docs/refunds.md": "Refunds: within 14 days from the invoice date.",
    "docs/annual-plans.md": "Annual plans are billed once a year.",
    "docs/api-keys.md": "Rotate an API key under Settings > API keys.",
    "docs/jobs.md": "Running jobs use the key they started with.",
}
KEYWORDS = {"refund": ["docs/refunds.md"], "annual": ["docs/annual-plans.md", "docs/refunds.md"],
            "key": ["docs/api-keys.md"], "jobs": ["docs/jobs.md", "docs/api-keys.md"]}


class Retriever:
    """The application's search: documents whose keyword the question contains."""

    def __init__(self):
        self.calls: list[str] = []

    def __call__(self, question: str):
        self.calls.append(question)
        ids = [d for word, docs in KEYWORDS.items() if word in question.lower() for d in docs]
        return [(d, CORPUS[d]) for d in dict.fromkeys(ids)]


class Generator:
    def __init__(self, answer: str | None = None):
        self.requests: list[GenerationRequest] = []
        self.answer = answer

    def __call__(self, request: GenerationRequest) -> str:
        self.requests.append(request)
        return self.answer or f"Answer about {', '.join(d.doc_id for d in request.docs) or 'nothing new'}."


class Summariser:
    def __init__(self):
        self.calls: list[tuple] = []

    def __call__(self, previous, messages):
        self.calls.append((previous, [m["content"] for m in messages]))
        return f"summary of {len(messages)} more messages" + (f" after: {previous}" if previous else "")


@pytest.fixture
def mem(app_url, stub):
    with Memory.connect(app_url, tenant="acme", max_size=4,
                        embedder=OllamaEmbedder(model="nomic-embed-text", host=stub.host)) as m:
        yield m


def make_turn(mem, stub, **kw):
    kw.setdefault("retriever", Retriever())
    kw.setdefault("generator", Generator())
    kw.setdefault("condenser", OllamaCondenser(host=stub.host))
    kw.setdefault("summariser", Summariser())
    return Turn(mem, **kw)


def condense_calls(stub):
    return [c for c in stub.chat_calls if c["model"] == DEFAULT_CONDENSE_MODEL]


HISTORY = [
    {"role": "user", "content": "turn one: hello"}, {"role": "assistant", "content": "answer one"},
    {"role": "user", "content": "turn two: plans?"}, {"role": "assistant", "content": "answer two"},
    {"role": "user", "content": "turn three: what is the refund window?"},
    {"role": "assistant", "content": "answer three: 14 days from the invoice date"},
    {"role": "user", "content": "turn four: and for teams?"}, {"role": "assistant", "content": "answer four"},
    {"role": "user", "content": "turn five: thanks"}, {"role": "assistant", "content": "answer five"},
]


# -- condense --------------------------------------------------------------------------------------

def test_the_condensation_prompt_carries_the_last_three_turns_and_the_question(stub):
    stub.chat_replies = ["Does the 14-day refund window apply to annual plans?"]
    c = condense(HISTORY, "Does that apply to annual plans?", host=stub.host)
    assert c == Condensed("Does that apply to annual plans?", "Does the 14-day refund window apply to annual plans?",
                          True, False, None)
    (call,) = stub.chat_calls
    assert call["model"] == DEFAULT_CONDENSE_MODEL and call["options"]["temperature"] == 0
    prompt = "\n".join(m["content"] for m in call["messages"])
    assert "pronoun" in call["messages"][0]["content"] and "Change nothing else" in call["messages"][0]["content"]
    for kept in ("turn three", "answer three", "turn four", "answer four", "turn five", "answer five"):
        assert kept in prompt
    assert "turn one" not in prompt and "turn two" not in prompt and "answer two" not in prompt
    assert prompt.rstrip().endswith("Latest question: Does that apply to annual plans?\n\nStandalone question:")


def test_no_history_makes_no_call(stub):
    for history in ([], [{"kind": "summary", "role": "system", "content": "a summary only"}]):
        c = condense(history, "What is the refund window?", host=stub.host)
        assert c.standalone == "What is the refund window?" and not c.called and not c.fell_back
        assert "no history" in c.reason
    assert stub.chat_calls == []


@pytest.mark.parametrize("how, reason", [
    ("http500", "failed"),
    ("no model", "failed"),
    ("empty", "empty"),
    ("too long", "over the bound"),
])
def test_a_failing_chat_falls_back_to_the_question_and_says_so(stub, how, reason):
    if how == "http500":
        stub.chat_replies, stub.fail_next = ["unused"], 500
    elif how == "empty":
        stub.chat_replies = ["   "]
    elif how == "too long":
        stub.chat_replies = ["Sure! " + "The refund window is explained here. " * 20]
    c = condense(HISTORY, "Does that apply?", host=stub.host)
    assert c.standalone == "Does that apply?" and c.called and c.fell_back
    assert reason in c.reason and "used as asked" in c.reason
    assert len(stub.chat_calls) == (0 if how == "http500" else 1)  # the stub logs no refused request


def test_a_labelled_or_quoted_reply_is_cleaned_and_a_host_that_is_down_falls_back(stub):
    stub.chat_replies = ['Standalone question: "Does the refund window apply to annual plans?"']
    assert condense(HISTORY, "Does that apply?", host=stub.host).standalone == \
        "Does the refund window apply to annual plans?"
    c = condense(HISTORY, "Does that apply?", host="http://127.0.0.1:9", timeout=2)
    assert c.fell_back and "failed" in c.reason


# -- Turn ------------------------------------------------------------------------------------------

def test_a_follow_up_is_condensed_retrieved_answered_stored_recorded_and_cached(mem, stub, admin):
    conv = mem.start_conversation("alice")
    retriever, generator = Retriever(), Generator()
    turn = make_turn(mem, stub, retriever=retriever, generator=generator)
    first = turn(conv, "alice", "What is the refund window?")
    assert not first.cache_hit and first.cache_reason == "no cached question in this scope"
    assert first.condensed.reason.startswith("no history") and condense_calls(stub) == []
    assert first.docs_used == ["docs/refunds.md"] and first.retrieval_recorded == 1
    assert first.cache_stored and (first.user_message.message_index, first.assistant_message.message_index) == (0, 1)

    stub.chat_replies_by_model[DEFAULT_CONDENSE_MODEL] = ["Does the 14-day refund window apply to annual plans?"]
    second = turn(conv, "alice", "Does that apply to annual plans?")
    assert second.standalone == "Does the 14-day refund window apply to annual plans?"
    assert retriever.calls[-1] == second.standalone          # retrieval used the standalone question
    assert second.docs_retrieved == ["docs/refunds.md", "docs/annual-plans.md"]
    assert second.docs_used == ["docs/annual-plans.md"] and second.docs_skipped == ["docs/refunds.md"]
    request = generator.requests[-1]
    assert [d.doc_id for d in request.docs] == ["docs/annual-plans.md"]
    assert [m["content"] for m in request.history] == ["What is the refund window?", first.answer]
    assert request.messages()[-1] == {"role": "user", "content": second.standalone}
    # both documents are recorded (the Jaccard needs what was retrieved), the raw question is stored
    assert admin.execute("select doc_ids from agentmem.retrievals where message_id = %s",
                         (second.user_message.message_id,)).fetchone() == (["docs/refunds.md", "docs/annual-plans.md"],)
    assert admin.execute("select content, metadata from agentmem.messages where message_id = %s",
                         (second.user_message.message_id,)).fetchone() == (
        "Does that apply to annual plans?", {"standalone": second.standalone})
    # cached under the standalone question, citing every retrieved document
    assert admin.execute("select question, source_ids from agentmem.cache_entries order by created_at desc "
                         "limit 1").fetchone() == (second.standalone, ["docs/annual-plans.md", "docs/refunds.md"])  # sorted
    assert second.topic.turns_compared == 1 and not second.topic.shifted
    names = [s.name for s in second.steps]
    assert names == ["embed question", "cache_lookup", "short_term_context", "topic_shift", "condense",
                     "embed standalone", "search_with_context", "retrieve", "unseen_docs", "generate",
                     "embed messages", "store_messages", "cache_store"]
    assert set(second.timings) == set(names) and all(t >= 0 for t in second.timings.values())
    assert "skipped as already seen ['docs/refunds.md']" in second.describe()


def test_a_cache_hit_skips_retrieval_and_generation(mem, stub, admin):
    retriever, generator = Retriever(), Generator("Within 14 days from the invoice date.")
    turn = make_turn(mem, stub, retriever=retriever, generator=generator)
    turn(mem.start_conversation("alice"), "alice", "What is the refund window?")
    conv = mem.start_conversation("bob")
    hit = turn(conv, "bob", "what is the refund window")
    assert hit.cache_hit and hit.cache_kind == "exact" and hit.answer == "Within 14 days from the invoice date."
    assert hit.cache_matched_question == "What is the refund window?"   # the question as cached
    assert len(retriever.calls) == 1 and len(generator.requests) == 1 and condense_calls(stub) == []
    assert [s.name for s in hit.steps] == ["embed question", "cache_lookup", "embed messages", "store_messages"]
    assert "HIT (exact" in hit.steps[1].note
    # the exchange is in the conversation; no retrieval happened, so none is recorded
    assert [m.content for m in mem.recent_messages(conv)] == ["what is the refund window", hit.answer]
    assert hit.retrieval_recorded is None and count(admin, "retrievals", "conversation_id = %s", (conv,)) == 0
    assert count(admin, "cache_hits", "kind = 'exact'") == 1   # the hit is logged


def test_a_personalised_answer_is_not_cached(mem, stub, admin):
    turn = make_turn(mem, stub, generator=Generator("Alice, your refund of $120 was sent on 2026-03-01."))
    r = turn(mem.start_conversation("alice"), "alice", "Where is my refund?")
    assert not r.cache_stored and "personalised" in r.cache_store_reason
    assert count(admin, "cache_entries") == 0
    assert "refused: answer looks personalised" in r.describe()


def test_a_question_that_could_not_be_made_standalone_is_not_cached(mem, stub, admin):
    conv = mem.start_conversation("alice")
    turn = make_turn(mem, stub)
    turn(conv, "alice", "What is the refund window?")
    r = turn(conv, "alice", "Does that apply to annual plans?")   # the stub has no condense reply: 404
    assert r.condensed.fell_back and "failed" in r.condensed.reason and r.standalone == r.question
    assert not r.cache_stored and "could not be made standalone" in r.cache_store_reason
    assert "[FELL BACK]" in r.describe()
    assert count(admin, "cache_entries") == 1   # only the first turn's answer


def test_a_topic_shift_drops_the_window(mem, stub):
    conv = mem.start_conversation("alice")
    generator, summariser = Generator(), Summariser()
    turn = make_turn(mem, stub, generator=generator, summariser=summariser, keep_last=6)
    stub.chat_replies_by_model[DEFAULT_CONDENSE_MODEL] = ["How do I rotate an API key?"]
    turn(conv, "alice", "What is the refund window?")            # [refunds]
    turn(conv, "alice", "How do I rotate an API key?")           # [api-keys]: nothing in common
    stub.chat_calls.clear()
    stub.chat_replies_by_model[DEFAULT_CONDENSE_MODEL] = ["Does revoking the API key break running jobs?"]
    r = turn(conv, "alice", "Does revoking it break running jobs?")
    assert r.topic.shifted and r.topic.overlap == 0.0 and r.topic.since_message_index == 2
    # the old subject (messages 0-1) is in neither the condensation prompt nor the generator's prompt
    prompt = "\n".join(m["content"] for m in condense_calls(stub)[0]["messages"])
    assert "refund" not in prompt.lower() and "How do I rotate an API key?" in prompt
    request = generator.requests[-1]
    assert [m["content"] for m in request.history][0] == "How do I rotate an API key?" and r.history_used == 2
    assert r.standalone == "Does revoking the API key break running jobs?"
    assert "SHIFT" in r.describe()


def test_unseen_docs_filters_what_the_last_turns_retrieved(mem, stub):
    conv = mem.start_conversation("alice")
    generator = Generator()
    turn = make_turn(mem, stub, generator=generator, condenser=CannedCondenser({}), lookback=1)
    turn(conv, "alice", "How do I rotate an API key?")           # api-keys
    r = turn(conv, "alice", "Do running jobs notice?")            # jobs, api-keys
    assert r.docs_used == ["docs/jobs.md"] and r.docs_skipped == ["docs/api-keys.md"]
    assert [d.doc_id for d in generator.requests[-1].docs] == ["docs/jobs.md"]
    turn(conv, "alice", "What is the refund window?")            # refunds
    r = turn(conv, "alice", "How do I rotate an API key?")        # lookback 1: only the refund turn counts
    assert r.docs_used == ["docs/api-keys.md"] and r.docs_skipped == []


def test_messages_falling_out_of_the_window_are_summarised(mem, stub):
    conv = mem.start_conversation("alice")
    summariser = Summariser()
    turn = make_turn(mem, stub, summariser=summariser, condenser=CannedCondenser({}), keep_last=2)
    first = turn(conv, "alice", "How do I rotate an API key?")
    assert first.summarised_through is None and summariser.calls == []
    second = turn(conv, "alice", "Do running jobs notice?")
    assert second.summarised_through == 1 and summariser.calls == [(None, ["How do I rotate an API key?", first.answer])]
    third = turn(conv, "alice", "Which key do the jobs use?")
    assert third.summarised_through == 3 and summariser.calls[-1][0] == "summary of 2 more messages"
    assert third.summary_used and "messages 2..3 summarised" in third.describe()
    items = mem.short_term_context(conv, keep_last=2)
    assert items[0].kind == "summary" and items[0].message_index == 3
    assert [i.message_index for i in items[1:]] == [4, 5]


def test_a_failing_summariser_does_not_fail_the_turn_and_the_next_turn_catches_up(mem, stub):
    conv = mem.start_conversation("alice")
    calls = []

    def flaky(previous, messages):
        calls.append([m["content"] for m in messages])
        if len(calls) == 1:
            raise RuntimeError("model busy")
        return "caught up"

    turn = make_turn(mem, stub, summariser=flaky, condenser=CannedCondenser({}), keep_last=2)
    turn(conv, "alice", "q one refund")
    r = turn(conv, "alice", "q two key")
    assert r.summarised_through is None and "summariser failed (RuntimeError: model busy)" in r.summary_note
    r = turn(conv, "alice", "q three jobs")
    assert r.summarised_through == 3 and len(calls[1]) == 4   # messages 0-3, two of them fetched again
    assert calls[1][0] == "q one refund"


def test_the_default_generator_is_an_ollama_chat(mem, stub, admin):
    stub.chat_replies_by_model["llama3.2"] = ["Within 14 days."]
    turn = Turn(mem, retriever=Retriever(), summariser=Summariser(), ollama_host=stub.host)
    r = turn(mem.start_conversation("alice"), "alice", "What is the refund window?")
    assert r.answer == "Within 14 days."
    (call,) = stub.chat_calls
    assert call["model"] == "llama3.2" and "[docs/refunds.md] Refunds" in call["messages"][0]["content"]
    assert admin.execute("select llm_model from agentmem.cache_entries").fetchone() == ("llama3.2",)


def test_a_failing_generator_stores_nothing(mem, stub, admin):
    def broken(request):
        raise RuntimeError("generator down")

    conv = mem.start_conversation("alice")
    with pytest.raises(RuntimeError, match="generator down"):
        make_turn(mem, stub, generator=broken)(conv, "alice", "What is the refund window?")
    assert count(admin, "messages") == 0 and count(admin, "retrievals") == 0 and count(admin, "cache_entries") == 0


def test_erasure_removes_the_retrieval_records(mem, stub, admin):
    conv = mem.start_conversation("alice")
    turn = make_turn(mem, stub, condenser=CannedCondenser({}))
    turn(conv, "alice", "What is the refund window?")
    turn(conv, "alice", "How do I rotate an API key?")
    assert count(admin, "retrievals") == 2
    receipt = mem.forget_conversation(conv)
    assert receipt.rows_removed["retrievals"] == 2 and count(admin, "retrievals") == 0
    turn(mem.start_conversation("alice"), "alice", "Do running jobs notice?")
    assert mem.forget_user("alice").rows_removed["retrievals"] == 1 and count(admin, "retrievals") == 0


def test_two_concurrent_turns_on_one_conversation_keep_indexes_gap_free_and_both_records(mem, stub, admin):
    conv = mem.start_conversation("alice")
    barrier = threading.Barrier(2)

    class Gate(Generator):
        def __call__(self, request):
            barrier.wait(timeout=30)   # both turns have read the same window before either stores
            return super().__call__(request)

    turn = make_turn(mem, stub, generator=Gate(), condenser=CannedCondenser({}), keep_last=2)
    results, errors = [], []

    def run(question):
        try:
            results.append(turn(conv, "alice", question))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(q,)) for q in ("What is the refund window?",
                                                                 "How do I rotate an API key?")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    rows = admin.execute("select message_index, role, content from agentmem.messages order by 1").fetchall()
    assert [r[0] for r in rows] == [0, 1, 2, 3]
    for r in results:   # each turn's question and answer are adjacent
        assert r.assistant_message.message_index == r.user_message.message_index + 1
        assert rows[r.user_message.message_index][2] == r.question
    recorded = admin.execute("select message_index, doc_ids from agentmem.retrievals order by 1").fetchall()
    assert sorted(d[0] for _, d in recorded) == ["docs/api-keys.md", "docs/refunds.md"]
    assert [i for i, _ in recorded] == sorted(r.user_message.message_index for r in results)


def test_async_turns_run_concurrently_with_async_callables(app_url, stub, admin):
    async def retriever(question):
        await asyncio.sleep(0)
        return Retriever()(question)

    async def generator(request):
        await asyncio.sleep(0)
        return "async answer about " + ",".join(d.doc_id for d in request.docs)

    async def main():
        mem = await AsyncMemory.connect(app_url, tenant="acme", max_size=4,
                                        embedder=OllamaEmbedder(model="nomic-embed-text", host=stub.host))
        async with mem:
            conv = await mem.start_conversation("alice")
            turn = AsyncTurn(mem, retriever=retriever, generator=generator, summariser=Summariser(),
                             condenser=OllamaCondenser(host=stub.host))
            first = await turn(conv, "alice", "What is the refund window?")
            stub.chat_replies_by_model[DEFAULT_CONDENSE_MODEL] = ["How do I rotate an API key?"]
            both = await asyncio.gather(turn(conv, "alice", "And the key?"), turn(conv, "alice", "And the jobs?"))
            hit = await turn(await mem.start_conversation("bob"), "bob", "What is the refund window?")
            return first, both, hit

    first, both, hit = asyncio.run(main())
    assert first.answer == "async answer about docs/refunds.md" and not first.condensed.called
    assert all(r.condensed.called and r.standalone == "How do I rotate an API key?" for r in both)
    assert hit.cache_hit and hit.answer == first.answer
    assert [r[0] for r in admin.execute("select message_index from agentmem.messages m join agentmem.conversations c "
                                        "using (tenant_id, conversation_id) where c.user_id = 'alice' "
                                        "order by 1").fetchall()] == list(range(6))
    assert count(admin, "retrievals") == 3
