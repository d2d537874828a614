"""What the product writes is its owner's alone, whatever the umask: a ledger holds what the agent
saw, secrets included. Checked by mode bits, and (as root) by another uid trying to read."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime

NOBODY = 65534


def loose_umask():
    return os.umask(0o022)


def modes(tree: Path) -> dict[str, int]:
    out = {}
    for root, dirs, files in os.walk(tree):
        for name in dirs + files:
            p = Path(root) / name
            if not p.is_symlink():
                out[str(p.relative_to(tree))] = stat.S_IMODE(p.stat().st_mode)
    out["."] = stat.S_IMODE(tree.stat().st_mode)
    return out


def test_a_run_directory_is_private_whatever_the_umask(tmp_path):
    repo = make_repo(tmp_path / "r", {"a.py": "SECRET = 'sk-live-123'\n"})
    old = loose_umask()
    try:
        rt = LedgerRuntime(repo, tmp_path / "runs" / "run", LedgerConfig())
        try:
            rt.run("cat a.py", LocalExecutor())
            rt.run("echo x >> a.py", LocalExecutor())
            rt.report_fault("a test", RuntimeError("boom"))
            live = modes(tmp_path / "runs" / "run")
            assert {"ledger.sqlite-wal", "ledger.sqlite-shm"} <= set(live), live
            assert all(m == 0o600 for n, m in live.items() if n != "."), live  # SQLite's own files too
        finally:
            rt.close()
        inside = make_repo(tmp_path / "r2", {"b.py": "x\n"})
        rt2 = LedgerRuntime(inside, inside / "ledger-runs" / "one", LedgerConfig())  # the .gitignore marker
        rt2.close()
    finally:
        os.umask(old)
    run = tmp_path / "runs" / "run"
    found = modes(run)
    assert {"ledger.sqlite", "faults.log"} <= set(found), found
    for name, mode in found.items():
        want = 0o700 if (run / name).is_dir() else 0o600
        assert mode == want, (name, oct(mode))
    assert all(m == 0o600 for n, m in modes(inside / "ledger-runs" / "one").items() if n != "."), "marker too"
    if os.geteuid() != 0:
        print("SKIP-REASON: reading as another uid needs root; the mode bits above were checked")
        return
    for target in ("ledger.sqlite", "faults.log"):
        r = subprocess.run(["cat", str(run / target)], capture_output=True, preexec_fn=lambda: (os.setgid(NOBODY), os.setuid(NOBODY)))
        assert r.returncode != 0 and b"Permission denied" in r.stderr, target


def test_codex_home_copies_and_answers_are_private(tmp_path):
    from ledger_adapters.codex_cli import make_codex_home

    user = tmp_path / "user-codex"
    user.mkdir()
    (user / "config.toml").write_text('model = "x"\n')
    (user / "auth.json").write_text('{"OPENAI_API_KEY": "sk-secret"}\n')
    os.chmod(user / "auth.json", 0o644)
    old = loose_umask()
    try:
        home = make_codex_home(tmp_path / "run", user)
    finally:
        os.umask(old)
    found = modes(home)
    assert found["."] == 0o700 and found["auth.json"] == 0o600 and found["config.toml"] == 0o600, found


def test_written_pages_and_settings_files_are_private(tmp_path):
    old = loose_umask()
    try:
        r = subprocess.run([sys.executable, "-m", "ledger_runtime", "config", "--write", str(tmp_path / "l.toml")],
                           capture_output=True, text=True, timeout=120)
    finally:
        os.umask(old)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE((tmp_path / "l.toml").stat().st_mode) == 0o600


@pytest.mark.parametrize("existing", [False, True])
def test_the_hook_clients_fault_log_is_private(tmp_path, existing):
    run = tmp_path / "run"
    run.mkdir()
    if existing:
        (run / "faults.log").write_text("")
        os.chmod(run / "faults.log", 0o644)
    fast = Path(__file__).resolve().parents[1] / "ledger_runtime" / "fasthook.py"
    old = loose_umask()
    try:
        subprocess.run([sys.executable, "-S", "-E", str(fast), "hook", "PreToolUse", "--run-dir", str(run)], input=b"{}",
                       capture_output=True, timeout=60, env={k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")})
    finally:
        os.umask(old)
    mode = stat.S_IMODE((run / "faults.log").stat().st_mode)
    assert mode == 0o600, oct(mode)


ROOT_READS = ["find / -name setup.py 2>/dev/null | head -n 3", "grep -rn zzqx_never_there / 2>/dev/null | head -n 1",
              "ls -R / 2>/dev/null | head -n 5", "du -sh / 2>/dev/null | tail -n 1"]


@pytest.mark.parametrize("command", ROOT_READS)
def test_reading_from_the_root_adds_at_most_a_second(tmp_path, command):
    """A read key of `/` is never signed: nothing under / is hashed, before or after. The commands
    are cut at 3 s by `timeout` (du and grep would take minutes); the ledger adds at most 1 s."""
    import time

    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    try:
        t0 = time.perf_counter()
        rt.run(f"timeout 3 sh -c '{command}'", LocalExecutor(timeout=30))
        total = time.perf_counter() - t0
        added = total - rt.state.attempts[-1].duration_s
    finally:
        rt.close()
    assert added < 1.0, f"the ledger added {added:.2f} s"


def test_reading_from_the_root_through_the_codex_hook_server(tmp_path):
    """Through the hook server a PreToolUse for a read of / is answered at once (the lock is never
    held across work that grows with the file system), and the next hook is not kept waiting."""
    import json
    import time

    from ledger_adapters.codex_cli import fast_launcher
    from ledger_adapters.codex_hooks import CodexHooks
    from ledger_runtime.hookserver import HookServer

    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    hooks = CodexHooks(rt, wrap_launcher=fast_launcher())
    server = HookServer(hooks.handle, rt.report_fault)
    hooks.socket_path = server.socket_path
    try:
        for i, command in enumerate(ROOT_READS + ["cat a.py"]):
            payload = json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": str(repo),
                                  "tool_input": {"command": command}, "tool_use_id": f"c{i}",
                                  "transcript_path": str(tmp_path / "none.jsonl")}).encode()
            t0 = time.perf_counter()
            r = subprocess.run([*fast_launcher(), "hook", "PreToolUse", "--socket", server.socket_path, "--run-dir",
                                str(tmp_path / "run")], input=payload, capture_output=True, timeout=60)
            took = time.perf_counter() - t0
            assert r.returncode == 0 and took < 1.0, (command, took, r.stderr)
    finally:
        server.close()
        rt.close()


def _codex_hooks_server(tmp_path, token="t0k3n"):
    from ledger_adapters.codex_cli import fast_launcher
    from ledger_adapters.codex_hooks import CodexHooks
    from ledger_runtime.hookserver import HookServer

    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    sessions = tmp_path / "run" / "codex-home" / "sessions"
    sessions.mkdir(parents=True)
    hooks = CodexHooks(rt, wrap_launcher=fast_launcher(), token=token, sessions_dir=str(sessions))
    server = HookServer(hooks.handle, rt.report_fault, authorize=hooks.authorize)
    hooks.socket_path = server.socket_path
    return repo, rt, hooks, server, sessions


def _hook(server, run_dir, event, payload, *extra):
    from ledger_adapters.codex_cli import fast_launcher

    return subprocess.run([*fast_launcher(), "hook", event, "--socket", server.socket_path, "--run-dir", str(run_dir),
                           *extra], input=json.dumps(payload).encode(), capture_output=True, timeout=60)


def test_a_hook_call_without_the_runs_secret_is_refused(tmp_path):
    repo, rt, hooks, server, sessions = _codex_hooks_server(tmp_path)
    try:
        pre = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": str(repo), "tool_use_id": "c1",
               "tool_input": {"command": "cat a.py"}}
        forged = _hook(server, tmp_path / "run", "PreToolUse", pre)
        assert forged.returncode == 0 and forged.stdout == b"" and not rt.state.attempts and not hooks.pending
        assert "without this run's token" in (tmp_path / "run" / "faults.log").read_text()
        real = _hook(server, tmp_path / "run", "PreToolUse", pre, "--token", "t0k3n")
        answer = json.loads(real.stdout)
        wrapped = answer["hookSpecificOutput"]["updatedInput"]["command"]
        assert "--token" in wrapped and "t0k3n" not in wrapped, "the wrapper gets its own call's secret"
        call_token = wrapped.split("--token ")[1].split()[0]
        # an Answer for that call with another secret is refused; with the call's own, taken once
        bad = _hook(server, tmp_path / "run", "Answer", {"tool_use_id": "c1", "exit_code": 0, "output_b64": "eA=="},
                    "--token", "t0k3n")
        assert bad.stdout == b""
    finally:
        server.close()
        rt.close()
    assert call_token


def test_only_this_runs_regular_rollout_files_are_read(tmp_path):
    """A transcript_path outside the run's sessions directory is ignored, and a FIFO inside it is not
    opened for a blocking read: the hook is answered at once."""
    import time

    repo, rt, hooks, server, sessions = _codex_hooks_server(tmp_path)
    fifo = sessions / "rollout-fifo.jsonl"
    os.mkfifo(fifo)
    outside = tmp_path / "forged-rollout.jsonl"
    outside.write_text(json.dumps({"type": "event_msg", "payload": {"type": "item_completed", "item": {
        "type": "CommandExecution", "id": "c9", "command": ["cat", "a.py"], "aggregated_output": "forged\n",
        "exit_code": 0}}}) + "\n")
    try:
        for path in (str(fifo), str(outside)):
            t0 = time.perf_counter()
            r = _hook(server, tmp_path / "run", "PostToolUse", {"hook_event_name": "PostToolUse", "tool_name": "Bash",
                                                                "cwd": str(repo), "tool_use_id": "c9",
                                                                "tool_input": {"command": "cat a.py"},
                                                                "transcript_path": path}, "--token", "t0k3n")
            assert r.returncode == 0 and time.perf_counter() - t0 < 5, path
        assert hooks.last_transcript == str(fifo), "the path outside the sessions directory was never taken"
        assert all("forged" not in (rt.store.text(a.output_hash) or "") for a in rt.state.attempts)
    finally:
        server.close()
        rt.close()


def test_idle_connections_neither_pile_up_threads_nor_hold_up_the_end(tmp_path):
    import socket
    import threading
    import time

    repo, rt, hooks, server, sessions = _codex_hooks_server(tmp_path)
    idle = []
    try:
        for _ in range(200):
            s = socket.socket(socket.AF_UNIX)
            s.connect(server.socket_path)
            idle.append(s)
        time.sleep(0.5)
        assert threading.active_count() < 100, threading.active_count()
    finally:
        t0 = time.perf_counter()
        server.close()
        took = time.perf_counter() - t0
        rt.close()
        for s in idle:
            s.close()
    assert took < 5, f"close() took {took:.1f} s with idle connections open"


def test_one_runtime_per_run_directory(tmp_path):
    from ledger_runtime.private import InUse

    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    first = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    try:
        first.run("cat a.py", LocalExecutor())
        with pytest.raises(InUse, match="this process"):
            LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
        # from another process too: the lock is the kernel's
        r = subprocess.run([sys.executable, "-c", "import sys; from ledger_runtime.runtime import LedgerRuntime\n"
                            f"LedgerRuntime({str(repo)!r}, {str(tmp_path / 'run')!r})"], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode != 0 and "in use by another ledger" in r.stderr
    finally:
        first.close()
    again = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())  # free again once closed
    try:
        assert [a.command for a in again.state.attempts] == ["cat a.py"]
    finally:
        again.close()


def test_a_step_is_committed_before_run_returns(tmp_path):
    """Another process reading the ledger the moment `run` returns sees the attempt and its output:
    nothing the agent acted on is only in memory."""
    repo = make_repo(tmp_path / "r", {"a.py": "x = 'committed'\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    reader = ("import sys; from ledger_runtime.inspection import load; l = load(sys.argv[1]); a = l.state.attempts; "
              "print(len(a), l.text(a[-1].output_hash) if a else '')")
    try:
        for n in (1, 2, 3):
            rt.run(f"cat a.py && echo {n}", LocalExecutor())
            seen = subprocess.run([sys.executable, "-c", reader, str(tmp_path / "run")], capture_output=True, text=True,
                                  timeout=60)
            assert seen.stdout.split("\n")[0] == f"{n} x = 'committed'", seen.stderr[-500:]
            assert seen.stdout.split("\n")[1] == str(n)
    finally:
        rt.close()


def test_a_fault_that_cannot_be_written_is_said_on_stderr(tmp_path, capsys):
    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    (tmp_path / "run" / "faults.log").mkdir()  # as unwritable as a full disk
    try:
        rt.report_fault("a test", RuntimeError("boom"))
    finally:
        rt.close()
    err = capsys.readouterr().err
    assert "a fault could not be written" in err and "a test: RuntimeError: boom" in err
    assert "1 fault(s) of this run could not be written" in err


def test_a_ledger_on_read_only_media_is_inspected_not_refused(tmp_path):
    """SQLite cannot make its -shm file where nothing may be written: the ledger is read as it is on
    disk instead of being called "not a ledger"."""
    import shutil as sh

    if os.geteuid() != 0 or sh.which("mount") is None:
        pytest.skip("a read-only bind mount needs root and mount(8)")
    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    rt = LedgerRuntime(repo, tmp_path / "ro" / "run", LedgerConfig())
    rt.run("cat a.py", LocalExecutor())
    rt.close()
    ro = tmp_path / "ro"
    if subprocess.run(["mount", "--bind", str(ro), str(ro)], capture_output=True).returncode != 0:
        pytest.skip("bind mounts are not allowed here")
    try:
        assert subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], capture_output=True).returncode == 0
        assert subprocess.run(["touch", str(ro / "run" / "x")], capture_output=True).returncode != 0, "really read-only"
        r = subprocess.run([sys.executable, "-m", "ledger_runtime", "inspect", str(ro / "run"), "--json"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert [row["command"] for row in json.loads(r.stdout)["timeline"]] == ["cat a.py"]
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_the_run_lock_never_follows_a_planted_symlink_and_is_freed_by_the_collector(tmp_path):
    import gc

    from ledger_runtime.private import InUse

    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    os.chmod(victim, 0o644)
    (tmp_path / "run").mkdir()
    os.symlink(victim, tmp_path / "run" / ".lock")
    with pytest.raises(InUse, match="lock file"):
        LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    assert victim.read_text() == "keep me\n" and stat.S_IMODE(victim.stat().st_mode) == 0o644, "untouched"
    os.unlink(tmp_path / "run" / ".lock")
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    del rt  # never closed: the lock goes with the object
    gc.collect()
    again = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    again.close()


def test_a_read_only_ledger_with_steps_still_in_its_wal_says_so(tmp_path):
    """Read as it is on disk, a ledger whose latest steps are still in its -wal would lack them: it
    is refused with the reason instead of shown short."""
    import shutil as sh

    if os.geteuid() != 0 or sh.which("mount") is None:
        pytest.skip("a read-only bind mount needs root and mount(8)")
    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    rt = LedgerRuntime(repo, tmp_path / "ro" / "run", LedgerConfig())
    rt.run("cat a.py", LocalExecutor())
    ro = tmp_path / "ro"
    copy = tmp_path / "copy"
    sh.copytree(ro, copy)  # a copy taken while the run was live: its -wal holds the steps
    rt.close()
    (copy / "run" / "ledger.sqlite-shm").unlink(missing_ok=True)
    (copy / "run" / ".lock").unlink(missing_ok=True)
    if not (copy / "run" / "ledger.sqlite-wal").exists() or (copy / "run" / "ledger.sqlite-wal").stat().st_size == 0:
        pytest.skip("SQLite checkpointed before the copy: nothing in the -wal to lose")
    if subprocess.run(["mount", "--bind", str(copy), str(copy)], capture_output=True).returncode != 0:
        pytest.skip("bind mounts are not allowed here")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(copy)], capture_output=True, check=True)
        r = subprocess.run([sys.executable, "-m", "ledger_runtime", "inspect", str(copy / "run")], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and "still in its -wal" in r.stderr, r.stderr
    finally:
        subprocess.run(["umount", str(copy)], capture_output=True)
