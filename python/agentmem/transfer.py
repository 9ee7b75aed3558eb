"""``agentmem export`` and ``agentmem import``: a user's or a tenant's memory as JSON Lines.

Export streams: the literal call (that of ``Memory.export_user`` / ``Admin.export_tenant``) runs through a
server-side cursor and each line is written as it arrives, so the client holds one batch of lines,
never the file. The bytes are those psql's
``\\copy (select line from agentmem.export_user(user_id => 'alice')) to 'alice.jsonl'
with (format csv, quote e'\\x01', delimiter e'\\x02')`` writes: each line, then a newline.

Import reads the file line by line and sends it in pieces of at most ``MAX_CALL_BYTES`` (as
agentmem_private.import_max_call_bytes(): one call's bound), every piece in one transaction, so the
client and the server hold one piece at a time and a refusal anywhere writes nothing. A piece is a
user's header, some of the user's rows in the file's order (a conversation before its messages, a
message before its retrieval record) and an end row counting them: a user's export goes to
``import_user`` piece by piece, a tenant's to ``import_tenant``. The file's own end row, which counts
every row, is checked here (a truncated file is refused, AM020).
"""

from __future__ import annotations

import json
import sys
import time
from typing import IO, Any, Iterator

import psycopg
from pgvector.psycopg import register_vector

from .admin import Admin
from .connections import SET_TENANT
from .errors import ContentTooLarge, InvalidArgument, translate

# The export calls, streamed through a server-side cursor (Memory.export_user and Admin.export_tenant
# fetch the same rows whole).
EXPORT_USER = "select line from agentmem.export_user(user_id => %s)"
EXPORT_TENANT = "select line from agentmem.export_tenant(tenant_id => %s)"

# As agentmem_private.import_max_line_bytes(): a longer line is refused before it is sent.
MAX_LINE_BYTES = 8 * 1024 * 1024
# As agentmem_private.import_max_call_bytes(): the most bytes of lines one import call takes.
MAX_CALL_BYTES = 16 * 1024 * 1024
BATCH = 1000


class Progress:
    """Rows done so far, on stderr, at most twice a second (only when asked or stderr is a terminal)."""

    def __init__(self, what: str, enabled: bool | None = None):
        self.what = what
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.count = 0
        self.started = time.monotonic()
        self._last = 0.0

    def add(self, n: int = 1) -> None:
        self.count += n
        now = time.monotonic()
        if self.enabled and now - self._last >= 0.5:
            self._last = now
            print(f"\ragentmem: {self.what} {self.count:,} rows ({now - self.started:.1f} s)", end="",
                  file=sys.stderr, flush=True)

    def done(self, summary: str = "") -> None:
        if self.enabled:
            print(f"\ragentmem: {self.what} {self.count:,} rows in {time.monotonic() - self.started:.1f} s"
                  + (f"; {summary}" if summary else ""), file=sys.stderr)


def _stream(conn: psycopg.Connection, query: str, params: tuple, tenant: str | None) -> Iterator[str]:
    # One snapshot for the whole export (a tenant's users are read by several statements).
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    with conn.transaction():
        if tenant is not None:
            conn.execute(SET_TENANT, (tenant,))
        with conn.cursor(name="agentmem_export") as cur:
            cur.itersize = BATCH
            cur.execute(query, params)
            for (line,) in cur:
                yield line


def export(url: str, out: IO[str], *, tenant: str, user_id: str | None, progress: bool | None = None) -> int:
    """Write the export of user_id (the tenant's application role suffices) or, without one, of the whole
    tenant (a DBA: superuser or BYPASSRLS) to out; returns the number of lines."""
    query, params = (EXPORT_USER, (user_id,)) if user_id is not None else (EXPORT_TENANT, (tenant,))
    shown = Progress("exported", progress)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for line in _stream(conn, query, params, tenant if user_id is not None else None):
                out.write(line)
                out.write("\n")
                shown.add()
    except psycopg.Error as exc:
        raise translate(exc) from exc
    out.flush()
    shown.done()
    return shown.count


