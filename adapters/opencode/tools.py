"""What OpenCode's tool calls are to the ledger, and what the model reads of their results: pure
functions of the plugin's payloads (OpenCode 1.18.33; its tools' parameters are in its binary).

- ``bash``: a shell command (``command``, in ``workdir`` when given), analysed as any other; the model
  reads its output as it is (``(no output)`` for none; no exit code: that is in ``metadata.exit``).
- ``read``: lines ``offset`` (1-based) on, at most ``limit``, each shown after its number and ": "
  inside ``<content>`` tags, checked against the file like ``cat -n``'s (``analyze_read(numbered="colon")``).
- ``edit``, ``write``, ``apply_patch``: an edit of the files they name (``analyze_edit``).
- ``grep``, ``glob``, ``list``: searches (``analyze_search``).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from ledger_runtime import Analysis, analyze, analyze_edit, analyze_read, analyze_search, shown_path

SHELL = "bash"
READ = "read"
EDITS = ("edit", "write", "apply_patch")
SEARCHES = ("grep", "glob", "list")
NO_OUTPUT = "(no output)"
_PATCHED = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the ledger records it: ``label`` is its command in the ledger (a shell command
    as it is; ``read calc.py``, ``edit calc.py`` for a file tool), ``path`` the file a file tool names."""

    tool: str
    label: str
    analysis: Analysis
    path: str | None = None


def _where(args: dict[str, Any], key: str, cwd: str) -> str | None:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    return os.path.normpath(os.path.join(cwd, value))


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def tool_call(tool: Any, args: Any, cwd: str, workdir: str) -> ToolCall | None:
    """The ledger's view of a call of ``tool`` with ``args`` (None: a tool it does not follow, or
    arguments it cannot read: the call goes on without the ledger)."""
    if not isinstance(args, dict):
        return None
    if tool == SHELL:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return None
        return ToolCall(tool, command, analyze(command, _where(args, "workdir", cwd) or cwd))
    path = _where(args, "filePath", cwd)
    if tool == READ and path is not None:
        first, limit = _count(args.get("offset")) or 1, _count(args.get("limit"))
        last = first + limit - 1 if limit else None
        rng = f":{first}-{last or ''}" if first > 1 or limit else ""
        label = f"read {shown_path(path, workdir)}{rng}"
        return ToolCall(tool, label, analyze_read(path, cwd, label, first=first, last=last, numbered="colon"), path)
    if tool in EDITS:
        paths = [path] if path else [os.path.normpath(os.path.join(cwd, p.strip())) for p in _patched(args)]
        if not paths:
            return None
        label = f"{tool} {' '.join(shown_path(p, workdir) for p in paths)}"
        return ToolCall(tool, label, analyze_edit(paths, cwd, label), paths[0])
    if tool not in SEARCHES:
        return None
    what = args.get("pattern", args.get("path", "."))
    where = _where(args, "path", cwd)
    within = f" in {shown_path(where, workdir)}" if where and what != args.get("path") else ""
    label = f"{tool} {json.dumps(what)}{within}"
    return ToolCall(tool, label, analyze_search(label, cwd), where)


def _patched(args: dict[str, Any]) -> list[str]:
    text = args.get("patchText", args.get("patch"))
    return _PATCHED.findall(text) if isinstance(text, str) else []


def read_whole(metadata: Any) -> str | None:
    """The text of a read that showed a whole file (its lines joined, no last newline); None for part of one."""
    display = metadata.get("display") if isinstance(metadata, dict) else None
    if not isinstance(display, dict) or display.get("type") != "file" or display.get("truncated"):
        return None
    if display.get("lineStart", 1) != 1 or display.get("lineEnd") != display.get("totalLines"):
        return None
    text = display.get("text")
    return text if isinstance(text, str) else None


def shell_output(output: Any, metadata: Any) -> tuple[str, int | None, bool] | None:
    """(output, exit code, whole) of a bash call: the text the model reads, its exit code, and whether
    it is the command's whole output (not cut by OpenCode, which then saves it to a file). None: not a
    bash result."""
    if not isinstance(output, str):
        return None
    meta = metadata if isinstance(metadata, dict) else {}
    code = meta.get("exit")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    text = "" if output == NO_OUTPUT else output
    return text, code, not meta.get("truncated") and not meta.get("outputPath")
