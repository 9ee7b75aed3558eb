"""sql/30_answer_cache_guard.sql, 31_answer_cache.sql, 32_answer_cache_review.sql: the answer cache:
exact and guarded semantic lookup, scope, freshness, review of hits, bad input.

Vectors are crafted with numpy at a chosen angle (cosine known exactly) in the
384 dimensions of the registered model all-minilm, so thresholds are tested
deterministically.
"""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest
from helpers import count, plans_of, run_threads, sqlstate_of, unit

DIM = 384
MODEL = "all-minilm"


def at_cosine(cos: float, base: int = 0, other: int = 1) -> np.ndarray:
    """A unit vector with cosine `cos` to unit(base)."""
    return (cos * unit(base) + np.sqrt(1 - cos * cos) * unit(other)).astype(np.float32)


def vec_text(v) -> str:
    return "[" + ",".join(str(float(x)) for x in v) + "]"


def store(conn, question, vec, answer="An answer.", **kw):
    kw.setdefault("model", MODEL)
    names = ", ".join(f"{k} => %({k})s" for k in kw)
    return conn.execute(
        "select * from agentmem.cache_store(question => %(q)s, question_embedding => %(v)s, answer => %(a)s"
        + (", " + names if names else "") + ")",
        {"q": question, "v": vec, "a": answer, **kw},
    ).fetchone()


def lookup(conn, question, vec, **kw):
    kw.setdefault("model", MODEL)
    names = ", ".join(f"{k} => %({k})s" for k in kw)
    cur = conn.execute(
        "select * from agentmem.cache_lookup(question => %(q)s, question_embedding => %(v)s"
        + (", " + names if names else "") + ")",
        {"q": question, "v": vec, **kw},
    )
    cols = [d.name for d in cur.description]
    return dict(zip(cols, cur.fetchone()))


def count_entries(admin, tenant="acme") -> int:
    return admin.execute("select count(*) from agentmem.cache_entries where tenant_id = %s", (tenant,)).fetchone()[0]


# --- normalisation and features -------------------------------------------------------------

def test_normalize_question(app):
    norm = app.execute("select agentmem.normalize_question(question => %s)",
                       ("  What's   the PRICE, in $? 3.5%!",)).fetchone()[0]
    assert norm == "whats the price in $ 3 5 %"


@pytest.mark.parametrize("a, b", [
    ("Can I get a refund for two items?", "Can I get a refund for 2 items?"),
    ("Is it twenty-five dollars?", "Is it $25?"),
    ("I can't log in", "I cannot log in"),
    ("What is the 2nd step?", "What is the second step?"),
    ("Which one is better?", "Which is better?"),
    ("Is 1,000 enough?", "Is 1000 enough?"),
    ("Is it true or not?", "Is it true?"),
    # enumeration markers opening list items are not numbers
    ("Does it work in two steps: 1) download, 2) prepare?", "Does it work in two steps: download, then prepare?"),
    ("Which of (a) pandas or (b) arrow is faster?", "Which of pandas or arrow is faster?"),
    ("Steps:\n1. download\n2. prepare. Is that all?", "Steps: download, prepare. Is that all?"),
    # "both" restates a conjunction, it is not a quantity
    ("Does it support both CSV and JSON?", "Does it support CSV and JSON?"),
    ("Does it rain each time I wash the car?", "Does it rain every time I wash the car?"),
])
def test_guard_features_equal_for_the_same_meaning(app, a, b):
    fa, fb = app.execute("select agentmem.question_guard_features(question => %s), "
                         "agentmem.question_guard_features(question => %s)", (a, b)).fetchone()
    assert fa == fb, (fa, fb)


@pytest.mark.parametrize("a, b", [
    ("Can I get a refund?", "Can I get a refund after 30 days?"),
    ("Can I pay with two cards?", "Can I pay with three cards?"),
    ("Can I pay by card?", "Can I not pay by card?"),
    ("Does it work offline?", "Doesn't it work offline?"),
    ("Do all plans include support?", "Do some plans not include support?"),
    ("Do all plans include support?", "Do most plans include support?"),
    ("Is the fee $5?", "Is the fee 5%?"),
    ("Is it due in March?", "Is it due in April?"),
    ("Are we leaving not on Friday but on Saturday?", "Are we leaving not on Saturday but on Friday?"),
    ("Can I use it without an account?", "Can I use it with an account?"),
])
def test_guard_features_differ_for_number_negation_and_quantifier_flips(app, a, b):
    fa, fb = app.execute("select agentmem.question_guard_features(question => %s), "
                         "agentmem.question_guard_features(question => %s)", (a, b)).fetchone()
    assert fa != fb, (a, b, fa)
    agrees = app.execute("select agentmem.question_guard_agrees(question => %s, other_question => %s)",
                         (a, b)).fetchone()[0]
    assert agrees is False, (a, b)


def guard_agrees(app, a, b):
    return app.execute("select agentmem.question_guard_agrees(question => %s, other_question => %s), "
                       "agentmem.question_guard_agrees(question => %s, other_question => %s)",
                       (a, b, b, a)).fetchone()


