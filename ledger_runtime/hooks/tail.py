"""A log an agent appends to (Codex's rollout, Claude Code's transcript), read as it grows: the whole
lines added since the last read. A vanished file reads as nothing new; a file that is not a regular
one (a FIFO named as a transcript) is never opened for a blocking read; a last line still being
written waits for the next read."""

from __future__ import annotations

import os
import stat
from typing import Any, Callable, TypeVar

R = TypeVar("R")


def appended_lines(path: str, offset: int, limit: int = 64 * 1024 * 1024) -> tuple[list[bytes], int]:
    """The whole lines of ``path`` after byte ``offset`` (at most ``limit`` bytes of them: the rest on
    the next call), and the offset after them. A line longer than ``limit`` is passed over, so that the
    lines after it are read: what follows the part passed over comes as a line of its own, which no
    reader takes for a record (it is the end of one)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError):  # ValueError: a NUL in the path, which names no file
        return [], offset
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return [], offset
        # what the file holds past the offset, not ``limit`` bytes: a read of ``limit`` allocates all of
        # them first (64 MiB per refresh); bytes appended since the fstat are read on the next call
        data = os.pread(fd, min(limit, info.st_size - offset), offset) if info.st_size > offset else b""
    except OSError:
        return [], offset
    finally:
        os.close(fd)
    end = data.rfind(b"\n")
    if end < 0 and len(data) >= limit:  # one line longer than a read: skipped (its rest reads as a malformed line)
        return [], offset + len(data)
    if end < 0:
        return [], offset  # a last line still being written
    return [raw for raw in data[: end + 1].splitlines() if raw.strip()], offset + end + 1


def refreshed(cache: dict[str, R], path: Any, make: Callable[[str], R]) -> R | None:
    """The reader of the log at ``path``, kept in ``cache`` by path (a session may move on to a new
    file), after its ``refresh()``; None when ``path`` is not an absolute path."""
    if not isinstance(path, str) or not path or not os.path.isabs(path):
        return None
    r = cache.get(path)
    if r is None:
        r = cache[path] = make(path)
    r.refresh()  # type: ignore[attr-defined]
    return r
