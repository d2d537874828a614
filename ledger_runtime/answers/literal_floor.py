"""How many characters spans of an output must carry literally, whatever they refer to (a bound for ``build``).

A reference stands for a run of lines next to each other that a held output showed, or that the answer carried above:
so a line no held output showed, at its first place, goes into the answer as it is. So do the lines of a block of
referable lines too small to hold a reference: fewer than the fewest lines a reference takes, or too few characters to
save anything over the shortest marker. ``build`` gives up spans that would carry more than it can save (a long new
output, a first read, costs one look at its lines, not a search for runs in them).
"""

from __future__ import annotations

import math
from itertools import chain
from typing import Container, Sequence


def carries_more(
    lines: Sequence[str],
    held: Container[str] | None,
    limit: float,
    min_lines: int,
    min_block_chars: int,
    middle: tuple[int, int] | None = None,
) -> bool:
    """Whether spans of ``lines`` carry more than ``limit`` characters of them literally (``literal_floor``); False
    when ``held`` is unknown (None)."""
    if held is None or limit == math.inf:
        return False
    return literal_floor(lines, held, min_lines, min_block_chars, middle, int(limit)) > limit


def literal_floor(
    lines: Sequence[str],
    held: Container[str],
    min_lines: int,
    min_block_chars: int,
    middle: tuple[int, int] | None = None,
    enough: float = math.inf,
) -> int:
    """The characters of ``lines`` that spans of them carry literally at least, counted until they pass ``enough``.

    ``held``: every line a held output showed (more may be in it). A reference takes at least ``min_lines`` lines,
    and a block of referable lines shorter than ``min_block_chars`` holds none. ``middle``: the lines [a, b) the
    answer leaves out (the agent's cut), which no run crosses."""
    a, b = middle if middle is not None else (len(lines), len(lines))
    total = block_chars = block_lines = 0
    above: set[str] = set()  # the lines not held, carried above
    for i in chain(range(a), range(b, len(lines))):
        line = lines[i]
        referable = line in held or line in above
        if not referable or i == b:  # a block of referable lines ends
            if block_lines < min_lines or block_chars < min_block_chars:
                total += block_chars
            block_chars = block_lines = 0
        if referable:
            block_chars += len(line)
            block_lines += 1
        else:
            total += len(line)
            above.add(line)
        if total > enough:
            return total
    if block_lines < min_lines or block_chars < min_block_chars:
        total += block_chars
    return total
