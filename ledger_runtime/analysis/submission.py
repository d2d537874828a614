"""What a submission looks like for the agent being wrapped: the adapter says (the core knows no
agent's marker)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Submission:
    """How the wrapped agent submits its work, which ends its run: a command that names ``marker``,
    or an output whose first line is ``marker``. A submission's output is always answered as it is
    (the agent reads the marker off it), it is never reused, and the marker line is never taken for
    a line of a file. An agent without one (``NO_SUBMISSION``) never submits through a command."""

    marker: str = ""

    def in_output(self, output: str) -> bool:
        """An output that ends the run: its first line is the marker."""
        if not self.marker:
            return False
        lines = output.lstrip().splitlines()
        return bool(lines) and lines[0].strip() == self.marker

    def named_in(self, text: str) -> bool:
        """The marker appears anywhere in ``text``: a command that submits, an output that nothing
        may move it in."""
        return bool(self.marker) and self.marker in text

    def is_marker_line(self, line: str) -> bool:
        return bool(self.marker) and line.strip() == self.marker


NO_SUBMISSION = Submission()
