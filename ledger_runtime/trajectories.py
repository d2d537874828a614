"""Recorded agent runs: ``Trajectory`` and its ``RecordedStep``s for the replay, ``Conversation`` for the run's page.

Each format is a ``RecordedFormat`` an adapter registers in the ``ledger_runtime.trajectories`` entry point group; it
may read runs for the replay (``load``), the model's side for the page (``conversation``, ``locate``), or both.
"""

from __future__ import annotations

import os
import stat
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


def is_regular(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a regular file, through links (a record may be read from it)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def regular_only(paths: dict[str, str]) -> dict[str, str]:
    """The entries of ``paths`` (name -> path) that are regular files: an agent's session file that became
    a FIFO or a link to a device would block a read of it, or never end one."""
    return {name: path for name, path in paths.items() if is_regular(path)}


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
class ModelTurn:
    """One model call as the agent recorded it: what the model said and thought, the commands it asked for, its cost.

    What the record does not say is None."""

    text: str = ""
    reasoning: str = ""
    commands: tuple[str, ...] = ()
    input_tokens: int | None = None
    cached_tokens: int | None = None  # of the input, read from the provider's prompt cache
    output_tokens: int | None = None
    cost: float | None = None  # dollars, as the agent reckoned them
    seconds: float | None = None  # how long the call took
    # what the model was sent after the call, as the record has it (its commands' outputs, unmasked): never shown,
    # read for the values the ledger masked in what it kept of them (cli/record.py: secrets_masked)
    received: tuple[str, ...] = ()


@dataclass
class Conversation:
    """The model's side of a run from the agent's own record: the task, each model call in order, the submission."""

    source: str
    turns: list[ModelTurn] = field(default_factory=list)
    task: str = ""
    submission: str | None = None


def _nothing(paths: list[Path], notes: list[str]) -> Iterator[Trajectory | TrajectoryError]:
    return iter(())


def _as_recorded(text: str, returncode: int | None) -> tuple[int | None, str]:
    return returncode, text


def _answer_alone(message: str, answer: str, trunc: Truncation) -> str:
    return answer


@dataclass(frozen=True)
class RecordedFormat:
    """An agent's recorded runs: how they are read, and what they take for granted.

    Its functions are module-level, since a trajectory goes to the replay's worker processes with its format."""

    name: str
    root: str = ""  # where the recorded commands ran (the paths in them name it)
    submission: Submission = NO_SUBMISSION  # how that agent submits
    load: Callable[[list[Path], list[str]], Iterator[Trajectory | TrajectoryError]] | None = None
    """Every trajectory in the paths (a file that cannot be read yields its TrajectoryError; notes get
    what was skipped). None: the replay cannot read this agent's records."""
    observation: Callable[[str, int | None], tuple[int | None, str]] = _as_recorded
    """A step's recorded observation and return code -> the return code and output the agent saw."""
    with_answer: Callable[[str, str, Truncation], str] = _answer_alone
    """A recorded observation message with its output replaced by an answer, as the agent shows it."""
    locate: Callable[[Path], list[Path]] | None = None
    """The agent's records of the run that kept this ledger file (beside it, or where the adapter puts
    them), oldest first; none when there are none."""
    conversation: Callable[[Path], Conversation] | None = None
    """A record read as the model's side of the run (raises TrajectoryError, saying why, when it is
    not one)."""


# a trajectory built in code, by no format: commands at the work tree's root, no submission
PLAIN = RecordedFormat("plain", "", NO_SUBMISSION, _nothing, _as_recorded, _answer_alone)


def read_each(fmt: RecordedFormat, paths: list[Path], notes: list[str]) -> Iterator[Trajectory | TrajectoryError]:
    """Every trajectory ``fmt`` reads in ``paths``, each path read on its own: a file its reader breaks on
    (a shape it never saw) yields a TrajectoryError saying so, and the other paths are read all the same."""
    if fmt.load is None:
        return
    for path in paths:
        try:
            yield from fmt.load([path], notes)
        except TrajectoryError as e:
            yield e
        except Exception as e:  # an adapter's reader that breaks costs that path only
            yield TrajectoryError(f"{path}: the {fmt.name} reader failed: {type(e).__name__}: {_one_line(e)}")


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 200 else text[:199] + "…"


def formats(problems: list[str] | None = None) -> dict[str, RecordedFormat]:
    """The installed formats by name; one that cannot be loaded is left out, and ``problems`` gets why."""
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


def conversation_of(ledger: Path, record: Path | None = None, problems: list[str] | None = None) -> Conversation | None:  # noqa: C901
    """The model's side of the run that kept ``ledger``, from ``record`` or the records found beside it; else None.

    A run recorded in several files reads as one; ``problems`` gets why a record could not be read."""
    readers = [f for f in formats(problems).values() if f.conversation is not None]
    if record is not None:
        why = []
        for f in readers:
            try:
                return f.conversation(record)  # type: ignore[misc]
            except TrajectoryError as e:
                why.append(str(e))
            except Exception as e:  # an adapter's reader that breaks costs the page its words, nothing more
                why.append(f"{record}: the {f.name} reader failed: {type(e).__name__}: {e}")
        if problems is not None:
            problems.append("; ".join(why) if why else f"{record}: no installed format reads records")
        return None
    for f in readers:
        if f.locate is None:
            continue
        try:
            found = f.locate(ledger)
        except Exception as e:  # a broken adapter: the page goes on without its record
            if problems is not None:
                problems.append(f"the {f.name} format could not look for records: {type(e).__name__}: {e}")
            continue
        parts = []
        for path in found:
            if not is_regular(path):
                if problems is not None:
                    problems.append(f"{path}: not a regular file (a FIFO, a device or a directory): not read")
                continue
            try:
                parts.append(f.conversation(path))  # type: ignore[misc]
            except TrajectoryError as e:
                if problems is not None:
                    problems.append(str(e))
            except Exception as e:
                if problems is not None:
                    problems.append(f"{path}: the {f.name} reader failed: {type(e).__name__}: {e}")
        if parts:
            whole = Conversation(", ".join(c.source for c in parts), [t for c in parts for t in c.turns])
            whole.task = next((c.task for c in parts if c.task), "")
            whole.submission = next((c.submission for c in reversed(parts) if c.submission is not None), None)
            return whole
    return None
