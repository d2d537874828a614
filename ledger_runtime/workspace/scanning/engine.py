"""The scanner: the content hash of every file under a root that git does not ignore, incrementally.

``scan()`` returns a snapshot of every file under the root that git does not ignore, tracked or not, plus the extra
paths the caller watches.

With inotify (watcher.py) a scan re-lists and re-hashes only what the kernel reported, and the snapshot carries its
changes, so ``delta`` is free. Every ``cross_check_every`` scans, and whenever the watcher is unsure, the scan is a full
stat walk, which also finds writes through a shared memory map. Without inotify every scan is that walk, with listings
and contents cached by stat data. When only git's index changes, only tracked files the ignore rules match are looked
at; when an ignore file changes, the listing is rebuilt from git.

Bounds (``ScanBounds``, bounds.py). What is new is taken in level by level, listed, classified with one ``check-ignore``
per level and hashed; the budget is checked while listing, so a directory of a million names is not read to its end.
Where a bound is reached, the directory charged is *untracked*: a new one with all under it; a known one keeps what it
held, but takes in nothing new. More than ``MAX_UNTRACKED_PER_DIR`` side by side untrack their parent instead. An
untracked directory is never listed, hashed or watched again, and git leaves it out. Its snapshot entry ``<directory>/``
has a digest new at every scan, so nothing a scan spans is taken as unchanged while part of it is unknown. Files in it
that commands named are still hashed. ``on_untracked`` hears of each once; one removed is forgotten. The first scan
takes in all git lists, to the depth cap only.

Where the scanner runs gives it ``watcher`` (none in a container, where each scan is a process restoring the last one's
state) and the ``HashCache``'s ``Digests``. Python 3.6+, standard library only (the package docstring says why).
"""

import collections
import os
import stat
import time

from .alike import trim_common
from .bounds import MAX_UNTRACKED_PER_DIR, UNTRACKED, Intake, ScanBounds, Untracked, untracked_entry
from .filemap import FileMap
from .filestate import RACY_NS, FileState, now_ns
from .gitview import (
    check_ignored,
    default_ignored,
    git_toplevel,
    list_included,
    list_tracked,
    list_tracked_ignored,
    state_key,
    watched_files,
)

Change = collections.namedtuple("Change", "path before after")
Change.__doc__ = "One path whose state differs between two snapshots (None: absent on that side)."

Scan = collections.namedtuple("Scan", "files root serial base changes untracked")
Scan.__doc__ = """A snapshot as the scanner makes it: ``changes`` against snapshot number ``base`` (None: a full walk).
Where it runs wraps it (``WorkspaceScanner.snapshot``)."""

_Dir = collections.namedtuple("_Dir", "key listed_at files dirs ignored file_paths dir_paths frozen")
# key: (mtime_ns, ctime_ns, inode) of the directory; files: included regular files and symlinks (names);
# dirs: included subdirectories (names); ignored: names git ignores (or that are not files or dirs: FIFOs,
# sockets); file_paths, dir_paths: the same as full paths, built once per listing, not per scan;
# frozen: untracked, never listed again (only these names are tracked)


def _make_dir(d, key, listed_at, files, dirs, ignored, frozen=False):
    base = d if d != os.sep else ""
    files, dirs = tuple(files), tuple(dirs)
    return _Dir(
        key,
        listed_at,
        files,
        dirs,
        frozenset(ignored),
        tuple(base + os.sep + n for n in files),
        tuple(base + os.sep + n for n in dirs),
        frozen,
    )


