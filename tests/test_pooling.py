"""agentmem behind a transaction pooler (docs/pooling.md): PgBouncer in pool_mode = transaction in front of
the test server (scripts/pgbouncer.sh, make test-pooler, which sets AGENTMEM_TEST_POOLER_URL; these tests
skip without it). Clients of several tenants on fewer server connections, through the driver and through
the SQL pattern of the docs, see no row of another tenant; the driver's statements are not prepared on a
server connection the next transaction may not get; a login required to set a local tenant is refused a
session one; the worker works through it. Direct-connection checks of the same driver options are in
tests/test_driver.py."""

from __future__ import annotations

import psycopg
import pytest

from helpers import run_threads, worker_login_url

TENANTS = ["pool-a", "pool-b", "pool-c", "pool-d"]
CLIENTS = 8      # on default_pool_size = 3 server connections (scripts/pgbouncer.sh)
ROUNDS = 15      # more than psycopg's prepare threshold (5) per statement and connection


def server_connections(admin, user: str) -> int:
    return admin.execute("select count(*) from pg_stat_activity where datname = current_database() "
                         "and usename = %s", (user,)).fetchone()[0]


def test_driver_clients_of_several_tenants_on_fewer_server_connections_see_only_their_own(
        pooled_url, admin):
    from agentmem.client import Memory
    errors: list[BaseException] = []
    seen: dict[int, set[str]] = {}

    def client(i: int) -> None:
        tenant = TENANTS[i % len(TENANTS)]
        try:
            with Memory.connect(pooled_url(), tenant=tenant, max_size=1) as mem:
                cid = mem.start_conversation("u1")
                found: set[str] = set()
                for n in range(ROUNDS):
                    mem.store_message(cid, "user", f"note {n} of {tenant}", None)
                    assert mem.current_tenant() == tenant
                    for hit in mem.search_messages("u1", query_text="note", k=50):
                        found.add(hit.content.rsplit(" of ", 1)[1])
                    for conv in mem.list_conversations("u1"):
                        for m in mem.recent_messages(conv.conversation_id, 50):
                            found.add(m.content.rsplit(" of ", 1)[1])
                seen[i] = found
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    run_threads(client, ((i,) for i in range(CLIENTS)))
    assert not errors, errors[:3]
    assert {i: sorted(s) for i, s in seen.items()} == {i: [TENANTS[i % len(TENANTS)]] for i in range(CLIENTS)}
    assert server_connections(admin, "agentmem_test_app") <= 3


def test_the_documented_sql_pattern_and_a_client_that_sets_no_tenant(pooled_url, admin):
    """BEGIN, set_tenant(local => true), calls, COMMIT from several clients; a client that sets no tenant
    on the same server connections gets AM001, never the tenant of the one before."""
    errors: list[BaseException] = []

    def client(i: int) -> None:
        tenant = TENANTS[i % len(TENANTS)]
        try:
            with psycopg.connect(pooled_url(), autocommit=True, prepare_threshold=None) as conn:
                for _ in range(ROUNDS):
                    with conn.transaction():
                        conn.execute("select agentmem.set_tenant(tenant_id => %s, local => true)", (tenant,))
                        conn.execute("select agentmem.start_conversation(user_id => 'u1')")
                        owners = conn.execute("select agentmem.current_tenant()").fetchall()
                        assert owners == [(tenant,)]
                    with pytest.raises(psycopg.Error) as info:
                        conn.execute("select agentmem.current_tenant()")
                    assert info.value.sqlstate == "AM001"
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    run_threads(client, ((i,) for i in range(CLIENTS)))
    assert not errors, errors[:3]
    rows = dict(admin.execute("select tenant_id, count(*) from agentmem.conversations group by 1").fetchall())
    assert rows == {t: ROUNDS * CLIENTS // len(TENANTS) for t in TENANTS}


def test_a_session_tenant_is_refused_for_a_login_required_to_set_a_local_one(pooled_url, admin, server):
    """Without the requirement, a session-level set_tenant through the pooler serves whichever client next
    gets that server connection; with it, set_tenant(local => false) is refused (AM042)."""
    login = "agentmem_test_pooled"
    if not admin.execute("select 1 from pg_roles where rolname = %s", (login,)).fetchone():
        admin.execute(f"create role {login} login")
    try:
        admin.execute("select agentmem.grant_app_role(role_name => %s)", (login,))
        admin.execute("select agentmem.grant_tenant(role_name => %s, all_tenants => true)", (login,))
        # the defect the requirement prevents: a tenant set for the session, inherited by the next client
        with psycopg.connect(pooled_url(login), autocommit=True) as first:
            first.execute("select agentmem.set_tenant(tenant_id => 'pool-a')")
        with psycopg.connect(pooled_url(login), autocommit=True) as second:
            assert second.execute("select agentmem.current_tenant()").fetchone() == ("pool-a",)
            second.execute("reset agentmem.tenant_id")
        admin.execute("select agentmem.require_local_tenant(role_name => %s)", (login,))
        with psycopg.connect(pooled_url(login), autocommit=True) as conn:
            with pytest.raises(psycopg.Error) as info:
                conn.execute("select agentmem.set_tenant(tenant_id => 'pool-a')")
            assert info.value.sqlstate == "AM042" and "local => true" in info.value.diag.message_hint
            with conn.transaction():
                conn.execute("select agentmem.set_tenant(tenant_id => 'pool-a', local => true)")
        with psycopg.connect(pooled_url(login), autocommit=True) as conn:
            with pytest.raises(psycopg.Error) as info:
                conn.execute("select agentmem.current_tenant()")
            assert info.value.sqlstate == "AM001"
    finally:
        admin.execute("select agentmem.require_local_tenant(role_name => %s, required => false)", (login,))
        admin.execute("select agentmem.revoke_tenant(role_name => %s, all_tenants => true)", (login,))


def test_the_worker_through_the_pooler(pooled_url, admin, server, dbname, stub):
    """Batches of the worker through the pooler, more than five of each statement: nothing prepared."""
    from agentmem.worker import Worker
    admin.execute("select agentmem.set_tenant(tenant_id => 'pool-a')")
    cid = admin.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    for n in range(12):
        admin.execute("select agentmem.store_message(conversation_id => %s, role => 'user', content => %s, "
                      "embedding => null)", (cid, f"text {n}"))
    admin.execute("reset agentmem.tenant_id")
    login = worker_login_url(server, dbname, admin).rsplit("@", 1)[0].rsplit("/", 1)[-1]
    worker = Worker(pooled_url(login), batch_size=1, host=stub.host)
    try:
        stats = worker.run(once=True)
    finally:
        worker.close()
    assert stats.completed == 12 and stats.batches == 12
    assert admin.execute("select count(*) from agentmem.embedding_jobs").fetchone() == (0,)
