"""The development commands of ``agentmem``: dev-server, psql, docs and demo.

Each is a ``Command`` declared in the entry-point group ``agentmem.commands`` (python/dev/pyproject.toml).
The runtime command (``agentmem.cli``) finds them there without importing this package, adds each one's
arguments to its parser with ``arguments`` and runs ``run`` inside its own error handling (an
unreachable server is one line and exit code 2, as for every command). This module imports nothing of
``agentmem.cli``: neither package's command module imports the other's.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, NamedTuple, Optional

Handler = Callable[[argparse.Namespace], Optional[int]]
DATA_DIR_HELP = ("the dev server's data directory (default .pgdata/embedded; its port: $AGENTMEM_EMBEDDED_PORT, "
                 "default 55418)")


class Command(NamedTuple):
    """One subcommand of ``agentmem``: its one-line help, what adds its arguments, what runs it."""
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Handler


def dev_server_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["start", "stop", "url"],
                   help="start (if not running) and print the URL; stop; print the URL")
    p.add_argument("--data-dir", type=Path, default=Path(".pgdata/embedded"), help=DATA_DIR_HELP)
    p.add_argument("-q", "--quiet", action="store_true",
                   help="start: only the URL (not what to run next when agentmem is not installed there)")


def psql_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", type=Path, default=Path(".pgdata/embedded"), help=DATA_DIR_HELP)
    p.add_argument("--database-url", help="a database of your own server to use instead of the dev server's, "
                   "as a role that may install agentmem there (it is migrated, the login made there)")
    p.add_argument("--tenant", default="acme", help="the session's tenant (default acme)")
    p.add_argument("--login", default="agentmem_app_user", help="the application login (created if missing)")
    p.add_argument("--psql", dest="psql_bin", help="the psql program (default: the dev server's own)")
    p.add_argument("-q", "--quiet", action="store_true", help="no banner")
    p.add_argument("psql_args", nargs=argparse.REMAINDER, help="after --: passed to psql (e.g. -- -f file.sql)")


def docs_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--database-url", help="a migrated database (default $AGENTMEM_DATABASE_URL or $DATABASE_URL)")
    p.add_argument("-o", "--output", type=Path, help="the file to write (default: standard output)")


def demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--database-url", help="a server where this login may create databases: the tour (re)creates "
                   "the database agentmem_demo there (default $AGENTMEM_DATABASE_URL)")
    p.add_argument("--web", action="store_true", help="instead of the narrated tour: the inspector's chat page "
                   "on database agentmem_chat (pip install 'pg-agentmem[inspect]'), its URL printed")
    p.add_argument("--chat-database", default="agentmem_chat", help="with --web: the database it makes if missing "
                   "and keeps between runs (default agentmem_chat)")
    p.add_argument("--port", type=int, default=8766, help="with --web: the page's port (default 8766; 0: any free one)")
    p.add_argument("--ollama-host", help="with --web: the Ollama server (default: OLLAMA_HOST, else 127.0.0.1:11434)")


def dev_server(args: argparse.Namespace) -> int:
    from . import devserver, shell
    if args.action == "start":
        try:
            return shell.dev_server_start(args.data_dir, quiet=args.quiet)
        except devserver.PortInUse as exc:
            print(f"agentmem dev-server: {exc}", file=sys.stderr)
            return 2
    if args.action == "stop":
        devserver.stop(args.data_dir)
    else:
        print(shell.dev_server_url())
    return 0


def psql(args: argparse.Namespace) -> int:
    from . import devserver, shell
    try:
        return shell.psql(args.data_dir, args.database_url, args.tenant, args.login, args.psql_bin,
                          args.psql_args, args.quiet)
    except devserver.PortInUse as exc:
        print(f"agentmem psql: {exc}", file=sys.stderr)
        return 2


def docs(args: argparse.Namespace) -> int:
    import psycopg

    from .docs import render
    url = args.database_url or os.environ.get("AGENTMEM_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit("agentmem docs: no database: pass --database-url or set AGENTMEM_DATABASE_URL")
    with psycopg.connect(url) as conn:
        text = render(conn)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def demo(args: argparse.Namespace) -> int:
    url = args.database_url or os.environ.get("AGENTMEM_DATABASE_URL")
    if args.web:
        from . import demo_web
        return demo_web.run(url, args.port, args.ollama_host, database=args.chat_database)
    from .demo import run
    return run(url)


# The entry points of the group agentmem.commands (python/dev/pyproject.toml).
DEV_SERVER = Command("a local embedded PostgreSQL 18 + pgvector for demos and tests", dev_server_arguments, dev_server)
PSQL = Command("psql on a migrated database as an application login with a tenant set", psql_arguments, psql)
DOCS = Command("write the API reference (docs/api.md) from a migrated database's catalogue", docs_arguments, docs)
DEMO = Command("a short narrated tour through the real API (--web: the same as a chat page)", demo_arguments, demo)
