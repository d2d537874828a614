"""Content hashes of files (xxh3_128), behind a stat cache that never trusts a racy entry.

A file's digest is the hex xxh3_128 of its bytes. Files that cannot be hashed still get a digest
that changes whenever they do: a symlink hashes its target text, a file over the size limit its
stat data, an unreadable file its stat data too. The cache keys a digest by (mtime_ns, ctime_ns,
size, inode, mode); like git's "racily clean" rule, an entry is only trusted when the file's
modification time is older than the moment it was hashed by more than the file system's timestamp
granularity, so a same-size rewrite within one clock tick is never missed (a rewrite that forges
the old mtime still moves ctime, which is part of the key).

This module (with scanner.py and signatures.py) uses only the standard library and xxhash, so it can
also run as a helper inside a container.
"""

from __future__ import annotations

import os
import stat
import time
from typing import NamedTuple

import xxhash

RACY_NS = 2_000_000_000  # covers 1 s (and 2 s FAT) timestamp granularity with room to spare
CHUNK = 1 << 20


class FileState(NamedTuple):
    """A file's digest, size in bytes, and line count (None when binary, too large or unreadable)."""

    digest: str
    size: int
    lines: int | None


NOATIME = getattr(os, "O_NOATIME", 0)


def open_quietly(path: str, flags: int) -> int:
    """``os.open`` without changing the file's access time where the file's owner (or root) may ask
    for that (O_NOATIME); for another's file, as usual: the ledger's reads leave atimes as they were
    wherever the system lets them."""
    if NOATIME:
        try:
            return os.open(path, flags | NOATIME)
        except PermissionError:
            pass  # EPERM: not the file's owner
    return os.open(path, flags)


def digest_bytes(data: bytes) -> str:
    """The ledger's content hash: hex xxh3_128."""
    return xxhash.xxh3_128_hexdigest(data)


def count_lines(data: bytes) -> int:
    """Lines as an editor counts them: a last line without a newline still counts."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def _stat_key(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)


def _stat_token(kind: str, st: os.stat_result) -> str:
    return f"{kind}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"


class HashCache:
    """Digests of files by path, re-read only when their stat data changes (or is racy)."""

    def __init__(self, max_hash_bytes: int = 64 * 1024 * 1024):
        self.max_hash_bytes = max_hash_bytes
        # path -> (stat key, when hashed, state); workspace.WorkspaceScanner reads it directly
        self.entries: dict[str, tuple[tuple[int, int, int, int, int], int, FileState]] = {}
        self.reads = 0  # files actually read, for tests and benchmarks
        self.kept: dict[str, bytes] = {}  # contents kept by the last hash_kept() calls

    def state(self, path: str, st: os.stat_result | None = None, *, keep_limit: int = 0) -> FileState | None:
        """The FileState of ``path`` (None when it does not exist or is not a file or symlink).

        ``st`` is the path's lstat result when the caller has it. With ``keep_limit`` > 0, a text
        file of at most that many bytes that had to be read is also kept in ``self.kept``.
        """
        try:
            if st is None:
                st = os.lstat(path)
            mode = st.st_mode
            if stat.S_ISLNK(mode):
                return FileState("link:" + digest_bytes(os.fsencode(os.readlink(path))), st.st_size, None)
            if not stat.S_ISREG(mode):
                return None
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            return FileState(f"unreadable:{e.errno}", 0, None)
        key = _stat_key(st)
        cached = self.entries.get(path)
        if cached is not None and cached[0] == key and st.st_mtime_ns < cached[1] - RACY_NS:
            return cached[2]
        if st.st_size > self.max_hash_bytes:
            fs = FileState(_stat_token("large", st), st.st_size, None)
            self.entries[path] = (key, time.time_ns(), fs)
            return fs
        hashed_at = time.time_ns()
        fs = self._read(path, st, keep_limit)
        if fs is None:
            self.entries.pop(path, None)
            return None
        if not fs.digest.startswith("unreadable"):
            self.entries[path] = (key, hashed_at, fs)
        return fs

    def _read(self, path: str, st: os.stat_result, keep_limit: int) -> FileState | None:  # noqa: C901
        self.reads += 1
        try:
            fd = open_quietly(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except (FileNotFoundError, NotADirectoryError):
            return None  # vanished between the stat and the open
        except OSError:
            return FileState(_stat_token("unreadable", st), st.st_size, None)
        try:
            h = xxhash.xxh3_128()
            nbytes = newlines = 0
            binary = False
            last = b""
            parts: list[bytes] | None = [] if keep_limit and st.st_size <= keep_limit else None
            while True:
                chunk = os.read(fd, CHUNK)
                if not chunk:
                    break
                if not nbytes:
                    binary = b"\0" in chunk[:8192]
                h.update(chunk)
                if not binary:
                    newlines += chunk.count(b"\n")
                nbytes += len(chunk)
                last = chunk
                if parts is not None:
                    parts.append(chunk)
                    if nbytes > keep_limit:
                        parts = None
        except OSError:
            return FileState(_stat_token("unreadable", st), st.st_size, None)
        finally:
            os.close(fd)
        line_count = None if binary else newlines + (1 if nbytes and not last.endswith(b"\n") else 0)
        if parts is not None and not binary:
            self.kept[path] = b"".join(parts)
        return FileState(h.hexdigest(), nbytes, line_count)

    def forget(self, path: str) -> None:
        self.entries.pop(path, None)

    def export(self) -> dict[str, list]:
        """The cache as JSON-able data, for runs that span processes (hooks)."""
        return {p: [list(k), t, list(fs)] for p, (k, t, fs) in self.entries.items()}

    def load(self, data: dict[str, list]) -> None:
        for p, (k, t, fs) in data.items():
            self.entries[p] = (tuple(k), int(t), FileState(*fs))  # type: ignore[arg-type]
