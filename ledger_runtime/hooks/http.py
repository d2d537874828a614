"""The hook server's HTTP face, for an agent whose hooks POST their event instead of running a
command (Claude Code's ``http`` hooks): no process is started per event, which is most of what a
command hook costs the agent (a shell, an interpreter, its pipes).

``HttpHookServer(handler, on_fault, token)`` serves ``handler(event, payload) -> answer | None`` at
``http://127.0.0.1:PORT/hook/EVENT`` until ``close()``; ``url(event)`` is what the hook configuration
names. It listens on loopback, where any local user can connect, so nothing a stranger sends may cost
the real hooks their answers:

- One thread (the door) takes every connection. A connection of another user is closed before a byte
  of it is read (peer.py), and, once the agent's process is known (``speaker``), so is one that
  process does not hold: a command the agent runs cannot speak for its own call.
- The door reads each request's line and headers, without blocking, to a deadline of 5 s from the
  connection (not per read: a byte every 2 s does not keep it open) and 8 KiB. At most 256 wait for
  theirs; past that the one that has waited longest is dropped.
- The token (``Authorization: Bearer TOKEN``, in constant time), the path and the length are checked
  by the door, before a thread, a slot or the runtime's lock is taken: a stranger is answered 403 and
  closed. Only an authorised request gets a thread (at most 64 at once; past that: 503), which reads
  its body (16 MiB at most, within 30 s) and asks the handler, one event at a time (``lock``, held by
  whoever else touches the runtime). Every answer closes its connection.
- Dropped and refused connections are counted, and said in the faults (one line per 10 s at most,
  written by a thread of its own under the lock: the door never waits for the runtime).
- Every answer is one write of its head and body on a socket without Nagle's algorithm (TCP_NODELAY):
  Claude Code delays its ACKs, and a body written after its head waited for one (``_no_delay``).

A fault of the handler is reported and answered with ``{}``: the agent goes on as without the ledger;
so does an agent whose request fails (Claude Code's hooks fail open by default).
"""

from __future__ import annotations

import hmac
import json
import os
import selectors
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from ledger_runtime.hooks.peer import descendants, holds_socket, peer_of
from ledger_runtime.hooks.server import event_payload

try:
    from ledger_runtime.hooks.client import event_name
except ImportError:  # run by path: this directory is on sys.path
    from client import event_name  # type: ignore[no-redef]

MAX_PAYLOAD = 16 * 1024 * 1024
HEADER_TIMEOUT_S = 5.0  # from the connection to the end of its headers, in all
MAX_HEAD_BYTES = 8 * 1024
BODY_TIMEOUT_S = 30.0
MAX_CONCURRENT = 64  # requests being served
MAX_WAITING = 256  # connections still sending their request line and headers
MAX_CONNECTIONS = MAX_WAITING  # the name tests and older callers use
REFUSED_LOG_EVERY_S = 10.0
PREFIX = "/hook/"
REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 405: "Method Not Allowed", 411: "Length Required"}
REASONS |= {413: "Payload Too Large", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}


