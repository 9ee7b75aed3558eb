"""sql/20_conversations.sql: conversations and their messages: storing, gap-free indexes, bad input,
tenants, summaries, the short-term context, and when each message happened (occurred_at)."""

from __future__ import annotations

import datetime as dt
import threading

import numpy as np
import psycopg
import pytest

from agentmem.client import Memory
from agentmem.errors import InvalidArgument
from helpers import count
from helpers import STORE_DATED as STORE
from helpers import fill_conversation as fill
from helpers import message_counts as counts
from helpers import run_threads, sqlstate_of, vec
from helpers import start_conversation as start
from helpers import store_message as store

MODEL = "all-minilm"
DIM = 384


def test_store_and_read_back_in_order(app, admin):
    cid = start(app, title="trip")
    first = store(app, cid, "I am planning a trip to Lisbon")
    second = store(app, cid, "Lisbon is lovely in May", role="assistant")
    assert (first[1], second[1]) == (0, 1)
    rows = app.execute("select message_index, role, content from agentmem.recent_messages(conversation_id => %s)",
                       (cid,)).fetchall()
    assert rows == [(0, "user", "I am planning a trip to Lisbon"), (1, "assistant", "Lisbon is lovely in May")]
    assert app.execute("select message_index from agentmem.recent_messages(conversation_id => %s, n => 1)",
                       (cid,)).fetchall() == [(1,)]
    # the embedding went in with the message, with the denormalised user and conversation
    assert admin.execute("select tenant_id, user_id, conversation_id, model from agentmem.message_embeddings "
                         "where message_id = %s", (first[0],)).fetchone() == ("acme", "alice", cid, MODEL)


def test_batch_store_gets_consecutive_indexes_and_is_all_or_nothing(app, admin):
    cid = start(app)
    store(app, cid, "hello")
    rows = app.execute("select message_index from agentmem.store_messages(conversation_id => %s, roles => %s, "
                       "contents => %s, embeddings => %s, model => %s, metadata => %s::jsonb[])",
                       (cid, ["user", "assistant"], ["a b", "c d"], [vec("a b", DIM), vec("c d", DIM)], MODEL,
                        ['{"src": 1}', '{"src": 2}'])).fetchall()
    assert rows == [(1,), (2,)]
    assert admin.execute("select metadata from agentmem.messages where message_index = 2").fetchone() == ({"src": 2},)
    before = counts(admin)
    code = sqlstate_of(app, "select agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                            "embeddings => %s, model => %s)",
                       (cid, ["user", "robot"], ["x", "y"], [vec("x", DIM), vec("y", DIM)], MODEL))
    assert code == "AM020"
    code = sqlstate_of(app, "select agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                            "embeddings => %s, model => %s)",
                       (cid, ["user", "user"], ["x"], [vec("x", DIM), vec("y", DIM)], MODEL))
    assert code == "AM020"
    assert counts(admin) == before
    assert admin.execute("select next_index from agentmem.conversations").fetchone() == (3,)



def test_a_batch_is_bounded_in_messages_and_characters_and_stored_in_pieces(app, admin):
    """The documented bounds of one call (docs/limits.md): 1,000 messages (AM020) and 10,000,000 characters of
    contents and metadata (AM021), refused before anything is written; a batch within them is inserted in
    pieces of about 1 MB and keeps consecutive indexes in array order."""
    max_n, max_chars = admin.execute("select agentmem_private.store_messages_max(), "
                                     "agentmem_private.store_messages_max_chars()").fetchone()
    assert (max_n, max_chars) == (1000, 10_000_000)
    cid = start(app)
    call = ("select message_index from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
            "embeddings => null, model => %s, metadata => %s::jsonb[])")
    before = counts(admin)
    assert sqlstate_of(app, call, (cid, ["user"] * 1001, ["x"] * 1001, MODEL, None)) == "AM020"
    many = ["w" * 100_000] * 99 + ["w" * 99_000]
    metas = ['{"k": "%s"}' % ("m" * 1_000)] * 100   # 9,999,000 + 100 x 1,009 characters: over by 1,900
    assert sqlstate_of(app, call, (cid, ["user"] * 100, many, MODEL, metas)) == "AM021"
    assert counts(admin) == before
    # 30 messages of 100,000 characters: at least 3 pieces, all stored, in order
    words = [f"piece{i} " + "y" * 99_990 for i in range(30)]
    rows = app.execute(call, (cid, ["user"] * 30, words, MODEL, None)).fetchall()
    assert [r[0] for r in rows] == list(range(30))
    stored = admin.execute("select message_index, left(content, 8) from agentmem.messages "
                           "where conversation_id = %s order by message_index", (cid,)).fetchall()
    assert stored == [(i, words[i][:8]) for i in range(30)]


