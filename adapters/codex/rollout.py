"""Codex's rollout file (``$CODEX_HOME/sessions/.../rollout-*.jsonl``, the hooks'
``transcript_path``), read as it grows: what its hook payloads leave out. ``PostToolUse`` carries
a command's output text only (for a long-running command, its last chunk) and no exit code; the
rollout has, per tool call id, the exit code and the whole output of each command
(``item_completed`` events), the result of each ``apply_patch``, and the arguments of each call
(``max_output_tokens``, which sets how much of an output the model sees), the sandbox of each turn
(the wrapper cannot reach the ledger from inside one), and each compaction of
Codex's history (a ``compacted`` line: the history is rebuilt from a summary, and the outputs the
model was shown before are gone from its context).

Lines are JSON objects; a malformed line is skipped and counted, a last line still being written
is read on the next refresh. One reader is refreshed by one thread at a time (its lock); others may
look up what it has read meanwhile (its tables only grow, an entry at a time).

For the run's page, ``conversation`` reads a finished rollout as the model's side of the run (its
reasoning summaries, messages, tool calls and tokens per response); ``FORMAT`` registers it.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ledger_runtime import (
    Conversation,
    ModelTurn,
    RecordedFormat,
    TrajectoryError,
    UnreadableJSON,
    json_value,
    read_record,
)


@dataclass
class CommandRecord:
    """A finished command of the rollout."""

    exit_code: int | None
    output: str
    status: str


@dataclass
class RolloutReader:
    path: str
    offset: int = 0
    commands: dict[str, CommandRecord] = field(default_factory=dict)
    patches: dict[str, CommandRecord] = field(default_factory=dict)
    arguments: dict[str, dict[str, Any]] = field(default_factory=dict)
    # call id -> what the model asked for: a command's text, a patch's (a call the rollout does not
    # name, or names with another text, is not one the model made)
    named: dict[str, str] = field(default_factory=dict)
    compactions: int = 0
    bad_lines: int = 0
    sandbox: str | None = None  # the latest turn's sandbox policy ("danger-full-access", "read-only", ...)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def refresh(self) -> None:
        """Read what was appended since the last refresh (a vanished file reads as nothing new)."""
        from ledger_runtime import appended_lines

        with self.lock:
            lines, self.offset = appended_lines(self.path, self.offset)
            for raw in lines:
                try:
                    self._line(raw)
                except (ValueError, TypeError, AttributeError):  # UnreadableJSON, or a line of a shape never seen:
                    self.bad_lines += 1  # skipped, and the lines after it are read all the same

    def _line(self, raw: bytes) -> None:  # noqa: C901
        entry = json_value(raw)
        kind = entry.get("type")
        p = entry.get("payload") or {}
        if kind == "compacted":
            self.compactions += 1
            return
        if kind == "turn_context" and isinstance(p, dict) and isinstance(p.get("sandbox_policy"), dict):
            policy = p["sandbox_policy"].get("type")
            self.sandbox = policy if isinstance(policy, str) else None
            return
        if not isinstance(p, dict):
            return
        if kind == "event_msg" and p.get("type") == "item_completed" and isinstance(p.get("item"), dict):
            item = p["item"]
            call_id = item.get("id")
            if not isinstance(call_id, str):
                return
            if item.get("type") == "CommandExecution":
                code = item.get("exit_code")
                self.commands[call_id] = CommandRecord(
                    code if isinstance(code, int) else None,
                    str(item.get("aggregated_output") or ""),
                    str(item.get("status") or ""),
                )
            elif item.get("type") == "FileChange":
                status = str(item.get("status") or "")
                text = str(item.get("stdout") or "") + str(item.get("stderr") or "")
                self.patches[call_id] = CommandRecord(0 if status == "completed" else 1, text, status)
        elif kind == "response_item" and p.get("type") == "function_call" and isinstance(p.get("call_id"), str):
            args = call_arguments(p.get("arguments"))
            if args is not None:
                self.arguments[p["call_id"]] = args
                command = named_command(args)
                if command is not None:
                    self.named[p["call_id"]] = command
        elif kind == "response_item" and p.get("type") == "custom_tool_call" and isinstance(p.get("call_id"), str):
            if isinstance(p.get("input"), str):
                self.named[p["call_id"]] = p["input"]


def output_difference(rollout: str, answer: str) -> str:
    """How the output Codex's rollout holds for a call differs from the answer the ledger recorded for it, in
    sizes and the first byte where they part (never their text: an output may hold a secret), so that a
    mismatch seen once (a run under load) says whether the rollout lost the answer's end, had none of
    it, or had another text altogether."""
    got, sent = rollout.encode("utf-8", "surrogateescape"), answer.encode("utf-8", "surrogateescape")
    at = next((i for i, (a, b) in enumerate(zip(got, sent)) if a != b), min(len(got), len(sent)))
    return f"rollout {len(got)} bytes, answer {len(sent)} bytes, first difference at byte {at}"


def call_arguments(text: Any) -> dict[str, Any] | None:
    """A function call's arguments (JSON text the model wrote) as an object; None when they are not one."""
    try:
        return json_value(text or "{}", dict) if isinstance(text, (str, bytes)) else None
    except UnreadableJSON:
        return None


