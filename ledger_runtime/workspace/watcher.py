"""Event-driven change detection for a local workspace on Linux: inotify, through the C library.

``Watcher`` watches every directory the scanner lists, and ``drain()`` reads what the kernel queued, so the scanner
re-lists and re-hashes only that: an idle command costs a read of an empty queue.

What inotify misses the scanner's periodic full walk finds, as it does whenever the watcher is unsure (an overflow, the
per-user watch limit, a vanished directory). Writes through a shared memory map raise no event; the walk finds them, and
so does a read, whose output is checked against the file. An untracked directory (engine.py, "Bounds") is not watched.
Standard library only (ctypes); elsewhere ``open()`` returns None and the scanner walks.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
import sys

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_MASK_ADD = 0x20000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = 0o2000000

FILE_EVENTS = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE
ENTRY_EVENTS = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
SELF_EVENTS = IN_DELETE_SELF | IN_MOVE_SELF
MASK = FILE_EVENTS | ENTRY_EVENTS | SELF_EVENTS | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK
# a file's own watch: its writes through any of its names (a directory's watch reports those through its entries only);
# added to whatever mask a watch of the same inode has, so it never takes a directory's events away
FILE_MASK = FILE_EVENTS | IN_DONT_FOLLOW | IN_MASK_ADD
_HEADER = struct.Struct("iIII")


def _watch_limit(path: str = "/proc/sys/fs/inotify/max_user_watches") -> int:
    """The user's limit of inotify watches (8,192, the old kernels' default, where it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return max(int(f.read(32).strip()), 0)
    except (OSError, ValueError):
        return 8192


class Changes:
    """What the kernel reported since the last drain."""

    def __init__(self) -> None:
        self.dirs: set[str] = set()  # directories whose entries changed (re-list them)
        self.files: set[str] = set()  # paths written, or whose attributes changed (re-hash them)
        self.unsure = False  # events were lost or a watch is missing: walk everything

    def __bool__(self) -> bool:
        return bool(self.dirs or self.files or self.unsure)


