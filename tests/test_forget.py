"""sql/50_forget.sql and sql/04_forget_helpers.sql: forget_user and forget_conversation, with completeness proven
from the catalogue, under concurrent writes, and the receipt that counts everything erased."""

from __future__ import annotations

import threading

import numpy as np
import psycopg
import pytest

import helpers
from helpers import count, sqlstate_of, upsert, vec, wait_until


def store(conn, conv, role, content):
    return conn.execute("select message_id from agentmem.store_message(conversation_id => %s, role => %s, "
                        "content => %s, embedding => %s)", (conv, role, content, vec(content))).fetchone()[0]


def populate(conn, user: str, marker: str) -> dict:
    """A user's data in every feature: conversations, messages, facts, cache entries, hits, cached embeddings."""
    convs, msgs = [], []
    for c in range(2):
        conv = conn.execute("select agentmem.start_conversation(user_id => %s, title => %s)",
                            (user, f"{marker} chat {c}")).fetchone()[0]
        convs.append(conv)
        for i in range(3):
            msgs.append(store(conn, conv, "user" if i % 2 == 0 else "assistant", f"{marker} message {c} {i} ok"))
    conn.execute("select agentmem.record_retrieval(message_id => %s, doc_ids => %s)",
                 (msgs[0], [f"docs/{marker}.md", "docs/shared.md"]))
    upsert(conn, user, "home_city", f"{marker} lives in Lyon", [msgs[0], msgs[3]])
    upsert(conn, user, "home_city", f"{marker} moved to Berlin quickly", [msgs[1]])  # history of Lyon
    upsert(conn, user, "diet", f"{marker} is vegetarian", [msgs[2]])
    q = f"what is {marker} plan"
    conn.execute("select * from agentmem.cache_store(question => %s, question_embedding => %s, answer => %s, "
                 "user_id => %s, conversation_id => %s, safe_to_share => true)",
                 (q, vec(q), f"{marker} answer", user, convs[0]))
    conn.execute("select * from agentmem.cache_lookup(question => %s, question_embedding => %s, user_id => %s)",
                 (q, vec(q), user))
    texts = [f"{marker} message 0 0 ok", f"search_document: {marker} lives in Lyon"]
    conn.execute("select agentmem.embedding_cache_store(model => 'nomic-embed-text', texts => %s, embeddings => %s)",
                 (texts, [vec(t) for t in texts]))
    return {"conversations": convs, "messages": msgs, "vectors": [vec(f"{marker} message 0 0 ok"),
                                                                  vec(f"{marker} lives in Lyon"), vec(q)]}


def catalogue(admin):
    """Every agentmem table with its user_id, text-like and vector columns, found from the catalogue."""
    rows = admin.execute("""
        select c.relname,
               bool_or(a.attname = 'user_id'),
               array_agg(a.attname::text) filter (where a.atttypid in ('text'::regtype, 'jsonb'::regtype,
                                                                       'text[]'::regtype)),
               array_agg(a.attname::text) filter (where a.atttypid = 'vector'::regtype)
          from pg_class c join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
         where c.relnamespace = 'agentmem'::regnamespace and c.relkind in ('r', 'p')
         group by c.relname order by c.relname""").fetchall()
    return rows


def rows_about(admin, tenant, user, marker, vectors) -> dict[str, int]:
    """Per table: rows of `user` (by user_id), rows whose text mentions the marker, rows holding one of the vectors."""
    found = {}
    for table, has_user, texts, vector_cols in catalogue(admin):
        n = 0
        if has_user:
            n += admin.execute(f'select count(*) from agentmem."{table}" where tenant_id = %s and user_id = %s',
                               (tenant, user)).fetchone()[0]
        for col in texts or []:
            n += admin.execute(f'select count(*) from agentmem."{table}" where "{col}"::text like %s',
                               (f"%{marker}%",)).fetchone()[0]
        for col in vector_cols or []:
            for v in vectors:
                n += admin.execute(
                    f'select count(*) from agentmem."{table}" where vector_dims("{col}") = %s '
                    f'and "{col}" <=> %s < 1e-6', (len(v), v)).fetchone()[0]
        if n:
            found[table] = n
    return found


def snapshot(admin) -> dict[str, list]:
    """Every row of every table, as text, for checking that nobody else was touched."""
    out = {}
    for table, *_ in catalogue(admin):
        out[table] = sorted(r[0] for r in admin.execute(f'select t::text from agentmem."{table}" t').fetchall())
    return out


