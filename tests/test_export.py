"""Export and import of a user's and a tenant's memory (JSON Lines): round trips, other databases, hostile
files, isolation."""

from __future__ import annotations

import io
import json

import psycopg
import pytest

import conftest
from agentmem.cli import main
from helpers import count, sqlstate_of, upsert, vec
from test_forget import populate, snapshot, store

COPY_CSV = "with (format csv, quote e'\\x01', delimiter e'\\x02')"


def export(conn, user="u1") -> list[str]:
    return [r[0] for r in conn.execute("select line from agentmem.export_user(user_id => %s)", (user,))]


def copy_bytes(conn, user="u1") -> bytes:
    """What psql's \\copy (select line from agentmem.export_user(...)) to 'file' with (format csv, ...) writes."""
    out = bytearray()
    with conn.cursor().copy(f"copy (select line from agentmem.export_user(user_id => '{user}')) to stdout "
                            f"{COPY_CSV}") as copy:
        for chunk in copy:
            out += bytes(chunk)
    return bytes(out)


def import_lines(conn, lines):
    return conn.execute("select kind, rows_affected from agentmem.import_user(lines => %s::text[])",
                        (lines,)).fetchone()


def body(lines: list[str]) -> list[str]:
    return lines[1:]


def header(lines: list[str]) -> dict:
    return json.loads(lines[0])


def rich_user(conn, user="u1", marker="zorkmid"):
    """populate() plus metadata, a summary, a corrected fact, quotes, backslashes and non-ASCII in content."""
    data = populate(conn, user, marker)
    conv = data["conversations"][1]
    conn.execute("select agentmem.store_message(conversation_id => %s, role => 'user', content => %s, "
                 "embedding => %s, metadata => %s)",
                 (conv, 'a "quoted" C:\\path\nnew line — ünïcödé ✓', vec("quoted path"), '{"k": [1, "x\\\\y"]}'))
    conn.execute("select agentmem.set_summary(conversation_id => %s, summary => 'they talked', through_index => 2)",
                 (conv,))
    fid = conn.execute("select fact_id from agentmem.list_facts(user_id => %s) where subject = 'diet'",
                       (user,)).fetchone()[0]
    conn.execute("select agentmem.update_fact(fact_id => %s, fact => %s, embedding => %s)",
                 (fid, f"{marker} eats fish", vec(f"{marker} eats fish")))
    return data


def searches(conn, data, user="u1"):
    out = []
    for v in data["vectors"]:
        out.append(conn.execute("select message_id, similarity from agentmem.search_messages(user_id => %s, "
                                "query_embedding => %s, k => 5)", (user, v)).fetchall())
        out.append(conn.execute("select fact_id, fact from agentmem.recall_facts(user_id => %s, "
                                "query_embedding => %s)", (user, v)).fetchall())
    q = "what is zorkmid plan"
    out.append(conn.execute("select hit, entry_id, answer from agentmem.cache_lookup(question => %s, "
                            "question_embedding => %s)", (q, vec(q))).fetchone())
    return out