def test_a_word_too_long_to_index_sends_no_notice_carrying_the_batch(app):
    """PostgreSQL's text search skips a word over 2,047 characters with a NOTICE whose context is the whole
    insert statement; a batch of such messages sent one such notice per message, each megabytes long."""
    cid = start(app)
    notices = []
    app.add_notice_handler(lambda d: notices.append(d.message_primary))
    app.execute("select agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                "embeddings => null, model => %s)", (cid, ["user"] * 3, ["z" * 3000] * 3, MODEL))
    assert notices == []
    assert app.execute("select count(*) from agentmem.recent_messages(conversation_id => %s)",
                       (cid,)).fetchone() == (3,)


ZERO = np.zeros(DIM, dtype=np.float32)
BAD_INPUT = {
    "wrong dimension": (dict(embedding=np.ones(8, dtype=np.float32)), "AM010"),
    "NaN": (dict(embedding="[" + ",".join(["NaN"] * DIM) + "]"), "22000"),
    "infinite": (dict(embedding="[" + ",".join(["Infinity"] * DIM) + "]"), "22000"),
    "zero vector": (dict(embedding=ZERO), "AM010"),
    "empty content": (dict(content=""), "AM020"),
    "blank content": (dict(content="   "), "AM020"),
    "NULL content": (dict(content=None), "AM020"),
    "unknown role": (dict(role="robot"), "AM020"),
    "NULL role": (dict(role=None), "AM020"),
    "content too large": (dict(content="x" * 100_001), "AM021"),
    "unknown model": (dict(model="no-such-model"), "AM011"),
    "metadata not an object": (dict(metadata="[1, 2]"), "AM020"),
    "conversation does not exist": (dict(conversation="missing"), "AM030"),
    "conversation of another tenant": (dict(conversation="other"), "AM030"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT), ids=list(BAD_INPUT))
def test_bad_input_gets_a_clear_error_and_stores_nothing(app, admin, connect, app_url, case):
    args, code = BAD_INPUT[case]
    cid = start(app)
    if args.get("conversation") == "missing":
        cid = "00000000-0000-0000-0000-000000000001"
    elif args.get("conversation") == "other":
        other = connect(app_url, tenant="globex")
        cid = start(other, user="alice")
    before = counts(admin)
    embedding = args["embedding"] if "embedding" in args else vec("fine", DIM)
    with pytest.raises(psycopg.Error) as info:
        app.execute("select * from agentmem.store_message(conversation_id => %s, role => %s, content => %s, "
                    "embedding => %s::vector, model => %s, metadata => %s::jsonb)",
                    (cid, args.get("role", "user"), args.get("content", "fine"), embedding,
                     args.get("model", MODEL), args.get("metadata", "{}")))
    assert info.value.sqlstate == code, info.value
    if code.startswith("AM"):
        assert info.value.diag.message_primary
    assert counts(admin) == before
    assert admin.execute("select max(next_index) from agentmem.conversations").fetchone() == (0,)


def test_another_tenants_conversation_is_not_found_anywhere(app, connect, app_url, admin):
    other = connect(app_url, tenant="globex")
    cid = start(other, user="bob")
    mid = store(other, cid, "secret plans")[0]
    for query, params in [
        ("select * from agentmem.recent_messages(conversation_id => %s)", (cid,)),
        ("select * from agentmem.short_term_context(conversation_id => %s)", (cid,)),
        ("select agentmem.set_summary(conversation_id => %s, summary => 'x', through_index => 0)", (cid,)),
        ("select * from agentmem.context_window(message_id => %s)", (mid,)),
        ("select * from agentmem.search_messages(user_id => 'bob', query_embedding => %s, "
         "conversation_id => %s, model => 'all-minilm')", (vec("secret", DIM), cid)),
    ]:
        assert sqlstate_of(app, query, params) == "AM030", query
    assert admin.execute("select summary from agentmem.conversations where conversation_id = %s",
                         (cid,)).fetchone() == (None,)
    # and a search of the same user id in this tenant finds nothing of globex's
    assert app.execute("select * from agentmem.search_messages(user_id => 'bob', query_embedding => %s, "
                       "model => 'all-minilm')", (vec("secret plans", DIM),)).fetchall() == []


