"""``lines.run_length``, the block-at-a-time match of two runs of lines, agrees with the loop it replaced."""

from __future__ import annotations

import random

import pytest

from ledger_runtime.lines import RUN_CHUNK, run_length


def _line_by_line(src, shown, j, lines, i, k, stop) -> int:
    while k < stop and shown[j + k] and src[j + k] == lines[i + k]:
        k += 1
    return k


@pytest.mark.parametrize("seed", range(4))
def test_the_run_found_a_block_at_a_time_is_the_run_found_line_by_line(seed: int) -> None:
    """Random runs across block edges: a line differs, or was not shown, at every place in and around a block; the
    same lists as tuples take the line-by-line path, which must agree too."""
    rnd = random.Random(seed)
    for _ in range(1000):
        n = rnd.randint(0, 3 * RUN_CHUNK + 5)
        src = [f"{rnd.randint(0, 3)}\n" for _ in range(n)]
        shown = bytes(rnd.random() > 0.003 for _ in range(n))
        j = rnd.randint(0, n)
        i = rnd.randint(0, 2 * RUN_CHUNK)
        lines = [f"{rnd.randint(0, 3)}\n" for _ in range(i)] + src[j:]
        for _ in range(rnd.randint(0, 2)):  # a line that differs from its source's
            if len(lines) > i:
                lines[rnd.randrange(i, len(lines))] = "other\n"
        k = rnd.randint(0, 3)
        stop = min(len(lines) - i, n - j) - rnd.choice([0, 0, 1, RUN_CHUNK])
        want = _line_by_line(src, shown, j, lines, i, k, stop)
        assert run_length(src, shown, j, lines, i, k, stop) == want
        assert run_length(tuple(src), list(shown), j, tuple(lines), i, k, stop) == want
