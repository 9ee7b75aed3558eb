"""sql/13_bm25.sql: BM25 in the words branch of search_messages: the per-user term statistics
(term_stats, term_totals) kept right by every writer and eraser of messages, their tenant isolation,
BM25's ranking (rare words weigh more), the fusion's defaults and the parameters' errors."""

from __future__ import annotations

import math
import re

import psycopg
import pytest

from helpers import store_message, unit

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


def store_batch(conn, user, contents):
    cid = conn.execute("select agentmem.start_conversation(user_id => %s)", (user,)).fetchone()[0]
    rows = conn.execute("select message_id from agentmem.store_messages(conversation_id => %s, roles => %s, "
                        "contents => %s, embeddings => %s, model => 'all-minilm')",
                        (cid, ["user"] * len(contents), contents, [unit(i % 300) for i in range(len(contents))])
                        ).fetchall()
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


def test_the_default_fusion_sums_three_lists_with_rrf_k_10(app):
    _, ids = store_batch(app, "alice", [f"garden note {i}" for i in range(10)] + ["zebracorn"])
    q = unit(10)  # the zebracorn message's own vector (store_batch: unit(i))
    row = app.execute("select message_id, vector_rank, text_rank, score from agentmem.search_messages("
                      "user_id => 'alice', query_embedding => %s, query_text => 'zebracorn', k => 1, "
                      "model => 'all-minilm', neighbour_weight => 0)", (q,)).fetchone()  # the fusion alone
    assert row[0] == ids[10] and row[1] == 1 and row[2] == 1
    assert row[3] == pytest.approx(3 / 11)  # vector, ts_rank and BM25 each at rank 1
    only_ts = app.execute("select score from agentmem.search_messages(user_id => 'alice', query_embedding => %s, "
                          "query_text => 'zebracorn', k => 1, model => 'all-minilm', text_ranking => 'ts_rank', "
                          "neighbour_weight => 0)",
                          (q,)).fetchone()
    assert only_ts[0] == pytest.approx(2 / 11)


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
