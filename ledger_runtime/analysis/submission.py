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
        lines = output.lstrip().splitlines()
        return bool(lines) and lines[0].strip() == self.marker

    def named_in(self, text: str) -> bool:
        """Whether ``text`` names the marker anywhere; a command that does submits."""
        return bool(self.marker) and self.marker in text

    def is_marker_line(self, line: str) -> bool:
        return bool(self.marker) and line.strip() == self.marker


NO_SUBMISSION = Submission()
