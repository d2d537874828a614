"""The replay checks the ledger's claims against the files themselves (harness/replay/truth.py): a
replayed run's true claims are counted true, and a false one, made by hand of the same run, is caught
from the files, not from the ledger's records."""

from __future__ import annotations

from dataclasses import replace

from test_replay import COMMANDS, mirror, settings, traj_file

from ledger_adapters.mini.trajectories import from_traj_json
from ledger_harness.replay.engine import replay_one
from ledger_harness.replay.truth import Files, entry_true, stub_true, verdict_true
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.held.context import KEEP, STUB, HistoryOutput, Line, Stub, Treatment
from ledger_runtime.inform import view_entries
from ledger_runtime.runtime import LedgerRuntime


def test_a_replay_counts_its_claims_and_finds_none_false(tmp_path):
    bare, commit = mirror(tmp_path)
    t = from_traj_json(traj_file(tmp_path / "a.traj.json", "demo__calc-1", COMMANDS))
    res = replay_one(t, settings(tmp_path, bare, commit, "demo__calc-1"))
    claims = res["claims"]
    assert claims["checked"] > 20 and claims["false"] == 0, claims["examples"]


def test_a_false_claim_is_caught_from_the_files(tmp_path):
    bare, commit = mirror(tmp_path)
    tree = tmp_path / "tree"
    import subprocess

    subprocess.run(["git", "clone", "-q", str(bare), str(tree)], check=True)
    ex = LocalExecutor(timeout=30)
    files = Files(str(tree), commit)
    files.after_step(0)
    with LedgerRuntime(tree, tmp_path / "run", LedgerConfig(), task="t") as rt:
        steps = ["cat calc.py", "sed -i '2s/a - b/a + b/' calc.py", "echo x > new.txt", "cat calc.py"]
        for n, cmd in enumerate(steps, 1):
            rt.run(cmd, ex)
            files.after_step(n, rt.state.observed_paths())
        entries = [e for e in view_entries(rt.state, rt.config.view) if e.claim]
        assert entries and all(entry_true(e.claim, files, rt.state) for e in entries), [e.text for e in entries]
        calc, new = str(tree / "calc.py"), str(tree / "new.txt")
        assert entry_true(("changed", calc, "created", 2, 2), files, rt.state) is False, (
            "calc.py was there at the start"
        )
        assert entry_true(("changed", new, "changed", 3, 3), files, rt.state) is False, "new.txt was not"
        assert entry_true(("changed", calc, "changed", 3, 3), files, rt.state) is False, "its last change was at 2"
        assert entry_true(("seen", calc, (1,), None), files, rt.state) is False, "what step 1 showed is gone"
        assert entry_true(("seen", calc, (4,), None), files, rt.state) is True
        second = rt.state.attempts[1]
        assert entry_true(("command", 1, True, None, None), files, rt.state) is False, "calc.py changed after #1"
        nudge = replace(second.verdict, kind=second.verdict.kind.__class__("NUDGE"), ref_step=1, rule=None)
        assert verdict_true(nudge, files, 4, [{"exit": 0}] * 3) is False, "files changed after step 1"
    said = HistoryOutput(0, 1, "step 1", "cat calc.py", "k", True, tuple(Line(f"line {i}\n") for i in range(5)))
    assert stub_true(said, Treatment(STUB, Stub()), "", set(), lambda p: None) is False
    assert stub_true(
        said, Treatment(STUB, Stub(later=True)), "line 0\nline 1\nline 2\nline 3\nline 4", set(), lambda p: None
    )
    assert stub_true(said, Treatment(KEEP), "", set(), lambda p: None)
