"""Retrieval records in SQL: record_retrieval, topic_shift, unseen_docs; their limits, errors and erasure."""

from __future__ import annotations

import uuid

import pytest

from helpers_facts import count, sqlstate_of, vec

RECORD = "select agentmem.record_retrieval(message_id => %s, doc_ids => %s)"
SHIFT = "select * from agentmem.topic_shift(conversation_id => %s, threshold => %s::real)"
UNSEEN = "select agentmem.unseen_docs(conversation_id => %s, doc_ids => %s, lookback => %s)"


def start(conn, user="u1"):
    return conn.execute("select agentmem.start_conversation(user_id => %s)", (user,)).fetchone()[0]


def say(conn, conv, content, role="user"):
    return conn.execute("select message_id from agentmem.store_message(conversation_id => %s, role => %s, "
                        "content => %s, embedding => %s)", (conv, role, content, vec(content))).fetchone()[0]


def turn(conn, conv, question, docs):
    """One turn: the user message, its retrieval record, the assistant's answer."""
    mid = say(conn, conv, question)
    conn.execute(RECORD, (mid, docs))
    say(conn, conv, f"answer to {question}", "assistant")
    return mid


def records(admin):
    return admin.execute("select message_id, doc_ids from agentmem.retrievals order by message_index").fetchall()


# -- record_retrieval ------------------------------------------------------------------------------

def test_record_keeps_ids_once_in_order_and_a_second_call_replaces(app, admin):
    conv = start(app)
    mid = say(app, conv, "what is the refund window")
    assert app.execute(RECORD, (mid, ["refunds", "billing", "refunds", "plans"])).fetchone() == (3,)
    assert records(admin) == [(mid, ["refunds", "billing", "plans"])]
    row = admin.execute("select tenant_id, conversation_id, message_index from agentmem.retrievals").fetchone()
    assert row == ("acme", conv, 0)
    assert app.execute(RECORD, (mid, ["plans"])).fetchone() == (1,)           # replaced, not merged
    assert app.execute(RECORD, (mid, ["plans"])).fetchone() == (1,)           # idempotent
    assert records(admin) == [(mid, ["plans"])]
    assert app.execute(RECORD, (mid, [])).fetchone() == (0,)                  # a turn that found nothing
    assert records(admin) == [(mid, [])]


@pytest.mark.parametrize("doc_ids, cast, state", [
    (None, "text[]", "AM020"),
    ("{{a,b},{c,d}}", "text[]", "AM020"),          # two-dimensional
    ("[0:1]={a,b}", "text[]", "AM020"),             # lower bound 0
    ("{a,NULL}", "text[]", "AM020"),
    ('{a,"  "}', "text[]", "AM020"),
    ("{" + ",".join(f"d{i}" for i in range(1001)) + "}", "text[]", "AM020"),  # 1,001 ids
    ("{" + "x" * 1001 + "}", "text[]", "AM021"),   # an id of 1,001 characters
])
def test_bad_doc_ids_are_refused_and_nothing_is_written(app, admin, doc_ids, cast, state):
    conv = start(app)
    mid = say(app, conv, "hello")
    query = f"select agentmem.record_retrieval(message_id => %s, doc_ids => %s::{cast})"
    assert sqlstate_of(app, query, (mid, doc_ids)) == state
    assert sqlstate_of(app, f"select agentmem.unseen_docs(conversation_id => %s, doc_ids => %s::{cast})",
                       (conv, doc_ids)) == state
    assert count(admin, "retrievals") == 0


def test_limits_are_inclusive(app, admin):
    conv = start(app)
    mid = say(app, conv, "hello")
    ids = [f"{i:04d}" + "x" * 996 for i in range(1000)]  # 1,000 ids of 1,000 characters
    assert app.execute(RECORD, (mid, ids)).fetchone() == (1000,)


def test_a_message_not_in_the_tenant_or_not_a_users_is_refused(app, admin, connect, app_url):
    conv = start(app)
    answer = say(app, conv, "the window is 14 days", role="assistant")
    assert sqlstate_of(app, RECORD, (answer, ["refunds"])) == "AM020"
    assert sqlstate_of(app, RECORD, (uuid.uuid4(), ["refunds"])) == "AM030"
    assert sqlstate_of(app, RECORD, (None, ["refunds"])) == "AM030"
    other = connect(app_url, tenant="globex")
    theirs = say(other, start(other), "a question of globex")
    assert sqlstate_of(app, RECORD, (theirs, ["refunds"])) == "AM030"
    assert count(admin, "retrievals") == 0


def test_the_app_role_cannot_read_the_table(app):
    assert sqlstate_of(app, "select * from agentmem.retrievals") == "42501"


# -- topic_shift -----------------------------------------------------------------------------------

def test_topic_shift_needs_two_recorded_turns(app):
    conv = start(app)
    assert app.execute(SHIFT, (conv, 0.15)).fetchone() == (None, False, 0, None)
    say(app, conv, "hello")                       # a turn without a record does not count
    assert app.execute(SHIFT, (conv, 0.15)).fetchone() == (None, False, 0, None)
    turn(app, conv, "what is the refund window", ["refunds"])
    assert app.execute(SHIFT, (conv, 0.15)).fetchone() == (None, False, 1, 1)


