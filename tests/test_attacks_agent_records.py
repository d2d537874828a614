"""Attacks on the agents' own records as the hooks and the run's page read them: a line of a shape the
reader never saw (a model's call with numbers for its command words, a list where an object goes, a
number where text goes) costs that line only: the lines after it are read, the calls the hooks heard
are recorded, and the page still has the model's side of the run. And a tool result with no text is
recorded as such, not dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_adapters.claude.transcript import TranscriptReader
from ledger_adapters.codex.rollout import RolloutReader
from ledger_adapters.codex.rollout import conversation as codex_conversation
from ledger_adapters.gemini.hooks import GeminiHooks
from ledger_adapters.gemini.session import conversation as gemini_conversation
from ledger_adapters.opencode.hooks import OpenCodeHooks
from ledger_adapters.opencode.session import tool_parts
from ledger_runtime import LedgerRuntime
from ledger_runtime.inspection import load

CALC = "def add(a, b):\n    return a + b\n"


def jsonl(path: Path, lines: list[object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_a_codex_call_with_numbers_for_its_command_costs_the_rollout_nothing_after_it(tmp_path: Path) -> None:
    odd = {"call_id": "c1", "name": "exec_command", "arguments": json.dumps({"cmd": ["ls", 1]})}
    done = {"id": "c2", "type": "CommandExecution", "exit_code": 3, "aggregated_output": "boom\n", "status": "failed"}
    path = jsonl(
        tmp_path / "rollout.jsonl",
        [
            {"type": "session_meta", "payload": {}},
            {"type": "response_item", "payload": {"type": "function_call", **odd}},
            {"type": "response_item", "payload": {"type": "function_call", "call_id": "c0", "arguments": 5}},
            {"type": "response_item", "payload": {"type": "function_call", "call_id": "c3", "arguments": "[[[["}},
            {"type": "event_msg", "payload": {"type": "item_completed", "item": done}},
            {
                "type": "response_item",
                "payload": {"type": "function_call", "call_id": "c2", "arguments": json.dumps({"cmd": "make"})},
            },
        ],
    )
    r = RolloutReader(str(path))
    r.refresh()
    assert r.commands["c2"].exit_code == 3 and r.commands["c2"].output == "boom\n"
    assert r.named == {"c2": "make"}  # the odd calls name no command


def test_a_codex_rollout_of_odd_shapes_still_reads_as_the_models_side(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "rollout.jsonl",
        [
            {"type": "session_meta", "payload": {}},
            {"type": "response_item", "payload": {"type": "reasoning", "summary": 5}},
            {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"text": 7}]}},
            {"type": "response_item", "payload": {"type": "function_call", "call_id": "c", "arguments": {"cmd": 1}}},
            {"type": "response_item", "payload": {"type": "local_shell_call", "action": "rm -rf /"}},
            {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c", "output": "x"}},
            {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": "done"}},
        ],
    )
    c = codex_conversation(path)
    assert [t.text for t in c.turns] == ["", "done"] and c.turns[0].commands == ()


def test_a_gemini_session_line_of_an_odd_shape_loses_no_record(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    chats = tmp_path / "home" / "tmp" / "project" / "chats"
    session = jsonl(
        chats / "session-1.jsonl",
        [{"sessionId": "s"}, {"id": "m1", "type": "gemini", "toolCalls": 5, "thoughts": 5, "content": [{"text": 5}]}],
    )
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = GeminiHooks(rt, sessions_dir=str(tmp_path / "home" / "tmp"))
    base = {"transcript_path": str(session), "session_id": "s", "cwd": str(repo)}
    call = {**base, "tool_name": "run_shell_command", "tool_input": {"command": "cat calc.py"}}
    try:
        hooks.handle("BeforeTool", call)
        hooks.handle("AfterTool", {**call, "tool_response": {"llmContent": "Output: " + CALC.rstrip("\n")}})
        hooks.handle("AfterAgent", base)
        hooks.finish()
    finally:
        rt.close()
    (attempt,) = load(tmp_path / "run").state.attempts
    assert attempt.command == "cat calc.py" and attempt.exit_code == 0
    assert gemini_conversation(session).turns[0].text == ""  # the page reads it too


def test_a_gemini_session_path_with_a_nul_is_not_followed_and_the_call_is_recorded(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = GeminiHooks(rt, sessions_dir=str(tmp_path / "home" / "tmp"))
    call = {
        "transcript_path": str(tmp_path / "home" / "tmp" / "p" / "chats" / "s\0.jsonl"),
        "cwd": str(repo),
        "tool_name": "run_shell_command",
        "tool_input": {"command": "cat calc.py"},
    }
    try:
        hooks.handle("BeforeTool", call)
        hooks.handle("AfterTool", {**call, "tool_response": {"llmContent": "Output: " + CALC.rstrip("\n")}})
        hooks.finish()
    finally:
        rt.close()
    (attempt,) = load(tmp_path / "run").state.attempts
    assert attempt.command == "cat calc.py" and hooks.session is None


def test_a_claude_transcript_result_with_a_number_for_text_costs_only_itself(tmp_path: Path) -> None:
    def result(call: str, text: object) -> dict[str, object]:
        block = {"type": "tool_result", "tool_use_id": call, "content": [{"type": "text", "text": text}]}
        return {"type": "user", "uuid": call, "message": {"content": [block]}}

    path = jsonl(tmp_path / "t.jsonl", [result("a", 5), result("b", "ok")])
    r = TranscriptReader(str(path))
    r.refresh()
    assert r.results["b"].text == "ok" and r.results["a"].text == ""


def test_an_opencode_shell_result_without_output_text_is_recorded_not_dropped(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, None)
    call = {"tool": "bash", "callID": "c1", "sessionID": "s", "args": {"command": "make"}, "directory": str(repo)}
    try:
        assert hooks.handle("ToolBefore", dict(call)) is None
        assert hooks.handle("ToolAfter", {**call, "output": None, "metadata": {"exit": 0}}) is None
        hooks.finish()
    finally:
        rt.close()
    (attempt,) = load(tmp_path / "run").state.attempts
    assert attempt.command == "make" and attempt.exit_code is None and not attempt.output_complete


def test_an_opencode_session_id_that_is_not_text_loses_no_call(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, None)
    call = {
        "tool": "bash",
        "callID": "c1",
        "sessionID": ["s"],
        "args": {"command": "cat calc.py"},
        "directory": str(repo),
    }
    try:
        assert hooks.handle("ToolBefore", dict(call)) is None
        hooks.handle("ToolAfter", {**call, "output": CALC, "metadata": {"exit": 0}})
        for kind in ("session.compacted", "session.idle"):
            assert hooks.handle("Event", {"type": kind, "properties": {"sessionID": {}}}) is None
        assert hooks.handle("Prompt", {"sessionID": [], "prompt": "fix it"}) is None
        hooks.finish()
    finally:
        rt.close()
    (attempt,) = load(tmp_path / "run").state.attempts
    assert (
        attempt.command == "cat calc.py" and attempt.exit_code == 0 and not (tmp_path / "run" / "faults.log").exists()
    )


def test_a_rollout_line_longer_than_a_read_does_not_hide_the_compaction_after_it(tmp_path: Path) -> None:
    huge = {"type": "function_call", "call_id": "c1", "arguments": json.dumps({"cmd": "x" * (65 << 20)})}
    path = jsonl(tmp_path / "rollout.jsonl", [{"type": "response_item", "payload": huge}, {"type": "compacted"}])
    r = RolloutReader(str(path))
    for _ in range(3):  # a refresh on each hook event
        r.refresh()
    assert r.compactions == 1 and r.offset == path.stat().st_size and "c1" not in r.named


FAKE_GEMINI = """#!{python}
import json, os, subprocess, sys
if "--version" in sys.argv:
    print("0.61.0")
    sys.exit(0)