def named_command(args: dict[str, Any]) -> str | None:
    """The command a call's arguments name (``cmd`` or ``command``: text, or words joined); None for none."""
    command = args.get("cmd", args.get("command"))
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        return " ".join(command)
    return command if isinstance(command, str) else None


def reader_for(cache: dict[str, RolloutReader], path: Any, *, refresh: bool = True) -> RolloutReader | None:
    """The reader of the rollout at ``path`` (kept in ``cache`` by path: a TUI session may move on to
    a new rollout file), refreshed (``refresh=False``: as read so far; a new one is read once);
    None when the payload named none."""
    if not isinstance(path, str) or not path or not os.path.isabs(path):
        return None
    r = cache.get(path)
    if r is None:
        r = cache.setdefault(path, RolloutReader(path))
        refresh = True
    if refresh:
        r.refresh()
    return r


# -- what each model call was sent, rebuilt from the rollout (for the cost meter) ---------------------

MODEL_OUTPUTS = ("function_call", "custom_tool_call", "reasoning", "local_shell_call", "web_search_call")


def _from_model(item: dict[str, Any]) -> bool:
    return item.get("type") in MODEL_OUTPUTS or (item.get("type") == "message" and item.get("role") == "assistant")


def _entries(lines: list[bytes]) -> Iterator[tuple[dict[str, Any], Any]]:
    """Each line of a rollout that is a JSON object, with its payload (a malformed line is skipped)."""
    for raw in lines:
        try:
            entry = json_value(raw, dict)
        except UnreadableJSON:
            continue
        yield entry, entry.get("payload") or {}


def model_inputs(path: str) -> list[list[dict[str, Any]]]:
    """The input items of every model call of a rollout, in order: the history Codex held when it
    called the model (each call's response starts a run of items the model produced). A compaction
    replaces the history with the one it recorded. Codex's own base instructions, which it sends
    with every call, are not in the rollout: the same prefix in every call."""
    items: list[dict[str, Any]] = []
    calls: list[list[dict[str, Any]]] = []
    in_output = False
    try:
        with open(path, "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    for entry, p in _entries(lines):
        if entry.get("type") == "compacted" and isinstance(p, dict):
            history = p.get("replacement_history")
            items = [i for i in history if isinstance(i, dict)] if isinstance(history, list) else []
            in_output = False
            continue
        if entry.get("type") != "response_item" or not isinstance(p, dict):
            continue
        if _from_model(p):
            if not in_output:
                calls.append(list(items))
            in_output = True
        else:
            in_output = False
        items.append(p)
    return calls


def item_text(item: dict[str, Any]) -> tuple[str, str]:
    """(role, text) of a Responses API item, as the cost meter bills it."""
    kind = item.get("type")
    if kind == "message":
        content = item.get("content")
        text = (
            "".join(c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str))
            if isinstance(content, list)
            else str(content or "")
        )
        return str(item.get("role") or "user"), text
    if kind in ("function_call_output", "custom_tool_call_output"):
        out = item.get("output")
        return "tool", out if isinstance(out, str) else json.dumps(out)
    if kind == "function_call":
        return "assistant", f"{item.get('name')}({item.get('arguments')})"
    if kind == "custom_tool_call":
        return "assistant", f"{item.get('name')}({item.get('input')})"
    return "assistant", json.dumps(item.get("summary") or item.get("encrypted_content") or "")


def is_ledger_note(item: dict[str, Any]) -> bool:
    """A developer message that is one of the ledger's notes (additionalContext of its hooks)."""
    role, text = item_text(item)
    return item.get("type") == "message" and role == "developer" and text.startswith(("(Ledger runtime:", "<ledger_"))


# -- the model's side of a run, for its page -----------------------------------------------------------


def _seconds(stamp: Any) -> float | None:
    """A rollout line's ISO time stamp in seconds (None when it has none)."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _outputs(item: dict[str, Any]) -> list[str]:
    """A call's output item as the model got it: its text, and the output inside it where that text is
    Codex's JSON of one (``{"output": ..., "metadata": ...}``)."""
    text = item_text(item)[1]
    try:
        inner = json_value(text) if text.startswith("{") else None
    except UnreadableJSON:  # a command's output nested past the parser
        inner = None
    return [text] + ([inner["output"]] if isinstance(inner, dict) and isinstance(inner.get("output"), str) else [])


def _command(item: dict[str, Any]) -> str | None:
    """The command a model output item asks for, as the hooks hand it to the ledger."""
    kind = item.get("type")
    if kind == "custom_tool_call":
        return item.get("input") if isinstance(item.get("input"), str) else None
    if kind == "function_call":
        args = call_arguments(item.get("arguments"))
        cmd = args.get("cmd", args.get("command")) if args is not None else None
    elif kind == "local_shell_call":
        action = item.get("action")
        cmd = action.get("command") if isinstance(action, dict) else None
    else:
        return None
    if isinstance(cmd, list) and len(cmd) == 3 and cmd[:2] in (["bash", "-lc"], ["/bin/bash", "-lc"]):
        cmd = cmd[2]
    return cmd if isinstance(cmd, str) else None


