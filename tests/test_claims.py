"""The ledger's own sentences are checked against its records before the model reads them
(decide/claims.py): a NUDGE's reason, a reference's "though files changed since", each line of the
state view, each stub of a context policy. The runs are real; a claim the records do not bear out is
made by hand (the code that writes the sentences is right, so the check must be shown to catch one
that is not), and must be caught: not sent, and a fault says why."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_runtime.config import LedgerConfig
from ledger_runtime.decide.claims import changed_since, entry_fails, verdict_fails
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.held.context import KEEP, STUB, HistoryOutput, Line, Stub, Treatment, checked
from ledger_runtime.inform import checked as checked_view
from ledger_runtime.inform import view_entries
from ledger_runtime.records import Verdict, VerdictKind
from ledger_runtime.runtime import LedgerRuntime

EX = LocalExecutor(timeout=30)
FAIL = "python3 -c 'import sys; sys.exit(3)'"


@pytest.fixture
def rt(tmp_path: Path):
    root = make_repo(tmp_path / "proj", {"a.py": "".join(f"a{i} = {i}\n" for i in range(20)), "b.py": "b = 1\n"})
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig(), task="t") as runtime:
        yield runtime


def test_a_nudge_says_only_what_the_records_say(rt):
    rt.run(FAIL, EX)
    second = rt.run(FAIL, EX)
    v = second.verdict
    assert (
        v.kind is VerdictKind.NUDGE and verdict_fails(v, rt.state, rt.state.attempts[0].normalized, rt.workdir) is None
    )
    helper = verdict_fails(v, rt.state, rt.state.attempts[0].normalized, rt.workdir, "helper")
    assert helper is not None and "for the agent that runs it" in helper, "a subagent never failed at step 1"
    rt.run("echo more >> b.py", EX)  # a file changes: "no file ... changed since step 2" no longer holds
    a = rt.state.attempts[0]
    assert "b.py changed at step 3" in verdict_fails(v, rt.state, a.normalized, a.cwd)
    lying = replace(v, evidence={"repeat-failure": {"failed_at": [2], "exit_code": 9}})
    assert "not 9" in verdict_fails(lying, rt.state, a.normalized, a.cwd)
    stale = Verdict(
        VerdictKind.NUDGE,
        "x",
        rule="stale-edit",
        evidence={"stale-edit": {"path": "a.py", "read_at": 1, "changed_at": 2}},
    )
    assert "was not read at step 1" in verdict_fails(stale, rt.state, a.normalized, a.cwd)


def test_a_stale_edit_names_a_read_only_of_the_agent_that_edits(rt):
    """A subagent's read of a file showed it to the subagent: "after its last read on record, at step 1" said to the
    main model of a subagent's read at step 1 is false (before, any read at that step bore it out)."""
    plan = rt.propose("cat a.py", agent="helper")
    rt.record(plan, EX("cat a.py", str(rt.workdir)), 0.1)
    rt.run("python3 -c \"open('a.py', 'a').write('z = 1\\n')\"", EX)
    path = str(Path(rt.workdir) / "a.py")
    stale = Verdict(
        VerdictKind.NUDGE,
        "x",
        rule="stale-edit",
        evidence={"stale-edit": {"path": path, "read_at": 1, "changed_at": 2}},
    )
    a = rt.state.attempts[0]
    assert verdict_fails(stale, rt.state, a.normalized, a.cwd, "helper") is None
    why = verdict_fails(stale, rt.state, a.normalized, a.cwd)
    assert why is not None and "by the agent that edits it" in why, why


def test_a_seen_line_names_only_the_main_models_reads(rt):
    """A subagent's read showed the file to the subagent: "a.py: whole file (step 2)" of its read is false."""
    rt.run("sed -n 1,3p a.py", EX)
    plan = rt.propose("cat a.py", agent="helper")
    rt.record(plan, EX("cat a.py", str(rt.workdir)), 0.1)
    path = str(Path(rt.workdir) / "a.py")
    assert entry_fails(("seen", path, (1,), None), rt.state) is None
    assert "the model did not read it at step 2" in entry_fails(("seen", path, (1, 2), None), rt.state)


def test_a_verdict_whose_reason_does_not_hold_is_not_given(rt):
    """A rule that says something false of the run (here repeat-failure, made to name a step where the
    command did not fail) gives no verdict: the command runs with no note, and a fault says why."""
    from ledger_runtime.decide.policies import repeat_failure

    def lying(proposal, state, current, rule):
        found = repeat_failure(proposal, state, current, rule)
        return found and replace(found, evidence={"failed_at": [1], "exit_code": 0})

    rt.rules = [replace(r, check=lying) if r.name == "repeat-failure" else r for r in rt.rules]
    rt.run(FAIL, EX)
    second = rt.run(FAIL, EX)
    assert "repeat-failure" not in second.output
    log = (Path(rt.run_dir) / "faults.log").read_text()
    assert "checking the reason of repeat-failure's NUDGE" in log and "exited 3, not 0" in log


