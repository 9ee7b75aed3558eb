"""sql/00_tenant.sql, who may act as which tenant: tenants bound to login roles or to a JWT claim, a search
path no caller can write, and the defects the security probes found, each at the size they were found at."""

from __future__ import annotations

import json
import uuid

import psycopg
import psycopg.sql
import pytest

from pgvector.psycopg import register_vector

from helpers import (count, run_threads, scratch_database, sqlstate_of, start_conversation, store_message, upsert, vec,
                     worker_login_url)


def add_message(conn, cid, content: str = "hello"):
    """Store one user message (with the stub's embedding of its text) in a conversation."""
    embedding = "[" + ",".join(f"{x:.6f}" for x in vec(content)) + "]"
    return conn.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', "
                        "content => %s, embedding => %s::vector)", (cid, content, embedding))


def refused(conn, query, params=None) -> str:
    """The SQLSTATE the statement fails with, run in a savepoint (so a transaction block goes on)."""
    return sqlstate_of(conn, query, params, savepoint=True)


def login(server, dbname, role) -> psycopg.Connection:
    return psycopg.connect(server.db_url(dbname, role), autocommit=True)


def seed_tenant(admin, tenant: str) -> str:
    """A conversation with one message in tenant, written as the superuser; returns its id."""
    admin.execute("select agentmem.set_tenant(tenant_id => %s)", (tenant,))
    cid = admin.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    add_message(admin, cid, f"secret of {tenant}")
    admin.execute("reset agentmem.tenant_id")
    return cid


# -- binding by login role ---------------------------------------------------------------------

def test_a_new_installation_binds_tenants_to_login_roles(admin):
    assert admin.execute("select agentmem.tenant_binding_mode()").fetchone() == ("role",)


def test_a_login_acts_as_its_granted_tenant_and_no_other_by_any_route(admin, server, dbname, roles):
    app = roles("tb_app")
    assert admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'tenant-a')", (app,)).fetchone() == (True,)
    assert admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'tenant-a')", (app,)).fetchone() == (False,)
    b_conversation = seed_tenant(admin, "tenant-b")
    with login(server, dbname, app) as conn:
        assert conn.execute("select agentmem.set_tenant(tenant_id => 'tenant-a')").fetchone() == ("tenant-a",)
        cid = conn.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
        add_message(conn, cid)
        assert conn.execute("select count(*) from agentmem.recent_messages(conversation_id => %s)",
                            (cid,)).fetchone() == (1,)

        # set_tenant: refused, and the tenant stays what it was.
        with pytest.raises(psycopg.Error) as info:
            conn.execute("select agentmem.set_tenant(tenant_id => 'tenant-b')")
        assert info.value.sqlstate == "AM041"
        assert "tenant-b" in info.value.diag.message_primary and app in info.value.diag.message_detail
        assert "grant_tenant" in info.value.diag.message_hint
        assert conn.execute("select agentmem.current_tenant()").fetchone() == ("tenant-a",)
        assert sqlstate_of(conn, "select agentmem.set_tenant(tenant_id => 'tenant-b', local => true)") == "AM041"

        # set_config and SET: the setting is made, and every call refuses it.
        for route in ("select set_config('agentmem.tenant_id', 'tenant-b', false)", "set agentmem.tenant_id = 'tenant-b'"):
            conn.execute(route)
            assert sqlstate_of(conn, "select agentmem.current_tenant()") == "AM041"
            assert sqlstate_of(conn, "select * from agentmem.recent_messages(conversation_id => %s)",
                               (b_conversation,)) == "AM041"
            assert sqlstate_of(conn, "select agentmem.start_conversation(user_id => 'u1')") == "AM041"
            with pytest.raises(psycopg.Error) as info:
                add_message(conn, b_conversation, "forged")
            assert info.value.sqlstate == "AM041"
        with conn.transaction():
            conn.execute("set local agentmem.tenant_id = 'tenant-b'")
            assert sqlstate_of(conn, "select agentmem.current_tenant()") == "AM041"
    assert count(admin, "messages", "tenant_id = 'tenant-b'") == 1
    assert count(admin, "conversations", "tenant_id = 'tenant-b'") == 1
    assert count(admin, "messages", "tenant_id = 'tenant-a'") == 1


def test_set_role_does_not_change_whose_grants_count(admin, server, dbname, roles):
    """The login role (session_user) is the identity: SET ROLE to a role with other grants changes nothing."""
    app = roles("tb_app")
    other = roles("tb_other", login=False)
    admin.execute(f"grant {other} to {app}")
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'tenant-x')", (other,))
    with login(server, dbname, app) as conn:
        conn.execute(f"set role {other}")
        assert sqlstate_of(conn, "select agentmem.set_tenant(tenant_id => 'tenant-x')") == "AM041"


def test_a_revoked_grant_takes_effect_at_the_next_transaction(admin, server, dbname, roles):
    app = roles("tb_app")
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'tenant-a')", (app,))
    with login(server, dbname, app) as conn:
        conn.execute("select agentmem.set_tenant(tenant_id => 'tenant-a')")
        cid = conn.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
        assert admin.execute("select agentmem.revoke_tenant(role_name => %s, tenant_id => 'tenant-a')",
                             (app,)).fetchone() == (True,)
        assert admin.execute("select agentmem.revoke_tenant(role_name => %s, tenant_id => 'tenant-a')",
                             (app,)).fetchone() == (False,)
        assert sqlstate_of(conn, "select * from agentmem.recent_messages(conversation_id => %s)", (cid,)) == "AM041"
        admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'tenant-a')", (app,))
        assert conn.execute("select count(*) from agentmem.recent_messages(conversation_id => %s)",
                            (cid,)).fetchone() == (0,)


def test_a_mark_of_a_checked_tenant_the_session_sets_itself_is_never_trusted(admin, server, dbname, roles):
    """current_tenant() marks the tenant it checked in agentmem.tenant_checked for the rest of one call of an
    API function, which resets the mark on entry: a session that sets the mark itself (for the session, for
    its transaction) still acts as its granted tenant only, by every route, and no mark outlives a call."""
    app = roles("tb_app")
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'tenant-a')", (app,))
    b_conversation = seed_tenant(admin, "tenant-b")
    with login(server, dbname, app) as conn:
        conn.execute("select agentmem.set_tenant(tenant_id => 'tenant-a')")
        a_conversation = conn.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
        add_message(conn, a_conversation)
        assert conn.execute("select current_setting('agentmem.tenant_checked', true)").fetchone()[0] in (None, "")
        for mark in ("select set_config('agentmem.tenant_checked', 'tenant-b', false)",
                     "set agentmem.tenant_checked = 'tenant-b'"):
            conn.execute(mark)
            conn.execute("set agentmem.tenant_id = 'tenant-b'")
            assert sqlstate_of(conn, "select agentmem.current_tenant()") == "AM041"
            assert sqlstate_of(conn, "select * from agentmem.recent_messages(conversation_id => %s)",
                               (b_conversation,)) == "AM041"
            assert sqlstate_of(conn, "select agentmem.start_conversation(user_id => 'u1')") == "AM041"
            with pytest.raises(psycopg.Error) as info:
                add_message(conn, b_conversation, "forged")
            assert info.value.sqlstate == "AM041"
        with conn.transaction():
            conn.execute("set local agentmem.tenant_checked = 'tenant-b'")
            conn.execute("set local agentmem.tenant_id = 'tenant-b'")
            assert refused(conn, "select * from agentmem.recent_messages(conversation_id => %s)",
                           (b_conversation,)) == "AM041"
        # the granted tenant, with the forged mark still set: works, and the mark is the session's again after
        conn.execute("set agentmem.tenant_id = 'tenant-a'")
        add_message(conn, a_conversation, "second")
        assert conn.execute("select current_setting('agentmem.tenant_checked', true)").fetchone() == ("tenant-b",)
    assert count(admin, "messages", "tenant_id = 'tenant-b'") == 1
    assert count(admin, "messages", "tenant_id = 'tenant-a'") == 2


