"""sql/11_vector_search.sql: the one vector search of messages, facts and the answer cache.

Read from the catalogue (pg_proc): no function but agentmem_private.vector_distance writes a search's
distance, the three searches call agentmem_private.vector_search, and the engine's helpers are called
with named arguments. Counted per call (track_functions): one vector_search and at most one look-up of
the tenant's own index per search, on every path.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from helpers import bulk_load

TINY = "tiny-vector-search"
DISTANCE = re.compile(r"<=>|<->|<#>|<\+>|<~>|<%>")  # pgvector's distance operators
# Functions that compare two vectors they hold, which is no search: they read no index.
NOT_A_SEARCH = {
    "agentmem_private.vector_distance",  # the one place
    "agentmem.upsert_fact",  # a fact's stored embedding against its new one (near-duplicate merge)
    "agentmem_private.apply_fact_vector",  # the same check, when the new version's vector arrives later
}

# Functions whose body the install generates (sql/11_vector_search.sql) with vector_distance's text of a
# path: every distance they hold is that text, and the generator's own source writes none.
GENERATED = {"agentmem_private.exact_scan": "exact scan"}
SQL = Path(__file__).resolve().parent.parent / "sql" / "11_vector_search.sql"


def bodies(admin) -> dict[str, str]:
    return dict(admin.execute(
        "select n.nspname || '.' || p.proname, string_agg(p.prosrc, E'\\n') from pg_proc as p "
        "join pg_namespace as n on n.oid = p.pronamespace where n.nspname in ('agentmem', 'agentmem_private') "
        "group by 1").fetchall())


def test_no_function_but_vector_distance_writes_a_search_distance(admin):
    found = bodies(admin)
    assert DISTANCE.search(found["agentmem_private.vector_distance"])
    writers = sorted(name for name, body in found.items()
                     if DISTANCE.search(body) and name not in NOT_A_SEARCH and name not in GENERATED)
    assert writers == [], ("these functions write a distance of their own; call "
                           f"agentmem_private.vector_distance (or vector_search) instead: {writers}")
    for name in ("agentmem.search_messages", "agentmem.recall_facts", "agentmem.cache_lookup"):
        assert "agentmem_private.vector_search(" in found[name], name
    # the engine's helpers are called with named arguments, never a row of positional booleans
    for name, body in found.items():
        for helper in ("vector_search", "vector_distance", "hnsw_ef_search"):
            for call in re.finditer(rf"agentmem_private\.{helper}\(", body):
                head = body[call.end():call.end() + 200]
                assert "=>" in head.split(")")[0] or "=>" in head[:120], (name, helper, head)


@pytest.fixture
def tenant_with_indexes(admin, app):
    """Tenant acme (alice: 40 messages, 30 facts, 30 cache entries) with its own indexes of each table."""
    admin.execute("select agentmem.register_model(model => %s, dimension => 8)", (TINY,))
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((40, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    bulk_load(admin, [("acme", "alice")] * 40, vecs, model=TINY, rebuild_index=False)
    bulk_load(admin, [("acme", "bob")] * 5, vecs[:5], model=TINY, rebuild_index=False)
    app.execute("select agentmem.set_tenant(tenant_id => 'acme')")
    for i, v in enumerate(vecs[:30]):
        app.execute("select * from agentmem.upsert_fact(user_id => 'alice', subject => %s, fact => %s, "
                    "embedding => %s, model => %s)", (f"s{i}", f"fact {i}", v, TINY))
        app.execute("select * from agentmem.cache_store(question => %s, question_embedding => %s, "
                    "answer => %s, model => %s)", (f"what about thing {i}", v, f"answer {i}", TINY))
    for table in ("message_embeddings", "facts", "cache_entries"):
        admin.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s, table_name => %s)",
                      (TINY, table))
    return vecs


SEARCHES = {
    "messages": "select count(*) from agentmem.search_messages(user_id => 'alice', query_embedding => %s, "
                "k => 5, model => %s)",
    "facts": "select count(*) from agentmem.recall_facts(user_id => 'alice', query_embedding => %s, "
             "k => 5, model => %s)",
    "cache": "select count(*) from agentmem.cache_lookup(question => 'what about thing 3 now', "
             "question_embedding => %s, model => %s)",
}


@pytest.mark.parametrize("limit", ["100000", "0"])  # an exact scan; the tenant's own indexes
@pytest.mark.parametrize("search", list(SEARCHES))
def test_each_search_runs_the_one_path_and_looks_up_the_tenant_index_once(admin, tenant_with_indexes, search,
                                                                         limit):
    calls = ("select pg_stat_get_xact_function_calls('agentmem_private.vector_search'::regproc), "
             "pg_stat_get_xact_function_calls('agentmem_private.has_tenant_index'::regproc)")
    with admin.transaction():
        admin.execute("set local track_functions = 'all'")
        admin.execute(f"set local agentmem.exact_search_max_rows = {limit}")
        admin.execute("select agentmem.set_tenant(tenant_id => 'acme', local => true)")
        admin.execute(SEARCHES[search], (tenant_with_indexes[3], TINY))
        searched, looked_up = (n or 0 for n in admin.execute(calls).fetchone())
    assert searched == 1
    # the exact scan needs no index (but for a user who may be alone in a tenant with its own index)
    assert looked_up == (1 if limit == "0" or search == "messages" else 0)


def test_generated_static_statements_hold_vector_distances_text_only(admin):
    found = bodies(admin)
    for name, path in GENERATED.items():
        text = admin.execute("select agentmem_private.vector_distance(path => %s, dimension => 8)",
                             (path,)).fetchone()[0]
        body = found[name]
        assert text in body, name
        # each distance operator of the body is one of that text's
        assert len(DISTANCE.findall(body)) == body.count(text) * len(DISTANCE.findall(text)), name
    source = SQL.read_text()
    generator = source[source.index("do $generate$"):source.index("$generate$;")]
    assert not DISTANCE.search(generator), "the generator writes a distance: take it from vector_distance"
    assert "agentmem_private.vector_distance(" in generator and "agentmem_private.vector_search_scope(" in generator


@pytest.mark.parametrize("table", ["message_embeddings", "facts"])
def test_static_exact_scan_answers_as_the_dynamic_statements(admin, tenant_with_indexes, table):
    """A user's search through exact_scan's prepared statements and through vector_search's own (a window
    that keeps every row sends it there) find the same rows at the same distances, past the sixth call
    (when PL/pgSQL may switch to a generic plan)."""
    search = ("select array_agg(n.id order by n.distance, n.id), array_agg(n.distance order by n.distance, n.id) "
              "from agentmem_private.vector_search(table_name => %s, tenant_id => 'acme', model => %s, "
              "dimension => 8, query_embedding => %s, k => 7, user_id => 'alice', since => {}) as n")
    calls = "select pg_stat_get_xact_function_calls('agentmem_private.exact_scan'::regproc)"
    with admin.transaction():
        admin.execute("set local track_functions = 'all'")
        for v in list(tenant_with_indexes[:8]) * 2:
            static = admin.execute(search.format("null"), (table, TINY, v)).fetchone()
            dynamic = admin.execute(search.format("'-infinity'"), (table, TINY, v)).fetchone()
            assert static[0] is not None and len(static[0]) == 7
            assert static[0] == dynamic[0]
            assert static[1] == pytest.approx(dynamic[1])
        assert admin.execute(calls).fetchone()[0] == 16  # the static path only, once a search
