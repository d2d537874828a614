"""The work trees a replay checks trajectories out into: never delete what the product did not make,
one replay per tree at a time, and a private tree per parallel worker.

A tree is the replay's own when this process made it, or when it holds the marker a replay leaves
in its git directory (``.git/ledger-replay``: outside the work tree, so no recorded ``git status``
sees it). Anything else that exists and is not empty is refused unless ``--force``.

With ``-j N`` each worker process gets its own tree at the same path. As root (where the kernel
allows mount namespaces) a worker unshares its mount namespace and mounts a private directory over
the work tree and over ``/tmp``: the recorded commands, which name ``/testbed`` and ``/tmp``, see
only their own. Otherwise each worker's tree is a private directory elsewhere, and what a recorded
command names by the absolute path runs against the shared one: the report says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ledger_runtime.ledger.private import FILE, refusal

MARKER = "ledger-replay"
_made_here: set[str] = set()  # trees this process created (the agent may delete .git, not our memory)

CLONE_NEWNS = 0x00020000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


class TreeError(Exception):
    """A work tree the replay must not use; the message says why and what to do."""


def git_dir(path: Path) -> Path | None:
    """The git directory of ``path``: a bare repository, a clone's ``.git``, or a worktree's."""
    for args in (["--git-dir", str(path)], ["-C", str(path)]):
        try:
            r = subprocess.run(
                ["git", *args, "rev-parse", "--absolute-git-dir"],
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
            )
        except (OSError, subprocess.SubprocessError):
            return None
        if r.returncode == 0 and r.stdout.strip():
            return Path(r.stdout.strip())
    return None


def is_ours(tree: Path) -> bool:
    if str(tree) in _made_here:
        return True
    return (tree / ".git" / MARKER).is_file()


def check_usable(tree: Path, force: bool) -> None:
    """Raise TreeError when ``tree`` holds something the replay did not make (and ``force`` is off)."""
    if tree.is_symlink() or (tree.exists() and not tree.is_dir()):
        if not force:
            raise TreeError(f"--workdir {tree} is not a directory; remove it or pass --force")
        return
    if not tree.exists() or force or is_ours(tree):
        return
    try:
        empty = not any(tree.iterdir())
    except OSError as e:
        raise TreeError(f"cannot read --workdir {tree}: {e.strerror}") from None
    if not empty:
        raise TreeError(
            f"--workdir {tree} holds files a replay did not make (they would be deleted); "
            "choose an empty or new directory, or pass --force"
        )


def clear(tree: Path) -> None:
    """Empty ``tree`` (made if missing), keeping the directory itself: it may be a mount point."""
    if tree.is_symlink() or (tree.exists() and not tree.is_dir()):
        tree.unlink()
    tree.mkdir(parents=True, exist_ok=True)
    for child in tree.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    _made_here.add(str(tree))


def mark(tree: Path) -> None:
    git = tree / ".git"
    if git.is_dir():
        (git / MARKER).write_text("made by ledger-run replay; the next replay may delete this tree\n")


class Lock:
    """An exclusive lock on a work tree for one replay (released when the process ends): a file
    beside the tree (``.<name>.ledger-replay.lock`` in its parent), opened without following a
    planted symlink, so every replay of that tree finds the same lock whatever its TMPDIR."""

    def __init__(self, tree: Path):
        tree = Path(os.path.abspath(tree))
        tree.parent.mkdir(parents=True, exist_ok=True)
        self.path = tree.parent / f".{tree.name}.ledger-replay.lock"
        try:  # never a FIFO or a device (a blocking open), never another user's file
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, 0o600)
        except OSError as e:
            raise TreeError(f"cannot lock --workdir {tree}: {self.path}: {e.strerror}") from None
        why = refusal(os.fstat(fd), os.geteuid(), FILE)
        if why is not None:
            os.close(fd)
            raise TreeError(f"cannot lock --workdir {tree}: {self.path}: {why}; remove it, or choose another --workdir")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES):
                raise TreeError(
                    f"--workdir {tree} is in use by another replay (pid {holder}); "
                    "give each replay its own --workdir, or use -j N"
                ) from None
            raise TreeError(f"cannot lock --workdir {tree}: {e.strerror}") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd: int | None = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def inside(tree: Path, paths: list[Path]) -> Path | None:
    """The first of ``paths`` that is ``tree`` or lies in it (emptying the tree would delete it)."""
    t = os.path.realpath(tree)
    for p in paths:
        where = os.path.realpath(p)
        if where == t or where.startswith(t + os.sep):
            return p
    return None


def overlaps(tree: Path, repos: list[Path]) -> Path | None:
    """A repository (its git directory or its work tree) that is, holds or lies in ``tree``: emptying
    the tree would delete it."""
    t = os.path.realpath(tree)
    for r in repos:
        for p in {
            os.path.realpath(r),
            os.path.realpath(os.path.dirname(os.path.realpath(r)))
            if os.path.basename(os.path.realpath(r)) == ".git"
            else os.path.realpath(r),
        }:
            if p == t or p.startswith(t + os.sep) or t.startswith(p + os.sep):
                return r
    return None


WORKER_PREFIX = "ledger-replay-worker-"


def _worker_base() -> str | None:
    return "/var/tmp" if os.path.isdir("/var/tmp") and os.access("/var/tmp", os.W_OK) else None


def sweep_stale_workers() -> int:
    """Remove the private directories of workers that are gone (killed before they could clean up:
    their pid is in the name). Returns how many."""
    base = _worker_base() or tempfile.gettempdir()
    removed = 0
    try:
        names = os.listdir(base)
    except OSError:
        return 0
    for name in names:
        if not name.startswith(WORKER_PREFIX):
            continue
        try:
            pid = int(name[len(WORKER_PREFIX) :].split("-", 1)[0])
        except ValueError:
            continue
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if st.st_uid != os.getuid() or os.path.islink(path):
            continue
        try:
            os.kill(pid, 0)
            continue  # alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed


def _mount(libc, source: str | None, target: str, flags: int) -> None:
    if libc.mount(source.encode() if source else None, target.encode(), None, flags, None) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), target)


def _under(path: Path, root: str) -> bool:
    p = os.path.realpath(path)
    return p == root or p.startswith(root + os.sep)


def isolate(tree: Path, keep: list[Path]) -> str:
    """Give this (single-threaded, freshly started) process its own ``tree``, and its own ``/tmp``
    unless a path in ``keep`` (where results go, the repositories) lies under it. Returns how:
    "namespace" (a private mount namespace: the recorded paths are this worker's own) or
    "directory:PATH" (the tree to use instead, where namespaces are not allowed)."""
    from multiprocessing.util import Finalize

    private = Path(tempfile.mkdtemp(prefix=f"{WORKER_PREFIX}{os.getpid()}-", dir=_worker_base()))
    Finalize(None, shutil.rmtree, args=(str(private),), kwargs={"ignore_errors": True}, exitpriority=10)
    (private / "tree").mkdir()
    (private / "tmp").mkdir()
    os.chmod(private / "tmp", 0o1777)
    if os.geteuid() == 0 and tree.is_dir():
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            if libc.unshare(CLONE_NEWNS) != 0:
                e = ctypes.get_errno()
                raise OSError(e, os.strerror(e))
            _mount(libc, None, "/", MS_REC | MS_PRIVATE)
            tmp = os.path.realpath("/tmp")
            # what this process itself runs from must stay in sight: its interpreter, its packages
            # (and the core's and the adapters' own: a clone under /tmp on PYTHONPATH failed to import in a worker)
            import ledger_adapters
            import ledger_runtime

            packages = [Path(m.__file__).parents[1] for m in (ledger_runtime, ledger_adapters) if m.__file__]
            running = [Path(sys.executable), Path(sys.prefix), Path(sys.base_prefix), Path(__file__).parents[1]]
            running += packages
            own_tmp = not any(_under(p, tmp) for p in [tree, private, *keep, *running])
            if own_tmp:
                _mount(libc, str(private / "tmp"), "/tmp", MS_BIND)
            _mount(libc, str(private / "tree"), str(tree), MS_BIND)
            _made_here.add(str(tree))
            return "namespace" if own_tmp else "namespace-shared-tmp"
        except (OSError, AttributeError, TypeError):
            pass
    _made_here.add(str(private / "tree" / tree.name))
    return f"directory:{private / 'tree' / tree.name}"
