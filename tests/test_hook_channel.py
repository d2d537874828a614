"""The hook channel between Codex's hooks, the command wrapper and the run's hook server, attacked as
the agent's own commands (which run as the user) could: a command speaking for its own call,
strangers holding the socket, and the directories a killed server leaves behind. Real hook and
wrapper processes, a real server and runtime, real commands in a git repository."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_adapters.codex.cli import fast_launcher
from ledger_adapters.codex.hooks import CodexHooks
from ledger_runtime.config import LedgerConfig
from ledger_runtime.hooks import server as hook_server
from ledger_runtime.hooks.server import HookServer
from ledger_runtime.inspection import load
from ledger_runtime.runtime import LedgerRuntime

TOKEN = "t0k3n"
EXPECTED = "".join(f"expected line {i}: the answer the test wants\n" for i in range(40))
# a script in the repository that finds its wrapper's command line among its ancestors and records a
# fake output for its own call (the call's secret, then a key traded for it), as the review's did
FORGE = r"""
import json, os, socket, sys
def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().split(b"\0")
def ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])
def send(sock, event, token, call, body):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(json.dumps({"event": event, "token": token, "call": call}).encode() + b"\n" + json.dumps(body).encode())
    s.shutdown(socket.SHUT_WR)
    out = s.recv(65536)
    s.close()
    return out
pid, args = os.getppid(), None
while pid > 1:
    argv = [a.decode() for a in cmdline(pid)]
    if "--token" in argv:
        args = argv
        break
    pid = ppid(pid)
