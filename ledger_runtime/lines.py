"""Text as lines, the unit in which the ledger compares what the model was shown with files and
with other outputs."""

from __future__ import annotations

_last: list[tuple[str, list[str]]] = []  # the texts split last (a step splits its output several times)
# what ``str.splitlines`` breaks at besides "\n": where none is in a text, it splits as ``split_lines`` does
_OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e"
_OTHER_BREAKS_WIDE = "\x85\u2028\u2029"


def split_lines(text: str) -> list[str]:
    """Lines with their line ends (``\\n`` only: a ``\\r`` stays part of its line). A new list each
    call; the same text object as one of the last two is split once (its lines copied)."""
    if not text:
        return []
    for seen, lines in _last:
        if seen is text:
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
    """Whether ``text`` holds a character ``str.splitlines`` breaks at that is not ``\\n``."""
    if any(c in text for c in _OTHER_BREAKS):
        return True
    return not text.isascii() and any(c in text for c in _OTHER_BREAKS_WIDE)


def common_prefix(x: str | bytes, y: str | bytes) -> int:
    """Length of the longest common prefix of ``x`` and ``y`` (compared by C, in halving slices)."""
    lo, hi = 0, min(len(x), len(y))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if x[lo:mid] == y[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(x: str | bytes, y: str | bytes) -> int:
    """Length of the longest common suffix of ``x`` and ``y`` (as ``common_prefix``, from the end,
    without reversed copies of either)."""
    lo, hi = 0, min(len(x), len(y))
    nx, ny = len(x), len(y)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if x[nx - mid : nx - lo] == y[ny - mid : ny - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def trim_common(before: bytes, after: bytes, sep: bytes = b"\n") -> tuple[bytes, bytes]:
    """``before`` and ``after`` without the whole records (each ending with ``sep``: lines, or the
    entries of a NUL-separated listing) they begin and end with alike. A record common to both sides
    changes no count of what was added or removed, so any such cut gives the same answer; this one
    finds it in C rather than record by record."""
    p = common_prefix(before, after)
    p = before.rfind(sep, 0, p) + 1  # back to a record start (0 when there is none)
    x, y = before[p:], after[p:]
    s = common_suffix(x, y)
    if s:
        tail = x[len(x) - s :]
        k = tail.find(sep)
        if k >= 0 and k + 1 < len(tail):
            cut = s - (k + 1)  # the common tail from the record start after that separator
            x, y = x[: len(x) - cut], y[: len(y) - cut]
    return x, y
