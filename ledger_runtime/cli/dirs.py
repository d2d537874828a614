"""Checks on the directories a command writes into, made before any work starts."""

from __future__ import annotations

from pathlib import Path


def unwritable(path: Path) -> str | None:
    """Why ``path`` cannot take a run's files (it is made if missing), or None when it can."""
    if path.exists() and not path.is_dir():
        return "it is a file, not a directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".ledger-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        return e.strerror or str(e)
    return None
