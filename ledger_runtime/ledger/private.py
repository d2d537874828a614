"""Files the product writes are its owner's alone: a ledger holds what the agent saw, secrets included.

Directories are 0700 and files 0600 whatever the umask; the agent's own commands keep theirs. Nothing is written through
a link or into another user's file (``NotOurs``), as a shared directory such as /tmp may hold one planted there. A file
is written to a new exclusive file beside it, then renamed: a link planted after the check is replaced, not followed,
and a sticky directory refuses renaming over another user's file. A link is refused rather than replaced: as root,
replacing ``/dev/stdout`` would break it for everyone. Only the last component is checked, as /tmp itself is a link on
macOS."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO

DIR_MODE = 0o700
FILE_MODE = 0o600

DIRECTORY = "directory"  # entered and written into: ours, a real directory
FILE = "file"  # written (by a rename) or appended to: ours, a regular file


class NotOurs(PermissionError):
    """A path the product will not write through, a symbolic link or another user's.

    An OSError (EPERM) saying why, so every handler of a failed write reports it."""

    def __init__(self, path: str | os.PathLike, why: str):
        super().__init__(errno.EPERM, why, os.fspath(path))


def refusal(st: os.stat_result | None, uid: int, kind: str) -> str | None:
    """Why an entry with this ``lstat`` (None: absent) must not be written as ``kind`` by ``uid``; None when it may."""
    if st is None:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link, never followed"
    if st.st_uid != uid:
        return f"it belongs to another user (uid {st.st_uid})"
    if kind == DIRECTORY and not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if kind == DIRECTORY and st.st_mode & stat.S_ISVTX:
        # made 0700, a shared one (/tmp itself, as root) would lock every other user out of their files there; a
        # directory made 0700 is never sticky (nor one of a file system without modes, which shows 777)
        return f"it is a shared directory (sticky, mode {stat.S_IMODE(st.st_mode):o}), and a run's is private"
    if kind == FILE and not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    return None


def _lstat(path: str | os.PathLike) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:  # nothing there, or nothing reachable: the write says why if it fails
        return None


def _check(path: str | os.PathLike, st: os.stat_result | None, kind: str) -> None:
    why = refusal(st, os.geteuid(), kind)
    if why is not None:
        raise NotOurs(path, why)


def private_parents(path: str | os.PathLike) -> None:
    """The missing directories above ``path`` made 0700: by the umask (``Path.mkdir(parents=True)``) they are 0777
    under umask 000, and another user could rename what we put in them and put theirs in its place."""
    missing = []
    for above in Path(path).parents:
        if os.path.lexists(above):
            break
        missing.append(above)
    for above in reversed(missing):
        try:
            os.mkdir(above, DIR_MODE)
        except FileExistsError:
            pass


def private_dir(path: str | os.PathLike) -> Path:
    """``path`` made, with its parents, a directory only its owner can enter; NotOurs if a link or another user's."""
    p = Path(path)
    private_parents(p)
    try:
        os.mkdir(p, DIR_MODE)
    except FileExistsError:
        pass
    _check(p, _lstat(p), DIRECTORY)
    try:  # the mode is set on what was checked: a link swapped in meanwhile is not followed
        fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        if e.errno != errno.EACCES:  # ELOOP: it became a link; ENOTDIR: a file
            raise NotOurs(p, "it is a symbolic link or not a directory") from None
        os.chmod(p, DIR_MODE)  # ours (checked) but not readable by us: set it by name
        return p
    try:
        _check(p, os.fstat(fd), DIRECTORY)
        os.fchmod(fd, DIR_MODE)
    finally:
        os.close(fd)
    return p


def _fd(path: str | os.PathLike, flags: int) -> int:
    """``path`` opened in place, made if missing; never through a link, nor another user's file, a FIFO or a device."""
    _check(path, _lstat(path), FILE)  # said as it is: a FIFO without a reader would fail the open with ENXIO
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, FILE_MODE)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NotOurs(path, "it is a symbolic link, never followed") from None
        raise
    try:
        _check(path, os.fstat(fd), FILE)
    except NotOurs:
        os.close(fd)
        raise
    try:
        os.fchmod(fd, FILE_MODE)  # also a file that existed with looser bits
    except OSError:
        pass
    return fd


