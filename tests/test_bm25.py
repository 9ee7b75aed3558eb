"""sql/13_bm25.sql: BM25 in the words branch of search_messages: the per-user term statistics
(term_stats, term_totals) kept right by every writer and eraser of messages, their tenant isolation,
BM25's ranking (rare words weigh more), the fusion's defaults and the parameters' errors.

And how search_messages fuses its lists (fuse_lists): fusion 'zscore' (the default), each list's
scores standardised over the candidates and summed; 'rrf', reciprocal rank, as before issue 35. A
rare word found once still wins, a list that cannot tell its candidates apart cannot reorder them,
scores are never negative (the recency and use weights multiply them), the neighbour evidence is
of the same units, and a bad value is AM020."""

from __future__ import annotations

import datetime as dt
import math
import re
import uuid

import numpy as np
import psycopg
import pytest

import agentmem
from helpers import store_message, unit, vector_part
from test_text_search import Q, populate

# The statistics as they should be, recomputed from the messages (the admin is not bound by
# row-level security), against those kept by the write path.
EXPECTED_TERMS = ("select m.tenant_id, m.user_id, t.lexeme, m.conversation_id, count(*)::int "
                  "from agentmem.messages as m "
                  "cross join lateral unnest(m.content_tsv) as t (lexeme, positions, weights) "
                  "group by 1, 2, 3, 4 order by 1, 2, 3, 4")
KEPT_TERMS = "select tenant_id, user_id, term, conversation_id, messages from agentmem.term_stats order by 1, 2, 3, 4"
EXPECTED_TOTALS = ("select tenant_id, user_id, conversation_id, count(*), sum(length(content_tsv)) "
                   "from agentmem.messages group by 1, 2, 3 order by 1, 2, 3")
KEPT_TOTALS = ("select tenant_id, user_id, conversation_id, messages, words from agentmem.term_totals "
               "order by 1, 2, 3")


def assert_stats_right(admin):
    assert admin.execute(KEPT_TERMS).fetchall() == admin.execute(EXPECTED_TERMS).fetchall()
    assert admin.execute(KEPT_TOTALS).fetchall() == admin.execute(EXPECTED_TOTALS).fetchall()


def store_batch(conn, user, contents, vectors=None, occurred_at=None):
    """contents in a new conversation of user, with vectors (default: e_i for the i-th); (its id, the messages' ids)."""
    cid = conn.execute("select agentmem.start_conversation(user_id => %s)", (user,)).fetchone()[0]
    if vectors is None:
        vectors = [unit(i % 300) for i in range(len(contents))]
    rows = conn.execute("select message_id from agentmem.store_messages(conversation_id => %s, roles => %s, "
                        "contents => %s, embeddings => %s, model => 'all-minilm', occurred_at => %s)",
                        (cid, ["user"] * len(contents), contents, vectors, occurred_at)).fetchall()
    return cid, [r[0] for r in rows]


def test_stats_follow_inserts_deletes_and_forgetting(app, admin):
    cid, ids = store_batch(app, "alice", ["the garden is green", "green tea in the garden", "a zebracorn!"])
    store_message(app, cid, "tea again, green tea")           # store_message: the same write path
    cid2, ids2 = store_batch(app, "alice", ["garden party", "party tea"])
    store_batch(app, "bob", ["bob likes tea"])
    assert_stats_right(admin)
    assert admin.execute("select sum(messages) from agentmem.term_stats where tenant_id = 'acme' "
                         "and user_id = 'alice' and term = 'tea'").fetchone() == (3,)  # messages holding it
    assert admin.execute("select sum(messages) from agentmem.term_totals where tenant_id = 'acme' "
                         "and user_id = 'alice'").fetchone() == (6,)

    app.execute("select agentmem.delete_message(message_id => %s)", (ids[2],))
    assert_stats_right(admin)
    assert admin.execute("select count(*) from agentmem.term_stats where term = 'zebracorn'").fetchone() == (0,)

    app.execute("select agentmem.forget_conversation(conversation_id => %s)", (cid2,))
    assert_stats_right(admin)
    assert admin.execute("select count(*) from agentmem.term_stats where term = 'parti'").fetchone() == (0,)

    receipt = app.execute("select rows_removed from agentmem.forget_user(user_id => 'alice')").fetchone()[0]
    assert_stats_right(admin)
    assert receipt["term_totals"] == 1 and receipt["term_stats"] > 0
    assert admin.execute("select count(*) from agentmem.term_totals where user_id = 'alice'").fetchone() == (0,)
    assert admin.execute("select count(*) from agentmem.term_totals where user_id = 'bob'").fetchone() == (1,)


