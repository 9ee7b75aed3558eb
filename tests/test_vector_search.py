"""sql/11_vector_search.sql: the one vector search of messages, facts and the answer cache.

Read from the catalogue (pg_proc): no function but agentmem_private.vector_distance writes a search's
distance, the three searches call agentmem_private.vector_search, and the engine's helpers are called
with named arguments. Counted per call (track_functions): one vector_search and at most one look-up of
the tenant's own index per search, on every path. At scale, through search_messages: the true nearest
messages for every user size, and the path each takes (exact scan, shared index, the tenant's own
indexes) as the plans show it.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import psycopg
import pytest

from helpers import bulk_load, clustered_vectors, explained, path_of, plans_of, random_unit

TINY = "tiny-vector-search"
DISTANCE = re.compile(r"<=>|<->|<#>|<\+>|<~>|<%>")  # pgvector's distance operators
# Functions that compare two vectors they hold, which is no search: they read no index.
NOT_A_SEARCH = {
    "agentmem_private.vector_distance",  # the one place
    "agentmem_private.cosine_distance",  # pgvector's <=> qualified with its schema, for the two below
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
    for name in ("agentmem_private.search_messages_ranked", "agentmem.recall_facts", "agentmem_private.cache_nearest"):
        assert "agentmem_private.vector_search(" in found[name], name
    # the cache's small keys: exact_scan's static statements, its large ones vector_search
    assert "agentmem_private.cache_nearest(" in found["agentmem.cache_lookup"]
    assert "agentmem_private.exact_scan(" in found["agentmem_private.cache_nearest"]
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
             "pg_stat_get_xact_function_calls('agentmem_private.has_tenant_index'::regproc), "
             "pg_stat_get_xact_function_calls('agentmem_private.exact_scan'::regproc)")
    with admin.transaction():
        admin.execute("set local track_functions = 'all'")
        admin.execute(f"set local agentmem.exact_search_max_rows = {limit}")
        admin.execute("select agentmem.set_tenant(tenant_id => 'acme', local => true)")
        admin.execute(SEARCHES[search], (tenant_with_indexes[3], TINY))
        searched, looked_up, scanned = (n or 0 for n in admin.execute(calls).fetchone())
    if search == "cache" and limit != "0":
        # a cache key under the limit: counted and scanned by exact_scan alone (agentmem_private.cache_nearest)
        assert (searched, scanned) == (0, 1)
    else:
        assert searched == 1
    # the exact scan needs no index (but for a user who may be alone in a tenant with its own index)
    assert looked_up == (1 if limit == "0" or search == "messages" else 0)


# --- the path for every user size, on the hardest data (random 768-d vectors) -----------------------------
#
# Users holding 0.5%, 1%, 5% and 30% of 20,000 random unit vectors in the model's index each get k rows
# with recall@10 >= 0.95 against an exact scan; the plan of the function's own statements (auto_explain,
# as the application role) shows the path each takes: an exact scan by default (up to
# agentmem.exact_search_max_rows, 6,000 rows at 768 dimensions), the shared HNSW index or the tenant's own
# one when the setting is lower.

N, K, DIM, MODEL = 20_000, 10, 768, "nomic-embed-text"
SIZES = {"half": 100, "one": 200, "five": 1_000, "thirty": 6_000}  # 0.5%, 1%, 5%, 30% of N
SEARCH = ("select message_id from agentmem.search_messages(user_id => 'alice', query_embedding => %s, "
          "k => %s, model => %s)")


def counted(plans: list[str]) -> bool:
    """Whether the search counted the user's message embeddings (agentmem_private.count_user_rows)."""
    return any("select pg_catalog.count(*)" in p and "agentmem.message_embeddings" in p for p in plans)


def recall(app, tenant: str, mine: np.ndarray, my_ids: list, queries: np.ndarray) -> float:
    app.execute("select agentmem.set_tenant(tenant_id => %s)", (tenant,))
    out = []
    for q in queries:
        exact = {my_ids[i] for i in np.argsort(-(mine @ q))[:K]}
        got = [r[0] for r in app.execute(SEARCH, (q, K, MODEL)).fetchall()]
        assert len(got) == K and set(got) <= set(my_ids)  # k rows, all the user's own
        out.append(len(exact & set(got)) / K)
    return float(np.mean(out))


