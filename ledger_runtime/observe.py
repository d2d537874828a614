"""From one executed command to records: which lines the agent saw, and how files changed.

Pure functions. ``observations`` maps the command's file views (commands.FileView) onto the output
the model actually received: when the output reached the model cut (head and tail only), only the
lines in the visible parts count as seen. ``line_delta`` counts lines added and removed between
two contents.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from .commands import SUBMIT_MARKER, Analysis, FileView
from .hashing import FileState
from .programs import resolve
from .records import LineSpan, Observation

MAX_DIFF_LINES = 20000
_NUMBERED = re.compile(r"^\s*(\d+)[:\-\t ]")
_NUMBER_PREFIX = re.compile(r"^\s*\d+\t")


@dataclass(frozen=True)
class Truncation:
    """How the agent cuts long outputs: at ``limit`` characters or more, it keeps ``head`` + ``tail``."""

    limit: int = 10000
    head: int = 5000
    tail: int = 5000

    def cuts(self, output: str) -> bool:
        return len(output) >= self.limit

    def visible(self, output: str) -> tuple[str, str] | None:
        """(head text, tail text) the model sees of a cut output, or None when it sees all of it."""
        if not self.cuts(output):
            return None
        return output[: self.head], output[-self.tail:] if self.tail else ""


def _count_output_lines(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _visible_line_counts(output: str, trunc: Truncation) -> tuple[int, int]:
    """Complete output lines visible at the head and at the tail of a cut output."""
    head, tail = trunc.visible(output) or ("", "")
    head_lines = head.count("\n")  # a last partial line does not count
    pieces = tail.split("\n")
    if pieces and pieces[-1] == "":
        pieces.pop()
    starts_mid_line = len(output) > len(tail) and output[-len(tail) - 1] != "\n" if tail else False
    tail_lines = max(len(pieces) - (1 if starts_mid_line else 0), 0)
    return head_lines, tail_lines


def _spans(numbers: list[int]) -> tuple[LineSpan, ...]:
    out: list[LineSpan] = []
    for n in sorted(set(numbers)):
        if out and n == out[-1].end + 1:
            out[-1] = LineSpan(out[-1].start, n)
        else:
            out.append(LineSpan(n, n))
    return tuple(out)


def observations(analysis: Analysis, output: str, exit_code: int | None, states: dict[str, FileState | None],
                 digests: dict[str, str], trunc: Truncation, *, step: int, attempt: int) -> list[Observation]:
    """What the agent saw of each file this command showed.

    ``states`` are the files' states after the command (line counts); ``digests`` their content
    hashes as the command read them.
    """
    views = analysis.views
    if not views:
        return []
    cut = trunc.cuts(output)
    if cut and (analysis.outputs != 1 or len(views) != 1):
        return []  # a cut output of several parts: which visible line belongs to which file is unclear
    out: list[Observation] = []
    for view in views:
        fs = states.get(view.path)
        digest = digests.get(view.path) or (fs.digest if fs else None)
        if fs is None or digest is None or fs.lines is None:
            continue
        obs = _observe(view, output, exit_code, fs.lines, cut, trunc, analysis)
        if obs is None:
            continue
        kind, spans = obs
        out.append(Observation(view.path, kind, spans, digest, fs.lines, step, attempt))
    return out


def _observe(view: FileView, output: str, exit_code: int | None, total: int, cut: bool, trunc: Truncation,
             analysis: Analysis) -> tuple[str, tuple[LineSpan, ...] | None] | None:
    if view.kind == "lines":
        if exit_code not in (0, None):
            return None
        rng = resolve(view.selectors, total)
        if rng is None:
            return None
        lo, hi = rng
        exact = analysis.outputs == 1 and len(analysis.views) == 1
        if exact and _count_output_lines(output) != hi - lo + 1:
            return None  # the output is not exactly those lines (warnings, a changed file)
        if not exact and (cut or SUBMIT_MARKER in output):
            return None
        markers = _marker_lines(output, lo, view.numbered) if exact else set()
        if not cut:
            if (lo, hi) == (1, total) and not markers:
                return ("whole", None)
            return ("range", _without((LineSpan(lo, hi),), markers)) if not markers or exact else None
        h, t = _visible_line_counts(output, trunc)
        seen = []
        if h:
            seen.append(LineSpan(lo, min(hi, lo + h - 1)))
        if t:
            seen.append(LineSpan(max(lo, hi - t + 1), hi))
        seen_spans = _without(tuple(seen), markers)
        return ("range", seen_spans) if seen_spans else None
    if view.kind == "matches":
        if not view.numbered:
            return ("matches", ()) if output.strip() and exit_code == 0 else None
        texts = trunc.visible(output) if cut else (output, "")
        numbers: list[int] = []
        for i, part in enumerate(texts or ()):
            lines = part.split("\n")
            if cut and i == 0 and not part.endswith("\n"):
                lines = lines[:-1]
            if cut and i == 1:
                lines = lines[1:]
            for line in lines:
                m = _NUMBERED.match(line)
                if m and 1 <= int(m.group(1)) <= total and line[m.end():] != SUBMIT_MARKER:
                    numbers.append(int(m.group(1)))
        return ("matches", _spans(numbers)) if numbers else None
    return None


def _marker_lines(output: str, first: int, numbered: bool) -> set[int]:
    """File lines that are exactly the submission marker. A later read starting there would end a
    mini-swe-agent run, so such lines never count as seen: that read must run, never be stubbed."""
    if SUBMIT_MARKER not in output:
        return set()
    out = set()
    for i, line in enumerate(output.split("\n")):
        text = _NUMBER_PREFIX.sub("", line, count=1) if numbered else line
        if text.strip() == SUBMIT_MARKER:
            out.add(first + i)
    return out


def _without(spans: tuple[LineSpan, ...], lines: set[int]) -> tuple[LineSpan, ...]:
    if not lines:
        return spans
    out: list[LineSpan] = []
    for s in spans:
        start = s.start
        for n in sorted(x for x in lines if s.start <= x <= s.end):
            if n > start:
                out.append(LineSpan(start, n - 1))
            start = n + 1
        if start <= s.end:
            out.append(LineSpan(start, s.end))
    return tuple(out)


def line_delta(before: bytes, after: bytes) -> tuple[int, int] | None:
    """(lines added, lines removed) from ``before`` to ``after``; None for binary or huge files."""
    if b"\0" in before[:8192] or b"\0" in after[:8192]:
        return None
    a = before.splitlines()
    b = after.splitlines()
    if len(a) > MAX_DIFF_LINES or len(b) > MAX_DIFF_LINES:
        return None
    # Trim the common prefix and suffix first: edits are small, files are not.
    p = 0
    while p < len(a) and p < len(b) and a[p] == b[p]:
        p += 1
    q = 0
    while q < len(a) - p and q < len(b) - p and a[-1 - q] == b[-1 - q]:
        q += 1
    a, b = a[p:len(a) - q], b[p:len(b) - q]
    if not a or not b:
        return len(b), len(a)
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed
