"""The hook server: the ledger's side of an agent's hooks, in the ``ledger-run`` process that
launched the agent. Hook processes (client.py) connect to its Unix socket, send
``{"event": NAME, "token": T, "call": ID}\\n`` and the event's JSON, and read back the answer (JSON,
or nothing). A call whose first line says ``"raw": true`` sends a JSON object's line, then bytes (the
handler finds them as ``payload["raw"]``), and a handler may answer with bytes, sent after their
length's line: a command's output goes as it is, neither side encoding it.

The runtime stays in memory between events (state, scanner caches, plans awaiting their
post-event), so a hook costs a process start and a socket round trip, not a ledger reload. Each call
is served in a thread of its own. By default the handler runs under the server's lock, one event at
a time; a handler that guards its own state (``serialize=False``) runs as the calls come, and takes
the lock (``lock``, shared with whoever else touches the runtime) only where it must, so a slow
event does not hold up the others. ``after(event, call)`` runs once the answer is sent and the
connection closed: work the caller need not wait for. A ``quick`` event (its handler immediate and
lock-free: a wrapper's ``Begin``) is answered by the thread that reads first lines, when its body came
with its first line. A handler that raises, or a payload that is not a JSON object, gets no answer
(the agent goes on as without the ledger) and is reported to ``on_fault``.

Flags (``set_flag``) are empty files in the server's private directory whose presence a hook command
can test without starting a process (``[ -e FLAG ]``): the adapter says with one whether a hook has
anything to ask the server, and a hook with nothing to ask starts no interpreter.

Strangers are bounded before they cost anything: one thread reads the first line of every new
connection (at most ``HEADER_MAX`` bytes within ``HEADER_TIMEOUT_S``; a peer of another uid, or past
``MAX_PER_PEER`` connections of one process, is closed at once, and past ``MAX_PENDING`` the oldest
waiting one goes), the call's token is checked against that line before a byte of the body is read,
and a body must come whole within ``BODY_TIMEOUT_S`` and ``MAX_PAYLOAD`` bytes. A client that sends
a byte now and then holds nothing, and only a caller with the token gets a thread.
"""

from __future__ import annotations

import json
import math
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

from ledger_runtime.json_text import UnreadableJSON, json_value

Handler = Callable[[str, dict[str, Any]], dict[str, Any] | bytes | None]
After = Callable[[str, str | None], None]  # (event, call) once its answer is sent
# (event, token the call carried, the tool call it speaks for) -> whether it may be served; called from
# the thread that reads first lines, without the server's lock (it must be safe so)
Authorize = Callable[[str, str | None, str | None], bool]
MAX_PAYLOAD = 16 * 1024 * 1024  # a wrapper's 8 MiB output, base64, with room
HEADER_MAX = 4096
HEADER_TIMEOUT_S = 5.0  # a client sends its first line at once: one that does not is dropped
BODY_TIMEOUT_S = 30.0  # the whole body, once the token is checked
MAX_CONNECTIONS = 64  # calls served at once; past it a call gets no answer (its command runs)
QUICK_MAX = 4096  # a quick event's body answered without a thread is at most this long
MAX_PENDING = 256  # connections still sending their first line; past it the oldest is dropped
MAX_PER_PEER = 16  # connections one process may hold, waiting or served
ACCEPT_PER_ROUND = 64  # new connections taken between two rounds of reading first lines
CLOSE_WAIT_S = 30.0  # close() waits this long in all for the events being answered
REFUSED_LOG_EVERY_S = 10.0  # strangers dropped are reported at most this often (with a count)
FAULT_KINDS = 64  # kinds of fault while reading first lines told apart; past them, all others are one


SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS


class SocketDirError(OSError):
    """No directory where the hook socket's path fits; the message says what to change."""


