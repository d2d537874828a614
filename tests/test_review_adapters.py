"""Review of the conversation a run goes on from (claude, codex), and of the lock probe of a live run: each test
here failed before its fix."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from conftest import make_repo

from ledger_adapters.claude.hooks import ClaudeHooks
from ledger_adapters.codex.hooks import CodexHooks
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime

EX = LocalExecutor(timeout=30)
FILES = {"calc.py": "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(20)), "other.py": "y = 2\n" * 40}
SAME = "[ledger: same as step"


class Claude:
    """Runs of Claude Code's hooks on one run directory, each ended as ``ledger-run claude`` ends it."""

    def __init__(self, tmp: Path):
        self.repo = make_repo(tmp / "repo", FILES)
        self.run_dir = tmp / "run"
        self.projects = tmp / "config" / "projects"
        self.transcript = self.projects / "-repo" / "00000000-0000-0000-0000-000000000001.jsonl"
        self.transcript.parent.mkdir(parents=True)
        self.transcript.write_text("")

    def run(self, *commands: str, transcript: str | None = "same") -> list[str]:
        rt = LedgerRuntime(self.repo, self.run_dir)
        (self.run_dir / "claude").mkdir(exist_ok=True)
        hooks = ClaudeHooks(
            rt, projects_dir=str(self.projects), conversation_file=str(self.run_dir / "claude" / "conversation.json")
        )
        start = {"session_id": "s1", "hook_event_name": "SessionStart", "source": "resume", "cwd": str(self.repo)}
        if transcript is not None:
            start["transcript_path"] = str(self.transcript) if transcript == "same" else transcript
        try:
            hooks.handle("SessionStart", start)
            return [rt.run(c, EX).output for c in commands]
        finally:
            hooks.finish()
            rt.close()


def other_agent(repo: Path, run_dir: Path, command: str) -> str:
    """A run of another agent on the same run directory (``ledger-run codex resume``, ``mini``): its outputs were
    shown in its own conversation only."""
    rt = LedgerRuntime(repo, run_dir)
    try:
        return rt.run(command, EX).output
    finally:
        rt.close()


def test_claude_resumed_directly_refers_to_the_earlier_runs_output(tmp_path: Path) -> None:
    """The control: the conversation the earlier run left, resumed, holds its outputs."""
    c = Claude(tmp_path)
    c.run("cat calc.py")
    (again,) = c.run("cat calc.py")
    assert again.startswith(SAME), again[:200]


def test_claude_resumed_after_another_agents_run_refers_to_none_of_its_outputs(tmp_path: Path) -> None:
    """claude, then codex (or mini) on the same run directory, then ``claude --resume`` of the first conversation:
    claude's conversation.json still named it, so the codex run's output was given as 'same as step 2's output',
    an output the resumed conversation never held."""
    c = Claude(tmp_path)
    c.run("cat calc.py")
    other_agent(c.repo, c.run_dir, "cat other.py")
    (again,) = c.run("cat other.py")
    assert not again.startswith(SAME), again[:200]


def test_claude_resumed_with_no_transcript_named_refers_to_nothing_earlier(tmp_path: Path) -> None:
    """A run on an earlier ledger whose events name no transcript it may read (none, or one outside Claude Code's
    projects): which conversation this is is unknown, and it holds none of the earlier outputs."""
    c = Claude(tmp_path)
    c.run("cat calc.py")
    (again,) = c.run("cat calc.py", transcript=None)
    assert not again.startswith(SAME), again[:200]
    (again,) = c.run("cat calc.py", transcript=str(tmp_path / "elsewhere.jsonl"))
    assert not again.startswith(SAME), again[:200]


def codex_run(repo: Path, run_dir: Path, rollout: Path, command: str, *, named: bool) -> str:
    rt = LedgerRuntime(repo, run_dir)
    hooks = CodexHooks(rt, sessions_dir=str(rollout.parent), conversation_file=str(run_dir / "codex-conversation.json"))
    start = {"session_id": "s1", "hook_event_name": "SessionStart", "source": "resume", "cwd": str(repo)}
    if named:
        start["transcript_path"] = str(rollout)
    try:
        hooks.handle("SessionStart", start)
        return rt.run(command, EX).output
    finally:
        hooks.finish()
        rt.close()


