"""How an agent's hooks run ``ledger-run`` from this installation: the command lines an adapter
writes into the agent's hook configuration."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable


def hook_launcher() -> list[str]:
    """``ledger-run`` of this installation (the script beside this interpreter, else the one on PATH,
    else ``python -m ledger_runtime``)."""
    script = Path(sys.executable).parent / "ledger-run"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("ledger-run")
    return [found] if found else [sys.executable, "-m", "ledger_runtime"]


def fast_launcher() -> list[str]:
    """How a hook (and the command wrapper) runs: the interpreter, without its ``site`` start-up,
    on fasthook.py, which needs nothing but the standard library (hooks run once per event)."""
    from ledger_runtime.hooks import fasthook_script

    script = fasthook_script()
    return [sys.executable, "-S", "-E", str(script)] if script.is_file() else hook_launcher()


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


def hook_script(path: Path, launcher: list[str], socket_path: str, run_dir: Path, token_file: str) -> Path:
    """An agent's hook command for one run (``SCRIPT EVENT``), owner-only, at ``path``: the hook client
    (``launcher``: ``fast_launcher()``) with the socket and where the run's secret is (never the secret
    itself on a command line, which every user can read), which stay out of the agent's settings and out
    of what the agent shows the model of a hook (Claude Code's Stop hook names the command)."""
    import shlex

    from ledger_runtime.ledger.private import write_private

    line = (
        shlex.join([*launcher, "hook"])
        + ' "$1" '
        + shlex.join(["--socket", socket_path, "--run-dir", str(run_dir), "--token-file", token_file])
    )
    write_private(path, f"#!/bin/sh\n# ledger-run: the hook of this run\nexec {line}\n")
    os.chmod(path, 0o700)
    return path


def run_agent(
    cmd: list[str], cwd: str | os.PathLike, env: dict[str, str], on_start: Callable[[int], None] | None = None
) -> int:
    """Run an agent's process until it exits; its exit code. SIGTERM and SIGHUP sent to this process
    go to the agent (it stops, and the caller finishes the ledger); SIGINT is ignored here, set before
    the agent starts, so Ctrl-C is the agent's own to handle. ``on_start``: told the agent's pid."""
    started: list[subprocess.Popen] = []

    def forward(signum: int, _frame: Any) -> None:
        for p in started:
            try:
                p.send_signal(signum)
            except OSError:
                pass

    previous = {
        s: signal.signal(s, h)
        for s, h in ((signal.SIGINT, signal.SIG_IGN), (signal.SIGTERM, forward), (signal.SIGHUP, forward))
    }
    try:
        started.append(subprocess.Popen(cmd, cwd=cwd, env=env))
        if on_start is not None:
            on_start(started[0].pid)
        return started[0].wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
