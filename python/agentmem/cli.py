"""The ``agentmem`` command: migrate, status, distribute, psql-script, docs, dev-server, cache-report, worker, demo."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import __version__
from .errors import AgentmemError


def _database_url(args: argparse.Namespace) -> str:
    url = args.database_url or os.environ.get("AGENTMEM_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit("agentmem: no database: pass --database-url or set AGENTMEM_DATABASE_URL")
    return url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentmem", description=__doc__)
    parser.add_argument("--version", action="version", version=f"agentmem {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def db_command(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("--database-url", help="libpq URL; default $AGENTMEM_DATABASE_URL or $DATABASE_URL")
        p.add_argument("--source", type=Path,
                       help="a checkout holding migrations/ and sql/ (default: the SQL shipped in the package)")
        return p

    p = db_command("migrate", "apply pending migrations and re-apply the definitions")
    p.add_argument("--grant-app-role", action="append", default=[], metavar="ROLE",
                   help="then make this existing login role an application role (repeatable)")
    db_command("status", "list applied and pending migrations, and whether the installation is distributed")
    p = db_command("distribute", "distribute the installation by tenant on Citus (on the coordinator; idempotent)")
    p.add_argument("--shard-count", type=int, help="shards per distributed table (default citus.shard_count)")
    p = sub.add_parser("psql-script", help="print the psql install/upgrade script")
    p.add_argument("--source", type=Path)
    p.add_argument("-o", "--output", type=Path)
    p = sub.add_parser("docs", help="write the API reference (docs/api.md) from a migrated database's catalogue")
    p.add_argument("--database-url")
    p.add_argument("-o", "--output", type=Path)
    p = sub.add_parser("dev-server", help="a local embedded PostgreSQL 18 + pgvector for demos and tests")
    p.add_argument("action", choices=["start", "stop", "url"])
    p.add_argument("--data-dir", type=Path, default=Path(".pgdata/embedded"))
    p = sub.add_parser("cache-report", help="answer cache: hits, wrong hits and net value per threshold")
    p.add_argument("--database-url")
    p.add_argument("--tenant", required=True)
    p.add_argument("--cost-uncached", type=float, required=True, help="cost of one LLM call the cache saves")
    p.add_argument("--cost-wrong", type=float, required=True, help="cost of one wrong cached answer")
    p.add_argument("--png", type=Path, help="also plot net value per 1,000 queries against threshold")
    p = sub.add_parser("worker", help="embed the text stored without a vector (the embedding queue); "
                                      "runs until SIGTERM")
    p.add_argument("--database-url", help="libpq URL of a member of agentmem_worker; "
                                          "default $AGENTMEM_DATABASE_URL or $DATABASE_URL")
    p.add_argument("--model", help="embed only this model's jobs (default: any model's, oldest first)")
    p.add_argument("--batch", type=int, default=64, help="jobs per claim (1 to 1000; default 64)")
    p.add_argument("--once", action="store_true", help="exit once no job is ready instead of waiting")
    p.add_argument("--lease", type=float, default=300.0,
                   help="seconds a claim holds its jobs before another worker may take them (default 300)")
    p.add_argument("--embedder", choices=["ollama", "lexical"], default="ollama",
                   help="ollama (default; OLLAMA_HOST or --ollama-host) or the offline lexical embedder")
    p.add_argument("--ollama-host", help="the Ollama server (default: OLLAMA_HOST, else 127.0.0.1:11434)")
    p.add_argument("--poll", type=float, default=30.0,
                   help="idle: seconds between claims without a NOTIFY (retries whose backoff ended; default 30)")
    p = sub.add_parser("demo", help="a short narrated tour through the real API")
    p.add_argument("--database-url")
    args = parser.parse_args(argv)

    try:
        if args.command in ("migrate", "status", "distribute"):
            from .migrate import Migrator, Source, format_status
            migrator = Migrator(_database_url(args), Source.load(args.source))
            if args.command == "migrate":
                applied = migrator.migrate()
                print(f"applied {len(applied)} migration(s)" + (": " + ", ".join(applied) if applied else "")
                      + f"; definitions re-applied ({len(migrator.source.definitions)} files)")
                for role in args.grant_app_role:
                    migrator.grant_app_role(role)
                    print(f"role {role} may now use agentmem as an application role")
            elif args.command == "distribute":
                rows = migrator.distribute(args.shard_count)
                for table, distribution, note in rows:
                    print(f"{table}: {distribution}" + (f" ({note})" if note else ""))
                print(f"distributed: {migrator.distributed()}; {len(rows)} change(s)"
                      + ("" if rows else ", already distributed"))
            else:
                print(format_status(migrator.status()))
                print(f"distributed: {migrator.distributed()}")
        elif args.command == "psql-script":
            from .migrate import Source, render_psql
            text = render_psql(Source.load(args.source))
            if args.output:
                args.output.write_text(text)
            else:
                sys.stdout.write(text)
        elif args.command == "docs":
            import psycopg

            from .docs import render
            with psycopg.connect(_database_url(args)) as conn:
                text = render(conn)
            if args.output:
                args.output.parent.mkdir(parents=True, exist_ok=True)
                args.output.write_text(text)
            else:
                sys.stdout.write(text)
        elif args.command == "dev-server":
            from . import devserver
            if args.action == "start":
                print(devserver.start(args.data_dir))
            elif args.action == "stop":
                devserver.stop(args.data_dir)
            else:
                print(devserver.url())
        elif args.command == "cache-report":
            return _cache_report(args)
        elif args.command == "worker":
            from .worker import main as worker_main
            return worker_main(_database_url(args), model=args.model, batch_size=args.batch, once=args.once,
                               lease_seconds=args.lease, embedder=args.embedder, host=args.ollama_host,
                               poll=args.poll)
        elif args.command == "demo":
            from .demo import run
            return run(args.database_url or os.environ.get("AGENTMEM_DATABASE_URL"))
    except AgentmemError as exc:
        print(f"agentmem: error [{exc.sqlstate or '-'}]: {exc}", file=sys.stderr)
        return 1
    return 0


def _fmt(value) -> str:
    return "-" if value is None else f"{value}"


def _cache_report(args: argparse.Namespace) -> int:
    from .client import Memory
    with Memory.connect(_database_url(args), tenant=args.tenant, max_size=1) as mem:
        rows = mem.cache_report(args.cost_uncached, args.cost_wrong)
    head = ("threshold", "queries", "hits", "reviewed", "wrong", "hits/1000", "wrong/1000", "net/1000")
    table = [(f"{r.threshold:.2f}", str(r.queries), str(r.hits), str(r.reviewed), str(r.reviewed_wrong),
              _fmt(r.hits_per_1000), _fmt(r.wrong_per_1000), _fmt(r.net_value_per_1000)) for r in rows]
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(head)]
    print("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    for t in table:
        print("  ".join(c.rjust(w) for c, w in zip(t, widths)))
    if args.png:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("agentmem: --png needs matplotlib: pip install matplotlib (or agentmem[bench])", file=sys.stderr)
            return 2
        points = [(r.threshold, float(r.net_value_per_1000)) for r in rows if r.net_value_per_1000 is not None]
        if not points:
            print("agentmem: nothing reviewed yet: review hits (agentmem.review_hit) before plotting",
                  file=sys.stderr)
            return 1
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o")
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xlabel("similarity threshold")
        ax.set_ylabel("net value per 1,000 queries")
        ax.set_title(f"answer cache, tenant {args.tenant}")
        fig.tight_layout()
        fig.savefig(args.png)
        print(f"plot written to {args.png}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
