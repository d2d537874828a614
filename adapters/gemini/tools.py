"""What Gemini CLI's tool calls are to the ledger, and what the model reads of their results: pure
functions of the hook payloads (Gemini CLI 0.61.0; its tools' parameters are in its bundle's
``base-declarations``).

- ``run_shell_command``: a shell command (``command``, in ``dir_path`` under the work tree), analysed
  as any other. What the model reads is Gemini CLI's ``llmContent``: ``Output: ...`` and the lines that
  follow it (``Exit Code: N`` when it is not 0, ``Process Group PGID: N``), inside
  ``<untrusted_context>`` tags (``ShellResult``).
- ``read_file``: lines ``start_line`` to ``end_line`` of a file, shown as they are (not numbered),
  checked against the file like a shell read's (``analyze_read``).
- ``write_file``, ``replace``: an edit of the file they name (``analyze_edit``).
- ``grep_search``, ``glob``, ``list_directory``, ``read_many_files``: searches (``analyze_search``).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from ledger_runtime import Analysis, analyze, analyze_edit, analyze_read, analyze_search, shown_path

SHELL = "run_shell_command"
READ = "read_file"
EDITS = ("write_file", "replace")
SEARCHES = ("grep_search", "glob", "list_directory", "read_many_files")
TOOL_MATCHER = "^(" + "|".join((SHELL, READ, *EDITS, *SEARCHES)) + ")$"
# before a call, only what a rule may refuse: a read has none (a hook process it need not wait for)
GOVERNED_MATCHER = "^(" + "|".join((SHELL, *EDITS)) + ")$"
UNTRUSTED = ("<untrusted_context>\n", "\n</untrusted_context>")
OUTPUT = "Output: "
# the lines Gemini CLI puts after a command's output, in this order, each when it has something to say
FIELDS = ("Error", "Exit Code", "Signal", "Background PIDs", "Process Group PGID")
_FIELD_LINE = re.compile(r"(?:" + "|".join(FIELDS) + r"): [^\n]*")
# what the tool that reads the answer back (read_file) shows whole: at most this many lines, each this long
READ_MAX_LINES = 2_000
READ_MAX_LINE = 2_000
# Gemini CLI cuts a command's llmContent longer than this (to a head and a tail, the whole saved to a file)
TRUNCATE_CHARS = 40_000
# its notice of a cut, the first line (it names the file the whole went to): it keeps the first fifth of its limit
# and the last four fifths, and says how much it left out between them
_CUT_NOTICE = re.compile(r"Output too large\. Showing first (.+?) and last (.+?) characters\. For full output see: ")
OMITTED = " characters omitted] ...\n\n"


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the ledger records it: ``label`` is its command in the ledger (a shell command
    as it is; ``read_file calc.py``, ``replace calc.py`` for a file tool), ``path`` the file a file tool
    names (absolute), ``key`` the call as the hooks and the session name it (its tool and arguments)."""

    tool: str
    label: str
    analysis: Analysis
    key: str
    path: str | None = None


def call_key(tool: Any, args: Any) -> str:
    """A call's tool and arguments as one string: Gemini CLI's hooks name no call id, so a BeforeTool and
    its AfterTool, and the session's record of the call, are paired by it."""
    return json.dumps([tool, args], sort_keys=True, default=str)


def _where(args: dict[str, Any], key: str, cwd: str) -> str | None:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    return os.path.normpath(os.path.join(cwd, value))


def _line(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def tool_call(tool: Any, args: Any, cwd: str, workdir: str) -> ToolCall | None:
    """The ledger's view of a call of ``tool`` with ``args`` (None: a tool it does not follow, or
    arguments it cannot read: the call goes on without the ledger)."""
    if not isinstance(args, dict) or tool not in (SHELL, READ, *EDITS, *SEARCHES):
        return None
    key = call_key(tool, args)
    if tool == SHELL:
        command, where = args.get("command"), _where(args, "dir_path", cwd) or cwd
        if not isinstance(command, str) or not command.strip() or args.get("is_background") is True:
            return None  # a background command's output is not its result: not followed
        return ToolCall(tool, command, analyze(command, where), key)
    path = _where(args, "file_path", cwd)
    if tool == READ and path is not None:
        first, last = _line(args.get("start_line")) or 1, _line(args.get("end_line"))
        rng = f":{first}-{last or ''}" if first > 1 or last else ""
        label = f"read_file {shown_path(path, workdir)}{rng}"
        return ToolCall(tool, label, analyze_read(path, cwd, label, first=first, last=last, numbered=False), key, path)
    if tool in EDITS and path is not None:
        label = f"{tool} {shown_path(path, workdir)}"
        return ToolCall(tool, label, analyze_edit((path,), cwd, label), key, path)
    if tool not in SEARCHES:
        return None
    what = args.get("pattern", args.get("include", args.get("dir_path", "")))
    where = _where(args, "dir_path", cwd)
    label = f"{tool} {json.dumps(what)}" + (
        f" in {shown_path(where, workdir)}" if where and what != args.get("dir_path") else ""
    )
    return ToolCall(tool, label, analyze_search(label, cwd), key, where)


def llm_text(tool_response: Any) -> str | None:
    """What the model reads of a tool's result (``llmContent`` when it is text), None otherwise."""
    if not isinstance(tool_response, dict):
        return None
    content = tool_response.get("llmContent")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict) and set(p) == {"text"} and isinstance(p["text"], str) for p in content
    ):
        return "".join(p["text"] for p in content)
    return None