def test_every_function_that_runs_as_agentmem_owner_resets_the_mark(admin):
    """The mark is trusted only where current_user is agentmem_owner, which only its security definer functions
    make it; each resets the mark on entry (sql/90_grants.sql re-applies it after every install)."""
    definer = admin.execute("select count(*) from pg_proc where prosecdef and proowner = 'agentmem_owner'::regrole"
                            ).fetchone()[0]
    missing = admin.execute(
        "select p.oid::regprocedure::text from pg_proc as p where p.prosecdef "
        "and p.proowner = 'agentmem_owner'::regrole "
        "and not coalesce('agentmem.tenant_checked=' = any(p.proconfig), false)").fetchall()
    assert definer > 20 and missing == []
    assert admin.execute("select agentmem_private.tenant_mark_trusted()").fetchone() == (True,)


def test_a_call_looks_up_the_logins_grants_once(admin, server, dbname, roles):
    """store_message reads the tenant in every statement's row-level security; the login's grants are looked
    up once per call, whatever the number of statements (they were looked up in each)."""
    if server.name == "citus":
        pytest.skip("on Citus tenant_grants is a reference table: its reads go to its shard placement, which "
                    "these statistics of the table do not count")
    app = roles("tb_app")
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'tenant-a')", (app,))
    reads = ("select coalesce(sum(seq_scan + idx_scan), 0) from pg_stat_xact_user_tables "
             "where relid = 'agentmem.tenant_grants'::regclass")
    with login(server, dbname, app) as conn:
        conn.execute("select agentmem.set_tenant(tenant_id => 'tenant-a')")
        cid = conn.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
        add_message(conn, cid)
        with conn.transaction():
            before = conn.execute(reads).fetchone()[0]
            add_message(conn, cid, "counted")
            assert conn.execute(reads).fetchone()[0] - before == 1
            conn.execute("select * from agentmem.recent_messages(conversation_id => %s)", (cid,))
            assert conn.execute(reads).fetchone()[0] - before == 2


def test_prefix_and_all_tenant_grants_and_the_list(admin, server, dbname, roles):
    regional = roles("tb_eu")
    service = roles("tb_svc")
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_prefix => 'eu/')", (regional,))
    admin.execute("select agentmem.grant_tenant(role_name => %s, all_tenants => true)", (service,))
    with login(server, dbname, regional) as conn:
        conn.execute("select agentmem.set_tenant(tenant_id => 'eu/acme')")
        assert conn.execute("select agentmem.may_act_as(tenant_id => 'eu/globex')").fetchone() == (True,)
        assert conn.execute("select agentmem.may_act_as(tenant_id => 'us/acme')").fetchone() == (False,)
        assert sqlstate_of(conn, "select agentmem.set_tenant(tenant_id => 'eu')") == "AM041"
        assert sqlstate_of(conn, "select agentmem.set_tenant(tenant_id => 'us/acme')") == "AM041"
    with login(server, dbname, service) as conn:
        for tenant in ("eu/acme", "us/acme", "anything"):
            conn.execute("select agentmem.set_tenant(tenant_id => %s)", (tenant,))
            conn.execute("select agentmem.start_conversation(user_id => 'u1')")
    rows = admin.execute("select role_name, scope, tenant, role_exists, role_can_login, binding_mode "
                         "from agentmem.tenant_grant_list where role_name in (%s, %s) order by role_name",
                         (regional, service)).fetchall()
    assert sorted(rows) == sorted([(regional, "prefix", "eu/", True, True, "role"),
                                   (service, "all", None, True, True, "role")])


def test_grant_tenant_refuses_bad_arguments_and_the_application_role(admin, app, roles):
    role = roles("tb_app")
    assert sqlstate_of(admin, "select agentmem.grant_tenant(role_name => 'no_such_role_x', tenant_id => 'a')") == "AM030"
    assert sqlstate_of(admin, "select agentmem.grant_tenant(role_name => %s)", (role,)) == "AM020"
    assert sqlstate_of(admin, "select agentmem.grant_tenant(role_name => %s, tenant_id => 'a', all_tenants => true)",
                       (role,)) == "AM020"
    assert sqlstate_of(admin, "select agentmem.grant_tenant(role_name => %s, tenant_id => ' a')", (role,)) == "AM002"
    assert sqlstate_of(admin, "select agentmem.grant_tenant(role_name => %s, tenant_prefix => %s)",
                       (role, "eu\u3000")) == "AM002"
    assert sqlstate_of(admin, "select agentmem.set_tenant_binding(mode => 'maybe')") == "AM020"
    assert sqlstate_of(admin, "select agentmem.set_tenant_binding(mode => 'jwt', jwt_claim => 'a..b')") == "AM020"
    for call in ("select agentmem.grant_tenant(role_name => current_user, all_tenants => true)",
                 "select agentmem.revoke_tenant(role_name => current_user, all_tenants => true)",
                 "select agentmem.set_tenant_binding(mode => 'none')",
                 "select * from agentmem.tenant_grant_list",
                 "select * from agentmem.search_path_health"):
        assert sqlstate_of(app, call) == "42501", call


def test_mode_none_lets_any_login_act_as_any_tenant(admin, server, dbname, roles):
    app = roles("tb_app")
    admin.execute("select agentmem.set_tenant_binding(mode => 'none')")
    try:
        with login(server, dbname, app) as conn:
            conn.execute("select agentmem.set_tenant(tenant_id => 'whoever')")
            conn.execute("select agentmem.start_conversation(user_id => 'u1')")
    finally:
        admin.execute("select agentmem.set_tenant_binding(mode => 'role')")
    with login(server, dbname, app) as conn:
        assert sqlstate_of(conn, "select agentmem.set_tenant(tenant_id => 'whoever')") == "AM041"


