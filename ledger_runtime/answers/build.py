"""Answers: what the model gets back for a command that ran.

Its fresh output, compared byte for byte with what the model has already been shown and still holds
(``delivered.Delivered``), with verbatim repeats replaced by one-line references:

- ``whole``: the output is identical to an earlier one (``[ledger: same as step 14's output
  (`pytest -q`, exit 1)]``);
- ``spans``: each long run of lines that an earlier output showed verbatim becomes one reference
  line (``[ledger: lines 12-51 of step 9's output (`cat a.py`) repeat here]``), and so does a run
  that repeats lines shown above it in the same answer (``[ledger: lines 3-9 of this output repeat
  here]``); new and changed lines stay in full;
- ``delta``: a re-read whose output differs from an earlier output of the same read is that earlier
  output with a unified diff applied (hunks of changed lines with one line of context).

An output the agent is going to cut anyway (mini-swe-agent keeps the first and last 5,000 characters
of one of 10,000 or more) may keep that cut: its head and tail deduped, the middle left out with a
line that says so (a ``cut`` piece: lines the model would not have been shown without the ledger
either). Only where the cut is known exactly; never for an agent whose cut is estimated.

An ``Answer`` is its text (exactly what the model reads) and the ``Piece``s it is made of: literal
output, ledger notes (not output), and references. ``expand`` is the decoder and does not trust the
pieces: it reads each reference from the answer's text, as the model would, resolves it against the
earlier answers and checks every line a diff claims; a sound answer expands to exactly the fresh
output. The replay and the tests check that for every command.
"""

from __future__ import annotations

import difflib
import math
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from enum import Enum
from itertools import accumulate
from typing import Callable, Container, Sequence

from ledger_runtime.answers.held_output import HeldOutput
from ledger_runtime.answers.literal_floor import carries_more
from ledger_runtime.ledger.observe import Truncation
from ledger_runtime.lines import split_lines
from ledger_runtime.section import Section, choice, integer, setting


class AnswerKind(str, Enum):
    """How an answer hands the output back."""

    RAW = "raw"  # the output as it is
    WHOLE = "whole"  # a reference to an identical earlier output
    SPANS = "spans"  # literal lines and references to runs of lines shown before
    DELTA = "delta"  # an earlier output of the same read, with a diff
    REUSED = "reused"  # not run: an earlier run's output (reuse_runs, removed: only in older ledgers)
    REFUSED = "refused"  # not run: a policy's refusal (REVISE, BLOCK)


TEXT, NOTE, LINES, SAME, PATCH, CUT, AGAIN = "text", "note", "lines", "same", "patch", "cut", "again"
REFERENCE_KINDS = (LINES, SAME, PATCH)  # to earlier outputs (AGAIN refers to lines above it in the same answer)


@dataclass(frozen=True, slots=True)
class Piece:
    """``text[start:end]`` of an answer: literal output (``text``), the ledger's words (``note``), or
    a reference to attempt ``ref``: some of its output lines (``lines``, ``first``..``last``,
    1-based), all of it (``same``), or all of it with a diff (``patch``)."""

    kind: str
    start: int
    end: int
    ref: int | None = None
    first: int = 0
    last: int = 0

    def to_list(self) -> list:
        return [self.kind, self.start, self.end, self.ref, self.first, self.last]

    @classmethod
    def from_list(cls, raw: Sequence) -> Piece:
        kind, start, end, ref, first, last = raw
        return cls(str(kind), int(start), int(end), None if ref is None else int(ref), int(first), int(last))


@dataclass(frozen=True, slots=True)
class Answer:
    kind: AnswerKind
    text: str
    pieces: tuple[Piece, ...]

    @property
    def refs(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(p.ref for p in self.pieces if p.kind in REFERENCE_KINDS and p.ref is not None))

    def to_dict(self) -> dict:
        return {"kind": self.kind.value, "pieces": [p.to_list() for p in self.pieces]}


