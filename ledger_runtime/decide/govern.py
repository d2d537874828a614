"""govern: one pure function from (proposal, ledger state, current signatures, config) to a Verdict,
decided before a command runs.

Every command runs: what the model gets back is decided after it ran, by comparing its fresh output
with what the model already holds (answers.py; DESIGN.md, "Validity"). So before a command runs,
govern only

- NUDGEs a repeat of a test or script run, or of a failing command that is not a plain read, when
  nothing has changed since (the note goes with the fresh output);
- with ``reuse_runs``, REUSEs a repeat of an allow-listed test run (commands.Analysis.exact_run:
  test runners and options whose output depends on the workspace alone) when no file and nothing
  in the environment changed since, and that run changed no file itself: the one case where a
  command the model asked for does not run.

``Current`` carries the signatures and file states the policies read (policies.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_runtime.analysis.commands import Analysis
from ledger_runtime.decide.current import Current
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.records import Attempt, CommandClass, ReuseForm, Verdict, VerdictKind

if TYPE_CHECKING:
    from ledger_runtime.config import LedgerConfig

_READERS = (CommandClass.INSPECT, CommandClass.SEARCH)
REFERENCE_MIN_CHARS = 200  # below this, a reference to an earlier output costs more than the output


def _candidate(proposal: Analysis, state: LedgerState) -> Attempt | None:
    """The newest earlier execution of the same command in the same directory, if any."""
    for a in state.repeats_of(proposal.normalized, proposal.cwd):
        src = state.attempt(state.source_of(a.id))
        if src is not None and src.executed:
            return src
    return None


def reusable_run(a: Attempt) -> bool:
    """Whether an earlier run may stand in for a repeat of it (reuse_runs)."""
    return (
        a.executed
        and a.command_class is CommandClass.RUN
        and a.output_complete
        and not a.submits
        and a.exception is None
        and a.epoch_before == a.epoch_after
        and a.exit_code is not None
    )


def govern(proposal: Analysis, state: LedgerState, current: Current, config: LedgerConfig) -> Verdict:
    """The verdict for ``proposal``; see the module docstring for the rules. Decided whether or not
    govern is on (``config.applies`` says whether it takes effect): runs are measured alike."""
    if proposal.submits:
        return Verdict(VerdictKind.RUN)
    cls = proposal.command_class
    if cls in (CommandClass.MODIFY, CommandClass.ENV) or (cls in _READERS and proposal.pure):
        return Verdict(VerdictKind.RUN)
    cand = _candidate(proposal, state)
    if cand is None or cand.env_epoch != state.env_epoch or cand.epoch_after != state.epoch or cand.exception:
        return Verdict(VerdictKind.RUN)
    if config.reuse_runs and proposal.exact_run and reusable_run(cand):
        return _reuse(cand, state, config, "same test run, and no file has changed since")
    if config.nudge_repeats and (cls is CommandClass.RUN or cand.exit_code not in (0, None)):
        how = "failed" if cand.exit_code not in (0, None) else "ran"
        return Verdict(
            VerdictKind.NUDGE,
            f"nothing has changed since step {cand.step}, where this same command {how} (exit {cand.exit_code})",
            ref_attempt=cand.id,
            ref_step=cand.step,
        )
    return Verdict(VerdictKind.RUN)


def same_output(ref: Attempt | None) -> Verdict:
    """The verdict of a command that ran and printed exactly an earlier output the model still holds
    (answered with a reference to it): a REUSE of that output, by reference."""
    return Verdict(
        VerdictKind.REUSE,
        "its output is identical to an earlier output the model holds",
        ref_attempt=ref.id if ref else None,
        ref_step=ref.step if ref else None,
        form=ReuseForm.REFERENCE,
    )


def _reuse(cand: Attempt, state: LedgerState, config: LedgerConfig, reason: str) -> Verdict:
    form = ReuseForm.FULL
    if (
        config.reuse_output is ReuseForm.REFERENCE
        and not cand.truncated
        and cand.output_chars >= REFERENCE_MIN_CHARS
        and state.in_context(cand.step, config.context_steps)
    ):
        form = ReuseForm.REFERENCE
    return Verdict(VerdictKind.REUSE, reason, ref_attempt=cand.id, ref_step=cand.step, form=form)
