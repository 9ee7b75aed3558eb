"""Lifecycle (sql/06_use.sql, sql/18_use_boost.sql, sql/59_lifecycle.sql, sql/63_retention_preview.sql):
use recorded by every search and lookup without a write on the rows read (an append-only log folded by
a job), pins, forgetting by inactivity and budget with its dry run, the bounded use boost, and
consolidation that supersedes with its undo; what they change in retention, erasure and export."""

from __future__ import annotations

import json
import threading

from helpers import count, sqlstate_of, start_conversation, store_message, upsert, vec


def fold(admin) -> int:
    return admin.execute("select agentmem.apply_use_log()").fetchone()[0]


def uses(admin, table: str, key: str, ids) -> dict:
    """{id: (use_count, last_used_at is not null)} of some rows of a table."""
    rows = admin.execute(f"select {key}, use_count, last_used_at is not null from agentmem.{table} "
                         f"where {key} = any(%s)", (list(ids),)).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def search(conn, user, text, k=2, **kw) -> list:
    extra = "".join(f", {name} => %s" for name in kw)
    return [r[0] for r in conn.execute(
        "select message_id from agentmem.search_messages(user_id => %s, query_embedding => %s, k => %s, "
        f"model => 'all-minilm'{extra})", (user, vec(text, 384), k, *kw.values()))]


def chat(conn, user="alice", n=4, prefix="lark"):
    conv = start_conversation(conn, user)
    ids = [store_message(conn, conv, f"{prefix} {i} {user}")[0] for i in range(n)]
    return conv, ids


def recall(conn, user, text, k=1) -> list:
    return [r[0] for r in conn.execute(
        "select fact_id from agentmem.recall_facts(user_id => %s, query_embedding => %s, k => %s)",
        (user, vec(text), k))]


def lookup(conn, q, like=None, user=None):
    return conn.execute("select hit, entry_id from agentmem.cache_lookup(question => %s, question_embedding => %s, "
                        "user_id => %s)", (q, vec(like or q), user)).fetchone()


def cache(conn, q, answer):
    return conn.execute("select entry_id from agentmem.cache_store(question => %s, question_embedding => %s, "
                        "answer => %s, safe_to_share => true)", (q, vec(q), answer)).fetchone()[0]


# -- use recorded ------------------------------------------------------------------------------

def test_every_message_a_search_returns_is_used_once_folded_and_no_other(app, admin):
    _, ids = chat(app)
    found = search(app, "alice", "lark 1 alice", k=2)
    assert len(found) == 2
    # nothing written on the rows the search read: the uses wait in the log
    assert uses(admin, "messages", "message_id", ids) == {i: (0, False) for i in ids}
    assert count(admin, "use_log", "kind = 'message'") == 2
    assert fold(admin) == 2 and count(admin, "use_log") == 0
    got = uses(admin, "messages", "message_id", ids)
    assert {i for i, u in got.items() if u == (1, True)} == set(found)
    assert {i for i, u in got.items() if u == (0, False)} == set(ids) - set(found)
    # again, with the recency weight (the other path) and by words: counts add up
    assert len(search(app, "alice", "lark 1 alice", k=2, recency_half_life="30 days")) == 2
    words = [r[0] for r in app.execute("select message_id from agentmem.search_messages(user_id => 'alice', "
                                       "query_text => 'lark', k => 1)")]
    assert fold(admin) == 3
    got = uses(admin, "messages", "message_id", ids)
    assert sum(u[0] for u in got.values()) == 5 and got[words[0]][0] >= 1


def test_search_with_context_records_its_hits(app, admin):
    _, ids = chat(app, n=5)
    hits = [r[0] for r in app.execute(
        "select message_id from agentmem.search_with_context(user_id => 'alice', query_embedding => %s, k => 1, "
        "radius => 2, model => 'all-minilm') where is_hit", (vec("lark 2 alice", 384),))]
    assert len(hits) == 1
    fold(admin)
    assert {i for i, u in uses(admin, "messages", "message_id", ids).items() if u[0]} == set(hits)


def test_recall_facts_and_cache_hits_are_used_and_a_miss_is_not(app, admin):
    upsert(app, "alice", "diet", "Alice is vegetarian")
    upsert(app, "alice", "home", "Alice lives in Lyon")
    got = recall(app, "alice", "Alice is vegetarian")
    q = "how do I reset my password"
    entry = cache(app, q, "Use the reset link.")
    assert lookup(app, q) == (True, entry)                                      # exact
    assert lookup(app, "how can I reset my password", like=q, user="alice") == (True, entry)   # semantic
    assert lookup(app, "what is the weather")[0] is False                       # a miss uses nothing
    assert fold(admin) == 3
    facts = admin.execute("select fact_id, use_count from agentmem.facts order by use_count desc").fetchall()
    assert facts[0] == (got[0], 1) and facts[1][1] == 0
    assert uses(admin, "cache_entries", "entry_id", [entry]) == {entry: (2, True)}


def test_a_read_only_transaction_searches_and_records_nothing(app, admin):
    chat(app)
    app.execute("begin read only")
    assert len(search(app, "alice", "lark 1 alice")) == 2
    assert len(recall(app, "alice", "anything")) == 0
    app.execute("commit")
    assert count(admin, "use_log") == 0


