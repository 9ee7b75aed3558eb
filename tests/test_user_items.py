"""A user's memory item by item: listings with keyset pages, single-item deletion and correction, a wrong
cached answer withdrawn."""

from __future__ import annotations

import datetime as dt
import threading

import psycopg
import pytest

from helpers import count, sqlstate_of, unit, upsert, vec
from test_forget import populate, rows_about, snapshot, store


def lookup(conn, q, user=None, like=None):
    """cache_lookup of q, embedded as `like` (the same vector: a paraphrase the guard lets through)."""
    return conn.execute("select hit, kind, entry_id, hit_id from agentmem.cache_lookup(question => %s, "
                        "question_embedding => %s, user_id => %s)", (q, vec(like or q), user)).fetchone()


def cache(conn, q, answer, **kw):
    extra = "".join(f", {k} => %s" for k in kw)
    return conn.execute("select entry_id from agentmem.cache_store(question => %s, question_embedding => %s, "
                        f"answer => %s, safe_to_share => true{extra})", (q, vec(q), answer, *kw.values())).fetchone()[0]


# -- a wrong cached answer stops ---------------------------------------------------------------

def test_a_wrong_verdict_withdraws_the_entry_from_exact_and_semantic_lookups(app, admin):
    q = "how do I reset my password"
    entry = cache(app, q, "Use the reset link.")
    hit = lookup(app, q)
    assert hit[0] and hit[1] == "exact"
    near = lookup(app, "how can I reset my password", like=q)
    assert near[0] and near[1] == "semantic" and near[2] == entry
    app.execute("select agentmem.review_hit(hit_id => %s, correct => true)", (near[3],))
    assert lookup(app, q)[0]
    app.execute("select agentmem.review_hit(hit_id => %s, correct => false)", (hit[3],))
    assert lookup(app, q)[0] is False and lookup(app, "how can I reset my password", like=q)[0] is False
    # kept for the report, and counted there
    assert count(admin, "cache_entries", "entry_id = %s and withdrawn_at is not null", (entry,)) == 1
    report = app.execute("select withdrawn, reviewed_wrong from agentmem.cache_report(cost_uncached => 1, "
                         "cost_wrong => 5) where threshold between 0.949 and 0.951").fetchone()
    assert report == (1, 1)
    # the verdict changed: back in service
    app.execute("select agentmem.review_hit(hit_id => %s, correct => true)", (hit[3],))
    assert lookup(app, q)[0]
    # a new answer stored under the same key serves again
    app.execute("select agentmem.review_hit(hit_id => %s, correct => false)", (hit[3],))
    assert lookup(app, q)[0] is False
    assert cache(app, q, "Use the reset link on the login page.") == entry
    assert lookup(app, q)[0]


def test_a_wrong_verdict_on_a_miss_withdraws_nothing(app, admin):
    cache(app, "how do I reset my password", "Use the reset link.")
    miss = lookup(app, "how do I delete my account forever")
    assert not miss[0]
    app.execute("select agentmem.review_hit(hit_id => %s, correct => false)", (miss[3],))
    assert count(admin, "cache_entries", "withdrawn_at is not null") == 0


# -- listings ----------------------------------------------------------------------------------

