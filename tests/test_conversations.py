"""Conversation memory in SQL: storing, gap-free indexes, bad input, windows, summaries, search."""

from __future__ import annotations

import threading

import numpy as np
import psycopg
import pytest

from helpers import run_threads, sqlstate_of, vec

MODEL = "all-minilm"
DIM = 384


def start(conn, user="alice", title=None) -> str:
    return conn.execute("select agentmem.start_conversation(user_id => %s, title => %s)", (user, title)).fetchone()[0]


def store(conn, cid, content, role="user", embedding=None, model=MODEL):
    return conn.execute(
        "select message_id, message_index from agentmem.store_message(conversation_id => %s, role => %s, "
        "content => %s, embedding => %s, model => %s)",
        (cid, role, content, vec(content, DIM) if embedding is None else embedding, model)).fetchone()


def fill(conn, cid, n, prefix="turn"):
    conn.execute("select agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                 "embeddings => %s, model => %s)",
                 (cid, ["user", "assistant"] * (n // 2) + ["user"] * (n % 2),
                  [f"{prefix} {i}" for i in range(n)], [vec(f"{prefix} {i}", DIM) for i in range(n)], MODEL))


def counts(admin) -> tuple[int, int]:
    return admin.execute("select (select count(*) from agentmem.messages), "
                         "(select count(*) from agentmem.message_embeddings)").fetchone()


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


def test_deleting_a_conversation_cascades_to_messages_and_embeddings(app, admin):
    cid = start(app)
    fill(app, cid, 4)
    keep = start(app)
    fill(app, keep, 2)
    admin.execute("delete from agentmem.conversations where conversation_id = %s", (cid,))
    assert counts(admin) == (2, 2)


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