def test_last_used_at_is_the_latest_use_and_uses_of_deleted_items_are_dropped(app, admin):
    _, ids = chat(app, n=2)
    search(app, "alice", "lark 0 alice", k=2)
    admin.execute("update agentmem.use_log set used_at = now() - interval '3 days'")
    search(app, "alice", "lark 0 alice", k=1)
    admin.execute("delete from agentmem.messages where message_id = %s", (ids[1],))  # as retention would
    assert fold(admin) == 3
    row = admin.execute("select use_count, now() - last_used_at < interval '1 hour' from agentmem.messages "
                        "where message_id = %s", (ids[0],)).fetchone()
    assert row == (2, True) and count(admin, "use_log") == 0


def test_the_fold_runs_once_at_a_time_and_in_every_retention_run(app, admin, connect, admin_url):
    chat(app)
    search(app, "alice", "lark 1 alice")
    other = connect(admin_url)
    other.execute("begin")
    other.execute("select agentmem.apply_use_log()")
    assert fold(admin) == 0          # the first run holds the lock: this one returns at once
    other.execute("rollback")
    run = admin.execute("select rows_removed from agentmem.apply_retention()").fetchone()[0]
    assert run["use_log"] == 2 and count(admin, "use_log") == 0
    assert admin.execute("select sum(use_count) from agentmem.messages").fetchone()[0] == 2


def test_apply_use_log_checks_its_batch_and_is_the_dbas(app, admin):
    assert sqlstate_of(admin, "select agentmem.apply_use_log(batch_size => 0)") == "AM020"
    assert sqlstate_of(app, "select agentmem.apply_use_log()") == "42501"
    chat(app)
    search(app, "alice", "lark 1 alice", k=2)
    assert admin.execute("select agentmem.apply_use_log(batch_size => 1)").fetchone()[0] == 1
    assert count(admin, "use_log") == 1 and fold(admin) == 1


def test_uses_of_one_tenant_fold_into_its_own_rows_only(app, admin, connect, app_url):
    _, mine = chat(app)
    other = connect(app_url, tenant="globex")
    _, theirs = chat(other)
    search(other, "alice", "lark 1 alice", k=4)
    fold(admin)
    assert all(u == (0, False) for u in uses(admin, "messages", "message_id", mine).values())
    assert all(u[0] == 1 for u in uses(admin, "messages", "message_id", theirs).values())


def test_erasure_removes_uses_not_yet_folded(app, admin):
    conv, ids = chat(app)
    _, bob = chat(app, user="bob")
    fid = upsert(app, "alice", "diet", "Alice is vegetarian")[0]
    search(app, "alice", "lark 1 alice", k=4)
    search(app, "bob", "lark 1 bob", k=4)
    recall(app, "alice", "Alice is vegetarian")
    app.execute("select agentmem.delete_fact(fact_id => %s)", (fid,))
    assert count(admin, "use_log", "kind = 'fact'") == 0
    app.execute("select agentmem.delete_message(message_id => %s)", (ids[0],))
    assert count(admin, "use_log", "item_id = %s", (ids[0],)) == 0
    receipt = app.execute("select rows_removed from agentmem.forget_conversation(conversation_id => %s)",
                          (conv,)).fetchone()[0]
    assert receipt["use_log"] == 3 and count(admin, "use_log", "user_id = 'alice'") == 0
    search(app, "bob", "lark 1 bob", k=4)
    receipt = app.execute("select rows_removed from agentmem.forget_user(user_id => 'bob')").fetchone()[0]
    assert receipt["use_log"] == 8 and count(admin, "use_log") == 0
    assert count(admin, "messages", "message_id = any(%s)", (bob,)) == 0


def lifecycle_state(admin) -> dict:
    """Use and pins of every message, fact and conversation."""
    return {
        "messages": admin.execute("select message_id, use_count, last_used_at, pinned_at from agentmem.messages "
                                  "order by 1").fetchall(),
        "facts": admin.execute("select fact_id, use_count, last_used_at, pinned_at from agentmem.facts "
                               "order by 1").fetchall(),
        "conversations": admin.execute("select conversation_id, pinned_at from agentmem.conversations "
                                       "order by 1").fetchall(),
    }


def test_use_and_pins_survive_export_and_import(app, admin):
    conv, ids = chat(app)
    fid = upsert(app, "alice", "diet", "Alice is vegetarian")[0]
    search(app, "alice", "lark 1 alice", k=1)
    recall(app, "alice", "Alice is vegetarian")
    fold(admin)
    app.execute("select agentmem.pin(kind => 'conversation', id => %s)", (conv,))
    app.execute("select agentmem.pin(kind => 'fact', id => %s)", (fid,))
    app.execute("select agentmem.pin(kind => 'message', id => %s)", (ids[3],))
    before = lifecycle_state(admin)
    lines = [r[0] for r in app.execute("select line from agentmem.export_user(user_id => 'alice')")]
    message = next(json.loads(line) for line in lines if json.loads(line)["type"] == "message")
    assert {"use_count", "last_used_at", "pinned_at"} <= set(message)
    app.execute("select agentmem.forget_user(user_id => 'alice')")
    app.execute("select * from agentmem.import_user(lines => %s)", (lines,))
    after = lifecycle_state(admin)
    assert after == before
    assert sum(r[1] for r in after["messages"]) == 1 and after["facts"][0][1] == 1