STALE_AFTER_S = 5.0  # a socket directory this old whose server is gone is removed by the next server
PID_FILE = "pid"
TOKEN_FILE = "token"  # the run's secret, for hook command lines (--token-file): never on a command line
FLAG_PREFIX = "flag-"  # flags: empty files ``flag-NAME`` beside the socket (set_flag)


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
    names is not running, and nothing listens on its socket: a server of another PID namespace that
    shares this directory is alive, though its pid names no process here). Returns what it removed;
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
            if not _server_gone(path) or {n for n in os.listdir(path) if not _is_flag(n)} - {
                "hook.sock",
                PID_FILE,
                TOKEN_FILE,
            }:
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
            pass  # gone, or a process of another PID namespace sharing this /tmp: whether its socket answers says
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


def event_payload(event: str, body: bytes) -> dict[str, Any]:
    """A hook event's body as the JSON object it must be; a one-line ValueError naming the event
    otherwise (the socket server's and the HTTP server's alike). It quotes none of the body: a command
    in it may hold a secret, which a cut could leave partly unmasked in faults.log."""
    try:
        return json_value(body, dict)
    except UnreadableJSON as e:  # "is not JSON: ... at line 1, column 9", "is not a JSON object (a JSON array)"
        raise ValueError(f"{event} payload is {e} ({len(body):,} bytes)") from None


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


def fault_kind(e: BaseException) -> tuple[str, str, int]:
    """A fault's kind: its type and the line that raised it. A stranger repeating one fault is said once
    in a while, and it never hides a fault of another kind, which is said the first time it happens."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return (type(e).__name__, "", 0)
    return (type(e).__name__, tb.tb_frame.f_code.co_filename, tb.tb_lineno)


def parse_header(line: bytes) -> tuple[str, str | None, str | None, bool]:
    """(event, token, call, raw) of a call's first line; ValueError when it is not one."""
    try:
        header = json_value(line)
    except UnreadableJSON as e:  # nested past the parser too: its RecursionError would end the thread
        raise ValueError(f"not a hook call: {e}") from None
    if not isinstance(header, dict) or not isinstance(header.get("event"), str):
        raise ValueError(f"not a hook call: {line[:60]!r}")
    token, call = header.get("token"), header.get("call")
    return (
        header["event"],
        # a token is ASCII (secrets.compare_digest raises TypeError on any other text: no token, then)
        token if isinstance(token, str) and token.isascii() else None,
        call if isinstance(call, str) else None,
        header.get("raw") is True,
    )


def _flag_name(name: str) -> bool:
    return bool(name) and name.isascii() and name.isalpha() and name.islower()


def _is_flag(file_name: str) -> bool:
    return file_name.startswith(FLAG_PREFIX) and _flag_name(file_name[len(FLAG_PREFIX) :])


