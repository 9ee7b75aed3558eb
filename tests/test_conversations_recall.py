"""search_messages at scale: a tenant holding 1% of 20,000 messages gets k results, recall >= 0.95
against an exact scan, through the HNSW index (EXPLAIN of the function's own statements)."""

from __future__ import annotations

import numpy as np

from agentmem._bulk import Bulk
from helpers import plans_of

N, SMALL, K, DIM = 20_000, 200, 10, 384


def clustered_vectors(n: int, dim: int, *, clusters: int = 64, noise: float = 0.35,
                      seed: int = 0) -> np.ndarray:
    """n unit vectors around `clusters` random centres: a nearest-neighbour structure like real text."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise_v = rng.standard_normal((n, dim)).astype(np.float32) * (noise / np.sqrt(dim))
    vecs = centres[rng.integers(0, clusters, n)] + noise_v
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def bulk_load(admin, rows: list[tuple[str, str]], vectors: np.ndarray, *, model: str) -> list[tuple]:
    """Messages with embeddings through the shared loader (COPY as the superuser, the HNSW index rebuilt
    after): rows[i] = (tenant_id, user_id) of message i. Returns (tenant, user, message_id) per message."""
    bulk = Bulk(admin, model=model)
    with bulk.hnsw_dropped(tables=["message_embeddings"], maintenance_work_mem="256MB"):
        ids, _ = bulk.load_messages(rows, vectors, per_conversation=50)
    return [(tenant, user, mid) for (tenant, user), mid in zip(rows, ids)]


def test_small_tenant_among_big_ones_gets_k_results_through_the_hnsw_index(admin, app):
    vectors = clustered_vectors(N, DIM, seed=7)
    # the small tenant 'acme' holds 1%; every tenant has a user called alice
    rows = [("acme", "alice")] * SMALL + [(f"big{i % 9}", "alice") for i in range(N - SMALL)]
    ids = bulk_load(admin, rows, vectors, model="all-minilm")
    assert admin.execute("select count(*) from agentmem.message_embeddings").fetchone() == (N,)
    mine = vectors[:SMALL]
    my_ids = [m for _, _, m in ids[:SMALL]]

    rng = np.random.default_rng(11)
    queries = vectors[rng.integers(SMALL, N, 25)] + rng.standard_normal((25, DIM)).astype(np.float32) * 0.02
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

    # EXPLAIN the function's statements as the application role, under RLS
    q = queries[0] / np.linalg.norm(queries[0])
    got, plans = plans_of(admin, "select * from agentmem.search_messages(user_id => 'alice', query_embedding => %s, "
                          "k => %s, model => 'all-minilm')", (q, K))
    assert len(got) == K
    knn = [p for p in plans if "Order By: ((embedding)::vector(384) <=>" in p]
    assert knn, "no plan of the function ordered by the HNSW index:\n" + "\n---\n".join(plans)
    assert "Index Scan using message_embeddings_all_minilm_" in knn[0] and "_hnsw" in knn[0]


def test_a_tiny_user_gets_an_exact_answer(admin, app):
    vectors = clustered_vectors(3_000, DIM, seed=3)
    rows = [("acme", "alice")] * 12 + [("big", "alice")] * (3_000 - 12)
    ids = bulk_load(admin, rows, vectors, model="all-minilm")
    q = vectors[100]
    exact = [ids[i][2] for i in np.argsort(-(vectors[:12] @ q))[:10]]
    got = [r[0] for r in app.execute("select message_id from agentmem.search_messages(user_id => 'alice', "
                                     "query_embedding => %s, k => 10, model => 'all-minilm')", (q,)).fetchall()]
    assert got == exact