home = os.environ["GEMINI_CLI_HOME"] + "/.gemini"
hook = json.load(open(home + "/settings.json"))["hooks"]["BeforeAgent"][0]["hooks"][0]["command"]
chats = home + "/tmp/project/chats"
os.makedirs(chats)
os.mkfifo(chats + "/session-1.jsonl")  # a session file made a FIFO (by the model's shell, say)
payload = {{"transcript_path": chats + "/session-1.jsonl", "session_id": "s", "prompt": "fix it", "cwd": os.getcwd()}}
subprocess.run(hook, shell=True, input=json.dumps(payload).encode(), check=True)
"""


def test_a_session_file_made_a_fifo_does_not_hold_up_the_end_of_a_gemini_run(tmp_path: Path) -> None:
    import sys

    from cli_support import ledger_run

    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    fake = tmp_path / "gemini"
    fake.write_text(FAKE_GEMINI.format(python=sys.executable))
    fake.chmod(0o755)
    run = tmp_path / "run"
    r = ledger_run("gemini", "--gemini-bin", str(fake), "-w", str(repo), "-o", str(run), "--", "-p", "x", timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert not (run / "sessions").exists()  # nothing of it kept: it was not read


@pytest.mark.parametrize("odd", ["a#b", "a?b", "a%41b"])
def test_opencodes_database_under_a_path_with_uri_characters_is_read_and_nothing_made(tmp_path: Path, odd: str) -> None:
    import sqlite3

    db = tmp_path / odd / "opencode.db"
    db.parent.mkdir()
    con = sqlite3.connect(db)
    part = {"type": "tool", "callID": "c1", "state": {"status": "completed", "output": "ok"}}
    con.execute("create table part (id, session_id, data)")
    con.execute("insert into part values (1, 's', ?)", (json.dumps(part),))
    con.commit()
    con.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert tool_parts(db, ["s"]) == {"c1": part}
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no database made beside it


def test_hook_payloads_naming_a_list_or_an_object_where_text_goes_are_ignored_without_a_fault(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    gemini, opencode = GeminiHooks(rt), OpenCodeHooks(rt, None)
    try:
        for odd in ([], {}):
            read = {"cwd": str(repo), "tool_name": "read_file", "tool_input": {"file_path": odd}}
            assert gemini.handle("AfterTool", {**read, "tool_response": {"llmContent": CALC}}) is None
            part = {"callID": odd, "state": {"status": "error", "error": "denied"}}
            assert opencode.handle("Event", {"type": "message.part.updated", "properties": {"part": part}}) is None
    finally:
        rt.close()
    assert not (tmp_path / "run" / "faults.log").exists()


def test_a_gemini_session_past_one_read_is_read_whole_for_the_page(tmp_path: Path) -> None:
    big = [{"id": f"u{i}", "type": "info", "content": "x" * (1 << 20)} for i in range(70)]  # 70 MiB of lines
    last = {"id": "m1", "type": "gemini", "content": "all done"}
    session = jsonl(tmp_path / "session-1.jsonl", [{"sessionId": "s"}, *big, last])
    assert [t.text for t in gemini_conversation(session).turns] == ["all done"]


TIDY_BREAKER = """#!{python}
import os, sys
if "--version" in sys.argv:
    print("0.61.0")
    sys.exit(0)