class HookServer:
    """Serves ``handler(event, payload) -> answer | None`` on a Unix socket until ``close()``."""

    def __init__(
        self,
        handler: Handler,
        on_fault: Callable[[str, BaseException], None],
        authorize: Authorize | None = None,
        *,
        lock: threading.RLock | None = None,
        serialize: bool = True,
        after: After | None = None,
        quick: frozenset[str] = frozenset(),
    ):
        self.handler = handler
        self.on_fault = on_fault
        self.authorize = authorize  # None: every call is served (a caller that authenticates otherwise)
        self.serialize = serialize  # False: the handler takes ``lock`` itself, where it must
        self.after = after
        # events whose handler is immediate and takes no lock: answered by the thread that reads first
        # lines, when the whole call came at once (no thread to start, no wait), and without ``after``
        self.quick = quick
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
        # held by whoever touches the runtime: around each event (serialize), else where the handler says
        self.lock = lock if lock is not None else threading.RLock()
        self._count = threading.Lock()
        self._threads: dict[threading.Thread, int | None] = {}  # calls being served -> their peer's pid
        self._reading: set[socket.socket] = set()  # connections still sending their call: close() cuts them
        self._waiting: dict[socket.socket, _Waiting] = {}
        self._closed = False
        self.handled = 0
        self.dropped = 0  # strangers dropped (no first line in time, too many, another uid)
        self._dropped_said = 0
        self._said_at = 0.0
        self._fault_said_at: dict[tuple[str, str, int], float] = {}  # a kind of fault -> when last said
        self._sayers: set[threading.Thread] = set()  # threads saying a fault: close() waits for them
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
                        self._read_one(sel, key.fileobj)  # type: ignore[arg-type]
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

    def _read_one(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        """Read from one connection; a fault of ours drops that connection, never the thread that
        reads every first line (every later hook would go unanswered)."""
        try:
            self._read_header(sel, conn)
        except Exception as e:
            self._drop(sel, conn)  # counted with the dropped: said with them, the first of each kind as it is
            kind = fault_kind(e)
            if kind not in self._fault_said_at and len(self._fault_said_at) >= FAULT_KINDS:
                kind = ("", "", 0)
            now = time.monotonic()
            if now - self._fault_said_at.get(kind, -math.inf) >= REFUSED_LOG_EVERY_S:
                self._fault_said_at[kind] = now
                self._say("reading a hook call", e)

    def _read_header(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:  # noqa: C901
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
            event, token, call, raw = parse_header(line)
        except ValueError:
            event = None
        # the token before anything else: a stranger's call is closed here, counted, never given a thread
        if event is None or (self.authorize is not None and not self.authorize(event, token, call)):
            conn.close()
            self.dropped += 1
            return
        if event in self.quick and self._quick(conn, event, call, rest, raw):
            return
        self._threads = {t: p for t, p in self._threads.items() if t.is_alive()}
        if len(self._threads) >= MAX_CONNECTIONS:  # no answer: the client fails open, its command runs
            conn.close()
            self.dropped += 1
            return
        conn.setblocking(True)
        t = threading.Thread(target=self._one, args=(conn, event, call, rest, raw), daemon=True)
        try:
            t.start()
        except RuntimeError:  # no thread to be had (the process's limit): as too many, the client fails open
            conn.close()
            self.dropped += 1
            return
        self._threads[t] = w.peer  # once started: close() joins only threads that ran

    def _quick(self, conn: socket.socket, event: str, call: str | None, rest: bytes, raw: bool) -> bool:
        """Answer a quick event here, without a thread, when its whole body came with its first line
        (the client has sent it and closed its side); False when it has not: a thread reads the rest."""
        data = rest
        while len(data) <= QUICK_MAX:
            try:
                chunk = conn.recv(QUICK_MAX + 1 - len(data))
            except BlockingIOError:
                return False  # more to come
            except OSError:
                chunk = b""
            if not chunk:
                break
            data += chunk
        else:
            return False
        with conn:
            try:
                answer = self._handle(event, data, call, raw)
                if isinstance(answer, bytes):
                    conn.send(b"%d\n" % len(answer) + answer)  # a few bytes into an empty buffer: never waits
                elif answer is not None:
                    conn.send(json.dumps(answer).encode() + b"\n")
            except Exception as e:  # reported from a thread: the lock may be held by a slow event
                self._say("serving a hook", e)
        return True

    def _say(self, where: str, e: BaseException) -> bool:
        """Say a fault from a thread of its own (the lock may be held by a slow event), one close() waits for: a
        fault said after it would land past the run's end, in a closed ledger. Whether it is said: with no thread
        to be had (the process's limit), it is not."""
        t = threading.Thread(target=self._fault, args=(where, e), daemon=True)
        try:
            t.start()
        except RuntimeError:  # no thread to be had: unsaid (False), never raised into the thread reading first lines
            return False
        with self._count:  # once started: close() joins only threads that ran
            self._sayers = {s for s in self._sayers if s.is_alive()}
            self._sayers.add(t)
        return True

    def _fault(self, where: str, e: BaseException) -> None:
        with self.lock:
            self.on_fault(where, e)

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
            # said by a thread of its own: under the lock here, the door waited for a slow event to end, and no
            # first line (a wrapper's Begin neither) was read meanwhile
            unsaid = self._dropped_said, self._said_at
            if not self._say("serving hooks", self._dropped_news(now)):
                self._dropped_said, self._said_at = unsaid  # said at a later round, or at close

    def _dropped_news(self, now: float) -> ConnectionError:
        """The connections dropped since the last said, as the fault that says them (now said)."""
        n, self._dropped_said, self._said_at = self.dropped - self._dropped_said, self.dropped, now
        return ConnectionError(f"{n} connection(s) dropped before a call (no first line in time, no token, too many)")

    # -- one call, in a thread of its own ---------------------------------------------------------------

    def _one(self, conn: socket.socket, event: str, call: str | None, rest: bytes, raw: bool = False) -> None:
        answered = False
        with conn:
            try:
                self._reading.add(conn)
                try:
                    body = rest + _read_all(conn, MAX_PAYLOAD - len(rest), time.monotonic() + BODY_TIMEOUT_S)
                finally:
                    self._reading.discard(conn)
                answer = self._handle(event, body, call, raw)
                answered = True
                if isinstance(answer, bytes):  # its length first: the client knows it is whole
                    conn.sendall(b"%d\n" % len(answer) + answer)
                elif answer is not None:  # one line: the newline says the answer is whole
                    conn.sendall(json.dumps(answer).encode() + b"\n")
            except Exception as e:  # a broken client or a fault of ours: no answer, the agent goes on
                with self.lock:
                    self.on_fault("serving a hook", e)
        # the connection is closed: the client has its answer, and what follows is off its path
        if answered and self.after is not None:
            try:
                self.after(event, call)
            except Exception as e:
                with self.lock:
                    self.on_fault(f"after a hook ({event})", e)

    def _handle(
        self, event: str, body: bytes, call: str | None = None, raw: bool = False
    ) -> dict[str, Any] | bytes | None:
        data = b""
        if raw:
            body, nl, data = body.partition(b"\n")
            if not nl:
                raise ValueError(f"{event} payload has no line before its bytes ({len(body):,} bytes)")
        payload = event_payload(event, body)
        if raw:
            payload["raw"] = data
        if call is not None:  # a call that spoke for a tool call speaks for that one only
            payload["tool_use_id"] = call
        with self._count:
            self.handled += 1
        if not self.serialize or event in self.quick:
            return self.handler(event, payload)
        with self.lock:
            return self.handler(event, payload)

    # -- flags ------------------------------------------------------------------------------------------

    def keep_token(self, token: str) -> str:
        """Write the run's secret beside the socket (owner-only, in the server's private directory) and
        return its path, which hook command lines name instead of the secret: a command line is
        readable by every user of the machine (/proc/PID/cmdline)."""
        from ledger_runtime.ledger.private import write_private

        path = os.path.join(self._dir, TOKEN_FILE)
        write_private(path, token)
        return path

    def flag_path(self, name: str) -> str:
        """Where the flag ``name`` (lower-case letters) is, set or not."""
        if not _flag_name(name):
            raise ValueError(f"a flag's name is lower-case letters, not {name[:40]!r}")
        return os.path.join(self._dir, FLAG_PREFIX + name)

    def set_flag(self, name: str, on: bool) -> None:
        """Set (an empty file, owner-only, never through a link) or clear the flag ``name``; the file
        is made or removed each time (a hook may have set it: the client does on a fault). The caller
        serializes its calls for one flag."""
        path = self.flag_path(name)
        if on:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600))
            return
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def flag_age(self, name: str) -> float | None:
        """Seconds since the flag ``name`` was last set; None when it is clear."""
        try:
            return max(0.0, time.time() - os.lstat(self.flag_path(name)).st_mtime)
        except FileNotFoundError:
            return None

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
        with self._count:
            sayers = list(self._sayers)
        for t in sayers:  # then the faults the door said, waiting for the lock those events held
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.dropped > self._dropped_said:  # those of the last seconds, which no round of the door said
            self._fault("serving hooks", self._dropped_news(time.monotonic()))
        try:
            self._sock.close()
        finally:
            _remove_dir(self._dir)

    def __enter__(self) -> HookServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _remove_dir(path: str) -> bool:
    """Remove a socket directory (its socket, pid file and flags, then itself); whether it is gone."""
    try:
        flags = [n for n in os.listdir(path) if _is_flag(n)]
    except OSError:
        flags = []
    for name in ("hook.sock", PID_FILE, TOKEN_FILE, *flags):
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
