"""sql/12_tenant_indexes.sql: a tenant's own indexes, managed by the DBA.

tenant_index_ddl, create_tenant_index, measure_tenant_index and drop_tenant_index on a tiny model; the
tenant_indexes view and tenants_needing_index; their errors and who may call them (not the application
role; a DBA under row security for one tenant); searches of messages, facts and the answer cache through
a tenant's own HNSW and exact indexes, and erasure and retention with them in place.
"""

from __future__ import annotations

import uuid

import numpy as np
import psycopg
import pytest

from helpers import bulk_load, explained, path_of, random_unit, sqlstate_of

TINY = "tiny-recall"


@pytest.fixture
def tiny(admin):
    admin.execute("select agentmem.register_model(model => %s, dimension => 8)", (TINY,))


def tiny_messages(admin, tenant: str, n: int, seed: int = 0, user: str = "alice"):
    return bulk_load(admin, [(tenant, user)] * n, random_unit(n, 8, seed), model=TINY, rebuild_index=False)


def index_names(admin) -> set[str]:
    return {r[0] for r in admin.execute(
        "select indexname from pg_indexes where schemaname = 'agentmem' "
        "and (indexname like '%\\_t%\\_hnsw' or indexname like '%\\_t%\\_exact')")}


def test_tenant_index_ddl_create_view_and_drop(admin, tiny):
    tiny_messages(admin, "acme", 30)
    tiny_messages(admin, "globex", 5, seed=1)
    ddl = admin.execute("select agentmem.tenant_index_ddl(tenant_id => 'acme', model => %s)", (TINY,)).fetchone()[0]
    name = admin.execute("select agentmem_private.tenant_index_name('message_embeddings', 'acme', %s)",
                         (TINY,)).fetchone()[0]
    assert ddl.startswith(f"create index concurrently if not exists {name} on agentmem.message_embeddings "
                          "using hnsw ((public.l2_normalize(embedding::public.vector(8))::public.vector(8)) public.vector_cosine_ops) "
                          "with (m = 32, ef_construction = 128)")
    assert ddl.endswith(f"where tenant_id = 'acme' and model = '{TINY}'")
    in_tx = admin.execute("select agentmem.tenant_index_ddl(tenant_id => 'o''brien', model => %s, "
                          "concurrently => false)", (TINY,)).fetchone()[0]
    assert "create index if not exists" in in_tx and "tenant_id = 'o''brien'" in in_tx

    exact_ddl = admin.execute("select agentmem.tenant_index_ddl(tenant_id => 'acme', model => %s, kind => 'exact')",
                              (TINY,)).fetchone()[0]
    exact_name = name.removesuffix("_hnsw") + "_exact"
    assert exact_ddl == (f"create index concurrently if not exists {exact_name} on agentmem.message_embeddings "
                         "using ivfflat ((public.l2_normalize(embedding::public.vector(8))::public.halfvec(8)) public.halfvec_cosine_ops) "
                         f"with (lists = 1) where tenant_id = 'acme' and model = '{TINY}'")

    admin.execute("set agentmem.tenant_index_min_rows = 10")
    needing = admin.execute("select table_name, tenant_id, model, row_count, create_statement, index_kind "
                            "from agentmem.tenants_needing_index").fetchall()
    assert needing == [("message_embeddings", "acme", TINY, 30, ddl, "hnsw"),  # globex is under the size
                       ("message_embeddings", "acme", TINY, 30, exact_ddl, "exact")]
    admin.execute("set agentmem.exact_index_max_rows = 29")  # too big for an exact index
    assert admin.execute("select index_kind from agentmem.tenants_needing_index").fetchall() == [("hnsw",)]
    admin.execute("reset agentmem.exact_index_max_rows")

    assert admin.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s)",
                         (TINY,)).fetchone() == (name,)
    assert admin.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s)",
                         (TINY,)).fetchone() == (name,)  # idempotent
    pred = admin.execute("select pg_get_expr(indpred, indrelid) from pg_index where indexrelid = %s::regclass",
                         (f"agentmem.{name}",)).fetchone()[0]
    assert "'acme'::text" in pred and f"'{TINY}'::text" in pred
    assert admin.execute("select count(*) from agentmem.tenants_needing_index").fetchone() == (0,)
    assert admin.execute("select agentmem_private.has_tenant_index('message_embeddings', 'acme', %s), "
                         "agentmem_private.has_exact_index('message_embeddings', 'acme', %s)",
                         (TINY, TINY)).fetchone() == (True, True)
    # a tenant past agentmem.exact_index_max_rows gets the HNSW index only
    tiny_messages(admin, "initech", 30, seed=5)
    admin.execute("set agentmem.exact_index_max_rows = 29")
    admin.execute("select agentmem.create_tenant_index(tenant_id => 'initech', model => %s)", (TINY,))
    admin.execute("reset agentmem.exact_index_max_rows")
    assert admin.execute("select agentmem_private.has_tenant_index('message_embeddings', 'initech', %s), "
                         "agentmem_private.has_exact_index('message_embeddings', 'initech', %s)",
                         (TINY, TINY)).fetchone() == (True, False)
    assert admin.execute("select index_kind from agentmem.tenants_needing_index").fetchall() == [("exact",)]
    assert admin.execute("select agentmem.drop_tenant_index(tenant_id => 'initech', model => %s)",
                         (TINY,)).fetchone() == (True,)

    # an index left invalid (as by a failed CREATE INDEX CONCURRENTLY) is not used, and is rebuilt
    admin.execute("update pg_index set indisvalid = false where indexrelid = %s::regclass", (f"agentmem.{name}",))
    assert admin.execute("select agentmem_private.has_tenant_index('message_embeddings', 'acme', %s)",
                         (TINY,)).fetchone() == (False,)
    admin.execute("update pg_index set indisvalid = false where indexrelid = %s::regclass", (f"agentmem.{exact_name}",))
    assert admin.execute("select agentmem_private.has_exact_index('message_embeddings', 'acme', %s)",
                         (TINY,)).fetchone() == (False,)
    admin.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s)", (TINY,))
    assert admin.execute("select agentmem_private.has_tenant_index('message_embeddings', 'acme', %s), "
                         "agentmem_private.has_exact_index('message_embeddings', 'acme', %s)",
                         (TINY, TINY)).fetchone() == (True, True)

    assert admin.execute("select agentmem.drop_tenant_index(tenant_id => 'acme', model => %s)",
                         (TINY,)).fetchone() == (True,)
    assert admin.execute("select agentmem.drop_tenant_index(tenant_id => 'acme', model => %s)",
                         (TINY,)).fetchone() == (False,)
    assert name not in index_names(admin)
    assert admin.execute("select count(*) from pg_indexes where indexname = %s", (exact_name,)).fetchone() == (0,)