def test_round_trip_export_erase_import_export_gives_the_same_file_and_the_same_searches(app, admin, app_url,
                                                                                        tmp_path, capsys):
    data = rich_user(app)
    populate(app, "u2", "quuxly")
    first = export(app)
    assert header(first)["format_version"] == 1 and header(first)["user_id"] == "u1"
    assert header(first)["models"] == [{"model": "nomic-embed-text", "dimension": 768}]
    assert json.loads(first[-1]) == {"type": "end", "rows": len(first) - 2}
    kinds = [json.loads(line)["type"] for line in first]
    assert kinds.count("message") == 7 and kinds.count("fact") == 2 and kinds.count("cache_entry") == 1
    fact = next(json.loads(line) for line in first if '"diet"' in line and '"fact"' in line)
    assert [h["change"] for h in fact["history"]] == ["corrected"]
    # psql's \copy (CSV with quote and delimiter JSON never holds) and the CLI write the same bytes
    copied = copy_bytes(app)
    main(["export", "--database-url", app_url, "--tenant", "acme", "--user", "u1", "-o", str(tmp_path / "u1.jsonl")])
    written = (tmp_path / "u1.jsonl").read_bytes()
    assert [line for line in written.decode().split("\n")[1:]] == [line for line in copied.decode().split("\n")[1:]]
    assert written.decode().split("\n")[1:] == [*body(first), ""]
    main(["export", "--database-url", app_url, "--tenant", "acme", "--user", "u1"])
    assert capsys.readouterr().out.split("\n")[1:] == [*body(first), ""]
    before = searches(app, data)
    others = {t: rows for t, rows in snapshot(admin).items()}

    app.execute("select agentmem.forget_user(user_id => 'u1')")
    assert searches(app, data) != before
    assert main(["import", str(tmp_path / "u1.jsonl"), "--database-url", app_url, "--tenant", "acme"]) == 0
    again = export(app)
    assert body(again) == body(first)
    assert searches(app, data) == before
    # importing twice changes nothing
    receipt = import_lines(app, again)
    assert receipt[0] == "import_user" and receipt[1]["messages"] == 0 and receipt[1]["fact_history"] == 0
    assert body(export(app)) == body(first)
    # every other user's rows are as they were
    after = snapshot(admin)
    for table, rows in others.items():
        for r in rows:
            if "quuxly" in r:
                assert r in after[table], (table, r)
    kinds = [r[0] for r in admin.execute("select kind from agentmem.access_log order by logged_at")]
    assert kinds.count("export_user") == 6 and kinds.count("import_user") == 2
    logged = " ".join(r[0] for r in admin.execute("select a::text from agentmem.access_log a"))
    assert "zorkmid" not in logged and "u1" not in logged.replace("acme", "")


@pytest.fixture
def other_db(server, dbname, admin):
    """Another database installed fresh (from the migrated template); on the Citus leg, a fresh tenant of the
    same cluster (a second distributed database is not set up by the test cluster)."""
    if server.name == "citus":
        yield None
        return
    name = f"{dbname}_other"
    template = f"{conftest.os.environ.get('AGENTMEM_TEST_DBNAME', 'agentmem_test')}_tmpl"
    admin.execute(f'drop database if exists "{name}" with (force)')
    admin.execute(f'create database "{name}" template "{template}"')
    yield name
    admin.execute(f'drop database if exists "{name}" with (force)')


def test_import_into_another_database_and_into_a_tenant_with_other_users(app, admin, connect, server, other_db):
    data = rich_user(app)
    lines = export(app)
    if other_db is None:
        target = connect(server.db_url(admin.info.dbname, conftest.APP_ROLE), tenant="fresh")
    else:
        target = connect(server.db_url(other_db, conftest.APP_ROLE), tenant="acme")
    receipt = import_lines(target, lines)
    assert receipt[1]["messages"] == 7 and receipt[1]["facts"] == 2
    assert body(export(target)) == body(lines)
    assert searches(target, data) == searches(app, data)
    # a tenant that already has other users: they are untouched
    busy = connect(server.db_url(admin.info.dbname, conftest.APP_ROLE), tenant="busy")
    populate(busy, "u9", "blorpy")
    populate(busy, "u8", "quuxly")
    mine = snapshot(admin)
    import_lines(busy, lines)
    after = snapshot(admin)
    for table, rows in mine.items():
        assert set(rows) <= set(after[table]), table
    assert body(export(busy)) == body(lines)
    assert busy.execute("select count(*) from agentmem.list_conversations(user_id => 'u9')").fetchone() == (2,)


