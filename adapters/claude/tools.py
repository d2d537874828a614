"""What Claude Code's tool calls are to the ledger, and what the model reads of their results: pure
functions of the hook payloads (Claude Code 2.1.332; its tools' shapes are in the npm package's
``sdk-tools.d.ts``).

- ``Bash``: a shell command, analysed as any other (its ``command``, in the ``cwd`` of the payload).
- ``Read``: lines of a file, shown numbered (``cat -n`` numbers them alike: the number, a tab, the
  line), checked against the file like a shell read's (``analyze_read``).
- ``Edit``, ``MultiEdit``, ``Write``, ``NotebookEdit``: an edit of the file they name (``analyze_edit``):
  the policies see it, the workspace scan records what changed.
- ``Grep``, ``Glob``: a search (``analyze_search``): recorded, never claimed as lines of a file.

The text the model reads for each, rebuilt from the hook's ``tool_response`` (``read_text``,
``edit_text``), is checked against Claude Code's transcript once it has it (hooks.py): a rebuild that
is not what the model got is never the source of a reference.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ledger_runtime import Analysis, analyze, analyze_edit, analyze_read, analyze_search, shown_path

SHELL = "Bash"
READS = ("Read",)
EDITS = ("Edit", "MultiEdit", "Write", "NotebookEdit")
SEARCHES = ("Grep", "Glob")
TOOLS = (SHELL, *READS, *EDITS, *SEARCHES)
TOOL_MATCHER = "^(" + "|".join(TOOLS) + ")$"
# before a call, only what a rule may refuse: a read has none (a hook process it need not wait for)
GOVERNED_MATCHER = "^(" + "|".join((SHELL, *EDITS)) + ")$"
# how Claude Code tells the model that an Edit or Write leaves the file as the model now holds it
STATE_CURRENT = " (file state is current in your context \u2014 no need to Read it back)"
EMPTY_FILE = "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>"
# Claude Code's answers to a re-read it takes for unchanged (older versions, and some settings): the
# model is told to look at an earlier result instead of getting the file
UNCHANGED_STUBS = (
    "File unchanged since last read",
    "Wasted call \u2014 file unchanged since your last Read",
    "<system-reminder>This file is already in your context",
)


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the ledger records it: ``label`` is its command in the ledger (a shell
    command as it is; ``Read calc.py``, ``Edit calc.py`` for a file tool), ``path`` the file a file
    tool names (absolute)."""

    tool: str
    label: str
    analysis: Analysis
    path: str | None = None


def _where(tool_input: dict[str, Any], key: str, cwd: str) -> str | None:
    value = tool_input.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    return os.path.normpath(os.path.join(cwd, value))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def tool_call(tool: Any, tool_input: Any, cwd: str, workdir: str) -> ToolCall | None:
    """The ledger's view of a call of ``tool`` with ``tool_input`` (None: a tool it does not follow, or
    an input it cannot read: the call goes on without the ledger)."""
    if tool not in TOOLS or not isinstance(tool_input, dict):
        return None
    if tool == SHELL:
        command = tool_input.get("command")
        if not isinstance(command, str) or not command.strip():
            return None
        return ToolCall(tool, command, analyze(command, cwd))
    if tool in READS:
        path = _where(tool_input, "file_path", cwd)
        if path is None:
            return None
        offset, limit = _int(tool_input.get("offset")), _int(tool_input.get("limit"))
        first = offset or 1
        last = first + limit - 1 if limit else None
        rng = f":{first}-{last if last is not None else ''}" if offset or limit else ""
        label = f"Read {shown_path(path, workdir)}{rng}"
        return ToolCall(tool, label, analyze_read(path, cwd, label, first=first, last=last), path)
    if tool in EDITS:
        path = _where(tool_input, "notebook_path" if tool == "NotebookEdit" else "file_path", cwd)
        if path is None:
            return None
        label = f"{tool} {shown_path(path, workdir)}"
        return ToolCall(tool, label, analyze_edit((path,), cwd, label), path)
    pattern = tool_input.get("pattern")
    if not isinstance(pattern, str):
        return None
    where = _where(tool_input, "path", cwd)
    label = f"{tool} {pattern!r}" + (f" in {shown_path(where, workdir)}" if where else "")
    return ToolCall(tool, label, analyze_search(label, cwd), where)