class Dedupe(str, Enum):
    """What of a fresh output's repeats becomes references (the ``dedupe`` setting)."""

    SPANS = "spans"  # whole outputs, runs of lines and diffs of re-reads
    WHOLE = "whole"  # whole outputs only
    OFF = "off"  # the output as it is


@dataclass(frozen=True)
class DedupeSettings(Section):
    """The ``[ledger.dedupe]`` settings: what of a fresh output becomes references."""

    name = "dedupe"
    flat = {"dedupe": "mode", "dedupe_min_lines": "min_lines", "dedupe_min_saving": "min_saving"}

    mode: Dedupe = setting(Dedupe.SPANS, choice(Dedupe))
    """What the model gets back for a command that ran: its fresh output with verbatim repeats of
    what it was already shown replaced by references ("spans": whole outputs, runs of lines and
    diffs of re-reads; "whole": whole outputs only; "off": the output as it is)."""
    min_lines: int = setting(2, integer(1))
    """The shortest run of repeated lines that becomes a reference."""
    min_saving: int = setting(60, integer(0))
    """Characters an answer must save the model at least (and each reference in it 40, or this if
    less); below that the output stays as it is."""

    @property
    def min_reference_saving(self) -> int:
        """...and each reference in it: 40 characters, or less if the answer's threshold is lower."""
        return min(self.min_saving, 40)


class Pool:
    """What ``build`` asks of the outputs the model holds (held/delivered.py: ``Delivered`` implements it)."""

    def identical(self, output: str) -> HeldOutput | None: ...

    def base(self, key: str) -> HeldOutput | None: ...

    def longest_run(self, lines: Sequence[str], i: int, end: int | None = None) -> tuple[HeldOutput, int, int] | None:
        """(source, its 0-based line index, run length) of the longest run of ``lines[i:end]`` that a
        source showed literally and the model still holds."""

    def holds(self, line: str) -> bool:
        """Whether a source the model still holds showed ``line`` literally: a run may start at it
        (``longest_run`` of a list starting with it is not None)."""

    def lines_held(self) -> Container[str] | None:
        """Every line a source the model holds may have shown (more may be in it), or None if that is not known: no
        run ``longest_run`` finds holds another line."""


def lines_marker(src: HeldOutput, first: int, last: int) -> str:
    return f"[ledger: lines {first}-{last} of {src.label}'s output (`{src.command}`) repeat here]\n"


def again_marker(first: int, last: int) -> str:
    return f"[ledger: lines {first}-{last} of this output repeat here]\n"


# the shortest a reference's marker can be (lines 1-2, of an output with no label or command)
MIN_MARKER_CHARS = min(
    len(again_marker(1, 2)), len(lines_marker(HeldOutput(0, 0, "", "", None, (), b"", (), False, ""), 1, 2))
)


def cut_marker(first: int, last: int, chars: int, cut: Truncation) -> str:
    return (
        f"[ledger: lines {first}-{last} of this output ({chars:,} characters) not shown: the agent shows only "
        f"the first {cut.head:,} and last {cut.tail:,} characters of a long output]\n"
    )


SEEN_CUT = ", of which you were shown the first "
SEEN_CUT_RX = re.compile(re.escape(SEEN_CUT) + r"([\d,]+) and last ([\d,]+) characters")


def seen_part(output: str, head: int, tail: int) -> str:
    """What the model was shown of an output the agent cut to its first ``head`` and last ``tail``
    characters, as a reference to it stands for them: those, and a line between that says what is
    left out (on a line of its own)."""
    if head + tail >= len(output):
        return output
    first, last = output[:head], output[len(output) - tail :] if tail else ""
    gap = len(output) - head - tail
    note = f"[ledger: {gap:,} characters not shown here: the agent showed only the first {head:,} and last {tail:,}]\n"
    return first + ("" if first.endswith("\n") or not first else "\n") + note + last


def same_marker(src: HeldOutput, note: str = "") -> str:
    rc = "" if src.exit_code is None else f", exit {src.exit_code}"
    cut = f"{SEEN_CUT}{src.seen_cut[0]:,} and last {src.seen_cut[1]:,} characters" if src.seen_cut else ""
    return f"[ledger: same as {src.label}'s output (`{src.command}`{rc}){cut}{note}]\n"


