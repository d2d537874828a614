"""From one executed command to records: which lines the agent saw, and how files changed.

``observations`` checks the command analysis's claim of what an output shows against the files after the command: a view
counts only where the output's lines are the file's, byte for byte, with any line numbers the file's own. Whatever the
analysis got wrong then records nothing, never a false "seen". Of a cut output only the lines the model saw count, and
each observation is signed with the digest of the content it was checked against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import compress, islice
from typing import Callable, Iterable, NamedTuple

from ledger_runtime.analysis.commands import Analysis, FileView
from ledger_runtime.analysis.programs import COLON_NUMBERS, FILE_NUMBERS, resolve
from ledger_runtime.analysis.submission import NO_SUBMISSION, Submission
from ledger_runtime.lines import split_lines, trim_common
from ledger_runtime.records import LineSpan, Observation
from ledger_runtime.section import Section, integer, setting

_TAB_NUMBER = re.compile(r"\s*(\d+)\s*\t")  # nl -ba, cat -n: "     7\t"
_COLON_NUMBER = re.compile(r"(\d+): ")  # an agent's read tool: "7: "
_GREP_NUMBER = re.compile(r"(\d+)[:-]")  # grep -n: "7:" for a match, "7-" for context
_OTHER_PREFIX = re.compile(r"\s*\d*\s*\t?")  # nl's and cat -b's numbers, or none on a blank line


@dataclass(frozen=True)
class TruncationSettings(Section):
    """The ``[ledger.truncation]`` settings: how the agent cuts long outputs, and how long an output is stored whole."""

    name = "truncation"
    flat = {
        "output_limit_chars": "limit_chars",
        "output_head_chars": "head_chars",
        "output_tail_chars": "tail_chars",
        "max_stored_output_chars": "max_stored_chars",
    }

    limit_chars: int = setting(10000, integer(1))
    """Outputs this long or longer reach the model cut (mini-swe-agent: 10,000)..."""
    head_chars: int = setting(5000, integer(0))
    """...to their first ``head_chars``..."""
    tail_chars: int = setting(5000, integer(0))
    """...and last ``tail_chars`` characters."""
    max_stored_chars: int = setting(4 * 1024 * 1024, integer(1))
    """Outputs longer than this are stored as their first and last lines (about half of this each)
    with a line saying how much is left out; the model's answer is the output as it is."""

    def truncation(self) -> Truncation:
        """How the agent cuts, as the answers use it."""
        return Truncation(self.limit_chars, self.head_chars, self.tail_chars)


@dataclass(frozen=True)
class Truncation:
    """How the agent cuts long outputs: at ``limit`` or more it keeps the first ``head`` and last ``tail``."""

    limit: int = 10000
    head: int = 5000
    tail: int = 5000
    exact: bool = True  # the agent cuts exactly so (mini-swe-agent); False: an estimate (Codex counts tokens)
    unit: str = "chars"

    def cuts(self, output: str) -> bool:
        if self.unit == "bytes":
            return len(output) >= self.limit or len(output.encode("utf-8", "surrogateescape")) >= self.limit
        return len(output) >= self.limit

    def visible(self, output: str) -> tuple[str, str] | None:
        """The head and tail text the model sees of a cut output, or None when it sees it all."""
        kept = self.kept(output)
        if kept is None:
            return None
        return output[: kept[0]], output[-kept[1] :] if kept[1] else ""

    def seen_chars(self, n: int) -> int:
        """Characters the model sees of an output ``n`` characters long."""
        return n if n < self.limit else min(n, self.head + self.tail)

    def kept(self, output: str) -> tuple[int, int] | None:
        """The head and tail characters the model sees of a cut output, or None when it sees it all."""
        if not self.cuts(output):
            return None
        if self.unit != "bytes":
            return self.head, self.tail
        data = output.encode("utf-8", "surrogateescape")
        head = len(data[: self.head].decode("utf-8", "ignore"))  # a character cut in two is not seen
        tail = len(data[len(data) - self.tail :].decode("utf-8", "ignore")) if self.tail else 0
        return head, tail


@dataclass(frozen=True)
class FileText:
    """A file after the command: its digest, and its lines decoded as the agent's tools decode output."""

    digest: str
    lines: list[str]
    # a path that is a symbolic link: the link's own state digest (what the workspace's snapshots and
    # so the modifications record of the path), and the file it resolves to (None: not known)
    link: str | None = None
    target: str | None = None

    @classmethod
    def of(
        cls,
        digest: str,
        data: bytes,
        printed: tuple[str, Callable[[], list[str]]] | None = None,
        link: tuple[str, str | None] | None = None,
    ) -> FileText:
        """A file's text; ``printed`` lends the lines of an output that is the whole file, so they are split once."""
        text = data.decode("utf-8", "replace")
        lines = printed[1]() if printed is not None and len(text) == len(printed[0]) and text == printed[0] else None
        return cls(digest, lines if lines is not None else split_lines(text), *(link or (None, None)))


