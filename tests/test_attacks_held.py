"""Attacks on what the model holds, through the real agents (the pinned npm packages) against scripted model
servers on loopback, and through their hook payloads where the binary cannot be made to act in a set order.
What the scripted server receives is what the model read: every claim there must be true. Without a binary
the agent tests skip, saying so."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
from conftest import make_repo
from fake_messages import context_texts

from ledger_adapters.claude.cli import CLAUDE_VERSION, find_claude
from ledger_adapters.opencode.hooks import OpenCodeHooks
from ledger_runtime import LedgerRuntime
from ledger_runtime.config import LedgerConfig
from ledger_runtime.held.context import ContextSettings

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


@pytest.mark.agent
def test_codex_a_new_conversation_or_another_resumed_holds_no_output_of_the_last(tmp_path: Path) -> None:
    """In Codex's TUI, ``/new`` starts a conversation that holds none of the outputs shown before: its ``cat``
    comes back in full. Then ``codex exec resume`` of the first conversation, on the same ledger: that one never
    saw the second's output, and nothing refers to it."""
    import json
    import os
    import re

    from conftest import CALC_PROJECT
    from fake_responses import FakeResponses, codex_user_home, function_outputs
    from terminal import drawn, visible
    from test_codex_e2e import CODEX, Tui, ledger_run

    if CODEX is None:
        pytest.skip("no codex binary (npm install -g @openai/codex, the pinned version)")
    repo = make_repo(tmp_path / "repo", CALC_PROJECT)
    cat = ("exec", "cat calc.py")
    fake = FakeResponses([cat, ("say", "Seen."), cat, ("say", "Seen.")], workdir=str(repo))
    user_home = codex_user_home(tmp_path / "user-codex", fake.base_url)
    env = {**os.environ, "CODEX_HOME": str(user_home), "LEDGER_FAKE_KEY": "test", "LEDGER_CODEX_BIN": CODEX}
    with open(user_home / "config.toml", "a") as f:  # a trusted project: no trust prompt
        f.write(f'\n[projects."{repo}"]\ntrust_level = "trusted"\n')
    run_dir = tmp_path / "tui"
    full = CALC_PROJECT["calc.py"].strip("\n")

    def output(request: dict) -> str:
        text = list(function_outputs(request).values())[-1]  # the last call's
        text = re.sub(r"^(Chunk ID|Wall time|Original token count): .*\n", "", text, flags=re.M)
        return text.split("Output:\n", 1)[1]

    tui = Tui(repo, env, run_dir)
    try:
        tui.ask(fake, b"look at calc.py", 2)
        os.write(tui.fd, b"/new")
        tui.until(lambda: drawn(tui.screen, "start a new chat"), 20)
        tui.screen.clear()
        os.write(tui.fd, b"\r")
        if tui.until(lambda: drawn(tui.screen, "Where should the new conversation run"), 20):
            tui.screen.clear()
            os.write(tui.fd, b"\r")  # 1. Use current Git worktree
        assert tui.until(lambda: drawn(tui.screen, "Ask Codex"), 30), visible(tui.screen)
        tui.pump(2)
        os.write(tui.fd, b"look again")
        tui.pump(2)
        for _ in range(3):
            os.write(tui.fd, b"\r")
            if tui.until(lambda: len(fake.agent_requests) > 2, 10):
                break
        assert tui.until(lambda: len(fake.agent_requests) >= 4, 120), visible(tui.screen)
        tui.pump(2)
        os.write(tui.fd, b"\x03")
        tui.pump(1)
        os.write(tui.fd, b"\x03")
        tui.pump(3)
    finally:
        tui.kill()
        os.close(tui.fd)
    second = fake.agent_requests[3]
    assert "call_0" not in function_outputs(second), "a new conversation: the first call is not in it"
    assert output(second).rstrip("\n") == full, "the new conversation never saw step 1's output"
    rollouts = sorted((run_dir / "codex-home" / "sessions").rglob("rollout-*.jsonl"))
    first = json.loads(rollouts[0].read_text().splitlines()[0])["payload"]["id"]
    fake.steps = [*fake.steps[:4], cat, ("say", "Seen once more.")]
    argv = ["codex", "--workdir", str(repo), "-o", str(run_dir), "--", "exec", "--skip-git-repo-check"]
    p = ledger_run(*argv, "resume", first, "look once more", env=env, cwd=repo)
    fake.close()
    assert p.returncode == 0, p.stderr[-3000:]
    assert "call_0" in function_outputs(fake.agent_requests[-1]), "the first conversation, resumed"
    assert output(fake.agent_requests[-1]).rstrip("\n") == full, "it never saw step 2's output"