def test_stats_follow_retention_and_an_import(app, admin):
    store_batch(app, "alice", ["old words expire", "old garden"])
    store_batch(app, "alice", ["new garden words"])
    admin.execute("update agentmem.messages set created_at = now() - interval '40 days' "
                  "where content like 'old%%'")
    app.execute("select agentmem.set_retention_policy(kind => 'messages', max_age => '30 days')")
    admin.execute("select * from agentmem.apply_retention(batch_size => 100)")
    assert admin.execute("select count(*) from agentmem.messages").fetchone() == (1,)
    assert_stats_right(admin)

    lines = [r[0] for r in app.execute("select line from agentmem.export_user(user_id => 'alice')")]
    app.execute("select agentmem.forget_user(user_id => 'alice')")
    assert admin.execute("select count(*) from agentmem.term_stats").fetchone() == (0,)
    app.execute("select * from agentmem.import_user(lines => %s::text[])", (lines,))
    assert_stats_right(admin)
    assert admin.execute("select count(*) from agentmem.term_stats").fetchone()[0] == 3


def test_stats_are_per_tenant_and_user_and_hidden_from_other_tenants(app, admin, connect, app_url):
    store_batch(app, "alice", ["zebracorn sighting", "garden note"])
    globex = connect(app_url, tenant="globex")
    store_batch(globex, "alice", ["zebracorn zebracorn", "zebracorn again", "zebracorn three"])
    assert_stats_right(admin)
    assert admin.execute("select tenant_id, sum(messages) from agentmem.term_stats where term = 'zebracorn' "
                         "and user_id = 'alice' group by 1 order by 1").fetchall() == [("acme", 1), ("globex", 3)]
    # the application role reads no table; row-level security is forced on both, by tenant
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        app.execute("select * from agentmem.term_stats")
    assert admin.execute("select relname from pg_class where relname in ('term_stats', 'term_totals') "
                         "and relrowsecurity and relforcerowsecurity order by 1").fetchall() == [
        ("term_stats",), ("term_totals",)]
    assert admin.execute("select count(*) from pg_policies where tablename in ('term_stats', 'term_totals') "
                         "and policyname = 'tenant_isolation' and qual like '%%current_tenant%%'").fetchone() == (2,)


def words_order(conn, text, ranking, **kw):
    extra = "".join(f", {k} => %({k})s" for k in kw)
    return [r[0] for r in conn.execute(
        "select content from agentmem.search_messages(user_id => 'alice', query_text => %(q)s, k => 3, "
        "text_ranking => %(r)s" + extra + ")", {"q": text, "r": ranking, **kw}).fetchall()]


def test_bm25_weighs_a_rare_word_above_a_common_one_repeated(app):
    store_batch(app, "alice", [f"garden note {i}" for i in range(20)]
                + ["garden garden garden garden garden", "zebracorn"])
    # ts_rank counts the common word's occurrences; BM25 weighs the rare word by its idf (each word once)
    assert words_order(app, "garden zebracorn", "ts_rank")[0] == "garden garden garden garden garden"
    assert words_order(app, "garden zebracorn", "bm25")[0] == "zebracorn"
    # k1 0: no discount for length; every message holding the word ties (broken by id)
    top = words_order(app, "garden", "bm25", bm25_k1=0.0, bm25_b=0.0)
    assert len(top) == 3


