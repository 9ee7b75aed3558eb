"""Issue 12, items 12-13: erasure is complete under concurrent writes, and its receipt counts everything.

Every function that writes rows of a user takes the user's advisory lock shared;
forget_user takes it exclusive. The tests hold writes of every kind open, start
forget_user, see it wait, let the writes commit, and then find nothing of the user.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import helpers
from helpers import wait_until

DIM = 384
MODEL = "all-minilm"
VICTIM = "victim"


def unit(i: int) -> np.ndarray:
    """e_i + 0.5 e_(i+1): a distinct non-zero vector per i."""
    return helpers.unit(i, DIM, mix=i + 1)


def waiting_on_lock(admin, pid: int) -> bool:
    row = admin.execute("select wait_event_type from pg_stat_activity where pid = %s", (pid,)).fetchone()
    return row is not None and row[0] == "Lock"


def rows_of_user(admin, user_id: str) -> dict[str, int]:
    """Rows naming the user in every agentmem table with a user_id column (superuser: every tenant)."""
    tables = [r[0] for r in admin.execute(
        "select c.relname from pg_class as c where c.relnamespace = 'agentmem'::regnamespace and c.relkind = 'r' "
        "and exists (select from pg_attribute as a where a.attrelid = c.oid and a.attname = 'user_id' "
        "and not a.attisdropped) order by 1").fetchall()]
    counts = {t: admin.execute(f"select count(*) from agentmem.{t} where user_id = %s", (user_id,)).fetchone()[0]
              for t in tables}
    counts["cache_hits.question_asked"] = admin.execute(
        "select count(*) from agentmem.cache_hits where question_asked like %s", (f"%{user_id}%",)).fetchone()[0]
    return counts


WRITERS = {
    "start_conversation": lambda c, conv, i: c.execute(
        "select agentmem.start_conversation(user_id => %s, title => 'new')", (VICTIM,)),
    "store_message": lambda c, conv, i: c.execute(
        "select agentmem.store_message(conversation_id => %s, role => 'user', content => %s, embedding => %s, "
        "model => 'all-minilm')", (conv["one"], f"message {i} of {VICTIM}", unit(i))),
    # another conversation: two writers of one conversation queue on its row lock
    "store_messages": lambda c, conv, i: c.execute(
        "select agentmem.store_messages(conversation_id => %s, roles => '{user,assistant}', contents => %s, "
        "embeddings => %s, model => 'all-minilm')",
        (conv["other"], [f"batch {i} of {VICTIM}", f"reply {i}"], [unit(i), unit(i + 2)])),
    "upsert_fact": lambda c, conv, i: c.execute(
        "select agentmem.upsert_fact(user_id => %s, subject => %s, fact => 'likes tea', embedding => %s, "
        "model => 'all-minilm')", (VICTIM, f"drink {i}", unit(i))),
    "cache_store": lambda c, conv, i: c.execute(
        "select agentmem.cache_store(question => %s, question_embedding => %s, answer => 'yes', "
        "model => 'all-minilm', user_id => %s, safe_to_share => true)",
        (f"question {i} of {VICTIM}?", unit(i + 7), VICTIM)),
    "cache_lookup": lambda c, conv, i: c.execute(
        "select agentmem.cache_lookup(question => %s, question_embedding => %s, model => 'all-minilm', "
        "user_id => %s)", (f"lookup {i} of {VICTIM}?", unit(i + 9), VICTIM)),
}


@pytest.mark.parametrize("names", [[name] for name in WRITERS] + [list(WRITERS)],
                         ids=list(WRITERS) + ["all_at_once"])
def test_forget_user_erases_writes_in_flight(app_url, app, admin, connect, names):
    """Each writer alone (a writer that holds no conversation row lock is the case the row locks
    missed), then every writer at once."""
    conv = {name: app.execute("select agentmem.start_conversation(user_id => %s)", (VICTIM,)).fetchone()[0]
            for name in ("one", "other")}
    ready = {name: threading.Event() for name in names}
    release = threading.Event()
    errors: list[BaseException] = []

    def writer(name, conn):
        try:
            conn.execute("begin")
            WRITERS[name](conn, conv, len(name))
            ready[name].set()
            release.wait(60)
            conn.execute("commit")
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            ready[name].set()

    threads = [threading.Thread(target=writer, args=(name, connect(app_url, "acme"))) for name in names]
    for t in threads:
        t.start()
    wait_until(lambda: all(e.is_set() for e in ready.values()), what="every writer to hold its write open")
    assert not errors, errors

    forget_conn = connect(app_url, "acme")
    forget_pid = forget_conn.execute("select pg_backend_pid()").fetchone()[0]
    receipt: dict = {}

    def forget():
        try:
            receipt.update(forget_conn.execute(
                "select (agentmem.forget_user(user_id => %s)).rows_removed", (VICTIM,)).fetchone()[0])
        except BaseException as exc:
            errors.append(exc)

    eraser = threading.Thread(target=forget)
    eraser.start()
    try:
        # The erasure waits for the writes in flight (before the fix it ran past them).
        wait_until(lambda: waiting_on_lock(admin, forget_pid), what="forget_user to wait for the writers")
    finally:
        release.set()
    for t in threads + [eraser]:
        t.join(60)
    assert not errors, errors

    assert set(rows_of_user(admin, VICTIM).values()) == {0}, rows_of_user(admin, VICTIM)
    # every write was counted
    expected = {"conversations": 2 + ("start_conversation" in names),
                "messages": ("store_message" in names) + 2 * ("store_messages" in names),
                "facts": int("upsert_fact" in names), "cache_entries": int("cache_store" in names),
                "cache_hits": int("cache_lookup" in names)}
    assert {kind: receipt[kind] for kind in expected} == expected
    assert receipt["message_embeddings"] == expected["messages"]


def test_writes_that_start_during_an_erasure_wait_and_then_succeed(app_url, app, admin, connect):
    app.execute("select agentmem.start_conversation(user_id => %s)", (VICTIM,))
    eraser = connect(app_url, "acme")
    eraser.execute("begin")
    eraser.execute("select agentmem.forget_user(user_id => %s)", (VICTIM,))
    writer = connect(app_url, "acme")
    pid = writer.execute("select pg_backend_pid()").fetchone()[0]
    result: list = []
    t = threading.Thread(target=lambda: result.append(writer.execute(
        "select agentmem.upsert_fact(user_id => %s, subject => 'city', fact => 'Lyon', embedding => %s, "
        "model => 'all-minilm')", (VICTIM, unit(3))).fetchone()))
    t.start()
    wait_until(lambda: waiting_on_lock(admin, pid), what="the writer to wait for the erasure")
    eraser.execute("commit")
    t.join(30)
    assert result, "the write after the erasure failed"
    # written after the erasure committed: it stays, and the erasure left nothing else
    assert admin.execute("select count(*) from agentmem.facts where user_id = %s", (VICTIM,)).fetchone()[0] == 1
    assert admin.execute("select count(*) from agentmem.conversations where user_id = %s",
                         (VICTIM,)).fetchone()[0] == 0


def test_receipt_counts_other_users_facts_pruned_with_the_user(app, admin):
    cid = app.execute("select agentmem.start_conversation(user_id => 'alice')").fetchone()[0]
    alice_msg = app.execute("select message_id from agentmem.store_message(conversation_id => %s, role => 'user', "
                            "content => 'Bob lives in Lyon', embedding => %s, model => 'all-minilm')",
                            (cid, unit(1))).fetchone()[0]
    bob_cid = app.execute("select agentmem.start_conversation(user_id => 'bob')").fetchone()[0]
    bob_msg = app.execute("select message_id from agentmem.store_message(conversation_id => %s, role => 'user', "
                          "content => 'I like tea', embedding => %s, model => 'all-minilm')",
                          (bob_cid, unit(2))).fetchone()[0]
    # bob's fact learnt only from alice's message goes with her; the other only loses the link
    app.execute("select agentmem.upsert_fact(user_id => 'bob', subject => 'city', fact => 'Lyon', embedding => %s, "
                "source_message_ids => array[%s::uuid], model => 'all-minilm')", (unit(4), alice_msg))
    app.execute("select agentmem.upsert_fact(user_id => 'bob', subject => 'drink', fact => 'tea', "
                "embedding => %s, source_message_ids => array[%s::uuid, %s::uuid], model => 'all-minilm')",
                (unit(5), alice_msg, bob_msg))
    receipt = app.execute("select (agentmem.forget_user(user_id => 'alice')).rows_removed").fetchone()[0]
    assert receipt["facts"] == 1 and receipt["facts_unlinked"] == 1
    assert receipt["messages"] == 1 and receipt["conversations"] == 1
    assert admin.execute("select count(*) from agentmem.facts where user_id = 'bob'").fetchone()[0] == 1
    # the receipt kept in the log says the same
    logged = admin.execute("select rows_removed from agentmem.erasure_log order by erased_at desc limit 1"
                           ).fetchone()[0]
    assert logged == receipt
