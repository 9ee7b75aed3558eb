"""The inspector's own pages: each handler is a few driver calls (one agentmem.* function each) and a template.

Handlers are plain functions (Starlette runs them in a thread: the driver is synchronous); a POST
handler reads its form through ``verify_csrf`` first."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from decimal import Decimal, InvalidOperation
from typing import Any

import psycopg
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..admin import Admin
from ..errors import InsufficientPrivilege
from .app import inspector_of, memory_for, render, url_for_page
from .auth import verify_csrf

# Nav entries beyond the ones base.html always shows (Overview, Users, Answer cache, Access log).
NAV: list[tuple[str, str]] = []
PAGE = 50                 # rows per page of every list
SAMPLE = 20               # hits per review sample


# -- helpers -----------------------------------------------------------------------------------

def _user(request: Request) -> str:
    user = request.query_params.get("user")
    if not user:
        raise HTTPException(400, "no user: open a user from the list of users")
    return user


def _uuid(value: Any, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise HTTPException(400, f"{what} is not an id") from None


def _time(request: Request, name: str) -> dt.datetime | None:
    """A time from a form field (datetime-local, read as UTC), or None when empty."""
    text = (request.query_params.get(name) or "").strip()
    if not text:
        return None
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise HTTPException(400, f"{name} is not a time (YYYY-MM-DDTHH:MM)") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def _local(value: dt.datetime | None) -> str:
    """A time as a datetime-local input's value (UTC, to the millisecond), or "" for None."""
    if value is None:
        return ""
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def _money(request: Request, name: str, default: str) -> Decimal:
    text = request.query_params.get(name) or default
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise HTTPException(400, f"{name} is not a number") from None
    if not value.is_finite() or value < 0:
        raise HTTPException(400, f"{name} must be a number of 0 or more")
    return value


def _next(rows: list, size: int = PAGE) -> str | None:
    """The cursor of the next page, when this page is full."""
    return getattr(rows[-1], "cursor", None) if len(rows) == size else None


# -- pages -------------------------------------------------------------------------------------

def home(request: Request) -> Response:
    """The tenants this login holds grants of; with --tenant, that tenant's overview."""
    insp = inspector_of(request)
    if insp.default_tenant and "all" not in request.query_params:
        return RedirectResponse(url_for_page(request, "/overview", tenant=insp.default_tenant), status_code=303)
    grants = insp.login_calls().my_tenants()
    return render(request, "home.html", title="Tenants", tenants=grants,
                  mode=grants[0].binding_mode if grants else insp.login_calls().tenant_binding_mode())


def overview(request: Request) -> Response:
    mem, tenant = memory_for(request)
    summary = mem.tenant_overview()    # set_tenant first: AM041 (403) for a tenant this login holds no grant of
    health: list[dict] | None = None
    insp = inspector_of(request)
    if insp.may_read_health is not False:   # asked once: an application login may not read it
        try:
            with mem.pool.connection() as conn:
                health = Admin(conn).health()   # agentmem.health: the DBA's view, across tenants
            insp.may_read_health = True
        except (InsufficientPrivilege, psycopg.errors.InsufficientPrivilege):
            insp.may_read_health = False
    users = mem.list_users(page_size=10)
    return render(request, "overview.html", title=f"Tenant {tenant}", o=summary, health=health, users=users)


def users(request: Request) -> Response:
    mem, tenant = memory_for(request)
    after = request.query_params.get("after") or None
    rows = mem.list_users(after=after, page_size=PAGE)
    return render(request, "users.html", title="Users", rows=rows, after=after, next=_next(rows))


def user(request: Request) -> Response:
    mem, tenant = memory_for(request)
    user_id = _user(request)
    after = request.query_params.get("after") or None
    rows = mem.list_conversations(user_id, after=after, page_size=PAGE)
    return render(request, "user.html", title=f"User {user_id}", user=user_id, rows=rows, after=after,
                  next=_next(rows), pager_params={"user": user_id})


def conversation(request: Request) -> Response:
    mem, tenant = memory_for(request)
    cid = _uuid(request.query_params.get("id"), "the conversation")
    after_text = request.query_params.get("after")
    after = int(after_text) if after_text and after_text.isdigit() else None
    rows = mem.list_messages(cid, after=after, page_size=PAGE)
    user_id = request.query_params.get("user") or (rows[0].user_id if rows else None)
    return render(request, "conversation.html", title="Conversation", cid=cid, rows=rows, user=user_id,
                  after=after, next=rows[-1].message_index if len(rows) == PAGE else None,
                  pager_params={"id": cid, "user": user_id})


async def delete_message(request: Request) -> Response:
    form = await verify_csrf(request)
    mem, tenant = memory_for(request)
    mid = _uuid(form.get("message_id"), "the message")
    receipt = await run_in_threadpool(mem.delete_message, mid)
    back = url_for_page(request, "/conversation", id=form.get("conversation_id"), user=form.get("user"))
    return render(request, "receipt.html", title="Message deleted", what="The message was deleted.",
                  receipt=receipt, counts=receipt.rows_affected, back=back, back_label="back to the conversation")


