"""Long outputs stored as printed, so that the next one like them is masked only where it differs.

Masking is line by line (redact.py), so when an output begins and ends with the same whole lines as an earlier clean
output, only the lines between need the patterns. A long file read again then costs the patterns over what changed, not
over every line.
"""

from __future__ import annotations

from collections import deque
from typing import Callable

from ledger_runtime.lines import common_prefix, common_suffix

MIN_CHARS = 64 * 1024  # shorter outputs are masked whole: it costs less than looking for a twin
KEEP = 4  # earlier clean outputs compared with
PEEK = 1024  # ...those that begin or end as the new one does


class CleanOutputs:
    """The last few long outputs stored as printed."""

    def __init__(self, keep: int = KEEP, min_chars: int = MIN_CHARS):
        self.min_chars = min_chars
        self._kept: deque[str] = deque(maxlen=keep)

    def masked(self, output: str, mask: Callable[[str], str]) -> str:
        """``mask(output)``, looking only at the lines that differ from a clean earlier output with the same ends."""
        twins = [old for old in self._kept if old[:PEEK] == output[:PEEK] or old[-PEEK:] == output[-PEEK:]]
        if len(output) < self.min_chars or not twins:
            return mask(output)
        start, end = min((self._differing(old, output) for old in twins), key=lambda r: r[1] - r[0])
        middle = output[start:end]
        if middle == mask(middle):
            return output
        return mask(output)

    def remember(self, output: str) -> None:
        """Keeps ``output``, which was stored as printed: nothing in it was masked."""
        if len(output) >= self.min_chars and output not in self._kept:
            self._kept.append(output)

    @staticmethod
    def _differing(old: str, new: str) -> tuple[int, int]:
        """The whole lines [start, end) of ``new`` outside which it shares its first and last lines with ``old``."""
        p = common_prefix(old, new)
        start = new.rfind("\n", 0, p) + 1  # the line end before it is common: a line start in both
        s = common_suffix(old, new)
        q = len(new) - s  # new[q:] is old's end
        if s == 0:
            end = len(new)
        elif q == 0 and (len(old) == len(new) or old[len(old) - len(new) - 1] == "\n"):
            end = 0  # all of new is whole lines at old's end
        else:  # from the first line start whose line end before it is in the common end
            k = new.find("\n", q)
            end = len(new) if k < 0 else k + 1
        return start, max(start, end)
