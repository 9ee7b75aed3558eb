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


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("user_id", [None, "", "   ", "u" * 257])
def test_every_function_refuses_the_same_bad_user_ids(app, admin, call, user_id):
    with pytest.raises(psycopg.Error) as info:
        app.execute(call, (user_id,))
    assert info.value.sqlstate == "AM020"
    for table in ("conversations", "facts", "erasure_log"):
        assert admin.execute(f"select count(*) from agentmem.{table}").fetchone() == (0,)


@pytest.mark.parametrize("call", CALLS)
def test_a_256_character_user_id_is_accepted_everywhere(app, call):
    app.execute(call, ("u" * 256,))