def test_list_conversations_pages_newest_first_and_is_stable_under_writes(app, connect, app_url):
    convs = []
    for i in range(7):
        c = app.execute("select agentmem.start_conversation(user_id => 'u1', title => %s)", (f"chat {i}",)).fetchone()[0]
        convs.append(c)
    store(app, convs[0], "user", "hello there")
    store(app, convs[0], "assistant", "hi")
    app.execute("select agentmem.set_summary(conversation_id => %s, summary => 'greetings', through_index => 1)",
                (convs[0],))
    connect(app_url, tenant="globex").execute("select agentmem.start_conversation(user_id => 'u1')")
    app.execute("select agentmem.start_conversation(user_id => 'u2')")

    page = app.execute("select * from agentmem.list_conversations(user_id => 'u1', page_size => 3)").fetchall()
    assert [r[1] for r in page] == ["chat 6", "chat 5", "chat 4"]
    # a conversation started between pages never shifts the next page
    app.execute("select agentmem.start_conversation(user_id => 'u1', title => 'late')")
    seen = [r[0] for r in page]
    after = page[-1][-1]
    while True:
        page = app.execute("select * from agentmem.list_conversations(user_id => 'u1', after => %s, page_size => 3)",
                           (after,)).fetchall()
        if not page:
            break
        seen += [r[0] for r in page]
        after = page[-1][-1]
    assert seen == convs[::-1]
    first = app.execute("select message_count, first_message_at <= last_message_at, summary, summary_through "
                        "from agentmem.list_conversations(user_id => 'u1') where conversation_id = %s",
                        (convs[0],)).fetchone()
    assert first == (2, True, "greetings", 1)
    assert app.execute("select count(*) from agentmem.list_conversations(user_id => 'nobody')").fetchone() == (0,)
    assert sqlstate_of(app, "select * from agentmem.list_conversations(user_id => 'u1', after => 'x')") == "AM020"
    assert sqlstate_of(app, "select * from agentmem.list_conversations(user_id => 'u1', page_size => 0)") == "AM020"
    assert sqlstate_of(app, "select * from agentmem.list_conversations(user_id => ' ')") == "AM020"


def test_list_facts_current_and_superseded_with_pages(app):
    upsert(app, "u1", "home_city", "The user lives in Lyon")
    upsert(app, "u1", "home_city", "The user moved to Berlin quickly")
    upsert(app, "u1", "diet", "The user is vegetarian")
    upsert(app, "u2", "diet", "The other user eats fish")
    current = app.execute("select subject, fact, status from agentmem.list_facts(user_id => 'u1')").fetchall()
    assert current == [("diet", "The user is vegetarian", "current"),
                       ("home_city", "The user moved to Berlin quickly", "current")]
    every = app.execute("select subject, fact, status, valid_to is null from agentmem.list_facts(user_id => 'u1', "
                        "include_superseded => true)").fetchall()
    assert every == [("diet", "The user is vegetarian", "current", True),
                     ("home_city", "The user moved to Berlin quickly", "current", True),
                     ("home_city", "The user lives in Lyon", "replaced", False)]
    # one row per page, the same rows
    rows, after = [], None
    while True:
        page = app.execute("select fact, cursor from agentmem.list_facts(user_id => 'u1', include_superseded => true, "
                           "after => %s, page_size => 1)", (after,)).fetchall()
        if not page:
            break
        rows.append(page[0][0])
        after = page[0][1]
    assert rows == [r[1] for r in every]
    # a cursor of one kind of listing is refused by the other
    assert sqlstate_of(app, "select * from agentmem.list_facts(user_id => 'u1', after => %s)", (after,)) == "AM020"


# -- one item --------------------------------------------------------------------------------

