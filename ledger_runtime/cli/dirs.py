"""Checks on the directories a command writes into, made before any work starts."""

from __future__ import annotations

import os
from pathlib import Path

from ledger_runtime.ledger.private import DIRECTORY, refusal


def unwritable(path: Path) -> str | None:
    """Why ``path`` cannot take a run's files, or None when it can (tried by making it, and what was
    missing is removed again: a command that fails after this check leaves no empty folder). A
    symbolic link, or a directory of another user's (one planted in /tmp), is refused: the run
    would go where its owner chose. The directories above it may be links."""
    if path.is_symlink():
        return "it is a symbolic link, and a run directory is never followed through one"
    if path.exists() and not path.is_dir():
        return "it is a file, not a directory"
    missing = [p for p in (path, *path.parents) if not os.path.lexists(p)]  # the deepest first
    try:
        path.mkdir(parents=True, exist_ok=True)
        why = refusal(os.lstat(path), os.geteuid(), DIRECTORY)  # after mkdir: one made meanwhile too
        if why is not None:
            return why
        probe = path / ".ledger-write-test"
        probe.unlink(missing_ok=True)  # one a killed run left
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        probe.unlink()
    except OSError as e:
        return e.strerror or str(e)
    finally:
        for made in missing:
            try:
                made.rmdir()
            except OSError:  # not empty (another process wrote there meanwhile), or not ours to remove
                break
    return None
