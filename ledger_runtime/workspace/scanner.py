"""Workspace snapshots on this machine: the portable scanner with inotify and xxh3-128, ``delta``, and the settings.

``scanning/engine.py`` says how a scan works and what bounds it. ``WorkspaceScanner.scan()`` returns a ``Snapshot`` of
every file under the root that git does not ignore, tracked or not, plus the extra paths commands named that the caller
watches. ``delta(before, after)`` lists the changed paths, whoever changed them. The same scanner runs in a container as
the helper, with its own hash and no watcher.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ledger_runtime.section import BOOLEAN, Section, integer, number, setting
from ledger_runtime.workspace.hashing import XXH3, FileState, HashCache, digest_bytes
from ledger_runtime.workspace.scanning import engine
from ledger_runtime.workspace.scanning.bounds import (  # noqa: F401  (the names the rest of the core uses)
    MAX_UNTRACKED_PER_DIR,
    UNTRACKED,
    ScanBounds,
    Untracked,
    relative,
    untracked_entry,
)
from ledger_runtime.workspace.scanning.engine import Change, Scan
from ledger_runtime.workspace.scanning.filestate import Digests
from ledger_runtime.workspace.scanning.gitview import DEFAULT_IGNORES, git_toplevel  # noqa: F401
from ledger_runtime.workspace.watcher import Watcher


@dataclass(frozen=True)
class ScanSettings(Section):
    """The ``[ledger.scanning]`` settings: when the workspace is scanned, what a scan hashes and keeps, its bounds."""

    name = "scanning"
    flat = {
        "rescan_before_command": "rescan_before_command",
        "scan_budget_s": "budget_s",
        "scan_max_new_entries": "max_new_entries",
        "scan_max_depth": "max_depth",
        "max_hash_bytes": "max_hash_bytes",
        "max_content_bytes": "max_content_bytes",
    }

    rescan_before_command: bool = setting(True, BOOLEAN)
    """Scan the workspace before each command too, so changes made between commands (by the user
    or a background process) are recorded as such and not blamed on the next command."""
    budget_s: float = setting(3.0, number(above=0))
    """Seconds one scan spends at most taking in what is new (listing, classifying, hashing new
    entries); past it, what it was taking in is untracked: its contents are unknown from then on."""
    max_new_entries: int = setting(1000, integer(1))
    """New entries (files and directories) one scan takes in under one new directory, or directly in
    a known one (twice this in all); past it, that directory is untracked: a summary and a fault are
    recorded, and its contents are unknown from then on (docs/settings.md, "Bounds of a scan")."""
    max_depth: int = setting(64, integer(1))
    """Directory levels below the root that are listed; a directory deeper than that is untracked."""
    max_hash_bytes: int = setting(64 * 1024 * 1024, integer(1))
    """Files larger than this are tracked by their stat data instead of their content."""
    max_content_bytes: int = setting(2 * 1024 * 1024, integer(0))
    """Changed text files up to this size are stored in the ledger, so diffs can be counted."""

    @property
    def bounds(self) -> ScanBounds:
        return ScanBounds(self.budget_s, self.max_new_entries, self.max_depth)


class UntrackedTree(Exception):
    """The fault a scan reports when it stops tracking a directory; never raised."""


@dataclass
class Snapshot:
    """Files by absolute path, summed up by ``digest``; an incremental scan's has its ``changes`` since ``base``."""

    files: Mapping[str, FileState]  # a FileMap from a scanner; tests and helpers give plain dicts
    root: str
    taken_at: float = field(default_factory=time.time)
    serial: int = 0
    base: int | None = None
    changes: list[Change] | None = None
    untracked: tuple[str, ...] = ()  # directories whose contents are unknown (see ``untracked_entry``)

    @property
    def digest(self) -> str:
        parts = "\0".join(f"{p}\0{fs.digest}" for p, fs in sorted(self.files.items()))
        return digest_bytes(os.fsencode(parts) if parts else b"")


def delta(before: Snapshot, after: Snapshot) -> list[Change]:
    """Every path added, removed or changed between two snapshots, sorted by path."""
    if after.changes is not None and after.base is not None and after.base == before.serial and before.serial:
        return list(after.changes)
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


class WorkspaceScanner(engine.WorkspaceScanner):
    """The scanner on this machine: inotify's events where there are any, xxh3-128 digests, ``Snapshot``s."""

    def __init__(
        self,
        root: str,
        *,
        max_hash_bytes: int = 64 * 1024 * 1024,
        cache: HashCache | None = None,
        exclude: Iterable[str] = (),
        watch_events: bool = True,
        cross_check_every: int = 200,
        bounds: ScanBounds | None = None,
        on_untracked=None,
        digests: Digests = XXH3,
    ):
        super().__init__(
            root,
            cache or HashCache(max_hash_bytes, digests),
            exclude=exclude,
            watcher=Watcher.open() if watch_events else None,
            cross_check_every=cross_check_every,
            bounds=bounds,
            on_untracked=on_untracked,
        )

    def snapshot(self, scan: Scan) -> Snapshot:
        return Snapshot(
            scan.files, scan.root, serial=scan.serial, base=scan.base, changes=scan.changes, untracked=scan.untracked
        )