def patch_header(src: HeldOutput) -> str:
    return (
        f"[ledger: {src.label}'s output (`{src.command}`) with these changes, a unified diff; "
        f"every other line is as there]\n"
    )


_LABEL = r"step (\d+)(?:\.(\d+))?"
LINES_RX = re.compile(r"\[ledger: lines (\d+)-(\d+) of " + _LABEL + r"'s output ")
SAME_RX = re.compile(r"\[ledger: same as " + _LABEL + r"'s output ")
PATCH_RX = re.compile(r"\[ledger: " + _LABEL + r"'s output \(.*\) with these changes, a unified diff;")
CUT_RX = re.compile(r"\[ledger: lines (\d+)-(\d+) of this output \(")
AGAIN_RX = re.compile(r"\[ledger: lines (\d+)-(\d+) of this output repeat here\]\n$")
HUNK_RX = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
NO_NEWLINE = "\\ No newline at end of file\n"


# -- building ------------------------------------------------------------------------------------


MAX_ABOVE = 32  # earlier places of a line in the same answer tried as the start of a run


class _Writer:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.pieces: list[Piece] = []
        self.size = 0
        self.again = False  # holds a reference to lines above it
        self.kept_cut: Truncation | None = None

    def add(self, kind: str, text: str, ref: int | None = None, first: int = 0, last: int = 0) -> None:
        if not text and kind == TEXT:
            return
        if kind == TEXT and self.pieces and self.pieces[-1].kind == TEXT:
            prev = self.pieces.pop()
            self.pieces.append(Piece(TEXT, prev.start, self.size + len(text)))
        else:
            self.pieces.append(Piece(kind, self.size, self.size + len(text), ref, first, last))
        self.parts.append(text)
        self.size += len(text)

    def answer(self, kind: AnswerKind, notes: Sequence[str] = ()) -> Answer:
        """The answer, the ledger's ``notes`` first: each a line of its own, so that where the output
        ends (with a newline or not) is where the answer ends."""
        head = "".join(n if n.endswith("\n") else n + "\n" for n in notes)
        pieces, at = [], 0
        for n in notes:
            line = n if n.endswith("\n") else n + "\n"
            pieces.append(Piece(NOTE, at, at + len(line)))
            at += len(line)
        pieces += [Piece(p.kind, p.start + at, p.end + at, p.ref, p.first, p.last) for p in self.pieces]
        return Answer(kind, head + "".join(self.parts), tuple(pieces))


def raw(output: str, notes: Sequence[str] = ()) -> Answer:
    w = _Writer()
    w.add(TEXT, output)
    return w.answer(AnswerKind.RAW, notes)


AS_PRINTED = (
    "[ledger] What follows is the command's output as it printed it; "
    "its lines that begin like the ledger's are its own."
)


def kept_output(output: str, limit: int) -> str:
    """``output`` as the ledger stores it: whole up to ``limit`` characters; a longer one keeps its
    first and last lines up to about half the limit each, a line between saying how much is left
    out (the model's answer is not cut by this: only what is stored)."""
    if len(output) <= limit:
        return output
    head_end, tail_start = _cut_points(output, limit)
    return _kept(output[:head_end], output[tail_start:], len(output), limit)


# a masked text keeps its length and lines, so where it is cut does not depend on the masking; what
# is kept of a long output is masked with this much of what is cut away on each side, so a secret a
# pattern finds across the cut is masked as in the whole text
MASK_MARGIN = 64 * 1024


def masked_kept(output: str, limit: int, mask: Callable[[str], str]) -> str:
    """``kept_output(mask(output), limit)``, masking only what is kept (and a margin around it): a
    100 MB output costs what its kept 4 MB do, not what masking all of it would."""
    if len(output) <= limit + 2 * MASK_MARGIN:
        return kept_output(mask(output), limit)
    head_end, tail_start = _cut_points(output, limit)
    head = mask(output[: head_end + MASK_MARGIN])[:head_end]
    from_ = tail_start - MASK_MARGIN
    tail = mask(output[from_:])[tail_start - from_ :]
    return _kept(head, tail, len(output), limit)


