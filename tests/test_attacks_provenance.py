"""An attacker's pass on "nothing forged, nothing leaked, nothing deleted" and "a fault of ours never blocks the
agent": each test failed before its fix. Real processes, real files, a real umask and real resource limits."""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.hooks import compiled, fasthook_script
from ledger_runtime.runtime import LedgerRuntime

ROOT = Path(__file__).resolve().parents[1]


def _python_under(umask: int, code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``code`` run by this Python in a process of its own whose umask is ``umask``."""
    line = f'umask {umask:03o}; exec {sys.executable} -c "$0"'
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        ["sh", "-c", line, code], capture_output=True, text=True, timeout=120, env={**env, "PYTHONPATH": path}
    )


def _loose(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode) & 0o077


def test_the_cache_and_what_is_made_above_it_are_private_under_umask_000(tmp_path) -> None:
    """Before: ``~/.cache`` (or ``$XDG_CACHE_HOME``) missing was made 0777 under umask 000 (Path.mkdir's parents
    take the umask), a directory of the user's that every other user could write; and the cache check then refused
    it ('others may write it'), so the compiled hook client and needle search were never used again."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("LEDGER_HOOK_CACHE", "XDG_CACHE_HOME")}
    env["HOME"] = str(home)
    code = (
        "import os; from ledger_runtime.ledger.native import cache_dir, private_cache; "
        "print(private_cache(cache_dir(os.environ)))"
    )
    p = _python_under(0o000, code, env)
    assert p.returncode == 0, p.stderr
    assert _loose(home / ".cache") == 0 and _loose(home / ".cache" / "ledger-runtime") == 0
    assert "others may write" not in p.stdout and str(home / ".cache" / "ledger-runtime") in p.stdout
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg" / "deeper")
    p = _python_under(0o000, code, env)
    assert p.returncode == 0 and "others may write" not in p.stdout, p.stdout + p.stderr
    assert _loose(tmp_path / "xdg") == 0 and _loose(tmp_path / "xdg" / "deeper") == 0


def test_the_directories_made_above_a_run_directory_are_private_under_umask_000(tmp_path) -> None:
    """Before: ``-o runs/deep/run`` made ``runs`` and ``runs/deep`` 0777 under umask 000: any user could rename the
    run directory out of them and put one of theirs (with a ledger of their making) where ``inspect`` looks."""
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    run = tmp_path / "runs" / "deep" / "run"
    code = (
        "from pathlib import Path; from ledger_runtime.config import LedgerConfig; "
        "from ledger_runtime.executor import LocalExecutor; from ledger_runtime.runtime import LedgerRuntime; "
        f"rt = LedgerRuntime(Path({str(repo)!r}), Path({str(run)!r}), LedgerConfig()); "
        "rt.run('cat a.py', LocalExecutor()); rt.close()"
    )
    p = _python_under(0o000, code, dict(os.environ))
    assert p.returncode == 0, p.stderr
    assert {n: oct(_loose(tmp_path / n)) for n in ("runs", "runs/deep", "runs/deep/run")} == dict.fromkeys(
        ("runs", "runs/deep", "runs/deep/run"), "0o0"
    )
    loose = [str(f) for f in run.iterdir() if _loose(f)]
    assert not loose, loose


def _file_size_limit(limit: int):
    def set_it() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return set_it


@pytest.mark.parametrize("client", ["compiled", "python"])
def test_a_fault_log_past_the_file_size_limit_never_costs_the_command_its_output(client, tmp_path) -> None:
    """Before: the compiled wrapper, its server gone and ``faults.log`` past RLIMIT_FSIZE (``ulimit -f``), was
    killed by SIGXFSZ as it logged the fault: the command had run, and the agent got neither its output nor its
    exit code (153); the compiled hook died the same way. Python ignores SIGXFSZ, so its client went on."""
    if client == "compiled":
        build = compiled.found()
        if build.path is None:
            pytest.skip(f"no compiled hook client here: {build.why}")
        launcher = [build.path]
    else:
        launcher = [sys.executable, "-S", "-E", "-B", str(fasthook_script())]  # -B: no .pyc cut short by the limit
    run = tmp_path / "run"
    run.mkdir()
    (run / "faults.log").write_bytes(b"x" * 20_000)
    gone = str(tmp_path / "gone.sock")
    wrap = [*launcher, "wrap", "--socket", gone, "--call", "c0", "--run-dir", str(run), "--", "echo hello; exit 3"]
    p = subprocess.run(wrap, capture_output=True, timeout=60, preexec_fn=_file_size_limit(10_240))
    assert (p.returncode, p.stdout, p.stderr) == (3, b"hello\n", b"")
    hook = [*launcher, "hook", "PreToolUse", "--socket", gone, "--run-dir", str(run)]
    p = subprocess.run(hook, input=b"{}", capture_output=True, timeout=60, preexec_fn=_file_size_limit(10_240))
    assert p.returncode == 0 and p.stdout == b"" and b"did not answer" in p.stderr, p


SERVER = (
    "import time; from ledger_runtime.hooks.server import HookServer; "
    "s = HookServer(lambda e, p: None, lambda w, e: None); s.keep_token('0123abcd'); "
    "print(s.socket_path, flush=True); time.sleep(600)"
)


def _servers(tmp_path: Path, n: int) -> tuple[Path, dict[str, str], list[subprocess.Popen], list[Path]]:
    """``n`` hook servers, each in a process of its own with its token kept (as every agent's run keeps it), their
    socket directories under ``base`` (their $TMPDIR)."""
    base = tmp_path / "tmp"
    base.mkdir()
    env = {**os.environ, "TMPDIR": str(base)}
    procs = [
        subprocess.Popen([sys.executable, "-c", SERVER], env=env, stdout=subprocess.PIPE, text=True) for _ in range(n)
    ]
    dirs = [Path(p.stdout.readline().strip()).parent for p in procs]
    return base, env, procs, dirs


def test_a_killed_servers_directory_with_its_token_is_removed_by_the_next(tmp_path) -> None:
    """Before: the next server removed a killed server's directory only when it held its socket and pid file
    alone; every agent's run keeps the run's token there too, so none was ever removed (SECURITY.md says they are)."""
    from ledger_runtime.hooks import server as hook_server

    base, _, procs, dirs = _servers(tmp_path, 1)
    try:
        procs[0].kill()
        procs[0].wait()
        assert (dirs[0] / "token").exists()
        removed = hook_server.remove_stale(str(base), now=time.time() + 60)
        assert removed == [str(dirs[0])] and not dirs[0].exists()
    finally:
        procs[0].kill()
        procs[0].wait()


def test_a_live_servers_directory_is_kept_when_its_pid_is_not_seen(tmp_path) -> None:
    """Before: a server that shared its $TMPDIR with one in another PID namespace (two containers, one /tmp), where
    the first's pid names no process, took it for dead and removed its socket and token: every hook of that live run
    then failed, and its ledger lost every command. Something still listening on the socket is alive."""
    from ledger_runtime.hooks import server as hook_server

    base, env, procs, dirs = _servers(tmp_path, 1)
    code = (
        "import sys, time; from ledger_runtime.hooks.server import remove_stale; "
        "print(remove_stale(sys.argv[1], now=time.time() + 60))"
    )
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    try:
        p = subprocess.run(
            ["unshare", "--pid", "--fork", sys.executable, "-c", code, str(base)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**env, "PYTHONPATH": path},
        )
        if p.returncode != 0 and "unshare" in p.stderr:
            pytest.skip(f"no PID namespace here: {p.stderr.strip()}")
        assert p.returncode == 0, p.stderr
        assert p.stdout.strip() == "[]" and (dirs[0] / "hook.sock").exists() and (dirs[0] / "token").exists()
        assert hook_server.remove_stale(str(base), now=time.time() + 60) == []
    finally:
        procs[0].kill()
        procs[0].wait()


def test_the_repository_s_fsmonitor_program_is_never_run_by_the_ledger(tmp_path) -> None:
    """Before: every git the ledger ran in the work tree (the baseline's status, the scanner's listings) ran the
    program the repository's ``core.fsmonitor`` names: code of the repository's, run by ledger-run before the agent
    started (before its folder-trust prompt) and at scans, four times at the start; one that takes its time held
    the run's start and the first command for as long (up to git's 60 s each). What it says cannot be trusted
    either: the scanner's listing is its own to make."""
    repo = make_repo(tmp_path / "r", {"a.txt": "x\n"})
    ran = tmp_path / "fsmonitor-ran"
    hook = tmp_path / "fsmonitor.sh"
    hook.write_text(f'#!/bin/sh\necho "$@" >> {ran}\nexit 1\n')
    hook.chmod(0o700)
    subprocess.run(["git", "-C", str(repo), "config", "core.fsmonitor", str(hook)], check=True)
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    try:
        rt.run("echo y > b.txt", LocalExecutor())
        rt.run("cat a.txt", LocalExecutor())
        view = rt.inform()
    finally:
        rt.close()
    assert not ran.exists(), ran.read_text()
    assert "b.txt: created" in view


@pytest.mark.parametrize("mode", [0o1777, 0o1770])
def test_a_shared_directory_is_never_taken_for_a_run_directory(tmp_path, mode) -> None:
    """Before: ``-o`` naming a shared directory that exists (sticky: ``/tmp`` itself, as root; a drop directory)
    was taken for the run directory and made 0700: the sticky bit gone and every other user locked out of their own
    files there (as root, ``-o /tmp`` broke the machine's /tmp). Now refused in one line, as a link or another
    user's directory is; a directory of its own in it (missing, made 0700) is the run's."""
    from ledger_runtime.cli.dirs import unwritable
    from ledger_runtime.ledger.private import NotOurs

    repo = make_repo(tmp_path / "r", {"a.py": "x\n"})
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    (shared / "someone-elses.txt").write_text("theirs\n")
    why = unwritable(shared)
    assert why is not None and "a shared directory" in why, why
    with pytest.raises(NotOurs):
        LedgerRuntime(repo, shared, LedgerConfig())
    assert stat.S_IMODE(os.lstat(shared).st_mode) == mode
    assert sorted(os.listdir(shared)) == ["someone-elses.txt"]
    assert unwritable(shared / "run") is None and not (shared / "run").exists()
    LedgerRuntime(repo, shared / "run", LedgerConfig()).close()
    assert stat.S_IMODE(os.lstat(shared / "run").st_mode) == 0o700
