"""Forgetting: forget_user and forget_conversation, with completeness proven from the catalogue."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest

import agentmem
from agentmem.client import Memory
from helpers_facts import count, sqlstate_of, upsert, vec


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
    while len(written) < 20:
        pass
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


def test_driver_forget_methods(app_url, admin):
    with Memory.connect(app_url, tenant="acme", max_size=1) as mem:
        conv = mem._call("select agentmem.start_conversation(user_id => 'u1')", fetch="scalar")
        receipt = mem.forget_conversation(conv)
        assert receipt.scope == "conversation" and receipt.rows_removed["conversations"] == 1
        receipt = mem.forget_user("u1")
        assert receipt.scope == "user" and receipt.erasure_id and receipt.erased_at
        with pytest.raises(agentmem.NotFound):
            mem.forget_conversation(uuid.uuid4())
    assert count(admin, "erasure_log") == 2
