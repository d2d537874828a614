"""Hook payloads of Gemini CLI and OpenCode with garbage in them, on angles the earlier passes left: a
NUL byte in a path a tool call names (a model may write one), and result parts of the wrong type. The
call is recorded, once, and no fault is said. Real runtimes on real repositories."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_repo

from ledger_adapters.gemini.hooks import GeminiHooks
from ledger_adapters.opencode.hooks import OpenCodeHooks
from ledger_runtime import LedgerRuntime
from ledger_runtime.inspection import load

CALC = "def add(a, b):\n    return a + b\n"
NUL_CALLS = [
    ("bash", {"command": "cat calc.py\0"}, None, "cat calc.py\0"),
    ("bash", {"command": "cat calc.py", "workdir": "sub\0dir"}, None, "cat calc.py"),
    ("bash", {"command": "cat calc.py"}, "/tmp/a\0b", "cat calc.py"),
    ("read", {"filePath": "calc\0.py"}, None, "read calc\0.py"),
    ("edit", {"filePath": "calc\0.py", "oldString": "a", "newString": "b"}, None, "edit calc\0.py"),
    ("write", {"filePath": "new\0.py", "content": "x"}, None, "write new\0.py"),
]


@pytest.mark.parametrize(
    "tool, args, directory, label", NUL_CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(NUL_CALLS)]
)
def test_an_opencode_call_naming_a_path_with_a_nul_is_recorded_without_a_fault(
    tmp_path: Path, tool: str, args: dict, directory: str | None, label: str
) -> None:
    """Every system call given such a path raised ValueError: the call was not recorded at all, and
    faults.log held a traceback for it."""
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, None)
    call = {"tool": tool, "callID": "c1", "sessionID": "s", "args": args, "directory": directory or str(repo)}
    try:
        assert hooks.handle("ToolBefore", dict(call)) is None
        hooks.handle("ToolAfter", {**call, "output": "out", "metadata": {"exit": 0}})
        hooks.finish()
    finally:
        rt.close()
    assert [a.command for a in load(tmp_path / "run").state.attempts] == [label]
    assert not (tmp_path / "run" / "faults.log").exists(), (tmp_path / "run" / "faults.log").read_text()[:500]


def test_a_gemini_shell_call_with_a_nul_in_its_directory_and_a_result_part_that_is_not_text(tmp_path: Path) -> None:
    """A result whose ``llmContent`` parts hold a number or null for ``text`` raised TypeError in
    AfterTool (the call's result lost to a fault); a ``dir_path`` with a NUL lost the call's record."""
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = GeminiHooks(rt)
    calls = [
        ({"command": "echo one"}, {"llmContent": [{"text": None}]}),
        ({"command": "echo two"}, {"llmContent": [{"text": "Output: "}, {"text": 2}]}),
        ({"command": "echo three", "dir_path": "a\0b"}, {"llmContent": "Output: three"}),
    ]
    try:
        for args, response in calls:
            call = {"tool_name": "run_shell_command", "tool_input": args, "cwd": str(repo)}
            assert hooks.handle("BeforeTool", dict(call)) is None
            hooks.handle("AfterTool", {**call, "tool_response": response})
        hooks.finish()
    finally:
        rt.close()
    attempts = load(tmp_path / "run").state.attempts
    assert [a.command for a in attempts] == ["echo one", "echo two", "echo three"]
    assert attempts[0].exit_code is None and attempts[2].exit_code == 0
    assert not (tmp_path / "run" / "faults.log").exists(), (tmp_path / "run" / "faults.log").read_text()[:500]


DEEP = "[" * 5000 + "]" * 5000  # past the depth Python's JSON parser reads (RecursionError, not ValueError)


def test_an_opencode_part_nested_past_the_parser_costs_no_later_record(tmp_path: Path) -> None:
    """One part of OpenCode's database (a model's tool input nested 5,000 deep) raised RecursionError
    in every later ToolAfter, which reads the database first: no later call was recorded, and the end
    of the run raised too."""
    import json
    import sqlite3

    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    db = tmp_path / "opencode.db"
    con = sqlite3.connect(db)
    con.execute("create table part (id, session_id, data)")
    deep = '{"type": "tool", "callID": "c0", "state": {"status": "error", "input": ' + DEEP + "}}"
    con.execute("insert into part values (1, 's', ?)", (deep,))
    con.commit()
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, db)
    try:
        for i in range(3):
            call = {"tool": "bash", "callID": f"c{i + 1}", "sessionID": "s", "args": {"command": f"echo {i}"}}
            assert hooks.handle("ToolBefore", {**call, "directory": str(repo)}) is None
            hooks.handle("ToolAfter", {**call, "directory": str(repo), "output": f"{i}\n", "metadata": {"exit": 0}})
            part = {"type": "tool", "callID": f"c{i + 1}", "state": {"status": "completed", "output": f"{i}\n"}}
            con.execute("insert into part values (?, 's', ?)", (i + 2, json.dumps(part)))
            con.commit()
        hooks.finish()
    finally:
        con.close()
        rt.close()
    assert [a.command for a in load(tmp_path / "run").state.attempts] == ["echo 0", "echo 1", "echo 2"]


def test_a_codex_command_output_nested_past_the_parser_leaves_the_model_s_side_readable(tmp_path: Path) -> None:
    """A command's output that starts like JSON is read for the output inside it; nested 5,000 deep it
    raised RecursionError, and the run's page lost the whole of the model's side for one output."""
    import json

    from ledger_adapters.codex.rollout import conversation

    deep = '{"a": ' + DEEP + "}"
    lines = [
        {"type": "session_meta", "payload": {"id": "x"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"text": "fix"}]}},
        {
            "type": "response_item",
            "payload": {"type": "function_call", "name": "shell", "arguments": '{"command": ["cat", "x"]}'},
        },
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c", "output": deep}},
        {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"text": "done"}]}},
    ]
    rollout = tmp_path / "rollout-x.jsonl"
    rollout.write_text("".join(json.dumps(line) + "\n" for line in lines))
    got = conversation(rollout)
    assert got.task == "fix" and [list(t.received) for t in got.turns] == [[deep], []]


def test_a_gemini_session_whose_first_line_is_nested_past_the_parser_is_named_not_a_session(tmp_path: Path) -> None:
    from ledger_adapters.gemini.session import conversation
    from ledger_runtime import TrajectoryError

    session = tmp_path / "session-x.jsonl"
    session.write_text(DEEP + "\n")
    with pytest.raises(TrajectoryError, match="not a Gemini CLI session"):
        conversation(session)


def test_a_shell_command_with_a_nul_is_recorded_as_one_that_could_not_start(tmp_path: Path) -> None:
    """``LedgerRuntime.run`` with the local executor (the demo's, a replay's): Popen's ValueError for
    the NUL went up through ``run``, and the call was not recorded."""
    from ledger_runtime.executor import LocalExecutor

    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    try:
        res = rt.run("cat calc.py\0", LocalExecutor())
        after = rt.run("cat calc.py", LocalExecutor())
    finally:
        rt.close()
    assert res.returncode == -1 and "could not start the command: embedded null byte" in res.exception_info
    assert after.output == CALC
    assert [a.command for a in load(tmp_path / "run").state.attempts] == ["cat calc.py\0", "cat calc.py"]


def test_a_command_that_could_not_start_keeps_why_in_its_record(tmp_path: Path) -> None:
    """A command the executor could not start (a NUL in it) was recorded as one that ran and exited -1,
    the reason dropped: inspect, and the state view the model reads later, said "exit -1" and nothing
    of why; its record now keeps the executor's reason, as an interrupted command's keeps its own."""
    import json
    import subprocess
    import sys

    from ledger_runtime.executor import LocalExecutor

    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    try:
        rt.run("echo a\0b", LocalExecutor())
        view = rt.inform()
    finally:
        rt.close()
    (attempt,) = load(tmp_path / "run").state.attempts
    assert attempt.exception == "could not start the command: embedded null byte", attempt.exception
    assert "exit -1, could not start the command" in view, view
    r = subprocess.run(
        [sys.executable, "-m", "ledger_runtime", "inspect", str(tmp_path / "run"), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    (row,) = json.loads(r.stdout)["timeline"]
    assert row["exception"] == "could not start the command: embedded null byte", row


def test_a_command_asked_to_run_in_a_directory_with_a_nul_is_not_run_in_the_work_tree(tmp_path: Path) -> None:
    """A directory with a NUL is analysed as the work tree (no directory has such a name), and the plan's
    directory became the work tree too: ``run`` ran the command there, where it was never asked to run
    (``rm -rf *`` meant for ``build\\0`` would empty the work tree). It could not start, and is said so."""
    from ledger_runtime.executor import LocalExecutor

    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, tmp_path / "run")
    try:
        res = rt.run("rm -f calc.py", LocalExecutor(), cwd=str(repo / "build\0"))
    finally:
        rt.close()
    assert (repo / "calc.py").read_text() == CALC, "the command ran in the work tree"
    assert res.returncode == -1 and "could not start the command" in res.exception_info
    assert [a.command for a in load(tmp_path / "run").state.attempts] == ["rm -f calc.py"]


def test_a_plan_for_a_directory_with_a_nul_keeps_the_directory_asked_for(tmp_path: Path) -> None:
    """An adapter that runs a plan itself runs it in ``plan.cwd``. For a directory with a NUL the plan's directory
    was the work tree, where the analysis reads the command: ``rm -f calc.py`` meant for ``build\\0`` removed the
    work tree's calc.py (only ``run`` worked the asked directory out again). The plan keeps the directory asked for;
    the command cannot start there, and its record says why."""
    from ledger_runtime.executor import LocalExecutor

    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    asked = str(repo / "build\0")
    rt = LedgerRuntime(repo, tmp_path / "run")
    try:
        plan = rt.propose("rm -f calc.py", cwd=asked)
        assert plan is not None and plan.cwd == asked and plan.analysis.cwd == str(repo), plan
        res = rt.record(plan, LocalExecutor()(plan.command, plan.cwd), 0.01)
    finally:
        rt.close()
    assert (repo / "calc.py").read_text() == CALC, "the command ran in the work tree"
    assert res.returncode == -1 and "could not start the command" in res.exception_info
    (a,) = load(tmp_path / "run").state.attempts
    assert a.command == "rm -f calc.py" and a.exception == "could not start the command: embedded null byte", a
    assert not (tmp_path / "run" / "faults.log").exists(), (tmp_path / "run" / "faults.log").read_text()[:500]