def test_grants_belong_to_the_role_not_its_name(admin, server, dbname, roles):
    """A role dropped and created again under its name holds none of the old role's grants (nor its
    local-tenant requirement); a renamed role keeps its own; the rows of a dropped role go at the next
    grant, revoke or install."""
    app = roles("tb_app")
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'tenant-a')", (app,))
    admin.execute("select agentmem.require_local_tenant(role_name => %s)", (app,))
    admin.execute(f"drop owned by {app}")
    admin.execute(f"drop role {app}")
    # the grant's row is still there (nothing sees DROP ROLE), but it belongs to no one
    assert admin.execute("select role_exists from agentmem.tenant_grant_list where role_name = %s",
                         (app,)).fetchall() == [(False,)]
    admin.execute(f"create role {app} login")
    admin.execute("select agentmem.grant_app_role(role_name => %s)", (app,))
    with login(server, dbname, app) as conn:
        assert sqlstate_of(conn, "select agentmem.set_tenant(tenant_id => 'tenant-a', local => true)") == "AM041"
        assert conn.execute("select agentmem.tenant_must_be_local()").fetchone() == (False,)
    # the next grant clears the old role's rows
    other = roles("tb_other")
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'tenant-b')", (other,))
    assert admin.execute("select count(*) from agentmem.tenant_grants where role_name = %s", (app,)).fetchone() == (0,)
    assert admin.execute("select count(*) from agentmem.local_tenant_logins").fetchone() == (0,)
    # renamed: the same role, the same grants, listed under the new name
    renamed = roles("tb_renamed", app=False, login=False)
    admin.execute(f"drop role {renamed}")
    admin.execute(f"alter role {other} rename to {renamed}")
    try:
        with login(server, dbname, renamed) as conn:
            assert conn.execute("select agentmem.set_tenant(tenant_id => 'tenant-b')").fetchone() == ("tenant-b",)
        assert admin.execute("select role_name from agentmem.tenant_grant_list where tenant = 'tenant-b'"
                             ).fetchall() == [(renamed,)]
        assert admin.execute("select agentmem.revoke_tenant(role_name => %s, tenant_id => 'tenant-b')",
                             (renamed,)).fetchone() == (True,)
    finally:
        admin.execute(f"alter role {renamed} rename to {other}")


def test_a_login_required_to_set_a_local_tenant_is_refused_a_session_one(admin, server, dbname, roles):
    app = roles("tb_pooled")
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'tenant-a')", (app,))
    assert admin.execute("select agentmem.require_local_tenant(role_name => %s)", (app,)).fetchone() == (True,)
    assert admin.execute("select agentmem.require_local_tenant(role_name => %s)", (app,)).fetchone() == (False,)
    assert admin.execute("select local_tenant_only from agentmem.tenant_grant_list where role_name = %s",
                         (app,)).fetchall() == [(True,)]
    with login(server, dbname, app) as conn:
        assert conn.execute("select agentmem.tenant_must_be_local()").fetchone() == (True,)
        for call in ("select agentmem.set_tenant(tenant_id => 'tenant-a')",
                     "select agentmem.set_tenant(tenant_id => 'tenant-a', local => false)",
                     "select agentmem.set_tenant(tenant_id => 'tenant-a', local => null)"):
            with pytest.raises(psycopg.Error) as info:
                conn.execute(call)
            assert info.value.sqlstate == "AM042"
            assert "local => true" in info.value.diag.message_hint
        assert sqlstate_of(conn, "select agentmem.current_tenant()") == "AM001"  # nothing was set
        with conn.transaction():
            assert conn.execute("select agentmem.set_tenant(tenant_id => 'tenant-a', local => true)"
                                ).fetchone() == ("tenant-a",)
            conn.execute("select agentmem.start_conversation(user_id => 'u1')")
        assert sqlstate_of(conn, "select agentmem.current_tenant()") == "AM001"  # gone with its transaction
        # the DBA's call, not the application's
        assert sqlstate_of(conn, "select agentmem.require_local_tenant(role_name => current_user, required => false)"
                           ) == "42501"
    # other logins are not affected; the requirement is lifted as it was set
    with login(server, dbname, roles("tb_free")) as conn:
        assert conn.execute("select agentmem.tenant_must_be_local()").fetchone() == (False,)
    assert sqlstate_of(admin, "select agentmem.require_local_tenant(role_name => 'no_such_role_x')") == "AM030"
    assert admin.execute("select agentmem.require_local_tenant(role_name => %s, required => false)",
                         (app,)).fetchone() == (True,)
    with login(server, dbname, app) as conn:
        assert conn.execute("select agentmem.set_tenant(tenant_id => 'tenant-a')").fetchone() == ("tenant-a",)


def test_the_driver_works_for_a_login_required_to_set_a_local_tenant(admin_url, server, dbname, roles):
    from agentmem.admin import Admin
    from agentmem.client import Memory
    app = roles("tb_pooled")
    with Admin.connect(admin_url) as dba:
        dba.grant_tenant(app, tenant_id="tenant-a")
        assert dba.require_local_tenant(app) is True
    with Memory.connect(server.db_url(dbname, app), tenant="tenant-a") as mem:
        assert mem.tenant_must_be_local() is True
        cid = mem.start_conversation("u1")
        assert mem.recent_messages(cid) == []


def test_a_transaction_open_when_binding_turns_on_keeps_mode_none_until_it_ends(admin, server, dbname, roles):
    """The documented exception (set_tenant_binding's comment, docs/security.md): PostgreSQL delivers the
    new mode to a session at its next transaction, and a transaction open at the switch may keep the old
    one until it ends. set_tenant_binding says how many sessions of other logins are in one."""
    app = roles("tb_app")
    admin.execute("select agentmem.set_tenant_binding(mode => 'none')")
    try:
        with login(server, dbname, app) as conn:
            with conn.transaction():
                conn.execute("select agentmem.set_tenant(tenant_id => 'tenant-a', local => true)")
                conn.execute("select agentmem.start_conversation(user_id => 'u1')")
                notices: list[str] = []
                admin.add_notice_handler(lambda n: notices.append(n.message_primary or ""))
                admin.execute("select agentmem.set_tenant_binding(mode => 'role')")
                assert any("1 session" in n and "open transaction" in n for n in notices), notices
            # the next transaction is bound
            assert sqlstate_of(conn, "select agentmem.set_tenant(tenant_id => 'tenant-a')") == "AM041"
    finally:
        admin.execute("select agentmem.set_tenant_binding(mode => 'role')")


# -- binding by JWT claim -----------------------------------------------------------------------

@pytest.fixture
def jwt_mode(admin):
    admin.execute("select agentmem.set_tenant_binding(mode => 'jwt', jwt_claim => 'app_metadata.tenant_id')")
    yield
    admin.execute("select agentmem.set_tenant_binding(mode => 'role', jwt_claim => 'tenant_id')")


def postgrest_request(conn, web_role: str, claims: dict):
    """What PostgREST does at the start of each request's transaction, after verifying the token."""
    conn.execute("select set_config('request.jwt.claims', %s, true)", (json.dumps(claims),))
    conn.execute(f"set local role {web_role}")


