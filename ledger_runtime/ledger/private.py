"""Files the product writes are its owner's alone: a ledger holds what the agent saw, secrets
included. Directories 0700 and files 0600 whatever the umask (the agent's own commands keep the
umask they had: only what the ledger writes is made private)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: str | os.PathLike) -> Path:
    """``path`` as a directory only its owner can enter (made, with its missing parents, if needed)."""
    p = Path(path)
    p.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(p, DIR_MODE)
    return p


def _fd(path: str | os.PathLike, flags: int) -> int:
    fd = os.open(path, flags | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # also a file that existed with looser bits
    except OSError:
        pass
    return fd


def write_private(path: str | os.PathLike, data: str | bytes) -> None:
    """Write ``data`` to ``path``, readable by its owner only."""
    fd = _fd(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data)


def append_private(path: str | os.PathLike) -> IO[str]:
    """``path`` open for appending text, readable by its owner only."""
    return os.fdopen(_fd(path, os.O_WRONLY | os.O_APPEND), "a", encoding="utf-8")


def touch_private(path: str | os.PathLike) -> None:
    """Make ``path`` exist, owner only (SQLite gives its -wal and -shm files the database's mode)."""
    os.close(_fd(path, os.O_WRONLY))


def tighten(tree: str | os.PathLike) -> None:
    """Every directory under ``tree`` 0700 and every file 0600 (copies of the user's files)."""
    for root, dirs, files in os.walk(tree):
        os.chmod(root, DIR_MODE)
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                os.chmod(p, FILE_MODE)


class InUse(RuntimeError):
    """A run directory another live runtime holds; the message says which process."""


def hold(path: str | os.PathLike, what: str) -> IO[bytes] | None:
    """An exclusive lock on ``path`` (a lock file, made owner only, never through a symlink) for as
    long as the returned file stays open (closed by the garbage collector too); InUse when a live
    process holds it. None where the file system has no locks (some network mounts): no lock then."""
    import fcntl
    import stat

    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_NOCTTY", 0), FILE_MODE)
    except OSError as e:
        raise InUse(f"{what}: cannot open its lock file {path}: {e.strerror or e}") from None
    f = os.fdopen(fd, "r+b", buffering=0)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise InUse(f"{what}: its lock file {path} is not a regular file")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
        f.close()
        who = "this process" if holder == str(os.getpid()) else f"pid {holder}"
        raise InUse(f"{what} is in use by another ledger ({who}): one runtime per run directory") from None
    except OSError:  # no locks here (ENOLCK, EOPNOTSUPP): go on without one
        f.close()
        return None
    os.fchmod(fd, FILE_MODE)
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return f