def read_text(tool_response: Any) -> str | None:
    """What the model reads for a Read of a text file: each line after its number and a tab (None: not
    a text file's result, an image or a notebook, whose content the model reads otherwise)."""
    if not isinstance(tool_response, dict) or tool_response.get("type") != "text":
        return None
    f = tool_response.get("file")
    if not isinstance(f, dict) or not isinstance(f.get("content"), str) or _int(f.get("startLine")) is None:
        return None
    content, start = f["content"], f["startLine"]
    if content == "":
        return EMPTY_FILE if start == 1 else None
    return "\n".join(f"{start + i}\t{line}" for i, line in enumerate(content.split("\n")))


def read_content(tool_response: Any) -> tuple[str, bool] | None:
    """(content, whole) of a Read of a text file: the file's text as the model got it, and whether
    that is all of the file."""
    if not isinstance(tool_response, dict) or tool_response.get("type") != "text":
        return None
    f = tool_response.get("file")
    if not isinstance(f, dict) or not isinstance(f.get("content"), str):
        return None
    start, shown, total = f.get("startLine"), f.get("numLines"), f.get("totalLines")
    whole = start == 1 and isinstance(shown, int) and isinstance(total, int) and shown >= total
    return f["content"], whole


def unchanged_stub(tool_response: Any) -> bool:
    """Whether a Read's result is Claude Code's "unchanged since your last read" in place of the file."""
    if isinstance(tool_response, str):
        return tool_response.startswith(UNCHANGED_STUBS)
    if not isinstance(tool_response, dict):
        return False
    if tool_response.get("type") not in ("text", "image", "notebook", "pdf", "parts"):
        return True  # a result of another shape (file_unchanged and the like): no content to go by
    f = tool_response.get("file")
    content = f.get("content") if isinstance(f, dict) else None
    return isinstance(content, str) and content.startswith(UNCHANGED_STUBS)


def edit_text(tool: str, tool_response: Any, path: str) -> str:
    """What the model reads for an Edit or Write that succeeded."""
    r = tool_response if isinstance(tool_response, dict) else {}
    if tool == "Write" and r.get("type") == "create":
        return f"File created successfully at: {path}{STATE_CURRENT}"
    if tool == "Edit" and r.get("replaceAll") is True:
        return f"The file {path} has been updated. All occurrences were successfully replaced.{STATE_CURRENT}"
    if tool in ("Edit", "Write", "MultiEdit"):
        return f"The file {path} has been updated successfully.{STATE_CURRENT}"
    return f"{tool} {path}"  # NotebookEdit: what it says is the tool's own (the check says if it differs)


def search_text(tool_response: Any) -> str:
    """What a Grep or Glob found, as the ledger records it (its format is the tool's)."""
    r = tool_response if isinstance(tool_response, dict) else {}
    if isinstance(r.get("content"), str):
        return r["content"]
    names = r.get("filenames")
    return "\n".join(n for n in names if isinstance(n, str)) if isinstance(names, list) else ""


def shell_output(tool_response: Any) -> tuple[str, bool] | None:
    """(output, may be replaced) of a Bash call that Claude Code ran to its end: the text the model
    reads (Claude Code merges stderr into stdout and trims the blank lines around it), and whether
    the ledger may hand its answer back instead (the whole output, inline: no image, no background
    task, no output too large for the conversation, no interruption). None: not a Bash result."""
    if not isinstance(tool_response, dict) or not isinstance(tool_response.get("stdout"), str):
        return None
    out, err = tool_response["stdout"], tool_response.get("stderr")
    err = err if isinstance(err, str) else ""
    text = out + ("\n" if out and err else "") + err
    plain = (
        not err
        and tool_response.get("interrupted") is not True
        and not tool_response.get("isImage")
        and not tool_response.get("backgroundTaskId")
        and not tool_response.get("persistedOutputPath")
        and not tool_response.get("returnCodeInterpretation")
        and not tool_response.get("structuredContent")
    )
    return text, plain


def failure(error: Any) -> tuple[str, int | None]:
    """(output, exit code) of a tool call Claude Code reports as failed (``PostToolUseFailure``): a
    command's is ``Exit code N`` and its output; a file tool's, its error (exit code 1)."""
    text = error if isinstance(error, str) else ""
    head, _, rest = text.partition("\n")
    code = head[10:].strip() if head.startswith("Exit code ") else ""
    if code.lstrip("-").isdigit() and len(code) <= 11:
        return rest, int(code)
    return text, 1
