"""govern: one pure function from (proposal, ledger state, current signatures, config) to a Verdict,
decided before a command runs.

Every command runs: what the model gets back is decided after it ran, by comparing its fresh output
with what the model already holds (answers/build.py; docs/answers.md). So before a command runs,
govern only

- NUDGEs a repeat of a test or script run, or of a failing command that is not a plain read, when
  no tracked file changed since, nor has a command changed the environment (the note
  goes with the fresh output; it says no more than that: a run also reads what the ledger does not
  track, the environment's variables, files outside the work tree, time).

No command the model asked for is skipped because an earlier run is believed to stand for it: that
would be a prediction of its output, and what a run reads has no end (docs/settings.md, the removed
``reuse_runs``). Only the policies refuse commands (REVISE, BLOCK).

``WorkspaceNow`` carries the signatures and file states the policies read (policies.py).
"""

from __future__ import annotations

from ledger_runtime.analysis.commands import Analysis
from ledger_runtime.decide.claims import UNCHANGED_SINCE
from ledger_runtime.decide.workspace_now import WorkspaceNow
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.records import Attempt, CommandClass, Verdict, VerdictKind

_READERS = (CommandClass.INSPECT, CommandClass.SEARCH)


def _candidate(proposal: Analysis, state: LedgerState) -> Attempt | None:
    """The newest earlier execution of the same command in the same directory, if any."""
    for a in state.repeats_of(proposal.normalized, proposal.cwd):
        src = state.attempt(state.source_of(a.id))
        if src is not None and src.executed:
            return src
    return None


def govern(proposal: Analysis, state: LedgerState, current: WorkspaceNow, nudge_repeats: bool = True) -> Verdict:
    """The verdict for ``proposal``; see the module docstring for the rules (``nudge_repeats``: the
    setting of that name). Decided whether or not govern is on: runs are measured alike."""
    if proposal.submits:
        return Verdict(VerdictKind.RUN)
    cls = proposal.command_class
    if cls in (CommandClass.MODIFY, CommandClass.ENV) or (cls in _READERS and proposal.pure):
        return Verdict(VerdictKind.RUN)
    cand = _candidate(proposal, state)
    if cand is None or cand.env_epoch != state.env_epoch or cand.epoch_after != state.epoch or cand.exception:
        return Verdict(VerdictKind.RUN)
    if nudge_repeats and (cls is CommandClass.RUN or cand.exit_code not in (0, None)):
        how = "failed" if cand.exit_code not in (0, None) else "ran"
        return Verdict(
            VerdictKind.NUDGE,
            f"{UNCHANGED_SINCE} step {cand.step}, where this same command {how} (exit {cand.exit_code})",
            ref_attempt=cand.id,
            ref_step=cand.step,
        )
    return Verdict(VerdictKind.RUN)