home = os.environ["GEMINI_CLI_HOME"] + "/.gemini"
os.mkdir(home + "/oauth_creds.json")  # where a login file goes, a directory (the model's shell, say)
open(home + "/google_accounts.json", "w").write("{{}}")  # a login Gemini CLI wrote: never kept
os.unlink(home + "/settings.json")
os.symlink("/nonexistent", home + "/settings.json")  # and the run's settings, a link
sys.exit(3)
"""


def test_a_gemini_home_left_untidy_keeps_the_agents_exit_code_and_the_ledger(tmp_path: Path) -> None:
    import sys

    from cli_support import ledger_run

    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    fake = tmp_path / "gemini"
    fake.write_text(TIDY_BREAKER.format(python=sys.executable))
    fake.chmod(0o755)
    run = tmp_path / "run"
    r = ledger_run("gemini", "--gemini-bin", str(fake), "-w", str(repo), "-o", str(run), "--", "-p", "x", timeout=120)
    assert r.returncode == 3 and "error:" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert f"look inside: ledger-run inspect {run}" in r.stderr
    assert "tidying the run's Gemini CLI home" in (run / "faults.log").read_text()
    assert not (run / "gemini" / "home" / ".gemini" / "google_accounts.json").exists()


CLAUDE_TIDY_BREAKER = """#!{python}
import os, sys
if "--version" in sys.argv:
    print("2.1.332 (Claude Code)")
    sys.exit(0)
