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
from itertools import chain, compress, count
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


@dataclass(frozen=True)
class Resend:
    """What to send now, as a change to what an earlier call sent: its first ``kept`` as they were, then ``new``."""

    call: int  # this call's number: the ``after`` of a next call that builds on it
    kept: int
    new: tuple[Sent, ...]


@dataclass
class History:
    """The history the model is sent, call after call."""

    policy: ContextPolicy = field(default_factory=ContextPolicy)
    notes: ViewNotes = field(default_factory=ViewNotes)
    sticky: RewriteSchedule = field(default_factory=RewriteSchedule)
    view_share: float | None = 0.5
    sent: list[str] = field(default_factory=list)  # the texts sent at the last call, per message (kept up in place)
    anchors: dict[int, str] = field(default_factory=dict)  # note position -> the message's text then, in order
    rewrites: int = 0  # calls that changed a message already sent
    notes_sent: int = 0  # characters of every note sent (a note taken back and told again counts twice)
    decisions: tuple[list[HistoryOutput], list[Treatment]] = ((), ())  # the outputs and how the last call sent them
    _out: list[Sent] = field(default_factory=list, repr=False)  # what the last call returned
    _msgs: list[Message] = field(default_factory=list, repr=False)  # the last call's messages...
    _raw: list[str] = field(default_factory=list, repr=False)  # ...their texts
    _over: dict[int, str] = field(default_factory=dict, repr=False)  # ...those sent as another text (expanded, stubs)
    _at: dict[int, list[int]] = field(default_factory=dict, repr=False)  # ...where each attempt's output is
    _outputs: list[int] = field(default_factory=list, repr=False)  # ...where the outputs are
    _spared: int = field(default=0, repr=False)  # ...what their answers spared, in all
    _spared_to: list[int] = field(default_factory=lambda: [0], repr=False)  # ...and the answers before each spared
    _calls: int = field(default=0, repr=False)  # calls begun
    _done: int | None = field(default=None, repr=False)  # the last call, once it returned (None: it raised)

    def send(self, messages: Sequence[Message], ledger: HistorySource, *, inform: bool = True) -> list[Sent]:
        """What to send in place of each message now.

        The last call's messages, handed again as the same objects, are found by identity and their decisions reused, so
        a long history costs what is new in it."""
        self._send(messages, ledger, inform, None)
        return list(self._out)

    def resend(
        self,
        messages: Sequence[Message],
        ledger: HistorySource,
        *,
        inform: bool = True,
        after: int | None = None,
        same: int | None = None,
    ) -> Resend:
        """What to send now, as a change to what call ``after`` sent (all of it new unless that was the last call).

        ``same``: how many of the first messages the caller knows to be the very objects call ``after`` had, so they are
        not compared again and a call costs what is new since (the caller's scan of its own messages aside)."""
        follows = after is not None and after == self._done
        kept = self._send(messages, ledger, inform, same if follows else None)
        kept = kept if follows else 0
        return Resend(self._calls, kept, tuple(self._out[kept:]))

    def _send(self, messages: Sequence[Message], ledger: HistorySource, inform: bool, same: int | None) -> int:
        """Takes this call's messages (``same``: how many of the first are the last call's, else compared); returns how
        many of the first of ``_out`` are as the last call left them."""
        aligned, self._done = self._done is not None, None  # a call that raised leaves ``sent`` as it was before it
        self._calls += 1
        same = _same_prefix(messages, self._msgs) if same is None else min(same, len(messages), len(self._msgs))
        if not self._holds(messages, same):
            self._forget()
        over = self._texts(messages, ledger, same)
        changed = self._changed(over, same) if aligned else self._changed_anew(over)
        if changed is not None:
            self.rewrites += 1
            self.notes.rewind(changed)
            while self.anchors and next(reversed(self.anchors)) >= changed:
                self.anchors.popitem()
        # what is sent as it was at the last call is handed out again as it was
        # after a call that raised, ``_out`` may not be what ``sent`` says: none of it is handed out again
        kept = min(len(self._out), len(messages), len(self.sent) if changed is None else changed) if aligned else 0
        self._sent_now(over, same, aligned)
        self._note(messages, ledger, inform)
        kept = self._out_now(kept)
        self._done = self._calls
        return kept

    def _budget(self) -> int | None:
        if self.view_share is None or math.isinf(self.view_share):
            return None
        return int(self._spared * self.view_share) - self.notes.chars

    def _holds(self, messages: Sequence[Message], same: int) -> bool:
        """Whether the messages the notes were sent after are still there, unchanged (the first ``same`` are)."""
        if not self.anchors:
            return True
        if next(reversed(self.anchors)) >= len(messages):  # a note goes after the newest message: in order
            return False
        for k in reversed(self.anchors):
            if k < same:
                return True
            if messages[k].text != self.anchors[k]:
                return False
        return True

    def _forget(self) -> None:
        self.notes.reset()
        self.anchors = {}
        self.sent = []
        self._over = {}
        self._out = []
        self.sticky = RewriteSchedule(self.sticky.cache_ratio, self.sticky.write_ratio, self.sticky.min_calls_ahead)

    def _texts(self, messages: Sequence[Message], ledger: HistorySource, same: int) -> dict[int, str]:
        """The texts to send that are not the messages' own, by position: expansions and stubs; the first ``same``
        messages are the last call's."""
        self._take(messages, same)
        over: dict[int, str] = {}
        expanded: set[int] = set()
        for a in ledger.standing():
            for k in self._at.get(a, ()):
                # a reference whose source the model no longer holds: sent as what it stands for
                gone = ledger.resent_as(a)
                text = over.get(k, self._raw[k])
                if gone is not None and gone[0] in text:
                    over[k] = text.replace(gone[0], gone[1], 1)
                    expanded.add(a)
        if self.policy.full or not self._outputs:
            return over
        return self._stubbed(over, expanded, ledger)

    def _stubbed(self, over: dict[int, str], expanded: set[int], ledger: HistorySource) -> dict[int, str]:
        """``over`` with the outputs the context policy leaves out as their stubs (it decides from every output)."""
        texts = self._text_list(over)
        outputs = list(self._outputs)
        saids = ledger.history([(self._msgs[k].attempt, len(texts[k])) for k in outputs], expanded=expanded)
        refused: list[str] = []
        treat = to_send(saids, self.policy, ledger.still_true, self.sticky, texts, outputs, refused)
        report = getattr(ledger, "report_fault", None)  # a ledger that logs faults (the runtime) hears why
        for why in refused if report is not None else ():
            report("checking a stub of the context policy before the model reads it", ValueError(why))
        self.decisions = (saids, treat)
        for k, s, t in zip(outputs, saids, treat):
            if t.kind != KEEP:
                over[k] = stub_text(s, t, texts[k].count("\n") + 1)
        return over

    def _take(self, messages: Sequence[Message], same: int) -> None:
        """Keeps this call's messages, their texts, where the outputs are and what their answers spared: the first
        ``same`` as the last call's, the rest read."""
        new = messages[same:]
        texts = list(map(_TEXT, new))
        spared = list(map(_SPARED, new))
        if same < len(self._msgs):
            while self._outputs and self._outputs[-1] >= same:
                self._at[self._msgs[self._outputs.pop()].attempt].pop()  # type: ignore[index]
            self._spared = self._spared_to[same]
            del self._msgs[same:], self._raw[same:], self._spared_to[same + 1 :]
        for k, m in enumerate(new, same):
            if m.attempt is not None:
                self._at.setdefault(m.attempt, []).append(k)
                self._outputs.append(k)
        self._msgs += new
        self._raw += texts
        for n in spared:
            self._spared_to.append(self._spared_to[-1] + n)
        self._spared += sum(spared)

    def _text_list(self, over: dict[int, str]) -> list[str]:
        """The text to send for each message: its own, or the one in ``over``."""
        texts = list(self._raw)
        for k, text in over.items():
            texts[k] = text
        return texts

    def _changed(self, over: dict[int, str], same: int) -> int | None:
        """The first message whose text to send is not the last call's; only the new ones, and those either call sent
        as another text, can be."""
        m = min(len(self.sent), len(self._raw))
        first = min(same, m)
        maybe = sorted(k for k in self._over.keys() | over.keys() if k < first)
        return next((k for k in chain(maybe, range(first, m)) if self.sent[k] != over.get(k, self._raw[k])), None)

    def _changed_anew(self, over: dict[int, str]) -> int | None:
        """``_changed`` by comparing every text (``sent`` may not be what the last call made of its messages)."""
        texts = self._text_list(over)
        m = min(len(self.sent), len(texts))
        return None if self.sent[:m] == texts[:m] else next(compress(count(), map(ne, self.sent, texts)), None)

    def _sent_now(self, over: dict[int, str], same: int, aligned: bool) -> None:
        """``sent`` made this call's texts; the first ``same`` as the last call's but where either sent another text."""
        if not aligned or len(self.sent) < same:
            self.sent = self._text_list(over)
        else:
            for k in self._over.keys() | over.keys():
                if k < same:
                    self.sent[k] = over.get(k, self._raw[k])
            del self.sent[same:]
            self.sent += [over.get(k, self._raw[k]) for k in range(same, len(self._raw))]
        self._over = over

    def _note(self, messages: Sequence[Message], ledger: HistorySource, inform: bool) -> None:
        """The note of the state view after the newest message, if it is news and the budget has room for it."""
        at = len(messages) - 1
        last = self.notes.notes[-1].at if self.notes.notes else None  # notes stand in the order of their messages
        if inform and messages and last != at:  # one note a message
            view = ledger.view_for_notes()
            if view is not None:
                note = self.notes.next(view, at, budget=self._budget())
                if note:
                    self.anchors[at] = messages[at].text
                    self.notes_sent += len(note)

    def _out_now(self, kept: int) -> int:
        """``_out`` made this call's, its first ``kept`` as they were but for a note new or gone; returns how many."""
        notes: dict[int, str] = {}
        for n in reversed(self.notes.notes):
            if n.at < kept - 1:
                break
            notes[n.at] = n.text
        kept = min(kept, min(notes, default=kept))  # a message whose note is new (or gone) is sent anew
        del self._out[kept:]
        self._out += [Sent(self.sent[k], notes.get(k, "")) for k in range(kept, len(self.sent))]
        return kept


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


__all__ = ["History", "Message", "Resend", "Sent", "HistorySource", "placed"]