class FactRun(NamedTuple):
    """Output lines from ``at`` that are lines from ``first`` of the file ``path``, whose text is ``was``."""

    at: int
    path: str
    first: int
    was: list[str]


def fact_lines(runs: Iterable[FactRun]) -> dict[int, tuple[str, int, str]]:
    """Per output line of ``runs``: path, line number and the file's text of it."""
    out: dict[int, tuple[str, int, str]] = {}
    for r in runs:
        out.update((r.at + i, (r.path, r.first + i, text)) for i, text in enumerate(r.was))
    return out


def _same_line(out: str, text: str, last: bool = False) -> bool:
    """Whether an output line is exactly this file line, allowing the newline tools add or trim at the end."""
    return (
        out == text
        or (not text.endswith("\n") and out == text + "\n")
        or (last and text.endswith("\n") and out == text[:-1])
    )


def _shown_as(out: str, text: str, number: int, numbered: str, last: bool = False) -> bool:
    """Whether output line ``out`` shows file line ``number`` as a view numbered so."""
    if not numbered:
        return _same_line(out, text, last)
    if numbered in (FILE_NUMBERS, COLON_NUMBERS):
        m = (_TAB_NUMBER if numbered == FILE_NUMBERS else _COLON_NUMBER).match(out)
        return m is not None and int(m.group(1)) == number and _same_line(out[m.end() :], text, last)
    o, t = _no_eol(out), _no_eol(text)  # other numbers (nl's default, cat -b): any number, or none
    if not o.endswith(t) or (text.endswith("\n") and not out.endswith("\n") and not last):
        return False
    return _OTHER_PREFIX.fullmatch(o[: len(o) - len(t)]) is not None


def _no_eol(line: str) -> str:
    return line[:-1] if line.endswith("\n") else line


MAX_BLOCK_TRIES = 64


def _find_block(out: list[str], start: int, lines: list[str], first: int, numbered: str) -> int | None:
    """Where, at or after output line ``start``, the file's ``lines`` appear as a contiguous run."""
    if not lines:
        return None
    if not numbered and out[start : start + len(lines)] == lines:  # compared in C: a long whole-file read
        return start
    tries = 0
    end = len(out) - 1
    for at in range(start, len(out) - len(lines) + 1):
        if not _shown_as(out[at], lines[0], first, numbered, at == end):
            continue
        if all(_shown_as(out[at + i], lines[i], first + i, numbered, at + i == end) for i in range(1, len(lines))):
            return at
        tries += 1
        if tries >= MAX_BLOCK_TRIES:
            return None
    return None


def _trimmed_block(out: list[str], start: int, lines: list[str], lo: int, hi: int) -> tuple[int | None, int]:
    """Where lines ``lo``..``hi`` end an output whose trailing blank lines were trimmed, as Claude Code does.

    Returns the output line and the last file line shown, or (None, ``hi``); the trimmed lines count as not seen.
    """
    k = hi
    while k >= lo and not lines[k - 1].strip():
        k -= 1
    at = len(out) - (k - lo + 1)
    if k < lo or k == hi or at < start or _find_block(out, at, lines[lo - 1 : k], lo, "") != at:
        return None, hi
    return at, k


def _spans(numbers: list[int]) -> tuple[LineSpan, ...]:
    """The numbers as runs of consecutive lines: a span made once a run, not once a line of it."""
    nums = sorted(set(numbers))
    if not nums:
        return ()
    out: list[LineSpan] = []
    start = end = nums[0]
    for n in islice(nums, 1, None):
        if n != end + 1:
            out.append(LineSpan(start, end))
            start = n
        end = n
    out.append(LineSpan(start, end))
    return tuple(out)


