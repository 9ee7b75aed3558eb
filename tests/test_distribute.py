"""agentmem.distribute(): refused without Citus; on the three-node cluster the tables are
distributed by tenant and colocated, the catalogues are reference tables, the foreign keys are
back, a second call changes nothing, and a tenant's calls see only its own rows while another
tenant's identical rows sit on the other worker, however the application sets the tenant."""

from __future__ import annotations

import psycopg
import pytest

CATALOGUES = {"models", "cache_intents", "text_search_settings", "tenant_grants", "tenant_binding", "retention_cursors",
              "local_tenant_logins"}
VEC = "[" + ",".join(["0.1"] * 384) + "]"


@pytest.fixture
def citus(server):
    if server.name != "citus":
        pytest.skip("needs the Citus cluster (--server citus)")


def test_without_citus_distribute_is_refused_with_am040(server, admin):
    if server.name == "citus":
        pytest.skip("Citus is installed on this server")
    assert admin.execute("select agentmem.is_distributed()").fetchone()[0] is False
    with pytest.raises(psycopg.Error) as exc:
        admin.execute("select * from agentmem.distribute()")
    assert exc.value.sqlstate == "AM040"
    assert "citus" in exc.value.diag.message_hint.lower()


def test_the_application_role_may_not_distribute(app):
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        app.execute("select * from agentmem.distribute()")


def tenant_tables(admin) -> set[str]:
    return {t for t, in admin.execute(
        "select c.relname::text from pg_class as c join pg_attribute as a on a.attrelid = c.oid "
        "where c.relnamespace = 'agentmem'::regnamespace and c.relkind = 'r' "
        "and a.attname = 'tenant_id' and not a.attisdropped")}


def test_tables_are_distributed_by_tenant_and_colocated(citus, admin):
    rows = admin.execute(
        "select c.relname::text, p.partmethod::text, p.colocationid, "
        "column_to_column_name(p.logicalrelid, p.partkey) "
        "from pg_dist_partition as p join pg_class as c on c.oid = p.logicalrelid "
        "where c.relnamespace = 'agentmem'::regnamespace").fetchall()
    dist = {r[0]: r for r in rows if r[1] == "h"}
    assert set(dist) == tenant_tables(admin)
    assert {r[3] for r in dist.values()} == {"tenant_id"}
    assert len({r[2] for r in dist.values()}) == 1  # one colocation group: a tenant lives on one worker
    assert {r[0] for r in rows if r[1] == "n"} == CATALOGUES  # reference tables
    assert "schema_migrations" not in {r[0] for r in rows}  # the ledger stays on the coordinator
    assert admin.execute("select agentmem.is_distributed()").fetchone()[0] is True
    workers = admin.execute("select count(distinct p.groupid) from pg_dist_placement as p "
                            "join pg_dist_shard as s using (shardid) "
                            "where s.logicalrelid = 'agentmem.messages'::regclass").fetchone()[0]
    assert workers == 2


def test_foreign_keys_are_back_except_the_one_citus_refuses(citus, admin):
    fks = {n for n, in admin.execute("select conname::text from pg_constraint "
                                     "where contype = 'f' and connamespace = 'agentmem'::regnamespace")}
    assert "messages_conversation_fk" in fks and "message_embeddings_model_fk" in fks
    assert "cache_entries_intent_fkey" in fks and "fact_history_fact_fk" in fks
    assert "cache_hits_entry_fk" not in fks


def test_a_second_call_is_a_noop(citus, admin):
    assert admin.execute("select * from agentmem.distribute()").fetchall() == []
    assert admin.execute("select * from agentmem.distribute(shard_count => 8)").fetchall() == []


def placement_node(admin, tenant: str) -> int:
    return admin.execute(
        "select p.nodeport from pg_dist_shard_placement as p "
        "where p.shardid = get_shard_id_for_distribution_column('agentmem.messages', %s::text)", (tenant,)).fetchone()[0]