def test_jwt_binding_as_postgrest_sets_the_claims(admin, server, dbname, roles, jwt_mode):
    authenticator = roles("tb_auth", app=False)
    web = roles("tb_web", login=False)
    admin.execute(f"grant {web} to {authenticator}")
    # The gateway's login: it may act for the tenants its verified tokens name, and for no others.
    admin.execute("select agentmem.grant_tenant(role_name => %s, all_tenants => true)", (authenticator,))
    seed_tenant(admin, "tenant-b")
    with login(server, dbname, authenticator) as conn:
        with conn.transaction():
            postgrest_request(conn, web, {"role": web, "app_metadata": {"tenant_id": "tenant-a"}})
            conn.execute("select agentmem.set_tenant(tenant_id => 'tenant-a', local => true)")
            conn.execute("select agentmem.start_conversation(user_id => 'u1')")
            assert refused(conn, "select agentmem.set_tenant(tenant_id => 'tenant-b', local => true)") == "AM041"
        with conn.transaction():  # a token naming several tenants
            postgrest_request(conn, web, {"role": web, "app_metadata": {"tenant_id": ["tenant-a", "tenant-c"]}})
            conn.execute("select agentmem.set_tenant(tenant_id => 'tenant-c', local => true)")
            assert refused(conn, "select agentmem.set_tenant(tenant_id => 'tenant-b', local => true)") == "AM041"
        with conn.transaction():  # a request without a token: no tenant at all
            conn.execute(f"set local role {web}")
            assert refused(conn, "select agentmem.set_tenant(tenant_id => 'tenant-a', local => true)") == "AM041"
        with conn.transaction():  # malformed claims are no claims
            conn.execute("select set_config('request.jwt.claims', 'not json', true)")
            conn.execute(f"set local role {web}")
            assert refused(conn, "select agentmem.set_tenant(tenant_id => 'tenant-a', local => true)") == "AM041"
    assert count(admin, "conversations", "tenant_id = 'tenant-a'") == 1
    assert count(admin, "conversations", "tenant_id = 'tenant-b'") == 1


def test_jwt_binding_and_a_forged_claim(admin, server, dbname, roles, jwt_mode):
    """What is trusted: request.jwt.claims as the gateway set it, within the gateway login's grants.
    The database cannot tell who set a setting, so a forged claim is refused where the login's grants
    end: a login that runs SQL of its own and holds no grant gets nothing from any claim, and the
    gateway's login only the tenants granted to it (here the prefix eu/)."""
    direct = roles("tb_direct")
    authenticator = roles("tb_auth", app=False)
    web = roles("tb_web", login=False)
    admin.execute(f"grant {web} to {authenticator}")
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_prefix => 'eu/')", (authenticator,))
    seed_tenant(admin, "us/victim")
    with login(server, dbname, direct) as conn:
        with conn.transaction():
            conn.execute("select set_config('request.jwt.claims', %s, true)",
                         (json.dumps({"app_metadata": {"tenant_id": "us/victim"}}),))
            assert refused(conn, "select agentmem.set_tenant(tenant_id => 'us/victim', local => true)") == "AM041"
    with login(server, dbname, authenticator) as conn:
        with conn.transaction():
            postgrest_request(conn, web, {"role": web, "app_metadata": {"tenant_id": "eu/acme"}})
            conn.execute("select agentmem.set_tenant(tenant_id => 'eu/acme', local => true)")
            # The session forges a claim after the verified one (an RPC function that calls set_config).
            conn.execute("select set_config('request.jwt.claims', %s, true)",
                         (json.dumps({"app_metadata": {"tenant_id": "us/victim"}}),))
            assert refused(conn, "select agentmem.current_tenant()") == "AM041"
            assert refused(conn, "select agentmem.set_tenant(tenant_id => 'us/victim', local => true)") == "AM041"
    assert count(admin, "messages", "tenant_id = 'us/victim'") == 1


# -- tenant ids: whitespace of any kind -------------------------------------------------------

@pytest.mark.parametrize("space", ["\u00a0", "\u3000", "\u2028", "\u2003", "\ufeff", "\t"])
def test_tenant_ids_with_unicode_whitespace_at_either_end_are_refused_by_every_route(connect, app_url, admin, space):
    conn = connect(app_url)
    for tenant in (f"{space}acme", f"acme{space}"):
        assert sqlstate_of(conn, "select agentmem.set_tenant(tenant_id => %s)", (tenant,)) == "AM002"
        conn.execute("select set_config('agentmem.tenant_id', %s, false)", (tenant,))
        assert sqlstate_of(conn, "select agentmem.start_conversation(user_id => 'u1')") == "AM002"
        conn.execute("reset agentmem.tenant_id")
    if space != "\t":  # inside an id, a space is a character like any other (a tab is a control character)
        assert conn.execute("select agentmem.set_tenant(tenant_id => %s)", (f"ac{space}me",)).fetchone()[0] == f"ac{space}me"
    assert count(admin, "conversations") == 0


# -- the search path ----------------------------------------------------------------------------

def test_an_installed_database_reports_a_safe_search_path(admin):
    assert admin.execute("select * from agentmem.search_path_health").fetchall() == []


def test_a_role_that_can_write_the_path_shows_in_health_and_stops_grant_app_role(admin, admin_url, roles):
    from agentmem.migrate import Migrator
    writer = roles("tb_writer", app=False)
    assert "search path: safe" in "\n".join(Migrator(admin_url).security())
    admin.execute(f"grant create on schema public to {writer}")
    rows = admin.execute("select schema_name, role_name, fix from agentmem.search_path_health").fetchall()
    assert rows == [("public", writer, f"revoke create on schema public from {writer};")]
    status = "\n".join(Migrator(admin_url).security())  # what `agentmem status` prints
    assert f"search path: UNSAFE: schema public: {writer}" in status and "tenant binding: role" in status
    with pytest.raises(psycopg.Error) as info:
        admin.execute("select agentmem.grant_app_role(role_name => %s)", (writer,))
    assert info.value.sqlstate == "AM041" and f"revoke create on schema public from {writer};" in info.value.diag.message_hint
    admin.execute(f"revoke create on schema public from {writer}")
    admin.execute("select agentmem.grant_app_role(role_name => %s)", (writer,))
    setting = admin.execute("select setconfig from pg_db_role_setting where setrole = %s::regrole",
                            (writer,)).fetchone()[0]
    assert "statement_timeout=30s" in setting


def test_grant_app_role_keeps_the_dbas_own_statement_timeout(admin, roles):
    role = roles("tb_app", app=False)
    admin.execute(f"alter role {role} set statement_timeout = '5min'")
    admin.execute("select agentmem.grant_app_role(role_name => %s)", (role,))
    settings = admin.execute("select setconfig from pg_db_role_setting where setrole = %s::regrole",
                             (role,)).fetchall()
    assert [s for row in settings for s in row[0] if s.startswith("statement_timeout")] == ["statement_timeout=5min"]


HIJACK = """
create function public.cardinality(text[]) returns int language plpgsql as
$$ begin raise exception 'hijacked: cardinality called as %', current_user; end $$;
create function public.convert_to(text, text) returns bytea language plpgsql as
$$ begin raise exception 'hijacked: convert_to called as %', current_user; end $$;
"""


@pytest.fixture
def empty_db(server):
    yield from scratch_database(server, "agentmem_tb_")


