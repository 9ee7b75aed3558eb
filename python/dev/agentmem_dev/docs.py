"""docs/api.md, generated from the catalogue of a migrated database (``agentmem docs``).

The reference is what ``\\df+ agentmem.*`` shows, laid out for reading: each public
function's signature with its defaults, its return type, volatility, security,
who calls it (the application role, the embedding worker or the DBA only: the
last line of its comment) and the rest of its comment, whose first line is the summary. A test regenerates it from the test database and
compares it with the committed file, so the two cannot disagree.
"""

from __future__ import annotations

import psycopg

FUNCTIONS = """
select p.proname as name,
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


def _comment(f: dict) -> list[str]:
    """The comment's lines but its last, "Called by: ...", which the line above the quote renders."""
    lines = f["comment"].rstrip().splitlines()
    return lines[:-1] if f.get("audience") and lines and lines[-1].startswith("Called by: ") else lines


def _function(f: dict) -> list[str]:
    security = f"definer (runs as {f['owner']})" if f["definer"] else "invoker"
    caller = CALLERS.get(f["audience"] or "", "no one (its comment does not say who calls it)")
    lines = [f"### `{f['name']}`", "", "```sql",
             f"agentmem.{f['name']}({f['arguments']})", f"  returns {f['result']}", "```", "",
             f"{f['volatility']} · security {security} · called by {caller}", "",
             f"returns {_returns(f)}", ""]
    lines += [f"> {line}" if line else ">" for line in _comment(f)] or ["(no comment)"]
    return lines + [""]


def render(conn: psycopg.Connection) -> str:
    """The whole of docs/api.md from the catalogue of the database ``conn`` is connected to."""
    from psycopg.rows import dict_row
    with conn.cursor(row_factory=dict_row) as cur:
        functions = cur.execute(FUNCTIONS).fetchall()
        views = cur.execute(VIEWS).fetchall()
    app = [f for f in functions if f["audience"] == "application"]
    worker = [f for f in functions if f["audience"] == "worker"]
    dba = [f for f in functions if f["audience"] not in ("application", "worker")]
    out = ["<!-- GENERATED by `make docs` (agentmem docs) from the catalogue: DO NOT EDIT. -->", "",
           "# agentmem API reference", "",
           "Every function of schema `agentmem`, from its catalogue entry: what `\\df+ agentmem.*` shows.",
           "Errors carry the SQLSTATEs listed in the README (`AM001` … `AM050`).", ""]
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
        out += _function(f)
    return "\n".join(out).rstrip("\n") + "\n"