def test_though_files_changed_since_is_said_only_where_they_did(rt):
    first = rt.run("cat a.py", EX)
    assert changed_since(rt.state, first.attempt_id) is not None, "nothing changed after it yet"
    rt.run("echo x >> b.py", EX)
    assert changed_since(rt.state, first.attempt_id) is None
    again = rt.run("cat a.py", EX)
    assert again.output.startswith("[ledger: same as step 1's output") and "though files changed since" in again.output


def test_a_line_of_the_view_the_records_do_not_bear_out_is_left_out(rt):
    rt.run("cat a.py", EX)
    rt.run("sed -i 's/a1 = 1$/a1 = 10/' a.py", EX)
    entries = view_entries(rt.state, rt.config.view)
    assert all(entry_fails(e.claim, rt.state) is None for e in entries), [e.text for e in entries]
    changed = next(e for e in entries if e.key[0] == "changed")
    lie = replace(changed, claim=("changed", changed.claim[1], "created", changed.claim[3], changed.claim[4]))
    seen = next(e for e in entries if e.key[0] == "seen")
    fresh_lie = replace(seen, claim=("seen", seen.claim[1], (1,), None))
    kept, refused = checked_view([lie, fresh_lie, *entries], rt.state)
    assert lie not in kept and fresh_lie not in kept and len(refused) == 2
    assert "was there at the start" in refused[0] and "no longer holds" in refused[1]


def test_a_stub_whose_reason_is_false_is_sent_whole():
    lines = tuple(Line(f"real line {i}\n") for i in range(46))
    said = HistoryOutput(0, 1, "step 1", "cat x", "k", True, lines)
    latest = HistoryOutput(1, 2, "step 2", "echo", None, False, (Line("ok\n"),))
    blank = Treatment(STUB, Stub())  # "nothing but blank lines"
    sent, refused = checked([said, latest], [blank, Treatment(KEEP)], lambda line: True)
    assert sent[0].kind == KEEP and "nothing but blank lines" in refused[0]
    shown = HistoryOutput(1, 2, "step 2", "cat x", "k2", False, lines)  # every line shown again after it
    true_stub = Treatment(STUB, Stub(later=True))
    sent, refused = checked([said, shown], [true_stub, Treatment(KEEP)], lambda line: True)
    assert sent[0] == true_stub and not refused
    sent, refused = checked([said, shown], [blank, Treatment(KEEP)], lambda line: True)
    assert sent[0].kind == KEEP, "'nothing but blank lines' of lines shown again later is false too"


def test_the_steps_a_file_s_reads_still_hold_are_worked_out_as_afresh_however_the_file_went(tmp_path: Path):
    """The view's line of a file and its check ("X: lines ... (steps ...)") keep what they found of the file's
    reads and, at a change, look again at each content the reads saw rather than at each read: over random reads,
    edits, reverts to an earlier content and reads through a link swung between two files, what they find after
    every command is what a look at every read finds, and the line is the one made from every read."""
    import random

    from ledger_runtime import inform
    from ledger_runtime.decide import claims

    rng = random.Random(42)
    root = make_repo(tmp_path / "proj", {"a.py": "v = 0\n", "b.py": "w = 0\n"})
    commands = [
        "cat a.py",
        "cat b.py",
        "cat link.py",
        "echo 'v = 1' > a.py",
        "echo 'v = 2' > a.py",
        "echo 'v = 0' > a.py",  # back to what the first reads saw
        "echo 'w = 1' > b.py",
        "git checkout -q -- b.py",
        "ln -sfn a.py link.py",
        "ln -sfn b.py link.py",
    ]
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig(), task="t") as runtime:
        for _ in range(60):
            runtime.inform()
            runtime.run(rng.choice(commands), EX)
            runtime.view()  # the check, with what it kept since the last
            state = runtime.state
            for path in list(state._obs_by_path):
                obs = state.observations_of(path)
                afresh = frozenset(o.step for o in obs if claims._fresh(state, o))
                assert claims._fresh_steps(state, path, obs) == afresh, (path, [o.step for o in obs])
                kept = state.view_memo["seen"][path]  # the view's line, kept and taken in a read at a time
                assert kept.entry == inform._Seen.of(state, path).entry, path  # as made from every read
        memo = state.view_memo["claims.fresh"]
        a = next(p for p in memo if p.endswith("a.py"))
        reads = len(state.observations_of(a))
        assert len(memo[a].seen) <= 4 < reads  # a look per content it had (four), not per read