opt = lambda name: args[args.index(name) + 1]
sock, call, token = opt("--socket"), opt("--call"), opt("--token")
output = __import__("base64").b64encode(open("expected.txt", "rb").read()).decode()
fake = {"tool_use_id": call, "exit_code": 0, "output_b64": output, "complete": True, "shown_raw": False}
took = send(sock, "Answer", token, call, fake)
key = "k" * 32
begun = send(sock, "Begin", token, call, {"tool_use_id": call, "key": key})
took_key = send(sock, "Answer", key, call, fake) if begun else b""
print("real output of the script")
print("forged:", bool(took.strip()), bool(begun.strip()), bool(took_key.strip()))
"""


def _server(tmp_path: Path):
    repo = make_repo(tmp_path / "r", {"forge.py": FORGE, "expected.txt": EXPECTED})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    hooks = CodexHooks(rt, wrap_launcher=fast_launcher(), token=TOKEN)
    server = HookServer(hooks.handle, rt.report_fault, authorize=hooks.authorize)
    hooks.socket_path = server.socket_path
    return repo, rt, hooks, server


def _hook(server: HookServer, run_dir: Path, event: str, payload: dict, token: str | None = TOKEN):
    extra = ["--token", token] if token else []
    p = subprocess.run(
        [*fast_launcher(), "hook", event, "--socket", server.socket_path, "--run-dir", str(run_dir), *extra],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
    )
    return json.loads(p.stdout) if p.stdout.strip() else None


def _codex_runs(repo: Path, server: HookServer, run_dir: Path, call: str, command: str) -> str:
    """PreToolUse, then the command Codex gets back, run as Codex runs it: what the model is shown."""
    pre = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": str(repo), "tool_use_id": call}
    answer = _hook(server, run_dir, "PreToolUse", {**pre, "tool_input": {"command": command}})
    wrapped = answer["hookSpecificOutput"]["updatedInput"]["command"]
    p = subprocess.run(["bash", "-lc", wrapped], cwd=repo, capture_output=True, text=True, timeout=60)
    return p.stdout + p.stderr


@pytest.mark.usefixtures("hook_client")
def test_a_command_cannot_answer_for_its_own_call(tmp_path: Path) -> None:
    """The secret on the wrapper's command line is spent before the command starts: a script that
    reads it and records a fake output for its own call is refused, the ledger keeps what the command
    printed, and a later read of a file holding the fake output is not answered as "same as"."""
    repo, rt, hooks, server = _server(tmp_path)
    run_dir = tmp_path / "run"
    try:
        shown = _codex_runs(repo, server, run_dir, "c1", "python3 forge.py")
        assert shown == "real output of the script\nforged: False False False\n", shown
        first = rt.state.attempts[0]
        assert rt.store.blob(first.output_hash).decode() == shown, "the ledger holds what the command printed"
        again = _codex_runs(repo, server, run_dir, "c2", "cat expected.txt")
        assert again == EXPECTED, "the file's content, not a reference to a forged output"
    finally:
        server.close()
        rt.close()
    state = load(run_dir).state
    assert [a.exit_code for a in state.attempts] == [0, 0]


def _send_raw(sock: str, event: str, token: str, call: str, body: dict) -> bytes:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(json.dumps({"event": event, "token": token, "call": call}).encode() + b"\n" + json.dumps(body).encode())
    s.shutdown(socket.SHUT_WR)
    out = s.recv(65536)
    s.close()
    return out


@pytest.mark.usefixtures("hook_client")
def test_an_answer_the_model_did_not_get_is_never_a_reference_source(tmp_path: Path) -> None:
    """A process that takes the call's secret before the wrapper trades it (one watching /proc from
    the background) can record a fake output: the wrapper is refused and prints the real output.
    Codex's rollout then says what the model got, which is not what the ledger recorded: that record
    is never the source of a reference, and a fault says so."""
    import base64

    repo, rt, hooks, server = _server(tmp_path)
    (repo / "real.py").write_text("for i in range(40):\n    print(f'real line {i} of the output the model got')\n")
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text("")
    run_dir = tmp_path / "run"
    pre = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": str(repo), "transcript_path": str(rollout)}
    try:
        answer = _hook(
            server, run_dir, "PreToolUse", {**pre, "tool_use_id": "c1", "tool_input": {"command": "python3 real.py"}}
        )
        wrapped = answer["hookSpecificOutput"]["updatedInput"]["command"]
        token = wrapped.split("--token ")[1].split()[0]
        key = "k" * 32
        assert _send_raw(server.socket_path, "Begin", token, "c1", {"tool_use_id": "c1", "key": key}).strip()
        fake = {"tool_use_id": "c1", "exit_code": 0, "complete": True, "shown_raw": False}
        fake["output_b64"] = base64.b64encode(EXPECTED.encode()).decode()
        assert _send_raw(server.socket_path, "Answer", key, "c1", fake).strip(), "the thief's record was taken"
        shown = subprocess.run(["bash", "-lc", wrapped], cwd=repo, capture_output=True, text=True).stdout
        assert shown.startswith("real line 0"), "the wrapper, refused, printed the real output"
        item = {
            "type": "CommandExecution",
            "id": "c1",
            "aggregated_output": shown,
            "exit_code": 0,
            "status": "completed",
        }
        with open(rollout, "a") as f:
            f.write(json.dumps({"type": "event_msg", "payload": {"type": "item_completed", "item": item}}) + "\n")
        _hook(server, run_dir, "PostToolUse", {**pre, "hook_event_name": "PostToolUse", "tool_use_id": "c1"})
        again = _codex_runs(repo, server, run_dir, "c2", "cat expected.txt")
        assert again == EXPECTED, "the file's content, not a reference to the record the model never got"
    finally:
        server.close()
        rt.close()
    assert "the rollout's output is not the answer recorded" in (run_dir / "faults.log").read_text()


def _rss_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.usefixtures("hook_client")
def test_strangers_on_the_socket_neither_hold_the_hooks_nor_fill_the_memory(tmp_path: Path) -> None:
    """Without the token: 70 connections that send a byte now and then, and big bodies; the real
    hooks are still answered at once, and the server reads no stranger's body."""
    repo, rt, hooks, server = _server(tmp_path)
    run_dir = tmp_path / "run"
    slow: list[socket.socket] = []
    try:
        for _ in range(70):
            s = socket.socket(socket.AF_UNIX)
            s.connect(server.socket_path)
            try:
                s.send(b"{")
            except OSError:
                pass  # past the bound of one process: closed at once
            slow.append(s)
        before = _rss_peak_mb()
        big = b"x" * (60 * 1024 * 1024)
        for _ in range(12):  # a header without the token, and 60 MB behind it
            s = socket.socket(socket.AF_UNIX)
            s.connect(server.socket_path)
            s.settimeout(5)
            try:
                s.sendall(b'{"event": "PostToolUse"}\n' + big)
            except OSError:
                pass  # the server closed it: refused before the body
            s.close()
        del big
        grew = _rss_peak_mb() - before
        for i in range(3):
            t0 = time.monotonic()
            shown = _codex_runs(repo, server, run_dir, f"c{i}", f"echo real {i}")
            assert shown == f"real {i}\n" and time.monotonic() - t0 < 10
        for s in slow:
            try:
                s.send(b" ")
            except OSError:
                pass
    finally:
        for s in slow:
            s.close()
        server.close()
        rt.close()
    assert [a.command for a in load(run_dir).state.attempts] == ["echo real 0", "echo real 1", "echo real 2"]
    # the test's own 60 MB buffer counts once; 12 bodies read by the server would be 720 MB more
    assert grew < 200, f"the server's memory grew by {grew:.0f} MB"
    assert server.dropped >= 12


