"""The state view as notes the model keeps: told once, then only what changed.

A provider bills a cached prefix at a tenth of the price or less, and a change to a sent message costs it and all after
at full price. So each note is appended once, after the newest output, and stays. ``ViewNotes`` knows what the model was
told, line by line; the next note holds the lines whose text differs from what it was last told, unless a step's output
since showed it (``ViewEntry.told_by``). What does not fit ``limit_chars`` waits for the next note. ``rewind`` takes
back notes, since a rewrite re-sends all after it anyway.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ledger_runtime.inform import VIEW_NOTE, StateView, ViewEntry

UPDATE_NOTE = (
    "(Ledger runtime: what your commands' own output did not show you; a later line about the same "
    "thing replaces an earlier one.)\n"
)
CLOSE_UPDATE = "</ledger_update>"
# what a line can be news about, in this order where a note has room for only some: how answers read,
# the last refusal, a file seen, a file changed, the last failing run, the policies in force; not a command
# (its output said how it ended; a result that stops holding is news through the files it read), nor the
# task (the agent's prompt holds it)
NEWS = ("answers", "refused", "seen", "changed", "failing", "policies")


@dataclass
class Told:
    """What one note told, and what the model had been told once it had it."""

    at: int  # the note's position (the adapter's: a message index)
    text: str
    told: dict[tuple, str]  # key -> text, after this note


@dataclass
class ViewNotes:
    """What the model has been told of the state view."""

    limit_chars: int = 600
    first: str = "news"  # "news": the first note is news like any other; "view": the whole view
    told: dict[tuple, str] = field(default_factory=dict)
    since_step: int = 0  # outputs of steps after this one reached the model since the last note
    notes: list[Told] = field(default_factory=list)
    chars: int = 0  # characters of the notes the model holds
    full_next: bool = False  # the next note is the whole view (after the agent lost its history)

    def next(self, view: StateView, at: int, *, budget: int | None = None) -> str:
        """The note to append now at position ``at``; "" when nothing is news or ``budget`` (characters) allows none."""
        if (self.first == "view" or self.full_next) and not self.told and not self.notes:
            text = VIEW_NOTE + view.text
            if budget is not None and len(text) > budget:
                return ""
            self.told = {e.key: e.text for e in view.entries}
            self.full_next = False
            return self._sent(at, text, view.step)
        open_tag = f'<ledger_update step="{view.step}">'
        room = min(self.limit_chars, self.limit_chars if budget is None else budget)
        intro = "" if self.notes else UPDATE_NOTE  # said once: the first update the model holds says it
        room -= len(intro) + len(open_tag) + len(CLOSE_UPDATE) + 2
        lines, told = self._news(view.entries, room)
        self.told = told
        if not lines:
            self.since_step = view.step
            return ""
        return self._sent(at, intro + "\n".join([open_tag, *lines, CLOSE_UPDATE]), view.step)

    def _sent(self, at: int, text: str, step: int) -> str:
        self.notes.append(Told(at, text, dict(self.told)))
        self.chars += len(text)
        self.since_step = step
        return text

    def _news(self, entries: Sequence[ViewEntry], limit: int) -> tuple[list[str], dict[tuple, str]]:
        told = dict(self.told)
        news: list[ViewEntry] = []
        present = set()
        for e in entries:
            present.add(e.key)
            if e.key[0] not in NEWS or told.get(e.key) == e.text:
                continue
            if e.told_by is not None and e.told_by > self.since_step:
                told[e.key] = e.text  # the model has just read it in that step's output
            else:
                news.append(e)
        for key in [k for k in told if k not in present]:
            del told[key]  # out of the view's window, or no longer about anything: nothing to correct
        news.sort(key=lambda e: NEWS.index(e.key[0]))
        lines: list[str] = []
        used = 0
        section = None
        for e in news:
            add = [f"{e.section}:"] if e.section and e.section != section else []
            add.append(_short(e.text))
            cost = sum(len(x) + 1 for x in add)
            if used + cost > limit:
                continue  # news still: the next note carries it
            used += cost
            lines += add
            section = e.section or section
            told[e.key] = e.text
        return lines, told

    def rewind(self, at: int) -> None:
        """Takes back the notes sent at positions ``at`` and after: the model is as told before them."""
        kept = [n for n in self.notes if n.at < at]
        if len(kept) == len(self.notes):
            return
        self.notes = kept
        self.told = dict(kept[-1].told) if kept else {}
        self.chars = sum(len(n.text) for n in kept)
        self.since_step = 0  # what the model read since is in its history still: told_by holds for it

    def reset(self, *, full: bool = False) -> None:
        """Forgets every note, gone from the agent's history.

        With ``full`` the outputs that told the rest are gone too, so the next note is the whole view."""
        self.told, self.notes, self.chars, self.since_step = {}, [], 0, 0
        self.full_next = full


def _short(line: str, limit: int = 240) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"


def told_event(before: tuple[dict[tuple, str], int], after: ViewNotes, text: str) -> dict | None:
    """The body of a ``told`` event for what one ``ViewNotes.next`` changed; None when it changed nothing."""
    told, since = before
    changed = [[list(k), v] for k, v in after.told.items() if told.get(k) != v]
    dropped = [list(k) for k in told if k not in after.told]
    if not changed and not dropped and since == after.since_step and not text:
        return None
    return {
        "set": changed,
        "drop": dropped,
        "since": after.since_step,
        "text": text,
        "at": after.notes[-1].at if text else None,
    }


def apply_told(notes: ViewNotes, event: dict) -> None:
    """Folds a ``told`` event into ``notes``, leaving them as the call that made it did."""
    told = dict(notes.told)
    for key in event.get("drop") or ():
        told.pop(tuple(key), None)
    for key, value in event.get("set") or ():
        told[tuple(key)] = value
    notes.told = told
    notes.since_step = int(event.get("since") or 0)
    text = event.get("text") or ""
    if text:
        notes.notes.append(Told(int(event.get("at") or 0), text, dict(told)))
        notes.chars += len(text)
        notes.full_next = False
