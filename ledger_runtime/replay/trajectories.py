"""Recorded agent runs, as the replay reads them: a ``Trajectory`` per instance, the list of its
``RecordedStep``s (the command, and what the agent saw: return code and output). The formats come
from the adapters, which know their agents' files: each is a ``RecordedFormat``, found through the
``ledger_runtime.trajectories`` entry point group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from ledger_runtime.analysis.submission import NO_SUBMISSION, Submission

if TYPE_CHECKING:
    from ledger_runtime.ledger.observe import Truncation

FORMATS_GROUP = "ledger_runtime.trajectories"


class TrajectoryError(ValueError):
    """A trajectory that cannot be read; the message says why."""


@dataclass
class RecordedStep:
    step: int
    kind: str  # action | submit | timeout | format_error
    command: str | None
    returncode: int | None
    observation: str | None
    call: int | None = None  # index of the assistant message that asked for it
    reply: int | None = None  # index of the message that answered it


@dataclass
class Trajectory:
    instance_id: str
    steps: list[RecordedStep]
    repo: str | None = None
    base_commit: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout: int = 60
    source: str = ""
    prompt_chars: list[int] = field(default_factory=list)  # characters of the conversation before each step
    messages: list[tuple[str, str]] = field(default_factory=list)  # (role, text) as recorded, when known
    format: RecordedFormat | None = None  # what read it (its root, its agent's submission); None: PLAIN

    @property
    def recorded(self) -> RecordedFormat:
        return self.format or PLAIN

    @property
    def commands(self) -> list[RecordedStep]:
        return [s for s in self.steps if s.command]


@dataclass(frozen=True)
class RecordedFormat:
    """An agent's recorded runs: how they are read, and what they take for granted. Its functions
    are module-level ones (a trajectory goes to the replay's worker processes with its format)."""

    name: str
    root: str  # where the recorded commands ran (the paths in them name it)
    submission: Submission  # how that agent submits
    load: Callable[[list[Path], list[str]], Iterator[Trajectory | TrajectoryError]]
    """Every trajectory in the paths (a file that cannot be read yields its TrajectoryError; notes get
    what was skipped)."""
    observation: Callable[[str, int | None], tuple[int | None, str]]
    """A step's recorded observation and return code -> the return code and output the agent saw."""
    with_answer: Callable[[str, str, Truncation], str]
    """A recorded observation message with its output replaced by an answer, as the agent shows it."""


def _nothing(paths: list[Path], notes: list[str]) -> Iterator[Trajectory | TrajectoryError]:
    return iter(())


def _as_recorded(text: str, returncode: int | None) -> tuple[int | None, str]:
    return returncode, text


def _answer_alone(message: str, answer: str, trunc: Truncation) -> str:
    return answer


# a trajectory built in code, by no format: commands at the work tree's root, no submission
PLAIN = RecordedFormat("plain", "", NO_SUBMISSION, _nothing, _as_recorded, _answer_alone)


def formats(problems: list[str] | None = None) -> dict[str, RecordedFormat]:
    """The installed formats, by name; one that cannot be loaded is left out (``problems`` gets why)."""
    out = {}
    for ep in entry_points(group=FORMATS_GROUP):
        try:
            fmt = ep.load()
            if not isinstance(fmt, RecordedFormat):
                raise TypeError(f"{ep.value} is a {type(fmt).__name__}, not a RecordedFormat")
        except Exception as e:  # a broken adapter leaves the others usable
            if problems is not None:
                problems.append(f"the {ep.name} format ({ep.value}) cannot be loaded: {type(e).__name__}: {e}")
            continue
        out[fmt.name] = fmt
    return out