def reply(code: int, body: bytes = b"{}") -> bytes:
    """A whole HTTP response that closes its connection."""
    head = (
        f"HTTP/1.1 {code} {REASONS.get(code, 'Error')}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


@dataclass
class Head:
    """A request's line and headers as the door read them."""

    method: str
    path: str
    headers: dict[str, str]
    rest: bytes  # what came after the headers: the start of the body


def parse_head(data: bytes) -> Head | None:
    """The request line and headers of ``data`` (which holds their end); None when they do not parse."""
    raw, _, rest = data.partition(b"\r\n\r\n")
    try:
        lines = raw.decode("latin-1").split("\r\n")
        method, path, version = lines[0].split(" ")
    except ValueError:
        return None
    if not version.startswith("HTTP/1."):
        return None
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            return None
        headers[name.strip().lower()] = value.strip()
    return Head(method, path, headers, rest)


def verdict(head: Head | None, expected: bytes) -> tuple[int, str, int]:
    """What the door does with a request: (0, EVENT, LENGTH) for one to serve, else (the status to
    refuse it with, "", 0). A pure function of the head and the run's expected Authorization."""
    if head is None:
        return 400, "", 0
    if head.method != "POST":
        return 405, "", 0
    event = head.path[len(PREFIX) :] if head.path.startswith(PREFIX) else ""
    auth = head.headers.get("authorization", "").encode("latin-1")
    if not event_name(event) or not hmac.compare_digest(auth, expected):
        return 403, "", 0
    try:
        length = int(head.headers.get("content-length") or "")
    except ValueError:
        return 411, "", 0
    if not 0 <= length <= MAX_PAYLOAD or len(head.rest) > length:
        return 413, "", 0
    return 0, event, length


@dataclass
class _Waiting:
    conn: socket.socket
    deadline: float
    data: bytearray = field(default_factory=bytearray)


@dataclass
class Counts:
    """Connections the door did not serve, by why (what the faults say)."""

    refused: int = 0  # requests without the token, or not hook calls (answered 403 and the like)
    slow: int = 0  # request line and headers not whole by their deadline
    crowded: int = 0  # the longest-waiting of too many
    strangers: int = 0  # another user's connection
    not_agent: int = 0  # a connection the agent's process does not hold
    busy: int = 0  # authorised, but every thread was serving (503)

    def total(self) -> int:
        return self.refused + self.slow + self.crowded + self.strangers + self.not_agent + self.busy

    def said(self) -> str:
        parts = [
            (self.refused, "refused (no token, or not a hook call)"),
            (self.slow, "dropped: headers not whole within 5 s"),
            (self.crowded, "dropped: too many waiting, the longest-waiting went"),
            (self.strangers, "closed: another user's"),
            (self.not_agent, "closed: not the agent's process"),
            (self.busy, "answered 503: every thread serving"),
        ]
        return "; ".join(f"{n} {what}" for n, what in parts if n)


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
        self.counts = Counts()
        self._said = Counts()
        self._said_at = -REFUSED_LOG_EVERY_S
        self._news = threading.Event()
        self._closing = threading.Event()
        self._launched: int | None = None  # the agent's process as started (or a wrapper of it)
        self.speaker: int | None = None  # the process whose connections are the agent's
        self._uid = os.geteuid()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(512)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._waiting: OrderedDict[socket.socket, _Waiting] = OrderedDict()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._door = threading.Thread(target=self._watch, name="ledger-hook-http", daemon=True)
        self._door.start()
        self._reporter = threading.Thread(target=self._report, name="ledger-hook-http-faults", daemon=True)
        self._reporter.start()

    @property
    def refused(self) -> int:
        return self.counts.refused

    def url(self, event: str) -> str:
        return f"http://127.0.0.1:{self.port}{PREFIX}{event}"

    def launched(self, pid: int) -> None:
        """The agent's process, as started: from its first authorised request on, only the process
        that sent it (this one, or one below it: a wrapper's child) speaks for the agent."""
        self._launched = pid

    # -- the door ------------------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._closing.is_set():
            now = time.monotonic()
            timeout = min([w.deadline - now for w in self._waiting.values()] + [0.5])
            try:
                ready = self._selector.select(max(timeout, 0))
            except OSError:
                ready = []
            for key, _ in ready:
                if key.fileobj is self._listener:
                    self._accept()
                else:
                    self._read(key.fileobj)  # type: ignore[arg-type]
            now = time.monotonic()
            for conn in [c for c, w in self._waiting.items() if w.deadline <= now]:
                self._drop(conn, "slow")

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors: what waits longest goes, the next accept may work
                if self._waiting:
                    self._drop(next(iter(self._waiting)), "crowded")
                return
            why = self._stranger(conn)
            if why is not None:
                self._count(why)
                conn.close()
                continue
            _no_delay(conn)
            conn.setblocking(False)
            if len(self._waiting) >= MAX_WAITING:
                self._drop(next(iter(self._waiting)), "crowded")
            self._waiting[conn] = _Waiting(conn, time.monotonic() + HEADER_TIMEOUT_S)
            self._selector.register(conn, selectors.EVENT_READ)

    def _stranger(self, conn: socket.socket) -> str | None:
        """Why a connection is closed before it is read ("strangers", "not_agent"), or None."""
        peer = peer_of(conn)
        if peer is None:
            return None  # the system does not say: the token decides
        uid, inode = peer
        if uid != self._uid:
            return "strangers"
        if self.speaker is not None and holds_socket(self.speaker, inode) is False:
            return "not_agent"
        return None

    def _read(self, conn: socket.socket) -> None:
        w = self._waiting.get(conn)
        if w is None:
            return
        try:
            chunk = conn.recv(MAX_HEAD_BYTES + 1 - len(w.data))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._forget(conn)
            conn.close()
            return
        w.data += chunk
        if b"\r\n\r\n" not in w.data:
            if len(w.data) > MAX_HEAD_BYTES:
                self._refuse(conn, 431)
            return
        self._forget(conn)
        head = parse_head(bytes(w.data))
        code, event, length = verdict(head, self._expected)
        if code:
            self._refuse(conn, code)
            return
        if not self._slots.acquire(blocking=False):
            self._count("busy")
            self._send_and_close(conn, reply(503))
            return
        rest = head.rest if head is not None else b""
        threading.Thread(target=self._serve, args=(conn, event, length, rest), daemon=True).start()

    def _forget(self, conn: socket.socket) -> None:
        self._waiting.pop(conn, None)
        try:
            self._selector.unregister(conn)
        except (KeyError, ValueError):
            pass

    def _drop(self, conn: socket.socket, why: str) -> None:
        self._forget(conn)
        self._count(why)
        conn.close()

    def _refuse(self, conn: socket.socket, code: int) -> None:
        self._count("refused")
        self._send_and_close(conn, reply(code))

    def _send_and_close(self, conn: socket.socket, data: bytes) -> None:
        """A short answer, sent without waiting (a peer that does not read it just loses it); what the
        peer sent beside it and is there already is read first, so the close does not reset the answer."""
        try:
            conn.setblocking(False)
            conn.send(data)
            conn.shutdown(socket.SHUT_WR)
            for _ in range(16):
                if not conn.recv(65536):
                    break
        except OSError:
            pass
        conn.close()

    def _count(self, why: str) -> None:
        setattr(self.counts, why, getattr(self.counts, why) + 1)
        self._news.set()

    # -- serving an authorised request ------------------------------------------------------------

    def _serve(self, conn: socket.socket, event: str, length: int, start: bytes) -> None:
        answer: dict[str, Any] | None = None
        try:
            body = _read_body(conn, start, length, time.monotonic() + BODY_TIMEOUT_S)
            payload = event_payload(event, body)
            self._pin_speaker(conn)
            with self.lock:
                self.handled += 1
                answer = self.handler(event, payload)
        except Exception as e:  # a broken client or a fault of ours: an empty answer, the agent goes on
            with self.lock:
                self.on_fault("serving a hook", e)
            answer = None
        finally:
            self._slots.release()
        try:
            conn.settimeout(BODY_TIMEOUT_S)
            conn.sendall(reply(200, json.dumps(answer if answer is not None else {}).encode()))
        except OSError:
            pass
        finally:
            conn.close()

    def _pin_speaker(self, conn: socket.socket) -> None:
        """The first authorised request after the agent started names the process that speaks for it
        (the agent sends its first hook, SessionStart, before any command of it runs)."""
        if self.speaker is not None or self._launched is None:
            return
        peer = peer_of(conn)
        if peer is None:
            return
        for pid in sorted(descendants(self._launched)):
            if holds_socket(pid, peer[1]):
                self.speaker = pid
                return

    # -- the faults ----------------------------------------------------------------------------

    def _report(self) -> None:
        """Say what the door did not serve, at most one line per REFUSED_LOG_EVERY_S, under the lock."""
        while not self._closing.is_set():
            self._news.wait(1.0)
            wait = self._said_at + REFUSED_LOG_EVERY_S - time.monotonic()
            if wait > 0:
                self._closing.wait(wait)
            self._say()

    def _say(self) -> None:
        self._news.clear()
        now = Counts(**vars(self.counts))
        new = Counts(**{k: v - getattr(self._said, k) for k, v in vars(now).items()})
        if not new.total():
            return
        self._said, self._said_at = now, time.monotonic()
        with self.lock:
            self.on_fault("serving hooks", ConnectionError(f"hook connections not served: {new.said()}"))

    def close(self) -> None:
        if self._closing.is_set():
            return
        self._closing.set()
        self._door.join(timeout=5)
        self._reporter.join(timeout=5)
        for conn in list(self._waiting):
            self._forget(conn)
            conn.close()
        self._selector.close()
        self._listener.close()
        self._say()
        with self.lock:  # an event being answered finishes first
            pass

    def __enter__(self) -> HttpHookServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _no_delay(conn: socket.socket) -> None:
    """Every answer goes out as it is written (TCP_NODELAY). An answer is one write of its head and
    body (``reply``), which Nagle's algorithm never holds back; one in two writes it did: the body waited
    for the ACK of the head, which Claude Code delays, about 25 ms a hook (issue 42). Without Nagle that
    cannot come back, whatever writes an answer."""
    try:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:  # not TCP (a test's socket pair): nothing to hold back
        pass


def _read_body(conn: socket.socket, start: bytes, length: int, deadline: float) -> bytes:
    """The body, ``length`` bytes of it (``start``: what came with the headers), by ``deadline``."""
    chunks = [start]
    left = length - len(start)
    conn.setblocking(True)
    while left > 0:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"the call's body did not come whole within {BODY_TIMEOUT_S:.0f} s")
        conn.settimeout(min(remaining, HEADER_TIMEOUT_S))
        chunk = conn.recv(min(left, 65536))
        if not chunk:
            raise ValueError(f"the call's body ended after {length - left} of {length} bytes")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
