"""tests/ mirrors sql/: every sql/NN_name.sql has the test file that tests it (tests/test_name.py, or the
file TESTED_WITH names), and every test file is one of those, a test of the Python driver, or a test of
the package as a whole. tests/README.md says where a new test goes."""

from __future__ import annotations

import ast
import re

from conftest import ROOT

TESTS = ROOT / "tests"
SQL_FILE = re.compile(r"(\d\d)_([a-z0-9_]+)\.sql")

# SQL files tested together with another file's, in the test files named (not tests/test_<name>.py).
TESTED_WITH = {
    "00_tenant": ["test_tenant.py", "test_tenant_binding.py"],
    "01_row_security": ["test_tenant.py"],
    "03_distributed": ["test_distribute.py"],
    "04_forget_helpers": ["test_forget.py"],
    "06_use": ["test_lifecycle.py"],
    "18_use_boost": ["test_lifecycle.py"],
    "15_embedding_cache": ["test_embed.py"],
    "30_answer_cache_guard": ["test_answer_cache.py"],
    "31_answer_cache": ["test_answer_cache.py"],
    "32_answer_cache_review": ["test_answer_cache.py"],
    "60_retention": ["test_retention.py"],
    "61_retention_cron": ["test_retention.py"],
    "62_index_upkeep": ["test_index_upkeep.py", "test_index_later.py"],
    "63_retention_preview": ["test_lifecycle.py"],
    "80_model_indexes": ["test_models.py"],
    "90_grants": ["test_tenant.py"],
    "95_install_warnings": ["test_dba_install.py"],
}
# Tests of the Python driver (python/agentmem/) beyond the SQL each call runs.
DRIVER = {"test_driver.py", "test_driver_faults.py", "test_embed.py", "test_turn.py"}
# Tests of the package as a whole: installing, upgrading, attacking, documenting and running it.
WHOLE = {
    "test_cli.py",
    "test_compose.py",
    "test_dba_install.py",
    "test_demo.py",
    "test_distribute.py",
    "test_docs.py",
    "test_examples.py",
    "test_first_hour.py",
    "test_hostile.py",
    "test_inspect.py",
    "test_inspect_chat.py",
    "test_layout.py",
    "test_mcp.py",
    "test_migrate.py",
    "test_package.py",
    "test_pooling.py",
    "test_security_probes.py",
}


def sql_files() -> dict[str, list[str]]:
    """Each sql/NN_name.sql (by its stem) with the test files that test it."""
    found = {}
    for path in sorted((ROOT / "sql").glob("*.sql")):
        match = SQL_FILE.fullmatch(path.name)
        assert match, f"sql/{path.name} is not named NN_name.sql"
        found[path.stem] = TESTED_WITH.get(path.stem, [f"test_{match.group(2)}.py"])
    return found


def test_every_sql_file_has_the_test_file_that_mirrors_it():
    missing = [f"sql/{stem}.sql: tests/{name}" for stem, names in sql_files().items() for name in names
               if not (TESTS / name).is_file()]
    assert not missing, ("these SQL files have no test file; add it (tests/README.md), or name the file that "
                         "tests them in TESTED_WITH in tests/test_layout.py:\n" + "\n".join(missing))


def test_every_test_file_mirrors_a_sql_file_or_is_listed():
    stale = sorted(set(TESTED_WITH) - set(sql_files()))
    assert not stale, f"TESTED_WITH names SQL files that do not exist: {stale}"
    known = {name for names in sql_files().values() for name in names} | DRIVER | WHOLE
    stray = sorted(p.name for p in TESTS.glob("test_*.py") if p.name not in known)
    assert not stray, ("these test files mirror no sql/NN_name.sql: move their tests to the file of the SQL they "
                       f"test (tests/README.md), or list them in tests/test_layout.py: {stray}")


def test_every_test_file_says_what_it_covers():
    bare = sorted(p.name for p in TESTS.glob("test_*.py") if not ast.get_docstring(ast.parse(p.read_text())))
    assert not bare, f"these test files have no module docstring saying what they cover: {bare}"


DEFINED = re.compile(r"create\s+or\s+replace\s+function\s+(agentmem(?:_private)?\.\w+)\s*\(", re.I)
CALLED = re.compile(r"\b(agentmem(?:_private)?\.\w+)\s*\(", re.I)
COMMENT_ON = re.compile(r"comment\s+on\s+function\s.*?\bis\s+'(?:[^']|'')*'\s*;", re.I | re.S)


def sql_code(text: str) -> str:
    """A SQL file without its comments (-- lines, and the text of comment on function)."""
    text = COMMENT_ON.sub("", text)
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


def forward_calls(files: list[tuple[str, str]]) -> list[str]:
    """Calls from a SQL file to a function that a later file defines: `file: function`."""
    where: dict[str, int] = {}
    for i, (_, text) in enumerate(files):
        for name in DEFINED.findall(text):
            where.setdefault(name.lower(), i)
    return [f"{stem}: {name}" for i, (stem, text) in enumerate(files)
            for name in sorted({n.lower() for n in CALLED.findall(sql_code(text))})
            if where.get(name, -1) > i]