def test_the_view_lists_a_tenant_built_by_hand_until_it_is_measured(admin, tiny):
    tiny_messages(admin, "acme", 30)
    admin.execute("set agentmem.tenant_index_min_rows = 10")
    for kind in ("hnsw", "exact"):  # the DBA's concurrent statements, here in a transaction
        admin.execute(admin.execute("select agentmem.tenant_index_ddl(tenant_id => 'acme', model => %s, "
                                    "concurrently => false, kind => %s)", (TINY, kind)).fetchone()[0])
    needing = admin.execute("select index_kind, create_statement from agentmem.tenants_needing_index").fetchall()
    assert needing == [("measure", f"select * from agentmem.measure_tenant_index(tenant_id => 'acme', model => '{TINY}')")]
    assert admin.execute(needing[0][1]).fetchone()[2] in ("hnsw", "exact")
    assert admin.execute("select count(*) from agentmem.tenants_needing_index").fetchone() == (0,)


def test_the_tenant_indexes_view_says_what_each_costs_and_which_to_drop(admin, app, tiny):
    tiny_messages(admin, "acme", 30)
    tiny_messages(admin, "o'brien", 30, seed=3)
    admin.execute("set agentmem.tenant_index_min_rows = 10")
    names = {}
    for tenant in ("acme", "o'brien"):
        hnsw = admin.execute("select agentmem.create_tenant_index(tenant_id => %s, model => %s)",
                             (tenant, TINY)).fetchone()[0]
        names[tenant] = (hnsw, hnsw.removesuffix("_hnsw") + "_exact")
    # a DBA's own partial index under a name of the same shape is not a tenant's index
    admin.execute("create index message_embeddings_t0123456789abcdef_hnsw on agentmem.message_embeddings "
                  "(tenant_id) where tenant_id = 'acme'")
    # size: the index's own, but on Citus, where the coordinator's index is empty (its shards hold the rows)
    listing = "select tenant_id, index_kind, index_name, is_valid, tenant_rows, needed, drop_statement, " \
              "first_pass, case when agentmem.is_distributed() then size_bytes is null else size_bytes > 0 end, " \
              "table_name, model from agentmem.tenant_indexes"
    rows = admin.execute(listing).fetchall()
    assert [r[:7] for r in rows] == [
        (t, kind, names[t][kind == "exact"], True, 30, True, None)
        for t in ("acme", "o'brien") for kind in ("exact", "hnsw")]
    assert [r[7] is None for r in rows] == [False, True, False, True]  # an exact index's first pass
    assert all(r[8] and r[9:] == ("message_embeddings", TINY) for r in rows)

    # o'brien's one user forgotten: its indexes are empty, no search uses them, and they come first
    app.execute("select agentmem.set_tenant(tenant_id => %s)", ("o'brien",))
    app.execute("select * from agentmem.forget_user(user_id => 'alice')")
    # acme's 30 rows are past exact_index_max_rows once it is lowered: searches ignore its exact index
    admin.execute("set agentmem.exact_index_max_rows = 29")
    rows = admin.execute(listing).fetchall()
    assert [r[:6] for r in rows] == [
        ("acme", "exact", names["acme"][1], True, 30, False),
        ("o'brien", "exact", names["o'brien"][1], True, 0, False),
        ("o'brien", "hnsw", names["o'brien"][0], True, 0, False),
        ("acme", "hnsw", names["acme"][0], True, 30, True)]
    # acme's HNSW index left invalid, as by a failed CREATE INDEX CONCURRENTLY
    admin.execute("update pg_index set indisvalid = false where indexrelid = %s::regclass",
                  (f"agentmem.{names['acme'][0]}",))
    assert admin.execute("select is_valid, needed from agentmem.tenant_indexes where tenant_id = 'acme' "
                         "and index_kind = 'hnsw'").fetchone() == (False, False)
    drops = [r[0] for r in admin.execute("select drop_statement from agentmem.tenant_indexes")]
    assert drops == [f"drop index concurrently if exists agentmem.{n}" for n in
                     (names["acme"][1], names["acme"][0], names["o'brien"][1], names["o'brien"][0])]
    for statement in drops:  # as the DBA runs them from psql: outside a transaction
        admin.execute(statement)
    assert admin.execute("select count(*) from agentmem.tenant_indexes").fetchone() == (0,)
    left = index_names(admin)
    assert not left & {n for pair in names.values() for n in pair}
    assert "message_embeddings_t0123456789abcdef_hnsw" in left  # the DBA's own index is not touched


