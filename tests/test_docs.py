"""docs/api.md is generated from the catalogue (`make docs`); it must be what the sources give."""

from __future__ import annotations

import difflib

import psycopg

from agentmem.cli import main as cli
from agentmem.docs import render
from conftest import ROOT


def test_committed_api_reference_is_current(admin_url):
    with psycopg.connect(admin_url) as conn:
        generated = render(conn)
    committed = (ROOT / "docs" / "api.md").read_text()
    diff = "".join(difflib.unified_diff(committed.splitlines(True), generated.splitlines(True),
                                        "docs/api.md (committed)", "docs/api.md (generated)", n=1))
    assert not diff, "docs/api.md is not current: run `make docs` and commit it\n" + diff[:4000]


def test_reference_lists_every_public_function_with_its_comment_and_caller(admin, admin_url, tmp_path):
    out = tmp_path / "api.md"
    assert cli(["docs", "--database-url", admin_url, "-o", str(out)]) == 0
    text = out.read_text()
    names = [r[0] for r in admin.execute(
        "select distinct proname from pg_proc where pronamespace = 'agentmem'::regnamespace")]
    assert names and all(f"### `{n}`" in text for n in names)
    assert "agentmem_private" not in text.split("## Functions")[0]
    section = text.split("### `apply_retention`")[1].split("### ")[0]
    assert "called by the DBA only" in section and "security invoker" in section
    assert "batch_size integer DEFAULT 5000" in section
    section = text.split("### `cache_lookup`")[1].split("### ")[0]
    assert "called by the application role" in section and "security definer (runs as agentmem_owner)" in section
    summary = admin.execute("select obj_description('agentmem.cache_lookup'::regproc, 'pg_proc')").fetchone()[0]
    assert "> " + summary.splitlines()[0] in section
