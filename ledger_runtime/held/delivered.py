"""The output lines each earlier answer delivered to the model, for the dedupe of the next answer.

A line is delivered when its answer carried it literally and the model saw it, uncut, while its attempt is in context. A
reference may only point at delivered lines, or at an output the model can have whole (``whole_available``).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, replace
from itertools import accumulate, compress
from typing import Callable, Container, Iterable, Sequence

from ledger_runtime.answers.build import AGAIN, CUT, LINES, NOTE, PATCH, SAME, TEXT, Answer, Piece, split_lines
from ledger_runtime.answers.held_output import HeldOutput
from ledger_runtime.workspace.hashing import digest_bytes

MAX_CANDIDATES = 48  # positions tried per starting line (the most recent first)
MAX_INDEXED_LINES = 20000  # per attempt
MAX_LINE_CHARS = 4000  # longer lines are not indexed as run starts


def output_digest(output: str) -> str:
    return digest_bytes(output.encode("utf-8", "surrogateescape"))


def delivered_lines(
    output: str, answer: Answer, visible: tuple[int, int] | None, lines: list[str] | None = None
) -> tuple[list[str], list[bool]]:
    """The output's lines, and for each whether the answer carried it literally where the model saw it."""
    lines = lines if lines is not None else split_lines(output)
    n = len(answer.text)
    body = [p for p in answer.pieces if p.kind != NOTE]
    first = body[0] if len(body) == 1 else None
    if (
        first is not None
        and first.kind == TEXT
        and first.end == n
        and first.end - first.start == len(output)
        and answer.text.endswith(output)
    ):  # a raw answer (the ledger's notes before it): a long output costs no loop per line
        return lines, shown_whole(lines, n, visible, first.start)
    literal = [False] * len(lines)

    def seen(a: int, b: int) -> bool:
        if visible is None:
            return True
        head, tail = visible
        return b <= head or (tail > 0 and a >= n - tail)

    line = 0  # output line the next output-bearing piece starts at
    for p in answer.pieces:
        if p.kind == TEXT:
            pos = p.start
            for part in split_lines(answer.text[p.start : p.end]):
                # an answer's line that is not the output's line (a partial output recorded against
                # the completed one) is not delivered
                if line < len(lines) and part == lines[line]:
                    literal[line] = seen(pos, pos + len(part))
                line += 1
                pos += len(part)
        elif p.kind in (LINES, CUT, AGAIN):
            line += p.last - p.first + 1
        elif p.kind in (SAME, PATCH):
            line = len(lines)
    return lines, literal


def shown_whole(lines: list[str], n: int, visible: tuple[int, int] | None, at: int = 0) -> list[bool]:
    """Per line of an output carried as it is from character ``at`` of the answer: whether it lies in the part shown."""
    if visible is None:
        return [True] * len(lines)
    head, tail = visible
    marks = list(accumulate(map(len, lines), initial=at))  # where each line starts, and where the last ends
    in_head = bisect_right(marks, head, 1) - 1  # lines ending by ``head``
    if tail <= 0:
        return [True] * in_head + [False] * (len(lines) - in_head)
    from_tail = bisect_left(marks, n - tail, 0, len(lines))  # lines starting at or after the tail
    if from_tail <= in_head:
        return [True] * len(lines)
    return [True] * in_head + [False] * (from_tail - in_head) + [True] * (len(lines) - from_tail)


def seen_lines(
    output: str, answer: Answer, visible: tuple[int, int] | None, delivered: tuple[list[str], list[bool]] | None = None
) -> list[bool]:
    """Per output line: whether the model has it now, literally or through a reference to a line it saw."""
    lines, literal = delivered or delivered_lines(output, answer, visible)
    out = list(literal)
    n = len(answer.text)

    def seen(p: Piece) -> bool:
        if visible is None:
            return True
        head, tail = visible
        return p.end <= head or (tail > 0 and p.start >= n - tail)

    line = 0
    for p in answer.pieces:
        if p.kind == TEXT:
            line += len(split_lines(answer.text[p.start : p.end]))
        elif p.kind in (LINES, AGAIN):
            k = p.last - p.first + 1
            if seen(p):
                out[line : line + k] = [True] * k
            line += k
        elif p.kind == CUT:  # not shown
            line += p.last - p.first + 1
        elif p.kind in (SAME, PATCH):
            if seen(p) and visible is None:  # a cut diff: which of its lines the model missed is unclear
                out = [True] * len(lines)
            line = len(lines)
    return out[: len(lines)]


