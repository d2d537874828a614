"""Ctrl-C is the agent's from its start to the end of ``ledger-run <agent>``: many a user leaves an
interactive agent with Ctrl-C twice, and the second can land after the agent exited, while the ledger
is being finished (the calls still pending recorded, the sessions kept, the ledger closed). Before,
it ended the command there with "interrupted" and exit 130: the finish was lost (CI's OpenCode
terminal test saw it under load)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest
from cli_support import prompt
from conftest import make_repo

from ledger_runtime import ctrl_c_is_the_agents, hook_launcher, run_agent

NAMES = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI", "opencode": "OpenCode"}
VERSIONS = {"claude": "2.1.332", "codex": "codex-cli 0.171.0", "gemini": "0.61.0", "opencode": "1.18.33"}

# the agent: its version when asked; else it starts a helper and exits. The helper sends SIGINT to
# ledger-run every 5 ms until the run directory's lock is released (the ledger closed, the last step
# of the finish; the summary follows, which a Ctrl-C does not cut either), as a terminal's second
# Ctrl-C lands after the agent is gone.
FAKE = """#!/bin/sh
case "$*" in *--version*|*-V*) echo "{version}"; exit 0;; esac
lock={lock}
( while ! flock -n "$lock" true; do kill -INT $PPID || exit; sleep 0.005; done ) </dev/null >/dev/null 2>&1 &
sleep 0.2
exit 0
"""


@pytest.mark.parametrize("agent", sorted(VERSIONS))
def test_ctrl_c_after_the_agent_exits_does_not_cut_the_ledgers_finish(agent: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    fake = tmp_path / agent
    fake.write_text(FAKE.format(version=VERSIONS[agent], lock=shlex.quote(str(tmp_path / "run" / ".lock"))))
    fake.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "CODEX_HOME": str(home / ".codex")}
    p = subprocess.run(
        [
            *hook_launcher(),
            agent,
            f"--{agent}-bin",
            str(fake),
            "-w",
            str(repo),
            "-o",
            str(tmp_path / "run"),
            "--",
            *prompt(agent),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "look inside: ledger-run inspect" in p.stderr and "interrupted" not in p.stderr
    assert (tmp_path / "run" / "ledger.sqlite").exists()
    # the stand-in ran no hook: said, as it would be of an agent whose hooks did not run
    assert f"no hook of {NAMES[agent]} reached the ledger in this run" in p.stderr
    assert ("--skip-trust" in p.stderr) == (agent == "gemini")


def test_the_agents_ctrl_c_is_given_back_when_the_run_ends(tmp_path: Path) -> None:
    """In a process that runs an agent as a library call, SIGINT is as it was before the agent started while it sets
    up, ignored from the agent's start (``run_agent``) through the finish, and as it was after the call (ignored
    signals are inherited: a test suite's later Ctrl-C tests would find it ignored in what they start)."""
    seen = []

    def run() -> int:
        seen.append(signal.getsignal(signal.SIGINT))  # the set-up
        code = run_agent(["true"], tmp_path, dict(os.environ))
        seen.append(signal.getsignal(signal.SIGINT))  # the finish
        return code

    before = signal.getsignal(signal.SIGINT)
    assert before is not signal.SIG_IGN
    assert ctrl_c_is_the_agents(run)() == 0 and seen == [before, signal.SIG_IGN]
    assert signal.getsignal(signal.SIGINT) is before
