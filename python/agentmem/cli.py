"""The ``agentmem`` command: migrate, status, distribute, psql-script, embed, cache-report, worker,
export, import, inspect; and, where the development package pg-agentmem-dev is installed, dev-server, psql,
docs and demo, which it declares in the entry-point group ``agentmem.commands`` (this module imports none
of it: a command is found by its entry point and loaded only when the parser is built)."""

from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

from . import __version__
from .errors import AgentmemError


# The commands of the development package, with their one-line help: `agentmem --help` lists them
# whether or not it is installed. Installed, each is an entry point of the group COMMAND_GROUP (declared in
# python/dev/pyproject.toml): an object with `arguments(parser)` and `run(args)` (agentmem_dev.cli.Command).
DEV_PACKAGE = "pg-agentmem-dev"
COMMAND_GROUP = "agentmem.commands"
DEV_COMMANDS = {
    "dev-server": "a local embedded PostgreSQL 18 + pgvector for demos and tests "
                  "(start and url print the URL of its database agentmem)",
    "psql": "psql on a migrated database as an application login with a tenant set "
            "(default: the dev server, started if needed, database agentmem)",
    "docs": "write the API reference (docs/api.md) from a migrated database's catalogue",
    "demo": "a short narrated tour through the real API (--web: the same as a chat page)",
}


def installed_commands() -> dict:
    """The commands other installed packages add (entry points of the group agentmem.commands), by name,
    not yet loaded: empty where pg-agentmem-dev is not installed."""
    from importlib.metadata import entry_points
    return {ep.name: ep for ep in entry_points(group=COMMAND_GROUP)}


def database_url(args: argparse.Namespace) -> str:
    url = args.database_url or os.environ.get("AGENTMEM_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit("agentmem: no database: pass --database-url or set AGENTMEM_DATABASE_URL")
    return url


def mcp_arguments(p: argparse.ArgumentParser) -> None:
    """The options of agentmem mcp (python/agentmem/mcp_server.py; docs/mcp.md)."""
    p.add_argument("--database-url", help="libpq URL of the login the server acts as; default "
                   "$AGENTMEM_DATABASE_URL or $DATABASE_URL")
    p.add_argument("--tenant", help="stdio: the tenant (the login must hold a grant of it)")
    p.add_argument("--user", help="stdio: the user whose memory the tools read and write")
    p.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP (path /mcp) instead of stdio; "
                   "every request needs a bearer JWT")
    p.add_argument("--read-only", action="store_true", help="register only the reading tools")
    p.add_argument("--allow-forget-user", action="store_true", help="let forget erase the whole user")
    p.add_argument("--embedder", choices=["none", "ollama"], default="none",
                   help="none (default): words only for queries, the worker embeds what is stored; "
                        "ollama: embed queries and writes with --model at OLLAMA_HOST")
    p.add_argument("--model", default="nomic-embed-text", help="the embedder's model (registered in agentmem.models)")
    p.add_argument("--ollama-host", help="default $OLLAMA_HOST, else 127.0.0.1:11434")
    p.add_argument("--no-embed-writes", action="store_true",
                   help="with an embedder: embed queries only, leave what is stored to the worker")
    p.add_argument("--jwt-secret-file", help="HTTP: a file holding the HS256 secret (or $AGENTMEM_MCP_JWT_SECRET)")
    p.add_argument("--jwt-public-key-file", help="HTTP: a PEM public key (RS256, ES256, EdDSA, ...)")
    p.add_argument("--jwt-audience", help="HTTP: the aud claim tokens must carry")
    p.add_argument("--jwt-issuer", help="HTTP: the iss claim tokens must carry")
    p.add_argument("--tenant-claim", default="tenant_id",
                   help="the claim naming the tenant, a dotted path (default tenant_id; the installation's "
                        "jwt_claim)")
    p.add_argument("--user-claim", default="sub", help="the claim naming the user (default sub)")
    p.add_argument("--pool-size", type=int, default=10, help="database connections at most (default 10)")
    p.add_argument("--db-timeout", type=float, default=10.0,
                   help="seconds a call waits for a database connection before its tool error (default 10)")
    p.add_argument("--allowed-host", action="append", metavar="HOST[:PORT]",
                   help="HTTP: a Host header to accept besides loopback names (the name a gateway forwards; "
                        "repeatable; e.g. mcp.example.com or mcp.example.com:*)")