path = sys.argv[sys.argv.index("--settings") + 1]  # the run's settings file, the first --settings
os.unlink(path)
os.symlink("/nonexistent", path)  # made a link (the model's shell, say)
sys.exit(3)
"""


def test_a_claude_settings_file_made_a_link_keeps_the_agents_exit_code_and_the_ledger(tmp_path: Path) -> None:
    import sys

    from cli_support import ledger_run

    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    fake = tmp_path / "claude"
    fake.write_text(CLAUDE_TIDY_BREAKER.format(python=sys.executable))
    fake.chmod(0o755)
    run = tmp_path / "run"
    args = ["--", "--settings", '{"env": {"MY_VAR": "1"}}', "-p", "x"]
    r = ledger_run("claude", "--claude-bin", str(fake), "-w", str(repo), "-o", str(run), *args, timeout=120)
    assert r.returncode == 3 and "error:" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert f"look inside: ledger-run inspect {run}" in r.stderr
    assert "tidying the run's Claude Code settings" in (run / "faults.log").read_text()


def test_a_claude_failure_with_no_exit_code_a_number_can_hold_is_the_tools_error() -> None:
    from ledger_adapters.claude.tools import failure

    huge = "Exit code " + "9" * 5000 + "\nboom"
    assert failure(huge) == (huge, 1) and failure("Exit code 2\nboom") == ("boom", 2)


def test_an_opencode_cleared_part_whose_call_id_is_not_text_loses_no_call(tmp_path: Path) -> None:
    """A tool part marked cleared (OpenCode's prune) with a call id that is not text names no call: it was a
    TypeError (unhashable) in the hook, where any other event with such an id is passed over."""
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, None)
    call = {
        "tool": "bash",
        "callID": "c1",
        "sessionID": "s",
        "args": {"command": "cat calc.py"},
        "directory": str(repo),
    }
    cleared = {"type": "tool", "sessionID": "s", "state": {"status": "completed", "time": {"compacted": 1}}}
    try:
        assert hooks.handle("ToolBefore", dict(call)) is None
        hooks.handle("ToolAfter", {**call, "output": CALC, "metadata": {"exit": 0}})
        for call_id in (["c1"], {"c1": 1}):
            part = {**cleared, "callID": call_id}
            assert hooks.handle("Event", {"type": "message.part.updated", "properties": {"part": part}}) is None
        hooks.finish()
    finally:
        rt.close()
    (attempt,) = load(tmp_path / "run").state.attempts
    assert attempt.command == "cat calc.py" and attempt.exit_code == 0


def test_an_opencode_subagents_call_with_no_tool_before_is_not_the_main_models_repeat(tmp_path: Path) -> None:
    """A subagent's call whose ``tool.execute.before`` never came was recorded as the main model's: two such failed
    runs of a script, and the main model running it for its first time was refused ("change something before
    running it a 3rd time"). They are the subagent's: the main model's run goes on, with no note."""
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, None)
    fail = {"tool": "bash", "args": {"command": "python3 calc.py --check"}, "directory": str(repo)}
    try:
        hooks.handle("Event", {"type": "session.created", "properties": {"info": {"id": "main"}}})
        hooks.handle("Event", {"type": "session.created", "properties": {"info": {"id": "sub", "parentID": "main"}}})
        for i in range(2):
            ran = {**fail, "callID": f"s{i}", "sessionID": "sub", "output": "no\n", "metadata": {"exit": 1}}
            hooks.handle("ToolAfter", ran)
        assert hooks.handle("ToolBefore", {**fail, "callID": "m0", "sessionID": "main"}) is None
        after = hooks.handle(
            "ToolAfter", {**fail, "callID": "m0", "sessionID": "main", "output": "no\n", "metadata": {"exit": 1}}
        )
        assert after is None or "[ledger] NUDGE" not in after["output"], after
        hooks.finish()
    finally:
        rt.close()
    attempts = load(tmp_path / "run").state.attempts
    assert [(a.agent, a.verdict.kind.value) for a in attempts] == [("sub", "RUN"), ("sub", "NUDGE"), ("", "RUN")]


def _locked_opencode_db(path: Path) -> object:
    """A database as another program holds it (a rollback journal, an exclusive lock): no read gets through."""
    import sqlite3

    con = sqlite3.connect(path, isolation_level=None)
    con.execute("create table part (id, message_id, session_id, data)")
    con.execute("begin exclusive")
    return con


def test_an_opencode_database_another_program_locks_holds_no_call_back(tmp_path: Path) -> None:
    """The database read for outputs OpenCode's prune cleared, made before each call is answered, waited 2 s on a lock
    and said nothing: every call of the run took 2 s more (4 s with the check of what the model got), and nothing
    said why. OpenCode writes in WAL mode, where a reader never waits: a lock is another program's. The call goes
    on at once, and one line says the database could not be read."""
    import time

    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    lock = _locked_opencode_db(tmp_path / "opencode.db")
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, tmp_path / "opencode.db")
    took = []
    try:
        for i in range(3):
            call = {"tool": "bash", "callID": f"c{i}", "sessionID": "ses", "args": {"command": "cat calc.py"}}
            assert hooks.handle("ToolBefore", {**call, "directory": str(repo)}) is None
            started = time.perf_counter()
            hooks.handle("ToolAfter", {**call, "directory": str(repo), "output": CALC, "metadata": {"exit": 0}})
            took.append(time.perf_counter() - started)
    finally:
        lock.close()
        rt.close()
    assert max(took) < 1.0, took
    faults = (tmp_path / "run" / "faults.log").read_text().splitlines()
    unread = [f for f in faults if "could not read OpenCode's database" in f]
    assert len(unread) == 1 and "locked" in unread[0], faults


