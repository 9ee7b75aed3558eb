"""sql/21_conversation_search.sql: search_messages, context_window and search_with_context: order by
similarity, min_similarity, one conversation, another user's messages never found, windows around hits,
two models side by side, and windows in time (since, until, recency_half_life) on every path. Hybrid
search: test_text_search.py; the vector search underneath: test_vector_search.py."""

from __future__ import annotations

import datetime as dt

import numpy as np
import psycopg
import pytest

from helpers import fill_conversation as fill
from helpers import message_counts as counts
from helpers import count, sqlstate_of, vec, vector_part
from helpers import start_conversation as start
from helpers import store_message as store
from helpers import unit

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
    # min_similarity: the fillers out of the ranking, so no window leans (below)
    rows = app.execute("select window_rank, message_index, is_hit, similarity is not null, window_similarity "
                       "from agentmem.search_with_context(user_id => 'alice', query_embedding => %s, k => 3, "
                       "radius => 2, model => 'all-minilm', min_similarity => 0.1)", (vec("zebra", DIM),)).fetchall()
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


@pytest.mark.parametrize("other, window", [(13, list(range(9, 14))), (7, list(range(7, 12))), (None, list(range(8, 13)))],
                         ids=["after", "before", "none"])
def test_a_window_leans_one_turn_toward_where_the_rest_of_the_ranking_scored(app, admin, other, window):
    """k 1, radius 2 around the hit at 10: a weaker match at 13 (or 7), outside the centred window 8-12,
    moves it one turn that way (9-13, 7-11); with no other match it stays centred. The other match is read,
    not returned as a hit, and not recorded as used."""
    cid = start(app)
    contents = [f"filler number {i}" for i in range(20)]
    contents[10] = "the zebra escaped from the zoo"
    if other is not None:
        contents[other] = "a zebra"
    app.execute("select agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                "embeddings => %s, model => %s)", (cid, ["user"] * 20, contents, [vec(c, DIM) for c in contents], MODEL))
    rows = app.execute("select message_index, is_hit from agentmem.search_with_context(user_id => 'alice', "
                       "query_text => 'zebra escaped zoo', k => 1, radius => 2)").fetchall()
    assert [r[0] for r in rows] == window and [r[0] for r in rows if r[1]] == [10]
    assert count(admin, "use_log", "kind = 'message'") == 1


def test_two_hits_whose_windows_touch_without_overlapping_come_back_as_one_window(app):
    """Hits 5 and 8 with radius 1: windows 4-6 and 7-9 share no message but touch; the comment of
    search_with_context promises one window 4-9 (a radius 0 window of each stays apart: 5 and 8 do not touch)."""
    cid = start(app)
    contents = [f"filler number {i}" for i in range(15)]
    contents[5], contents[8] = "the zebra escaped", "the zebra was found"
    app.execute("select agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                "embeddings => %s, model => %s)",
                (cid, ["user"] * 15, contents, [vec(c, DIM) for c in contents], MODEL))
    rows = app.execute("select window_rank, message_index, is_hit from agentmem.search_with_context("
                       "user_id => 'alice', query_text => 'zebra', k => 2, radius => 1)").fetchall()
    assert sorted(r[1] for r in rows if r[2]) == [5, 8]
    assert {r[0] for r in rows} == {1} and [r[1] for r in rows] == list(range(4, 10))


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


# -- time: a history of 240 messages of alice, one an hour from 2023-05-01 00:00 UTC, imported with its
# dates (store_messages, occurred_at), beside bob's messages at the same hours. Every search path (exact
# scan, the model's shared HNSW index, the tenant's own index, words only, hybrid) is asked for windows at
# the boundaries: [since, until) must give exactly the window's rows, k of them when k exist.

TINY = "tiny-time"
TIME_DIM = 8
N = 240
T0 = dt.datetime(2023, 5, 1, tzinfo=dt.timezone.utc)
HOUR = dt.timedelta(hours=1)


def at(i: int) -> dt.datetime:
    return T0 + i * HOUR


