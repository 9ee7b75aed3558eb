#!/usr/bin/env python3
"""Write the driver's synchronous modules from their asyncio originals.

The asyncio code is written once, by hand (``python/agentmem/*_async.py``); its synchronous twin
(``*_sync.py``) is this text with ``async``/``await`` removed and each asyncio name replaced by its
synchronous one (the table below). ``--check`` exits 1 when a twin differs from what this script
writes (``tests/test_driver.py`` runs the same check).

    python scripts/async_to_sync.py           # rewrite the twins
    python scripts/async_to_sync.py --check   # fail when one is stale
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "agentmem"

# source -> (twin, the twin's docstring)
TWINS = {
    "calls_async.py": ("calls_sync.py", "The calls of Memory: one method per public SQL function the application role may call."),
    "client_async.py": ("client_sync.py", "Memory: the synchronous tenant-bound client."),
    "turn_async.py": ("turn_sync.py", "Turn: one conversational-RAG turn over a Memory, as straight-line code."),
}

# asyncio spelling -> synchronous spelling, whole words, in this order
NAMES = [
    (r"async def ", "def "),
    (r"async with ", "with "),
    (r"async for ", "for "),
    (r"await ", ""),
    (r"AsyncCalls", "Calls"),
    (r"AsyncStatements", "Statements"),
    (r"AsyncMemory", "Memory"),
    (r"AsyncTurn", "Turn"),
    (r"AsyncConnectionPool", "ConnectionPool"),
    (r"AsyncConnection", "Connection"),
    (r"AsyncIterator", "Iterator"),
    (r"AsyncClient", "Client"),
    (r"asynccontextmanager", "contextmanager"),
    (r"register_vector_async", "register_vector"),
    (r"acheck_idle", "check_idle"),
    (r"acall_model", "call_model"),
    (r"aembed_prefixed", "embed_prefixed"),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"calls_async", "calls_sync"),
    (r"client_async", "client_sync"),
    (r"turn_async", "turn_sync"),
]
DOCSTRING = re.compile(r'\A"""(.*?)"""\n', re.S)


def rename(line: str) -> str:
    for asyncio_name, sync_name in NAMES:
        line = re.sub(r"\b" + asyncio_name, sync_name, line)
    return line


def statements(text: str) -> list[tuple[int, int]]:
    """The (first, last) line numbers, from 0, of each statement spanning more than one line."""
    spans, start = [], None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            if tok.type == tokenize.NEWLINE and start is not None:
                if tok.start[0] - 1 > start:
                    spans.append((start, tok.start[0] - 1))
                start = None
            continue
        if start is None and tok.type != tokenize.ENDMARKER:
            start = tok.start[0] - 1
    return spans


def twin_of(source: str, name: str) -> str:
    """The synchronous twin of an asyncio module's text."""
    twin, summary = TWINS[name]
    text = DOCSTRING.sub("", source, count=1)
    lines = text.splitlines(keepends=True)
    out = [rename(line) for line in lines]
    # a line aligned under an opening bracket of its statement's first line moves left as much as
    # the text before that bracket got shorter, so that it stays aligned
    for first, last in statements(text):
        for row in range(first + 1, last + 1):
            indent = len(lines[row]) - len(lines[row].lstrip(" "))
            if 0 < indent <= len(lines[first]) and lines[first][indent - 1] in "([{":
                shift = indent - len(rename(lines[first][:indent]))
                if out[row].startswith(" " * shift):
                    out[row] = out[row][shift:]
    text = "".join(out)
    header = (f'"""{summary}\n\nGenerated from {name} by scripts/async_to_sync.py: edit {name} and run the '
              f'script,\nnever this file.\n"""\n')
    return header + text


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, (twin, _) in TWINS.items():
        want = twin_of((PACKAGE / name).read_text(), name)
        path = PACKAGE / twin
        if path.exists() and path.read_text() == want:
            continue
        if check:
            stale.append(twin)
        else:
            path.write_text(want)
            print(f"wrote {path}")
    if stale:
        print("stale (run python scripts/async_to_sync.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
