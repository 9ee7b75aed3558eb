"""The Python driver, every test run on the sync and the async client (the ``driver`` fixture).

What the driver is (literal calls for every function the app may call, the
calls that embed text first, the DBA's Admin, the sync twins generated from the asyncio code), then each feature through it: the tenant per
transaction, SQLSTATEs as exceptions, conversations, the answer cache, facts,
forgetting and retention.
"""

from __future__ import annotations

import datetime as dt
import inspect
import uuid

import numpy as np
import psycopg
import pytest

import agentmem
from agentmem._extraction import FactExtractionError
from agentmem.admin import Admin
from agentmem.calls_async import AsyncCalls
from agentmem.calls_sync import Calls
from agentmem.client import AsyncMemory, Memory
from agentmem.statement import Sql
from agentmem.embed import OllamaEmbedder
from agentmem.lexical import LexicalEmbedder
from helpers import StubEmbedder, add_facts, audiences, count, vec

EMBEDS_FIRST = {"embed_documents", "embed_queries", "remember", "recall", "recall_facts_about", "cached_answer", "store_answer", "extract_facts"}


def drift(want: set[str], have: set[str], where: str, fix: str) -> str:
    """The failure message of a drift check: what is missing from or extra in `where`, and how to mend it."""
    return (f"{where} is out of step with the catalogue: missing {sorted(want - have)}, "
            f"extra {sorted(have - want)}. To mend it: {fix}.")


def literals(cls) -> set[str]:
    """The call methods a class defines: its public functions but the runner and the connection's own."""
    return {n for n, v in vars(cls).items() if inspect.isfunction(v) and not n.startswith("_")} - {
        "run", "connect", "close"}


def test_one_literal_method_per_function_the_app_role_may_call_and_the_dba_ones_on_admin(admin):
    callable_by = dict(admin.execute(
        "select distinct p.proname, has_function_privilege('agentmem_app', p.oid, 'execute') "
        "from pg_proc as p where p.pronamespace = 'agentmem'::regnamespace").fetchall())
    app = {n for n, ok in callable_by.items() if ok}
    # Who calls what, as each function's comment declares it: the DBA's functions and views are
    # Admin's; the embedding queue's calls are the worker's (agentmem.worker), granted to it only.
    declared = audiences(admin)
    dba, views, worker = declared["dba"] | declared["views"], declared["views"], declared["worker"]
    assert app == declared["application"], drift(
        declared["application"], app, "the grants",
        "the function's \"Called by\" line in sql/ decides its grant: reinstall (agentmem migrate) after editing it")
    # set_tenant has no method: every call runs set_tenant(tenant_id => ..., local => true) first
    assert literals(AsyncCalls) == app - {"set_tenant"}, drift(
        app - {"set_tenant"}, literals(AsyncCalls), "python/agentmem/calls_async.py",
        "add or remove the method there (sql/README.md's checklist), then run python scripts/async_to_sync.py")
    assert literals(Calls) == literals(AsyncCalls), drift(
        literals(AsyncCalls), literals(Calls), "python/agentmem/calls_sync.py",
        "a generated twin: run python scripts/async_to_sync.py, never edit it by hand")
    assert literals(Admin) == dba, drift(
        dba, literals(Admin), "python/agentmem/admin.py", "add or remove the DBA's method or view there")
    assert {n for n, ok in callable_by.items() if not ok} == (dba - views) | worker
    for name in dba:
        assert not hasattr(Memory, name) and not hasattr(AsyncMemory, name), name


def test_each_literal_method_is_one_select_from_its_own_function():
    import ast
    for cls in (AsyncCalls, Calls, Admin):
        for name in literals(cls):
            body = ast.parse(inspect.getsource(getattr(cls, name)).lstrip().replace("\n    ", "\n")).body[0]
            ret = body.body[-1].value  # return [await] self.run(one|rows|value|nothing(..., "select ..."), conn)
            run = ret.value if isinstance(ret, ast.Await) else ret
            assert ast.unparse(run.func) == "self.run", name
            call = run.args[0]
            while isinstance(call.func, ast.Attribute):  # .then(post)
                call = call.func.value
            assert ast.unparse(call.func) in ("one", "rows", "value", "nothing"), name
            text = "".join(a.value for a in ast.walk(call) if isinstance(a, ast.Constant) and isinstance(a.value, str))
            assert text.startswith("select ") and f"agentmem.{name}" in text, (name, text)
            assert len(body.body) <= 2, name  # the docstring, then the call


