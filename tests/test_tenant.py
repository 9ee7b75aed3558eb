"""Tenant context: set_tenant/current_tenant, per-transaction scope, the app role."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

import agentmem
from agentmem.client import AsyncMemory, Memory
from agentmem.errors import translate


def sqlstate_of(conn, query, params=None) -> str:
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params)
    return info.value.sqlstate


def test_current_tenant_without_a_tenant_raises_am001(connect, app_url):
    conn = connect(app_url)
    assert sqlstate_of(conn, "select agentmem.current_tenant()") == "AM001"
    err = None
    try:
        conn.execute("select agentmem.current_tenant()")
    except psycopg.Error as exc:
        err = translate(exc)
    assert isinstance(err, agentmem.TenantNotSet) and "set_tenant" in err.hint


def test_session_tenant_persists_and_local_tenant_ends_with_the_transaction(connect, app_url):
    conn = connect(app_url)
    assert conn.execute("select agentmem.set_tenant(tenant_id => 'acme')").fetchone()[0] == "acme"
    assert conn.execute("select agentmem.current_tenant()").fetchone()[0] == "acme"
    with conn.transaction():
        conn.execute("select agentmem.set_tenant(tenant_id => 'globex', local => true)")
        assert conn.execute("select agentmem.current_tenant()").fetchone()[0] == "globex"
    assert conn.execute("select agentmem.current_tenant()").fetchone()[0] == "acme"


def test_local_tenant_on_a_fresh_session_leaves_nothing_behind(connect, app_url):
    conn = connect(app_url)
    with conn.transaction():
        conn.execute("select agentmem.set_tenant(tenant_id => 'acme', local => true)")
    assert sqlstate_of(conn, "select agentmem.current_tenant()") == "AM001"


@pytest.mark.parametrize("bad", [None, "", " padded", "x" * 129, "tab\there"])
def test_malformed_tenant_ids_raise_am002(connect, app_url, bad):
    conn = connect(app_url)
    assert sqlstate_of(conn, "select agentmem.set_tenant(tenant_id => %s)", (bad,)) == "AM002"
    assert sqlstate_of(conn, "select agentmem.current_tenant()") == "AM001"


def test_app_role_is_confined(connect, app_url):
    conn = connect(app_url)
    row = conn.execute("select rolsuper, rolbypassrls from pg_roles where rolname = current_user").fetchone()
    assert row == (False, False)
    assert sqlstate_of(conn, "select * from agentmem.schema_migrations") == "42501"
    assert sqlstate_of(conn, "select agentmem.grant_app_role(role_name => current_user)") == "42501"


def test_grant_app_role_refuses_unknown_and_rls_bypassing_roles(admin):
    assert sqlstate_of(admin, "select agentmem.grant_app_role(role_name => 'no_such_role_xyz')") == "AM030"
    assert sqlstate_of(admin, "select agentmem.grant_app_role(role_name => current_user)") == "AM020"


def test_every_function_is_documented_invoker_and_pinned(admin):
    rows = admin.execute("""
        select p.oid::regprocedure::text, obj_description(p.oid, 'pg_proc'), p.prosecdef,
               p.proconfig, p.provolatile
          from pg_proc p where p.pronamespace = 'agentmem'::regnamespace
    """).fetchall()
    assert rows, "no public functions found"
    for name, comment, secdef, config, _volatility in rows:
        assert comment and comment.splitlines()[0].strip(), f"{name} has no comment"
        assert any(c.startswith("search_path=") for c in (config or [])), f"{name} has no fixed search_path"
        if secdef:  # a definer function must say why, in its comment
            assert "security definer" in comment.lower(), f"{name} is security definer without a reason"


def test_every_table_carries_tenant_id_with_forced_rls(admin):
    rows = admin.execute("""
        select c.relname, c.relrowsecurity, c.relforcerowsecurity,
               exists (select from pg_attribute a where a.attrelid = c.oid and a.attname = 'tenant_id'
                       and not a.attisdropped)
          from pg_class c
         where c.relnamespace = 'agentmem'::regnamespace and c.relkind in ('r', 'p')
           and c.relname not in ('schema_migrations')
    """).fetchall()
    exempt = {"models", "cache_intents"}  # installation-wide catalogues, no tenant data
    policies = dict(admin.execute(
        "select tablename, qual || ' / ' || with_check from pg_policies "
        "where schemaname = 'agentmem' and policyname = 'tenant_isolation'").fetchall())
    for name, rls, forced, has_tenant in rows:
        if name in exempt:
            continue
        assert has_tenant and rls and forced, f"table {name}: tenant_id={has_tenant} rls={rls} forced={forced}"
        assert policies.get(name) == ("(tenant_id = agentmem.current_tenant()) / "
                                      "(tenant_id = agentmem.current_tenant())"), f"table {name}: {policies.get(name)}"
    assert len(policies) == len(rows) - len(exempt & {r[0] for r in rows})


def test_driver_sets_the_tenant_per_transaction_never_leaking_it(app_url):
    with Memory.connect(app_url, tenant="acme", max_size=1) as mem:
        assert mem._call("select agentmem.current_tenant()", fetch="scalar") == "acme"
        other = mem.for_tenant("globex")
        assert other._call("select agentmem.current_tenant()", fetch="scalar") == "globex"
        # the single pooled connection carries no tenant between calls
        with mem.pool.connection() as conn:
            with pytest.raises(psycopg.Error) as info:
                conn.execute("select agentmem.current_tenant()")
            assert info.value.sqlstate == "AM001"
        with pytest.raises(agentmem.InvalidTenant):
            mem.for_tenant("")


def test_driver_translates_sqlstates_to_exception_classes(app_url):
    with Memory.connect(app_url, tenant="acme", max_size=1) as mem:
        with pytest.raises(agentmem.InvalidTenant) as info:
            mem._call("select agentmem.set_tenant(tenant_id => '')")
        assert info.value.sqlstate == "AM002"


def test_async_driver_sets_the_tenant_too(app_url):
    async def go():
        mem = await AsyncMemory.connect(app_url, tenant="acme", max_size=1)
        try:
            return await mem._call("select agentmem.current_tenant()", fetch="scalar")
        finally:
            await mem.close()
    assert asyncio.run(go()) == "acme"
