"""govern as the pure function it is: verdicts from hand-built ledger states and signatures."""

from __future__ import annotations

import pytest

from ledger_runtime.analysis.commands import analyze
from ledger_runtime.config import LedgerConfig
from ledger_runtime.decide.govern import WorkspaceNow, govern
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.records import Attempt, Observation, Verdict, VerdictKind
from ledger_runtime.workspace.hashing import FileState

W = "/w"
CFG = LedgerConfig()


def attempt(i: int, cmd: str, *, step: int | None = None, read_set=None, exit_code=0, chars=500, **kw) -> Attempt:
    an = analyze(cmd, W)
    base = dict(
        id=i,
        step=step or i,
        command=cmd,
        normalized=an.normalized,
        cwd=an.cwd,
        command_class=an.command_class,
        verdict=Verdict(VerdictKind.RUN),
        executed=True,
        exit_code=exit_code,
        output_hash=f"out{i}",
        output_chars=chars,
        truncated=False,
        duration_s=0.01,
        read_set=read_set if read_set is not None else {k: "h1" for k in an.read_keys},
        pure=an.pure,
        submits=an.submits,
    )
    base.update(kw)
    return Attempt(**base)


def state_with(*attempts: Attempt, observations=(), epoch=0, env_epoch=0) -> LedgerState:
    s = LedgerState()
    for a in attempts:  # as the runtime makes a state: by its events
        s.apply({**a.to_dict(), "kind": "attempt", "step": a.step})
    for o in observations:
        s.apply({**o.to_dict(), "kind": "observation", "step": o.step, "shadowed": {"kind": o.kind}})
    s.epoch, s.env_epoch = epoch, env_epoch
    return s


def decide(cmd: str, state: LedgerState, sigs=None, files=None, cfg=CFG) -> Verdict:
    return govern(analyze(cmd, W), state, WorkspaceNow(sigs or {}, files or {}), cfg.nudge_repeats)


def test_reads_always_run_whatever_the_ledger_holds():
    """A read runs: what the model gets back is decided after, from its fresh output (answers.py)."""
    s = state_with(attempt(1, "cat a.py"), observations=[obs(1, None)])
    f = {"/w/a.py": FileState("d1", 4000, 100)}
    for cmd in ("cat a.py", "sed -n '10,80p' a.py", "nl -ba a.py | sed -n '20,70p'", "cat -A a.py | sed -n '2,3p'"):
        assert decide(cmd, s, {"f:/w/a.py": "h1"}, f).kind is VerdictKind.RUN, cmd


def test_writers_env_changes_and_submissions_always_run():
    for cmd in ("sed -i 's/a/b/' a.py", "pip install x", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat a.py"):
        s = state_with(attempt(1, cmd))
        assert decide(cmd, s, {"f:/w/a.py": "h1"}).kind is VerdictKind.RUN


def test_runs_are_nudged_when_nothing_changed():
    run = "python -m pytest t.py"
    s = state_with(attempt(1, run, exit_code=1, epoch_before=0, epoch_after=0))
    v = decide(run, s)
    assert v.kind is VerdictKind.NUDGE and "failed" in v.reason and v.ref_step == 1
    assert decide(run, state_with(attempt(1, run, exit_code=1), epoch=1)).kind is VerdictKind.RUN
    assert decide(run, s, cfg=CFG.with_(nudge_repeats=False)).kind is VerdictKind.RUN
    assert decide(run, state_with(attempt(1, run, exit_code=1), env_epoch=1)).kind is VerdictKind.RUN, (
        "a package installed since: no note"
    )


def test_no_run_is_ever_skipped_for_an_earlier_one():
    """reuse_runs is gone: a repeat of a test run with nothing changed runs (with a note at most), and
    a config that asks for the option is refused with the reason; one that has it off still loads."""
    from ledger_runtime.config import ConfigError, from_mapping

    run = "python -m pytest t.py -x -q"
    s = state_with(attempt(1, run, exit_code=1, epoch_before=0, epoch_after=0))
    assert decide(run, s).kind is VerdictKind.NUDGE and decide(run, s).kind.executes
    with pytest.raises(ConfigError, match="reuse_runs was removed: a test run not run again hands back a prediction"):
        from_mapping({"reuse_runs": True})
    assert from_mapping({"reuse_runs": False, "reuse_output": "full"}) == CFG
    # govern off: the verdict is decided all the same (runs are measured alike); it only takes no effect
    off = CFG.with_(govern=False)
    assert decide(run, s, cfg=off) == decide(run, s) and not off.applies


def test_other_commands_are_nudged_only_when_they_failed():
    assert decide("frob x", state_with(attempt(1, "frob x", exit_code=2))).kind is VerdictKind.NUDGE
    assert decide("frob x", state_with(attempt(1, "frob x", exit_code=0))).kind is VerdictKind.RUN


def obs(step: int, spans, digest="d1", total=100) -> Observation:
    return Observation("/w/a.py", "range" if spans else "whole", spans, digest, total, step, step)
