"""What the model holds in one run: the front of the ``held`` room, which ``LedgerRuntime`` delegates to.

``Held`` knows which steps the model holds, the outputs delivered and the lines seen of each, the answers that may
outlive their sources, and each earlier output as held (``history``). It is a fold of the ledger's events, fed the same
events live and on reopening, so a continued run holds exactly what the live one held. An output stored other than as
printed, a secret masked, is never a source.
"""

from __future__ import annotations

from typing import Any, Callable, Collection, Optional, Sequence

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
from ledger_runtime.answers.held_output import HeldOutput
from ledger_runtime.answers.lookalike import mistakable
from ledger_runtime.held.context import HistoryOutput, Line
from ledger_runtime.held.delivered import Delivered, delivered_lines, output_digest, seen_lines, shown_whole
from ledger_runtime.held.standing import StandingAnswers
from ledger_runtime.ledger.observe import FactRun, Truncation, fact_lines
from ledger_runtime.ledger.redact import MASK, Redactor
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.records import Attempt, CommandClass, VerdictKind, command_key
from ledger_runtime.workspace.local import Workspace

MARKER_COMMAND_CHARS = 32  # how much of a command a reference quotes
FORGET_EVERY = 64  # attempts between prunings of what the model no longer holds

Texts = Callable[[Optional[str]], Optional[str]]  # a stored text by its key (None: not stored)


def facts_event(attempt: int, runs: Sequence[FactRun], lines: Sequence[str]) -> dict:
    """The ``lines`` event of an attempt: its runs of checked file lines, file text None where it is the output's."""
    out = []
    for r in runs:
        same = list(lines[r.at : r.at + len(r.was)]) == list(r.was)
        out.append([r.at, r.path, r.first, len(r.was), None if same else list(r.was)])
    return {"attempt": attempt, "runs": out}


def gone_note(labels: Sequence[str]) -> str:
    """What replaces an answer whose sources left the model, when the ledger does not keep what it stands for."""
    return (
        f"[ledger] This output referred to earlier outputs ({', '.join(labels)}) that are no longer all in your "
        "context: run the command again to see it.\n"
    )


