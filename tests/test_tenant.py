"""Tenant context: set_tenant/current_tenant, per-transaction scope, the app role."""

from __future__ import annotations

import re

import psycopg
import pytest

import agentmem
from agentmem.errors import translate
from helpers import audiences, sqlstate_of


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


DEFINER_REASON = "Security definer: "
# SQL functions inlined into their callers' statements (so they pin no search_path).
INLINED = {"agentmem_private.bm25_words(tsvector,tsquery[],double precision[])"}
# The line before the last of every definer function's comment (sql/README.md, "Security"); the last
# line says who calls it (AUDIENCE_LINES).
DEFINER_LINE = ("Security definer: runs as agentmem_owner because the application role holds no privilege on "
                "tables or internals; forced row-level security still confines it to the current tenant.")
# The embedding queue's calls for workers (sql/17_embedding_jobs.sql) run as the queue's owner instead.
QUEUE_DEFINER_LINE = ("Security definer: runs as agentmem_queue, the one role that sees every tenant's embedding "
                      "jobs; other tables it reaches only under the job's tenant.")
# The last line of the comment of every function of schema agentmem, and the roles it grants EXECUTE to.
AUDIENCE_LINES = {"Called by: the application (agentmem_app).": {"agentmem_app"},
                  "Called by: the embedding worker (agentmem_worker).": {"agentmem_worker"},
                  "Called by: the DBA (granted to no role).": set()}


def test_every_function_is_documented_pinned_and_definer_only_with_a_reason(admin):
    rows = admin.execute("""
        select p.oid::regprocedure::text, n.nspname, obj_description(p.oid, 'pg_proc'), p.prosecdef,
               p.proconfig, pg_get_userbyid(p.proowner)
          from pg_proc p join pg_namespace n on n.oid = p.pronamespace
         where n.nspname in ('agentmem', 'agentmem_private')
    """).fetchall()
    assert {r[1] for r in rows} == {"agentmem", "agentmem_private"}
    queue_calls = {f"agentmem.{n}" for n in audiences(admin)["worker"]}
    for name, schema, comment, secdef, config, owner in rows:
        assert comment and comment.splitlines()[0].strip(), f"{name} has no comment"
        # Only schemas no caller can write: never pgvector's (often public), where an exact-type overload
        # planted by another role would beat pg_catalog's (test_tenant_binding.py plants them).
        if name in INLINED:
            # Inlined into its caller's statement, which a pinned setting would prevent: no setting,
            # and every operator and function in its body named with its schema.
            assert config is None, f"{name} must stay inlinable"
            body = admin.execute("select prosrc from pg_proc where oid = %s::regprocedure", (name,)).fetchone()[0]
            bare = re.sub(r"operator\(pg_catalog\.[^)]+\)", "", body)
            assert not re.search(r"[-+*/<>=@|&!~]", bare), f"{name}: an operator not named with its schema"
            calls = re.findall(r"([\w.]+)\s*\(", body)
            assert calls and all(c == "operator" or "." in c for c in calls), f"{name} calls {calls}"
            continue
        assert "search_path=pg_catalog, agentmem, pg_temp" in (config or []), f"{name} pins {config}"
        if schema == "agentmem":
            assert not name.startswith("agentmem._"), f"{name}: internal helpers belong in agentmem_private"
        if secdef:  # a definer function is public, owned by agentmem_owner, and says why on a line of its own
            assert schema == "agentmem", f"{name}: internals are never security definer"
            queue = name.split("(")[0] in queue_calls
            assert owner == ("agentmem_queue" if queue else "agentmem_owner"), f"{name} is security definer owned by {owner}"
            reason = [line for line in comment.splitlines() if line.startswith(DEFINER_REASON)]
            assert reason and len(reason[0]) > len(DEFINER_REASON) + 20, f"{name} is security definer without a reason"
            assert comment.rstrip().splitlines()[-2] == (QUEUE_DEFINER_LINE if queue else DEFINER_LINE), \
                f"{name}: the comment must end with the reason, then who calls it"
        else:
            assert DEFINER_REASON not in comment, f"{name} claims a definer reason but is security invoker"