def write_private(path: str | os.PathLike, data: str | bytes) -> None:
    """Writes ``data`` to ``path`` owner-only, via a new O_EXCL file renamed onto it; NotOurs if a link or not ours."""
    target = os.fspath(path)
    _check(target, _lstat(target), FILE)
    directory, name = os.path.split(target)
    blob = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    for _ in range(100):
        tmp = os.path.join(directory, f".{name[:100]}.{os.urandom(6).hex()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(errno.EEXIST, "no fresh name for a temporary file", target)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), FILE_MODE)  # whatever the umask
            f.write(blob)
        os.replace(tmp, target)  # in a sticky directory, over another user's file: EPERM
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def append_private(path: str | os.PathLike) -> IO[str]:
    """``path`` open for appending text, owner-only; NotOurs if a link, another user's, or not a regular file."""
    return os.fdopen(_fd(path, os.O_WRONLY | os.O_APPEND), "a", encoding="utf-8")


def touch_private(path: str | os.PathLike) -> None:
    """Makes ``path`` exist owner-only, so SQLite's -wal and -shm files, which take its mode, are too."""
    os.close(_fd(path, os.O_WRONLY))


def tighten(tree: str | os.PathLike) -> None:
    """Makes every directory under ``tree`` 0700 and every file 0600, for copies of the user's files."""
    for root, dirs, files in os.walk(tree):
        os.chmod(root, DIR_MODE)
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                os.chmod(p, FILE_MODE)


class InUse(RuntimeError):
    """A run directory another live runtime holds; the message says which process."""


def lock_file(path: str | os.PathLike, what: str) -> IO[bytes] | None:
    """An exclusive lock on ``path``, held while the returned file is open; InUse when a live process holds it.

    The file is owner-only, never opened through a symlink, and releases the lock when collected too. None where the
    file system has no locks, as on some network mounts: the run goes on without one."""

    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_NOCTTY", 0), FILE_MODE)
    except OSError as e:
        raise InUse(f"{what}: cannot open its lock file {path}: {e.strerror or e}") from None
    f = os.fdopen(fd, "r+b", buffering=0)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise InUse(f"{what}: its lock file {path} is not a regular file")
    try:
        _flock_ex(fd)
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


def _flock_ex(fd: int, tries: int = 20) -> None:
    """An exclusive lock on ``fd``, not waiting on a live holder: a look at the lock (``holder``, another run's
    ``misplaced``) holds it for an instant, and one taken in that instant is tried again for a moment before
    BlockingIOError says a live process holds it."""
    import fcntl
    import time

    for n in range(tries):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if n == tries - 1:
                raise
            time.sleep(0.01)


def holder(path: str | os.PathLike) -> str | None:
    """The process (its pid, as the file says) whose ``lock_file`` on ``path`` is held now, or None: no file, no
    live holder, or no locks on this file system. It only looks: a shared lock taken for as long as the test."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.read(fd, 64).decode(errors="replace").strip() or "?"
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def still_running(run_dir: str | os.PathLike) -> str | None:
    """``the run is still going (pid N)`` while a live runtime holds ``run_dir`` (its ``.lock``), else None."""
    pid = holder(Path(run_dir) / ".lock")
    return None if pid is None else f"the run is still going (pid {pid})"


MAX_RECORD_BYTES = 512 * 1024 * 1024  # an agent's record past this is not read (the page goes on without it)


def read_record(path: str | os.PathLike, limit: int | None = None) -> bytes:
    """The bytes of an agent's record (at most ``limit``, when given), read only from a regular file:
    a FIFO, a device or a directory under a record's name (or a link to one: ``/dev/zero``) would
    block the read or never end it. OSError (EINVAL, EFBIG) saying why, as a file that is not there."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a directory): not read", str(path))
        if limit is None and st.st_size > MAX_RECORD_BYTES:
            raise OSError(errno.EFBIG, f"{st.st_size:,} bytes, past the {MAX_RECORD_BYTES:,} read", str(path))
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(limit if limit is not None else MAX_RECORD_BYTES + 1)
    finally:
        os.close(fd)


def left_conversation(path: str | os.PathLike, step: int) -> dict | None:
    """What an agent's earlier run in a run directory left of its conversation for a run that resumes it (its
    transcript's path, its compactions and rewinds): None when there is nothing readable of that shape, or when the
    ledger has gone on since (``step``, its last step now, is not the one that run ended at: another run, of another
    agent, showed those steps' outputs in a conversation of its own)."""
    from ledger_runtime.json_text import json_value

    try:  # ours, a regular file, never through a link; JSON nested past the parser's depth is no shape either
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                return None
            left = json_value(os.read(fd, 64 * 1024), dict)
        finally:
            os.close(fd)
    except (OSError, ValueError):  # ValueError: UnreadableJSON
        return None
    if not isinstance(left.get("transcript"), str):
        return None
    if not all(type(left.get(k)) is int for k in ("compactions", "branches", "step")) or left["step"] != step:
        return None
    return left


def leave_conversation(path: str | os.PathLike, transcript: str, compactions: int, branches: int, step: int) -> None:
    """Leaves at ``path`` (owner-only) the conversation a run's outputs were shown in, for a run that resumes it on
    this ledger: its transcript, its compactions and rewinds (``branches``), and ``step``, the ledger's last, at which
    alone it counts (``left_conversation`` reads it). OSError where it cannot be written."""
    import json

    left = {"transcript": transcript, "compactions": compactions, "branches": branches, "step": step}
    write_private(path, json.dumps(left) + "\n")


def taken_conversation(path: str | os.PathLike, step: int) -> dict | None:
    """What an agent's earlier run left at ``path`` for this run, on a ledger at ``step`` (``left_conversation``; None
    on a new ledger), and the file removed: what it says holds only until this run, which may compact or leave that
    conversation, ends (a run that ends writes it anew)."""
    left = left_conversation(path, step) if step > 0 else None
    try:
        os.unlink(path)
    except OSError:
        pass
    return left