@pytest.mark.parametrize("call, code", [
    ("create_tenant_index(tenant_id => 'acme', model => 'no-such-model')", "AM011"),
    ("create_tenant_index(tenant_id => '', model => 'tiny-recall')", "AM002"),
    ("create_tenant_index(tenant_id => null, model => 'tiny-recall')", "AM002"),
    ("create_tenant_index(tenant_id => 'acme', model => 'tiny-recall', table_name => 'messages')", "AM020"),
    ("create_tenant_index(tenant_id => 'acme', model => 'tiny-recall', table_name => 'x; drop table y')", "AM020"),
    ("drop_tenant_index(tenant_id => 'acme', model => 'tiny-recall', table_name => 'conversations')", "AM020"),
    ("tenant_index_ddl(tenant_id => 'acme', model => 'nope')", "AM011"),
    ("tenant_index_ddl(tenant_id => 'acme', model => 'tiny-recall', kind => 'flat')", "AM020"),
    ("tenant_index_ddl(tenant_id => 'acme', model => 'tiny-recall', kind => null)", "AM020"),
    ("tenant_index_ddl(tenant_id => 'acme', model => 'tiny-recall', table_name => 'facts', kind => 'exact')", "AM020"),
    ("measure_tenant_index(tenant_id => 'acme', model => 'nope')", "AM011"),
    ("measure_tenant_index(tenant_id => '', model => 'tiny-recall')", "AM002"),
    ("measure_tenant_index(tenant_id => 'acme', model => 'tiny-recall')", "AM030"),  # no indexes to measure
])
def test_tenant_index_functions_refuse_bad_arguments_and_build_nothing(admin, tiny, call, code):
    before = index_names(admin)
    assert sqlstate_of(admin, f"select agentmem.{call}") == code
    assert index_names(admin) == before


