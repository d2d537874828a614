"""What the model last saw of each file in full, for an agent that reads and edits files with tools of
its own (Claude Code's Read and Edit, Gemini CLI's read_file and replace, OpenCode's read and edit):
a read of a file that changed since the model saw it, by anything but the agent's own edits, is
flagged in the same turn with who changed it and the diff from the version the model saw.

``SeenFiles(runtime, edit_tools)`` keeps the texts (files up to ``MAX_SEEN_BYTES``); the adapter says
when the model saw a file whole (``saw``, ``saw_now`` after its own edit) and asks ``changed`` at each
read. A compaction or a new conversation: ``forget``.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from typing import Any

DIFF_NOTE_CHARS = 2_000  # a changed file's diff in a note; a longer one is cut, and says so
MAX_SEEN_BYTES = 1_000_000  # files up to this size are kept as the model last saw them (for diffs)


def file_diff(before: str, after: str, limit: int = DIFF_NOTE_CHARS) -> str:
    """A unified diff of two texts (one line of context), cut at ``limit`` characters."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), "seen", "now", n=1, lineterm="\n"
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in list(lines)[2:])
    if len(text) > limit:
        cut = text.rfind("\n", 0, limit) + 1
        text = text[:cut] + f"[ledger: the diff goes on for {len(text) - cut} more characters; read the file]\n"
    return text


def shown_path(path: str, workdir: str) -> str:
    """A path as a label shows it: relative to the work tree when it is inside it."""
    root = workdir.rstrip(os.sep) + os.sep
    return path[len(root) :] if path.startswith(root) else path


def file_text(path: str) -> str | None:
    """The file's text now, when it is small enough to keep (None: missing, unreadable, too big, or not a regular
    file: a FIFO or a link to /dev/zero put in its place would hold the hook that asks, or never end its read)."""
    from ledger_runtime.ledger.private import read_record

    try:
        data = read_record(path, MAX_SEEN_BYTES + 1)
    except (OSError, ValueError):  # ValueError: a NUL in the path (an agent's tool call may name one)
        return None
    return data.decode("utf-8", "replace") if len(data) <= MAX_SEEN_BYTES else None


@dataclass
class _Seen:
    step: int
    text: str


@dataclass
class SeenFiles:
    """What the model last saw in full of each file (a whole-file read, or the file after its own edit),
    and the note for a read of a file that changed since."""

    runtime: Any  # a LedgerRuntime
    edit_tools: tuple[str, ...]  # the agent's edit tools, as the labels of their records begin
    seen: dict[str, _Seen] = field(default_factory=dict)

    def saw(self, path: str, step: int, text: str) -> None:
        """The model was shown ``text``, the whole of ``path``, at ``step``."""
        self.seen[self._file(path)] = _Seen(step, text)

    def saw_now(self, path: str | None) -> None:
        """After the model's own edit of ``path``: the agent tells it that it holds the file as it is."""
        if path is None:
            return
        text = file_text(path)
        if text is None:
            self.seen.pop(self._file(path), None)
        else:
            self.seen[self._file(path)] = _Seen(self.runtime.state.step, text)

    def _file(self, path: str) -> str:
        """The file ``path`` names, as the ledger records the tree's files: a link's target, for the file
        read or written through it is the one the model saw under either name."""
        link_target = getattr(self.runtime.workspace, "link_target", None)
        target = link_target(path) if link_target is not None else None
        return target or path

    def forget(self) -> None:
        """The model's context lost what it was shown (a compaction, a rewind, a new conversation)."""
        self.seen.clear()

    def changed(self, path: str, step: int, whole: str | None, *, stub: str | None = None) -> str:
        """The note for a read (at ``step``) of ``path``, which showed the model ``whole`` (the file's whole
        text; None: part of it, or not its text), when the file changed since the model saw it by anything
        but its own edits; "" when it did not. ``stub``: the agent that answered the read with "unchanged
        since your last read" instead of the file."""
        state = self.runtime.state
        real = self._file(path)
        names = (path,) if real == path else (path, real)  # read through a link: seen under either name
        # its reads under either name, and through any other link to its file
        observed = sorted({id(o): o for n in names for o in state.reads_of(n)}.values(), key=lambda o: o.step)
        last, seen = (observed[-1] if observed else None), self.seen.get(real)
        if last is None and seen is None:
            return ""  # never seen: nothing it holds can be out of date
        since = max(x.step for x in (last, seen) if x is not None)
        current = whole if stub is None else None
        if seen is not None and seen.step >= (last.step if last else 0):
            current = current if current is not None else file_text(path)
            changed = current is not None and current != seen.text
        elif last is not None and last.target == real and last.target_hash is not None:
            fs = self.runtime.workspace.file_state(real)  # a read through the link: its file's content then
            changed = fs is not None and fs.digest != last.target_hash
        else:
            fs = self.runtime.workspace.file_state(last.path if last is not None else path)
            changed = fs is not None and last is not None and fs.digest != last.content_hash
        if not changed:
            return ""
        by = sorted((m for n in names for m in state.modifications_of(n) if m.step > since), key=lambda m: m.step)
        if by and all(self._own_edit(m.attempt) for m in by):
            return ""  # its own edits: the agent told it the file as they left it
        once = {(m.attempt, m.step): m for m in by}  # a command that changed the link and its file: named once
        return self._note(path, step, since, list(once.values()), self._held(real, last), current, stub)

    def _held(self, real: str, last: Any) -> _Seen | None:
        """The text the model holds of the file its last read of this name showed (for the diff): the file the
        name named then (a link since retargeted named another), as seen in full no earlier than that read, or
        before it where nothing changed it between; None where the ledger has no such text."""
        then = real if last is None else (last.target or self._file(last.path))
        held = self.seen.get(then)
        if held is None or last is None or held.step >= last.step:
            return held
        between = (m for n in {then, last.path} for m in self.runtime.state.modifications_of(n))
        return None if any(held.step < m.step <= last.step for m in between) else held

    def _note(
        self, path: str, step: int, since: int, by: list[Any], seen: _Seen | None, current: str | None, stub: str | None
    ) -> str:
        who = "; ".join(self._who(m) for m in by[-3:]) or "changed outside the commands the ledger saw"
        name = shown_path(path, self.runtime.workdir)
        real = self._file(path)
        name += f" (a link to {shown_path(real, self.runtime.workdir)})" if real != path else ""
        head = (
            f"[ledger] {stub} says {name} is unchanged since your last read, but it changed since you saw it "
            f"at step {since}: {who}."
            if stub
            else f"[ledger] {name} changed since you saw it at step {since}: {who}."
        )
        current = current if current is not None else file_text(path)
        if seen is None or current is None or seen.text == current:
            return head + (" Read it again with `cat -n` to see it as it is now." if stub else "")
        diff = file_diff(seen.text, current)
        if stub and diff == file_diff(seen.text, current, limit=len(diff) + 1):  # the whole diff: it knows the file now
            self.seen[real] = _Seen(step, current)
        return head + " What changed from the version you saw (a unified diff):\n" + diff

    def _own_edit(self, attempt_id: int | None) -> bool:
        a = self.runtime.state.attempt(attempt_id) if attempt_id is not None else None
        return a is not None and a.command.split(" ", 1)[0] in self.edit_tools and a.command_class.value == "modify"

    def _who(self, m: Any) -> str:
        if m.attempt is None:
            return f"changed outside any command before step {m.step}"
        a = self.runtime.state.attempt(m.attempt)
        command = a.command.splitlines()[0][:60] if a is not None and a.command else "?"
        return f"`{command}` (step {m.step}) changed it"
