"""The final verdict of one command: one pure function of what is known of it (``VerdictFacts``), the only
place that builds or replaces a verdict once govern and the policy rules have spoken.

What is known grows as the step goes on (before the command runs: govern's and the rules' verdicts;
then, maybe, a fault of the ledger while answering without running, or the user letting a refused
command run; after it ran: the after-run rules' findings); the verdict is ``final`` of all of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger_runtime.decide.gate import after_run, compose
from ledger_runtime.records import RUN, Verdict, VerdictKind

FAULT_REASON = "ledger fault: ran instead"


@dataclass(frozen=True)
class VerdictFacts:
    """What the verdict of one command is decided from. The defaults are what holds of a command
    the ledger could not plan (a fault before it): nothing found, it runs."""

    governed: Verdict = RUN  # govern's verdict (decide/govern.py)
    gated: tuple[Verdict, ...] = ()  # the policy rules' verdicts before it ran (gate.check_all)
    fault: bool = False  # the ledger failed to answer without running it: it runs instead
    user_let_run: bool = False  # the user was asked about a refused command and let it run
    after: tuple[Verdict, ...] = ()  # the after-run rules' verdicts (gate.check_after), once it ran


def final(facts: VerdictFacts) -> Verdict:
    """The verdict of a command, from ``facts``. The rules, in order:

    1. govern's verdict composed with the rules' (gate.compose: BLOCK, then REVISE, then NUDGE with
       every note, then govern's own);
    2. a fault of the ledger while answering without running: RUN, saying so (the command runs as
       if there were no ledger);
    3. the user let a refused command run: RUN, naming the rule and the reason it ran over;
    4. once it ran, what the after-run rules found (noop-edit) joined to it (gate.after_run: joined
       to a NUDGE, else in place of it).
    """
    verdict = compose(facts.governed, list(facts.gated))
    if facts.fault:
        verdict = Verdict(VerdictKind.RUN, FAULT_REASON)
    elif facts.user_let_run:
        verdict = Verdict(VerdictKind.RUN, f"the user let it run over {verdict.rule}: {verdict.reason}")
    return after_run(verdict, list(facts.after))