def test_a_newer_format_and_hostile_files_are_refused_and_write_nothing(app, admin, connect, app_url):
    rich_user(app)
    lines = export(app)
    app.execute("select agentmem.forget_user(user_id => 'u1')")
    other = connect(app_url, tenant="globex")
    populate(other, "x1", "blorpy")
    populate(app, "u2", "quuxly")
    taken_fact = admin.execute("select fact_id from agentmem.facts where tenant_id = 'acme' and user_id = 'u2' "
                               "limit 1").fetchone()[0]

    def edit(i, **changes):
        doc = json.loads(lines[i])
        doc.update(changes)
        return [*lines[:i], json.dumps(doc), *lines[i + 1:]]

    msg_line = next(i for i, line in enumerate(lines) if '"type": "message"' in line)
    conv_line = next(i for i, line in enumerate(lines) if '"type": "conversation"' in line)
    fact_line = next(i for i, line in enumerate(lines) if '"type": "fact"' in line)
    emb = json.loads(lines[msg_line])["embeddings"]
    cases = {
        "truncated": (lines[:-3], "AM020"),
        "no end row": (lines[:-1], "AM020"),
        "newer format": (edit(0, format_version=2), "AM040"),
        "not JSON": ([lines[0], '{"type": "conversation", ', *lines[1:]], "AM020"),
        "not an object": ([lines[0], "[1, 2]", *lines[1:-1], json.dumps({"type": "end", "rows": len(lines) - 1})],
                          "AM020"),
        "a JSON string": (['"header"', *lines[1:]], "AM020"),
        "another tenant's rows": (edit(conv_line, tenant_id="globex"), "AM020"),
        "another user's rows": (edit(msg_line, user_id="u2"), "AM020"),
        "an id of another user": (edit(fact_line, fact_id=str(taken_fact)), "AM031"),
        "wrong dimension": (edit(msg_line, embeddings=[{**emb[0], "embedding": "[1,2,3]"}]), "AM010"),
        "unknown model": (edit(msg_line, embeddings=[{**emb[0], "model": "no-such-model"}]), "AM011"),
        "duplicate rows": ([*lines[:-1], lines[msg_line], json.dumps({"type": "end", "rows": len(lines) - 1})],
                           "AM020"),
        "bad value": (edit(msg_line, created_at="yesterday-ish"), "AM020"),
        "empty": ([], "AM020"),
    }
    for name, (bad, code) in cases.items():
        before = snapshot(admin)
        assert sqlstate_of(app, "select agentmem.import_user(lines => %s::text[])", (bad,)) == code, name
        assert snapshot(admin) == before, name
    assert sqlstate_of(app, "select agentmem.import_user(lines => null)") == "AM020"
    assert count(admin, "access_log", "kind = 'import_user'") == 0
    assert count(admin, "conversations", "user_id = 'u1'") == 0


def test_a_line_over_the_limit_is_refused(app, admin, tmp_path, app_url):
    """The documented limit: 8 MiB per line (agentmem_private.import_max_line_bytes); a line one byte over is
    refused by the server (AM021) and by the CLI before it is sent."""
    rich_user(app)
    lines = export(app)
    app.execute("select agentmem.forget_user(user_id => 'u1')")
    limit = admin.execute("select agentmem_private.import_max_line_bytes()").fetchone()[0]
    assert limit == 8 * 1024 * 1024
    doc = json.loads(lines[1])
    doc["title"] = ""
    pad = limit + 1 - len(json.dumps(doc).encode())
    doc["title"] = "x" * pad
    big = json.dumps(doc)
    assert len(big.encode()) == limit + 1
    bad = [lines[0], big, *lines[2:]]
    assert sqlstate_of(app, "select agentmem.import_user(lines => %s::text[])", (bad,)) == "AM021"
    (tmp_path / "big.jsonl").write_text("\n".join(bad) + "\n")
    from agentmem.errors import ContentTooLarge
    from agentmem.transfer import import_file
    with open(tmp_path / "big.jsonl") as source, pytest.raises(ContentTooLarge):
        import_file(app_url, source, tenant="acme")
    assert count(admin, "conversations") == 0


def test_export_and_import_reach_no_other_user_or_tenant(app, admin, connect, app_url):
    other = connect(app_url, tenant="globex")
    populate(other, "u1", "blorpy")
    populate(app, "u2", "quuxly")
    lines = export(app)   # u1 has nothing in acme
    assert len(lines) == 2 and json.loads(lines[1]) == {"type": "end", "rows": 0}
    assert all("blorpy" not in line and "quuxly" not in line for line in export(app, "u2")[:0] + lines)
    u2 = export(app, "u2")
    assert not any("blorpy" in line for line in u2)
    # the app role may not export or import a whole tenant
    assert sqlstate_of(app, "select * from agentmem.export_tenant(tenant_id => 'globex')") == "42501"
    assert sqlstate_of(app, "select agentmem.import_tenant(tenant_id => 'globex', lines => '{}')") == "42501"
    # an import of globex's export into acme writes into acme only
    g = export(other)
    before = snapshot(admin)
    import_lines(app, g)
    after = snapshot(admin)
    globex = {t: [r for r in rows if "globex" in r] for t, rows in before.items()}
    for table, rows in globex.items():
        assert set(rows) <= set(after[table])
        assert len([r for r in after[table] if "globex" in r]) == len(rows), table


