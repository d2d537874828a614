"""How much of what is new one scan takes in, and the directories a scan stops tracking.

Each new entry is charged to the topmost directory new in this scan above it, or the known one it appeared in
(``Intake``). A scan takes at most ``max_new_entries`` under one such directory and twice that in all, within
``budget_s`` seconds and ``max_depth`` levels. Past a bound the directory charged is *untracked*: its contents are
unknown from then on, and its snapshot entry ``<directory>/`` has a digest new at every scan. The engine's module
docstring, "Bounds", says the rest.

Python 3.6+, standard library only (the package docstring says why).
"""

import collections
import os
import time

MAX_UNTRACKED_PER_DIR = 8  # new directories untracked side by side before their parent is, instead
UNTRACKED = "untracked:"  # the digest prefix of an untracked directory's entry in a snapshot

ScanBounds = collections.namedtuple("ScanBounds", "budget_s max_new_entries max_depth")
ScanBounds.__new__.__defaults__ = (3.0, 1000, 64)
ScanBounds.__doc__ = 'How much of what is new one scan takes in (the engine\'s module docstring, "Bounds").'


def untracked_entry(directory):
    """The snapshot's entry for an untracked directory: its path with a trailing separator."""
    return directory.rstrip(os.sep) + os.sep


def relative(path, root):
    """``path`` relative to ``root`` when inside it, else unchanged."""
    if path == root:
        return "."
    prefix = root.rstrip(os.sep) + os.sep
    if path == prefix:
        return "./"  # the root's entry when it is untracked
    return path[len(prefix) :] if path.startswith(prefix) else path


class Untracked(collections.namedtuple("Untracked", "path reason at kept")):
    """A directory the scanner stopped tracking: why, when, and how many of its earlier entries are still tracked."""

    __slots__ = ()

    def summary(self, root):
        shown = relative(self.path, root)
        where = "the workspace root" if shown == "." else shown + "/"
        if self.kept:
            return (
                "%s: %s; what it held before (%d entries) is still tracked, anything new in it is not: "
                "unknown to the ledger from now on" % (where, self.reason, self.kept)
            )
        return "%s: %s; it is not tracked from now on: what is in it is unknown to the ledger" % (where, self.reason)


Untracked.__new__.__defaults__ = (0,)


class Intake(object):
    """What one scan takes in of new entries, against its bounds; ``stop`` untracks a directory charged."""

    def __init__(self, bounds, first=False):
        self.bounds = bounds
        # the first scan (the baseline) takes in everything, to the depth cap only
        self.per_key = float("inf") if first else bounds.max_new_entries
        self.left = float("inf") if first else 2 * bounds.max_new_entries
        self.deadline = float("inf") if first else time.monotonic() + bounds.budget_s
        self.origin = {}  # directory new in this scan -> the topmost new one above it
        self.before = {}  # known directory re-listed in this scan -> its listing before (or None)
        self.charged = {}
        self.stopped = {}
        self.applied = set()

    def key(self, d):
        return self.origin.get(d, d)

    def halted(self, d):
        """Whether new entries of directory ``d`` are no longer taken in."""
        k = self.origin.get(d, d)
        return k in self.stopped or (d in self.origin and os.path.dirname(k) in self.stopped)

    def room(self, d):
        """New entries directory ``d`` may still bring in."""
        return min(self.per_key - self.charged.get(self.key(d), 0), self.left)

    def charge(self, d, n):
        """Charges ``n`` new entries of ``d``; False when its key is stopped for them."""
        if not n:
            return True
        k = self.key(d)
        if self.late():
            self.stop(k, "more new entries than one scan takes in within %g s" % self.bounds.budget_s)
        elif self.charged.get(k, 0) + n > self.per_key:
            self.stop(k, "more than {:,} new entries appeared under it in one scan".format(self.bounds.max_new_entries))
        elif n > self.left:
            self.stop(k, "more than {:,} new entries appeared in one scan".format(2 * self.bounds.max_new_entries))
        else:
            self.charged[k] = self.charged.get(k, 0) + n
            self.left -= n
            return True
        return False

    def late(self):
        return time.monotonic() > self.deadline

    def stop(self, key, reason):
        self.stopped.setdefault(key, reason)