@pytest.mark.parametrize("a, b", [
    # negation is compared as polarity; what is negated counts only for words both questions use
    ("Is the device argument not provided?", "Is the device argument not specified?"),
    ("Does the document not mention any alternative?", "Is no alternative mentioned in the document?"),
    ("Is there no fee?", "Is there not a fee?"),
    ("Does the page not exist in v2?", "Is the page not available in v2?"),
])
def test_guard_agrees_on_reworded_negations(app, a, b):
    assert guard_agrees(app, a, b) == (True, True)


@pytest.mark.parametrize("a, b", [
    ("Can I get a refund?", "Can I get a refund after 30 days?"),
    ("Can I pay by card?", "Can't I pay by card?"),
    ("Do all plans include support?", "Do not all plans include support?"),
    # the same words, negated in different places: the scope still counts
    ("Are we leaving not on Friday but on Saturday?", "Are we leaving on Friday, not on Saturday?"),
    ("Did they invite you and your brother but not me?", "Did they invite not you and your brother but me?"),
    # a second negation flips the polarity back (count parity)
    ("Are there spare blankets, not that I need any?", "Are there no spare blankets, not that I need any?"),
    ("Is there a fee?", "Is there no fee?"),
    ("Is there a fee?", "Is there a fee in the absence of a contract?"),
    ("Does it work in 2 steps: 1) download, 2) prepare?", "Does it work in 3 steps: 1) download, 2) prepare?"),
])
def test_guard_disagrees_on_flips_even_when_reworded(app, a, b):
    assert guard_agrees(app, a, b) == (False, False)


# --- exact and semantic lookup -------------------------------------------------------------

def test_exact_hit_on_normalised_text_and_the_two_argument_call(app, admin):
    row = store(app, "How do I reset my password?", unit(0), "Use the reset link.")
    assert row[0] is True and row[1] is not None
    hit = lookup(app, "how do I reset my password", unit(5))  # other vector: exact still hits
    assert hit["hit"] and hit["kind"] == "exact" and hit["similarity"] == 1.0
    assert hit["answer"] == "Use the reset link." and hit["entry_id"] == row[1]
    # the two-argument call uses the default model (nomic-embed-text, 768 dims)
    app.execute("select * from agentmem.cache_store(question => 'Q two', question_embedding => %s, "
                "answer => 'A two')", (np.ones(768, dtype=np.float32),))
    two = app.execute("select hit, kind from agentmem.cache_lookup('q two!', %s)",
                      (np.ones(768, dtype=np.float32),)).fetchone()
    assert two == (True, "exact")
    assert admin.execute("select model from agentmem.cache_entries where question = 'Q two'").fetchone() == (
        "nomic-embed-text",)
    # the setting agentmem.default_model, made on the calling session, names another default
    app.execute("set agentmem.default_model = 'all-minilm'")
    app.execute("select * from agentmem.cache_store(question => 'Q three', question_embedding => %s, "
                "answer => 'A three')", (unit(3),))
    assert admin.execute("select model from agentmem.cache_entries where question = 'Q three'").fetchone() == (
        MODEL,)
    assert app.execute("select hit, kind from agentmem.cache_lookup('q three', %s)", (unit(3),)).fetchone() == (
        True, "exact")


def test_semantic_hit_at_and_above_threshold_miss_below(app):
    store(app, "How do I reset my password?", unit(0))
    hit = lookup(app, "How can I change my password?", at_cosine(0.96))
    assert hit["hit"] and hit["kind"] == "semantic"
    assert hit["similarity"] == pytest.approx(0.96, abs=1e-4)
    assert hit["matched_question"] == "How do I reset my password?"
    miss = lookup(app, "How can I change my password?", at_cosine(0.94))
    assert not miss["hit"] and miss["kind"] is None and "below the threshold" in miss["reason"]
    # the howto intent has its own threshold row; status (0.97) is stricter
    assert not lookup(app, "How can I change my password?", at_cosine(0.96), intent="status")["hit"]


def test_refund_pair_and_flips_miss_while_a_paraphrase_hits(app):
    store(app, "Can I get a refund?", unit(0), "Yes, within the return window.")
    refund = lookup(app, "Can I get a refund after 30 days?", at_cosine(0.99))
    assert not refund["hit"] and refund["reason"].startswith("guard")
    assert refund["similarity"] == pytest.approx(0.99, abs=1e-4)
    store(app, "Can I pay with two cards?", unit(2))
    assert not lookup(app, "Can I pay with three cards?", at_cosine(0.99, 2, 3))["hit"]
    assert lookup(app, "Can I pay with 2 cards?", at_cosine(0.99, 2, 3))["hit"]
    store(app, "Does the plan include support?", unit(4))
    assert not lookup(app, "Doesn't the plan include support?", at_cosine(0.99, 4, 5))["hit"]
    assert not lookup(app, "Does the plan never include support?", at_cosine(0.99, 4, 5))["hit"]
    paraphrase = lookup(app, "Could I get my money back?", at_cosine(0.97))
    assert paraphrase["hit"] and paraphrase["kind"] == "semantic"
    store(app, "Is the device argument not provided?", unit(6))
    reworded = lookup(app, "Is the device argument not specified?", at_cosine(0.99, 6, 7))
    assert reworded["hit"] and reworded["kind"] == "semantic"
    assert not lookup(app, "Is the device argument provided?", at_cosine(0.99, 6, 7))["hit"]


