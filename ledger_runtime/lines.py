"""Text as lines, the unit in which the ledger compares what the model was shown with files and other outputs."""

from __future__ import annotations

from ledger_runtime.workspace.scanning.alike import common_prefix, common_suffix, trim_common  # noqa: F401

_last: list[tuple[str, list[str]]] = []  # the texts split last (a step splits its output several times)
# what ``str.splitlines`` breaks at besides "\n": where none is in a text, it splits as ``split_lines`` does
_OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e"
_OTHER_BREAKS_WIDE = "\x85\u2028\u2029"


def split_lines(text: str) -> list[str]:
    """Lines with their line ends, ``\\n`` only, so a ``\\r`` stays part of its line.

    A new list each call; a text equal to one of the last two long ones split is split once and its lines copied
    (a step reads a file's bytes anew, so its text is an equal object, not the same one; comparing costs a memcmp)."""
    if not text:
        return []
    for seen, lines in _last:
        if seen is text or (len(seen) == len(text) and seen == text):
            return list(lines)
    out = _split(text)
    if len(text) > 4096:  # worth keeping
        _last.insert(0, (text, out))
        del _last[2:]
        return list(out)
    return out


def _split(text: str) -> list[str]:
    if len(text) > 4096 and not _breaks_elsewhere(text):
        return text.splitlines(True)  # in C, the strings made once: a long output splits in half the time
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _breaks_elsewhere(text: str) -> bool:
    """Whether ``text`` holds a character other than ``\\n`` that ``str.splitlines`` breaks at."""
    if any(c in text for c in _OTHER_BREAKS):
        return True
    return not text.isascii() and any(c in text for c in _OTHER_BREAKS_WIDE)


# what a name shown in the ledger's own lines has escaped, so that it cannot write a line of its own: the control
# characters and the line breaks Unicode has beyond them
_ESCAPED = (
    {c: f"\\x{c:02x}" for c in range(32)}
    | {0x7F: "\\x7f", ord("\\"): "\\\\"}
    | {c: f"\\u{c:04x}" for c in (0x85, 0x2028, 0x2029)}
)


def one_line(text: str) -> str:
    """``text`` with its control characters and line breaks escaped (a backslash too, where there is one to escape)."""
    return text.translate(_ESCAPED) if any(ord(c) < 32 or c in "\x7f\x85\u2028\u2029" for c in text) else text
