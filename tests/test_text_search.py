"""sql/16_text_search.sql: hybrid retrieval: full-text and vector branches of search_messages fused by
reciprocal rank (fusion 'rrf'), text-only search, the text search configuration.

Vectors are chosen by hand so that what the vector branch finds is known: the query is e0, the
"meaning" message is near e0, the message holding the rare code is at -e0 (the vector branch's last).
"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from agentmem.client import Memory
from helpers import bulk_load, clustered_vectors, plans_of, sqlstate_of, unit, vector_part

MODEL, DIM = "all-minilm", 384
# The fusion's mechanics with ts_rank alone and the settings before issue 35 (pool 60, rrf_k 60, fusion
# 'rrf'); the defaults (BM25 beside ts_rank, pool 100, fusion 'zscore') are tested in tests/test_bm25.py.
SEARCH = ("select message_id, content, similarity, vector_rank, text_rank, score "
          "from agentmem.search_messages(user_id => %s, query_embedding => %s, query_text => %s, k => %s, "
          "model => 'all-minilm', candidate_pool => 60, rrf_k => 60, text_ranking => 'ts_rank', neighbour_weight => 0, "
          "fusion => 'rrf')")


Q = unit(0)
MEANING = "Alice: my sister adopted a puppy last spring"
CODE = "Alice: the invoice INV-2291 was paid on Tuesday"


def populate(conn, user="alice", filler=80, code=CODE) -> dict[str, object]:
    """filler messages on unrelated axes, one near the query (meaning), one at -query (the rare code)."""
    cid = conn.execute("select agentmem.start_conversation(user_id => %s)", (user,)).fetchone()[0]
    contents = [f"Alice: note number {i} about gardening" for i in range(filler)] + [MEANING, code]
    vectors = [unit(2 + i, mix=1) for i in range(filler)] + [unit(0, mix=1), unit(0, sign=-1.0)]
    rows = conn.execute("select message_id from agentmem.store_messages(conversation_id => %s, roles => %s, "
                        "contents => %s, embeddings => %s, model => %s)",
                        (cid, ["user"] * len(contents), contents, vectors, MODEL)).fetchall()
    ids = [r[0] for r in rows]
    return {"cid": cid, "meaning": ids[-2], "code": ids[-1], "ids": ids}


def search(conn, text, embedding=Q, k=5, user="alice"):
    return conn.execute(SEARCH, (user, embedding, text, k)).fetchall()


def test_a_rare_code_is_found_by_hybrid_search_and_not_by_vectors_alone(app):
    m = populate(app)
    vector_only = search(app, None)
    assert m["code"] not in {r[0] for r in vector_only}
    assert vector_only[0][0] == m["meaning"]
    hybrid = search(app, "what happened to INV-2291?")
    ids = [r[0] for r in hybrid]
    assert m["code"] in ids and m["meaning"] in ids  # the code by its words, the meaning by its vector
    by_id = {r[0]: r for r in hybrid}
    code, meaning = by_id[m["code"]], by_id[m["meaning"]]
    assert code[2] is None and code[3] is None and code[4] == 1       # text branch only
    assert meaning[3] == 1 and meaning[2] > 0.8                       # vector rank 1, its similarity
    assert code[5] == pytest.approx(1 / 61) and meaning[5] >= 1 / 61   # RRF with rrf_k 60
    assert [r[5] for r in hybrid] == sorted((r[5] for r in hybrid), reverse=True)


def test_vector_only_is_todays_search_with_ranks_and_text_only_needs_no_embedding(app):
    m = populate(app)
    rows = search(app, None, k=5)
    assert [r[3] for r in rows] == [1, 2, 3, 4, 5] and all(r[4] is None for r in rows)
    assert [r[5] for r in rows] == pytest.approx([1 / (60 + i) for i in range(1, 6)])
    sims = [r[2] for r in rows]
    assert sims == sorted(sims, reverse=True)
    text_only = search(app, "INV-2291", embedding=None)
    assert [(r[0], r[2], r[3], r[4]) for r in text_only] == [(m["code"], None, None, 1)]
    # from psql: words only, no embedding, no model
    assert app.execute("select count(*) from agentmem.search_messages(user_id => 'alice', "
                       "query_text => 'gardening')").fetchone() == (5,)


def test_a_message_found_by_both_branches_adds_both_reciprocal_ranks(app):
    m = populate(app)
    rows = search(app, "sister puppy", k=3)
    top = rows[0]
    assert top[0] == m["meaning"] and top[3] == 1 and top[4] == 1
    assert top[5] == pytest.approx(2 / 61)
    rows = app.execute("select score from agentmem.search_messages(user_id => 'alice', query_embedding => %s, "
                       "query_text => 'sister puppy', k => 1, rrf_k => 0, model => 'all-minilm', "
                       "text_ranking => 'ts_rank', neighbour_weight => 0, fusion => 'rrf')", (Q,)).fetchall()
    assert rows[0][0] == pytest.approx(2.0)


def test_min_similarity_applies_to_the_vector_branch_only(app):
    m = populate(app)
    rows = app.execute("select message_id, similarity from agentmem.search_messages(user_id => 'alice', "
                       "query_embedding => %s, query_text => 'INV-2291', min_similarity => 0.5, "
                       "model => 'all-minilm')", (Q,)).fetchall()
    ids = {r[0] for r in rows}
    assert m["code"] in ids and m["meaning"] in ids  # the code's similarity is -1, yet the text found it
    assert all(s is None or s >= 0.5 for _, s in rows)


def test_another_tenants_or_users_exact_words_never_surface(app, connect, app_url):
    mine = populate(app)
    bob = populate(app, user="bob", code="Bob: invoice INV-2291 INV-2291 was refused")
    globex = connect(app_url, tenant="globex")
    theirs = populate(globex, code="Alice: INV-2291 INV-2291 INV-2291 overdue")
    others = set(bob["ids"]) | set(theirs["ids"])
    for text, emb in (("INV-2291", None), ("INV-2291 invoice", Q), ("gardening note", None)):
        ids = {r[0] for r in search(app, text, embedding=emb, k=50)}
        assert ids and not ids & others
    win = app.execute("select message_id from agentmem.search_with_context(user_id => 'alice', "
                      "query_text => 'INV-2291 refused overdue', k => 10, radius => 100)").fetchall()
    assert {r[0] for r in win} <= set(mine["ids"])
    # the other tenant sees its own code only
    ids = {r[0] for r in search(globex, "INV-2291", embedding=None, k=50)}
    assert ids == {theirs["code"]}


def test_conversation_id_limits_the_text_branch_too(app):
    first = populate(app)
    second = populate(app)
    rows = app.execute("select message_id from agentmem.search_messages(user_id => 'alice', query_text => 'INV-2291', "
                       "conversation_id => %s)", (second["cid"],)).fetchall()
    assert rows == [(second["code"],)]
    assert first["code"] != second["code"]


@pytest.mark.parametrize("text", ["", "   ", "the of and is to a", "?! ... --- ;;", "\t\n"])
def test_a_text_without_searchable_words_falls_back_to_vectors_or_returns_nothing_with_a_notice(app, text):
    populate(app)
    assert search(app, text) == search(app, None)
    notices: list[str] = []
    app.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    assert search(app, text, embedding=None) == []
    assert any("no searchable word" in n for n in notices), notices
    facts = app.execute("select * from agentmem.recall_facts(user_id => 'alice', query_text => %s)", (text,)).fetchall()
    assert facts == [] and sum("no searchable word" in n for n in notices) == 2


@pytest.mark.parametrize("text", [
    "INV-2291 & paid", "INV-2291 | paid", "!INV-2291", "INV-2291:*", "'INV-2291'", '"INV-2291"',
    "INV-2291\\", "\\'INV-2291\\' || !!(", "INV-2291 <-> paid", "o'brien's INV-2291 'x''y'",
])
def test_operators_quotes_and_backslashes_are_words_never_tsquery_syntax(app, text):
    m = populate(app)
    rows = search(app, text, embedding=None, k=5)
    assert rows and rows[0][0] == m["code"]  # '!INV-2291' would exclude it, were '!' syntax


def test_a_prefix_operator_is_not_a_prefix_search(app):
    populate(app)
    assert search(app, "gard:*", embedding=None) == []  # 'gard:*' as syntax would match 'gardening'
    assert len(search(app, "gardening", embedding=None)) == 5


def test_a_100000_character_text_is_searched_and_a_longer_one_refused(app, admin):
    m = populate(app)
    long_text = ("INV-2291 " + "lorem ipsum dolor sit amet " * 4000)[:100_000]
    assert len(long_text) == 100_000
    rows = search(app, long_text, embedding=None)
    assert rows[0][0] == m["code"]
    assert search(app, long_text)  # hybrid too
    too_long = long_text + "x"
    assert sqlstate_of(app, SEARCH, ("alice", None, too_long, 5)) == "AM021"
    assert sqlstate_of(app, "select * from agentmem.recall_facts(user_id => 'alice', query_text => %s)",
                       (too_long,)) == "AM021"


def test_a_text_query_takes_every_word_up_to_64_and_past_that_the_first_64(admin):
    def terms(text):
        return admin.execute("select agentmem_private.text_query(%s)::text", (text,)).fetchone()[0]

    few = [f"w{i:03d}" for i in range(64, 0, -1)]  # 64 distinct words
    assert sorted(t.strip("' ") for t in terms(" ".join(few)).split("|")) == sorted(few)
    many = [f"w{i:03d}" for i in range(70, 0, -1)] + ["w070", "o'brien"]  # 71 distinct, the first 64 by position
    got = [t.strip(" ") for t in terms(" ".join(many)).split("|")]
    assert got == [f"'{w}'" for w in many[:64]]
    assert terms("the and of") is None  # stop words only


@pytest.mark.parametrize("call", [
    "select * from agentmem.search_messages(user_id => 'alice')",
    "select * from agentmem.search_messages(user_id => 'alice', query_embedding => null, query_text => null)",
    "select * from agentmem.search_with_context(user_id => 'alice')",
    "select * from agentmem.recall_facts(user_id => 'alice')",
    "select * from agentmem.search_messages(user_id => 'alice', query_text => 'x', candidate_pool => 0)",
    "select * from agentmem.search_messages(user_id => 'alice', query_text => 'x', candidate_pool => 1001)",
    "select * from agentmem.search_messages(user_id => 'alice', query_text => 'x', rrf_k => -1)",
    "select * from agentmem.recall_facts(user_id => 'alice', query_text => 'x', rrf_k => 1001)",
    "select * from agentmem.search_with_context(user_id => 'alice', query_text => 'x', candidate_pool => 0)",
])
def test_bad_arguments_raise_am020_with_a_hint_and_write_nothing(app, admin, call):
    populate(app)
    before = admin.execute("select count(*) from agentmem.messages").fetchone()
    with pytest.raises(psycopg.Error) as info:
        app.execute(call)
    assert info.value.sqlstate == "AM020"
    if "candidate_pool" not in call and "rrf_k" not in call:
        assert "query_text" in info.value.diag.message_hint
    assert admin.execute("select count(*) from agentmem.messages").fetchone() == before


def test_search_with_context_ranks_windows_by_their_best_fused_score(app):
    m = populate(app)
    rows = app.execute("select window_rank, message_id, is_hit, vector_rank, text_rank, score, window_score "
                       "from agentmem.search_with_context(user_id => 'alice', query_embedding => %s, "
                       "query_text => 'sister puppy INV-2291', k => 3, radius => 1, model => 'all-minilm')",
                       (Q,)).fetchall()
    hits = {r[1]: r for r in rows if r[2]}
    assert {m["meaning"], m["code"]} <= set(hits) and len(hits) == 3
    # meaning (both branches) outranks the code (text only): its window comes first
    assert hits[m["meaning"]][0] == 1 and hits[m["code"]][0] in (1, 2)
    assert all(r[6] == max(h[5] for h in hits.values() if h[0] == r[0]) for r in rows)
    assert all(r[5] is None for r in rows if not r[2])
    text_only = app.execute("select message_id from agentmem.search_with_context(user_id => 'alice', "
                            "query_text => 'INV-2291', k => 1, radius => 1)").fetchall()
    assert m["code"] in {r[0] for r in text_only} and len(text_only) == 2  # the last message: one neighbour


def test_recall_facts_hybrid_finds_a_fact_by_its_words(app, connect, app_url):
    def fact(conn, user, subject, text, v):
        conn.execute("select * from agentmem.upsert_fact(user_id => %s, subject => %s, fact => %s, "
                     "embedding => %s, model => 'all-minilm')", (user, subject, text, v))
    fact(app, "alice", "pet", "The user has a puppy called Rex", unit(0, mix=1))
    fact(app, "alice", "account", "The user's account number is ACC-7781", unit(0, sign=-1.0))
    for i in range(8):
        fact(app, "alice", f"hobby_{i}", f"The user enjoys hobby {i}", unit(3 + i))
    fact(app, "bob", "account", "Bob's account number is ACC-7781", unit(0))
    fact(connect(app_url, tenant="globex"), "alice", "account", "ACC-7781 ACC-7781", unit(0))
    q = ("select subject, similarity, vector_rank, text_rank from agentmem.recall_facts(user_id => 'alice', "
         "query_embedding => %s, query_text => %s, k => %s, candidate_pool => 3, model => 'all-minilm')")
    assert "account" not in [r[0] for r in app.execute(q, (Q, None, 3)).fetchall()]
    rows = app.execute(q, (Q, "what is my account ACC-7781?", 3)).fetchall()
    assert [r[0] for r in rows][:2] == ["pet", "account"] or [r[0] for r in rows][:2] == ["account", "pet"]
    acc = next(r for r in rows if r[0] == "account")
    assert acc[1] is None and acc[2] is None and acc[3] == 1
    text_only = app.execute(q, (None, "ACC-7781", 10)).fetchall()
    assert [(r[0], r[1], r[3]) for r in text_only] == [("account", None, 1)]  # not bob's, not globex's


def _explain_as_app(admin, statement, params):
    # below the user's 2,000 rows, so that the vector branch goes through the shared HNSW index
    # (by default a user of up to 6,000 rows is scanned exactly)
    return plans_of(admin, statement, params, settings={"agentmem.exact_search_max_rows": "100"},
                    rows_on_citus=True)


def test_the_text_branch_reads_only_the_users_rows_and_the_vector_branch_still_uses_hnsw(admin, app):
    """Under forced row-level security the planner uses the GIN index for `@@` only if ts_match_vq is
    LEAKPROOF, which a superuser's install marks it (sql/16_text_search.sql). Without that mark the
    text branch reads the user's rows through (tenant_id, user_id), never the table."""
    n, mine = 20_000, 2_000
    vectors = clustered_vectors(n, DIM, seed=5)
    rows = [("acme", "alice")] * mine + [(f"big{i % 9}", "alice") for i in range(n - mine)]
    ids = bulk_load(admin, rows, vectors, model=MODEL)
    targets = [ids[i][2] for i in (17, 900, 1500)]
    others = [ids[i][2] for i in (5000, 15000)]
    admin.execute("update agentmem.messages set content = content || ' zebracorn INV-2291' "
                  "where message_id = any(%s)", (targets + others,))
    admin.execute("vacuum analyze agentmem.messages")  # as autovacuum would: the GIN pending list merged
    statement = ("select message_id, vector_rank, text_rank from agentmem.search_messages(user_id => 'alice', "
                 "query_embedding => %s, query_text => 'zebracorn INV-2291', k => 10, model => 'all-minilm')")
    assert admin.execute("select proleakproof from pg_proc where oid = 'ts_match_vq'::regproc").fetchone() == (True,)
    got_gin, plans = _explain_as_app(admin, statement, (vectors[3],))
    if plans is not None:  # None on Citus, where the plans are the workers' (helpers.plans_of)
        text_plans = [p for p in plans if "content_tsv @@" in p]
        assert text_plans and "Bitmap Index Scan on messages_content_tsv_idx" in text_plans[-1], text_plans
        knn = [p for p in plans if "Order By: ((embedding)::public.vector(384) OPERATOR(public.<=>)" in p]
        assert knn, "no plan of the vector branch ordered by the HNSW index:\n" + "\n---\n".join(plans)
        assert "Index Scan using message_embeddings_all_minilm_" in knn[0] and "_hnsw" in knn[0]

    admin.execute("alter function pg_catalog.ts_match_vq(tsvector, tsquery) not leakproof")  # this database only
    got, plans = _explain_as_app(admin, statement, (vectors[3],))
    assert got == got_gin
    assert len(got) == 10
    assert {r[0] for r in got if r[2] is not None} == set(targets)  # not the other tenants' copies
    if plans is not None:
        text_plans = [p for p in plans if "content_tsv @@" in p]
        assert text_plans, "no plan of the text branch:\n" + "\n---\n".join(plans)
        assert "Seq Scan" not in text_plans[-1]
        assert "Index Cond: ((tenant_id = 'acme'::text) AND (user_id = 'alice'::text))" in text_plans[-1], \
            text_plans[-1]


