"""decide/verdict.py: the final verdict of a command, one pure function of what is known of it."""

from ledger_runtime.decide.verdict import FAULT_REASON, Facts, final
from ledger_runtime.records import RUN, Verdict, VerdictKind

NUDGE = Verdict(VerdictKind.NUDGE, "nothing has changed", ref_attempt=1, ref_step=1)
REVISE = Verdict(VerdictKind.REVISE, "read it first", rule="blind-edit", evidence={"path": "a.py"})
NOOP = Verdict(VerdictKind.NUDGE, "the edit changed nothing", rule="noop-edit", evidence={})


def test_nothing_known_runs():
    assert final(Facts()) == RUN


def test_the_rules_compose_with_govern():
    assert final(Facts(NUDGE)) == NUDGE
    got = final(Facts(NUDGE, (REVISE,)))
    assert got.kind is VerdictKind.REVISE and got.evidence == {"blind-edit": {"path": "a.py"}}


def test_a_fault_runs_it_instead():
    assert final(Facts(NUDGE, (REVISE,), fault=True)) == Verdict(VerdictKind.RUN, FAULT_REASON)


def test_the_user_lets_a_refused_command_run():
    got = final(Facts(RUN, (REVISE,), user_let_run=True))
    assert got == Verdict(VerdictKind.RUN, "the user let it run over blind-edit: read it first")


def test_after_run_findings_join_a_nudge_or_replace_a_run():
    assert final(Facts(after=(NOOP,))) == NOOP
    joined = final(Facts(NUDGE, after=(NOOP,)))
    assert joined.kind is VerdictKind.NUDGE
    assert joined.reason == "nothing has changed; noop-edit: the edit changed nothing"
