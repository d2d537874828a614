"""The ledger-run command line, run as a user would run it."""

from __future__ import annotations

import json
import subprocess
import sys

from ledger_runtime import __version__
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ledger_runtime.cli", *args],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
    )


def make_run(repo, tmp_path):
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig(), task="Make test_add pass")
    ex = LocalExecutor()
    for cmd in [
        "cat pkg/util.py",
        "cat pkg/util.py",
        "sed -i '2s/a - b/a + b/' calc.py",
        "python3 -m pytest -q test_calc.py -p no:cacheprovider",
    ]:
        rt.run(cmd, ex)
    rt.close()
    return tmp_path / "run"


def test_version_and_help():
    assert cli("--version").stdout.strip() == f"ledger-run {__version__}"
    out = cli("--help").stdout
    assert "inspect" in out


def test_inspect_timeline_and_summary(repo, tmp_path):
    run = make_run(repo, tmp_path)
    r = cli("inspect", str(run))
    assert r.returncode == 0, r.stderr
    assert "Timeline" in r.stdout and "whole" in r.stdout and "calc.py" in r.stdout
    assert "modified, +1 -1" in r.stdout
    assert "nudged" in r.stdout and "reused" not in r.stdout, "no REUSE in a new run: no row that counts them"
    assert cli("inspect", str(run / "ledger.sqlite")).returncode == 0


def test_inspect_json_is_machine_readable(repo, tmp_path):
    run = make_run(repo, tmp_path)
    data = json.loads(cli("inspect", str(run), "--json").stdout)
    verdicts = [row["verdict"] for row in data["timeline"]]
    assert verdicts == ["RUN", "RUN", "NUDGE", "RUN"]  # the edit of a file never read: stale-edit
    assert data["summary"]["answers"]["whole"] == 1 and data["summary"]["reused"] == 0
    assert data["summary"]["files_changed"][0]["path"] == "calc.py"
    assert data["timeline"][2]["files_changed"] == ["calc.py"]
    first, second = data["timeline"][:2]
    assert first["shown"] == first["expanded"] == (repo / "pkg" / "util.py").read_text()
    assert second["shown"].startswith("[ledger: same as step 1's output") and second["answer"] == "whole"
    assert second["expanded"] == first["expanded"], "expanded: every reference replaced by the bytes it names"
    assert data["summary"]["chars_spared"] == second["output_chars"] - second["shown_chars"] > 0


def test_inspect_prints_what_the_model_received_and_its_expansion(repo, tmp_path):
    run = make_run(repo, tmp_path)
    util = (repo / "pkg" / "util.py").read_text()
    got = cli("inspect", str(run), "--step", "2", "--output")
    assert got.returncode == 0 and got.stdout.startswith("[ledger: same as step 1's output (`cat pkg/util.py`")
    assert cli("inspect", str(run), "--step", "2", "--expand").stdout == util
    assert cli("inspect", str(run), "--step", "1", "--output").stdout == util
    j = json.loads(cli("inspect", str(run), "--step", "2", "--json").stdout)
    assert j["commands"][0]["expanded"] == util and j["commands"][0]["shown"] == got.stdout
    bad = cli("inspect", str(run), "--output")
    assert bad.returncode == 2 and "need --step" in bad.stderr


def test_inspect_says_which_blob_of_a_damaged_ledger_does_not_read_back(repo, tmp_path):
    """A stored output damaged on disk (it does not decompress, or an unknown codec, or the wrong size) is
    never shown as an empty output or as "no earlier output": a one-line error for the step's text, one
    "damaged:" line per blob and exit 1 elsewhere, null in --json with the reason beside it."""
    import sqlite3

    from ledger_runtime.inspection import load

    run = make_run(repo, tmp_path)
    first = load(run).state.attempts[0]
    db = sqlite3.connect(run / "ledger.sqlite")
    for damage, why in [
        ("codec = 'zlib', data = X'00ff'", "does not decompress"),
        ("codec = 'lzma'", "unknown codec 'lzma'"),
        ("codec = 'raw', data = X'41'", "1 bytes where"),
    ]:
        db.execute(f"UPDATE blobs SET {damage} WHERE hash = ?", (first.shown_hash,))
        db.commit()
        out = cli("inspect", str(run), "--step", "1", "--output")
        assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr, out.stderr
        assert "step 1: the text the model received does not read back" in out.stderr and why in out.stderr
        expand = cli("inspect", str(run), "--step", "2", "--expand")
        assert "step 1's output, which it names, does not read back" in expand.stdout, expand.stdout
        assert expand.returncode == 1 and f"damaged: the ledger's blob {first.shown_hash[:12]} " in expand.stderr
        data = cli("inspect", str(run), "--json")
        assert data.returncode == 1 and "Traceback" not in data.stderr, data.stderr
        parsed = json.loads(data.stdout)
        assert parsed["timeline"][0]["shown"] is None and why in parsed["damaged"][first.shown_hash]
    assert cli("inspect", str(run)).returncode == 0  # the timeline reads no blob
    db.execute("DROP TABLE blobs")
    db.commit()
    gone = cli("inspect", str(run), "--json")
    assert gone.returncode == 2 and "a ledger without its blobs table" in gone.stderr and "Traceback" not in gone.stderr


