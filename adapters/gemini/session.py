"""Gemini CLI's session file (``<home>/.gemini/tmp/<project>/chats/session-*.jsonl``, the hooks'
``transcript_path``), read as it grows: what the hook payloads do not say, and the model's side of a run
for its page.

Lines are JSON records: the session's header (``sessionId``, ``projectHash``), a message (``id``, ``type``
``user``/``gemini``/..., ``content``, and for a model message ``toolCalls``, ``tokens``, ``model``; a message
is written again, whole, when it changes: the last copy counts), ``{"$set": {...}}`` (``messages``: the
history replaced, as after a compression; ``lastUpdated``), ``{"$rewindTo": ID}`` (the conversation
goes on from an earlier message). What it tells the hooks:

- the calls the model made, in order, with what the model got for each (``calls``): Gemini CLI writes
  a model message's calls once they all ended, after their AfterTool hooks;
- when the model lost what it was shown (``resets``: the history replaced or rewound).

A malformed line is skipped and counted; a last line still being written is read on the next refresh.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger_adapters.gemini.tools import call_key, shell_result
from ledger_runtime import (
    MAX_RECORD_BYTES,
    Conversation,
    ModelTurn,
    RecordedFormat,
    TrajectoryError,
    appended_lines,
    json_value,
    read_record,
    refreshed,
)


@dataclass(frozen=True)
class SessionCall:
    """A call the session records: its key (tool and arguments), the text the model got, its status."""

    key: str
    text: str
    status: str


def result_text(result: Any) -> str:
    """The text the model got for a call (its function response's ``output``, or ``error``)."""
    texts = []
    for part in result if isinstance(result, list) else []:
        fr = part.get("functionResponse") if isinstance(part, dict) else None
        response = fr.get("response") if isinstance(fr, dict) else None
        if isinstance(response, dict):
            value = response.get("output", response.get("error"))
            texts.append(value if isinstance(value, str) else json.dumps(value))
    return "".join(texts)


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))


def listed(value: Any) -> list[Any]:
    """A field that should hold a list (``toolCalls``, ``thoughts``), as one: anything else is none."""
    return value if isinstance(value, list) else []


@dataclass
class SessionReader:
    path: str
    offset: int = 0
    # id -> its last copy, in first order: every message the session ever recorded (a compression or a
    # rewind counts in ``resets``; the calls made before it were made all the same)
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    resets: int = 0  # the history replaced (a compression) or rewound since the session began
    bad_lines: int = 0
    _set_messages: int = 0

    def refresh(self) -> None:
        """Read what was appended since the last refresh (a vanished file reads as nothing new)."""
        lines, self.offset = appended_lines(self.path, self.offset)
        for raw in lines:
            try:
                self._line(raw)
            except (ValueError, TypeError):  # UnreadableJSON too: skipped, the lines after it are read all the same
                self.bad_lines += 1

    def _line(self, raw: bytes) -> None:
        record = json_value(raw)
        if not isinstance(record, dict):
            self.bad_lines += 1
        elif isinstance(record.get("$rewindTo"), str):
            self.resets += 1
        elif isinstance(record.get("$set"), dict) and isinstance(record["$set"].get("messages"), list):
            self._set_messages += 1
            self.resets += self._set_messages > 1  # the first sets the session's opening messages
            for m in record["$set"]["messages"]:
                if isinstance(m, dict) and isinstance(m.get("id"), str):
                    self.messages.setdefault(m["id"], m)
        elif isinstance(record.get("id"), str) and "type" in record:
            self.messages[record["id"]] = record

    @property
    def calls(self) -> list[SessionCall]:
        """Every call of the model the session records, in order."""
        out = []
        for m in self.messages.values():
            for c in listed(m.get("toolCalls")) if m.get("type") == "gemini" else []:
                if isinstance(c, dict):
                    out.append(
                        SessionCall(
                            call_key(c.get("name"), c.get("args")),
                            result_text(c.get("result")),
                            str(c.get("status") or ""),
                        )
                    )
        return out

    @property
    def batches(self) -> int:
        """How many model messages with calls the session has recorded whole."""
        return sum(1 for m in self.messages.values() if m.get("type") == "gemini" and listed(m.get("toolCalls")))


