"""The driver under faults: a server that stops under the client, caller type errors, the durable dev server.

The fault test runs its own embedded server (agentmem_dev.devserver, a data directory
under pytest's tmp_path and a free port), stops it under the client and starts it
again: the shared test server is never touched.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psycopg
import pytest

import agentmem
from agentmem_dev import devserver
from agentmem.client import Memory

ROOT = Path(__file__).resolve().parents[1]


def test_connection_loss_is_one_exception_and_the_client_recovers(own_server):
    data, url = own_server
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with Memory.connect(url, tenant="acme", timeout=3) as mem:
        assert mem.start_conversation("alice") is not None
        raw = psycopg.connect(url, autocommit=True)
        devserver.stop(data)
        # a stale connection passed in: AdminShutdown (57P01) or a broken socket, as ConnectionLost
        with pytest.raises(agentmem.ConnectionLost):
            mem.start_conversation("alice", conn=raw)
        raw.close()
        # the server is down: the pool gives up after the timeout (not 30 s), as ConnectionLost
        with pytest.raises(agentmem.ConnectionLost):
            mem.start_conversation("alice")
        devserver.start(data, port=port)
        # the pool's stale connection is checked on checkout and replaced: the next call works
        assert mem.start_conversation("alice") is not None
        assert issubclass(agentmem.ConnectionLost, agentmem.AgentmemError)


def test_dev_server_is_durable_by_default(own_server):
    _, url = own_server
    with psycopg.connect(url) as conn:
        settings = dict(conn.execute("select name, setting from pg_settings where name in "
                                     "('fsync', 'full_page_writes', 'synchronous_commit')").fetchall())
    assert settings == {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on"}


def test_test_server_opted_into_fast_settings(admin):
    assert admin.execute("show fsync").fetchone()[0] == "off"  # tests/conftest.py: fast=True, on purpose


def deep(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("call", [
    lambda m, cid: m.store_message(cid, "user", "hi", "0.1,0.2", model="all-minilm"),
    lambda m, cid: m.store_message(cid, "user", "hi", {"x": 1.0}, model="all-minilm"),
    lambda m, cid: m.store_message(cid, "user", "hi", np.ones((2, 192)), model="all-minilm"),
    lambda m, cid: m.store_message(cid, "user", "hi", [[0.1] * 384], model="all-minilm"),
    lambda m, cid: m.store_message(cid, "user", "hi", [0.1] * 383 + ["x"], model="all-minilm"),
    lambda m, cid: m.start_conversation("alice", metadata={1, 2}),
    lambda m, cid: m.start_conversation("alice", metadata={"tags": {1, 2}}),
    lambda m, cid: m.start_conversation("alice", metadata=deep(5000)),
    lambda m, cid: m.start_conversation("alice", metadata={"x": float("nan")}),
    lambda m, cid: m.recent_messages(cid, n=2**31),
    lambda m, cid: m.search_messages("alice", [0.1] * 384, k=2**31, model="all-minilm"),
    lambda m, cid: m.store_message(cid, "user", "a\x00b", None),
    lambda m, cid: m.start_conversation("alice", metadata={"k": ["a\x00"]}),
    lambda m, cid: m.start_conversation("alice", metadata={"\x00": 1}),
], ids=["str", "dict", "2d-array", "nested-list", "non-number", "set-metadata", "set-inside-metadata",
        "deep-metadata", "nan-metadata", "n-2**31", "k-2**31", "nul-text", "nul-metadata", "nul-key"])
def test_caller_type_errors_raise_invalid_argument(app_url, call):
    with Memory.connect(app_url, tenant="acme") as mem:
        cid = mem.start_conversation("alice")
        with pytest.raises(agentmem.InvalidArgument):
            call(mem, cid)
        assert mem.recent_messages(cid) == []


def test_non_finite_embedding_is_an_invalid_embedding(app_url):
    with Memory.connect(app_url, tenant="acme") as mem:
        cid = mem.start_conversation("alice")
        nan_at_end = [0.1] * 383 + [float("nan")]
        for bad in ([float("inf")] * 384, [1e39] * 384, nan_at_end, [-1e39] + [0.1] * 383,  # 1e39: infinite in float32
                    np.array(nan_at_end), np.array([0.1] * 383 + [np.inf], dtype=np.float32),
                    np.array([0.1] * 383 + [-1e39])):
            with pytest.raises(agentmem.InvalidEmbedding):
                mem.store_message(cid, "user", "hi", bad, model="all-minilm")
        assert mem.recent_messages(cid) == []
        with pytest.raises(agentmem.InvalidEmbedding):  # degenerate in float32: AM010 from SQL
            mem.store_message(cid, "user", "hi", [1e-30] * 384, model="all-minilm")



def test_embedding_shapes_arrive_as_the_same_vector(app_url):
    """A numpy array (float32, float64, integers), a list of floats, of ints or of both, and a tuple arrive
    as the same vector: the driver's fast checks and its element-by-element walk agree on the values."""
    v32 = np.random.default_rng(3).standard_normal(384).astype(np.float32)
    ints = np.arange(1, 385)
    groups = {
        "floats": (v32, [v32, v32.astype(np.float64), v32.tolist(), tuple(v32.tolist())]),
        "ints": (ints.astype(np.float32), [ints, ints.astype(np.int32), ints.tolist(),
                                           [float(x) if x % 2 else int(x) for x in ints.tolist()]]),
    }
    with Memory.connect(app_url, tenant="acme") as mem:
        for user, (query, shapes) in groups.items():
            cid = mem.start_conversation(user)
            for n, shape in enumerate(shapes):
                mem.store_message(cid, "user", f"shape {n}", shape, model="all-minilm")
            hits = mem.search_messages(user, query, k=10, model="all-minilm")
            assert sorted(h.content for h in hits) == [f"shape {n}" for n in range(len(shapes))]
            assert all(abs(h.similarity - 1.0) < 1e-6 for h in hits), [(h.content, h.similarity) for h in hits]
