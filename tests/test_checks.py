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