@pytest.mark.parametrize("piece_bytes", [None, 3000])
def test_export_tenant_and_import_tenant_move_a_tenant(app, admin, connect, app_url, server, other_db, tmp_path,
                                                       monkeypatch, piece_bytes):
    """piece_bytes: the CLI's pieces made small, so that each user block goes in several calls."""
    if piece_bytes is not None:
        from agentmem import transfer
        monkeypatch.setattr(transfer, "MAX_CALL_BYTES", piece_bytes)
    populate(app, "u1", "zorkmid")
    populate(app, "u2", "quuxly")
    populate(connect(app_url, tenant="globex"), "u1", "blorpy")
    lines = [r[0] for r in admin.execute("select line from agentmem.export_tenant(tenant_id => 'acme')")]
    head = json.loads(lines[0])
    assert head["scope"] == "tenant" and json.loads(lines[-1])["users"] == 2
    assert not any("blorpy" in line for line in lines)
    users = {u: export(app, u) for u in ("u1", "u2")}
    # the CLI streams the same lines
    assert main(["export", "--database-url", server.db_url(admin.info.dbname), "--tenant", "acme",
                 "-o", str(tmp_path / "acme.jsonl")]) == 0
    streamed = (tmp_path / "acme.jsonl").read_text().split("\n")
    assert streamed[-1] == "" and len(streamed) == len(lines) + 1
    assert [x for x in streamed[:-1] if '"header"' not in x] == [x for x in lines if '"header"' not in x]
    target_db = other_db or admin.info.dbname
    target_tenant = "acme" if other_db else "acme2"
    assert main(["import", str(tmp_path / "acme.jsonl"), "--database-url", server.db_url(target_db),
                 "--tenant", target_tenant]) == 0
    moved = connect(server.db_url(target_db, conftest.APP_ROLE), tenant=target_tenant)
    for u, exported in users.items():
        assert body(export(moved, u)) == body(exported)
    # twice: nothing more
    out = admin.execute("select agentmem.import_tenant(tenant_id => %s, lines => %s::text[])",
                        ("acme", lines)).fetchone()[0] if other_db is None else None
    if out is not None:
        assert out["messages"] == 0 and out["users"] == 2


def test_driver_methods(driver, admin):
    call = driver()
    conv = call("start_conversation", "u1", title="chat")
    call("store_message", conv, "user", "hello zorkmid", vec("hello zorkmid"))
    lines = call("export_user", "u1")
    assert json.loads(lines[0])["type"] == "header" and len(lines) == 4
    convs = call("list_conversations", "u1")
    assert convs[0].conversation_id == conv and convs[0].message_count == 1
    call("forget_user", "u1")
    receipt = call("import_user", lines)
    assert receipt.kind == "import_user" and receipt.rows_affected["messages"] == 1
    msg = admin.execute("select message_id from agentmem.messages").fetchone()[0]
    assert call("delete_message", msg).rows_affected["messages"] == 1
    upsert_row = call("upsert_fact", "u1", "diet", "eats fish", vec("eats fish"))
    assert call("update_fact", upsert_row.fact_id, "eats meat", vec("eats meat")).kind == "update_fact"
    facts = call("list_facts", "u1", include_superseded=True)
    assert [f.status for f in facts] == ["current", "corrected"]
    assert call("delete_fact", upsert_row.fact_id).rows_affected["facts"] == 1


