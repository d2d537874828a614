"""``ledger-run hook EVENT``: the command an agent's hook configuration runs for each event.

It reads the event's JSON from stdin, hands it to the run's hook server (server.py, running in
the ``ledger-run`` process that launched the agent) over a Unix socket, and prints the server's JSON
answer on stdout. It never blocks the agent for a fault of ours: whatever goes wrong (no server, a
timeout, an answer that is not JSON), it prints nothing, which lets the command run, appends one
line to the run directory's ``faults.log``, and exits 0.

Each hook is a fresh process, so this module imports only the standard library, and ``ledger-run``
dispatches here before importing its command line (see entry.py). Its path is the hook's cost: it
takes the socket from ``_socket`` (``socket`` brings ``enum`` and ``selectors``), the system calls
from ``posix``, which the interpreter has loaded (``os`` is 2 ms of imports that ``python -S`` does
not make), and forwards the event's bytes as they came, so ``json`` (and ``re``, which it brings)
and ``os`` are imported only to log a fault.
"""

import posix
import sys
import time

try:
    import _socket as socket  # the C module: what this client needs, without socket.py's imports
except ImportError:  # pragma: no cover - every CPython has it
    import socket  # type: ignore[no-redef]

SOCKET_ENV = "LEDGER_HOOK_SOCKET"
RUN_DIR_ENV = "LEDGER_RUN_DIR"
TIMEOUT_ENV = "LEDGER_HOOK_TIMEOUT"
DEFAULT_TIMEOUT_S = 120.0
FAULTS_FILE = "faults.log"
USAGE = (
    "usage: ledger-run hook EVENT [--socket PATH] [--run-dir DIR] [--token T | --token-file F] [--flag-on-fault FLAG]"
    "   (the event's JSON on stdin)"
)
OPTIONS = ("--socket", "--run-dir", "--token", "--token-file", "--flag-on-fault")
MAX_TOKEN_BYTES = 256


def _args(argv: list[str]) -> tuple[str | None, str | None, str | None, str | None, str | None]:
    event = None
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in OPTIONS and i + 1 < len(argv):
            opts[a] = argv[i + 1]
            i += 2
            continue
        if event is None and not a.startswith("-"):
            event = a
        i += 1
    return (
        event,
        opts.get("--socket") or env(SOCKET_ENV),
        opts.get("--run-dir") or env(RUN_DIR_ENV),
        opts.get("--token") or read_token(opts.get("--token-file")),
        opts.get("--flag-on-fault"),
    )


def read_token(path: str | None) -> str | None:
    """The run's secret from ``path`` (``--token-file``): this user's regular file, nobody else's to
    read, never through a link; None otherwise (the server then refuses the call and the agent goes on)."""
    if not path:
        return None
    try:
        fd = posix.open(path, posix.O_RDONLY | posix.O_NOFOLLOW | posix.O_NONBLOCK | posix.O_NOCTTY)
    except OSError:
        return None
    try:
        st = posix.fstat(fd)
        if (st.st_mode & 0o170000) != 0o100000 or st.st_uid != posix.geteuid() or st.st_mode & 0o077:
            return None
        data = posix.read(fd, MAX_TOKEN_BYTES + 1)
    except OSError:
        return None
    finally:
        posix.close(fd)
    token = data.decode("ascii", "replace").strip()
    return token if token and len(data) <= MAX_TOKEN_BYTES else None


def env(name: str) -> str | None:
    """An environment variable (``os.environ`` without ``os``)."""
    value = posix.environ.get(name.encode())
    return None if value is None else value.decode("utf-8", "surrogateescape")


def log_fault(run_dir: str | None, event: str | None, message: str, *, quiet: bool = False) -> None:
    """One JSON line in the run's faults.log (stderr when there is no run directory to write to;
    ``quiet``: nothing then, for the wrapper, whose stderr is the command's output). Nothing here
    masks secrets: a message names a call, a size, a path of ours, never a command, an output or an
    answer."""
    import json
    import os
    import stat

    entry = {"at": time.time(), "where": f"hook {event or '?'}", "error": message, "command": None}
    if run_dir and os.path.isdir(run_dir):
        try:  # never through a link, never into another user's file, a FIFO or a device
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
            fd = os.open(os.path.join(run_dir, FAULTS_FILE), flags, 0o600)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                os.close(fd)
                raise PermissionError("faults.log is not this user's regular file")
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as f:  # owner only, as every file of the run
                f.write(json.dumps(entry) + "\n")
            return
        except OSError:
            pass
    if not quiet:
        print(f"ledger-run hook: {message} (the command runs without the ledger)", file=sys.stderr)


