"""The final verdict of one command, and the only place that builds or replaces a verdict after govern and the rules.

What is known grows during the step (before the run, after a ledger fault or the user's leave, after the run); the
verdict is ``final`` of all of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger_runtime.decide.gate import after_run, compose
from ledger_runtime.records import RUN, Verdict, VerdictKind

FAULT_REASON = "ledger fault: ran instead"


@dataclass(frozen=True)
class VerdictFacts:
    """What one command's verdict is decided from; the defaults hold of a command the ledger could not plan."""

    governed: Verdict = RUN  # govern's verdict (decide/govern.py)
    gated: tuple[Verdict, ...] = ()  # the policy rules' verdicts before it ran (gate.check_all)
    fault: bool = False  # the ledger failed to answer without running it: it runs instead
    user_let_run: bool = False  # the user was asked about a refused command and let it run
    after: tuple[Verdict, ...] = ()  # the after-run rules' verdicts (gate.check_after), once it ran


def final(facts: VerdictFacts) -> Verdict:
    """The verdict of a command, from ``facts``, by these rules in order:

    1. govern's verdict composed with the rules' (gate.compose);
    2. a ledger fault while answering without running: RUN, as if there were no ledger, saying so;
    3. the user let a refused command run: RUN, naming the rule and reason it ran over;
    4. once it ran, the after-run rules' findings joined to it (gate.after_run).
    """
    verdict = compose(facts.governed, list(facts.gated))
    if facts.fault:
        verdict = Verdict(VerdictKind.RUN, FAULT_REASON)
    elif facts.user_let_run:
        verdict = Verdict(VerdictKind.RUN, f"the user let it run over {verdict.rule}: {verdict.reason}")
    return after_run(verdict, list(facts.after))
