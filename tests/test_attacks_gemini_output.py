"""An attack on how a Gemini CLI command result is read: Gemini CLI puts lines after a command's output
(``Error: ...`` for a process-level error, ``Exit Code: N``, ``Process Group PGID: N``), and a command's
own output may end with a line that looks like one of them (``Error: Cannot find module 'x'``, as Node
prints). The ledger records the command's real output and exit code, with the REAL gemini binary (the
pinned npm package) against a fake Gemini API on loopback; without it these skip, saying so."""

from __future__ import annotations

import pytest
from test_gemini_e2e import Session

from ledger_adapters.gemini.cli import GEMINI_VERSION, find_gemini
from ledger_adapters.gemini.tools import shell_result
from ledger_runtime.inspection import load

COMMAND = "printf 'building\\nError: Cannot find module x\\n'; exit 1"


def test_an_output_ending_in_an_error_line_is_the_commands_and_its_exit_code_is_kept() -> None:
    text = "Output: building\nError: Cannot find module x\nExit Code: 1\nProcess Group PGID: 7"
    got = shell_result({"llmContent": text, "returnDisplay": "building\nError: Cannot find module x\n"})
    assert (got.output, got.returncode) == ("building\nError: Cannot find module x", 1)
    spawn = "Output: (empty)\nError: spawn bash ENOENT\nProcess Group PGID: 7"  # a process-level error
    got = shell_result({"llmContent": spawn, "returnDisplay": "Command failed: spawn bash ENOENT"})
    assert (got.output, got.returncode) == ("", None)


@pytest.mark.skipif(
    find_gemini(None) is None, reason=f"no gemini binary (npm install -g @google/gemini-cli@{GEMINI_VERSION})"
)
def test_a_command_printing_an_error_line_is_recorded_with_its_output_and_exit_code(tmp_path) -> None:
    s = Session(tmp_path, [("bash", COMMAND), ("say", "it fails.")])
    try:
        p = s.run()
    finally:
        s.fake.close()
    assert p.returncode == 0, p.stderr[-3000:]
    (attempt,) = load(s.run_dir).state.attempts
    assert attempt.exit_code == 1
    assert "Output: building\nError: Cannot find module x\nExit Code: 1\n" in s.seen(1)["call_0_0"]  # as it was


def test_an_exit_code_line_past_any_exit_code_is_an_unknown_end_and_the_call_is_recorded(tmp_path) -> None:
    from conftest import make_repo

    from ledger_adapters.gemini.hooks import GeminiHooks
    from ledger_runtime import LedgerRuntime

    # in an interactive session returnDisplay is the terminal's cells, not text: the first reading stands
    text = "Output: x\nExit Code: " + "9" * 5000 + "\nProcess Group PGID: 7"
    assert shell_result({"llmContent": text, "returnDisplay": [[{"text": "x"}]]}).returncode is None
    repo = make_repo(tmp_path / "repo", {"calc.py": "x = 1\n"})
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = GeminiHooks(rt)
    call = {"cwd": str(repo), "tool_name": "run_shell_command", "tool_input": {"command": "python3 odd.py"}}
    try:
        hooks.handle("BeforeTool", call)
        hooks.handle("AfterTool", {**call, "tool_response": {"llmContent": text, "returnDisplay": [[{"text": "x"}]]}})
        hooks.finish()
    finally:
        rt.close()
    (attempt,) = load(tmp_path / "run").state.attempts
    assert attempt.command == "python3 odd.py" and attempt.exit_code is None