class Held:
    """What the model holds in one run; ``state`` is folded before each event reaches ``apply``.

    ``refers`` says whether an output is short enough to be a source of references."""

    def __init__(
        self,
        state: LedgerState,
        context_steps: int,
        redactor: Redactor,
        truncation: Truncation,
        workspace: Workspace,
        snapshot: Callable[[], Any],
        refers: Callable[[str], bool],
        line_facts: bool = False,
        max_content_bytes: int = 2 * 1024 * 1024,
    ):
        self.state, self.context_steps, self.redactor = state, context_steps, redactor
        self.max_content_bytes = max_content_bytes
        self.truncation, self.workspace = truncation, workspace
        self._snapshot = snapshot
        self._refers = refers
        self.line_facts = line_facts  # keep which output lines are which file lines (a context policy asks)
        self.delivered = Delivered()
        # per attempt the model holds: its runs of output lines that are checked file lines (see line_facts)
        self.file_lines: dict[int, list[FactRun]] = {}
        self.answers = StandingAnswers()  # answers that refer to other outputs, and what they stand for
        # the output's lines as delivered, worked out while the answer was built: (attempt, lines)
        self.pending_lines: tuple[int, tuple[list[str], list[bool]]] | None = None
        self._current: dict[str, tuple[str, list[str] | None]] = {}  # path -> (digest, lines) for still_true

    # -- which steps ------------------------------------------------------------------------------

    def first_held_step(self, now: int) -> int:
        """The first step whose outputs the model holds at step ``now``: after the last compaction, in the window."""
        steps = self.context_steps
        window = now - steps if steps > 0 else 0
        return max(self.state.context_floor, window)

    def holds_attempt(self, attempt_id: int) -> bool:
        """Whether the model still holds an attempt's output, before its next call."""
        a = self.state.attempt(attempt_id)
        return a is not None and self.held_next(a.step)

    def held_next(self, step: int) -> bool:
        """Whether the model still holds the outputs of ``step``, before its next call."""
        return step >= self.first_held_step(self.state.step + 1)

    # -- answers that outlive their sources ---------------------------------------------------------

    def standing(self) -> tuple[int, ...]:
        """The attempts whose answers refer to outputs that may leave the model first, for ``resent_as``."""
        return tuple(self.answers.items)

    def resent_as(self, attempt_id: int) -> tuple[str, str] | None:
        """For an answer referring to an output the model lost: the answer as sent, and what to send instead; else None.

        Instead goes the answer expanded or, if the ledger did not keep that, a line saying how to get it. A question,
        not a change: the same answer always gets the same text."""
        kept = self.answers.get(attempt_id)
        if kept is None or not self._sources_gone(kept):
            return None
        if kept.in_place is not None:
            return kept.answer, kept.in_place
        return kept.answer, gone_note([self.state.label(r) for r in kept.refs])

    def _sources_gone(self, kept) -> bool:
        return not all(self.holds_attempt(r) for r in kept.refs)

    def held_output(self, label: str) -> tuple[int, list[str]] | None:
        """An earlier output the model holds, as its printed lines, by the label a reference names it with."""
        b = self.state.by_label(label)
        shown = self.delivered.items.get(b.id) if b is not None else None
        return None if shown is None else (b.id, shown.lines)

    def in_place(self, answer: Answer) -> str | None:
        """The answer with its references replaced by what they stand for; None when it does not expand."""
        try:
            return expand_in_place(answer.text, answer.pieces, self.held_output)
        except ExpandError:
            return None

    # -- delivered outputs ------------------------------------------------------------------------

    def source(self, a: Attempt) -> HeldOutput:
        """An attempt as a reference names it, without its lines."""
        return HeldOutput(
            a.id, a.step, self.state.label(a.id), self.quoted(a.command), a.exit_code, (), b"", (), False, ""
        )

    def quoted(self, command: str) -> str:
        """A command as an answer quotes it, masked before it is cut: a cut secret would escape the patterns."""
        return short_command(self.redactor.mask(command), MARKER_COMMAND_CHARS)

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
        masked: bool = False,
    ) -> None:
        """Remembers which output lines the model got literally, as later references' sources, and the re-read ``keys``.

        A ``masked`` output counts only its lines without ``*`` as seen, and is no base of a whole reference or a diff.
        """
        if not self._refers(output) or mistakable(output):
            return  # too long to refer into; or holding lines that read like ours: never a source
        lines, literal = delivered or delivered_lines(output, answer, kept)
        if masked:
            literal = [lit and MASK not in line for line, lit in zip(lines, literal)]
        same_as = answer.refs[0] if answer.kind in (AnswerKind.WHOLE, AnswerKind.REUSED) and answer.refs else None
        agent_cut = kept if kept is not None and exact and answer.text == output and not masked else None
        whole = kept is None and not any(p.kind == CUT for p in answer.pieces) and not masked
        self.delivered.add(
            HeldOutput(
                a.id,
                a.step,
                self.state.label(a.id),
                self.quoted(a.command),
                a.exit_code,
                lines,
                literal,
                answer.refs,
                whole,
                digest or output_digest(output),
                a.epoch_after,
                same_as,
                agent_cut,
                in_diff=frozenset(diff_shown(answer.text, answer.pieces))
                if answer.kind is AnswerKind.DELTA
                else frozenset(),
            ),
            keys,
        )
        if len(self.delivered.items) % FORGET_EVERY == 0:
            self.forget_gone(a.step)

    def forget_gone(self, now: int) -> None:
        """Drops the outputs, and the answers standing for them, that the model no longer holds at step ``now``."""
        first = self.first_held_step(now)
        if self.delivered.held_before(first):  # else none is gone: a long run's prunings cost no look at each output
            self.forget(lambda s: s.step >= first)
        self.answers.forget(lambda step: step >= first)

    def distrust(self, attempt_id: int) -> None:
        """The model got something else than the ledger recorded for this attempt: never a source."""
        self.forget(lambda s: s.attempt != attempt_id)

    def forget(self, keep: Callable[[HeldOutput], bool]) -> None:
        """Drops the outputs ``keep`` rejects, and what the ledger knew of their lines."""
        self.delivered.forget(keep)
        for a in [a for a in self.file_lines if a not in self.delivered.items]:
            del self.file_lines[a]

    # -- the fold --------------------------------------------------------------------------------

    def apply(self, event: dict, texts: Texts) -> None:
        """Folds in one stored event after the run's state took it in."""
        kind = event.get("kind")
        if kind == "attempt":
            a = self.state.attempt(event.get("id"))  # type: ignore[arg-type]
            if a is not None:
                self.take(a, texts)
        elif kind == "lines":
            self.take_lines(event)
        elif kind == "context":
            self.forget_gone(self.state.step + 1)  # the agent's history lost them before its next step
        elif kind == "distrust":
            self.distrust(int(event["attempt"]))

    def take(self, a: Attempt, texts: Texts) -> None:
        """What the model holds of an attempt's stored answer: its literal lines and what its references stand for."""
        record = a.answer
        if record is None or a.shown_hash is None or not record.held or record.kind == AnswerKind.REFUSED.value:
            return
        output_hash = a.output_hash
        if record.kind == AnswerKind.REUSED.value:  # older ledgers: a run not run again
            ref = self.state.attempt(a.verdict.ref_attempt) if a.verdict.kind is VerdictKind.REUSE else None
            if ref is None or altered_output(ref) or ref.verdict.ref_attempt == a.id:
                return
            output_hash = ref.output_hash
        shown, output = texts(a.shown_hash), texts(output_hash)
        if shown is None or output is None:
            return
        try:
            answer = Answer(AnswerKind(record.kind), shown, tuple(Piece.from_list(p) for p in record.pieces))
        except (KeyError, TypeError, ValueError):
            return
        got = self.pending_lines if self.pending_lines is not None and self.pending_lines[0] == a.id else None
        self.pending_lines = None
        if got is not None and record.altered:
            got = None  # worked out on the output as printed: the fold takes what is stored
        # stored with its secrets masked: only what masking left as it was is the model's
        self.deliver(
            a,
            output,
            answer,
            record.kept,
            record.exact,
            record.base_keys,
            got[1] if got else None,
            None,
            record.altered,
        )
        if answer.refs and a.applied and self.context_steps > 0 and a.id in self.delivered.items:
            held = self.delivered.items[a.id]
            # as held, not copied: seen_lines copies the flags it changes and only counts the lines
            seen = seen_lines(output, answer, record.kept, (held.lines, held.carried))  # type: ignore[arg-type]
            if answer.kind is AnswerKind.WHOLE:  # of the earlier output, what the model saw of it
                seen = self.delivered.seen_through(answer.refs[0]) or seen
            in_place = self.in_place(answer)
            self.answers.keep(a.id, a.step, answer.refs, answer.text, in_place, self._sources_gone, bytes(seen))

    def take_lines(self, event: dict) -> None:
        """Keeps an attempt's runs of checked file lines for the context policy, if the model holds its output."""
        attempt = event.get("attempt")
        shown = self.delivered.items.get(attempt)  # type: ignore[arg-type]
        if not self.line_facts or shown is None:
            return
        intern = self.delivered.intern
        runs = []
        for at, path, first, count, was in event.get("runs") or ():
            text = list(shown.lines[at : at + count]) if was is None else [intern(t) for t in was]
            if len(text) == count:
                runs.append(FactRun(at, path, first, text))
        if runs:
            self.file_lines[attempt] = runs  # type: ignore[index]

    # -- what of the history is sent (context.py) ---------------------------------------------------

    def said(
        self, attempt_id: int, index: int, chars: int = 0, *, raw: bool = False, expanded: bool = False
    ) -> HistoryOutput | None:
        """An earlier output as the model holds it, for the context policy; None when the ledger no longer holds it.

        Its lines are those the model saw literally, with the file lines checked views name; ``raw`` gives those it
        would have seen without the ledger, ``expanded`` those of the answer sent expanded."""
        a = self.state.attempt(attempt_id)
        shown = self.delivered.items.get(attempt_id)
        if a is None or shown is None:
            return None
        facts = fact_lines(self.file_lines.get(attempt_id, ()))
        literal = shown.carried
        standing = self.answers.get(attempt_id) if expanded else None
        if standing is not None and standing.in_place is not None and standing.seen:
            literal, raw_refs = standing.seen, True  # its references are the lines they stand for now
        else:
            raw_refs = False
        if raw:
            output = "".join(shown.lines)
            literal = shown_whole(shown.lines, len(output), self.truncation.kept(output))
        lines = tuple(
            Line(text, *facts[j]) if j in facts else Line(text)
            for j, (text, lit) in enumerate(zip(shown.lines, literal))
            if lit or (not raw and j in shown.in_diff)  # a diff's lines are the model's too
        )
        supersedable = a.executed and not a.submits and a.command_class not in (CommandClass.MODIFY, CommandClass.ENV)
        return HistoryOutput(
            index,
            attempt_id,
            self.state.label(attempt_id),
            self.quoted(a.command),
            command_key(a.cwd, a.normalized),
            supersedable,
            lines,
            () if raw or raw_refs else shown.refs,  # the output as it is refers to nothing
            chars,
        )

    def history(
        self, outputs: Sequence[tuple[int | None, int]], *, raw: bool = False, expanded: Collection[int] = ()
    ) -> list[HistoryOutput]:
        """Each earlier output of an agent's history, oldest first, as the model holds it, for the context policy.

        ``outputs`` gives per output its attempt (None: not the ledger's) and its size sent whole."""
        return [
            (self.said(a, n, chars, raw=raw, expanded=a in expanded) if a is not None else None)
            or HistoryOutput(n, None, "", "", None, False, (), (), chars)
            for n, (a, chars) in enumerate(outputs)
        ]

    def still_true(self, line: Line) -> bool:
        """Whether a file line is still that line of its file; an unreadable file counts as unchanged."""
        if line.path is None or line.number is None:
            return True
        last, workspace = self._snapshot(), self.workspace
        fs = last.files.get(line.path) if last is not None else None
        if fs is None:
            fs = workspace.file_state(line.path)
        if fs is None:
            return False  # no longer a file there
        cached = self._current.get(line.path)
        if cached is None or cached[0] != fs.digest:
            data = workspace.content(line.path, self.max_content_bytes)
            cached = (fs.digest, split_lines(data.decode("utf-8", "replace")) if data is not None else None)
            self._current[line.path] = cached
        lines = cached[1]
        if lines is None:
            return True
        return line.number <= len(lines) and lines[line.number - 1] == line.was


def altered_output(a: Attempt) -> bool:
    """Whether the ledger keeps ``a``'s output other than as printed: secrets masked, or cut for length."""
    return bool(a.answer and a.answer.altered)


__all__ = ["Held", "altered_output"]