def two_tenants_on_two_workers(admin) -> tuple[str, str]:
    first = "tenant-a"
    node = placement_node(admin, first)
    for i in range(100):
        other = f"tenant-b{i}"
        if placement_node(admin, other) != node:
            return first, other
    raise AssertionError("no second tenant on another worker")


def store(conn, text: str) -> str:
    cid = conn.execute("select agentmem.start_conversation(user_id => 'alice')").fetchone()[0]
    conn.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => %s, "
                 "embedding => %s::vector, model => 'all-minilm')", (cid, text, VEC))
    return cid


def test_a_search_sees_only_its_tenant_while_the_other_sits_on_the_other_worker(citus, admin, app_url, connect):
    a, b = two_tenants_on_two_workers(admin)
    conn_a, conn_b = connect(app_url, tenant=a), connect(app_url, tenant=b)
    store(conn_a, "from a")
    store(conn_b, "from b")  # the same vector, on the other worker
    search = ("select content from agentmem.search_messages(user_id => 'alice', query_embedding => %s::vector, "
              "k => 10, model => 'all-minilm')")
    assert [r[0] for r in conn_a.execute(search, (VEC,))] == ["from a"]
    assert [r[0] for r in conn_b.execute(search, (VEC,))] == ["from b"]
    # both really are stored, on different workers
    assert admin.execute("select count(*) from agentmem.messages").fetchone()[0] == 2


@pytest.mark.parametrize("how", ["session, autocommit", "local, in a transaction",
                                 "session, in a transaction", "local, then another tenant"])
def test_every_way_of_setting_the_tenant_reaches_the_workers(citus, admin, app_url, connect, how):
    a, b = two_tenants_on_two_workers(admin)
    conn = connect(app_url)
    count = "select count(*) from agentmem.recent_messages(conversation_id => %s)"
    if how == "session, autocommit":  # psql without BEGIN: every statement its own transaction
        conn.execute("select agentmem.set_tenant(tenant_id => %s)", (a,))
        cid = store(conn, "x")
        assert conn.execute(count, (cid,)).fetchone()[0] == 1  # a read alone: no BEGIN sent to the worker
    else:
        with conn.transaction():
            conn.execute("select agentmem.set_tenant(tenant_id => %s, local => %s)", (a, how.startswith("local")))
            cid = store(conn, "x")
            assert conn.execute(count, (cid,)).fetchone()[0] == 1
            if how == "local, then another tenant":
                conn.execute("select agentmem.set_tenant(tenant_id => %s, local => true)", (b,))
                with pytest.raises(psycopg.Error) as exc, conn.transaction():
                    conn.execute(count, (cid,))
                assert exc.value.sqlstate == "AM030"  # tenant a's conversation is not found for b
                cid_b = store(conn, "y")
                assert conn.execute(count, (cid_b,)).fetchone()[0] == 1
    rows = admin.execute("select tenant_id, count(*) from agentmem.messages group by 1 order by 1").fetchall()
    assert rows == ([(a, 1), (b, 1)] if how == "local, then another tenant" else [(a, 1)])


def test_no_tenant_still_raises_am001_on_the_cluster(citus, app_url, connect):
    conn = connect(app_url)
    with pytest.raises(psycopg.Error) as exc:
        conn.execute("select agentmem.start_conversation(user_id => 'alice')")
    assert exc.value.sqlstate == "AM001"


def test_deleting_cache_entries_unlinks_their_hits(app, admin):
    """What cache_hits_entry_fk's ON DELETE SET NULL did (the key is gone, migration 0021), kept by the functions."""
    q = ("select * from agentmem.cache_store(question => 'How do I rotate an API key?', answer => 'Settings.', "
         "question_embedding => %s::vector, model => 'all-minilm', source_ids => array['doc-1'])")
    app.execute(q, (VEC,))
    app.execute("select * from agentmem.cache_lookup(question => 'How do I rotate an API key?', "
                "question_embedding => %s::vector, model => 'all-minilm')", (VEC,))
    assert admin.execute("select count(*) from agentmem.cache_hits where entry_id is not null").fetchone()[0] == 1
    assert app.execute("select agentmem.invalidate_source(doc_id => 'doc-1')").fetchone()[0] == 1
    assert admin.execute("select count(*), count(entry_id) from agentmem.cache_hits").fetchone() == (1, 0)