def test_a_guard_rejected_neighbour_does_not_hide_a_matching_one(app):
    store(app, "Can I get a refund?", unit(0), "Generally yes.")
    store(app, "Can I get a refund after 30 days?", at_cosine(0.98), "Not after 30 days.")
    hit = lookup(app, "Could I get a refund after 30 days?", at_cosine(0.995))
    assert hit["hit"] and hit["answer"] == "Not after 30 days."


def test_high_stakes_intents_are_exact_only(app):
    store(app, "How do I cancel my contract?", unit(0), "Write to us.", intent="cancellation")
    assert lookup(app, "how do i cancel my contract", unit(0), intent="cancellation")["hit"]
    semantic = lookup(app, "How can I end my contract?", unit(0), intent="cancellation")
    assert not semantic["hit"] and "high-stakes" in semantic["reason"]
    # a high-stakes entry is not served semantically to a general question either
    assert not lookup(app, "How can I end my contract?", unit(0))["hit"]


def test_other_tenants_entry_never_serves_even_with_an_identical_vector(app, connect, app_url, admin):
    other = connect(app_url, tenant="globex")
    store(other, "What is the VPN address?", unit(0), "vpn.globex.example")
    for q in ("What is the VPN address?", "What's the VPN address"):
        assert not lookup(app, q, unit(0))["hit"]
    assert lookup(other, "What is the VPN address?", unit(0))["hit"]
    # and the app role cannot even name the table
    assert sqlstate_of(app, "select count(*) from agentmem.cache_entries") == "42501"
    assert count_entries(admin, "globex") == 1


@pytest.mark.parametrize("key", ["acl_hash", "prompt_version", "llm_model"])
def test_scope_mismatch_misses(app, key):
    store(app, "What is our travel policy?", unit(0), **{key: "v1"})
    assert lookup(app, "What is our travel policy?", unit(0), **{key: "v1"})["hit"]
    assert not lookup(app, "What is our travel policy?", unit(0), **{key: "v2"})["hit"]
    assert not lookup(app, "What is our travel policy?", unit(0))["hit"]


# --- freshness and invalidation ------------------------------------------------------------

def test_expired_entries_miss_and_a_hit_does_not_extend_life(app, admin):
    row = store(app, "What time is it in Paris?", unit(0))
    expires = row[3]
    assert lookup(app, "What time is it in Paris?", unit(0))["hit"]
    assert admin.execute("select expires_at from agentmem.cache_entries where entry_id = %s",
                         (row[1],)).fetchone()[0] == expires
    admin.execute("update agentmem.cache_entries set expires_at = now() - interval '1 second'")
    assert not lookup(app, "What time is it in Paris?", unit(0))["hit"]
    assert not lookup(app, "What time is it in Paris now?", at_cosine(0.99))["hit"]
    assert app.execute("select agentmem.sweep_cache()").fetchone()[0] == 1
    assert count_entries(admin) == 0


def test_ttl_comes_from_the_intent_or_the_override(app):
    gen = store(app, "General question?", unit(0))
    status = store(app, "Status question?", unit(1), intent="status")
    custom = store(app, "Custom question?", unit(2), ttl="90 seconds")
    now = app.execute("select now()").fetchone()[0]
    assert abs((gen[3] - now).total_seconds() - 7 * 86400) < 5
    assert abs((status[3] - now).total_seconds() - 3600) < 5
    assert abs((custom[3] - now).total_seconds() - 90) < 5


def test_corpus_bump_makes_old_answers_unservable_then_sweepable(app, admin):
    assert app.execute("select agentmem.corpus_version()").fetchone()[0] == 0
    store(app, "What does plan A cost?", unit(0), safe_to_share=True)
    assert lookup(app, "What does plan A cost?", unit(0))["hit"]
    assert app.execute("select agentmem.bump_corpus_version()").fetchone()[0] == 1
    assert app.execute("select agentmem.corpus_version()").fetchone()[0] == 1
    assert not lookup(app, "What does plan A cost?", unit(0))["hit"]
    store(app, "What does plan A cost?", unit(0), "New answer.")  # a new entry in the new version
    assert lookup(app, "What does plan A cost?", unit(0))["answer"] == "New answer."
    assert count_entries(admin) == 2
    assert app.execute("select agentmem.sweep_cache(batch_size => 10)").fetchone()[0] == 1
    assert count_entries(admin) == 1


def test_sweep_works_in_bounded_batches(app, admin):
    for i in range(5):
        store(app, f"Question number {i}?", unit(i), ttl="1 hour")
    admin.execute("update agentmem.cache_entries set expires_at = now() - interval '1 minute'")
    assert app.execute("select agentmem.sweep_cache(batch_size => 2)").fetchone()[0] == 2
    assert app.execute("select agentmem.sweep_cache(batch_size => 2)").fetchone()[0] == 2
    assert app.execute("select agentmem.sweep_cache(batch_size => 2)").fetchone()[0] == 1
    assert app.execute("select agentmem.sweep_cache(batch_size => 2)").fetchone()[0] == 0
    assert sqlstate_of(app, "select agentmem.sweep_cache(batch_size => 0)") == "AM020"


