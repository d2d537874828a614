"""``ledger-run wrap``: what an agent that runs commands itself (Codex) runs in place of each shell
command, so the model gets the ledger's answer instead of the raw output.

Codex's PostToolUse hook cannot replace an output, but PreToolUse can replace the command. The
ledger replaces it with ``LOGIN_TEST; exec ledger-run wrap --socket S --call ID --token T --shell
"$0" --login-status $? --command-fd 3 3<<'DELIMITER'`` and the command itself, verbatim, in the
here-document. Codex's own shell runs this line: the test's status says whether it is a login shell
(0 when it is, found without a fork), the shell then becomes this process, ``"$0"`` is the very shell
binary Codex chose, and the command reaches the wrapper byte for byte, with no quoting added (it is
no longer than Codex would have passed). This process runs the command as Codex would have,
``[SHELL, "-lc" | "-c", COMMAND]``, without reading the login profile a second time
(``shell_argv``), with Codex's stdin, environment and working directory; collects its output (stdout
and stderr together); asks the run's hook server for the answer to it (event ``Answer``: the server
records the attempt and builds the answer from this fresh output, both sent as they are), prints
the answer, and exits with the command's own exit code. (``-- COMMAND`` instead of ``--command-fd``
takes the command from the arguments.)

The call's secret on its command line is readable by the command it wraps; before the command
starts, the wrapper trades it (event ``Begin``) for a key of its own, which only this process holds:
the secret is spent by then, and no process of the command can answer for the call.

It never changes what the command does, and never blocks the agent for a fault of ours:

- the answer comes once the shell exits, as Codex's own result does: a job it left running in the
  background (``sleep 60 &``) does not hold it up;
- a command still running after ``--wait`` seconds (a server, a long test the model polls) gets
  its output so far and the rest as it comes, unchanged (the server records it as shown raw);
- an output over ``MAX_OUTPUT`` bytes is passed through the same way;
- when the server cannot be reached or answers nonsense, the raw output is printed, the fault goes
  to the run directory's ``faults.log``, and the server's ``fault`` flag is set (``--flag-on-fault``):
  the call's PostToolUse hook then asks the server, which records the command from Codex's rollout.

Like the hook client, it imports only the standard library (entry.py dispatches here first).
"""

import _signal  # the C module: ``signal`` would import ``enum``
import posix
import select
import sys
import time

try:
    import _posixsubprocess  # subprocess's own C helper (Child)
except ImportError:  # pragma: no cover - every CPython on a POSIX system has it
    _posixsubprocess = None

if __package__:  # ledger_runtime.hooks.wrapper
    from .client import DEFAULT_TIMEOUT_S, ask, env, log_fault, raise_flag
else:  # run by path (fasthook.py): this directory is sys.path[0]
    from client import DEFAULT_TIMEOUT_S, ask, env, log_fault, raise_flag  # type: ignore[no-redef]

