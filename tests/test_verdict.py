"""decide/verdict.py: the final verdict of a command, one pure function of what is known of it."""

import pytest
from conftest import make_repo

from ledger_runtime.config import LedgerConfig
from ledger_runtime.decide.verdict import FAULT_REASON, VerdictFacts, final
from ledger_runtime.records import RUN, Verdict, VerdictKind
from ledger_runtime.runtime import LedgerRuntime

NUDGE = Verdict(VerdictKind.NUDGE, "nothing has changed", ref_attempt=1, ref_step=1)
REVISE = Verdict(VerdictKind.REVISE, "read it first", rule="blind-edit", evidence={"path": "a.py"})
NOOP = Verdict(VerdictKind.NUDGE, "the edit changed nothing", rule="noop-edit", evidence={})


def test_nothing_known_runs():
    assert final(VerdictFacts()) == RUN


def test_the_rules_compose_with_govern():
    assert final(VerdictFacts(NUDGE)) == NUDGE
    got = final(VerdictFacts(NUDGE, (REVISE,)))
    assert got.kind is VerdictKind.REVISE and got.evidence == {"blind-edit": {"path": "a.py"}}


def test_a_fault_runs_it_instead():
    assert final(VerdictFacts(NUDGE, (REVISE,), fault=True)) == Verdict(VerdictKind.RUN, FAULT_REASON)


def test_the_user_lets_a_refused_command_run():
    got = final(VerdictFacts(RUN, (REVISE,), user_let_run=True))
    assert got == Verdict(VerdictKind.RUN, "the user let it run over blind-edit: read it first")


def test_after_run_findings_join_a_nudge_or_replace_a_run():
    assert final(VerdictFacts(after=(NOOP,))) == NOOP
    joined = final(VerdictFacts(NUDGE, after=(NOOP,)))
    assert joined.kind is VerdictKind.NUDGE
    assert joined.reason == "nothing has changed; noop-edit: the edit changed nothing"


def test_a_plans_verdict_is_never_older_than_its_facts(tmp_path):
    """An adapter cannot overwrite a plan's verdict (the after-run verdict, decided again from the
    facts, would drop it and the model would be told a command that ran was not run); facts set in
    any way decide the verdict again."""
    root = make_repo(tmp_path / "w", {"a.txt": "x\n"})
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:
        plan = rt.propose("cat a.txt", cwd=str(root))
        assert plan.verdict == RUN
        with pytest.raises(AttributeError, match="let_run"):
            plan.verdict = NUDGE
        plan.facts = VerdictFacts(NUDGE, (REVISE,))
        assert plan.verdict.kind is VerdictKind.REVISE and plan.verdict_after(()) == plan.verdict
        plan.let_run()
        assert plan.verdict == Verdict(VerdictKind.RUN, "the user let it run over blind-edit: read it first")
        plan.ran_instead()
        assert plan.verdict == Verdict(VerdictKind.RUN, FAULT_REASON)