def test_delete_message_leaves_no_trace_and_everything_else_intact(app, admin, connect, app_url):
    mine = populate(app, "u1", "zorkmid")
    populate(app, "u2", "quuxly")
    populate(connect(app_url, tenant="globex"), "u1", "blorpy")
    conv = mine["conversations"][0]
    target = store(app, conv, "user", "frobozz secret plan")
    app.execute("select agentmem.record_retrieval(message_id => %s, doc_ids => %s)", (target, ["docs/a.md"]))
    upsert(app, "u1", "secret", "frobozz is the plan", [target])   # only source: goes
    upsert(app, "u1", "home_city", "zorkmid moved to Berlin quickly", [mine["messages"][1], target])  # keeps m1
    cache(app, "what is the frobozz plan", "see the cited message", source_ids=[str(target)], user_id="u1")
    lookup(app, "what is the frobozz plan", "u1")
    cache(app, "frobozz secret plan", "an answer to the message itself", user_id="u1", conversation_id=conv)
    app.execute("select agentmem.embedding_cache_store(model => 'nomic-embed-text', texts => %s, embeddings => %s)",
                (["frobozz secret plan"], [vec("frobozz secret plan")]))
    app.execute("select agentmem.set_summary(conversation_id => %s, summary => 'summary with frobozz', "
                "through_index => 3)", (conv,))
    before = snapshot(admin)

    receipt = app.execute("select kind, rows_affected, actor from agentmem.delete_message(message_id => %s)",
                          (target,)).fetchone()
    assert receipt[0] == "delete_message"
    removed = receipt[1]
    assert removed["messages"] == 1 and removed["message_embeddings"] == 1 and removed["retrievals"] == 1
    assert removed["cache_entries"] == 2 and removed["facts"] == 1 and removed["facts_unlinked"] == 1
    assert removed["summaries"] == 1 and removed["embedding_cache"] >= 1
    assert rows_about(admin, "acme", "nobody", "frobozz", [vec("frobozz secret plan")]) == {}
    assert count(admin, "access_log") == 1
    logged = admin.execute("select a::text from agentmem.access_log a").fetchone()[0]
    assert "frobozz" not in logged and str(target) not in logged and "u1" not in logged.replace("acme", "")
    # the other messages keep their indexes; the next one gets the next index (a gap where it was)
    idx = [r[0] for r in admin.execute("select message_index from agentmem.messages where conversation_id = %s "
                                       "order by 1", (conv,))]
    assert idx == [0, 1, 2]
    assert store(app, conv, "user", "after the deletion") and admin.execute(
        "select max(message_index) from agentmem.messages where conversation_id = %s", (conv,)).fetchone() == (4,)
    # everything else is as it was (rows that do not mention the message)
    after = snapshot(admin)
    for table, rows in before.items():
        # use_log: the uses of the cached answers that went with the message go too (erasure);
        # term_stats / term_totals: counts derived from the messages (their accuracy is tests/test_bm25.py's)
        if table in ("conversations", "facts", "cache_hits", "embedding_cache", "use_log", "term_stats", "term_totals"):
            continue
        for r in rows:
            if "frobozz" not in r and str(target) not in r:
                assert r in after[table], (table, r)
    assert len(after["messages"]) == len(before["messages"])  # one gone, one added
    assert len(after["embedding_cache"]) == len(before["embedding_cache"]) - 1  # the message's text
    assert sqlstate_of(app, "select agentmem.delete_message(message_id => %s)", (target,)) == "AM030"


def test_delete_and_update_fact(app, admin):
    m = store(app, app.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0], "user", "veg")
    fid = upsert(app, "u1", "diet", "Alice is vegetarian", [m])[0]
    app.execute("select agentmem.embedding_cache_store(model => 'nomic-embed-text', texts => %s, embeddings => %s)",
                (["search_document: Alice is vegetarian"], [vec("Alice is vegetarian")]))
    receipt = app.execute("select kind, rows_affected from agentmem.update_fact(fact_id => %s, "
                          "fact => 'Alice is not vegetarian', embedding => %s)",
                          (fid, vec("Alice eats meat"))).fetchone()
    assert receipt[0] == "update_fact" and receipt[1]["fact_history"] == 1 and receipt[1]["embedding_cache"] == 1
    rows = app.execute("select fact, status, source_message_ids from agentmem.list_facts(user_id => 'u1', "
                       "include_superseded => true)").fetchall()
    assert rows == [("Alice is not vegetarian", "current", []), ("Alice is vegetarian", "corrected", [m])]
    # the old embedding is gone: only the new vector is stored
    assert count(admin, "facts", "embedding <=> %s < 1e-6", (vec("Alice is vegetarian"),)) == 0
    assert sqlstate_of(app, "select agentmem.update_fact(fact_id => %s, fact => ' ', embedding => %s)",
                       (fid, vec("x"))) == "AM020"
    assert sqlstate_of(app, "select agentmem.update_fact(fact_id => %s, fact => %s, embedding => %s)",
                       (fid, "x" * 4001, vec("x"))) == "AM021"
    assert sqlstate_of(app, "select agentmem.update_fact(fact_id => %s, fact => 'x', embedding => %s)",
                       (fid, vec("x", 5))) == "AM010"
    assert sqlstate_of(app, "select agentmem.update_fact(fact_id => gen_random_uuid(), fact => 'x', "
                       "embedding => %s)", (vec("x"),)) == "AM030"
    receipt = app.execute("select rows_affected from agentmem.delete_fact(fact_id => %s)", (fid,)).fetchone()[0]
    assert receipt == {"facts": 1, "fact_history": 1, "embedding_cache": 0}
    assert rows_about(admin, "acme", "nobody", "vegetarian", [vec("Alice eats meat")]) == {}
    assert count(admin, "messages") == 1
    assert sqlstate_of(app, "select agentmem.delete_fact(fact_id => %s)", (fid,)) == "AM030"
    assert [r[0] for r in admin.execute("select kind from agentmem.access_log order by logged_at")] == [
        "update_fact", "delete_fact"]