# What it imports is its cost on every command: sys, time, select, _posixsubprocess, the C signal
# module and posix, which the interpreter has loaded (no os: 2 ms of imports; no json, re,
# subprocess, selectors, shutil: the payloads it sends and the answers it reads have a fixed shape,
# built and read by hand; no base64 either: the output goes to the server as it is, and its answer
# comes back so).
DEFAULT_WAIT_S = 8.0  # Codex's exec_command yields after 10 s by default: answer before that
MAX_OUTPUT = 8 * 1024 * 1024
# after the shell exits, what its background jobs still print is read until they are quiet this long
# (at most DRAIN_MAX_S in all): Codex's own result of `sleep 60 & echo started` comes at once
DRAIN_QUIET_S = 0.02
DRAIN_MAX_S = 0.1
POLL_S = 0.05
# the shells whose ``-c`` / ``-lc`` the wrapper runs as Codex does (Codex passes the same two forms)
SHELLS = ("bash", "sh", "dash", "zsh", "ksh", "mksh")
OPTIONS = (
    "--socket",
    "--call",
    "--run-dir",
    "--wait",
    "--token",
    "--shell",
    "--login",
    "--login-status",
    "--command-fd",
    "--flag-on-fault",
)
# what a terminal or Codex sends the command (Ctrl-C, a stop, a hang-up, ...): passed on to it
FORWARDED = tuple(
    getattr(_signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGWINCH")
    if hasattr(_signal, name)
)
USAGE = (
    "usage: ledger-run wrap --socket PATH --call ID [--token T] [--run-dir DIR] [--wait SECONDS] "
    "[--shell PATH] [--login 0|1 | --login-status N] [--flag-on-fault FLAG] (--command-fd N | -- COMMAND)"
)


def _args(argv: list[str]) -> dict[str, str] | None:
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out["command"] = (
                " ".join(argv[i + 1 :]) if len(argv) > i + 2 else (argv[i + 1] if i + 1 < len(argv) else "")
            )
            return out
        if a in OPTIONS and i + 1 < len(argv):
            out[a[2:]] = argv[i + 1]
            i += 2
            continue
        return None
    return out if "command-fd" in out else None


def _command_from(fd_text: str) -> str | None:
    """The command from the here-document on file descriptor ``fd_text`` (which is closed then, so
    the command never inherits it); a here-document ends with one newline of its own."""
    try:
        fd = int(fd_text)
        chunks = []
        while True:
            chunk = posix.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        posix.close(fd)
    except (ValueError, OSError):
        return None
    data = b"".join(chunks)
    data = data[:-1] if data.endswith(b"\n") else data
    return data.decode("utf-8", "surrogateescape")


def _basename(path: str) -> str:
    return path.rpartition("/")[2]


def _isdir(path: str) -> bool:
    try:
        return posix.stat(path).st_mode & 0o170000 == 0o040000
    except (OSError, ValueError):
        return False


def _which(name: str) -> str | None:
    for d in (env("PATH") or "/bin:/usr/bin").split(":"):
        candidate = f"{(d or '.').rstrip('/')}/{name}"
        if posix.access(candidate, posix.X_OK) and not _isdir(candidate):
            return candidate
    return None


def shell(given: str | None = None) -> str:
    """The shell to run the command with: the one Codex ran this wrapper with (``"$0"``), when it is
    a shell whose ``-c`` we know; else bash where there is one (as Codex's own shell tool)."""
    for candidate in (given, env("SHELL"), "bash", "/bin/sh"):
        if candidate and not candidate.startswith("/"):
            candidate = _which(candidate)
        if candidate and _basename(candidate) in SHELLS and posix.access(candidate, posix.X_OK):
            return candidate
    return "/bin/sh"


def shell_argv(given: str | None, login: str | None, command: str) -> list[str]:
    """How to run a command Codex runs as ``[SHELL, "-lc", COMMAND]`` (``-c`` without a login shell),
    from inside the shell Codex started for this wrapper, which has read the login profile already:
    the same shell, the environment that profile set, and a login shell again where the shell can be
    told so without reading the profile twice (``bash --noprofile -l``, ``zsh -f -l``: a profile that
    prints, or adds to PATH, does it once, as without the ledger); other shells with ``-c``."""
    sh = shell(given)
    if login == "0":
        return [sh, "-c", command]
    name = _basename(sh)
    if name == "bash":
        return [sh, "--noprofile", "-lc", command]
    if name == "zsh":
        return [sh, "-f", "-lc", command]
    return [sh, "-c", command]


def exit_code(status: int) -> int:
    """A wait status as a shell reports it (killed by a signal: 128 + the signal)."""
    rc = posix.waitstatus_to_exitcode(status)
    return 128 - rc if rc < 0 else rc & 0xFF


def _vfork_exec(argv: list[str], w: int) -> int | None:
    """Start ``argv`` with its stdout and stderr on ``w`` through the C helper subprocess itself
    uses (``_posixsubprocess``: vfork and exec, 1 ms where a fork of this process takes 3 to 5, and
    SIGPIPE, SIGXFSZ back to their defaults); its pid, or None where this Python's helper takes
    other arguments (a private module: then fork and exec, as before)."""
    if _posixsubprocess is None:
        return None
    args = [a.encode("utf-8", "surrogateescape") for a in argv]
    er, ew = posix.pipe()  # the child's exec error, if any; closed by its exec
    try:
        given = (args, [args[0]], False, (), None, None, -1, -1, -1, w, -1, w, er, ew, True, False, -1)
        given += (None, None, None, -1, None)  # gid, groups, uid, umask, preexec_fn
        try:
            pid = _posixsubprocess.fork_exec(*given, True)  # 3.11 to 3.13: allow_vfork
        except TypeError:
            try:
                pid = _posixsubprocess.fork_exec(*given)  # 3.14: vfork where it can, always
            except TypeError:
                return None
        posix.close(ew)
        ew = -1
        error = b""
        while True:
            chunk = posix.read(er, 4096)
            if not chunk:
                break
            error += chunk
    finally:
        posix.close(er)
        if ew >= 0:
            posix.close(ew)
    if error:  # "OSError:ERRNO:..." (hexadecimal): the exec failed, the child is gone
        posix.waitpid(pid, 0)
        kind, _, rest = error.partition(b":")
        number = rest.partition(b":")[0]
        code = int(number, 16) if number and all(c in b"0123456789abcdefABCDEF" for c in number) else 0
        raise OSError(code, posix.strerror(code) if code else error.decode(errors="replace"))
    return pid


class Child:
    """The shell, its stdout and stderr one pipe whose other end this process reads. Started with
    vfork and exec (``_vfork_exec``), else fork and exec (``posix_spawn`` in glibc leaves its own two
    signals ignored in the child), with SIGPIPE and SIGXFSZ back to their defaults (Python ignores
    them; subprocess restores them too), the signals this process was started with ignored still
    ignored, and those it handles at their defaults (as exec leaves them)."""

    def __init__(self, argv: list[str], ignored: frozenset[int] = frozenset(), fast: bool = True):
        r, w = posix.pipe()  # both close-on-exec; dup2 makes the child's 1 and 2 inherited
        try:
            pid = _vfork_exec(argv, w) if fast else None
            if pid is None:
                pid = posix.fork()
        except (OSError, ValueError):
            posix.close(r)
            posix.close(w)
            raise
        if pid == 0:  # the child: nothing here may raise past _exit
            try:
                posix.dup2(w, 1)
                posix.dup2(w, 2)
                for signum in (_signal.SIGPIPE, _signal.SIGXFSZ, *FORWARDED):  # as this process got them
                    _signal.signal(signum, _signal.SIG_IGN if signum in ignored else _signal.SIG_DFL)
                posix.execv(argv[0], argv)
            except BaseException as e:
                try:
                    posix.write(2, f"{argv[0]}: {e}\n".encode(errors="replace"))
                finally:
                    posix._exit(127)
        posix.close(w)
        self.pid = pid
        self.fd = r
        self.status: int | None = None

    on_exit = None  # a function called once the shell has exited (no annotation: typing costs 9 ms)

    def poll(self) -> int | None:
        if self.status is None:
            pid, status = posix.waitpid(self.pid, posix.WNOHANG)
            if pid:
                self._exited(status)
        return self.status

    def wait(self) -> int:
        while self.status is None:
            try:
                self._exited(posix.waitpid(self.pid, 0)[1])
            except InterruptedError:
                continue
        return self.status

    def _exited(self, status: int) -> None:
        self.status = status
        if self.on_exit is not None:
            self.on_exit()  # type: ignore[misc]

    def send_signal(self, signum: int) -> None:
        if self.status is None:
            try:
                posix.kill(self.pid, signum)
            except OSError:
                pass


def main(argv: list[str]) -> int:
    args = _args(argv)
    if args is not None and "command-fd" in args and "command" not in args:
        command = _command_from(args["command-fd"])
        if command is not None:
            args["command"] = command
    if args is None or "command" not in args:
        print(USAGE, file=sys.stderr)
        return 2
    command = args["command"]
    run_dir = args.get("run-dir")
    try:
        wait = float(args.get("wait") or DEFAULT_WAIT_S)
    except ValueError:
        wait = DEFAULT_WAIT_S
    if wait != wait:  # nan: no deadline to wait to (as the compiled wrapper reads it)
        wait = DEFAULT_WAIT_S
    started = time.perf_counter()
    key = _begin(args, run_dir)  # before the command starts: its secret is spent then
    login = args.get("login")
    if "login-status" in args:  # the status of the shell's test: 0 for a login shell
        login = "1" if args["login-status"] == "0" else "0"
    argv_ = shell_argv(args.get("shell"), login, command)
    # a signal this process was started with ignored (nohup) stays ignored for the command, as a
    # shell would inherit it; the others a terminal or Codex sends go to the command while it runs,
    # and once it has exited act on this process as they would have (a SIGTERM then ends it)
    ignored = frozenset(s for s in FORWARDED if _signal.getsignal(s) == _signal.SIG_IGN)
    child, previous = _started(argv_, ignored)
    if child is None:
        return 127
    try:
        return _run(child, command, {**args, "key": key or ""}, run_dir, wait, started)
    finally:
        _restore(previous)


def _started(argv_: list[str], ignored: frozenset[int]) -> tuple[Child | None, dict[int, object]]:
    """The command's shell, started with this process's handlers already in place, and the handlers they replaced.

    A signal sent once the shell's trap is set must not find this process without its handler (its default would
    end it): one that comes before the child exists is passed on as soon as it does. None when it cannot start."""
    child: list[Child] = []
    early: list[int] = []

    def forward(signum: int, frame: object) -> None:
        if child:
            child[0].send_signal(signum)
        else:
            early.append(signum)

    previous = {s: _signal.signal(s, forward) for s in FORWARDED if s not in ignored}
    try:
        child.append(Child(argv_, ignored))
    except (OSError, ValueError) as e:  # no such shell, a NUL in the command
        _restore(previous)
        print(f"{argv_[0]}: {e}", file=sys.stderr)
        return None, {}
    child[0].on_exit = lambda: _restore(previous)
    for signum in early:
        child[0].send_signal(signum)
    return child[0], previous


def _restore(handlers: dict[int, object]) -> None:
    for signum, handler in handlers.items():
        _signal.signal(signum, handler)


def _begin(args: dict[str, str], run_dir: str | None) -> str | None:
    """Trade the call's secret (on the command line, readable by the command) for a key only this
    process holds; None when the server took no key (the raw output is printed then)."""
    sock = args.get("socket")
    if not sock:
        return None  # said when the answer is asked for
    key = posix.urandom(16).hex()
    call = args.get("call") or ""
    body = b'{"tool_use_id": "' + call.encode() + b'", "key": "' + key.encode() + b'"}'
    try:
        raw = ask(sock, "Begin", body, DEFAULT_TIMEOUT_S, args.get("token"), call=call or None)
        if raw.strip() != b'{"ok": true}':
            raise ValueError(f"the call was not taken ({len(raw)} bytes of answer)")
    except (OSError, ValueError) as e:
        raise_flag(args.get("flag-on-fault"))  # the command is not recorded here: its PostToolUse records it
        log_fault(run_dir, "Begin", f"hook server {sock} gave no key for call {call!r}: {e}", quiet=True)
        return None
    return key


def _run(child: Child, command: str, args: dict[str, str], run_dir: str | None, wait: float, started: float) -> int:  # noqa: C901
    out = sys.stdout.buffer
    buf = bytearray()
    deadline = time.monotonic() + wait
    passthrough = False
    fd = child.fd
    exited_at: float | None = None  # the shell is gone: what its background jobs print is drained
    quiet_since = 0.0
    while True:
        now = time.monotonic()
        if not passthrough and (deadline - now <= 0 or len(buf) > MAX_OUTPUT):
            passthrough = True  # still running, or too much: the output so far, then the rest as it comes
            out.write(bytes(buf))
            out.flush()
        if exited_at is None and child.poll() is not None:
            exited_at = quiet_since = now
        if exited_at is not None and (now - quiet_since >= DRAIN_QUIET_S or now - exited_at >= DRAIN_MAX_S):
            break  # a background job holds the pipe: Codex's own result would not wait for it either
        # a look at the shell every POLL_S: the pipe's end does not say it exited while a job holds it
        timeout = POLL_S if passthrough or exited_at is not None else min(max(deadline - now, 0.01), POLL_S)
        try:
            ready, _, _ = select.select([fd], [], [], timeout)
        except InterruptedError:
            continue
        if not ready:
            continue
        chunk = posix.read(fd, 65536)
        if not chunk:
            break
        quiet_since = time.monotonic()
        if passthrough:
            out.write(chunk)
            out.flush()
            if len(buf) <= MAX_OUTPUT:
                buf += chunk
        else:
            buf += chunk
    posix.close(fd)
    rc = exit_code(child.wait())
    complete = len(buf) <= MAX_OUTPUT
    payload = b"".join(  # the call's facts on one line, then the output as it came (server.py: raw)
        [
            b'{"tool_use_id": "',
            (args.get("call") or "").encode(),
            b'", "exit_code": ',
            str(rc).encode(),
            b', "complete": ',
            b"true" if complete else b"false",
            b', "shown_raw": ',
            b"true" if passthrough else b"false",
            b', "elapsed_s": ',
            f"{time.perf_counter() - started:.6f}".encode(),
            b"}\n",
            buf,
        ]
    )
    text = _answer(args.get("socket"), run_dir, payload, args.get("key"), args.get("call"))
    if text is None and args.get("key"):  # the server took the call, and gave no answer for it
        raise_flag(args.get("flag-on-fault"))
    if not passthrough:
        out.write(text if text is not None else bytes(buf))
        out.flush()
    return rc


def _answer(sock: str | None, run_dir: str | None, payload: bytes, key: str | None, call: str | None) -> bytes | None:
    """The server's answer text; None (print the raw output) on any fault, which is logged."""
    if not sock:
        log_fault(run_dir, "Answer", f"no hook server socket given for call {call!r}", quiet=True)
        return None
    if not key:
        return None  # the call was not taken (said then): the output goes as it is
    try:
        raw = ask(sock, "Answer", payload, DEFAULT_TIMEOUT_S, key, call=call, raw=True)
        if not raw:
            return None  # the server kept the output as it is (or had nothing to say)
        size, nl, text = raw.partition(b"\n")  # the answer's length, then the answer
        if not nl or not size.isdigit() or int(size) != len(text):
            raise ValueError(f"no whole answer text in its {len(raw)} bytes")
        return text
    except (OSError, ValueError) as e:
        log_fault(run_dir, "Answer", f"hook server {sock} gave no answer for call {call!r}: {e}", quiet=True)
        return None
