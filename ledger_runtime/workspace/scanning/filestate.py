"""A file's state (digest, size, line count) behind a stat cache that never trusts a racy entry.

A file that cannot be hashed still gets a digest that changes when it does: a symlink hashes its target text, a file too
large or unreadable its stat data. The cache keys a digest by (mtime_ns, ctime_ns, size, inode, mode) and, like git's
"racily clean" rule, trusts it only when the mtime is older than the hashing by more than the timestamp granularity. So
a same-size rewrite within one tick is never missed, and one forging the old mtime still moves ctime.

Python 3.6+, standard library only (the package docstring says why).
"""

import collections
import os
import stat
import time

RACY_NS = 2000000000  # covers 1 s (and 2 s FAT) timestamp granularity with room to spare
CHUNK = 1 << 20
NOATIME = getattr(os, "O_NOATIME", 0)
PSEUDO_TREES = ("/proc/", "/sys/", "/dev/")  # never read to sign a file, nor to check what a command showed

FileState = collections.namedtuple("FileState", "digest size lines")
FileState.__doc__ = "A file's digest, size in bytes, and line count (None when binary, too large or unreadable)."

now_ns = getattr(time, "time_ns", None) or (lambda: int(time.time() * 1e9))  # Python 3.6 has no time_ns


class Digests(object):
    """How a workspace spells a hash: a file's is ``prefix`` + its hex digest, a link's "link:" + that of its target."""

    __slots__ = ("name", "new", "prefix")

    def __init__(self, name, new, prefix=""):
        self.name, self.new, self.prefix = name, new, prefix

    def bare(self, data):
        h = self.new()
        h.update(data)
        return h.hexdigest()

    def content(self, data):
        return self.prefix + self.bare(data)


READ_CHUNK = 1 << 20  # what a file that grew while read is read on by, at a time


def open_quietly(path, flags):
    """``os.open`` leaving the access time as it was (O_NOATIME) wherever the system lets the ledger ask."""
    if NOATIME:
        try:
            return os.open(path, flags | NOATIME)
        except PermissionError:
            pass  # EPERM: not the file's owner
    return os.open(path, flags)


