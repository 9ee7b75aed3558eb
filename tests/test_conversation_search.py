"""sql/21_conversation_search.sql: search_messages, context_window and search_with_context: order by
similarity, min_similarity, one conversation, another user's messages never found, windows around hits,
two models side by side. (Hybrid text search: test_text_search.py; windows in time: test_time.py; the
vector search underneath: test_vector_search.py.)"""

from __future__ import annotations

import psycopg
import pytest

from helpers import fill_conversation as fill
from helpers import message_counts as counts
from helpers import sqlstate_of, vec
from helpers import start_conversation as start
from helpers import store_message as store

MODEL = "all-minilm"
DIM = 384


def test_context_windows_at_the_start_and_the_end(app, admin):
    cid = start(app)
    fill(app, cid, 10)
    ids = {r[1]: r[0] for r in admin.execute("select message_id, message_index from agentmem.messages").fetchall()}

    def window(i, before=3, after=3):
        return [r[0] for r in app.execute("select message_index from agentmem.context_window(message_id => %s, "
                                          "before => %s, after => %s)", (ids[i], before, after)).fetchall()]
    assert window(0) == [0, 1, 2, 3]
    assert window(9) == [6, 7, 8, 9]
    assert window(5) == [2, 3, 4, 5, 6, 7, 8]
    assert window(5, 0, 0) == [5]
    assert window(1, 100, 1) == [0, 1, 2]
    assert sqlstate_of(app, "select * from agentmem.context_window(message_id => gen_random_uuid())") == "AM030"


def test_search_with_context_merges_overlapping_windows(app):
    cid = start(app)
    contents = [f"filler number {i}" for i in range(30)]
    contents[5] = "the zebra escaped from the zoo"
    contents[8] = "the zebra was found in the park"
    contents[25] = "a zebra documentary tonight"
    app.execute("select agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                "embeddings => %s, model => %s)",
                (cid, ["user"] * 30, contents, [vec(c, DIM) for c in contents], MODEL))
    rows = app.execute("select window_rank, message_index, is_hit, similarity is not null, window_similarity "
                       "from agentmem.search_with_context(user_id => 'alice', query_embedding => %s, k => 3, "
                       "radius => 2, model => 'all-minilm')", (vec("zebra", DIM),)).fetchall()
    windows: dict[int, list[int]] = {}
    for rank, index, *_ in rows:
        windows.setdefault(rank, []).append(index)
    assert sorted(windows.values()) == [list(range(3, 11)), list(range(23, 28))]
    hits = sorted(r[1] for r in rows if r[2])
    assert hits == [5, 8, 25] and all(r[2] == r[3] for r in rows)
    # rows come by window rank, and each window's similarity is its best hit's
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    assert len({r[1] for r in rows}) == len(rows)  # no message twice
    # radius 0: just the hits, each its own window
    rows = app.execute("select window_rank, message_index from agentmem.search_with_context(user_id => 'alice', "
                       "query_embedding => %s, k => 3, radius => 0, model => 'all-minilm')",
                       (vec("zebra", DIM),)).fetchall()
    assert sorted(r[1] for r in rows) == [5, 8, 25] and len({r[0] for r in rows}) == 3


def test_a_second_users_messages_are_not_in_the_first_users_results(app):
    mine, theirs = start(app, user="alice"), start(app, user="bob")
    store(app, mine, "my cat is called Tom")
    store(app, theirs, "my cat is called Tom")
    store(app, theirs, "cats are great")
    rows = app.execute("select conversation_id, content from agentmem.search_messages(user_id => 'alice', "
                       "query_embedding => %s, k => 10, model => 'all-minilm')", (vec("cat Tom", DIM),)).fetchall()
    assert rows == [(mine, "my cat is called Tom")]
    # bob's conversation is not alice's to search in
    assert sqlstate_of(app, "select * from agentmem.search_messages(user_id => 'alice', query_embedding => %s, "
                            "conversation_id => %s, model => 'all-minilm')", (vec("cat", DIM), theirs)) == "AM030"