DATABASE_URL_HELP = "libpq URL; default $AGENTMEM_DATABASE_URL or $DATABASE_URL"


def build_parser(commands: dict | None = None) -> tuple[argparse.ArgumentParser, dict]:
    """The command's parser, and the handlers of the commands other packages add (``installed_commands()``:
    the development commands, where pg-agentmem-dev is installed) by name."""
    parser = argparse.ArgumentParser(prog="agentmem", description=__doc__)
    parser.add_argument("--version", action="version", version=f"agentmem {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def db_command(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("--database-url", help=DATABASE_URL_HELP)
        p.add_argument("--source", type=Path,
                       help="a checkout holding migrations/ and sql/ (default: the SQL shipped in the package)")
        return p

    p = db_command("migrate", "apply pending migrations and re-apply the definitions")
    p.add_argument("--grant-app-role", action="append", default=[], metavar="ROLE",
                   help="then make this existing login role an application role (repeatable)")
    db_command("status", "list applied and pending migrations, whether the installation is distributed, "
               "its tenant binding and whether its search path is safe")
    p = db_command("distribute", "distribute the installation by tenant on Citus (on the coordinator; idempotent)")
    p.add_argument("--shard-count", type=int, help="shards per distributed table (default citus.shard_count)")
    p = sub.add_parser("psql-script", help="print the psql install/upgrade script")
    p.add_argument("--source", type=Path,
                   help="a checkout holding migrations/ and sql/ (default: the SQL shipped in the package)")
    p.add_argument("-o", "--output", type=Path, help="the file to write (default: standard output)")
    p = sub.add_parser("embed", help="print a text's embedding as a vector literal, for psql: "
                       "\\set vec `agentmem embed --model nomic-embed-text 'text'`")
    p.add_argument("text", help="the text to embed")
    p.add_argument("--model", default="nomic-embed-text", help="a model registered in agentmem.models "
                   "(default nomic-embed-text)")
    p.add_argument("--query", action="store_true", help="embed a search query (the model's query prefix); "
                   "default: a document to store")
    p.add_argument("--database-url", help="where the model's prefixes and dimension are read "
                   "(default $AGENTMEM_DATABASE_URL, which agentmem psql sets)")
    p.add_argument("--ollama-host", help="default $OLLAMA_HOST, else http://127.0.0.1:11434")
    p.add_argument("--offline", action="store_true",
                   help="the offline lexical embedder (shared words, not meaning) even if Ollama answers")
    p = sub.add_parser("cache-report", help="answer cache: hits, wrong hits and net value per threshold")
    p.add_argument("--database-url", help=DATABASE_URL_HELP)
    p.add_argument("--tenant", required=True, help="the tenant whose cache to report on")
    p.add_argument("--cost-uncached", type=float, required=True, help="cost of one LLM call the cache saves")
    p.add_argument("--cost-wrong", type=float, required=True, help="cost of one wrong cached answer")
    p.add_argument("--png", type=Path, help="also plot net value per 1,000 queries against threshold")
    p = sub.add_parser("worker", help="embed the text stored without a vector (the embedding queue); "
                                      "runs until SIGTERM")
    p.add_argument("--database-url", help="libpq URL of a member of agentmem_worker; default "
                   "$AGENTMEM_WORKER_URL (agentmem psql sets it), else $AGENTMEM_DATABASE_URL or $DATABASE_URL")
    p.add_argument("--model", help="embed only this model's jobs (default: any model's, oldest first)")
    p.add_argument("--batch", type=int, default=64, help="jobs per claim (1 to 1000; default 64)")
    p.add_argument("--once", action="store_true", help="exit once no job is ready instead of waiting")
    p.add_argument("--lease", type=float, default=300.0,
                   help="seconds a claim holds its jobs before another worker may take them (default 300)")
    p.add_argument("--embedder", choices=["ollama", "lexical", "auto"], default="ollama",
                   help="ollama (default; OLLAMA_HOST or --ollama-host), the offline lexical embedder, or auto: "
                   "Ollama where one answers, else the lexical one (for trying agentmem)")
    p.add_argument("--ollama-host", help="the Ollama server (default: OLLAMA_HOST, else 127.0.0.1:11434)")
    p.add_argument("--poll", type=float, default=1.0,
                   help="idle: seconds between claims (a tenant's write notifies no one; default 1)")
    p = sub.add_parser("mcp", help="serve a user's memory as MCP tools: stdio (default) or streamable HTTP "
                       "with JWTs [pip install 'pg-agentmem[mcp]']")
    mcp_arguments(p)
    p = sub.add_parser("export", help="write a user's (or, for a DBA, a whole tenant's) memory as JSON Lines")
    p.add_argument("--database-url", help=DATABASE_URL_HELP)
    p.add_argument("--tenant", required=True, help="the tenant to export from")
    p.add_argument("--user", help="the user to export; without it, every user of the tenant (a DBA: superuser "
                   "or BYPASSRLS)")
    p.add_argument("-o", "--output", type=Path, help="the file to write (default: standard output)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="rows done on stderr (default: when stderr is a terminal)")
    p = sub.add_parser("import", help="read an export back (all or nothing; importing twice changes nothing)")
    p.add_argument("file", type=Path, help="the .jsonl file, or - for standard input")
    p.add_argument("--database-url", help=DATABASE_URL_HELP)
    p.add_argument("--tenant", help="the tenant to import into (a tenant export: default its header's tenant)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="rows done on stderr (default: when stderr is a terminal)")
    p = sub.add_parser("inspect", help="a local browser page to see, correct and review memory as a database "
                       "login (pip install 'pg-agentmem[inspect]')")
    p.add_argument("--database-url", help="libpq URL of the login whose tenants the page shows; default "
                   "$AGENTMEM_DATABASE_URL or $DATABASE_URL")
    p.add_argument("--tenant", help="open this tenant (default: the list of the login's tenants)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--embedder", choices=["ollama", "lexical", "auto"], default="auto",
                   help="for search by meaning and corrected facts: ollama, the offline lexical embedder, or auto "
                   "(default: Ollama where one answers, else lexical)")
    p.add_argument("--ollama-host", help="the Ollama server (default: OLLAMA_HOST, else 127.0.0.1:11434)")
    commands = commands or {}
    dev_handlers = {}
    for name, text in DEV_COMMANDS.items():
        if name not in commands:
            sub.add_parser(name, help=f"{text} [pip install {DEV_PACKAGE}]")
    for name, entry in sorted(commands.items(), key=lambda c: list(DEV_COMMANDS).index(c[0])
                              if c[0] in DEV_COMMANDS else len(DEV_COMMANDS)):
        command = entry.load()
        command.arguments(sub.add_parser(name, help=DEV_COMMANDS.get(name, command.help)))
        dev_handlers[name] = command.run
    for choice in sub._choices_actions:  # `agentmem CMD --help` starts with what the command does
        command = sub.choices[choice.dest]
        command.description = command.description or choice.help
    return parser, dev_handlers


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    commands = installed_commands()
    if argv[:1] and argv[0] in DEV_COMMANDS and argv[0] not in commands:
        print(f"agentmem {argv[0]}: a development command, in the package {DEV_PACKAGE}, which is not installed: "
              f"pip install {DEV_PACKAGE} (in a checkout: make venv)", file=sys.stderr)
        return 2
    parser, dev_handlers = build_parser(commands)
    args = parser.parse_args(argv)

    try:
        if args.command in dev_handlers:
            return dev_handlers[args.command](args) or 0
        elif args.command in ("migrate", "status", "distribute"):
            from .migrate import Migrator, Source, format_status
            migrator = Migrator(database_url(args), Source.load(args.source))
            if args.command == "migrate":
                applied = migrator.migrate()
                print(f"applied {len(applied)} migration(s)" + (": " + ", ".join(applied) if applied else "")
                      + f"; definitions re-applied ({len(migrator.source.definitions)} files)")
                for warning in migrator.warnings:  # what the DBA must act on
                    print(f"agentmem: WARNING: {warning}", file=sys.stderr)
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
                if not migrator.installed():
                    print(_not_installed(migrator.conninfo, len(migrator.source.migrations)))
                    return 3
                print(format_status(migrator.status()))
                print(f"distributed: {migrator.distributed()}")
                for line in migrator.security():
                    print(line)
        elif args.command == "psql-script":
            from .migrate import Source, render_psql
            text = render_psql(Source.load(args.source))
            if args.output:
                args.output.write_text(text)
            else:
                sys.stdout.write(text)
        elif args.command == "embed":
            return _embed(args.text, args.model, args.query,
                          args.database_url or os.environ.get("AGENTMEM_DATABASE_URL"),
                          args.offline, args.ollama_host)
        elif args.command == "cache-report":
            return _cache_report(args)
        elif args.command == "worker":
            from .worker import main as worker_main
            if args.embedder == "ollama":
                from .embed import import_ollama
                import_ollama()  # before connecting: a missing extra is said first
            return worker_main(args.database_url or os.environ.get("AGENTMEM_WORKER_URL") or database_url(args),
                               model=args.model, batch_size=args.batch, once=args.once,
                               lease_seconds=args.lease, embedder=args.embedder, host=args.ollama_host,
                               poll=args.poll)
        elif args.command == "inspect":
            try:
                from .inspect.server import serve
            except ModuleNotFoundError as exc:
                if exc.name not in ("starlette", "jinja2", "uvicorn", "multipart", "python_multipart"):
                    raise
                print(f"agentmem inspect: needs {exc.name}, in the inspect extra: pip install 'pg-agentmem[inspect]' "
                      "(in a checkout, make venv installs it)", file=sys.stderr)
                return 2
            return serve(database_url(args), tenant=args.tenant, host=args.host, port=args.port,
                         embedder=args.embedder, ollama_host=args.ollama_host)
        elif args.command == "mcp":
            from . import mcp_server
            return mcp_server.main(args, database_url(args))
        elif args.command == "export":
            from .transfer import export
            if args.output:
                with open(args.output, "w", encoding="utf-8", newline="\n") as out:
                    export(database_url(args), out, tenant=args.tenant, user_id=args.user, progress=args.progress)
            else:
                export(database_url(args), sys.stdout, tenant=args.tenant, user_id=args.user,
                       progress=args.progress)
        elif args.command == "import":
            from .transfer import import_file
            if str(args.file) == "-":
                counts = import_file(database_url(args), sys.stdin, tenant=args.tenant, progress=args.progress)
            else:
                with open(args.file, encoding="utf-8", newline="\n") as source:
                    counts = import_file(database_url(args), source, tenant=args.tenant, progress=args.progress)
            print("imported: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    except Exception as exc:
        reason = _unreachable(exc)
        if reason is not None:
            print(f"agentmem: cannot connect to the database: {reason}", file=sys.stderr)
            return 2
        if isinstance(exc, AgentmemError):
            print(f"agentmem: error [{exc.sqlstate or '-'}]: {exc}", file=sys.stderr)
            return 1
        if isinstance(exc, ModuleNotFoundError) and exc.name == "ollama":  # embed.import_ollama: what to install
            print(f"agentmem {args.command}: {exc}", file=sys.stderr)
            return 2
        refused = _refused(args, exc)
        if refused is not None:
            print(f"agentmem {args.command}: {refused}", file=sys.stderr)
            return 2
        raise
    return 0


def _refused(args: argparse.Namespace, exc: BaseException) -> str | None:
    """One line for what the user can correct: a file that cannot be read or written, a call the login
    may not make (what to do instead); None for any other error."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"cannot {'read' if args.command == 'import' else 'write'} {exc.filename}: {exc.strerror}"
    psycopg = sys.modules.get("psycopg")
    if psycopg is None or not isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return None
    if args.command == "export" and args.user is None:
        return ("exporting a whole tenant (no --user) is the DBA's: a superuser or BYPASSRLS role; "
                "as the application login, export one user: --user USER_ID")
    if args.command == "import" and "import_tenant" in str(exc):
        return ("this is a tenant's export, imported by the DBA (a superuser or BYPASSRLS role); "
                "as the application login, import one user's export (agentmem export --user USER_ID)")
    return f"permission denied: {exc.diag.message_primary or exc}"


def _not_installed(url: str, migrations: int) -> str:
    """What `status` says of a database without agentmem (exit code 3): not a failed install."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    params = conninfo_to_dict(url)
    shown = url if "password" not in params and ":" not in url.split("@")[0].split("//")[-1] else \
        make_conninfo(**{k: v for k, v in params.items() if k != "password"})
    return (f"agentmem is not installed in database {params.get('dbname', '(default)')}: it has no "
            f"agentmem.schema_migrations. Nothing failed; there is nothing here yet.\n"
            f"Install it ({migrations} migrations): agentmem migrate --database-url '{shown}'")


# Connection errors: no server there, a refused login, no such database, a server shutting down.
_CONNECT_SQLSTATE_CLASSES = ("08", "28", "3D", "57P")


def _unreachable(exc: BaseException) -> str | None:
    """One line saying why the database could not be reached, or None for any other error."""
    from .errors import ConnectionLost
    cause: BaseException = exc
    if isinstance(exc, ConnectionLost):
        cause = exc.__cause__ or exc
    else:
        psycopg = sys.modules.get("psycopg")
        if psycopg is None or not isinstance(exc, psycopg.OperationalError):
            return None
        code = getattr(exc, "sqlstate", None)
        if code is not None and not code.startswith(_CONNECT_SQLSTATE_CLASSES):
            return None
    return " ".join(str(cause.args[0] if cause.args else cause).split())


def _fmt(value) -> str:
    return "-" if value is None else f"{value}"


def _cache_report(args: argparse.Namespace) -> int:
    from .client import Memory
    with Memory.connect(database_url(args), tenant=args.tenant, max_size=1) as mem:
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
            print("agentmem: --png needs matplotlib, in the plot extra: pip install 'pg-agentmem[plot]' "
                  "(in a checkout, make venv installs it)", file=sys.stderr)
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


def _float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def vector_literal(values) -> str:
    """pgvector's text form, each component the shortest text that reads back as the same float32."""
    texts = []
    for value in values:
        f = _float32(float(value))
        text = next((t for t in (f"{f:.{digits}g}" for digits in range(1, 10)) if _float32(float(t)) == f), str(f))
        texts.append(text)
    return "[" + ",".join(texts) + "]"


def _embed(text: str, model: str, query: bool, database_url: str | None, offline: bool, host: str | None) -> int:
    """`agentmem embed`: the vector literal on stdout; what was used, when not Ollama, on stderr.

    It embeds with Ollama (``OLLAMA_HOST``); where no Ollama answers it says so on stderr and prints
    the offline lexical embedding (shared words, not meaning) in the model's registered dimension."""
    import psycopg

    from .embed import import_ollama
    from .errors import EmbedderError
    from .lexical import lexical_embedding
    dimension = prefix = None
    if database_url:
        with psycopg.connect(database_url) as conn:
            try:
                row = conn.execute("select dimension, document_prefix, query_prefix "
                                   "from agentmem.get_model(model => %s)", (model,)).fetchone()
            except psycopg.Error as exc:
                from .errors import translate
                raise translate(exc) from exc
        dimension, prefix = row[0], (row[2] if query else row[1]) or ""
    where = host or os.environ.get("OLLAMA_HOST") or "http://127.0.0.1:11434"
    reason = "--offline was given" if offline else None
    if not offline:
        from .embed import OllamaEmbedder
        try:
            import httpx
        except ModuleNotFoundError:  # httpx comes with the ollama client (the extra pg-agentmem[ollama])
            import_ollama()
        embedder = OllamaEmbedder(model=model, host=host, document_prefix=prefix if prefix is not None else "",
                                  query_prefix=prefix if prefix is not None else "", use_cache=False, timeout=30.0)
        try:
            vector = embedder.embed_queries([text])[0] if query else embedder.embed_documents([text])[0]
        except EmbedderError as exc:
            if not isinstance(exc.__cause__, (ConnectionError, OSError, httpx.ConnectError, httpx.ConnectTimeout)):
                raise
            reason = f"no Ollama answered at {where}"
        else:
            if dimension is not None and len(vector) != dimension:
                print(f"agentmem embed: warning: Ollama's {model} gave {len(vector)} dimensions; "
                      f"agentmem.models registers {dimension}", file=sys.stderr)
            print(vector_literal(vector))
            return 0
    if dimension is None:
        print(f"agentmem embed: {reason}, and without a database (--database-url or $AGENTMEM_DATABASE_URL) "
              f"the dimension of {model} for the offline embedder is unknown", file=sys.stderr)
        return 2
    print(f"agentmem embed: {reason}: printed the OFFLINE LEXICAL embedding (shared words, not meaning) in "
          f"{model}'s {dimension} dimensions, for trying agentmem only (real ones: ollama pull {model})",
          file=sys.stderr)
    # Without the model's prefixes, as the demo's offline embedder: they are words to it.
    print(vector_literal(lexical_embedding(text, dimension)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