def test_forget_user_leaves_nothing_that_refers_to_the_user_and_touches_no_one_else(app, admin, connect, app_url):
    mine = populate(app, "u1", "zorkmid")
    populate(app, "u2", "quuxly")
    populate(connect(app_url, tenant="globex"), "u1", "blorpy")  # same user id, another tenant
    assert rows_about(admin, "acme", "u1", "zorkmid", mine["vectors"])  # the scan does find the user's rows
    before = snapshot(admin)

    receipt = app.execute("select * from agentmem.forget_user(user_id => 'u1')").fetchone()
    assert rows_about(admin, "acme", "u1", "zorkmid", mine["vectors"]) == {}
    # a search with the user's exact vectors finds nothing
    for v in mine["vectors"]:
        assert app.execute("select count(*) from agentmem.search_messages(user_id => 'u1', query_embedding => %s)",
                           (v,)).fetchone() == (0,)
        assert app.execute("select count(*) from agentmem.recall_facts(user_id => 'u1', query_embedding => %s)",
                           (v,)).fetchone() == (0,)
    # every other user's row is exactly as it was
    after = snapshot(admin)
    for table, rows in before.items():
        for r in rows:
            if "quuxly" in r or "blorpy" in r or "globex" in r or ",u2," in r:
                assert r in after[table], (table, r)
    assert len(after["embedding_cache"]) == len(before["embedding_cache"]) - 2
    assert len(after["messages"]) == len(before["messages"]) - 6

    removed = receipt[3]
    assert receipt[2] == "user" and removed["messages"] == 6 and removed["conversations"] == 2
    assert removed["message_embeddings"] == 6 and removed["facts"] == 2 and removed["fact_history"] == 1
    assert removed["cache_entries"] == 1 and removed["cache_hits"] == 1 and removed["embedding_cache"] == 2
    assert removed["retrievals"] == 1
    # the receipt holds no content and no identifier of the user
    logged = admin.execute("select e::text from agentmem.erasure_log e").fetchone()[0]
    assert "u1" not in logged.replace("acme", "") and "zorkmid" not in logged


def test_forget_user_of_a_user_whose_only_trace_is_a_looked_up_question_leaves_no_cached_embedding(app, admin):
    """zed never wrote anything: one cache_lookup, its question embedded through the embedding cache (as
    the driver does, with the model's query prefix). forget_user('zed') leaves no embedding-cache row of
    the question, and another user's cached text stays."""
    model = "all-minilm"
    prefix = admin.execute("select query_prefix from agentmem.models where model = %s", (model,)).fetchone()[0]
    question = "what is the wifi password of the office?"
    app.execute("select agentmem.embedding_cache_store(model => %s, texts => %s, embeddings => %s)",
                (model, [prefix + question, "someone else's text"],
                 [vec(prefix + question, 384), vec("someone else's text", 384)]))
    app.execute("select * from agentmem.cache_lookup(question => %s, question_embedding => %s, model => %s, "
                "user_id => 'zed')", (question, vec(prefix + question, 384), model))
    assert count(admin, "cache_hits", "user_id = 'zed'") == 1 and count(admin, "embedding_cache") == 2
    receipt = app.execute("select rows_removed from agentmem.forget_user(user_id => 'zed')").fetchone()[0]
    assert receipt["embedding_cache"] == 1 and receipt["cache_hits"] == 1
    assert count(admin, "cache_hits") == 0 and count(admin, "embedding_cache") == 1
    assert app.execute("select count(*) from agentmem.embedding_cache_lookup(model => %s, texts => %s) "
                       "where embedding is not null", (model, [prefix + question])).fetchone()[0] == 0


def test_forget_user_covers_a_table_added_later(app, admin):
    admin.execute("create table agentmem.later_notes (tenant_id text not null, user_id text, note text)")
    admin.execute("alter table agentmem.later_notes enable row level security")
    admin.execute("create policy tenant_isolation on agentmem.later_notes using "
                  "(tenant_id = agentmem.current_tenant())")
    admin.execute("grant select, delete on agentmem.later_notes to agentmem_owner")  # as sql/90_grants.sql would
    admin.execute("insert into agentmem.later_notes values ('acme', 'u1', 'zorkmid note'), "
                  "('acme', 'u2', 'other'), ('globex', 'u1', 'other tenant')")
    receipt = app.execute("select rows_removed from agentmem.forget_user(user_id => 'u1')").fetchone()[0]
    assert receipt["later_notes"] == 1
    assert admin.execute("select tenant_id, user_id from agentmem.later_notes order by 1, 2").fetchall() == [
        ("acme", "u2"), ("globex", "u1")]


def test_forget_user_of_nobody_returns_zeros_and_bad_input_is_refused(app, admin):
    receipt = app.execute("select scope, rows_removed from agentmem.forget_user(user_id => 'ghost')").fetchone()
    assert receipt[0] == "user" and set(receipt[1].values()) == {0}
    assert sqlstate_of(app, "select agentmem.forget_user(user_id => '')") == "AM020"
    assert sqlstate_of(app, "select agentmem.forget_user(user_id => null)") == "AM020"
    assert count(admin, "erasure_log") == 1


