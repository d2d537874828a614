"""What the product writes is its owner's alone, whatever the umask: a ledger holds what the agent
saw, secrets included. Checked by mode bits, and (as root) by another uid trying to read."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
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
        r = subprocess.run(
            ["cat", str(run / target)], capture_output=True, preexec_fn=lambda: (os.setgid(NOBODY), os.setuid(NOBODY))
        )
        assert r.returncode != 0 and b"Permission denied" in r.stderr, target


def test_codex_home_copies_are_private_and_the_login_is_linked_not_copied(tmp_path):
    """The run's home has private copies of the user's settings; the login is a link to the user's
    own file, so a token Codex refreshes (it rewrites auth.json in place, following the link) is
    the user's again, and the link goes at the end of the run."""
    from ledger_adapters.codex.cli import make_codex_home, unlink_credentials

    user = tmp_path / "user-codex"
    user.mkdir()
    (user / "config.toml").write_text('model = "x"\n')
    (user / "auth.json").write_text('{"tokens": {"refresh_token": "rt-1"}}\n')
    os.chmod(user / "auth.json", 0o600)
    (tmp_path / "run" / "codex-home").mkdir(parents=True)
    (tmp_path / "run" / "codex-home" / "auth.json").write_text("a copy an earlier version made\n")
    old = loose_umask()
    try:
        home = make_codex_home(tmp_path / "run", user)
    finally:
        os.umask(old)
    found = modes(home)
    assert found["."] == 0o700 and found["config.toml"] == 0o600, found
    assert (home / "auth.json").is_symlink() and (home / "auth.json").resolve() == (user / "auth.json").resolve()
    with open(home / "auth.json", "w") as f:  # what Codex's FileAuthStorage.save does on a refresh
        f.write('{"tokens": {"refresh_token": "rt-2"}}\n')
    assert "rt-2" in (user / "auth.json").read_text(), "the refreshed token is in the user's own file"
    unlink_credentials(home)
    assert not os.path.lexists(home / "auth.json") and "rt-2" in (user / "auth.json").read_text()


def test_a_keyring_login_is_named_when_the_runs_home_cannot_use_it(tmp_path, monkeypatch):
    from ledger_adapters.codex.cli import keyring_note

    monkeypatch.delenv("CODEX_API_KEY", raising=False)
    user = tmp_path / "user-codex"
    user.mkdir()
    assert keyring_note(user, {}) is None
    assert "system keyring" in keyring_note(user, {"cli_auth_credentials_store": "keyring"})
    (user / "auth.json").write_text("{}")
    assert keyring_note(user, {"cli_auth_credentials_store": "auto"}) is None


def test_written_pages_and_settings_files_are_private(tmp_path):
    old = loose_umask()
    try:
        r = subprocess.run(
            [sys.executable, "-m", "ledger_runtime", "config", "--write", str(tmp_path / "l.toml")],
            capture_output=True,
            text=True,
            timeout=120,
        )
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
    fast = Path(__file__).resolve().parents[1] / "ledger_runtime" / "hooks" / "fasthook.py"
    old = loose_umask()
    try:
        subprocess.run(
            [sys.executable, "-S", "-E", str(fast), "hook", "PreToolUse", "--run-dir", str(run)],
            input=b"{}",
            capture_output=True,
            timeout=60,
            env={k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")},
        )
    finally:
        os.umask(old)
    mode = stat.S_IMODE((run / "faults.log").stat().st_mode)
    assert mode == 0o600, oct(mode)


ROOT_READS = [
    "find / -name setup.py 2>/dev/null | head -n 3",
    "grep -rn zzqx_never_there / 2>/dev/null | head -n 1",
    "ls -R / 2>/dev/null | head -n 5",
    "du -sh / 2>/dev/null | tail -n 1",
]


@pytest.mark.parametrize("command", ROOT_READS)
@pytest.mark.slow
def test_reading_from_the_root_adds_at_most_a_second(tmp_path, command):
    """A read key of `/` is never signed: nothing under / is hashed, before or after. The commands
    are cut at 3 s by `timeout` (du and grep would take minutes); the ledger adds at most 1 s."""
    import time

    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())

    def added_by_ledger(cmd: str) -> float:
        t0 = time.perf_counter()
        rt.run(cmd, LocalExecutor(timeout=30))
        return time.perf_counter() - t0 - rt.state.attempts[-1].duration_s

    try:
        usual = added_by_ledger("timeout 3 sh -c 'cat a.py'")  # what a step costs the ledger on this machine now
        added = added_by_ledger(f"timeout 3 sh -c '{command}'")
        usual = max(usual, added_by_ledger("timeout 3 sh -c 'cat a.py'"))
    finally:
        rt.close()
    # a second above an ordinary read's cost (hashing what is under / would take minutes)
    assert added < 1.0 + 2 * usual, f"the ledger added {added:.2f} s (an ordinary read: {usual:.2f} s)"


