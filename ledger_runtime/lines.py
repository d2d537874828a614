"""Text as lines, the unit in which the ledger compares what the model was shown with files and
with other outputs."""

from __future__ import annotations


def split_lines(text: str) -> list[str]:
    """Lines with their line ends (``\\n`` only: a ``\\r`` stays part of its line)."""
    if not text:
        return []
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out
