"""govern: the verdict on a command before it runs, a pure function of the proposal, the ledger state and the workspace.

Every command runs; what the model gets back is decided after, from the fresh output and what it holds. govern only
NUDGEs a repeat of a test or script run, or of a failing command that is not a plain read, when no tracked file or
environment changed since; the note says no more, as a run also reads what the ledger does not track. Skipping a command
because an earlier run stands for it would predict its output, and what a run reads has no end; only the policies refuse
commands.
"""

from __future__ import annotations

from ledger_runtime.analysis.commands import Analysis
from ledger_runtime.decide.claims import UNCHANGED_SINCE
from ledger_runtime.decide.workspace_now import WorkspaceNow
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.records import Attempt, CommandClass, Verdict, VerdictKind

_READERS = (CommandClass.INSPECT, CommandClass.SEARCH)


def _candidate(proposal: Analysis, state: LedgerState) -> Attempt | None:
    """The newest earlier execution of the same command in the same directory by the same agent, if any."""
    for a in state.repeats_of(proposal.normalized, proposal.cwd, proposal.agent):
        src = state.attempt(state.source_of(a.id))
        if src is not None and src.executed:
            return src
    return None


def govern(proposal: Analysis, state: LedgerState, current: WorkspaceNow, nudge_repeats: bool = True) -> Verdict:
    """The verdict for ``proposal``, decided whether or not govern is on, so that runs are measured alike."""
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
