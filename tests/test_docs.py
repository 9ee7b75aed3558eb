"""docs/api.md is generated from the catalogue (`make docs`); it must be what the sources give."""

from __future__ import annotations

import difflib

import psycopg

from agentmem.cli import main as cli
from agentmem_dev.docs import render
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


def test_each_function_has_its_parameter_table_and_example(admin, admin_url):
    """The reference gives each function a table of its parameters (name, type, default, meaning) and its
    example as code (sql/88_api_examples.sql), out of the quoted comment."""
    with psycopg.connect(admin_url) as conn:
        text = render(conn)
    section = text.split("### `store_message`")[1].split("### ")[0]
    assert "| parameter | type | default | meaning |" in section
    assert "| `conversation_id` | `anycompatible` | — | a conversation's id (a uuid or its text) |" in section
    assert "| `role` | `text` | — | who spoke: user, assistant, system or tool |" in section
    assert "| `metadata` | `jsonb` | `'{}'::jsonb` | a JSON object kept with the row |" in section
    example = section.split("Example:\n\n```sql\n")[1].split("```")[0]
    assert "agentmem.store_message(" in example and not any(line.startswith(">") for line in example.splitlines())
    assert "> Example:" not in section and "> Security definer: " in section
    assert "no parameters" in text.split("### `current_tenant`")[1].split("### ")[0]


def test_every_public_function_summary_is_a_whole_sentence(admin):
    """The first line of each comment is the reference's summary: one whole sentence, never cut."""
    rows = admin.execute(
        "select p.proname, coalesce(obj_description(p.oid, 'pg_proc'), '') from pg_proc as p"
        " where p.pronamespace = 'agentmem'::regnamespace order by 1").fetchall()
    cut = [f"{name}: {comment.splitlines()[0] if comment else '(no comment)'}" for name, comment in rows
           if not comment or not comment.splitlines()[0].rstrip().endswith((".", "?"))]
    assert not cut, "comments whose first line is not a whole sentence:\n" + "\n".join(cut)


SUMMARY_WORDS = 25


def long_summaries(rows) -> list[str]:
    return [f"agentmem.{name} ({len(comment.splitlines()[0].split())} words): {comment.splitlines()[0]}"
            for name, comment in rows if comment and len(comment.splitlines()[0].split()) > SUMMARY_WORDS]


def test_every_public_function_summary_is_short(admin):
    """The summary (the first line of the comment) is what the reference's tables and \\df+ show: at most
    25 words; what follows goes on the next lines."""
    rows = admin.execute("select p.proname, coalesce(obj_description(p.oid, 'pg_proc'), '') from pg_proc as p"
                         " where p.pronamespace = 'agentmem'::regnamespace order by 1").fetchall()
    assert long_summaries(rows) == [], "shorten these summaries in their sql/ file (the rest on the next line)"
    assert long_summaries([("planted", " ".join(["word"] * 26) + ".\nmore")]) == [
        "agentmem.planted (26 words): " + " ".join(["word"] * 26) + "."]


def test_table_cells_are_escaped_and_return_types_described():
    from agentmem_dev.docs import _cell, _returns
    assert _cell("overlap |A and B| / |A or B|") == "overlap \\|A and B\\| / \\|A or B\\|"
    text = (ROOT / "docs" / "api.md").read_text()
    table = text.split("## Functions the application calls")[1].split("## DBA functions")[0]
    rows = [line for line in table.splitlines() if line.startswith("| [")]
    assert rows and all(len(line.replace("\\|", "").split("|")) == 5 for line in rows), \
        "every row of the summary table has exactly its three cells"
    section = text.split("### `topic_shift`")[1].split("### ")[0]
    assert "returns one row of (" in section
    assert _returns({"out_columns": None, "returns_set": False, "return_type": "void"}) == "nothing (`void`)"


def test_tuning_lists_every_setting_with_a_short_section_and_its_measurement_linked():
    """docs/tuning.md is a table of every agentmem.* setting the SQL reads, then one short section per
    setting; the measurements are linked reports of bench/results/ (the reasoning: vector_search.md)."""
    import re
    read = {m for p in (ROOT / "sql").glob("*.sql")
            for m in re.findall(r"current_setting\('agentmem\.(\w+)'", p.read_text())}
    text = (ROOT / "docs" / "tuning.md").read_text()
    table = set(re.findall(r"^\| \[`agentmem\.(\w+)`\]\(#[\w-]+\) \|", text, re.M))
    assert read and table == read, f"not in docs/tuning.md's table: {sorted(read - table)}; read by no SQL: {sorted(table - read)}"
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    covered = {name for s in sections for name in re.findall(r"`agentmem\.(\w+)`", s.splitlines()[0])}
    assert covered == read, f"settings without a section of their own: {sorted(read - covered)}"
    long = [s.splitlines()[0] for s in sections if len([line for line in s.splitlines()[1:] if line.strip()]) > 10]
    assert not long, f"sections of docs/tuning.md over 10 lines (the reasoning goes in vector_search.md): {long}"
    for link in re.findall(r"\]\(\.\./bench/results/([\w.]+\.md)\)", text):
        assert (ROOT / "bench" / "results" / link).is_file(), link


def test_bench_readme_indexes_every_script_and_report():
    """bench/README.md is the index of bench/ (bench/REPORT.md, their concatenation, is not committed):
    every benchmark and probe has its row, every dated report its link, every link a file."""
    import re
    index = (ROOT / "bench" / "README.md").read_text()
    rows = set(re.findall(r"^\| `((?:bench|probe)_\w+\.py)` \|", index, re.M))
    scripts = {p.name for p in (ROOT / "bench").glob("bench_*.py")} | {
        p.name for p in (ROOT / "bench" / "probes").glob("probe_*.py")}
    assert not list((ROOT / "bench").glob("probe_*.py")), "probes go in bench/probes/"
    assert rows == scripts, f"not in bench/README.md: {sorted(scripts - rows)}; gone: {sorted(rows - scripts)}"
    links = set(re.findall(r"\]\((results/[\w.]+\.md)\)", index))
    reports = {f"results/{p.name}" for p in (ROOT / "bench" / "results").glob("*.md")}
    assert links == reports, f"not linked: {sorted(reports - links)}; missing: {sorted(links - reports)}"
    assert "bench/REPORT.md" in (ROOT / ".gitignore").read_text().splitlines()
