"""An Ollama-compatible HTTP stub for tests and benchmarks (not API): POST /api/embed and /api/chat.

Tests and benchmarks talk to it through the real ``ollama`` client. It binds to 127.0.0.1 on
a free port chosen at start, so no user's default configuration
(OLLAMA_HOST, or 127.0.0.1:11434) ever reaches it.

Embeddings are agentmem's lexical embedding of the text: deterministic, unit
length, and similar for texts that share words.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from agentmem.lexical import lexical_embedding

DEFAULT_MODELS = {"nomic-embed-text": 768, "all-minilm": 384, "tiny-embed": 8}


class OllamaStub:
    def __init__(self, models: dict[str, int] | None = None):
        self.models = dict(models or DEFAULT_MODELS)
        self.embed_calls: list[dict] = []   # one entry per /api/embed request
        self.chat_calls: list[dict] = []
        self.chat_replies: list[str] = []   # served in order; the last one repeats
        self.chat_replies_by_model: dict[str, list[str]] = {}  # the same, per model (checked first)
        # computes a reply from the request body (checked before both; None: fall through to them)
        self.chat_responder: Callable[[dict], str | None] | None = None
        self.fail_next: int | None = None   # HTTP status to answer the next request with
        self.fail_always: bool = False      # answer every embed request with HTTP 500
        self.delay: float = 0.0             # seconds each embed request waits before answering
        self.embed_started = 0              # embed requests that began waiting (with a delay)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def embedded_texts(self) -> list[str]:
        return [t for call in self.embed_calls for t in call["input"]]

    def start(self) -> "OllamaStub":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reset(self) -> None:
        self.embed_calls.clear()
        self.chat_calls.clear()
        self.chat_replies.clear()
        self.chat_replies_by_model.clear()
        self.chat_responder = None
        self.fail_next = None
        self.fail_always = False
        self.delay = 0.0
        self.embed_started = 0

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if stub.fail_next is not None:
                    status, stub.fail_next = stub.fail_next, None
                    return self._send(status, {"error": "stub failure"})
                model = body.get("model", "")
                if self.path == "/api/embed" and stub.fail_always:
                    return self._send(500, {"error": "stub failure (always)"})
                if self.path == "/api/embed":
                    if stub.delay:
                        stub.embed_started += 1
                        time.sleep(stub.delay)
                    dim = stub.models.get(model.split(":")[0])
                    if dim is None:
                        return self._send(404, {"error": f"model \"{model}\" not found, try pulling it first"})
                    texts = body.get("input", "")
                    texts = [texts] if isinstance(texts, str) else list(texts)
                    stub.embed_calls.append({"model": model, "input": texts})
                    return self._send(200, {
                        "model": model,
                        "embeddings": [lexical_embedding(t, dim) for t in texts],
                        "total_duration": 1, "load_duration": 0, "prompt_eval_count": len(texts),
                    })
                if self.path == "/api/chat":
                    stub.chat_calls.append(body)
                    computed = stub.chat_responder(body) if stub.chat_responder else None
                    replies = ([computed] if computed is not None
                               else stub.chat_replies_by_model.get(model, stub.chat_replies))
                    if not replies:
                        return self._send(404, {"error": f"model \"{model}\" not found, try pulling it first"})
                    reply = replies.pop(0) if len(replies) > 1 else replies[0]
                    return self._send(200, {
                        "model": model, "created_at": "2026-01-01T00:00:00Z",
                        "message": {"role": "assistant", "content": reply},
                        "done": True, "done_reason": "stop",
                    })
                return self._send(404, {"error": "not found"})

        return Handler