# -- pins ----------------------------------------------------------------------------------------

def test_pin_and_unpin_each_kind(app, admin):
    conv, ids = chat(app, n=1)
    fid = upsert(app, "alice", "diet", "Alice is vegetarian")[0]
    for kind, item, table, key in (("message", ids[0], "messages", "message_id"),
                                   ("conversation", conv, "conversations", "conversation_id"),
                                   ("fact", str(fid), "facts", "fact_id")):
        first = app.execute("select agentmem.pin(kind => %s, id => %s)", (kind, item)).fetchone()[0]
        assert first is not None
        again = app.execute("select agentmem.pin(kind => %s, id => %s)", (kind, item)).fetchone()[0]
        assert again == first        # the first time is kept
        assert count(admin, table, f"{key} = %s and pinned_at is not null", (item,)) == 1
        assert app.execute("select agentmem.unpin(kind => %s, id => %s)", (kind, item)).fetchone()[0] is True
        assert app.execute("select agentmem.unpin(kind => %s, id => %s)", (kind, item)).fetchone()[0] is False
        assert count(admin, table, f"{key} = %s and pinned_at is null", (item,)) == 1


def test_pin_errors(app, connect, app_url):
    conv, _ = chat(app, n=1)
    assert sqlstate_of(app, "select agentmem.pin(kind => 'summary', id => %s)", (conv,)) == "AM020"
    assert sqlstate_of(app, "select agentmem.unpin(kind => null, id => %s)", (conv,)) == "AM020"
    assert sqlstate_of(app, "select agentmem.pin(kind => 'message', id => 'not a uuid')") == "AM020"
    assert sqlstate_of(app, "select agentmem.pin(kind => 'message', id => %s)", (conv,)) == "AM030"
    other = connect(app_url, tenant="globex")
    assert sqlstate_of(other, "select agentmem.pin(kind => 'conversation', id => %s)", (conv,)) == "AM030"
    assert sqlstate_of(other, "select agentmem.unpin(kind => 'conversation', id => %s)", (conv,)) == "AM030"


def age_everything(admin, days=10):
    admin.execute("update agentmem.messages set created_at = now() - %s * interval '1 day'", (days,))
    admin.execute("update agentmem.facts set updated_at = now() - %s * interval '1 day'", (days,))


def test_pinned_items_survive_retention_and_unpinned_ones_go(app, admin, connect, app_url):
    kept_conv, kept_msgs = chat(app, n=2, prefix="kept")
    _, loose = chat(app, n=3, prefix="loose")
    f_pinned = upsert(app, "alice", "diet", "Alice is vegetarian")[0]
    f_loose = upsert(app, "alice", "home", "Alice lives in Lyon")[0]
    app.execute("select agentmem.pin(kind => 'conversation', id => %s)", (kept_conv,))
    app.execute("select agentmem.pin(kind => 'message', id => %s)", (loose[0],))
    app.execute("select agentmem.pin(kind => 'fact', id => %s)", (f_pinned,))
    # the same rows in a tenant under the installation default: pins hold there too
    other = connect(app_url, tenant="globex")
    _, theirs = chat(other, n=2)
    other.execute("select agentmem.pin(kind => 'message', id => %s)", (theirs[0],))
    age_everything(admin)
    app.execute("select agentmem.set_retention_policy(kind => 'messages', max_age => '1 day')")
    app.execute("select agentmem.set_retention_policy(kind => 'facts', max_age => '1 day')")
    admin.execute("select agentmem.set_default_retention_policy(kind => 'messages', max_age => '1 day')")
    run = admin.execute("select rows_removed from agentmem.apply_retention()").fetchone()[0]
    assert run["messages"] == 3 and run["facts"] == 1
    left = {r[0] for r in admin.execute("select message_id from agentmem.messages")}
    assert left == {*kept_msgs, loose[0], theirs[0]}
    assert {r[0] for r in admin.execute("select fact_id from agentmem.facts")} == {f_pinned}
    assert f_loose not in left
    # unpinned, they go at the next run
    app.execute("select agentmem.unpin(kind => 'conversation', id => %s)", (kept_conv,))
    assert admin.execute("select rows_removed from agentmem.apply_retention()").fetchone()[0]["messages"] == 2


def test_a_pin_waits_for_the_users_erasure(app, admin, connect, app_url):
    conv, ids = chat(app, n=1)
    eraser = connect(app_url, tenant="acme")
    eraser.execute("begin")
    eraser.execute("select agentmem.forget_user(user_id => 'alice')")
    result = {}

    def pin():
        pinner = connect(app_url, tenant="acme")
        result["state"] = sqlstate_of(pinner, "select agentmem.pin(kind => 'message', id => %s)", (ids[0],))

    t = threading.Thread(target=pin)
    t.start()
    t.join(0.5)
    assert t.is_alive()
    eraser.execute("commit")
    t.join(30)
    assert result["state"] == "AM030" and count(admin, "messages") == 0


