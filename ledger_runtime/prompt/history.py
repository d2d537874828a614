"""The copy of an agent's history the model is sent at each call: outputs as the context policy sends them, and notes.

The agent's own history is never changed: ``History.send`` returns, per message, the text to send in its place and the
note after it. What was sent stays unless the policy rewrites it; a note is sent once, after the newest message, and
kept, so the view never changes the cached prefix. The notes take at most ``view_share`` of the characters the answers
spared, so the ledger never makes a run dearer than without it. The harness's meter sends recorded runs through this
class, so it prices what the adapters send.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import compress, count
from operator import attrgetter, ne
from typing import Collection, Protocol, Sequence

from ledger_runtime.held.context import (
    KEEP,
    ContextPolicy,
    HistoryOutput,
    Line,
    RewriteSchedule,
    Treatment,
    stub_text,
    to_send,
)
from ledger_runtime.inform import StateView
from ledger_runtime.prompt.notes import ViewNotes


@dataclass(frozen=True)
class Message:
    """One message of the agent's history, as the history copy needs it."""

    text: str
    attempt: int | None = None  # the ledger attempt it is the output of
    spared: int = 0  # characters its answer spared the model (the output as it is, less the answer)


_TEXT, _ATTEMPT, _SPARED = attrgetter("text"), attrgetter("attempt"), attrgetter("spared")


@dataclass(frozen=True)
class Sent:
    """How one message is sent: its text, a stub's when left out, and the note after it."""

    text: str
    note: str = ""


class HistorySource(Protocol):
    """What the history copy asks of the runtime."""

    def history(
        self, outputs: Sequence[tuple[int | None, int]], *, expanded: Collection[int] = ()
    ) -> list[HistoryOutput]:
        """Each earlier output, oldest first, as the model holds it, for the context policy (``held.Held.history``)."""
        ...

    def still_true(self, line: Line) -> bool: ...

    def view_for_notes(self) -> StateView | None: ...

    def resent_as(self, attempt_id: int) -> tuple[str, str] | None: ...

    def standing(self) -> Collection[int]:
        """The attempts whose answers may outlive their sources, the only ones ``resent_as`` is asked of."""
        ...


