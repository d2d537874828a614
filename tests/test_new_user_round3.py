"""What a new user met, round three (issue 38): each case as the user met it, through the real
``ledger-run`` in a subprocess with no terminal."""

from __future__ import annotations

import json

import pytest
from cli_support import ledger_run, scripted_mini_config
from conftest import make_repo


@pytest.mark.slow
def test_the_readme_quickstart_from_a_script_finishes_when_the_agent_submits(tmp_path):
    """``-y`` without ``--exit-immediately``, no terminal: mini-swe-agent would ask whether to finish
    and read no answer (the run ended 'the run stopped: EOFError', exit 1, after a good submission)."""
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    cfg = scripted_mini_config(tmp_path / "cfg.yaml", ["cat a.py", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"])
    r = ledger_run("mini", "-c", str(cfg), "-t", "look", "-w", str(repo), "-o", str(tmp_path / "run"), "-y")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "EOFError" not in r.stderr
    traj = json.loads((tmp_path / "run" / "trajectory.traj.json").read_text())
    assert traj["info"]["exit_status"] == "Submitted"


def test_help_lists_the_commands_in_order_one_line_each_and_no_bool_after_a_flag():
    r = ledger_run("--help", env={"COLUMNS": "200"})
    assert r.returncode == 0
    listed = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("│ ") and len(ln.split()) > 2]
    names = [n for n in listed if not n.startswith("-")]
    order = ["demo", "mini", "codex", "claude", "inspect", "config", "replay"]
    assert [n for n in names if n in order] == order, names
    inspect_line = next(ln for ln in r.stdout.splitlines() if ln.startswith("│ inspect"))
    assert "what the model received at a step." in inspect_line, "one line, not broken mid-sentence"
    for command in ("--help", "replay --help", "inspect --help", "mini --help", "codex --help"):
        out = ledger_run(*command.split(), env={"COLUMNS": "200"}).stdout
        assert "<bool>" not in out, command
