"""``split_lines`` splits a long text once: an equal text split again (a file read anew) gets the same lines, copied."""

from __future__ import annotations

import random

from ledger_runtime import lines as lines_module
from ledger_runtime.lines import split_lines

BREAKS = ["\n", "\n", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"]


def by_newline(text: str) -> list[str]:
    """What ``split_lines`` means: lines ending at ``\\n`` only, each with its ``\\n``."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def a_text(rng: random.Random) -> str:
    words = ["x = 1", "def f():", "    return y", "é", "日本", "", "a" * 50]
    n = rng.choice([0, 1, 3, 40, 300, 900])
    return "".join(rng.choice(words) + rng.choice(BREAKS) for _ in range(n)) + rng.choice(["", "tail"])


def fresh_copy(text: str) -> str:
    """An equal string that is another object."""
    return "".join(list(text))


def test_equal_texts_split_as_by_newline_in_any_order():
    rng = random.Random(42)
    pool: list[str] = []
    for _ in range(600):
        r = rng.random()
        if pool and r < 0.4:
            text = fresh_copy(rng.choice(pool))
        elif pool and r < 0.55:  # the same length, another last character
            t = rng.choice(pool)
            text = t[:-1] + ("\n" if not t.endswith("\n") else "z") if t else t
        else:
            text = a_text(rng)
            pool.append(text)
        got = split_lines(text)
        assert got == by_newline(text)
        got.append("mutated")  # a caller's list is its own
        assert split_lines(text) == by_newline(text)


def test_a_long_text_read_anew_is_split_once(monkeypatch):
    calls = []
    real = lines_module._split
    monkeypatch.setattr(lines_module, "_split", lambda text: calls.append(len(text)) or real(text))
    text = "".join(f"line {i}\n" for i in range(2000))
    first = split_lines(text)
    again = split_lines(fresh_copy(text))
    assert again == first == by_newline(text) and again is not first
    assert len(calls) == 1