def test_codex_resumed_with_no_rollout_named_refers_to_nothing_earlier(tmp_path: Path) -> None:
    """``codex resume`` whose events carry no transcript_path (Codex sends null where it keeps no rollout): the
    first event never named a rollout, so nothing was forgotten, and the cat got 'same as step 1's output'."""
    repo = make_repo(tmp_path / "repo", FILES)
    rollout = tmp_path / "sessions" / "rollout-1.jsonl"
    rollout.parent.mkdir()
    rollout.write_text("")
    run_dir = tmp_path / "run"
    codex_run(repo, run_dir, rollout, "cat calc.py", named=True)
    assert codex_run(repo, run_dir, rollout, "cat calc.py", named=True).startswith(SAME), "the control"
    again = codex_run(repo, run_dir, rollout, "cat calc.py", named=False)
    assert not again.startswith(SAME), again[:200]


def test_codex_resumed_after_another_agents_run_refers_to_none_of_its_outputs(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    rollout = tmp_path / "sessions" / "rollout-1.jsonl"
    rollout.parent.mkdir()
    rollout.write_text("")
    run_dir = tmp_path / "run"
    codex_run(repo, run_dir, rollout, "cat calc.py", named=True)
    other_agent(repo, run_dir, "cat other.py")
    again = codex_run(repo, run_dir, rollout, "cat other.py", named=True)
    assert not again.startswith(SAME), again[:200]


def test_a_look_at_a_run_as_it_starts_does_not_refuse_it(tmp_path: Path) -> None:
    """``ledger-run inspect`` (or replay) looks whether a run is live with a shared lock on its .lock, held for an
    instant: a run starting in that instant found the lock taken and was refused as 'in use by another ledger'."""
    repo = make_repo(tmp_path / "repo", FILES)
    run_dir = tmp_path / "run"
    LedgerRuntime(repo, run_dir).close()
    fd = os.open(run_dir / ".lock", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # the probe's look, caught in its instant
    timer = threading.Timer(0.05, lambda: os.close(fd))
    timer.start()
    try:
        LedgerRuntime(repo, run_dir).close()
    finally:
        timer.join()


def test_claude_a_conversation_json_deeply_nested_does_not_stop_the_run(tmp_path: Path) -> None:
    """conversation.json of 64 KiB of '[': json.loads raised RecursionError, not a ValueError, out of the hooks'
    start, and ledger-run claude failed before the agent began: bad input, never a traceback."""
    c = Claude(tmp_path)
    c.run("cat calc.py")
    (c.run_dir / "claude" / "conversation.json").write_text("[" * 65536)
    (again,) = c.run("cat calc.py")
    assert not again.startswith(SAME), again[:200]


def test_claude_a_conversation_json_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    """A link put where conversation.json goes (what the agent's commands may do: the run directory is the user's)
    is never followed, however right what it points at looks."""
    c = Claude(tmp_path)
    c.run("cat calc.py")
    left = c.run_dir / "claude" / "conversation.json"
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(left.read_bytes())
    left.unlink()
    left.symlink_to(elsewhere)
    (again,) = c.run("cat calc.py")
    assert not again.startswith(SAME), again[:200]


def _restoring_signals(test):
    import functools
    import signal

    @functools.wraps(test)
    def wrapped(*a, **k):
        saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            return test(*a, **k)
        finally:
            for s, h in saved.items():
                signal.signal(s, h)

    return wrapped


@_restoring_signals
def test_a_sigterm_before_the_agent_started_ends_it_once_it_has(tmp_path: Path, monkeypatch) -> None:
    """SIGTERM to ledger-run between its handler and the agent's start (Popen under way): the handler had no agent
    to send it to, and it was lost; the agent ran on as if nothing was asked."""
    import signal
    import subprocess
    import time

    from ledger_runtime.cli import launch

    real = subprocess.Popen

    def popen(*a, **k):
        os.kill(os.getpid(), signal.SIGTERM)  # comes while the agent starts
        return real(*a, **k)

    monkeypatch.setattr(launch.subprocess, "Popen", popen)
    began = time.monotonic()
    code = launch.run_agent(["sleep", "5"], tmp_path, dict(os.environ))
    assert code == 128 + signal.SIGTERM and time.monotonic() - began < 4


@_restoring_signals
def test_a_hangup_ignored_already_is_not_sent_to_the_agent(tmp_path: Path) -> None:
    """``nohup ledger-run codex exec ...``: SIGHUP is ignored, as asked, but run_agent put its forwarder in its place
    and sent the hangup on to the agent, which it ended (mini's own handling keeps one ignored so)."""
    import signal

    from ledger_runtime.cli import launch

    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    code = launch.run_agent(["sh", "-c", "kill -HUP $PPID; sleep 0.5; exit 7"], tmp_path, dict(os.environ))
    assert code == 7
