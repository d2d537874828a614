"""What the model holds, for one run: the front of the ``held`` room (``Held``).

Which steps the model still holds (the window of recent steps, nothing before a compaction), the
outputs delivered to it and the lines it saw of each (``delivered.Delivered``: the sources of later
references), the answers that refer to outputs it may lose before them (``standing.Standing``), and
the one question an agent's history asks: ``history``, each earlier output as the model holds it, for
the context policy to say what is sent in its place. ``LedgerRuntime`` owns one and delegates to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Collection, Optional, Sequence

from ledger_runtime.analysis.display import short_command
from ledger_runtime.answers.build import (
    CUT,
    Answer,
    AnswerKind,
    ExpandError,
    Piece,
    diff_shown,
    expand_in_place,
    split_lines,
)
from ledger_runtime.answers.lookalike import mistakable
from ledger_runtime.held.context import Line, Said
from ledger_runtime.held.delivered import Delivered, delivered_lines, output_digest, shown_whole
from ledger_runtime.held.output import HeldOutput
from ledger_runtime.held.standing import Standing
from ledger_runtime.ledger.observe import FactRun, fact_lines
from ledger_runtime.records import Attempt, CommandClass

if TYPE_CHECKING:
    from ledger_runtime.runtime import LedgerRuntime

MARKER_COMMAND_CHARS = 32  # how much of a command a reference quotes
FORGET_EVERY = 64  # attempts between prunings of what the model no longer holds


class Held:
    """What the model holds in one run (see the module docstring). ``rt``: the runtime (its state,
    settings, store, redactor, truncation and workspace are read); ``now``: the step being answered
    (None: none); ``snapshot``: the last scan of the workspace; ``refers``: whether an output is short
    enough to be the source of references."""

    def __init__(
        self,
        rt: LedgerRuntime,
        now: Callable[[], Optional[int]],
        snapshot: Callable[[], object],
        refers: Callable[[str], bool],
    ):
        self.rt = rt
        self._now = now
        self._snapshot = snapshot
        self._refers = refers
        self.delivered = Delivered(self.alive)
        # per attempt the model holds: its runs of output lines that are checked file lines (see line_facts)
        self.facts: dict[int, list[FactRun]] = {}
        self.answers = Standing()  # answers that refer to other outputs, and what they stand for
        self._current: dict[str, tuple[str, list[str] | None]] = {}  # path -> (digest, lines) for still_true

    # -- which steps ------------------------------------------------------------------------------

    def alive(self, step: int) -> bool:
        """Whether the output of ``step`` is still in the model's context at the step being answered."""
        return step >= self.held_from()

    def held_from(self, now: int | None = None) -> int:
        """The first step whose outputs the model still holds, for the step being answered (``now``;
        by default the one in hand, else the next): after the last compaction, and within the last
        ``context.steps`` steps before it (0: all)."""
        state, steps = self.rt.state, self.rt.config.context.steps
        if now is None:
            now = self._now()
            now = now if now is not None else state.step + 1
        window = now - steps if steps > 0 else 0
        return max(state.context_floor, window)

    def holds(self, attempt_id: int) -> bool:
        """Whether the model still holds the output of an attempt, before its next call."""
        a = self.rt.state.attempt(attempt_id)
        return a is not None and self.holds_step(a.step)

    def holds_step(self, step: int) -> bool:
        """Whether the model still holds the outputs of ``step``, before its next call."""
        return step >= self.held_from(self.rt.state.step + 1)

    # -- answers that outlive their sources ---------------------------------------------------------

    def standing(self) -> Collection[int]:
        """The attempts whose answers refer to outputs that may leave the model before they do (an
        agent that keeps only its last steps): those ``outlived`` may answer for."""
        return self.answers.items.keys()

    def outlived(self, attempt_id: int) -> tuple[str, str] | None:
        """An answer that refers to an output the model no longer holds: (the answer as the model got
        it, what to send in its place from now on: the answer with its references replaced by what they
        stand for, its notes and the agent's cut as they were; or, when the ledger no longer has that,
        a line that says so and how to get it). None when it refers to nothing gone. Once handed out,
        the same text is handed out again: what was sent stays as it was."""
        kept = self.answers.get(attempt_id)
        if kept is None or all(self.holds(r) for r in kept.refs):
            return None
        if kept.in_place is None:
            gone = ", ".join(self.rt.state.label(r) for r in kept.refs if not self.holds(r))
            kept.in_place = (
                f"[ledger] This output referred to {gone}'s, which is no longer in your context: "
                "run the command again to see it.\n"
            )
        kept.sent = True
        self.answers.forget(lambda s: self.holds_step(s))
        return kept.answer, kept.in_place

    def held_output(self, label: str) -> tuple[int, list[str]] | None:
        """An earlier output the model holds, by the label a reference names it with (what answers
        are read back against, in memory: the command's output as it printed it, as lines)."""
        b = self.rt.state.by_label(label)
        shown = self.delivered.items.get(b.id) if b is not None else None
        return None if shown is None else (b.id, shown.lines)

    def in_place(self, answer: Answer) -> str | None:
        """The answer with its references replaced by what they stand for (None: it does not expand)."""
        try:
            return expand_in_place(answer.text, answer.pieces, self.held_output)
        except ExpandError:
            return None

    # -- delivered outputs ------------------------------------------------------------------------

    def source(self, a: Attempt) -> HeldOutput:
        """An attempt as a reference names it (its lines not held)."""
        return HeldOutput(
            a.id, a.step, self.rt.state.label(a.id), self.quoted(a.command), a.exit_code, (), b"", (), False, ""
        )

    def quoted(self, command: str) -> str:
        """A command as an answer quotes it: secrets masked before it is shortened (a cut through a
        secret would leave a piece no pattern knows, and the answer is stored)."""
        return short_command(self.rt.redactor.mask(command), MARKER_COMMAND_CHARS)

    def deliver(
        self,
        a: Attempt,
        output: str,
        answer: Answer,
        kept: tuple[int, int] | None,
        exact: bool,
        keys: tuple[str, ...] = (),
        delivered: tuple[list[str], list[bool]] | None = None,
        digest: str | None = None,
    ) -> None:
        """Remember which of the output's lines the model got literally (the source of later
        references), and under which ``keys`` it is a re-read's base. ``kept``: what the agent showed
        of the answer (None: all of it); ``exact``: the agent's cut is known, not estimated."""
        if not self._refers(output) or mistakable(output):
            return  # too long to refer into; or holding lines that read like ours: never a source
        lines, literal = delivered or delivered_lines(output, answer, kept)
        same_as = answer.refs[0] if answer.kind in (AnswerKind.WHOLE, AnswerKind.REUSED) and answer.refs else None
        cut_raw = kept if kept is not None and exact and answer.text == output else None
        whole = kept is None and not any(p.kind == CUT for p in answer.pieces)
        self.delivered.add(
            HeldOutput(
                a.id,
                a.step,
                self.rt.state.label(a.id),
                self.quoted(a.command),
                a.exit_code,
                lines,
                literal,
                answer.refs,
                whole,
                digest or output_digest(output),
                a.epoch_after,
                same_as,
                cut_raw,
                in_diff=frozenset(diff_shown(answer.text, answer.pieces))
                if answer.kind is AnswerKind.DELTA
                else frozenset(),
            ),
            keys,
        )
        if len(self.delivered.items) % FORGET_EVERY == 0:
            self.forget_gone()

    def forget_gone(self) -> None:
        """Drop the earlier outputs the model no longer holds."""
        self.forget(lambda s: self.alive(s.step))

    def distrust(self, attempt_id: int) -> None:
        """The model got something else than the ledger recorded for this attempt: never a source."""
        self.forget(lambda s: s.attempt != attempt_id)

    def forget(self, keep: Callable[[HeldOutput], bool]) -> None:
        """Drop the earlier outputs the model no longer holds (``keep``: those it does), and what the
        ledger knew of their lines."""
        self.delivered.forget(keep)
        for a in [a for a in self.facts if a not in self.delivered.items]:
            del self.facts[a]

    def settle_facts(self, attempt_id: int) -> None:
        """The file lines of an output just recorded: dropped when the model does not hold it (never
        asked of), else kept as the lines the delivered outputs hold."""
        if attempt_id not in self.delivered.items:
            self.facts.pop(attempt_id, None)
        elif attempt_id in self.facts:
            intern = self.delivered.intern
            self.facts[attempt_id] = [r._replace(was=[intern(t) for t in r.was]) for r in self.facts[attempt_id]]

    def restore(self) -> None:
        """Rebuild what the model holds from the ledger (a run continued by a new runtime)."""
        state, store = self.rt.state, self.rt.store
        for a in state.attempts:
            if a.answer is None or a.shown_hash is None or a.output_hash is None or not self.alive(a.step):
                continue
            record = a.answer
            if record.altered or not record.held:  # not what the model got: no source
                continue
            shown, output = store.text(a.shown_hash), store.text(a.output_hash)
            if record.kind == AnswerKind.REUSED.value:
                ref = state.attempt(a.verdict.ref_attempt) if a.verdict.ref_attempt is not None else None
                if ref is None or altered_output(ref):
                    continue
                output = store.text(ref.output_hash) if ref.output_hash else None
            if shown is None or output is None:
                continue
            try:
                answer = Answer(AnswerKind(record.kind), shown, tuple(Piece.from_list(p) for p in record.pieces))
            except (KeyError, TypeError, ValueError):
                continue
            self.deliver(a, output, answer, record.kept, record.exact, record.base_keys)

    # -- what of the history is sent (context.py) ---------------------------------------------------

    def said(self, attempt_id: int, index: int, chars: int = 0, *, raw: bool = False) -> Said | None:
        """An earlier output as the model holds it, for the context policy: the lines its answer
        carried literally where the model saw them, each with the file line it is (if a checked view
        says so); ``raw``: the lines of the output itself the model would have seen without the
        ledger. None when the ledger no longer holds what the model got."""
        a = self.rt.state.attempt(attempt_id)
        shown = self.delivered.items.get(attempt_id)
        if a is None or shown is None:
            return None
        facts = fact_lines(self.facts.get(attempt_id, ()))
        literal = shown.literal
        if raw:
            output = "".join(shown.lines)
            literal = shown_whole(shown.lines, len(output), self.rt.truncation.kept(output))
        lines = tuple(
            Line(text, *facts[j]) if j in facts else Line(text)
            for j, (text, lit) in enumerate(zip(shown.lines, literal))
            if lit or (not raw and j in shown.in_diff)  # a diff's lines are the model's too
        )
        supersedable = a.executed and not a.submits and a.command_class not in (CommandClass.MODIFY, CommandClass.ENV)
        return Said(
            index,
            attempt_id,
            self.rt.state.label(attempt_id),
            self.quoted(a.command),
            command_key(a.cwd, a.normalized),
            supersedable,
            lines,
            () if raw else shown.refs,  # the output as it is refers to nothing
            chars,
        )

    def history(self, outputs: Sequence[tuple[int | None, int]], *, raw: bool = False) -> list[Said]:
        """Each earlier output of an agent's history, oldest first, as the model holds it: what the
        context policy decides what to send in its place from. ``outputs``: per output, the ledger's
        attempt (None: one the ledger did not answer) and its size as sent whole; ``raw``: as the
        model would hold the outputs as they are (``said``)."""
        return [
            (self.said(a, n, chars, raw=raw) if a is not None else None)
            or Said(n, None, "", "", None, False, (), (), chars)
            for n, (a, chars) in enumerate(outputs)
        ]

    def still_true(self, line: Line) -> bool:
        """Whether a file line is still that line of its file now (a file the ledger cannot read
        counts as unchanged: never a reason to leave a line out)."""
        if line.path is None or line.number is None:
            return True
        last, workspace = self._snapshot(), self.rt.workspace
        fs = last.files.get(line.path) if last is not None else None
        if fs is None:
            fs = workspace.file_state(line.path)
        if fs is None:
            return False  # no longer a file there
        cached = self._current.get(line.path)
        if cached is None or cached[0] != fs.digest:
            data = workspace.content(line.path, self.rt.config.scanning.max_content_bytes)
            cached = (fs.digest, split_lines(data.decode("utf-8", "replace")) if data is not None else None)
            self._current[line.path] = cached
        lines = cached[1]
        if lines is None:
            return True
        return line.number <= len(lines) and lines[line.number - 1] == line.was


def altered_output(a: Attempt) -> bool:
    """Whether the ledger keeps ``a``'s output other than as the command printed it (secrets masked,
    or cut for its length: ``LedgerRuntime.stored_output``)."""
    return bool(a.answer and a.answer.altered)


def command_key(cwd: str, normalized: str) -> str:
    """Identifies runs of the same command: its directory and its normalized text."""
    return f"c:{cwd}\0{normalized}"


__all__ = ["Held", "altered_output", "command_key"]
