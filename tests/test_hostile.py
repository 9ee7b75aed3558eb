"""Hostile inputs to every function are refused with their SQLSTATE, and nothing is written.

Every case runs as the application role. "Nothing written" is checked on the row
counts of every agentmem table, read by the superuser (who sees every tenant).
"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from helpers import unit

DIM = 384
MODEL = "all-minilm"


GOOD = (unit(0) + unit(1)).astype(np.float32)
# Degenerate in float32: a squared norm that is subnormal (1e-30 per component: 1e-60 underflows),
# one that overflows (1e38 per component), and one just under FLT_MIN.
DEGENERATE = {
    "tiny": np.full(DIM, 1e-30, dtype=np.float32),
    "huge": np.full(DIM, 1e38, dtype=np.float32),
    "subnormal_norm": np.full(DIM, 1e-21, dtype=np.float32),
    "one_huge_component": np.concatenate([[3e19], np.zeros(DIM - 1)]).astype(np.float32),
}


def table_counts(admin) -> dict[str, int]:
    tables = [r[0] for r in admin.execute(
        "select c.relname from pg_class as c where c.relnamespace = 'agentmem'::regnamespace "
        "and c.relkind = 'r' order by 1").fetchall()]
    return {t: admin.execute(f"select count(*) from agentmem.{t}").fetchone()[0] for t in tables}


def refused(app, admin, query, params, sqlstate):
    """The call raises `sqlstate` and leaves every table as it was."""
    before = table_counts(admin)
    with pytest.raises(psycopg.Error) as info:
        app.execute(query, params)
    assert info.value.sqlstate == sqlstate, info.value
    assert table_counts(admin) == before


def conversation(app, user="alice"):
    return app.execute("select agentmem.start_conversation(user_id => %s)", (user,)).fetchone()[0]


# -- 5. degenerate embeddings, in every function that takes a vector ----------------------------

VECTOR_CALLS = {
    "store_message": ("select agentmem.store_message(conversation_id => %(cid)s, role => 'user', "
                      "content => 'hello', embedding => %(v)s, model => 'all-minilm')"),
    "store_messages": ("select agentmem.store_messages(conversation_id => %(cid)s, roles => '{user}', "
                       "contents => '{hello}', embeddings => array[%(v)s::vector], model => 'all-minilm')"),
    "search_messages": ("select * from agentmem.search_messages(user_id => 'alice', query_embedding => %(v)s, "
                        "model => 'all-minilm')"),
    "search_with_context": ("select * from agentmem.search_with_context(user_id => 'alice', "
                            "query_embedding => %(v)s, model => 'all-minilm')"),
    "upsert_fact": ("select * from agentmem.upsert_fact(user_id => 'alice', subject => 'city', fact => 'Lyon', "
                    "embedding => %(v)s, model => 'all-minilm')"),
    "recall_facts": ("select * from agentmem.recall_facts(user_id => 'alice', query_embedding => %(v)s, "
                     "model => 'all-minilm')"),
    "cache_store": ("select * from agentmem.cache_store(question => 'Opening hours?', question_embedding => %(v)s, "
                    "answer => 'Nine to five.', model => 'all-minilm')"),
    "cache_lookup": ("select * from agentmem.cache_lookup(question => 'Opening hours?', "
                     "question_embedding => %(v)s, model => 'all-minilm')"),
    "embedding_cache_store": ("select agentmem.embedding_cache_store(model => 'all-minilm', texts => '{hello}', "
                              "embeddings => array[%(v)s::vector])"),
}


@pytest.mark.parametrize("kind", sorted(DEGENERATE))
@pytest.mark.parametrize("call", sorted(VECTOR_CALLS))
def test_degenerate_embedding_refused_everywhere(app, admin, call, kind):
    cid = conversation(app)
    refused(app, admin, VECTOR_CALLS[call], {"cid": cid, "v": DEGENERATE[kind]}, "AM010")


def test_smallest_and_largest_acceptable_norms_pass(app):
    # 1e-19 per component: squared norm 3.8e-36, a normal float32; 1e18: 3.8e38 would overflow, 5e17 not.
    for v in (np.full(DIM, 1e-19, dtype=np.float32), np.full(DIM, 5e17, dtype=np.float32)):
        assert app.execute("select stored from agentmem.cache_store(question => %s, question_embedding => %s, "
                           "answer => 'ok', model => 'all-minilm')", (f"q {v[0]}", v)).fetchone()[0]


def _degrade(admin, table, column="embedding"):
    """Legacy data: a vector stored before check_embedding refused them ([0, 1e-30, ...]:
    its float32 norm is 0, so its cosine similarity with unit(0) is 0/0 = NaN)."""
    bad = np.full(DIM, 1e-30, dtype=np.float32)
    bad[0] = 0
    admin.execute(f"update agentmem.{table} set {column} = %s", (bad,))


def test_nan_similarity_is_never_a_cache_hit(app, admin):
    app.execute("select agentmem.cache_store(question => 'When does the Berlin office open?', "
                "question_embedding => %s, answer => 'At nine.', model => 'all-minilm')", (GOOD,))
    _degrade(admin, "cache_entries")
    row = app.execute("select hit, similarity, entry_id from agentmem.cache_lookup("
                      "question => 'What is the refund period?', question_embedding => %s, "
                      "model => 'all-minilm')", (unit(0),)).fetchone()
    assert row[0] is False and row[2] is None
    assert row[1] is None or row[1] == row[1]  # not NaN
    assert admin.execute("select count(*) from agentmem.cache_hits where similarity = 'NaN'").fetchone()[0] == 0


def test_nan_similarity_never_merges_a_fact(app, admin):
    app.execute("select agentmem.upsert_fact(user_id => 'alice', subject => 'city', fact => 'Lyon', "
                "embedding => %s, model => 'all-minilm')", (GOOD,))
    _degrade(admin, "facts")
    action = app.execute("select action from agentmem.upsert_fact(user_id => 'alice', subject => 'city', "
                         "fact => 'Paris', embedding => %s, model => 'all-minilm')", (unit(0),)).fetchone()[0]
    assert action == "replaced"


def test_nan_similarity_is_never_a_search_hit(app, admin):
    cid = conversation(app)
    app.execute("select agentmem.store_message(conversation_id => %s, role => 'user', content => 'x', "
                "embedding => %s, model => 'all-minilm')", (cid, GOOD))
    _degrade(admin, "message_embeddings")
    for min_similarity in (None, 0.5, -1):
        rows = app.execute("select similarity from agentmem.search_messages(user_id => 'alice', "
                           "query_embedding => %s, model => 'all-minilm', min_similarity => %s::real)",
                           (unit(0), min_similarity)).fetchall()
        assert rows == []


# -- 6. CPU: the guard reads at most 16 kB; every text argument has a limit ---------------------

def test_guard_functions_refuse_questions_over_16_kb(app, admin):
    long_q = "how many days " * 1200  # 16.8 kB
    refused(app, admin, "select agentmem.question_guard_features(question => %s)", (long_q,), "AM021")
    refused(app, admin, "select agentmem.question_guard_agrees(question => 'a', other_question => %s)",
            (long_q,), "AM021")
    assert app.execute("select agentmem.question_guard_features(question => %s)",
                       (long_q[:16384],)).fetchone()[0] is not None


def test_long_question_is_served_by_exact_match_only(app):
    long_q = "Please summarise the following contract. " * 500  # 20 kB
    # first call of the session, as the application role: a long question is its own key
    assert app.execute("select agentmem.normalize_question(question => %s)", (long_q,)).fetchone()[0] == long_q
    app.execute("select agentmem.cache_store(question => %s, question_embedding => %s, answer => 'A summary.', "
                "model => 'all-minilm')", (long_q, GOOD))
    # the same question: an exact hit, matched byte for byte
    assert app.execute("select kind from agentmem.cache_lookup(question => %s, question_embedding => %s, "
                       "model => 'all-minilm')", (long_q, GOOD)).fetchone()[0] == "exact"
    # a long paraphrase with the very same embedding: exact only, so a miss, and it says why
    row = app.execute("select hit, reason from agentmem.cache_lookup(question => %s, question_embedding => %s, "
                      "model => 'all-minilm')", (long_q + " Thanks.", GOOD)).fetchone()
    assert row == (False, "question over 16 kB: exact matches only")
    # a short question is never served a long cached question semantically
    row = app.execute("select hit, entry_id from agentmem.cache_lookup(question => 'Summarise it', "
                      "question_embedding => %s, model => 'all-minilm')", (GOOD,)).fetchone()
    assert row == (False, None)


def test_personal_marker_scan_is_bounded(app, admin):
    # 10,000 capitalised names and a 1 MB question: refused as personal, in one bounded pass
    names = " ".join(f"x Nm{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{chr(97 + i // 676 % 26)}"
                     for i in range(10000))
    before = table_counts(admin)
    row = app.execute("select stored, reason from agentmem.cache_store(question => %s, question_embedding => %s, "
                      "answer => %s, model => 'all-minilm')", ("what " * 200000, GOOD, names[:100000])).fetchone()
    assert row[0] is False and "personalised" in row[1]
    assert table_counts(admin) == before


TEXT_LIMITS = [
    ("select agentmem.cache_store(question => 'q?', question_embedding => %s, answer => %s, "
     "model => 'all-minilm')", lambda: (GOOD, "a" * 100001), "AM021"),
    ("select agentmem.cache_store(question => 'q?', question_embedding => %s, answer => 'a', "
     "source_ids => array[%s], model => 'all-minilm')", lambda: (GOOD, "d" * 1001), "AM021"),
    ("select agentmem.invalidate_source(doc_id => %s)", lambda: ("d" * 1001,), "AM021"),
    ("select agentmem.normalize_question(question => %s)", lambda: ("q" * 4194305,), "AM021"),
    ("select agentmem.embedding_cache_lookup(model => 'all-minilm', texts => array[%s])",
     lambda: ("t" * 4194305,), "AM021"),
    ("select agentmem.cache_lookup(question => 'q', question_embedding => %s, intent => %s, "
     "model => 'all-minilm')", lambda: (GOOD, "i" * 100000), "AM020"),
    ("select agentmem.get_model(model => %s)", lambda: ("m" * 100000,), "AM011"),
]


@pytest.mark.parametrize("query,params,sqlstate", TEXT_LIMITS)
def test_text_arguments_have_limits(app, admin, query, params, sqlstate):
    refused(app, admin, query, params(), sqlstate)


# -- 7. one user-id rule everywhere -----------------------------------------------------------

@pytest.mark.parametrize("user_id", ["u" * 300, "", "   ", "\t\n"])
def test_cache_user_id_follows_the_user_id_rule(app, admin, user_id):
    refused(app, admin, "select agentmem.cache_store(question => 'q?', question_embedding => %s, answer => 'a', "
            "model => 'all-minilm', user_id => %s)", (GOOD, user_id), "AM020")
    refused(app, admin, "select agentmem.cache_lookup(question => 'q?', question_embedding => %s, "
            "model => 'all-minilm', user_id => %s)", (GOOD, user_id), "AM020")
    refused(app, admin, "select agentmem.forget_user(user_id => %s)", (user_id,), "AM020")


# -- 8. arrays: one-dimensional, lower bound 1 ------------------------------------------------

def test_arrays_must_start_at_one_and_have_one_dimension(app, admin):
    cid = conversation(app)
    cases = [
        # the smuggle: metadata[1] checked, metadata[0] (a JSON array) stored
        ("select agentmem.store_messages(conversation_id => %s, roles => '{user,user}', contents => '{a,b}', "
         "embeddings => array[%s::vector, %s::vector], model => 'all-minilm', "
         "metadata => '[0:1]={\"[1,2]\",\"{}\"}'::jsonb[])", (cid, GOOD, GOOD)),
        ("select agentmem.store_messages(conversation_id => %s, roles => '[0:0]={user}', contents => '{a}', "
         "embeddings => array[%s::vector], model => 'all-minilm')", (cid, GOOD)),
        ("select agentmem.store_messages(conversation_id => %s, roles => '{{user}}', contents => '{{a}}', "
         "embeddings => array[%s::vector], model => 'all-minilm')", (cid, GOOD)),
        ("select agentmem.embedding_cache_store(model => 'all-minilm', texts => '[2:2]={a}', "
         "embeddings => array[%s::vector])", (GOOD,)),
        ("select agentmem.embedding_cache_lookup(model => 'all-minilm', texts => '{{a},{b}}')", None),
        ("select agentmem.cache_store(question => 'q?', question_embedding => %s, answer => 'a', "
         "source_ids => '[0:0]={doc}', model => 'all-minilm')", (GOOD,)),
        ("select agentmem.upsert_fact(user_id => 'alice', subject => 's', fact => 'f', embedding => %s, "
         "source_message_ids => '[0:0]={00000000-0000-0000-0000-000000000000}', model => 'all-minilm')",
         (GOOD,)),
        ("select * from agentmem.cache_report(cost_uncached => 1, cost_wrong => 1, "
         "thresholds => '[0:1]={0.9,0.95}')", None),
    ]
    for query, params in cases:
        refused(app, admin, query, params, "AM020")


# -- 9. JSON depth ------------------------------------------------------------------------------

def nested(depth: int) -> str:
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def test_metadata_depth_is_bounded(app, admin):
    assert conversation(app) is not None
    ok = app.execute("select agentmem.start_conversation(user_id => 'alice', metadata => %s::jsonb)",
                     (nested(32),)).fetchone()[0]
    assert ok is not None
    for depth in (33, 5000):
        refused(app, admin, "select agentmem.start_conversation(user_id => 'alice', metadata => %s::jsonb)",
                (nested(depth),), "AM020")
    deep_array = "[" * 5000 + "]" * 5000
    refused(app, admin, "select agentmem.store_message(conversation_id => %s, role => 'user', content => 'x', "
            "embedding => %s, model => 'all-minilm', metadata => %s::jsonb)",
            (ok, GOOD, '{"a":' + deep_array + "}"), "AM020")


# -- 10. whitespace of any kind is blank ------------------------------------------------------

BLANK = "\t\n\r \f\v"


def test_whitespace_only_texts_are_blank(app, admin):
    cid = conversation(app)
    app.execute("select agentmem.store_message(conversation_id => %s, role => 'user', content => 'x', "
                "embedding => %s, model => 'all-minilm')", (cid, GOOD))
    cases = [
        ("select agentmem.store_message(conversation_id => %s, role => 'user', content => %s, "
         "embedding => %s, model => 'all-minilm')", (cid, BLANK, GOOD)),
        ("select agentmem.set_summary(conversation_id => %s, summary => %s, through_index => 0)", (cid, BLANK)),
        ("select agentmem.upsert_fact(user_id => 'alice', subject => 's', fact => %s, embedding => %s, "
         "model => 'all-minilm')", (BLANK, GOOD)),
        ("select agentmem.upsert_fact(user_id => 'alice', subject => %s, fact => 'f', embedding => %s, "
         "model => 'all-minilm')", (BLANK, GOOD)),
        ("select agentmem.cache_store(question => 'q?', question_embedding => %s, answer => %s, "
         "model => 'all-minilm')", (GOOD, BLANK)),
        ("select agentmem.cache_store(question => %s, question_embedding => %s, answer => 'a', "
         "model => 'all-minilm')", (BLANK, GOOD)),
        ("select agentmem.cache_store(question => 'q?', question_embedding => %s, answer => 'a', "
         "source_ids => array[%s], model => 'all-minilm')", (GOOD, BLANK)),
        ("select agentmem.start_conversation(user_id => %s)", (BLANK,)),
        ("select agentmem.forget_user(user_id => %s)", (BLANK,)),
        ("select agentmem.forget_user(user_id => %s)", ("\t\n",)),
        ("select agentmem.invalidate_source(doc_id => %s)", (BLANK,)),
    ]
    for query, params in cases:
        refused(app, admin, query, params, "AM020")


# -- 11. review functions refuse NaN, infinities and ranges -----------------------------------

@pytest.mark.parametrize("query", [
    "select * from agentmem.sample_hits(min_similarity => 'NaN')",
    "select * from agentmem.sample_hits(min_similarity => 5)",
    "select * from agentmem.sample_hits(min_similarity => null)",
    "select * from agentmem.cache_report(cost_uncached => 'NaN', cost_wrong => 1)",
    "select * from agentmem.cache_report(cost_uncached => 1, cost_wrong => 'NaN')",
    "select * from agentmem.cache_report(cost_uncached => 'Infinity', cost_wrong => 1)",
    "select * from agentmem.cache_report(cost_uncached => 1, cost_wrong => 'Infinity')",
    "select * from agentmem.cache_report(cost_uncached => 1, cost_wrong => 1, thresholds => '{NaN}')",
    "select * from agentmem.cache_report(cost_uncached => 1, cost_wrong => 1, thresholds => '{2,-1}')",
    "select * from agentmem.cache_report(cost_uncached => 1, cost_wrong => 1, thresholds => '{}')",
    "select * from agentmem.cache_report(cost_uncached => 1, cost_wrong => 1, thresholds => '{0.9,NULL}')",
    "select * from agentmem.cache_report(cost_uncached => 1, cost_wrong => 1, since => null)",
])
def test_review_functions_refuse_nan_and_out_of_range(app, admin, query):
    refused(app, admin, query, None, "AM020")


def test_review_functions_accept_what_they_document(app):
    assert app.execute("select count(*) from agentmem.sample_hits(min_similarity => -1)").fetchone()[0] == 0
    rows = app.execute("select threshold from agentmem.cache_report(cost_uncached => 0.01, cost_wrong => 1, "
                       "thresholds => '{0.9,-1,1}')").fetchall()
    assert [r[0] for r in rows] == [-1, pytest.approx(0.9), 1]
