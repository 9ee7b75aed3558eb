"""The inspector's own pages: each handler is a few driver calls (one agentmem.* function each) and a template."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from .app import inspector_of, memory_for, render, url_for_page

# Nav entries beyond the ones base.html always shows (Overview, Users, Answer cache, Access log).
NAV: list[tuple[str, str]] = []


def home(request: Request) -> Response:
    """The tenants this login may open; with --tenant, that tenant's overview."""
    insp = inspector_of(request)
    chosen = request.query_params.get("tenant") or insp.default_tenant
    if chosen:
        return RedirectResponse(url_for_page(request, "/overview", tenant=chosen), status_code=303)
    return render(request, "home.html", title="Tenants", tenants=[])


def overview(request: Request) -> Response:
    mem, tenant = memory_for(request)
    current = mem.current_tenant()  # set_tenant refuses (AM041) a tenant this login holds no grant of
    return render(request, "overview.html", title=f"Tenant {tenant}", current=current)


def routes() -> list[BaseRoute]:
    return [
        Route("/", home),
        Route("/overview", overview),
    ]