def test_every_user_size_gets_its_true_nearest_messages_and_the_plan_says_how(admin, app):
    vectors = random_unit(N, DIM, seed=10)
    rows = [(t, "alice") for t, n in SIZES.items() for _ in range(n)]
    rows += [(f"other{i % 7}", "alice") for i in range(N - len(rows))]
    order = np.random.default_rng(1).permutation(N)  # users' rows interleaved in the heap
    rows = [rows[i] for i in order]
    ids = bulk_load(admin, rows, vectors, model=MODEL)
    assert admin.execute("select count(*) from agentmem.message_embeddings where model = %s",
                         (MODEL,)).fetchone() == (N,)
    rng = np.random.default_rng(3)
    own = {}
    for tenant in SIZES:
        mine_at = [i for i, (t, _, _) in enumerate(ids) if t == tenant]
        own[tenant] = (vectors[mine_at], [ids[i][2] for i in mine_at])

    def queries(tenant: str, n: int = 12) -> np.ndarray:
        mine = own[tenant][0]  # near the user's own messages, as real queries are
        q = mine[rng.integers(0, len(mine), n)] + rng.standard_normal((n, DIM)).astype(np.float32) * 0.02
        return q / np.linalg.norm(q, axis=1, keepdims=True)

    index_of = {t: admin.execute("select agentmem_private.tenant_index_name('message_embeddings', %s, %s)",
                                 (t, MODEL)).fetchone()[0] for t in SIZES}
    # By default (6,000 rows at 768 dimensions) every one of these sizes is scanned exactly.
    for tenant in SIZES:
        qs = queries(tenant)
        assert recall(app, tenant, *own[tenant], qs) >= 0.95, tenant
        assert path_of(explained(admin, tenant, SEARCH, (qs[0], K, MODEL)), index_of[tenant]) == "exact", tenant

    # With the setting below their sizes, the 5% user goes through the shared index (a filtered
    # slice of it: on random 768-d vectors its recall is why the default scans it exactly) ...
    qs = queries("five")
    plans = explained(admin, "five", SEARCH, (qs[0], K, MODEL), setting=500)
    assert path_of(plans, index_of["five"]) == "shared index"
    assert counted(plans)  # its rows, for the share of the index it filters
    app.execute("set agentmem.exact_search_max_rows = 500")
    app.execute("select agentmem.set_tenant(tenant_id => 'five')")
    assert len(app.execute(SEARCH, (qs[0], K, MODEL)).fetchall()) == K

    # ... and the 30% user, once its tenant has indexes of its own, through them. On random vectors
    # an HNSW pass comes back far (no neighbour is near), as create_tenant_index measured on the
    # tenant's rows: its searches read the exact index straight away.
    assert admin.execute("select agentmem.create_tenant_index(tenant_id => 'thirty', model => %s)",
                         (MODEL,)).fetchone() == (index_of["thirty"],)
    exact_index = index_of["thirty"].removesuffix("_hnsw") + "_exact"
    assert admin.execute("select obj_description(%s::regclass, 'pg_class')", (f"agentmem.{exact_index}",)) \
        .fetchone()[0].startswith("agentmem first pass: exact (measured ")
    qs = queries("thirty")
    assert recall(app, "thirty", *own["thirty"], qs) >= 0.95  # (agentmem.exact_search_max_rows 500 as above)
    plans = explained(admin, "thirty", SEARCH, (qs[0], K, MODEL), setting=500)
    assert path_of(plans, index_of["thirty"]) == "exact index"
    assert not counted(plans)  # alone in a tenant with its own index: its rows are the index's
    # Measured again as if neighbours came near (a threshold no distance reaches): the first pass is
    # kept, comes back far at the search's own threshold, and the exact index is read after it.
    admin.execute("set agentmem.ef_escalate_distance = 2")
    assert admin.execute("select * from agentmem.measure_tenant_index(tenant_id => 'thirty', model => %s)",
                         (MODEL,)).fetchone() == (32, 0, "hnsw")
    admin.execute("reset agentmem.ef_escalate_distance")
    assert path_of(explained(admin, "thirty", SEARCH, (qs[0], K, MODEL), setting=500), index_of["thirty"]) \
        == "own index, then exact index"
    assert recall(app, "thirty", *own["thirty"], qs) >= 0.95
    assert admin.execute("select * from agentmem.measure_tenant_index(tenant_id => 'thirty', model => %s)",
                         (MODEL,)).fetchone() == (32, 32, "exact")
    # its indexes are not used by another tenant, whose search stays on the shared index
    assert path_of(explained(admin, "five", SEARCH, (qs[0], K, MODEL), setting=500), index_of["five"]) \
        == "shared index"
    # without the exact index (bigger than agentmem.exact_index_max_rows), a second HNSW pass at full
    # ef_search, and still the true neighbours
    app.execute("set agentmem.exact_index_max_rows = 5000")
    assert path_of(explained(admin, "thirty", SEARCH, (qs[0], K, MODEL), setting=500,
                             more={"agentmem.exact_index_max_rows": "5000"}), index_of["thirty"]) == "own index"
    assert recall(app, "thirty", *own["thirty"], qs) >= 0.95
    app.execute("reset agentmem.exact_index_max_rows")
    app.execute("reset agentmem.exact_search_max_rows")