def test_another_tenants_items_are_not_found_nor_listed(app, connect, app_url, admin):
    other = connect(app_url, tenant="globex")
    populate(other, "u1", "blorpy")
    msg = admin.execute("select message_id from agentmem.messages limit 1").fetchone()[0]
    fact = admin.execute("select fact_id from agentmem.facts limit 1").fetchone()[0]
    assert sqlstate_of(app, "select agentmem.delete_message(message_id => %s)", (msg,)) == "AM030"
    assert sqlstate_of(app, "select agentmem.delete_fact(fact_id => %s)", (fact,)) == "AM030"
    assert sqlstate_of(app, "select agentmem.update_fact(fact_id => %s, fact => 'x', embedding => %s)",
                       (fact, vec("x"))) == "AM030"
    assert app.execute("select count(*) from agentmem.list_conversations(user_id => 'u1')").fetchone() == (0,)
    assert app.execute("select count(*) from agentmem.list_facts(user_id => 'u1', include_superseded => true)"
                       ).fetchone() == (0,)
    assert count(admin, "access_log") == 0


def test_delete_message_waits_for_a_write_of_the_user_in_flight(app_url, connect, admin):
    a = connect(app_url, tenant="acme")
    conv = a.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    m0 = store(a, conv, "user", "first")
    writer = connect(app_url, tenant="acme")
    writer.execute("begin")
    store(writer, conv, "user", "in flight")   # holds the user's lock shared until commit
    done = threading.Event()

    def delete():
        connect(app_url, tenant="acme").execute("select agentmem.delete_message(message_id => %s)", (m0,))
        done.set()

    t = threading.Thread(target=delete)
    t.start()
    assert not done.wait(0.5)
    writer.execute("commit")
    t.join(30)
    assert done.is_set()
    assert [r[0] for r in admin.execute("select content from agentmem.messages")] == ["in flight"]


# -- isolation probes on the new functions ---------------------------------------------------------

NEW_CALLS = [
    "select * from agentmem.list_conversations(user_id => 'u1')",
    "select * from agentmem.list_facts(user_id => 'u1', include_superseded => true)",
    "select agentmem.delete_message(message_id => gen_random_uuid())",
    "select agentmem.delete_fact(fact_id => gen_random_uuid())",
    "select * from agentmem.export_user(user_id => 'u1')",
    "select agentmem.import_user(lines => array['{}'])",
    "select * from agentmem.memory_status(user_id => 'u1')",
    "select agentmem.require_user_item(user_id => 'u1', message_id => gen_random_uuid())",
]


def test_without_a_tenant_every_new_call_is_refused(connect, app_url, admin):
    conn = connect(app_url)
    for query in NEW_CALLS:
        assert sqlstate_of(conn, query) == "AM001", query
    assert count(admin, "access_log") == 0


