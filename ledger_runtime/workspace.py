"""Workspace snapshots: the content hash of every file under a root that git does not ignore.

``WorkspaceScanner.scan()`` returns a ``Snapshot`` (absolute path -> FileState) of every file
under the root that git does not ignore, tracked or not, plus any extra paths the caller watches
(files outside the root, or ignored ones, that commands named). ``delta(before, after)`` turns
two snapshots into the list of changed paths, whoever changed them.

Scans are incremental. Directory listings are cached by the directory's stat data, and git is
asked about ignore rules only for entries it has not classified yet; file contents are cached by
their stat data (hashing.HashCache). When git's index or an ignore file changes, the listing is
rebuilt from git. A root that is not in a git repository gets a small built-in ignore list.
Entries that vanish mid-scan, unreadable directories, symlinks, FIFOs and non-UTF-8 names are
all handled without raising.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import subprocess
import time
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from .hashing import RACY_NS, FileState, HashCache, digest_bytes

DEFAULT_IGNORES = (".git", "__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                   ".tox", ".venv", "venv", "node_modules", ".eggs", "*.egg-info")
GIT_TIMEOUT = 60


class Change(NamedTuple):
    """One path whose state differs between two snapshots (None: absent on that side)."""

    path: str
    before: FileState | None
    after: FileState | None


@dataclass
class Snapshot:
    """Files by absolute path; ``digest`` summarises them all in one hash."""

    files: dict[str, FileState]
    root: str
    taken_at: float = field(default_factory=time.time)

    @property
    def digest(self) -> str:
        parts = "\0".join(f"{p}\0{fs.digest}" for p, fs in sorted(self.files.items()))
        return digest_bytes(os.fsencode(parts) if parts else b"")


def delta(before: Snapshot, after: Snapshot) -> list[Change]:
    """Every path added, removed or changed between two snapshots, sorted by path."""
    out: list[Change] = []
    b, a = before.files, after.files
    for path, fs in a.items():
        old = b.get(path)
        if old is None or old.digest != fs.digest:
            out.append(Change(path, old, fs))
    for path, old in b.items():
        if path not in a:
            out.append(Change(path, old, None))
    out.sort(key=lambda c: c.path)
    return out


class _Dir(NamedTuple):
    key: tuple[int, int, int]  # mtime_ns, ctime_ns, inode of the directory
    listed_at: int
    files: tuple[str, ...]  # included regular files and symlinks (names)
    dirs: tuple[str, ...]  # included subdirectories (names)
    ignored: frozenset[str]  # names git ignores (or that are not files/dirs: FIFOs, sockets)
    file_paths: tuple[str, ...]  # the same as full paths, built once per listing, not per scan
    dir_paths: tuple[str, ...]


def _make_dir(d: str, key: tuple[int, int, int], listed_at: int, files, dirs, ignored) -> _Dir:
    base = d if d != os.sep else ""
    files, dirs = tuple(files), tuple(dirs)
    return _Dir(key, listed_at, files, dirs, frozenset(ignored), tuple(base + os.sep + n for n in files),
                tuple(base + os.sep + n for n in dirs))


def _dir_key(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _run_git(root: str, args: list[str], stdin: bytes | None = None) -> bytes | None:
    try:
        proc = subprocess.run(["git", "-C", root, *args], input=stdin, capture_output=True,
                              timeout=GIT_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode in (0, 1) else None


def git_toplevel(root: str) -> str | None:
    """The top of the git work tree containing ``root``, or None."""
    out = _run_git(root, ["rev-parse", "--show-toplevel"])
    if not out:
        return None
    top = os.fsdecode(out.strip())
    return top or None


class WorkspaceScanner:
    """Snapshots one workspace root incrementally; see the module docstring."""

    def __init__(self, root: str, *, max_hash_bytes: int = 64 * 1024 * 1024,
                 cache: HashCache | None = None, exclude: Iterable[str] = ()):
        self.root = os.path.abspath(root)
        # directories never scanned (the run's own directory when it lies inside the workspace)
        self.excluded = tuple(os.path.abspath(e) for e in exclude)
        self._excluded_under = tuple(e + os.sep for e in self.excluded)
        self.cache = cache or HashCache(max_hash_bytes)
        self.extra_paths: set[str] = set()
        self.git_top = git_toplevel(self.root)
        self._dirs: dict[str, _Dir] = {}
        self._git_key: tuple | None = None
        self._ignore_files: set[str] = set()
        self.git_calls = 0  # for tests and benchmarks

    @property
    def is_git(self) -> bool:
        return self.git_top is not None

    def watch(self, paths: Iterable[str]) -> None:
        """Also track these absolute paths (files outside the root, or ignored inside it)."""
        for p in paths:
            if p and os.path.isabs(p):
                self.extra_paths.add(os.path.normpath(p))

    # -- scanning -------------------------------------------------------------------------------

    def scan(self, *, keep_limit: int = 0) -> Snapshot:
        """A snapshot of the workspace now. ``keep_limit``: see HashCache.state."""
        self.cache.kept = {}
        files: dict[str, FileState] = {}
        self._refresh_listing()
        pending: list[tuple[str, list[str]]] = []  # directories with entries git must classify
        self._walk([self.root], files, pending, keep_limit)
        while pending:  # new entries: classify them with git, then hash and walk the included ones
            new_dirs, new_files = self._classify(pending)
            pending = []
            self._hash_into(files, new_files, keep_limit)
            self._walk(new_dirs, files, pending, keep_limit)
        self._hash_into(files, (p for p in self.extra_paths if p not in files), keep_limit)
        return Snapshot(files, self.root)

    def _walk(self, stack: list[str], files: dict[str, FileState],
              pending: list[tuple[str, list[str]]], keep_limit: int) -> None:
        while stack:
            d = stack.pop()
            if self.excluded and (d in self.excluded or d.startswith(self._excluded_under)):
                continue
            entry = self._listing(d, pending)
            if entry is None:
                continue
            self._hash_into(files, entry.file_paths, keep_limit)
            stack.extend(entry.dir_paths)

    def _hash_into(self, files: dict[str, FileState], paths: Iterable[str], keep_limit: int) -> None:
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
                    if m == k[0] and m < hit[1] - RACY_NS and st.st_ctime_ns == k[1] and st.st_size == k[2] \
                            and st.st_ino == k[3] and st.st_mode == k[4]:
                        files[path] = hit[2]
                        continue
                fs = state(path, st, keep_limit=keep_limit)
            if fs is not None:
                files[path] = fs

    def _listing(self, d: str, pending: list[tuple[str, list[str]]]) -> _Dir | None:
        """The cached listing of ``d`` when still valid, else a fresh one (new names -> pending)."""
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
        if cached is not None and cached.key == key and st.st_mtime_ns < cached.listed_at - RACY_NS:
            return cached
        listed_at = time.time_ns()
        files: list[str] = []
        dirs: list[str] = []
        ignored: set[str] = set()
        new: list[str] = []
        known_files = set(cached.files) if cached else set()
        known_dirs = set(cached.dirs) if cached else set()
        known_ignored = cached.ignored if cached else frozenset()
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError:
            return None
        for e in entries:
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
        if new:
            pending.append((d, new))
        entry = _make_dir(d, key, listed_at, files, dirs, ignored)
        self._dirs[d] = entry
        return entry

    def _classify(self, pending: list[tuple[str, list[str]]]) -> tuple[list[str], list[str]]:
        """Sort new entries into included and ignored; returns the new included dirs and files."""
        rel = []
        for d, names in pending:
            for n in names:
                r = os.path.relpath(os.path.join(d, n.rstrip("/")), self.root)
                rel.append((d, n, r + "/" if n.endswith("/") else r))
        ignored = self._ignored([r for _, _, r in rel])
        new_dirs: list[str] = []
        new_files: list[str] = []
        by_dir: dict[str, tuple[list[str], list[str], set[str]]] = {}
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
                self._dirs[d] = _make_dir(d, old.key, old.listed_at, old.files + tuple(files),
                                          old.dirs + tuple(dirs), old.ignored | ign)
        return new_dirs, new_files

    def _ignored(self, rel_paths: list[str]) -> set[str]:
        if not rel_paths:
            return set()
        if not self.is_git:
            return {r for r in rel_paths if _default_ignored(r)}
        self.git_calls += 1
        out = _run_git(self.root, ["check-ignore", "--no-index", "-z", "--stdin"],
                       stdin=b"\0".join(os.fsencode(r) for r in rel_paths) + b"\0")
        if out is None:
            return set()
        return {os.fsdecode(p) for p in out.split(b"\0") if p}

    # -- git listing ------------------------------------------------------------------------------

    def _git_state_key(self) -> tuple:
        """Stat data of what git's listing depends on: the index and every known ignore file."""
        parts = []
        git_dir = self._git_dir()
        watched = [os.path.join(git_dir, "index"), os.path.join(git_dir, "info", "exclude")] if git_dir else []
        for p in watched + sorted(self._ignore_files):
            try:
                st = os.stat(p)
                parts.append((p, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
            except OSError:
                parts.append((p, None))
        return tuple(parts)

    def _git_dir(self) -> str | None:
        if not self.git_top:
            return None
        g = os.path.join(self.git_top, ".git")
        if os.path.isfile(g):  # worktrees and submodules: "gitdir: <path>"
            try:
                with open(g, encoding="utf-8", errors="surrogateescape") as f:
                    line = f.read().strip()
                if line.startswith("gitdir:"):
                    g = os.path.normpath(os.path.join(self.git_top, line[7:].strip()))
            except OSError:
                return None
        return g

    def _refresh_listing(self) -> None:
        """Rebuild directory listings from git when the index or an ignore file changed."""
        if not self.is_git:
            if not self._dirs:
                self._dirs = {}
            return
        key = self._git_state_key()
        if key == self._git_key and self._dirs:
            return
        self.git_calls += 1
        out = _run_git(self.root, ["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        if out is None:  # git failed: fall back to walking with the built-in ignore list
            self.git_top = None
            self._dirs = {}
            return
        self._dirs = {}
        self._ignore_files = set()
        tree: dict[str, tuple[set[str], set[str]]] = {self.root: (set(), set())}
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
            tree.setdefault(d, (set(), set()))[0].add(parts[-1])
            if parts[-1] == ".gitignore":
                self._ignore_files.add(os.path.join(self.root, rel))
        # Every other entry of a listed directory is ignored, or an empty directory. Directories
        # with no included file are recorded as ignored only if git says so, so that a file created
        # later in an empty directory is still found.
        now = time.time_ns()
        empty_dirs: list[str] = []
        for d, (files, dirs) in tree.items():
            try:
                st = os.lstat(d)
                names = os.listdir(d)
            except OSError:
                continue
            others = [n for n in names if n not in files and n not in dirs and n != ".git"]
            self._dirs[d] = _make_dir(d, _dir_key(st), now, sorted(files), sorted(dirs), others)
            empty_dirs += [os.path.join(d, n) for n in others if os.path.isdir(os.path.join(d, n)) and not os.path.islink(os.path.join(d, n))]
        if empty_dirs:
            rels = [os.path.relpath(p, self.root) + "/" for p in empty_dirs]
            ignored = self._ignored(rels)
            for p, r in zip(empty_dirs, rels):
                if r in ignored or r.rstrip("/") in ignored:
                    continue
                d, name = os.path.split(p)
                old = self._dirs[d]
                self._dirs[d] = _make_dir(d, old.key, old.listed_at, old.files, old.dirs + (name,),
                                          old.ignored - {name})
        self._git_key = self._git_state_key()


def _default_ignored(rel: str) -> bool:
    name = os.path.basename(rel.rstrip("/"))
    return any(fnmatch.fnmatchcase(name, pat) for pat in DEFAULT_IGNORES)


def relative(path: str, root: str) -> str:
    """``path`` relative to ``root`` when inside it, else unchanged."""
    if path == root:
        return "."
    prefix = root.rstrip(os.sep) + os.sep
    return path[len(prefix):] if path.startswith(prefix) else path
