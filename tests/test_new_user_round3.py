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


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    """The demo, live and in shadow mode (the notes the model was sent are the demo's own)."""
    base = tmp_path_factory.mktemp("demos")
    for name, extra in (("live", ()), ("shadow", ("--shadow",))):
        r = ledger_run("demo", "-o", str(base / name), *extra)
        assert r.returncode == 0, r.stderr[-2000:]
    return base / "live" / "run", base / "shadow" / "run"


@pytest.mark.slow
def test_what_the_model_was_told_is_in_every_view_of_inspect(demo_runs, tmp_path):
    live, _ = demo_runs
    data = json.loads(ledger_run("inspect", str(live), "--json").stdout)
    notes = data["notes"]
    assert notes and all(n["text"] and n["text"].startswith("(Ledger runtime") for n in notes)
    step = notes[0]["step"]
    one = json.loads(ledger_run("inspect", str(live), "--step", str(step), "--json").stdout)
    assert one["notes"] == [n for n in notes if n["step"] == step]
    assert notes[0]["text"] in ledger_run("inspect", str(live), "--step", str(step)).stdout
    timeline = ledger_run("inspect", str(live), env={"COLUMNS": "200"}).stdout
    assert "NOTE" in timeline and f"note, {notes[0]['chars']:,} characters" in timeline
    page = tmp_path / "p.html"
    both = ledger_run("inspect", str(live), "--json", "--html", str(page))
    assert both.returncode == 0 and json.loads(both.stdout)["notes"] == notes, "--json and --html: both"
    html = page.read_text()
    assert f"the note the model was sent after step {step}" in html
    traj = json.loads((live / "trajectory.traj.json").read_text())
    sent = [m["extra"]["ledger_note"] for m in traj["messages"] if (m.get("extra") or {}).get("ledger_note")]
    assert sent == [n["text"] for n in notes], "mini's trajectory keeps each note with the call it went with"


@pytest.mark.slow
def test_a_shadow_runs_page_says_what_the_model_would_have_received(demo_runs, tmp_path):
    _, shadow = demo_runs
    page = tmp_path / "s.html"
    assert ledger_run("inspect", str(shadow), "--html", str(page)).returncode == 0
    html = page.read_text()
    assert "what the model would have received (shadow)" in html
    assert "output the ledger would have spared (shadow" in html and "output spared</td><td>0 " not in html


def test_replay_of_a_ledger_file_says_what_to_pass(tmp_path):
    from cli_support import one_line_error

    ledger = tmp_path / "run" / "ledger.sqlite"
    ledger.parent.mkdir()
    import sqlite3

    sqlite3.connect(ledger).execute("CREATE TABLE t (x)").connection.close()
    msg = one_line_error(ledger_run("replay", str(ledger)))
    assert "is a ledger file: pass the run directory" in msg and "or its trajectory" in msg