def test_topic_shift_is_the_jaccard_overlap_of_the_last_two_records(app):
    conv = start(app)
    turn(app, conv, "q1", ["a", "b", "c"])
    turn(app, conv, "q2", ["b", "c", "d"])         # {b,c} / {a,b,c,d}
    overlap, shifted, compared, since = app.execute(SHIFT, (conv, 0.15)).fetchone()
    assert overlap == pytest.approx(0.5) and not shifted and compared == 2 and since == 2
    turn(app, conv, "q3", ["x", "y", "d"])         # {d} / {b,c,d,x,y} = 0.2
    assert app.execute(SHIFT, (conv, 0.15)).fetchone()[:2] == (pytest.approx(0.2), False)
    assert app.execute(SHIFT, (conv, 0.25)).fetchone()[:2] == (pytest.approx(0.2), True)
    turn(app, conv, "q4", ["p", "q"])              # nothing in common
    assert app.execute(SHIFT, (conv, 0.15)).fetchone() == (0.0, True, 2, 6)
    assert app.execute(SHIFT, (conv, 0.0)).fetchone()[:2] == (0.0, False)   # 0 is never below 0


def test_two_turns_that_retrieved_nothing_count_as_no_overlap(app):
    conv = start(app)
    turn(app, conv, "q1", [])
    turn(app, conv, "q2", [])
    assert app.execute(SHIFT, (conv, 0.15)).fetchone()[:3] == (0.0, True, 2)


@pytest.mark.parametrize("threshold", [None, -0.01, 1.01, float("nan")])
def test_topic_shift_refuses_a_bad_threshold(app, threshold):
    conv = start(app)
    assert sqlstate_of(app, SHIFT, (conv, threshold)) == "AM020"


def test_topic_shift_and_unseen_docs_of_an_unknown_conversation(app, connect, app_url):
    other = connect(app_url, tenant="globex")
    theirs = start(other)
    turn(other, theirs, "q", ["a"])
    for conv in (uuid.uuid4(), theirs, None):
        assert sqlstate_of(app, SHIFT, (conv, 0.15)) == "AM030"
        assert sqlstate_of(app, UNSEEN, (conv, ["a"], 6)) == "AM030"
    assert other.execute(UNSEEN, (theirs, ["a", "b"], 6)).fetchone() == (["b"],)


# -- unseen_docs -----------------------------------------------------------------------------------

def test_unseen_docs_filters_what_the_last_turns_retrieved_in_the_given_order(app):
    conv = start(app)
    turn(app, conv, "q1", ["a", "b"])
    turn(app, conv, "q2", ["c"])
    turn(app, conv, "q3", ["d"])
    assert app.execute(UNSEEN, (conv, ["e", "d", "a", "f", "e", "c"], 6)).fetchone() == (["e", "f"],)
    assert app.execute(UNSEEN, (conv, ["e", "d", "a", "c"], 2)).fetchone() == (["e", "a"],)   # q2, q3 only
    say(app, conv, "a turn without a record")      # it counts as a turn
    assert app.execute(UNSEEN, (conv, ["e", "d", "a", "c"], 2)).fetchone() == (["e", "a", "c"],)
    assert app.execute(UNSEEN, (conv, ["b", "a", "b"], 0)).fetchone() == (["b", "a"],)
    assert app.execute(UNSEEN, (conv, [], 6)).fetchone() == ([],)


@pytest.mark.parametrize("lookback", [None, -1, 1001])
def test_unseen_docs_refuses_a_bad_lookback(app, lookback):
    conv = start(app)
    assert sqlstate_of(app, UNSEEN, (conv, ["a"], lookback)) == "AM020"


def test_unseen_docs_default_looks_back_six_turns(app):
    conv = start(app)
    for i in range(7):
        turn(app, conv, f"q{i}", [f"d{i}"])
    assert app.execute("select agentmem.unseen_docs(conversation_id => %s, doc_ids => %s)",
                       (conv, [f"d{i}" for i in range(7)])).fetchone() == (["d0"],)


# -- erasure and retention -------------------------------------------------------------------------

def test_forget_conversation_and_forget_user_remove_and_count_the_records(app, admin):
    keep, gone = start(app, "u1"), start(app, "u1")
    other = start(app, "u2")
    turn(app, keep, "q", ["a"])
    turn(app, gone, "q", ["a"])
    turn(app, gone, "q2", ["b"])
    turn(app, other, "q", ["a"])
    receipt = app.execute("select rows_removed from agentmem.forget_conversation(conversation_id => %s)",
                          (gone,)).fetchone()[0]
    assert receipt["retrievals"] == 2 and count(admin, "retrievals") == 2
    receipt = app.execute("select rows_removed from agentmem.forget_user(user_id => 'u1')").fetchone()[0]
    assert receipt["retrievals"] == 1
    assert admin.execute("select conversation_id from agentmem.retrievals").fetchall() == [(other,)]


def test_message_retention_takes_the_records_with_the_messages(app, admin):
    conv = start(app)
    old = turn(app, conv, "old question", ["a"])
    new = turn(app, conv, "new question", ["b"])
    admin.execute("update agentmem.messages set created_at = now() - interval '100 days' "
                  "where message_index < 2")
    app.execute("select agentmem.set_retention_policy(kind => 'messages', max_age => '90 days')")
    run = admin.execute("select rows_removed from agentmem.apply_retention()").fetchone()[0]
    assert run["messages"] == 2
    assert [r[0] for r in records(admin)] == [new]
    assert old != new