def test_the_dba_switches_the_text_search_configuration(admin, app, connect, app_url):
    populate(app)
    # english: stop words are not indexed, words are stemmed
    assert search(app, "the", embedding=None) == []
    assert len(search(app, "garden", embedding=None)) == 5
    assert sqlstate_of(app, "select agentmem.set_text_search_config(config => 'simple')") == "42501"
    assert admin.execute("select agentmem.set_text_search_config(config => 'simple')").fetchone() == (True,)
    assert admin.execute("select agentmem.set_text_search_config(config => 'pg_catalog.simple')").fetchone() == (False,)
    assert admin.execute("select config from agentmem.text_search_settings").fetchone() == ("pg_catalog.simple",)
    fresh = connect(app_url, tenant="acme")
    assert len(search(fresh, "the", embedding=None)) == 1   # 'the invoice ...'
    assert search(fresh, "garden", embedding=None) == []    # no stemming any more
    assert len(search(fresh, "gardening", embedding=None)) == 5
    # new rows get the new configuration too, and the index is back
    fresh.execute("select * from agentmem.store_message(conversation_id => (select conversation_id "
                  "from agentmem.search_messages(user_id => 'alice', query_text => 'gardening', k => 1)), "
                  "role => 'user', content => 'the end', embedding => %s, model => 'all-minilm')", (unit(9),))
    assert len(search(fresh, "the", embedding=None)) == 2
    assert admin.execute("select count(*) from pg_indexes where indexname in "
                         "('messages_content_tsv_idx', 'facts_fact_tsv_idx')").fetchone() == (2,)
    assert sqlstate_of(admin, "select agentmem.set_text_search_config(config => null)") == "AM020"