def test_inspect_state_view_at_a_step(repo, tmp_path):
    run = make_run(repo, tmp_path)
    at2 = cli("inspect", str(run), "--step", "2").stdout
    assert '<ledger_state step="2">' in at2 and "Changed since start" not in at2
    at4 = cli("inspect", str(run), "--step", "4").stdout
    assert "calc.py: +1 -1" in at4
    j = json.loads(cli("inspect", str(run), "--step", "3", "--json").stdout)
    assert j["step"] == 3 and "calc.py" in j["state_view"]
    bad = cli("inspect", str(run), "--step", "99")
    assert bad.returncode == 2 and "past the last step" in bad.stderr


def test_bad_ledgers_give_one_line_and_no_traceback(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not sqlite at all")
    for target in (junk, tmp_path / "missing", tmp_path):
        r = cli("inspect", str(target))
        assert r.returncode == 2
        assert "not a ledger:" in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_demo_runs_offline_and_refuses_a_used_directory(tmp_path):
    out = tmp_path / "demo"
    p = cli("demo", "-o", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "NUDGE" in p.stdout and (out / "run" / "ledger.sqlite").exists()
    loose = [f.name for f in (out / "run").iterdir() if f.stat().st_mode & 0o077]
    assert not loose and (out / "run" / "trajectory.traj.json").exists(), f"the run's files are the owner's: {loose}"
    for kind in ("spans: ", "whole: ", "delta: "):  # each way an output comes back with what the model had
        assert kind in p.stdout, kind
    again = cli("demo", "-o", str(out))
    assert again.returncode == 2 and "already holds workspace/ and run/, where a demo run goes" in again.stderr
    assert again.stderr.strip().count("\n") == 0 and "Traceback" not in again.stderr


def test_a_ledger_with_an_old_reuse_still_loads_shows_and_goes_on(repo, tmp_path):
    # A REUSE (an earlier output handed back, the command not run) is made no more, but ledgers written
    # before keep them, with verdict keys the record has lost since (form, covered_by, estimated_chars).
    run, util = tmp_path / "run", (repo / "pkg" / "util.py").read_text()
    rt = LedgerRuntime(repo, run, LedgerConfig(), task="Make test_add pass")
    rt.run("cat pkg/util.py", LocalExecutor())
    first = rt.state.attempts[0]
    head = "[ledger] REUSE of step 1's output (nothing changed; not run again):\n"
    shown = head + util
    old = {
        **first.to_dict(),
        "id": first.id + 1,
        "step": 2,
        "executed": False,
        "duration_s": 0.0,
        "shown_chars": len(shown),
        "shown_hash": rt.store.put_text(shown),
        "verdict": {
            "kind": "REUSE",
            "reason": "nothing changed",
            "ref_attempt": first.id,
            "ref_step": 1,
            "form": "full",
            "rule": None,
            "covered_by": [1],
            "estimated_chars": len(util),
            "evidence": None,
        },
        "answer": {
            **first.answer,
            "kind": "reused",
            "pieces": [["note", 0, len(head), None, 0, 0], ["text", len(head), len(shown), None, 0, 0]],
        },
    }
    rt.store.append("attempt", old, 2)
    rt.store.commit()
    rt.close()

    data = json.loads(cli("inspect", str(run), "--json").stdout)
    assert [row["verdict"] for row in data["timeline"]] == ["RUN", "REUSE"]
    assert data["summary"]["reused"] == 1
    assert data["timeline"][1]["shown"] == shown and data["timeline"][1]["expanded"] == util
    timeline = cli("inspect", str(run))
    assert timeline.returncode == 0 and "REUSE" in timeline.stdout, timeline.stderr
    assert "reused / nudged" in timeline.stdout, "an old ledger's REUSEs are counted"
    # the run goes on: a new runtime reads it back (the old REUSE's output among what the model holds)
    again = LedgerRuntime(repo, run, LedgerConfig(), task="Make test_add pass")
    r = again.run("cat pkg/util.py", LocalExecutor())
    assert r.executed and r.output.startswith("[ledger: same as step 2's output"), r.output
    again.close()