def test_hostile_cursors_and_ids_reach_nothing(app, connect, app_url, admin):
    other = connect(app_url, tenant="globex")
    populate(other, "u1", "blorpy")
    populate(app, "u2", "quuxly")
    theirs = other.execute("select cursor from agentmem.list_conversations(user_id => 'u1')").fetchall()
    # another tenant's cursor only positions a listing of this tenant: it shows nothing of theirs
    rows = app.execute("select title from agentmem.list_conversations(user_id => 'u1', after => %s)",
                       (theirs[0][0],)).fetchall()
    assert rows == []
    for bad in ["' or 1=1 --", "1.2.3", "99999999999999999999.00000000-0000-0000-0000-000000000000",
                "1." + "0" * 36, "-1.ffffffff-ffff-ffff-ffff-ffffffffffff.x", "\x00"[:0] + "1.2"]:
        assert sqlstate_of(app, "select * from agentmem.list_conversations(user_id => 'u2', after => %s)",
                           (bad,)) == "AM020", bad
        assert sqlstate_of(app, "select * from agentmem.list_facts(user_id => 'u2', include_superseded => true, "
                           "after => %s)", (bad,)) == "AM020", bad
    for uid in ["", " ", "u" * 300, None]:
        assert sqlstate_of(app, "select * from agentmem.list_facts(user_id => %s)", (uid,)) == "AM020"
        assert sqlstate_of(app, "select * from agentmem.export_user(user_id => %s)", (uid,)) == "AM020"
    before = snapshot(admin)
    their_msgs = [r[0] for r in admin.execute("select message_id from agentmem.messages where tenant_id = 'globex'")]
    for m in their_msgs:
        assert sqlstate_of(app, "select agentmem.delete_message(message_id => %s)", (m,)) == "AM030"
    assert snapshot(admin) == before


def test_a_malformed_id_is_am020_naming_the_argument_and_changes_nothing(app, admin):
    """Issue 31, defect 4: delete_message, delete_fact and update_fact read their id with uuid_arg, as
    every other id argument: a malformed id (as psql or an untyped driver parameter sends it) is AM020
    naming the argument, not a bare 22P02; a uuid and its text still work."""
    populate(app, "u1", "zorkmid")
    before = snapshot(admin)
    calls = {
        "message_id": "select agentmem.delete_message(message_id => %s)",
        "fact_id": "select agentmem.delete_fact(fact_id => %s)",
    }
    for bad in ["not-a-uuid", "", "1234", "' or 1=1 --"]:
        for argument, query in calls.items():
            with pytest.raises(psycopg.Error) as info:
                app.execute(query, (bad,))
            assert info.value.sqlstate == "AM020" and argument in info.value.diag.message_primary, (query, bad)
            app.rollback()
        with pytest.raises(psycopg.Error) as info:
            app.execute("select agentmem.update_fact(fact_id => %s, fact => 'x', embedding => %s)", (bad, vec("x")))
        assert info.value.sqlstate == "AM020" and "fact_id" in info.value.diag.message_primary
        app.rollback()
    # an untyped literal, as typed in psql
    assert sqlstate_of(app, "select agentmem.delete_message(message_id => 'nope')") == "AM020"
    assert sqlstate_of(app, "select agentmem.delete_fact(fact_id => 'nope')") == "AM020"
    assert snapshot(admin) == before
    # the text form of a real id works
    fact_id = upsert(app, "u1", "diet", "The user is vegetarian")[0]
    app.execute("select agentmem.update_fact(fact_id => %s, fact => 'The user eats fish', embedding => %s)",
                (str(fact_id), vec("The user eats fish")))
    app.execute("select agentmem.delete_fact(fact_id => %s)", (str(fact_id),))
    message_id = app.execute("select message_id from agentmem.list_conversations(user_id => 'u1') as c, "
                             "agentmem.recent_messages(conversation_id => c.conversation_id, n => 1) "
                             "limit 1").fetchone()[0]
    app.execute("select agentmem.delete_message(message_id => %s)", (str(message_id),))
    assert count(admin, "facts", "fact_id = %s", (fact_id,)) == 0
    assert count(admin, "messages", "message_id = %s", (message_id,)) == 0