def count_lines(data):
    """Lines as an editor counts them: a last line without a newline still counts."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def stat_key(st):
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)


def _stat_token(kind, st):
    return "%s:%d:%d:%d:%d" % (kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


class HashCache(object):
    """States of files by path, read again only when their stat data changes or is racy."""

    def __init__(self, digests, max_hash_bytes=64 * 1024 * 1024):
        self.digests = digests
        self.max_hash_bytes = max_hash_bytes
        # path -> (stat key, when hashed, state); the scanner's hot loop reads it directly
        self.entries = {}
        self.reads = 0  # files actually read, for tests and benchmarks
        self.kept = {}  # contents kept by the last scan: path -> bytes
        # Only a content that may be a change is kept: one that differs from what the last snapshot (``previous``,
        # path -> FileState) held of its path, or of a path it did not hold; None before the first scan, whose files
        # are the baseline. A scan that reads a tree again to be sure (a cross-check, racy timestamps after a clone)
        # holds no copy of it. Not the cache's own entry: a probe of a read key may have hashed the new content first.
        self.previous = None
        self.must_keep = set()  # paths whose next content read by a scan is kept, whatever ``previous`` holds
        # regular files with more than one name (hard links) when last looked at: a write through another name
        # moves their stat data with no event for theirs
        self.linked = set()

    def state(self, path, st=None, keep_limit=0):
        """The FileState of ``path`` (lstat ``st`` if the caller has it); None unless it is a file or symlink.

        With ``keep_limit`` > 0, a text file of at most that many bytes that had to be read is also kept in
        ``self.kept``.
        """
        try:
            if st is None:
                st = os.lstat(path)
            mode = st.st_mode
            if stat.S_ISLNK(mode):
                return FileState("link:" + self.digests.bare(os.fsencode(os.readlink(path))), st.st_size, None)
            if not stat.S_ISREG(mode):
                return None
            (self.linked.add if st.st_nlink > 1 else self.linked.discard)(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            return FileState("unreadable:%s" % e.errno, 0, None)
        key = stat_key(st)
        cached = self.entries.get(path)
        if cached is not None and cached[0] == key and st.st_mtime_ns < cached[1] - RACY_NS:
            return cached[2]
        if st.st_size > self.max_hash_bytes:
            fs = FileState(_stat_token("large", st), st.st_size, None)
            self.entries[path] = (key, now_ns(), fs)
            return fs
        hashed_at = now_ns()
        fs = self._read(path, st, keep_limit)
        if fs is None:
            self.entries.pop(path, None)
            return None
        if not fs.digest.startswith("unreadable") and (keep_limit or not self._new_since_scan(path, fs.digest)):
            # a probe's read of a change no scan has kept is not cached: the next scan reads it again, and keeps it
            self.entries[path] = (key, hashed_at, fs)
        return fs

    def _read(self, path, st, keep_limit):  # noqa: C901
        self.reads += 1
        try:
            fd = open_quietly(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except (FileNotFoundError, NotADirectoryError):
            return None  # vanished between the stat and the open
        except OSError:
            return FileState(_stat_token("unreadable", st), st.st_size, None)
        try:
            h = self.digests.new()
            nbytes = newlines = 0
            binary = False
            last = b""
            parts = [] if keep_limit and st.st_size <= keep_limit else None
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
        digest = self.digests.prefix + h.hexdigest()
        if parts is not None and not binary and self._may_be_change(path, digest):
            self.kept[path] = b"".join(parts)
        return FileState(digest, nbytes, line_count)

    def _may_be_change(self, path, digest):
        if path in self.must_keep:
            self.must_keep.discard(path)
            return True
        return self._new_since_scan(path, digest)

    def _new_since_scan(self, path, digest):
        """Whether the last snapshot held another content of ``path``, or none; False before the first scan."""
        if self.previous is None:
            return False
        held = self.previous.get(path)
        return held is None or held.digest != digest

    def keep(self, path, fs, keep_limit):
        """Keeps the content of a file a scan recorded as ``fs`` and as a change, where the cache vouched for it unread:
        a text file of at most ``keep_limit`` bytes is read (not following a link) and kept if it still is ``fs``. False
        where it is not: the cache forgets it, so that the next scan reads it and records what it holds now."""
        if fs.lines is None or fs.size > keep_limit or path in self.kept:
            return True  # no content to keep (a link, a binary, large or unreadable file), or kept already
        data = _read_file(path, keep_limit)
        if data is None:
            return True  # gone, or no longer a file of that size: the next scan finds it so
        self.reads += 1
        if len(data) != fs.size or self.digests.content(data) != fs.digest:
            self.forget(path)
            return False
        self.kept[path] = data
        return True

    def forget(self, path):
        self.entries.pop(path, None)

    def export(self):
        """The cache as JSON-able data, for runs that span processes."""
        return {p: [list(k), t, list(fs)] for p, (k, t, fs) in self.entries.items()}

    def load(self, data):
        for p, (k, t, fs) in data.items():
            self.entries[p] = (tuple(k), int(t), FileState(*fs))


def _read_file(path, limit):
    """A regular file's bytes, not following a link, if at most ``limit``; else None."""
    try:
        fd = open_quietly(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        return _read_fd(fd, limit)
    finally:
        os.close(fd)


def _read_fd(fd, limit):
    """The bytes of the regular file open as ``fd`` if at most ``limit``; else None."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        # each read asks for what the file holds, past it by one byte at the most: not for ``limit`` (a setting of
        # 10**20 bytes would ask the allocator for that much, and lose the record)
        data = os.read(fd, st.st_size + 1)
        while len(data) <= limit:
            more = os.read(fd, min(limit + 1 - len(data), max(st.st_size, READ_CHUNK)))
            if not more:
                break
            data += more
        return data if len(data) <= limit else None
    except OSError:
        return None


def read_regular(path, limit):
    """A regular file's bytes, links followed, if at most ``limit``; never under /proc, /sys or /dev however reached."""
    real = os.path.realpath(path)
    if (real + "/").startswith(PSEUDO_TREES):
        return None
    try:
        fd = open_quietly(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        return _read_fd(fd, limit)
    finally:
        os.close(fd)
