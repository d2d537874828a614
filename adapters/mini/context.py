"""What mini-swe-agent's model is sent: the agent's messages through the ledger's ``History``
(ledger_runtime/prompt/history.py): outputs as the run's context policy sends them, and the notes of
the state view kept where they were first sent.

The agent's messages are never changed: ``sent_messages`` returns a copy. An output is a message
whose ``extra`` names the ledger's attempt (LedgerEnvironment puts it there; mini-swe-agent copies an
output's ``extra`` into its message). A note goes at the end of a plain user message (text-based
models: no two user messages follow each other), else into a user message of its own after it, in the
model's own message format (after the tool results for tool-call models, never between an assistant's
tool calls and their results).

A long run costs what is new at each call, not its whole history again: ``AgentMessages`` keeps the
messages as they were read and what was sent for them, and finds at the next call, in C, how many
of the first are the same. The list handed to the model is a list the caller may keep: it never
changes once another holds it. Where nobody does (the caller let it go: mini-swe-agent's models
read it into a list of their own), the next call brings it up to date in place rather than copying
every message again (``AgentMessages._handed_back``).
"""

from __future__ import annotations

import copy
import sys
from typing import Any

from ledger_runtime import History, LedgerRuntime, Message, Sent

NOTE_SEPARATOR = "\n\n"


def attempt_of(message: dict) -> int | None:
    """The ledger attempt a history message is the output of, if any."""
    ledger = (message.get("extra") or {}).get("ledger") if isinstance(message, dict) else None
    attempt = ledger.get("attempt") if isinstance(ledger, dict) else None
    return attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None


