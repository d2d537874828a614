"""How an agent's hooks run ``ledger-run`` from this installation: the command lines an adapter
writes into the agent's hook configuration."""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, TypeVar

Run = TypeVar("Run", bound=Callable[..., Any])


def hook_launcher() -> list[str]:
    """``ledger-run`` of this installation (the script beside this interpreter, else the one on PATH,
    else ``python -m ledger_runtime``)."""
    script = Path(sys.executable).parent / "ledger-run"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("ledger-run")
    return [found] if found else [sys.executable, "-m", "ledger_runtime"]


def fast_launcher(compiled: bool = True) -> list[str]:
    """How a hook (and the command wrapper) runs, once per event: the compiled client where this machine
    has or can build one (hooks/compiled.py), else the interpreter, without its ``site`` start-up, on
    fasthook.py, which needs nothing but the standard library. ``compiled=False``: the Python one."""
    from ledger_runtime.hooks import fasthook_script

    if compiled:
        from ledger_runtime.hooks.compiled import compiled_launcher

        launcher = compiled_launcher()
        if launcher is not None:
            return launcher
    script = fasthook_script()
    return [sys.executable, "-S", "-E", str(script)] if script.is_file() else hook_launcher()


def exec_either(launcher: list[str], fallback: list[str] | None, args: str) -> str:
    """A POSIX shell line that becomes ``launcher ARGS`` (``args``: shell text), or ``fallback ARGS`` where
    the launcher's program is gone (the compiled hook client, its cache removed during a run): a hook
    never fails for a client missing. The test, ``[ -x ]``, is the shell's own: no process."""
    line = f"exec {shlex.join(launcher)} {args}"
    if fallback is None or fallback == launcher:
        return line
    return f"[ -x {shlex.quote(launcher[0])} ] && {line}; exec {shlex.join(fallback)} {args}"


PROXIES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def loopback_unproxied(env: dict[str, str]) -> dict[str, str]:
    """``env`` with 127.0.0.1 in ``NO_PROXY`` when a proxy is set: an agent sends its HTTP hooks (Claude
    Code's, OpenCode's plugin) through the proxy the environment names, and the run's hook server is on
    loopback (nothing else changes)."""
    if not any(env.get(k) for k in PROXIES):
        return env
    out = dict(env)
    for key in ("NO_PROXY", "no_proxy"):
        hosts = [h.strip() for h in (out.get(key) or "").split(",") if h.strip()]
        if "127.0.0.1" not in hosts and "*" not in hosts:
            out[key] = ",".join([*hosts, "127.0.0.1"])
    return out


def hook_script(
    path: Path,
    launcher: list[str],
    socket_path: str,
    run_dir: Path,
    token_file: str,
    fallback: list[str] | None = None,
) -> Path:
    """An agent's hook command for one run (``SCRIPT EVENT``), owner-only, at ``path``.

    It runs the hook client (``launcher``: ``fast_launcher()``) with the socket and where the run's secret is, never
    the secret itself on a command line, which every user can read; they stay out of the agent's settings and out of
    what the agent shows the model of a hook (Claude Code's Stop hook names the command). ``fallback``: the client to
    run where the launcher's program is gone (the compiled one's cache removed during the run)."""
    from ledger_runtime.ledger.private import write_private

    args = 'hook "$1" ' + shlex.join(["--socket", socket_path, "--run-dir", str(run_dir), "--token-file", token_file])
    line = exec_either(launcher, fallback, args)
    write_private(path, f"#!/bin/sh\n# ledger-run: the hook of this run\n{line}\n")
    os.chmod(path, 0o700)
    return path


_held_to_the_end = False  # ``hold_ctrl_c_to_the_end``: the command ends with the run, SIGINT is not given back


def hold_ctrl_c_to_the_end() -> None:
    """From an agent's start on, Ctrl-C stays ignored to the end of the process (``ledger-run <agent>``: the summary
    after the finish is not cut either); the set-up before the agent starts can still be interrupted."""
    global _held_to_the_end
    _held_to_the_end = True


def ctrl_c_is_the_agents(run: Run) -> Run:
    """For a function that runs an agent (``run_agent``, which ignores SIGINT from the agent's start) and then finishes
    the ledger: SIGINT is given back as it was when the call returns (unless ``hold_ctrl_c_to_the_end``). Ctrl-C is
    the agent's own to handle, and one that lands after the agent exited (many a user's second, to leave an
    interactive agent) must not cut the finish that follows (the calls still pending recorded, the agent's sessions
    kept, the ledger closed). The set-up before the agent starts can be interrupted, as any command."""

    @functools.wraps(run)
    def held(*args: Any, **kwargs: Any) -> Any:
        previous = signal.getsignal(signal.SIGINT)
        try:
            return run(*args, **kwargs)
        finally:
            if not _held_to_the_end and previous is not None:
                signal.signal(signal.SIGINT, previous)

    return held  # type: ignore[return-value]


def run_agent(
    cmd: list[str], cwd: str | os.PathLike, env: dict[str, str], on_start: Callable[[int], None] | None = None
) -> int:
    """Run an agent's process until it exits; its exit code (128+N where signal N ended it). SIGTERM and SIGHUP
    sent to this process go to the agent (it stops, and the caller finishes the ledger; one that came while it
    started, once it has; one ignored already, as under ``nohup``, stays ignored); SIGINT is ignored here,
    set before the agent starts, so Ctrl-C is the agent's own to handle, and left ignored when this returns (the
    caller is decorated ``ctrl_c_is_the_agents``, which gives it back after the finish). ``on_start``: told the
    agent's pid."""
    started: list[subprocess.Popen] = []
    early: list[int] = []  # signals that came while the agent was starting: sent to it once it has

    def forward(signum: int, _frame: Any) -> None:
        if not started:
            early.append(signum)
        for p in started:
            try:
                p.send_signal(signum)
            except OSError:
                pass

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # left so when this returns: the caller's finish follows
    ours = [s for s in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) is not signal.SIG_IGN]  # nohup: kept
    previous = {s: signal.signal(s, forward) for s in ours}
    try:
        started.append(subprocess.Popen(cmd, cwd=cwd, env=env))
        for signum in early[:1]:
            forward(signum, None)
        if on_start is not None:
            on_start(started[0].pid)
        code = started[0].wait()
        return 128 - code if code < 0 else code  # ended by signal N: 128+N, as a shell says it (not 256-N)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