def test_forget_conversation_cascades_and_prunes_facts(app, admin):
    data = populate(app, "u1", "zorkmid")
    conv0, conv1 = data["conversations"]
    receipt = app.execute("select scope, rows_removed from agentmem.forget_conversation(conversation_id => %s)",
                          (conv0,)).fetchone()
    assert receipt[0] == "conversation"
    assert receipt[1]["messages"] == 3 and receipt[1]["message_embeddings"] == 3
    assert receipt[1]["cache_entries"] == 1 and receipt[1]["cache_hits"] == 1
    assert receipt[1]["retrievals"] == 1 and count(admin, "retrievals", "conversation_id = %s", (conv0,)) == 0
    assert count(admin, "messages", "conversation_id = %s", (conv0,)) == 0
    assert count(admin, "message_embeddings", "conversation_id = %s", (conv0,)) == 0
    assert count(admin, "conversations") == 1 and count(admin, "messages") == 3
    # home_city (sources m1 now) had every source in conv0: gone; diet (m2): gone
    # The history entry of Lyon (m0, m3) loses m0 and keeps m3.
    facts = admin.execute("select subject, source_message_ids from agentmem.facts").fetchall()
    assert facts == []
    assert count(admin, "fact_history") == 0  # went with its fact
    assert count(admin, "cache_entries") == 0 and count(admin, "cache_hits") == 0
    assert count(admin, "embedding_cache", "true") == 1  # the fact text's cached embedding stays
    assert sqlstate_of(app, "select agentmem.forget_conversation(conversation_id => %s)", (conv0,)) == "AM030"
    assert conv1


def test_forget_conversation_keeps_facts_with_other_sources(app, admin):
    conv_a = app.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    conv_b = app.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    a, b = store(app, conv_a, "user", "I live in Lyon"), store(app, conv_b, "user", "Lyon is home")
    only_a = store(app, conv_a, "user", "I am vegan")
    upsert(app, "u1", "home_city", "The user lives in Lyon", [a, b])
    upsert(app, "u1", "diet", "The user is vegan", [only_a])
    upsert(app, "u1", "diet", "The user eats fish", [b])  # history: vegan (only_a) replaced
    receipt = app.execute("select rows_removed from agentmem.forget_conversation(conversation_id => %s)",
                          (conv_a,)).fetchone()[0]
    assert receipt["facts"] == 0 and receipt["facts_unlinked"] == 1 and receipt["fact_history"] == 1
    assert admin.execute("select subject, source_message_ids from agentmem.facts order by 1").fetchall() == [
        ("diet", [b]), ("home_city", [b])]
    assert count(admin, "fact_history") == 0  # "vegan" lived only as long as its source


def test_another_tenants_conversation_is_not_found(app, connect, app_url, admin):
    other = connect(app_url, tenant="globex")
    conv = other.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    assert sqlstate_of(app, "select agentmem.forget_conversation(conversation_id => %s)", (conv,)) == "AM030"
    assert count(admin, "conversations") == 1 and count(admin, "erasure_log") == 0


def test_erasure_while_the_users_messages_are_written_leaves_no_orphan(app_url, connect, admin):
    setup = connect(app_url, tenant="acme")
    convs = [setup.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0] for _ in range(4)]
    stop = threading.Event()
    written, refused, other = [], [], []

    def writer(conv):
        conn = connect(app_url, tenant="acme")
        i = 0
        while not stop.is_set():
            try:
                written.append(store(conn, conv, "user", f"zorkmid {i}"))
            except psycopg.Error as exc:
                (refused if exc.sqlstate == "AM030" else other).append(exc)
                return
            i += 1

    threads = [threading.Thread(target=writer, args=(c,)) for c in convs]
    for t in threads:
        t.start()
    # a writer that dies early ends the wait instead of hanging it
    wait_until(lambda: len(written) >= 20 or refused or other, timeout=60, what="20 messages written")
    assert not refused and not other, (refused, other)  # nothing refused before the erasure
    eraser = connect(app_url, tenant="acme")
    eraser.execute("select agentmem.forget_user(user_id => 'u1')")
    stop.set()
    for t in threads:
        t.join()
    assert not other, other
    assert len(refused) == 4  # every writer found its conversation gone
    for table in ("conversations", "messages", "message_embeddings"):
        assert count(admin, table, "user_id = 'u1'") == 0, table
    assert count(admin, "message_embeddings e", "not exists (select from agentmem.messages m "
                 "where m.tenant_id = e.tenant_id and m.message_id = e.message_id)") == 0


# -- under concurrent writes -------------------------------------------------------------------------
#
# Every function that writes rows of a user takes the user's advisory lock shared (lock_user,
# sql/04_forget_helpers.sql); forget_user takes it exclusive. The tests hold writes of every kind open, start
# forget_user, see it wait, let the writes commit, and then find nothing of the user.

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