class FixedEmbedder:
    """Documents and queries on hand-picked axes: the query is e0, a document with 'INV' is at -e0."""

    model = "all-minilm"

    def embed_documents(self, texts):
        return [unit(0, sign=-1.0) if "INV" in t else unit(0, mix=1) if "puppy" in t else unit(5 + i % 50)
                for i, t in enumerate(texts)]

    def embed_query(self, text):
        return Q


def test_driver_recall_sends_the_text_by_default_and_hybrid_false_turns_it_off(app_url):
    with Memory.connect(app_url, tenant="acme", embedder=FixedEmbedder(), max_size=1) as mem:
        cid = mem.start_conversation("alice")
        for i in range(10):
            mem.remember(cid, "user", f"Alice: note {i} about the garden")
        mem.remember(cid, "user", MEANING)
        code = mem.remember(cid, "user", CODE).message_id
        hits = mem.recall("alice", "what about INV-2291?", k=3)
        assert code in {h.message_id for h in hits}
        h = next(h for h in hits if h.message_id == code)
        # a user of 12 messages: the vector branch's pool (100) holds them all, the code last (one
        # mean gap above the list's floor); the only one with the words, in each words list
        # 12 / sqrt(11) (a lone value among 12, standardised); and 0.1 of the fused scores of the two
        # turns before it (neighbour_weight: the meaning, vector rank 1 and no word; a garden note)
        assert h.text_rank == 1 and h.vector_rank == 12 and h.similarity == pytest.approx(-1.0)
        sims = np.array([0.0] * 10 + [1.25 ** -0.5, -1.0])
        vec = vector_part(sims)
        assert h.score == pytest.approx(2 * 12 / 11 ** 0.5 + vec[11] + 0.1 * (vec[10] + vec[9]), rel=1e-5)
        assert code not in {h.message_id for h in mem.recall("alice", "what about INV-2291?", k=3, hybrid=False)}
        assert [h.message_id for h in mem.search_messages("alice", query_text="INV-2291")] == [code]
        windows = mem.search_with_context("alice", query_text="INV-2291", k=1, radius=1)
        assert windows[0].window_score > 0 and any(w.is_hit and w.text_rank == 1 for w in windows)
        mem.upsert_fact("alice", "account", "The account is INV-2291", unit(0, sign=-1.0), model="all-minilm")
        mem.upsert_fact("alice", "pet", "A puppy", unit(0, mix=1), model="all-minilm")
        for i in range(6):
            mem.upsert_fact("alice", f"h{i}", f"hobby {i}", unit(10 + i), model="all-minilm")
        facts = mem.recall_facts_about("alice", "INV-2291", k=2)
        assert "account" in {f.subject for f in facts}
        assert "account" not in {f.subject for f in mem.recall_facts_about("alice", "INV-2291", k=2, hybrid=False)}