def raise_flag(path: str | None) -> None:
    """Set the server's flag at ``path`` (an empty file in its private directory, never through a
    link): a hook that did not reach the server says so to the hooks that follow (the PostToolUse
    hook then asks the server, which records the command it did not see start)."""
    if not path:
        return
    flags = posix.O_WRONLY | posix.O_CREAT | posix.O_NOFOLLOW | posix.O_NONBLOCK | posix.O_NOCTTY
    try:
        fd = posix.open(path, flags, 0o600)
        try:
            posix.utime(fd)  # when it was set last: the server keeps it a while (server.flag_age)
        finally:
            posix.close(fd)
    except OSError:
        pass


def event_name(event: str) -> bool:
    """An event name the header can carry as it is: letters, digits, underscores."""
    return bool(event) and event.isascii() and event.replace("_", "a").isalnum()


def ask(
    sock_path: str,
    event: str,
    payload: bytes,
    timeout: float,
    token: str | None = None,
    call: str | None = None,
    raw: bool = False,
) -> bytes:
    """Send one event to the hook server and return its answer (b"" for none). ``token``: the run's
    (or the call's) secret, which the server asks of every call; ``call``: the tool call it speaks for
    (a wrapper's). Both go in the first line, which the server checks before it reads the rest.
    ``raw``: the payload is a JSON object's line, then bytes (server.py)."""
    if not event_name(event):
        raise ValueError(f"not an event name: {event[:40]!r}")
    if token is not None and not event_name(token):
        raise ValueError("a token is letters and digits")
    if call is not None and not event_name(call.replace("-", "_")):
        raise ValueError(f"not a tool call id: {call[:40]!r}")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        _connect(s, sock_path, time.monotonic() + timeout)
        token_field = b', "token": "' + token.encode() + b'"' if token else b""
        call_field = b', "call": "' + call.encode() + b'"' if call else b""
        raw_field = b', "raw": true' if raw else b""
        s.sendall(b'{"event": "' + event.encode() + b'"' + token_field + call_field + raw_field + b"}\n" + payload)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        s.close()
    return b"".join(chunks)


def _connect(s: socket.socket, path: str, deadline: float) -> None:
    """Connect, waiting while the server's queue of new connections is full (a Unix socket says so at
    once, EAGAIN, where TCP would wait): many hooks at once, or a flood, must not fail a hook."""
    pause = 0.001
    while True:
        try:
            s.connect(path)
            return
        except BlockingIOError:
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def main(argv: list[str]) -> int:  # noqa: C901
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return 0
    event, sock_path, run_dir, token, flag = _args(argv)
    try:
        payload = sys.stdin.buffer.read()
    except (OSError, ValueError) as e:
        log_fault(run_dir, event, f"cannot read the event from stdin: {e}")
        return 0
    if not event:
        log_fault(run_dir, event, "no EVENT given: " + USAGE)
        return 0
    if not event_name(event):
        log_fault(run_dir, event, f"EVENT must be a hook event's name, not {event[:40]!r}: " + USAGE)
        return 0
    if not sock_path:
        log_fault(run_dir, event, f"no hook server: pass --socket or set {SOCKET_ENV} (ledger-run codex does)")
        return 0
    try:
        timeout = float(env(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    except ValueError:
        timeout = DEFAULT_TIMEOUT_S
    if not 0 < timeout < 86_400:  # negative, zero, nan, absurd
        timeout = DEFAULT_TIMEOUT_S
    try:
        answer = ask(sock_path, event, payload, timeout, token)
    except OSError as e:  # a timeout is an OSError too
        raise_flag(flag)
        log_fault(run_dir, event, f"hook server {sock_path} did not answer: {e}")
        return 0
    except ValueError as e:  # a token file that holds no token of ours
        raise_flag(flag)
        log_fault(run_dir, event, f"hook server {sock_path} was not asked: {e}")
        return 0
    if not answer.strip():
        return 0
    # the server answers with one line of JSON (json.dumps of a dict, which has no newline in it,
    # then a newline): without that newline the answer was cut short and is not passed on
    whole = answer.endswith(b"\n")
    answer = answer.strip()
    if not whole:
        raise_flag(flag)
        log_fault(run_dir, event, f"hook server's answer was cut short (no end of line after {len(answer)} bytes)")
        return 0
    if not (answer.startswith(b"{") and answer.endswith(b"}")):  # what every hook answers with
        log_fault(run_dir, event, f"hook server answered {len(answer)} bytes that are not a JSON object")
        return 0
    sys.stdout.buffer.write(answer + b"\n")
    sys.stdout.flush()
    return 0