def test_list_facts_valid_from_and_to_mean_when_the_fact_was_true(app):
    """Issue 31, defect 7: list_facts' valid_from/valid_to are the fact's time in the world, the same
    values recall_facts and fact_history give; when each version was written and superseded is
    recorded_at/replaced_at (as in fact_history)."""
    lyon = upsert(app, "u1", "home_city", "The user lives in Lyon",
                  valid_from=dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc))[0]
    upsert(app, "u1", "home_city", "The user moved to Berlin quickly",
           valid_from=dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc))
    listed = app.execute("select status, fact, valid_from, valid_to, recorded_at, replaced_at "
                         "from agentmem.list_facts(user_id => 'u1', include_superseded => true)").fetchall()
    current, old = listed
    assert current[0] == "current" and old[0] == "replaced"
    recalled = app.execute("select valid_from, valid_to, updated_at from agentmem.recall_facts(user_id => 'u1', "
                           "query_embedding => %s, k => 1)", (vec("The user moved to Berlin quickly"),)).fetchone()
    assert current[2:4] == recalled[:2] == (dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc), None)
    assert current[4] == recalled[2] and current[5] is None
    history = app.execute("select valid_from, valid_to, recorded_at, replaced_at "
                          "from agentmem.fact_history(fact_id => %s)", (lyon,)).fetchall()
    assert [tuple(old[2:])] == history
    assert old[2] == dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
    assert old[3] == dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc)  # true until Berlin, not when replaced
    assert old[5] > old[3]  # replaced now, years after it stopped being true


# -- the tenant as a whole: users, a conversation's messages, receipts, the overview -------------

def test_list_users_pages_every_user_with_a_conversation_or_a_fact_in_id_order(app, connect, app_url):
    for user in ("carol", "alice", "bob"):
        cid = app.execute("select agentmem.start_conversation(user_id => %s)", (user,)).fetchone()[0]
        store(app, cid, "user", f"hello from {user}")
        store(app, cid, "assistant", "hi")
    upsert(app, "alice", "city", "Alice lives in Lyon")
    upsert(app, "dave", "city", "Dave lives in Oslo")          # facts only (an import, say)
    connect(app_url, tenant="globex").execute("select agentmem.start_conversation(user_id => 'eve')")
    rows = app.execute("select user_id, conversations, messages, facts, last_message_at is not null, cursor "
                       "from agentmem.list_users(page_size => 2)").fetchall()
    assert rows == [("alice", 1, 2, 1, True, "alice"), ("bob", 1, 2, 0, True, "bob")]
    app.execute("select agentmem.start_conversation(user_id => 'aaron')")  # before the cursor: not on later pages
    rest = app.execute("select user_id, conversations, messages, facts, last_message_at from "
                       "agentmem.list_users(after => 'bob', page_size => 2)").fetchall()
    assert rest == [("carol", 1, 2, 0, rest[0][4]), ("dave", 0, 0, 1, None)]
    assert app.execute("select * from agentmem.list_users(after => 'dave')").fetchall() == []
    assert [r[0] for r in app.execute("select user_id from agentmem.list_users()").fetchall()] == \
        ["aaron", "alice", "bob", "carol", "dave"]
    assert connect(app_url, tenant="empty").execute("select count(*) from agentmem.list_users()").fetchone() == (0,)
    assert sqlstate_of(app, "select * from agentmem.list_users(page_size => 0)") == "AM020"
    assert sqlstate_of(app, "select * from agentmem.list_users(page_size => 1001)") == "AM020"
    assert sqlstate_of(app, "select * from agentmem.list_users(after => ' ')") == "AM020"


def test_list_messages_pages_a_conversation_in_order_saying_which_are_embedded(app, connect, app_url):
    cid = app.execute("select agentmem.start_conversation(user_id => 'alice')").fetchone()[0]
    ids = [store(app, cid, "user", f"message {i}") for i in range(5)]
    unembedded = app.execute("select message_id from agentmem.store_message(conversation_id => %s, role => 'user', "
                             "content => 'no vector yet', embedding => null)", (cid,)).fetchone()[0]
    app.execute("select agentmem.delete_message(message_id => %s)", (ids[1],))
    page = app.execute("select message_index, content, user_id, embedded_models, occurred_at is not null "
                       "from agentmem.list_messages(conversation_id => %s, page_size => 3)", (cid,)).fetchall()
    assert [r[0] for r in page] == [0, 2, 3]            # the deleted one leaves a gap, never a shift
    assert page[0][1:] == ("message 0", "alice", ["nomic-embed-text"], True)
    rest = app.execute("select message_index, content, embedded_models from agentmem.list_messages("
                       "conversation_id => %s, after => 3, page_size => 3)", (cid,)).fetchall()
    assert [r[0] for r in rest] == [4, 5] and rest[1][1:] == ("no vector yet", [])
    assert unembedded
    assert sqlstate_of(app, "select * from agentmem.list_messages(conversation_id => %s, page_size => 0)",
                       (cid,)) == "AM020"
    assert sqlstate_of(app, "select * from agentmem.list_messages(conversation_id => %s, after => -1)",
                       (cid,)) == "AM020"
    assert sqlstate_of(app, "select * from agentmem.list_messages(conversation_id => 'nope')") == "AM020"
    other = connect(app_url, tenant="globex")
    assert sqlstate_of(other, "select * from agentmem.list_messages(conversation_id => %s)", (cid,)) == "AM030"


