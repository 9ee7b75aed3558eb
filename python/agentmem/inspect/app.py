"""The inspector's web application: ``create_app(...)`` builds it (Starlette, Jinja2 on the server).

Every page is one or a few calls of the driver (``agentmem.client.Memory``), each one
``select ... from agentmem.fn(name => ...)`` as the database login of ``--database-url``, so a page can
do nothing that login could not do in psql; the tenant of a page (``?tenant=``) is checked by the
database (``set_tenant``: AM041 for a tenant the login holds no grant of, shown as 403).

Adding pages (the chat page of issue 39 does): either pass ``extra_routes=[Route(...), ...]`` (and
``extra_nav=[("Chat", "/chat")]``) to ``create_app``, or write a module named in ``PLUGINS`` (e.g.
``agentmem/inspect/chat.py``) with ``routes() -> list[BaseRoute]`` and optionally
``NAV = [("Chat", "/chat")]``: create_app imports it when it exists. A page handler uses::

    from agentmem.inspect.app import inspector_of, memory_for, render
    from agentmem.inspect.auth import csrf_field, verify_csrf

    async def chat(request):
        mem, tenant = memory_for(request)              # the ?tenant= of the request, checked by the database
        if request.method == "POST":
            form = await verify_csrf(request)           # 403 without the form's CSRF token
        return render(request, "chat.html", title="Chat", rows=...)

Templates extend ``base.html`` (blocks ``title`` and ``content``) and live in ``templates/``; in a
template, ``{{ csrf_field(request) }}`` (or ``csrf_field(request, "/chat/send")`` for a form whose
action is another path) goes inside every ``<form method="post">``, ``{{ url("/chat", user=u) }}``
builds a link that keeps the tenant, and stored text is always printed with ``{{ text }}``
(autoescaped; never ``|safe``). Handlers may be ``def`` (run in a thread: the driver is synchronous).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable, Sequence, TypeVar
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

import psycopg

from ..calls_sync import Calls
from ..client import Memory
from ..errors import AgentmemError, InsufficientPrivilege, InvalidTenant, NotFound, TenantNotSet, translate
from ..params import check_params
from ..statement import Sql
from . import auth as _auth

R = TypeVar("R")
HERE = Path(__file__).resolve().parent
# Modules that add pages when they exist: each has routes() and optionally NAV.
PLUGINS = ("agentmem.inspect.chat",)


@dataclass
class Inspector:
    """What every page shares: the database login's pool, the embedder, the templates, the nav."""

    database_url: str
    memory: Memory
    embedder_kind: str = "auto"
    ollama_host: str | None = None
    default_tenant: str | None = None
    nav: list[tuple[str, str]] = field(default_factory=list)
    env: Environment | None = None
    _embedders: dict[str, Callable[[list[str]], Sequence[Any]]] = field(default_factory=dict)
    _models: dict[str, dict] = field(default_factory=dict)
    _defaults: dict[str, tuple[str, float]] = field(default_factory=dict)

    def for_tenant(self, tenant: str) -> Memory:
        return self.memory.for_tenant(tenant)

    def default_model(self, mem: Memory) -> str:
        """The tenant's default embedding model (tenant_overview), remembered for a minute."""
        now = time.monotonic()
        cached = self._defaults.get(mem.tenant)
        if cached is None or now - cached[1] > 60:
            cached = (mem.tenant_overview().default_model, now)
            self._defaults[mem.tenant] = cached
        return cached[0]

    def embed(self, mem: Memory, model: str | None, texts: list[str], *, query: bool) -> tuple[str, list[Any]]:
        """(model, vectors): texts embedded in model (None: the tenant's default) with its registered prefix.

        The embedder is --embedder's: Ollama, the offline lexical one, or auto (Ollama where one answers)."""
        from ..worker import EMBEDDERS
        name = model or self.default_model(mem)
        if name not in self._models:
            self._models[name] = mem.get_model(name)
        info = self._models[name]
        if name not in self._embedders:
            self._embedders[name] = EMBEDDERS[self.embedder_kind](name, info["dimension"], self.ollama_host)
        prefix = (info.get("query_prefix") if query else info.get("document_prefix")) or ""
        return name, list(self._embedders[name]([prefix + t for t in texts]))

    def login_calls(self) -> "LoginCalls":
        """The calls that need no tenant (my_tenants), run as the login without set_tenant."""
        return LoginCalls(self.memory.pool)


class LoginCalls(Calls):
    """The driver's literal calls run on a pooled connection without set_tenant: for the functions that read
    the login's own state and need no tenant (my_tenants, tenant_binding_mode)."""

    def __init__(self, pool: Any):
        self.pool = pool
        self.embedder = None

    def run(self, stmt: Sql[R], conn: Any = None) -> R:
        check_params(stmt.params)
        try:
            with self.pool.connection() as c, c.transaction(), c.cursor(row_factory=stmt.row_factory()) as cur:
                cur.execute(stmt.query, stmt.params)
                found = cur.fetchall()
        except psycopg.Error as exc:
            raise translate(exc) from exc
        return stmt.result(found)