def test_import_waits_for_the_users_writes_and_a_concurrent_import_adds_nothing(app_url, connect, admin):
    a = connect(app_url, tenant="acme")
    conv = a.execute("select agentmem.start_conversation(user_id => 'u1')").fetchone()[0]
    store(a, conv, "user", "zorkmid one")
    lines = export(a)
    a.execute("select agentmem.forget_user(user_id => 'u1')")
    first, second = connect(app_url, tenant="acme"), connect(app_url, tenant="acme")
    first.execute("begin")
    import_lines(first, lines)
    import threading
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", import_lines(second, lines)))
    t.start()
    t.join(0.5)
    assert t.is_alive()   # waits for the first import's lock
    first.execute("commit")
    t.join(30)
    assert result["r"][1]["messages"] == 0 and count(admin, "messages") == 1


def test_the_file_is_not_read_as_sql_text_by_copy_text_format(app):
    """The reason for the CSV options: COPY's text format doubles backslashes, which JSON holds."""
    rich_user(app)
    text = io.BytesIO()
    with app.cursor().copy("copy (select line from agentmem.export_user(user_id => 'u1')) to stdout") as copy:
        for chunk in copy:
            text.write(bytes(chunk))
    assert text.getvalue() != copy_bytes(app)
    assert copy_bytes(app).decode().split("\n")[1:-1] == body(export(app))
    with pytest.raises(psycopg.Error):
        app.execute("select agentmem.import_user(lines => array['{\"type\": \"header\"'])")


def test_a_tenant_import_refused_in_its_last_user_writes_nothing(app, admin, server, tmp_path):
    populate(app, "u1", "zorkmid")
    populate(app, "u2", "quuxly")
    lines = [r[0] for r in admin.execute("select line from agentmem.export_tenant(tenant_id => 'acme')")]
    last_msg = max(i for i, line in enumerate(lines) if '"type": "message"' in line)
    doc = json.loads(lines[last_msg])
    doc["embeddings"][0]["embedding"] = "[1,2,3]"
    bad = [*lines[:last_msg], json.dumps(doc), *lines[last_msg + 1:]]
    (tmp_path / "bad.jsonl").write_text("\n".join(bad) + "\n")
    before = snapshot(admin)
    assert main(["import", str(tmp_path / "bad.jsonl"), "--database-url", server.db_url(admin.info.dbname),
                 "--tenant", "moved"]) == 1
    assert snapshot(admin) == before
    # truncated in the middle of a user block: refused too
    (tmp_path / "cut.jsonl").write_text("\n".join(lines[:last_msg]) + "\n")
    assert main(["import", str(tmp_path / "cut.jsonl"), "--database-url", server.db_url(admin.info.dbname),
                 "--tenant", "moved"]) == 1
    assert snapshot(admin) == before


def test_the_cli_shows_progress_on_stderr_when_asked(app, app_url, tmp_path, capsys):
    populate(app, "u1", "zorkmid")
    assert main(["export", "--database-url", app_url, "--tenant", "acme", "--user", "u1", "-o",
                 str(tmp_path / "u1.jsonl"), "--progress"]) == 0
    assert "agentmem: exported 14 rows" in capsys.readouterr().err
    app.execute("select agentmem.forget_user(user_id => 'u1')")
    assert main(["import", str(tmp_path / "u1.jsonl"), "--database-url", app_url, "--tenant", "acme",
                 "--progress"]) == 0
    captured = capsys.readouterr()
    assert "agentmem: imported 14 rows" in captured.err and "messages 6" in captured.out
    assert main(["import", str(tmp_path / "u1.jsonl"), "--database-url", app_url]) == 1   # no --tenant


def _edit(lines: list[str], i: int, **changes) -> list[str]:
    doc = json.loads(lines[i])
    doc.update(changes)
    return [*lines[:i], json.dumps(doc), *lines[i + 1:]]


def _line_of(lines: list[str], kind: str) -> int:
    return next(i for i, line in enumerate(lines) if json.loads(line)["type"] == kind)