@pytest.fixture
def history(admin, app):
    """alice: N messages, message i at T0 + i hours, in 3 conversations of 80; bob: 40 at the same hours."""
    admin.execute("select agentmem.register_model(model => %s, dimension => %s)", (TINY, TIME_DIM))
    rng = np.random.default_rng(24)
    vecs = rng.standard_normal((N, TIME_DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = []
    for c in range(3):
        cid = app.execute("select agentmem.start_conversation(user_id => 'alice')").fetchone()[0]
        part = range(80 * c, 80 * (c + 1))
        rows = app.execute(
            "select message_id from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
            "embeddings => %s, model => %s, occurred_at => %s)",
            (cid, ["user"] * 80, [f"garden note {i}" for i in part], [vecs[i] for i in part], TINY,
             [at(i) for i in part])).fetchall()
        ids += [r[0] for r in rows]
    bob = app.execute("select agentmem.start_conversation(user_id => 'bob')").fetchone()[0]
    app.execute("select * from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                "embeddings => %s, model => %s, occurred_at => %s)",
                (bob, ["user"] * 40, [f"garden note of bob {i}" for i in range(40)], [vecs[i] for i in range(40)],
                 TINY, [at(100 + i) for i in range(40)]))
    admin.execute("analyze agentmem.messages, agentmem.message_embeddings")
    return {"ids": ids, "vecs": vecs, "index_of": {m: i for i, m in enumerate(ids)}}


def test_an_imported_conversation_returns_its_dates_everywhere(app, history):
    ids, vecs = history["ids"], history["vecs"]
    hits = app.execute("select message_id, occurred_at, created_at from agentmem.search_messages(user_id => 'alice', "
                       "query_embedding => %s, k => 5, model => %s)", (vecs[7], TINY)).fetchall()
    assert hits[0][0] == ids[7] and hits[0][1] == at(7) and hits[0][2] > at(N)
    for mid, occurred, _ in hits:
        assert occurred == at(history["index_of"][mid])
    window = app.execute("select message_id, occurred_at from agentmem.context_window(message_id => %s, "
                         "before => 2, after => 2)", (ids[7],)).fetchall()
    assert [r[1] for r in window] == [at(i) for i in range(5, 10)]
    around = app.execute("select message_id, occurred_at from agentmem.search_with_context(user_id => 'alice', "
                         "query_embedding => %s, k => 1, radius => 1, model => %s)", (vecs[7], TINY)).fetchall()
    assert [r[1] for r in around] == [at(6), at(7), at(8)]
    cid = app.execute("select conversation_id from agentmem.context_window(message_id => %s, before => 0, "
                      "after => 0)", (ids[0],)).fetchone()[0]
    recent = app.execute("select occurred_at from agentmem.recent_messages(conversation_id => %s, n => 3)",
                         (cid,)).fetchall()
    assert [r[0] for r in recent] == [at(77), at(78), at(79)]
    app.execute("select agentmem.set_summary(conversation_id => %s, summary => 'gardening', through_index => 70)",
                (cid,))
    short = app.execute("select kind, occurred_at from agentmem.short_term_context(conversation_id => %s, "
                        "keep_last => 2)", (cid,)).fetchall()
    assert short == [("summary", at(70)), ("message", at(78)), ("message", at(79))]


# -- since / until on every path -----------------------------------------------------------------

PATHS = ["exact scan", "shared index", "tenant index", "words", "hybrid"]


def search(app, path, query_vec, k, since, until, conversation_id=None):
    embedding = None if path == "words" else query_vec
    text = "garden" if path in ("words", "hybrid") else None
    return app.execute(
        "select message_id, occurred_at, vector_rank, text_rank from agentmem.search_messages(user_id => 'alice', "
        "query_embedding => %s, query_text => %s, k => %s, model => %s, since => %s, until => %s, "
        "conversation_id => %s)",
        (embedding, text, k, TINY, since, until, conversation_id)).fetchall()


@pytest.fixture
def on_path(admin, app, history, request):
    path = request.param
    if path == "tenant index":
        admin.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s, "
                      "table_name => 'message_embeddings')", (TINY,))
    if path in ("shared index", "tenant index"):
        app.execute("set agentmem.exact_search_max_rows = 1")  # every window goes through an HNSW index
    return path


@pytest.mark.parametrize("on_path", PATHS, indirect=True)
@pytest.mark.parametrize("lo,hi,k", [(100, 104, 5), (100, 150, 5), (0, 1, 3), (239, 240, 2), (150, 150, 5),
                                     (None, 3, 10), (237, None, 10), (10, 200, 20)])
def test_a_window_gives_exactly_its_rows_k_when_it_holds_k(app, history, on_path, lo, hi, k):
    vecs, index_of = history["vecs"], history["index_of"]
    since = None if lo is None else at(lo)
    until = None if hi is None else at(hi)
    rows = search(app, on_path, vecs[120], k, since, until)
    inside = range(0 if lo is None else lo, N if hi is None else hi)
    got = [index_of[r[0]] for r in rows]
    assert all(i in inside for i in got), (on_path, got)
    assert len(got) == min(k, len(inside)), (on_path, got)
    assert all(r[1] == at(index_of[r[0]]) for r in rows)
    if len(inside) <= k:
        assert sorted(got) == list(inside)  # exactly the window's rows: since inclusive, until exclusive
    if on_path in ("exact scan", "shared index", "tenant index") and lo is not None and lo <= 120 < (hi or N):
        assert got[0] == 120  # the query's own message is in the window: nearest first


