"""Attacks on the command wrapper (``ledger-run wrap``) with odd arguments: whatever it is given, the
command runs once and its output reaches the agent, as the compiled wrapper does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledger_runtime.hooks import fasthook_script

PYTHON = [sys.executable, "-S", "-E", str(fasthook_script())]


@pytest.mark.parametrize("wait", ["nan", "NaN", "-nan", "inf", "-1", "1e400", "soon"])
def test_any_wait_runs_the_command_and_prints_its_output(tmp_path: Path, wait: str) -> None:
    argv = ["wrap", "--socket", str(tmp_path / "none.sock"), "--call", "c0", "--run-dir", str(tmp_path)]
    p = subprocess.run([*PYTHON, *argv, "--wait", wait, "--", "printf raw; exit 3"], capture_output=True, timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (3, b"raw", b"")
