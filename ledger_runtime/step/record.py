"""The record stage: what a command did and what the model got for it, as the ledger keeps it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ledger_runtime.analysis.commands import ANY_FILE, Analysis
from ledger_runtime.answers.build import masked_kept
from ledger_runtime.decide.gate import Outcome
from ledger_runtime.executor import ExecResult
from ledger_runtime.ledger.clean_outputs import CleanOutputs
from ledger_runtime.ledger.observe import FileText, Truncation
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.records import AnswerRecord, Attempt, CommandClass, Modification, Observation, Verdict
from ledger_runtime.step.plan import Plan
from ledger_runtime.workspace.scanner import Change
from ledger_runtime.workspace.signatures import PENDING

UNSIGNED = "unsigned"


@dataclass(frozen=True)
class Execution:
    """What running a command did: duration, read set signed after it and if it held still, changes, epoch after."""

    duration: float
    read_set: dict[str, str]
    stable: bool
    changes: list[Change]
    epoch_after: int

    def fields(self, verdict: Verdict, shown: str, trunc: Truncation) -> dict[str, Any]:
        """The fields every attempt that ran has; ``shown`` is what the model got, as ``trunc`` cuts it."""
        return {
            "executed": True,
            "duration": self.duration,
            "read_set": self.read_set,
            "stable": self.stable,
            "epoch_after": self.epoch_after,
            "truncated": trunc.cuts(shown),
            "shown_chars": len(shown),
            "verdict": verdict,
        }


def new_attempt(
    plan: Plan,
    attempt_id: int,
    state: LedgerState,
    *,
    executed: bool,
    exit_code: int | None,
    output_hash: str | None,
    output_chars: int,
    truncated: bool,
    duration: float,
    read_set: dict[str, str],
    stable: bool,
    epoch_after: int,
    shown_chars: int,
    verdict: Verdict,
    exception: str | None,
    output_complete: bool,
    submits: bool | None = None,
    shown_hash: str | None = None,
    answer: AnswerRecord | None = None,
) -> Attempt:
    """The attempt of the planned command; its epochs come from ``state`` before the attempt is added."""
    a = plan.analysis
    return Attempt(
        id=attempt_id,
        step=plan.step,
        command=plan.command,
        normalized=a.normalized,
        cwd=a.cwd,
        command_class=a.command_class,
        verdict=verdict,
        executed=executed,
        exit_code=exit_code,
        output_hash=output_hash,
        output_chars=output_chars,
        truncated=truncated,
        duration_s=round(duration, 6),
        read_set=read_set,
        read_set_stable=stable,
        write_set=a.writes,
        epoch_before=state.epoch,
        epoch_after=epoch_after,
        env_epoch=state.env_epoch,
        pure=a.pure,
        parsed=a.parsed,
        submits=a.submits if submits is None else submits,
        shown_chars=shown_chars,
        exception=exception,
        output_complete=output_complete,
        applied=plan.applied,
        shown_hash=shown_hash,
        answer=answer,
    )


Event = tuple[str, dict[str, Any]]  # an event as the store takes it: its kind and body


def attempt_events(
    attempt: Attempt,
    observations: Sequence[Observation] = (),
    modifications: Sequence[Modification] = (),
    epoch_after: int = 0,
    file_lines: dict[str, Any] | None = None,
) -> list[Event]:
    """The events that record an attempt, in the order the ledger folds them."""
    events: list[Event] = [("attempt", attempt.to_dict())]
    events += [("observation", o.to_dict()) for o in observations]
    events += modification_events(modifications, epoch_after)
    if file_lines is not None:
        events.append(("lines", file_lines))
    return events


def modification_events(modifications: Sequence[Modification], epoch: int) -> list[Event]:
    """The events of modifications, each with the workspace's epoch after them."""
    return [("modification", {**m.to_dict(), "epoch": epoch}) for m in modifications]


def read_set(plan: Plan, post_sigs: dict[str, str]) -> tuple[dict[str, str], bool]:
    """What a pure command read, signed after it ran, and whether none moved; pending before counts as unmoved."""
    read_keys = plan.analysis.read_keys if plan.analysis.pure else ()
    pre = plan.pre_sigs
    stable = all(pre.get(k) in (PENDING, post_sigs.get(k)) for k in read_keys if k in pre)
    return {k: post_sigs.get(k, UNSIGNED) for k in read_keys}, stable


def stored_output(output: str, limit: int, clean: CleanOutputs, mask: Callable[[str], str]) -> str:
    """An output as the ledger keeps it: masked, then cut to ``limit``, since a cut secret would escape the patterns.

    A long output like one stored as printed is masked only where it differs (clean_outputs.py)."""
    if len(output) <= limit:
        return clean.masked(output, mask)
    return masked_kept(output, limit, mask)


def file_texts(
    analysis: Analysis, output: str, lines: Callable[[], list[str]], workspace: Any, max_bytes: int
) -> dict[str, FileText]:
    """The files a command's views name, as they are now, to check its ``output`` against."""
    out = {}
    symlink = getattr(workspace, "symlink", None)  # a workspace written before it existed has none
    for v in analysis.views:
        if v.path in out:
            continue
        data = workspace.content(v.path, max_bytes)
        if data is not None:
            link = symlink(v.path) if symlink is not None else None
            out[v.path] = FileText.of(workspace.digest(data), data, (output, lines), link)
    return out


def named_state(path: str) -> tuple[int, int, int] | None:
    """What an edit may change of a path it names beyond a file's content: whether it is there, its mode, and its
    modification time while it is the same file (``sed -i`` writes a new one even when nothing matched)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_mode, st.st_ino, st.st_mtime_ns)


def _moved(before: tuple[int, int, int] | None, after: tuple[int, int, int] | None) -> bool:
    if before is None or after is None:
        return before != after
    return before[0] != after[0] or (before[1] == after[1] and before[2] != after[2])


def outcome(
    a: Analysis,
    res: ExecResult,
    changes: list[Change],
    workdir: str,
    local_files: bool,
    before: dict[str, tuple[int, int, int] | None] | None = None,
) -> Outcome:
    """What the command did, for the after-run rules.

    Which paths an edit names are files or missing is read only for an edit that changed nothing, on this machine;
    one that removed, moved, made, chmod-ed or touched a path it names (``before``: their state before it ran) did
    something no record of a file's content shows: a directory, a file git ignores, a mode, a time."""
    if changes or a.command_class is not CommandClass.MODIFY or not a.writes:
        return Outcome(res.returncode, bool(changes), workdir)
    if not local_files:
        return Outcome(res.returncode, False, workdir, tuple(a.writes))
    named = [w for w in a.writes if w != ANY_FILE]
    if before is not None and any(_moved(before.get(w), named_state(w)) for w in named):
        return Outcome(res.returncode, True, workdir)
    return Outcome(
        res.returncode,
        False,
        workdir,
        tuple(w for w in named if not os.path.isdir(w)),
        tuple(w for w in named if not os.path.lexists(w)),
    )
