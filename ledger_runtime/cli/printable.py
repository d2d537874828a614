r"""Text as a person reads it on a terminal or a page: the characters that would act instead of show
(control characters, bidirectional and other format characters) become visible escapes, ``\x1b``,
``\x9b``, ``\u202e``, ``\r``. What a command, a file name or an output holds can then neither drive
the terminal (set its title, write the clipboard, clear the screen) nor reorder what is read.

Newlines and tabs stay, and so does a carriage return that ends a line (``\r\n``); one inside a line
(which would let the rest overwrite its start) becomes ``\r``. Backslashes are not doubled: a text
that spells ``\x1b`` reads the same as an escaped ESC. This is a view for people, not an encoding:
``--raw`` prints the exact text, ``--json`` an exact escaped one.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from rich.console import Console

# Unicode's format characters (category Cf; tests/test_terminal_escapes.py checks the list against
# unicodedata), line and paragraph separators, and lone surrogates (bytes that were not UTF-8, a C1
# byte among them, as the ledger decodes them): listed, so a long output is one regex pass.
_FORMAT = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f" + _FORMAT + "\u2028\u2029\ud800-\udfff]|\r(?!\n)")


def _escape(match: re.Match[str]) -> str:
    n = ord(match.group())
    if n == 0x0D:
        return "\\r"
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def shell_word(path: Any) -> str:
    """``path`` as one word of a command to copy into a shell: quoted where it holds a space, a quote or any
    other character the shell would act on (``ledger-run inspect 'my runs/d'``), as it is where it holds none."""
    import shlex

    return shlex.quote(str(path))


def visible(text: str) -> str:
    """``text`` with every character that a terminal or a bidi renderer would act on escaped."""
    return _UNSAFE.sub(_escape, text)


def visible_data(value: Any) -> Any:
    """``value`` with every string in it (through dicts, lists and tuples; keys kept) made visible."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {k: visible_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(visible_data(v) for v in value)
    return value


class TrimmedLines:
    """Text for ``target`` with each line's trailing spaces left out: rich pads a table's cells and
    title, a wrapped line and an indented note to the full width, which a file or a pipe would keep."""

    def __init__(self, target: Any):
        self.target = target
        self.encoding = getattr(target, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        self.target.write(_TRAILING.sub("", text))
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def isatty(self) -> bool:
        return False


_TRAILING = re.compile(r" +(?=\n)")


def plain_console() -> Console:
    """The console of a command's output on stdout: rich's, with no trailing spaces when stdout is not a
    terminal (on one, rich's padding is invisible)."""
    return Console() if sys.stdout.isatty() else Console(file=TrimmedLines(sys.stdout))
