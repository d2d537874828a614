"""The model's side of a run beside its ledger, for the run's page: each call of the model, as the
agent recorded it (trajectories.py: ``Conversation``, read by the adapter that knows the
agent's files), matched to the steps whose commands it asked for.

Matching is by the commands themselves, in order: the ledger's step numbers are the adapter's (a
model call for mini-swe-agent, a command for Codex), and a call may ask for several commands or for
none (a format error, a last message). A call whose commands the ledger never saw, and a step whose
call the record does not have, each stand alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from ledger_runtime.ledger.redact import MASK, Redactor
from ledger_runtime.trajectories import Conversation, ModelTurn


@dataclass
class Entry:
    """One place on the page: a call of the model (None: the record does not have it) and the
    commands of it the ledger recorded, in order."""

    turn: ModelTurn | None
    attempts: list[Any] = field(default_factory=list)


def _key(command: str) -> str:
    return command.strip()


def same_command(recorded: str, kept: str) -> bool:
    """Whether a command of the agent's record is one the ledger kept: the same text, but where either
    is masked (``*``: the ledger stores secrets masked, the page masks the record)."""
    r, k = _key(recorded), _key(kept)
    return r == k or (len(r) == len(k) and all(a == b or a == MASK or b == MASK for a, b in zip(r, k)))


LOOKAHEAD = 200  # calls past the current one searched for a command (a record that is not the run's ends early)


def align(turns: Sequence[ModelTurn], attempts: Sequence[Any]) -> list[Entry]:
    """The run in order: each attempt under the earliest call from the current one on (up to
    ``LOOKAHEAD`` calls on) that asked for its command and has it still unmatched; calls passed over
    stand alone where they came. A subagent's attempt is no call of the record's (the main model's): it stands alone."""
    left = [[_key(c) for c in t.commands] for t in turns]
    entries: list[Entry] = []
    placed: dict[int, Entry] = {}
    cursor = 0  # the first call not placed yet
    for a in attempts:
        if getattr(a, "agent", ""):
            entries.append(Entry(None, [a]))
            continue
        start = max(cursor - 1, 0)  # the latest call placed may have commands still to match
        found = ((k, i) for k in range(start, min(len(turns), start + LOOKAHEAD)) for i, c in enumerate(left[k]))
        j, i = next(((k, i) for k, i in found if same_command(left[k][i], a.command)), (None, None))
        if j is None or i is None:
            entries.append(Entry(None, [a]))
            continue
        del left[j][i]
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


def secrets_masked(entries: Sequence[Entry], shown: Callable[[Any], str | None] | None = None) -> list[str]:
    """What the ledger masked in the commands it kept and (``shown``: the text the model received for
    an attempt, as the ledger kept it) in their outputs, read off the agent's record of them: the
    record's text where the ledger's has ``*`` (the values of the run's environment, its login...,
    which only the run knew). The page masks them wherever the record has them."""
    found: set[str] = set()
    for entry in entries:
        recorded = [_key(c) for c in (entry.turn.commands if entry.turn else ())]
        for a in entry.attempts:
            kept = _key(a.command)
            r = next((c for c in recorded if len(c) == len(kept) and same_command(c, kept)), None)
            if r is not None and MASK in kept:
                found |= _under_masks(r, kept)
            text = shown(a) if shown is not None and entry.turn is not None and entry.turn.received else None
            if text and MASK in text:
                found |= _received_under_masks(text, entry.turn.received)  # type: ignore[union-attr]
    return sorted(found, key=lambda v: (-len(v), v))


def _under_masks(recorded: str, kept: str) -> set[str]:
    """The runs of ``recorded`` (4 characters or more) where ``kept``, the same text masked, has ``*``."""
    found, run = set(), ""
    for x, y in zip(recorded + " ", kept + " "):
        if y == MASK and x != MASK:
            run += x
            continue
        if len(run) >= 4:
            found.add(run)
        run = ""
    return found


MASKED_LINES = 200  # lines of an output with a mask looked for in the record, at most (the rest unlearned)
_MASKED = re.compile(r"\*{4,}")  # a masked value: 4 characters or more (shorter ones are not learned)


def _received_under_masks(kept: str, received: Sequence[str]) -> set[str]:
    """What the record's messages after a call hold where ``kept``, an output as the ledger kept it,
    has ``*``: each line with a mask, with the lines around it, found as whole lines in a message
    (masks aside: masking keeps a text's length and never crosses a line), read under the masks."""
    lines = kept.split("\n")
    texts = [t for t in received if isinstance(t, str)]
    found: set[str] = set()
    masked = [k for k, line in enumerate(lines) if _MASKED.search(line)][:MASKED_LINES]
    for k in masked:
        start, end = max(k - 1, 0), min(k + 2, len(lines))
        window = ("\n" if start else "") + "\n".join(lines[start:end]) + ("\n" if end < len(lines) else "")
        parts = _MASKED.split(window)
        runs = _MASKED.findall(window)
        body = "".join(
            re.escape(x) + (f"([^\\n]{{{len(runs[i])}}})" if i < len(runs) else "") for i, x in enumerate(parts)
        )
        pattern = re.compile(("" if start else r"(?<![^\n])") + body)
        m = next((m for t in texts if (m := pattern.search(t)) is not None), None)
        if m is not None:
            found |= _under_masks(m.group(), window)
    return found


MAX_AMOUNT = (
    10**15
)  # tokens, dollars or seconds of one call past this (or below 0): a crafted record's, shown as unknown


def _amount(v: Any) -> Any:
    """A count or amount of the record as it is, or None where no call could have it: not a number,
    negative, NaN, infinite, or too long to print (an integer of thousands of digits)."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < MAX_AMOUNT else None


def plausible(record: Conversation) -> Conversation:
    """The record with each call's tokens, cost and time as the page can show them (``_amount``)."""
    turns = [
        replace(
            t,
            input_tokens=_amount(t.input_tokens),
            cached_tokens=_amount(t.cached_tokens),
            output_tokens=_amount(t.output_tokens),
            cost=_amount(t.cost),
            seconds=_amount(t.seconds),
        )
        for t in record.turns
    ]
    return replace(record, turns=turns)


def masked_record(record: Conversation, redactor: Redactor) -> Conversation:
    """The agent's record with every text the page shows masked (the model's words, its reasoning,
    its commands, the task, the submission): the record is the agent's own file, written unmasked."""
    turns = [
        replace(
            t,
            text=redactor.mask(t.text),
            reasoning=redactor.mask(t.reasoning),
            commands=tuple(map(redactor.mask, t.commands)),
            received=(),  # read for what the ledger masked (secrets_masked), never shown: not kept
        )
        for t in record.turns
    ]
    submission = redactor.mask(record.submission) if record.submission is not None else None
    return replace(record, turns=turns, task=redactor.mask(record.task), submission=submission)


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
