"""A real OpenAI-compatible HTTP server for tests: scripted answers, recorded requests.

Tests speak real HTTP to 127.0.0.1 through the real `openai` client, so timeouts, status codes and
malformed bodies are exercised end to end without a key or the internet.

Use in a test module (pytest puts the test file's directory, tests/, on sys.path):

    from openai_server import Reply, openai_server  # noqa: F401
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass(frozen=True)
class Reply:
    """One scripted answer. content is the assistant message text; status != 200 sends an error."""

    content: str = ""
    status: int = 200
    delay_s: float = 0.0

    @classmethod
    def json(cls, obj: dict[str, Any], **kw: Any) -> Reply:
        return cls(content=json.dumps(obj), **kw)


@dataclass
class Recorded:
    """A request as the server saw it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes


@dataclass
class OpenAIServer:
    """Handle the tests hold: the base URL, the reply queue and what was received."""

    base_url: str = ""
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)


def _handler(state: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def _send(self, status: int, payload: dict[str, Any] | str) -> None:
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                body = {}
            state.requests.append(Recorded(self.path, dict(self.headers.items()), body, raw))
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            reply = state.replies.popleft() if state.replies else Reply("unscripted request", status=500)
            if reply.delay_s:
                state.stopping.wait(reply.delay_s)
            if reply.status != 200:
                self._send(
                    reply.status,
                    {"error": {"message": reply.content or "scripted error", "type": "scripted", "code": reply.status}},
                )
                return
            self._send(
                200,
                {
                    "id": f"chatcmpl-{len(state.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "test-model"),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": reply.content},
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                },
            )

    return Handler


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """Start the server on an ephemeral 127.0.0.1 port for one test."""
    state = OpenAIServer()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    server.block_on_close = False
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
