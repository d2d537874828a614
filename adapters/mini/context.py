"""What mini-swe-agent's model is sent: the agent's messages through the ledger's ``History``
(ledger_runtime/prompt/history.py): outputs as the run's context policy sends them, and the notes of
the state view kept where they were first sent.

The agent's messages are never changed: ``sent_messages`` returns a copy. An output is a message
whose ``extra`` names the ledger's attempt (LedgerEnvironment puts it there; mini-swe-agent copies an
output's ``extra`` into its message). A note goes at the end of a plain user message (text-based
models: no two user messages follow each other), else into a user message of its own after it, in the
model's own message format (after the tool results for tool-call models, never between an assistant's
tool calls and their results).
"""

from __future__ import annotations

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


def sent_messages(messages: list[dict], sent: list[Sent], model: Any) -> list[dict]:
    """A copy of ``messages`` with what ``History.send`` said to send in place of each, and its notes."""
    out: list[dict] = []
    for m, s in zip(messages, sent):
        if s.text != text_of(m) and isinstance(m.get("content"), str):
            m = {**m, "content": s.text}
        if s.note and plain_user(m):
            m = {**m, "content": m["content"] + NOTE_SEPARATOR + s.note}
            out.append(m)
            continue
        out.append(m)
        if s.note:
            out.append(model.format_message(role="user", content=s.note))
    return out


def history_for(messages: list[dict], history: History, runtime: LedgerRuntime, model: Any) -> list[dict]:
    """What the model is sent now (see the module docstring)."""
    sent = history.send(as_messages(messages), runtime, inform=runtime.config.informs)
    return sent_messages(messages, sent, model)
