"""The inspector (``agentmem inspect``, python/agentmem/inspect/) in a real browser: headless Chromium
(Debian's) driven by Playwright, against the live server as the application login of a real database.

Covers the issue's list: a stored message under its user and conversation, found by search, deleted with
its receipt and gone from search; a fact corrected with its history, agreeing with recall_facts(as_of);
a sampled hit marked wrong withdrawn (the next lookup misses, the report counts it) and the chart drawn;
stored markup rendered as text; a form without its CSRF token, a request without the one-time token and
an ungranted tenant refused; no console error on any page (the ``page`` fixture fails a test on any
console error, uncaught exception or request to another host). ``make screenshots`` writes
docs/inspect/*.png from these tests."""

from __future__ import annotations

import datetime as dt
import re
import urllib.error
import urllib.parse
import urllib.request

from helpers import vec

XSS = '<script>window.__pwned = 1; console.error("xss ran")</script><b>bold</b><img src=x onerror="window.__pwned = 2">'


def conversation(app, user, title):
    return app.execute("select agentmem.start_conversation(user_id => %s, title => %s)", (user, title)).fetchone()[0]


def message(app, cid, content, role="user", embedded=True):
    return app.execute("select message_id from agentmem.store_message(conversation_id => %s, role => %s, "
                       "content => %s, embedding => %s, model => 'nomic-embed-text')",
                       (cid, role, content, vec(content) if embedded else None)).fetchone()[0]


def fact(app, user, subject, text):
    return app.execute("select fact_id from agentmem.upsert_fact(user_id => %s, subject => %s, fact => %s, "
                       "embedding => %s)", (user, subject, text, vec(text))).fetchone()[0]


def cached(app, question, answer):
    app.execute("select agentmem.cache_store(question => %s, question_embedding => %s, answer => %s, "
                "source_ids => array['kb-12'], safe_to_share => true)", (question, vec(question), answer))


def lookup(app, question, like=None):
    return app.execute("select hit, kind from agentmem.cache_lookup(question => %s, question_embedding => %s)",
                       (question, vec(like or question))).fetchone()


def http(server, path, *, data=None, cookie=None, origin=None):
    """(status, body) of a request made without the browser (no session unless cookie is given)."""
    headers = {}
    if cookie:
        headers["Cookie"] = cookie
    if origin:
        headers["Origin"] = origin
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    req = urllib.request.Request(server.base + path, data=body, headers=headers)
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def session_cookie(page) -> str:
    cookie = next(c for c in page.context.cookies() if c["name"] == "agentmem_inspect")
    return f"agentmem_inspect={cookie['value']}"


# -- a message: under its user and conversation, found, deleted with a receipt, gone -------------

def test_a_message_under_its_user_and_conversation_found_by_search_deleted_with_a_receipt(app, inspector, page):
    cid = conversation(app, "alice", "Billing")
    message(app, cid, "Invoice INV-2291 was charged twice")
    message(app, cid, "Sorry about that, a refund is on its way", role="assistant")
    message(app, cid, "The refund for order 7731 never arrived", embedded=False)
    fact(app, "alice", "city", "Alice lives in Lyon")
    server = inspector()
    page.login(server, "/", all=1)
    assert page.inner_text("#tenants").count("every tenant") == 1       # the suite's login: all tenants
    page.fill("input[name=tenant]", "acme")
    page.click("button:has-text('Open')")
    assert page.inner_text("#count-messages") == "3" and page.inner_text("#count-users") == "1"
    assert page.inner_text("#backlog").split("\n")[1].split("\t")[0] == "1"   # the unembedded message waits
    page.shot("overview")
    page.click("#users >> text=alice")
    assert page.inner_text("#scope-user") == "alice"
    page.shot("user")
    page.click("text=Billing")
    rows = page.inner_text("#messages")
    assert "Invoice INV-2291 was charged twice" in rows and "not yet (found by words only)" in rows
    assert "nomic-embed-text" in page.inner_text("#message-0")
    page.shot("conversation")

    page.click("text=search")
    page.fill("input[name=q]", "INV-2291 charged")
    page.select_option("select[name=mode]", "words")
    page.click("#search-form button")
    hits = page.inner_text("#message-hits")
    assert "Invoice INV-2291 was charged twice" in hits and "\twords\t" in hits
    page.fill("input[name=q]", "refund never arrived")
    page.select_option("select[name=mode]", "hybrid")
    page.click("#search-form button")
    assert "The refund for order 7731 never arrived" in page.inner_text("#message-hits")
    page.shot("search")

    page.goto(server.url("/conversation", tenant="acme", id=cid, user="alice"))
    page.click("#message-0 button:has-text('delete')")
    assert page.inner_text("h1") == "Message deleted"
    receipt = page.inner_text("#receipt-rows")
    assert re.search(r"messages\s+1", receipt)
    page.shot("receipt")
    page.goto(server.url("/search", tenant="acme", user="alice", q="INV-2291 charged", mode="words"))
    assert "INV-2291" not in page.inner_text("#message-hits")
    assert "No message matched" in page.inner_text("#message-hits")
    assert app.execute("select count(*) from agentmem.search_messages(user_id => 'alice', "
                       "query_text => 'INV-2291')").fetchone() == (0,)
    page.goto(server.url("/access", tenant="acme"))
    assert "delete_message" in page.inner_text("#access")


