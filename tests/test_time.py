"""Memory that knows when (issue 24): messages carry occurred_at, searches are bounded in time.

A history of 240 messages of alice, one an hour from 2023-05-01 00:00 UTC, imported with its dates
(store_messages, occurred_at), beside bob's messages at the same hours. Every search path (exact scan,
the model's shared HNSW index, the tenant's own index, words only, hybrid) is asked for windows at the
boundaries: [since, until) must give exactly the window's rows, k of them when k exist.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import psycopg
import pytest

from agentmem.client import Memory
from agentmem.errors import InvalidArgument
from helpers import count, sqlstate_of

TINY = "tiny-time"
DIM = 8
N = 240
T0 = dt.datetime(2023, 5, 1, tzinfo=dt.timezone.utc)
HOUR = dt.timedelta(hours=1)


def at(i: int) -> dt.datetime:
    return T0 + i * HOUR


@pytest.fixture
def history(admin, app):
    """alice: N messages, message i at T0 + i hours, in 3 conversations of 80; bob: 40 at the same hours."""
    admin.execute("select agentmem.register_model(model => %s, dimension => %s)", (TINY, DIM))
    rng = np.random.default_rng(24)
    vecs = rng.standard_normal((N, DIM)).astype(np.float32)
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


# -- hostile times ---------------------------------------------------------------------------------

STORE = ("select * from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
         "embeddings => %s, occurred_at => %s::timestamptz[])")


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


def test_retention_measures_age_by_when_agentmem_stored_a_message(admin, app):
    cid = app.execute("select agentmem.start_conversation(user_id => 'fred')").fetchone()[0]
    app.execute(STORE, (cid, ["user"], ["an old memory"], [np.ones(768, dtype=np.float32)], ["2019-01-01 00:00+00"]))
    admin.execute("select agentmem.set_default_retention_policy(kind => 'messages', max_age => '30 days')")
    admin.execute("select * from agentmem.apply_retention(batch_size => 1000)")
    assert count(admin, "messages", "conversation_id = %s", (cid,)) == 1


def test_the_migration_brings_existing_rows_forward(admin):
    # every message and embedding has its time; a stored embedding's is its message's
    assert count(admin, "messages", "occurred_at is null") == 0
    assert admin.execute("select count(*) from agentmem.message_embeddings as e join agentmem.messages as m "
                         "using (tenant_id, message_id) where e.occurred_at <> m.occurred_at").fetchone()[0] == 0


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


# -- facts true for a while --------------------------------------------------------------------------

def utc(*a) -> dt.datetime:
    return dt.datetime(*a, tzinfo=dt.timezone.utc)


@pytest.fixture
def alice_moved(app):
    """Alice lives in Paris from 2019, in Berlin from 2023 (one subject slot, two periods)."""
    from helpers import upsert
    first = upsert(app, "alice", "home_city", "Alice lives in Paris", valid_from=utc(2019, 1, 1))
    second = upsert(app, "alice", "home_city", "Alice moved to Berlin", valid_from=utc(2023, 3, 1))
    assert second[0] == first[0] and second[1] == "replaced"
    upsert(app, "alice", "pet", "Alice has a cat named Tom", valid_from=utc(2015, 1, 1))
    return first[0]


RECALL = ("select fact, valid_from, valid_to from agentmem.recall_facts(user_id => 'alice', query_embedding => %s, "
          "query_text => %s, k => 5, as_of => %s, since => %s, until => %s)")


def recall(app, as_of=None, since=None, until=None, text="where does Alice live"):
    from helpers import vec
    return app.execute(RECALL, (vec("Alice lives in Paris"), text, as_of, since, until)).fetchall()


def test_as_of_answers_what_was_true_then_and_now_the_current(app, alice_moved):
    then = recall(app, as_of=utc(2021, 6, 1))
    assert ("Alice lives in Paris", utc(2019, 1, 1), utc(2023, 3, 1)) in then
    assert all("Berlin" not in r[0] for r in then)
    now = recall(app)
    assert ("Alice moved to Berlin", utc(2023, 3, 1), None) in now and all("Paris" not in r[0] for r in now)
    assert recall(app, as_of=utc(2023, 3, 1))[0][0] == "Alice moved to Berlin"   # valid_from inclusive
    assert "Paris" in recall(app, as_of=utc(2023, 2, 28, 23, 59))[0][0]           # valid_to exclusive
    before = recall(app, as_of=utc(2010, 1, 1))
    assert before == []  # nothing was true yet (the cat came in 2015)
    # a window: the latest version true in it, on both branches and by words alone
    assert [r[0] for r in recall(app, since=utc(2020, 1, 1), until=utc(2021, 1, 1)) if "Alice l" in r[0]
            or "Berlin" in r[0]] == ["Alice lives in Paris"]
    assert "Alice moved to Berlin" in [r[0] for r in recall(app, since=utc(2022, 1, 1), until=utc(2024, 1, 1))]
    words = app.execute("select fact from agentmem.recall_facts(user_id => 'alice', query_text => 'Alice', "
                        "as_of => %s)", (utc(2021, 1, 1),)).fetchall()
    assert sorted(r[0] for r in words) == ["Alice has a cat named Tom", "Alice lives in Paris"]


def test_fact_history_shows_both_times_of_each_period(app, alice_moved):
    rows = app.execute("select fact, valid_from, valid_to, recorded_at, replaced_at from agentmem.fact_history("
                       "fact_id => %s)", (alice_moved,)).fetchall()
    assert len(rows) == 1
    fact, vf, vt, recorded, replaced = rows[0]
    assert (fact, vf, vt) == ("Alice lives in Paris", utc(2019, 1, 1), utc(2023, 3, 1))
    assert recorded <= replaced and recorded > utc(2024, 1, 1)


def test_an_overlapping_period_is_refused_with_its_sqlstate(app, admin, alice_moved):
    from helpers import upsert
    with pytest.raises(psycopg.Error) as info:
        upsert(app, "alice", "home_city", "Alice lives in Rome", valid_from=utc(2022, 1, 1))
    assert info.value.sqlstate == "AM032"
    with pytest.raises(psycopg.Error) as info:   # the constraint holds even for the owner's own writes
        admin.execute("insert into agentmem.fact_history (tenant_id, fact_id, user_id, subject, fact, valid_from, "
                      "valid_to, recorded_at) values ('acme', %s, 'alice', 'home_city', 'Lyon', %s, %s, now())",
                      (alice_moved, utc(2020, 1, 1), utc(2021, 1, 1)))
    assert info.value.sqlstate == "23P01"
    assert [r[0] for r in recall(app, as_of=utc(2022, 6, 1)) if "Alice l" in r[0]] == ["Alice lives in Paris"]


@pytest.mark.parametrize("kw", [
    {"valid_from": "infinity"}, {"valid_from": "-infinity"},
    {"valid_from": "2020-01-01 00:00+00", "valid_to": "2019-01-01 00:00+00"},
    {"valid_from": "2020-01-01 00:00+00", "valid_to": "2020-01-01 00:00+00"},
    {"valid_to": "infinity"},
])
def test_a_period_that_is_no_period_is_refused(app, admin, kw):
    from helpers import upsert
    with pytest.raises(psycopg.Error) as info:
        upsert(app, "zed", "home_city", "Zed lives in Oslo", **kw)
    assert info.value.sqlstate == "AM020"
    assert count(admin, "facts", "user_id = 'zed'") == 0


def test_recall_refuses_as_of_with_a_window_and_an_infinite_as_of(app):
    assert sqlstate_of(app, "select * from agentmem.recall_facts(user_id => 'alice', query_text => 'x', "
                            "as_of => now(), since => now())") == "AM020"
    assert sqlstate_of(app, "select * from agentmem.recall_facts(user_id => 'alice', query_text => 'x', "
                            "as_of => 'infinity')") == "AM020"


def test_a_fact_defaults_to_the_time_of_its_source_message(app):
    from helpers import upsert
    cid = app.execute("select agentmem.start_conversation(user_id => 'hal')").fetchone()[0]
    mid = app.execute(STORE, (cid, ["user"], ["I moved to Lyon"], [np.ones(768, dtype=np.float32)],
                              ["2022-04-01 10:00+00"])).fetchone()[0]
    upsert(app, "hal", "home_city", "Hal lives in Lyon", sources=[mid])
    got = app.execute("select valid_from, valid_to from agentmem.recall_facts(user_id => 'hal', "
                      "query_text => 'Lyon')").fetchone()
    assert got == (utc(2022, 4, 1, 10), None)


def test_erasure_removes_every_period(app, admin, alice_moved):
    app.execute("select * from agentmem.forget_user(user_id => 'alice')")
    assert count(admin, "facts", "user_id = 'alice'") == 0
    assert count(admin, "fact_history", "user_id = 'alice'") == 0


def test_extraction_tells_the_model_when_and_validates_the_dates_it_returns():
    from agentmem._extraction import FactExtractionError, chat_messages, parse_facts
    turn_at = utc(2023, 5, 8, 13, 56)
    prompt = chat_messages([{"role": "user", "content": "I moved to Berlin last week", "occurred_at": turn_at}])
    assert "Monday 2023-05-08" in prompt[1]["content"]
    got = parse_facts('{"facts": [{"subject": "home_city", "fact": "The user lives in Berlin", '
                      '"valid_from": "2023-05-01"}]}', turn_at)
    assert got == [{"subject": "home_city", "fact": "The user lives in Berlin", "valid_from": utc(2023, 5, 1)}]
    for bad in ('"last week"', '"2023-13-01"', '"10000-01-01"', '"2024-01-01"', "17"):
        with pytest.raises(FactExtractionError):
            parse_facts('[{"subject": "home_city", "fact": "Berlin", "valid_from": %s}]' % bad, turn_at)
