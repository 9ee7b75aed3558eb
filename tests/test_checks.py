"""One rule for a user id everywhere: conversations, facts and erasure refuse the same values."""

from __future__ import annotations

import psycopg
import pytest

VEC = "[" + ",".join(["0.1"] * 768) + "]"
CALLS = [
    "select agentmem.start_conversation(user_id => %s)",
    "select * from agentmem.upsert_fact(user_id => %s, subject => 's', fact => 'f', embedding => '" + VEC
    + "'::vector, source_message_ids => '{}')",
    "select * from agentmem.recall_facts(user_id => %s, query_embedding => '" + VEC + "'::vector)",
    "select * from agentmem.forget_user(user_id => %s)",
]
# what each call leaves behind for an accepted user id: (table, rows of that user, rows in all)
WRITES = [("conversations", 1, 1), ("facts", 1, 1), ("facts", 0, 0), ("erasure_log", None, 1)]


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("user_id", [None, "", "   ", "u" * 257])
def test_every_function_refuses_the_same_bad_user_ids(app, admin, call, user_id):
    with pytest.raises(psycopg.Error) as info:
        app.execute(call, (user_id,))
    assert info.value.sqlstate == "AM020"
    for table in ("conversations", "facts", "erasure_log"):
        assert admin.execute(f"select count(*) from agentmem.{table}").fetchone() == (0,)


@pytest.mark.parametrize("call, writes", list(zip(CALLS, WRITES)))
def test_a_256_character_user_id_is_accepted_everywhere(app, admin, call, writes):
    user_id = "u" * 256
    rows = app.execute(call, (user_id,)).fetchall()
    table, of_user, total = writes
    if "recall_facts" in call:
        assert rows == []  # accepted, and the user has no facts yet
    else:
        assert len(rows) == 1 and rows[0][0] is not None
    if of_user is not None:
        assert admin.execute(f"select count(*) from agentmem.{table} where user_id = %s",
                             (user_id,)).fetchone() == (of_user,)
    assert admin.execute(f"select count(*) from agentmem.{table}").fetchone() == (total,)


# -- id arguments: a uuid, or its text; anything else AM020 naming the argument -----------------------

# Every public function taking an id, {id} standing for the id argument.
ID_CALLS = [
    ("conversation_id", "select * from agentmem.store_message(conversation_id => {id}, role => 'user', "
                        "content => 'hi', embedding => '" + VEC + "'::vector)"),
    ("conversation_id", "select * from agentmem.store_messages(conversation_id => {id}, roles => '{user}', "
                        "contents => '{hi}', embeddings => array['" + VEC + "'::vector])"),
    ("conversation_id", "select * from agentmem.recent_messages(conversation_id => {id})"),
    ("conversation_id", "select agentmem.set_summary(conversation_id => {id}, summary => 's', through_index => 0)"),
    ("conversation_id", "select * from agentmem.short_term_context(conversation_id => {id})"),
    ("conversation_id", "select * from agentmem.search_messages(user_id => 'alice', query_text => 'hi', "
                        "conversation_id => {id})"),
    ("conversation_id", "select * from agentmem.search_with_context(user_id => 'alice', query_text => 'hi', "
                        "conversation_id => {id})"),
    ("message_id", "select * from agentmem.context_window(message_id => {id})"),
    ("message_id", "select agentmem.record_retrieval(message_id => {id}, doc_ids => '{a}')"),
    ("conversation_id", "select * from agentmem.topic_shift(conversation_id => {id})"),
    ("conversation_id", "select agentmem.unseen_docs(conversation_id => {id}, doc_ids => '{a}')"),
    ("conversation_id", "select * from agentmem.cache_store(question => 'q', question_embedding => '" + VEC
                        + "'::vector, answer => 'a', conversation_id => {id})"),
    ("hit_id", "select agentmem.review_hit(hit_id => {id}, correct => true)"),
    ("fact_id", "select * from agentmem.fact_history(fact_id => {id})"),
    ("conversation_id", "select * from agentmem.forget_conversation(conversation_id => {id})"),
]
TABLES = ("conversations", "messages", "message_embeddings", "retrievals", "cache_entries", "cache_hits",
          "facts", "erasure_log")


def _rows(admin) -> dict[str, int]:
    return {t: admin.execute(f"select count(*) from agentmem.{t}").fetchone()[0] for t in TABLES}