def test_imported_rows_pass_the_checks_of_the_calls_that_write_them(app, admin):
    """Each value the API refuses is refused on import with the API's own code, and nothing is written."""
    rich_user(app)
    lines = export(app)
    app.execute("select agentmem.forget_user(user_id => 'u1')")
    conv, msg, ret, fact, entry = (_line_of(lines, k) for k in ("conversation", "message", "retrieval", "fact",
                                                                 "cache_entry"))
    history = json.loads(lines[fact])
    without_user = json.loads(lines[entry])
    del without_user["user_id"]
    cases = {
        "content over 100,000 characters": (_edit(lines, msg, content="x" * 100_001), "AM021"),
        "blank content": (_edit(lines, msg, content="\t \n"), "AM020"),
        "occurred_at in 2999": (_edit(lines, msg, occurred_at="2999-01-01T00:00:00+00:00"), "AM020"),
        "metadata not an object": (_edit(lines, msg, metadata=[1, 2]), "AM020"),
        "metadata over 100,000 characters": (_edit(lines, msg, metadata={"k": "m" * 100_001}), "AM021"),
        "an unknown role": (_edit(lines, msg, role="wizard"), "AM020"),
        "a title over 1,000 characters": (_edit(lines, conv, title="t" * 1001), "AM021"),
        "conversation metadata nested 33 levels": (_edit(lines, conv, metadata=json.loads('{"a":' * 33 + "1"
                                                                                            + "}" * 33)), "AM020"),
        "a 10,000-character fact": (_edit(lines, fact, fact="f" * 10_000), "AM021"),
        "a blank subject": (_edit(lines, fact, subject="   "), "AM020"),
        "a 10,000-character fact in its history": (
            _edit(lines, fact, history=[{**h, "fact": "f" * 10_000} for h in history["history"]] or
                  [{"fact": "f" * 10_000, "subject": "s"}]), "AM021"),
        "a tab-only document id": (_edit(lines, ret, doc_ids=["docs/a.md", "\t"]), "AM020"),
        "a 2,000-character document id": (_edit(lines, ret, doc_ids=["d" * 2000]), "AM021"),
        "a cached answer over 100,000 characters": (_edit(lines, entry, answer="a" * 100_001), "AM021"),
        "a blank source id": (_edit(lines, entry, source_ids=["\t"]), "AM020"),
        "a cached answer without a user": ([*lines[:entry], json.dumps(without_user), *lines[entry + 1:]], "AM020"),
        "a cached answer of no user": (_edit(lines, entry, user_id=None), "AM020"),
        "occurred_at not a time": (_edit(lines, msg, occurred_at="soon"), "AM020"),
    }
    for name, (bad, code) in cases.items():
        before = snapshot(admin)
        assert sqlstate_of(app, "select agentmem.import_user(lines => %s::text[])", (bad,)) == code, name
        assert snapshot(admin) == before, name
    # the file as exported still goes in
    import_lines(app, lines)
    assert count(admin, "cache_entries", "user_id = 'u1'") == 1
    assert count(admin, "cache_entries", "user_id is null") == 0
    app.execute("select agentmem.forget_user(user_id => 'u1')")
    assert count(admin, "cache_entries") == 0


def test_an_imported_retrieval_record_takes_its_conversation_and_index_from_its_message(app, admin):
    """A retrieval row naming another user's conversation (and any index) is stored against its own message's
    conversation and index; the other user's topic_shift is untouched."""
    populate(app, "u1", "zorkmid")
    other = populate(app, "u2", "quuxly")
    victim_conv = other["conversations"][0]
    shift = app.execute("select * from agentmem.topic_shift(conversation_id => %s)", (victim_conv,)).fetchone()
    lines = export(app)
    app.execute("select agentmem.forget_user(user_id => 'u1')")
    ret = _line_of(lines, "retrieval")
    doc = json.loads(lines[ret])
    message = next(json.loads(x) for x in lines if json.loads(x)["type"] == "message"
                   and json.loads(x)["message_id"] == doc["message_id"])
    import_lines(app, _edit(lines, ret, conversation_id=str(victim_conv), message_index=7))
    stored = admin.execute("select conversation_id::text, message_index from agentmem.retrievals "
                           "where message_id = %s", (doc["message_id"],)).fetchone()
    assert stored == (message["conversation_id"], message["message_index"])
    assert count(admin, "retrievals", f"conversation_id = '{victim_conv}'") == 1   # u2's own record only
    assert app.execute("select * from agentmem.topic_shift(conversation_id => %s)",
                       (victim_conv,)).fetchone() == shift
    # a record of an assistant message, or of a message of another user here, is refused
    app.execute("select agentmem.forget_user(user_id => 'u1')")
    assistant = next(json.loads(x)["message_id"] for x in lines if json.loads(x)["type"] == "message"
                     and json.loads(x)["role"] == "assistant")
    assert sqlstate_of(app, "select agentmem.import_user(lines => %s::text[])",
                       (_edit(lines, ret, message_id=assistant),)) == "AM020"
    others = str(other["messages"][0])
    body_only = [x for x in lines if json.loads(x)["type"] != "retrieval"]
    alone = [body_only[0], json.dumps({**doc, "message_id": others}), json.dumps({"type": "end", "rows": 1})]
    assert sqlstate_of(app, "select agentmem.import_user(lines => %s::text[])", (alone,)) == "AM020"