def test_bm25_length_normalisation_follows_b(app):
    store_batch(app, "alice", ["zebracorn", "zebracorn alpha beta gamma delta epsilon zeta theta iota kappa"]
                + [f"filler words number {i}" for i in range(10)])
    assert words_order(app, "zebracorn", "bm25", bm25_b=1.0)[0] == "zebracorn"
    scores = app.execute("select content, score from agentmem.search_messages(user_id => 'alice', "
                         "query_text => 'zebracorn', text_ranking => 'bm25', bm25_b => 0.0)").fetchall()
    assert len(scores) == 2  # b 0: equal BM25, tie broken by id; both found


def test_the_fusion_sums_three_lists_standardised_or_by_rrf_k(app):
    _, ids = store_batch(app, "alice", [f"garden note {i}" for i in range(10)] + ["zebracorn"])
    q = unit(10)  # the zebracorn message's own vector (store_batch: unit(i))
    sql = ("select message_id, vector_rank, text_rank, score from agentmem.search_messages("
           "user_id => 'alice', query_embedding => %s, query_text => 'zebracorn', k => 1, "
           "model => 'all-minilm', neighbour_weight => 0{})")  # the fusion alone
    row = app.execute(sql.format(""), (q,)).fetchone()
    assert row[0] == ids[10] and row[1] == 1 and row[2] == 1
    # the default, fusion 'zscore': in each list one value apart from ten equal ones, standardised
    # over the 11 candidates: the only message with the word 11 / sqrt(10) in each words list;
    # similarity 1 against 0, the vector list's floor one mean gap (1/11) below 0: 12 / sqrt(10)
    assert row[3] == pytest.approx((2 * 11 + 12) / 10 ** 0.5)
    rrf = app.execute(sql.format(", fusion => 'rrf'"), (q,)).fetchone()
    assert rrf[:3] == row[:3]
    assert rrf[3] == pytest.approx(3 / 11)  # vector, ts_rank and BM25 each at rank 1, rrf_k 10
    only_ts = app.execute(sql.format(", text_ranking => 'ts_rank', fusion => 'rrf'"), (q,)).fetchone()
    assert only_ts[3] == pytest.approx(2 / 11)
    only_ts = app.execute(sql.format(", text_ranking => 'ts_rank'"), (q,)).fetchone()
    assert only_ts[3] == pytest.approx((11 + 12) / 10 ** 0.5)


@pytest.mark.parametrize("args, what", [
    ("text_ranking => 'bm42'", "text_ranking"),
    ("text_ranking => null", "text_ranking"),
    ("bm25_k1 => -0.1", "bm25_k1"),
    ("bm25_k1 => 10.5", "bm25_k1"),
    ("bm25_k1 => 'NaN'", "bm25_k1"),
    ("bm25_b => 1.5", "bm25_b"),
    ("bm25_b => null", "bm25_b"),
])
@pytest.mark.parametrize("fn", ["search_messages", "search_with_context"])
def test_bad_bm25_arguments_raise_am020_with_detail_and_hint(app, fn, args, what):
    with pytest.raises(psycopg.Error) as info:
        app.execute(f"select * from agentmem.{fn}(user_id => 'alice', query_text => 'garden', {args})")
    assert info.value.sqlstate == "AM020"
    assert what in info.value.diag.message_primary
    assert info.value.diag.message_detail and info.value.diag.message_hint


def test_writers_of_one_users_two_conversations_do_not_wait_for_each_other(app, admin, connect, app_url):
    """The counts are kept per conversation: a write holds only its own conversation's count rows."""
    one = app.execute("select agentmem.start_conversation(user_id => 'alice')").fetchone()[0]
    other = app.execute("select agentmem.start_conversation(user_id => 'alice')").fetchone()[0]
    first, second = connect(app_url, tenant="acme"), connect(app_url, tenant="acme")
    first.execute("begin")
    store_message(first, one, "the same garden words")
    second.execute("begin")
    second.execute("set local lock_timeout = '3s'")
    store_message(second, other, "the same garden words")   # 55P03 if it waited for the first
    second.execute("commit")
    first.execute("commit")
    assert_stats_right(admin)
    assert admin.execute("select sum(messages) from agentmem.term_stats where term = 'garden'").fetchone() == (2,)