def test_the_sync_twins_are_generated_from_the_asyncio_code():
    """calls_sync.py, client_sync.py and turn_sync.py are what scripts/async_to_sync.py writes from
    their *_async.py originals; a twin edited by hand, or stale, fails here."""
    import importlib.util
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("async_to_sync", root / "scripts" / "async_to_sync.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert set(script.TWINS) == {p.name for p in (root / "python" / "agentmem").glob("*_async.py")}
    for name, (twin, _) in script.TWINS.items():
        source = (root / "python" / "agentmem" / name).read_text()
        assert (root / "python" / "agentmem" / twin).read_text() == script.twin_of(source, name), (
            f"python/agentmem/{twin} is stale or was edited by hand: edit python/agentmem/{name} and run "
            "python scripts/async_to_sync.py")
    assert script.main(["--check"]) == 0


def test_sync_methods_return_values_and_async_methods_return_awaitables(app_url):
    import asyncio
    mem = Memory(pool=None, tenant="acme")
    amem = AsyncMemory(pool=None, tenant="acme")
    for name in literals(Calls) | EMBEDS_FIRST:
        assert not inspect.iscoroutinefunction(getattr(mem, name)), name
        assert inspect.iscoroutinefunction(getattr(amem, name)), name
        assert inspect.signature(getattr(mem, name)) == inspect.signature(getattr(amem, name)), name
    for name in EMBEDS_FIRST:
        assert name in vars(Memory) and name in vars(AsyncMemory), name
    assert "conn" in inspect.signature(mem.cache_lookup).parameters
    assert "self" not in inspect.signature(mem.cache_lookup).parameters

    async def go():
        async with await AsyncMemory.connect(app_url, tenant="acme", max_size=1) as a:
            return await a.question_guard_agrees("Can I get a refund?", "Can I get a refund after 30 days?")
    assert asyncio.run(go()) is False
    with Memory.connect(app_url, tenant="acme", max_size=1) as m:
        assert m.question_guard_agrees("How do I reset my password?", "how do i reset my password") is True


# -- the tenant, per transaction ---------------------------------------------------------------

def pooled_tenant_sqlstate(call) -> str:
    """The SQLSTATE of current_tenant() on a connection taken bare from the client's pool: AM001 when
    no call left a tenant on it."""
    if call.kind == "sync":
        with call.mem.pool.connection() as conn:
            with pytest.raises(psycopg.Error) as info:
                conn.execute("select agentmem.current_tenant()")
            return info.value.sqlstate

    async def bare():
        async with call.mem.pool.connection() as conn:
            with pytest.raises(psycopg.Error) as info:
                await conn.execute("select agentmem.current_tenant()")
            return info.value.sqlstate
    return call.resolve(bare())


def test_driver_sets_the_tenant_per_transaction_never_leaking_it(driver):
    call = driver(max_size=1)
    assert call("current_tenant") == "acme"
    other = call.for_tenant("globex")
    assert other("current_tenant") == "globex"
    # the single pooled connection carries no tenant between calls
    assert pooled_tenant_sqlstate(call) == "AM001"
    with pytest.raises(agentmem.InvalidTenant):
        call.mem.for_tenant("")


@pytest.mark.direct
@pytest.mark.parametrize("prepare", [False, True])
def test_driver_prepares_no_statement_on_the_server_unless_asked(driver, prepare):
    """By default nothing is prepared on the server (psycopg's prepare_threshold=None), so that a transaction
    pooler may give the next call another server connection; prepare=True keeps psycopg's default
    (prepared at a statement's fifth run on a connection)."""
    call = driver(max_size=1, prepare=prepare)
    for _ in range(8):
        call("search_messages", "alice", query_text="invoice", k=1)
    prepared = call.resolve(call.mem.run(Sql("select count(*)::int from pg_prepared_statements", fetch="scalar")))
    assert (prepared > 0) is prepare


@pytest.mark.direct
def test_driver_sends_set_tenant_and_the_call_as_one_transaction(driver, admin):
    call = driver(max_size=1)
    pid = call.resolve(call.mem.run(Sql("select pg_backend_pid()", fetch="scalar")))
    # set_tenant's own error comes back (AM002, not the call's AM001 or an aborted pipeline), and the
    # call queued behind it never ran
    with pytest.raises(agentmem.InvalidTenant) as info:
        call.for_tenant("acme ")("start_conversation", "alice")
    assert info.value.sqlstate == "AM002"
    assert count(admin, "conversations") == 0
    # the next call, on the same connection, runs with the tenant and leaves no transaction open
    cid = call("start_conversation", "alice")
    assert admin.execute("select tenant_id from agentmem.conversations where conversation_id = %s",
                         (cid,)).fetchone()[0] == "acme"
    assert admin.execute("select state from pg_stat_activity where pid = %s", (pid,)).fetchone()[0] == "idle"


@pytest.mark.direct
def test_driver_without_pipeline_mode_runs_each_call_in_a_transaction_of_its_own(driver, admin, monkeypatch):
    """A libpq older than 14 has no pipeline mode: each call then runs in BEGIN ... COMMIT on the pool's
    autocommit connection, with the same guarantees."""
    from agentmem import connections
    monkeypatch.setattr(connections, "PIPELINE", False)
    call = driver(max_size=1)
    cid = call("start_conversation", "alice")
    assert admin.execute("select tenant_id from agentmem.conversations where conversation_id = %s",
                         (cid,)).fetchone()[0] == "acme"
    with pytest.raises(agentmem.InvalidTenant):
        call.for_tenant("acme ")("start_conversation", "bob")
    assert count(admin, "conversations") == 1
    # the one pooled connection carries no tenant out of the call, and no open transaction
    pid = call.resolve(call.mem.run(Sql("select pg_backend_pid()", fetch="scalar")))
    assert admin.execute("select state from pg_stat_activity where pid = %s", (pid,)).fetchone()[0] == "idle"
    assert pooled_tenant_sqlstate(call) == "AM001"


@pytest.mark.direct
def test_driver_checks_out_a_quiet_connection_without_a_round_trip_and_replaces_an_ended_one(driver, admin):
    call = driver(max_size=1)
    pid = call.resolve(call.mem.run(Sql("select pg_backend_pid() as marker_of_the_last_call", fetch="scalar")))

    def last_query() -> str:
        return admin.execute("select query from pg_stat_activity where pid = %s", (pid,)).fetchone()[0]

    # taken from the pool and given back: the server saw nothing (psycopg_pool's own check sends
    # an empty query, which would replace the last query shown)
    if call.kind == "sync":
        with call.mem.pool.connection():
            pass
    else:
        async def take():
            async with call.mem.pool.connection():
                pass
        call.resolve(take())
    assert "marker_of_the_last_call" in last_query()
    # the server ends that session: the next call is served by a new connection, without an error
    # (typed: Citus adds a pg_terminate_backend of its own, for global pids)
    assert admin.execute("select pg_catalog.pg_terminate_backend(%s::int, 5000::bigint)",
                         (pid,)).fetchone()[0] is True
    assert call("current_tenant") == "acme"
    assert call.resolve(call.mem.run(Sql("select pg_backend_pid()", fetch="scalar"))) != pid


def test_driver_translates_sqlstates_to_exception_classes(driver):
    call = driver(max_size=1)
    with pytest.raises(agentmem.InvalidTenant) as info:
        call.resolve(call.mem.run(Sql("select agentmem.set_tenant(tenant_id => '')")))
    assert info.value.sqlstate == "AM002"


# -- conversations --------------------------------------------------------------------------

def test_remember_and_recall_through_the_driver(driver, stub, admin):
    emb = OllamaEmbedder("all-minilm", host=stub.host)
    call = driver(embedder=emb)
    cid = call("start_conversation", "alice", title="pets", metadata={"channel": "web"})
    stored = call("remember", cid, "user", "my dog is called Rex", metadata={"turn": 1})
    assert stored.message_index == 0
    call("remember", cid, "assistant", "Rex is a nice name for a dog")
    call("remember", cid, "user", "I also like chess")
    hits = call("recall", "alice", "what is my dog called", k=2)
    assert [h.content for h in hits][0] == "my dog is called Rex" and hits[0].similarity > 0
    assert hits[0].metadata == {"turn": 1}
    calls = len(stub.embed_calls)
    call("recall", "alice", "what is my dog called", k=2)  # the query's embedding is cached
    assert len(stub.embed_calls) == calls
    assert [m.message_index for m in call("recent_messages", cid, n=2)] == [1, 2]
    assert [m.message_index for m in call("context_window", stored.message_id, before=0, after=1)] == [0, 1]
    rows = call("store_messages", cid, ["user", "assistant"], ["a", "b"], call("embed_documents", ["a", "b"]),
                model="all-minilm", metadata=[{"i": 1}, {"i": 2}])
    assert [r.message_index for r in rows] == [3, 4]
    call("set_summary", cid, "alice has a dog, Rex", 2)
    ctx = call("short_term_context", cid, keep_last=2)
    assert [(c.kind, c.message_index) for c in ctx] == [("summary", 2), ("message", 3), ("message", 4)]
    windows = call("search_with_context", "alice", call("embed_queries", ["dog Rex"])[0], k=1, radius=1,
                   model="all-minilm")
    assert {w.message_index for w in windows} == {0, 1} or {w.message_index for w in windows} == {0, 1, 2}
    with pytest.raises(agentmem.NotFound):
        call.for_tenant("globex")("recent_messages", cid)
    with pytest.raises(agentmem.InvalidArgument):
        call("recent_messages", cid, n=0)
    with pytest.raises(agentmem.InvalidArgument):
        call("remember", cid, "robot", "hi")
    with pytest.raises(agentmem.ContentTooLarge):
        call("remember", cid, "user", "x " * 60_000)
    assert admin.execute("select count(*) from agentmem.messages").fetchone() == (5,)


def test_remember_without_an_embedder_says_so(driver):
    call = driver()
    with pytest.raises(agentmem.EmbedderError):
        call("recall", "alice", "anything")


# -- the answer cache -----------------------------------------------------------------------

def lexical():
    return LexicalEmbedder(model="all-minilm", dim=384)


def test_store_and_cached_answer_through_the_driver(driver):
    call = driver(embedder=lexical())
    stored = call("store_answer", "How do I reset my password?", "Use the reset link.", source_ids=["kb-1"],
                  user_id="u1", ttl=dt.timedelta(hours=2))
    assert stored.stored and stored.entry_id and stored.reason is None
    hit = call("cached_answer", "how do I reset my password")
    assert hit.hit and hit.kind == "exact" and hit.answer == "Use the reset link."
    assert hit.source_ids == ["kb-1"]
    miss = call("cached_answer", "How do I reset my password after 30 days?")
    assert not miss.hit and miss.reason
    refused = call("store_answer", "When is my renewal?", "Dear Maria, on 2024-05-01.")
    assert not refused.stored and "personalised" in refused.reason
    assert call("normalize_question", "What's UP?") == "whats up"
    assert call("question_guard_features", "two dollars") == ["cur:usd", "num:2"]
    assert call("question_guard_agrees", "Can I get a refund?", "Can I get a refund after 30 days?") is False
    assert call("question_guard_agrees", "How do I reset my password?", "how do i reset my password") is True
    call("review_hit", hit.hit_id, True)
    assert [s.hit_id for s in call("sample_hits", 10)] == []  # the only served hit is reviewed
    report = call("cache_report", 0.02, 5, thresholds=[0.9, 0.95])
    assert [round(r.threshold, 2) for r in report] == [0.9, 0.95]
    assert report[0].queries == 2 and report[0].hits == 1 and report[0].reviewed == 1
    assert call("bump_corpus_version") == 1 and call("corpus_version") == 1
    assert not call("cached_answer", "How do I reset my password?").hit
    assert call("sweep_cache") == 1
    assert call("invalidate_source", "kb-1") == 0
    with pytest.raises(agentmem.InvalidArgument):
        call("store_answer", "Question?", "Answer.", intent="no-such-intent")
    with pytest.raises(agentmem.NotFound):
        call("review_hit", "00000000-0000-0000-0000-000000000000", False)


def test_cache_lookup_with_a_given_embedding_and_errors_mapped(driver):
    call = driver(max_size=1)
    with pytest.raises(agentmem.EmbedderError, match="no embedder"):
        call("cached_answer", "no embedder here")
    with pytest.raises(agentmem.InvalidEmbedding):
        call("cache_lookup", "Question?", [0.1, 0.2], model="all-minilm")
    with pytest.raises(agentmem.InvalidEmbedding):
        call("cache_store", "Question?", [float("nan")] * 384, "Answer.", model="all-minilm")
    r = call("cache_lookup", "Question?", [0.1] * 768)  # default model, 768 dimensions
    assert not r.hit and r.hit_id


def test_cached_answer_embeds_once_through_the_embedding_cache(driver, stub):
    call = driver(embedder=OllamaEmbedder(model="nomic-embed-text", host=stub.host))
    stored = call("store_answer", "How do I export my data?", "Use the export button.", safe_to_share=True)
    found = call("cached_answer", "How do I export my data?")
    assert stored.stored and found.hit and found.kind == "exact"
    # one Ollama call: the lookup's embedding came from the embedding cache, same query prefix
    assert stub.embedded_texts == ["search_query: How do I export my data?"]


def test_cli_cache_report_prints_a_table_and_plots(app_url, tmp_path, capsys):
    from agentmem.cli import main
    with Memory.connect(app_url, tenant="acme", embedder=lexical(), max_size=1) as mem:
        mem.store_answer("How do I reset my password?", "Use the reset link.")
        hit = mem.cached_answer("How do I reset my password?")
        mem.review_hit(hit.hit_id, True)
    assert main(["cache-report", "--database-url", app_url, "--tenant", "acme",
                 "--cost-uncached", "0.02", "--cost-wrong", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["threshold", "queries", "hits", "reviewed", "wrong", "hits/1000", "wrong/1000",
                              "net/1000"]
    assert out[11].split()[:3] == ["0.95", "1", "1"] and out[11].split()[-1] == "20.00"
    png = tmp_path / "report.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert main(["cache-report", "--database-url", app_url, "--tenant", "acme", "--cost-uncached", "0.02",
                     "--cost-wrong", "5", "--png", str(png)]) == 2
        assert "matplotlib" in capsys.readouterr().err
    else:
        assert main(["cache-report", "--database-url", app_url, "--tenant", "acme", "--cost-uncached", "0.02",
                     "--cost-wrong", "5", "--png", str(png)]) == 0
        assert png.read_bytes()[:4] == b"\x89PNG"


# -- facts ------------------------------------------------------------------------------------

M1, M2, M3 = (uuid.uuid4() for _ in range(3))


def test_driver_upsert_recall_and_history(driver):
    call = driver()
    first = call("upsert_fact", "u1", "home_city", "The user lives in Lyon", vec("The user lives in Lyon").tolist(),
                 [M1])
    assert first.action == "inserted"
    assert call("upsert_fact", "u1", "home_city", "The user lives in Paris", vec("The user lives in Paris"),
                [M2]).action == "replaced"
    hits = call("recall_facts", "u1", vec("Paris"), k=1)
    assert hits[0].fact == "The user lives in Paris" and hits[0].source_message_ids == [M2]
    assert [h.fact for h in call("fact_history", first.fact_id)] == ["The user lives in Lyon"]
    with pytest.raises(agentmem.InvalidArgument):
        call("upsert_fact", "", "s", "f", vec("f"))


def test_extract_facts_embeds_and_upserts_the_replys_facts(driver, admin, stub):
    stub.chat_replies = ['{"facts": [{"subject": "home_city", "fact": "The user lives in Lyon"}, '
                         '{"subject": "pet", "fact": "The user has a dog called Rex"}]}']
    call = driver(embedder=StubEmbedder(stub.host))
    out = call("extract_facts", [{"role": "user", "content": "I live in Lyon with my dog Rex"},
                                 {"role": "assistant", "content": "Nice!"}], "u1",
               source_message_ids=[M1], chat_model="llama3.2")
    assert [(f.subject, f.action) for f in out] == [("home_city", "inserted"), ("pet", "inserted")]
    chat = stub.chat_calls[0]
    assert chat["model"] == "llama3.2" and chat["format"] == "json"
    assert "I live in Lyon" in chat["messages"][-1]["content"]
    assert stub.embedded_texts == ["The user lives in Lyon", "The user has a dog called Rex"]
    rows = admin.execute("select subject, source_message_ids, model from agentmem.facts order by subject").fetchall()
    assert rows == [("home_city", [M1], "nomic-embed-text"), ("pet", [M1], "nomic-embed-text")]
    again = call("recall_facts", "u1", vec("The user has a dog called Rex"), k=1)
    assert again[0].fact == "The user has a dog called Rex"


def test_extract_facts_accepts_an_empty_list(driver, admin, stub):
    stub.chat_replies = ['{"facts": []}']
    call = driver(embedder=StubEmbedder(stub.host), max_size=1)
    assert call("extract_facts", "user: hello", "u1") == []
    assert count(admin, "facts") == 0 and stub.embed_calls == []


@pytest.mark.parametrize("reply, why", [
    ("this is not json", "not JSON"),
    ('{"facts": {"subject": "a", "fact": "b"}}', "not a list"),
    ('{"answer": []}', "not a list"),
    ('[{"subject": "home_city"}]', "exactly 'subject' and 'fact'"),
    ('[{"subject": "home_city", "fact": "Lyon", "extra": 1}]', "exactly 'subject' and 'fact'"),
    ('[{"subject": "ok", "fact": "The user is vegan"}, {"subject": "", "fact": "x"}]', "empty or non-text"),
    ('[{"subject": "home_city", "fact": 42}]', "empty or non-text"),
])
def test_a_malformed_reply_stores_nothing_and_says_why(driver, admin, stub, reply, why):
    stub.chat_replies = [reply]
    call = driver(embedder=StubEmbedder(stub.host), max_size=1)
    with pytest.raises(FactExtractionError) as info:
        call("extract_facts", "user: I am vegan", "u1")
    assert why in str(info.value)
    assert count(admin, "facts") == 0 and stub.embed_calls == []


def test_a_bad_fact_in_the_middle_rolls_back_the_whole_turn(driver, admin, stub):
    stub.chat_replies = ['[{"subject": "diet", "fact": "The user is vegan"}, '
                         '{"subject": "bio", "fact": "' + "x" * 4001 + '"}]']
    call = driver(embedder=StubEmbedder(stub.host), max_size=1)
    with pytest.raises(agentmem.ContentTooLarge):
        call("extract_facts", "user: I am vegan", "u1", source_message_ids=[M3])
    assert count(admin, "facts") == 0


def test_extract_facts_reports_an_unreachable_chat_model(driver, stub):
    call = driver(embedder=StubEmbedder(stub.host), max_size=1)
    with pytest.raises(FactExtractionError) as info:
        call("extract_facts", "user: hi", "u1")  # no scripted reply: the stub says the model is not pulled
    assert "llama3.2" in str(info.value)


# -- forgetting and retention -------------------------------------------------------------------

def test_driver_forget_methods(driver, admin):
    call = driver(max_size=1)
    conv = call("start_conversation", "u1")
    receipt = call("forget_conversation", conv)
    assert receipt.scope == "conversation" and receipt.rows_removed["conversations"] == 1
    receipt = call("forget_user", "u1")
    assert receipt.scope == "user" and receipt.erasure_id and receipt.erased_at
    with pytest.raises(agentmem.NotFound):
        call("forget_conversation", uuid.uuid4())
    assert count(admin, "erasure_log") == 2


def test_driver_tenant_view_methods(driver):
    """The calls a door showing a tenant makes (agentmem inspect): users, messages, receipts, cache, overview."""
    call = driver(max_size=1)
    conv = call("start_conversation", "u1")
    call("store_message", conv, "user", "hello there", vec("hello there"))
    call("store_message", conv, "assistant", "hi", None)
    assert [(u.user_id, u.messages) for u in call("list_users")] == [("u1", 2)]
    listed = call("list_messages", conv, page_size=1)
    assert [(m.message_index, m.embedded_models) for m in listed] == [(0, ["nomic-embed-text"])]
    assert [m.embedded_models for m in call("list_messages", conv, after=listed[-1].message_index)] == [[]]
    call("cache_store", "what is the refund window", vec("what is the refund window"), "30 days", safe_to_share=True)
    entries = call("list_cache_entries")
    assert [(e.answer, e.current_corpus, e.withdrawn_at) for e in entries] == [("30 days", True, None)]
    call("delete_message", listed[0].message_id)
    assert [r.kind for r in call("list_access_log")] == ["delete_message"]
    overview = call("tenant_overview")
    assert (overview.tenant_id, overview.users, overview.messages, overview.cache_entries) == ("acme", 1, 1, 1)
    assert [(g.tenant_id, g.scope) for g in call("my_tenants")] == [(None, "all")]


def test_driver_retention_methods(driver, admin_url, admin):
    add_facts(admin, "acme", 2, "40 days")
    add_facts(admin, "beta", 3, "40 days")
    call = driver(max_size=1)
    policy = call("set_retention_policy", "facts", dt.timedelta(days=1))
    assert policy.tenant_id == "acme" and policy.max_age.days == 1
    assert call("clear_retention_policy", "messages") is False
    assert not hasattr(call.mem, "apply_retention") and not hasattr(call.mem, "schedule_retention")
    with Admin.connect(admin_url) as dba:
        default = dba.set_default_retention_policy("facts", dt.timedelta(days=2))
        assert default.tenant_id == "" and default.max_age.days == 2
        result = dba.apply_retention(batch_size=10)
        assert result.rows_removed["facts"] == 5 and result.error is None
        assert dba.retention_health()["status"] == "ok"
        assert dba.clear_default_retention_policy("facts") is True
        assert dba.clear_default_retention_policy("facts") is False
    assert count(admin, "facts") == 0
    assert call("clear_retention_policy", "facts") is True


def test_admin_client_registers_models_and_grants_app_roles(admin_url, admin):
    with Admin.connect(admin_url) as dba:
        model = dba.register_model("admin-model", 8, query_prefix="q: ")
        assert (model["model"], model["dimension"], model["query_prefix"]) == ("admin-model", 8, "q: ")
        admin.execute("create role admin_client_login login")
        try:
            assert dba.grant_app_role("admin_client_login") is None
            assert admin.execute("select pg_has_role('admin_client_login', 'agentmem_app', 'member')"
                                 ).fetchone() == (True,)
            with pytest.raises(agentmem.InvalidArgument):
                dba.register_model("", 8)
        finally:
            admin.execute("drop role admin_client_login")


def test_admin_client_switches_text_search_and_manages_tenant_indexes(admin_url, admin, dbname):
    from agentmem_dev.bulk import Bulk, unit_vectors
    with Admin.connect(admin_url) as dba:
        assert dba.set_text_search_config("simple") is True
        assert dba.set_text_search_config("pg_catalog.simple") is False
        assert admin.execute("select config from agentmem.text_search_settings").fetchone() == ("pg_catalog.simple",)
        with pytest.raises(agentmem.InvalidArgument):
            dba.set_text_search_config(None)

        dba.register_model("tiny-admin", 8)
        Bulk(admin, model="tiny-admin").messages("acme", "alice", unit_vectors(np.random.default_rng(0), 5, 8))
        ddl = dba.tenant_index_ddl("acme", "tiny-admin")
        assert ddl.startswith("create index concurrently if not exists ") and "tenant_id = 'acme'" in ddl
        assert "concurrently" not in dba.tenant_index_ddl("acme", "tiny-admin", concurrently=False)
        admin.execute(f"alter database {dbname} set agentmem.tenant_index_min_rows = 2")
        with Admin.connect(admin_url) as fresh:  # the setting applies to new sessions
            needing = fresh.tenants_needing_index()
            assert [(r["table_name"], r["tenant_id"], r["model"], r["row_count"], r["index_kind"])
                    for r in needing] == [("message_embeddings", "acme", "tiny-admin", 5, "hnsw"),
                                          ("message_embeddings", "acme", "tiny-admin", 5, "exact")]
            assert needing[0]["create_statement"] == ddl
            assert needing[1]["create_statement"] == dba.tenant_index_ddl("acme", "tiny-admin", kind="exact")
            assert " using ivfflat " in needing[1]["create_statement"]
            name = fresh.create_tenant_index("acme", "tiny-admin")
            assert admin.execute("select count(*) from pg_indexes where schemaname = 'agentmem' and indexname = %s",
                                 (name,)).fetchone() == (1,)
            assert fresh.tenants_needing_index() == []
            measured = fresh.measure_tenant_index("acme", "tiny-admin")
            assert (measured["sampled"], measured["first_pass"] in ("hnsw", "exact")) == (5, True)
            assert fresh.drop_tenant_index("acme", "tiny-admin") is True
            with pytest.raises(agentmem.NotFound):
                fresh.measure_tenant_index("acme", "tiny-admin")
            assert fresh.drop_tenant_index("acme", "tiny-admin") is False
        with pytest.raises(agentmem.UnknownModel):
            dba.create_tenant_index("acme", "no-such-model")
    assert admin.execute("select count(*) from pg_indexes where schemaname = 'agentmem' and indexname = %s",
                         (name,)).fetchone() == (0,)


# -- errors of the first hour -------------------------------------------------------------------

def test_a_malformed_id_through_the_driver_is_invalid_argument_and_stores_nothing(driver, admin):
    call = driver()
    cid = call("start_conversation", "alice")
    before = count(admin, "messages"), count(admin, "cache_entries")
    for method, args, kwargs in [
        ("store_message", ("not-a-uuid", "user", "hi", vec("hi").tolist()), {}),
        ("recent_messages", ("12345",), {}),
        ("search_messages", ("alice",), {"query_text": "hi", "conversation_id": "abc"}),
        ("cache_store", ("Question?", vec("Question?").tolist(), "Answer."), {"conversation_id": "abc"}),
        ("review_hit", ("abc", True), {}),
        ("forget_conversation", (str(cid)[:-1],), {}),
    ]:
        with pytest.raises(agentmem.InvalidArgument) as info:
            call(method, *args, **kwargs)
        assert info.value.sqlstate == "AM020" and " is not a UUID" in str(info.value), method
    assert (count(admin, "messages"), count(admin, "cache_entries")) == before
    # its text works as well as the UUID
    assert call("store_message", str(cid), "user", "hi", vec("hi").tolist()).message_index == 0
    assert [m.content for m in call("recent_messages", cid)] == ["hi"]


def test_a_client_with_an_embedder_uses_its_model_for_every_call(driver, admin):
    """A client built with an embedder passes its model where a call takes model= (facts included):
    what it stores, it finds."""
    call = driver(embedder=lexical())  # all-minilm, 384 dimensions; the default model is 768
    cid = call("start_conversation", "alice")
    call("store_message", cid, "user", "I moved to Lyon", vec("I moved to Lyon", 384).tolist())
    call("store_messages", cid, ["assistant"], ["Noted"], [vec("Noted", 384).tolist()])
    fact = call("upsert_fact", "alice", "home_city", "alice lives in Lyon", vec("alice lives in Lyon", 384).tolist())
    assert fact.action == "inserted"
    assert admin.execute("select model from agentmem.facts").fetchall() == [("all-minilm",)]
    assert set(admin.execute("select model from agentmem.message_embeddings").fetchall()) == {("all-minilm",)}
    assert [f.fact for f in call("recall_facts_about", "alice", "where does alice live", hybrid=False)] \
        == ["alice lives in Lyon"]
    assert [f.fact for f in call("recall_facts", "alice", vec("lives in Lyon", 384).tolist())] \
        == ["alice lives in Lyon"]
    assert call("search_messages", "alice", vec("I moved to Lyon", 384).tolist(), 1)[0].content == "I moved to Lyon"
    assert call("search_with_context", "alice", vec("I moved to Lyon", 384).tolist(), 1, 0)[0].content \
        == "I moved to Lyon"
    stored = call("cache_store", "Where is the office?", vec("Where is the office?", 384).tolist(), "In Lyon.",
                  safe_to_share=True)
    assert stored.stored
    assert call("cache_lookup", "Where is the office?", vec("Where is the office?", 384).tolist()).hit
    assert call("embedding_cache_store", None, ["t"], [vec("t", 384).tolist()]) == 1
    assert call("embedding_cache_lookup", None, ["t"])[0] is not None
    # an explicit model= still wins
    with pytest.raises(agentmem.InvalidEmbedding):
        call("upsert_fact", "alice", "pet", "alice has a cat", vec("alice has a cat", 384).tolist(),
             model="nomic-embed-text")


def test_connect_to_a_wrong_port_fails_at_connect(app_url, admin):
    import time

    from helpers import free_port_url
    wrong = free_port_url(app_url)
    t0 = time.monotonic()
    with pytest.raises(agentmem.ConnectionLost) as info:
        Memory.connect(wrong, tenant="acme", timeout=5)
    assert time.monotonic() - t0 < 5  # refused at once, not after the pool's retries
    assert "Connection refused" in str(info.value) or "failed" in str(info.value)
    # check=False opens without waiting: the first call raises instead
    with Memory.connect(wrong, tenant="acme", timeout=1, check=False) as mem:
        with pytest.raises(agentmem.ConnectionLost):
            mem.start_conversation("alice")
    assert count(admin, "conversations") == 0


def test_async_connect_to_a_wrong_port_fails_at_connect(app_url):
    import asyncio

    from helpers import free_port_url
    with pytest.raises(agentmem.ConnectionLost):
        asyncio.run(AsyncMemory.connect(free_port_url(app_url), tenant="acme", timeout=5))


def test_connect_to_a_database_without_agentmem_says_so(server, admin):
    if server.name == "citus":
        pytest.skip("creates a database; the cluster's session database is reused by every test")
    name = f"agentmem_empty_{uuid.uuid4().hex[:8]}"
    admin.execute(f"create database {name}")
    try:
        with pytest.raises(agentmem.PrerequisiteMissing, match=f"not installed in database {name}"):
            Memory.connect(server.db_url(name), tenant="acme")
    finally:
        admin.execute(f"drop database {name} with (force)")


# -- round trips --------------------------------------------------------------------------------

class RoundTrips:
    """libpq's protocol trace of a one-connection client: the server's ReadyForQuery messages are the
    round trips (one per pipeline's Sync, per simple query, per BEGIN / COMMIT)."""

    def __init__(self, mem, tmp_path):
        self.path = tmp_path / "trace.txt"
        self.file = open(self.path, "w")
        with mem.pool.connection() as conn:
            self.conn = conn
        self.conn.prepare_threshold = None  # every statement's text in the trace (a prepared one sends its name)
        self._trace()
        self.seen = 0

    def _trace(self):
        import psycopg.pq
        self.conn.pgconn.trace(self.file.fileno())
        self.conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)

    def __call__(self) -> tuple[int, list[str]]:
        """The round trips since the last call, and the functions called in them."""
        import re
        self.conn.pgconn.untrace()  # flushes libpq's buffer
        lines = self.path.read_text().splitlines()[self.seen:]
        self.seen += len(lines)
        self._trace()
        called = [m for line in lines if line.startswith("F") for m in re.findall(r"agentmem\.(\w+)\(", line)]
        return sum(1 for line in lines if line.startswith("B") and "ReadyForQuery" in line), called


