"""Claude Code's session transcript (``<config>/projects/<dir>/<session>.jsonl``, the hooks'
``transcript_path``), read as it grows: what the hook payloads do not say.

- The text the model got for each tool call (``tool_result`` blocks of user entries, by tool use id):
  Claude Code writes it after ``PostToolUse``, so the hooks check their rebuild of it later.
- The calls the model made (``tool_use`` blocks of assistant entries): a call the transcript never
  names, or names with another command, is not one the model made. Claude Code writes its entries in
  order but late (a call's own entry may come after its command ran).
- Compactions: a ``system`` entry of subtype ``compact_boundary``; the outputs shown before it are
  gone from the model's context (a summary stands for them).
- Rewinds (``/rewind``, ``--resume-session-at``): the conversation goes on from an earlier entry. Each
  entry names its parent (``parentUuid``); an entry that is not a tool result whose parent already had
  a child starts a branch, and what the model was shown on the branch left behind is gone. (The
  results of tool calls made together are siblings: each names its own call as parent.)

Entries of a subagent (``isSidechain``) are not the conversation's. Lines are JSON objects; a
malformed line is skipped and counted, a last line still being written is read on the next refresh.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ledger_runtime import appended_lines, json_value, refreshed

CHAIN = ("user", "assistant", "system", "attachment")


@dataclass
class ToolResult:
    """What the model got for one tool call."""

    text: str
    is_error: bool


def result_text(content: Any) -> str:
    """A tool result's content as text (a string, or text blocks; images and the like count as nothing)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


@dataclass
class TranscriptReader:
    path: str
    offset: int = 0
    results: dict[str, ToolResult] = field(default_factory=dict)
    compactions: int = 0
    branches: int = 0
    bad_lines: int = 0
    children: dict[str, int] = field(default_factory=dict)  # uuid -> entries naming it as parent
    # the calls the model made (tool_use blocks of assistant entries), by id: the tool's name and input
    calls: dict[str, tuple[str, Any]] = field(default_factory=dict)

    def refresh(self) -> None:
        """Read what was appended since the last refresh (a vanished file reads as nothing new)."""
        lines, self.offset = appended_lines(self.path, self.offset)
        for raw in lines:
            try:
                self._line(raw)
            except (ValueError, TypeError, AttributeError):  # UnreadableJSON too: skipped, the lines after it are read
                self.bad_lines += 1

    def _line(self, raw: bytes) -> None:
        entry = json_value(raw)
        kind = entry.get("type")
        if kind not in CHAIN or entry.get("isSidechain") is True:
            return
        uuid, parent = entry.get("uuid"), entry.get("parentUuid")
        if kind == "system" and entry.get("subtype") == "compact_boundary":
            self.compactions += 1
        self._calls(entry)
        results = self._results(entry)
        if isinstance(parent, str):
            had = self.children.get(parent, 0)
            self.children[parent] = had + 1
            if had and not results:  # not a result of one of several calls made together
                self.branches += 1
        if isinstance(uuid, str):
            self.children.setdefault(uuid, 0)

    def _calls(self, entry: dict[str, Any]) -> None:
        message = entry.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if entry.get("type") != "assistant" or not isinstance(content, list):
            return
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                self.calls[block["id"]] = (str(block.get("name") or ""), block.get("input"))

    def _results(self, entry: dict[str, Any]) -> bool:
        message = entry.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if entry.get("type") != "user" or not isinstance(content, list):
            return False
        found = False
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call = block.get("tool_use_id")
                if isinstance(call, str):
                    self.results[call] = ToolResult(result_text(block.get("content")), block.get("is_error") is True)
                    found = True
        return found


def reader_for(cache: dict[str, TranscriptReader], path: Any) -> TranscriptReader | None:
    """The refreshed reader of the transcript at ``path`` (kept in ``cache`` by path); None when the
    payload named none."""
    return refreshed(cache, path, TranscriptReader)