def test_a_switch_of_the_text_search_configuration_recounts_the_words(app, admin, connect, app_url):
    store_batch(app, "alice", ["the gardens are gardening", "running runners run"])
    store_batch(connect(app_url, tenant="globex"), "bob", ["the runners"])
    admin.execute("select agentmem.set_text_search_config(config => 'simple')")
    assert_stats_right(admin)
    assert admin.execute("select count(*) from agentmem.term_stats where term = 'the'").fetchone() == (2,)


def bm25_expected(admin, user, query, k1=1.2, b=0.3):
    """BM25 as sql/13_bm25.sql defines it, worked out here from the user's messages."""
    rows = admin.execute("select message_id, content_tsv::text, length(content_tsv) from agentmem.messages "
                         "where tenant_id = 'acme' and user_id = %s", (user,)).fetchall()
    terms = admin.execute("select agentmem_private.text_terms(%s)", (query,)).fetchone()[0]
    words = {mid: set(re.findall(r"'([^']+)'", tsv)) for mid, tsv, _ in rows}
    n, avg = len(rows), max(sum(r[2] for r in rows) / max(len(rows), 1), 1)
    idf = {t: math.log(1 + (n - sum(t in w for w in words.values()) + 0.5)
                       / (sum(t in w for w in words.values()) + 0.5)) for t in terms}
    return terms, {mid: (k1 + 1) / (1 + k1 * (1 - b + b * length / avg)) * sum(idf[t] for t in terms if t in words[mid])
                   for mid, _, length in rows if words[mid] & set(terms)}


@pytest.mark.parametrize("query", [
    "zebra",
    "amber basil cedar",
    # twelve words: past the eight that bm25_words tests in line (bm25_rest sums the others)
    "amber basil cedar dahlia ember fennel ginger hazel indigo juniper kelp lotus",
])
def test_bm25_ranks_every_message_by_the_sum_of_its_words_idf(app, admin, query):
    vocab = "amber basil cedar dahlia ember fennel ginger hazel indigo juniper kelp lotus".split()
    # word i in (i + 1) of the messages, each message a different mix and length: every word's idf differs
    contents = [" ".join(w for i, w in enumerate(vocab) if (m * 7 + i * 3) % (i + 2) == 0) + " zebra" * (m % 3 == 0)
                + " filler" * (m % 4) for m in range(40)]
    store_batch(app, "alice", [c.strip() or "nothing" for c in contents])
    terms, expected = bm25_expected(admin, "alice", query)
    assert len(terms) == len(query.split())
    found = app.execute("select message_id from agentmem.search_messages(user_id => 'alice', query_text => %s, "
                        "k => 100, text_ranking => 'bm25')", (query,)).fetchall()
    got = [r[0] for r in found]
    assert set(got) == set(expected)  # every message holding a word, and no other
    scores = [expected[m] for m in got]
    assert all(a >= b - 1e-9 for a, b in zip(scores, scores[1:])), "not in BM25's order"
    assert len({round(s, 9) for s in scores}) >= 5  # the order is informative: not all ties


@pytest.mark.parametrize("ranking", ["bm25", "both", "ts_rank"])
@pytest.mark.parametrize("window", ["since", "until", "both"])
def test_a_time_window_that_holds_every_message_ranks_them_as_no_window_does(app, admin, ranking, window):
    """A time window takes the words branch's other path (a statement planned with the window's own
    bounds): over a window that holds every message, both rankings come out as they do without one."""
    vocab = "amber basil cedar dahlia ember fennel".split()
    contents = [" ".join(w for i, w in enumerate(vocab) if (m * 5 + i) % (i + 2) == 0) + " filler" * (m % 5)
                for m in range(30)]
    store_batch(app, "alice", [c.strip() or "nothing" for c in contents])
    bounds = {"since": "now() - interval '1 day'", "until": "now() + interval '1 day'"}
    args = ", ".join(f"{b} => {bounds[b]}" for b in (["since", "until"] if window == "both" else [window]))
    sql = ("select message_id from agentmem.search_messages(user_id => 'alice', query_text => %s, k => 100, "
           "text_ranking => %s{})")
    query = "amber cedar ember"
    plain = [r[0] for r in app.execute(sql.format(""), (query, ranking)).fetchall()]
    windowed = [r[0] for r in app.execute(sql.format(", " + args), (query, ranking)).fetchall()]
    assert len(plain) >= 10
    assert windowed == plain
    if ranking == "bm25":
        _, expected = bm25_expected(admin, "alice", query)
        scores = [expected[m] for m in windowed]
        assert all(a >= b - 1e-9 for a, b in zip(scores, scores[1:])), "not in BM25's order"