@pytest.mark.parametrize("statement", [
    "select agentmem.create_tenant_index(tenant_id => 'acme', model => 'tiny-recall')",
    "select agentmem.drop_tenant_index(tenant_id => 'acme', model => 'tiny-recall')",
    "select agentmem.tenant_index_ddl(tenant_id => 'acme', model => 'tiny-recall')",
    "select * from agentmem.measure_tenant_index(tenant_id => 'acme', model => 'tiny-recall')",
    "select * from agentmem.tenants_needing_index",
    "select * from agentmem.tenant_indexes",
])
def test_the_app_role_cannot_manage_tenant_indexes(app, admin, tiny, statement):
    before = index_names(admin)
    assert sqlstate_of(app, statement) == "42501"
    assert index_names(admin) == before


def test_a_dba_under_row_security_manages_one_tenant_and_is_told_the_view_needs_more(admin, server, dbname, tiny):
    """A DBA without BYPASSRLS (a managed service's admin who installed agentmem; here a member of the
    installing role, which brings its ownership but neither superuser nor BYPASSRLS, and of
    agentmem_owner): the functions for one tenant read the tenant they name, whatever tenant the
    session had set, and give that one back; the view of every tenant says plainly that it needs a role
    that sees them all (it used to raise AM001, 'set a tenant first', and with one set it would have
    counted that tenant alone)."""
    role = "agentmem_dba_" + uuid.uuid4().hex[:6]
    admin.execute(f"create role {role} login")
    admin.execute(f"grant {admin.info.user}, agentmem_owner to {role}")  # as a non-superuser installer is
    tiny_messages(admin, "acme", 30)
    tiny_messages(admin, "globex", 5, seed=1)
    try:
        with psycopg.connect(server.db_url(dbname, role), autocommit=True) as dba:
            assert dba.execute("select rolbypassrls or rolsuper from pg_roles where rolname = current_user"
                               ).fetchone() == (False,)
            with dba.transaction():
                dba.execute("select agentmem.set_tenant(tenant_id => 'globex', local => true)")
                name = dba.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s)",
                                   (TINY,)).fetchone()[0]
                assert dba.execute("select agentmem.current_tenant()").fetchone() == ("globex",)  # given back
                # acme's 30 rows, not globex's 5 nor none: its exact index was built and all 30 sampled
                assert dba.execute("select sampled from agentmem.measure_tenant_index(tenant_id => 'acme', "
                                   "model => %s)", (TINY,)).fetchone() == (30,)
                assert dba.execute("select agentmem.current_tenant(), current_setting('hnsw.ef_search')"
                                   ).fetchone() == ("globex", "40")
                # the view of the tenants' indexes counts acme's rows under acme, and gives globex back
                assert dba.execute("select tenant_id, index_kind, tenant_rows from agentmem.tenant_indexes "
                                   "where needed is not null").fetchall() == [("acme", "exact", 30),
                                                                              ("acme", "hnsw", 30)]
                assert dba.execute("select agentmem.current_tenant()").fetchone() == ("globex",)
            dba.execute("select agentmem.set_tenant(tenant_id => 'globex')")
            assert sqlstate_of(dba, "select * from agentmem.tenants_needing_index") == "AM041"
            dba.execute("reset agentmem.tenant_id")
            with pytest.raises(psycopg.Error) as info:
                dba.execute("select * from agentmem.tenants_needing_index")
            assert info.value.sqlstate == "AM041" and "BYPASSRLS" in info.value.diag.message_hint
            assert dba.execute("select agentmem.drop_tenant_index(tenant_id => 'acme', model => %s)",
                               (TINY,)).fetchone() == (True,)
        assert name not in index_names(admin)
    finally:
        admin.execute(f"drop role {role}")


