"""How the wrapped agent submits, as its adapter says: the core knows no marker."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Submission:
    """How the wrapped agent submits, which ends its run: a command that names ``marker``, or an output led by it.

    The agent reads the marker off that output, so it is answered as it is and never reused, and the marker line is
    never read as a line of a file."""

    marker: str = ""

    def in_output(self, output: str) -> bool:
        """Whether ``output`` ends the run: its first line is the marker."""
        if not self.marker:
            return False
        line = first_line(output.lstrip())
        return line is not None and line.strip() == self.marker

    def named_in(self, text: str) -> bool:
        """Whether ``text`` names the marker anywhere; a command that does submits."""
        return bool(self.marker) and self.marker in text

    def is_marker_line(self, line: str) -> bool:
        return bool(self.marker) and line.strip() == self.marker


NO_SUBMISSION = Submission()


def first_line(text: str, start: int = 256) -> str | None:
    """``text.splitlines()[0]`` (None for no lines), read from a prefix growing until it holds a line's end: a step
    asks it of every output, and a long one was split whole for its first line."""
    n = start
    while True:
        lines = text[:n].splitlines()
        if len(lines) > 1 or n >= len(text):
            return lines[0] if lines else None
        n *= 4