def test_bm25_words_is_inlined_into_the_statement(admin):
    plan = "\n".join(r[0] for r in admin.execute(
        "explain (verbose) select agentmem_private.bm25_words(m.content_tsv, array['garden'::tsquery], "
        "array[1.5::float8]) from agentmem.messages as m").fetchall())
    assert "bm25_words(" not in plan and "CASE" in plan  # (on Citus the column keeps the name)


# -- the fusion (fuse_lists) ---------------------------------------------------------------------

MODEL = "all-minilm"
SEARCH = ("select message_id, vector_rank, text_rank, score from agentmem.search_messages(user_id => 'alice', "
          "query_embedding => %(v)s, query_text => %(q)s, k => %(k)s, model => 'all-minilm'{})")


def toward(a: float) -> np.ndarray:
    """e_0 + a e_1, normalised: its cosine to Q falls as a grows."""
    v = unit(0) + a * unit(1)
    return v / np.linalg.norm(v)


def store(conn, contents, vectors, occurred_at=None):
    return store_batch(conn, "alice", contents, vectors, occurred_at)[1]


def search(conn, q, k=5, v=Q, extra=""):
    return conn.execute(SEARCH.format(extra), {"v": v, "q": q, "k": k}).fetchall()


@pytest.mark.parametrize("ranking", ["both", "bm25", "ts_rank"])
def test_a_word_found_once_stands_beside_the_best_meaning(app, ranking):
    # The code's message is the vector list's very last (-query) and the only one with the word;
    # the meaning's is the vector list's one standout (the rest are orthogonal to the query).
    # Standardised over the 82 candidates, the lone match scores about sqrt(82) in each words list
    # and the meaning about 13 in the vector list: with both words lists (the default) the code
    # comes first; with one, the meaning does. By reciprocal rank each is a first: 3/11 or 2/11 as well.
    m = populate(app)
    rows = search(app, "INV-2291", extra=f", text_ranking => '{ranking}', neighbour_weight => 0")
    assert {rows[0][0], rows[1][0]} == {m["code"], m["meaning"]}
    code = next(r for r in rows if r[0] == m["code"])
    meaning = next(r for r in rows if r[0] == m["meaning"])
    assert code[1] == 82 and code[2] == 1 and meaning[1] == 1 and meaning[2] is None
    # similarities: the meaning 1/sqrt(1.25), 80 fillers 0, the code -1
    vec = vector_part([1.25 ** -0.5] + [0.0] * 80 + [-1.0])
    # a lone value x among 82 (the others 0): (x - 0) / (x * sqrt(81) / 82) in each words list
    assert code[3] == pytest.approx((2 if ranking == "both" else 1) * 82 / 81 ** 0.5 + vec[-1], rel=1e-5)
    assert meaning[3] == pytest.approx(vec[0], rel=1e-5)
    assert rows[0][0] == (m["code"] if ranking == "both" else m["meaning"])
    assert all(r[3] < meaning[3] for r in rows[2:])


def test_scores_are_never_negative_and_come_best_first(app):
    m = populate(app)
    for q in ("gardening puppy", "INV-2291 sister", "note number 7"):
        rows = search(app, q, k=50)
        scores = [r[3] for r in rows]
        assert scores == sorted(scores, reverse=True)
        assert min(scores) >= 0
    # vector only: even the pool's weakest scores above 0 (one mean gap above the list's floor),
    # so that a recency or use weight, which multiplies, can still lift it
    rows = search(app, None, k=100)
    assert m["code"] == rows[-1][0] and rows[-1][3] > 0
    assert [r[3] for r in rows] == pytest.approx(sorted(vector_part(
        [1.25 ** -0.5] + [0.0] * 80 + [-1.0]), reverse=True), rel=1e-5)


