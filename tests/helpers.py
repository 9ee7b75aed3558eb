"""The test toolkit: SQLSTATE of a refused call, embeddings of texts, counts, waits, captured plans.

Fixtures live in conftest.py (servers, databases, connections, the ``driver``
that runs a method on a sync or an async client); plain functions live here.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

import numpy as np
import psycopg
import pytest

from agentmem._bulk import Bulk
from agentmem.lexical import lexical_embedding

from conftest import APP_ROLE  # noqa: E402


def sqlstate_of(conn, query, params=None) -> str:
    """The SQLSTATE the statement fails with (the test fails if it succeeds)."""
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params)
    return info.value.sqlstate


def vec(text: str, dim: int = 768) -> np.ndarray:
    """The stub's embedding of a text (lexical: similar for texts sharing words)."""
    return np.asarray(lexical_embedding(text, dim), dtype=np.float32)


def count(admin, table: str, where: str = "true", params=None) -> int:
    return admin.execute(f"select count(*) from agentmem.{table} where {where}", params).fetchone()[0]


def wait_until(condition: Callable[[], Any], timeout: float = 30.0, *, interval: float = 0.01,
               what: str = "the condition") -> Any:
    """Poll condition() until it is truthy and return it; fail the test after `timeout` seconds.

    Never a busy loop that hangs when the thread it waits for has died: the
    timeout is a safety net, not a measurement (no test asserts on speed).
    """
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def plans_of(admin, query: str, params=None, *, tenant: str = "acme", settings: dict[str, str] | None = None,
             rows_on_citus: bool = False) -> tuple[list, list[str] | None]:
    """Run query as the application role under RLS and return (its rows, the plans of every statement run,
    the function's own nested statements included), captured by auto_explain on that same session.

    settings (e.g. {"enable_seqscan": "off"}) are made on that session, so the call sees them.
    On the Citus leg the test stops here, skipped: auto_explain of a distributed statement with
    parameters fails in Citus 14 (the EXPLAIN it sends to a worker loses the parameter types); routing
    on the cluster is checked from the commands Citus sends (tests/test_distribute.py). With
    rows_on_citus the query still runs there, the same way but without auto_explain, and the plans
    returned are None: the test checks the rows.
    """
    import conftest
    citus = conftest.SERVER is not None and conftest.SERVER.name == "citus"
    if citus and not rows_on_citus:
        pytest.skip("plans of nested statements are not captured through Citus 14 (see tests/test_distribute.py)")
    explain = {} if citus else {"auto_explain.log_min_duration": "0", "auto_explain.log_nested_statements": "on",
                                "auto_explain.log_level": "notice", "client_min_messages": "notice"}
    if not citus:
        admin.execute("load 'auto_explain'")
    for name, value in {**explain, **(settings or {})}.items():
        admin.execute("select set_config(%s, %s, false)", (name, value))
    plans: list[str] = []

    def collect(diag):
        plans.append(diag.message_primary or "")

    admin.add_notice_handler(collect)
    try:
        admin.execute(f"set role {APP_ROLE}")
        admin.execute("select agentmem.set_tenant(tenant_id => %s)", (tenant,))
        plans.clear()
        rows = admin.execute(query, params).fetchall()
    finally:
        admin.execute("reset role")
        admin.remove_notice_handler(collect)
        if not citus:
            admin.execute("set auto_explain.log_min_duration = -1")
        for name in settings or {}:
            admin.execute(f"reset {name}")
    return rows, None if citus else list(plans)


def upsert(conn, user, subject, fact, sources=(), dim_text=None, **kw):
    """upsert_fact through SQL, embedding `dim_text or fact` with vec()."""
    extra = "".join(f", {k} => %s" for k in kw)
    return conn.execute(
        "select * from agentmem.upsert_fact(user_id => %s, subject => %s, fact => %s, embedding => %s, "
        f"source_message_ids => %s::uuid[]{extra})",
        (user, subject, fact, vec(dim_text or fact), list(sources), *kw.values())).fetchone()


class StubEmbedder:
    """The minimal embedder interface extract_facts needs, through the real ollama client."""

    def __init__(self, host: str, model: str = "nomic-embed-text"):
        self.host, self.model = host, model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        import ollama
        return list(ollama.Client(host=self.host).embed(model=self.model, input=texts).embeddings)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


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
    """Messages with embeddings through the shared loader (agentmem._bulk.Bulk: COPY as the superuser,
    invariants kept): rows[i] = (tenant_id, user_id) of message i. With rebuild_index the model's HNSW
    index is dropped for the load and rebuilt after. Returns (tenant, user, message_id) per message."""
    bulk = Bulk(admin, model=model)
    if rebuild_index:
        with bulk.hnsw_dropped(tables=["message_embeddings"], maintenance_work_mem="256MB"):
            ids, _ = bulk.load_messages(rows, vectors, per_conversation=per_conversation)
    else:
        ids, _ = bulk.load_messages(rows, vectors, per_conversation=per_conversation)
        admin.execute("analyze agentmem.messages, agentmem.message_embeddings")
    return [(tenant, user, mid) for (tenant, user), mid in zip(rows, ids)]


def free_port_url(url: str) -> str:
    """The same URL on a loopback port where nothing listens."""
    import socket
    from urllib.parse import urlsplit, urlunsplit
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    return urlunsplit((parts.scheme, f"{netloc[0]}@{host}" if len(netloc) == 2 else host, parts.path,
                       parts.query, parts.fragment))


def audiences(admin) -> dict[str, set[str]]:
    """The names of schema agentmem's functions per declared audience (application, worker, dba: the
    last line of each comment, read by agentmem_private.function_audience, from which
    sql/90_grants.sql grants), and under "views" the views, which only the DBA reads."""
    out: dict[str, set[str]] = {"application": set(), "worker": set(), "dba": set(), "views": set()}
    for audience, name in admin.execute(
            "select a.audience, p.proname from agentmem_private.function_audience() as a "
            "join pg_proc as p on p.oid = a.fn "
            "union all select 'views', c.relname from pg_class as c "
            "where c.relnamespace = 'agentmem'::regnamespace and c.relkind in ('v', 'm')").fetchall():
        out[audience].add(name)
    return out