# -- a fact: corrected on the page, its history, recall_facts(as_of) agrees ------------------------

def test_a_fact_corrected_on_the_page_shows_its_new_text_and_history_and_recall_as_of_agrees(app, inspector, page):
    fid = fact(app, "alice", "city", "Alice lives in Lyon")
    before = app.execute("select now() + interval '2 milliseconds'").fetchone()[0]
    app.execute("select pg_sleep(0.02)")
    server = inspector()
    page.login(server, "/facts", tenant="acme", user="alice")
    page.shot("facts")
    page.fill("form.correct input[name=fact]", "Alice lives in Paris")
    page.click("form.correct button")
    assert page.inner_text("h1") == "Fact corrected"
    assert page.inner_text("#new-text") == "Alice lives in Paris"
    page.click("#back")
    assert page.inner_text("tr.fact-current").count("Alice lives in Paris") == 1
    assert "Alice lives in Lyon" in page.inner_text("tr.fact-corrected")
    page.click("text=history")
    assert "Alice lives in Lyon" in page.inner_text("#history")
    page.shot("fact-history")
    # the page's search as of a time shows what recall_facts(as_of) says then (a correction by hand
    # rewrites the fact for its whole validity: as of before it, the corrected text is answered too)
    for when in (before, None):
        query = {"as_of": when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]} if when else {}
        page.goto(server.url("/search", tenant="acme", user="alice", q="Alice lives", mode="words", **query))
        sql = app.execute("select fact from agentmem.recall_facts(user_id => 'alice', query_text => 'Alice lives', "
                          "as_of => %s::timestamptz)", (query.get("as_of") and query["as_of"] + "Z",)).fetchall()
        shown = page.inner_text("#fact-hits")
        assert sql and all(f in shown for (f,) in sql), (when, sql, shown)
        assert ("Lyon" in shown) == any("Lyon" in f for (f,) in sql)
    assert "Alice lives in Paris" in page.inner_text("#fact-hits")
    assert app.execute("select count(*) from agentmem.fact_history(fact_id => %s)", (fid,)).fetchone() == (1,)


# -- pins and use --------------------------------------------------------------------------------------

def test_a_message_and_a_fact_pinned_and_unpinned_on_their_pages_show_their_pin_and_use(app, admin, inspector, page):
    cid = conversation(app, "alice", "Keep")
    mid = message(app, cid, "The door code is 4711")
    fid = fact(app, "alice", "city", "Alice lives in Lyon")
    app.execute("select agentmem.search_messages(user_id => 'alice', query_text => 'door code', k => 1)")
    admin.execute("select agentmem.apply_use_log()")
    server = inspector()
    page.login(server, "/conversation", tenant="acme", id=cid, user="alice")
    row = page.inner_text("#message-0")
    assert "\t1 (last " in row and "\tno" in row           # used once, not pinned
    page.click("#message-0 button:has-text('pin')")
    assert page.inner_text("h1").startswith("Conversation") and "pinned" in page.inner_text("#message-0 td.pin")
    pinned = app.execute("select pinned_at from agentmem.list_messages(conversation_id => %s)", (cid,)).fetchone()[0]
    assert pinned is not None
    page.click("#message-0 button:has-text('unpin')")
    assert "pinned" not in page.inner_text("#message-0 td.pin")
    assert admin.execute("select pinned_at from agentmem.messages where message_id = %s", (mid,)).fetchone() == (None,)

    page.goto(server.url("/facts", tenant="acme", user="alice"))
    page.click("tr.fact-current button:has-text('pin')")
    assert "pinned" in page.inner_text("tr.fact-current td.pin")
    assert admin.execute("select pinned_at is not null from agentmem.facts where fact_id = %s", (fid,)).fetchone() == (True,)
    page.click("tr.fact-current button:has-text('unpin')")
    assert "pinned" not in page.inner_text("tr.fact-current td.pin")


