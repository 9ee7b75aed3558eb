"""What every benchmark shares: the server, fresh databases, connections, loading, timing, reports.

A benchmark script is ``bench/bench_<topic>.py --out FILE [--quick]``; it imports
this module (it sits beside them) and the installed ``agentmem`` and ``agentmem_dev``, never
anything from tests/. Bulk loading goes through ``agentmem_dev.bulk.Bulk``, the one
loader that keeps the tables' invariants (the tests load through it too).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import sys
import time
from pathlib import Path

import psycopg
from psycopg import sql
from pgvector.psycopg import register_vector

from agentmem_dev import devserver
from agentmem_dev.bulk import Bulk, check_invariants, unit_vectors  # noqa: F401 - re-exported for the scripts
from agentmem.migrate import Migrator, Source

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"  # read at run time, never copied into the project
APP_ROLE = "agentmem_bench_app"


def start_server(port: int | None = None) -> str:
    """The benchmarks' own embedded server (data in .pgdata/bench); its URL."""
    return devserver.start(ROOT / ".pgdata" / "bench", port=port, fast=True)  # throwaway data: fsync etc. off, on purpose


def connect(url: str, tenant: str | None = None) -> psycopg.Connection:
    """An autocommit connection with pgvector's types, the tenant set for the session when given."""
    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    if tenant is not None:
        conn.execute("select agentmem.set_tenant(tenant_id => %s)", (tenant,))
    return conn


