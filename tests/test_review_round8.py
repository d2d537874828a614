"""A review of round eight's fixes: what they left or broke, each case run for real."""

from __future__ import annotations

import os
import signal
import time


def test_a_binary_that_answered_its_version_and_left_a_child_is_taken_at_once(tmp_path, capfd):
    """A wrapper that prints its version and exits, leaving a child that holds its output open (a daemon it starts),
    was waited on for 30 s as 'not answering', its version then lost and the child killed. Its exit is its answer;
    the child it left is not ours to end."""
    from ledger_runtime.cli.agents import binary_version

    pid_file = tmp_path / "child.pid"
    fake = tmp_path / "codex"
    fake.write_text(f'#!/bin/sh\necho "codex-cli 0.171.0"\nsleep 1000 &\necho $! > {pid_file}\nexit 0\n')
    fake.chmod(0o755)
    began = time.monotonic()
    try:
        version = binary_version(str(fake))
        waited = time.monotonic() - began
        child = int(pid_file.read_text())
        os.kill(child, 0)  # still there: raises ProcessLookupError when it was killed
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert version == "0.171.0" and waited < 10, (version, waited)
    assert "waiting for" not in capfd.readouterr().err