def reader_for(cache: dict[str, SessionReader], path: Any) -> SessionReader | None:
    """The refreshed reader of the session file at ``path`` (kept in ``cache`` by path); None for none."""
    return refreshed(cache, path, SessionReader)


# -- the model's side of a run, for its page ------------------------------------------------------------


def _command(call: dict[str, Any], workdir: str) -> str | None:
    """A call as the ledger labels it (tools.tool_call), for the page to match it with its step."""
    from ledger_adapters.gemini.tools import tool_call

    found = tool_call(call.get("name"), call.get("args"), workdir, workdir)
    return found.label if found is not None else None


def workspace(messages: list[dict[str, Any]]) -> str:
    """The work tree a session ran in, as Gemini CLI's opening message names it ("/" when it does not)."""
    for m in messages[:3]:
        lines = content_text(m.get("content")).splitlines()
        for i, line in enumerate(lines[:-1]):
            if "Workspace Directories:" in line and lines[i + 1].strip().startswith("- /"):
                return lines[i + 1].strip()[2:]
    return "/"


def conversation(path: Path) -> Conversation:
    """A Gemini CLI session file as the model's side of the run: one turn per model message (its text,
    its thoughts, the calls it made, its tokens); Gemini CLI records no price."""
    try:
        head = read_record(path, 1 << 20).split(b"\n", 1)[0]  # a regular file's first line
    except OSError as e:
        raise TrajectoryError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        if "sessionId" not in json_value(head, dict):
            raise ValueError
    except ValueError:  # UnreadableJSON
        raise TrajectoryError(f"{path}: not a Gemini CLI session (no session header)") from None
    reader = read_whole(SessionReader(str(path)))
    turns, task = [], ""
    root = workspace(list(reader.messages.values()))
    for m in reader.messages.values():
        if m.get("type") == "user" and not task and not content_text(m.get("content")).startswith("<session_context>"):
            task = content_text(m.get("content"))
        if m.get("type") != "gemini":
            continue
        tokens = m.get("tokens") if isinstance(m.get("tokens"), dict) else {}
        thoughts = [
            t["description"] for t in listed(m.get("thoughts")) if isinstance(t, dict) and _str(t.get("description"))
        ]
        made = [x for x in listed(m.get("toolCalls")) if isinstance(x, dict)]
        calls = [c for c in (_command(x, root) for x in made) if c]
        turns.append(
            ModelTurn(
                content_text(m.get("content")),
                "\n".join(thoughts),
                tuple(calls),
                _int(tokens.get("input")),
                _int(tokens.get("cached")),
                _int(tokens.get("output")),
                # what the model got for its calls, as recorded (unmasked): never shown, read for what the
                # ledger masked in what it kept of them, which the page then masks in the model's words
                received=tuple(t for x in made for t in _received(x.get("result"))),
            )
        )
    return Conversation(str(path), turns, task)


def _received(result: Any) -> tuple[str, ...]:
    """A call's result as the model got it, and a command's output in it with its last newline (Gemini CLI writes
    ``Output: `` before its first line and trims the last newline: the lines the ledger kept are whole lines here)."""
    text = result_text(result)
    shell = shell_result({"llmContent": text}) if text else None
    return tuple(t for t in (text, shell.output + "\n" if shell is not None and shell.output else "") if t)


def _str(record: Any, key: str) -> bool:
    """Whether ``record`` is an object whose ``key`` is text."""
    return isinstance(record, dict) and isinstance(record.get(key), str)


def read_whole(reader: SessionReader) -> SessionReader:
    """``reader`` having read its file to the end (a refresh reads at most 64 MiB), up to MAX_RECORD_BYTES."""
    while reader.offset <= MAX_RECORD_BYTES:
        before = reader.offset
        reader.refresh()
        if reader.offset == before:
            break
    return reader


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def locate(ledger: Path) -> list[Path]:
    """The session files of the run that kept ``ledger``: Gemini CLI writes them in the run's own home,
    ``gemini/home/.gemini/tmp/<project>/chats/`` beside the ledger; oldest first."""
    tmp = ledger.parent / "gemini" / "home" / ".gemini" / "tmp"
    return sorted(tmp.glob("*/chats/session-*.jsonl"), key=lambda p: p.name) if tmp.is_dir() else []


FORMAT = RecordedFormat("gemini-cli", locate=locate, conversation=conversation)
