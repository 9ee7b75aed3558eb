"""sql/40_facts.sql: semantic facts: upsert with near-duplicate merge and contradiction replace, recall,
extraction, and facts true for a while (valid_from/valid_to, as_of, fact_history)."""

from __future__ import annotations

import datetime as dt
import threading
import uuid

import numpy as np
import psycopg
import pytest

from agentmem._extraction import parse_facts
from helpers import count, run_threads, sqlstate_of, upsert, vec
from helpers import STORE_DATED as STORE

M1, M2, M3 = (uuid.uuid4() for _ in range(3))


def test_insert_then_near_duplicate_merges_sources_into_one_row(app, admin):
    first = upsert(app, "u1", "home_city", "The user lives in Lyon", [M1])
    assert first[1] == "inserted" and first[2] is None
    again = upsert(app, "u1", "Home_City", "The user lives in Lyon.", [M2, M1])
    assert again[0] == first[0] and again[1] == "merged" and again[2] >= 0.92
    rows = admin.execute("select fact, source_message_ids from agentmem.facts").fetchall()
    assert rows == [("The user lives in Lyon.", sorted([M1, M2]))]
    assert count(admin, "fact_history") == 0


def test_contradiction_replaces_the_text_and_keeps_history_with_its_sources(app, admin):
    first = upsert(app, "u1", "home_city", "The user lives in Lyon", [M1])
    replaced = upsert(app, "u1", "home_city", "The user lives in Paris", [M2])
    assert replaced[0] == first[0] and replaced[1] == "replaced" and replaced[2] < 0.92
    assert admin.execute("select fact, source_message_ids from agentmem.facts").fetchall() == [
        ("The user lives in Paris", [M2])]
    history = app.execute("select fact, source_message_ids from agentmem.fact_history(fact_id => %s)",
                          (first[0],)).fetchall()
    assert history == [("The user lives in Lyon", [M1])]


def test_merge_threshold_is_a_parameter(app):
    upsert(app, "u1", "home_city", "The user lives in Lyon", [M1])
    # similarity 0.80: a contradiction at the default 0.92, a duplicate at 0.75
    assert upsert(app, "u1", "home_city", "The user lives in Paris", [M2], merge_threshold=0.75)[1] == "merged"


def test_subjects_users_and_tenants_are_separate_slots(app, admin, connect, app_url):
    upsert(app, "u1", "home_city", "The user lives in Lyon")
    upsert(app, "u1", "employer", "The user lives in Lyon")
    upsert(app, "u2", "home_city", "The user lives in Lyon")
    other = connect(app_url, tenant="globex")
    assert upsert(other, "u1", "home_city", "The user lives in Lyon")[1] == "inserted"
    assert count(admin, "facts") == 4
    assert count(admin, "facts", "tenant_id = 'acme'") == 3


def test_concurrent_upserts_of_the_same_fact_leave_one_row(app_url, connect, admin):
    conns = [connect(app_url, tenant="acme") for _ in range(8)]
    barrier = threading.Barrier(len(conns))
    results, errors = [], []

    def go(conn, i):
        try:
            barrier.wait()
            with conn.transaction():
                results.append(upsert(conn, "u1", "diet", "The user is vegetarian", [uuid.UUID(int=i + 1)])[1])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    run_threads(go, ((c, i) for i, c in enumerate(conns)))
    assert not errors
    assert sorted(results) == ["inserted"] + ["merged"] * 7
    rows = admin.execute("select source_message_ids from agentmem.facts").fetchall()
    assert len(rows) == 1 and rows[0][0] == [uuid.UUID(int=i + 1) for i in range(8)]


def test_a_second_writer_waits_for_the_first_and_merges(app_url, connect, admin):
    a, b = connect(app_url, tenant="acme"), connect(app_url, tenant="acme")
    a.execute("begin")
    upsert(a, "u1", "diet", "The user is vegetarian", [M1])
    done = []
    t = threading.Thread(target=lambda: done.append(upsert(b, "u1", "diet", "The user is vegetarian", [M2])))
    t.start()
    t.join(timeout=1)
    assert t.is_alive() and not done  # blocked on the slot's advisory lock, not racing
    a.execute("commit")
    t.join()
    assert done[0][1] == "merged"
    assert count(admin, "facts") == 1


def test_recall_facts_ranks_the_users_facts_only(app, connect, app_url):
    upsert(app, "u1", "home_city", "The user lives in Lyon")
    upsert(app, "u1", "diet", "The user is vegetarian")
    upsert(app, "u1", "pet", "The user has a dog called Rex")
    upsert(app, "u2", "pet", "The user has a dog called Rex")
    upsert(connect(app_url, tenant="globex"), "u1", "pet", "The user has a dog called Rex")
    rows = app.execute("select subject, fact, similarity from agentmem.recall_facts("
                       "user_id => 'u1', query_embedding => %s, k => 2)", (vec("dog called Rex"),)).fetchall()
    assert [r[0] for r in rows] == ["pet", rows[1][0]] and len(rows) == 2
    assert rows[0][2] > rows[1][2]
    assert len(app.execute("select * from agentmem.recall_facts(user_id => 'u1', query_embedding => %s)",
                           (vec("x"),)).fetchall()) == 3