@dataclass(frozen=True)
class ShellResult:
    """A command's result as Gemini CLI hands it to the model: ``head`` + output + ``tail``."""

    head: str
    output: str
    tail: str

    @property
    def returncode(self) -> int | None:
        """The exit code (0 unless ``Exit Code: N`` says otherwise; None after a signal or an error)."""
        if "\nSignal: " in self.tail or "\nError: " in self.tail:
            return None
        m = re.search(r"\nExit Code: ([^\n]*)", self.tail)
        if m is None:
            return 0
        return int(m.group(1)) if re.fullmatch(r"-?\d{1,10}", m.group(1)) else None  # not an exit code: unknown

    def with_output(self, text: str) -> str:
        """The result with ``text`` in place of the output, as the model would read it (its last newline
        trimmed, as Gemini CLI trims a command's output)."""
        return self.head + (text.rstrip("\n") or "(empty)") + self.tail


def shell_result(tool_response: Any) -> ShellResult | None:
    """A finished command's result, split around its output (None: not one the ledger can read: a
    cancelled, backgrounded, summarised or failed one, whose text is Gemini CLI's own)."""
    text = llm_text(tool_response)
    if text is None or (isinstance(tool_response, dict) and tool_response.get("error")):
        return None
    inner, head = text, ""
    if text.startswith(UNTRUSTED[0]) and text.endswith(UNTRUSTED[1]):
        inner, head = text[len(UNTRUSTED[0]) : -len(UNTRUSTED[1])], UNTRUSTED[0]
    if not inner.startswith(OUTPUT) or "&lt;/untrusted_context&gt;" in inner:
        return None
    body = inner[len(OUTPUT) :]
    start = _trailer_start(body, tool_response.get("returnDisplay") if isinstance(tool_response, dict) else None)
    output = body[:start]
    tail = body[start:] + (UNTRUSTED[1] if head else "")
    return ShellResult(head + OUTPUT, "" if output == "(empty)" else output, tail)


def _trailer_start(body: str, shown: Any) -> int:
    """Where the lines Gemini CLI put after a command's output start in ``body``. The output's own last
    lines may read as such lines (``Error: Cannot find module 'x'``): of the places they may start, the
    one that leaves the output the user was shown (``returnDisplay``, the output as it came) when one
    does, else the first."""
    starts = [len(body)]
    while (nl := body.rfind("\n", 0, starts[-1])) >= 0 and _FIELD_LINE.fullmatch(body, nl + 1, starts[-1]):
        starts.append(nl)
    if isinstance(shown, str):
        shown = shown.rstrip("\n") or "(empty)"
        for start in starts:
            if body[:start] == shown:
                return start
    return starts[-1]


def js_len(text: str) -> int:
    """How long Gemini CLI (JavaScript) counts ``text``: in UTF-16 code units, a character past U+FFFF two."""
    return len(text) + sum(1 for c in text if c > "\uffff")


def cut_limit(*settings: Any) -> int | None:
    """The length past which Gemini CLI cuts a command's result as ``settings`` (the user's, the work tree's) set
    it, ``tools.truncateToolOutputThreshold``: the smallest they set above 0 (a lower limit than Gemini CLI's only
    counts more results as not seen); TRUNCATE_CHARS where none sets one; None where each that sets it turns the
    cut off (0 or less)."""
    found = [
        v
        for s in settings
        if isinstance(s, dict) and isinstance(s.get("tools"), dict)
        for v in [s["tools"].get("truncateToolOutputThreshold")]
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    if not found:
        return TRUNCATE_CHARS
    above = [v for v in found if v > 0]
    return int(min(above)) if above else None


def cuts(text: str, limit: int | None = TRUNCATE_CHARS) -> bool:
    """Whether Gemini CLI cuts ``text``, a command's whole result (``Output: ``, the output and the lines after
    it), for the model: longer than ``limit`` (None: it cuts none) as it counts."""
    return limit is not None and js_len(text) > limit


def _units(text: str, start: int, end: int | None = None) -> str:
    """``text[start:end]`` in UTF-16 code units, as JavaScript slices it (a character cut in two leaves a half)."""
    data = text.encode("utf-16-le", "surrogatepass")
    return data[2 * start : None if end is None else 2 * end].decode("utf-16-le", "surrogatepass")


def _count(text: str) -> int | None:
    """A count as Gemini CLI writes it in the user's locale (``8,000``, ``8.000``, ``8 000``), None if none."""
    digits = "".join(c for c in text if c.isdecimal())
    return int(digits) if digits and len(text) <= 40 else None


def cut_as_sent(got: str, text: str) -> bool:
    """Whether ``got`` is ``text`` as Gemini CLI cuts it for the model: its notice, which says how many characters
    of the head and the tail it kept (its limit is the user's, or lower when the context is nearly full), the head,
    how many it left out, and the tail, each counted and cut as it counts (UTF-16 code units)."""
    notice, _, rest = got.partition("\n")
    m = _CUT_NOTICE.match(notice)
    first, last = (_count(m.group(1)), _count(m.group(2))) if m else (None, None)
    size = js_len(text)
    if first is None or last is None or last == 0 or first + last >= size:
        return False
    head, tail = _units(text, 0, first), _units(text, size - last)
    if not rest.startswith(head + "\n\n... ["):
        return False
    count, found, _ = rest[len(head) + 6 : len(head) + 6 + 100].partition(OMITTED)
    if not found or _count(count) != size - first - last:
        return False
    return rest.startswith(tail.rstrip("\n"), len(head) + 6 + len(count) + len(found))


def readable_whole(text: str) -> bool:
    """Whether read_file shows ``text`` (a file's content) as it is: not cut, not taken for binary."""
    lines = text.split("\n")
    return (
        len(lines) <= READ_MAX_LINES
        and all(len(line) <= READ_MAX_LINE for line in lines)
        and "\0" not in text
        and js_len(text) <= TRUNCATE_CHARS
    )
