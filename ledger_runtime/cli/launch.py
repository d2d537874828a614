"""How an agent's hooks run ``ledger-run`` from this installation: the command lines an adapter
writes into the agent's hook configuration."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


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