def test_no_sql_file_calls_a_function_a_later_file_defines():
    """sql/ loads in order; a file reads only what files before it (or it) define, so each can be read
    alone from the top. A function two files need lives in the earlier one, or is passed in."""
    files = [(p.stem, p.read_text()) for p in sorted((ROOT / "sql").glob("*.sql")) if SQL_FILE.fullmatch(p.name)]
    assert forward_calls(files) == []
    # the check itself: a planted call to a later file's function is found, one to an earlier one is not
    planted = [("10_a", "create or replace function agentmem.a() returns int language sql as $$ select 1 $$;"),
               ("20_b", "create or replace function agentmem_private.b() returns int language plpgsql as $$ "
                        "begin return agentmem.a() + agentmem_private.c(); end $$; -- agentmem.d()"),
               ("30_c", "create or replace function agentmem_private.c() returns int language sql as $$ select 1 $$;"
                        "\ncomment on function agentmem_private.c() is 'calls agentmem.d() in prose';"),
               ("40_d", "create or replace function agentmem.d() returns int language sql as $$ select 1 $$;")]
    assert forward_calls(planted) == ["20_b: agentmem_private.c"]


def unnamed_functions(sql_texts: list[str], test_texts: list[str]) -> list[str]:
    """Functions of schema agentmem that no test file names: as agentmem.name, or as a driver method
    ('name' in a driver call, or .name( )."""
    public = {m.split(".", 1)[1].lower() for text in sql_texts for m in DEFINED.findall(text)
              if m.lower().startswith("agentmem.")}
    tests = "\n".join(test_texts)
    return sorted(n for n in public if not re.search(rf"agentmem\.{n}\b|[\"'.]{n}\b", tests))


def test_every_public_function_is_named_in_a_test_file():
    """A new function of the API has a test of its own: one that names it (sql/README.md's checklist)."""
    sql_texts = [p.read_text() for p in sorted((ROOT / "sql").glob("*.sql"))]
    tests = [p.read_text() for p in TESTS.glob("*.py") if p.name != "test_layout.py"]
    assert unnamed_functions(sql_texts, tests) == [], "add a test that calls it, in the file tests/README.md names"
    # the check itself: a function no test names is found
    planted = "create or replace function agentmem.planted_without_test() returns int language sql as $$ select 1 $$;"
    assert unnamed_functions(sql_texts + [planted], tests) == ["planted_without_test"]


LONG = 100  # lines of a function, from `create or replace function` to the end of its body
REASON = "-- Over 100 lines: "
FUNCTION_START = re.compile(r"^create\s+or\s+replace\s+function\s+(agentmem(?:_private)?\.\w+)\s*\(", re.I | re.M)
# Functions other branches were rewriting when the reasons were written (issue 36): at their merge, split
# each or write its reason above it, and take it out of here (the test fails on an entry that is stale).
REASON_AT_MERGE: dict[str, str] = {}


def long_functions(files: list[tuple[str, str]]) -> list[tuple[str, str, int, bool]]:
    """(file, function, lines, whether the comment block right above it gives its reason) of each SQL
    function over LONG lines."""
    found = []
    for path, text in files:
        lines = text.split("\n")
        for m in FUNCTION_START.finditer(text):
            rest = text[m.start():]
            tag = re.search(r"\bas\s+(\$\w*\$)", rest)
            length = rest[:rest.index(tag.group(1), tag.end()) + len(tag.group(1))].count("\n") + 1
            if length <= LONG:
                continue
            above, k = [], text[:m.start()].count("\n") - 1
            while k >= 0 and lines[k].startswith("--"):
                above.append(lines[k])
                k -= 1
            found.append((path, m.group(1), length, any(line.startswith(REASON) for line in above)))
    return found


def test_every_function_over_100_lines_says_why_above_it():
    """A long SQL function is split into named private steps, or says above it why it is one piece
    (sql/README.md)."""
    files = [(f"sql/{p.name}", p.read_text()) for p in sorted((ROOT / "sql").glob("*.sql"))]
    found = long_functions(files)
    bare = [f"{path}: {name} ({n} lines)" for path, name, n, reason in found
            if not reason and name not in REASON_AT_MERGE]
    assert not bare, (f"split these into named private steps, or write a line '{REASON}<why>' right above "
                      "each:\n" + "\n".join(bare))
    pending = {name for _, name, _, reason in found if not reason}
    stale = sorted(set(REASON_AT_MERGE) - pending)
    assert not stale, f"no longer long or given their reason: take them out of REASON_AT_MERGE: {stale}"
    # the check itself
    body = "\n".join(["    select 1;"] * LONG)
    planted = f"create or replace function agentmem_private.planted() returns int language plpgsql as $$\n{body}\n$$;"
    assert long_functions([("x.sql", planted)]) == [("x.sql", "agentmem_private.planted", LONG + 2, False)]
    assert long_functions([("x.sql", f"-- a note\n{REASON}it is data.\n{planted}")])[0][3] is True