class _Turn:
    def __init__(self, started: float | None, first: float | None):
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.commands: list[str] = []
        self.usage: dict[str, Any] | None = None
        self.received: list[str] = []  # its calls' outputs, as Codex handed them to the model
        self.seconds = first - started if started is not None and first is not None and first >= started else None


def conversation(path: Path) -> Conversation:  # noqa: C901
    """A Codex rollout as the model's side of the run: one turn per response of the model (its
    reasoning summaries, messages and tool calls), its tokens as Codex recorded them; Codex records
    no price. The time of a call runs from the last item before it to its first output."""
    try:
        lines = read_record(path).splitlines()
    except OSError as e:
        raise TrajectoryError(f"{path}: cannot read: {e.strerror or e}") from None
    turns: list[_Turn] = []
    task = ""
    last: float | None = None
    current: _Turn | None = None
    rollout = False
    for entry, p in _entries(lines):
        if not isinstance(p, dict):
            continue
        kind = entry.get("type")
        rollout = rollout or kind in ("session_meta", "response_item", "turn_context")
        stamp = _seconds(entry.get("timestamp"))
        if kind == "response_item":
            if _from_model(p):
                if current is None:
                    current = _Turn(last, stamp)
                    turns.append(current)
                role, text = item_text(p)
                if p.get("type") == "message":
                    current.text.append(text)
                elif p.get("type") == "reasoning":
                    summary = p.get("summary") if isinstance(p.get("summary"), list) else []
                    current.reasoning += [
                        s["text"]
                        for s in summary
                        if isinstance(s, dict) and isinstance(s.get("text"), str) and s["text"]
                    ]
                cmd = _command(p)
                if cmd is not None:
                    current.commands.append(cmd)
            else:
                current = None
                if p.get("type") in ("function_call_output", "custom_tool_call_output") and turns:
                    turns[-1].received += _outputs(p)
                if p.get("type") == "message" and p.get("role") == "user" and not task:
                    text = item_text(p)[1]
                    task = "" if text.lstrip().startswith("<") else text  # not Codex's own context blocks
        elif kind == "token_usage_record" and turns and turns[-1].usage is None:
            turns[-1].usage = p.get("usage") if isinstance(p.get("usage"), dict) else None
        elif kind == "event_msg" and p.get("type") == "token_count" and turns and turns[-1].usage is None:
            info = p.get("info") if isinstance(p.get("info"), dict) else {}
            turns[-1].usage = info.get("last_token_usage") if isinstance(info.get("last_token_usage"), dict) else None
        last = stamp if stamp is not None else last
    if not rollout:
        raise TrajectoryError(f"{path}: not a Codex rollout (no session or response items)")

    def tokens(t: _Turn, key: str) -> int | None:
        v = (t.usage or {}).get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return Conversation(
        str(path),
        [
            ModelTurn(
                "\n".join(t.text),
                "\n".join(t.reasoning),
                tuple(t.commands),
                tokens(t, "input_tokens"),
                tokens(t, "cached_input_tokens"),
                tokens(t, "output_tokens"),
                None,
                t.seconds,
                tuple(t.received),
            )
            for t in turns
        ],
        task,
    )


def locate(ledger: Path) -> list[Path]:
    """The rollouts of the run that kept ``ledger``: Codex writes them in the run's own home,
    ``codex-home/sessions/YYYY/MM/DD/rollout-*.jsonl`` beside the ledger; oldest first, but its subagents'
    (``codex --enable multi_agent_v2``: their turns are not the main model's)."""
    sessions = ledger.parent / "codex-home" / "sessions"
    found = sorted(sessions.rglob("rollout-*.jsonl"), key=lambda p: p.name) if sessions.is_dir() else []
    return [path for path in found if not is_subagents(path)]


META_BYTES = 1 << 20  # a rollout's first line, its session_meta, is well under this (Codex's instructions in it)


def is_subagents(path: Path) -> bool:
    """Whether a rollout is a subagent's: its first line, the session's meta, says the thread is one (a rollout
    that cannot be read or says nothing of it is not)."""
    try:
        first = read_record(path, META_BYTES).split(b"\n", 1)[0]
        entry = json_value(first)
    except (OSError, ValueError):  # UnreadableJSON: nested past the parser too
        return False
    meta = entry.get("payload") if isinstance(entry, dict) and entry.get("type") == "session_meta" else None
    if not isinstance(meta, dict):
        return False
    source = meta.get("source")
    return meta.get("thread_source") == "subagent" or (isinstance(source, dict) and "subagent" in source)


# the replay does not read Codex's rollouts (load is None): the page reads them
FORMAT = RecordedFormat("codex", locate=locate, conversation=conversation)