def test_invalidate_source_removes_every_answer_citing_it_and_nothing_else(app, admin, connect, app_url):
    a = store(app, "Question A?", unit(0), source_ids=["doc-1", "doc-2"])
    store(app, "Question B?", unit(1), source_ids=["doc-2"])
    c = store(app, "Question C?", unit(2), source_ids=["doc-3"])
    other = connect(app_url, tenant="globex")
    store(other, "Question A?", unit(0), source_ids=["doc-2"])
    assert app.execute("select agentmem.invalidate_source(doc_id => 'doc-2')").fetchone()[0] == 2
    assert not lookup(app, "Question A?", unit(0))["hit"]
    assert lookup(app, "Question C?", unit(2))["entry_id"] == c[1]
    assert count_entries(admin, "globex") == 1
    assert admin.execute("select count(*) from agentmem.cache_entry_sources where entry_id = %s",
                         (a[1],)).fetchone()[0] == 0
    # through the reverse index, not a scan: the plans of the function's own statements (the
    # entries citing the document are found by cache_entry_sources' key, then deleted by their own)
    rows, plans = plans_of(admin, "select agentmem.invalidate_source(doc_id => 'doc-3')")
    found = [p for p in plans if "from agentmem.cache_entry_sources" in p]
    delete = [p for p in plans if "Delete on cache_entries" in p]
    assert rows == [(1,)] and found and delete, "\n---\n".join(plans)
    assert "cache_entry_sources_pkey" in found[0], found[0]
    assert "Seq Scan" not in delete[0], delete[0]


def test_restore_replaces_the_answer_and_its_sources(app, admin):
    first = store(app, "Where is the office?", unit(0), "Old address.", source_ids=["doc-1"])
    second = store(app, "where is the office", unit(0), "New address.", source_ids=["doc-2"])
    assert first[1] == second[1] and count_entries(admin) == 1
    assert lookup(app, "Where is the office?", unit(0))["answer"] == "New address."
    assert app.execute("select agentmem.invalidate_source(doc_id => 'doc-1')").fetchone()[0] == 0
    assert app.execute("select agentmem.invalidate_source(doc_id => 'doc-2')").fetchone()[0] == 1


def test_concurrent_stores_of_the_same_question_leave_one_entry(app_url, connect, admin):
    conns = [connect(app_url, tenant="acme") for _ in range(6)]
    barrier = threading.Barrier(len(conns))
    errors: list[Exception] = []

    def work(conn, i):
        try:
            barrier.wait()
            for _ in range(5):
                store(conn, "What are the opening hours?", unit(0), f"Answer {i}.")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    run_threads(work, ((c, i) for i, c in enumerate(conns)))
    assert not errors, errors
    assert count_entries(admin) == 1


# --- personalisation ----------------------------------------------------------------------

@pytest.mark.parametrize("answer", [
    "Hi Maria, your order ships tomorrow.",
    "Your refund of $42.10 was sent.",
    "Your appointment is on March 3.",
    "It was renewed on 2024-05-01.",
])
def test_personalised_answers_are_refused_unless_safe_to_share(app, admin, answer):
    row = store(app, "When will my order arrive?", unit(0), answer)
    assert row[0] is False and row[1] is None and "personalised" in row[2]
    assert count_entries(admin) == 0
    row = store(app, "When will my order arrive?", unit(0), answer, safe_to_share=True)
    assert row[0] is True and count_entries(admin) == 1


def test_answer_repeating_the_questions_facts_is_not_personalised(app):
    row = store(app, "Is the Pro plan $20 a month?", unit(0), "Yes, the Pro plan is $20 a month.")
    assert row[0] is True, row


def test_personal_markers_capture_only_capitalised_words_of_two_letters_or_more(admin):
    """Why personal_markers has no exclusion list: its capture, an upper-case letter then lower-case
    ones, can never yield 'I', "I'm" or 'OK' (the clause `not in ('I', 'I''m', 'OK')` was dead)."""
    markers = "select agentmem_private.personal_markers(answer => %s, question => '')"
    assert admin.execute(markers, ("Yes, I think so and I'm sure it is OK now.",)).fetchone() == ([],)
    assert admin.execute(markers, ("Yes, then Maria said I'm OK.",)).fetchone() == (["Maria"],)


# --- bad input ------------------------------------------------------------------------------

BAD_STORES = [
    ({"question_embedding": "[1,2,3]"}, "AM010"),
    ({"question_embedding": "[" + ",".join(["NaN"] * DIM) + "]"}, "22000"),
    ({"question": ""}, "AM020"),
    ({"question": " ?! "}, "AM020"),
    ({"question": None}, "AM020"),
    ({"answer": ""}, "AM020"),
    ({"ttl": "-1 hour"}, "AM020"),
    ({"ttl": "0"}, "AM020"),
    ({"intent": "no-such-intent"}, "AM020"),
    ({"source_ids": ["doc-1", None]}, "AM020"),
    ({"source_ids": [""]}, "AM020"),
    ({"model": "no-such-model"}, "AM011"),
    ({"acl_hash": "x" * 201}, "AM020"),
    ({"acl_hash": None}, "AM020"),
]


