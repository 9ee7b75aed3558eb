"""docs/api.md, generated from the catalogue of a migrated database (``agentmem docs``).

The reference is what ``\\df+ agentmem.*`` shows, laid out for reading: each public
function's signature with its defaults, its return type, volatility, security,
who calls it (the application role, the embedding worker or the DBA only: the
last line of its comment) and the rest of its comment, whose first line is the summary; its parameter
table (name, type, default, meaning: agentmem_private.api_parameters()) and its example (the comment's
"Example:" block, sql/88_api_examples.sql, which tests/test_api_examples.py runs). A test regenerates it
from the test database and compares it with the committed file, so the two cannot disagree.
"""

from __future__ import annotations

import psycopg

FUNCTIONS = """
select p.proname as name, p.oid::regprocedure::text as signature,
       pg_catalog.pg_get_function_arguments(p.oid) as arguments,
       pg_catalog.pg_get_function_result(p.oid) as result,
       case p.provolatile when 'i' then 'immutable' when 's' then 'stable' else 'volatile' end as volatility,
       p.prosecdef as definer,
       pg_catalog.pg_get_userbyid(p.proowner) as owner,
       a.audience,
       coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '') as comment,
       p.proretset as returns_set,
       pg_catalog.format_type(p.prorettype, null) as return_type,
       (select pg_catalog.array_agg(a.name || ' ' || pg_catalog.format_type(a.type, null) order by a.n)
        from rows from (pg_catalog.unnest(p.proargnames), pg_catalog.unnest(p.proargmodes),
                        pg_catalog.unnest(p.proallargtypes)) with ordinality as a (name, mode, type, n)
        where a.mode in ('o', 'b', 't')) as out_columns,
       (select pg_catalog.array_agg(c.attname || ' ' || pg_catalog.format_type(c.atttypid, null) order by c.attnum)
        from pg_catalog.pg_type as t
        join pg_catalog.pg_attribute as c on c.attrelid = t.typrelid
        where t.oid = p.prorettype and t.typtype = 'c' and c.attnum > 0 and not c.attisdropped) as row_columns
from pg_catalog.pg_proc as p
left join agentmem_private.function_audience() as a on a.fn = p.oid
where p.pronamespace = 'agentmem'::regnamespace
order by p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)
"""

# Each input parameter of each function: its type, its default (NULL: required) and its meaning
# (agentmem_private.api_parameters(), sql/88_api_examples.sql).
PARAMETERS = """
select p.oid::regprocedure::text as fn, a.name, pg_catalog.format_type(a.type, null) as type,
       pg_catalog.pg_get_function_arg_default(p.oid, a.n::integer) as "default",
       (select m.meaning from agentmem_private.api_parameters() as m
        where m.parameter = a.name and (m.fn = p.proname or m.fn is null)
        order by m.fn nulls last limit 1) as meaning
from pg_catalog.pg_proc as p,
     rows from (pg_catalog.unnest(p.proargnames), pg_catalog.unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])),
                pg_catalog.unnest(p.proargmodes)) with ordinality as a (name, type, mode, n)
where p.pronamespace = 'agentmem'::regnamespace and coalesce(a.mode, 'i') in ('i', 'b', 'v')
order by p.oid, a.n
"""

# The steps of the examples that belong to no function (the psql variables they share).
SETUP = "select step, example from agentmem_private.api_examples() where fn is null order by step"

VIEWS = """
select c.relname as name,
       coalesce(pg_catalog.obj_description(c.oid, 'pg_class'), '') as comment,
       (select pg_catalog.string_agg(a.attname || ' ' || pg_catalog.format_type(a.atttypid, a.atttypmod),
                                     ', ' order by a.attnum)
        from pg_catalog.pg_attribute as a
        where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped) as columns
from pg_catalog.pg_class as c
where c.relnamespace = 'agentmem'::regnamespace and c.relkind in ('v', 'm')
order by c.relname
"""