def facts(request: Request) -> Response:
    mem, tenant = memory_for(request)
    user_id = _user(request)
    after = request.query_params.get("after") or None
    rows = mem.list_facts(user_id, include_superseded=True, after=after, page_size=PAGE)
    return render(request, "facts.html", title=f"Facts of {user_id}", user=user_id, rows=rows, after=after,
                  next=_next(rows), pager_params={"user": user_id})


def fact_history(request: Request) -> Response:
    mem, tenant = memory_for(request)
    fid = _uuid(request.query_params.get("id"), "the fact")
    rows = mem.fact_history(fid)
    return render(request, "fact_history.html", title="Fact history", user=request.query_params.get("user"),
                  fid=fid, rows=rows)


async def update_fact(request: Request) -> Response:
    form = await verify_csrf(request)
    mem, tenant = memory_for(request)
    fid = _uuid(form.get("fact_id"), "the fact")
    text = str(form.get("fact") or "")
    model = str(form.get("model") or "") or None
    insp = inspector_of(request)

    def run() -> Any:
        _, vectors = insp.embed(mem, model, [text], query=False)
        return mem.update_fact(fid, text, vectors[0])
    receipt = await run_in_threadpool(run)
    back = url_for_page(request, "/facts", user=form.get("user"))
    return render(request, "receipt.html", title="Fact corrected", what="The fact was corrected; its old "
                  "text is in its history (status corrected).", receipt=receipt, counts=receipt.rows_affected,
                  back=back, back_label="back to the facts", new_text=text)


async def delete_fact(request: Request) -> Response:
    form = await verify_csrf(request)
    mem, tenant = memory_for(request)
    fid = _uuid(form.get("fact_id"), "the fact")
    receipt = await run_in_threadpool(mem.delete_fact, fid)
    back = url_for_page(request, "/facts", user=form.get("user"))
    return render(request, "receipt.html", title="Fact deleted", what="The fact was deleted with its history.",
                  receipt=receipt, counts=receipt.rows_affected, back=back, back_label="back to the facts")


async def pin(request: Request) -> Response:
    """Pin or unpin one message or fact (agentmem.pin / agentmem.unpin), then back to its page."""
    form = await verify_csrf(request)
    mem, tenant = memory_for(request)
    kind = str(form.get("kind") or "")
    if kind not in ("message", "fact"):
        raise HTTPException(400, "kind must be message or fact")
    item = _uuid(form.get("id"), f"the {kind}")
    if form.get("pinned") == "1":
        await run_in_threadpool(mem.pin, kind, item)
    else:
        await run_in_threadpool(mem.unpin, kind, item)
    if kind == "message":
        back = url_for_page(request, "/conversation", id=form.get("conversation_id"), user=form.get("user"))
    else:
        back = url_for_page(request, "/facts", user=form.get("user"))
    return RedirectResponse(back, status_code=303)


def _branch(row: Any) -> str:
    if row.vector_rank is not None and row.text_rank is not None:
        return "both"
    return "meaning" if row.vector_rank is not None else "words"


def search(request: Request) -> Response:
    mem, tenant = memory_for(request)
    user_id = _user(request)
    q = (request.query_params.get("q") or "").strip()
    mode = request.query_params.get("mode") or "hybrid"
    if mode not in ("words", "meaning", "hybrid"):
        raise HTTPException(400, "mode is words, meaning or hybrid")
    since, until, as_of = _time(request, "since"), _time(request, "until"), _time(request, "as_of")
    k_text = request.query_params.get("k") or "10"
    k = int(k_text) if k_text.isdigit() else 10
    messages: list = []
    facts_found: list = []
    stored = None
    model = None
    if q:
        embedding = None
        if mode != "words":
            model, vectors = inspector_of(request).embed(mem, None, [q], query=True)
            embedding = vectors[0]
        text = q if mode != "meaning" else None
        messages = mem.search_messages(user_id, embedding, k=k, model=model, query_text=text, since=since,
                                       until=until)
        facts_found = mem.recall_facts(user_id, embedding, k=min(k, 100), model=model, query_text=text,
                                       since=None if as_of else since, until=None if as_of else until, as_of=as_of)
        if not messages and not facts_found:
            # "nothing matched" is not "nothing stored": say which
            stored = bool(mem.list_conversations(user_id, page_size=1) or mem.list_facts(user_id, page_size=1))
    return render(request, "search.html", title=f"Search {user_id}", user=user_id, q=q, mode=mode, k=k,
                  since=_local(since), until=_local(until), as_of=_local(as_of), messages=messages, facts=facts_found,
                  stored=stored, branch=_branch, model=model, embedder=inspector_of(request).embedder_kind)


