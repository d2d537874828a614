"""The longest run of lines the model holds, found through the index of adjacent line pairs (issue 42
item 2): over random histories of outputs (lines drawn from a small alphabet, so runs, repeats and
lines printed by many outputs abound; some lines not carried, some outputs out of the window the
model holds, some added out of the order of their steps or twice, some forgotten), ``longest_run`` gives
exactly what trying every place of the line one by one gives: the same source, line and length."""

from __future__ import annotations

import math
import random

import pytest

from ledger_runtime.answers.build import MAX_ABOVE, _run_above
from ledger_runtime.answers.held_output import HeldOutput
from ledger_runtime.held.delivered import MAX_CANDIDATES, MAX_INDEXED_LINES, Delivered


def _output(rng: random.Random, alphabet: list[str], n: int) -> list[str]:
    return [rng.choice(alphabet) for _ in range(n)]


def _held(attempt: int, step: int, lines: list[str], carried: list[bool]) -> HeldOutput:
    return HeldOutput(attempt, step, f"step {step}", "cat x", 0, lines, carried, (), True, f"d{attempt}")


def _whole_by_walking(d: Delivered, attempt: int, first_held: int) -> bool:
    """whole_available as it was before its answers were kept: the chain of references walked every time."""
    stack, seen = [attempt], set()
    while stack:
        a = stack.pop()
        if a in seen:
            continue
        seen.add(a)
        s = d.items.get(a)
        if s is None or s.step < first_held or not s.whole:
            return False
        stack.extend(s.refs)
    return True


def _check(d: Delivered, rng: random.Random, alphabet: list[str], first_held: int) -> int:
    for a in rng.sample(sorted(d.items), min(10, len(d.items))) + [10**6]:
        assert d.whole_available(a, first_held) == _whole_by_walking(d, a, first_held), (a, first_held)
    found = 0
    for _ in range(30):
        lines = _output(rng, alphabet, rng.randint(1, 40))
        for i in range(len(lines)):
            for end in (None, rng.randint(i + 1, len(lines))):
                n = len(lines) if end is None else min(end, len(lines))
                fast = d.longest_run(lines, i, end, first_held)
                cands = d._index.get(lines[i])
                slow = d._longest_run_checked(cands, lines, i, n, first_held) if cands else None
                got = None if fast is None else (fast[0].attempt, fast[1], fast[2])
                want = None if slow is None else (slow[0].attempt, slow[1], slow[2])
                assert got == want, (lines, i, end, first_held)
                assert d.holds(lines[i], first_held) == (slow is not None)
                found += bool(got and got[2] >= 2)
    return found


