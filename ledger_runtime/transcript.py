"""The transcript of a ledger: for each attempt, the exact text the model received (``shown``) and
what it stands for (``expanded``: every reference replaced by the bytes it names).

Expansion reads each answer as the model read it (answers.expand parses the references from the
text), resolving a reference's label ("step 9", "step 9.2") among the earlier attempts, whose own
expansions it takes in turn. For a command that ran, a sound answer expands to exactly its output;
``check`` says whether it does and, for every reference, whether the lines it names were shown
literally where it says (``literal``). Lines an answer says it left out as the agent's own cut
would have are taken from the command's output, which the ledger keeps. Ledgers written before answers were recorded show the output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .answers import LINES, SAME, TEXT, AnswerKind, ExpandError, Piece, expand, split_lines
from .records import Attempt
from .state import LedgerState


@dataclass(frozen=True)
class Check:
    """Whether an attempt's answer is sound: it expands (``error`` None), to exactly the output
    (``exact``), and each reference names lines its source showed literally (``literal``)."""

    exact: bool
    literal: bool
    error: str | None = None

    @property
    def sound(self) -> bool:
        return self.exact and self.literal and self.error is None


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
            return [Piece.from_list(p) for p in a.answer.get("pieces") or []]
        except (TypeError, ValueError):
            return None

    def kind(self, a: Attempt) -> str:
        return (a.answer or {}).get("kind") or AnswerKind.RAW.value

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
                return None if text is None else (b.id, text)

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
        return Check(got == fresh, self._literal(a), None)

    def _literal(self, a: Attempt) -> bool:
        """Every line reference names lines its source's answer carried literally."""
        pieces = self.pieces(a) or []
        for p in pieces:
            if p.kind not in (LINES, SAME) or p.ref is None:
                continue
            src = self.state.attempt(p.ref)
            if src is None:
                return False
            if p.kind == SAME:
                continue  # the whole output: the source's own expansion is checked on its own
            try:
                want = "".join(split_lines(self.expanded(src) or "")[p.first - 1:p.last])
            except ExpandError:
                return False
            shown = self.shown(src) or ""
            src_pieces = self.pieces(src)
            literal = [shown[q.start:q.end] for q in src_pieces if q.kind == TEXT] if src_pieces else [shown]
            if not any(want in part for part in literal):
                return False
        return True
