"""The Claude Code hook protocol, with payloads and transcript lines recorded from the real claude
2.1.332 (tests/data/claude): every event goes through a real ``ledger-run hook`` process to the hook
server, and the commands run for real in a git repository between PreToolUse and PostToolUse, as
Claude Code would run them. What the real binary cannot be made to do here (a subagent's calls in a
set order, the "unchanged since last read" stub of older versions, a transcript that disagrees with
the ledger) is driven from here; the real binary drives the rest in test_claude_e2e.py."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import make_repo

from ledger_adapters.claude.cli import (
    command_hook,
    headless,
    hook_settings,
    hooks_disabled,
    login_secrets,
    split_settings,
    user_settings,
)
from ledger_adapters.claude.hooks import ClaudeHooks, same_text
from ledger_adapters.claude.tools import failure, read_text, shell_output, tool_call, unchanged_stub
from ledger_adapters.claude.transcript import TranscriptReader
from ledger_runtime import fast_launcher, file_diff, hook_launcher, hook_script, loopback_unproxied
from ledger_runtime.config import LedgerConfig
from ledger_runtime.held.context import ContextSettings
from ledger_runtime.hooks.server import HookServer
from ledger_runtime.inspection import load
from ledger_runtime.records import VerdictKind
from ledger_runtime.runtime import LedgerRuntime

DATA = Path(__file__).parent / "data" / "claude"
CALC = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(20))


class Session:
    """A ledger run with its hook server, fed recorded payloads through ``ledger-run hook``."""

    def __init__(self, tmp: Path, config: LedgerConfig | None = None, *, interactive: bool = False):
        self.repo = make_repo(tmp / "repo", {"calc.py": CALC, "test_calc.py": "import calc\n"})
        self.run_dir = tmp / "run"
        self.projects = tmp / "config" / "projects"
        self.transcript = self.projects / "-repo" / "00000000-0000-0000-0000-000000000001.jsonl"
        self.transcript.parent.mkdir(parents=True)
        self.transcript.write_text("")
        self.rt = LedgerRuntime(self.repo, self.run_dir, config)
        self.hooks = ClaudeHooks(self.rt, projects_dir=str(self.projects), interactive=interactive)
        self.server = HookServer(self.hooks.handle, self.rt.report_fault)
        self.recorded = json.loads(
            (DATA / "payloads.json")
            .read_text()
            .replace("{cwd}", str(self.repo))
            .replace("{projects}", str(self.transcript.parent))
        )
        self.calls = 0

    def close(self) -> None:
        self.server.close()
        self.rt.close()

    def payload(self, event: str, tool: str = "", **changes: Any) -> dict[str, Any]:
        found = next(p for p in self.recorded if p["hook_event_name"] == event and p.get("tool_name", "") == tool)
        return {**found, **changes}

    def send(self, event: str, payload: dict[str, Any] | bytes) -> dict[str, Any] | None:
        raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        p = subprocess.run(
            [*fast_launcher(), "hook", event, "--socket", self.server.socket_path, "--run-dir", str(self.run_dir)],
            input=raw,
            capture_output=True,
            timeout=60,
        )
        assert p.returncode == 0 and not p.stderr, p.stderr
        return json.loads(p.stdout) if p.stdout.strip() else None

    def bash(self, command: str, **extra: Any) -> tuple[dict[str, Any] | None, str]:
        """A Bash call as Claude Code makes it: PreToolUse, the command run in the repository, then
        PostToolUse (exit 0) or PostToolUseFailure; returns the last answer and what the model gets."""
        self.calls += 1
        call = f"toolu_{self.calls}"
        pre = self.payload("PreToolUse", "Bash", tool_use_id=call, tool_input={"command": command}, **extra)
        self.send("PreToolUse", pre)
        p = subprocess.run(["bash", "-c", command], cwd=self.repo, capture_output=True, text=True)
        out = (p.stdout + p.stderr).strip("\n").rstrip()
        if p.returncode:
            fail = {**pre, "hook_event_name": "PostToolUseFailure", "error": f"Exit code {p.returncode}\n{out}"}
            return self.send("PostToolUseFailure", fail), f"Exit code {p.returncode}\n{out}"
        response = {**self.payload("PostToolUse", "Bash")["tool_response"], "stdout": out}
        answer = self.send("PostToolUse", {**pre, "hook_event_name": "PostToolUse", "tool_response": response})
        replaced = (answer or {}).get("hookSpecificOutput", {}).get("updatedToolOutput")
        return answer, replaced["stdout"].strip("\n").rstrip() if replaced else out  # as Claude Code trims it

    def transcript_result(self, call: str, text: str) -> None:
        """Claude Code writes what the model got for a call into its transcript."""
        entry = {
            "type": "user",
            "uuid": f"u-{call}",
            "parentUuid": None,
            "isSidechain": False,
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": text}]},
        }
        with self.transcript.open("a") as f:
            f.write(json.dumps(entry) + "\n")


@pytest.fixture
def session(tmp_path: Path):
    s = Session(tmp_path)
    yield s
    s.close()


def test_a_repeated_command_is_answered_through_updated_tool_output(session: Session) -> None:
    first, seen1 = session.bash("cat calc.py")
    assert first is None or "updatedToolOutput" not in first["hookSpecificOutput"]
    answer, seen2 = session.bash("cat calc.py")
    out = answer["hookSpecificOutput"]["updatedToolOutput"]
    assert seen2 == "[ledger: same as step 1's output (`cat calc.py`, exit 0)]"
    # the rest of Bash's result as Claude Code gave it, the output replaced
    assert set(out) >= {"stdout", "stderr", "interrupted", "isImage"} and out["interrupted"] is False
    state = load(session.run_dir).state
    assert [(a.verdict.kind, a.answer["kind"]) for a in state.attempts] == [
        (VerdictKind.RUN, "raw"),
        (VerdictKind.RUN, "whole"),
    ]


def test_a_failing_command_is_recorded_with_its_exit_code_and_nudged(session: Session) -> None:
    _, seen = session.bash("python3 -c 'import sys; print(7); sys.exit(3)'")
    assert seen == "Exit code 3\n7"
    answer, _ = session.bash("python3 -c 'import sys; print(7); sys.exit(3)'")
    ctx = answer["hookSpecificOutput"]["additionalContext"]
    assert answer["hookSpecificOutput"]["hookEventName"] == "PostToolUseFailure"
    assert ctx.startswith("[ledger] NUDGE: repeat-failure: no tracked file changed since step 1")
    a = load(session.run_dir).state.attempts
    assert [(x.exit_code, x.verdict.kind, x.answer["kind"]) for x in a] == [
        (3, VerdictKind.RUN, "raw"),
        (3, VerdictKind.NUDGE, "raw"),  # Claude Code lets no hook replace a failure's output
    ]
    third = session.payload("PreToolUse", "Bash", tool_use_id="toolu_9", tool_input={"command": a[0].command})
    denied = session.send("PreToolUse", third)["hookSpecificOutput"]
    assert denied["permissionDecision"] == "deny"
    assert denied["permissionDecisionReason"].startswith("[ledger] REVISE by policy repeat-failure")


def test_a_subagents_outputs_are_recorded_and_never_referred_to(session: Session) -> None:
    """A subagent (Claude Code's Agent tool) holds its own outputs: the main model never saw them."""
    sub = {"agent_id": "a4f61aef6d8788716", "agent_type": "general-purpose"}
    answer, seen = session.bash("cat calc.py", **sub)
    assert answer is None or "updatedToolOutput" not in answer.get("hookSpecificOutput", {})
    answer, seen_main = session.bash("cat calc.py")
    assert seen_main == CALC.strip("\n"), "the main model never got the subagent's output: it gets it in full"
    answer, again = session.bash("cat calc.py")
    assert again == "[ledger: same as step 2's output (`cat calc.py`, exit 0)]"
    state = load(session.run_dir).state
    assert [o.step for o in state.observations_of(str(session.repo / "calc.py"))] == [2, 3]
    assert state.attempts[0].answer.get("held") is False


def test_a_subagents_call_is_the_subagents_in_the_ledger(session: Session) -> None:
    """A subagent's call is recorded as its own (its agent_id: inspect, the page and the main model's notes say so),
    and stale-edit, which judges by the reads on record, does not judge it: none of the subagent's reads is on record,
    so it would be told "no read of it is on record; read the part you edit first" right after its read."""
    sub = {"agent_id": "a4f61aef6d8788716", "agent_type": "general-purpose"}
    session.bash("cat calc.py", **sub)
    session.bash("sed -i 's/return x + 3$/return x + 30/' calc.py", **sub)
    a = load(session.run_dir).state.attempts
    assert [(x.agent, x.verdict.kind) for x in a] == [(sub["agent_id"], VerdictKind.RUN)] * 2


def test_a_read_claude_code_takes_for_unchanged_is_flagged_with_the_diff(session: Session) -> None:
    calc = str(session.repo / "calc.py")
    read = session.payload("PostToolUse", "Read", tool_use_id="toolu_r1", tool_input={"file_path": calc})
    read["tool_response"] = {
        "type": "text",
        "file": {"filePath": calc, "content": CALC, "numLines": 61, "startLine": 1, "totalLines": 61},
    }
    assert session.send("PostToolUse", read) is None
    (session.repo / "calc.py").write_text(CALC.replace("return x + 3\n", "return x + 33\n"))  # another process
    stub = {**read, "tool_use_id": "toolu_r2", "tool_response": {"type": "file_unchanged", "file": {"filePath": calc}}}
    ctx = session.send("PostToolUse", stub)["hookSpecificOutput"]["additionalContext"]
    assert ctx.startswith(
        "[ledger] Claude Code says calc.py is unchanged since your last read, but it changed since you saw it at "
        "step 1: changed outside the commands the ledger saw."
    )
    assert "-    return x + 3\n+    return x + 33\n" in ctx
    # a Read of the file as it is now, in full: nothing to flag
    fresh = dict(read, tool_use_id="toolu_r3")
    fresh["tool_response"] = {
        "type": "text",
        "file": {"filePath": calc, "content": (session.repo / "calc.py").read_text(), "numLines": 61, "startLine": 1},
    }
    fresh["tool_response"]["file"]["totalLines"] = 61
    assert session.send("PostToolUse", fresh) is None


def test_an_answer_the_transcript_disagrees_with_is_never_a_source(session: Session) -> None:
    session.bash("cat calc.py")
    session.transcript_result("toolu_1", "something else than the file")  # what Claude Code says the model got
    answer, seen = session.bash("cat calc.py")
    assert seen == CALC.strip("\n"), "the first output is distrusted: the second comes back in full"
    assert "the transcript's result is not the text recorded for it" in (session.run_dir / "faults.log").read_text()


def test_edits_go_through_the_policies_and_are_recorded(tmp_path: Path) -> None:
    config = LedgerConfig().with_(policies={"protected-paths": {"globs": ["test_*.py"]}})
    s = Session(tmp_path, config)
    try:
        test = str(s.repo / "test_calc.py")
        edit = s.payload("PreToolUse", "Edit", tool_use_id="toolu_e1", tool_input={"file_path": test})
        out = s.send("PreToolUse", edit)["hookSpecificOutput"]
        assert out["permissionDecision"] == "deny"
        assert out["permissionDecisionReason"].startswith("[ledger] REVISE by policy protected-paths: test_calc.py")
        calc = str(s.repo / "calc.py")
        pre = s.payload("PreToolUse", "Write", tool_use_id="toolu_w1", tool_input={"file_path": calc})
        assert s.send("PreToolUse", pre) is None
        (s.repo / "calc.py").write_text("x = 1\n")  # Claude Code's Write
        post = s.payload("PostToolUse", "Write", tool_use_id="toolu_w1", tool_input={"file_path": calc})
        s.send("PostToolUse", post)
        state = load(s.run_dir).state
        assert [(a.command, a.verdict.kind, a.executed) for a in state.attempts] == [
            ("Edit test_calc.py", VerdictKind.REVISE, False),
            ("Write calc.py", VerdictKind.RUN, True),
        ]
        (m,) = state.modifications_of(calc)
        assert m.recognised and m.attempt == state.attempts[1].id
    finally:
        s.close()


def test_in_an_interactive_session_a_revise_asks_the_user(tmp_path: Path) -> None:
    config = LedgerConfig().with_(policies={"protected-paths": {"globs": ["test_*.py"]}})
    s = Session(tmp_path, config, interactive=True)
    try:
        test = str(s.repo / "test_calc.py")
        pre = s.payload("PreToolUse", "Write", tool_use_id="toolu_a1", tool_input={"file_path": test})
        out = s.send("PreToolUse", pre)["hookSpecificOutput"]
        assert out["permissionDecision"] == "ask" and "protected-paths" in out["permissionDecisionReason"]
        (s.repo / "test_calc.py").write_text("import calc  # the user let it\n")
        s.send("PostToolUse", s.payload("PostToolUse", "Write", tool_use_id="toolu_a1", tool_input={"file_path": test}))
        pre2 = dict(pre, tool_use_id="toolu_a2")
        s.send("PreToolUse", pre2)  # asked again; this time the user says no
        s.send("PostToolUseFailure", {**pre2, "hook_event_name": "PostToolUseFailure", "error": "The user said no"})
        a = load(s.run_dir).state.attempts
        assert [(x.verdict.kind, x.executed) for x in a] == [(VerdictKind.RUN, True), (VerdictKind.REVISE, False)]
        assert a[0].verdict.reason.startswith("the user let it run over protected-paths")
    finally:
        s.close()


def test_faults_fail_open(session: Session) -> None:
    for event, raw in [
        ("PreToolUse", b"not json"),
        ("PostToolUse", b"[1, 2]"),
        ("PreToolUse", json.dumps({"tool_name": "Bash", "tool_input": "x", "tool_use_id": 5}).encode()),
        ("NoSuchEvent", b"{}"),
    ]:
        assert session.send(event, raw) is None
    faults = (session.run_dir / "faults.log").read_text()
    assert "payload is not JSON" in faults and "unknown hook event 'NoSuchEvent'" in faults
    _, seen = session.bash("cat calc.py")
    assert seen == CALC.strip("\n")


def test_the_transcript_reader_tells_parallel_calls_from_a_rewind_and_counts_compactions(tmp_path: Path) -> None:
    r = TranscriptReader(str(DATA / "transcript_parallel_rewind.jsonl"))
    r.refresh()
    # three calls made together, their results each the child of its call; then a resume at the first prompt
    assert set(r.results) == {"toolu_0_0", "toolu_0_1", "toolu_0_2", "toolu_2_0"}
    assert r.results["toolu_0_1"].text.startswith("1\tdef add(a, b):")
    assert (r.branches, r.compactions) == (1, 0)
    c = TranscriptReader(str(DATA / "transcript_compact.jsonl"))
    c.refresh()
    assert (c.branches, c.compactions) == (0, 1)
    half = tmp_path / "t.jsonl"  # a last line still being written waits for the next refresh
    lines = (DATA / "transcript_compact.jsonl").read_text().splitlines(keepends=True)
    half.write_text("".join(lines[:-1]) + lines[-1][:10])
    h = TranscriptReader(str(half))
    h.refresh()
    with half.open("a") as f:
        f.write(lines[-1][10:] + "{not json\n")
    h.refresh()
    assert (h.compactions, h.bad_lines) == (1, 1)


def test_tool_calls_and_their_texts() -> None:
    wd = "/w"
    read = tool_call("Read", {"file_path": "/w/a.py", "offset": 5, "limit": 3}, wd, wd)
    assert read.label == "Read a.py:5-7" and read.analysis.views[0].selectors == (("range", 5, 7),)
    assert tool_call("Read", {"file_path": "/w/a.py"}, wd, wd).label == "Read a.py"
    edit = tool_call("Edit", {"file_path": "b.py"}, "/w/src", wd)
    assert edit.label == "Edit src/b.py" and edit.analysis.writes == ("/w/src/b.py",)
    assert tool_call("NotebookEdit", {"notebook_path": "/w/n.ipynb"}, wd, wd).path == "/w/n.ipynb"
    assert tool_call("Grep", {"pattern": "x", "path": "/w/src"}, wd, wd).label == "Grep 'x' in src"
    assert tool_call("Bash", {"command": "cat a.py"}, wd, wd).analysis.command_class.value == "inspect"
    assert tool_call("WebFetch", {"url": "x"}, wd, wd) is None and tool_call("Read", {}, wd, wd) is None
    text = {"type": "text", "file": {"filePath": "/w/a", "content": "x\n\ny", "numLines": 3, "startLine": 9}}
    assert read_text(text) == "9\tx\n10\t\n11\ty"
    assert read_text({"type": "text", "file": {"content": "", "startLine": 1}}).startswith("<system-reminder>")
    assert read_text({"type": "image", "file": {}}) is None
    assert unchanged_stub({"type": "file_unchanged"}) and unchanged_stub("File unchanged since last read.")
    assert not unchanged_stub(text)
    assert failure("Exit code 2\nboom\nmore") == ("boom\nmore", 2) and failure("String not found") == (
        "String not found",
        1,
    )
    assert shell_output({"stdout": "a", "stderr": "", "interrupted": False}) == ("a", True)
    assert shell_output({"stdout": "a", "stderr": "e", "interrupted": False}) == ("a\ne", False)
    assert shell_output({"stdout": "a" * 10, "stderr": "", "persistedOutputPath": "/p"})[1] is False
    assert same_text("lead\nerr\n[hint]", "\n\nlead\nerr\n") and not same_text("x", "y")
    assert file_diff("a\nb\n", "a\nc\n") == "@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    assert "goes on for" in file_diff("".join(f"{i}\n" for i in range(900)), "", limit=100)


def test_the_command_line_pieces(tmp_path: Path) -> None:
    assert headless(["-p", "x"]) and headless(["--print"]) and headless(["-cp"]) and not headless(["--resume", "x"])
    args, given = split_settings(["--model", "m", "--settings", "/s.json", "-p", "task"])
    assert args == ["--model", "m", "-p", "task"] and given == "/s.json"
    assert split_settings(["--settings={}", "x"]) == (["x"], "{}")
    own = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "mine"}]}]}, "model": "m"}
    assert user_settings(json.dumps(own)) == own
    with pytest.raises(ValueError, match="not JSON"):
        user_settings("{broken")
    script = hook_script(tmp_path / "hook", ["/py", "fasthook.py"], "/s.sock", tmp_path, "/d/token")
    assert script.stat().st_mode & 0o777 == 0o700 and "--token-file /d/token" in script.read_text()
    merged = hook_settings(command_hook(script), own)
    assert merged["model"] == "m"
    assert merged["hooks"]["Stop"][0]["hooks"][0]["command"] == "mine", "the user's own hook runs first"
    assert merged["hooks"]["Stop"][1]["hooks"][0]["command"] == f"{script} Stop"
    assert merged["hooks"]["PreToolUse"][0]["matcher"] == "^(Bash|Edit|MultiEdit|Write|NotebookEdit)$"
    assert merged["hooks"]["PostToolUse"][0]["matcher"].startswith("^(Bash|Read|Edit")
    home = tmp_path / "claude-home"
    home.mkdir()
    (home / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {"accessToken": "sk-ant-oat01-secretvalue"}}))
    (home / "settings.json").write_text('{"disableAllHooks": true}')
    assert "sk-ant-oat01-secretvalue" in login_secrets(home, {"CLAUDE_CONFIG_DIR": str(home)})
    assert hooks_disabled(tmp_path, home) == home / "settings.json"
    assert loopback_unproxied({"PATH": "/bin"}) == {"PATH": "/bin"}  # no proxy: the environment as it is
    env = loopback_unproxied({"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "corp.example"})
    assert env["NO_PROXY"] == "corp.example,127.0.0.1" and env["no_proxy"] == "127.0.0.1"


def test_ledger_run_claude_refuses_what_would_turn_its_hooks_off(tmp_path: Path) -> None:
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/sh\necho 2.1.332\n")
    fake.chmod(0o755)
    for extra in (["--bare"], ["--safe-mode"]):
        p = subprocess.run(
            [*hook_launcher(), "claude", "--claude-bin", str(fake), "-w", str(tmp_path), "--", *extra, "-p", "x"],
            capture_output=True,
            text=True,
        )
        assert p.returncode == 2 and f"claude {extra[0]} turns Claude Code's hooks off" in p.stderr
        assert "Traceback" not in p.stderr
    p = subprocess.run(
        [*hook_launcher(), "claude", "--claude-bin", str(tmp_path / "nope"), "--", "-p", "x"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "claude not found at" in p.stderr


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
def test_a_file_the_user_edits_before_the_next_prompt_is_stale_in_its_note(tmp_path: Path, watch: bool) -> None:
    """The user edits a file the model read, then sends a prompt: the note UserPromptSubmit gives says that the read
    no longer holds (the edit taken in first, as made between commands), with inotify and with a walking scan."""
    s = Session(tmp_path, LedgerConfig(context=ContextSettings(view_share=math.inf)))  # every note in full
    try:
        if not watch:
            s.rt.workspace.scanner.close()
        s.bash("cat calc.py")
        s.bash("cat test_calc.py")
        (s.repo / "calc.py").write_text(CALC.replace("return x + 3\n", "return x - 3\n"))
        answer = s.send("UserPromptSubmit", s.payload("UserPromptSubmit", prompt="go on"))
        note = (answer or {}).get("hookSpecificOutput", {}).get("additionalContext", "")
        assert "calc.py: STALE, changed at step 3, outside any command; seen at step 1" in note, note
        assert "calc.py: +1 -1 (last at step 3, outside any command)" in note, note
        faults = (s.run_dir / "faults.log").read_text() if (s.run_dir / "faults.log").exists() else ""
        assert "state view" not in faults and "scanning" not in faults, faults  # the claims checked and held
    finally:
        s.close()


def test_a_file_edited_while_the_model_thinks_over_a_prompt_is_not_booked_to_its_first_writer(tmp_path: Path) -> None:
    """Where scans walk, the scan at the user's prompt is not the one before the model's first command: the model
    may think long, and an edit made meanwhile to a file the command does not name was made between commands, not by
    the command (a writer is scanned before it runs, as with inotify)."""
    s = Session(tmp_path, LedgerConfig(context=ContextSettings(view_share=math.inf)))
    try:
        s.rt.workspace.scanner.close()
        s.bash("cat test_calc.py")
        s.send("UserPromptSubmit", s.payload("UserPromptSubmit", prompt="go on"))
        (s.repo / "test_calc.py").write_text("import calc\nimport os\n")  # after the prompt's scan
        s.bash("echo hi > out.txt")
        made = [(Path(m.path).name, m.step, m.attempt) for m in s.rt.state.modifications]
        assert made == [("test_calc.py", 2, None), ("out.txt", 2, 2)], made
        view = s.rt.view().text
        assert "  test_calc.py: +1 -0 (last at step 2, outside any command)" in view, view
        assert "#2 echo hi > out.txt -> exit 0; changed out.txt\n" in view, view
    finally:
        s.close()


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
def test_a_prompt_sent_while_a_command_runs_leaves_its_writes_to_it(tmp_path: Path, watch: bool) -> None:
    """The user sends a prompt while a Bash call runs (PreToolUse seen, its file written, PostToolUse to come): what
    the call wrote is its own, not made outside any command. Once the transcript has the call's result (a call whose
    PostToolUse never comes), a prompt's scan takes in what changed again."""
    s = Session(tmp_path, LedgerConfig(context=ContextSettings(view_share=math.inf)))
    try:
        if not watch:
            s.rt.workspace.scanner.close()
        s.bash("cat calc.py")
        command = "echo hi > out.txt"
        pre = s.payload("PreToolUse", "Bash", tool_use_id="toolu_x", tool_input={"command": command})
        s.send("PreToolUse", pre)
        subprocess.run(["bash", "-c", command], cwd=s.repo, check=True)
        s.send("UserPromptSubmit", s.payload("UserPromptSubmit", prompt="and then y"))
        response = {**s.payload("PostToolUse", "Bash")["tool_response"], "stdout": ""}
        s.send("PostToolUse", {**pre, "hook_event_name": "PostToolUse", "tool_response": response})
        made = [(Path(m.path).name, m.step, m.attempt) for m in s.rt.state.modifications]
        assert made == [("out.txt", 2, 2)], made
        pre = s.payload("PreToolUse", "Bash", tool_use_id="toolu_y", tool_input={"command": "sleep 1"})
        s.send("PreToolUse", pre)  # its PostToolUse never comes: the transcript has its result
        s.transcript_result("toolu_y", "Interrupted by user")
        (s.repo / "calc.py").write_text("edited by the user\n")
        note = (s.send("UserPromptSubmit", s.payload("UserPromptSubmit", prompt="go on")) or {}).get(
            "hookSpecificOutput", {}
        )
        assert "calc.py: STALE, changed at step 3, outside any command" in note.get("additionalContext", ""), note
    finally:
        s.close()


def test_a_subagents_repeat_failures_are_its_own_and_the_main_models_theirs(session: Session) -> None:
    """Claude Code's subagent (its agent_id) runs a script the main model failed at twice: its first run is its
    first, not a '3rd time' to refuse (as it was before the repeats were each agent's); its own second run is
    judged a repeat of its own step (the subagent gets no note: docs/claude-code.md), and the main model's third
    run is refused citing the main model's two."""
    fail = "python3 -c 'import sys; sys.exit(3)'"
    sub = {"agent_id": "a4f61aef6d8788716", "agent_type": "general-purpose"}
    session.bash(fail)
    session.bash(fail)
    session.bash(fail, **sub)
    session.bash(fail, **sub)
    third = session.payload("PreToolUse", "Bash", tool_use_id="toolu_9", tool_input={"command": fail})
    denied = session.send("PreToolUse", third)["hookSpecificOutput"]
    assert denied["permissionDecision"] == "deny" and "failed at steps 1, 2;" in denied["permissionDecisionReason"]
    a = load(session.run_dir).state.attempts
    assert [(x.agent, x.exit_code) for x in a[:4]] == [("", 3), ("", 3), (sub["agent_id"], 3), (sub["agent_id"], 3)]
    assert [x.verdict.kind for x in a[:4]] == [VerdictKind.RUN, VerdictKind.NUDGE] * 2, a
    assert a[3].verdict.kind is VerdictKind.NUDGE and a[3].verdict.reason.endswith(
        "step 3, where this same command failed (exit 3)"
    )


def test_a_subagents_repeat_is_nudged_as_codex_nudges_it(session: Session) -> None:
    """A subagent's repeat of its own run is a NUDGE citing its own step (its repeats are its own), recorded as applied
    and counted "nudged" by inspect; but a subagent's output is shown as it is, which carried no NUDGE, and its
    PostToolUseFailure dropped the note: the subagent was never told, and its next failing run was refused "a 3rd
    time" out of the blue. It gets the note, as Codex's subagents do, and no note of the state view."""
    sub = {"agent_id": "a4f61aef6d8788716", "agent_type": "general-purpose"}
    (session.repo / "ok.py").write_text("print(1)\n")
    for command, since in (("python3 -c 'import sys; sys.exit(3)'", 1), ("python3 ok.py", 3)):
        session.bash(command, **sub)
        again, _ = session.bash(command, **sub)
        ctx = (again or {}).get("hookSpecificOutput", {}).get("additionalContext", "")
        assert ctx.startswith(
            f"[ledger] NUDGE: {'repeat-failure: ' if since == 1 else ''}no tracked file changed since step {since},"
        ), again
        assert "<ledger_state" not in ctx and "updatedToolOutput" not in again["hookSpecificOutput"], again
