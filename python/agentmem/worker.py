"""The embedding worker: ``agentmem worker --database-url URL``.

It embeds the text agentmem stored without a vector (``embedding => NULL``) and
the rows a re-embedding queued (``agentmem.reembed``). Each round is three SQL
calls, all in sql/17_embedding_jobs.sql:

1. ``agentmem.claim_embedding_jobs`` takes a batch of one model under a lease
   (FOR UPDATE SKIP LOCKED: parallel workers take disjoint jobs) and hands back
   each job's text with the model's prefix, and the vector the tenant's
   embedding cache already holds for it;
2. the embedder embeds the misses (Ollama, or the offline lexical embedder);
3. ``agentmem.complete_embedding_jobs`` stores the vectors (checked in SQL like
   any embedding), or ``agentmem.fail_embedding_jobs`` records the error (retry
   with backoff, parked as failed after the limit).

Nothing is held between the calls but the lease: a worker killed at any point
loses no job (its lease expires and another worker claims the jobs again).
SIGTERM (and SIGINT) finish the batch in hand, then exit. When no job is ready
the worker claims again every ``poll`` seconds (default 1), or at once on a
NOTIFY agentmem_embedding_jobs (sent by the DBA's reembed and
retry_embedding_jobs only: a tenant's write notifies no one, since any login
may LISTEN on any channel and would learn when a tenant stored text). It logs progress: jobs done, jobs/s, the backlog.

The login role needs membership in agentmem_worker (``grant agentmem_worker to
my_worker_login``) and nothing else.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from pgvector import Vector

from .embed import as_floats

log = logging.getLogger("agentmem.worker")

CHANNEL = "agentmem_embedding_jobs"


class RawEmbedder(Protocol):
    def __call__(self, texts: list[str]) -> Sequence[Any]: ...


def ollama_embedder(model: str, dimension: int, host: str | None = None) -> RawEmbedder:
    """Embed texts as given (claim already added the model's prefix) with Ollama."""
    from .embed import OllamaEmbedder
    return OllamaEmbedder(model, host, use_cache=False, document_prefix="", query_prefix="").embed


def lexical_embedder(model: str, dimension: int, host: str | None = None) -> RawEmbedder:
    """The offline lexical embedder (not semantic) at the model's dimension."""
    from .lexical import lexical_embedding
    return lambda texts: [lexical_embedding(t, dimension) for t in texts]


def auto_embedder(model: str, dimension: int, host: str | None = None) -> RawEmbedder:
    """Ollama where one answers; where none does (connection refused or unreachable), the offline
    lexical embedder for the rest of the run, said in the log. For trying agentmem (the README's
    psql section): a deployment runs the worker with Ollama, whose errors fail the jobs instead."""
    import os

    from .errors import EmbedderError
    lexical = lexical_embedder(model, dimension, host)
    try:
        import httpx
        ollama = ollama_embedder(model, dimension, host)
    except ModuleNotFoundError as exc:  # the extra pg-agentmem[ollama] is not installed
        log.warning("%s: embedding %s with the OFFLINE LEXICAL embedder (shared words, not meaning)", exc, model)
        return lexical
    offline = False

    def embed(texts: list[str]) -> Sequence[Any]:
        nonlocal offline
        if not offline:
            try:
                return ollama(texts)
            except EmbedderError as exc:
                if not isinstance(exc.__cause__, (ConnectionError, OSError, httpx.ConnectError,
                                                  httpx.ConnectTimeout)):
                    raise
                offline = True
                where = host or os.environ.get("OLLAMA_HOST") or "http://127.0.0.1:11434"
                log.warning("no Ollama answered at %s: embedding %s with the OFFLINE LEXICAL embedder (shared "
                            "words, not meaning), for trying agentmem only (real ones: ollama pull %s)",
                            where, model, model)
        return lexical(texts)
    return embed


EMBEDDERS: dict[str, Callable[..., RawEmbedder]] = {"ollama": ollama_embedder, "lexical": lexical_embedder,
                                                    "auto": auto_embedder}


@dataclass
class Stats:
    claimed: int = 0
    completed: int = 0
    cached: int = 0
    failed: int = 0
    gone: int = 0
    batches: int = 0
    embedded_texts: int = 0
    started: float = field(default_factory=time.monotonic)

    def rate(self) -> float:
        return self.completed / max(time.monotonic() - self.started, 1e-9)


class Worker:
    """One worker process's loop; several may run against one database (or in one process, one per thread)."""

    def __init__(self, database_url: str, *, model: str | None = None, batch_size: int = 64,
                 lease_seconds: float = 300.0, embedder: str | Callable[..., RawEmbedder] = "ollama",
                 host: str | None = None, poll: float = 1.0, log_every: float = 10.0):
        import psycopg
        from pgvector.psycopg import register_vector
        self.database_url = database_url
        self.model = model
        self.batch_size = batch_size
        self.lease_seconds = lease_seconds
        self.make_embedder = EMBEDDERS[embedder] if isinstance(embedder, str) else embedder
        self.host = host
        self.poll = poll
        self.log_every = log_every
        self.stats = Stats()
        self.stopping = threading.Event()
        self._embedders: dict[str, RawEmbedder] = {}
        # No server-side prepared statements: the worker works through a transaction pooler too
        # (docs/pooling.md); its LISTEN needs a session of its own (a direct URL or a session pool).
        self._conn = psycopg.connect(database_url, autocommit=True, prepare_threshold=None)
        register_vector(self._conn)
        self._listen: Any = None
        self._last_log = time.monotonic()

    def close(self) -> None:
        self._conn.close()
        if self._listen is not None:
            self._listen.close()

    def stop(self, *_: Any) -> None:
        """Finish the batch in hand, then return from run()."""
        self.stopping.set()

    def _embedder(self, model: str, dimension: int) -> RawEmbedder:
        if model not in self._embedders:
            self._embedders[model] = self.make_embedder(model, dimension, self.host)
        return self._embedders[model]

    # -- one batch -------------------------------------------------------------------------------

    def run_batch(self) -> int:
        """Claim one batch, embed it, complete or fail it; returns the number of jobs claimed."""
        jobs = self._conn.execute(
            "select * from agentmem.claim_embedding_jobs(model => %s, batch_size => %s, "
            "lease => make_interval(secs => %s))", (self.model, self.batch_size, self.lease_seconds)).fetchall()
        if not jobs:
            return 0
        self.stats.claimed += len(jobs)
        self.stats.batches += 1
        tenants = [j[0] for j in jobs]
        ids = [j[1] for j in jobs]
        model, dimension, token = jobs[0][2], jobs[0][3], jobs[0][6]
        vectors: list[Any] = [j[5] for j in jobs]
        misses = [i for i, v in enumerate(vectors) if v is None]
        self.stats.cached += len(jobs) - len(misses)
        if misses:
            try:
                fresh = list(self._embedder(model, dimension)([jobs[i][4] for i in misses]))
                if len(fresh) != len(misses):
                    raise ValueError(f"the embedder returned {len(fresh)} vectors for {len(misses)} texts")
            except Exception as exc:  # noqa: BLE001 - any embedder failure fails the batch, with its message
                self._fail(token, tenants, ids, f"{type(exc).__name__}: {exc}")
                return len(jobs)
            self.stats.embedded_texts += len(misses)
            for i, v in zip(misses, fresh):
                vectors[i] = Vector(as_floats(v))
        self._complete(token, tenants, ids, vectors)
        return len(jobs)

    def _count(self, outcomes: list[tuple[Any, str]]) -> None:
        for _, outcome in outcomes:
            if outcome in ("retry", "failed"):
                self.stats.failed += 1
            elif outcome == "gone":
                self.stats.gone += 1
            else:
                self.stats.completed += 1

    def _complete(self, token, tenants, ids, vectors) -> None:
        import psycopg
        try:
            self._count(self._conn.execute(
                "select * from agentmem.complete_embedding_jobs(lease_token => %s, tenant_ids => %s, "
                "job_ids => %s, embeddings => %s)", (token, tenants, ids, vectors)).fetchall())
            return
        except psycopg.Error as exc:
            log.warning("completing a batch of %d failed (%s); completing job by job", len(ids),
                        exc.diag.message_primary or exc)
        for tenant, job, vector in zip(tenants, ids, vectors):
            try:
                self._count(self._conn.execute(
                    "select * from agentmem.complete_embedding_jobs(lease_token => %s, tenant_ids => %s, "
                    "job_ids => %s, embeddings => %s)", (token, [tenant], [job], [vector])).fetchall())
            except psycopg.Error as exc:
                self._fail(token, [tenant], [job], f"{exc.sqlstate}: {exc.diag.message_primary or exc}")

    def _fail(self, token, tenants, ids, error: str) -> None:
        log.warning("embedding %d job(s) failed: %s", len(ids), error)
        self._count(self._conn.execute(
            "select * from agentmem.fail_embedding_jobs(lease_token => %s, tenant_ids => %s, job_ids => %s, "
            "error => %s)", (token, tenants, ids, error)).fetchall())

    # -- the loop --------------------------------------------------------------------------------

    def backlog(self) -> int:
        return int(self._conn.execute("select agentmem.embedding_queue_depth(model => %s)",
                                      (self.model,)).fetchone()[0])

    def _log_progress(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_log >= self.log_every:
            self._last_log = now
            log.info("embedded %d jobs (%d from the embedding cache), %.1f jobs/s, %d failed tries, "
                     "backlog %d", self.stats.completed, self.stats.cached, self.stats.rate(), self.stats.failed,
                     self.backlog())

    def _wait(self) -> None:
        """Sleep until a NOTIFY on the channel, a stop, or poll seconds."""
        import psycopg
        if self._listen is None:
            self._listen = psycopg.connect(self.database_url, autocommit=True)
            self._listen.execute(f"listen {CHANNEL}")
            return  # jobs queued before LISTEN: claim once more first
        deadline = time.monotonic() + self.poll
        while not self.stopping.is_set() and time.monotonic() < deadline:
            for _ in self._listen.notifies(timeout=min(1.0, self.poll), stop_after=1):
                return

    def run(self, *, once: bool = False) -> Stats:
        """Work until stopped (or, with once, until no job is ready); returns the counts."""
        log.info("worker started (model %s, batch %d, lease %.0f s); backlog %d", self.model or "any",
                 self.batch_size, self.lease_seconds, self.backlog())
        while not self.stopping.is_set():
            n = self.run_batch()
            self._log_progress()
            if n == 0:
                if once:
                    break
                self._wait()
        self._log_progress(force=True)
        return self.stats


def main(database_url: str, *, model: str | None, batch_size: int, once: bool, lease_seconds: float,
         embedder: str, host: str | None, poll: float) -> int:
    import psycopg
    logging.basicConfig(level=logging.INFO, format="%(asctime)s agentmem worker: %(message)s")
    try:
        worker = Worker(database_url, model=model, batch_size=batch_size, lease_seconds=lease_seconds,
                        embedder=embedder, host=host, poll=poll)
    except psycopg.OperationalError:
        raise  # no server, a refused login: the command's one line and exit code 2 (agentmem.cli)
    except psycopg.Error as exc:
        log.error("cannot start: [%s] %s", exc.sqlstate, exc.diag.message_primary or exc)
        return 1
    signal.signal(signal.SIGTERM, worker.stop)
    signal.signal(signal.SIGINT, worker.stop)
    try:
        worker.run(once=once)
    except psycopg.Error as exc:
        hint = ""
        if exc.sqlstate == "42501":
            hint = " (the worker's login role must be a member of agentmem_worker: grant agentmem_worker to it)"
        log.error("[%s] %s%s", exc.sqlstate, exc.diag.message_primary or exc, hint)
        return 1
    finally:
        worker.close()
    return 0