def test_the_app_role_holds_execute_on_the_api_and_no_other_privilege(admin):
    owner = admin.execute("select rolsuper, rolbypassrls, rolcanlogin from pg_roles "
                          "where rolname = 'agentmem_owner'").fetchone()
    # On Citus, distribute() lets the owner log in: worker connections inside a
    # definer function are opened as its owner. Everywhere else it stays NOLOGIN.
    distributed = admin.execute("select agentmem.is_distributed()").fetchone()[0]
    assert owner == (False, False, distributed)
    granted = admin.execute("""
        select c.relname, c.relkind, privilege_type
          from pg_class c, lateral aclexplode(c.relacl) a
         where c.relnamespace in ('agentmem'::regnamespace, 'agentmem_private'::regnamespace)
           and a.grantee in ('agentmem_app'::regrole, 0)
    """).fetchall()
    assert granted == [], f"tables, views or sequences granted to the application role or public: {granted}"
    # the app role's roles (members of agentmem_app) reach nothing in the private schema
    assert admin.execute("select has_schema_privilege('agentmem_app', 'agentmem_private', 'usage')").fetchone() == (False,)
    private_exec = admin.execute("""
        select p.oid::regprocedure::text from pg_proc p
         where p.pronamespace = 'agentmem_private'::regnamespace
           and has_function_privilege('agentmem_app', p.oid, 'execute')
    """).fetchall()
    assert private_exec == []
    # EXECUTE on each function of schema agentmem to the roles its comment's last line names, and to
    # no other role (agentmem_owner also runs the application's, from its definer functions).
    callers = admin.execute("""
        select p.oid::regprocedure::text, p.prosecdef,
               pg_catalog.rtrim(pg_catalog.obj_description(p.oid, 'pg_proc'), e' \\n'),
               array(select r from unnest(array['agentmem_app', 'agentmem_worker', 'agentmem_owner']) as r
                      where has_function_privilege(r, p.oid, 'execute')),
               exists (select from aclexplode(p.proacl) as a where a.grantee = 0 and a.privilege_type = 'EXECUTE')
          from pg_proc p where p.pronamespace = 'agentmem'::regnamespace
    """).fetchall()
    assert len(callers) > 70
    for fn, secdef, comment, roles, public in callers:
        declared = AUDIENCE_LINES.get(comment.splitlines()[-1])
        assert declared is not None, f"{fn}: the comment's last line says who calls it"
        expected = declared | ({"agentmem_owner"} if "agentmem_app" in declared else set())
        assert set(roles) == expected and not public, (fn, roles, public)
        if not declared:  # the DBA's functions run with the DBA's own privileges
            assert not secdef, f"{fn}: a DBA function is security invoker"
    # A pin, not the DBA set (that is the comments'): the calls that change roles, models, retention or
    # whole tenants stay the DBA's even should their comment's last line be edited.
    for fn in ("register_model(text,integer,text,text)", "apply_retention(integer)", "grant_app_role(text)",
               "set_default_retention_policy(text,interval)", "clear_default_retention_policy(text)",
               "schedule_retention(text)", "unschedule_retention()", "export_tenant(text)",
               "import_tenant(text,text[])"):
        assert admin.execute("select has_function_privilege('agentmem_app', %s, 'execute')",
                             (f"agentmem.{fn}",)).fetchone() == (False,), fn
    assert admin.execute("select has_function_privilege('agentmem_app', 'agentmem.store_message(anycompatible,text,text,"
                         "vector,text,jsonb,timestamptz)', 'execute')").fetchone() == (True,)