def _dir_key(st):
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _is_file(path):
    """Whether ``path`` is what a scan hashes: a regular file or a symbolic link."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def _listed_link(entry, d, name):
    """Whether ``name`` in directory ``d`` is a symbolic link that its listing ``entry`` holds."""
    return name in entry.files and os.path.islink(os.path.join(d, name))


class WorkspaceScanner(object):
    """Snapshots one workspace root incrementally; without a ``watcher`` every scan walks.

    ``git_top`` is the work tree's top when the caller knows it (None: not in git)."""

    def __init__(
        self,
        root,
        cache,
        exclude=(),
        watcher=None,
        cross_check_every=200,
        bounds=None,
        on_untracked=None,
        git_top="",
    ):
        self.root = os.path.abspath(root)
        self.bounds = bounds or ScanBounds()
        self.on_untracked = on_untracked  # told of each directory the scanner stops tracking, once
        self.untracked = {}
        self._intake = None  # the bounds of the scan under way
        self._marked = set()  # the untracked directories' entries in the last snapshot
        self._nonce = os.urandom(6).hex()  # an untracked directory's digest is new at every scan, any run
        # directories never scanned (the run's own directory when it lies inside the workspace)
        self.excluded = tuple(os.path.abspath(e) for e in exclude)
        self._excluded_under = tuple(e + os.sep for e in self.excluded)
        self.cache = cache
        self.extra_paths = set()
        self._unscanned = {}  # paths watched since the last scan: their state when watched
        self.git_top = git_toplevel(self.root) if git_top == "" else git_top
        self._git_watched = None  # the files besides ignore files that git's listing depends on (gitview)
        self._dirs = {}
        self._git_key = None
        self._ignore_files = set()
        self.git_calls = 0  # for tests and benchmarks
        self.watcher = watcher
        self.cross_check_every = cross_check_every
        self._files = None  # the last scan's snapshot, for the next increment
        self._serial = 0
        self._since_full = 0
        self._tracked_ignored = None  # tracked files the ignore rules match
        self._tracked_raw = None  # `git ls-files -z --cached` when that was computed
        self.full_scans = 0  # for tests and benchmarks
        self.incremental_scans = 0
        self._recheck = set()  # paths to hash again at the next scan, whatever inotify said
        # the snapshot's files with more than one name (hard links) at the last walk: a write through another name (in
        # the tree or out of it) is reported by their directories' watches under that name only (_watch_linked)
        self._linked_at_walk = set()
        self._linked = set()  # of them, those with no watch of their own: looked at by every scan
        self._read_watches = set()  # files read, with a watch of their own (watch_reads)

    @property
    def is_git(self):
        return self.git_top is not None

    def watch(self, paths):
        """Also tracks these absolute paths; returns each new one's state now, as the next scan will hash it."""
        new = {}
        for p in paths:
            if p and os.path.isabs(p):
                p = os.path.normpath(p)
                if p not in self.extra_paths:
                    self.extra_paths.add(p)
                    new[p] = self._unscanned[p] = self.cache.state(p)
        return new

    def changed_since(self, paths):
        """Those of ``paths`` (absolute) that the next scan records otherwise than the last one did: a file it holds
        whose state differs now, by the rule the scan hashes by (the hash cache's: the same stat data, older than the
        hashing by more than a timestamp tick, is the same content; any other is read), or one it takes in as new
        (``_new_files``). Asked before a command, so that a change made since is booked before the command sees it."""
        last = self._files or {}
        held, other, watched = [], [], []
        for p in paths:
            p = os.path.normpath(p)
            (held if p in last else watched if p in self._unscanned else other).append(p)
        moved = [p for p in held if self._moved(p, last[p])]
        # watched since the last scan, which no scan has taken yet (a reader is taken around no scan on a walk)
        moved += [p for p in watched if self._moved_from(p, self._unscanned[p])]
        return moved + self._new_files(other)

    def _moved_from(self, path, was):
        """Whether a path watched since the last scan is not in the state it was watched in (``was``: None, none)."""
        if was is None:
            return self.cache.state(path) is not None
        return self._moved(path, was)

    def _moved(self, path, was):
        now = self.cache.state(path)
        if now is not None and now.digest == was.digest:
            return False
        self.cache.forget(path)  # the scan reads it again, and keeps its content for the change it records
        return True

    def _new_files(self, paths):
        """Those of ``paths`` (absolute) the next scan takes in and the last did not have, bounds aside: a file or link
        under a listed directory that is not untracked, reached through no link, that git (or the built-in list outside
        git) does not ignore, nor a directory on the way. Asked before the scan, so that a command naming one is not
        the first to see it; any other path no scan covers is seen first when named."""
        chains = {}
        last = self._files or {}
        for p in paths:
            p = os.path.normpath(p)
            chain = self._unlisted(p) if p not in last and _is_file(p) else None
            if chain:
                chains[p] = chain
        if not chains:
            return []
        ignored = self._ignored(sorted({r for chain in chains.values() for r in chain}))
        return [p for p, chain in chains.items() if not any(r in ignored or r.rstrip("/") in ignored for r in chain)]

    def _unlisted(self, path):
        """For a path under the root that no listing holds: the relative path of each entry from the first its nearest
        listed directory lacks down to ``path``, a directory's ending in "/", as the scan would classify them. None for
        one outside the root or excluded, or where a listing leaves it out: untracked, ignored, or behind a link."""
        if not path.startswith(self.root.rstrip(os.sep) + os.sep) or self._is_excluded(path):
            return None
        d, names = path, []
        while not names or d not in self._dirs:  # a listed directory that a file replaced is taken in as that file
            if d == self.root:
                return None
            d, name = os.path.split(d)
            names.append(name)
        entry, top = self._dirs[d], names[-1]
        # behind a link it lists (not a listed file that a directory replaced since)
        if entry.frozen or top in entry.ignored or (len(names) > 1 and _listed_link(entry, d, top)):
            return None
        rel = os.path.relpath(os.path.join(d, top), self.root)
        chain = [rel + "/"]
        for name in reversed(names[:-1]):
            rel += "/" + name
            chain.append(rel + "/")
        chain[-1] = rel  # the file itself
        return chain

    # -- scanning -------------------------------------------------------------------------------

    def scan(self, *, keep_limit=0):
        """A snapshot of the workspace now; ``keep_limit`` as in HashCache.state."""
        self.cache.kept = {}
        self.cache.previous = self._files  # what a kept content must differ from to be a change
        self._intake = Intake(self.bounds, first=self._files is None)  # one budget, whichever way it goes
        try:
            if self.watcher is not None and self._files is not None and self._since_full < self.cross_check_every:
                snap = self._incremental(keep_limit)
                if snap is not None:
                    return snap
            return self._full(keep_limit)
        finally:
            self._intake = None

    def ignored_entries(self):
        """Every entry of the listed tree that no snapshot hashes, sorted: what git ignores, FIFOs and sockets.

        An ignored directory counts once, not what is in it."""
        out = []
        for d, entry in self._dirs.items():
            if entry.ignored:
                base = d if d != os.sep else ""
                out.extend(base + os.sep + n for n in entry.ignored)
        out.sort()
        return out

    @property
    def last_files(self):
        """The files of the last snapshot; None before the first."""
        return self._files

    def rehash(self, paths):
        """Reads ``paths`` again at the next scan, whatever their stat data says.

        A scan whose result was dropped saw them first, and the next one must read their content to keep it."""
        for p in paths:
            self.cache.entries.pop(p, None)
            self.cache.must_keep.add(p)  # the dropped scan's snapshot is the last: it holds the new content
            self._recheck.add(p)

    def recheck(self, path):
        """Hashes ``path`` again at the next scan: its content differed from the cache's, with no event for it."""
        self._recheck.add(path)

    def close(self):
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None

    def _snapshot(self, files, changes, keep_limit=0):
        self._keep_unread(files, changes, keep_limit)
        base = self._serial if changes is not None else None
        self._serial += 1
        files = files if isinstance(files, FileMap) else FileMap(files)
        self._files = files
        self._unscanned = {}  # each watched path's state is this scan's now
        return self.snapshot(Scan(files, self.root, self._serial, base, changes, tuple(sorted(self.untracked))))

    def _keep_unread(self, files, changes, keep_limit):
        """Keeps the content of each file this scan records as new or changed that it did not read, the hash cache
        vouching for it: a file back in the snapshot, unchanged on disk since a scan read it (excluded, then not; or
        left the index and was added again). Its content is a change's as any other's is (``HashCache.kept``); one no
        longer what the cache vouched for is hashed again at the next scan. ``changes``: None after a full walk."""
        previous = self.cache.previous  # the last snapshot's FileMap
        if not keep_limit or previous is None:
            return  # the first scan's files are the baseline: nothing is kept
        if changes is None:
            new = previous.differing(files)
        else:
            new = [(c.path, c.after) for c in changes if c.after is not None]
        for p, fs in new:
            if not self.cache.keep(p, fs, keep_limit):
                self._recheck.add(p)

    def snapshot(self, scan):
        """What ``scan`` returns for a ``Scan``: the scan itself here; a subclass makes its own snapshot."""
        return scan

    def _full(self, keep_limit):
        """The full stat walk."""
        if self.watcher is not None:
            self.watcher.drain()  # what was queued before the walk, the walk sees for itself
        self.full_scans += 1
        self._since_full = 0
        self._recheck = set()  # the walk hashes every file the cache forgot
        if self._dirs and self.is_git and self._git_state_key() != self._git_key:
            # git is about to list the tree again: what is new is taken in first, within the bounds,
            # so that the listing leaves out what is untracked (and lists only what was taken in)
            self._walk_all(keep_limit, listings_only=True)
        self._refresh_listing()
        files = self._walk_all(keep_limit)
        self._hash_into(files, (p for p in self.extra_paths if p not in files), keep_limit)
        self._mark_untracked(files)
        if self.watcher is not None:
            self._watch_listed()
        self._watch_linked({p for p in self.cache.linked if p in files}, files)
        return self._snapshot(files, None, keep_limit)

    def _watch_linked(self, linked, files):
        """Files with more than one name: a write through another name is reported under that name only (in the tree
        or out of it), so each has a watch of its own; one that cannot have it is looked at by every scan. Files read
        keep theirs (``watch_reads``)."""
        self._linked_at_walk = linked
        watcher = self.watcher
        if watcher is not None:
            read = {p for p in self._read_watches if p in files}
            watcher.keep_files(linked | read)  # first: the watches dropped leave room for the new
            # added again: a name that stands for a new file since (events lost) has its watch follow it
            self._read_watches = {p for p in read if watcher.add_file(p)}
        self._linked = {p for p in linked if watcher is None or not watcher.add_file(p)}

    def watch_reads(self, paths):
        """A watch of its own on each file of the snapshot a command is about to read: a name made for it anywhere
        later (a hard link out of the tree, by a process the ledger never sees, which no directory's watch reports)
        and a write through that name is reported under this one."""
        watcher, files = self.watcher, self._files
        if watcher is None or files is None:
            return
        for p in paths:
            p = os.path.normpath(p)
            if p in files and watcher.add_file(p):  # (again after a read before: the name may name another file now)
                self._read_watches.add(p)

    def _walk_all(self, keep_limit, *, listings_only=False):
        """The listed tree's files and what is new in it, within the bounds; ``listings_only`` skips known files."""
        files = {}
        pending = []  # directories with entries git must classify
        self._walk([self.root], None if listings_only else files, pending, keep_limit)
        taken = {}
        self._take_in(pending, taken, keep_limit, watch=False)
        self._apply_stops(taken)
        files.update((p, fs) for p, fs in taken.items() if fs is not None)
        return files

    def _watch_listed(self):
        """A watch on every directory listed, and none on the rest or on an untracked one with nothing tracked."""
        w = self.watcher
        assert w is not None
        listed = {d for d, e in self._dirs.items() if not e.frozen or e.files or e.dirs}
        for d in list(w._wd_of):
            if d not in listed:
                w.discard(d)
        for d in listed:
            if not self.excluded or not (d in self.excluded or d.startswith(self._excluded_under)):
                w.add(d, self._dirs[d].key[2])
        w.lost = False  # every directory listed has been added again: each watch is that of the directory there now
        if w.failed:  # the per-user limit of watches: walk every time, as without inotify
            w.close()
            self.watcher = None

    def _incremental(self, keep_limit):  # noqa: C901
        """A snapshot from the last one and what the kernel reported since; None to walk instead."""
        assert self.watcher is not None and self._files is not None
        reported = self.watcher.drain()
        if reported.unsure:
            return None
        if self.is_git and self._git_state_key() != self._git_key and not self._index_changed_only(reported):
            return None
        self.incremental_scans += 1
        self._since_full += 1
        old = self._files
        touched = set()
        pending = []
        replaced = False  # a directory listed under a name that another had: what it holds is not what the name held
        for d in sorted(reported.dirs, key=lambda x: x.count(os.sep)):  # parents before their new children
            if not (d == self.root or d.startswith(self.root + os.sep)):
                continue
            if self.excluded and (d in self.excluded or d.startswith(self._excluded_under)):
                continue
            before = self._dirs.get(d)
            if before is None and not self._included_dir(d):
                continue  # a directory the scanner does not list (ignored, or not yet classified)
            entry = self._listing(d, pending)  # re-lists it: its stat data moved with its entries
            if entry is None:  # gone: its files and everything under it
                self._forget_tree(d, old, touched)
                continue
            if before is not None:
                replaced = replaced or before.key[2] != entry.key[2]
                now = set(entry.file_paths)  # once: built per name, it made a relisting quadratic in the files
                touched.update(p for p in before.file_paths if p not in now)
                for sub in set(before.dir_paths) - set(entry.dir_paths):
                    self._forget_tree(sub, old, touched)
            self.watcher.add(d, entry.key[2])
        taken = {}  # new files, hashed as they were taken in
        self._take_in(pending, taken, keep_limit, watch=True)
        touched.update(taken)
        self._apply_stops(taken, touched)
        names = {}
        reported.files |= self._recheck | self._linked
        self._recheck = set()
        for p in reported.files:
            d = os.path.dirname(p)
            entry = self._dirs.get(d)
            if entry is not None:
                if d not in names:
                    names[d] = frozenset(entry.files)
                if os.path.basename(p) in names[d]:
                    touched.add(p)
                    continue
            if p in old:
                touched.add(p)  # it was a file of the workspace: it may be gone
        if self.watcher.failed or replaced:  # (replaced: its files and directories, by their stat data, and watches)
            return None
        changes = []
        fresh = {}
        for p in touched:
            if p in self.extra_paths and p not in taken:
                continue  # watched whatever the listings say (an ignored file in a listed directory): below
            d = os.path.dirname(p)
            entry = self._dirs.get(d)
            if entry is not None and d not in names:
                names[d] = frozenset(entry.files)
            listed = entry is not None and os.path.basename(p) in names[d]
            if p in taken:
                fresh[p] = taken[p] if listed else None
            else:
                fresh[p] = self.cache.state(p, keep_limit=keep_limit) if listed else None
        for p in self.extra_paths:
            if p not in fresh:
                fresh[p] = taken[p] if p in taken else self.cache.state(p, keep_limit=keep_limit)
        linked = self.cache.linked
        if any(p in linked and p not in self._linked_at_walk and fs is not None for p, fs in fresh.items()):
            return None  # a file with a name more than it had: its other names are found by a walk
        read = self._read_watches
        for p, fs in fresh.items():
            if fs is None:
                continue
            if p in linked:
                if not self.watcher.add_file(p):  # (the same file: the same watch)
                    self._linked.add(p)
            elif p in read:  # the name may stand for a new file now (`sed -i` makes one): the watch follows it
                self.watcher.add_file(p)
        self._mark_untracked(fresh, old)
        for p, fs in fresh.items():
            was = old.get(p)
            if (was is None) != (fs is None) or (was is not None and fs is not None and was.digest != fs.digest):
                changes.append(Change(p, was, fs))
        if not changes:
            return self._snapshot(old, [])
        files = old.changed((c.path, c.after) for c in changes)  # what changed, not a copy of the tree
        changes.sort(key=lambda c: c.path)
        return self._snapshot(files, changes, keep_limit)

    def _list_tracked_ignored(self):
        """Tracked files the ignore rules match, included only because git tracks them."""
        if self.watcher is None:
            return None
        out = list_tracked_ignored(self.root)
        self.git_calls += 1
        return None if out is None else {os.path.join(self.root, os.fsdecode(r)) for r in out.split(b"\0") if r}

    def _included_dir(self, d):
        parent = self._dirs.get(os.path.dirname(d))
        return parent is not None and os.path.basename(d) in parent.dirs

    def _forget_tree(self, d, files, touched):
        """A directory that is gone: every file under it changed to nothing, and its listings go."""
        prefix = d + os.sep
        touched.update(p for p in files if p.startswith(prefix))
        for sub in [x for x in self._dirs if x == d or x.startswith(prefix)]:
            del self._dirs[sub]
            if self.watcher is not None:
                self.watcher.discard(sub)

    def _index_changed_only(self, reported):
        """When only git's index changed, updates the tracked files ignore rules match; False to rebuild the listing."""
        key = self._git_state_key()
        old = dict((p[0], p[1:]) for p in (self._git_key or ()))
        new = dict((p[0], p[1:]) for p in key)
        index = self._git_watched[0] if self._git_watched else None
        if set(old) != set(new) or any(old[p] != new[p] for p in new if p != index):
            return False  # an ignore file changed, or appeared
        # Ignore rules unchanged: only a path that joined or left the index can change its status.
        # Listing the index is git reading it (cheap); matching every tracked path against the
        # rules is not: only the paths that joined are matched.
        raw = list_tracked(self.root)
        self.git_calls += 1
        if raw is None or self._tracked_ignored is None or self._tracked_raw is None:
            return False
        before = self._tracked_ignored
        now = before
        if raw != self._tracked_raw:
            # the listing is in git's order: what joined or left lies between the entries both
            # listings begin and end with (found in C; a 100,000-file index is not split into sets)
            # (a path listed twice, as a conflicted one is, may stand on both sides of the cut: each
            # path found on one side only is looked for in the other listing whole)
            was_part, now_part = trim_common(self._tracked_raw, raw, b"\0")
            was = set(was_part.split(b"\0")) - {b""}
            tracked = set(now_part.split(b"\0")) - {b""}
            old_all, new_all = b"\0" + self._tracked_raw, b"\0" + raw
            left = {os.path.join(self.root, os.fsdecode(r)) for r in was - tracked if b"\0" + r + b"\0" not in new_all}
            joined = self._ignored([os.fsdecode(r) for r in tracked - was if b"\0" + r + b"\0" not in old_all])
            now = (before - left) | {os.path.join(self.root, r) for r in joined}
            self._tracked_raw = raw
        flipped = (now - before) | (before - now)
        self._tracked_ignored = now
        for p in flipped:  # included now (newly tracked) or no more (untracked, and ignored)
            self._set_included(p, p in now)
            reported.files.add(p)
        self._git_key = key
        return True

    def _set_included(self, path, included):
        d, name = os.path.split(path)
        old = self._dirs.get(d)
        if old is None:
            return
        files = [f for f in old.files if f != name] + ([name] if included else [])
        ignored = (old.ignored - {name}) if included else (old.ignored | {name})
        self._dirs[d] = _make_dir(d, old.key, old.listed_at, files, old.dirs, ignored, old.frozen)

    def _walk(
        self,
        stack,
        files,
        pending,
        keep_limit,
    ):
        """Every listed directory under ``stack``, re-listed where it changed, files hashed into ``files`` if given."""
        while stack:
            d = stack.pop()
            if self._is_excluded(d):
                continue
            entry = self._listing(d, pending)
            if entry is None:
                continue
            if files is not None:
                self._hash_into(files, entry.file_paths, keep_limit)
            stack.extend(entry.dir_paths)

    def _is_excluded(self, d):
        return bool(self.excluded) and (d in self.excluded or d.startswith(self._excluded_under))

    def _hash_into(self, files, paths, keep_limit):
        # The hot loop of every scan: the cache hit is inlined (HashCache.state has the same rule),
        # which makes a no-change scan about a quarter faster.
        state = self.cache.state
        entries = self.cache.entries
        lstat = os.lstat
        for path in paths:
            try:
                st = lstat(path)
            except OSError:
                fs = state(path, keep_limit=keep_limit)
            else:
                hit = entries.get(path)
                if hit is not None:
                    k = hit[0]
                    m = st.st_mtime_ns
                    if (
                        m == k[0]
                        and m < hit[1] - RACY_NS
                        and st.st_ctime_ns == k[1]
                        and st.st_size == k[2]
                        and st.st_ino == k[3]
                        and st.st_mode == k[4]
                    ):
                        files[path] = hit[2]
                        continue
                fs = state(path, st, keep_limit=keep_limit)
            if fs is not None:
                files[path] = fs

    def _listing(self, d, pending):  # noqa: C901
        """The cached listing of ``d`` while still valid, else a fresh one whose new names go to ``pending``."""
        try:
            st = os.lstat(d)
        except OSError:
            self._dirs.pop(d, None)
            return None
        if not stat.S_ISDIR(st.st_mode):
            self._dirs.pop(d, None)
            return None
        key = _dir_key(st)
        cached = self._dirs.get(d)
        if cached is not None and cached.frozen:
            return cached  # an untracked directory is never listed again: only what it held is tracked
        if cached is not None and cached.key == key and st.st_mtime_ns < cached.listed_at - RACY_NS:
            return cached
        intake = self._intake
        if intake is not None and d not in intake.origin:
            intake.before.setdefault(d, cached)  # a known directory: what it held, should it be untracked
        room = intake.room(d) if intake is not None else float("inf")
        listed_at = now_ns()
        files = []
        dirs = []
        ignored = set()
        new = []
        known_files = set(cached.files) if cached else set()
        known_dirs = set(cached.dirs) if cached else set()
        known_ignored = cached.ignored if cached else frozenset()
        try:
            it = os.scandir(d)
        except OSError:
            return None
        try:
            with it:  # read as it comes: a directory of a million new names is not read to its end
                for e in it:
                    name = e.name
                    if name == ".git":
                        continue
                    try:
                        is_dir = e.is_dir(follow_symlinks=False)
                        is_file = e.is_file(follow_symlinks=False) or e.is_symlink()
                    except OSError:
                        continue
                    if not (is_dir or is_file):
                        ignored.add(name)  # FIFOs, sockets, devices: never opened
                        continue
                    if name in known_ignored:
                        ignored.add(name)
                    elif is_dir and name in known_dirs:
                        dirs.append(name)
                    elif is_file and name in known_files:
                        files.append(name)
                    else:
                        new.append(name + "/" if is_dir else name)
                        if len(new) > room or (not len(new) & 4095 and intake is not None and intake.late()):
                            break
        except OSError:  # gone while it was read
            return None
        if intake is not None and not intake.charge(d, len(new)):
            if d in intake.origin:
                return None  # a new directory, untracked with everything under it
            frozen = self._frozen(d, cached, key)
            self._dirs[d] = frozen
            return frozen
        if new:
            pending.append((d, new))
        entry = _make_dir(d, key, listed_at, files, dirs, ignored)
        self._dirs[d] = entry
        return entry

    def _frozen(self, d, before, key=(0, 0, 0)):
        """The listing of ``d`` once untracked: what it held before, or nothing if it is new."""
        if before is None:
            return _make_dir(d, key, 0, (), (), (), frozen=True)
        return before._replace(frozen=True)

    def _take_in(self, pending, taken, keep_limit, *, watch):
        """Takes in new names level by level within the bounds: one git call a level, files hashed, dirs listed."""
        intake = self._intake
        assert intake is not None
        depth0 = self.root.count(os.sep) if self.root != os.sep else 0
        while pending:
            pending = [(d, names) for d, names in pending if not intake.halted(d)]
            if not pending:
                break
            if intake.late():
                for d, names in pending:
                    intake.charge(d, len(names))  # the time is up: it stops each of them
                break
            new_dirs, new_files = self._classify(pending)
            pending = []
            for nd in new_dirs:
                intake.origin[nd] = intake.origin.get(os.path.dirname(nd), nd)
            self._take_files(taken, new_files, keep_limit)
            for nd in new_dirs:
                if intake.halted(nd) or self._is_excluded(nd):
                    continue
                if nd.count(os.sep) - depth0 > self.bounds.max_depth:
                    intake.stop(
                        intake.key(nd), f"it holds directories more than {self.bounds.max_depth} levels below the root"
                    )
                    continue
                if watch and self.watcher is not None:
                    self.watcher.add(nd)  # before listing it: what is created in it from now on is reported
                # walked, not only listed: a directory removed and made again under a name git knows keeps its
                # listing's names, which are not new to it, and its files would wait for the next scan
                self._walk([nd], taken, pending, keep_limit)

    def _take_files(self, taken, paths, keep_limit):
        intake = self._intake
        assert intake is not None
        state = self.cache.state
        for p in paths:
            d = os.path.dirname(p)
            if intake.halted(d):
                continue
            if intake.late():
                intake.charge(d, 1)  # stops it
                continue
            taken[p] = state(p, keep_limit=keep_limit)

    def _apply_stops(self, taken, touched=None):  # noqa: C901
        """Untracks the directories the intake stopped, dropping what this scan took in under them, and reports each.

        A known directory keeps what it held before."""
        intake = self._intake
        assert intake is not None
        if all(k in intake.applied for k in intake.stopped):
            return
        by_parent = {}
        for k in intake.stopped:
            if k in intake.origin and k not in intake.applied:
                by_parent.setdefault(os.path.dirname(k), []).append(k)
        for parent, ks in by_parent.items():  # side by side, they untrack their parent instead
            if len(ks) > MAX_UNTRACKED_PER_DIR:
                intake.stop(parent, f"more than {MAX_UNTRACKED_PER_DIR} new directories in it were not taken in")
        stops = {k: why for k, why in intake.stopped.items() if k not in intake.applied}
        known = {k for k in stops if k not in intake.origin}
        tops = {k for k in stops if k in intake.origin and os.path.dirname(k) not in known}
        gone = {x for x, top in intake.origin.items() if top in tops or os.path.dirname(top) in known}
        for x in gone:  # listings made in this scan under what is untracked
            self._dirs.pop(x, None)
            if self.watcher is not None:
                self.watcher.discard(x)
        kept = {}
        for d in known:
            frozen = self._frozen(d, intake.before.get(d, self._dirs.get(d)))
            self._dirs[d] = frozen
            kept[d] = frozenset(frozen.files)
        for t in tops:
            self._dirs[t] = self._frozen(t, None)

        def dropped(p):
            # what this scan took in lies in a directory it listed (``gone``, under a new one dropped)
            # or directly in a known one; the known walk's files are what listings held before
            if p in self.extra_paths:
                return False  # named by a command: hashed as ignored files are
            d = os.path.dirname(p)
            return d in gone or (d in kept and os.path.basename(p) not in kept[d])

        for p in [p for p in taken if dropped(p)]:
            del taken[p]
            if touched is not None:
                touched.discard(p)
        self._ignore_files = {p for p in self._ignore_files if not dropped(p)}
        intake.applied.update(stops)
        now = time.time()
        for k in sorted(stops):
            if k in known or k in tops:
                u = Untracked(k, stops[k], now, len(kept.get(k, ())) + len(self._dirs[k].dirs))
                self.untracked[k] = u
                if self.on_untracked is not None:
                    self.on_untracked(u)

    def _mark_untracked(self, out, old=None):
        """Gives each untracked directory's snapshot entry a digest new at this scan: it counts as changed every scan.

        So does each directory inside one that a command named. An untracked directory that is gone is forgotten, its
        entry removed, and its path tracked again."""
        digest = f"{UNTRACKED}{self._nonce}:{self._serial + 1}"
        marked = set()
        for path in list(self.untracked):
            entry = self._dirs.get(path)
            parent = self._dirs.get(os.path.dirname(path))
            alive = (
                entry is not None
                and entry.frozen
                and (path == self.root or (parent is not None and os.path.basename(path) in parent.dirs))
            )
            if alive:
                marked.add(untracked_entry(path))
                out[untracked_entry(path)] = FileState(digest, 0, None)
            else:
                del self.untracked[path]
                if entry is not None and entry.frozen:
                    del self._dirs[path]
        if self.untracked and self.extra_paths:
            inside = tuple(untracked_entry(u) for u in self.untracked)
            for p in self.extra_paths:
                if p.startswith(inside) and os.path.isdir(p):
                    marked.add(untracked_entry(p))
                    out[untracked_entry(p)] = FileState(digest, 0, None)
        if old is not None:
            for m in self._marked - marked:
                if m in old:
                    out[m] = None
        self._marked = marked

    def _classify(self, pending):
        """Sorts new entries into included and ignored; returns the new included dirs and files."""
        rel = []
        for d, names in pending:
            for n in names:
                r = os.path.relpath(os.path.join(d, n.rstrip("/")), self.root)
                rel.append((d, n, r + "/" if n.endswith("/") else r))
        ignored = self._ignored([r for _, _, r in rel])
        new_dirs = []
        new_files = []
        by_dir = {}
        for d, n, r in rel:
            files, dirs, ign = by_dir.setdefault(d, ([], [], set()))
            name = n.rstrip("/")
            if r in ignored or r.rstrip("/") in ignored:
                ign.add(name)
            elif n.endswith("/"):
                dirs.append(name)
                new_dirs.append(os.path.join(d, name))
            else:
                files.append(name)
                new_files.append(os.path.join(d, name))
                if name == ".gitignore":
                    self._ignore_files.add(os.path.join(d, name))
        for d, (files, dirs, ign) in by_dir.items():
            old = self._dirs.get(d)
            if old is not None:
                self._dirs[d] = _make_dir(
                    d,
                    old.key,
                    old.listed_at,
                    old.files + tuple(files),
                    old.dirs + tuple(dirs),
                    old.ignored | ign,
                    old.frozen,
                )
        return new_dirs, new_files

    def _ignored(self, rel_paths):
        if not rel_paths:
            return set()
        if not self.is_git:
            return {r for r in rel_paths if default_ignored(r)}
        self.git_calls += 1
        return check_ignored(self.root, rel_paths)

    # -- git listing ------------------------------------------------------------------------------

    def _git_state_key(self):
        """Stat data of what git's listing depends on: the index, the exclude file and every ignore file known."""
        if self._git_watched is None:
            self._git_watched = watched_files(self.root, self.git_top) if self.git_top else []
        return state_key(self._git_watched + sorted(self._ignore_files))

    def _refresh_listing(self):  # noqa: C901
        """Rebuilds directory listings from git when the index or an ignore file changed."""
        if not self.is_git:
            if not self._dirs:
                self._dirs = {}
            return
        key = self._git_state_key()
        if key == self._git_key and self._dirs:
            return
        # untracked directories keep their listings, and everything under them theirs: git is told to
        # leave them out (it does not even read them)
        if self.root in self.untracked:
            self._git_key = key
            return
        frozen = tuple(self.untracked)
        under = tuple(u + os.sep for u in frozen)
        keep = {d: e for d, e in self._dirs.items() if d in self.untracked or d.startswith(under)} if frozen else {}
        self.git_calls += 1
        out = list_included(self.root, [os.path.relpath(u, self.root) for u in frozen])
        if out is None:  # git failed: fall back to walking with the built-in ignore list
            self.git_top = None
            self._dirs = keep
            return
        self._dirs = {}
        self._ignore_files = {p for p in self._ignore_files if p.startswith(under)} if frozen else set()
        depth0 = self.root.count(os.sep) if self.root != os.sep else 0
        deep = set()
        self._tracked_ignored = self._list_tracked_ignored()
        self._tracked_raw = list_tracked(self.root) if self._tracked_ignored is not None else None
        tree = {self.root: (set(), set())}
        for raw in out.split(b"\0"):
            if not raw:
                continue
            rel = os.fsdecode(raw)
            parts = rel.split("/")
            d = self.root
            for part in parts[:-1]:
                files, dirs = tree.setdefault(d, (set(), set()))
                dirs.add(part)
                d = d + os.sep + part if d != os.sep else os.sep + part
                if d.count(os.sep) - depth0 > self.bounds.max_depth:
                    deep.add(d)  # listed no further: untracked below
                    break
            else:
                tree.setdefault(d, (set(), set()))[0].add(parts[-1])
                if parts[-1] == ".gitignore":
                    self._ignore_files.add(os.path.join(self.root, rel))
        # Every other entry of a listed directory is ignored, or an empty directory. Directories
        # with no included file are recorded as ignored only if git says so, so that a file created
        # later in an empty directory is still found.
        now = now_ns()
        empty_dirs = []
        for d, (files, dirs) in tree.items():
            try:
                st = os.lstat(d)
                names = os.listdir(d)
            except OSError:
                continue
            others = [n for n in names if n not in files and n not in dirs and n != ".git"]
            self._dirs[d] = _make_dir(d, _dir_key(st), now, sorted(files), sorted(dirs), others)
            empty_dirs += [
                os.path.join(d, n)
                for n in others
                if os.path.isdir(os.path.join(d, n)) and not os.path.islink(os.path.join(d, n))
            ]
        if empty_dirs:
            rels = [os.path.relpath(p, self.root) + "/" for p in empty_dirs]
            ignored = self._ignored(rels)
            for p, r in zip(empty_dirs, rels):
                if r in ignored or r.rstrip("/") in ignored:
                    continue
                d, name = os.path.split(p)
                old = self._dirs[d]
                self._dirs[d] = _make_dir(
                    d, old.key, old.listed_at, old.files, old.dirs + (name,), old.ignored - {name}
                )
        self._dirs.update(keep)
        reason = f"it holds directories more than {self.bounds.max_depth} levels below the root"
        for d in sorted(deep - set(self._dirs)):
            self._dirs[d] = self._frozen(d, None)
            self.untracked[d] = u = Untracked(d, reason, time.time())
            if self.on_untracked is not None:
                self.on_untracked(u)
        self._git_key = self._git_state_key()