def test_round_trips_of_cached_answer_recall_and_search_messages(app_url, stub, tmp_path):
    """The data path in round trips on a cold and a warm embedding cache (the figures of docs/driver.md):
    the embedder's prefixes are read at connect, so no call waits for them."""
    emb = OllamaEmbedder("all-minilm", host=stub.host)
    with Memory.connect(app_url, tenant="acme", max_size=1, embedder=emb) as mem:
        assert (emb.document_prefix, emb.query_prefix) == ("", "")
        trips = RoundTrips(mem, tmp_path)
        mem.cached_answer("How do I rotate an API key?")   # cold embedding cache
        assert trips() == (3, ["set_tenant", "embedding_cache_lookup", "set_tenant", "embedding_cache_store",
                               "set_tenant", "cache_lookup"])
        mem.cached_answer("How do I rotate an API key?")   # warm
        assert trips() == (2, ["set_tenant", "embedding_cache_lookup", "set_tenant", "cache_lookup"])
        mem.recall("alice", "my API keys")                 # cold
        assert trips()[0] == 3
        mem.recall("alice", "my API keys")                 # warm
        assert trips() == (2, ["set_tenant", "embedding_cache_lookup", "set_tenant", "search_messages"])
        mem.search_messages("alice", [0.1] * 384, model="all-minilm")  # no embedding: one round trip
        assert trips() == (1, ["set_tenant", "search_messages"])