def test_a_window_within_one_conversation_and_bob_never_leaks(app, history):
    first = app.execute("select conversation_id from agentmem.context_window(message_id => %s, before => 0, "
                        "after => 0)", (history["ids"][100],)).fetchone()[0]
    rows = search(app, "hybrid", history["vecs"][0], 50, at(70), at(110), conversation_id=first)
    assert sorted(history["index_of"][r[0]] for r in rows) == list(range(80, 110))


def test_search_with_context_and_recent_messages_take_the_window(app, history):
    rows = app.execute("select message_id, is_hit from agentmem.search_with_context(user_id => 'alice', "
                       "query_text => 'garden', k => 3, radius => 0, since => %s, until => %s)",
                       (at(10), at(12))).fetchall()
    assert sorted(history["index_of"][r[0]] for r in rows) == [10, 11]
    cid = app.execute("select conversation_id from agentmem.context_window(message_id => %s, before => 0, "
                      "after => 0)", (history["ids"][0],)).fetchone()[0]
    recent = app.execute("select message_index from agentmem.recent_messages(conversation_id => %s, n => 3, "
                         "since => %s, until => %s)", (cid, at(5), at(20))).fetchall()
    assert [r[0] for r in recent] == [17, 18, 19]


def test_a_narrow_window_of_a_big_user_stays_on_its_indexes(admin, history):
    from helpers import plans_of
    _, plans = plans_of(admin, "select * from agentmem.search_messages(user_id => 'alice', query_text => 'garden', "
                        "query_embedding => %s, k => 5, model => %s, since => %s, until => %s)",
                        (history["vecs"][0], TINY, at(100), at(104)), settings={"enable_seqscan": "off"})
    joined = "\n".join(plans)
    # as on a big table (a sequential scan is what the planner rightly takes on these 280 rows): the
    # window's rows through the B-trees on occurred_at, in both branches
    assert "message_embeddings_occurred_idx" in joined
    assert "messages_user_occurred_idx" in joined


def test_a_candidate_thousands_of_half_lives_old_weighs_zero_instead_of_failing(app):
    """recency_half_life => '1 day' on a six-year-old message: 0.5 ^ 2,190 is below the smallest double
    (22003, floating underflow, before); it comes back last with score 0, by words and by meaning."""
    cid = start(app, "erin")
    app.execute("select * from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                "embeddings => %s, occurred_at => %s::timestamptz[])",
                (cid, ["user"] * 2, ["garden party long ago", "garden party today"],
                 [vec("garden party long ago"), vec("garden party today")], ["2020-01-01", "2026-01-01"]))
    for branch in ("query_text => 'garden'", "query_embedding => %s"):
        rows = app.execute("select content, score from agentmem.search_messages(user_id => 'erin', "
                           f"{branch}, recency_half_life => '1 day', until => '2026-01-02')",
                           (vec("garden party"),) if "%s" in branch else None).fetchall()
        assert [r[0] for r in rows] == ["garden party today", "garden party long ago"]
        assert rows[0][1] > 0 and rows[1][1] == 0


def test_the_recency_weight_prefers_the_recent_of_two_equal_matches(app, history):
    vecs = history["vecs"]
    cid = app.execute("select agentmem.start_conversation(user_id => 'dora')").fetchone()[0]
    app.execute("select * from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                "embeddings => %s, model => %s, occurred_at => %s)",
                (cid, ["user"] * 2, ["old garden", "new garden"], [vecs[0], vecs[0] * 0.99 + vecs[1] * 0.01], TINY,
                 [at(0), at(200)]))
    q = "select content, score from agentmem.search_messages(user_id => 'dora', query_embedding => %s, k => 2, " \
        "model => %s, recency_half_life => %s, until => %s)"
    plain = app.execute(q, (vecs[0], TINY, None, None)).fetchall()
    weighted = app.execute(q, (vecs[0], TINY, dt.timedelta(days=1), at(201))).fetchall()
    assert plain[0][0] == "old garden" and weighted[0][0] == "new garden"
    assert weighted[0][1] == pytest.approx(plain[1][1] * 0.5 ** (1 / 24), rel=1e-6)