@pytest.mark.parametrize("override, code", BAD_STORES)
def test_bad_store_input_raises_and_stores_nothing(app, admin, override, code):
    args = {"question": "A question?", "question_embedding": vec_text(unit(0)), "answer": "An answer.",
            "model": MODEL, "source_ids": ["doc-1"]}
    args.update(override)
    casts = {"question_embedding": "::vector", "ttl": "::interval"}
    names = ", ".join(f"{k} => %({k})s{casts.get(k, '')}" for k in args)
    assert sqlstate_of(app, f"select * from agentmem.cache_store({names})", args) == code
    assert count_entries(admin) == 0
    assert admin.execute("select count(*) from agentmem.cache_entry_sources").fetchone()[0] == 0


@pytest.mark.parametrize("override, code", [
    ({"question_embedding": "[1,2,3]"}, "AM010"),
    ({"question": ""}, "AM020"),
    ({"intent": "nope"}, "AM020"),
])
def test_bad_lookup_input_raises_and_logs_nothing(app, admin, override, code):
    args = {"question": "A question?", "question_embedding": vec_text(unit(0)), "model": MODEL}
    args.update(override)
    names = ", ".join(f"{k} => %({k})s" + ("::vector" if k == "question_embedding" else "") for k in args)
    assert sqlstate_of(app, f"select * from agentmem.cache_lookup({names})", args) == code
    assert admin.execute("select count(*) from agentmem.cache_hits").fetchone()[0] == 0


def test_no_tenant_raises_am001(connect, app_url):
    conn = connect(app_url)
    assert sqlstate_of(conn, "select * from agentmem.cache_lookup('q', %s, model => 'all-minilm')",
                       (unit(0),)) == "AM001"


def test_a_one_megabyte_question_is_stored_and_found(app, admin):
    big = "How do I configure the widget " + "with many options " * 60000 + "?"
    assert len(big) > 1_000_000
    row = store(app, big, unit(0))
    assert row[0] is True
    hit = lookup(app, big, unit(0))
    assert hit["hit"] and hit["kind"] == "exact"
    too_big = "x" * (4 * 1024 * 1024 + 1)
    assert sqlstate_of(app, "select * from agentmem.cache_store(question => %s, question_embedding => %s, "
                       "answer => 'a', model => 'all-minilm')", (too_big, unit(0))) == "AM021"
    assert count_entries(admin) == 1


# --- hit log, review and report -------------------------------------------------------------

def test_every_lookup_is_logged_and_reviews_feed_the_report(app, admin):
    store(app, "How do I reset my password?", unit(0))
    exact = lookup(app, "How do I reset my password?", unit(0), user_id="u1")
    semantic = lookup(app, "How can I change my password?", at_cosine(0.96))
    near = lookup(app, "How can I alter my password?", at_cosine(0.90))
    miss = lookup(app, "Totally other question?", at_cosine(0.10))
    log = {r[0]: r[1:] for r in admin.execute(
        "select hit_id, kind, round(similarity::numeric, 2)::float8, guard_passed, matched_question, user_id "
        "from agentmem.cache_hits").fetchall()}
    assert log[exact["hit_id"]][0] == "exact" and log[exact["hit_id"]][4] == "u1"
    assert log[semantic["hit_id"]][:3] == ("semantic", pytest.approx(0.96), True)
    assert log[near["hit_id"]][:3] == ("miss", pytest.approx(0.90), True)
    assert log[miss["hit_id"]][0] == "miss"
    sample = app.execute("select hit_id, answer from agentmem.sample_hits(n => 10)").fetchall()
    assert {r[0] for r in sample} == {exact["hit_id"], semantic["hit_id"], near["hit_id"]}
    app.execute("select agentmem.review_hit(hit_id => %s, correct => true)", (exact["hit_id"],))
    app.execute("select agentmem.review_hit(hit_id => %s, correct => true)", (semantic["hit_id"],))
    app.execute("select agentmem.review_hit(hit_id => %s, correct => false)", (near["hit_id"],))
    report = {round(r[0], 2): r[1:] for r in app.execute(
        "select * from agentmem.cache_report(cost_uncached => 0.02, cost_wrong => 5)").fetchall()}
    assert len(report) == 15
    # at 0.95: 4 queries, 2 hits (exact + semantic), both reviewed right
    q, hits, reviewed, wrong, hpk, wpk, net, withdrawn = report[0.95]
    assert (q, hits, reviewed, wrong, withdrawn) == (4, 2, 2, 0, 0)  # a wrong near miss withdraws nothing
    assert float(hpk) == 500 and float(wpk) == 0 and float(net) == pytest.approx(500 * 0.02)
    # at 0.90 the near miss would have been served, and it was wrong
    q, hits, reviewed, wrong, hpk, wpk, net, withdrawn = report[0.9]
    assert (hits, reviewed, wrong) == (3, 3, 1)
    assert float(hpk) == 750 and float(wpk) == 250
    assert float(net) == pytest.approx((750 - 250) * 0.02 - 250 * 5)
    assert sqlstate_of(app, "select agentmem.review_hit(hit_id => gen_random_uuid(), correct => true)") == "AM030"
    assert sqlstate_of(app, "select * from agentmem.cache_report(cost_uncached => -1, cost_wrong => 5)") == "AM020"