def test_driver_methods(driver, admin):
    call = driver()
    conv = call("start_conversation", "u1")
    call("store_message", conv, "user", "hello zorkmid", vec("hello zorkmid"))
    assert call("pin", "conversation", conv) is not None
    assert call("unpin", "conversation", conv) is True
    assert call("set_use_boost", 0.25) == 0.25 and call("set_use_boost", None) is None
    assert len(call("search_messages", "u1", vec("hello zorkmid"), use_boost=0.1)) == 1
    assert call("recall_facts", "u1", vec("hello"), use_boost=0.1) == []
    policy = call("set_lifecycle_policy", "facts", keep_per_user=3)
    assert call("consolidate_facts", "u1", dry_run=True) == []
    assert call("set_consolidation", 0.95) is True
    assert policy.keep_per_user == 3 and policy.max_inactive is None
    assert count(admin, "conversations", "pinned_at is null") == 1


# -- forgetting by age, inactivity and budget ---------------------------------------------------

def set_times(admin, table: str, key: str, item, *, age_days: float, used_days: float | None):
    col = "updated_at" if table == "facts" else "created_at"
    admin.execute(f"update agentmem.{table} set {col} = now() - %s * interval '1 day', "
                  f"last_used_at = now() - %s * interval '1 day' where {key} = %s", (age_days, used_days, item))


def test_a_policy_of_age_and_inactivity_removes_only_rows_that_are_both(app, admin):
    _, ids = chat(app, n=4)
    set_times(admin, "messages", "message_id", ids[0], age_days=10, used_days=None)   # old, never used
    set_times(admin, "messages", "message_id", ids[1], age_days=10, used_days=1)      # old, used lately
    set_times(admin, "messages", "message_id", ids[2], age_days=10, used_days=8)      # old, used long ago
    set_times(admin, "messages", "message_id", ids[3], age_days=2, used_days=None)    # young, unused since
    app.execute("select agentmem.set_retention_policy(kind => 'messages', max_age => '5 days')")
    row = app.execute("select max_age, max_inactive, combine, keep_per_user from agentmem.set_lifecycle_policy("
                      "kind => 'messages', max_inactive => '3 days')").fetchone()
    assert str(row[0]) == "5 days, 0:00:00" and row[2:] == ("and", None)
    assert admin.execute("select rows_removed from agentmem.apply_retention()").fetchone()[0]["messages"] == 2
    left = {r[0] for r in admin.execute("select message_id from agentmem.messages")}
    assert left == {ids[1], ids[3]}
    # or: old or inactive; the young one unused for 2 days is neither past 5 days nor past 3
    app.execute("select agentmem.set_lifecycle_policy(kind => 'messages', max_inactive => '3 days', combine => 'or')")
    assert admin.execute("select rows_removed from agentmem.apply_retention()").fetchone()[0]["messages"] == 1
    assert {r[0] for r in admin.execute("select message_id from agentmem.messages")} == {ids[3]}


def test_inactivity_alone_and_a_use_saves_a_row(app, admin):
    _, ids = chat(app, n=3)
    for i in ids:
        set_times(admin, "messages", "message_id", i, age_days=30, used_days=None)
    app.execute("select agentmem.set_lifecycle_policy(kind => 'messages', max_inactive => '7 days')")
    found = search(app, "alice", "lark 1 alice", k=1)     # used now: folded by the run before it removes
    run = admin.execute("select rows_removed from agentmem.apply_retention()").fetchone()[0]
    assert run["use_log"] == 1 and run["messages"] == 2
    assert [r[0] for r in admin.execute("select message_id from agentmem.messages")] == found


def test_a_budget_keeps_exactly_n_per_user_the_most_recently_used_and_pinned_ones_besides(app, admin):
    alice = [upsert(app, "alice", f"s{i}", f"Alice fact number {i}")[0] for i in range(5)]
    bob = [upsert(app, "bob", f"s{i}", f"Bob fact number {i}")[0] for i in range(3)]
    for n, f in enumerate(alice):
        set_times(admin, "facts", "fact_id", f, age_days=1, used_days=n)   # alice[0] used most recently
    app.execute("select agentmem.pin(kind => 'fact', id => %s)", (alice[4],))
    app.execute("select agentmem.set_lifecycle_policy(kind => 'facts', keep_per_user => 2)")
    assert admin.execute("select rows_removed from agentmem.apply_retention()").fetchone()[0]["facts"] == 3
    left = {r[0] for r in admin.execute("select fact_id from agentmem.facts")}
    assert left & set(alice) == {alice[0], alice[1], alice[4]} and len(left & set(bob)) == 2
    assert admin.execute("select rows_removed from agentmem.apply_retention()").fetchone()[0]["facts"] == 0


def test_a_served_cached_answer_is_used_and_outlives_the_idle_ones(app, admin):
    """cache_lookup's hits (exact and semantic) are uses: folded into the entry, they keep it from an
    inactivity policy and rank it first in a budget; a miss keeps nothing."""
    q = "how do I reset my password"
    served = cache(app, q, "Use the reset link.")
    idle = [cache(app, f"where is the {w} page", f"Under {w}.") for w in ("invoice", "billing", "refund")]
    admin.execute("update agentmem.cache_entries set created_at = now() - interval '30 days'")
    app.execute("select agentmem.set_lifecycle_policy(kind => 'cached_answers', max_inactive => '7 days')")
    assert lookup(app, q) == (True, served)
    assert lookup(app, "how can I reset my password", like=q, user="alice") == (True, served)
    assert lookup(app, "what is the weather")[0] is False
    run = admin.execute("select rows_removed from agentmem.apply_retention()").fetchone()[0]
    assert run["use_log"] == 2 and run["cached_answers"] == 3
    assert uses(admin, "cache_entries", "entry_id", [served, *idle]) == {served: (2, True)}
    # a budget of one per user (entries without a user count as one): the used one stays
    again = [cache(app, f"where is the {w} page", f"Under {w}.") for w in ("invoice", "billing")]
    app.execute("select agentmem.set_lifecycle_policy(kind => 'cached_answers', keep_per_user => 1)")
    admin.execute("update agentmem.cache_entries set created_at = now() - interval '1 day' where entry_id = any(%s)",
                  (again,))
    assert admin.execute("select rows_removed from agentmem.apply_retention()").fetchone()[0]["cached_answers"] == 2
    assert [r[0] for r in admin.execute("select entry_id from agentmem.cache_entries")] == [served]


