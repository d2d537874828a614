"""Where the workspace lives: the ``Workspace`` the runtime talks to, and ``LocalWorkspace``, the one on this machine.

A workspace snapshots the files, signs read keys, tells a file's state and gives contents at the baseline; adapters
provide others, such as a container's helper. ``LocalWorkspace`` reports each directory the scanner stops tracking as an
``UntrackedTree`` fault, never from a background scan but only from a scan it runs itself (with the watcher) or when the
changes are recorded (``kept``).
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Protocol

from ledger_runtime.records import Baseline
from ledger_runtime.workspace.baseline import HeadContents, take_baseline
from ledger_runtime.workspace.hashing import XXH3, Digests, FileState
from ledger_runtime.workspace.scanner import ScanBounds, Snapshot, Untracked, UntrackedTree, WorkspaceScanner
from ledger_runtime.workspace.scanning.filestate import PSEUDO_TREES, read_regular
from ledger_runtime.workspace.signatures import Probe

if TYPE_CHECKING:
    from ledger_runtime.analysis.commands import Analysis


class Workspace(Protocol):
    """What the runtime needs from a workspace."""

    root: str
    rescan_before_command: bool  # False where nothing but the agent's own commands can change files
    scan_is_cheap: bool  # a scan costs what changed (events), not the size of the tree

    def scan(self, *, keep_limit: int = 0) -> Snapshot: ...

    def kept(self) -> dict[str, bytes]:
        """Contents of the text files, up to ``keep_limit`` bytes, that the last scan had to read."""

    def sign_many(self, keys: Iterable[str], *, exact: bool = True) -> dict[str, str]:
        """Signatures now; without ``exact``, PENDING for keys that need a round trip, then signed after the command."""

    def digest(self, data: bytes) -> str:
        """The content hash this workspace gives a file with these bytes."""

    def file_state(self, path: str) -> FileState | None: ...

    def content(self, path: str, limit: int) -> bytes | None:
        """A regular file's bytes now, links followed, if at most ``limit``; else None.

        None too for a missing or special file, or one under /proc, /sys or /dev."""

    def symlink(self, path: str) -> tuple[str, str | None] | None:
        """Optional: for a symbolic link, its own state digest as snapshots record it and its target (None: unknown)."""

    def watch(self, paths: Iterable[str]) -> Mapping[str, FileState | None] | None:
        """Also tracks these paths; returns each one's state now, where the workspace can tell without a round trip.

        None where it cannot: the first scan that sees them then gives their state before any change."""

    def watched(self) -> int: ...

    def changed_since(self, paths: Iterable[str]) -> list[str]:
        """Optional: those of ``paths`` that the next scan would record otherwise than the last (scanning/engine.py)."""

    def prepare(self, analysis: Analysis) -> None:
        """Optional: the command about to run, as analysed, for a workspace whose signing travels with the command."""

    def baseline(self, snapshot: Snapshot, task: str) -> Baseline: ...

    def baseline_content(self, path: str, commit: str | None) -> bytes | None: ...

    def close(self) -> None: ...


class LocalWorkspace:
    """A workspace on this machine."""

    rescan_before_command = True

    def __init__(
        self,
        root: str,
        *,
        max_hash_bytes: int = 64 * 1024 * 1024,
        exclude: Iterable[str] = (),
        watch_events: bool = True,
        bounds: ScanBounds | None = None,
        report: Callable[[str, BaseException], None] | None = None,
        digests: Digests = XXH3,
    ):
        self.report = report
        self._unreported: list[Untracked] = []
        self.scanner = WorkspaceScanner(
            root,
            max_hash_bytes=max_hash_bytes,
            exclude=exclude,
            watch_events=watch_events,
            bounds=bounds,
            on_untracked=self._untracked,
            digests=digests,
        )
        self.root = self.scanner.root
        self.probe = Probe(self.scanner.cache, self.scanner.root)
        self._head: HeadContents | None = None

    def _untracked(self, u: Untracked) -> None:
        self._unreported.append(u)

    def _report_untracked(self) -> None:
        while self._unreported:
            u = self._unreported.pop(0)
            if self.report is not None:
                self.report("scanning the workspace", UntrackedTree(u.summary(self.scanner.root)))

    @property
    def scan_is_cheap(self) -> bool:
        return self.scanner.watcher is not None

    def scan(self, *, keep_limit: int = 0) -> Snapshot:
        foreground = self.scan_is_cheap  # the runtime runs only a walk in the background
        snap = self.scanner.scan(keep_limit=keep_limit)
        if foreground:
            self._report_untracked()
        return snap

    def rehash(self, paths: Iterable[str]) -> None:
        self.scanner.rehash(paths)

    def kept(self) -> dict[str, bytes]:
        self._report_untracked()  # the changes are being recorded, on the runtime's own thread
        return self.scanner.cache.kept

    def sign_many(self, keys: Iterable[str], *, exact: bool = True) -> dict[str, str]:
        return self.probe.sign_many(keys)

    def digest(self, data: bytes) -> str:
        return self.scanner.cache.digests.content(data)

    def file_state(self, path: str) -> FileState | None:
        return self.probe.file_state(path)

    def content(self, path: str, limit: int) -> bytes | None:
        data = read_regular(path, limit)
        if data is not None:
            # a write the stat data did not show (a second write to a dirty mmapped page): the cache
            # must not keep vouching for the old content, so the next scan hashes the file again
            real = self.probe.resolved(path)  # as the scans name it (under a root reached through a link too)
            cached = self.probe.cache.entries.get(real)
            if cached is not None and cached[2].digest != self.digest(data):
                self.probe.cache.forget(real)
                self.scanner.recheck(real)  # inotify raised no event for it either
                self.scanner.recheck(os.path.abspath(path))
        return data

    def symlink(self, path: str) -> tuple[str, str | None] | None:
        """For a symbolic link, its own state digest as a scan records it and the file it resolves to; else None."""
        try:
            if not stat.S_ISLNK(os.lstat(path).st_mode):
                return None
        except OSError:
            return None
        fs = self.scanner.cache.state(path)
        return (fs.digest, self.probe.resolved(path)) if fs is not None else None

    def link_target(self, path: str) -> str | None:
        """The file ``path`` resolves to where it is a symbolic link, named as the scans name the tree's files (under
        the root as given, where the root is reached through a link too); None for any other path."""
        return self.probe.resolved(path) if os.path.islink(path) else None

    def watch(self, paths: Iterable[str]) -> dict[str, FileState | None]:
        # never a file of /proc, /sys or /dev, however it is reached (a link into /proc): hashing
        # /proc/self/pagemap reads for minutes, and no such file is the agent's work
        return self.scanner.watch(p for p in paths if not (os.path.realpath(p) + "/").startswith(PSEUDO_TREES))

    def watched(self) -> int:
        return len(self.scanner.extra_paths)

    def watch_reads(self, paths: Iterable[str]) -> None:
        """Watches each file of the tree a command is about to read under any name it may get (``watch_reads``): a
        read through a link reads the file it resolves to, which is watched too (a watch of the link's own is not)."""
        self.scanner.watch_reads(q for p in paths for q in (p, self.link_target(p)) if q)

    def changed_since(self, paths: Iterable[str]) -> list[str]:
        return self.scanner.changed_since(paths)

    def prepare(self, analysis: Analysis) -> None:
        pass  # a local scan needs nothing of the command

    def baseline(self, snapshot: Snapshot, task: str) -> Baseline:
        return take_baseline(self.root, snapshot, task)

    def baseline_content(self, path: str, commit: str | None) -> bytes | None:
        if commit is None:
            return None
        if self._head is None:
            self._head = HeadContents(self.root, commit)
        return self._head.get(path)

    def close(self) -> None:
        self.scanner.close()
        if self._head is not None:
            self._head.close()
