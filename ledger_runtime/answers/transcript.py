"""The transcript of a ledger: for each attempt, the exact text the model received (``shown``) and
what it stands for (``expanded``: every reference replaced by the bytes it names).

Expansion reads each answer as the model read it (answers.expand parses the references from the
text), resolving a reference's label ("step 9", "step 9.2") among the earlier attempts, whose own
expansions it takes in turn. For a command that ran, a sound answer expands to exactly its output;
``check`` says whether it does, and whether every reference names what the model really holds
(``held``): lines its source carried literally in the part of it the agent showed, of a step still
in the model's context then; for a whole-output reference or a diff, an output the model had whole
(an whole answer that left nothing out, whose own references it had whole), or, where the reference
says so, one it saw cut the same way. Lines an answer says it left out as the agent's own cut would
have are taken from the command's output, which the ledger keeps. Ledgers written before answers
were recorded show the output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ledger_runtime.answers.build import (
    AGAIN,
    CUT,
    LINES,
    PATCH,
    REFERENCE_KINDS,
    SAME,
    SEEN_CUT,
    TEXT,
    AnswerKind,
    ExpandError,
    Piece,
    expand,
    split_lines,
)
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.records import Attempt


@dataclass(frozen=True)
class Check:
    """Whether an attempt's answer is sound: it expands (``error`` None), to exactly the output
    (``exact``), and each reference names what the model held (``held``; ``why`` when not)."""

    exact: bool
    held: bool
    error: str | None = None
    why: str | None = None

    @property
    def sound(self) -> bool:
        return self.exact and self.held and self.error is None


class Transcript:
    """Shown and expanded text of a ledger's attempts; ``text_of(hash)`` reads a blob as text."""

    def __init__(self, state: LedgerState, text_of: Callable[[str | None], str | None]):
        self.state = state
        self.text_of = text_of
        self._expanded: dict[int, str] = {}

    def pieces(self, a: Attempt) -> list[Piece] | None:
        if not a.answer:
            return None
        try:
            return [Piece.from_list(p) for p in a.answer.pieces]
        except (TypeError, ValueError):
            return None

    def kind(self, a: Attempt) -> str:
        return a.answer.kind if a.answer else AnswerKind.RAW.value

    def shown(self, a: Attempt) -> str | None:
        """The exact text the model received for ``a`` (in shadow mode: would have received)."""
        if a.shown_hash is not None:
            return self.text_of(a.shown_hash)
        return self.text_of(a.output_hash)  # a ledger from before answers: the model got the output

    def expanded(self, a: Attempt) -> str | None:
        """What ``a``'s answer stands for; None when it cannot be read. Raises ExpandError when the
        answer does not decode."""
        if a.id in self._expanded:
            return self._expanded[a.id]
        shown = self.shown(a)
        pieces = self.pieces(a)
        if shown is None:
            return None
        if pieces is None:
            out = shown
        else:

            def resolve(label: str) -> tuple[int, str] | None:
                b = self.state.by_label(label)
                if b is None or b.id >= a.id:
                    return None  # a reference names only what came before
                text = self.expanded(b)
                if text is None:
                    raise ExpandError(f"{label}'s output, which it names, does not read back from the ledger")
                return (b.id, text)

            out = expand(shown, pieces, resolve, lambda: self.text_of(a.output_hash))
        self._expanded[a.id] = out
        return out

    def check(self, a: Attempt, fresh: str) -> Check:
        """Is ``a``'s answer sound against ``fresh``, the output the command printed?"""
        try:
            got = self.expanded(a)
        except ExpandError as e:
            return Check(False, False, str(e))
        if got is None:
            return Check(False, False, "the answer's text is not in the ledger")
        why = self._unheld(a)
        return Check(got == fresh, why is None, None, why)

    def _unheld(self, a: Attempt) -> str | None:  # noqa: C901
        """Why a reference of ``a`` names something the model did not hold (None: they all hold)."""
        first_held_step = int(a.answer.first_held_step or 0) if a.answer else 0
        shown_a = self.shown(a) or ""
        why = self._again_unheld(a)
        if why is not None:
            return why
        for p in self.pieces(a) or []:
            if p.kind not in REFERENCE_KINDS or p.ref is None:
                continue
            src = self.state.attempt(p.ref)
            if src is None or src.id >= a.id:
                return f"a reference to attempt {p.ref}, which is not an earlier one"
            if src.step < first_held_step:
                return (
                    f"a reference to step {src.step}, out of the model's context (it held steps from {first_held_step})"
                )
            if p.kind == LINES:
                try:
                    src_lines = split_lines(self.expanded(src) or "")
                except ExpandError:
                    return f"step {src.step}'s answer does not expand"
                literal = self._literal_lines(src, src_lines)
                if not all(literal.get(n) == src_lines[n - 1] for n in range(p.first, p.last + 1)):
                    return (
                        f"lines {p.first}-{p.last} of step {src.step} were not shown literally where the model saw them"
                    )
            elif p.kind == SAME and SEEN_CUT in shown_a[p.start : p.end]:
                if self.kind(src) != AnswerKind.RAW.value or not _kept(src):
                    return f"step {src.step} was not shown cut as it is, as the reference says"
            elif not self._whole(src, first_held_step, set()):
                return f"step {src.step}'s output is not one the model had whole"
        return None

    def _again_unheld(self, a: Attempt) -> str | None:
        """A reference to lines above it in the same answer must name lines that answer carried
        literally, in an answer the agent showed whole."""
        pieces = self.pieces(a) or []
        if not any(p.kind == AGAIN for p in pieces):
            return None
        if _kept(a):
            return "a reference to lines above it in an answer the agent cut"
        shown = self.shown(a) or ""
        literal: set[int] = set()
        line = 0
        for p in pieces:
            if p.kind == TEXT:
                n = len(split_lines(shown[p.start : p.end]))
                literal |= set(range(line + 1, line + n + 1))
                line += n
            elif p.kind in (LINES, CUT, AGAIN):
                if p.kind == AGAIN and not set(range(p.first, p.last + 1)) <= literal:
                    return f"lines {p.first}-{p.last} of this output were not shown literally above"
                line += p.last - p.first + 1
        return None

    def _literal_lines(self, a: Attempt, out_lines: list[str]) -> dict[int, str]:
        """Output line number (1-based) -> the text ``a``'s answer showed literally as that line, where
        the agent showed it whole (read from the answer's pieces, as a reader counts lines)."""
        shown = self.shown(a) or ""
        kept = _kept(a)
        windows = [(0, len(shown))] if not kept else [(0, kept[0]), (len(shown) - kept[1], len(shown))]
        pieces = self.pieces(a) or [Piece(TEXT, 0, len(shown))]
        out: dict[int, str] = {}
        line = 1
        for q in pieces:
            if q.kind == TEXT:
                pos = q.start
                for part in split_lines(shown[q.start : q.end]):
                    end = pos + len(part)
                    if any(lo <= pos and end <= hi for lo, hi in windows) and part.endswith("\n"):
                        out[line] = part
                    elif any(lo <= pos and end <= hi for lo, hi in windows) and line == len(out_lines):
                        out[line] = part  # the last line, without a newline
                    line += 1
                    pos = end
            elif q.kind in (LINES, CUT, AGAIN):
                line += q.last - q.first + 1
            elif q.kind in (SAME, PATCH):
                line = len(out_lines) + 1
        return out

    def _visible_literal(self, a: Attempt) -> list[str]:
        """The parts of ``a``'s answer that were output shown literally, where the agent showed them."""
        shown = self.shown(a) or ""
        kept = _kept(a)
        windows = [(0, len(shown))] if not kept else [(0, kept[0]), (len(shown) - kept[1], len(shown))]
        pieces = self.pieces(a) or [Piece(TEXT, 0, len(shown))]
        out = []
        for q in pieces:
            if q.kind != TEXT:
                continue
            for lo, hi in windows:
                x, y = max(q.start, lo), min(q.end, hi)
                if x < y:
                    out.append(shown[x:y])
        return out

    def _whole(self, a: Attempt, first_held_step: int, seen: set[int]) -> bool:
        """Whether the model had ``a``'s whole output: it saw all of the answer, which left nothing
        out, and every reference in it points at an output it had whole, in a step it still held."""
        if a.id in seen:
            return True
        seen.add(a.id)
        if _kept(a) or a.step < first_held_step:
            return False
        for p in self.pieces(a) or []:
            if p.kind == CUT:
                return False
            if p.kind in REFERENCE_KINDS and p.ref is not None:
                src = self.state.attempt(p.ref)
                if src is None or not self._whole(src, first_held_step, seen):
                    return False
        return True


def _kept(a: Attempt) -> tuple[int, int] | None:
    """What the agent showed of ``a``'s answer: its first and last characters (None: all of it)."""
    return a.answer.kept if a.answer else None
