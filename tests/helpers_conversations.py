"""Shared helpers of the conversation tests: bulk loading through the admin connection."""

from __future__ import annotations

import uuid

import numpy as np


def clustered_vectors(n: int, dim: int, *, clusters: int = 64, noise: float = 0.35,
                      seed: int = 0) -> np.ndarray:
    """n unit vectors around `clusters` random centres: a nearest-neighbour structure like real text."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise_v = rng.standard_normal((n, dim)).astype(np.float32) * (noise / np.sqrt(dim))
    vecs = centres[rng.integers(0, clusters, n)] + noise_v
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def bulk_load(admin, rows: list[tuple[str, str]], vectors: np.ndarray, *, model: str,
              per_conversation: int = 50, rebuild_index: bool = True) -> list[tuple[str, str, uuid.UUID]]:
    """Insert messages with embeddings directly (COPY, as the superuser), bypassing the API.

    rows[i] = (tenant_id, user_id) of message i. Messages of one (tenant, user) are grouped in
    conversations of `per_conversation` messages. With rebuild_index the model's HNSW index is
    dropped before and rebuilt (by agentmem_private.ensure_model_indexes) after the load, which is much
    faster than inserting into it. Returns (tenant, user, message_id) per message.
    """
    conversations, messages, out = [], [], []
    counters: dict[tuple[str, str], list] = {}
    for (tenant, user), vec in zip(rows, vectors):
        state = counters.get((tenant, user))
        if state is None or state[1] == per_conversation:
            state = [uuid.uuid4(), 0]
            counters[(tenant, user)] = state
            conversations.append((tenant, state[0], user))
        mid = uuid.uuid4()
        messages.append((tenant, mid, state[0], user, state[1], vec))
        out.append((tenant, user, mid))
        state[1] += 1
    next_index = {c: s[1] for c, s in ((s[0], s) for s in counters.values())}
    index = None
    if rebuild_index:
        index = admin.execute("select agentmem_private.model_index_name('message_embeddings', %s)", (model,)).fetchone()[0]
        admin.execute(f'drop index if exists agentmem."{index}"')
    with admin.cursor() as cur:
        with cur.copy("copy agentmem.conversations (tenant_id, conversation_id, user_id, next_index) "
                      "from stdin") as copy:
            for tenant, cid, user in conversations:
                copy.write_row((tenant, cid, user, next_index.get(cid, per_conversation)))
        with cur.copy("copy agentmem.messages (tenant_id, message_id, conversation_id, user_id, message_index, "
                      "role, content) from stdin") as copy:
            for tenant, mid, cid, user, idx, _ in messages:
                copy.write_row((tenant, mid, cid, user, idx, "user", f"message {idx} of {user}"))
        with cur.copy("copy agentmem.message_embeddings (tenant_id, message_id, model, user_id, conversation_id, "
                      "embedding) from stdin with (format binary)") as copy:
            copy.set_types(["text", "uuid", "text", "text", "uuid", "vector"])
            for tenant, mid, cid, user, _, vec in messages:
                copy.write_row((tenant, mid, model, user, cid, vec))
    if rebuild_index:
        admin.execute("set maintenance_work_mem = '256MB'")
        admin.execute("select agentmem_private.ensure_model_indexes(%s)", (model,))
    admin.execute("analyze agentmem.message_embeddings")
    admin.execute("analyze agentmem.messages")
    return out