def search_tiny(app, q, k=5, user="alice"):
    app.execute("set agentmem.exact_search_max_rows = 0")  # always an index
    return [r[0] for r in app.execute("select message_id from agentmem.search_messages(user_id => %s, "
                                      "query_embedding => %s, k => %s, model => %s)", (user, q, k, TINY))]


def test_erasure_and_retention_keep_working_with_a_tenant_index(admin, app, tiny):
    ids = tiny_messages(admin, "acme", 40)
    gone = tiny_messages(admin, "acme", 20, seed=2, user="bob")
    tiny_messages(admin, "globex", 40, seed=3)
    admin.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s)", (TINY,))
    q = random_unit(1, 8, seed=9)[0]
    mine = {m for _, _, m in ids}
    assert set(search_tiny(app, q)) <= mine and len(search_tiny(app, q)) == 5
    assert len(search_tiny(app, q, user="bob")) == 5
    # erasing a user: nothing of theirs is found any more, through the tenant's index
    app.execute("select * from agentmem.forget_user(user_id => 'bob')")
    assert search_tiny(app, q, user="bob") == []
    assert admin.execute("select count(*) from agentmem.message_embeddings where tenant_id = 'acme' "
                         "and message_id = any(%s)", ([m for _, _, m in gone],)).fetchone() == (0,)
    # retention: messages past their age are deleted, the index keeps serving the rest
    old = [m for _, _, m in ids[:30]]
    admin.execute("update agentmem.messages set created_at = now() - interval '40 days' "
                  "where tenant_id = 'acme' and message_id = any(%s)", (old,))
    admin.execute("select agentmem.set_default_retention_policy(kind => 'messages', max_age => '30 days')")
    admin.execute("select * from agentmem.apply_retention(batch_size => 1000)")
    left = search_tiny(app, q, k=20)
    assert set(left) == mine - set(old)
    # dropping the index: the same answers from the shared index
    admin.execute("select agentmem.drop_tenant_index(tenant_id => 'acme', model => %s)", (TINY,))
    assert set(search_tiny(app, q, k=20)) == set(left)


def two_users(admin) -> tuple[dict, dict]:
    """Tenant acme: alice (60 messages) and bob (30); globex beside them. Their vectors and ids by user."""
    alice = tiny_messages(admin, "acme", 60)
    bob = tiny_messages(admin, "acme", 30, seed=2, user="bob")
    tiny_messages(admin, "globex", 40, seed=3)
    vecs = {"alice": random_unit(60, 8, 0), "bob": random_unit(30, 8, 2)}
    return vecs, {"alice": [m for _, _, m in alice], "bob": [m for _, _, m in bob]}