# -- the answer cache's review loop -----------------------------------------------------------------

def test_a_sampled_hit_marked_wrong_is_withdrawn_counted_in_the_report_and_the_chart_renders(app, inspector, page):
    cached(app, "Can I get a refund after 30 days?", "No: refunds close after 30 days.")
    cached(app, "How do I reset my password?", "Use the reset link on the login page.")
    assert lookup(app, "Can I get a refund after 30 days?") == (True, "exact")
    assert lookup(app, "How do I reset my password?") == (True, "exact")
    server = inspector()
    page.login(server, "/cache", tenant="acme")
    assert "kb-12" in page.inner_text("#entries") and page.inner_text("#entries").count("served") == 2
    assert page.locator("#no-chart").count() == 1                   # nothing reviewed yet
    row = page.locator("#sample tr", has_text="How do I reset my password?")
    row.locator("button[value=right]").click()
    assert "Marked right" in page.inner_text("#review-result")
    page.shot("cache")
    row = page.locator("#sample tr", has_text="Can I get a refund after 30 days?")
    row.locator("button[value=wrong]").click()
    assert "withdrawn" in page.inner_text("#review-result")
    assert "withdrawn" in page.inner_text("#entries")
    assert page.locator("#net-value-chart polyline").count() == 1
    assert page.locator("#net-value-chart circle").count() >= 2
    page.shot("cache-withdrawn")
    assert lookup(app, "Can I get a refund after 30 days?")[0] is False
    assert lookup(app, "How do I reset my password?") == (True, "exact")
    report = app.execute("select reviewed, reviewed_wrong, withdrawn from agentmem.cache_report(cost_uncached => 1, "
                         "cost_wrong => 10) where threshold between 0.949 and 0.951").fetchone()
    assert report == (2, 1, 1)
    assert re.search(r"0\.95\t\d+\t\d+\t2\t1\t", page.inner_text("#report"))


# -- stored text is data ------------------------------------------------------------------------------

def test_stored_markup_renders_as_text_and_never_runs(app, inspector, page):
    user = "<i>mallory</i>"
    cid = conversation(app, user, XSS)
    message(app, cid, XSS)
    fact(app, user, "<b>subject</b>", XSS)
    cached(app, XSS, XSS)
    lookup(app, XSS)
    server = inspector()
    page.login(server, "/overview", tenant="acme")
    for path, query, selector in [("/overview", {}, "#users"), ("/users", {}, "#users"),
                                  ("/user", {"user": user}, "#conversations"),
                                  ("/conversation", {"id": cid}, "#messages"),
                                  ("/facts", {"user": user}, "#facts"),
                                  ("/search", {"user": user, "q": "bold script", "mode": "words"}, "#message-hits"),
                                  ("/cache", {}, "#entries"), ("/cache", {}, "#sample")]:
        page.goto(server.url(path, tenant="acme", **query))
        text = page.inner_text(selector)
        assert (XSS in text) or (user in text), (path, selector, text)
        assert page.locator(f"{selector} b, {selector} i, {selector} img, {selector} script").count() == 0, path
        assert page.evaluate("window.__pwned") is None, path
    page.goto(server.url("/user", tenant="acme", user=user))
    assert page.inner_text("#scope-user") == user


# -- refusals: the one-time token, CSRF, an ungranted tenant -----------------------------------------

def test_a_request_without_the_one_time_token_and_a_spent_token_are_refused(app, inspector):
    server = inspector()
    status, body = http(server, "/overview?tenant=acme")
    assert status == 403 and "no session" in body
    assert http(server, "/?token=wrong")[0] == 403
    assert http(server, f"/static/inspect.css")[0] == 403
    opener = urllib.request.build_opener(NoRedirect)
    resp = opener.open(server.url("/overview", tenant="acme", token=server.token))
    assert resp.status == 303 and "token" not in resp.headers["location"]
    cookie = resp.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert http(server, f"/?token={server.token}")[0] == 403     # spent
    assert http(server, "/overview?tenant=acme", cookie=cookie.split(";")[0])[0] == 200
    # another Host (DNS rebinding) is refused even with the session
    req = urllib.request.Request(server.url("/overview", tenant="acme"),
                                 headers={"Cookie": cookie.split(";")[0], "Host": f"evil.example:{server.port}"})
    try:
        urllib.request.urlopen(req)
        raise AssertionError("a foreign Host was served")
    except urllib.error.HTTPError as exc:
        assert exc.code == 403


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None

    def http_error_303(self, req, fp, code, msg, headers):
        return fp