@dataclass
class History:
    """The history the model is sent, call after call."""

    policy: ContextPolicy = field(default_factory=ContextPolicy)
    notes: ViewNotes = field(default_factory=ViewNotes)
    sticky: RewriteSchedule = field(default_factory=RewriteSchedule)
    view_share: float | None = 0.5
    sent: list[str] = field(default_factory=list)  # the texts sent at the last call, per message
    anchors: dict[int, str] = field(default_factory=dict)  # note position -> the message's text then
    rewrites: int = 0  # calls that changed a message already sent
    notes_sent: int = 0  # characters of every note sent (a note taken back and told again counts twice)
    decisions: tuple[list[HistoryOutput], list[Treatment]] = ((), ())  # the outputs and how the last call sent them
    _out: list[Sent] = field(default_factory=list, repr=False)  # what the last call returned
    _msgs: list[Message] = field(default_factory=list, repr=False)  # the last call's messages...
    _raw: list[str] = field(default_factory=list, repr=False)  # ...their texts
    _at: dict[int, list[int]] = field(default_factory=dict, repr=False)  # ...where each attempt's output is
    _spared: int = field(default=0, repr=False)  # ...and what their answers spared, in all

    def send(self, messages: Sequence[Message], ledger: HistorySource, *, inform: bool = True) -> list[Sent]:
        """What to send in place of each message now.

        The last call's messages, handed again as the same objects, are found by identity and their decisions reused, so
        a long history costs what is new in it."""
        same = _same_prefix(messages, self._msgs)
        if not self._holds(messages, same):
            self._forget()
        texts = self._texts(messages, ledger, same)
        m = min(len(self.sent), len(texts))
        changed = None if self.sent[:m] == texts[:m] else next(compress(count(), map(ne, self.sent, texts)), None)
        if changed is not None:
            self.rewrites += 1
            self.notes.rewind(changed)
            self.anchors = {k: d for k, d in self.anchors.items() if k < changed}
        # what is sent as it was at the last call is handed out again as it was
        same = min(len(self._out), len(texts), len(self.sent) if changed is None else changed)
        self.sent = texts
        at = len(messages) - 1
        last = self.notes.notes[-1].at if self.notes.notes else None  # notes stand in the order of their messages
        if inform and messages and last != at:  # one note a message
            view = ledger.view_for_notes()
            if view is not None:
                note = self.notes.next(view, at, budget=self._budget())
                if note:
                    self.anchors[at] = messages[at].text
                    self.notes_sent += len(note)
        notes: dict[int, str] = {}
        for n in reversed(self.notes.notes):
            if n.at < same - 1:
                break
            notes[n.at] = n.text
        same = min(same, min(notes, default=same))  # a message whose note is new (or gone) is sent anew
        self._out = self._out[:same] + [Sent(texts[k], notes.get(k, "")) for k in range(same, len(texts))]
        return list(self._out)

    def _budget(self) -> int | None:
        if self.view_share is None or math.isinf(self.view_share):
            return None
        return int(self._spared * self.view_share) - self.notes.chars

    def _holds(self, messages: Sequence[Message], same: int) -> bool:
        """Whether the messages the notes were sent after are still there, unchanged."""
        if not self.anchors:
            return True
        if max(self.anchors) >= len(messages):
            return False
        return all(messages[k].text == t for k, t in self.anchors.items() if k >= same)

    def _forget(self) -> None:
        self.notes.reset()
        self.anchors = {}
        self.sent = []
        self._out = []
        self.sticky = RewriteSchedule(self.sticky.cache_ratio, self.sticky.write_ratio, self.sticky.min_calls_ahead)

    def _texts(self, messages: Sequence[Message], ledger: HistorySource, same: int) -> list[str]:  # noqa: C901
        """The text to send for each message: its own, an expansion or a stub; the first ``same`` are as last call."""
        raw = self._raw[:same] + list(map(_TEXT, messages[same:]))
        if same < len(self._msgs):
            self._at = {a: [k for k in ks if k < same] for a, ks in self._at.items()}
            self._spared = sum(map(_SPARED, messages[:same]))
        for k in range(same, len(messages)):
            if messages[k].attempt is not None:
                self._at.setdefault(messages[k].attempt, []).append(k)  # type: ignore[arg-type]
        self._spared += sum(map(_SPARED, messages[same:]))
        self._msgs, self._raw = list(messages), raw
        texts = list(raw)
        expanded: set[int] = set()
        for a in ledger.standing():
            for k in self._at.get(a, ()):
                # a reference whose source the model no longer holds: sent as what it stands for
                gone = ledger.resent_as(a)
                if gone is not None and gone[0] in texts[k]:
                    texts[k] = texts[k].replace(gone[0], gone[1], 1)
                    expanded.add(a)
        if self.policy.full:
            return texts
        outputs = [k for k, m in enumerate(messages) if m.attempt is not None]
        if not outputs:
            return texts
        saids = ledger.history([(messages[k].attempt, len(texts[k])) for k in outputs], expanded=expanded)
        refused: list[str] = []
        treat = to_send(saids, self.policy, ledger.still_true, self.sticky, texts, outputs, refused)
        report = getattr(ledger, "report_fault", None)  # a ledger that logs faults (the runtime) hears why
        for why in refused if report is not None else ():
            report("checking a stub of the context policy before the model reads it", ValueError(why))
        self.decisions = (saids, treat)
        for k, s, t in zip(outputs, saids, treat):
            if t.kind != KEEP:
                texts[k] = stub_text(s, t, texts[k].count("\n") + 1)
        return texts


def _same_prefix(a: Sequence, b: Sequence) -> int:
    """How many of the first items of ``a`` and ``b`` are the same, found by identity where they all are."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    return next(k for k in range(n) if a[k] != b[k])


def placed(roles: Sequence[str], sent: Sequence[Sent]) -> list[tuple[str, str]]:
    """A prompt's messages with each note appended to a user message, or else as a user message after it.

    Text-based agents allow no two user messages in a row."""
    out: list[tuple[str, str]] = []
    for role, s in zip(roles, sent):
        if s.note and role == "user":
            out.append((role, s.text + "\n\n" + s.note))
            continue
        out.append((role, s.text))
        if s.note:
            out.append(("user", s.note))
    return out


__all__ = ["History", "Message", "Sent", "HistorySource", "placed"]
