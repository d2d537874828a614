"""A review of round eight's fixes: what they left or broke, each case run for real."""

from __future__ import annotations

import os
import signal
import time

import pytest
from cli_support import ledger_run, one_line_error


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


@pytest.mark.parametrize(
    "text",
    ["[ledger.dedupe]\nmin_lines = 1e300\n", "[ledger.policies.repeat-failure]\nrevise_after = 1e300\n"],
)
def test_a_float_past_exact_whole_numbers_is_not_taken_as_one(tmp_path, text):
    """``min_lines = 1e300`` was taken as the whole number int(1e300), shown as 300 digits the user never wrote
    (1000000000000000052504760255204420248704...): a float that large is not the number written. Refused in one
    line, as ``min_lines = 2.5`` is."""
    path = tmp_path / "ledger.toml"
    path.write_text(text)
    error = one_line_error(ledger_run("config", "--check", str(path)))
    assert "1e+300" in error or "1e300" in error, error