def chart(rows: list) -> dict | None:
    """The net value per 1,000 queries against the threshold, as SVG coordinates (None: nothing reviewed)."""
    points = [(float(r.threshold), float(r.net_value_per_1000)) for r in rows if r.net_value_per_1000 is not None]
    if not points:
        return None
    width, height, left, right, top, bottom = 640, 260, 70, 20, 20, 40
    xs = [p[0] for p in points]
    ys = [p[1] for p in points] + [0.0]
    x0, x1 = min(xs), max(xs)
    if x1 - x0 < 1e-9:
        x0, x1 = x0 - 0.01, x1 + 0.01
    y0, y1 = min(ys), max(ys)
    if y1 - y0 < 1e-9:
        y0, y1 = y0 - 1, y1 + 1

    def sx(x: float) -> float:
        return round(left + (x - x0) / (x1 - x0) * (width - left - right), 1)

    def sy(y: float) -> float:
        return round(top + (y1 - y) / (y1 - y0) * (height - top - bottom), 1)
    best = max(points, key=lambda p: p[1])
    ticks_y = [y0 + (y1 - y0) * i / 4 for i in range(5)]
    return {
        "width": width, "height": height, "left": left, "right": width - right, "top": top,
        "bottom": height - bottom, "zero": sy(0.0),
        "polyline": " ".join(f"{sx(x)},{sy(y)}" for x, y in points),
        "points": [{"x": sx(x), "y": sy(y), "t": x, "v": y} for x, y in points],
        "xticks": [{"x": sx(x), "label": f"{x:.2f}"} for x in xs[:: max(1, math.ceil(len(xs) / 8))]],
        "yticks": [{"y": sy(y), "label": f"{y:,.0f}"} for y in ticks_y],
        "best": {"x": sx(best[0]), "y": sy(best[1]), "t": best[0], "v": best[1]},
    }


def cache(request: Request) -> Response:
    mem, tenant = memory_for(request)
    after = request.query_params.get("after") or None
    cost_uncached = _money(request, "cost_uncached", "1")
    cost_wrong = _money(request, "cost_wrong", "10")
    entries = mem.list_cache_entries(after=after, page_size=PAGE)
    sample = mem.sample_hits(n=SAMPLE, min_similarity=0.85)
    report = mem.cache_report(cost_uncached, cost_wrong)
    now = dt.datetime.now(dt.timezone.utc)
    return render(request, "cache.html", title="Answer cache", entries=entries, sample=sample, report=report,
                  chart=chart(report), after=after, next=_next(entries), now=now,
                  pager_params={"cost_uncached": cost_uncached, "cost_wrong": cost_wrong},
                  cost_uncached=cost_uncached, cost_wrong=cost_wrong,
                  reviewed=request.query_params.get("reviewed"))


async def review(request: Request) -> Response:
    form = await verify_csrf(request)
    mem, tenant = memory_for(request)
    hit = _uuid(form.get("hit_id"), "the hit")
    verdict = form.get("verdict")
    if verdict not in ("right", "wrong"):
        raise HTTPException(400, "verdict is right or wrong")
    await run_in_threadpool(mem.review_hit, hit, verdict == "right")
    return RedirectResponse(url_for_page(request, "/cache", reviewed=verdict), status_code=303)


def access(request: Request) -> Response:
    mem, tenant = memory_for(request)
    after = request.query_params.get("after") or None
    rows = mem.list_access_log(after=after, page_size=PAGE)
    return render(request, "access.html", title="Access log", rows=rows, after=after, next=_next(rows))


async def export(request: Request) -> Response:
    form = await verify_csrf(request)
    mem, tenant = memory_for(request)
    user_id = str(form.get("user") or "")
    lines = await run_in_threadpool(mem.export_user, user_id)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user_id)[:64] or "user"
    return Response("\n".join(lines) + "\n", media_type="application/x-ndjson",
                    headers={"content-disposition": f'attachment; filename="agentmem-{safe}.jsonl"'})


async def erase(request: Request) -> Response:
    mem, tenant = memory_for(request)
    user_id = _user(request)
    if request.method == "GET":
        await run_in_threadpool(mem.current_tenant)   # AM041 (403) for a tenant this login holds no grant of
        return render(request, "erase.html", title=f"Erase {user_id}", user=user_id, mismatch=False)
    form = await verify_csrf(request)
    if form.get("confirm") != user_id:
        return render(request, "erase.html", title=f"Erase {user_id}", user=user_id, mismatch=True,
                      status_code=400)
    receipt = await run_in_threadpool(mem.forget_user, user_id)
    return render(request, "receipt.html", title="User erased", what="Everything derived from the user was "
                  "erased in one transaction.", receipt=receipt, counts=receipt.rows_removed,
                  back=url_for_page(request, "/users"), back_label="back to the users")


def routes() -> list[BaseRoute]:
    return [
        Route("/", home),
        Route("/overview", overview),
        Route("/users", users),
        Route("/user", user),
        Route("/conversation", conversation),
        Route("/message/delete", delete_message, methods=["POST"]),
        Route("/facts", facts),
        Route("/fact", fact_history),
        Route("/fact/update", update_fact, methods=["POST"]),
        Route("/fact/delete", delete_fact, methods=["POST"]),
        Route("/pin", pin, methods=["POST"]),
        Route("/search", search),
        Route("/cache", cache),
        Route("/cache/review", review, methods=["POST"]),
        Route("/access", access),
        Route("/export", export, methods=["POST"]),
        Route("/erase", erase, methods=["GET", "POST"]),
    ]