@pytest.mark.slow
def test_a_flood_of_empty_connections_does_not_fail_the_real_hooks(tmp_path: Path) -> None:
    """One process connecting and closing as fast as it can filled the server's queue (it took one
    connection per round, and a Unix socket's connect fails at once when the queue is full): every
    real hook went unanswered. Now the server takes all that wait, and a client waits its turn."""
    import threading

    repo, rt, hooks, server = _server(tmp_path)
    run_dir = tmp_path / "run"
    stop = threading.Event()

    flooding = threading.Event()

    def flood() -> None:
        while not stop.is_set():
            flooding.set()
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(server.socket_path)
            except OSError:
                pass
            s.close()

    flooders = [threading.Thread(target=flood, daemon=True) for _ in range(2)]
    for t in flooders:
        t.start()
    try:
        flooding.wait(60)
        shown = [_codex_runs(repo, server, run_dir, f"c{i}", f"echo real {i}") for i in range(8)]
    finally:
        stop.set()
        for t in flooders:
            t.join()
        server.close()
        rt.close()
    assert shown == [f"real {i}\n" for i in range(8)]
    assert len(load(run_dir).state.attempts) == 8, "every call answered and recorded"


def test_a_peer_holds_a_bounded_number_of_connections(tmp_path: Path) -> None:
    repo, rt, hooks, server = _server(tmp_path)
    held = []
    try:
        for _ in range(hook_server.MAX_PER_PEER + 10):
            s = socket.socket(socket.AF_UNIX)
            s.connect(server.socket_path)
            held.append(s)
        closed: set[int] = set()
        deadline = time.monotonic() + 60  # until the server has closed them, not a fixed wait
        while len(closed) < 10 and time.monotonic() < deadline:
            for i, s in enumerate(held):
                s.setblocking(False)
                try:
                    if i not in closed and s.recv(1) == b"":
                        closed.add(i)
                except BlockingIOError:
                    pass
            time.sleep(0.02)
        assert len(closed) >= 10, f"only {len(closed)} of the connections past the bound were closed"
    finally:
        for s in held:
            s.close()
        server.close()
        rt.close()


