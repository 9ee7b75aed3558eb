"""The chat page (``/chat``): the seed's demo in the inspector. A user id, a message box, one ``Turn``
per message; beside the conversation the user's memory as it changes; under each reply what the turn
did and cost. The logic is ``chat_session.ChatRoom``; this module is its routes:

- ``GET /chat?tenant=T`` asks for a user id; ``GET /chat?tenant=T&user=U`` shows U's current
  conversation, facts, recalled messages and earlier conversations (a reload shows the same);
- ``POST /chat/send`` (user, message) runs one turn, then redirects to the page;
- ``POST /chat/clear`` (user) ends the conversation: the next message starts a new one, facts and
  earlier conversations stay.

Both forms carry the session's CSRF token (``auth.csrf_field``); the tenant is ``?tenant=``, checked
by the database. The models are chosen once per server (``chat_session.choose_models``: Ollama when
it answers, else offline), following ``agentmem inspect --embedder`` and ``--ollama-host``.
"""

from __future__ import annotations

import threading

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ..errors import AgentmemError, UnknownModel
from .app import inspector_of, memory_for, render, url_for_page
from .auth import verify_csrf
from .chat_session import OFFLINE_MODEL, ChatRoom, choose_models

NAV = [("Chat", "/chat")]
MAX_MESSAGE_CHARS = 4000   # a chat message; longer ones are refused on the page

_lock = threading.Lock()


def room_of(request: Request) -> ChatRoom:
    """The server's ChatRoom, made at the first chat request (the models probed once)."""
    state = request.app.state
    with _lock:
        room = getattr(state, "chat_room", None)
        if room is None:
            insp = inspector_of(request)
            models, embedder = choose_models(insp.ollama_host, embedder=insp.embedder_kind)
            room = state.chat_room = ChatRoom(models, embedder)
    return room


def _unregistered(room: ChatRoom, exc: UnknownModel) -> str:
    if room.embedder.model == OFFLINE_MODEL:
        return (f"{exc} The chat runs offline on the lexical embedder {OFFLINE_MODEL}, which this database "
                f"does not know yet: a DBA registers it with select agentmem.register_model(model => "
                f"'{OFFLINE_MODEL}', dimension => 768); make demo-web does.")
    return str(exc)


def _page(request: Request, room: ChatRoom, user: str, error: str | None = None, draft: str = "",
          status: int = 200) -> Response:
    mem, tenant = memory_for(request)
    chat = room.page(room.memory(mem.pool, tenant), user)
    return render(request, "chat.html", status_code=status, title=f"Chat as {user}", user=user, chat=chat,
                  error=error, draft=draft, max_chars=MAX_MESSAGE_CHARS)


def chat(request: Request) -> Response:
    user = (request.query_params.get("user") or "").strip()
    if not user:
        memory_for(request)  # a page needs a tenant
        return render(request, "chat.html", title="Chat", user=None, chat=None, error=None, draft="",
                      max_chars=MAX_MESSAGE_CHARS)
    room = room_of(request)
    try:
        return _page(request, room, user)
    except UnknownModel as exc:
        return render(request, "chat.html", status_code=400, title="Chat", user=user, chat=None,
                      error=_unregistered(room, exc), draft="", max_chars=MAX_MESSAGE_CHARS)


def _back(request: Request, user: str) -> Response:
    return RedirectResponse(url_for_page(request, "/chat", user=user) + "#latest", status_code=303)


async def send(request: Request) -> Response:
    form = await verify_csrf(request)
    user, text = str(form.get("user") or "").strip(), str(form.get("message") or "").strip()
    return await run_in_threadpool(_send, request, user, text)  # the driver is synchronous


def _send(request: Request, user: str, text: str) -> Response:
    room = room_of(request)
    if not user:
        return RedirectResponse(url_for_page(request, "/chat"), status_code=303)
    if not text or len(text) > MAX_MESSAGE_CHARS:
        why = "the message is empty" if not text else f"the message is over {MAX_MESSAGE_CHARS} characters"
        return _page(request, room, user, error=f"Not sent: {why}.", draft=text[:MAX_MESSAGE_CHARS], status=400)
    mem, tenant = memory_for(request)
    try:
        room.send(room.memory(mem.pool, tenant), user, text)
    except UnknownModel as exc:
        return _page(request, room, user, error=_unregistered(room, exc), draft=text, status=400)
    except AgentmemError as exc:
        return _page(request, room, user, error=f"Not sent: [{exc.sqlstate}] {exc}", draft=text, status=400)
    except Exception as exc:  # noqa: BLE001 - a model that fails (Ollama down mid-chat) is shown, not a 500
        return _page(request, room, user, error=f"The turn failed: {type(exc).__name__}: {exc}",
                      draft=text, status=502)
    return _back(request, user)


def _clear(request: Request, user: str) -> Response:
    room = room_of(request)
    mem, tenant = memory_for(request)
    room.clear(room.memory(mem.pool, tenant), user)
    return _back(request, user)


async def clear(request: Request) -> Response:
    form = await verify_csrf(request)
    user = str(form.get("user") or "").strip()
    if not user:
        return RedirectResponse(url_for_page(request, "/chat"), status_code=303)
    return await run_in_threadpool(_clear, request, user)


def routes() -> list[BaseRoute]:
    return [Route("/chat", chat), Route("/chat/send", send, methods=["POST"]),
            Route("/chat/clear", clear, methods=["POST"])]