# --- search_messages at scale: a tenant holding 1% of 20,000 messages gets k results, recall >= 0.95
# against an exact scan, through the shared HNSW index (EXPLAIN of the function's own statements) once
# agentmem.exact_search_max_rows is below its size (by default its 200 rows are scanned exactly).

SMALL, MINILM_DIM = 200, 384


def test_small_tenant_among_big_ones_gets_k_results_through_the_hnsw_index(admin, app, server):
    vectors = clustered_vectors(N, MINILM_DIM, seed=7)
    # the small tenant 'acme' holds 1%; every tenant has a user called alice
    rows = [("acme", "alice")] * SMALL + [(f"big{i % 9}", "alice") for i in range(N - SMALL)]
    ids = bulk_load(admin, rows, vectors, model="all-minilm")
    assert admin.execute("select count(*) from agentmem.message_embeddings").fetchone() == (N,)
    mine = vectors[:SMALL]
    my_ids = [m for _, _, m in ids[:SMALL]]

    rng = np.random.default_rng(11)
    queries = vectors[rng.integers(SMALL, N, 25)] + rng.standard_normal((25, MINILM_DIM)).astype(np.float32) * 0.02
    # below the user's 200 rows, so that the search goes through the shared index
    app.execute("set agentmem.exact_search_max_rows = 100")
    recalls = []
    for q in queries:
        q = q / np.linalg.norm(q)
        exact = {my_ids[i] for i in np.argsort(-(mine @ q))[:K]}
        got = app.execute("select message_id, similarity from agentmem.search_messages(user_id => 'alice', "
                          "query_embedding => %s, k => %s, model => 'all-minilm')", (q, K)).fetchall()
        assert len(got) == K
        assert {m for m, _ in got} <= set(my_ids)  # nothing from the big tenants
        recalls.append(len(exact & {m for m, _ in got}) / K)
    assert np.mean(recalls) >= 0.95, recalls

    if server.name == "citus":
        # auto_explain of a distributed statement with parameters fails in Citus 14 (its
        # EXPLAIN sent to the worker loses the parameter types); on the cluster the routing is
        # checked from the commands Citus sends (test_distribute.py), the index on one node here.
        return
    # EXPLAIN the function's statements as the application role, under RLS
    q = queries[0] / np.linalg.norm(queries[0])
    got, plans = plans_of(admin, "select * from agentmem.search_messages(user_id => 'alice', query_embedding => %s, "
                          "k => %s, model => 'all-minilm')", (q, K),
                          settings={"agentmem.exact_search_max_rows": "100"})
    assert len(got) == K
    knn = [p for p in plans if "Order By: ((embedding)::public.vector(384) OPERATOR(public.<=>)" in p]
    assert knn, "no plan of the function ordered by the HNSW index:\n" + "\n---\n".join(plans)
    assert "Index Scan using message_embeddings_all_minilm_" in knn[0] and "_hnsw" in knn[0]


