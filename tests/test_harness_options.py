"""The harness's commands as options + validate + run: ``validate`` says what is wrong with the options
alone, without typer, in the very line the command prints (``error: ...`` on stderr, exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledger_harness.replay.options import ReplayOptions
from ledger_harness.replay.options import validate as validate_replay
from ledger_harness.swebench.options import SwebenchOptions
from ledger_harness.swebench.options import validate as validate_swebench
from ledger_harness.tau2.options import Tau2GateOptions
from ledger_harness.tau2.options import validate as validate_tau2


def cli_error(*args: str) -> str:
    """The one line ``ledger-run ARGS`` fails with (its exit code checked: 2)."""
    r = subprocess.run(
        [sys.executable, "-m", "ledger_runtime.cli", *args],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
        timeout=120,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_valid_replay_options_pass():
    assert validate_replay(ReplayOptions(trajectories=(Path("runs"),))) is None
    assert validate_replay(ReplayOptions(trajectories=(), context="full,window:5", price_model="gpt-5-mini")) is None


@pytest.mark.parametrize(
    "options, message",
    [
        (ReplayOptions((), outputs="stale"), "--outputs must be fresh or recorded, not 'stale'"),
        (ReplayOptions((), jobs=0), "-j must be 1 or more, not 0"),
        (ReplayOptions((), timeout=-1), "--timeout must be 1 second or more, not -1"),
        (ReplayOptions((), timeout=0), "--timeout must be 1 second or more, not 0"),
        (
            ReplayOptions((), context="full", observations_only=True),
            "--context measures a replay: it cannot go with --observations-only",
        ),
        (ReplayOptions((), context="full", price_model=" , "), "--price-model: give at least one model"),
        (
            ReplayOptions((), base_commit="  "),
            "--base-commit: give a commit (its hash, or a name the repository knows)",
        ),
        (
            ReplayOptions((), observations_only=True, report=Path("r.md")),
            "--report is for replays; --observations-only writes OUT/observations-only.json (and --json)",
        ),
    ],
)
def test_bad_replay_options_say_what_is_wrong(options, message):
    assert validate_replay(options) == message


def test_a_bad_context_policy_is_named():
    problem = validate_replay(ReplayOptions((), context="full,window:0"))
    assert problem is not None and problem.startswith("--context: ")


def test_replay_prints_what_validate_says(tmp_path):
    t = tmp_path / "t.traj.json"
    t.write_text("{}")
    problem = validate_replay(ReplayOptions((t,), jobs=0))
    assert cli_error("replay", str(t), "-j", "0") == f"error: {problem}"


def test_swebench_options():
    assert validate_swebench(SwebenchOptions(out=Path("out"))) is None
    assert validate_swebench(SwebenchOptions(out=None)) == (
        "-o OUT is required: where the arms' predictions, trajectories and ledgers go"
    )
    assert validate_swebench(SwebenchOptions(out=Path("out"), workers=0)) == "-j/--workers must be 1 or more, not 0"
    assert validate_swebench(SwebenchOptions(out=Path("out"), arms=" , ")).startswith("no arm given; arms: ")
    assert "did you mean 'ledger'?" in validate_swebench(SwebenchOptions(out=Path("out"), arms="ledgr"))


def test_swebench_prints_what_validate_says(tmp_path):
    problem = validate_swebench(SwebenchOptions(out=tmp_path / "out", arms="nope"))
    assert cli_error("swebench", "-o", str(tmp_path / "out"), "--arms", "nope") == f"error: {problem}"
    assert not (tmp_path / "out").exists()


def test_tau2_gate_options():
    assert validate_tau2(Tau2GateOptions(domain="airline")) is None
    assert validate_tau2(Tau2GateOptions(domain="retail")) is None
    assert validate_tau2(Tau2GateOptions(domain="mars")) == "--domain must be airline or retail, not 'mars'"


def test_tau2_gate_prints_what_validate_says():
    problem = validate_tau2(Tau2GateOptions(domain="mars"))
    assert cli_error("tau2-gate", "--domain", "mars") == f"error: {problem}"


def test_options_are_values():
    o = ReplayOptions((Path("a"),))
    with pytest.raises(AttributeError):
        o.jobs = 2  # type: ignore[misc]
    assert o == ReplayOptions((Path("a"),)) and o.contexts == () and o.price_models == ("gpt-5-mini",)


def test_a_replay_report_is_dirty_when_the_runtime_has_uncommitted_changes():
    """The report's provenance names the commit, and whether the code that decides its figures had
    changes git does not hold: the runtime's included, not only the harness's own folder."""
    import ledger_runtime
    from ledger_harness.replay.cli import provenance
    from ledger_runtime.config import LedgerConfig

    probe = Path(ledger_runtime.__file__).parent / "_uncommitted_probe.txt"
    if provenance(LedgerConfig())["dirty"] is None:
        pytest.skip("the runtime is not in a git checkout here: provenance cannot say whether it is dirty")
    probe.write_text("an uncommitted change\n")
    try:
        assert provenance(LedgerConfig())["dirty"] is True
    finally:
        probe.unlink()
