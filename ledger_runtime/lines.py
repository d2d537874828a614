"""Text as lines, the unit in which the ledger compares what the model was shown with files and
with other outputs."""

from __future__ import annotations

_last: list[tuple[str, list[str]]] = []  # the texts split last (a step splits its output several times)


def split_lines(text: str) -> list[str]:
    """Lines with their line ends (``\\n`` only: a ``\\r`` stays part of its line). A new list each
    call; the same text object as one of the last two is split once (its lines copied)."""
    if not text:
        return []
    for seen, lines in _last:
        if seen is text:
            return list(lines)
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    if len(text) > 4096:  # worth keeping
        _last.insert(0, (text, out))
        del _last[2:]
        return list(out)
    return out