def test_install_refuses_a_database_where_public_may_create_in_public(server, roles, empty_db):
    """A database created before PostgreSQL 15: PUBLIC holds CREATE on schema public."""
    from agentmem.errors import InsufficientPrivilege
    from agentmem.migrate import Migrator, render_psql
    url = server.db_url(empty_db)
    app = roles("tb_hijacker", app=False)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("grant create on schema public to public")
    with psycopg.connect(server.db_url(empty_db, app), autocommit=True) as conn:
        conn.execute(HIJACK)
    with pytest.raises(InsufficientPrivilege) as info:
        Migrator(url).migrate()
    assert info.value.sqlstate == "AM041"
    assert "revoke create on schema public from public;" in info.value.hint
    assert "alter function public.cardinality(text[]) owner to" in info.value.hint
    with psycopg.connect(url, autocommit=True) as conn:  # nothing was installed
        assert conn.execute("select to_regnamespace('agentmem')").fetchone() == (None,)

    # The psql script refuses the same way.
    import subprocess
    script = render_psql()
    result = subprocess.run([server.bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", "-"],
                            input=script, capture_output=True, text=True)
    assert result.returncode != 0 and "revoke create on schema public from public;" in result.stderr

    # Revoking CREATE is not enough: the functions the app put there are still its own.
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("revoke create on schema public from public")
    with pytest.raises(InsufficientPrivilege) as info:
        Migrator(url).migrate()
    assert "public.cardinality(text[])" in info.value.detail
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("drop function public.cardinality(text[]), public.convert_to(text, text)")
    Migrator(url).migrate()


# -- the defects, at the sizes the probes found them at -----------------------------------------

def test_unseen_docs_with_a_generic_plan_at_the_documented_sizes(admin, connect, app_url):
    """100 turns x 1,000 ids of 909 characters recorded, 1,000 ids asked; past the sixth call of a
    session (PL/pgSQL's generic plan, forced here) the answer is the same and comes within the
    statement timeout (it took 91 s)."""
    admin.execute("select agentmem.set_tenant(tenant_id => 'acme')")
    cid = admin.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    admin.execute("reset agentmem.tenant_id")
    admin.execute("""
        insert into agentmem.messages (tenant_id, message_id, conversation_id, user_id, message_index, role, content)
        select 'acme', gen_random_uuid(), %s, 'u1', i, 'user', 'turn ' || i from generate_series(0, 99) as i
    """, (cid,))
    admin.execute("update agentmem.conversations set next_index = 100 where conversation_id = %s", (cid,))
    admin.execute("""
        insert into agentmem.retrievals (tenant_id, message_id, conversation_id, message_index, doc_ids)
        select m.tenant_id, m.message_id, m.conversation_id, m.message_index,
               array(select lpad(m.message_index * 1000 + d || '', 909, 'x') from generate_series(0, 999) as d)
        from agentmem.messages as m where m.conversation_id = %s
    """, (cid,))
    # Asked: the ids of turn 99 (seen) and 500 new ones.
    asked = [str(99_000 + d).rjust(909, "x") for d in range(500)] + [f"new-{d}".rjust(909, "y") for d in range(500)]
    import conftest
    conn = connect(app_url, tenant="acme")
    if conftest.SERVER.name != "citus":  # Citus plans its statements itself (and refuses forced generic plans)
        conn.execute("set plan_cache_mode = force_generic_plan")
    conn.execute("set statement_timeout = '60s'")
    for _ in range(7):
        unseen = conn.execute("select agentmem.unseen_docs(conversation_id => %s, doc_ids => %s, lookback => 1000)",
                              (cid, asked)).fetchone()[0]
        assert unseen == asked[500:]


def test_cache_report_with_1000_thresholds_over_50000_lookups_counts_as_with_few(admin, connect, app_url):
    admin.execute("""
        insert into agentmem.cache_hits (tenant_id, kind, similarity, guard_passed, intent, question_asked,
                                         reviewed_correct)
        select 'acme',
               case when i % 10 = 0 then 'exact' when i % 3 = 0 then 'semantic' else 'miss' end,
               case when i % 10 = 0 then 1 else (0.8 + (i % 200) / 1000.0)::real end,
               i % 7 <> 0, 'default', 'q' || i,
               case when i % 11 = 0 then i % 2 = 0 end
        from generate_series(1, 50000) as i
    """)
    conn = connect(app_url, tenant="acme")
    conn.execute("set statement_timeout = '60s'")
    thresholds = [round(0.8 + i / 5000, 4) for i in range(1000)]
    many = {r[0]: r[1:5] for r in conn.execute(
        "select threshold, queries, hits, reviewed, reviewed_wrong from agentmem.cache_report("
        "cost_uncached => 1, cost_wrong => 10, thresholds => %s::real[])", (thresholds,))}
    assert len(many) == 1000
    few = conn.execute("select threshold, queries, hits, reviewed, reviewed_wrong from agentmem.cache_report("
                       "cost_uncached => 1, cost_wrong => 10)").fetchall()
    assert len(few) == 15
    for threshold, *counts in few:
        expected = admin.execute("""
            select count(*) filter (where true),
                   count(*) filter (where kind = 'exact' or (guard_passed and similarity >= %(t)s::real)),
                   count(reviewed_correct) filter (where kind = 'exact' or (guard_passed and similarity >= %(t)s::real)),
                   count(*) filter (where not reviewed_correct and (kind = 'exact' or (guard_passed and similarity >= %(t)s::real)))
            from agentmem.cache_hits where tenant_id = 'acme'
        """, {"t": threshold}).fetchone()
        assert tuple(counts) == expected, threshold
    assert many[min(many)][1] >= many[max(many)][1]  # hits fall as the threshold rises
    # Duplicated thresholds count once.
    assert len(conn.execute("select * from agentmem.cache_report(cost_uncached => 1, cost_wrong => 1, "
                            "thresholds => array[0.9, 0.9, 0.95]::real[])").fetchall()) == 2


def test_erasure_lock_keys_do_not_collide_across_tenants(admin, connect, app_url):
    """Tenant 'rt/x' user 'y' and tenant 'rt' user 'x/y' made the same lock text: one tenant's
    forget_user stalled the other's writes."""
    holder = connect(app_url, tenant="rt/x")
    writer = connect(app_url, tenant="rt")
    holder.execute("begin")
    holder.execute("select agentmem.start_conversation(user_id => 'y')")
    holder.execute("select * from agentmem.forget_user(user_id => 'y')")  # holds the exclusive lock
    try:
        writer.execute("set lock_timeout = '3s'")
        writer.execute("select agentmem.start_conversation(user_id => 'x/y')")
    finally:
        holder.execute("rollback")
    assert count(admin, "conversations", "tenant_id = 'rt' and user_id = 'x/y'") == 1


@pytest.mark.parametrize("doc_id", ["\t", "\n", "\r\n", "\u00a0", "\u3000", " \u2028 "])
def test_document_ids_of_whitespace_of_any_kind_are_refused(app, doc_id):
    cid = app.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    message_id = add_message(app, cid).fetchone()[0]
    assert sqlstate_of(app, "select agentmem.record_retrieval(message_id => %s, doc_ids => %s)",
                       (message_id, ["d1", doc_id])) == "AM020"
    assert sqlstate_of(app, "select agentmem.unseen_docs(conversation_id => %s, doc_ids => %s)",
                       (cid, [doc_id])) == "AM020"


def _expired_messages(admin, tenant: str, n: int) -> None:
    admin.execute("select agentmem.set_tenant(tenant_id => %s)", (tenant,))
    cid = admin.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    admin.execute("reset agentmem.tenant_id")
    admin.execute("""
        insert into agentmem.messages (tenant_id, conversation_id, user_id, message_index, role, content, created_at)
        select %s, %s, 'u1', i, 'user', 'old ' || i, now() - interval '400 days' + i * interval '1 second'
        from generate_series(0, %s - 1) as i
    """, (tenant, cid, n))


def test_retention_serves_every_tenant_within_a_bounded_number_of_runs(admin):
    """A tenant with more expired rows than the batch no longer starves the tenants after it, with a
    policy of their own or under the installation default (the probes saw one wait three runs and more)."""
    batch = 50
    for tenant in ("a-heavy", "b-light", "c-light"):
        admin.execute("select agentmem.set_tenant(tenant_id => %s)", (tenant,))
        admin.execute("select agentmem.set_retention_policy(kind => 'messages', max_age => '30 days')")
    admin.execute("reset agentmem.tenant_id")
    _expired_messages(admin, "a-heavy", 20 * batch)
    _expired_messages(admin, "b-light", 10)
    _expired_messages(admin, "c-light", 10)
    admin.execute("select agentmem.set_default_retention_policy(kind => 'messages', max_age => '30 days')")
    _expired_messages(admin, "d-default-heavy", 20 * batch)
    _expired_messages(admin, "e-default-light", 10)
    for _ in range(3):  # tenants with expired rows under each kind of policy: 3 own, 2 default
        admin.execute("select * from agentmem.apply_retention(batch_size => %s)", (batch,))
    for tenant in ("b-light", "c-light", "e-default-light"):
        assert count(admin, "messages", "tenant_id = %s", (tenant,)) == 0, tenant
    assert count(admin, "messages", "tenant_id = 'a-heavy'") < 20 * batch
    assert count(admin, "messages", "tenant_id = 'd-default-heavy'") < 20 * batch


def test_concurrent_grant_and_revoke_leave_one_answer(admin, roles):
    role = roles("tb_app")
    errors: list[BaseException] = []

    def flip(n: int) -> None:
        try:
            with psycopg.connect(admin.info.dsn, autocommit=True) as conn:
                for _ in range(n):
                    conn.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'tenant-a')", (role,))
                    conn.execute("select agentmem.revoke_tenant(role_name => %s, tenant_id => 'tenant-a')", (role,))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    run_threads(flip, ((20,) for _ in range(2)))
    assert not errors
    assert admin.execute("select count(*) from agentmem.tenant_grants where role_name = %s", (role,)).fetchone() == (0,)


