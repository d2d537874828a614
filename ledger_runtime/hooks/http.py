"""The hook server's HTTP face, for an agent whose hooks POST their event instead of running a
command (Claude Code's ``http`` hooks): no process is started per event, which is most of what a
command hook costs the agent (a shell, an interpreter, its pipes).

``HttpHookServer(handler, on_fault, token)`` serves ``handler(event, payload) -> answer | None`` at
``http://127.0.0.1:PORT/hook/EVENT`` until ``close()``; ``url(event)`` is what the hook configuration
names. It listens on loopback only, and since any local user can reach a loopback port, every request
must carry the run's secret (``Authorization: Bearer TOKEN``), checked before a byte of the body is
read: a stranger gets 403 and is counted, never given the handler. A request must send its headers
within 5 s and its body (at most 16 MiB) within 30 s; at most 128 connections are held open and 64
requests served at once (past that: closed, or 503).
One event at a time reaches the handler (``lock``, held by whoever else touches the runtime). A fault
of the handler is reported and answered with ``{}``: the agent goes on as without the ledger; so does
an agent whose request fails (Claude Code's hooks fail open by default).
"""

from __future__ import annotations

import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from ledger_runtime.hooks.server import event_payload

try:
    from ledger_runtime.hooks.client import event_name
except ImportError:  # run by path: this directory is on sys.path
    from client import event_name  # type: ignore[no-redef]

MAX_PAYLOAD = 16 * 1024 * 1024
HEADER_TIMEOUT_S = 5.0
BODY_TIMEOUT_S = 30.0
MAX_CONCURRENT = 64  # requests being served
MAX_CONNECTIONS = 128  # connections open, served or still sending their request
REFUSED_LOG_EVERY_S = 10.0
PREFIX = "/hook/"


class _Server(ThreadingHTTPServer):
    """A thread per connection, at most MAX_CONNECTIONS at once: past that a connection is closed at
    once (a flood of idle connections never holds more threads; a real hook then fails open)."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._active = 0
        self._count = threading.Lock()
        self.dropped = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._count:
            full = self._active >= MAX_CONNECTIONS
            self._active += 0 if full else 1
            self.dropped += 1 if full else 0
        if full:
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._count:
                self._active -= 1


class HttpHookServer:
    """Serves ``handler(event, payload) -> answer | None`` over HTTP on loopback until ``close()``."""

    def __init__(
        self,
        handler: Callable[[str, dict[str, Any]], dict[str, Any] | None],
        on_fault: Callable[[str, BaseException], None],
        token: str,
    ):
        self.handler = handler
        self.on_fault = on_fault
        self._expected = f"Bearer {token}".encode()
        self.lock = threading.RLock()  # one event at a time; held by whoever else touches the runtime
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT)
        self.handled = 0
        self.refused = 0
        self._refused_said = 0
        self._said_at = 0.0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = HEADER_TIMEOUT_S  # the request line and headers, then each read of the body

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                if not server._slots.acquire(blocking=False):
                    self._reply(503, b"{}")
                    return
                try:
                    server._serve(self)
                finally:
                    server._slots.release()

            def do_GET(self) -> None:
                server._refuse(self, 405)

            def _reply(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                if code != 200:
                    self.send_header("connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.write(body)

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="ledger-hook-http", daemon=True)
        self._thread.start()

    def url(self, event: str) -> str:
        return f"http://127.0.0.1:{self.port}{PREFIX}{event}"

    def _serve(self, request: Any) -> None:
        event = request.path[len(PREFIX) :] if request.path.startswith(PREFIX) else ""
        auth = (request.headers.get("authorization") or "").encode()
        if not event_name(event) or not hmac.compare_digest(auth, self._expected):
            self._refuse(request, 403)
            return
        try:
            length = int(request.headers.get("content-length") or "")
        except ValueError:
            self._refuse(request, 411)
            return
        if not 0 <= length <= MAX_PAYLOAD:
            self._refuse(request, 413)
            return
        answer: dict[str, Any] | None = None
        try:
            body = _read(request, length, time.monotonic() + BODY_TIMEOUT_S)
            payload = event_payload(event, body)
            with self.lock:
                self.handled += 1
                answer = self.handler(event, payload)
        except Exception as e:  # a broken client or a fault of ours: an empty answer, the agent goes on
            with self.lock:
                self.on_fault("serving a hook", e)
            answer = None
        request._reply(200, json.dumps(answer if answer is not None else {}).encode())

    def _refuse(self, request: Any, code: int) -> None:
        with self.lock:
            self.refused += 1
            now = time.monotonic()
            if now - self._said_at >= REFUSED_LOG_EVERY_S:
                n, self._refused_said, self._said_at = self.refused - self._refused_said, self.refused, now
                why = ConnectionError(f"{n} request(s) refused (no token, or not a hook call)")
                self.on_fault("serving hooks", why)
        request._reply(code, b"{}")

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        with self.lock:  # an event being answered finishes first
            pass

    def __enter__(self) -> HttpHookServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read(request: Any, length: int, deadline: float) -> bytes:
    """The body, ``length`` bytes of it, by ``deadline`` (time.monotonic)."""
    chunks: list[bytes] = []
    left = length
    while left > 0:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"the call's body did not come whole within {BODY_TIMEOUT_S:.0f} s")
        request.connection.settimeout(min(remaining, HEADER_TIMEOUT_S))
        chunk = request.rfile.read1(min(left, 65536)) if hasattr(request.rfile, "read1") else request.rfile.read(left)
        if not chunk:
            raise ValueError(f"the call's body ended after {length - left} of {length} bytes")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