def spared_of(message: dict) -> int:
    """Characters the ledger's answer in this message spared the model (0 when none is known)."""
    ledger = (message.get("extra") or {}).get("ledger") if isinstance(message, dict) else None
    n = ledger.get("spared") if isinstance(ledger, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else 0


def text_of(message: dict) -> str:
    c = message.get("content") if isinstance(message, dict) else None
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c if isinstance(c, str) else ""


def plain_user(message: dict) -> bool:
    """A user message whose content is plain text (a note is appended to it)."""
    return message.get("role") == "user" and isinstance(message.get("content"), str) and "type" not in message


def as_messages(messages: list[dict]) -> list[Message]:
    return [Message(text_of(m), attempt_of(m), spared_of(m)) for m in messages]


class AgentMessages:
    """The agent's messages as ``History`` takes them, and what was sent for them, kept from call to
    call: mini-swe-agent appends to its history and hands the same message objects again, so a long
    run reads and sends each new message once. The messages the last call had are found by a scan of
    their identities in C; from the first that is another object (or not there) on, they are read
    anew. A message is taken to be as it was read while it is the same object: an agent that changes
    a message hands a new one (mini-swe-agent never changes one), and the last ``RECHECK`` messages'
    content and extra are compared with copies of them as read, at every call."""

    RECHECK = 4

    def __init__(self) -> None:
        self._dicts: list[Any] = []  # the messages as the last read had them...
        self._read: list[Message] = []  # ...as read...
        self._checked: list[tuple[Any, Any]] = []  # ...and (content, extra) as read, of the last RECHECK of them
        self._sent: list[Sent] = []  # what History said to send for them at the last call...
        self._out: list[dict] = []  # ...what was sent for it...
        self._ends: list[int] = []  # ...and where each message's part of it ends
        self._given: list[dict] | None = None  # the list handed out at the last call: ``_out`` as it was then
        self._synced: int | None = None  # the History call that took the last read and made ``_sent``

    def turn(self, messages: list[dict], history: History, runtime: LedgerRuntime, model: Any) -> list[dict]:
        """What the model is sent now through ``history`` (``history_for``), made from what is new since the last turn:
        the messages are scanned once, and ``history`` is told how many of them it had."""
        after, self._synced = self._synced, None
        same = self._take(messages)
        resend = history.resend(self._read, runtime, inform=runtime.config.informs, after=after, same=same)
        del self._sent[resend.kept :]  # kept is 0 unless ``history`` built on its call ``after``, this one's last
        self._sent += resend.new
        out = self._made(messages, min(same, resend.kept, len(self._ends)), model)
        self._synced = resend.call
        return out

    def _take(self, messages: list[dict]) -> int:
        """Reads the messages that are not as at the last read; returns how many of the first are."""
        same = self._rechecked(messages, self._same_as_read(messages))
        read = as_messages(messages[same:])
        start = max(len(messages) - self.RECHECK, 0)
        tail = len(self._dicts) - len(self._checked)  # where the rechecked ones began
        self._checked = [
            self._checked[k - tail] if tail <= k < same else _as_read(messages[k]) for k in range(start, len(messages))
        ]
        del self._dicts[same:], self._read[same:]
        self._dicts += messages[same:]
        self._read += read
        return same

    def _same_as_read(self, messages: list[dict]) -> int:
        """How many of the first messages are the objects the last read had (or equal ones): where the agent only
        appended, one comparison of pointers in C, with no copy of the list (a copy touches every message)."""
        n = len(self._dicts)
        if len(messages) >= n:
            self._dicts += messages[n:]  # the new ones, compared with themselves
            try:
                appended = messages == self._dicts
            finally:
                del self._dicts[n:]  # as read, even where a message's comparison raised
            if appended:
                return n
        return _same_prefix(messages, self._dicts)

    def _rechecked(self, messages: list[dict], same: int) -> int:
        """``same``, or the first of the last ``RECHECK`` messages whose content or extra is not as read."""
        tail = len(self._dicts) - len(self._checked)
        for k in range(max(tail, 0), same):
            m = messages[k]
            content, extra = self._checked[k - tail]
            if not isinstance(m, dict) or m.get("content") != content or m.get("extra") != extra:
                return k
        return same

    def _made(self, messages: list[dict], same: int, model: Any) -> list[dict]:
        """What is sent for ``_sent``: the first ``same`` messages' part as the last call made it, the rest made now."""
        given = self._handed_back()
        cut = self._ends[same - 1] if same else 0
        self._given = None  # (a raise below leaves no list to build on)
        del self._out[cut:], self._ends[same:]
        for k in range(same, min(len(messages), len(self._sent))):
            self._out += _sent_as(messages[k], self._sent[k], self._read[k].text, model)
            self._ends.append(len(self._out))
        if given is None:
            given = list(self._out)
        else:
            del given[cut:]
            given += self._out[cut:]
        self._given = given
        return given

    def _handed_back(self) -> list[dict] | None:
        """The list handed out at the last call, where this call may change it into its own: no one but this object
        holds it (CPython's count of its references, ``_handed``: the caller kept none) and it is still what was
        handed out (the caller did not change it: its items are the same objects, or equal ones, compared in C).
        Else None, and this call hands out a new list: a list kept by the caller, or by litellm's logging, never
        changes after it was handed out."""
        if self._given is None or _HANDED_ALONE < 0 or _handed(self) > _HANDED_ALONE or self._given != self._out:
            return None
        return self._given


def _handed(holder: Any) -> int:
    """How many references there are to ``holder._given``, as counted from here (CPython's count)."""
    return sys.getrefcount(holder._given)


class _Holder:
    def __init__(self) -> None:
        self._given: list = []


# the count for a list only its holder holds; where the interpreter is not CPython (whose count is exact), -1:
# a list handed out is then never changed
_HANDED_ALONE = _handed(_Holder()) if sys.implementation.name == "cpython" and hasattr(sys, "getrefcount") else -1


def _same_prefix(a: list, b: list) -> int:
    """How many of the first items of ``a`` and ``b`` are the same objects (or equal ones), compared in C."""
    n = min(len(a), len(b))
    if (a if len(a) == n else a[:n]) == (b if len(b) == n else b[:n]):
        return n
    lo, hi = 0, n  # the first lo are the same, the first hi are not: halved in C to the first that is not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _as_read(message: Any) -> tuple[Any, Any]:
    """A message's content and extra as they were read (None for a message that is not a dict)."""
    if not isinstance(message, dict):
        return None, None
    return _copied(message.get("content")), _copied(message.get("extra"))


def _copied(value: Any) -> Any:
    """A string itself, a list or dict copied."""
    return copy.deepcopy(value) if isinstance(value, (list, dict)) else value


def sent_messages(messages: list[dict], sent: list[Sent], model: Any) -> list[dict]:
    """A copy of ``messages`` with what ``History.send`` said to send in place of each, and its notes."""
    out: list[dict] = []
    for m, s in zip(messages, sent):
        out += _sent_as(m, s, text_of(m), model)
    return out


def _sent_as(m: dict, s: Sent, text: str, model: Any) -> list[dict]:
    """The messages sent for message ``m``: itself or a copy with the text to send, its note after it."""
    if s.text != text and isinstance(m.get("content"), str):
        m = {**m, "content": s.text}
    if s.note and plain_user(m):
        return [{**m, "content": m["content"] + NOTE_SEPARATOR + s.note}]
    return [m, model.format_message(role="user", content=s.note)] if s.note else [m]


def history_for(
    messages: list[dict],
    history: History,
    runtime: LedgerRuntime,
    model: Any,
    agent_messages: AgentMessages | None = None,
) -> list[dict]:
    """What the model is sent now (see the module docstring); ``agent_messages``: the messages as
    read and sent at the last call, so that only what is new is read and made."""
    if agent_messages is None:
        sent = history.send(as_messages(messages), runtime, inform=runtime.config.informs)
        return sent_messages(messages, sent, model)
    return agent_messages.turn(messages, history, runtime, model)
