"""Volatile text: parts of a command's output that change from run to run with nothing else changed.

The replay benchmark compares a reused output with what the command prints when it runs again; these
patterns are masked on both sides first, so a test's timing does not count as a different output.
Each pattern is listed with what it stands for; nothing else is masked.
"""

from __future__ import annotations

import re

PATTERNS: list[tuple[str, re.Pattern[str], str]] = [
    ("durations", re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|us|µs|sec|secs|seconds)\b"), "<T>"),
    ("unittest and pytest timing lines", re.compile(r"\b(Ran \d+ tests? in) [\d.]+s"), r"\1 <T>"),
    ("clock times", re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<CLOCK>"),
    ("ISO dates", re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "<DATE>"),
    ("memory addresses", re.compile(r"\b0x[0-9a-fA-F]{6,16}\b"), "<ADDR>"),
    ("temporary paths", re.compile(r"/tmp/[\w.-]*?(?:tmp|pytest-\d+)[\w.-]*"), "<TMP>"),
    ("temporary names", re.compile(r"\btmp[a-z0-9_]{6,}\b"), "<TMP>"),
    ("process ids", re.compile(r"\b(pid|PID|process) ?[:=]? ?\d+\b"), r"\1 <PID>"),
    ("random seeds", re.compile(r"(random(?:ly)?[-_ ]seed[=: ]+)\d+"), r"\1<SEED>"),
    (
        "pytest's cache and plugin banner",
        re.compile(r"^(cachedir|rootdir|plugins|hypothesis profile).*$", re.M),
        r"\1 <BANNER>",
    ),
]


def mask(text: str) -> str:
    """``text`` with every volatile part replaced by a placeholder."""
    for _, rx, repl in PATTERNS:
        text = rx.sub(repl, text)
    return text


def same(a: str, b: str) -> bool:
    """Whether two outputs are the same once volatile text is masked."""
    return a == b or mask(a) == mask(b)
