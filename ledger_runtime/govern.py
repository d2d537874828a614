"""govern: one pure function from (proposal, ledger state, current hashes, config) to a Verdict.

The validity rule (DESIGN.md, "Validity") in code: an earlier result of the same command in the
same directory is still good when every read key it depended on signs the same now, the
environment has not changed since, the command is a pure reader, its read set was stable while it
ran, and its output was complete. A read whose lines a still-fresh observation already showed is a
subsumed read. Runs (tests, scripts) cannot list their reads: they depend on the whole workspace,
so a repeat with nothing changed gets a NUDGE (or a REUSE with ``reuse_runs``).

``needed_keys`` tells the caller which read keys to sign before calling ``govern``; ``Current``
carries those signatures and the line counts of files whose lines are requested.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .commands import Analysis
from .config import LedgerConfig
from .hashing import FileState
from .programs import resolve
from .records import Attempt, CommandClass, LineSpan, ReuseForm, Verdict, VerdictKind
from .state import LedgerState

_READERS = (CommandClass.INSPECT, CommandClass.SEARCH)
REFERENCE_MIN_CHARS = 200  # below this, a reference to an earlier output costs more than the output


@dataclass(frozen=True)
class Current:
    """Signatures of read keys now (``sigs``), and the state of files whose lines are requested."""

    sigs: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, FileState | None] = field(default_factory=dict)


def reusable(a: Attempt) -> bool:
    """Whether an attempt's result may ever stand in for a later run of the same command."""
    return (a.executed and a.pure and a.read_set_stable and a.parsed and not a.submits and a.output_complete
            and a.command_class in _READERS and a.exception is None
            and all(sig == "dir" for k, sig in a.read_set.items() if k.startswith("x:")))


def _candidate(proposal: Analysis, state: LedgerState) -> Attempt | None:
    """The newest earlier execution of the same command in the same directory, if any."""
    for a in state.repeats_of(proposal.normalized, proposal.cwd):
        src = state.attempt(state.source_of(a.id))
        if src is not None and src.executed:
            return src
    return None


def needed_keys(proposal: Analysis, state: LedgerState, config: LedgerConfig) -> set[str]:
    """Read keys whose current signatures ``govern`` needs for this proposal."""
    if not config.govern or proposal.submits or proposal.command_class not in _READERS or not proposal.pure:
        return set()
    keys: set[str] = set()
    cand = _candidate(proposal, state)
    if cand is not None and reusable(cand):
        keys.update(cand.read_set)
    for v in proposal.views:
        if v.kind == "lines":
            keys.add("f:" + v.path)
    return keys


def govern(proposal: Analysis, state: LedgerState, current: Current, config: LedgerConfig) -> Verdict:
    """The verdict for ``proposal``; see the module docstring for the rules."""
    if not config.govern or proposal.submits:
        return Verdict(VerdictKind.RUN)
    cls = proposal.command_class
    if cls in (CommandClass.MODIFY, CommandClass.ENV):
        return Verdict(VerdictKind.RUN)
    cand = _candidate(proposal, state)
    if cls in _READERS and proposal.pure:
        if cand is not None and reusable(cand) and cand.env_epoch == state.env_epoch:
            changed = [k for k, sig in cand.read_set.items() if current.sigs.get(k) != sig]
            if not changed:
                return _reuse(cand, state, config, "same command, and nothing it reads has changed since")
        subsumed = _subsumed(proposal, state, current, config)
        if subsumed is not None:
            return subsumed
        return Verdict(VerdictKind.RUN)
    if cand is not None and config.nudge_repeats and cand.env_epoch == state.env_epoch \
            and cand.epoch_after == state.epoch and cand.exception is None:
        if cls is CommandClass.RUN and config.reuse_runs and cand.epoch_before == cand.epoch_after \
                and cand.output_complete and not cand.submits:
            return _reuse(cand, state, config, "same run, and no file has changed since")
        if cls is CommandClass.RUN or (cand.exit_code not in (0, None)):
            how = "failed" if cand.exit_code not in (0, None) else "ran"
            return Verdict(VerdictKind.NUDGE,
                           f"nothing has changed since step {cand.step}, where this same command {how} "
                           f"(exit {cand.exit_code})",
                           ref_attempt=cand.id, ref_step=cand.step)
    return Verdict(VerdictKind.RUN)


def _reuse(cand: Attempt, state: LedgerState, config: LedgerConfig, reason: str) -> Verdict:
    form = ReuseForm.FULL
    if config.reuse_output == "reference" and not cand.truncated and cand.output_chars >= REFERENCE_MIN_CHARS \
            and state.in_context(cand.step, config.context_steps):
        form = ReuseForm.REFERENCE
    return Verdict(VerdictKind.REUSE, reason, ref_attempt=cand.id, ref_step=cand.step, form=form)


def _subsumed(proposal: Analysis, state: LedgerState, current: Current, config: LedgerConfig) -> Verdict | None:
    """A line read whose lines fresh, complete, in-context observations already showed."""
    if proposal.outputs != 1 or len(proposal.views) != 1 or proposal.views[0].kind != "lines":
        return None
    view = proposal.views[0]
    digest = current.sigs.get("f:" + view.path)
    fs = current.files.get(view.path)
    total = fs.lines if fs is not None else None
    if digest is None or fs is None or not total or digest.startswith(("missing", "error", "dir", "special")):
        return None
    wanted = resolve(view.selectors, total)
    if wanted is None:
        return None
    spans: list[LineSpan] = []
    steps: list[int] = []
    for o in state.observations_of(view.path):
        if o.content_hash != digest or not state.in_context(o.step, config.context_steps):
            continue
        got = [LineSpan(1, total)] if o.spans is None else list(o.spans)
        if got:
            spans.extend(got)
            steps.append(o.step)
    if not spans or not _covers(spans, wanted):
        return None
    lines = f"lines {wanted[0]}-{wanted[1]} were" if wanted[0] != wanted[1] else f"line {wanted[0]} was"
    steps = sorted(set(steps))
    where = ", ".join(str(s) for s in steps[-3:])
    reason = f"{lines} already shown at step{'s' if len(steps) > 1 else ''} {where} and the file has not changed since"
    estimate = fs.size * (wanted[1] - wanted[0] + 1) // total  # what the read would print, about
    if config.reuse_output == "reference" and estimate >= REFERENCE_MIN_CHARS:
        return Verdict(VerdictKind.REUSE, reason, ref_step=steps[-1], form=ReuseForm.REFERENCE, covered_by=tuple(steps),
                       estimated_chars=estimate)
    return Verdict(VerdictKind.NUDGE, reason, ref_step=steps[-1], covered_by=tuple(steps), estimated_chars=estimate)


def _covers(spans: list[LineSpan], wanted: tuple[int, int]) -> bool:
    need = wanted[0]
    for s in sorted(spans, key=lambda s: s.start):
        if s.start > need:
            return False
        need = max(need, s.end + 1)
        if need > wanted[1]:
            return True
    return need > wanted[1]