def test_reading_from_the_root_through_the_codex_hook_server(tmp_path):
    """Through the hook server a PreToolUse for a read of / is answered at once (the lock is never
    held across work that grows with the file system), and the next hook is not kept waiting."""
    import json
    import time

    from ledger_adapters.codex.cli import fast_launcher
    from ledger_adapters.codex.hooks import CodexHooks
    from ledger_runtime.hooks.server import HookServer

    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    hooks = CodexHooks(rt, wrap_launcher=fast_launcher())
    server = HookServer(hooks.handle, rt.report_fault)
    hooks.socket_path = server.socket_path
    try:
        took = {}
        for i, command in enumerate(["cat a.py", *ROOT_READS, "cat a.py"]):
            payload = json.dumps(
                {
                    "hook_event_name": "PreToolUse",
                    "tool_name": "Bash",
                    "cwd": str(repo),
                    "tool_input": {"command": command},
                    "tool_use_id": f"c{i}",
                    "transcript_path": str(tmp_path / "none.jsonl"),
                }
            ).encode()
            t0 = time.perf_counter()
            r = subprocess.run(
                [
                    *fast_launcher(),
                    "hook",
                    "PreToolUse",
                    "--socket",
                    server.socket_path,
                    "--run-dir",
                    str(tmp_path / "run"),
                ],
                input=payload,
                capture_output=True,
                timeout=60,
            )
            took[command] = max(took.get(command, 0.0), time.perf_counter() - t0)
            assert r.returncode == 0, (command, r.stderr)
    finally:
        server.close()
        rt.close()
    # against the hook for an ordinary read (a process start and a round trip: seconds on a loaded machine)
    usual = took.pop("cat a.py")
    assert all(t < 1.0 + 2 * usual for t in took.values()), (usual, took)


def _codex_hooks_server(tmp_path, token="t0k3n"):
    from ledger_adapters.codex.cli import fast_launcher
    from ledger_adapters.codex.hooks import CodexHooks
    from ledger_runtime.hooks.server import HookServer

    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    sessions = tmp_path / "run" / "codex-home" / "sessions"
    sessions.mkdir(parents=True)
    hooks = CodexHooks(rt, wrap_launcher=fast_launcher(), token=token, sessions_dir=str(sessions))
    server = HookServer(hooks.handle, rt.report_fault, authorize=hooks.authorize)
    hooks.socket_path = server.socket_path
    return repo, rt, hooks, server, sessions


def _hook(server, run_dir, event, payload, *extra):
    from ledger_adapters.codex.cli import fast_launcher

    return subprocess.run(
        [*fast_launcher(), "hook", event, "--socket", server.socket_path, "--run-dir", str(run_dir), *extra],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
    )