def test_an_opencode_record_unchecked_for_a_database_it_cannot_read_says_so(tmp_path: Path) -> None:
    """At the end of the run each record is checked against OpenCode's database; one that could not be read (locked,
    not there) was reported as a database that "never names" the call, which it may well name. The record is
    still never a source, for the reason that holds: the database could not be read."""
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    lock = _locked_opencode_db(tmp_path / "opencode.db")
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, tmp_path / "opencode.db")
    try:
        call = {"tool": "bash", "callID": "c0", "sessionID": "ses", "args": {"command": "cat calc.py"}}
        hooks.handle("ToolBefore", {**call, "directory": str(repo)})
        hooks.handle("ToolAfter", {**call, "directory": str(repo), "output": CALC, "metadata": {"exit": 0}})
        hooks.finish()
    finally:
        lock.close()
        rt.close()
    state = load(tmp_path / "run").state
    (why,) = state.distrusted.values()
    assert "never names" not in why and "could not be read" in why, why


def test_an_opencode_subagents_repeat_is_nudged_to_it(tmp_path: Path) -> None:
    """A subagent's repeat of its own run is a NUDGE citing its own step, recorded as applied and counted "nudged" by
    inspect, but its output is shown as it is, which carried no NUDGE: the subagent was never told, and its next
    failing run was refused "a 3rd time" out of the blue. It gets the note (no note of the state view)."""
    repo = make_repo(tmp_path / "repo", {"ok.py": "print(1)\n"})
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, None)
    got = []
    try:
        hooks.handle("Event", {"type": "session.created", "properties": {"info": {"id": "main"}}})
        hooks.handle("Event", {"type": "session.created", "properties": {"info": {"id": "sub", "parentID": "main"}}})
        for n, (command, code, out) in enumerate([("python3 -c 'import sys; sys.exit(3)'", 3, "x\n")] * 2):
            call = {"tool": "bash", "callID": f"c{n}", "sessionID": "sub", "args": {"command": command}}
            assert hooks.handle("ToolBefore", {**call, "directory": str(repo)}) is None
            after = hooks.handle(
                "ToolAfter", {**call, "directory": str(repo), "output": out, "metadata": {"exit": code}}
            )
            got.append(after["output"] if after else out)
        hooks.finish()
    finally:
        rt.close()
    assert got[0] == "x\n", got
    assert got[1].startswith("x\n\n\n[ledger] NUDGE: repeat-failure: no tracked file changed since step 1,"), got
    assert "<ledger_state" not in got[1], got