def test_remember_costs_one_round_trip_beyond_the_embedding(app_url, stub, tmp_path):
    """remember: the embedding (the cache's lookup; on a miss the model, then the cache's store), then one
    round trip that stores the message, as store_message with a vector takes alone."""
    emb = OllamaEmbedder("all-minilm", host=stub.host)
    with Memory.connect(app_url, tenant="acme", max_size=1, embedder=emb) as mem:
        cid = mem.start_conversation("alice")
        trips = RoundTrips(mem, tmp_path)
        first = mem.remember(cid, "user", "my API key is in the vault")      # cold embedding cache
        assert trips() == (3, ["set_tenant", "embedding_cache_lookup", "set_tenant", "embedding_cache_store",
                               "set_tenant", "store_message"])
        second = mem.remember(cid, "user", "my API key is in the vault")     # warm
        assert trips() == (2, ["set_tenant", "embedding_cache_lookup", "set_tenant", "store_message"])
        assert (first.message_index, second.message_index) == (0, 1)
        assert stub.embedded_texts == ["my API key is in the vault"]
        mem.store_message(cid, "user", "no embedding to make", [0.1] * 384, model="all-minilm")
        assert trips() == (1, ["set_tenant", "store_message"])


def test_a_batch_sends_its_vectors_in_binary(app_url, tmp_path):
    """A list of vectors goes in pgvector's binary form (as one vector does): as text, psycopg formats
    every component (about 90 ms and 1.9 MB for 250 vectors of 384 dimensions, against 1 ms and 0.4 MB)."""
    with Memory.connect(app_url, tenant="acme", max_size=1) as mem:
        cid = mem.start_conversation("alice")
        trips = RoundTrips(mem, tmp_path)
        stored = mem.store_messages(cid, ["user", "user", "user"], ["a", "b", "c"],
                                    [[0.125] * 384, None, np.tile(np.float32([0.25, -0.25]), 192)], model="all-minilm")
        assert mem.embedding_cache_store("all-minilm", ["cached"], [[0.375] * 384]) == 1
        assert trips() == (2, ["set_tenant", "store_messages", "set_tenant", "embedding_cache_store"])
        trace = trips.path.read_text()
        for written in ("0.125,0.125", "0.25,-0.25", "0.375,0.375"):
            assert written not in trace  # no component written out as text
        # and they arrive as sent
        found = mem.search_messages("alice", [0.25, -0.25] * 192, k=3, model="all-minilm")
        assert found[0].message_id == stored[2].message_id and found[0].similarity == pytest.approx(1.0)
        assert [m.message_index for m in stored] == [0, 1, 2]


