"""govern as the pure function it is: verdicts from hand-built ledger states and signatures."""

from __future__ import annotations

from ledger_runtime.analysis.commands import analyze
from ledger_runtime.config import LedgerConfig
from ledger_runtime.decide.govern import Current, govern
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.records import Attempt, Observation, ReuseForm, Verdict, VerdictKind
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
    for a in attempts:
        s.add_attempt(a)
    for o in observations:
        s.add_observation(o)
    s.epoch, s.env_epoch = epoch, env_epoch
    return s


def decide(cmd: str, state: LedgerState, sigs=None, files=None, cfg=CFG) -> Verdict:
    return govern(analyze(cmd, W), state, Current(sigs or {}, files or {}), cfg)


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
    assert decide(run, s, cfg=CFG.with_(reuse_runs=True)).kind is VerdictKind.REUSE
    writer = state_with(attempt(1, run, epoch_before=0, epoch_after=1), epoch=1)
    assert decide(run, writer, cfg=CFG.with_(reuse_runs=True)).kind is VerdictKind.NUDGE
    assert (
        decide(run, state_with(attempt(1, run, exit_code=1), env_epoch=1), cfg=CFG.with_(reuse_runs=True)).kind
        is VerdictKind.RUN
    ), "a package installed since: the run must run"


def test_reuse_runs_only_for_the_allow_list():
    """Under reuse_runs a run is skipped only when the analysis models it exactly: a known test runner
    with known options. Anything else (a script, a random order, the last-failed cache, timings,
    parallel workers) runs, with a note at most."""
    cfg = CFG.with_(reuse_runs=True)
    allowed = [
        "python -m pytest t.py -x -q",
        "pytest -k 'foo and not bar' tests/",
        "python3 -m unittest -v test_x",
        "cd sub && pytest t.py",
        "timeout 60 pytest --tb=short t.py 2>&1 | tail -n 20",
    ]
    refused = [
        "python t.py",
        "pytest -p randomly t.py",
        "pytest --lf",
        "pytest -n 4 t.py",
        "time pytest t.py",
        "pytest --durations=5 t.py",
        "PYTHONPATH=. pytest t.py",
        "pytest t.py > out.txt",
        "bin/test",
        "pytest t.py; echo done",
        "pytest $T",
        "pytest t*.py",
    ]
    for run in allowed + refused:
        s = state_with(attempt(1, run, exit_code=1, epoch_before=0, epoch_after=0))
        got = decide(run, s, cfg=cfg).kind
        assert (got is VerdictKind.REUSE) == (run in allowed), (run, got)


def test_reuse_form():
    run = "pytest t.py"
    cfg = CFG.with_(reuse_runs=True)
    assert decide(run, state_with(attempt(1, run)), cfg=cfg).form is ReuseForm.REFERENCE
    assert decide(run, state_with(attempt(1, run, truncated=True)), cfg=cfg).form is ReuseForm.FULL
    assert decide(run, state_with(attempt(1, run, chars=20)), cfg=cfg).form is ReuseForm.FULL
    assert decide(run, state_with(attempt(1, run)), cfg=cfg.with_(reuse_output="full")).form is ReuseForm.FULL
    old = state_with(attempt(1, run), *[attempt(i, "true") for i in range(2, 12)])
    assert decide(run, old, cfg=cfg.with_(context_steps=5)).form is ReuseForm.FULL, (
        "the model no longer has step 1's output"
    )
    compacted = state_with(attempt(1, run))
    compacted.apply({"kind": "context", "from_step": 2})
    assert decide(run, compacted, cfg=cfg).form is ReuseForm.FULL, "a compaction dropped step 1's output"


def test_no_reuse_of_a_run_when_anything_about_it_is_doubtful():
    run = "pytest t.py"
    cfg = CFG.with_(reuse_runs=True)
    for kw in ({"output_complete": False}, {"exception": "Timeout"}, {"exit_code": None}):
        got = decide(run, state_with(attempt(1, run, **kw)), cfg=cfg).kind
        assert got is not VerdictKind.REUSE, kw
    # govern off: the verdict is decided all the same (runs are measured alike); it only takes no effect
    off = cfg.with_(govern=False)
    assert decide(run, state_with(attempt(1, run)), cfg=off) == decide(run, state_with(attempt(1, run)), cfg=cfg)
    assert not off.applies


def test_other_commands_are_nudged_only_when_they_failed():
    assert decide("frob x", state_with(attempt(1, "frob x", exit_code=2))).kind is VerdictKind.NUDGE
    assert decide("frob x", state_with(attempt(1, "frob x", exit_code=0))).kind is VerdictKind.RUN


def obs(step: int, spans, digest="d1", total=100) -> Observation:
    return Observation("/w/a.py", "range" if spans else "whole", spans, digest, total, step, step)