# -- the driver ---------------------------------------------------------------------------------

def test_the_admin_and_the_driver_manage_and_respect_the_binding(admin_url, server, dbname, roles):
    from agentmem.admin import Admin
    from agentmem.client import Memory
    from agentmem.errors import InsufficientPrivilege
    app = roles("tb_app")
    with Admin.connect(admin_url) as dba:
        assert dba.grant_tenant(app, tenant_id="tenant-a") is True
        assert dba.grant_tenant(app, tenant_prefix="eu/") is True
        assert {(g["scope"], g["tenant"]) for g in dba.tenant_grant_list() if g["role_name"] == app} == {
            ("tenant", "tenant-a"), ("prefix", "eu/")}
        assert dba.search_path_health() == []
        assert dba.set_tenant_binding("role")["mode"] == "role"
    with Memory.connect(server.db_url(dbname, app), tenant="tenant-a") as mem:
        assert mem.tenant_binding_mode() == "role"
        assert mem.may_act_as("eu/x") is True and mem.may_act_as("tenant-b") is False
        assert mem.current_tenant() == "tenant-a"
        with pytest.raises(InsufficientPrivilege) as info:
            mem.for_tenant("tenant-b").current_tenant()
        assert info.value.sqlstate == "AM041" and "grant_tenant" in info.value.hint
    with Admin.connect(admin_url) as dba:
        assert dba.revoke_tenant(app, tenant_prefix="eu/") is True


def test_the_driver_passes_a_gateways_jwt_claims_through_unchanged(admin_url, server, dbname, roles, jwt_mode):
    """Behind a gateway that verified the token, the caller sets request.jwt.claims in its own transaction
    and runs the driver's calls in it (conn=): the driver adds nothing and takes nothing away."""
    from agentmem.client import Memory
    from agentmem.errors import InsufficientPrivilege
    gateway = roles("tb_gw")
    with psycopg.connect(admin_url, autocommit=True) as dba:
        dba.execute("select agentmem.grant_tenant(role_name => %s, all_tenants => true)", (gateway,))
    url = server.db_url(dbname, gateway)
    with Memory.connect(url, tenant="tenant-a") as mem, psycopg.connect(url, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("select set_config('request.jwt.claims', %s, true)",
                         (json.dumps({"app_metadata": {"tenant_id": "tenant-a"}}),))
            assert mem.current_tenant(conn=conn) == "tenant-a"
            with pytest.raises(InsufficientPrivilege):
                mem.for_tenant("tenant-b").current_tenant(conn=conn)
        with pytest.raises(InsufficientPrivilege):  # no claims, no tenant
            mem.current_tenant()


@pytest.mark.parametrize("before", range(7))
def test_a_refused_tenant_leaves_the_drivers_pooled_connection_usable(admin, server, dbname, roles, before):
    """A call refused at set_tenant (AM041) aborts the driver's pipeline before its statement is
    parsed; if psycopg was preparing that statement (its fifth use on the connection), the next call
    must not find it missing ('prepared statement "_pg3_N" does not exist', as make demo met)."""
    from agentmem.client import Memory
    from agentmem.errors import InsufficientPrivilege
    app = roles()
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'tenant-a')", (app,))
    # prepare=True: psycopg's prepared statements (by default the client prepares none)
    with Memory.connect(server.db_url(dbname, app), tenant="tenant-a", max_size=1, prepare=True) as mem:
        for _ in range(before):
            mem.search_messages("alice", query_text="invoice", k=1)
        with pytest.raises(InsufficientPrivilege):
            mem.for_tenant("tenant-b").search_messages("alice", query_text="invoice", k=1)
        for _ in range(7):
            assert mem.search_messages("alice", query_text="invoice", k=1) == []


