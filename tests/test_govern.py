"""govern as the pure function it is: verdicts from hand-built ledger states and signatures."""

from __future__ import annotations

from ledger_runtime.commands import analyze
from ledger_runtime.config import LedgerConfig
from ledger_runtime.govern import Current, govern, needed_keys
from ledger_runtime.hashing import FileState
from ledger_runtime.records import Attempt, LineSpan, Observation, ReuseForm, Verdict, VerdictKind
from ledger_runtime.state import LedgerState

W = "/w"
CFG = LedgerConfig()


def attempt(i: int, cmd: str, *, step: int | None = None, read_set=None, exit_code=0, chars=500, **kw) -> Attempt:
    an = analyze(cmd, W)
    base = dict(id=i, step=step or i, command=cmd, normalized=an.normalized, cwd=an.cwd,
                command_class=an.command_class, verdict=Verdict(VerdictKind.RUN), executed=True, exit_code=exit_code,
                output_hash=f"out{i}", output_chars=chars, truncated=False, duration_s=0.01,
                read_set=read_set if read_set is not None else {k: "h1" for k in an.read_keys},
                pure=an.pure, submits=an.submits)
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


def test_reuse_needs_every_signature_unchanged():
    s = state_with(attempt(1, "cat a.py"))
    assert needed_keys(analyze("cat a.py", W), s, CFG) == {"f:/w/a.py"}
    v = decide("cat a.py", s, {"f:/w/a.py": "h1"})
    assert v.kind is VerdictKind.REUSE and v.ref_attempt == 1 and v.form is ReuseForm.REFERENCE
    assert decide("cat a.py", s, {"f:/w/a.py": "h2"}).kind is VerdictKind.RUN
    assert decide("cat a.py", s, {}).kind is VerdictKind.RUN, "an unknown signature is a change"


def test_no_reuse_when_anything_about_the_earlier_result_is_doubtful():
    sig = {"f:/w/a.py": "h1"}
    assert decide("cat a.py", state_with(attempt(1, "cat a.py", read_set_stable=False)), sig).kind is VerdictKind.RUN
    assert decide("cat a.py", state_with(attempt(1, "cat a.py", output_complete=False)), sig).kind is VerdictKind.RUN
    assert decide("cat a.py", state_with(attempt(1, "cat a.py", exception="Timeout")), sig).kind is VerdictKind.RUN
    assert decide("cat a.py", state_with(attempt(1, "cat a.py"), env_epoch=1), sig).kind is VerdictKind.RUN
    assert decide("cat a.py", state_with(attempt(1, "cat a.py")), sig, cfg=CFG.with_(govern=False)).kind \
        is VerdictKind.RUN


def test_reuse_form():
    sig = {"f:/w/a.py": "h1"}
    assert decide("cat a.py", state_with(attempt(1, "cat a.py", truncated=True)), sig).form is ReuseForm.FULL
    assert decide("cat a.py", state_with(attempt(1, "cat a.py", chars=20)), sig).form is ReuseForm.FULL
    assert decide("cat a.py", state_with(attempt(1, "cat a.py")), sig, cfg=CFG.with_(reuse_output="full")).form \
        is ReuseForm.FULL
    old = state_with(attempt(1, "cat a.py"), *[attempt(i, "true") for i in range(2, 12)])
    assert decide("cat a.py", old, sig, cfg=CFG.with_(context_steps=5)).form is ReuseForm.FULL, \
        "the model no longer has step 1's output"


def test_cd_that_failed_is_never_reused():
    a = attempt(1, "cd sub && cat a.py", read_set={"x:/w/sub": "missing", "f:/w/sub/a.py": "missing"})
    assert decide("cd sub && cat a.py", state_with(a), {"x:/w/sub": "missing", "f:/w/sub/a.py": "missing"}).kind \
        is VerdictKind.RUN


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


def test_other_commands_are_nudged_only_when_they_failed():
    assert decide("frob x", state_with(attempt(1, "frob x", exit_code=2))).kind is VerdictKind.NUDGE
    assert decide("frob x", state_with(attempt(1, "frob x", exit_code=0))).kind is VerdictKind.RUN


def obs(step: int, spans, digest="d1", total=100) -> Observation:
    return Observation("/w/a.py", "range" if spans else "whole", spans, digest, total, step, step)


def test_subsumed_reads_use_fresh_in_context_observations():
    f = {"/w/a.py": FileState("d1", 4000, 100)}
    sig = {"f:/w/a.py": "d1"}
    s = state_with(attempt(1, "sed -n '1,50p' a.py"), attempt(2, "sed -n '40,90p' a.py"),
                   observations=[obs(1, (LineSpan(1, 50),)), obs(2, (LineSpan(40, 90),))])
    v = decide("sed -n '10,80p' a.py", s, sig, f)
    assert v.kind is VerdictKind.REUSE and v.covered_by == (1, 2), "two observations together cover the lines"
    assert decide("sed -n '10,95p' a.py", s, sig, f).kind is VerdictKind.RUN
    assert decide("sed -n '10,80p' a.py", s, {"f:/w/a.py": "d2"}, {"/w/a.py": FileState("d2", 4000, 100)}).kind \
        is VerdictKind.RUN, "stale observations cover nothing"
    assert decide("sed -n '10,80p' a.py", s, sig, f, CFG.with_(reuse_output="full")).kind is VerdictKind.NUDGE
    whole = state_with(attempt(1, "cat a.py"), observations=[obs(1, None)])
    assert decide("tail -n 3 a.py", whole, sig, f).kind is VerdictKind.NUDGE, "a tiny read: run it, with a note"
    assert decide("nl -ba a.py | sed -n '20,70p'", whole, sig, f).kind is VerdictKind.REUSE
    assert decide("grep -n foo a.py", whole, sig, f).kind is VerdictKind.RUN, "searches are not line reads"