@pytest.mark.agent
def test_opencode_a_new_session_in_the_tui_holds_no_output_of_the_last(tmp_path: Path) -> None:
    """In OpenCode's TUI, ``/new`` starts a session that holds none of the outputs shown in the last one: its
    ``cat`` comes back in full."""
    import os
    import signal

    from conftest import CALC_PROJECT
    from terminal import Terminal, drawn, visible
    from test_opencode_e2e import OPENCODE, Session

    if OPENCODE is None:
        pytest.skip("no opencode binary (npm install -g opencode-ai, the pinned version)")
    s = Session(tmp_path, [("bash", "cat calc.py"), ("say", "Seen."), ("bash", "cat calc.py"), ("say", "Seen again.")])
    tui = Terminal(s.argv(), str(s.repo), s.env)
    status = None
    try:
        ready = lambda: drawn(tui.screen, "Ask anything") or drawn(tui.screen, "ctrl+p")  # noqa: E731
        assert tui.until(ready, 90), visible(tui.screen)
        tui.pump(2)
        tui.ask(b"look at calc.py", s.fake.requests)
        assert tui.until(lambda: drawn(tui.screen, "Seen."), 90), visible(tui.screen)
        os.write(tui.fd, b"/new")
        tui.pump(2)
        os.write(tui.fd, b"\r")
        tui.pump(3)
        tui.ask(b"look again", s.fake.requests)
        assert tui.until(lambda: drawn(tui.screen, "Seen again."), 90), visible(tui.screen)
        os.write(tui.fd, b"\x03")
        tui.pump(1)
        os.write(tui.fd, b"\x03")
        status = tui.wait(60)
    finally:
        if status is None:
            os.kill(tui.pid, signal.SIGKILL)
            os.waitpid(tui.pid, 0)
        s.fake.close()
    seen = s.seen()
    assert "call_0_0" not in seen, f"a new session: the first call is not in it: {sorted(seen)}"
    assert seen["call_2_0"].startswith(CALC_PROJECT["calc.py"].strip("\n")), "it never saw step 1's output"


def test_claude_a_note_of_the_main_models_news_never_goes_to_a_subagents_call(tmp_path: Path) -> None:
    """The notes are the main model's, each told once: one given with a subagent's call (Claude Code's Agent tool:
    ``agent_id`` in the payload) reaches the subagent only, and the main model, told nothing, is taken as told."""
    from test_claude_hooks import Session

    s = Session(tmp_path)
    sub = {"agent_id": "a4f61aef6d8788716", "agent_type": "general-purpose"}
    try:
        s.bash("cat calc.py")
        s.bash("cat calc.py")  # a reference: what it spared pays for notes
        (s.repo / "calc.py").write_text("changed\n")  # news: changed outside any command
        answer, _ = s.bash("true", **sub)
        assert "additionalContext" not in (answer or {}).get("hookSpecificOutput", {}), answer
        answer, _ = s.bash("true")
    finally:
        s.close()
    assert "calc.py: +1 -60" in answer["hookSpecificOutput"]["additionalContext"], "the main model is told"


def test_opencode_a_note_of_the_main_models_news_never_goes_to_a_subagents_call(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, None)

    def bash(command: str, session: str, n: int) -> str:
        call = {"tool": "bash", "callID": f"c{n}", "sessionID": session, "directory": str(repo)}
        call["args"] = {"command": command, "description": "run"}
        hooks.handle("ToolBefore", dict(call))
        out = subprocess.run(["bash", "-c", command], cwd=repo, capture_output=True, text=True).stdout
        got = hooks.handle("ToolAfter", {**call, "output": out, "metadata": {"exit": 0}})
        return got["output"] if got else out

    try:
        hooks.handle("Event", {"type": "session.created", "properties": {"info": {"id": "main"}}})
        hooks.handle("Event", {"type": "session.created", "properties": {"info": {"id": "sub", "parentID": "main"}}})
        bash("cat calc.py", "main", 1)
        bash("cat calc.py", "main", 2)
        (repo / "calc.py").write_text("changed\n")
        assert "ledger_update" not in bash("true", "sub", 3)
        main = bash("true", "main", 4)
    finally:
        rt.close()
    assert "calc.py: +1 -60" in main, main


