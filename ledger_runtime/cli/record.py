"""The model's side of a run beside its ledger, for the run's page: each call of the model, as the
agent recorded it (trajectories.py: ``Conversation``, read by the adapter that knows the
agent's files), matched to the steps whose commands it asked for.

Matching is by the commands themselves, in order: the ledger's step numbers are the adapter's (a
model call for mini-swe-agent, a command for Codex), and a call may ask for several commands or for
none (a format error, a last message). A call whose commands the ledger never saw, and a step whose
call the record does not have, each stand alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ledger_runtime.trajectories import ModelTurn


@dataclass
class Entry:
    """One place on the page: a call of the model (None: the record does not have it) and the
    commands of it the ledger recorded, in order."""

    turn: ModelTurn | None
    attempts: list[Any] = field(default_factory=list)


def _key(command: str) -> str:
    return command.strip()


LOOKAHEAD = 200  # calls past the current one searched for a command (a record that is not the run's ends early)


def align(turns: Sequence[ModelTurn], attempts: Sequence[Any]) -> list[Entry]:
    """The run in order: each attempt under the earliest call from the current one on (up to
    ``LOOKAHEAD`` calls on) that asked for its command and has it still unmatched; calls passed over
    stand alone where they came."""
    left = [[_key(c) for c in t.commands] for t in turns]
    entries: list[Entry] = []
    placed: dict[int, Entry] = {}
    cursor = 0  # the first call not placed yet
    for a in attempts:
        key = _key(a.command)
        start = max(cursor - 1, 0)  # the latest call placed may have commands still to match
        j = next((k for k in range(start, min(len(turns), start + LOOKAHEAD)) if key in left[k]), None)
        if j is None:
            entries.append(Entry(None, [a]))
            continue
        left[j].remove(key)
        if j in placed:
            placed[j].attempts.append(a)
            continue
        for k in range(cursor, j):
            placed[k] = Entry(turns[k])
            entries.append(placed[k])
        placed[j] = Entry(turns[j], [a])
        entries.append(placed[j])
        cursor = j + 1
    entries += [Entry(turns[k]) for k in range(cursor, len(turns))]
    return entries


def totals(turns: Sequence[ModelTurn]) -> dict[str, Any]:
    """Model calls, tokens and cost of a run, each summed over the calls that say (None when none does)."""

    def total(name: str) -> Any:
        known = [getattr(t, name) for t in turns if getattr(t, name) is not None]
        return sum(known) if known else None

    return {
        "calls": len(turns),
        "input_tokens": total("input_tokens"),
        "cached_tokens": total("cached_tokens"),
        "output_tokens": total("output_tokens"),
        "cost": total("cost"),
        "seconds": total("seconds"),
    }
