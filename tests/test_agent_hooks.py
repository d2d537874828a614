"""Gemini CLI's and OpenCode's hooks without their binaries: the pure pieces (what a tool call is to the
ledger, what the model reads of a result), a hook called with garbage through the real channels (the
hook client for Gemini CLI's command hooks, HTTP for OpenCode's plugin: one line in faults.log, the call
goes on), a session file read as it grows, and the commands' one-line errors. The binaries drive the
rest in test_gemini_e2e.py and test_opencode_e2e.py."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import pytest
from cli_support import prompt
from conftest import make_repo

from ledger_adapters.gemini.home import build, hooks_off, read_settings, strip, with_hooks
from ledger_adapters.gemini.hooks import GeminiHooks
from ledger_adapters.gemini.session import SessionReader
from ledger_adapters.gemini.tools import call_key, readable_whole, shell_result, tool_call
from ledger_adapters.opencode.cli import with_plugin
from ledger_adapters.opencode.hooks import OpenCodeHooks
from ledger_adapters.opencode.tools import read_whole, shell_output
from ledger_adapters.opencode.tools import tool_call as opencode_call
from ledger_runtime import HookServer, HttpHookServer, LedgerRuntime, fast_launcher, hook_launcher
from ledger_runtime.inspection import load

CALC = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(20))


def test_what_gemini_clis_calls_and_results_are() -> None:
    shell = tool_call("run_shell_command", {"command": "ls", "dir_path": "sub"}, "/w", "/w")
    assert (shell.label, shell.analysis.cwd) == ("ls", "/w/sub")
    read = tool_call("read_file", {"file_path": "a.py", "start_line": 3, "end_line": 9}, "/w", "/w")
    assert (read.label, read.path) == ("read_file a.py:3-9", "/w/a.py")
    assert tool_call("replace", {"file_path": "/w/a.py"}, "/w", "/w").label == "replace a.py"
    assert tool_call("grep_search", {"pattern": "x", "dir_path": "src"}, "/w", "/w").label == 'grep_search "x" in src'
    for tool, args in [("run_shell_command", {"command": " "}), ("run_shell_command", "ls"), ("web_fetch", {})]:
        assert tool_call(tool, args, "/w", "/w") is None
    assert tool_call("run_shell_command", {"command": "sleep 9", "is_background": True}, "/w", "/w") is None
    assert call_key("t", {"b": 1, "a": 2}) == call_key("t", {"a": 2, "b": 1})

    llm = "<untrusted_context>\nOutput: a\nExit Code: 1\nProcess Group PGID: 7\n</untrusted_context>"
    r = shell_result({"llmContent": llm})
    assert (r.output, r.returncode) == ("a", 1)
    assert r.with_output("[ledger: x]\n") == llm.replace("Output: a", "Output: [ledger: x]")
    assert (
        shell_result(
            {"llmContent": "<untrusted_context>\nOutput: (empty)\nProcess Group PGID: 7\n</untrusted_context>"}
        ).output
        == ""
    )
    signal = shell_result({"llmContent": "Output: x\nSignal: 9\nProcess Group PGID: 7"})
    assert (signal.output, signal.returncode) == ("x", None)
    for bad in (
        None,
        {"llmContent": 3},
        {"llmContent": "Command was cancelled by user."},
        {"llmContent": "x", "error": 1},
    ):
        assert shell_result(bad) is None
    assert readable_whole("a\nb") and not readable_whole("x" * 2_001) and not readable_whole("\n" * 2_001)


def test_what_opencodes_calls_and_results_are() -> None:
    assert opencode_call("bash", {"command": "ls", "workdir": "sub"}, "/w", "/w").analysis.cwd == "/w/sub"
    read = opencode_call("read", {"filePath": "/w/a.py", "offset": 5, "limit": 10}, "/w", "/w")
    assert (read.label, read.path) == ("read a.py:5-14", "/w/a.py")
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** Add File: b.py\n+z\n*** End Patch"
    assert opencode_call("apply_patch", {"patchText": patch}, "/w", "/w").label == "apply_patch a.py b.py"
    assert opencode_call("glob", {"pattern": "*.py"}, "/w", "/w").label == 'glob "*.py"'
    for tool, args in [("bash", {}), ("read", {}), ("apply_patch", {"patchText": "nothing"}), ("task", {"x": 1})]:
        assert opencode_call(tool, args, "/w", "/w") is None
    assert shell_output("(no output)", {"exit": 2}) == ("", 2, True)
    assert shell_output("x", {"exit": 0, "truncated": True, "outputPath": "/t"}) == ("x", 0, False)
    assert shell_output(None, {}) is None
    whole = {"display": {"type": "file", "text": "a\nb", "lineStart": 1, "lineEnd": 2, "totalLines": 2}}
    assert read_whole(whole) == "a\nb"
    assert read_whole({"display": {**whole["display"], "lineEnd": 1}}) is None and read_whole(None) is None
    assert json.loads(with_plugin('{"plugin": ["mine"], "x": 1}', Path("/r/ledger.js"))) == {
        "plugin": ["mine", "file:///r/ledger.js"],
        "x": 1,
    }
    with pytest.raises(ValueError):
        with_plugin("[1]", Path("/r/ledger.js"))


def test_the_runs_gemini_home_links_the_users_and_keeps_none_of_their_settings(tmp_path: Path) -> None:
    user = tmp_path / "user" / ".gemini"
    user.mkdir(parents=True)
    (user / "oauth_creds.json").write_text('{"access_token": "ya29.secret-token-value"}')
    (user / "settings.json").write_text(
        '{\n  // a comment\n  "model": {"name": "x"}, "hooks": {"AfterTool": [{"hooks": []}]}\n}'
    )
    (user / "extensions").mkdir()
    settings = read_settings(user / "settings.json")
    ours = {"AfterTool": {"hooks": [{"type": "command", "command": "h AfterTool"}]}}
    merged = with_hooks(settings, ours)
    assert merged["hooks"]["AfterTool"] == [{"hooks": []}, ours["AfterTool"]] and merged["model"] == {"name": "x"}
    gemini = build(tmp_path / "home", user)
    assert (gemini / "oauth_creds.json").is_symlink() and (gemini / "extensions").is_symlink()
    assert not (gemini / "settings.json").exists() and (gemini / "tmp").is_dir()
    (gemini / "google_accounts.json").write_text("{}")  # a login Gemini CLI wrote in the run's home
    strip(gemini, ours)
    assert json.loads((gemini / "settings.json").read_text()) == {"hooks": {"AfterTool": [ours["AfterTool"]]}}
    assert not (gemini / "google_accounts.json").exists() and (user / "oauth_creds.json").exists()
    assert hooks_off({"hooksConfig": {"enabled": False}}) and not hooks_off({"hooksConfig": {"enabled": True}})
    (user / "bad.json").write_text("[1]")
    with pytest.raises(ValueError, match="not a JSON object"):
        read_settings(user / "bad.json")


def test_a_session_file_read_as_it_grows(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    lines = [
        {"sessionId": "s", "projectHash": "h"},
        {"$set": {"messages": [{"id": "m0", "type": "user", "content": [{"text": "<session_context>"}]}]}},
        {"id": "m1", "type": "user", "content": [{"text": "fix it"}]},
        {"id": "m2", "type": "gemini", "content": ""},
    ]
    call = {"id": "c", "name": "run_shell_command", "args": {"command": "ls"}, "status": "success"}
    call["result"] = [{"functionResponse": {"response": {"output": "Output: a"}}}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + "not json\n" + json.dumps({"id": "m2"})[:-3])
    r = SessionReader(str(path))
    r.refresh()
    assert (r.calls, r.resets, r.bad_lines) == ([], 0, 1)
    with path.open("a") as f:  # the last line written whole; the message again, with its calls
        f.write(
            json.dumps({"id": "m2"})[-3:]
            + "\n"
            + json.dumps({"id": "m2", "type": "gemini", "toolCalls": [call]})
            + "\n"
        )
        f.write(json.dumps({"$set": {"messages": []}}) + "\n" + json.dumps({"$rewindTo": "m1"}) + "\n")
    r.refresh()
    assert [(c.key, c.text) for c in r.calls] == [(call_key("run_shell_command", {"command": "ls"}), "Output: a")]
    assert (r.resets, r.batches) == (2, 1)


def test_gemini_hooks_called_with_garbage_let_the_call_go_on(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = GeminiHooks(rt, token="t0k")
    server = HookServer(hooks.handle, rt.report_fault, authorize=hooks.authorize)
    try:
        token = tmp_path / "token"
        token.write_text("t0k")
        token.chmod(0o600)
        for event, raw in [
            ("BeforeTool", b"not json"),
            ("AfterTool", b"[1, 2]"),
            ("AfterTool", json.dumps({"tool_name": "run_shell_command", "tool_input": "x"}).encode()),
            ("BeforeTool", json.dumps({"tool_name": 5, "tool_input": {"command": 5}, "transcript_path": 3}).encode()),
            ("NoSuchEvent", b"{}"),
        ]:
            argv = [*fast_launcher(), "hook", event, "--socket", server.socket_path, "--run-dir", str(tmp_path / "run")]
            p = subprocess.run([*argv, "--token-file", str(token)], input=raw, capture_output=True, timeout=60)
            assert (p.returncode, p.stdout, p.stderr) == (0, b"", b"")
    finally:
        server.close()
        rt.close()
    faults = (tmp_path / "run" / "faults.log").read_text()
    assert "payload is not JSON" in faults and "unknown hook event 'NoSuchEvent'" in faults
    assert not load(tmp_path / "run").state.attempts


def test_opencode_hooks_called_with_garbage_let_the_call_go_on(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, None)
    server = HttpHookServer(hooks.handle, rt.report_fault, "t0k")
    try:
        for event, body in [
            ("ToolBefore", b"not json"),
            ("ToolAfter", b"[1]"),
            ("ToolAfter", json.dumps({"tool": "bash", "callID": 5, "output": None}).encode()),
            ("Event", json.dumps({"type": "message.part.updated", "properties": {"part": "x"}}).encode()),
            ("Nope", b"{}"),
        ]:
            req = urllib.request.Request(server.url(event), data=body, headers={"Authorization": "Bearer t0k"})
            with urllib.request.urlopen(req, timeout=30) as r:
                assert (r.status, json.loads(r.read())) == (200, {})
        call = {
            "tool": "bash",
            "callID": "c1",
            "sessionID": "s",
            "args": {"command": "cat calc.py"},
            "directory": str(repo),
        }
        for _ in range(2):  # the same call twice: recorded once, and that record is never a source
            assert hooks.handle("ToolBefore", dict(call)) is None
            hooks.handle("ToolAfter", {**call, "output": CALC, "metadata": {"exit": 0}})
    finally:
        server.close()
        rt.close()
    faults = (tmp_path / "run" / "faults.log").read_text()
    assert "payload is not JSON" in faults and "unknown hook event 'Nope'" in faults
    (attempt,) = load(tmp_path / "run").state.attempts
    assert attempt.command == "cat calc.py" and "second ToolAfter" in faults


@pytest.mark.parametrize("agent", ["gemini", "opencode"])
def test_a_missing_binary_is_one_line(agent: str, tmp_path: Path) -> None:
    p = subprocess.run(
        [*hook_launcher(), agent, f"--{agent}-bin", str(tmp_path / "nope"), "-w", str(tmp_path), "--", *prompt(agent)],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and f"{agent} not found at" in p.stderr and "Traceback" not in p.stderr
