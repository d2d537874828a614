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
