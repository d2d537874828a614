"""Signatures of read keys: what a command's output can depend on, hashed as it is now.

- ``f:<path>``: a file's content, links followed as ``cat`` does; a directory signs its listing;
- ``x:<path>``: only whether the path exists and what it is (``cd DIR``);
- ``m:<path>``: the path's own stat data (``ls -a`` shows ``..``);
- ``d:<path>``: a listing with each entry's stat data, in file system order (``ls -l``); a file signs stat and content;
- ``r:<path>``: a whole subtree, ignored files and ``.git`` included (``grep -r``, ``find``).

Equal signatures mean the command would read the same, so print the same. They come from the file system, never the
snapshot, so files git ignores count too. Missing paths sign as ``missing``; hashes are the workspace's own.

Python 3.6+, standard library only (the package docstring says why).
"""

import errno
import os
import stat

from .filestate import PSEUDO_TREES

MISSING = "missing"


def _meta(st):
    """Stat data a listing can show, but atime: reading changes it, and commands that show it are impure."""
    return "%o,%d,%d,%d,%d,%d,%d,%d" % (
        st.st_mode,
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
        st.st_ino,
        st.st_nlink,
        st.st_uid,
        st.st_gid,
    )


class Probe(object):
    """Computes read-key signatures, sharing the workspace's hash cache."""

    def __init__(self, cache, root=None):
        self.cache = cache
        # a root reached through a link: a path resolved into the tree is named under the root as given, as the scans
        # name the tree's files (a read through a link in the tree then goes stale with the change of its target)
        self._root = root
        self._real_root = os.path.realpath(root) if root else None

    def resolved(self, path):
        """``path`` with its links resolved, under the root as given where it lies in the tree."""
        real = os.path.realpath(path)
        top = self._real_root
        if top and top != self._root and real.startswith(top.rstrip("/") + "/"):
            return os.path.join(self._root, os.path.relpath(real, top))
        return real

    def sign_many(self, keys):
        return {k: self.sign(k) for k in keys}

    def sign(self, key):
        kind, _, path = key.partition(":")
        try:
            if kind == "f":
                return self._file(path)
            if kind == "x":
                return self._exists(path)
            if kind == "d":
                return self._listing(path)
            if kind == "m":
                return _meta(os.lstat(path))
            if kind == "r":
                return self._tree(path)
        except OSError as e:  # permissions, races: a signature that never matches a good one
            return "error:%s" % e.errno
        return "unknown-key:" + kind

    def file_state(self, path):
        """Content state of a file as ``cat`` reads it, links followed."""
        real = os.path.realpath(path)
        return self.cache.state(real)

    def _file(self, path):
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return MISSING
        if stat.S_ISDIR(st.st_mode):
            return "dir:" + self._listing(path)
        real = self.resolved(path)
        if not stat.S_ISREG(st.st_mode) or (os.path.realpath(real) + "/").startswith(PSEUDO_TREES):
            return "special:" + _meta(st)  # /proc and friends (however reached) are never read to sign
        fs = self.cache.state(real)
        if fs is None:
            return MISSING
        return fs.digest if real == path else fs.digest + "@" + real

    def _exists(self, path):
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return MISSING
        if stat.S_ISLNK(st.st_mode):
            real = os.path.realpath(path)
            if real == path:  # a link the path cannot be resolved past (a loop)
                return "link:" + os.readlink(path) + ":error:%d" % errno.ELOOP
            return "link:" + os.readlink(path) + ":" + self._exists(real)
        return "dir" if stat.S_ISDIR(st.st_mode) else "file"

    def _listing(self, path):
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return MISSING
        h = self.cache.digests.new()
        h.update(_meta(st).encode())
        if stat.S_ISLNK(st.st_mode):
            h.update(os.fsencode(os.readlink(path)))
            try:
                st = os.stat(path)
            except OSError:
                return h.hexdigest()
            h.update(_meta(st).encode())
        if not stat.S_ISDIR(st.st_mode):
            fs = self.cache.state(os.path.realpath(path))
            h.update((fs.digest if fs else MISSING).encode())
            return h.hexdigest()
        with os.scandir(path) as it:
            for e in it:
                h.update(os.fsencode(e.name) + b"\0")
                try:
                    h.update(_meta(e.stat(follow_symlinks=False)).encode())
                except OSError:
                    h.update(b"gone")
        return h.hexdigest()

    def _tree(self, path):  # noqa: C901
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return MISSING
        h = self.cache.digests.new()
        if stat.S_ISLNK(st.st_mode):  # grep -r and find follow a link named on the command line
            h.update(b"L" + os.fsencode(os.readlink(path)))
            real = os.path.realpath(path)
            if os.path.isdir(real):
                h.update(self._tree(real).encode())
                return h.hexdigest()
        if not stat.S_ISDIR(st.st_mode):
            return "file:" + self._listing(path)
        state = self.cache.state
        stack = [path]
        while stack:
            d = stack.pop()
            h.update(b"D" + os.fsencode(d) + b"\0")
            try:
                it = os.scandir(d)
            except OSError as e:
                h.update(("unlistable:%s" % e.errno).encode())
                continue
            with it:
                for e in it:
                    h.update(os.fsencode(e.name) + b"\0")
                    try:
                        est = e.stat(follow_symlinks=False)
                    except OSError:
                        h.update(b"gone")
                        continue
                    h.update(_meta(est).encode())
                    mode = est.st_mode
                    if stat.S_ISDIR(mode):
                        stack.append(e.path)
                    elif stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                        fs = state(e.path, est)
                        h.update((fs.digest if fs else MISSING).encode())
        return h.hexdigest()
