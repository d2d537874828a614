"""Answers that refer to other outputs, kept because an agent that keeps only its last steps may drop a source first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class StandingAnswer:
    """An answer that refers to other outputs, as the model got it, and what it stands for."""

    step: int  # of the answer
    refs: tuple[int, ...]
    answer: str  # as the model got it
    in_place: str | None  # its references replaced by what they stand for (None: not kept)
    seen: bytes = b""  # per line of the output: the model has it (literally or through a reference): 0 or 1


class StandingAnswers:
    """Answers that refer to other outputs, with what each stands for, to send expanded once a source is gone.

    Past ``limit`` characters the oldest whose sources the model still holds keeps only its references, later sent as a
    line saying to run the command again. What is kept depends only on the answers in order and which sources the model
    held at each, so a ledger read again keeps the same."""

    def __init__(self, limit: int = 32 * 1024 * 1024):
        self.limit = limit
        self.items: dict[int, StandingAnswer] = {}
        self.chars = 0

    def keep(
        self,
        attempt: int,
        step: int,
        refs: tuple[int, ...],
        answer: str,
        in_place: str | None,
        resent_as: Callable[[StandingAnswer], bool],
        seen: bytes = b"",
    ) -> None:
        """Keeps an answer; one whose sources left the model (``resent_as``) stays whole: it may have been sent so."""
        self.items[attempt] = StandingAnswer(step, tuple(refs), answer, in_place, seen)
        self.chars += len(answer) + len(in_place or "")
        if self.chars <= self.limit:
            return  # under the limit: no look at the others (a long run keeps thousands)
        for a, item in list(self.items.items()):
            if self.chars <= self.limit:
                break
            if item.in_place is not None and not resent_as(item):
                self.chars -= len(item.in_place)
                self.items[a] = StandingAnswer(item.step, item.refs, item.answer, None, item.seen)

    def get(self, attempt: int) -> StandingAnswer | None:
        return self.items.get(attempt)

    def forget(self, held_next: Callable[[int], bool]) -> None:
        """Drops the answers whose own step the model no longer holds."""
        for a in [a for a, item in self.items.items() if not held_next(item.step)]:
            item = self.items.pop(a)
            self.chars -= len(item.answer) + len(item.in_place or "")


__all__ = ["StandingAnswers", "StandingAnswer"]
