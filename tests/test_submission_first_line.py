"""A submission is told by the output's first line: read from a prefix, never by splitting the whole output."""

import random

from ledger_runtime.analysis.submission import Submission, first_line

SEPARATORS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
PIECES = ["SUBMIT", " ", "\t", "x", "é", "SUBMIT ", *SEPARATORS]


def _reference(marker: str, output: str) -> bool:
    lines = output.lstrip().splitlines()
    return bool(marker) and bool(lines) and lines[0].strip() == marker


def test_the_first_line_is_the_first_of_splitlines_on_random_texts():
    rng = random.Random(42)
    for _ in range(3000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 40)))
        start = rng.choice([1, 2, 3, 256])
        expect = text.splitlines()[0] if text.splitlines() else None
        assert first_line(text, start) == expect, (text, start)
        assert Submission("SUBMIT").in_output(text) == _reference("SUBMIT", text), text


def test_a_marker_followed_by_more_than_the_prefix_of_blanks_and_a_word_is_not_a_submission():
    """The first line is read whole, however far its end: a prefix holding only the marker and blanks is not it."""
    output = "SUBMIT" + " " * 5000 + "not yet\nrest\n"
    assert not Submission("SUBMIT").in_output(output)
    assert Submission("SUBMIT").in_output("\n\n  SUBMIT" + " " * 5000 + "\n" + "x\n" * 100_000)