@pytest.mark.parametrize("call", [
    "select * from agentmem.search_messages(user_id => 'alice', query_text => 'x', since => now(), "
    "until => now() - interval '1 day')",
    "select * from agentmem.search_messages(user_id => 'alice', query_text => 'x', recency_half_life => '0')",
    "select * from agentmem.search_messages(user_id => 'alice', query_text => 'x', recency_half_life => '-1 day')",
    "select * from agentmem.search_with_context(user_id => 'alice', query_text => 'x', since => 'infinity', "
    "until => '-infinity')",
])
def test_a_window_backwards_or_a_bad_half_life_is_refused(app, call):
    assert sqlstate_of(app, call) == "AM020"


# -- neighbour evidence (issue 35): in a hybrid search, each candidate of the pool gains
# neighbour_weight times the fused scores of the candidates up to two turns before and after it in
# its conversation. Its ranking effect (and none with 0 or by one branch), its range errors, the
# driver's parameter, and that another tenant's turns lend nothing.

def between(i: int, j: int, closer: float) -> np.ndarray:
    """A query vector between e_i and e_j, nearer e_i (cosines known)."""
    v = np.zeros(384, dtype=np.float32)
    v[i], v[j] = closer, 1.0
    return v / np.linalg.norm(v)


def store_turns(conn, user, contents, vectors):
    cid = conn.execute("select agentmem.start_conversation(user_id => %s)", (user,)).fetchone()[0]
    rows = conn.execute("select message_id from agentmem.store_messages(conversation_id => %s, roles => %s, "
                        "contents => %s, embeddings => %s, model => 'all-minilm')",
                        (cid, ["user"] * len(contents), contents, vectors)).fetchall()
    return [r[0] for r in rows]


def neighbour_scene(conn):
    """A question naming the zebracorn (A), the answer right after it without the word (B), and in
    another conversation a message (X) nearer the query vector than B. Fused without neighbours:
    A (words 2/11 + vector 1/13), X (1/11), B (1/12); B gains 0.1 x A's score with the default."""
    a, b = store_turns(conn, "alice", ["Did you ever see the zebracorn?", "Yes, last spring, by the lake."],
                 [unit(1), unit(2)])
    (x,) = store_turns(conn, "alice", ["Something else entirely."], [unit(3)])
    return a, b, x


NEIGHBOUR_QUERY = between(3, 2, 1.2)   # X (e_3) first, B (e_2) second, A (e_1) third by vector


def neighbour_order(conn, **kw):
    extra = "".join(f", {k} => %({k})s" for k in kw)
    return conn.execute("select message_id, score from agentmem.search_messages(user_id => 'alice', "
                        "query_embedding => %(v)s, query_text => 'zebracorn', k => 3, model => 'all-minilm'"
                        + extra + ")", {"v": NEIGHBOUR_QUERY, **kw}).fetchall()


def test_an_answer_next_to_the_matching_turn_rises_above_a_nearer_vector_hit(app):
    a, b, x = neighbour_scene(app)
    off = neighbour_order(app, neighbour_weight=0, fusion="rrf")
    assert [r[0] for r in off] == [a, x, b]
    assert off[1][1] == pytest.approx(1 / 11) and off[2][1] == pytest.approx(1 / 12)
    on = neighbour_order(app, fusion="rrf")   # the default weight, 0.1
    assert [r[0] for r in on] == [a, b, x]
    a_off = 2 / 11 + 1 / 13
    assert on[0][1] == pytest.approx(a_off + 0.1 * (1 / 12))     # A gains a share of B
    assert on[1][1] == pytest.approx(1 / 12 + 0.1 * a_off)       # B gains a share of A
    assert on[2][1] == pytest.approx(1 / 11)                      # X: no neighbour in the pool
    heavy = neighbour_order(app, neighbour_weight=1, fusion="rrf")
    assert heavy[1][1] == pytest.approx(1 / 12 + a_off)
    # The default fusion, standardised scores: the same orders. Similarities X, B, A (A the
    # vector list's weakest, its floor one mean gap below); A the only one with the word, a lone
    # value among 3 in each words list: 3 / sqrt(2).
    sims = np.array([NEIGHBOUR_QUERY[3], NEIGHBOUR_QUERY[2], 0.0])
    vx, vb, va = vector_part(sims)
    za = va + 2 * 3 / 2 ** 0.5
    off = neighbour_order(app, neighbour_weight=0)
    assert [r[0] for r in off] == [a, x, b]
    assert [r[1] for r in off] == pytest.approx([za, vx, vb], rel=1e-5)
    on = neighbour_order(app)
    assert [r[0] for r in on] == [a, b, x]
    assert [r[1] for r in on] == pytest.approx([za + 0.1 * vb, vb + 0.1 * za, vx], rel=1e-5)