def test_my_tenants_lists_the_calling_logins_own_grants_without_a_tenant_set(admin, server, dbname, roles):
    one, regional, service, none = roles("tb_one"), roles("tb_eu"), roles("tb_svc"), roles("tb_none")
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'acme')", (one,))
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'globex')", (one,))
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_prefix => 'eu/')", (regional,))
    admin.execute("select agentmem.grant_tenant(role_name => %s, all_tenants => true)", (service,))
    query = "select tenant_id, scope, binding_mode from agentmem.my_tenants()"
    admin.execute(f"grant {regional} to {one}")
    with login(server, dbname, one) as conn:
        assert conn.execute(query).fetchall() == [("acme", "tenant", "role"), ("globex", "tenant", "role")]
        # SET ROLE changes nothing: the login's grants count, as for set_tenant
        conn.execute(f"set role {regional}")
        assert [r[0] for r in conn.execute(query).fetchall()] == ["acme", "globex"]
    with login(server, dbname, regional) as conn:
        assert conn.execute(query).fetchall() == [("eu/", "prefix", "role")]
    with login(server, dbname, service) as conn:
        assert conn.execute(query).fetchall() == [(None, "all", "role")]
    with login(server, dbname, none) as conn:
        assert conn.execute(query).fetchall() == []
    admin.execute("select agentmem.set_tenant_binding(mode => 'none')")
    with login(server, dbname, one) as conn:
        assert {r[2] for r in conn.execute(query).fetchall()} == {"none"}


# -- a writable schema in the path: nothing planted there ever runs ------------------------------

# Concrete types the planted overloads take: each polymorphic argument of a catalogue function is
# instantiated with each (CVE-2018-1058: an exact-type overload in a later schema beats a polymorphic
# or implicitly cast pg_catalog function, pg_catalog first or not).
PLANT_TYPES = ["text", "name", "integer", "bigint", "smallint", "real", "double precision", "numeric",
               "boolean", "uuid", "jsonb", "json", "timestamptz", "interval", "bytea", "vector", "tsvector",
               "tsquery", "regconfig", "oid", "tstzrange"]
PLANT_ARRAYS = ["text[]", "uuid[]", "integer[]", "bigint[]", "real[]", "double precision[]", "jsonb[]",
                "boolean[]", "timestamptz[]", "vector[]"]
# The operators' argument types: what agentmem's own expressions combine.
OPERATOR_TYPES = ["text", "integer", "bigint", "real", "double precision", "numeric", "uuid", "jsonb", "timestamptz",
                  "interval", "text[]", "uuid[]", "vector"]
PLANT_OPERATORS = ["=", "<>", "<", ">", "<=", ">=", "||", "+", "-", "*", "/", "%", "^", "->>", "->", "#>",
                   "#>>", "?", "?|", "?&", "~", "!~", "~*", "!~*", "~~", "!~~", "~~*", "&&", "<@", "@>", "@@",
                   "<=>", "<->", "<#>"]
POLY = {"anyelement", "anynonarray", "anycompatible", "anycompatiblenonarray", '"any"', "anyenum"}
POLY_ARRAY = {"anyarray", "anycompatiblearray"}

PLANT = """
do $plant$
declare
    v_sig text;
    v_ret text;
    v_types regtype[] := %(types)s::regtype[];
    v_ops text[] := %(ops)s::text[];
    v_l regtype;
    v_r regtype;
    v_op text;
    v_fn text;
begin
    foreach v_sig in array %(sigs)s::text[] loop
        v_ret := split_part(v_sig, '|', 2);
        v_sig := split_part(v_sig, '|', 1);
        begin
            execute format('create function public.%%s returns %%s language plpgsql as $b$ begin '
                           'raise warning ''planted %%s ran as %%%%'', current_user; %%s end $b$',
                           v_sig, v_ret, replace(v_sig, '''', ''''''),
                           case when v_ret like 'setof %%%%' or v_ret = 'void' then 'return;' else 'return null;' end);
        exception when duplicate_function or invalid_function_definition or undefined_object then
            null;
        end;
    end loop;
    foreach v_l in array v_types loop
        foreach v_r in array v_types loop
            v_fn := format('public.planted_op_%%s_%%s', v_l::oid, v_r::oid);
            execute format('create function %%s(%%s, %%s) returns boolean language plpgsql as $b$ begin '
                           'raise warning ''planted operator (%%s, %%s) ran as %%%%'', current_user; '
                           'return null; end $b$', v_fn, v_l, v_r, v_l, v_r);
            foreach v_op in array v_ops loop
                if not exists (select from pg_operator as o where o.oprname = v_op and o.oprleft = v_l
                               and o.oprright = v_r and o.oprnamespace in ('pg_catalog'::regnamespace,
                                                                           'public'::regnamespace)) then
                    execute format('create operator public.%%s (function = %%s, leftarg = %%s, rightarg = %%s)',
                                   v_op, v_fn, v_l, v_r);
                end if;
            end loop;
        end loop;
    end loop;
end
$plant$;
"""


def _planted_signatures(admin) -> list[str]:
    """'name(args)|return type' for every pg_catalog function sql/ calls, its polymorphic arguments
    instantiated with each of PLANT_TYPES (PLANT_ARRAYS for array ones), its name arguments as text."""
    import re
    from pathlib import Path
    text = "".join(p.read_text() for p in sorted((Path(__file__).parents[1] / "sql").glob("*.sql")))
    names = sorted(set(re.findall(r"pg_catalog\.(\w+)\(", text)) | {"cardinality", "convert_to"})
    rows = admin.execute(
        "select p.proname, array(select t::regtype::text from unnest(p.proargtypes::oid[]) as t), "
        "p.prorettype::regtype::text, p.proretset "
        "from pg_proc as p where p.pronamespace = 'pg_catalog'::regnamespace and p.proname = any(%s)",
        (names,)).fetchall()
    sigs = set()
    for name, args, ret, retset in rows:
        for concrete in PLANT_TYPES + PLANT_ARRAYS:
            element = concrete[:-2] if concrete.endswith("[]") else concrete

            def sub(t: str) -> str:
                if t in POLY:
                    return concrete
                if t in POLY_ARRAY:
                    return element + "[]"
                return "text" if t in ("name", '"char"') else t
            if not any(a in POLY | POLY_ARRAY | {"name", '"char"'} for a in args) and concrete != "text":
                continue
            new = [sub(a) for a in args]
            # Citus' own pg_catalog functions take types of schema citus, which no login may use
            if any(t.startswith("any") or t.startswith("citus.") for t in new):
                continue
            r = sub(ret) if ret in POLY | POLY_ARRAY else ret
            if r in ("record", "trigger", "internal") or r.startswith("any"):
                r = "int"
            sigs.add(f"{name}({', '.join(new)})|{'setof ' if retset else ''}{r}")
    return sorted(sigs)