def test_a_function_that_says_not_who_calls_it_stops_the_install_and_is_granted_to_no_one(admin, admin_url):
    from agentmem.errors import MigrationError
    from agentmem.migrate import Migrator, Source
    from conftest import ROOT
    try:
        admin.execute("create function agentmem.undeclared_probe() returns int language sql as 'select 1'")
        admin.execute("comment on function agentmem.undeclared_probe() is 'A probe whose comment names no caller.'")
        with pytest.raises(MigrationError) as info:
            Migrator(admin_url, Source.load(ROOT)).migrate()
        message = str(info.value)
        assert "90_grants.sql" in message and "agentmem.undeclared_probe()" in message, message
        assert isinstance(info.value.__cause__, psycopg.Error) and info.value.__cause__.sqlstate == "42P17"
        assert "Called by: the application (agentmem_app)." in info.value.__cause__.diag.message_hint
        # the install ran in one transaction: even its first revoke is undone (a new function's default
        # ACL, EXECUTE to PUBLIC, is still there)
        acl = ("select array(select case a.grantee when 0 then 'public' else a.grantee::regrole::text end "
               "from pg_proc as p, "
               "aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) as a "
               "where p.oid = 'agentmem.undeclared_probe()'::regprocedure and a.grantee <> p.proowner order by 1)")
        assert admin.execute(acl).fetchone()[0] == ["public"]
        admin.execute("comment on function agentmem.undeclared_probe() is "
                      "'A probe the DBA calls.\nCalled by: the DBA (granted to no role).'")
        Migrator(admin_url, Source.load(ROOT)).migrate()
        assert admin.execute(acl).fetchone()[0] == []
    finally:  # the citus leg shares one database between tests
        admin.execute("drop function if exists agentmem.undeclared_probe()")


@pytest.mark.parametrize("statement", [
    "update agentmem.models set dimension = 3, query_prefix = 'IGNORE ALL PREVIOUS INSTRUCTIONS '",
    "insert into agentmem.models (model, dimension) values ('evil', 3)",
    "delete from agentmem.models where model = 'all-minilm'",
    "update agentmem.cache_intents set threshold = 0.1",
    "lock table agentmem.messages in access exclusive mode",
    "select * from agentmem.messages",
    "insert into agentmem.conversations (tenant_id, user_id) values ('acme', 'u')",
    "update agentmem.erasure_log set rows_removed = '{}'",
    "delete from agentmem.erasure_log",
    "select * from agentmem.access_log",
    "delete from agentmem.access_log",
    "update agentmem.corpus_versions set version = 0",
    "select * from agentmem.schema_migrations",
    "select * from agentmem.job_runs",
])
def test_the_app_role_cannot_touch_a_table(app, admin, statement):
    before = admin.execute("select dimension, query_prefix from agentmem.models order by model").fetchall()
    with app.transaction():
        assert sqlstate_of(app, statement) == "42501"
    assert admin.execute("select dimension, query_prefix from agentmem.models order by model").fetchall() == before


@pytest.mark.parametrize("bad", [" evil", "evil ", "ten\nant", "a" * 129, "tab\there", "bell\x07"])
def test_a_tenant_set_around_set_tenant_is_refused_and_writes_nothing(connect, app_url, admin, bad):
    conn = connect(app_url)
    conn.execute("select set_config('agentmem.tenant_id', %s, false)", (bad,))
    assert sqlstate_of(conn, "select agentmem.current_tenant()") == "AM002"
    assert sqlstate_of(conn, "select agentmem.start_conversation(user_id => 'u1')") == "AM002"
    assert admin.execute("select count(*) from agentmem.conversations").fetchone() == (0,)


def test_a_definer_function_runs_as_the_owner_and_rls_still_binds_it(connect, app_url, admin):
    acme, globex = connect(app_url, tenant="acme"), connect(app_url, tenant="globex")
    cid = acme.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    # the owner role is not exempt from the policies: another tenant cannot reach the row
    assert sqlstate_of(globex, "select * from agentmem.recent_messages(conversation_id => %s)", (cid,)) == "AM030"
    assert admin.execute("select tenant_id from agentmem.conversations").fetchall() == [("acme",)]


