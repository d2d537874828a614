"""A snapshot's files as a map that a change does not copy.

An incremental scan changes a few files of a tree that may hold 100,000, and copying the map each scan cost more than
the scan. A ``FileMap`` is a shared base dict plus the entries that differ (None: gone); once those outgrow a share of
the base, the next map gets a base of its own. A map never changes once made: a snapshot keeps what it saw.

Python 3.6+, standard library only (the package docstring says why).
"""

from collections.abc import Mapping

MIN_OVERLAY = 4096  # entries that differ from the base before a map starts from a base of its own
OVERLAY_SHARE = 8  # ...or one eighth of the base, if that is more


class FileMap(Mapping):
    """Path -> FileState."""

    __slots__ = ("_base", "_over", "_len")

    def __init__(self, base, over=None):
        self._base = base
        self._over = over or {}
        n = len(base)
        for p, fs in self._over.items():
            n += (fs is not None) - (p in base)
        self._len = n

    def __getitem__(self, path):
        over = self._over
        if path in over:
            fs = over[path]
            if fs is None:
                raise KeyError(path)
            return fs
        return self._base[path]

    def get(self, path, default=None):
        over = self._over
        if path in over:
            fs = over[path]
            return default if fs is None else fs
        return self._base.get(path, default)

    def __contains__(self, path):
        over = self._over
        if path in over:
            return over[path] is not None
        return path in self._base

    def __len__(self):
        return self._len

    def __iter__(self):
        over = self._over
        if not over:
            return iter(self._base)
        return self._iter(over)

    def _iter(self, over):
        for p in self._base:
            if p not in over:
                yield p
        for p, fs in over.items():
            if fs is not None:
                yield p

    def items(self):
        return self._base.items() if not self._over else super().items()

    def differing(self, files):
        """The (path, state) pairs of ``files`` (path -> FileState) whose path this map holds with another digest, or
        not at all: one loop over ``files``, without a call per path (a full scan's tree)."""
        base, over = self._base, self._over
        get = base.get
        # most states are the very object the hash cache gave both scans: those are passed over first, in one loop
        maybe = [p for p, fs in files.items() if get(p) is not fs]
        if over:
            maybe.extend(p for p in over if p in files)
        out = []
        for p in dict.fromkeys(maybe):
            fs, was = files[p], self.get(p)
            if was is None or (was is not fs and was.digest != fs.digest):
                out.append((p, fs))
        return out

    def changed(self, changes):
        """This map with each (path, new state or None for gone) applied."""
        over = dict(self._over)
        over.update(changes)
        if len(over) > max(MIN_OVERLAY, len(self._base) // OVERLAY_SHARE):
            base = {p: fs for p, fs in self._base.items() if p not in over}
            base.update((p, fs) for p, fs in over.items() if fs is not None)
            return FileMap(base)
        return FileMap(self._base, over)

    def __repr__(self):
        return "FileMap(%d files, %d over the base)" % (len(self), len(self._over))
