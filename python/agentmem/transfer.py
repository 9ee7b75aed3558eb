"""``agentmem export`` and ``agentmem import``: a user's or a tenant's memory as JSON Lines.

Export streams: the literal call (that of ``Memory.export_user`` / ``Admin.export_tenant``) runs through a
server-side cursor and each line is written as it arrives, so the client holds one batch of lines,
never the file. The bytes are those psql's
``\\copy (select line from agentmem.export_user(user_id => 'alice')) to 'alice.jsonl'
with (format csv, quote e'\\x01', delimiter e'\\x02')`` writes: each line, then a newline.

Import reads the file line by line. A user's export goes to ``import_user`` in one call (all or
nothing). A tenant's export goes to ``import_tenant`` one user block at a time, every block in one
transaction, so the client holds one user's lines at a time and a refusal anywhere writes nothing.
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
    if _kind(first) == "user":
        if not tenant:
            raise InvalidArgument("importing a user's export needs --tenant", sqlstate="AM020")
        from .client import Memory
        every = [first, *lines]
        with Memory.connect(url, tenant=tenant, max_size=1) as mem:
            receipt = mem.import_user(every)
        shown.add(len(every))
        shown.done()
        return dict(receipt.rows_affected)
    target = tenant or json.loads(first).get("tenant_id")
    totals: dict[str, Any] = {}
    with Admin.connect(url) as admin:
        conn = admin.conn
        try:
            with conn.transaction():
                block: list[str] = []
                for line in lines:
                    if not block and _is_tenant_end(line):
                        continue
                    block.append(line)
                    if _is_end(line):
                        for key, n in admin.import_tenant(target, block).items():
                            if key != "users":
                                totals[key] = totals.get(key, 0) + n
                        totals["users"] = totals.get("users", 0) + 1
                        shown.add(len(block))
                        block = []
                if block:
                    admin.import_tenant(target, block)   # a truncated block: refused with its reason
        except psycopg.Error as exc:
            raise translate(exc) from exc
    shown.done()
    return totals


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