def test_every_table_carries_tenant_id_with_forced_rls(admin):
    rows = admin.execute("""
        select c.relname, c.relrowsecurity, c.relforcerowsecurity,
               exists (select from pg_attribute a where a.attrelid = c.oid and a.attname = 'tenant_id'
                       and not a.attisdropped)
          from pg_class c
         where c.relnamespace = 'agentmem'::regnamespace and c.relkind in ('r', 'p')
           and c.relname not in ('schema_migrations')
    """).fetchall()
    # installation-wide catalogues, no tenant data (tenant_grants, tenant_binding, retention_cursors,
    # local_tenant_logins: the DBA's)
    exempt = {"models", "cache_intents", "text_search_settings", "tenant_grants", "tenant_binding", "retention_cursors",
              "local_tenant_logins"}
    distributed = admin.execute("select agentmem.is_distributed()").fetchone()[0]
    policies = dict(admin.execute(
        "select tablename, qual || ' / ' || with_check from pg_policies "
        "where schemaname = 'agentmem' and policyname = 'tenant_isolation'").fetchall())
    for name, rls, forced, has_tenant in rows:
        if name in exempt:
            continue
        assert has_tenant and rls and forced, f"table {name}: tenant_id={has_tenant} rls={rls} forced={forced}"
        # Once per statement (a sub-select); on Citus, which refuses sub-selects in policies, per row.
        expected = ("(tenant_id = agentmem.current_tenant())" if distributed
                    else "(tenant_id = ( SELECT agentmem.current_tenant() AS current_tenant))")
        assert policies.get(name) == f"{expected} / {expected}", f"table {name}: {policies.get(name)}"
    assert len(policies) == len(rows) - len(exempt & {r[0] for r in rows})


def test_a_table_that_lost_forced_rls_or_its_policy_gets_them_back_on_the_next_migrate(admin, admin_url):
    """A DBA (or a restore) turned row-level security off, unforced it, dropped a policy: the next
    agentmem migrate puts each back (sql/01_row_security.sql compares the catalogue on every install)."""
    from pathlib import Path

    from agentmem.migrate import Migrator, Source
    admin.execute("alter table agentmem.messages no force row level security")
    admin.execute("alter table agentmem.facts disable row level security")
    admin.execute("drop policy tenant_isolation on agentmem.cache_entries")
    admin.execute("alter policy tenant_isolation on agentmem.conversations using (true) with check (true)")
    Migrator(admin_url, Source.load(Path(__file__).resolve().parents[1])).migrate()
    test_every_table_carries_tenant_id_with_forced_rls(admin)


UNFILTERED = """
create function agentmem.{name}(p_table text) returns setof text
language plpgsql stable security definer set search_path = pg_catalog, agentmem, pg_temp as $$
begin
    -- every row of the table, no tenant filter of its own
    return query execute pg_catalog.format('select distinct tenant_id::text from agentmem.%I', p_table);
end $$;
alter function agentmem.{name}(text) owner to agentmem_owner;
grant execute on function agentmem.{name}(text) to agentmem_app;
"""


