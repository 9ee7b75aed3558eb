"""`agentmem demo`: a short narrated tour through the real API (`make demo`).

It recreates a database ``agentmem_demo`` on the given server, migrates it,
creates an application login (no superuser, so row-level security applies) and
walks through what a docs assistant does with agentmem.
"""

from __future__ import annotations

import os
import textwrap
from urllib.parse import urlsplit, urlunsplit

import psycopg

from . import __version__
from .migrate import Migrator, Source

DEMO_DB = "agentmem_demo"
DEMO_APP = "agentmem_demo_app"
OFFLINE_MODEL = "agentmem-lexical-768"


def say(text: str) -> None:
    print(textwrap.fill(text, width=100, subsequent_indent="  "))


def step(title: str) -> None:
    print(f"\n== {title}")


def _with_db(url: str, dbname: str, user: str | None = None) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc
    if user:
        netloc = user + "@" + netloc.split("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, "/" + dbname, parts.query, parts.fragment))


def _prepare(url: str) -> tuple[str, str]:
    """Recreate the demo database, migrate it, create the app login. Returns (admin, app) URLs."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"drop database if exists {DEMO_DB} with (force)")
        conn.execute(f"create database {DEMO_DB}")
        if not conn.execute("select from pg_roles where rolname = %s", (DEMO_APP,)).fetchone():
            conn.execute(f"create role {DEMO_APP} login")
    admin_url = _with_db(url, DEMO_DB)
    migrator = Migrator(admin_url, Source.load())
    applied = migrator.migrate()
    migrator.grant_app_role(DEMO_APP)
    with psycopg.connect(admin_url) as conn:
        version = conn.execute("select current_setting('server_version'), "
                               "(select extversion from pg_extension where extname = 'vector')").fetchone()
    say(f"agentmem {__version__} on PostgreSQL {version[0]} with pgvector {version[1]}: database "
        f"{DEMO_DB} created and migrated ({len(applied)} migrations). The app connects as "
        f"{DEMO_APP}, an ordinary login in role agentmem_app, so row-level security applies to it.")
    return admin_url, _with_db(url, DEMO_DB, DEMO_APP)


def _embedder(admin_url: str):
    """Ollama with nomic-embed-text when one answers; else the offline lexical embedder."""
    from .lexical import LexicalEmbedder
    host = os.environ.get("OLLAMA_HOST", "http://127.0.0.1:11434")
    try:
        import ollama
        ollama.Client(host=host, timeout=5).embed(model="nomic-embed-text", input="ping")
    except Exception:  # noqa: BLE001 - any failure means: no usable Ollama here
        print(f"No Ollama with nomic-embed-text at {host}: using the built-in offline embedder "
              f"{OFFLINE_MODEL}, which is lexical (shared words), not semantic.")
        with psycopg.connect(admin_url) as conn:
            conn.execute("select agentmem.register_model(model => %s, dimension => 768)", (OFFLINE_MODEL,))
        return LexicalEmbedder(model=OFFLINE_MODEL, dim=768)
    from .embed import OllamaEmbedder
    say(f"Ollama answered at {host}: embedding with nomic-embed-text (768 dimensions).")
    return OllamaEmbedder(model="nomic-embed-text", host=host)


def run(url: str | None) -> int:
    if not url:
        print("agentmem demo: pass --database-url (make demo starts an embedded server and passes it)")
        return 2
    print("agentmem demo: a docs assistant's memory, inside PostgreSQL")
    step("1. install")
    admin_url, app_url = _prepare(url)
    step("2. embeddings")
    embedder = _embedder(admin_url)
    from .client import Memory
    with Memory.connect(app_url, tenant="docs-co", embedder=embedder) as mem:
        tour(mem, admin_url)
    print("\nDone. Re-run with `make demo`; explore with psql: "
          f"{_with_db(url, DEMO_DB)}  then  \\df+ agentmem.*")
    return 0


def tour(mem, admin_url: str) -> None:
    step("3. tenant isolation")
    say(f"Every call runs with tenant {mem.tenant!r} set for its transaction only; with no tenant set, "
        "agentmem raises AM001 instead of returning everything.")