def test_the_dry_run_lists_exactly_what_the_real_run_then_removes(app, admin, connect, app_url):
    _, mine = chat(app, n=6)
    other = connect(app_url, tenant="globex")
    _, theirs = chat(other, n=5)
    fids = [upsert(app, "alice", f"s{i}", f"Alice fact number {i}")[0] for i in range(4)]
    age_everything(admin)
    app.execute("select agentmem.pin(kind => 'message', id => %s)", (mine[0],))
    app.execute("select agentmem.set_retention_policy(kind => 'messages', max_age => '1 day')")
    app.execute("select agentmem.set_lifecycle_policy(kind => 'facts', keep_per_user => 1)")
    admin.execute("select agentmem.set_default_retention_policy(kind => 'messages', max_age => '1 day')")
    before = admin.execute("select (select count(*) from agentmem.messages), (select count(*) from agentmem.facts), "
                           "(select count(*) from agentmem.retention_cursors)").fetchone()
    preview = admin.execute("select kind, tenant_id, would_remove, ids from agentmem.preview_retention("
                            "batch_size => 4)").fetchall()
    after = admin.execute("select (select count(*) from agentmem.messages), (select count(*) from agentmem.facts), "
                          "(select count(*) from agentmem.retention_cursors)").fetchone()
    assert after == before                       # nothing removed, no cursor moved
    listed = {(k, t): set(ids) for k, t, n, ids in preview}
    assert {(k, t): n for k, t, n, _ in preview} == {("messages", "acme"): 2, ("messages", "globex"): 2,
                                                   ("facts", "acme"): 3}
    assert str(mine[0]) not in listed[("messages", "acme")]
    gone_before = {r[0] for r in admin.execute("select message_id::text from agentmem.messages")} | \
        {r[0] for r in admin.execute("select fact_id::text from agentmem.facts")}
    run = admin.execute("select rows_removed from agentmem.apply_retention(batch_size => 4)").fetchone()[0]
    assert run["messages"] == 4 and run["facts"] == 3
    still = {r[0] for r in admin.execute("select message_id::text from agentmem.messages")} | \
        {r[0] for r in admin.execute("select fact_id::text from agentmem.facts")}
    assert gone_before - still == set().union(*listed.values())
    assert len(fids) == 4 and len(theirs) == 5


def test_lifecycle_policy_errors(app, admin):
    for args, state in ((("hit_log", None, None, "and"), "AM020"), (("messages", "-1 day", None, "and"), "AM020"),
                        (("messages", None, 0, "and"), "AM020"), (("facts", None, None, "xor"), "AM020"),
                        ((None, "1 day", None, "and"), "AM020")):
        assert sqlstate_of(app, "select agentmem.set_lifecycle_policy(kind => %s, max_inactive => %s, "
                           "keep_per_user => %s, combine => %s)", args) == state, args
    assert sqlstate_of(app, "select agentmem.set_default_lifecycle_policy(kind => 'messages', "
                       "max_inactive => '1 day')") == "42501"
    assert sqlstate_of(app, "select agentmem.preview_retention()") == "42501"
    assert sqlstate_of(admin, "select agentmem.preview_retention(batch_size => 0)") == "AM020"
    row = admin.execute("select tenant_id, max_inactive is not null, keep_per_user from "
                        "agentmem.set_default_lifecycle_policy(kind => 'facts', max_inactive => '9 days', "
                        "keep_per_user => 7)").fetchone()
    assert row == ("", True, 7)
    assert count(admin, "retention_policies", "kind = 'facts' and tenant_id = ''") == 1


def test_admin_methods(admin_url, app, admin):
    import datetime as dt

    from agentmem.admin import Admin
    chat(app)
    search(app, "alice", "lark 1 alice")
    with Admin.connect(admin_url) as dba:
        assert dba.apply_use_log() == 2
        policy = dba.set_default_lifecycle_policy("messages", max_inactive=dt.timedelta(days=3))
        assert policy.max_inactive == dt.timedelta(days=3) and policy.combine == "and"
        assert dba.preview_retention() == []
        assert dba.apply_consolidation().job == "consolidation"


def test_health_shows_the_use_job_and_retention_carries_the_lifecycle(app, admin):
    chat(app)
    search(app, "alice", "lark 1 alice")
    assert fold(admin) == 2
    row = admin.execute("select status, last_error from agentmem.health where job = 'use_log'").fetchone()
    assert row == ("ok", None)
    assert admin.execute("select rows_removed from agentmem.job_runs where job = 'use_log'").fetchone()[0] == {
        "uses_folded": 2}