def test_a_tiny_user_gets_an_exact_answer(admin, app):
    vectors = clustered_vectors(3_000, MINILM_DIM, seed=3)
    rows = [("acme", "alice")] * 12 + [("big", "alice")] * (3_000 - 12)
    ids = bulk_load(admin, rows, vectors, model="all-minilm")
    q = vectors[100]
    exact = [ids[i][2] for i in np.argsort(-(vectors[:12] @ q))[:10]]
    got = [r[0] for r in app.execute("select message_id from agentmem.search_messages(user_id => 'alice', "
                                     "query_embedding => %s, k => 10, model => 'all-minilm')", (q,)).fetchall()]
    assert got == exact
def test_generated_static_statements_hold_vector_distances_text_only(admin):
    found = bodies(admin)
    for name, path in GENERATED.items():
        # one text per table (a message's reads its pending vector too)
        texts = {admin.execute("select agentmem_private.vector_distance(path => %s, dimension => 8, table_name => %s)",
                               (path, table)).fetchone()[0] for table in ("message_embeddings", "facts", "cache_entries")}
        body = found[name]
        assert len(texts) == 2 and all(text in body for text in texts), (name, texts)
        # each distance operator of the body is one of those texts'
        assert len(DISTANCE.findall(body)) == sum(body.count(text) * len(DISTANCE.findall(text)) for text in texts), name
    source = SQL.read_text()
    generator = source[source.index("do $generate$"):source.index("$generate$;")]
    assert not DISTANCE.search(generator), "the generator writes a distance: take it from vector_distance"
    assert "agentmem_private.vector_distance(" in generator and "agentmem_private.vector_search_scope(" in generator


ID_COLUMN = {"message_embeddings": "message_id", "facts": "fact_id", "cache_entries": "entry_id"}


def user_scope(admin, table: str, tenant: str, model: str, user: str = "alice") -> str:
    """The caller's scope of a user's rows, as search_messages and recall_facts build it."""
    return admin.execute("select agentmem_private.vector_search_scope(table_name => %s, "
                         "tenant_id => quote_literal(%s), model => quote_literal(%s), user_id => quote_literal(%s))",
                         (table, tenant, model, user)).fetchone()[0]


@pytest.mark.parametrize("table", ["message_embeddings", "facts"])
def test_static_exact_scan_answers_as_the_dynamic_statements(admin, tenant_with_indexes, table):
    """A user's search through exact_scan's prepared statements and through the plan's own (the same scope,
    static_scan off) find the same rows at the same distances, past the sixth call (when PL/pgSQL may switch
    to a generic plan)."""
    search = ("select array_agg(n.id order by n.distance, n.id), array_agg(n.distance order by n.distance, n.id) "
              "from agentmem_private.vector_search(table_name => %s, id_column => %s, tenant_id => 'acme', "
              "model => %s, dimension => 8, query_embedding => %s, k => 7, scope => %s, static_scan => %s, "
              "user_id => 'alice') as n")
    scope = user_scope(admin, table, "acme", TINY)
    calls = "select pg_stat_get_xact_function_calls('agentmem_private.exact_scan'::regproc)"
    with admin.transaction():
        admin.execute("set local track_functions = 'all'")
        for v in list(tenant_with_indexes[:8]) * 2:
            static = admin.execute(search, (table, ID_COLUMN[table], TINY, v, scope, True)).fetchone()
            dynamic = admin.execute(search, (table, ID_COLUMN[table], TINY, v, scope, False)).fetchone()
            assert static[0] is not None and len(static[0]) == 7
            assert static[0] == dynamic[0]
            assert static[1] == pytest.approx(dynamic[1])
        assert admin.execute(calls).fetchone()[0] == 16  # the static path only, once a search


# --- the plan alone (agentmem_private.vector_search_plan): the path it chooses and what it built ---------

PLAN = ("select p.* from agentmem_private.vector_search_plan(table_name => %(table)s, id_column => %(id)s, "
        "tenant_id => %(tenant)s, model => %(model)s, dimension => 8, k => 5, scope => %(scope)s, "
        "static_scan => %(static)s, lone_user => %(lone)s, counted => %(counted)s) as p")