def test_a_client_opened_without_a_check_reads_the_prefixes_at_first_use(app_url, stub, tmp_path):
    emb = OllamaEmbedder("nomic-embed-text", host=stub.host)
    with Memory.connect(app_url, tenant="acme", max_size=1, embedder=emb, check=False) as mem:
        assert emb.document_prefix is None
        trips = RoundTrips(mem, tmp_path)
        mem.cached_answer("How do I rotate an API key?")
        assert trips() == (4, ["set_tenant", "get_model", "set_tenant", "embedding_cache_lookup",
                               "set_tenant", "embedding_cache_store", "set_tenant", "cache_lookup"])
        assert (emb.document_prefix, emb.query_prefix) == ("search_document: ", "search_query: ")
        assert stub.embedded_texts == ["search_query: How do I rotate an API key?"]
    # an unregistered model: connect still opens, the first call raises UnknownModel
    with Memory.connect(app_url, tenant="acme", embedder=OllamaEmbedder("not-registered", host=stub.host)) as mem:
        with pytest.raises(agentmem.UnknownModel):
            mem.cached_answer("How do I rotate an API key?")


def test_claims_are_set_per_transaction_for_the_jwt_binding(driver, admin):
    """for_tenant(tenant, claims=...): request.jwt.claims in each call's transaction, which the jwt mode checks."""
    admin.execute("select agentmem.set_tenant_binding(mode => 'jwt')")
    try:
        call = driver(tenant="acme")
        with pytest.raises(agentmem.InsufficientPrivilege):
            call("memory_status", "alice")                      # no claims: the jwt mode refuses the tenant
        bound = call.for_tenant("acme")
        bound.mem = call.mem.for_tenant("acme", claims={"tenant_id": "acme", "sub": "alice"})
        assert bound("memory_status", "alice").messages == 0
        wrong = call.for_tenant("acme")
        wrong.mem = call.mem.for_tenant("acme", claims={"tenant_id": "globex"})
        with pytest.raises(agentmem.InsufficientPrivilege):
            wrong("memory_status", "alice")
        assert bound("memory_status", "alice").tenant_id == "acme"   # the claims lasted one transaction each
    finally:
        # the mode is a generated function, not a row the Citus leg's emptied database refills
        admin.execute("select agentmem.set_tenant_binding(mode => 'role')")


def test_statements_run_together_in_one_transaction(driver):
    call = driver(tenant="acme")
    cid = call("start_conversation", "alice")
    q = call.mem.statements()
    stmts = [call.resolve(q.require_user_item("alice", conversation_id=cid)),
             call.resolve(q.store_message(cid, "user", "together", None))]
    ok, stored = call("run_together", stmts)
    assert ok is True and stored.message_index == 0
    refused = [call.resolve(q.require_user_item("bob", conversation_id=cid)),
               call.resolve(q.store_message(cid, "user", "not stored", None))]
    with pytest.raises(agentmem.NotFound):
        call("run_together", refused)
    assert [m.content for m in call("recent_messages", cid)] == ["together"]
    assert call("memory_status", "alice").messages == 1
