"""The respond stage: what the model gets for a command, a refusal saying why or the fresh output, deduped."""

from __future__ import annotations

from typing import Callable

from ledger_runtime.analysis.commands import Analysis
from ledger_runtime.analysis.submission import Submission
from ledger_runtime.answers.build import (
    AS_PRINTED,
    NOTE,
    Answer,
    AnswerKind,
    Dedupe,
    Piece,
    build,
    raw,
)
from ledger_runtime.answers.held_output import HeldOutput
from ledger_runtime.answers.lookalike import mistakable
from ledger_runtime.executor import ExecResult
from ledger_runtime.held.delivered import HeldPool
from ledger_runtime.ledger.observe import Truncation
from ledger_runtime.records import AnswerRecord, CommandClass, Verdict, VerdictKind, command_key
from ledger_runtime.step.plan import Plan, RunResult


def not_run_answer(v: Verdict, *, refused: str | None = None) -> tuple[Answer, int]:
    """What the agent gets instead of running a refused command, and the return code to report.

    ``refused`` replaces "The command was not run...". REUSE is only read from older ledgers: no earlier output replaces
    a run."""
    by = f" by policy {v.rule}" if v.rule else ""
    tail = refused or "The command was not run" + (
        " (it is refused outright)." if v.kind is VerdictKind.BLOCK else "; this turn is still yours."
    )
    text = f"[ledger] {v.kind.value}{by}: {v.reason}.\n{tail}"
    return Answer(AnswerKind.REFUSED, text, (Piece(NOTE, 0, len(text)),)), 1


def fresh_answer(
    plan: Plan,
    verdict: Verdict,
    output: str,
    lines: Callable[[], list[str]],
    trunc: Truncation,
    *,
    submission: Submission,
    refers: bool,
    pool: HeldPool,
    dedupe: Dedupe,
    epoch: int,
    changed_since: Callable[[int], bool] = lambda attempt: True,
) -> tuple[Answer, list[str]]:
    """The answer to a command that ran, before its check, and the notes it carries.

    It is deduped against ``pool`` unless a submission, a raw read, an output the agent showed as it is, or one too long
    to refer into. ``changed_since`` says whether the records bear out that files changed after an attempt."""
    a = plan.analysis
    notes = [f"[ledger] NUDGE: {verdict.reason}."] if verdict.kind is VerdictKind.NUDGE else []
    if submission.in_output(output):
        return raw(output), notes  # the agent reads the marker off its first line and ends: nothing may move it
    if a.submits:  # names the marker, but its output is no submission: the model reads it, guarded as any
        return raw(output, [*notes, AS_PRINTED] if mistakable(output) else notes), notes
    if (plan.shown_raw and plan.applied) or not plan.held:
        # shown raw: what the agent got, recorded as it was (shadow mode: what it would have got); another model's
        # output (a subagent's) is never referred into, and its NUDGE, of its own runs, goes with it
        return raw(output, [] if plan.shown_raw and plan.applied else notes), notes
    if not refers:  # the model sees its head and tail
        if mistakable(seen_of(output, trunc)):
            return raw(output, [*notes, AS_PRINTED]), notes
        return raw(output, notes), notes
    if mistakable(output):  # text a reader could take for ours: shown as printed, and said so
        return raw(output, [*notes, AS_PRINTED]), notes
    if a.raw:
        return raw(output, notes), notes

    def same_note(src: HeldOutput) -> str:
        shown = pool.delivered.items.get(src.attempt)
        if shown is not None and shown.epoch_after != epoch and changed_since(src.attempt):
            return ", though files changed since"
        return ""

    answer = build(
        output,
        pool,
        dedupe,
        base_keys=read_keys_of(a),
        notes=notes,
        same_note=same_note,
        cut=trunc,
        lines=lines(),
    )
    return answer, notes


def as_stored(answer: Answer, stored: str, output: str, limit: int) -> Answer:
    """The answer as the ledger stores it: an output longer than ``limit`` is stored cut, with the answer's notes."""
    if len(output) <= limit:
        return answer
    return raw(stored, [answer.text[p.start : p.end] for p in answer.pieces if p.kind == NOTE])


def answer_record(
    answer: Answer,
    kept: tuple[int, int] | None,
    exact: bool,
    first_held_step: int,
    keys: tuple[str, ...] = (),
    altered: bool = False,
    held: bool = True,
    agent: str = "",
) -> AnswerRecord:
    """An answer as the ledger keeps it: its pieces and what its check needs."""
    return AnswerRecord(
        kind=answer.kind.value,
        pieces=tuple(tuple(p.to_list()) for p in answer.pieces),
        kept=kept or None,
        exact=exact,
        first_held_step=first_held_step,
        base_keys=tuple(keys),
        altered=altered,
        held=held,
        agent=agent,
    )


def run_result(plan: Plan, res: ExecResult, verdict: Verdict, attempt_id: int, answer: Answer) -> RunResult:
    """What the agent gets back for a command that ran: the answer where the verdict takes effect, else the output."""
    note = next(
        (t for p in answer.pieces if p.kind == NOTE and (t := answer.text[p.start : p.end].strip()) != AS_PRINTED),
        None,
    )
    return RunResult(
        answer.text if plan.applied else res.output,
        res.returncode,
        verdict,
        True,
        attempt_id,
        res.exception_info,
        res.extra,
        note if plan.applied else None,
        answer.kind.value if plan.applied else AnswerKind.RAW.value,
    )


def seen_of(output: str, trunc: Truncation) -> str:
    """What the model may read of an output answered as it is: its head and tail where the agent cuts it exactly.

    A line between them keeps anything from reading across the cut."""
    kept = trunc.kept(output) if trunc.exact else None
    if kept is None:
        return output
    head, tail = kept
    return output[:head] + "\n" + (output[len(output) - tail :] if tail else "")


def read_keys_of(a: Analysis) -> tuple[str, ...]:
    """Keys under which a read's output is the base of a later re-read: the same command, or the same file lines."""
    if a.command_class not in (CommandClass.INSPECT, CommandClass.SEARCH):
        return ()
    keys = [command_key(a.cwd, a.normalized)]
    if a.outputs == 1 and len(a.views) == 1 and a.views[0].kind == "lines":
        v = a.views[0]
        keys.append(f"v:{v.path}\0{v.selectors!r}\0{v.numbered}")
    return tuple(keys)