def test_a_far_first_pass_reads_the_exact_index_and_finds_each_users_true_nearest(admin, app, tiny):
    vecs, ids = two_users(admin)
    admin.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s)", (TINY,))
    name = admin.execute("select agentmem_private.tenant_index_name('message_embeddings', 'acme', %s)",
                         (TINY,)).fetchone()[0]
    admin.execute("comment on index agentmem.%s is 'agentmem first pass: hnsw'" % name.replace("_hnsw", "_exact"))
    app.execute("set agentmem.ef_escalate_distance = -1")  # every first pass counts as far
    app.execute("select agentmem.set_tenant(tenant_id => 'acme')")
    for q in random_unit(5, 8, seed=11):
        for user in ("alice", "bob"):
            exact = [ids[user][i] for i in np.argsort(-(vecs[user] @ q))[:7]]
            assert search_tiny(app, q, k=7, user=user) == exact, user
    plans = explained(admin, "acme", "select * from agentmem.search_messages(user_id => 'bob', "
                      "query_embedding => %s, k => 7, model => %s)", (q, TINY), setting=0,
                      more={"agentmem.ef_escalate_distance": "-1"})
    assert path_of(plans, name) == "own index, then exact index"
    # the tenant's users, as the search sees them: bob is not alone, a tenant of one user is
    other = "select agentmem_private.has_other_users(%s, %s)"
    assert admin.execute(other, ("acme", "bob")).fetchone() == (True,)
    assert admin.execute(other, ("globex", "alice")).fetchone() == (False,)
    app.execute("select * from agentmem.forget_user(user_id => 'alice')")
    assert admin.execute(other, ("acme", "bob")).fetchone() == (False,)
    assert search_tiny(app, q, k=7, user="bob") == [ids["bob"][i] for i in np.argsort(-(vecs["bob"] @ q))[:7]]
    app.execute("reset agentmem.ef_escalate_distance")


def test_a_tenant_measured_far_reads_its_exact_index_first(admin, app, tiny):
    vecs, ids = two_users(admin)
    measure = "select * from agentmem.measure_tenant_index(tenant_id => 'acme', model => %s)"
    name = admin.execute("select agentmem_private.tenant_index_name('message_embeddings', 'acme', %s)",
                         (TINY,)).fetchone()[0]
    comment = f"select obj_description('agentmem.{name.removesuffix('_hnsw')}_exact'::regclass, 'pg_class')"
    # the HNSW index alone (the tenant too big for an exact index) is nothing to measure
    admin.execute("set agentmem.exact_index_max_rows = 10")
    admin.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s)", (TINY,))
    admin.execute("reset agentmem.exact_index_max_rows")
    assert sqlstate_of(admin, measure % f"'{TINY}'") == "AM030"
    admin.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s)", (TINY,))

    admin.execute("set agentmem.ef_escalate_distance = -1")  # every sampled pass counts as far
    assert admin.execute(measure, (TINY,)).fetchone() == (32, 32, "exact")
    admin.execute("reset agentmem.ef_escalate_distance")
    assert admin.execute(comment).fetchone()[0].startswith("agentmem first pass: exact (measured ")
    assert "for 32 of 32 sampled messages" in admin.execute(comment).fetchone()[0]
    app.execute("select agentmem.set_tenant(tenant_id => 'acme')")
    for q in random_unit(5, 8, seed=11):
        for user in ("alice", "bob"):  # the exact index holds the whole tenant; each user gets their own
            assert search_tiny(app, q, k=7, user=user) == [ids[user][i] for i in np.argsort(-(vecs[user] @ q))[:7]]
    plans = explained(admin, "acme", "select * from agentmem.search_messages(user_id => 'bob', "
                      "query_embedding => %s, k => 7, model => %s)", (q, TINY), setting=0)
    assert path_of(plans, name) == "exact index"

    admin.execute("set agentmem.ef_escalate_distance = 2")  # no sampled pass counts as far
    assert admin.execute(measure, (TINY,)).fetchone() == (32, 0, "hnsw")
    admin.execute("reset agentmem.ef_escalate_distance")
    assert admin.execute(comment).fetchone()[0].startswith("agentmem first pass: hnsw (measured ")
    plans = explained(admin, "acme", "select * from agentmem.search_messages(user_id => 'bob', "
                      "query_embedding => %s, k => 7, model => %s)", (q, TINY), setting=0,
                      more={"agentmem.ef_escalate_distance": "2"})
    assert path_of(plans, name) == "own index"
    # a DBA's own comment decides as well
    admin.execute(f"comment on index agentmem.{name.removesuffix('_hnsw')}_exact is 'agentmem first pass: exact'")
    assert path_of(explained(admin, "acme", "select * from agentmem.search_messages(user_id => 'bob', "
                             "query_embedding => %s, k => 7, model => %s)", (q, TINY), setting=0,
                             more={"agentmem.ef_escalate_distance": "2"}), name) == "exact index"
    # dropped with the indexes; rebuilt and measured again by create_tenant_index
    admin.execute("select agentmem.drop_tenant_index(tenant_id => 'acme', model => %s)", (TINY,))
    assert sqlstate_of(admin, measure % f"'{TINY}'") == "AM030"
    admin.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s)", (TINY,))
    assert admin.execute(comment).fetchone()[0].startswith("agentmem first pass: ")