def _with_id(call: str, id_sql: str) -> str:
    return call.replace("{id}", id_sql)


@pytest.mark.parametrize("argument, call", ID_CALLS, ids=[c.split("(")[0].split(".")[-1] + "-" + a
                                                           for a, c in ID_CALLS])
def test_a_malformed_id_is_am020_naming_the_argument_and_writes_nothing(app, admin, argument, call):
    app.execute("select agentmem.start_conversation(user_id => 'alice')")
    before = _rows(admin)
    # psql's way: an untyped literal in the statement; a driver's: an untyped parameter (psycopg's str,
    # node-postgres), a text or varchar one (JDBC's setString); and a number.
    for id_sql, params in [("'abc'", None), ("''", None), ("'{12345}'", None), ("%s", ("not-a-uuid",)),
                           ("%s::text", ("1234",)), ("%s::varchar", ("x" * 500,)), ("42", None)]:
        with pytest.raises(psycopg.Error) as info:
            app.execute(_with_id(call, id_sql), params)
        assert info.value.sqlstate == "AM020", (id_sql, info.value)
        assert info.value.diag.message_primary.startswith(f"{argument} is not a UUID"), info.value
        assert len(info.value.diag.message_primary) < 200  # a long value is cut, not echoed whole
    assert _rows(admin) == before


def test_an_id_is_taken_as_a_uuid_or_as_its_text(app, admin):
    cid = app.execute("select agentmem.start_conversation(user_id => 'alice')").fetchone()[0]
    app.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => 'hi', "
                "embedding => '" + VEC + "'::vector)", (cid,))  # a uuid parameter (psycopg's UUID)
    for id_sql, params in [("%s", (str(cid),)), ("%s::text", (str(cid),)), ("%s::varchar", (str(cid),)),
                           (f"'{cid}'", None), (f"'{{{str(cid).upper()}}}'", None),
                           (f"'{cid.hex}'", None), ("%s::uuid", (cid,))]:
        rows = app.execute(f"select content from agentmem.recent_messages(conversation_id => {id_sql})",
                           params).fetchall()
        assert rows == [("hi",)], id_sql
    # an id the API returned feeds the API directly
    assert app.execute("select count(*) from agentmem.recent_messages(conversation_id => (select conversation_id "
                       "from agentmem.search_messages(user_id => 'alice', query_text => 'hi', k => 1)))"
                       ).fetchone() == (1,)
    # NULL is still "not found" (AM030), as before
    with pytest.raises(psycopg.Error) as info:
        app.execute("select * from agentmem.recent_messages(conversation_id => null)")
    assert info.value.sqlstate == "AM030"


def test_psql_itself_gets_am020_for_a_malformed_id(server, app_url):
    import subprocess
    done = subprocess.run(
        [server.bin("psql"), app_url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose",
         "-c", "select agentmem.set_tenant(tenant_id => 'acme')",
         "-c", "select * from agentmem.recent_messages(conversation_id => 'abc')"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "AM020" in done.stderr and "conversation_id is not a UUID: 'abc'" in done.stderr, done.stderr
    assert "invalid input syntax for type uuid" not in done.stderr


def test_every_id_argument_works_as_text_through_the_whole_body(app):
    """Each function, given real ids as text (JDBC's setString, an untyped literal): the body compares
    only the uuid it read, never the text parameter (a leftover would be 42883 uuid = text)."""
    cid = app.execute("select agentmem.start_conversation(user_id => 'alice')").fetchone()[0]
    mid = app.execute("select message_id from agentmem.store_message(conversation_id => %s, role => 'user', "
                      "content => 'hi', embedding => '" + VEC + "'::vector)", (cid,)).fetchone()[0]
    ids = {"conversation_id": str(cid), "message_id": str(mid)}
    for argument, call in ID_CALLS:
        for id_sql, params in [("%s::text", (ids.get(argument, "00000000-0000-0000-0000-000000000000"),)),
                               (f"'{ids.get(argument, '00000000-0000-0000-0000-000000000001')}'", None)]:
            try:
                app.execute(_with_id(call, id_sql), params).fetchall()
            except psycopg.Error as exc:  # only "not found" (a random hit or fact id; the forgotten one)
                assert exc.sqlstate == "AM030", (call, exc)