@pytest.mark.parametrize("query, params, code", [
    ("select * from agentmem.search_messages(user_id => 'alice', query_embedding => %s, k => 0, "
     "model => 'all-minilm')", "v", "AM020"),
    ("select * from agentmem.search_messages(user_id => 'alice', query_embedding => %s, k => 1001, "
     "model => 'all-minilm')", "v", "AM020"),
    ("select * from agentmem.search_messages(user_id => 'alice', query_embedding => %s, min_similarity => 2, "
     "model => 'all-minilm')", "v", "AM020"),
    ("select * from agentmem.search_messages(user_id => '', query_embedding => %s, model => 'all-minilm')",
     "v", "AM020"),
    ("select * from agentmem.search_messages(user_id => 'alice', query_embedding => %s, model => 'all-minilm')",
     "short", "AM010"),
    ("select * from agentmem.search_with_context(user_id => 'alice', query_embedding => %s, radius => 101, "
     "model => 'all-minilm')", "v", "AM020"),
    ("select * from agentmem.search_with_context(user_id => 'alice', query_embedding => %s, radius => -1, "
     "model => 'all-minilm')", "v", "AM020"),
    ("select * from agentmem.search_with_context(user_id => 'alice', query_embedding => %s, k => 0, "
     "model => 'all-minilm')", "v", "AM020"),
    ("select * from agentmem.context_window(message_id => %s, before => 101)", "mid", "AM020"),
    ("select * from agentmem.context_window(message_id => %s, after => -1)", "mid", "AM020"),
    ("select * from agentmem.recent_messages(conversation_id => %s, n => 0)", "cid", "AM020"),
    ("select * from agentmem.short_term_context(conversation_id => %s, keep_last => 1001)", "cid", "AM020"),
    ("select agentmem.set_summary(conversation_id => %s, summary => '', through_index => 0)", "cid", "AM020"),
    ("select agentmem.set_summary(conversation_id => %s, summary => 's', through_index => 5)", "cid", "AM020"),
    ("select agentmem.set_summary(conversation_id => %s, summary => repeat('x', 100001), through_index => 0)",
     "cid", "AM021"),
])
def test_out_of_range_arguments(app, admin, query, params, code):
    cid = start(app)
    mid = store(app, cid, "hello there")[0]
    value = {"v": vec("hello", DIM), "short": np.ones(3, dtype=np.float32), "mid": mid, "cid": cid}[params]
    assert sqlstate_of(app, query, (value,)) == code
    assert admin.execute("select count(*), count(summary) from agentmem.conversations").fetchone() == (1, 0)


@pytest.mark.parametrize("user, title, metadata, code", [
    (None, None, "{}", "AM020"), ("", None, "{}", "AM020"), ("u" * 257, None, "{}", "AM020"),
    ("alice", "t" * 1001, "{}", "AM021"), ("alice", None, '"text"', "AM020"),
])
def test_start_conversation_refuses_bad_input(app, admin, user, title, metadata, code):
    assert sqlstate_of(app, "select agentmem.start_conversation(user_id => %s, title => %s, metadata => %s::jsonb)",
                       (user, title, metadata)) == code
    assert admin.execute("select count(*) from agentmem.conversations").fetchone() == (0,)


def test_no_tenant_no_call(connect, app_url):
    conn = connect(app_url)
    assert sqlstate_of(conn, "select agentmem.start_conversation(user_id => 'alice')") == "AM001"


def test_sixteen_concurrent_writers_leave_indexes_exactly_0_to_1599(app, connect, app_url, admin):
    cid = start(app)
    errors: list[BaseException] = []
    barrier = threading.Barrier(16)
    conns = [connect(app_url, tenant="acme") for _ in range(16)]
    v = vec("concurrent", DIM)

    def writer(w: int) -> None:
        try:
            barrier.wait()
            for i in range(100):
                store(conns[w], cid, f"writer {w} message {i}", embedding=v)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    run_threads(writer, ((w,) for w in range(16)))
    assert not errors, errors[:3]
    indexes = [r[0] for r in admin.execute("select message_index from agentmem.messages "
                                           "where conversation_id = %s order by 1", (cid,)).fetchall()]
    assert indexes == list(range(1600))
    # each writer's own messages kept their order
    for w in (0, 15):
        mine = admin.execute("select content from agentmem.messages where content like %s order by message_index",
                             (f"writer {w} %",)).fetchall()
        assert [r[0] for r in mine] == [f"writer {w} message {i}" for i in range(100)]
    assert admin.execute("select next_index from agentmem.conversations where conversation_id = %s",
                         (cid,)).fetchone() == (1600,)
    assert counts(admin) == (1600, 1600)