def probe_start(doc: str | None, dbname: str) -> tuple[argparse.Namespace, str, str, float]:
    """A probe's command line (--out FILE, --port P) and a fresh database on the bench server: the
    parsed arguments, the admin and app URLs, and the perf_counter() it started at."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--port", type=int, default=int(os.environ.get("AGENTMEM_EMBEDDED_PORT", 55452)))
    args = parser.parse_args()
    started = time.perf_counter()
    admin_url, app_url = fresh_database(start_server(args.port), dbname)
    assert app_url is not None
    return args, admin_url, app_url, started


def database_url(server_url: str, dbname: str) -> str:
    """The URL of database `dbname` on the server of `server_url`, with the same login."""
    return server_url.rsplit("/", 1)[0] + "/" + dbname


def as_login(url: str, login: str) -> str:
    """`url` with its user (and password, if it has one) replaced by `login`."""
    user = url.split("//", 1)[1].split("@", 1)[0]
    return url.replace(f"//{user}@", f"//{login}@", 1)


def explained(note: str) -> tuple[float, str] | None:
    """An auto_explain notice -> (the statement's duration in ms, its text up to the plan); None for any
    other notice."""
    m = re.match(r"duration: ([\d.]+) ms", note)
    if not m or "Query Text: " not in note:
        return None
    text = note.split("Query Text: ", 1)[1].splitlines()
    return float(m.group(1)), "\n".join(text[:next((i for i, t in enumerate(text) if "(cost=" in t), len(text))])


def fresh_database(server_url: str, dbname: str, *, app_role: str | None = APP_ROLE,
                   root: Path = ROOT) -> tuple[str, str | None]:
    """Drop and create `dbname`, migrate it (from the checkout `root`: its migrations/ and sql/), make
    `app_role` an application login. Returns (admin, app) URLs."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"drop database if exists {dbname} with (force)")
        conn.execute(f"create database {dbname}")
    admin_url = database_url(server_url, dbname)
    Migrator(admin_url, Source.load(root)).migrate()
    if app_role is None:
        return admin_url, None
    with connect(admin_url) as conn:
        if not conn.execute("select 1 from pg_roles where rolname = %s", (app_role,)).fetchone():
            conn.execute(f"create role {app_role} login")
        conn.execute("select agentmem.grant_app_role(role_name => %s)", (app_role,))
        # tenants are bound to logins: the benchmark's login acts as its own tenants
        conn.execute("select agentmem.grant_tenant(role_name => %s, all_tenants => true)", (app_role,))
    return admin_url, as_login(admin_url, app_role)


def copy_into_postgresstore(admin: psycopg.Connection, prefixes, keys, texts, vectors) -> dict[str, float]:
    """COPY rows into LangGraph PostgresStore's tables: row i is key keys[i] in namespace prefixes[i]
    ("tenant.user"), value {"text": texts[i]}, its field "text" embedded as vectors[i]. Its HNSW index is
    dropped for the load and rebuilt after, then both tables are vacuumed and analysed. Returns the
    seconds of each step: copy_s, index_s, vacuum_s."""
    indexdef = admin.execute("select indexdef from pg_indexes where indexname = 'store_vectors_embedding_idx'"
                             ).fetchone()[0]
    admin.execute("drop index store_vectors_embedding_idx")
    t0 = time.perf_counter()
    with admin.cursor() as cur:
        with cur.copy("copy store (prefix, key, value) from stdin") as cp:
            for prefix, key, text in zip(prefixes, keys, texts):
                cp.write_row((prefix, str(key), json.dumps({"text": text})))
        with cur.copy("copy store_vectors (prefix, key, field_name, embedding) from stdin with (format binary)") as cp:
            cp.set_types(["text", "text", "text", "vector"])
            for prefix, key, vector in zip(prefixes, keys, vectors):
                cp.write_row((prefix, str(key), "text", vector))
    t1 = time.perf_counter()
    admin.execute(indexdef)
    t2 = time.perf_counter()
    admin.execute("vacuum (analyze) store, store_vectors")
    return {"copy_s": t1 - t0, "index_s": t2 - t1, "vacuum_s": time.perf_counter() - t2}


def load_interleaved(admin: psycopg.Connection, owners, rng, model: str, dim: int) -> None:
    """Messages of random unit vectors, owners[i] = (tenant, user) of message i, loaded in a random order
    so that every tenant's rows are scattered among the others' in the heap, as they arrive; the model's
    shared HNSW index built after the COPY, then VACUUM (ANALYZE) (the visibility map, for index-only
    counts)."""
    bulk = Bulk(admin, model=model, rng=rng)
    with bulk.hnsw_dropped(tables=("message_embeddings",)):
        order = rng.permutation(len(owners))
        bulk.load_messages([owners[i] for i in order], unit_vectors(rng, len(owners), dim))
    admin.execute("vacuum (analyze) agentmem.messages, agentmem.message_embeddings")


def percentile(xs, p: float) -> float:
    """The p-th percentile (nearest rank) of xs."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def p50_p95(xs) -> tuple[float, float]:
    return statistics.median(xs), percentile(xs, 95)


def command() -> str:
    """The command line that ran this benchmark, for its report."""
    script = os.path.relpath(sys.argv[0], ROOT)
    return " ".join([".venv/bin/python", shlex.quote(script), *map(shlex.quote, sys.argv[1:])])


def write_report(out: str | Path, text: str) -> Path:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"report written to {path}")
    return path


def create_tenant_indexes(admin: psycopg.Connection, model: str) -> list[tuple[str, float]]:
    """The DBA's step: agentmem.create_tenant_index for every tenant agentmem.tenants_needing_index lists
    for message_embeddings of `model` (one call per tenant builds all its missing indexes), biggest
    first. Returns (tenant, seconds) per tenant."""
    built = []
    for (tenant,) in admin.execute("select tenant_id from agentmem.tenants_needing_index "
                                   "where table_name = 'message_embeddings' and model = %s "
                                   "group by tenant_id order by max(row_count) desc", (model,)).fetchall():
        t0 = time.perf_counter()
        admin.execute("select agentmem.create_tenant_index(tenant_id => %s, model => %s)", (tenant, model))
        built.append((tenant, time.perf_counter() - t0))
    return built


# The answer cache at scale (bench_cache.py --scale): its database, the questions it stores, and the
# vectors it drew, which the probes of those rows (probe_cache_lookup.py, probe_cache_floor.py) replay.
CACHE_SCALE_DB = "agentmem_bench_cache_scale"
CACHE_SCALE_WORDS = ["refund", "invoice", "password", "shipping", "account", "billing", "delivery", "warranty",
                     "upgrade", "discount", "order", "return", "payment", "login", "address", "plan"]


def cache_scale_question(t: int, k: int) -> str:
    """The k-th question bench_cache.py --scale stores for tenant t."""
    w = [CACHE_SCALE_WORDS[(t * 7 + k * 3 + i) % len(CACHE_SCALE_WORDS)] for i in range(3)]
    return f"how do I change the {w[0]} {w[1]} settings for my {w[2]} in workspace {t} item {k}"


def cache_scale_stored(per: int, tenants: int = 200, keep: int = 20) -> dict:
    """The first `keep` vectors bench_cache.py --scale drew for each of its first `tenants` tenants (`per`
    entries each): its generator (seed 11), drawn in the same order."""
    import numpy as np
    rng = np.random.default_rng(11)
    stored = {}
    for t in range(tenants):
        v = rng.standard_normal((per, 384)).astype(np.float32)
        stored[t] = (v / np.linalg.norm(v, axis=1, keepdims=True))[:keep]
    return stored


def warm(admin) -> tuple[float, str]:
    """Read every table and index of both systems into memory (pg_prewarm), so that both are measured as
    on a server whose memory holds its data, not against this machine's disk (at 1M vectors a search's
    first read of a cold page cost milliseconds): into shared_buffers ('buffer') when they fit in 90%
    of it, else into the OS page cache ('read'), which other work on this machine evicts within
    minutes. Returns the seconds taken and the mode."""
    t0 = time.perf_counter()
    admin.execute("create extension if not exists pg_prewarm")
    relations = ("from pg_class as c where c.relnamespace in ('agentmem'::regnamespace, 'public'::regnamespace) "
                 "and c.relkind in ('r', 'i')")
    fits = admin.execute(f"select sum(pg_relation_size(c.oid)) < 0.9 * (select setting::bigint * 8192 from "
                         f"pg_settings where name = 'shared_buffers') {relations}").fetchone()[0]
    mode = "buffer" if fits else "read"
    admin.execute(f"select pg_prewarm(c.oid, %s) {relations}", (mode,))
    return time.perf_counter() - t0, mode


def sized_server(server_url: str, shared_buffers: str | None, fast: bool | None = None) -> str:
    """The bench server restarted with `shared_buffers` (ALTER SYSTEM) when it runs with another value;
    `fast` as devserver.start takes it (the settings it was started with)."""
    if not shared_buffers:
        return server_url
    with psycopg.connect(server_url, autocommit=True) as c:
        if c.execute("select current_setting('shared_buffers') = %s", (shared_buffers,)).fetchone()[0]:
            return server_url
        c.execute(sql.SQL("alter system set shared_buffers = {}").format(sql.Literal(shared_buffers)))
    devserver.stop(ROOT / ".pgdata" / "bench")
    return devserver.start(ROOT / ".pgdata" / "bench", port=int(server_url.rsplit(":", 1)[1].split("/")[0]), fast=fast)