def test_hot_paths_run_on_the_one_worker_of_the_tenant(citus, admin, app_url, connect):
    """Router execution, seen in the commands Citus itself sends while the functions run."""
    import re

    from conftest import APP_ROLE
    conn = connect(app_url, tenant="acme")
    cid = store(conn, "hello")
    mid = conn.execute("select message_id from agentmem.recent_messages(conversation_id => %s)",
                       (cid,)).fetchone()[0]
    conn.execute("select * from agentmem.cache_store(question => 'How do I rotate an API key?', answer => 'Settings.', "
                 "question_embedding => %s::vector, model => 'all-minilm')", (VEC,))
    worker = placement_node(admin, "acme")
    admin.execute("set citus.log_remote_commands = on")
    admin.execute("set citus.log_local_commands = on")
    admin.execute("set client_min_messages = log")
    sent: list[tuple[str, str]] = []
    admin.add_notice_handler(lambda d: sent.append((d.message_primary or "", d.message_detail or "")))
    admin.execute(f"set role {APP_ROLE}")
    admin.execute("select agentmem.set_tenant(tenant_id => 'acme')")
    calls = {
        "store_message": ("select * from agentmem.store_message(conversation_id => %s, role => 'user', "
                          "content => 'again', embedding => %s::vector, model => 'all-minilm')", (cid, VEC)),
        "search_messages": ("select * from agentmem.search_messages(user_id => 'alice', query_embedding => %s::vector, "
                            "k => 5, model => 'all-minilm')", (VEC,)),
        "context_window": ("select * from agentmem.context_window(message_id => %s)", (mid,)),
        "cache_lookup": ("select * from agentmem.cache_lookup(question => 'How do I rotate an API key?', "
                         "question_embedding => %s::vector, model => 'all-minilm')", (VEC,)),
        "forget_user": ("select agentmem.forget_user(user_id => 'alice')", ()),
    }
    control = re.compile(r"^issuing (BEGIN|COMMIT|ROLLBACK|PREPARE|SELECT assign_distributed|set local)", re.I)
    # store_messages runs with client_min_messages = warning (no notice per long word), which hides
    # the commands Citus logs inside it: there the transaction's own COMMIT shows where it ran.
    hides_its_commands = {"store_message"}
    for name, (query, args) in calls.items():
        sent.clear()
        admin.execute(query, args).fetchall()
        ports, shards = set(), {}
        for message, detail in sent:
            port = re.search(r"127\.0\.0\.1:(\d+)", detail)
            if name in hides_its_commands and port is not None and re.match(r"issuing (COMMIT|PREPARE)", message):
                ports.add(int(port.group(1)))
            if control.search(message) or "agentmem." not in message:
                continue
            for table, shard in re.findall(r"agentmem\.(\w+?)_(\d{6})\b", message):
                shards.setdefault(table, set()).add(shard)
                if port is None:  # run locally on the coordinator: only the reference tables are there
                    assert table in CATALOGUES, (name, message)
            if port is not None:
                ports.add(int(port.group(1)))
        assert ports == {worker}, (name, ports, sent)
        assert all(len(s) == 1 for t, s in shards.items()), (name, shards)
        assert shards or name in hides_its_commands, name
    admin.execute("reset role")