def test_a_rolled_back_insert_leaves_no_gap(app, connect, app_url, admin):
    cid = start(app)
    store(app, cid, "zero")
    other = connect(app_url, tenant="acme")
    other.autocommit = False
    store(other, cid, "rolled back")
    other.rollback()
    assert store(app, cid, "one")[1] == 1
    assert [r[0] for r in admin.execute("select message_index from agentmem.messages order by 1").fetchall()] == [0, 1]


def test_summary_plus_window(app, admin):
    cid = start(app)
    fill(app, cid, 10)
    rows = app.execute("select kind, message_index from agentmem.short_term_context(conversation_id => %s, "
                       "keep_last => 4)", (cid,)).fetchall()
    assert rows == [("message", i) for i in range(6, 10)]
    app.execute("select agentmem.set_summary(conversation_id => %s, summary => 'they talked about turns', "
                "through_index => 5)", (cid,))
    rows = app.execute("select kind, message_index, role, content from agentmem.short_term_context("
                       "conversation_id => %s, keep_last => 4)", (cid,)).fetchall()
    assert rows[0] == ("summary", 5, "system", "they talked about turns")
    assert [r[1] for r in rows[1:]] == [6, 7, 8, 9] and {r[0] for r in rows[1:]} == {"message"}
    # keep_last larger than the conversation: every message; 0: the summary alone
    assert len(app.execute("select * from agentmem.short_term_context(conversation_id => %s, keep_last => 50)",
                           (cid,)).fetchall()) == 11
    assert app.execute("select kind from agentmem.short_term_context(conversation_id => %s, keep_last => 0)",
                       (cid,)).fetchall() == [("summary",)]
    # a summary only moves forward
    assert sqlstate_of(app, "select agentmem.set_summary(conversation_id => %s, summary => 'older', "
                            "through_index => 3)", (cid,)) == "AM031"
    assert admin.execute("select summary, summary_through from agentmem.conversations").fetchone() == (
        "they talked about turns", 5)


def test_deleting_a_conversation_cascades_to_messages_and_embeddings(app, admin):
    cid = start(app)
    fill(app, cid, 4)
    keep = start(app)
    fill(app, keep, 2)
    admin.execute("delete from agentmem.conversations where conversation_id = %s", (cid,))
    assert counts(admin) == (2, 2)


# -- time: occurred_at given, defaulted, refused ----------------------------------------------------

def test_a_message_stored_without_a_time_happens_now_and_never_before_the_last(app):
    cid = app.execute("select agentmem.start_conversation(user_id => 'carol')").fetchone()[0]
    app.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => 'hi', "
                "embedding => %s)", (cid, np.ones(768, dtype=np.float32)))
    soon = app.execute("select now() + interval '2 hours'").fetchone()[0]
    app.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => 'later', "
                "embedding => %s, occurred_at => %s)", (cid, np.ones(768, dtype=np.float32), soon))
    app.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => 'now', "
                "embedding => %s)", (cid, np.ones(768, dtype=np.float32)))
    times = [r[0] for r in app.execute("select occurred_at from agentmem.recent_messages(conversation_id => %s)",
                                       (cid,))]
    assert times[1] == soon and times[2] == soon and times[0] < soon  # not earlier than the message before


@pytest.mark.parametrize("times", [
    ["infinity", "infinity"],
    ["-infinity", "2023-01-01 00:00+00"],
    ["2023-01-01 00:00+00", "10000-01-01 00:00+00"],   # year 10000: in the future
    ["2023-01-01 00:00+00", None],                      # a NULL in a dated batch
    ["2023-01-02 00:00+00", "2023-01-01 00:00+00"],    # a batch going backwards
    ["2023-01-01 00:00+00"],                            # not one per message
])
def test_hostile_times_are_refused_and_nothing_is_written(app, admin, times):
    cid = app.execute("select agentmem.start_conversation(user_id => 'erin')").fetchone()[0]
    e = np.ones(768, dtype=np.float32)
    assert sqlstate_of(app, STORE, (cid, ["user", "user"], ["a", "b"], [e, e], times)) == "AM020"
    assert count(admin, "messages", "conversation_id = %s", (cid,)) == 0
    assert admin.execute("select next_index from agentmem.conversations where conversation_id = %s",
                         (cid,)).fetchone()[0] == 0