def test_a_list_whose_scores_are_all_equal_cannot_reorder(app):
    # Every message holds the word once, in messages of one length: the words lists cannot tell
    # them apart, and give each of their own 1, so the order is the vector's. By reciprocal rank
    # their ranks (ties broken by id) would still move it.
    ids = store(app, [f"garden {w}" for w in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")],
                [toward(0.1 * i) for i in range(6)])
    by_vector = [r[0] for r in search(app, None, k=6)]
    assert by_vector == ids
    hybrid = search(app, "garden", k=6, extra=", neighbour_weight => 0")
    assert [r[0] for r in hybrid] == by_vector
    assert [r[3] for r in hybrid] == pytest.approx([r[3] + 2 for r in search(app, None, k=6)])
    # the same for a lone match, which has nothing to be standardised against
    (only,) = search(app, "foxtrot", k=6, v=None)
    assert only[0] == ids[5] and only[3] == pytest.approx(2)
    rrf = search(app, "garden", k=6, extra=", neighbour_weight => 0, fusion => 'rrf'")
    assert {r[0] for r in rrf} == set(ids)


def test_equal_scores_are_told_exactly_not_by_a_deviation_rounded_above_0(admin):
    # 268 equal BM25 scores of 19.347560982130968: the mean of squares less the squared mean is
    # 7.2e-12 in floats, not 0 (a deviation of 2.7e-6, which would give each 7e6); the list gives 1.
    ids = [uuid.uuid4() for _ in range(268)]
    distances = [0.1 + 0.001 * i for i in range(268)]
    rows = admin.execute("select id, score from agentmem_private.fuse_lists('zscore', %s, %s, null, null, %s, %s, "
                         "10, 268)", (ids, distances, ids, [19.347560982130968] * 268)).fetchall()
    assert [r[0] for r in rows] == ids
    vec = vector_part([1 - d for d in distances])
    assert [r[1] for r in rows] == pytest.approx([v + 1 for v in vec], rel=1e-9)


def test_rrf_is_the_reciprocal_rank_fusion_of_before(app):
    m = populate(app)
    top = search(app, "sister puppy", k=1, extra=", neighbour_weight => 0, fusion => 'rrf', rrf_k => 10")[0]
    assert top[0] == m["meaning"] and top[1] == 1 and top[2] == 1
    assert top[3] == pytest.approx(3 / 11)   # vector, ts_rank and BM25 each at rank 1
    zscore = search(app, "sister puppy", k=1, extra=", neighbour_weight => 0")[0]
    assert zscore[0] == m["meaning"] and zscore[3] != pytest.approx(3 / 11)
    # rrf_k moves the scores of 'rrf' only
    assert search(app, "sister puppy", k=1, extra=", neighbour_weight => 0, rrf_k => 500")[0][3] == \
        pytest.approx(zscore[3])


def test_neighbours_give_their_fused_scores_in_the_same_units(app):
    # A turn with no word of the query and a distant vector, between two turns that match well
    # by both: it gains neighbour_weight times what they scored (the fillers around score 0).
    store(app, [f"filler line {i}" for i in range(30)], [unit(3 + i, mix=1) for i in range(30)])
    before, middle, after = store(app, ["zebracorn sighting reported", "and then what happened?",
                                        "the zebracorn ran away"], [toward(0.2), toward(3.0), toward(0.5)])
    plain = {r[0]: r[3] for r in search(app, "zebracorn", k=40, extra=", neighbour_weight => 0")}
    weighted = {r[0]: r[3] for r in search(app, "zebracorn", k=40, extra=", neighbour_weight => 0.5")}
    assert weighted[middle] == pytest.approx(plain[middle] + 0.5 * (plain[before] + plain[after]))


def test_recency_weighs_a_standardised_score_as_it_weighs_a_reciprocal_rank(app):
    # Two messages with the same words and vector, a year apart: with a half-life of 30 days the
    # newer comes first and the older keeps 2^-12 of its score, below the fillers (no word,
    # orthogonal vectors: the vector list's weakest, still above its floor), as by reciprocal rank.
    old = store(app, ["the zebracorn report"], [unit(0)],
                occurred_at=[dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)])[0]
    new = store(app, ["the zebracorn report"], [unit(0)])[0]
    store(app, [f"filler line {i}" for i in range(10)], [unit(3 + i) for i in range(10)])
    vec = vector_part([1.0, 1.0] + [0.0] * 10)
    words = 1 / (2 / 12 - (2 / 12) ** 2) ** 0.5   # x / sd of (x, x, ten 0), in each words list
    plain = search(app, "zebracorn", k=12, extra=", neighbour_weight => 0")
    assert {r[0] for r in plain[:2]} == {old, new}
    assert [r[3] for r in plain] == pytest.approx([vec[0] + 2 * words] * 2 + [vec[-1]] * 10, rel=1e-5)
    for fusion in ("zscore", "rrf"):
        rows = search(app, "zebracorn", k=12, extra=f", recency_half_life => '30 days', fusion => '{fusion}', "
                      "neighbour_weight => 0")
        assert rows[0][0] == new and rows[-1][0] == old, fusion
        assert 0 < rows[-1][3] < rows[0][3] / 2 ** 11
    rows = search(app, "zebracorn", k=12, extra=", recency_half_life => '30 days', neighbour_weight => 0")
    assert rows[0][3] == pytest.approx(plain[0][3], rel=1e-5)
    assert [r[3] for r in rows[1:11]] == pytest.approx([vec[-1]] * 10, rel=1e-5)