# -- the use boost -------------------------------------------------------------------------------

def hits(conn, sql, params):
    return conn.execute(sql, params).fetchall()


SEARCH = ("select message_id, vector_rank, text_rank, score, similarity from agentmem.search_messages(user_id => 'alice', "
          "query_embedding => %s, query_text => %s, k => %s, model => 'all-minilm'{extra})")
RECALL = ("select fact_id, vector_rank, text_rank, score, similarity from agentmem.recall_facts(user_id => 'alice', "
          "query_embedding => %s, query_text => %s, k => %s{extra})")


def test_with_the_boost_off_results_equal_todays_exactly(app, admin):
    chat(app, n=8)
    for i in range(6):
        upsert(app, "alice", f"s{i}", f"Alice lark fact {i}")
    search(app, "alice", "lark 3 alice", k=3)
    recall(app, "alice", "Alice lark fact 2", k=2)
    fold(admin)
    for sql, emb in ((SEARCH, vec("lark 2 alice", 384)), (RECALL, vec("Alice lark fact 1"))):
        for text, k in ((None, 3), ("lark", 4), ("lark alice", 2)):
            today = hits(app, sql.format(extra=""), (emb, text, k))
            assert len(today) == k
            for off in (", use_boost => 0", ", use_boost => null"):
                assert hits(app, sql.format(extra=off), (emb, text, k)) == today
    # a tenant setting of 0 or NULL is off too
    assert app.execute("select agentmem.set_use_boost(weight => 0)").fetchone()[0] is None
    assert hits(app, SEARCH.format(extra=""), (vec("lark 2 alice", 384), None, 3)) == \
        hits(app, SEARCH.format(extra=", use_boost => 0"), (vec("lark 2 alice", 384), None, 3))


def test_with_the_boost_on_a_recently_used_memory_outranks_an_equal_older_one(app, admin):
    conv = start_conversation(app, "alice")
    same = vec("twin", 384)
    a = store_message(app, conv, "twin one", embedding=same)[0]
    b = store_message(app, conv, "twin two", embedding=same)[0]
    admin.execute("update agentmem.messages set created_at = now() - interval '60 days'")
    admin.execute("update agentmem.messages set last_used_at = now() - interval '1 hour', use_count = 3 "
                  "where message_id = %s", (b,))
    plain = hits(app, SEARCH.format(extra=""), (same, None, 1))
    # Equal vectors tie, and the fusion still ranks them 1 and 2 in some order: with rrf_k 10 (the default)
    # that is 1/11 against 1/12, so the weight must outweigh 9 % whichever one the tie put first.
    boosted = hits(app, SEARCH.format(extra=", use_boost => 0.5"), (same, None, 2))
    assert boosted[0][0] == b and boosted[1][0] == a and {plain[0][0]} <= {a, b}, (a, b, boosted)
    # the factor stays in [1, 1 + weight]: the used one's score is at most 1.5 times the other's, rank
    # apart (11/12 of it when the tie put the used one second)
    assert boosted[1][3] <= boosted[0][3] <= boosted[1][3] * 1.5 * 12 / 11 + 1e-12
    # facts: same subject text, one used lately; as a tenant setting
    f1 = upsert(app, "alice", "pet", "Alice has a cat", dim_text="pet")[0]
    f2 = upsert(app, "alice", "animal", "Alice owns a cat", dim_text="pet")[0]
    admin.execute("update agentmem.facts set created_at = now() - interval '60 days'")
    admin.execute("update agentmem.facts set last_used_at = now(), use_count = 5 where fact_id = %s", (f1,))
    app.execute("select agentmem.set_use_boost(weight => 0.5)")
    got = hits(app, RECALL.format(extra=""), (vec("pet"), None, 2))
    assert [g[0] for g in got] == [f1, f2]
    assert hits(app, RECALL.format(extra=", use_boost => 0"), (vec("pet"), None, 2))[0][3] <= got[0][3]


def test_the_factor_never_leaves_its_bounds_and_never_filters(app, admin):
    bounds = admin.execute(
        "select min(f), max(f) from (select agentmem_private.use_boost_factor(w, u, c, n, now()) as f "
        "from unnest(array[-1, 0, 0.1, 0.5, 3]::float8[]) as w, "
        "unnest(array[null, now(), now() + interval '1 day', now() - interval '10 years']::timestamptz[]) as u, "
        "unnest(array[now(), now() - interval '1000 days', now() + interval '1 day']::timestamptz[]) as c, "
        "unnest(array[null, 0, 1, 1000000000, -5]::bigint[]) as n) as x").fetchone()
    assert bounds[0] >= 1 and bounds[1] <= 1.5 and bounds[1] > 1.4
    # each term on its own: a memory never used has no use term (greatest() skips a NULL: it once gave
    # a never-used memory the full term, as if used this instant), one used now has all of it
    terms = admin.execute(
        "select agentmem_private.use_boost_factor(0.5, null, now() - interval '30 days', 0, now()), "
        "agentmem_private.use_boost_factor(0.5, now(), now() - interval '30 days', 0, now()), "
        "agentmem_private.use_boost_factor(0.5, now() - interval '7 days', null, 0, now())").fetchone()
    assert abs(terms[0] - (1 + 0.5 * 0.15)) < 1e-9, terms
    assert abs(terms[1] - (1 + 0.5 * 0.65)) < 1e-9, terms
    assert abs(terms[2] - (1 + 0.5 * 0.25)) < 1e-9, terms
    _, ids = chat(app, n=6)
    admin.execute("update agentmem.messages set last_used_at = now(), use_count = 100 where message_id = %s", (ids[5],))
    all_plain = {r[0] for r in hits(app, SEARCH.format(extra=""), (vec("lark 0 alice", 384), None, 6))}
    all_boosted = {r[0] for r in hits(app, SEARCH.format(extra=", use_boost => 0.5"), (vec("lark 0 alice", 384), None, 6))}
    assert all_plain == all_boosted == set(ids)