def test_the_windows_follow_the_neighbour_evidence(app):
    a, b, x = neighbour_scene(app)
    sql = ("select message_id from agentmem.search_with_context(user_id => 'alice', query_embedding => %s, "
           "query_text => 'zebracorn', k => 2, radius => 0, model => 'all-minilm'{}) where is_hit")
    assert {r[0] for r in app.execute(sql.format(""), (NEIGHBOUR_QUERY,)).fetchall()} == {a, b}
    assert {r[0] for r in app.execute(sql.format(", neighbour_weight => 0"), (NEIGHBOUR_QUERY,)).fetchall()} == {a, x}


def test_turns_two_apart_count_and_three_apart_do_not(app):
    m = store_turns(app, "alice", ["the zebracorn question", "one", "two", "three", "four"],
              [unit(1), unit(10), unit(11), unit(12), unit(13)])   # message_index 0 to 4
    sql = ("select message_id, score from agentmem.search_messages(user_id => 'alice', query_embedding => %s, "
           "query_text => 'zebracorn', k => 5, model => 'all-minilm', neighbour_weight => %s)")
    base = dict(app.execute(sql, (unit(1), 0)).fetchall())
    full = dict(app.execute(sql, (unit(1), 1)).fetchall())
    b = [base[i] for i in m]
    assert full[m[2]] == pytest.approx(b[2] + b[0] + b[1] + b[3] + b[4])   # the question, two before, counts
    assert full[m[3]] == pytest.approx(b[3] + b[1] + b[2] + b[4])          # three after it: not
    assert full[m[4]] == pytest.approx(b[4] + b[2] + b[3])


@pytest.mark.parametrize("branch", ["query_embedding => %(v)s", "query_text => 'zebracorn question'"])
def test_a_search_by_one_branch_is_left_as_it_was(app, branch):
    # two turns apart, both holding the words: by words alone each would lend the other a share
    store_turns(app, "alice", ["the zebracorn question", "an answer", "another question"], [unit(1), unit(2), unit(3)])
    sql = ("select message_id, score from agentmem.search_messages(user_id => 'alice', " + branch
           + ", k => 3, model => 'all-minilm'{})")
    plain = app.execute(sql.format(", neighbour_weight => 0"), {"v": unit(1)}).fetchall()
    assert len(plain) >= 2
    assert app.execute(sql.format(""), {"v": unit(1)}).fetchall() == plain
    assert app.execute(sql.format(", neighbour_weight => 1"), {"v": unit(1)}).fetchall() == plain


def test_another_tenants_turns_lend_nothing(app, connect, app_url):
    a, b, x = neighbour_scene(app)
    before = neighbour_order(app)
    globex = connect(app_url, tenant="globex")
    # the same turns in another tenant (same user name), and a zebracorn turn next to nothing of acme's
    neighbour_scene(globex)
    store_turns(globex, "alice", ["zebracorn zebracorn", "the zebracorn again"], [unit(2), unit(3)])
    assert neighbour_order(app) == before
    assert {r[0] for r in neighbour_order(globex)}.isdisjoint({a, b, x})


@pytest.mark.parametrize("value", ["-0.1", "1.5", "'NaN'", "null"])
@pytest.mark.parametrize("fn", ["search_messages", "search_with_context"])
def test_bad_neighbour_weight_raises_am020_with_detail_and_hint(app, fn, value):
    with pytest.raises(psycopg.Error) as info:
        app.execute(f"select * from agentmem.{fn}(user_id => 'alice', query_text => 'garden', "
                    f"neighbour_weight => {value})")
    assert info.value.sqlstate == "AM020"
    assert "neighbour_weight" in info.value.diag.message_primary
    assert info.value.diag.message_detail and info.value.diag.message_hint


def test_the_driver_passes_neighbour_weight(driver, app):
    a, b, x = neighbour_scene(app)
    call = driver()
    hits = call("search_messages", "alice", NEIGHBOUR_QUERY, k=3, query_text="zebracorn", model="all-minilm")
    assert [h.message_id for h in hits] == [a, b, x]
    hits = call("search_messages", "alice", NEIGHBOUR_QUERY, k=3, query_text="zebracorn", model="all-minilm",
                neighbour_weight=0)
    assert [h.message_id for h in hits] == [a, x, b]
    rows = call("search_with_context", "alice", NEIGHBOUR_QUERY, k=2, radius=0, query_text="zebracorn", model="all-minilm",
                neighbour_weight=0)
    assert {r.message_id for r in rows if r.is_hit} == {a, x}
