"""The hook server: the ledger's side of an agent's hooks, in the ``ledger-run`` process that
launched the agent. Hook processes (hookclient.py) connect to its Unix socket, send
``{"event": NAME, "token": T, "call": ID}\\n`` and the event's JSON, and read back the answer (JSON,
or nothing).

The runtime stays in memory between events (state, scanner caches, plans awaiting their
post-event), so a hook costs a process start and a socket round trip, not a ledger reload. Events
are handled one at a time. A handler that raises, or a payload that is not a JSON object, gets no
answer (the agent goes on as without the ledger) and is reported to ``on_fault``.

Strangers are bounded before they cost anything: one thread reads the first line of every new
connection (at most ``HEADER_MAX`` bytes within ``HEADER_TIMEOUT_S``; a peer of another uid, or past
``MAX_PER_PEER`` connections of one process, is closed at once, and past ``MAX_PENDING`` the oldest
waiting one goes), the call's token is checked against that line before a byte of the body is read,
and a body must come whole within ``BODY_TIMEOUT_S`` and ``MAX_PAYLOAD`` bytes. A client that sends
a byte now and then holds nothing, and only a caller with the token gets a thread.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import stat
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

Handler = Callable[[str, dict[str, Any]], dict[str, Any] | None]
# (event, token the call carried, the tool call it speaks for) -> whether it may be served; called from
# the thread that reads first lines, without the server's lock (it must be safe so)
Authorize = Callable[[str, str | None, str | None], bool]
MAX_PAYLOAD = 16 * 1024 * 1024  # a wrapper's 8 MiB output, base64, with room
HEADER_MAX = 4096
HEADER_TIMEOUT_S = 5.0  # a client sends its first line at once: one that does not is dropped
BODY_TIMEOUT_S = 30.0  # the whole body, once the token is checked
MAX_CONNECTIONS = 64  # calls served at once; past it a call gets no answer (its command runs)
MAX_PENDING = 256  # connections still sending their first line; past it the oldest is dropped
MAX_PER_PEER = 16  # connections one process may hold, waiting or served
ACCEPT_PER_ROUND = 64  # new connections taken between two rounds of reading first lines
CLOSE_WAIT_S = 30.0  # close() waits this long in all for the events being answered
REFUSED_LOG_EVERY_S = 10.0  # strangers dropped are reported at most this often (with a count)


SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS


class SocketDirError(OSError):
    """No directory where the hook socket's path fits; the message says what to change."""


STALE_AFTER_S = 5.0  # a socket directory this old whose server is gone is removed by the next server
PID_FILE = "pid"


def _socket_dir() -> str:
    """A private directory of our own for the socket, with a path short enough for a Unix socket:
    under $TMPDIR when it fits, else under /tmp. The directories of our servers killed before they
    could remove theirs go first."""
    for base in (tempfile.gettempdir(), "/tmp"):
        if (
            len(os.path.join(base, "ledger-hook-xxxxxxxx", "hook.sock")) <= SOCKET_PATH_MAX
            and os.path.isdir(base)
            and os.access(base, os.W_OK | os.X_OK)
        ):
            remove_stale(base)
            path = tempfile.mkdtemp(prefix="ledger-hook-", dir=base)
            fd = os.open(os.path.join(path, PID_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            return path
    raise SocketDirError(
        f"no directory for the hook socket: $TMPDIR ({tempfile.gettempdir()}) is too long for a "
        f"Unix socket path (at most {SOCKET_PATH_MAX} bytes) and /tmp is not writable; set TMPDIR "
        "to a short writable directory"
    )


def remove_stale(base: str, now: float | None = None) -> list[str]:
    """Remove the ``ledger-hook-*`` directories under ``base`` that are ours (our uid, a directory,
    not a link), older than STALE_AFTER_S, and whose server is gone (the process its ``pid`` file
    names is not running; without one, nothing listens on its socket). Returns what it removed;
    anything it cannot tell, or not ours, stays."""
    removed = []
    now = time.time() if now is None else now
    try:
        names = [n for n in os.listdir(base) if n.startswith("ledger-hook-")]
    except OSError:
        return removed
    for name in names:
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or now - st.st_mtime < STALE_AFTER_S:
                continue
            if not _server_gone(path) or set(os.listdir(path)) - {"hook.sock", PID_FILE}:
                continue
            if _remove_dir(path):
                removed.append(path)
        except OSError:
            continue
    return removed


def _server_gone(path: str) -> bool:
    try:
        with open(os.path.join(path, PID_FILE), "rb") as f:
            pid = int(f.read(32) or b"0")
    except (OSError, ValueError):
        pid = 0
    if pid > 0:
        try:
            os.kill(pid, 0)
            return False  # running (or a process that took its number: kept, to be safe)
        except ProcessLookupError:
            return True
        except OSError:
            return False
    sock = os.path.join(path, "hook.sock")
    if not os.path.lexists(sock):
        return True
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(1.0)
        s.connect(sock)
        return False
    except (ConnectionRefusedError, FileNotFoundError):
        return True
    except OSError:
        return False
    finally:
        s.close()


@dataclass
class _Waiting:
    """A connection whose first line has not come yet."""

    since: float
    peer: int | None
    data: bytearray = field(default_factory=bytearray)


def peer_of(conn: socket.socket) -> tuple[int | None, int | None]:
    """(pid, uid) of the process at the other end (Linux); (None, None) where the system does not say."""
    try:
        pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        return pid, uid
    except (AttributeError, OSError, struct.error):
        return None, None


def parse_header(line: bytes) -> tuple[str, str | None, str | None]:
    """(event, token, call) of a call's first line; ValueError when it is not one."""
    header = json.loads(line)
    if not isinstance(header, dict) or not isinstance(header.get("event"), str):
        raise ValueError(f"not a hook call: {line[:60]!r}")
    token, call = header.get("token"), header.get("call")
    return header["event"], token if isinstance(token, str) else None, call if isinstance(call, str) else None


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
            _remove_dir(self._dir)
            raise
        self._sock.listen(socket.SOMAXCONN)
        self._sock.setblocking(False)  # _serve accepts all that wait, then reads
        self.lock = threading.RLock()  # one event at a time; held by whoever else touches the runtime
        self._threads: dict[threading.Thread, int | None] = {}  # calls being served -> their peer's pid
        self._reading: set[socket.socket] = set()  # connections still sending their call: close() cuts them
        self._waiting: dict[socket.socket, _Waiting] = {}
        self._closed = False
        self.handled = 0
        self.dropped = 0  # strangers dropped (no first line in time, too many, another uid)
        self._dropped_said = 0
        self._said_at = 0.0
        self._thread = threading.Thread(target=self._serve, name="ledger-hook-server", daemon=True)
        self._thread.start()

    # -- the first line of every connection, in one thread --------------------------------------------

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._sock, selectors.EVENT_READ)
        try:
            while not self._closed:
                listener = False
                for key, _ in sel.select(timeout=0.5):
                    if key.fileobj is self._sock:
                        listener = True
                    else:  # first lines before new connections: a flood never keeps a real call unread
                        self._read_header(sel, key.fileobj)  # type: ignore[arg-type]
                for _ in range(ACCEPT_PER_ROUND if listener else 0):  # what waits, in turns with the reading
                    taken = self._accept(sel)
                    if taken is None:
                        break
                    if not taken:
                        return
                self._sweep(sel)
        finally:
            for conn in list(self._waiting):
                self._drop(sel, conn, count=False)
            sel.close()

    def _accept(self, sel: selectors.BaseSelector) -> bool | None:
        """Take one waiting connection: True; None when none waits; False when the server is closed."""
        try:
            conn, _ = self._sock.accept()
        except BlockingIOError:
            return None
        except OSError:
            return False if self._closed else None
        pid, uid = peer_of(conn)
        if uid is not None and uid != os.getuid() and uid != 0:
            conn.close()
            self.dropped += 1
            return True
        held = sum(1 for w in self._waiting.values() if w.peer == pid) + sum(
            1 for t, p in self._threads.items() if p == pid and t.is_alive()
        )
        if pid is not None and held >= MAX_PER_PEER:
            conn.close()
            self.dropped += 1
            return True
        if len(self._waiting) >= MAX_PENDING:  # the oldest waiting one goes: a real client is never slow to send
            self._drop(sel, min(self._waiting, key=lambda c: self._waiting[c].since))
        conn.setblocking(False)
        self._waiting[conn] = _Waiting(time.monotonic(), pid)
        sel.register(conn, selectors.EVENT_READ)
        return True

    def _read_header(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        w = self._waiting.get(conn)
        if w is None:
            return
        try:
            chunk = conn.recv(HEADER_MAX + 1 - len(w.data))
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(sel, conn)
            return
        w.data += chunk
        line, nl, rest = bytes(w.data).partition(b"\n")
        if not nl:
            if len(w.data) > HEADER_MAX:
                self._drop(sel, conn)
            return
        sel.unregister(conn)
        del self._waiting[conn]
        try:
            event, token, call = parse_header(line)
        except ValueError:
            event = None
        # the token before anything else: a stranger's call is closed here, counted, never given a thread
        if event is None or (self.authorize is not None and not self.authorize(event, token, call)):
            conn.close()
            self.dropped += 1
            return
        self._threads = {t: p for t, p in self._threads.items() if t.is_alive()}
        if len(self._threads) >= MAX_CONNECTIONS:  # no answer: the client fails open, its command runs
            conn.close()
            self.dropped += 1
            return
        conn.setblocking(True)
        t = threading.Thread(target=self._one, args=(conn, event, call, rest), daemon=True)
        self._threads[t] = w.peer
        t.start()

    def _drop(self, sel: selectors.BaseSelector, conn: socket.socket, count: bool = True) -> None:
        self._waiting.pop(conn, None)
        try:
            sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()
        self.dropped += count

    def _sweep(self, sel: selectors.BaseSelector) -> None:
        now = time.monotonic()
        for conn in [c for c, w in self._waiting.items() if now - w.since > HEADER_TIMEOUT_S]:
            self._drop(sel, conn)
        if self.dropped > self._dropped_said and now - self._said_at >= REFUSED_LOG_EVERY_S:
            n, self._dropped_said, self._said_at = self.dropped - self._dropped_said, self.dropped, now
            with self.lock:
                self.on_fault(
                    "serving hooks",
                    ConnectionError(
                        f"{n} connection(s) dropped before a call (no first line in time, no token, too many)"
                    ),
                )

    # -- one call, in a thread of its own ---------------------------------------------------------------

    def _one(self, conn: socket.socket, event: str, call: str | None, rest: bytes) -> None:
        with conn:
            try:
                self._reading.add(conn)
                try:
                    body = rest + _read_all(conn, MAX_PAYLOAD - len(rest), time.monotonic() + BODY_TIMEOUT_S)
                finally:
                    self._reading.discard(conn)
                answer = self._handle(event, body, call)
                if answer is not None:  # one line: the newline says the answer is whole
                    conn.sendall(json.dumps(answer).encode() + b"\n")
            except Exception as e:  # a broken client or a fault of ours: no answer, the agent goes on
                with self.lock:
                    self.on_fault("serving a hook", e)

    def _handle(self, event: str, body: bytes, call: str | None = None) -> dict[str, Any] | None:
        try:
            payload = json.loads(body)
        except ValueError as e:
            raise ValueError(f"{event} payload is not JSON: {body[:60]!r}") from e
        if not isinstance(payload, dict):
            raise ValueError(f"{event} payload is not a JSON object: {body[:60]!r}")
        if call is not None:  # a call that spoke for a tool call speaks for that one only
            payload["tool_use_id"] = call
        with self.lock:
            self.handled += 1
            return self.handler(event, payload)

    def close(self) -> None:
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # no new calls; wakes the select() in _serve
        except OSError:
            pass
        for conn in list(self._reading):  # a call not sent yet will not be: its command runs as it is
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + CLOSE_WAIT_S
        self._thread.join(timeout=2.0)
        for t in list(self._threads):  # events being answered finish first, within one shared wait
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        try:
            self._sock.close()
        finally:
            _remove_dir(self._dir)

    def __enter__(self) -> HookServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _remove_dir(path: str) -> bool:
    """Remove a socket directory (its socket and pid file, then itself); whether it is gone."""
    for name in ("hook.sock", PID_FILE):
        try:
            os.unlink(os.path.join(path, name))
        except OSError:
            pass
    try:
        os.rmdir(path)
        return True
    except OSError:
        return False


def _read_all(conn: socket.socket, limit: int, deadline: float) -> bytes:
    """The rest of a call, to its end: at most ``limit`` bytes, by ``deadline`` (time.monotonic)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the call's body did not come whole within {BODY_TIMEOUT_S:.0f} s")
        conn.settimeout(left)
        chunk = conn.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise ValueError(f"payload over {MAX_PAYLOAD} bytes")
