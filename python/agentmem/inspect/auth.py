"""The inspector's door checks: the one-time token, the session cookie, the host, and CSRF tokens.

``agentmem inspect`` prints a URL holding a one-time token (as Jupyter does). The first request that
presents it gets a session cookie (HttpOnly, SameSite=Strict) and is redirected to the same URL
without the token; the token is then spent. Every later request needs that cookie; a request
without it (or with a spent or wrong token) is refused with 403.

Every form carries a CSRF token bound to the session and to the form's action path
(``csrf_field(request, action)`` in a template); a POST handler calls ``await verify_csrf(request)``
(or ``verify_csrf_form(request, form)`` with the form it already read), which raises 403 unless the
form's token matches the path it was posted to. POSTs whose Origin is another site are refused too,
and so is any request whose Host is not the address the server listens on (DNS rebinding).

Functions for other pages (the chat page of issue 39) to import::

    from agentmem.inspect.auth import csrf_field, csrf_token, verify_csrf, verify_csrf_form
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any, Iterable
from urllib.parse import urlencode

from markupsafe import Markup, escape
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "agentmem_inspect"
CSRF_FIELD = "csrf_token"


class Auth:
    """The server's secrets: the one-time token (until spent), the CSRF key, the live sessions."""

    def __init__(self, token: str | None = None, allowed_hosts: Iterable[str] = ()):
        self.token: str | None = token or secrets.token_urlsafe(32)
        self.key = secrets.token_bytes(32)
        self.sessions: set[str] = set()
        self.allowed_hosts = {h.lower() for h in allowed_hosts}

    def spend(self, presented: str) -> str | None:
        """A new session id when presented is the unspent one-time token, else None."""
        if self.token is None or not hmac.compare_digest(presented.encode(), self.token.encode()):
            return None
        self.token = None
        session = secrets.token_urlsafe(32)
        self.sessions.add(session)
        return session

    def valid(self, session: str | None) -> bool:
        return bool(session) and session in self.sessions

    def csrf(self, session: str, action: str) -> str:
        return hmac.new(self.key, f"{session}\x00{action}".encode(), hashlib.sha256).hexdigest()


def _auth(request: Request) -> Auth:
    return request.app.state.auth


def csrf_token(request: Request, action: str | None = None) -> str:
    """The CSRF token of a form posting to ``action`` (default: the current path) in this session."""
    session = request.cookies.get(COOKIE, "")
    return _auth(request).csrf(session, action if action is not None else request.url.path)


def csrf_field(request: Request, action: str | None = None) -> Markup:
    """The hidden input to put in a form that posts to ``action`` (default: the current path)."""
    return Markup('<input type="hidden" name="{}" value="{}">').format(
        CSRF_FIELD, escape(csrf_token(request, action)))


def verify_csrf_form(request: Request, form: Any) -> None:
    """Raise 403 unless ``form`` (already read) carries this session's token for this path."""
    presented = form.get(CSRF_FIELD) if form is not None else None
    expected = csrf_token(request, request.url.path)
    if not isinstance(presented, str) or not hmac.compare_digest(presented.encode(), expected.encode()):
        raise HTTPException(403, "this form has no valid CSRF token (reload the page and submit it again)")


async def verify_csrf(request: Request) -> Any:
    """Read the POSTed form, refuse it (403) without a valid CSRF token, and return it."""
    form = await request.form()
    verify_csrf_form(request, form)
    return form


def _refuse(message: str, status: int = 403) -> HTMLResponse:
    body = ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>agentmem inspect: refused"
            f"</title></head><body><h1>Refused</h1><p>{escape(message)}</p></body></html>")
    return HTMLResponse(body, status_code=status)


class AuthMiddleware:
    """Pure ASGI middleware: host check, one-time token to cookie, session required, foreign Origin refused.

    It also sets the page's security headers: a Content-Security-Policy allowing only this server's
    own scripts, styles and images (so markup that ever slipped into a page could not run a script),
    no framing, no referrer to another site (same-origin: a form post keeps its Origin, which is checked)."""

    def __init__(self, app: ASGIApp, auth: Auth):
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        host = (request.headers.get("host") or "").lower()
        if self.auth.allowed_hosts and host not in self.auth.allowed_hosts:
            await _refuse(f"host {host!r} is not this server's address")(scope, receive, send)
            return
        token = request.query_params.get("token")
        if token is not None:
            session = self.auth.spend(token)
            if session is None:
                await _refuse("this one-time token is wrong or already used: open the URL that "
                              "agentmem inspect printed, in one browser, once")(scope, receive, send)
                return
            params = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            location = request.url.path + (f"?{urlencode(params)}" if params else "")
            response = RedirectResponse(location, status_code=303)
            response.set_cookie(COOKIE, session, httponly=True, samesite="strict", path="/")
            await response(scope, receive, send)
            return
        if not self.auth.valid(request.cookies.get(COOKIE)):
            await _refuse("no session: open the URL with the one-time token that agentmem inspect printed")(
                scope, receive, send)
            return
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            origin = request.headers.get("origin")
            if origin is not None and origin.split("://", 1)[-1].lower() != host:
                await _refuse("a request from another site")(scope, receive, send)
                return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy",
                     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                     b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'; connect-src 'self'"),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                    (b"cache-control", b"no-store"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
