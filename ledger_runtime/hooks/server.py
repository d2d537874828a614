"""The hook server: the ledger's side of an agent's hooks, in the ``ledger-run`` process that
launched the agent. Hook processes (hookclient.py) connect to its Unix socket, send
``{"event": NAME}\\n`` and the event's JSON, and read back the answer (JSON, or nothing).

The runtime stays in memory between events (state, scanner caches, plans awaiting their
post-event), so a hook costs a process start and a socket round trip, not a ledger reload. Events
are handled one at a time. A handler that raises, or a payload that is not a JSON object, gets no
answer (the agent goes on as without the ledger) and is reported to ``on_fault``.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
from typing import Any, Callable

Handler = Callable[[str, dict[str, Any]], dict[str, Any] | None]
# (event, token the call carried, payload) -> whether it may be served
Authorize = Callable[[str, str | None, dict[str, Any]], bool]
MAX_PAYLOAD = 64 * 1024 * 1024
READ_TIMEOUT_S = 30.0  # a client that sends nothing for this long is dropped (it holds a thread)
MAX_CONNECTIONS = 64  # connections served at once; past it a call gets no answer (its command runs)
CLOSE_WAIT_S = 30.0  # close() waits this long in all for the events being answered


SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS


class SocketDirError(OSError):
    """No directory where the hook socket's path fits; the message says what to change."""


def _socket_dir() -> str:
    """A private directory of our own for the socket, with a path short enough for a Unix socket:
    under $TMPDIR when it fits, else under /tmp."""
    for base in (tempfile.gettempdir(), "/tmp"):
        if (
            len(os.path.join(base, "ledger-hook-xxxxxxxx", "hook.sock")) <= SOCKET_PATH_MAX
            and os.path.isdir(base)
            and os.access(base, os.W_OK | os.X_OK)
        ):
            return tempfile.mkdtemp(prefix="ledger-hook-", dir=base)
    raise SocketDirError(
        f"no directory for the hook socket: $TMPDIR ({tempfile.gettempdir()}) is too long for a "
        f"Unix socket path (at most {SOCKET_PATH_MAX} bytes) and /tmp is not writable; set TMPDIR "
        "to a short writable directory"
    )


class HookServer:
    """Serves ``handler(event, payload) -> answer | None`` on a Unix socket until ``close()``."""

    def __init__(
        self, handler: Handler, on_fault: Callable[[str, BaseException], None], authorize: Authorize | None = None
    ):
        self.handler = handler
        self.on_fault = on_fault
        self.authorize = authorize  # None: every call is served (a caller that authenticates otherwise)
        self._dir = _socket_dir()
        self.socket_path = os.path.join(self._dir, "hook.sock")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.bind(self.socket_path)
        except OSError:
            self._sock.close()
            os.rmdir(self._dir)
            raise
        self._sock.listen(16)
        self.lock = threading.RLock()  # one event at a time; held by whoever else touches the runtime
        self._threads: list[threading.Thread] = []
        self._reading: set[socket.socket] = set()  # connections still sending their call: close() cuts them
        self._closed = False
        self.handled = 0
        self._thread = threading.Thread(target=self._serve, name="ledger-hook-server", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._threads = [x for x in self._threads if x.is_alive()]
            if len(self._threads) >= MAX_CONNECTIONS:  # no answer: the client fails open, its command runs
                conn.close()
                continue
            t = threading.Thread(target=self._one, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(READ_TIMEOUT_S)
                self._reading.add(conn)
                try:
                    data = _read_all(conn)
                finally:
                    self._reading.discard(conn)
                head, _, body = data.partition(b"\n")
                header = json.loads(head)
                event = header["event"]
                answer = self._handle(str(event), body, header.get("token"))
                if answer is not None:  # one line: the newline says the answer is whole
                    conn.sendall(json.dumps(answer).encode() + b"\n")
            except Exception as e:  # a broken client or a fault of ours: no answer, the agent goes on
                with self.lock:
                    self.on_fault("serving a hook", e)

    def _handle(self, event: str, body: bytes, token: Any = None) -> dict[str, Any] | None:
        try:
            payload = json.loads(body)
        except ValueError as e:
            raise ValueError(f"{event} payload is not JSON: {body[:60]!r}") from e
        if not isinstance(payload, dict):
            raise ValueError(f"{event} payload is not a JSON object: {body[:60]!r}")
        with self.lock:
            if self.authorize is not None and not self.authorize(
                event, token if isinstance(token, str) else None, payload
            ):
                raise PermissionError(f"a {event} call without this run's token: refused")
            self.handled += 1
            return self.handler(event, payload)

    def close(self) -> None:
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # no new calls; wakes the accept() in _serve
        except OSError:
            pass
        for conn in list(self._reading):  # a call not sent yet will not be: its command runs as it is
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + CLOSE_WAIT_S
        for t in list(self._threads):  # events being answered finish first, within one shared wait
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        try:
            self._sock.close()
        finally:
            for remove, p in ((os.unlink, self.socket_path), (os.rmdir, self._dir)):
                try:
                    remove(p)
                except OSError:
                    pass

    def __enter__(self) -> HookServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_all(conn: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_PAYLOAD:
            raise ValueError(f"payload over {MAX_PAYLOAD} bytes")