class Delivered:
    """The earlier answers the model holds; ``at`` asks its questions for one answer."""

    def __init__(self) -> None:
        self.items: dict[int, HeldOutput] = {}
        self._index: dict[str, list[tuple[int, int]]] = {}  # line -> (attempt, line index), in the order added
        # Where runs of two and of three lines or more can start: (line, the next) -> the latest
        # (attempt, line index, place in _index[line]) where both were carried; (line, the next two) ->
        # every such place of the three, in the order added
        self._pairs: dict[tuple[str, str], tuple[int, int, int]] = {}
        self._triples: dict[tuple[str, str, str], list[tuple[int, int, int]]] = {}
        self._by_digest: dict[str, list[int]] = {}
        self._by_key: dict[str, list[int]] = {}
        self._lines: dict[str, str] = {}  # every line held, once
        self._lines_all = True  # _lines holds every line of every output held (a long one's are not interned)
        self._min_step: int | None = None  # the earliest step held
        self._steps_rise = True  # the outputs were added in the order of their steps
        self._readded = False  # an attempt was added twice (its older index entries point at the newer)
        self._whole: dict[int, bool] = {}  # whole_available's answers, for the first step held below
        self._whole_for: int | None = None
        self._scanned: dict[str, _Scanned] = {}  # identical's scan of each digest's outputs, as far as it went

    def add(self, shown: HeldOutput, keys: Iterable[str] = ()) -> None:
        # one copy of each output and of each line, however often they were printed (a long run
        # re-reads the same files: memory grows with what was new, not with the steps)
        same = self._by_digest.get(shown.digest)
        first = self.items.get(same[-1]) if same else None
        if first is not None and first.lines == shown.lines:
            shown.lines = first.lines
        elif len(shown.lines) <= MAX_INDEXED_LINES:  # (a longer output costs its own memory, not a loop a line)
            shown.lines = [self._lines.setdefault(line, line) for line in shown.lines]
        else:
            self._lines_all = False
        shown.carried = bytes(shown.carried)  # a byte a line, not a pointer: a long run holds many
        if shown.attempt in self.items:
            self._readded = True
            self._whole, self._scanned = {}, {}
        last = self.items[next(reversed(self.items))].step if self.items else shown.step
        self._steps_rise = self._steps_rise and shown.step >= last
        self._min_step = shown.step if self._min_step is None else min(self._min_step, shown.step)
        self.items[shown.attempt] = shown
        self._by_digest.setdefault(shown.digest, []).append(shown.attempt)
        for k in keys:
            self._by_key.setdefault(k, []).append(shown.attempt)
        self._index_lines(shown)

    def _index_lines(self, shown: HeldOutput) -> None:
        """Index the lines of ``shown`` the model saw, and the pairs of them standing together: ``_place`` for each,
        written out in one loop (a first read of a long file indexes thousands of lines on the command's path)."""
        lines, carried, attempt = shown.lines, shown.carried, shown.attempt
        index, pairs, triples = self._index, self._pairs, self._triples
        n = len(lines)
        indexed = 0
        for j in compress(range(n), carried):  # the lines the model saw, found in C
            line = lines[j]
            if len(line) > MAX_LINE_CHARS:
                continue
            places = index.get(line)
            if places is None:
                places = index[line] = []
            k = j + 1
            if k < n and carried[k]:
                entry = (attempt, j, len(places))
                nxt = lines[k]
                pairs[line, nxt] = entry
                k += 1
                if k < n and carried[k]:
                    three = (line, nxt, lines[k])
                    same = triples.get(three)
                    if same is None:
                        triples[three] = [entry]
                    else:
                        same.append(entry)
            places.append((attempt, j))
            indexed += 1
            if indexed >= MAX_INDEXED_LINES:
                break

    def _place(self, s: HeldOutput, j: int) -> None:
        """Index line ``j`` of ``s``, a line the model saw, after every place indexed before it."""
        lines, carried, line = s.lines, s.carried, s.lines[j]
        places = self._index.setdefault(line, [])
        if j + 1 < len(lines) and carried[j + 1]:
            entry = (s.attempt, j, len(places))
            self._pairs[line, lines[j + 1]] = entry
            if j + 2 < len(lines) and carried[j + 2]:
                self._triples.setdefault((line, lines[j + 1], lines[j + 2]), []).append(entry)
        places.append((s.attempt, j))

    def lines_held(self) -> Container[str] | None:
        """Every line of every output held, or None while an output of more than MAX_INDEXED_LINES lines is held
        (its lines are not kept apart): a run can be made of none but these."""
        return self._lines if self._lines_all else None

    def intern(self, line: str) -> str:
        """The copy of ``line`` the held outputs share, or ``line`` itself."""
        return self._lines.get(line, line)

    def forget(self, keep: Callable[[HeldOutput], bool]) -> None:
        """Drops what the model no longer holds, which keeps the index small in long runs."""
        gone = {a for a, s in self.items.items() if not keep(s)}
        if not gone:
            return
        for a in gone:
            del self.items[a]
        self._whole, self._scanned = {}, {}
        for table in (self._by_digest, self._by_key):
            for k in list(table):
                table[k] = [a for a in table[k] if a not in gone]
                if not table[k]:
                    del table[k]
        index = self._index
        self._index, self._pairs, self._triples = {}, {}, {}
        for line, places in index.items():  # the places kept, in the order they were added
            for a, j in places:
                if a in gone:
                    continue
                s = self.items[a]
                if j < len(s.lines) and s.lines[j] == line:
                    self._place(s, j)
                else:  # a place of an attempt added again, in its older output: kept, as it was
                    self._index.setdefault(line, []).append((a, j))
        self._lines = {line: line for s in self.items.values() for line in s.lines}
        self._lines_all = True
        steps = [s.step for s in self.items.values()]
        self._min_step = min(steps, default=None)
        self._steps_rise = all(a <= b for a, b in zip(steps, steps[1:]))

    def held_before(self, step: int) -> bool:
        """Whether an output of a step before ``step`` may be held: False says none is, without a look at each."""
        return self._min_step is not None and self._min_step < step

    def at(self, first_held: int, window: tuple[int, int] | None = None) -> HeldPool:
        """The outputs the model holds from step ``first_held`` on, for ``answers.build``.

        ``window`` is how the agent will cut the output being answered: head and tail characters kept, or None."""
        return HeldPool(self, first_held, window)

    def _live(self, attempt: int, first_held: int) -> HeldOutput | None:
        s = self.items.get(attempt)
        return s if s is not None and s.step >= first_held else None

    def whole_available(self, attempt: int, first_held: int) -> bool:
        """Whether the model can have an attempt's whole output: an uncut answer seen whole, and so for its references.

        References are followed without recursion, since a long run makes long chains of them (a file re-read after
        each edit: a diff of a diff of ...). Each answer is kept for the step held, so a chain is followed once: held
        outputs are never changed, only dropped (``forget``), which drops what was worked out from them."""
        if first_held != self._whole_for:
            self._whole, self._whole_for = {}, first_held
        known = self._whole.get(attempt)
        if known is not None:
            return known
        stack, seen, ok = [attempt], set(), True
        while stack:
            a = stack.pop()
            if a in seen:
                continue
            seen.add(a)
            known = self._whole.get(a)
            if known is True:
                continue
            s = self._live(a, first_held) if known is None else None
            if s is None or not s.whole:
                ok = False
                break
            stack.extend(s.refs)
        self._whole[attempt] = ok
        return ok

    def _root(self, s: HeldOutput, first_held: int) -> HeldOutput:
        """The identical output ``s`` refers to, if the model has it whole: references never chain through repeats."""
        seen = {s.attempt}
        while s.same_as is not None and s.same_as not in seen and self.whole_available(s.same_as, first_held):
            seen.add(s.same_as)
            s = self.items[s.same_as]
        return s

    # -- what answers.Pool asks (through ``at``) --------------------------------------------------

    def identical(self, output: str, first_held: int, window: tuple[int, int] | None) -> HeldOutput | None:
        """The latest earlier output identical to ``output`` the model can have whole, preferring one seen literally.

        For an output the agent cuts anyway, one shown as it is and cut alike also serves: the model would see the same
        again. The outputs of one digest are scanned from the latest down; what the scan of the older ones found is
        kept (``_Scanned``), so a long run's hundredth repeat of an output scans the repeats since the last call, not
        all of them: what it depends on (the outputs held, ``whole_available``) changes only when ``forget`` or an
        attempt added again drops what was kept."""
        digest = output_digest(output)
        ids = self._by_digest.get(digest, [])
        kept = self._scanned.get(digest)
        if kept is None or (kept.first_held, kept.window) != (first_held, window) or kept.upto > len(ids):
            kept = _Scanned(first_held, window, 0, None, None)
        hit, fallback = self._scan(reversed(ids[kept.upto :]), first_held, window)
        if hit is None:
            hit, fallback = kept.hit, fallback or kept.fallback
        self._scanned[digest] = _Scanned(first_held, window, len(ids), hit, fallback)
        if hit is not None:
            return hit
        source, cut = fallback or (None, False)
        return replace(source, seen_cut=source.agent_cut) if cut and source is not None else source

    def _scan(
        self, ids: Iterable[int], first_held: int, window: tuple[int, int] | None
    ) -> tuple[HeldOutput | None, tuple[HeldOutput, bool] | None]:
        """``identical``'s scan of ``ids``, latest first: the output it stops at (one seen literally, or the one a
        repeat was the same as), else the first fallback: the source and whether it is one the agent cut alike."""
        fallback: tuple[HeldOutput, bool] | None = None
        for a in ids:
            s = self._live(a, first_held)
            if s is None:
                continue
            if not self.whole_available(a, first_held):
                if window is not None and s.agent_cut == window and fallback is None:
                    fallback = (s, True)
                continue
            if all(s.carried) and not s.refs:
                return s, fallback
            root = self._root(s, first_held)
            if root is not s and all(root.carried) and not root.refs:
                return root, fallback  # the output this repeat was the same as: no need to look further back
            fallback = fallback or (root, False)
        return None, fallback

    def seen_through(self, attempt: int) -> list[bool] | None:
        """The lines the model saw of an output it was not shown all of; None when it saw all of it."""
        s = self.items.get(attempt)
        return list(s.carried) if s is not None and (s.agent_cut is not None or not s.whole) else None

    def base(self, key: str, first_held: int) -> HeldOutput | None:
        """The latest earlier output of the same read (``key``) that the model can have whole, through ``_root``."""
        for a in reversed(self._by_key.get(key, [])):
            if self.whole_available(a, first_held):
                return self._root(self.items[a], first_held)
        return None

    def longest_run(
        self, lines: Sequence[str], i: int, end: int | None, first_held: int
    ) -> tuple[HeldOutput, int, int] | None:
        """The longest run of ``lines[i:end]`` a held output carried literally: source, its line index, length.

        Only the ``MAX_CANDIDATES`` latest places of ``lines[i]`` are tried: a blank or a brace stands in many
        outputs, and an old run is as good as a new one. The first run to reach ``end`` ends the search; of
        equally long runs the latest wins. A run of two lines can only start where ``lines[i]`` and
        ``lines[i + 1]`` stood together, one of three or more where the next stood after them too: those
        places are looked up (the latest pair, every triple), not searched."""
        cands = self._index.get(lines[i])
        if not cands:
            return None
        n = len(lines) if end is None else min(end, len(lines))
        start = self._live_from(cands, first_held)
        if start is None:
            return self._longest_run_checked(cands, lines, i, n, first_held)
        if start >= len(cands):
            return None
        window = max(start, len(cands) - MAX_CANDIDATES)  # the places tried: cands[window:]
        a, j = cands[-1]
        best = (self.items[a], j, 1 if i < n else 0)
        if i + 1 >= n:
            return best
        pair = self._pairs.get((lines[i], lines[i + 1]))
        if pair is None or pair[2] < window:
            return best
        best = (self.items[pair[0]], pair[1], 2)  # the latest of two lines: longer runs are three's
        if i + 2 >= n:
            return best
        return self._longest_of_three(lines, i, n, window, best)

    def _longest_of_three(
        self, lines: Sequence[str], i: int, n: int, window: int, best: tuple[HeldOutput, int, int]
    ) -> tuple[HeldOutput, int, int]:
        """The longest run of three lines or more from ``lines[i]`` at a place from ``window`` on, else ``best``."""
        for a, j, place in reversed(self._triples.get((lines[i], lines[i + 1], lines[i + 2]), ())):
            if place < window:
                break
            s = self.items[a]
            src, lit = s.lines, s.carried
            k = 3
            while i + k < n and j + k < len(src) and lit[j + k] and src[j + k] == lines[i + k]:
                k += 1
            if k > best[2]:
                best = (s, j, k)
                if i + k == n:
                    break
        return best

    def holds(self, line: str, first_held: int) -> bool:
        """Whether an output the model holds carried ``line`` literally (a run can start at it)."""
        cands = self._index.get(line)
        if not cands:
            return False
        start = self._live_from(cands, first_held)
        if start is None:
            return any(self._live(a, first_held) is not None for a, _ in cands)
        return start < len(cands)

    def _live_from(self, cands: list[tuple[int, int]], first_held: int) -> int | None:
        """Where the places the model holds begin in ``cands`` (all after it are held too); None where
        that is not so simple (outputs added out of the order of their steps, an attempt added twice)."""
        if self._readded:
            return None
        if self._min_step is not None and self._min_step >= first_held:
            return 0
        if not self._steps_rise:
            return None
        return bisect_left(cands, first_held, key=lambda c: self.items[c[0]].step)

    def _longest_run_checked(
        self, cands: list[tuple[int, int]], lines: Sequence[str], i: int, n: int, first_held: int
    ) -> tuple[HeldOutput, int, int] | None:
        """``longest_run`` with every place checked for being held, one by one."""
        best: tuple[HeldOutput, int, int] | None = None
        tried = 0
        for a, j in reversed(cands):
            s = self._live(a, first_held)
            if s is None:
                continue
            tried += 1
            if tried > MAX_CANDIDATES:
                break
            src, lit = s.lines, s.carried
            k = 0
            while i + k < n and j + k < len(src) and lit[j + k] and src[j + k] == lines[i + k]:
                k += 1
            if best is None or k > best[2]:
                best = (s, j, k)
                if i + k == n:
                    break
        return best


@dataclass(frozen=True)
class _Scanned:
    """How ``identical``'s scan of one digest's first ``upto`` outputs ended, for one first step held and cut."""

    first_held: int
    window: tuple[int, int] | None
    upto: int
    hit: HeldOutput | None
    fallback: tuple[HeldOutput, bool] | None


@dataclass(frozen=True)
class HeldPool:
    """The outputs the model holds for one answer (``answers.Pool``), given the first held step and the agent's cut."""

    delivered: Delivered
    first_held: int
    window: tuple[int, int] | None = None

    def identical(self, output: str) -> HeldOutput | None:
        return self.delivered.identical(output, self.first_held, self.window)

    def base(self, key: str) -> HeldOutput | None:
        return self.delivered.base(key, self.first_held)

    def longest_run(self, lines: Sequence[str], i: int, end: int | None = None) -> tuple[HeldOutput, int, int] | None:
        return self.delivered.longest_run(lines, i, end, self.first_held)

    def holds(self, line: str) -> bool:
        return self.delivered.holds(line, self.first_held)

    def lines_held(self) -> Container[str] | None:
        return self.delivered.lines_held()


__all__ = ["Delivered", "HeldPool", "delivered_lines", "seen_lines", "output_digest", "shown_whole"]