@pytest.mark.parametrize("seed", range(12))
def test_the_pair_index_finds_what_trying_every_place_finds(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = [f"line {k}\n" for k in range(rng.choice((3, 6, 12)))] + ["\n"]
    d = Delivered()
    step = 0
    runs = 0
    for attempt in range(1, 120):
        step += rng.choice((1, 1, 1, 2)) if rng.random() > 0.05 else -3  # now and then out of order
        lines = _output(rng, alphabet, rng.randint(1, 60))
        carried = [rng.random() > 0.1 for _ in lines]
        again = seed % 3 == 0 and d.items and rng.random() < 0.05  # an attempt added a second time
        held = _held(rng.choice(list(d.items)) if again else attempt, max(step, 0), lines, carried)
        held.whole = rng.random() > 0.1
        held.refs = tuple(rng.sample(sorted(d.items), min(len(d.items), rng.choice((0, 1, 1, 2)))))
        d.add(held)
        if attempt % 17 == 0:
            d.forget(lambda s: s.step >= step - 30)
        if attempt % 10 == 0:
            runs += _check(d, rng, alphabet, first_held=rng.choice((0, step // 2, step - 5, step + 1)))
    assert runs, "runs of two lines or more were found"


def test_more_places_than_are_tried_are_cut_at_the_same_place() -> None:
    """A line printed by more outputs than MAX_CANDIDATES: the runs that start at the older places are
    not tried, by either search."""
    d = Delivered()
    long_run = ["a\n", "b\n", "c\n", "d\n"]
    d.add(_held(1, 1, long_run, [True] * 4))  # the long run, oldest
    for attempt in range(2, MAX_CANDIDATES + 3):
        d.add(_held(attempt, attempt, ["a\n", "x\n"], [True, True]))
    got = d.longest_run(long_run, 0, None, 0)
    assert got is not None and got[2] == 1 and got[0].attempt == MAX_CANDIDATES + 2
    d2 = Delivered()
    d2.add(_held(1, 1, long_run, [True] * 4))
    got = d2.longest_run(long_run, 0, None, 0)
    assert got is not None and (got[0].attempt, got[2]) == (1, 4)


def _run_above_by_trying_each(lines, i, stop, above, literal):
    """The search ``_run_above`` replaced: every one of the MAX_ABOVE latest places, one by one."""
    best = None
    for j in reversed(above.get(lines[i], [])[-MAX_ABOVE:]):
        k = 0
        while i + k < stop and j + k < i and (j + k) in literal and lines[j + k] == lines[i + k]:
            k += 1
        if best is None or k > best[1]:
            best = (j, k)
    return best if best and best[1] else None


@pytest.mark.parametrize("seed", range(20))
def test_runs_above_in_the_same_answer_are_found_through_pairs_as_by_trying_each_place(seed: int) -> None:
    """An answer's references to its own lines above: the pairs of lines it carried give the same
    run as trying each place (over outputs of few distinct lines, some lines not carried)."""
    rng = random.Random(seed)
    lines = _output(rng, [f"{k}\n" for k in range(rng.choice((2, 3, 5)))], 400)
    above: dict[str, list[int]] = {}
    pairs: dict[tuple[str, str], list[tuple[int, int]]] = {}
    literal: set[int] = set()
    carried = bytearray(len(lines))
    for i in range(len(lines)):
        stop = rng.choice((len(lines), min(len(lines), i + rng.randint(1, 5))))
        want = _run_above_by_trying_each(lines, i, stop, above, literal)
        assert _run_above(lines, i, stop, above, pairs, carried) == want, (seed, i)
        if rng.random() < 0.8:  # carried as it is (as _spans does)
            if i - 1 in literal:
                pairs.setdefault((lines[i - 1], lines[i]), []).append((i - 1, len(above[lines[i - 1]]) - 1))
            above.setdefault(lines[i], []).append(i)
            literal.add(i)
            carried[i] = 1


def test_holds_says_whether_a_run_can_start_at_a_line() -> None:
    d = Delivered()
    d.add(_held(1, 1, ["a\n", "b\n"], [True, False]))
    d.add(_held(2, 5, ["c\n"], [True]))
    assert d.holds("a\n", 0) and not d.holds("b\n", 0), "a line the model did not see starts nothing"
    assert not d.holds("a\n", 2) and d.holds("c\n", 2), "nor one of an output out of the model's context"
    assert not d.holds("z\n", 0)


class _EachPlacePool:
    """The pool as it was searched before the pair index: every place of a line tried, one by one."""

    def __init__(self, delivered: Delivered, first_held: int):
        self.d, self.first_held = delivered, first_held

    def longest_run(self, lines, i, end=None):
        cands = self.d._index.get(lines[i])
        n = len(lines) if end is None else min(end, len(lines))
        return self.d._longest_run_checked(cands, lines, i, n, self.first_held) if cands else None


def _spans_by_trying_each(lines, pool, settings, keep_cut=None, again=True):
    """``_spans`` as it was before the pair indexes (at 6619d67, less the ``hopeless`` bound): the oracle."""
    from ledger_runtime.answers import build as b

    w = b._Writer()
    i, used = 0, False
    middle = b._cut_middle(lines, keep_cut) if keep_cut is not None else None
    above: dict[str, list[int]] = {}
    literal: set[int] = set()
    while i < len(lines):
        if middle is not None and i == middle[0]:
            w.add(b.CUT, b.cut_marker(middle[0] + 1, middle[1], middle[2], keep_cut), None, middle[0] + 1, middle[1])
            i = middle[1]
            continue
        stop = middle[0] if middle is not None and i < middle[0] else len(lines)
        run = pool.longest_run(lines, i, stop)
        here = _run_above_by_trying_each(lines, i, stop, above, literal) if again else None
        if here is not None and (run is None or here[1] > run[2]):
            j, k = here
            marker = b.again_marker(j + 1, j + k)
            if (
                k >= settings.min_lines
                and sum(map(len, lines[i : i + k])) - len(marker) >= settings.min_reference_saving
            ):
                w.add(b.AGAIN, marker, None, j + 1, j + k)
                i += k
                used = True
                continue
        if run is not None:
            src, j, k = run
            if k >= settings.min_lines:
                marker = b.lines_marker(src, j + 1, j + k)
                if sum(map(len, lines[i : i + k])) - len(marker) >= settings.min_reference_saving:
                    w.add(b.LINES, marker, src.attempt, j + 1, j + k)
                    i += k
                    used = True
                    continue
        j = i + 1
        above.setdefault(lines[i], []).append(i)
        literal.add(i)
        while j < stop and lines[j] not in above and pool.longest_run(lines, j, stop) is None:
            above[lines[j]] = [j]
            literal.add(j)
            j += 1
        w.add(b.TEXT, "".join(lines[i:j]))
        i = j
    return (w.pieces, "".join(w.parts)) if used else None


@pytest.mark.parametrize("seed", range(10))
def test_spans_are_the_answer_trying_every_place_gives(seed: int) -> None:
    """Whole answers: over random histories and outputs (lines long enough for references to pay, a
    few distinct ones so that they repeat), ``_spans`` with both pair indexes gives the pieces and the
    text the search trying every place gives, with and without references to lines above, with the
    agent's cut kept and with runs of one line allowed."""
    from ledger_runtime.answers.build import DedupeSettings, _spans
    from ledger_runtime.ledger.observe import Truncation

    rng = random.Random(seed)
    alphabet = [f"    statement_{k} = compute(value_{k}, other_{k})\n" for k in range(rng.choice((4, 8, 16)))] + ["\n"]
    d = Delivered()
    for attempt in range(1, 60):
        lines = _output(rng, alphabet, rng.randint(1, 80))
        d.add(_held(attempt, attempt, lines, [rng.random() > 0.1 for _ in lines]))
    settings = DedupeSettings(min_lines=rng.choice((1, 2, 3)))
    compared = 0
    for _ in range(40):
        lines = _output(rng, alphabet, rng.randint(1, 300))
        first_held = rng.choice((0, 20, 50))
        cut = rng.choice((None, Truncation(limit=2000, head=800, tail=800)))
        again = rng.random() < 0.7
        got = _spans(lines, d.at(first_held), settings, keep_cut=cut, again=again)
        want = _spans_by_trying_each(lines, _EachPlacePool(d, first_held), settings, keep_cut=cut, again=again)
        assert (None if got is None else (got[1].pieces, "".join(got[1].parts))) == want, (seed, lines)
        compared += want is not None
    assert compared, "answers with references were compared"


class _NoHeldLines:
    """A pool as ``Delivered.at`` gives it, but not saying which lines it holds: ``build`` then searches
    every output for runs, without the bound on the lines no reference can stand for."""

    def __init__(self, pool):
        self.pool = pool

    def identical(self, output):
        return self.pool.identical(output)

    def base(self, key):
        return self.pool.base(key)

    def longest_run(self, lines, i, end=None):
        return self.pool.longest_run(lines, i, end)

    def holds(self, line):
        return self.pool.holds(line)

    def lines_held(self):
        return None


@pytest.mark.parametrize("seed", range(16))
def test_answers_are_those_built_without_the_bound_on_new_lines(seed: int) -> None:
    """``build`` gives up spans that would carry more literally than it can save (``_hopeless``: the
    lines no held output showed, and blocks of others too small for a reference): over random histories
    (held lines from a small alphabet, new lines among them, some repeated in the same output; outputs
    the agent cuts or not; a long held output whose lines are not kept apart; forgotten outputs), every
    answer is the one built searching for runs."""
    from ledger_runtime.answers.build import DedupeSettings, _hopeless, build, split_lines
    from ledger_runtime.ledger.observe import Truncation

    rng = random.Random(seed)
    old = [f"    held_{k} = compute(value_{k}, other_{k})\n" for k in range(rng.choice((4, 8, 16)))] + ["\n"]
    new = [f"    fresh_{k} = compute(value_{k})\n" for k in range(rng.choice((60, 600)))]
    d = Delivered()
    for attempt in range(1, 40):
        lines = _output(rng, old, rng.randint(1, 80))
        if attempt == 20 and seed % 4 == 0:  # an output too long for its lines to be kept apart
            lines = (new[: len(new) // 2] * MAX_INDEXED_LINES)[: MAX_INDEXED_LINES + 1]
        d.add(_held(attempt, attempt, lines, [rng.random() > 0.1 for _ in lines]))
        if attempt == 30 and (seed % 2 or seed % 8 == 0):  # (and its lines then kept apart again)
            d.forget(lambda s: s.attempt > 10)
    bounded = answers = 0
    for _ in range(60):
        share = rng.choice((0.0, 0.2, 0.5, 0.9, 1.0))
        block = [rng.choice(new) if rng.random() < share else rng.choice(old) for _ in range(rng.randint(1, 400))]
        if rng.random() < 0.2:
            block = new[: len(new) // 2]  # as the long output printed them
        text = "".join(block * rng.choice((1, 1, 2, 5)))  # a block printed again: its new lines refer above
        settings = DedupeSettings(min_lines=rng.choice((1, 2, 3)), min_saving=rng.choice((0, 60, 400)))
        cut = rng.choice(
            (None, Truncation(limit=2000, head=800, tail=800), Truncation(limit=8000, head=4000, tail=4000))
        )
        pool = d.at(rng.choice((0, 15, 35)), None if cut is None else cut.kept(text))
        got = build(text, pool, settings, cut=cut)
        want = build(text, _NoHeldLines(pool), settings, cut=cut)
        assert (got.kind, got.text, got.pieces) == (want.kind, want.text, want.pieces), (seed, text)
        shown_most = cut.head + cut.tail if cut is not None else len(text)
        bound = (cut.seen_chars(len(text)) if cut is not None else len(text)) - settings.min_saving
        give_up = bound if shown_most > bound else math.inf
        for keep_cut in (None, cut) if cut is not None and len(text) >= cut.limit else (None,):
            bounded += _hopeless(split_lines(text), pool.lines_held(), settings, give_up, keep_cut)
        answers += got.kind.value != "raw"
    assert answers, "answers with references were compared"
    assert bounded or d.lines_held() is None, "outputs the bound gave up were compared"


@pytest.mark.parametrize("seed", range(20))
def test_spans_carry_at_least_the_literal_floor(seed: int) -> None:
    """What ``build``'s bound rests on: spans of an output (searched without giving up) carry at least
    ``literal_floor`` characters of it literally, over random histories and outputs of lines of many
    lengths (blocks of referable lines just short of a reference and just long enough), with and
    without the agent's cut kept and references above, runs of one line allowed or not."""
    from ledger_runtime.answers.build import (
        CUT,
        MIN_MARKER_CHARS,
        TEXT,
        DedupeSettings,
        _cut_middle,
        _hopeless,
        _spans,
        cut_marker,
    )
    from ledger_runtime.answers.literal_floor import literal_floor
    from ledger_runtime.ledger.observe import Truncation

    rng = random.Random(seed)
    alphabet = [f"{k:>{rng.randint(1, 70)}}\n" for k in range(rng.choice((6, 12, 40)))] + ["\n"]
    d = Delivered()
    for attempt in range(1, 40):
        lines = _output(rng, alphabet[: len(alphabet) // 2 + 1], rng.randint(1, 60))
        d.add(_held(attempt, attempt, lines, [rng.random() > 0.1 for _ in lines]))
    counted = 0
    for _ in range(80):
        lines = _output(rng, alphabet, rng.randint(1, 200))
        if rng.random() < 0.2:  # lines no held output showed, each once: all of them literal
            lines = [f"new {k}\n" for k in range(rng.randint(1, 300))]
        settings = DedupeSettings(min_lines=rng.choice((1, 2, 3)), min_saving=rng.choice((20, 40, 60)))
        cut = rng.choice((None, Truncation(limit=1500, head=500, tail=500)))
        middle = _cut_middle(lines, cut) if cut is not None else None
        found = _spans(lines, d.at(0), settings, keep_cut=cut, again=rng.random() < 0.7)
        if found is None:  # no reference: every line the agent is shown, literally
            literal = sum(len(x) for k, x in enumerate(lines) if middle is None or not middle[0] <= k < middle[1])
            size = literal + (len(cut_marker(middle[0] + 1, middle[1], middle[2], cut)) if middle and cut else 0)
        else:
            w = found[1]
            literal, size = sum(p.end - p.start for p in w.pieces if p.kind == TEXT), w.size
            assert (middle is not None) == any(p.kind == CUT for p in w.pieces)
        assert not _hopeless(lines, d.lines_held(), settings, size, cut), "spans this long are not given up"
        short = MIN_MARKER_CHARS + settings.min_reference_saving
        floor = literal_floor(lines, d.lines_held(), settings.min_lines, short, middle[:2] if middle else None)
        assert floor <= literal, (seed, lines, settings, cut)
        counted += found is not None and floor > 0
    assert counted, "answers with references and literal lines were compared"


def test_the_literal_floor_leaves_out_a_block_just_long_enough_for_the_shortest_reference() -> None:
    """Two lines of 87 characters together, printed again: the second time they are a reference to
    lines 1-2 above (the shortest marker, saving just the 40 characters asked), so the floor counts
    only their first time and the line between."""
    from ledger_runtime.answers.build import MIN_MARKER_CHARS, TEXT, DedupeSettings, _hopeless, _spans
    from ledger_runtime.answers.literal_floor import literal_floor

    settings = DedupeSettings()
    a, b = "a" * 40 + "\n", "b" * (MIN_MARKER_CHARS + settings.min_reference_saving - 42) + "\n"
    lines = [a, b, "between\n", a, b]
    found = _spans(lines, Delivered().at(0), settings)
    assert found is not None and [p.kind for p in found[1].pieces] == [TEXT, "again"]
    short = MIN_MARKER_CHARS + settings.min_reference_saving
    assert literal_floor(lines, {}, settings.min_lines, short) == len(a + b + "between\n")
    assert literal_floor(lines, {}, settings.min_lines, short + 1) == len("".join(lines)), "one character short"
    floor = len(a + b + "between\n")
    assert not _hopeless(lines, {}, settings, floor, None) and _hopeless(lines, {}, settings, floor - 1, None)