def test_one_import_call_is_bounded_and_the_cli_sends_a_large_file_in_pieces(app, admin, app_url, tmp_path,
                                                                              monkeypatch):
    """Lines of more than 16 MiB in one call are refused (AM021) before any is parsed; agentmem import sends
    a file in pieces of at most that size, all in one transaction: a refusal in the last piece writes
    nothing, a file whose end row miscounts is refused."""
    limit = admin.execute("select agentmem_private.import_max_call_bytes()").fetchone()[0]
    assert limit == 16 * 1024 * 1024
    rich_user(app)
    lines = export(app)
    app.execute("select agentmem.forget_user(user_id => 'u1')")
    pad = json.dumps({"type": "conversation", "title": "x" * (1024 * 1024)})
    big = [lines[0], *[pad] * 16, json.dumps({"type": "end", "rows": 16})]
    assert sum(len(x.encode()) for x in big) > limit
    assert sqlstate_of(app, "select agentmem.import_user(lines => %s::text[])", (big,)) == "AM021"
    assert sqlstate_of(admin, "select agentmem.import_tenant(tenant_id => 'acme', lines => %s::text[])",
                       (big,)) == "AM021"
    from agentmem import transfer
    from agentmem.errors import ContentTooLarge, InvalidArgument
    monkeypatch.setattr(transfer, "MAX_CALL_BYTES", 3000)   # pieces of a few rows each
    sent = []
    real = transfer._pieces
    monkeypatch.setattr(transfer, "_pieces", lambda h, ls: (sent.append(p) or p for p in real(h, ls)))
    (tmp_path / "u1.jsonl").write_text("\n".join(lines) + "\n")
    with open(tmp_path / "u1.jsonl") as source:
        totals = transfer.import_file(app_url, source, tenant="acme")
    assert len(sent) > 3 and all(json.loads(p[-1]) == {"type": "end", "rows": len(p) - 2} for p in sent)
    assert totals["messages"] == 7 and totals["retrievals"] == 1 and totals["facts"] == 2
    assert body(export(app)) == body(lines)
    app.execute("select agentmem.forget_user(user_id => 'u1')")
    # a refusal in the last piece: nothing of the earlier pieces stays
    entry = _line_of(lines, "cache_entry")
    (tmp_path / "bad.jsonl").write_text("\n".join(_edit(lines, entry, answer="a" * 100_001)) + "\n")
    with open(tmp_path / "bad.jsonl") as source, pytest.raises(ContentTooLarge):
        transfer.import_file(app_url, source, tenant="acme")
    assert count(admin, "conversations") == 0 and count(admin, "messages") == 0
    # an end row that miscounts, and rows after the end row
    for bad in ([*lines[:-1], json.dumps({"type": "end", "rows": len(lines)})], [*lines, lines[1]]):
        (tmp_path / "cut.jsonl").write_text("\n".join(bad) + "\n")
        with open(tmp_path / "cut.jsonl") as source, pytest.raises(InvalidArgument):
            transfer.import_file(app_url, source, tenant="acme")
        assert count(admin, "conversations") == 0