def test_the_socket_directory_of_a_killed_server_is_removed_by_the_next(tmp_path: Path, monkeypatch) -> None:
    """A hook server killed by SIGKILL leaves its directory; the next server removes those that are
    ours and dead, and keeps a live one's and another user's."""
    base = tmp_path / "tmp"
    base.mkdir()
    env = {**os.environ, "TMPDIR": str(base)}
    code = (
        "import time; from ledger_runtime.hooks.server import HookServer; "
        "s = HookServer(lambda e, p: None, lambda w, e: None); print(s.socket_path, flush=True); time.sleep(600)"
    )
    killed = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    live = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        dead_dir = Path(killed.stdout.readline().strip()).parent
        live_dir = Path(live.stdout.readline().strip()).parent
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert dead_dir.exists(), "SIGKILL leaves the directory"
        (dead_dir / "flag-post").touch()  # and the flags it had set
        theirs = base / "ledger-hook-theirs"
        theirs.mkdir()
        old = time.time() - 3600
        for d in (dead_dir, live_dir, theirs):
            os.utime(d, (old, old))
        if os.getuid() == 0:
            os.chown(theirs, 12345, 12345)
        removed = hook_server.remove_stale(str(base))
        assert removed == [str(dead_dir)] and not dead_dir.exists()
        assert live_dir.exists() and theirs.exists()
        # and a new server does it by itself
        killed = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        dead_dir = Path(killed.stdout.readline().strip()).parent
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        os.utime(dead_dir, (old, old))
        monkeypatch.setattr("tempfile.tempdir", str(base))
        with HookServer(lambda e, p: None, lambda w, e: None):
            pass
        assert not dead_dir.exists() and live_dir.exists()
    finally:
        for p in (killed, live):
            p.kill()
            p.wait()


def test_the_hook_client_and_the_wrapper_import_little() -> None:
    """Each runs once per command (the wrapper) or per hook: what they import is their cost. Neither
    loads json, re, subprocess, selectors, base64, enum or socket.py on its way (they did: the wrapper's
    imports were most of its start), nor os, binascii or __future__ (3 ms that ``python -S`` does not
    spend: they did too)."""
    import ledger_runtime.hooks as hooks_dir

    here = os.path.dirname(hooks_dir.__file__)
    heavy = ("json", "re", "subprocess", "selectors", "base64", "enum", "socket", "shutil", "os", "binascii")
    heavy += ("__future__",)
    for module in ("client", "wrapper"):
        code = f"import sys; sys.path.insert(0, {here!r}); import {module}; print(' '.join(sorted(sys.modules)))"
        loaded = set(
            subprocess.run([sys.executable, "-S", "-E", "-c", code], capture_output=True, text=True).stdout.split()
        )
        assert module in loaded and not loaded & set(heavy), (module, sorted(loaded & set(heavy)))


def _appears(path: Path, seconds: float = 60) -> bool:
    """Whether ``path`` exists, waiting up to ``seconds`` for it."""
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return path.exists()


@pytest.mark.usefixtures("hook_client")
def test_the_wrapped_command_gets_the_signals_and_dispositions_a_shell_would(tmp_path: Path) -> None:
    """No signal ignored that a plain shell would not ignore (glibc's posix_spawn left two), and the
    signals a terminal or Codex sends reach the command (SIGHUP too); its exit code is the wrapper's."""
    wrap = [
        *fast_launcher(),
        "wrap",
        "--socket",
        str(tmp_path / "none.sock"),
        "--call",
        "c1",
        "--run-dir",
        str(tmp_path),
    ]
    probe = "grep -E '^Sig(Ign|Blk)' /proc/self/status"
    for hup in (signal.SIG_DFL, signal.SIG_IGN):  # started as it is, and under nohup
        keep = lambda hup=hup: signal.signal(signal.SIGHUP, hup)  # noqa: E731
        plain = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, preexec_fn=keep).stdout
        wrapped = subprocess.run([*wrap, "--", probe], capture_output=True, text=True, preexec_fn=keep).stdout
        assert wrapped == plain, (hup, wrapped, plain)
    for signum, name in ((signal.SIGTERM, "TERM"), (signal.SIGHUP, "HUP")):
        trapped = tmp_path / f"trapped-{name}"
        p = subprocess.Popen(
            [*wrap, "--", f"trap 'echo got-{name}; exit 7' {name}; echo ready; : > {trapped}; sleep 20 & wait"],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),  # (the suite may run under nohup)
        )
        # the shell has set its trap and says so in a file: not a sleep a loaded machine outlasts, not its
        # "ready" line, which the wrapper passes on when it relays the output, and not the shell's handlers
        # (/proc: SigCgt), which a login shell sets for SIGHUP as it starts, before the trap
        assert _appears(trapped), f"the shell never set its trap for {name}"
        p.send_signal(signum)
        out, _ = p.communicate(timeout=20)
        assert (out, p.returncode) == (f"ready\ngot-{name}\n", 7), (name, out, p.returncode)
    assert not (tmp_path / "faults.log").exists() or "Traceback" not in (tmp_path / "faults.log").read_text()