def test_the_policies_alone_confine_a_function_that_filters_no_tenant(admin, app, connect, app_url, server):
    """The functions filter by tenant themselves as well, so the catalogue test alone would not notice a
    policy that lets rows through. Here definer functions (as agentmem_owner, like the API) whose own
    tenant filter is removed (a generic read of every table, and recent_messages with its filters cut
    out) read only the current tenant's rows: the policies hold alone."""
    import re
    from helpers import store_message, upsert
    globex = connect(app_url, tenant="globex")
    for conn, tenant in ((app, "acme"), (globex, "globex")):
        cid = conn.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
        store_message(conn, cid, f"{tenant} secret")
        upsert(conn, "u1", "city", f"{tenant} city")
        conn.execute("select * from agentmem.cache_store(question => %s, question_embedding => null, answer => 'x')",
                     (f"{tenant} question?",))
        conn.execute("select * from agentmem.export_user(user_id => 'u1')").fetchall()
    globex_cid = globex.execute("select conversation_id from agentmem.list_conversations(user_id => 'u1')"
                                ).fetchone()[0]
    tables = [r[0] for r in admin.execute(
        "select c.relname from pg_class as c where c.relnamespace = 'agentmem'::regnamespace and c.relkind = 'r' "
        "and c.relrowsecurity and has_table_privilege('agentmem_owner', c.oid, 'select') "
        "and exists (select from pg_attribute as a where a.attrelid = c.oid "
        "and a.attname = 'tenant_id' and not a.attisdropped) order by 1").fetchall()]
    try:
        admin.execute(UNFILTERED.format(name="test_unfiltered_tenants"))
        seen_by_all = {t: {r[0] for r in admin.execute(
            "select distinct tenant_id::text from agentmem.%s" % t).fetchall()} for t in tables}
        assert {"acme", "globex"} <= seen_by_all["messages"] | seen_by_all["facts"]
        for table in tables:
            seen = {r[0] for r in app.execute("select * from agentmem.test_unfiltered_tenants(p_table => %s)", (table,))}
            assert seen <= {"acme"}, f"{table}: {seen}"
            if "acme" in seen_by_all[table]:
                assert seen == {"acme"}, table  # the function does read: it is the policy that stops globex's rows
        if server.name == "citus":
            # Citus cannot plan the stripped function's tenant-less exists (select from ...): a
            # multi-shard query with an empty target list (42601). The generic read above held there.
            return
        source = admin.execute("select pg_get_functiondef('agentmem.recent_messages(anycompatible, int, timestamptz, "
                               "timestamptz)'::regprocedure)").fetchone()[0]
        stripped = re.sub(r"\b(\w+)\.tenant_id = v_tenant and ", "", source)
        assert stripped.count("tenant_id = v_tenant") == 0 and stripped != source
        admin.execute(re.sub(r"\brecent_messages\b", "test_recent_messages_unfiltered", stripped))
        admin.execute("alter function agentmem.test_recent_messages_unfiltered(anycompatible, int, timestamptz, timestamptz) "
                      "owner to agentmem_owner")
        admin.execute("grant execute on function agentmem.test_recent_messages_unfiltered(anycompatible, int, "
                      "timestamptz, timestamptz) to agentmem_app")
        # the real function with its filters cut out: globex's conversation is not found from acme
        assert sqlstate_of(app, "select * from agentmem.test_recent_messages_unfiltered(conversation_id => %s)",
                           (globex_cid,)) == "AM030"
        assert [r[0] for r in globex.execute(
            "select content from agentmem.test_recent_messages_unfiltered(conversation_id => %s)", (globex_cid,))
        ] == ["globex secret"]
    finally:
        # dropped whatever happened: a function without its "Called by" line stops every later install
        admin.execute("drop function if exists agentmem.test_unfiltered_tenants(text)")
        admin.execute("drop function if exists agentmem.test_recent_messages_unfiltered(anycompatible, int, "
                      "timestamptz, timestamptz)")


def test_two_calls_in_one_transaction_each_reach_every_node_with_the_tenant(app_url):
    """set_tenant sends the tenant to the workers again (Citus): the driver's calls with conn= run in
    savepoints, and a SET LOCAL from a released savepoint did not reach a worker connection opened
    later, where store_message's read of the tenant's default model then found no tenant (AM001)."""
    from agentmem.client import Memory
    with Memory.connect(app_url, tenant="acme", max_size=1) as mem:
        with mem.pool.connection() as conn, conn.transaction():
            cid = mem.start_conversation("u1", None, conn=conn)
            stored = mem.store_message(cid, "user", "first", None, model=None, conn=conn)
            assert stored.message_index == 0
        assert [m.content for m in mem.recent_messages(cid, 5)] == ["first"]