def observations(
    analysis: Analysis,
    output: str,
    exit_code: int | None,
    files: dict[str, FileText],
    seen: list[bool] | None,
    *,
    step: int,
    attempt: int,
    facts: list[FactRun] | None = None,
    submission: Submission = NO_SUBMISSION,
    out_lines: list[str] | None = None,
) -> list[Observation]:
    """What the agent saw of each file this command showed, checked against ``files`` after the command.

    ``seen`` says per output line whether the model saw it (None: all); ``facts`` gets the runs of checked lines."""
    views = analysis.views
    if not views:
        return []
    out_lines = out_lines if out_lines is not None else split_lines(output)
    visible = seen if seen is not None else [True] * len(out_lines)
    pos = 0  # output line where the next view's lines may start (views print in order)
    obs: list[Observation] = []
    for view in views:
        f = files.get(view.path)
        if f is None:
            continue
        found = _observe(view, out_lines, visible, pos, f, exit_code, facts, submission)
        if found is None:
            continue
        kind, spans, pos = found
        if f.link is None:
            obs.append(Observation(view.path, kind, spans, f.digest, len(f.lines), step, attempt))
            continue
        # read through a symbolic link: it holds while the link points where it did (the digest the
        # path's modifications carry) and the file it resolves to has this content
        target = f.target if f.target != view.path else None
        obs.append(
            Observation(
                view.path, kind, spans, f.link, len(f.lines), step, attempt, target, f.digest if target else None
            )
        )
    return obs


def _observe(  # noqa: C901
    view: FileView,
    out: list[str],
    visible: list[bool],
    pos: int,
    f: FileText,
    exit_code: int | None,
    facts: list[FactRun] | None = None,
    submission: Submission = NO_SUBMISSION,
) -> tuple[str, tuple[LineSpan, ...] | None, int] | None:
    total = len(f.lines)
    if view.kind == "lines":
        if exit_code not in (0, None) or not total:
            return None
        rng = resolve(view.selectors, total)
        if rng is None:
            return None
        lo, hi = rng
        at = _find_block(out, pos, f.lines[lo - 1 : hi], lo, view.numbered)
        if at is None and not view.numbered:
            at, hi = _trimmed_block(out, pos, f.lines, lo, hi)
        if at is None:
            return None  # the output is not those lines of the file as it is now
        # a line that is the submission marker never counts as seen: a later read of it must run
        # (of a long output the model saw only some lines: only those are looked at one by one)
        looked = list(compress(range(hi - lo + 1), visible[at : at + hi - lo + 1]))
        shown = [lo + i for i in looked if not submission.is_marker_line(f.lines[lo - 1 + i])]
        if not shown:
            return None
        if facts is not None:
            facts.append(FactRun(at, view.path, lo, f.lines[lo - 1 : hi]))
        if (lo, hi) == (1, total) and len(shown) == total:
            return "whole", None, at + hi - lo + 1
        return "range", _spans(shown), at + hi - lo + 1
    if view.kind == "matches":
        if not view.numbered:
            text = any(line.strip() for line in out[pos:])
            return ("matches", (), pos) if text and exit_code == 0 else None
        numbers = []
        for i in range(pos, len(out)):
            if not visible[i]:
                continue
            line = out[i]
            m = _GREP_NUMBER.match(line) or _TAB_NUMBER.match(line)
            if m is None:
                continue
            n = int(m.group(1))
            if (
                1 <= n <= total
                and _same_line(line[m.end() :], f.lines[n - 1])
                and not submission.is_marker_line(f.lines[n - 1])
            ):
                numbers.append(n)
                if facts is not None:
                    facts.append(FactRun(i, view.path, n, f.lines[n - 1 : n]))
        return ("matches", _spans(numbers), pos) if numbers else None
    return None


def _lines(data: bytes) -> list[bytes]:
    """Lines as git diff counts them: split at ``\n`` only, each with its ``\r`` if it has one, and a last line with no
    newline unlike the same text with one (``a\r\n`` to ``a\n``, or a newline added at the end, is a line changed)."""
    lines = data.split(b"\n")
    last = lines.pop()  # b"" after a final newline
    if last:
        lines.append(last + b"\n(no newline)")  # no line holds a newline: it equals no other
    return lines


def line_delta(before: bytes, after: bytes) -> tuple[int, int] | None:
    """The lines added and removed from ``before`` to ``after``; None for binary content.

    A line counts as added or removed as many times as it occurs more often after or before. Exact for edits that
    insert, delete or replace lines; a moved line counts as unchanged. O(n)."""
    if b"\0" in before[:8192] or b"\0" in after[:8192]:
        return None
    before, after = trim_common(before, after)
    a = _lines(before)
    b = _lines(after)
    p = 0
    n = min(len(a), len(b))
    while p < n and a[p] == b[p]:
        p += 1
    q = 0
    while q < n - p and a[-1 - q] == b[-1 - q]:
        q += 1
    a, b = a[p : len(a) - q], b[p : len(b) - q]
    if not a or not b:
        return len(b), len(a)
    counts: dict[bytes, int] = {}
    for line in a:
        counts[line] = counts.get(line, 0) + 1
    added = 0
    for line in b:
        c = counts.get(line, 0)
        if c:
            counts[line] = c - 1
        else:
            added += 1
    return added, sum(counts.values())