def test_search_orders_by_similarity_and_honours_min_similarity_and_conversation(app):
    c1, c2 = start(app), start(app)
    store(app, c1, "the weather in Lisbon is sunny")
    store(app, c1, "I like pasta")
    store(app, c2, "Lisbon weather forecast")
    rows = app.execute("select content, similarity from agentmem.search_messages(user_id => 'alice', "
                       "query_embedding => %s, k => 3, model => 'all-minilm')",
                       (vec("weather in Lisbon", DIM),)).fetchall()
    assert len(rows) == 3 and rows[0][0] == "the weather in Lisbon is sunny"
    assert [r[1] for r in rows] == sorted((r[1] for r in rows), reverse=True)
    assert rows[0][1] > 0.5
    strong = app.execute("select content from agentmem.search_messages(user_id => 'alice', query_embedding => %s, "
                         "k => 3, min_similarity => %s::real, model => 'all-minilm')",
                         (vec("weather in Lisbon", DIM), (rows[1][1] + rows[2][1]) / 2)).fetchall()
    assert len(strong) == 2
    only_c2 = app.execute("select content from agentmem.search_messages(user_id => 'alice', query_embedding => %s, "
                          "conversation_id => %s, model => 'all-minilm')", (vec("weather", DIM), c2)).fetchall()
    assert only_c2 == [("Lisbon weather forecast",)]


def test_two_models_coexist_for_one_message(app, admin):
    cid = start(app)
    mid, _ = store(app, cid, "hello world")
    admin.execute("insert into agentmem.message_embeddings (tenant_id, message_id, model, user_id, conversation_id, "
                  "embedding) values ('acme', %s, 'nomic-embed-text', 'alice', %s, %s)",
                  (mid, cid, vec("hello world", 768)))
    for model, dim in [("all-minilm", 384), ("nomic-embed-text", 768)]:
        q = vec("hello", dim)
        rows = app.execute("select message_id from agentmem.search_messages(user_id => 'alice', "
                           "query_embedding => %s, model => %s)", (q, model)).fetchall()
        assert rows == [(mid,)]
    # a query of the other model's dimension is a clear error
    assert sqlstate_of(app, "select * from agentmem.search_messages(user_id => 'alice', query_embedding => %s, "
                            "model => 'nomic-embed-text')", (vec("hello", DIM),)) == "AM010"


def test_a_conversation_of_another_user_is_reported_as_not_this_users(app, admin):
    alices = start(app, "alice")
    store(app, alices, "alice's invoice question")
    before = counts(admin)
    for call in ("select * from agentmem.search_messages(user_id => 'bob', query_text => 'invoice', "
                 "conversation_id => %s)",
                 "select * from agentmem.search_with_context(user_id => 'bob', query_text => 'invoice', "
                 "conversation_id => %s)"):
        with pytest.raises(psycopg.Error) as info:
            app.execute(call, (alices,))
        assert info.value.sqlstate == "AM030"
        assert info.value.diag.message_primary == f"conversation {alices} is not a conversation of user 'bob'"
        assert info.value.diag.message_detail == "It belongs to another user of the current tenant."
    # one that is in no tenant's reach is still "not found"
    with pytest.raises(psycopg.Error) as info:
        app.execute("select * from agentmem.search_messages(user_id => 'bob', query_text => 'invoice', "
                    "conversation_id => gen_random_uuid())")
    assert info.value.sqlstate == "AM030" and "not found" in info.value.diag.message_primary
    assert counts(admin) == before
    # and alice's own search of it works
    assert [r[0] for r in app.execute(
        "select content from agentmem.search_messages(user_id => 'alice', query_text => 'invoice', "
        "conversation_id => %s)", (alices,))] == ["alice's invoice question"]
