"""Answers that refer to other outputs, and what they stand for: an agent that keeps only its last
steps may drop an output while an answer that refers to it stays (``Held.outlived``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass
class _Standing:
    step: int  # of the answer
    refs: tuple[int, ...]
    answer: str  # as the model got it
    in_place: str | None  # its references replaced by what they stand for (None: dropped, or never had)
    sent: bool = False  # handed out in place of the answer: kept as it is from then on


class Standing:
    """Answers that refer to other outputs, in an agent that keeps only its last steps, and what each
    stands for (the output as the command printed it, in memory only: what is stored is masked), so
    that one whose source leaves the model's context before it does can be sent expanded. At most
    ``limit`` characters are kept: past it the oldest not yet handed out is then only named."""

    def __init__(self, limit: int = 32 * 1024 * 1024):
        self.limit = limit
        self.items: dict[int, _Standing] = {}
        self.chars = 0

    def keep(self, attempt: int, step: int, refs: tuple[int, ...], answer: str, in_place: str | None) -> None:
        self.items[attempt] = _Standing(step, tuple(refs), answer, in_place)
        self.chars += len(answer) + len(in_place or "")
        for item in self.items.values():
            if self.chars <= self.limit:
                break
            if not item.sent and item.in_place is not None:
                self.chars -= len(item.in_place)
                item.in_place = None

    def get(self, attempt: int) -> _Standing | None:
        return self.items.get(attempt)

    def forget(self, holds: Callable[[int], bool]) -> None:
        """Drop the answers the model no longer holds itself and that were never sent in place (one
        that was is sent so from then on, wherever the agent keeps it)."""
        for a in [a for a, item in self.items.items() if not item.sent and not holds(item.step)]:
            item = self.items.pop(a)
            self.chars -= len(item.answer) + len(item.in_place or "")


__all__ = ["Standing"]