def plan(admin, table: str = "message_embeddings", tenant: str = "acme", user: str = "alice", *,
         static: bool = False, lone: str | None = None, counted: int | None = None, limit: int | None = None) -> dict:
    with admin.transaction():
        if limit is not None:
            admin.execute(f"set local agentmem.exact_search_max_rows = {int(limit)}")
        cur = admin.execute(PLAN, {"table": table, "id": ID_COLUMN[table], "tenant": tenant, "model": TINY,
                                   "scope": user_scope(admin, table, tenant, TINY, user), "static": static,
                                   "lone": lone, "counted": counted})
        return dict(zip([c.name for c in cur.description], cur.fetchone()))


@pytest.fixture
def two_tenants(admin):
    """Tenants acme (alice 40 messages, bob 5) and solo (alice 40 messages alone), no index of their own."""
    admin.execute("select agentmem.register_model(model => %s, dimension => 8)", (TINY,))
    vecs = random_unit(85, 8, seed=12)
    bulk_load(admin, [("acme", "alice")] * 40 + [("acme", "bob")] * 5 + [("solo", "alice")] * 40, vecs, model=TINY,
              rebuild_index=False)
    return vecs


def test_the_plan_scans_exactly_at_or_below_the_limit_and_takes_the_shared_index_above(admin, two_tenants):
    at = plan(admin, limit=40)
    assert (at["path"], at["candidates"], at["exact_max"], at["then_path"]) == ("exact scan", 40, 40, None)
    assert at["statement"] == at["exact_statement"] and "limit $2" in at["statement"]
    assert at["ef_search"] is None and at["index_name"] is None and at["own_index"] is None  # no index looked up
    above = plan(admin, limit=39)
    shared = admin.execute("select agentmem_private.model_index_name('message_embeddings', %s)", (TINY,)).fetchone()[0]
    assert (above["path"], above["candidates"], above["own_index"], above["index_name"]) == \
        ("shared index", 40, False, shared)
    assert above["ef_search"] > 0 and above["ef_search_full"] >= above["ef_search"]
    distance = admin.execute("select agentmem_private.vector_distance(path => 'shared index', dimension => 8)"
                             ).fetchone()[0]
    assert f"order by {distance} limit $2 + 20" in above["statement"]
    assert "e.user_id = 'alice'" in above["statement"] and "agentmem.message_embeddings" in above["statement"]
    assert above["exact_statement"] == at["exact_statement"]  # the fallback when the index stops short


def test_the_plan_run_alone_finds_what_the_search_finds(admin, two_tenants):
    """The plan's statements are the search: run by hand with the query embedding and k, they return the
    rows vector_search returns."""
    q = two_tenants[3]
    scope = user_scope(admin, "message_embeddings", "acme", TINY)
    for limit in (40, 39):
        p = plan(admin, limit=limit)
        with admin.transaction():
            admin.execute(f"set local agentmem.exact_search_max_rows = {limit}")
            admin.execute("set local hnsw.ef_search = 1000")
            statement = re.sub(r"\$2\b", "%(k)s", re.sub(r"\$1\b", "%(q)s", p["statement"]))
            by_hand = admin.execute(statement, {"q": q, "k": 5}).fetchone()[0]
            searched = [r[0] for r in admin.execute(
                "select id from agentmem_private.vector_search(table_name => 'message_embeddings', "
                "id_column => 'message_id', tenant_id => 'acme', model => %s, dimension => 8, "
                "query_embedding => %s, k => 5, scope => %s)", (TINY, q, scope)).fetchall()]
        assert len(by_hand) == 5 and by_hand == searched, limit


