"""Processes seen through /proc, for the tests that stop a command and check what is left running."""

from __future__ import annotations

from pathlib import Path


def _table() -> dict[int, tuple[str, int]]:
    """Every process: its name and its parent's id."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            head, rest = stat.read_text().rsplit(")", 1)
            out[int(head.split(" (", 1)[0])] = (head.split(" (", 1)[1], int(rest.split()[1]))
        except (OSError, IndexError, ValueError):
            continue
    return out


def running_under(pid: int, name: str) -> set[int]:
    """The processes named ``name`` under process ``pid`` (its children, or theirs)."""
    table, found = _table(), set()
    for me, (comm, up) in table.items():
        seen = 0
        while comm == name and seen < 64:
            if up == pid:
                found.add(me)
                break
            if up not in table:
                break
            up, seen = table[up][1], seen + 1
    return found


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid``."""
    return {me for me, (_, up) in _table().items() if up == pid}


def process_state(pid: int) -> str:
    """The state letter of process ``pid`` (Z: a zombie), or "gone"."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"
