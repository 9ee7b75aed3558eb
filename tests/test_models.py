"""The embedding model registry and the embedding checks every table shares."""

from __future__ import annotations

import psycopg
import pytest


def sqlstate_of(conn, query, params=None) -> str:
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params)
    return info.value.sqlstate


def test_default_models_are_registered(app):
    rows = app.execute("select model, dimension, document_prefix, query_prefix "
                       "from agentmem.get_model(model => 'nomic-embed-text')").fetchall()
    assert rows == [("nomic-embed-text", 768, "search_document: ", "search_query: ")]
    assert app.execute("select dimension from agentmem.get_model(model => 'all-minilm')").fetchone() == (384,)


def test_unknown_model_raises_am011_listing_the_known_ones(app):
    with pytest.raises(psycopg.Error) as info:
        app.execute("select * from agentmem.get_model(model => 'no-such-model')")
    assert info.value.sqlstate == "AM011"
    assert "nomic-embed-text" in info.value.diag.message_detail


def test_register_model_builds_a_partial_hnsw_index_per_embedding_table(admin):
    admin.execute("select agentmem.register_model(model => 'tiny-embed', dimension => 8)")
    tables = admin.execute("""
        select c.relname from pg_class c
         where c.relnamespace = 'agentmem'::regnamespace and c.relkind = 'r'
           and exists (select from pg_attribute where attrelid = c.oid and attname = 'embedding')
           and exists (select from pg_attribute where attrelid = c.oid and attname = 'model')""").fetchall()
    for (table,) in tables:
        idx = admin.execute("select indexdef from pg_indexes where schemaname = 'agentmem' and tablename = %s "
                            "and indexdef like %s", (table, "%tiny-embed%")).fetchall()
        assert len(idx) == 1 and "hnsw" in idx[0][0] and "vector(8)" in idx[0][0], (table, idx)
    # registering again is idempotent, and a changed dimension is refused
    admin.execute("select agentmem.register_model(model => 'tiny-embed', dimension => 8, query_prefix => 'q: ')")
    assert admin.execute("select query_prefix from agentmem.get_model(model => 'tiny-embed')").fetchone() == ("q: ",)
    assert sqlstate_of(admin, "select agentmem.register_model(model => 'tiny-embed', dimension => 9)") == "AM031"


@pytest.mark.parametrize("model, dim", [("bad name!", 8), ("ok-name", 0), ("ok-name", 2001), (None, 8)])
def test_register_model_rejects_bad_input(admin, model, dim):
    assert sqlstate_of(admin, "select agentmem.register_model(model => %s, dimension => %s)", (model, dim)) == "AM020"
    assert admin.execute("select count(*) from agentmem.models where model = 'ok-name'").fetchone() == (0,)


def test_app_role_may_not_register_models(app):
    assert sqlstate_of(app, "select agentmem.register_model(model => 'x', dimension => 8)") == "42501"


@pytest.mark.parametrize("vector, code", [
    ("[1,2,3]", "AM010"),                   # wrong dimension for all-minilm
    ("[" + ",".join(["0"] * 384) + "]", "AM010"),   # zero vector
    ("[" + ",".join(["NaN"] * 384) + "]", "22000"),  # pgvector refuses NaN on input
    ("[" + ",".join(["Infinity"] * 384) + "]", "22000"),
])
def test_check_embedding_refuses_bad_vectors(admin, vector, code):
    assert sqlstate_of(admin, "select agentmem_private.check_embedding('all-minilm', %s::vector)", (vector,)) == code