@pytest.mark.parametrize("value", ["'rank'", "''", "null", "'ZSCORE'"])
@pytest.mark.parametrize("fn", ["search_messages", "search_with_context"])
def test_a_bad_fusion_raises_am020_with_detail_and_hint(app, fn, value):
    with pytest.raises(psycopg.Error) as info:
        app.execute(f"select * from agentmem.{fn}(user_id => 'alice', query_text => 'garden', fusion => {value})")
    assert info.value.sqlstate == "AM020"
    assert "fusion" in info.value.diag.message_primary
    assert info.value.diag.message_detail and info.value.diag.message_hint


def test_search_with_context_passes_fusion_on(app):
    populate(app)
    sql = ("select message_id, is_hit, score from agentmem.search_with_context(user_id => 'alice', "
           "query_embedding => %s, "
           "query_text => 'sister puppy', k => 1, radius => 0, model => 'all-minilm', neighbour_weight => 0{})")
    rrf = app.execute(sql.format(", fusion => 'rrf'"), (Q,)).fetchall()
    assert rrf[0][2] == pytest.approx(3 / 11)
    assert app.execute(sql.format(""), (Q,)).fetchall()[0][2] != pytest.approx(3 / 11)


def test_the_driver_passes_fusion(driver, app):
    m = populate(app)
    call = driver()
    hits = call("search_messages", "alice", Q, k=1, query_text="sister puppy", model=MODEL, neighbour_weight=0,
                fusion="rrf")
    assert hits[0].message_id == m["meaning"] and hits[0].score == pytest.approx(3 / 11)
    hits = call("search_messages", "alice", Q, k=1, query_text="sister puppy", model=MODEL, neighbour_weight=0)
    assert hits[0].message_id == m["meaning"] and hits[0].score != pytest.approx(3 / 11)
    windows = call("search_with_context", "alice", Q, k=1, radius=0, query_text="sister puppy", model=MODEL,
                   neighbour_weight=0, fusion="rrf")
    assert windows[0].score == pytest.approx(3 / 11)
    with pytest.raises(agentmem.InvalidArgument) as info:
        call("search_messages", "alice", Q, query_text="x", model=MODEL, fusion="rank")
    assert info.value.sqlstate == "AM020"
