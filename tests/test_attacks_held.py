"""Attacks on what the model holds, through the real agents (the pinned npm packages) against scripted model
servers on loopback, and through their hook payloads where the binary cannot be made to act in a set order.
What the scripted server receives is what the model read: every claim there must be true. Without a binary
the agent tests skip, saying so."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import make_repo
from fake_messages import context_texts

from ledger_adapters.claude.cli import CLAUDE_VERSION, find_claude
from ledger_adapters.opencode.hooks import OpenCodeHooks
from ledger_runtime import LedgerRuntime

CALC = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(20))
SUBAGENT = {"description": "fix add", "prompt": "make add() add", "subagent_type": "general-purpose"}

needs_claude = pytest.mark.skipif(
    find_claude(None) is None, reason=f"no claude binary (npm install -g @anthropic-ai/claude-code@{CLAUDE_VERSION})"
)


def main_requests(fake, marker: str) -> list[dict]:
    """The main model's requests: those whose messages hold the call ``marker`` (the Agent call's id)."""
    import json

    return [r for r in fake.requests if marker in json.dumps(r.get("messages"))]


@pytest.mark.agent
@needs_claude
def test_claude_a_subagents_edit_is_not_a_version_the_main_model_saw(tmp_path: Path) -> None:
    """The main model never read calc.py; a subagent read and edited it, then the main model's command
    changed it and the main model read it: nothing may tell it the file changed 'since you saw it at step
    N' (the subagent's edit) with a diff from a version it never saw."""
    from test_claude_e2e import Session

    s = Session(tmp_path, [])
    calc = s.path("calc.py")
    s.fake.steps = [
        ("tool", "Agent", {**SUBAGENT, "run_in_background": False}),  # in the foreground: the steps in order
        ("tool", "Read", {"file_path": calc}),  # the subagent's
        ("tool", "Edit", {"file_path": calc, "old_string": "return a - b", "new_string": "return a + b"}),
        ("say", "add() adds now."),
        ("bash", "printf '# checked\\n' >> calc.py"),  # the main model's again
        ("tool", "Read", {"file_path": calc}),
        ("say", "done."),
    ]
    try:
        p = s.run("--allowedTools=Agent")
    finally:
        s.fake.close()
    assert p.returncode == 0, p.stderr[-3000:]
    mains = main_requests(s.fake, "toolu_0_0")
    assert "toolu_5_0" in str(mains[-1]), "the main model read calc.py"
    told = "\n".join(t for r in mains for t in context_texts(r))
    assert "since you saw it" not in told, told[-2000:]
    rows = [(a.command.splitlines()[0], a.answer.get("held")) for a in s_state(s.run_dir).attempts]
    assert ("Edit calc.py", False) in rows, rows


def s_state(run_dir: Path):
    from ledger_runtime.inspection import load

    return load(run_dir).state


def test_opencode_a_subagents_edit_is_not_a_version_the_main_model_saw(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    calc = str(repo / "calc.py")
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, None)
    try:
        hooks.handle("Event", {"type": "session.created", "properties": {"info": {"id": "main"}}})
        hooks.handle("Event", {"type": "session.created", "properties": {"info": {"id": "sub", "parentID": "main"}}})
        edit = {
            "tool": "edit",
            "callID": "e1",
            "sessionID": "sub",
            "args": {"filePath": calc, "oldString": "return x + 3\n", "newString": "return x + 30\n"},
            "directory": str(repo),
        }
        hooks.handle("ToolBefore", dict(edit))
        (repo / "calc.py").write_text(CALC.replace("return x + 3\n", "return x + 30\n"))
        hooks.handle("ToolAfter", {**edit, "output": "Edit applied successfully.", "metadata": {}})
        bash = {"tool": "bash", "callID": "b1", "sessionID": "main", "directory": str(repo)}
        bash["args"] = {"command": "printf '# checked\\n' >> calc.py", "description": "note"}
        hooks.handle("ToolBefore", dict(bash))
        with open(calc, "a") as f:
            f.write("# checked\n")
        hooks.handle("ToolAfter", {**bash, "output": "", "metadata": {"exit": 0}})
        now = (repo / "calc.py").read_text()
        read = {"tool": "read", "callID": "r1", "sessionID": "main", "args": {"filePath": calc}, "directory": str(repo)}
        hooks.handle("ToolBefore", dict(read))
        lines = now.rstrip("\n").split("\n")
        output = "<content>\n" + "".join(f"{i}: {x}\n" for i, x in enumerate(lines, 1)) + "</content>"
        display = {"type": "file", "text": "\n".join(lines), "lineStart": 1, "lineEnd": len(lines)}
        display["totalLines"] = len(lines)
        got = hooks.handle("ToolAfter", {**read, "output": output, "metadata": {"display": display}})
    finally:
        rt.close()
    assert got is None or "since you saw it" not in got["output"], got


def _claude_again(s, *args: str) -> str:
    """One more ``ledger-run claude`` in the run directory ``s.run_dir``: a ``cat calc.py``; what the model got."""
    from fake_messages import tool_results

    start = len(s.fake.requests)
    s.fake.steps = s.fake.steps[:start] + [("bash", "cat calc.py"), ("say", "Seen again.")]
    p = s.run(*args, prompt="look again")
    assert p.returncode == 0, p.stderr[-3000:]
    return tool_results(s.fake.requests[-1])[f"toolu_{start}_0"]


@pytest.mark.agent
@needs_claude
def test_claude_resuming_another_conversation_on_the_ledger_refers_to_nothing_it_never_saw(tmp_path: Path) -> None:
    """The ledger's run directory goes on with ``--resume``: the conversation resumed must be the one its outputs
    were shown in. Another one (a session of another run) holds none of them: nothing refers to them."""
    from conftest import CALC_PROJECT
    from test_claude_e2e import Session

    s = Session(tmp_path, [("bash", "cat calc.py"), ("say", "Seen."), ("say", "Hello.")])
    try:
        p = s.run(prompt="look at calc.py")
        assert p.returncode == 0, p.stderr[-3000:]
        ours = s.run_dir
        s.run_dir = tmp_path / "another-run"
        p = s.run(prompt="say hello")  # a conversation of its own, that never ran a command
        assert p.returncode == 0, p.stderr[-3000:]
        other = s.session_id(p.stdout)
        s.run_dir = ours
        got = _claude_again(s, "--resume", other)
    finally:
        s.fake.close()
    assert got == CALC_PROJECT["calc.py"].strip("\n"), "the resumed conversation never saw step 1's output"


@pytest.mark.agent
@needs_claude
def test_claude_a_compaction_between_two_runs_of_one_ledger_is_taken_into_account(tmp_path: Path) -> None:
    """The conversation compacted by Claude Code without the ledger (a plain ``claude --resume ID -p /compact``)
    lost the outputs the ledger showed it: resumed on the ledger again, nothing refers to them."""
    from conftest import CALC_PROJECT
    from test_claude_e2e import CLAUDE, Session

    s = Session(tmp_path, [("bash", "cat calc.py"), ("say", "Seen.")])
    try:
        p = s.run(prompt="look at calc.py")
        assert p.returncode == 0, p.stderr[-3000:]
        sid = s.session_id(p.stdout)
        plain = [CLAUDE, "-p", "--resume", sid, "/compact"]
        c = subprocess.run(plain, env=s.env, cwd=s.repo, capture_output=True, text=True, timeout=300)
        assert c.returncode == 0 and s.fake.compactions, c.stderr[-2000:]
        got = _claude_again(s, "--resume", sid)
    finally:
        s.fake.close()
    assert got == CALC_PROJECT["calc.py"].strip("\n"), "the compaction took step 1's output from the model"