def test_use_boost_errors(app):
    for weight in (-0.1, 0.51, float("nan")):
        assert sqlstate_of(app, "select agentmem.set_use_boost(weight => %s::real)", (weight,)) == "AM020"
        assert sqlstate_of(app, "select * from agentmem.search_messages(user_id => 'a', query_text => 'x', "
                           "use_boost => %s::real)", (weight,)) == "AM020"
        assert sqlstate_of(app, "select * from agentmem.recall_facts(user_id => 'a', query_text => 'x', "
                           "use_boost => %s::real)", (weight,)) == "AM020"
    assert abs(app.execute("select agentmem.set_use_boost(weight => 0.3)").fetchone()[0] - 0.3) < 1e-6


# -- consolidation ---------------------------------------------------------------------------------

def facts_state(admin) -> dict:
    """Every row of facts and fact_history, row for row (vectors as text)."""
    return {
        "facts": admin.execute("select f.*, f.embedding::text from agentmem.facts as f order by fact_id").fetchall(),
        "history": admin.execute("select h.* from agentmem.fact_history as h order by history_id").fetchall(),
    }


def planted(app, user="alice"):
    """A near-duplicate pair of one user (same normalised subject, same embedding), sources on both."""
    conv = start_conversation(app, user)
    m1 = store_message(app, conv, f"{user} said Lyon")[0]
    m2 = store_message(app, conv, f"{user} said Lyon again")[0]
    older = upsert(app, user, "home city", f"{user} lives in Lyon", [m1], dim_text="lyon")[0]
    newer = upsert(app, user, "Home_City", f"{user} lives in Lyon, France", [m2], dim_text="lyon")[0]
    return older, newer, m1, m2


def test_consolidation_merges_a_planted_pair_keeps_both_in_history_and_unions_provenance(app, admin):
    older, newer, m1, m2 = planted(app)
    other = upsert(app, "alice", "diet", "Alice is vegetarian")[0]
    changes = app.execute("select run_id, older_fact_id, newer_fact_id, reason, older_fact, newer_fact "
                          "from agentmem.consolidate_facts(user_id => 'alice')").fetchall()
    assert [c[1:] for c in changes] == [(older, newer, "same subject", "alice lives in Lyon", "alice lives in Lyon, France")]
    assert {r[0] for r in admin.execute("select fact_id from agentmem.facts")} == {newer, other}
    row = admin.execute("select source_message_ids from agentmem.facts where fact_id = %s", (newer,)).fetchone()[0]
    assert set(row) == {m1, m2}
    history = app.execute("select fact, source_message_ids, valid_to is not null from agentmem.fact_history("
                          "fact_id => %s)", (newer,)).fetchall()
    assert history == [("alice lives in Lyon", [m1], True)]
    assert admin.execute("select change from agentmem.fact_history").fetchone()[0] == "merged"
    run = admin.execute("select dry_run, changes, user_id from agentmem.consolidation_runs").fetchone()
    assert run == (False, 1, "alice")
    # again: nothing left to merge
    assert app.execute("select count(*) from agentmem.consolidate_facts(user_id => 'alice')").fetchone()[0] == 0
    # erasure: the merged text's copy in the run's record goes with the fact it went into
    assert count(admin, "consolidation_changes", "older_row::text like '%%Lyon%%'") == 1
    app.execute("select agentmem.delete_fact(fact_id => %s)", (newer,))
    assert count(admin, "consolidation_changes") == 0 and count(admin, "fact_history") == 0


def test_near_identical_text_under_other_subjects_is_merged_too(app, admin):
    a = upsert(app, "alice", "diet", "Alice is vegetarian.")[0]
    b = upsert(app, "alice", "food preference", "alice is VEGETARIAN", dim_text="something else entirely")[0]
    changes = app.execute("select older_fact_id, newer_fact_id, reason from agentmem.consolidate_facts()").fetchall()
    assert changes == [(a, b, "same text")]


def test_consolidation_touches_no_pinned_fact_and_no_other_user_or_tenant(app, admin, connect, app_url):
    older, newer, _, _ = planted(app)
    app.execute("select agentmem.pin(kind => 'fact', id => %s)", (older,))
    planted(app, user="bob")
    other = connect(app_url, tenant="globex")
    planted(other)
    before = facts_state(admin)
    assert app.execute("select count(*) from agentmem.consolidate_facts(user_id => 'alice')").fetchone()[0] == 0
    assert facts_state(admin) == before
    # bob's pair merges, alice's pinned one and globex's stay
    assert app.execute("select count(*) from agentmem.consolidate_facts()").fetchone()[0] == 1
    assert count(admin, "facts", "tenant_id = 'globex'") == 2 and count(admin, "facts", "tenant_id = 'acme' and user_id = 'alice'") == 2
    assert count(admin, "facts", "user_id = 'bob'") == 1