def test_a_tenant_moved_to_the_other_worker_keeps_its_memory(citus, admin, app_url, connect):
    """Rebalancing is Citus' own shard move: the tenant's colocated shards go together, and its calls
    follow them with nothing changed for the application."""
    a, _ = two_tenants_on_two_workers(admin)
    conn = connect(app_url, tenant=a)
    cid = store(conn, "before the move")
    shard, host, port = admin.execute(
        "select p.shardid, p.nodename, p.nodeport from pg_dist_shard_placement as p "
        "where p.shardid = get_shard_id_for_distribution_column('agentmem.messages', %s::text)", (a,)).fetchone()
    target = admin.execute("select nodeport from pg_dist_node where groupid <> 0 and isactive and nodeport <> %s "
                           "order by nodeport limit 1", (port,)).fetchone()[0]
    admin.execute("select citus_move_shard_placement(%s, %s, %s, %s, %s, shard_transfer_mode => 'block_writes')",
                  (shard, host, port, host, target))
    assert placement_node(admin, a) == target
    moved = admin.execute(
        "select count(distinct p.nodeport) from pg_dist_shard_placement as p join pg_dist_shard as s using (shardid) "
        "join pg_class as c on c.oid = s.logicalrelid where c.relnamespace = 'agentmem'::regnamespace "
        "and s.shardid in (select get_shard_id_for_distribution_column(x.logicalrelid, %s::text) "
        "from pg_dist_partition as x where x.partmethod = 'h')", (a,)).fetchone()[0]
    assert moved == 1  # every table's shard of the tenant went, together
    search = ("select content from agentmem.search_messages(user_id => 'alice', query_embedding => %s::vector, "
              "k => 10, model => 'all-minilm')")
    assert [r[0] for r in conn.execute(search, (VEC,))] == ["before the move"]
    conn.execute("select * from agentmem.store_message(conversation_id => %s, role => 'user', content => 'after', "
                 "embedding => %s::vector, model => 'all-minilm')", (cid, VEC))
    assert conn.execute("select count(*) from agentmem.recent_messages(conversation_id => %s)", (cid,)).fetchone() == (2,)


def test_a_later_migration_applies_through_the_coordinator_and_its_table_is_distributed(
        citus, admin, admin_url, tmp_path, capsys):
    """A DBA upgrading a distributed installation runs `agentmem migrate` against the coordinator as on
    one server: the ledger records the migration, and a tenant table it adds is distributed by tenant and
    colocated with the others by the definitions' closing call to distribute()."""
    import shutil

    from agentmem.cli import main
    from conftest import ROOT
    for folder in ("migrations", "sql"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    version = len(list((ROOT / "migrations").glob("[0-9][0-9][0-9][0-9]_*.sql"))) + 1
    (tmp_path / "migrations" / f"{version:04d}_later_tenant_table.sql").write_text(
        "create table agentmem.later_notes (tenant_id text not null, note_id bigint not null, "
        "primary key (tenant_id, note_id));\n")
    try:
        assert main(["migrate", "--database-url", admin_url, "--source", str(tmp_path)]) == 0
        assert f"applied 1 migration(s): {version:04d}_later_tenant_table" in capsys.readouterr().out
        assert admin.execute("select name from agentmem.schema_migrations where version = %s",
                             (version,)).fetchone() == ("later_tenant_table",)
        colocated = admin.execute(
            "select p.partmethod::text, column_to_column_name(p.logicalrelid, p.partkey), p.colocationid = "
            "(select c.colocationid from pg_dist_partition as c where c.logicalrelid = 'agentmem.conversations'::regclass) "
            "from pg_dist_partition as p where p.logicalrelid = 'agentmem.later_notes'::regclass").fetchone()
        assert colocated == ("h", "tenant_id", True)
        assert main(["status", "--database-url", admin_url, "--source", str(tmp_path)]) == 0
        assert "distributed: yes (Citus, 2 workers)" in capsys.readouterr().out
    finally:
        admin.execute("drop table if exists agentmem.later_notes")
        admin.execute("delete from agentmem.schema_migrations where version = %s", (version,))
