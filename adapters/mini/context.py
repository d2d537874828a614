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
of the first are the same.
"""

from __future__ import annotations

import copy
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
        self._dicts: list[Any] = []
        self._read: list[Message] = []
        self._checked: list[tuple[Any, Any]] = []  # (content, extra) as read, of the last RECHECK messages
        self._sent: list[Sent] = []  # what History.send returned at the last call...
        self._sent_for: list[Any] = []  # ...for these messages...
        self._out: list[dict] = []  # ...what was sent for it...
        self._ends: list[int] = []  # ...and where each message's part of it ends

    def read(self, messages: list[dict]) -> list[Message]:
        same = _same_prefix(messages, self._dicts)
        tail = len(self._dicts) - len(self._checked)  # where the rechecked ones begin
        for k in range(max(tail, 0), same):
            m = messages[k]
            content, extra = self._checked[k - tail]
            if not isinstance(m, dict) or m.get("content") != content or m.get("extra") != extra:
                same = k
                break
        self._dicts = list(messages)
        self._read = self._read[:same] + as_messages(messages[same:])
        self._checked = [
            (_as_read(m.get("content")), _as_read(m.get("extra"))) if isinstance(m, dict) else (None, None)
            for m in messages[-self.RECHECK :]
        ]
        return list(self._read)

    def sent(self, messages: list[dict], sent: list[Sent], model: Any) -> list[dict]:
        """``sent_messages`` of what ``History.send`` returned, the part that is as at the last call taken again."""
        same = min(_same_prefix(sent, self._sent), _same_prefix(messages, self._sent_for), len(self._ends))
        start = self._ends[same - 1] if same else 0
        out = self._out[:start]
        ends = self._ends[:same]
        for k in range(same, min(len(messages), len(sent))):
            out += _sent_as(messages[k], sent[k], self._read[k].text, model)
            ends.append(len(out))
        self._sent, self._sent_for, self._out, self._ends = list(sent), list(messages), out, ends
        return list(out)


def _same_prefix(a: list, b: list) -> int:
    """How many of the first items of ``a`` and ``b`` are the same objects (or equal ones)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:  # identities compared in C
        return n
    return next(k for k in range(n) if a[k] != b[k])


def _as_read(value: Any) -> Any:
    """A message's content or extra as it was read: a string itself, a list or dict copied."""
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
    sent = history.send(agent_messages.read(messages), runtime, inform=runtime.config.informs)
    return agent_messages.sent(messages, sent, model)