def test_a_message_earlier_than_the_conversations_last_is_refused(app, admin):
    cid = app.execute("select agentmem.start_conversation(user_id => 'erin')").fetchone()[0]
    e = np.ones(768, dtype=np.float32)
    app.execute(STORE, (cid, ["user"], ["a"], [e], ["2023-01-02 00:00+00"]))
    assert sqlstate_of(app, STORE, (cid, ["user"], ["b"], [e], ["2023-01-01 23:59+00"])) == "AM020"
    app.execute(STORE, (cid, ["user"], ["c"], [e], ["2023-01-02 00:00+00"]))  # the same moment is fine
    assert count(admin, "messages", "conversation_id = %s", (cid,)) == 2


def test_a_zone_less_text_is_read_in_the_session_time_zone_and_the_driver_refuses_naive(app, app_url):
    cid = app.execute("select agentmem.start_conversation(user_id => 'erin')").fetchone()[0]
    e = np.ones(768, dtype=np.float32)
    app.execute("set timezone = 'Asia/Tokyo'")
    app.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => 'a', "
                "embedding => %s, occurred_at => '2023-05-08 10:00')", (cid, e))
    app.execute("set timezone = 'UTC'")
    got = app.execute("select occurred_at from agentmem.recent_messages(conversation_id => %s)", (cid,)).fetchone()
    assert got[0] == dt.datetime(2023, 5, 8, 1, 0, tzinfo=dt.timezone.utc)
    with Memory.connect(app_url, tenant="acme", max_size=1) as mem:
        with pytest.raises(InvalidArgument):
            mem.store_message(cid, "user", "b", e, occurred_at=dt.datetime(2023, 5, 9))
        stored = mem.store_message(cid, "user", "b", e, occurred_at=dt.datetime(2023, 5, 9, tzinfo=dt.timezone.utc))
        assert mem.recent_messages(cid)[-1].occurred_at == dt.datetime(2023, 5, 9, tzinfo=dt.timezone.utc)
        assert stored.message_index == 1


def test_occurred_at_cannot_be_infinite_even_for_the_owner(admin, app):
    cid = app.execute("select agentmem.start_conversation(user_id => 'gina')").fetchone()[0]
    with pytest.raises(psycopg.errors.CheckViolation):
        admin.execute("insert into agentmem.messages (tenant_id, conversation_id, user_id, message_index, role, "
                      "content, occurred_at) values ('acme', %s, 'gina', 0, 'user', 'x', 'infinity')", (cid,))


def test_the_prompt_dates_messages_only_where_a_history_spans_days():
    from agentmem.rows import Message
    from agentmem.turn import _as_message, spans_days

    def msg(day: dt.datetime, text: str) -> Message:
        return Message(message_id=None, conversation_id=None, message_index=0, role="user", content=text,
                       metadata={}, created_at=day, occurred_at=day)  # type: ignore[arg-type]
    today = dt.date(2023, 5, 8)
    same_day = [msg(dt.datetime(2023, 5, 8, 9, tzinfo=dt.timezone.utc), "hi"),
                msg(dt.datetime(2023, 5, 8, 10, tzinfo=dt.timezone.utc), "hello")]
    assert not spans_days(same_day, today)
    assert [_as_message(m, spans_days(same_day, today))["content"] for m in same_day] == ["hi", "hello"]
    imported = [msg(dt.datetime(2023, 5, 7, 13, tzinfo=dt.timezone.utc), "I went to the group yesterday")]
    assert spans_days(imported, today)
    assert _as_message(imported[0], True)["content"] == "[2023-05-07] I went to the group yesterday"


def test_store_message_without_an_embedding_argument_queues_it(app, admin):
    """Issue 31, defect 14: embedding defaults to NULL, so leaving it out stores the message without a
    vector (queued for the workers), not "function does not exist"."""
    cid = start(app)
    mid, index = app.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', "
                             "content => 'no vector given', model => 'all-minilm')", (cid,)).fetchone()
    assert index == 0
    assert count(admin, "message_embeddings", "message_id = %s", (mid,)) == 0
    assert count(admin, "embedding_jobs", "message_id = %s", (mid,)) == 1