def test_the_shell_starts_the_same_by_vfork_as_by_fork() -> None:
    """The wrapper starts the shell through subprocess's C helper (vfork and exec: 1 ms, where a fork
    of the wrapper took 3 to 5); where that helper takes other arguments it forks. Both leave the
    shell the signal dispositions and output pipe a plain shell has; a shell that cannot be run is an
    OSError, not a traceback."""
    import ledger_runtime.hooks as hooks_dir

    code = f"""
import _signal, posix, sys
sys.path.insert(0, {os.path.dirname(hooks_dir.__file__)!r})
import wrapper
ignored = frozenset(s for s in wrapper.FORWARDED if _signal.getsignal(s) == _signal.SIG_IGN)  # as main() says
for fast in (True, False):
    probe = "grep -E '^Sig(Ign|Blk)' /proc/self/status; echo err >&2"
    c = wrapper.Child(["/bin/bash", "-c", probe], ignored, fast=fast)
    out = b""
    while chunk := posix.read(c.fd, 4096):
        out += chunk
    print(fast, c.wait(), out.decode().replace(chr(10), " "))
try:
    wrapper.Child(["/no/such/shell", "-c", "true"])
except OSError as e:
    print("refused", e.errno)
"""
    for hup in (signal.SIG_DFL, signal.SIG_IGN):
        keep = lambda hup=hup: signal.signal(signal.SIGHUP, hup)  # noqa: E731
        probe = "grep -E '^Sig(Ign|Blk)' /proc/self/status; echo err >&2"
        plain = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, preexec_fn=keep)
        got = subprocess.run([sys.executable, "-S", "-E", "-c", code], capture_output=True, text=True, preexec_fn=keep)
        want = (plain.stdout + plain.stderr).replace("\n", " ")
        assert got.stdout.splitlines() == [f"True 0 {want}", f"False 0 {want}", "refused 2"], (got.stdout, got.stderr)


def test_a_turn_in_a_codex_sandbox_is_not_wrapped(tmp_path: Path) -> None:
    """Codex's sandboxes (read-only, workspace-write) refuse the wrapper's socket: a command of such a
    turn runs as it is (recorded from the rollout), one of a turn without a sandbox is wrapped."""
    repo, rt, hooks, server = _server(tmp_path)
    rollout = tmp_path / "rollout.jsonl"
    pre = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": str(repo), "transcript_path": str(rollout)}
    try:
        for i, (policy, wrapped) in enumerate(
            (("read-only", False), ("workspace-write", False), ("danger-full-access", True))
        ):
            with open(rollout, "a") as f:
                f.write(json.dumps({"type": "turn_context", "payload": {"sandbox_policy": {"type": policy}}}) + "\n")
            answer = _hook(
                server,
                tmp_path / "run",
                "PreToolUse",
                {**pre, "tool_use_id": f"c{i}", "tool_input": {"command": "cat a.txt"}},
            )
            got = answer is not None and "updatedInput" in answer["hookSpecificOutput"]
            assert got is wrapped, policy
    finally:
        server.close()
        rt.close()