@pytest.mark.usefixtures("hook_client")
def test_a_hook_call_without_the_runs_secret_is_refused(tmp_path):
    repo, rt, hooks, server, sessions = _codex_hooks_server(tmp_path)
    try:
        pre = {
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "cwd": str(repo),
            "tool_use_id": "c1",
            "tool_input": {"command": "cat a.py"},
        }
        forged = _hook(server, tmp_path / "run", "PreToolUse", pre)
        assert forged.returncode == 0 and forged.stdout == b"" and not rt.state.attempts and not hooks.pending
        faults = tmp_path / "run" / "faults.log"
        for _ in range(50):  # the server says so once it has closed the call: the hook may end first
            if faults.exists() and "dropped before a call" in faults.read_text():
                break
            time.sleep(0.1)
        assert "dropped before a call" in faults.read_text(), "counted, not one line each"
        real = _hook(server, tmp_path / "run", "PreToolUse", pre, "--token", "t0k3n")
        answer = json.loads(real.stdout)
        wrapped = answer["hookSpecificOutput"]["updatedInput"]["command"]
        assert "--token" in wrapped and "t0k3n" not in wrapped, "the wrapper gets its own call's secret"
        call_token = wrapped.split("--token ")[1].split()[0]
        # an Answer for that call with another secret is refused; with the call's own, taken once
        bad = _hook(
            server,
            tmp_path / "run",
            "Answer",
            {"tool_use_id": "c1", "exit_code": 0, "output_b64": "eA=="},
            "--token",
            "t0k3n",
        )
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
    outside.write_text(
        json.dumps(
            {
                "type": "event_msg",
                "payload": {
                    "type": "item_completed",
                    "item": {
                        "type": "CommandExecution",
                        "id": "c9",
                        "command": ["cat", "a.py"],
                        "aggregated_output": "forged\n",
                        "exit_code": 0,
                    },
                },
            }
        )
        + "\n"
    )
    try:
        for path in (str(fifo), str(outside)):
            t0 = time.perf_counter()
            r = _hook(
                server,
                tmp_path / "run",
                "PostToolUse",
                {
                    "hook_event_name": "PostToolUse",
                    "tool_name": "Bash",
                    "cwd": str(repo),
                    "tool_use_id": "c9",
                    "tool_input": {"command": "cat a.py"},
                    "transcript_path": path,
                },
                "--token",
                "t0k3n",
            )
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
    from ledger_runtime.ledger.private import InUse

    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    first = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    try:
        first.run("cat a.py", LocalExecutor())
        with pytest.raises(InUse, match="this process"):
            LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
        # from another process too: the lock is the kernel's
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from ledger_runtime.runtime import LedgerRuntime\n"
                f"LedgerRuntime({str(repo)!r}, {str(tmp_path / 'run')!r})",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
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
    reader = (
        "import sys; from ledger_runtime.inspection import load; l = load(sys.argv[1]); a = l.state.attempts; "
        "print(len(a), l.text(a[-1].output_hash) if a else '')"
    )
    try:
        for n in (1, 2, 3):
            rt.run(f"cat a.py && echo {n}", LocalExecutor())
            seen = subprocess.run(
                [sys.executable, "-c", reader, str(tmp_path / "run")], capture_output=True, text=True, timeout=60
            )
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
        r = subprocess.run(
            [sys.executable, "-m", "ledger_runtime", "inspect", str(ro / "run"), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        assert [row["command"] for row in json.loads(r.stdout)["timeline"]] == ["cat a.py"]
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_the_run_lock_never_follows_a_planted_symlink_and_is_freed_by_the_collector(tmp_path):
    import gc

    from ledger_runtime.ledger.private import InUse

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
        r = subprocess.run(
            [sys.executable, "-m", "ledger_runtime", "inspect", str(copy / "run")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2 and "still in its -wal" in r.stderr, r.stderr
    finally:
        subprocess.run(["umount", str(copy)], capture_output=True)


# -- secrets at rest -------------------------------------------------------------------------------

OPENAI = "sk-proj-" + "Q7x9" * 8
AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
DB = "hunter2-correct-horse"
ENV_FILE = f"DEBUG=1\nDB_PASSWORD={DB}\nNAME=calc\n" + "".join(f"FEATURE_{i}=on\n" for i in range(40))


def _stored_bytes(run_dir: Path) -> bytes:
    """Every byte the run directory holds on disk (the ledger with its -wal, faults.log, answers)."""
    return b"".join(p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file())


def _secret_run(tmp_path, monkeypatch, **config):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS)
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n", ".env": ENV_FILE})
    return repo, LedgerRuntime(repo, tmp_path / "run", LedgerConfig().with_(**config))


def test_secrets_are_masked_before_anything_is_stored_and_the_model_still_gets_them(tmp_path, monkeypatch):
    from ledger_runtime.answers.transcript import Transcript
    from ledger_runtime.inspection import load

    repo, rt = _secret_run(tmp_path, monkeypatch)
    try:
        got = [
            rt.run(c, LocalExecutor())
            for c in ("env | sort", "cat .env", "cat .env", f"echo 'export GH_TOKEN=ghp_{'a1B2' * 9}' >> .env")
        ]
        rt.report_fault(
            "a test", RuntimeError(f"failed with {OPENAI}"), command=f"curl -H 'Authorization: Bearer {AWS}'"
        )
    finally:
        rt.close()
    # what the model is shown is the agent's business: the secret comes back
    assert OPENAI in got[0].output and AWS in got[0].output and DB in got[1].output
    # the ledger keeps what it stores: the masked output, whose lines masking left alone are still
    # sources (a ledger opened again holds the same); the line with the secret comes back in full
    assert got[2].answer == "spans", "the repeated read is still a reference on masked storage"
    assert f"DB_PASSWORD={DB}\n" in got[2].output and "FEATURE_20=on" not in got[2].output
    data = _stored_bytes(tmp_path / "run")
    for secret in (OPENAI, AWS, DB, "ghp_" + "a1B2" * 9):
        assert secret.encode() not in data, f"{secret[:10]}... is stored"
    loaded = load(tmp_path / "run")
    cat = loaded.text(loaded.state.attempts[1].output_hash)
    assert cat == ENV_FILE.replace(DB, "*" * len(DB)), "masked in place: same length, same lines"
    t = Transcript(loaded.state, loaded.text)
    printed = [got[0].output, ENV_FILE, ENV_FILE, got[3].output]  # steps 1 and 4 came back as they were
    assert got[0].answer == got[3].answer == "raw"
    for a, out in zip(loaded.state.attempts, printed):
        assert t.check(a, rt.redactor.mask(out)).sound, a.command


def test_a_continued_run_never_refers_to_a_masked_line(tmp_path, monkeypatch):
    """A new runtime on the run rebuilds what the model holds from the ledger: a masked output is
    not what the model got, so no later answer may point into it, even at lines that now read the
    same as the masked ones."""
    repo, rt = _secret_run(tmp_path, monkeypatch)
    try:
        rt.run("cat .env", LocalExecutor())
    finally:
        rt.close()
    (repo / ".env").write_text(ENV_FILE.replace(DB, "*" * len(DB)))
    again = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    try:
        res = again.run("cat .env", LocalExecutor())
    finally:
        again.close()
    masked_line = "DB_PASSWORD=" + "*" * len(DB) + "\n"
    assert (
        res.output == "DEBUG=1\n" + masked_line + "[ledger: lines 3-43 of step 1's output (`cat .env`) repeat here]\n"
    )


def test_redact_off_stores_as_is_and_user_patterns_mask_more(tmp_path, monkeypatch):
    from ledger_runtime.config import ConfigError

    repo, rt = _secret_run(tmp_path, monkeypatch, redact=False)
    try:
        rt.run("cat .env", LocalExecutor())
    finally:
        rt.close()
    from ledger_runtime.inspection import load

    loaded = load(tmp_path / "run")
    assert DB in loaded.text(loaded.state.attempts[0].output_hash)
    repo2 = make_repo(tmp_path / "r2", {"notes.txt": "internal id: ACME-7731-ZZ\nplain\n"})
    rt = LedgerRuntime(repo2, tmp_path / "run2", LedgerConfig().with_(redact_patterns=[r"ACME-\d{4}-[A-Z]{2}"]))
    try:
        rt.run("cat notes.txt", LocalExecutor())
    finally:
        rt.close()
    assert b"ACME-7731-ZZ" not in _stored_bytes(tmp_path / "run2")
    with pytest.raises(ConfigError, match="redact_patterns"):
        LedgerConfig().with_(redact_patterns=["(unclosed"])
    with pytest.raises(ConfigError, match="empty string"):
        LedgerConfig().with_(redact_patterns=["x*"])


def test_masking_keeps_length_and_lines_and_is_the_same_line_by_line():
    import random

    from ledger_runtime.ledger.redact import Redactor, secret_values

    r = Redactor.for_run(
        {
            "OPENAI_API_KEY": OPENAI,
            "PWD": "/home/someone/work",
            "SHORT_TOKEN": "abc",
            "MULTI_SECRET": "line-one-secret\nline-two-secret",
            "PATH": "/usr/bin",
        }
    )
    assert secret_values({"PWD": "/home/someone/work", "HOME": "/root", "SHORT_TOKEN": "abc"}) == []
    pool = [
        OPENAI,
        "line-two-secret",
        f"AKIA{'B' * 16}",
        "Authorization: Bearer abcdefghijk",
        "DB_PASSWORD=swordfish9",
        "tokens = tokenize(source)",
        "plain text",
        "",
        "x" * 30,
        "sk-",
        "API_KEY: 'quoted-value-1'",
    ]
    rng = random.Random(7)
    for _ in range(300):
        lines = [
            "".join(rng.choice(pool) + rng.choice([" ", "", "="]) for _ in range(rng.randint(0, 3)))
            for _ in range(rng.randint(1, 6))
        ]
        text = "\n".join(lines)
        masked = r.mask(text)
        assert len(masked) == len(text) and masked.count("\n") == text.count("\n")
        assert masked.split("\n") == [r.mask(line) for line in lines], "a line masks the same wherever it stands"
        assert OPENAI not in masked and "line-two-secret" not in masked and "swordfish9" not in masked
    assert r.mask("tokens = tokenize(source)") == "tokens = tokenize(source)", "code is not a setting"
    more = Redactor.off().with_values(["first-secret-value", "second-secret-value", "short"])
    assert set(more.values) == {"first-secret-value", "second-secret-value"}, "every value an adapter gives"


# -- the container helper: its state lost or tampered with -----------------------------------------


def _helper_run(tmp_path):
    """A ContainerWorkspace whose "container" is this machine (mini-swe-agent's LocalEnvironment,
    the helper reached through the environment's own execute), under a real runtime."""
    from minisweagent.environments.local import LocalEnvironment

    from ledger_adapters.container.workspace import ContainerWorkspace
    from ledger_runtime.executor import ExecResult

    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n", "b.py": "y = 2\n"})
    env = LocalEnvironment(cwd=str(repo))
    ws = ContainerWorkspace(env, str(repo), transport="env")
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig(), workspace=ws)
    ws.on_fault = rt.report_fault

    def execute(command: str, cwd: str) -> ExecResult:
        out = env.execute({"command": ws.wrap(command, cwd)}, cwd=cwd)
        return ExecResult(ws.unwrap(out["output"]), out["returncode"])

    return repo, ws, rt, execute


TAMPERINGS = {
    "directory removed": "rm -rf {dir}",
    "state deleted": "rm -f {dir}/state.marshal",
    "state garbled": "head -c 300 /dev/urandom > {dir}/state.marshal",
    "call counter bumped": "echo 999999 > {dir}/state.marshal.seq",
    "script overwritten": (
        'printf \'import json; print(json.dumps({{"changes": [], "sigs": {{}}}}))\' > {dir}/helper.py'
    ),
}


@pytest.mark.parametrize("how", list(TAMPERINGS))
def test_a_lost_or_tampered_helper_is_installed_again_and_no_edit_goes_unrecorded(tmp_path, how):
    repo, ws, rt, execute = _helper_run(tmp_path)
    try:
        rt.run("cat a.py", execute)
        first_dir = ws.dir
        assert stat.S_IMODE(os.stat(first_dir).st_mode) == 0o700
        rt.run(TAMPERINGS[how].format(dir=first_dir) + "; echo w >> a.py", execute)
        res = rt.run("cat a.py", execute)
        rt.run("echo z >> b.py", execute)
    finally:
        rt.close()
    assert res.output == "x = 1\nw\n", "the read after the edit shows the file as it is"
    assert [m.step for m in rt.state.modifications_of(str(repo / "a.py"))] == [2], "the edit made then is recorded"
    assert [m.step for m in rt.state.modifications_of(str(repo / "b.py"))] == [4], "and so is the next one"
    assert ws.reinstalls == 1 and ws.dir != first_dir and not os.path.exists(first_dir)
    faults = (tmp_path / "run" / "faults.log").read_text()
    assert "container helper failed: installed again" in faults


def test_the_helper_directory_is_never_a_planted_one(tmp_path, monkeypatch):
    """The helper's directory is made by mkdir, which fails on anything already there (a symlink
    planted to send the helper's files elsewhere included): nothing is written through it."""
    import secrets

    from ledger_adapters.container.workspace import HELPER_BASE, HelperError

    repo, ws, rt, execute = _helper_run(tmp_path)
    rt.close()
    planted, name = tmp_path / "elsewhere", HELPER_BASE + "-" + "f" * 16
    planted.mkdir()
    monkeypatch.setattr(secrets, "token_hex", lambda n=8: "f" * (2 * n))  # the next install's name, known
    os.symlink(planted, name)
    try:
        with pytest.raises(HelperError):
            ws._install()
    finally:
        os.unlink(name)
    assert list(planted.iterdir()) == []


def test_a_long_output_is_stored_as_its_head_and_tail_and_still_checks_out(tmp_path):
    from ledger_runtime.answers.transcript import Transcript
    from ledger_runtime.inspection import load

    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig().with_(max_stored_output_chars=100_000))
    cmd = "seq 1 200000"  # 1.3 MB
    try:
        res = rt.run(cmd, LocalExecutor())
        again = rt.run(cmd, LocalExecutor())
    finally:
        rt.close()
    printed = "".join(f"{i}\n" for i in range(1, 200001))
    assert res.output == printed and again.output == printed, "the model's answer is the output as it is"
    loaded = load(tmp_path / "run")
    stored = loaded.text(loaded.state.attempts[0].output_hash)
    assert len(stored) < 101_000 and stored.startswith("1\n2\n") and stored.endswith("199999\n200000\n")
    assert "characters of this output are not stored (the ledger keeps at most 100000)" in stored
    assert sum(p.stat().st_size for p in (tmp_path / "run").rglob("*") if p.is_file()) < 1_000_000
    t = Transcript(loaded.state, loaded.text)
    for a in loaded.state.attempts:
        assert t.check(a, rt.stored_output(printed)).sound


def test_a_locked_ledger_costs_a_command_a_second_once_and_loses_nothing(tmp_path):
    """Another process holding the ledger's write lock (an open `sqlite3` shell in a transaction):
    the first command waits about LOCK_TIMEOUT_S, the next ones next to nothing; what could not be
    written is in faults.log; once the lock is gone, commands are committed again."""
    import time

    from ledger_runtime.inspection import load

    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            f"c = sqlite3.connect({str(tmp_path / 'run' / 'ledger.sqlite')!r}, isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        spent = []
        for n in range(4):
            t = time.perf_counter()
            res = rt.run(f"echo {n}", LocalExecutor())
            spent.append(time.perf_counter() - t)
            assert res.output == f"{n}\n"
        holder.stdin.close()
        holder.wait(timeout=30)
        free = []  # the same step with the lock gone: what a step costs on this machine now
        for n in range(3):
            t = time.perf_counter()
            rt.run(f"echo after {n}", LocalExecutor())
            free.append(time.perf_counter() - t)
    finally:
        rt.close()
        holder.kill()
    # against the unlocked steps, not the clock: a loaded machine slows both alike. Each locked step
    # waiting LOCK_TIMEOUT_S (1 s) again would put the median a whole second above.
    from ledger_runtime.ledger.store import LOCK_TIMEOUT_S

    waited = sorted(spent[1:])[1] - sorted(free)[1]
    assert spent[0] - max(free) < 3 and waited < LOCK_TIMEOUT_S / 2, (spent, free)
    lost = [json.loads(line) for line in (tmp_path / "run" / "faults.log").read_text().splitlines()]
    kept = [r["command"] for e in lost for r in e.get("records", []) if r.get("kind") == "attempt"]
    assert kept == [f"echo {n}" for n in range(4)], "every step the lock kept out is in faults.log"
    assert [a.command for a in load(tmp_path / "run").state.attempts] == [f"echo after {n}" for n in range(3)]


# -- what a review of the masking found ------------------------------------------------------------


def test_masking_edge_cases_found_in_review():
    import time as _time

    from ledger_runtime.ledger.redact import Redactor

    r = Redactor.for_run({"OPENAI_API_KEY": "abcabcab"}, ["api_secret=[^&]+", r"(password|passwd)\s*=\s*(\S+)"])
    assert r.mask("api_secret=abcd1234efgh5678\nstatus 200\n").endswith("\nstatus 200\n")
    assert "abcd1234" not in r.mask("api_secret=abcd1234efgh5678\nstatus 200\n"), "a user pattern ending a line"
    assert "hunter2" not in r.mask("db passwd = hunter2hunter2") and "cab" not in r.mask("x abcabcabcab y")
    name = "task-queue-worker-implementation.py"
    assert r.mask(name) == name, "a token shape inside a word is a name"
    t = _time.perf_counter()
    r.mask("KEY" * 3750 + "\n" + "PASS_" * 2250)
    quarter = _time.perf_counter() - t
    t = _time.perf_counter()
    r.mask("KEY" * 15000 + "\n" + "PASS_" * 9000)
    whole = _time.perf_counter() - t
    # four times the text: about four times the time (quadratic: sixteen), or well under a second anyway
    assert whole < max(1.0, 10 * quarter), ("no quadratic rescans", quarter, whole)
    assert r.mask("(`grep -v SECRET_KEY= x.py`, exit 0)").endswith("`, exit 0)"), "a marker's quote stays whole"


def test_masked_storage_keeps_paths_counts_and_checks_true(tmp_path, monkeypatch):
    from ledger_runtime.answers.transcript import Transcript
    from ledger_runtime.inspection import load

    monkeypatch.setenv("SERVICE_API_KEY", "zq-" + "7" * 30)
    repo = make_repo(
        tmp_path / "r",
        {
            "task-queue-worker-implementation.py": "x = 1\n",
            ".env": "API_KEY=" + "Q" * 24 + "\nDEBUG=1\n",
            "settings.py": "".join(f"SECRET_KEY={i}abcdefgh{i}\nOTHER_{i} = 1\n" for i in range(12)),
        },
    )
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig().with_(max_stored_output_chars=20_000))
    printed = []
    try:
        for cmd in (
            "echo y >> task-queue-worker-implementation.py",
            "echo MORE=1 >> .env",
            "grep -v SECRET_KEY= settings.py",
            "echo OTHER_99 = 2 >> settings.py",
            "grep -v SECRET_KEY= settings.py",
            "seq 1 20000",
            "seq 19000 20000",
            "python3 -c \"print('a' * 480 + '$SERVICE_API_KEY' + 'b' * 2000)\"",
        ):
            res = rt.run(cmd, LocalExecutor())
            printed.append(LocalExecutor()(cmd, str(repo)).output if res.answer != "raw" else res.output)
    finally:
        rt.close()
    again = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())  # the paths are as they were, after a restart
    try:
        assert [m.step for m in again.state.modifications_of(str(repo / "task-queue-worker-implementation.py"))] == [1]
        env_mod = again.state.modifications_of(str(repo / ".env"))[0]
        assert (env_mod.lines_added, env_mod.lines_removed) == (1, 0), "counted against the masked content alike"
    finally:
        again.close()
    data = _stored_bytes(tmp_path / "run")
    assert b"zq-777" not in data, "masked before it was cut"
    loaded = load(tmp_path / "run")
    t = Transcript(loaded.state, loaded.text)
    for a, out in zip(loaded.state.attempts, printed):
        assert t.check(a, rt.stored_output(out)).sound, a.command