def test_facts_have_a_per_model_hnsw_index_and_recall_matches_an_exact_scan(admin):
    idx = admin.execute("select indexdef from pg_indexes where schemaname = 'agentmem' and tablename = 'facts' "
                        "and indexdef like '%hnsw%'").fetchall()
    assert len(idx) == 2 and all("vector_cosine_ops" in r[0] for r in idx)  # nomic-embed-text, all-minilm
    admin.execute("select agentmem.set_tenant(tenant_id => 'acme')")
    admin.execute("insert into agentmem.facts (tenant_id, user_id, subject, fact, model, embedding) "
                  "select 'acme', 'u' || (i % 50), 's' || i, 'fact ' || i, 'all-minilm', "
                  "  (select array_agg(random() - 0.5 + g * 0 * i)::vector from generate_series(1, 384) as g) "
                  "from generate_series(1, 300) as i")
    q = vec("q", 384)
    got = admin.execute("select fact_id from agentmem.recall_facts(user_id => 'u1', query_embedding => %s, "
                        "k => 4, model => 'all-minilm')", (q,)).fetchall()
    exact = admin.execute("select fact_id from agentmem.facts where user_id = 'u1' "
                          "order by embedding <=> %s limit 4", (q,)).fetchall()
    assert got == exact and len(got) == 4


@pytest.mark.parametrize("user, subject, fact, sources, code", [
    ("", "home_city", "x", [], "AM020"),
    (None, "home_city", "x", [], "AM020"),
    ("u1", " ", "x", [], "AM020"),
    ("u1", "home_city", "", [], "AM020"),
    ("u1", "home_city", None, [], "AM020"),
    ("u1", "home_city", "x", [None], "AM020"),
    ("u1", "s" * 201, "x", [], "AM021"),
    ("u1", "home_city", "x" * 4001, [], "AM021"),
])
def test_bad_input_is_refused_and_stores_nothing(app, admin, user, subject, fact, sources, code):
    q = ("select * from agentmem.upsert_fact(user_id => %s, subject => %s, fact => %s, embedding => %s, "
         "source_message_ids => %s::uuid[])")
    assert sqlstate_of(app, q, (user, subject, fact, vec("x"), sources)) == code
    assert count(admin, "facts") == 0


@pytest.mark.parametrize("embedding, model, code", [
    (vec("x", 384), None, "AM010"),
    (vec("x", 768) * 0, None, "AM010"),
    (vec("x", 768), "no-such-model", "AM011"),
    ("[" + ",".join(["NaN"] * 768) + "]", None, "22000"),
])
def test_bad_embeddings_are_refused_and_store_nothing(app, admin, embedding, model, code):
    q = ("select * from agentmem.upsert_fact(user_id => 'u1', subject => 's', fact => 'f', "
         "embedding => %s::vector, model => %s)")
    assert sqlstate_of(app, q, (embedding, model)) == code
    assert count(admin, "facts") == 0


def test_recall_and_history_refuse_bad_input(app, connect, app_url):
    q = "select * from agentmem.recall_facts(user_id => %s, query_embedding => %s, k => %s)"
    assert sqlstate_of(app, q, ("u1", vec("x"), 0)) == "AM020"
    assert sqlstate_of(app, q, ("u1", vec("x"), 101)) == "AM020"
    assert sqlstate_of(app, q, ("", vec("x"), 5)) == "AM020"
    assert sqlstate_of(app, q, ("u1", vec("x", 384), 5)) == "AM010"
    fact_id = upsert(connect(app_url, tenant="globex"), "u1", "s", "f")[0]
    # another tenant's fact does not exist for acme
    assert sqlstate_of(app, "select * from agentmem.fact_history(fact_id => %s)", (fact_id,)) == "AM030"


def test_facts_need_a_tenant(connect, app_url):
    conn = connect(app_url)
    assert sqlstate_of(conn, "select * from agentmem.upsert_fact(user_id => 'u', subject => 's', fact => 'f', "
                       "embedding => %s)", (vec("f"),)) == "AM001"


# -- the chat model's reply ------------------------------------------------------


def test_parse_facts_accepts_a_bare_list():
    assert parse_facts('[{"subject": " diet ", "fact": " vegan "}]') == [{"subject": "diet", "fact": "vegan"}]


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


def test_a_contradiction_clips_an_old_fact_that_ends_after_the_new_one_starts(app):
    """Paris 2019 to 2025, then Berlin from 2023-03-01: the old period is clipped at Berlin's start, so
    the periods of the subject never overlap (history says Paris until 2023-03-01, not 2025)."""
    from helpers import upsert
    first = upsert(app, "alice", "home_city", "Alice lives in Paris", valid_from=utc(2019, 1, 1),
                   valid_to=utc(2025, 1, 1))
    second = upsert(app, "alice", "home_city", "Alice moved to Berlin", valid_from=utc(2023, 3, 1))
    assert second[0] == first[0] and second[1] == "replaced"
    rows = app.execute("select fact, valid_from, valid_to from agentmem.fact_history(fact_id => %s)",
                       (first[0],)).fetchall()
    assert rows == [("Alice lives in Paris", utc(2019, 1, 1), utc(2023, 3, 1))]
    # as of 2024 only Berlin was true
    assert [r[0] for r in recall(app, as_of=utc(2024, 1, 1))] == ["Alice moved to Berlin"]


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


def test_upsert_fact_without_an_embedding_argument_queues_it(app, admin):
    """Issue 31, defect 14: embedding defaults to NULL: leaving it out stores the fact and queues it."""
    fact_id, action, _ = app.execute("select * from agentmem.upsert_fact(user_id => 'u1', subject => 'diet', "
                                     "fact => 'The user is vegetarian', model => 'all-minilm')").fetchone()
    assert action == "inserted"
    assert count(admin, "embedding_jobs", "fact_id = %s", (fact_id,)) == 1
