"""One earlier output the model holds (``HeldOutput``): what an answer's references name (build.py),
and the one type for it in the held room's bookkeeping (held/delivered.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass
class HeldOutput:
    """An earlier output as the model holds it: which attempt, how references name it (``label``:
    "step 9", or "step 9.2" for the second command of step 9), its command shortened for display, its
    exit code, its lines, and which of them the model got literally (``carried``)."""

    attempt: int
    step: int
    label: str
    command: str
    exit_code: int | None
    lines: Sequence[str]
    carried: Sequence[bool] | bytes  # per output line: delivered literally and visible (held as bytes: 0 or 1)
    refs: tuple[int, ...]  # attempts its references point at
    whole: bool  # the model saw all of the answer, and the answer left none of the output out
    digest: str
    epoch_after: int = 0
    same_as: int | None = None  # its answer was only a reference to this attempt's identical output
    agent_cut: tuple[int, int] | None = None  # the output as it is, of which the agent showed only these characters
    in_diff: frozenset[int] = frozenset()  # lines a delta answer's diff carried (not references' sources)
    seen_cut: tuple[int, int] | None = None  # as a reference's source: the model saw these first and last characters


__all__ = ["HeldOutput"]