def test_list_access_log_pages_receipts_and_erasures_newest_first(app, connect, app_url):
    cid = app.execute("select agentmem.start_conversation(user_id => 'alice')").fetchone()[0]
    mid = store(app, cid, "user", "hello")
    app.execute("select agentmem.delete_message(message_id => %s)", (mid,))
    app.execute("select count(*) from agentmem.export_user(user_id => 'alice')")
    app.execute("select agentmem.forget_user(user_id => 'alice')")
    connect(app_url, tenant="globex").execute("select agentmem.forget_user(user_id => 'x')")
    page = app.execute("select kind, actor, rows_affected, cursor from agentmem.list_access_log(page_size => 2)"
                       ).fetchall()
    assert [r[0] for r in page] == ["forget_user", "export_user"]
    assert page[0][1] is None and page[1][1] == "agentmem_test_app"
    rest = app.execute("select kind, rows_affected from agentmem.list_access_log(after => %s)",
                       (page[-1][3],)).fetchall()
    assert [r[0] for r in rest] == ["delete_message"] and rest[0][1]["messages"] == 1
    assert sqlstate_of(app, "select * from agentmem.list_access_log(after => 'x')") == "AM020"
    assert sqlstate_of(app, "select * from agentmem.list_access_log(page_size => 0)") == "AM020"


def test_tenant_overview_counts_the_current_tenant_only(app, connect, app_url):
    empty = app.execute("select users, conversations, messages, facts, cache_entries, cache_lookups, default_model, "
                        "corpus_version, embedding_pending, embedding_failed, embedding_oldest "
                        "from agentmem.tenant_overview()").fetchone()
    assert empty == (0, 0, 0, 0, 0, 0, "nomic-embed-text", 0, 0, 0, None)
    for user in ("alice", "bob"):
        cid = app.execute("select agentmem.start_conversation(user_id => %s)", (user,)).fetchone()[0]
        store(app, cid, "user", "hello")
    app.execute("select agentmem.store_message(conversation_id => %s, role => 'user', content => 'later', "
                "embedding => null)", (cid,))
    upsert(app, "carol", "city", "Carol lives in Rome")
    connect(app_url, tenant="globex").execute("select agentmem.start_conversation(user_id => 'eve')")
    row = app.execute("select tenant_id, users, conversations, messages, facts, embedding_pending, "
                      "embedding_oldest is not null from agentmem.tenant_overview()").fetchone()
    assert row == ("acme", 3, 2, 3, 1, 1, True)