def test_hit_log_survives_the_entry(app, admin):
    store(app, "Question A?", unit(0), source_ids=["doc-1"])
    hit = lookup(app, "Question A?", unit(0))
    app.execute("select agentmem.invalidate_source(doc_id => 'doc-1')")
    row = admin.execute("select entry_id, matched_question, tenant_id from agentmem.cache_hits where hit_id = %s",
                        (hit["hit_id"],)).fetchone()
    assert row == (None, "Question A?", "acme")


def test_review_of_another_tenants_hit_is_not_found(app, connect, app_url):
    other = connect(app_url, tenant="globex")
    store(other, "Question A?", unit(0))
    hit = lookup(other, "Question A?", unit(0))
    assert sqlstate_of(app, "select agentmem.review_hit(hit_id => %s, correct => false)",
                       (hit["hit_id"],)) == "AM030"


def test_app_role_may_neither_read_nor_edit_intents(app, admin):
    assert admin.execute("select count(*) from agentmem.cache_intents where high_stakes").fetchone()[0] == 4
    assert sqlstate_of(app, "select count(*) from agentmem.cache_intents") == "42501"
    assert sqlstate_of(app, "update agentmem.cache_intents set threshold = 0.5") == "42501"
    admin.execute("insert into agentmem.cache_intents (intent, threshold, ttl) values ('loose', 0.9, '1 day')")
    store(app, "How do I reset my password?", unit(0), intent="loose")
    assert lookup(app, "How can I change my password?", at_cosine(0.91), intent="loose")["hit"]


def test_lookup_uses_the_hnsw_index(app, admin):
    for i in range(20):
        store(app, f"Question {i} about widgets?", at_cosine(0.5 + i / 50, 0, 1 + i))
    # the plans of cache_lookup's own statements, on the session that calls it; 20 rows are scanned exactly
    # unless agentmem.exact_search_max_rows is below that, and then the planner still prefers a scan, so
    # scans are discouraged there to show the statement can use the model's HNSW index
    rows, plans = plans_of(admin, "select hit from agentmem.cache_lookup(question => 'Something else entirely?', "
                           "question_embedding => %s, model => 'all-minilm')", (unit(0),),
                           settings={"enable_seqscan": "off", "agentmem.exact_search_max_rows": "10"})
    knn = [p for p in plans if "<=>" in p and "Order By" in p]
    assert rows == [(False,)]  # nearest at cosine 0.88: below the threshold
    assert knn and "cache_entries_all_minilm" in knn[0] and "hnsw" in knn[0], "\n---\n".join(plans)


def test_cache_store_without_an_embedding_argument_queues_it(app, admin):
    """Issue 31, defect 14: question_embedding defaults to NULL (and answer, after it, is declared with
    a default so that it may be): leaving the vector out stores the entry and queues it; leaving the
    answer out is AM020, as a NULL one."""
    stored, entry, _, _ = app.execute("select * from agentmem.cache_store(question => 'what is the refund window', "
                                      "answer => 'Thirty days.', model => 'all-minilm')").fetchone()
    assert stored
    assert count(admin, "cache_entries", "entry_id = %s and answer = 'Thirty days.'", (entry,)) == 1
    assert count(admin, "embedding_jobs", "entry_id = %s", (entry,)) == 1
    assert sqlstate_of(app, "select * from agentmem.cache_store(question => 'another question')") == "AM020"


# --- the lookup's cost at scale (issue 38) ----------------------------------------------------

def test_a_small_key_is_scanned_by_static_statements_and_a_large_one_by_vector_search(app, admin):
    """cache_nearest: a key of at most agentmem.exact_search_max_rows entries goes through exact_scan
    (counted to one past the limit), a larger one through vector_search; both serve the same hit, and
    neither serves an expired, withdrawn or too-long entry."""
    for i in range(6):
        store(app, f"How do I rotate API key number {i}?", at_cosine(0.5 + 0.05 * i, other=2 + i), answer=f"answer {i}.")
    near = store(app, "How do I rotate an API key?", unit(0), answer="open the settings.")[1]
    store(app, "Which API key do I rotate first?", at_cosine(0.999, other=20), answer="too long.",
          ttl="1 second")  # expires before the lookups
    admin.execute("update agentmem.cache_entries set expires_at = now() - interval '1 minute' "
                  "where answer = 'too long.'")
    q = at_cosine(0.99, other=30)
    calls = ("select pg_stat_get_xact_function_calls('agentmem_private.exact_scan'::regproc), "
             "pg_stat_get_xact_function_calls('agentmem_private.vector_search'::regproc)")
    seen = {}
    for limit in ("100", "3"):  # 8 entries: under the limit, then over it
        with admin.transaction():  # (track_functions: a superuser's setting)
            admin.execute("set local track_functions = 'all'")
            admin.execute("select agentmem.set_tenant(tenant_id => 'acme', local => true)")
            admin.execute("select set_config('agentmem.exact_search_max_rows', %s, true)", (limit,))
            got = lookup(admin, "Please, how do I rotate an API key?", q)
            seen[limit] = admin.execute(calls).fetchone()
        assert (got["hit"], got["kind"], got["entry_id"]) == (True, "semantic", near), limit
    assert seen["100"] == (1, None)   # counted and scanned in exact_scan's statements only
    assert seen["3"][1] == 1          # counted past the limit, then vector_search (which counts on)
    # withdrawn: neither path serves it
    admin.execute("update agentmem.cache_entries set withdrawn_at = now() where entry_id = %s", (near,))
    for limit in ("100", "3"):
        with app.transaction():
            app.execute("select set_config('agentmem.exact_search_max_rows', %s, true)", (limit,))
            got = lookup(app, "Please, how do I rotate an API key?", q)
        assert got["entry_id"] is None and got["matched_question"] != "Which API key do I rotate first?", limit