def test_a_dry_run_changes_nothing_and_lists_what_the_run_then_does(app, admin):
    planted(app)
    upsert(app, "alice", "diet", "Alice is vegetarian.")
    upsert(app, "alice", "food", "alice is vegetarian", dim_text="x")
    before = facts_state(admin)
    dry = app.execute("select older_fact_id, newer_fact_id, reason from agentmem.consolidate_facts(dry_run => true) "
                      "order by 1").fetchall()
    assert len(dry) == 2 and facts_state(admin) == before
    assert admin.execute("select dry_run, changes from agentmem.consolidation_runs").fetchone() == (True, 2)
    real = app.execute("select older_fact_id, newer_fact_id, reason from agentmem.consolidate_facts() "
                       "order by 1").fetchall()
    assert real == dry


def test_undo_restores_the_tables_row_for_row(app, admin):
    planted(app)
    planted(app, user="bob")
    upsert(app, "alice", "diet", "Alice is vegetarian.")
    upsert(app, "alice", "food", "alice is vegetarian", dim_text="x")
    before = facts_state(admin)
    run = app.execute("select distinct run_id from agentmem.consolidate_facts()").fetchall()
    assert len(run) == 1 and facts_state(admin) != before
    assert app.execute("select agentmem.undo_consolidation(run_id => %s)", (run[0][0],)).fetchone()[0] == 3
    assert facts_state(admin) == before
    assert sqlstate_of(app, "select agentmem.undo_consolidation(run_id => %s)", (run[0][0],)) == "AM031"


def test_undo_errors(app, admin, connect, app_url):
    older, newer, _, _ = planted(app)
    dry = app.execute("select run_id from agentmem.consolidate_facts(dry_run => true)").fetchone()[0]
    assert sqlstate_of(app, "select agentmem.undo_consolidation(run_id => %s)", (dry,)) == "AM031"
    run = app.execute("select run_id from agentmem.consolidate_facts()").fetchone()[0]
    assert sqlstate_of(app, "select agentmem.undo_consolidation(run_id => 'nope')") == "AM020"
    other = connect(app_url, tenant="globex")
    assert sqlstate_of(other, "select agentmem.undo_consolidation(run_id => %s)", (run,)) == "AM030"
    # the subject is taken again: nothing is undone
    upsert(app, "alice", "home city", "alice lives in Paris", dim_text="paris")
    before = facts_state(admin)
    assert sqlstate_of(app, "select agentmem.undo_consolidation(run_id => %s)", (run,)) == "AM031"
    assert facts_state(admin) == before
    for args in (("alice", False, 0.5, None), ("alice", False, None, 0), ("alice", None, None, None), ("  ", False, None, None)):
        assert sqlstate_of(app, "select * from agentmem.consolidate_facts(user_id => %s, dry_run => %s, "
                           "min_similarity => %s::real, max_changes => %s)", args) == "AM020", args
    assert sqlstate_of(app, "select agentmem.set_consolidation(min_similarity => 0.1)") == "AM020"
    assert sqlstate_of(app, "select agentmem.set_consolidation(min_similarity => 0.9, max_changes => 0)") == "AM020"
    assert sqlstate_of(app, "select agentmem.apply_consolidation()") == "42501"


def test_a_run_concurrent_with_writers_loses_nothing(app, admin, connect, app_url):
    older, newer, m1, m2 = planted(app)
    runner = connect(app_url, tenant="acme")
    runner.execute("begin")
    runner.execute("select * from agentmem.consolidate_facts(user_id => 'alice')")
    done = {}

    def write():
        writer = connect(app_url, tenant="acme")
        done["new"] = upsert(writer, "alice", "Home_City", "alice moved to Berlin", dim_text="berlin")
        done["other"] = upsert(writer, "alice", "pet", "alice has a cat")

    t = threading.Thread(target=write)
    t.start()
    t.join(0.5)
    assert t.is_alive()                 # the writer waits for the run
    runner.execute("commit")
    t.join(30)
    assert done["new"][1] == "replaced"
    texts = {r[0] for r in admin.execute("select fact from agentmem.facts")}
    history = {r[0] for r in admin.execute("select fact from agentmem.fact_history")}
    assert texts == {"alice moved to Berlin", "alice has a cat"}
    assert history == {"alice lives in Lyon", "alice lives in Lyon, France"}


def test_the_scheduled_job_consolidates_the_tenants_that_asked_and_shows_in_health(app, admin, connect, app_url):
    planted(app)
    other = connect(app_url, tenant="globex")
    planted(other)
    assert app.execute("select agentmem.set_consolidation(min_similarity => 0.9, max_changes => 5)").fetchone()[0]
    run = admin.execute("select job, rows_removed, error from agentmem.apply_consolidation()").fetchone()
    assert run == ("consolidation", {"facts_merged": 1}, None)
    assert count(admin, "facts", "tenant_id = 'acme'") == 1 and count(admin, "facts", "tenant_id = 'globex'") == 2
    assert admin.execute("select status from agentmem.health where job = 'consolidation'").fetchone()[0] == "ok"
    assert app.execute("select agentmem.set_consolidation(min_similarity => null)").fetchone()[0] is False