def test_list_cache_entries_pages_newest_first_with_sources_ttl_version_and_verdicts(app, connect, app_url):
    def store(q, answer, vector, **kw):
        extra = "".join(f", {k} => %s" for k in kw)
        return app.execute("select entry_id from agentmem.cache_store(question => %s, question_embedding => %s, "
                           f"answer => %s, model => 'all-minilm', safe_to_share => true{extra})",
                           (q, vector, answer, *kw.values())).fetchone()[0]
    first = store("what is the refund window", "30 days", unit(1), source_ids=["doc-1", "doc-2"])
    second = store("how do I reset my password", "Use the link.", unit(2))
    hit = app.execute("select hit_id from agentmem.cache_lookup(question => 'how do I reset my password', "
                      "question_embedding => %s, model => 'all-minilm')", (unit(2),)).fetchone()[0]
    app.execute("select agentmem.review_hit(hit_id => %s, correct => false)", (hit,))
    app.execute("select agentmem.bump_corpus_version()")
    third = store("where is my invoice", "In the billing page.", unit(3))
    connect(app_url, tenant="globex").execute(
        "select agentmem.cache_store(question => 'q', question_embedding => %s, answer => 'a', model => 'all-minilm', "
        "safe_to_share => true)", (unit(4),))
    page = app.execute("select entry_id, question, source_ids, corpus_version, current_corpus, expires_at > "
                       "created_at, withdrawn_at is not null, lookups, reviewed_wrong, cursor "
                       "from agentmem.list_cache_entries(page_size => 2)").fetchall()
    assert [r[0] for r in page] == [third, second]
    assert page[0][3:9] == (1, True, True, False, 0, 0)
    assert page[1][3:9] == (0, False, True, True, 1, 1)
    rest = app.execute("select entry_id, source_ids, answer from agentmem.list_cache_entries(after => %s)",
                       (page[-1][-1],)).fetchall()
    assert rest == [(first, ["doc-1", "doc-2"], "30 days")]
    assert sqlstate_of(app, "select * from agentmem.list_cache_entries(after => 'x')") == "AM020"
    assert sqlstate_of(app, "select * from agentmem.list_cache_entries(page_size => 1001)") == "AM020"



def test_memory_status_counts_one_user_and_tells_no_memory_from_some(app, admin, connect, app_url):
    empty = app.execute("select * from agentmem.memory_status(user_id => 'u1')").fetchone()
    assert empty[0] == "acme" and empty[1:7] == (0, 0, 0, 0, 0, None)
    cid = app.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    for text in ("one", "two"):
        app.execute("select agentmem.store_message(conversation_id => %s, role => 'user', content => %s, "
                    "embedding => null)", (cid, text))
    upsert(app, "u1", "city", "lives in Porto")
    other = app.execute("select agentmem.start_conversation(user_id => 'u2')").fetchone()[0]
    app.execute("select agentmem.store_message(conversation_id => %s, role => 'user', content => 'x', "
                "embedding => null)", (other,))
    connect(app_url, tenant="globex").execute("select agentmem.start_conversation(user_id => 'u1')")
    row = app.execute("select conversations, messages, facts, embeddings_pending, embeddings_failed, "
                      "oldest_pending is not null, first_message_at <= last_message_at "
                      "from agentmem.memory_status(user_id => 'u1')").fetchone()
    assert row == (1, 2, 1, 2, 0, True, True)
    assert sqlstate_of(app, "select * from agentmem.memory_status(user_id => ' ')") == "AM020"


def test_require_user_item_admits_the_user_s_own_items_only(app, connect, app_url):
    cid = app.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    mid = app.execute("select message_id from agentmem.store_message(conversation_id => %s, role => 'user', "
                      "content => 'mine', embedding => null)", (cid,)).fetchone()[0]
    fid = upsert(app, "u1", "city", "lives in Porto")[0]
    ok = "select agentmem.require_user_item(user_id => %s, conversation_id => %s, message_id => %s, fact_id => %s)"
    for args in ((cid, None, None), (None, mid, None), (None, None, fid), (str(cid), None, None)):
        assert app.execute(ok, ("u1", *args)).fetchone() == (True,)
    # another user's, another tenant's, a missing one: all AM030, alike
    for user, conn in (("u2", app), ("u1", connect(app_url, tenant="globex"))):
        for args in ((cid, None, None), (None, mid, None), (None, None, fid)):
            assert sqlstate_of(conn, ok, (user, *args)) == "AM030", (user, args)
    assert sqlstate_of(app, ok, ("u1", None, None, None)) == "AM020"          # none
    assert sqlstate_of(app, ok, ("u1", cid, mid, None)) == "AM020"            # two
    assert sqlstate_of(app, ok, ("u1", "not-a-uuid", None, None)) == "AM020"  # not a UUID
    assert sqlstate_of(app, ok, ("", cid, None, None)) == "AM020"             # no user