def test_a_key_is_counted_and_scanned_through_its_live_entries(admin, app):
    """cache_entries_live_scope_idx (migration 0024) holds the entries with a vector that are not withdrawn,
    expiry its last column: a key's count is its entries in service, read from the index alone, and its
    scan takes "unexpired" as a range of the index instead of testing each entry's row."""
    ids = [store(app, f"Question {i} about invoices?", at_cosine(0.3 + i / 100, other=i + 1))[1] for i in range(20)]
    for i in range(150):  # the tenant's other keys: what a B-tree on the tenant alone would read too
        store(app, f"Question {i} about refunds?", at_cosine(0.3, other=i + 1), acl_hash=f"team-{i % 3}")
    admin.execute("update agentmem.cache_entries set withdrawn_at = now() where entry_id = %s", (ids[0],))
    admin.execute("update agentmem.cache_entries set expires_at = now() - interval '1 second' where entry_id = %s",
                  (ids[1],))
    admin.execute("vacuum (analyze) agentmem.cache_entries")
    candidates, found, _ = admin.execute(
        "select * from agentmem_private.exact_scan(query_embedding => %s, table_name => 'cache_entries', "
        "tenant_id => 'acme', model => 'all-minilm', user_id => null, k => 30, count_limit => 100, scan_max => 100, "
        "acl_hash => '', prompt_version => '', llm_model => '', corpus_version => 0, question_max_bytes => 16384)",
        (unit(0),)).fetchone()
    assert candidates == 18  # neither the withdrawn entry nor the expired one is counted
    assert sorted(found) == sorted(ids[2:])
    # 170 rows: a scan of the table's few pages would do, as a big key's would not
    _, plans = plans_of(admin, "select hit from agentmem.cache_lookup(question => 'Something else?', "
                        "question_embedding => %s, model => 'all-minilm')", (unit(0),),
                        settings={"enable_seqscan": "off", "enable_bitmapscan": "off"})
    text = "\n---\n".join(plans)
    counted = [p for p in plans if "count(*)" in p and "cache_entries" in p]
    scanned = [p for p in plans if "<=>" in p and "Index Scan using cache_entries_live_scope_idx" in p]
    # (the heap is read only for pages not yet all-visible: the vacuum in a busy test database may leave some)
    assert counted and "Index Only Scan using cache_entries_live_scope_idx" in counted[0], text
    assert scanned, text
    assert re.search(r"Index Cond: \(.*expires_at > now\(\)", scanned[0]), scanned[0]
    filters = re.findall(r"Filter: .*", scanned[0])
    assert not [f for f in filters if "withdrawn_at" in f or "expires_at" in f], scanned[0]  # no test of each row


def test_a_lookup_does_not_lock_the_entry_it_logs(app, admin, connect, app_url):
    """The hit log has no foreign key to the entries any more (migration 0021): a lookup's transaction
    holds no lock on the entry's row, so deleting it never waits for lookups; the functions that delete
    entries clear the hits' entry_id themselves."""
    entry = store(app, "How do I rotate an API key?", unit(0), source_ids=["doc-1"])[1]
    other = connect(app_url, tenant="acme")
    with other.transaction():
        got = lookup(other, "How do I rotate an API key?", unit(0))
        assert got["kind"] == "exact"
        with admin.transaction():
            admin.execute("set local lock_timeout = '2s'")
            admin.execute("select 1 from agentmem.cache_entries where tenant_id = 'acme' and entry_id = %s for update",
                          (entry,))
    assert admin.execute("select count(*) from pg_constraint where conname = 'cache_hits_entry_fk'").fetchone() == (0,)
    assert app.execute("select agentmem.invalidate_source(doc_id => 'doc-1')").fetchone() == (1,)
    assert admin.execute("select count(*), count(entry_id) from agentmem.cache_hits").fetchone() == (1, 0)


def test_dropping_a_model_unlinks_the_hits_of_its_entries(app, admin):
    """drop_model_vectors deletes the model's cache entries; their hits keep their questions and lose the
    entry (what the dropped foreign key's ON DELETE SET NULL did)."""
    admin.execute("select agentmem.register_model(model => 'tiny-cache', dimension => 8)")
    v = np.zeros(8, dtype=np.float32)
    v[0] = 1
    store(app, "How do I rotate an API key?", v, model="tiny-cache")
    assert lookup(app, "How do I rotate an API key?", v, model="tiny-cache")["kind"] == "exact"
    admin.execute("select * from agentmem.drop_model_vectors(model => 'tiny-cache', tenant_id => 'acme')")
    assert admin.execute("select count(*), count(entry_id), min(question_asked) from agentmem.cache_hits"
                         ).fetchone() == (1, 0, "How do I rotate an API key?")


