"""`agentmem demo --web` (`make demo-web`): the chat page of the inspector on the dev server, in one command.

It makes the database ``agentmem_chat`` (``--chat-database``) on the given server if it is missing (kept
between runs, so a user's memory survives a restart), migrates it, creates the application login ``agentmem_demo_app``
(no superuser: row-level security applies) with the tenant ``docs-co``, chooses the models (Ollama at
``OLLAMA_HOST`` when it answers, else the offline lexical embedder, registered here as the DBA, and a
template generator), then serves the inspector on 127.0.0.1 and prints the chat page's URL with its
one-time token.
"""

from __future__ import annotations

import secrets
import socket
import sys
from typing import Any
from urllib.parse import urlencode

from .demo import DEMO_APP, TENANT
from .shell import ensure_database, prepare

CHAT_DB = "agentmem_chat"


def build(url: str, *, port: int, ollama_host: str | None = None, out: Any = None,
          database: str = CHAT_DB) -> tuple[Any, str]:
    """Prepare the database and the models; (the inspector app, the chat page's URL with its token)."""
    from agentmem.admin import Admin
    from agentmem.inspect.app import create_app
    from agentmem.inspect.chat_session import OFFLINE_MODEL, ChatRoom, choose_models
    out = out or sys.stdout
    admin_url = ensure_database(url, database)
    app_url = prepare(admin_url, DEMO_APP, TENANT)
    models, embedder = choose_models(ollama_host)
    if embedder.model == OFFLINE_MODEL:
        with Admin.connect(admin_url) as dba:  # registering a model is the DBA's job, not the app's
            dba.register_model(OFFLINE_MODEL, 768)
    print(f"agentmem demo --web: database {database}, login {DEMO_APP}, tenant {TENANT}.\n"
          f"Models: {models.note}.", file=out, flush=True)
    token = secrets.token_urlsafe(32)
    app = create_app(app_url, tenant=TENANT, token=token,
                     embedder="lexical" if embedder.model == OFFLINE_MODEL else "ollama", ollama_host=models.host,
                     allowed_hosts={f"127.0.0.1:{port}", f"localhost:{port}"})
    app.state.chat_room = ChatRoom(models, embedder)  # the models chosen above, not probed again
    return app, f"http://127.0.0.1:{port}/chat?{urlencode({'tenant': TENANT, 'token': token})}"


def run(url: str | None, port: int = 8766, ollama_host: str | None = None, database: str = CHAT_DB) -> int:
    if not url:
        print("agentmem demo --web: pass --database-url (make demo-web starts an embedded server and passes it)")
        return 2
    import uvicorn
    if port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    app, page = build(url, port=port, ollama_host=ollama_host, database=database)
    print(f"Open the chat page in one browser (the token works once; Ctrl-C stops the server):\n\n    {page}\n",
          flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    return 0