@pytest.mark.agent
def test_codex_the_conversation_resumed_on_its_ledger_still_holds_its_outputs(tmp_path: Path) -> None:
    """The other side of the check above: ``codex exec resume`` of the conversation the earlier run left, not
    compacted since, holds what it was shown, and its ``cat`` is a reference to it."""
    import json
    import os

    from conftest import CALC_PROJECT
    from fake_responses import FakeResponses, codex_user_home, function_outputs
    from test_codex_e2e import CODEX, ledger_run

    if CODEX is None:
        pytest.skip("no codex binary (npm install -g @openai/codex, the pinned version)")
    repo = make_repo(tmp_path / "repo", CALC_PROJECT)
    cat = ("exec", "cat calc.py")
    fake = FakeResponses([cat, ("say", "Seen."), cat, ("say", "Seen again.")], workdir=str(repo))
    user_home = codex_user_home(tmp_path / "user-codex", fake.base_url)
    env = {**os.environ, "CODEX_HOME": str(user_home), "LEDGER_FAKE_KEY": "test", "LEDGER_CODEX_BIN": CODEX}
    run_dir = tmp_path / "run"
    argv = ["codex", "--workdir", str(repo), "-o", str(run_dir), "--", "exec", "--skip-git-repo-check"]
    try:
        p = ledger_run(*argv, "look at calc.py", env=env, cwd=repo)
        assert p.returncode == 0, p.stderr[-3000:]
        (rollout,) = (run_dir / "codex-home" / "sessions").rglob("rollout-*.jsonl")
        sid = json.loads(rollout.read_text().splitlines()[0])["payload"]["id"]
        p = ledger_run(*argv, "resume", sid, "look again", env=env, cwd=repo)
        assert p.returncode == 0, p.stderr[-3000:]
    finally:
        fake.close()
    outputs = function_outputs(fake.agent_requests[-1])
    assert "call_0" in outputs, "the same conversation, resumed"
    assert "[ledger: same as step 1's output (`cat calc.py`, exit 0)]" in list(outputs.values())[-1]


def test_opencode_a_subagents_call_is_the_subagents_in_the_ledger(tmp_path: Path) -> None:
    """An OpenCode subagent's calls were the main model's to the rules and the notes (no ``agent`` to
    ``propose``, as Claude Code's and Codex's adapters give): the subagent's ``sed -i`` right after its own
    ``cat`` was NUDGEd "no read of it is on record" (its reads are never on record), and its edit was
    taken for one the main model had been told of, so no note told the main model of it."""
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    # every note in full: the one asserted names the subagent's edit as the subagent's, longer than one reference pays
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig(context=ContextSettings(view_share=math.inf)))
    hooks = OpenCodeHooks(rt, None)

    def bash(call: str, session: str, command: str, output: str = "") -> str:
        payload = {"tool": "bash", "callID": call, "sessionID": session, "directory": str(repo)}
        payload["args"] = {"command": command, "description": "x"}
        hooks.handle("ToolBefore", dict(payload))
        subprocess.run(["bash", "-c", command], cwd=repo, capture_output=True, check=True)
        got = hooks.handle("ToolAfter", {**payload, "output": output, "metadata": {"exit": 0}})
        return (got or {}).get("output", output)

    try:
        hooks.handle("Event", {"type": "session.created", "properties": {"info": {"id": "main"}}})
        hooks.handle("Event", {"type": "session.created", "properties": {"info": {"id": "sub", "parentID": "main"}}})
        bash("m1", "main", "cat calc.py", CALC)
        bash("m1b", "main", "cat calc.py", CALC)  # a reference: what it spares pays for the notes
        bash("s1", "sub", "cat calc.py", CALC)
        told_sub = bash("s2", "sub", "sed -i 's/return x + 3$/return x + 30/' calc.py")
        told_main = bash("m2", "main", "true")
    finally:
        rt.close()
    assert "no read of it is on record" not in told_sub, told_sub
    assert "calc.py: +1 -1 (last at step 4 by a subagent's `sed -i" in told_main, told_main
