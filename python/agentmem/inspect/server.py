"""What ``agentmem inspect`` runs: the app under uvicorn on 127.0.0.1, and the URL with its one-time token."""

from __future__ import annotations

import secrets
import socket
import sys
from typing import Any
from urllib.parse import urlencode


def serve(database_url: str, *, tenant: str | None = None, host: str = "127.0.0.1", port: int = 8765,
          embedder: str = "auto", ollama_host: str | None = None, out: Any = None) -> int:
    """Run the inspector until interrupted; print the URL to open (with the one-time token) first."""
    import uvicorn

    from .app import create_app
    out = out or sys.stdout
    if port == 0:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
    token = secrets.token_urlsafe(32)
    shown = f"[{host}]" if ":" in host else host
    hosts = {f"{shown}:{port}"} | ({f"localhost:{port}"} if host in ("127.0.0.1", "::1", "localhost") else set())
    app = create_app(database_url, tenant=tenant, token=token, embedder=embedder, ollama_host=ollama_host,
                     allowed_hosts=hosts)
    path = (f"/overview?{urlencode({'tenant': tenant, 'token': token})}" if tenant else
            f"/?{urlencode({'token': token})}")
    print(f"agentmem inspect: open this URL in one browser (the token works once):\n\n    http://{shown}:{port}{path}\n",
          file=out, flush=True)
    if host not in ("127.0.0.1", "::1", "localhost"):
        print(f"agentmem inspect: WARNING: listening on {host}, not only this machine: anyone who can reach it "
              "and holds the URL acts as this database login", file=out, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    return 0
