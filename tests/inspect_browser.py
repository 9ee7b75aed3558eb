"""The browser-test toolkit of the inspector (``agentmem inspect``): a live server and a real browser.

Used by tests/test_inspect.py, and by any page added to the inspector (the chat page). conftest.py
imports the fixtures, once: a session fixture imported into two test modules is two fixtures, and the
second would start Playwright inside the first one's event loop::

    def test_x(app_url, inspector, page):
        server = inspector()                    # create_app(app_url) under uvicorn on a free port
        page.login(server, "/overview", tenant="acme")   # spends the one-time token: a session cookie
        page.goto(server.url("/users", tenant="acme"))
        page.shot("users")                      # docs/inspect/users.png under `make screenshots`

- ``inspector(url=None, tenant=None, embedder="lexical", **create_app_kwargs)``: starts
  ``agentmem.inspect.app.create_app`` as the application login of the test's database (``app_url``),
  returns an ``InspectorServer`` (``.url(path, **query)``, ``.token``, ``.base``, ``.app``); stopped at
  the end of the test.
- ``browser``: one headless Chromium for the session: Debian's ``/usr/bin/chromium`` (or
  ``$AGENTMEM_CHROMIUM``) driven by Playwright, which never downloads a browser of its own. The test is
  skipped when neither Playwright nor the executable is there, unless ``AGENTMEM_REQUIRE_BROWSER=1``
  (CI sets it through .ci/run): then it fails.
- ``page``: a fresh browser context and page (a ``Page`` of Playwright with ``.login``, ``.shot``); every
  console error, uncaught exception and request to another host is recorded, and the test fails at its
  end if there was any. A test that provokes one on purpose wraps it in ``with page.expect_console_errors():``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlencode, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "docs" / "inspect"
CHROMIUM = os.environ.get("AGENTMEM_CHROMIUM", "/usr/bin/chromium")
# Headless, and nothing the browser would fetch on its own (updates, sync, field trials, QUIC).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class InspectorServer:
    """create_app(...) served by uvicorn in a thread on 127.0.0.1:port."""

    def __init__(self, app: Any, port: int):
        import uvicorn
        self.app, self.port = app, port
        self.base = f"http://127.0.0.1:{port}"
        self.token: str = app.state.auth.token
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                                lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> "InspectorServer":
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the inspector did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def url(self, path: str = "/", **query: Any) -> str:
        items = [(k, str(v)) for k, v in query.items() if v is not None]
        return self.base + path + (f"?{urlencode(items)}" if items else "")


@pytest.fixture
def inspector(app_url) -> Iterator[Any]:
    """Start inspectors on the test's database (default: as its application login); stopped after the test."""
    from agentmem.inspect.app import create_app
    started: list[InspectorServer] = []

    def _start(url: str | None = None, *, tenant: str | None = None, embedder: str = "lexical",
               **kwargs: Any) -> InspectorServer:
        port = _free_port()
        kwargs.setdefault("allowed_hosts", {f"127.0.0.1:{port}", f"localhost:{port}"})
        app = create_app(url or app_url, tenant=tenant, embedder=embedder, **kwargs)
        started.append(InspectorServer(app, port).start())
        return started[-1]

    yield _start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium for one test module: Playwright's sync API keeps an event loop running in this
    thread while it is open, so a session-wide browser would make every later asyncio.run() fail."""
    required = os.environ.get("AGENTMEM_REQUIRE_BROWSER") == "1"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if required:
            raise
        pytest.skip("playwright is not installed (make venv installs it)")
    if not Path(CHROMIUM).exists():
        if required:
            pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install -y chromium chromium-driver")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class _Recorder:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.expected = 0

    @contextlib.contextmanager
    def expect_console_errors(self) -> Iterator[list[str]]:
        """Errors logged inside the block are the test's to check (returned list), not a failure."""
        before = len(self.errors)
        self.expected += 1
        caught: list[str] = []
        try:
            yield caught
        finally:
            self.expected -= 1
            caught += self.errors[before:]
            del self.errors[before:]


@pytest.fixture
def page(browser) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(5000)
    recorder = _Recorder()

    def on_console(msg: Any) -> None:
        if msg.type in ("error", "warning") and not msg.text.startswith("[DOM]"):
            recorder.errors.append(f"console {msg.type} on {pg.url}: {msg.text}")

    def on_request(req: Any) -> None:
        host = urlsplit(req.url).hostname
        if req.url.startswith(("http://", "https://", "ws://", "wss://")) and host not in ("127.0.0.1", "localhost"):
            recorder.errors.append(f"request to another host from {pg.url}: {req.url}")

    pg.on("console", on_console)
    pg.on("pageerror", lambda exc: recorder.errors.append(f"uncaught exception on {pg.url}: {exc}"))
    pg.on("request", on_request)

    def login(server: InspectorServer, path: str = "/", **query: Any) -> Any:
        """Open path with the server's one-time token (a session cookie, then the page without the token)."""
        return pg.goto(server.url(path, **query, token=server.token))

    def shot(name: str) -> None:
        """docs/inspect/NAME.png, when AGENTMEM_SCREENSHOTS=1 (make screenshots)."""
        if os.environ.get("AGENTMEM_SCREENSHOTS") == "1":
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            pg.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)

    pg.login, pg.shot = login, shot
    pg.expect_console_errors = recorder.expect_console_errors
    pg.recorded_errors = recorder.errors
    yield pg
    errors = list(recorder.errors)
    context.close()
    assert not errors, "the browser reported errors:\n" + "\n".join(errors)
