"""The test toolkit: SQLSTATE of a refused call, vectors and embeddings of texts, counts, waits, threads,
captured plans, conversations and facts through SQL, scratch databases and logins (tests/README.md lists them).

Fixtures live in conftest.py (servers, databases, connections, the ``driver``
that runs a method on a sync or an async client); plain functions live here.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Callable, Iterable

import numpy as np
import psycopg
import pytest

from agentmem_dev.bulk import Bulk
from agentmem.lexical import lexical_embedding

from conftest import APP_ROLE  # noqa: E402


def sqlstate_of(conn, query, params=None, *, savepoint: bool = False) -> str:
    """The SQLSTATE the statement fails with (the test fails if it succeeds). With savepoint, the statement
    runs in a savepoint, so that a transaction block the caller holds goes on after it."""
    with pytest.raises(psycopg.Error) as info:
        if savepoint:
            with conn.transaction():
                conn.execute(query, params)
        else:
            conn.execute(query, params)
    return info.value.sqlstate


def unit(i: int, dim: int = 384, *, sign: float = 1.0, mix: int | None = None) -> np.ndarray:
    """The basis vector e_i (times sign) in `dim` dimensions (384: all-minilm's); with mix,
    e_i + 0.5 e_mix, normalised. Cosines between such vectors are known exactly."""
    v = np.zeros(dim, dtype=np.float32)
    v[i % dim] = sign
    if mix is not None:
        v[mix % dim] = 0.5
    return v / np.linalg.norm(v)


def vector_part(sims) -> np.ndarray:
    """search_messages' standardised vector scores (fusion 'zscore') when every candidate is in the vector
    list: each similarity less the list's floor (one mean gap below its weakest), over the standard
    deviation of the candidates' similarities."""
    sims = np.asarray(sims, dtype=float)
    floor = sims.min() - (sims.max() - sims.min()) / len(sims)
    return (sims - floor) / sims.std()


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


def scratch_database(server, prefix: str = "agentmem_scratch_"):
    """An empty database (not cloned from the migrated template), dropped after: a generator for a fixture,
    yielding its name."""
    name = prefix + uuid.uuid4().hex[:10]
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    yield name
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')


WORKER_LOGIN = "agentmem_test_worker"


def worker_login_url(server, dbname: str, admin, login: str = WORKER_LOGIN) -> str:
    """The URL of a login role that is a member of agentmem_worker and of nothing else (created if missing)."""
    if not admin.execute("select 1 from pg_roles where rolname = %s", (login,)).fetchone():
        try:
            admin.execute(f"create role {login} login")
        except psycopg.errors.DuplicateObject:
            pass
    admin.execute(f"grant agentmem_worker to {login}")
    return server.db_url(dbname, login)


def run_threads(target: Callable[..., Any], args: Iterable[tuple]) -> None:
    """Run target(*a) for every a in args, each in its own thread, all at once; return when every one has ended.
    The target records its own errors (an exception in a thread does not fail the test by itself)."""
    threads = [threading.Thread(target=target, args=a) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


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


def random_unit(n: int, dim: int, seed: int) -> np.ndarray:
    """n random unit vectors in dim dimensions: the hardest data for an approximate index (no near neighbours)."""
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def explained(admin, tenant: str, query: str, params, setting: int | None = None,
              more: dict[str, str] | None = None) -> list[str]:
    """auto_explain of every statement the call runs, as the application role under RLS."""
    settings = {"agentmem.exact_search_max_rows": str(setting)} if setting is not None else {}
    return plans_of(admin, query, params, tenant=tenant, settings={**settings, **(more or {})} or None)[1]


def path_of(plans: list[str], own_index: str) -> str:
    """The path a message search took, read from its plans (explained): "exact", "shared index", "own index",
    "exact index" or "own index, then exact index"; own_index is the tenant's HNSW index's name."""
    text = "\n".join(plans)
    exact_index = own_index.removesuffix("_hnsw") + "_exact"
    if f"Index Scan using {own_index}" in text and f"Index Scan using {exact_index}" in text:
        return "own index, then exact index"
    if f"Index Scan using {exact_index}" in text:
        return "exact index"
    if f"Index Scan using {own_index}" in text:
        return "own index"
    if "Index Scan using message_embeddings_nomic_embed_text_" in text and "_hnsw" in text:
        return "shared index"
    # a message's exact distance reads its pending vector too (agentmem.index_later)
    assert ("Sort Key: ((COALESCE(e.embedding, e.pending_embedding) OPERATOR(public.<=>) " in text
            or "Sort Key: ((e.embedding OPERATOR(public.<=>) " in text), text
    return "exact"


# store_messages with a time for each message (occurred_at), the model's default embedding
STORE_DATED = ("select * from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
               "embeddings => %s, occurred_at => %s::timestamptz[])")


def start_conversation(conn, user="alice", title=None) -> str:
    return conn.execute("select agentmem.start_conversation(user_id => %s, title => %s)", (user, title)).fetchone()[0]


def store_message(conn, cid, content, role="user", embedding=None, model="all-minilm"):
    """store_message of content, embedded with vec() in all-minilm's 384 dimensions unless embedding is given;
    returns (message_id, message_index)."""
    return conn.execute(
        "select message_id, message_index from agentmem.store_message(conversation_id => %s, role => %s, "
        "content => %s, embedding => %s, model => %s)",
        (cid, role, content, vec(content, 384) if embedding is None else embedding, model)).fetchone()


def fill_conversation(conn, cid, n, prefix="turn"):
    """n messages "{prefix} {i}", user and assistant in turn, in one store_messages call (all-minilm)."""
    conn.execute("select agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                 "embeddings => %s, model => %s)",
                 (cid, ["user", "assistant"] * (n // 2) + ["user"] * (n % 2),
                  [f"{prefix} {i}" for i in range(n)], [vec(f"{prefix} {i}", 384) for i in range(n)], "all-minilm"))


def message_counts(admin) -> tuple[int, int]:
    """(messages, message embeddings) in every tenant."""
    return admin.execute("select (select count(*) from agentmem.messages), "
                         "(select count(*) from agentmem.message_embeddings)").fetchone()


def upsert(conn, user, subject, fact, sources=(), dim_text=None, **kw):
    """upsert_fact through SQL, embedding `dim_text or fact` with vec()."""
    extra = "".join(f", {k} => %s" for k in kw)
    return conn.execute(
        "select * from agentmem.upsert_fact(user_id => %s, subject => %s, fact => %s, embedding => %s, "
        f"source_message_ids => %s::uuid[]{extra})",
        (user, subject, fact, vec(dim_text or fact), list(sources), *kw.values())).fetchone()


def add_facts(admin, tenant: str, n: int, age: str, user: str = "u1", prefix: str = "f"):
    """n facts of one tenant (model tiny-embed, registered here), last updated `age` ago, written as the
    superuser."""
    admin.execute("select agentmem.register_model(model => 'tiny-embed', dimension => 8)")
    admin.execute(
        "insert into agentmem.facts (tenant_id, user_id, subject, fact, model, embedding, created_at, updated_at) "
        "select %s, %s, %s || i, 'fact ' || i, 'tiny-embed', %s, now() - %s::interval, now() - %s::interval "
        "from generate_series(1, %s) as i",
        (tenant, user, f"{prefix}{uuid.uuid4().hex[:6]}_", vec("f", 8), age, age, n))


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
    """Messages with embeddings through the shared loader (agentmem_dev.bulk.Bulk: COPY as the superuser,
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


def free_port() -> int:
    """A loopback port where nothing listens (the kernel's pick)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_url(url: str) -> str:
    """The same URL on a loopback port where nothing listens."""
    from urllib.parse import urlsplit, urlunsplit
    port = free_port()
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