def inspector_of(request: Request) -> Inspector:
    return request.app.state.inspector


def tenant_of(request: Request) -> str:
    tenant = request.query_params.get("tenant") or request.path_params.get("tenant")
    if not tenant:
        raise HTTPException(400, "no tenant: open a page from the list of tenants")
    return tenant


def memory_for(request: Request) -> tuple[Memory, str]:
    """The client of the request's tenant (?tenant=): the database refuses a tenant not granted (403)."""
    tenant = tenant_of(request)
    return inspector_of(request).for_tenant(tenant), tenant


def url_for_page(request: Request, path: str, **params: Any) -> str:
    """A link to path keeping the request's tenant; None-valued params are left out."""
    query = {"tenant": request.query_params.get("tenant")} if "tenant" not in params else {}
    query.update(params)
    items = [(k, str(v)) for k, v in query.items() if v is not None and v != ""]
    return path + (f"?{urlencode(items)}" if items else "")


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A page: the template rendered with autoescape, the nav and the helpers (csrf_field, url)."""
    insp = inspector_of(request)
    assert insp.env is not None
    tenant = request.query_params.get("tenant")
    html = insp.env.get_template(template).render(
        request=request, tenant=tenant, nav=insp.nav,
        url=lambda path, **params: url_for_page(request, path, **params), **context)
    return HTMLResponse(html, status_code=status_code)


def when(value: dt.datetime | None) -> str:
    """A time as the page shows it: UTC, to the second."""
    if value is None:
        return "-"
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(HERE / "templates")),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.globals["csrf_field"] = _auth.csrf_field
    env.filters["when"] = when
    return env


def _error_page(request: Request, status: int, title: str, message: str, sqlstate: str | None = None) -> Response:
    try:
        return render(request, "error.html", status_code=status, title=title, message=message, sqlstate=sqlstate)
    except Exception:  # noqa: BLE001 - an error page must not fail
        return HTMLResponse(f"<!doctype html><title>{status}</title><p>{title}</p>", status_code=status)


async def _agentmem_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AgentmemError)
    if isinstance(exc, (InsufficientPrivilege, InvalidTenant, TenantNotSet)):
        return _error_page(request, 403, "Not permitted", str(exc), exc.sqlstate)
    if isinstance(exc, NotFound):
        return _error_page(request, 404, "Not found", str(exc), exc.sqlstate)
    return _error_page(request, 400, "Refused by agentmem", str(exc), exc.sqlstate)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error_page(request, exc.status_code, "Refused" if exc.status_code == 403 else "Error", str(exc.detail))


def plugin_routes() -> tuple[list[BaseRoute], list[tuple[str, str]]]:
    """The routes and nav entries of the PLUGINS modules that exist."""
    routes: list[BaseRoute] = []
    nav: list[tuple[str, str]] = []
    for name in PLUGINS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        routes += list(module.routes())
        nav += list(getattr(module, "NAV", []))
    return routes, nav


def create_app(database_url: str, *, tenant: str | None = None, token: str | None = None,
               embedder: str = "auto", ollama_host: str | None = None,
               extra_routes: Iterable[BaseRoute] = (), extra_nav: Iterable[tuple[str, str]] = (),
               allowed_hosts: Iterable[str] = (), pool_size: int = 4, memory: Memory | None = None) -> Starlette:
    """The inspector as an ASGI app, connected as the login of database_url.

    tenant: the tenant the root page opens (default: the list of the login's tenants); token: the
    one-time token (default: a random one, in ``app.state.auth.token``); embedder: ollama, lexical or
    auto, for searching by meaning and correcting facts; allowed_hosts: the Host headers accepted
    (``agentmem inspect`` passes its own address; empty: any). extra_routes / extra_nav: more pages."""
    from . import pages
    mem = memory or Memory.connect(database_url, tenant=tenant or "-", max_size=pool_size)
    routes, nav = plugin_routes()
    inspector = Inspector(database_url=database_url, memory=mem, embedder_kind=embedder, ollama_host=ollama_host,
                          default_tenant=tenant, env=_environment())
    inspector.nav = list(pages.NAV) + nav + list(extra_nav)
    all_routes = list(pages.routes()) + routes + list(extra_routes) + [
        Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static")]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if memory is None:  # the pool this app opened
            mem.close()

    app = Starlette(routes=all_routes, lifespan=lifespan,
                    exception_handlers={AgentmemError: _agentmem_error, HTTPException: _http_error})
    app.state.inspector = inspector
    app.state.auth = _auth.Auth(token, allowed_hosts)
    app.add_middleware(_auth.AuthMiddleware, auth=app.state.auth)
    app.add_middleware(ServerTiming)
    return app


class ServerTiming:
    """Pure ASGI middleware: the server's time for a request (until its response starts) in a
    ``Server-Timing: app;dur=MS`` header (what bench/bench_inspect.py reports)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed(message: dict) -> None:
            if message["type"] == "http.response.start":
                ms = (time.perf_counter() - started) * 1000
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"server-timing", f"app;dur={ms:.1f}".encode())]}
            await send(message)

        await self.app(scope, receive, timed)