def _cell(text: str) -> str:
    """Text for one cell of a Markdown table: a `|` (or a line break) would end the cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _summary(comment: str) -> str:
    return _cell(comment.splitlines()[0]) if comment else "(no comment)"


def _returns(f: dict) -> str:
    """What a call gives back: its rows and their columns, or its one value."""
    columns = f.get("out_columns") or f.get("row_columns") or []
    if columns and f["returns_set"]:
        return "rows of (" + ", ".join(columns) + ")"
    if columns:
        return "one row of (" + ", ".join(columns) + ")"
    if f["returns_set"]:
        return f"rows of `{f['return_type']}`"
    if f["return_type"] == "void":
        return "nothing (`void`)"
    return f"one `{f['return_type']}`"


# Who calls a function: the last line of its comment says it (sql/90_grants.sql grants from it).
CALLERS = {"application": "the application role", "worker": "the embedding worker (agentmem_worker)",
           "dba": "the DBA only"}


def _comment(f: dict) -> tuple[list[str], list[str]]:
    """The comment's lines but its last, "Called by: ...", which the line above the quote renders; and
    its "Example:" block (sql/88_api_examples.sql), which the reference shows as code."""
    lines = f["comment"].rstrip().splitlines()
    if f.get("audience") and lines and lines[-1].startswith("Called by: "):
        lines = lines[:-1]
    if "Example:" not in lines:
        return lines, []
    start = lines.index("Example:")
    end = len(lines) - 1 if lines[-1].startswith("Security definer: ") else len(lines)
    return lines[:start] + lines[end:], lines[start + 1:end]


def _parameters(params: list[dict]) -> list[str]:
    """The parameter table: name, type, default (— when required) and meaning."""
    if not params:
        return ["no parameters", ""]
    out = ["| parameter | type | default | meaning |", "|---|---|---|---|"]
    out += [f"| `{p['name']}` | `{p['type']}` | {'`' + _cell(p['default']) + '`' if p['default'] else '—'} | "
            f"{_cell(p['meaning'] or '(no meaning: agentmem_private.api_parameters())')} |" for p in params]
    return out + [""]


def _function(f: dict, params: list[dict]) -> list[str]:
    security = f"definer (runs as {f['owner']})" if f["definer"] else "invoker"
    caller = CALLERS.get(f["audience"] or "", "no one (its comment does not say who calls it)")
    lines = [f"### `{f['name']}`", "", "```sql",
             f"agentmem.{f['name']}({f['arguments']})", f"  returns {f['result']}", "```", "",
             f"{f['volatility']} · security {security} · called by {caller}", "",
             f"returns {_returns(f)}", ""]
    text, example = _comment(f)
    lines += [f"> {line}" if line else ">" for line in text] or ["(no comment)"]
    lines += [""] + _parameters(params)
    if example:
        lines += ["Example:", "", "```sql", *example, "```", ""]
    return lines


def render(conn: psycopg.Connection) -> str:
    """The whole of docs/api.md from the catalogue of the database ``conn`` is connected to."""
    from psycopg.rows import dict_row
    with conn.cursor(row_factory=dict_row) as cur:
        functions = cur.execute(FUNCTIONS).fetchall()
        views = cur.execute(VIEWS).fetchall()
        parameters: dict[str, list[dict]] = {}
        for p in cur.execute(PARAMETERS).fetchall():
            parameters.setdefault(p["fn"], []).append(p)
        setup = cur.execute(SETUP).fetchall()
    app = [f for f in functions if f["audience"] == "application"]
    worker = [f for f in functions if f["audience"] == "worker"]
    dba = [f for f in functions if f["audience"] not in ("application", "worker")]
    out = ["<!-- GENERATED by `make docs` (agentmem docs) from the catalogue: DO NOT EDIT. -->", "",
           "# agentmem API reference", "",
           "Every function of schema `agentmem`, from its catalogue entry: what `\\df+ agentmem.*` shows.",
           "Errors carry the SQLSTATEs listed in the README (`AM001` … `AM050`).", "",
           "Each function has a parameter table and an example. The examples run in order in one psql session",
           "on a fresh installation (tests/test_api_examples.py runs them): the DBA's as a superuser, the",
           "application's with tenant `acme` and user `alice`, the embedding worker's as `agentmem_worker`. A",
           "later example reads what an earlier one stored through psql variables set by `\\gset`",
           "(`:'conversation_id'`, `:'message_id'`, `:'fact_id'`, `:'hit_id'`, `:'lease_token'`), and `:'vec'`",
           "is a vector of the tenant's default model's dimension, set once after `set_tenant`:", ""]
    for s in setup:
        out += ["```sql", *s["example"].splitlines(), "```", ""]
    for title, group in (("Functions the application calls", app), ("Functions the embedding worker calls", worker),
                         ("DBA functions", dba)):
        out += [f"## {title}", "", "| function | summary | returns |", "|---|---|---|"]
        out += [f"| [`{f['name']}`](#{f['name']}) | {_summary(f['comment'])} | {_cell(_returns(f))} |"
                for f in group]
        out.append("")
    if views:
        out += ["## Views", ""]
        for v in views:
            out += [f"### `{v['name']}`", "", f"columns: {v['columns']}", ""]
            out += [f"> {line}" if line else ">" for line in v["comment"].splitlines()] or ["(no comment)"]
            out.append("")
    out += ["## Functions", ""]
    for f in functions:
        out += _function(f, parameters.get(f["signature"], []))
    return "\n".join(out).rstrip("\n") + "\n"