def test_a_form_posted_without_its_csrf_token_or_from_another_site_is_refused(app, inspector, page):
    cid = conversation(app, "alice", "Billing")
    mid = message(app, cid, "Invoice INV-2291 was charged twice")
    server = inspector()
    page.login(server, "/conversation", tenant="acme", id=cid)
    cookie = session_cookie(page)
    token = page.get_attribute("#message-0 form[action*='/message/delete'] input[name=csrf_token]", "value")
    form = {"message_id": str(mid), "conversation_id": str(cid)}
    path = "/message/delete?tenant=acme"
    status, body = http(server, path, data=form, cookie=cookie)
    assert status == 403 and "CSRF" in body
    assert http(server, path, data={**form, "csrf_token": "0" * 64}, cookie=cookie)[0] == 403
    other = page.get_attribute("#export-form input[name=csrf_token]", "value") if page.locator(
        "#export-form").count() else None
    assert other is None or http(server, path, data={**form, "csrf_token": other}, cookie=cookie)[0] == 403
    assert http(server, path, data={**form, "csrf_token": token}, cookie=cookie, origin="http://evil.example")[0] == 403
    assert http(server, path, data={**form, "csrf_token": token})[0] == 403          # no session
    assert app.execute("select count(*) from agentmem.list_messages(conversation_id => %s)", (cid,)).fetchone() == (1,)
    # the page's own form, with its token, works
    status, body = http(server, path, data={**form, "csrf_token": token}, cookie=cookie)
    assert status == 200 and "Message deleted" in body
    assert app.execute("select count(*) from agentmem.list_messages(conversation_id => %s)", (cid,)).fetchone() == (0,)


def test_a_tenant_the_login_holds_no_grant_of_is_refused(app, admin, server, dbname, inspector, page, roles):
    login = roles("insp")
    admin.execute("select agentmem.grant_tenant(role_name => %s, tenant_id => 'acme')", (login,))
    admin.execute("select agentmem.set_tenant(tenant_id => 'globex')")
    admin.execute("select agentmem.start_conversation(user_id => 'bob', title => 'secret of globex')")
    conversation(app, "alice", "Billing")
    server_ = inspector(server.db_url(dbname, login))
    page.login(server_, "/")
    assert page.inner_text("#tenants").split("\n")[1].startswith("acme")
    assert "globex" not in page.inner_text("#tenants")
    page.click("#tenants >> text=acme")
    assert page.inner_text("#count-users") == "1"
    assert page.locator("#health-note").count() == 1            # agentmem.health is the DBA's
    with page.expect_console_errors() as errors:
        response = page.goto(server_.url("/overview", tenant="globex"))
        assert response.status == 403
        assert page.inner_text("#error-sqlstate") == "AM041"
        for path in ("/users", "/cache", "/access"):
            assert page.goto(server_.url(path, tenant="globex")).status == 403
        response = page.goto(server_.url("/user", tenant="globex", user="bob"))
        assert response.status == 403 and "secret of globex" not in page.content()
    assert errors and all("403" in e for e in errors)


# -- every page, paging by keys, export, erasure ------------------------------------------------------

def test_every_page_loads_without_a_console_error_and_lists_page_by_keys(app, inspector, page):
    for i in range(52):
        conversation(app, f"user-{i:03d}", f"chat {i}")
    cid = conversation(app, "alice", "Billing")
    message(app, cid, "Invoice INV-2291 was charged twice")
    fid = fact(app, "alice", "city", "Alice lives in Lyon")
    fact(app, "alice", "city", "Alice lives in Paris")
    cached(app, "Can I get a refund after 30 days?", "No: refunds close after 30 days.")
    lookup(app, "Can I get a refund after 30 days?")
    server = inspector()
    page.login(server, "/", all=1)
    visited = [("/", {"all": 1}), ("/overview", {}), ("/users", {}), ("/user", {"user": "alice"}),
               ("/conversation", {"id": cid, "user": "alice"}), ("/facts", {"user": "alice"}),
               ("/fact", {"id": fid, "user": "alice"}), ("/cache", {}), ("/access", {}),
               ("/erase", {"user": "alice"}), ("/user", {"user": "nobody"})]
    visited += [("/search", {"user": "alice", "q": "invoice charged", "mode": mode, "since": "2020-01-01T00:00",
                             "until": "2100-01-01T00:00"}) for mode in ("words", "meaning", "hybrid")]
    visited += [("/search", {"user": "alice", "q": "Alice", "as_of": "2100-01-01T00:00"}),
                ("/search", {"user": "nobody", "q": "anything"})]
    for path, query in visited:
        response = page.goto(server.url(path, tenant="acme", **query))
        assert response.status == 200, (path, query, page.inner_text("main"))
    assert "Nothing stored" in page.inner_text("#nothing-stored")
    page.goto(server.url("/search", tenant="acme", user="alice", q="zebra", mode="words"))
    assert "Nothing matched" in page.inner_text("#nothing-matched")
    # users, 53 of them: two pages by key
    page.goto(server.url("/users", tenant="acme"))
    first = page.locator("#users tr").count() - 1
    page.click("#next-page")
    second = page.locator("#users tr").count() - 1
    assert (first, second) == (50, 3) and "after=user-048" in page.url
    page.shot("users")
    page.goto(server.url("/access", tenant="acme"))
    page.shot("access-log")