def test_the_plan_takes_the_tenants_own_index_when_it_has_one(admin, two_tenants):
    admin.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s)", (TINY,))
    own = admin.execute("select agentmem_private.tenant_index_name('message_embeddings', 'acme', %s)",
                        (TINY,)).fetchone()[0]
    with admin.transaction():
        admin.execute("set local agentmem.exact_index_max_rows = -1")  # its exact index too big to read
        admin.execute("set local agentmem.exact_search_max_rows = 39")
        cur = admin.execute(PLAN, {"table": "message_embeddings", "id": "message_id", "tenant": "acme", "model": TINY,
                                   "scope": user_scope(admin, "message_embeddings", "acme", TINY), "static": False,
                                   "lone": None, "counted": None})
        p = dict(zip([c.name for c in cur.description], cur.fetchone()))
    assert (p["path"], p["own_index"], p["index_name"]) == ("own index", True, own)
    assert "l2_normalize(" in p["statement"]
    # with its exact index readable: read straight away (measured far on random vectors), or after a first pass
    p = plan(admin, limit=39)
    assert p["own_index"] and (p["path"], p["then_path"]) in {("exact index", None), ("own index", "exact index")}
    # another tenant keeps the shared index
    assert plan(admin, tenant="solo", limit=39)["path"] == "shared index"
    # at or below the limit, an exact scan all the same
    assert plan(admin, limit=40)["path"] == "exact scan"


def test_the_plan_leaves_the_static_count_to_the_run_and_plans_again_with_it(admin, two_tenants):
    first = plan(admin, static=True, limit=39)
    assert (first["path"], first["static"], first["candidates"], first["statement"], first["exact_statement"]) == \
        ("exact scan", True, None, None, None)
    assert first["count_limit"] == 8 * 39 + 1  # counted past the limit, for the index's share
    again = plan(admin, static=True, counted=40, limit=39)
    assert (again["path"], again["static"], again["candidates"]) == ("shared index", True, 40)
    assert again["exact_statement"] is None  # an index stopping short: exact_scan's static statements
    assert plan(admin, static=True, counted=40, limit=40)["path"] == "exact scan"


def test_the_plan_takes_the_lone_users_shortcut_only_when_alone_with_an_index(admin, two_tenants):
    for tenant in ("acme", "solo"):
        admin.execute("select agentmem.create_tenant_index(tenant_id => %s, model => %s)", (tenant, TINY))
    admin.execute("analyze agentmem.message_embeddings")
    # solo's alice is alone: her rows are the index's (pg_class.reltuples), not counted; where the index
    # counts no more than the limit (on Citus the coordinator's index holds no rows), counted to the limit
    solo = plan(admin, tenant="solo", static=True, lone="alice", limit=30)
    rows = admin.execute("select agentmem_private.index_rows(%s)", (solo["index_name"],)).fetchone()[0]
    assert (solo["alone"], solo["own_index"]) == (True, True)
    if rows > 30:
        assert (solo["candidates"], solo["count_limit"]) == (rows, None)
        assert solo["path"] in ("own index", "exact index")
    else:
        assert (solo["candidates"], solo["count_limit"], solo["path"]) == (None, 31, "exact scan")
    assert plan(admin, tenant="solo", static=True, lone="alice", limit=50)["count_limit"] == 51
    # acme's alice is not (bob): counted by the static statements
    acme = plan(admin, static=True, lone="alice", limit=30)
    assert (acme["alone"], acme["own_index"], acme["candidates"], acme["path"]) == (False, True, None, "exact scan")
    # no shortcut without the caller's word (lone_user) or outside the static scope
    assert plan(admin, tenant="solo", static=True, limit=30)["alone"] is False
    assert plan(admin, tenant="solo", static=False, lone="alice", limit=30)["alone"] is False


def test_the_plan_refuses_a_scope_without_its_table(admin):
    with pytest.raises(psycopg.Error) as refused:
        admin.execute("select * from agentmem_private.vector_search_plan(table_name => 'facts', id_column => null, "
                      "tenant_id => 'acme', model => 'm', dimension => 8, k => 5, scope => 'true')")
    assert refused.value.sqlstate == "AM020"


def test_exact_scan_refuses_a_table_it_has_no_statements_for(admin):
    """exact_scan is generated for message_embeddings and facts only: any other table is AM020, naming it."""
    with pytest.raises(psycopg.Error) as refused:
        admin.execute("select * from agentmem_private.exact_scan(query_embedding => %s, table_name => 'answers', "
                      "tenant_id => 'acme', model => 'm', user_id => 'alice', k => 3, count_limit => 10, "
                      "scan_max => 10)", (np.ones(8, dtype=np.float32),))
    assert refused.value.sqlstate == "AM020"
    assert "answers is not a table it scans" in str(refused.value)