class Watcher:
    """inotify watches on a set of directories."""

    def __init__(self, fd: int, libc: ctypes.CDLL):
        self.fd = fd
        self._libc = libc
        self._by_wd: dict[int, str] = {}
        self._wd_of: dict[str, int] = {}
        self._ino_of: dict[str, int | None] = {}  # the inode of the directory each watch was added for
        self._files_by_wd: dict[int, set[str]] = {}  # a file's own watch -> the names it was added under
        self._file_wd: dict[str, int] = {}
        # files' own watches take at most a quarter of the user's watches: the directories' come first
        self.file_budget = _watch_limit() // 4
        self.failed = False  # a watch could not be added: the watcher cannot vouch for that tree
        # events were lost (an overflow), an IN_IGNORED among them: a directory's watch taken for live may have gone
        # with it, and a directory made again under its name is watched only if added again (``add``)
        self.lost = False
        self.events = 0

    @classmethod
    def open(cls) -> Watcher | None:
        """A watcher, or None where inotify is not to be had."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.inotify_init1.argtypes = [ctypes.c_int]
            libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
            libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None
        return cls(fd, libc)

    def add(self, directory: str, ino: int | None = None) -> bool:
        """Watches ``directory``'s entries and their writes; False when that failed. ``ino``: the inode the directory
        has now, where known: a watch added for another one under the name (moved away, the name taken by a new
        directory or a moved one) is the other's, and the name is watched again."""
        old = self._wd_of.get(directory)
        if old is not None and not self.lost and (ino is None or self._ino_of.get(directory) == ino):
            return True
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(directory), MASK)
        if old is not None and old != wd:  # its watch is another directory's, or went with it (events lost)
            del self._wd_of[directory]
            if self._by_wd.get(old) == directory:  # (not if that directory was added under its new name since)
                del self._by_wd[old]
                self._libc.inotify_rm_watch(self.fd, old)  # (one moved out of the tree: its events are nobody's)
        if wd < 0:
            err = ctypes.get_errno()
            if err not in (errno.ENOENT, errno.ENOTDIR):  # ENOSPC: the per-user limit of watches
                self.failed = True
            return False
        for name in self._files_by_wd.pop(wd, ()):  # it was a file's own watch (the name is a directory now): its own
            self._file_wd.pop(name, None)
        self._by_wd[wd] = directory
        self._wd_of[directory] = wd
        self._ino_of[directory] = ino
        return True

    def add_file(self, path: str) -> bool:
        """Watches the file at ``path`` itself: a write through any of its names (a hard link elsewhere) reports
        ``path``. Added again after the name came to stand for another file, it follows that one. False when the
        watch could not be added (the per-user limit, a path gone): the caller looks at the file itself."""
        if path not in self._file_wd and len(self._file_wd) >= self.file_budget:
            return False
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), FILE_MASK)
        if wd < 0 or wd in self._by_wd:  # (a directory now: its own watch reports its entries)
            return False
        old = self._file_wd.get(path)
        if old != wd:
            if old is not None:
                self._drop_file(path, old)
            self._files_by_wd.setdefault(wd, set()).add(path)
            self._file_wd[path] = wd
        return True

    def keep_files(self, paths: set[str]) -> None:
        """Drops the files' own watches but those of ``paths``."""
        for path, wd in list(self._file_wd.items()):
            if path not in paths:
                self._drop_file(path, wd)

    def _drop_file(self, path: str, wd: int) -> None:
        self._file_wd.pop(path, None)
        names = self._files_by_wd.get(wd)
        if names is not None:
            names.discard(path)
            if not names:
                del self._files_by_wd[wd]
                self._libc.inotify_rm_watch(self.fd, wd)

    @property
    def watched_files(self) -> int:
        return len(self._file_wd)

    def discard(self, directory: str) -> None:
        wd = self._wd_of.pop(directory, None)
        self._ino_of.pop(directory, None)
        if wd is not None:
            self._by_wd.pop(wd, None)
            self._libc.inotify_rm_watch(self.fd, wd)

    @property
    def watched(self) -> int:
        return len(self._wd_of)

    def drain(self) -> Changes:
        """Everything queued since the last drain, without blocking."""
        out = Changes()
        if self.failed:
            out.unsure = True
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            except OSError:
                out.unsure = True
                break
            if not data:
                break
            self._parse(data, out)
        return out

    def _parse(self, data: bytes, out: Changes) -> None:
        pos = 0
        while pos + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, pos)
            pos += _HEADER.size
            name = data[pos : pos + length].rstrip(b"\0")
            pos += length
            self.events += 1
            if mask & IN_Q_OVERFLOW:
                out.unsure = True
                self.lost = True
                continue
            d = self._by_wd.get(wd)
            if d is None:
                self._file_event(wd, mask, out)
                continue
            if mask & IN_IGNORED:  # the watch went away with its directory
                self._by_wd.pop(wd, None)
                self._wd_of.pop(d, None)
                self._ino_of.pop(d, None)
                out.dirs.add(os.path.dirname(d))
                continue
            if mask & SELF_EVENTS:
                out.dirs.add(os.path.dirname(d))
                out.dirs.add(d)
                continue
            path = os.path.join(d, os.fsdecode(name)) if name else d
            if mask & ENTRY_EVENTS:
                out.dirs.add(d)
                if mask & IN_ISDIR:
                    out.dirs.add(path)
                else:
                    out.files.add(path)
            if mask & FILE_EVENTS and name:
                out.files.add(path)

    def _file_event(self, wd: int, mask: int, out: Changes) -> None:
        """An event of a file's own watch (``add_file``): each name it was added under is reported."""
        names = self._files_by_wd.get(wd)
        if names is None:
            return
        if mask & IN_IGNORED:  # the file is gone, with every name it had
            for p in self._files_by_wd.pop(wd):
                self._file_wd.pop(p, None)
        elif mask & FILE_EVENTS:
            out.files.update(names)

    def close(self) -> None:
        """Closes once: a second close would close whatever file has taken the number since."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        # a watcher dropped unclosed (a scanner nobody closed) gives its instance back: the instances are
        # the user's (fs.inotify.max_user_instances, 128), not this process's, and do not end with the object
        try:
            self.close()
        except Exception:  # (at interpreter shutdown)
            pass