def _planted_workload(app, admin, worker_url: str, heard) -> None:
    """Every kind of call, as the application, the worker and a superuser, on data that reaches their branches."""
    v384 = vec("hello world", 384)
    cid = start_conversation(app)
    app.execute("select * from agentmem.store_messages(conversation_id => %s, roles => %s, contents => %s, "
                "embeddings => %s, model => 'all-minilm', metadata => %s::jsonb[], occurred_at => %s::timestamptz[])",
                (cid, ["user", "assistant"], ["hello world", "other words"], [v384, vec("other words", 384)],
                 ['{"a": [1, 2]}', '{}'], ["2020-01-01", "2020-01-02"]))
    mid = app.execute("select message_id from agentmem.store_message(conversation_id => %s, role => 'user', "
                      "content => 'no vector yet', embedding => null)", (cid,)).fetchone()[0]
    calls = [
        ("select * from agentmem.search_messages(user_id => 'alice', query_embedding => %s, model => 'all-minilm')", (v384,)),
        ("select * from agentmem.search_messages(user_id => 'alice', query_text => 'hello', "
         "recency_half_life => '365 days')", None),
        ("select * from agentmem.search_messages(user_id => 'alice', query_embedding => %s, query_text => 'hello', "
         "model => 'all-minilm', since => '2019-01-01', until => now())", (v384,)),
        ("select * from agentmem.search_with_context(user_id => 'alice', query_embedding => %s, model => 'all-minilm')", (v384,)),
        ("select * from agentmem.recent_messages(conversation_id => %s)", (cid,)),
        ("select * from agentmem.short_term_context(conversation_id => %s)", (cid,)),
        ("select * from agentmem.context_window(message_id => %s)", (mid,)),
        ("select agentmem.set_summary(conversation_id => %s, summary => 's', through_index => 1)", (cid,)),
        ("select agentmem.record_retrieval(message_id => %s, doc_ids => '{d1,d2}')", (mid,)),
        ("select * from agentmem.topic_shift(conversation_id => %s)", (cid,)),
        ("select * from agentmem.unseen_docs(conversation_id => %s, doc_ids => '{d1,d3}')", (cid,)),
        ("select * from agentmem.cache_store(question => 'What is 2 + 2?', question_embedding => %s, answer => '4', "
         "source_ids => '{d1}', model => 'all-minilm', user_id => 'alice')", (v384,)),
        ("select * from agentmem.cache_lookup(question => 'what is 2+2', question_embedding => %s, "
         "model => 'all-minilm', user_id => 'alice')", (v384,)),
        ("select agentmem.question_guard_agrees(question => 'the 3rd of May', other_question => 'May 4th')", None),
        ("select agentmem.invalidate_source(doc_id => 'd1')", None),
        ("select * from agentmem.sample_hits()", None),
        ("select * from agentmem.embedding_cache_store(model => 'all-minilm', texts => '{a}', embeddings => %s)", ([v384],)),
        ("select * from agentmem.embedding_cache_lookup(model => 'all-minilm', texts => '{a,b}')", None),
        ("select * from agentmem.list_conversations(user_id => 'alice')", None),
        ("select * from agentmem.list_facts(user_id => 'alice', include_superseded => true)", None),
        ("select * from agentmem.recall_facts(user_id => 'alice', query_embedding => %s, query_text => 'paris')",
         (vec("lives in Paris"),)),
        ("select * from agentmem.export_user(user_id => 'alice')", None),
        ("select agentmem.set_retention_policy(kind => 'messages', max_age => '1 day')", None),
    ]
    upsert(app, "alice", "alice", "lives in Paris", sources=[mid])
    fact = upsert(app, "alice", "alice", "lives in Rome", dim_text="lives in Paris")[0]
    for sql, params in calls:
        app.execute(sql, params)
    app.execute("select * from agentmem.fact_history(fact_id => %s)", (fact,))
    app.execute("select * from agentmem.update_fact(fact_id => %s, fact => 'lives in Oslo', embedding => %s)",
                (fact, vec("lives in Oslo")))
    lines = [r[0] for r in app.execute("select line from agentmem.export_user(user_id => 'alice')")]
    app.execute("select agentmem.forget_user(user_id => 'alice')")
    app.execute("select * from agentmem.import_user(lines => %s::text[])", (lines,))
    app.execute("select * from agentmem.delete_fact(fact_id => %s)", (fact,))
    app.execute("select * from agentmem.forget_conversation(conversation_id => %s)", (cid,))
    app.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => 'queued', "
                "embedding => null)", (start_conversation(app, "bob"),))
    with psycopg.connect(worker_url, autocommit=True) as w:
        w.add_notice_handler(heard)
        register_vector(w)
        jobs = w.execute("select * from agentmem.claim_embedding_jobs()").fetchall()
        assert jobs
        w.execute("select * from agentmem.complete_embedding_jobs(lease_token => %s, tenant_ids => %s, "
                  "job_ids => %s, embeddings => %s)",
                  (jobs[0][6], [j[0] for j in jobs], [j[1] for j in jobs],
                   [vec(j[4], j[3]) for j in jobs]))
    admin.execute("update agentmem.messages set created_at = now() - interval '2 days'")
    admin.execute("select * from agentmem.apply_retention()")
    admin.execute("select agentmem.set_tenant(tenant_id => %s)", ("acme",))
    admin.execute("select * from agentmem.sweep_cache()")
    admin.execute("select * from agentmem.embedding_queue_depth()")
    admin.execute("select * from agentmem.health")
    admin.execute("select * from agentmem.export_tenant(tenant_id => 'acme')")


def test_functions_and_operators_planted_in_a_writable_path_schema_never_run(server, admin, dbname, roles, app, request):
    """pgvector's schema (public) is writable by the application login (CREATE granted after install):
    it plants exact-type overloads of every catalogue function sql/ calls (cardinality(text[]),
    convert_to(text, text), ...) and of 34 operators over 13 types. No API call (as agentmem_owner),
    worker call, nor apply_retention as a superuser runs any of them: each would warn and raise."""
    if server.name == "citus":
        pytest.skip("known gap on Citus: the statements Citus sends to the workers name pg_catalog functions "
                    "unqualified, and the workers resolve them through the connection's search_path, where a "
                    "planted public.array_agg ran (docs/citus.md)")
    planter = roles("tb_planter")
    admin.execute(f"grant create on schema public to {planter}")
    sigs = _planted_signatures(admin)
    request.addfinalizer(lambda: admin.execute(f"drop owned by {planter}"))
    with psycopg.connect(server.db_url(dbname, planter), autocommit=True) as conn:
        conn.execute("set statement_timeout = 0")
        literal = lambda items: psycopg.sql.Literal(list(items)).as_string(conn)  # noqa: E731
        conn.execute(PLANT % {"types": literal(OPERATOR_TYPES), "ops": literal(PLANT_OPERATORS),
                              "sigs": literal(sigs)})
    planted = admin.execute("select (select count(*) from pg_proc where pronamespace = 'public'::regnamespace "
                            "and proowner = %s::regrole), (select count(*) from pg_operator where "
                            "oprnamespace = 'public'::regnamespace and oprowner = %s::regrole)",
                            (planter, planter)).fetchone()
    assert planted[0] > 900 and planted[1] > 4000, planted
    assert admin.execute("select count(*) from pg_proc where oid = 'public.cardinality(text[])'::regprocedure"
                         ).fetchone() == (1,)

    warnings: list[str] = []
    def heard(diag):
        warnings.append(f"{diag.message_primary} in {diag.context}")
    admin.add_notice_handler(heard)
    app.add_notice_handler(heard)
    try:
        _planted_workload(app, admin, worker_login_url(server, dbname, admin), heard)
    except psycopg.Error as exc:  # a planted function that returned NULL broke the call
        raise AssertionError("\n".join(sorted(set(warnings)))) from exc
    assert [w for w in warnings if "planted" in w] == [], "\n".join(sorted(set(warnings)))