def _read_lines(source: IO[str]) -> Iterator[str]:
    for number, line in enumerate(iter(lambda: source.readline(MAX_LINE_BYTES + 2), ""), start=1):
        text = line[:-1] if line.endswith("\n") else line
        if len(text.encode()) > MAX_LINE_BYTES:
            raise ContentTooLarge(f"line {number} is over {MAX_LINE_BYTES} bytes: no row agentmem exports is that "
                                  "large; nothing was imported", sqlstate="AM021")
        yield text


def _kind(first: str) -> str:
    try:
        header = json.loads(first)
    except ValueError:
        return "user"   # the server refuses it with the reason
    return "tenant" if isinstance(header, dict) and header.get("scope") == "tenant" else "user"


def import_file(url: str, source: IO[str], *, tenant: str | None, progress: bool | None = None) -> dict[str, Any]:
    """Import an export read from source: a user's into `tenant` (import_user), a tenant's into `tenant` or
    the one its header names (import_tenant, a DBA). Returns rows inserted per table."""
    lines = _read_lines(source)
    first = next(lines, None)
    if first is None:
        raise InvalidArgument("the file is empty: an export has a header and an end row; nothing was imported",
                              sqlstate="AM020")
    shown = Progress("imported", progress)
    totals: dict[str, Any] = {}

    def add(counts: dict[str, Any]) -> None:
        for key, n in counts.items():
            if key != "users":
                totals[key] = totals.get(key, 0) + n

    if _kind(first) == "user":
        if not tenant:
            raise InvalidArgument("importing a user's export needs --tenant", sqlstate="AM020")
        from .client import Memory
        with Memory.connect(url, tenant=tenant, max_size=1) as mem, psycopg.connect(url) as conn:
            try:
                with conn.transaction():
                    for piece in _pieces(first, lines):
                        add(dict(mem.import_user(piece, conn=conn).rows_affected))
                        shown.add(len(piece))
                    if next(lines, None) is not None:
                        raise InvalidArgument("the export goes on after its end row: a user's export is one header, "
                                              "rows and an end row; nothing was imported", sqlstate="AM020")
            except psycopg.Error as exc:
                raise translate(exc) from exc
        shown.done()
        return totals
    target = tenant or json.loads(first).get("tenant_id")
    with Admin.connect(url) as admin:
        conn = admin.conn
        try:
            with conn.transaction():
                users = 0
                block_header: str | None = None
                for line in lines:
                    if block_header is None:
                        if _is_tenant_end(line):
                            continue
                        block_header = line
                        users += 1
                        for piece in _pieces(line, lines):
                            add(admin.import_tenant(target, piece))
                            shown.add(len(piece))
                        block_header = None
                if users:
                    totals["users"] = users
        except psycopg.Error as exc:
            raise translate(exc) from exc
    shown.done()
    return totals


def _pieces(header: str, lines: Iterator[str]) -> Iterator[list[str]]:
    """One user's block (header given, its rows and end row read from lines) as pieces of at most
    MAX_CALL_BYTES: the header, rows, an end row counting them. Checks the block's own end row; a block
    without one (a truncated file) is sent as it is, for the server to refuse with its reason."""
    budget = MAX_CALL_BYTES - len(header.encode()) - 64
    rows: list[str] = []
    size = 0
    count = 0
    for line in lines:
        if _is_end(line):
            if rows or count == 0:
                yield [header, *rows, json.dumps({"type": "end", "rows": len(rows)})]
            if json.loads(line).get("rows") != count:
                raise InvalidArgument(f"the export is truncated: its end row counts {json.loads(line).get('rows')} "
                                      f"rows, {count} were read; nothing was imported", sqlstate="AM020")
            return
        n = len(line.encode()) + 1
        if rows and size + n > budget:
            yield [header, *rows, json.dumps({"type": "end", "rows": len(rows)})]
            rows, size = [], 0
        rows.append(line)
        size += n
        count += 1
    yield [header, *rows]   # no end row: refused by the server (AM020)


def _is_end(line: str) -> bool:
    return line.startswith("{") and '"type": "end"' in line and _type(line) == "end"


def _is_tenant_end(line: str) -> bool:
    if not _is_end(line):
        return False
    doc = json.loads(line)
    return "users" in doc


def _type(line: str) -> str | None:
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc.get("type") if isinstance(doc, dict) else None