def test_a_users_export_downloads_and_erasure_needs_the_typed_user_id(app, inspector, page):
    cid = conversation(app, "alice", "Billing")
    message(app, cid, "Invoice INV-2291 was charged twice")
    server = inspector()
    page.login(server, "/user", tenant="acme", user="alice")
    with page.expect_download() as download:
        page.click("#export")
    lines = open(download.value.path(), encoding="utf-8").read().splitlines()
    assert '"format": "agentmem-export"' in lines[0].replace('":"', '": "') and "INV-2291" in "\n".join(lines)
    assert download.value.suggested_filename == "agentmem-alice.jsonl"
    page.click("text=erase…")
    page.shot("erase")
    with page.expect_console_errors():
        page.fill("input[name=confirm]", "alic")
        page.click("#erase-form button")
        # the refusal's page, its 400 logged by the browser, before the block ends (the log comes
        # as the response does, which the click does not wait for)
        page.wait_for_selector("#mismatch")
    assert page.locator("#mismatch").count() == 1
    assert app.execute("select count(*) from agentmem.list_conversations(user_id => 'alice')").fetchone() == (1,)
    page.fill("input[name=confirm]", "alice")
    page.click("#erase-form button")
    assert page.inner_text("h1") == "User erased"
    assert re.search(r"messages\s+1", page.inner_text("#receipt-rows"))
    assert app.execute("select count(*) from agentmem.list_conversations(user_id => 'alice')").fetchone() == (0,)
    page.goto(server.url("/access", tenant="acme"))
    assert "forget_user" in page.inner_text("#access") and "export_user" in page.inner_text("#access")


# -- the command -------------------------------------------------------------------------------------

def test_agentmem_inspect_listens_on_loopback_and_prints_a_url_with_a_one_time_token(app_url):
    import subprocess
    import sys
    from pathlib import Path

    from helpers import wait_until
    agentmem = str(Path(sys.executable).with_name("agentmem"))
    proc = subprocess.Popen([agentmem, "inspect", "--database-url", app_url, "--tenant", "acme", "--port", "0",
                             "--embedder", "lexical"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        printed: list[str] = []

        def url() -> str | None:
            line = proc.stdout.readline()
            printed.append(line)
            found = re.search(r"http://127\.0\.0\.1:(\d+)/overview\?tenant=acme&token=[\w-]+", line)
            return found.group(0) if found else None
        first = wait_until(url, timeout=30, what="the URL")
        parts = urllib.parse.urlsplit(first)
        base = f"http://{parts.netloc}"

        def answers() -> bool:
            try:
                urllib.request.urlopen(base + "/")
            except urllib.error.HTTPError:
                return True
            except OSError:
                return False
            return True
        wait_until(answers, timeout=30, what="the server")
        resp = urllib.request.build_opener(NoRedirect).open(first)
        assert resp.status == 303
        cookie = resp.headers["set-cookie"].split(";")[0]
        req = urllib.request.Request(base + "/overview?tenant=acme", headers={"Cookie": cookie})
        with urllib.request.urlopen(req) as page:
            assert page.status == 200 and "Tenant acme" in page.read().decode()
        try:
            urllib.request.urlopen(first)
            raise AssertionError("the token worked twice")
        except urllib.error.HTTPError as exc:
            assert exc.code == 403
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_dba_login_sees_the_background_jobs_of_agentmem_health(admin_url, inspector, page):
    server = inspector(admin_url)
    page.login(server, "/overview", tenant="acme")
    assert page.locator("#health-note").count() == 0
    assert "embedding_queue" in page.inner_text("#health")