# --- the guard's reading stored with each entry (migration 0022) -----------------------------

GUARD_QUESTIONS = [
    "Can I get a refund after 30 days?",
    "Which one is not available on Friday, or not?",
    "How do I pay twenty five dollars before March 3rd?",
    "1) list every item; 2) don't skip the 3.5% fee",
    "x" * 16385,                                    # over the guard's 16 kB: stamped, not read
]


def stored_guard(admin, question):
    return admin.execute("select guard_version, guard_tokens, guard_features from agentmem.cache_entries "
                         "where tenant_id = 'acme' and question = %s", (question,)).fetchone()


def test_cache_store_stores_the_guards_reading_equal_to_a_fresh_one(app, admin):
    version = admin.execute("select agentmem_private.guard_version()").fetchone()[0]
    assert len(version) == 32
    for i, q in enumerate(GUARD_QUESTIONS):
        assert store(app, q, at_cosine(0.5, base=i, other=i + 10))[0] is True
        fresh = admin.execute(
            "select agentmem_private.guard_tokens(%(q)s), agentmem_private.guard_features("
            "agentmem_private.guard_tokens(%(q)s))", {"q": q}).fetchone()
        got = stored_guard(admin, q)
        if len(q) > 16384:
            assert got == (version, None, None)
        else:
            assert got == (version, fresh[0], fresh[1])
            assert got[2] == app.execute("select agentmem.question_guard_features(question => %s)", (q,)).fetchone()[0]
    # storing the key again with another wording of the question reads the new one
    store(app, "Can I get a REFUND after 30 days??", at_cosine(0.5))
    assert stored_guard(admin, "Can I get a REFUND after 30 days??")[1][:4] == ["can", "i", "get", "a"]


def test_the_lookup_reads_the_stored_reading_and_works_out_a_stale_one_again(app, admin):
    q = "Can I get a refund after 30 days?"
    store(app, q, unit(0))
    # a current stamp: the lookup trusts the stored reading (here falsified to other numbers: a guard miss)
    admin.execute("update agentmem.cache_entries set guard_features = '{num:99,time:after}' where question = %s", (q,))
    r = lookup(app, "Could I get a refund after 30 days?", at_cosine(0.99))
    assert (r["hit"], r["reason"]) == (False, "guard: the questions differ in numbers, dates, amounts, negation or quantifiers")
    # a stale stamp (an older guard's word lists) or none (stored before 0022): read again, stored, and a hit
    for stale in ("an older guard", None):
        admin.execute("update agentmem.cache_entries set guard_version = %s, guard_features = '{num:99}', "
                      "guard_tokens = '{x}' where question = %s", (stale, q))
        r = lookup(app, "Could I get a refund after 30 days?", at_cosine(0.99))
        assert (r["hit"], r["kind"]) == (True, "semantic")
        version, tokens, features = stored_guard(admin, q)
        assert version == admin.execute("select agentmem_private.guard_version()").fetchone()[0]
        assert features == ["num:30", "time:after"] and tokens[-2:] == ["30", "days"]
    # the DBA's way over many entries: only stale ones are rewritten
    admin.execute("update agentmem.cache_entries set guard_version = null where question = %s", (q,))
    ids = [r[0] for r in admin.execute("select entry_id from agentmem.cache_entries where tenant_id = 'acme'")]
    assert admin.execute("select agentmem_private.refresh_cache_guards('acme', %s)", (ids,)).fetchone()[0] == 1
    assert admin.execute("select agentmem_private.refresh_cache_guards('acme', %s)", (ids,)).fetchone()[0] == 0
    assert stored_guard(admin, q)[2] == ["num:30", "time:after"]


def test_export_leaves_the_guards_reading_out_and_import_works_it_out_again(app, admin):
    import json
    q = "Is the fee not 3.5% before March?"
    store(app, q, unit(0), user_id="u1")
    lines = [r[0] for r in app.execute("select line from agentmem.export_user(user_id => 'u1')")]
    entry_lines = [json.loads(x) for x in lines if json.loads(x)["type"] == "cache_entry"]
    assert len(entry_lines) == 1 and not [k for k in entry_lines[0] if k.startswith("guard_")]
    expected = stored_guard(admin, q)
    app.execute("select * from agentmem.forget_user(user_id => 'u1')")
    assert count_entries(admin) == 0
    # a file that brings its own reading (forged to pass the guard) is not believed
    forged = [json.dumps({**json.loads(x), "guard_version": expected[0], "guard_features": [], "guard_tokens": []})
              if json.loads(x)["type"] == "cache_entry" else x for x in lines]
    app.execute("select agentmem.import_user(lines => %s::text[])", (forged,))
    assert stored_guard(admin, q) == expected
    assert expected[2] == app.execute("select agentmem.question_guard_features(question => %s)", (q,)).fetchone()[0]
    assert "neg" in expected[2] and "num:3.5" in expected[2]