def _cut_points(output: str, limit: int) -> tuple[int, int]:
    """Where ``kept_output`` cuts a longer output: the end of its head, the start of its tail."""
    half = max(1, limit // 2)
    head_end, tail_start = half, len(output) - half
    cut = output.rfind("\n", 0, head_end - 1)
    if cut >= 0:
        head_end = cut + 1
    cut = output.find("\n", tail_start, len(output) - 1)
    if cut >= 0:
        tail_start = cut + 1
    return head_end, tail_start


def _kept(head: str, tail: str, total: int, limit: int) -> str:
    left = total - len(head) - len(tail)
    return f"{head}... {left} characters of this output are not stored (the ledger keeps at most {limit}) ...\n{tail}"


def build(
    output: str,
    pool: Pool,
    settings: DedupeSettings,
    *,
    base_keys: Sequence[str] = (),
    notes: Sequence[str] = (),
    same_note: Callable[[HeldOutput], str] | None = None,
    cut: Truncation | None = None,
    lines: list[str] | None = None,
) -> Answer:
    """The answer for ``output``: a reference to an identical earlier output, else the shortest of
    spans, a delta from a ``base_keys`` source and (for an output the agent cuts exactly: ``cut``)
    spans that keep the agent's cut, when it saves the model at least ``settings.min_saving``
    characters of what it would see; else the output as it is. ``notes`` (a NUDGE) come first.
    ``lines``: ``split_lines(output)``, where the caller has it."""
    if settings.mode is Dedupe.OFF or not output:
        return raw(output, notes)
    seen = cut.seen_chars if cut is not None else (lambda n: n)
    extra = sum(len(n) + 1 for n in notes)  # the notes go with any answer, raw ones too
    src = pool.identical(output)
    if src is not None:
        w = _Writer()
        w.add(SAME, same_marker(src, same_note(src) if same_note else ""), src.attempt)
        if seen(len(output) + extra) - seen(w.size + extra) >= settings.min_saving:
            return w.answer(AnswerKind.WHOLE, notes)
    if settings.mode is Dedupe.WHOLE:
        return raw(output, notes)
    lines = lines if lines is not None else split_lines(output)
    # A candidate only grows as it is built, and what the model would see of it never drops below the
    # agent's head and tail: once that floor saves too little over the output as it is, it is given up
    # (a long output the agent cuts costs what the cut shows, not every line of it).
    bound = seen(len(output) + extra) - settings.min_saving
    shown_most = cut.head + cut.tail if cut is not None else len(output) + extra
    give_up = bound - extra if shown_most > bound else math.inf  # past it, min(size + extra, shown_most) > bound

    bases = {b.attempt: b for b in (pool.base(k) for k in base_keys) if b is not None}
    held = pool.lines_held()  # spans that would carry more than ``give_up`` literally are not searched for
    spans = (
        None if _hopeless(lines, held, settings, give_up, None) else _spans(lines, pool, settings, give_up_over=give_up)
    )
    candidates = [spans, *(_delta(lines, b) for b in bases.values())]
    if (
        cut is not None
        and cut.exact
        and len(output) >= cut.limit
        and not _hopeless(lines, held, settings, give_up, cut)
    ):
        candidates.append(_spans(lines, pool, settings, keep_cut=cut, give_up_over=give_up))
    limit = cut.limit if cut is not None else None
    candidates = [
        c
        if c is None or limit is None or c[1].size + extra < limit or not c[1].again
        else _spans(lines, pool, settings, keep_cut=c[1].kept_cut, again=False, give_up_over=give_up)
        for c in candidates
    ]
    best = None
    for c in candidates:  # the shortest seen, but a delta a little longer than spans wins: it says what changed
        if c is None:
            continue
        kind, writer = c
        size = seen(writer.size + extra) - (_delta_allowance(writer.size) if kind is AnswerKind.DELTA else 0)
        if best is None or size < best[0]:
            best = (size, kind, writer)
    if best is None or seen(len(output) + extra) - seen(best[2].size + extra) < settings.min_saving:
        return raw(output, notes)
    _, kind, w = best
    return w.answer(kind, notes)


def _cut_middle(lines: list[str], cut: Truncation) -> tuple[int, int, int] | None:
    """The lines [a, b) the agent's cut would hide entirely: none of their characters in its first
    ``head`` or last ``tail`` (a line it would show a part of stays, whole); and their characters."""
    ends = list(accumulate(map(len, lines)))
    n = ends[-1] if ends else 0
    if n < cut.limit or cut.head + cut.tail >= n:
        return None
    a = bisect_left(ends, cut.head) + 1 if cut.head > 0 else 0  # the first line starting at or after head
    b = bisect_right(ends, n - cut.tail)  # the first line ending past the tail's start
    if b >= len(lines) or b <= a:
        return None
    return a, b, ends[b - 1] - (ends[a - 1] if a else 0)


def _delta_allowance(size: int) -> int:
    """How much longer than spans a delta may be and still be chosen (its removed lines and context
    cost characters, and tell the model what changed): 200 characters, or a third of its size."""
    return max(200, size // 3)


def _hopeless(
    lines: list[str], held: Container[str] | None, settings: DedupeSettings, give_up: float, keep_cut: Truncation | None
) -> bool:
    """Whether spans of ``lines`` (keeping the agent's cut: ``keep_cut``) would carry more than ``give_up`` characters
    literally, and so could not save enough (literal_floor.py)."""
    middle = _cut_middle(lines, keep_cut) if keep_cut is not None else None
    marker = len(cut_marker(middle[0] + 1, middle[1], middle[2], keep_cut)) if middle and keep_cut else 0
    short = MIN_MARKER_CHARS + settings.min_reference_saving
    return carries_more(lines, held, give_up - marker, settings.min_lines, short, middle[:2] if middle else None)


def _spans(  # noqa: C901
    lines: list[str],
    pool: Pool,
    settings: DedupeSettings,
    keep_cut: Truncation | None = None,
    again: bool = True,
    give_up_over: float = math.inf,
) -> tuple[AnswerKind, _Writer] | None:
    """Spans: runs of lines the pool holds, or (``again``) that this answer carried literally above, as references.

    A reference to lines above in the same answer is only for an answer the agent shows whole (``build`` builds it
    again without them otherwise). None where no reference was made, or once the answer grows past
    ``give_up_over`` characters (it can no longer save enough)."""
    w = _Writer()
    w.kept_cut = keep_cut
    i = 0
    used = False
    middle = _cut_middle(lines, keep_cut) if keep_cut is not None else None
    min_lines, min_saving = settings.min_lines, settings.min_reference_saving
    holds = pool.holds
    above: dict[str, list[int]] = {}  # line -> where this answer carried it literally (0-based output lines)
    # (line, the next) -> (where the first stands, its place in above[line]) where both were carried
    above_pairs: dict[tuple[str, str], list[tuple[int, int]]] = {}
    literal = bytearray(len(lines))  # 1: the line went into the answer as it is

    while i < len(lines):
        if w.size > give_up_over:
            return None
        if middle is not None and i == middle[0]:
            w.add(CUT, cut_marker(middle[0] + 1, middle[1], middle[2], keep_cut), None, middle[0] + 1, middle[1])
            i = middle[1]
            continue
        stop = middle[0] if middle is not None and i < middle[0] else len(lines)
        run = pool.longest_run(lines, i, stop)
        here = _run_above(lines, i, stop, above, above_pairs, literal) if again else None
        if here is not None and (run is None or here[1] > run[2]):
            j, k = here
            marker = again_marker(j + 1, j + k)
            if k >= min_lines and sum(map(len, lines[i : i + k])) - len(marker) >= min_saving:
                w.add(AGAIN, marker, None, j + 1, j + k)
                w.again = True
                i += k
                used = True
                continue
        if run is not None:
            src, j, k = run
            if k >= min_lines:
                marker = lines_marker(src, j + 1, j + k)
                if sum(map(len, lines[i : i + k])) - len(marker) >= min_saving:
                    w.add(LINES, marker, src.attempt, j + 1, j + k)
                    i += k
                    used = True
                    continue
        # a line carried as it is, and those after it that no reference could start at: one piece
        line = lines[i]
        if i and literal[i - 1]:
            above_pairs.setdefault((lines[i - 1], line), []).append((i - 1, len(above[lines[i - 1]]) - 1))
        above.setdefault(line, []).append(i)
        literal[i] = 1
        size = w.size + len(line)
        j = i + 1
        while j < stop:
            line = lines[j]
            if line in above or holds(line):
                break
            before = lines[j - 1]  # carried just now
            above_pairs.setdefault((before, line), []).append((j - 1, len(above[before]) - 1))
            above[line] = [j]
            literal[j] = 1
            size += len(line)
            j += 1
            if size > give_up_over:
                return None
        w.add(TEXT, "".join(lines[i:j]))
        i = j
    return (AnswerKind.SPANS, w) if used else None


def _run_above(
    lines: list[str],
    i: int,
    stop: int,
    above: dict[str, list[int]],
    above_pairs: dict[tuple[str, str], list[tuple[int, int]]],
    literal: bytearray,
) -> tuple[int, int] | None:
    """The longest run of ``lines[i:stop]`` that this answer already carried literally, above it.

    Of the places ``lines[i]`` was carried, the ``MAX_ABOVE`` latest are tried, the latest first; a
    run of two lines or more can only start where ``lines[i]`` and ``lines[i + 1]`` were carried
    together (``above_pairs``), so only those are followed."""
    places = above.get(lines[i])
    if not places:
        return None
    best = (places[-1], 1)
    if i + 1 < stop:
        window = len(places) - MAX_ABOVE
        for j, place in reversed(above_pairs.get((lines[i], lines[i + 1]), ())):
            if place < window:
                break
            k = 2
            while i + k < stop and j + k < i and literal[j + k] and lines[j + k] == lines[i + k]:
                k += 1
            if k > best[1]:
                best = (j, k)
    return best


MAX_DELTA_LINES = 2000  # lines that differ, at most, between a re-read and its base (beyond: not short anyway)


def _delta(lines: list[str], base: HeldOutput) -> tuple[AnswerKind, _Writer] | None:
    old = list(base.lines)
    if old == lines or not old:
        return None
    p, n = 0, min(len(old), len(lines))
    while p < n and old[p] == lines[p]:
        p += 1
    q = 0
    while q < n - p and old[-1 - q] == lines[-1 - q]:
        q += 1
    if max(len(old), len(lines)) - p - q > MAX_DELTA_LINES:
        return None  # the diff is bounded in time: a matcher over thousands of changed lines is not
    hunks = unified_hunks(old, lines)
    if not hunks:
        return None
    w = _Writer()
    w.add(PATCH, patch_header(base) + "".join(hunks), base.attempt)
    return AnswerKind.DELTA, w


def unified_hunks(old: list[str], new: list[str], context: int = 1) -> list[str]:
    """Hunks of a unified diff from ``old`` to ``new`` (lines with their ends)."""
    sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
    out = []
    for group in sm.get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        body = []
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                body += [_diff_line(" ", x) for x in old[a1:a2]]
                continue
            body += [_diff_line("-", x) for x in old[a1:a2]]
            body += [_diff_line("+", x) for x in new[b1:b2]]
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@\n" + "".join(body))
    return out


def _range(a: int, b: int) -> str:
    n = b - a
    return f"{a + (1 if n else 0)},{n}"


def _diff_line(sign: str, line: str) -> str:
    return sign + line if line.endswith("\n") else sign + line + "\n" + NO_NEWLINE


# -- expanding -----------------------------------------------------------------------------------


class ExpandError(ValueError):
    """An answer that does not decode: the message says where."""


# a label -> (attempt id, its expanded output: the text, or its lines as ``split_lines`` gives them)
Resolve = Callable[[str], "tuple[int, str | list[str]] | None"]


def expand_in_place(text: str, pieces: Sequence[Piece], resolve: Resolve) -> str:
    """The answer with each reference replaced by what it stands for and everything else as the
    model got it: the ledger's notes, and the line saying which lines of a long output were not
    shown (the agent's cut, kept); a whole reference to an output of which the model was shown only
    the head and tail stands for those (``seen_part``). What to send in place of an answer whose
    sources the model no longer holds. Raises ExpandError as ``expand`` does."""
    shown: list[str] = []
    mine: list[str] = []  # the output so far: what a reference to lines above in it names
    for p in pieces:
        part = text[p.start : p.end]
        if p.kind in (NOTE, CUT):
            shown.append(part)
            continue
        if p.kind == TEXT:
            one = part
        elif p.kind == AGAIN:
            above = split_lines("".join(mine))
            if not 1 <= p.first <= p.last <= len(above):
                raise ExpandError(f"not lines above in this output: {part[:80]!r}")
            one = "".join(above[p.first - 1 : p.last])
        else:
            one = expand(part, (Piece(p.kind, 0, len(part), p.ref, p.first, p.last),), resolve)
            seen = SEEN_CUT_RX.search(part) if p.kind == SAME else None
            if seen is not None:  # the model was shown only its head and tail: so much it stands for
                mine.append(one)
                shown.append(seen_part(one, int(seen.group(1).replace(",", "")), int(seen.group(2).replace(",", ""))))
                continue
        shown.append(one)
        mine.append(one)
    return "".join(shown)


def expand(  # noqa: C901
    text: str,
    pieces: Sequence[Piece],
    resolve: Resolve,
    own: Callable[[], str | None] | None = None,
    *,
    own_lines: Callable[[], list[str]] | None = None,
) -> str:
    """The output an answer stands for, read from its ``text`` (what the model received): literal
    pieces as they are, notes left out, each reference parsed from the text and resolved by its
    label through ``resolve``; the lines a ``cut`` piece says were not shown come from the command's
    own output (``own``: the ledger keeps it; ``own_lines``: its lines, where the caller has them).
    Raises ExpandError when the text and the pieces disagree, a label does not resolve, or a diff
    does not apply."""
    out: list[str] = []
    pos = 0
    for p in pieces:
        if p.start != pos or p.end < p.start or p.end > len(text):
            raise ExpandError(f"piece {p.kind} at {p.start}-{p.end} does not follow on at {pos}")
        pos = p.end
        part = text[p.start : p.end]
        if p.kind == TEXT:
            out.append(part)
        elif p.kind == NOTE:
            continue
        elif p.kind == LINES:
            m = LINES_RX.match(part)
            if m is None or not part.endswith("\n") or "\n" in part[:-1]:
                raise ExpandError(f"not a line reference: {part[:80]!r}")
            first, last = int(m.group(1)), int(m.group(2))
            ref_lines = _lines_of(_resolved(resolve, m.group(3), m.group(4), p))
            if not 1 <= first <= last <= len(ref_lines):
                raise ExpandError(f"lines {first}-{last} are not in {_label(m.group(3), m.group(4))}'s output")
            out.append("".join(ref_lines[first - 1 : last]))
        elif p.kind == SAME:
            m = SAME_RX.match(part)
            if m is None:
                raise ExpandError(f"not a whole-output reference: {part[:80]!r}")
            same = _resolved(resolve, m.group(1), m.group(2), p)
            out.append(same if isinstance(same, str) else "".join(same))
        elif p.kind == AGAIN:
            m = AGAIN_RX.match(part)
            mine = split_lines("".join(out))
            if (
                m is None
                or (int(m.group(1)), int(m.group(2))) != (p.first, p.last)
                or not 1 <= p.first <= p.last <= len(mine)
            ):
                raise ExpandError(f"not lines above in this output: {part[:80]!r}")
            out.append("".join(mine[p.first - 1 : p.last]))
        elif p.kind == CUT:
            m = CUT_RX.match(part)
            whole = own() if own is not None and own_lines is None else None
            if m is None or (whole is None and own_lines is None):
                raise ExpandError(f"not a cut, or no output to take it from: {part[:80]!r}")
            first, last = int(m.group(1)), int(m.group(2))
            mine = own_lines() if own_lines is not None else split_lines(whole)
            if (first, last) != (p.first, p.last) or not 1 <= first <= last <= len(mine):
                raise ExpandError(f"lines {first}-{last} are not lines of this output")
            out.append("".join(mine[first - 1 : last]))
        elif p.kind == PATCH:
            m = PATCH_RX.match(part)
            if m is None:
                raise ExpandError(f"not a diff: {part[:80]!r}")
            base = _lines_of(_resolved(resolve, m.group(1), m.group(2), p))
            out.append("".join(apply_hunks(base, split_lines(part)[1:])))
        else:
            raise ExpandError(f"unknown piece kind {p.kind!r}")
    if pos != len(text):
        raise ExpandError(f"the pieces end at {pos}, the text at {len(text)}")
    return "".join(out)


def _label(step: str, nth: str | None) -> str:
    return f"step {step}" + (f".{nth}" if nth else "")


def _lines_of(output: str | list[str]) -> list[str]:
    return split_lines(output) if isinstance(output, str) else output


def _resolved(resolve: Resolve, step: str, nth: str | None, p: Piece) -> str | list[str]:
    label = _label(step, nth)
    got = resolve(label)
    if got is None:
        raise ExpandError(f"{label} names no earlier output")
    attempt, output = got
    if p.ref is not None and attempt != p.ref:
        raise ExpandError(f"{label} is attempt {attempt}, the answer was built on attempt {p.ref}")
    return output


def diff_shown(answer_text: str, pieces: Sequence[Piece]) -> set[int]:
    """The output lines (0-based) a delta answer's diff carries itself: its context and added lines
    (the model read them there, not in the earlier output the diff applies to)."""
    out: set[int] = set()
    for p in pieces:
        if p.kind != PATCH:
            continue
        line = None
        for text in split_lines(answer_text[p.start : p.end])[1:]:
            m = HUNK_RX.match(text)
            if m is not None:
                line = int(m.group(3)) - (1 if int(m.group(4) or 1) else 0)
                continue
            if line is None or text == NO_NEWLINE:
                continue
            if text[:1] in (" ", "+"):
                out.add(line)
                line += 1
    return out


def apply_hunks(base: list[str], diff: list[str]) -> list[str]:
    """``base`` with the unified-diff hunks in ``diff`` applied; every context and removed line
    must be exactly the base's line there."""
    out: list[str] = []
    at = 0  # next base line to copy
    i = 0
    while i < len(diff):
        m = HUNK_RX.match(diff[i])
        if m is None:
            raise ExpandError(f"not a hunk header: {diff[i][:80]!r}")
        start, count = int(m.group(1)), int(m.group(2) or 1)
        begin = start - 1 if count else start  # an empty old side names the line before it
        if begin < at or begin > len(base):
            raise ExpandError(f"hunk at old line {start} is out of order or past the end")
        out += base[at:begin]
        at = begin
        i += 1
        while i < len(diff) and not HUNK_RX.match(diff[i]):
            line = diff[i]
            sign, body = line[:1], line[1:]
            if i + 1 < len(diff) and diff[i + 1] == NO_NEWLINE:
                body = body[:-1] if body.endswith("\n") else body
                i += 1
            if sign in (" ", "-"):
                if at >= len(base) or base[at] != body:
                    raise ExpandError(f"the diff's line {at + 1} is not the base's")
                at += 1
                if sign == " ":
                    out.append(body)
            elif sign == "+":
                out.append(body)
            else:
                raise ExpandError(f"not a diff line: {line[:80]!r}")
            i += 1
    out += base[at:]
    return out