def test_facts_and_answer_cache_use_the_tenant_index_and_exact_scans(admin, app, tiny):
    tiny_messages(admin, "other", 50)  # something in the shared indexes
    vecs = random_unit(30, 8, seed=4)
    for i, v in enumerate(vecs):
        app.execute("select * from agentmem.upsert_fact(user_id => 'alice', subject => %s, fact => %s, "
                    "embedding => %s, model => %s)", (f"s{i}", f"fact {i}", v, TINY))
        app.execute("select * from agentmem.cache_store(question => %s, question_embedding => %s, "
                    "answer => %s, model => %s)", (f"what about thing {i}", v, f"answer {i}", TINY))
    admin.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s, table_name => 'facts')",
                  (TINY,))
    admin.execute("select agentmem.create_tenant_index(tenant_id => 'acme', model => %s, "
                  "table_name => 'cache_entries')", (TINY,))
    q = vecs[7]
    exact = [f"fact {i}" for i in np.argsort(-(vecs @ q))[:5]]
    for setting in ("0", "100000"):  # the tenant's index, then an exact scan
        app.execute(f"set agentmem.exact_search_max_rows = {setting}")
        got = [r[0] for r in app.execute("select fact from agentmem.recall_facts(user_id => 'alice', "
                                         "query_embedding => %s, k => 5, model => %s)", (q, TINY))]
        assert got == exact, setting
        hit = app.execute("select hit, kind, answer from agentmem.cache_lookup(question => 'what about thing 7 now', "
                          "question_embedding => %s, model => %s)", (q, TINY)).fetchone()
        assert hit == (True, "semantic", "answer 7"), setting
    plans = explained(admin, "acme", "select * from agentmem.recall_facts(user_id => 'alice', "
                     "query_embedding => %s, k => 5, model => %s)", (q, TINY), setting=0)
    name = admin.execute("select agentmem_private.tenant_index_name('facts', 'acme', %s)", (TINY,)).fetchone()[0]
    assert f"Index Scan using {name}" in "\n".join(plans)
    plans = explained(admin, "acme", "select * from agentmem.cache_lookup(question => 'what about thing 7 now', "
                     "question_embedding => %s, model => %s)", (q, TINY), setting=0)
    name = admin.execute("select agentmem_private.tenant_index_name('cache_entries', 'acme', %s)",
                         (TINY,)).fetchone()[0]
    assert f"Index Scan using {name}" in "\n".join(plans)
    plans = explained(admin, "acme", "select * from agentmem.cache_lookup(question => 'what about thing 7 now', "
                     "question_embedding => %s, model => %s)", (q, TINY))
    text = "\n".join(plans)
    assert "Index Scan using" not in text or "_hnsw" not in text, text
    assert "Sort Key: ((e.embedding OPERATOR(public.<=>) " in text, text
