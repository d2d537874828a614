"""The scan stage: the workspace's snapshots around the commands.

The scan before a command, taken while the model thinks, finds changes made between commands; the scan after it, the
command's. Files a command names that no scan covers are watched from then on, from their state then (``first_seen``):
otherwise reading ``/etc/os-release`` or a git-ignored ``app.log`` would be booked as creating it. A file a command
names that is new to the last scan but that a scan takes in (in the tree, not ignored) was made since, between commands:
the workspace is scanned before the command, so its creation is booked as the scan at the model's turn books it. So is
one the last scan holds whose state differs now, where no scan would otherwise be taken before the command sees it (a
walk: none around a read, and the one at the model's turn may have passed it before it changed)."""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Mapping

from ledger_runtime.analysis.commands import ANY_FILE, Analysis
from ledger_runtime.workspace.hashing import FileState
from ledger_runtime.workspace.scanner import Change, Snapshot, delta

MAX_WATCHED = 4096
UNSEEN = object()  # a newly watched path whose state the workspace could not tell: its first sighting is its baseline


def first_seen(changes: list[Change], snap: Snapshot, baselines: Mapping[str, Any]) -> list[Change]:
    """``changes`` with each newly watched path taken against its state when watching began, not its absence.

    ``baselines`` maps path to that state: None for absent, ``UNSEEN`` for unknown."""
    if not baselines:
        return changes
    out = [c for c in changes if c.path not in baselines]
    for path, was in baselines.items():
        if was is UNSEEN:
            continue
        now = snap.files.get(path)
        if (was is None) != (now is None) or (was is not None and now is not None and was.digest != now.digest):
            out.append(Change(path, was, now))
    out.sort(key=lambda c: c.path)
    return out


class Scans:
    """The snapshots of one run's workspace; ``between`` records changes between commands, ``fault`` a failed scan."""

    def __init__(
        self,
        workspace: Any,
        settings: Any,
        first: Snapshot,
        between: Callable[[list[Change], int], None],
        fault: Callable[[str, BaseException], None],
    ):
        self.workspace = workspace
        self.settings = settings  # the scanning settings (config.scanning)
        self.last: Snapshot | None = first
        self.between = between
        self.fault = fault
        self._pending: tuple[threading.Thread, list[Any]] | None = None  # a scan running while the model thinks
        self._ready: Snapshot | None = None  # that scan's, taken in before the view was read (``catch_up``)
        self._hand_over = True  # whether the plan takes that scan as the one before its command (``prescan``)
        self._baselines: dict[str, FileState | None | object] = {}  # watched since the last snapshot (first_seen)
        self._watched: set[str] = set()  # every path watched so far

    def scan(self) -> Snapshot:
        return self.workspace.scan(keep_limit=self.settings.max_content_bytes)

    def scans_before(self) -> bool:
        """Whether the workspace is scanned before each command; if not, the scan after the next finds such changes."""
        return self.settings.rescan_before_command and self.workspace.rescan_before_command

    def prescan(self, step: int, *, before_command: bool = True) -> None:
        """Takes the scan before the next command now, while the model thinks, so its changes count as between commands.

        A walking scan runs in the background and the plan takes its result (``settle``); a watcher's runs here, and the
        plan still reads the events queued after it. ``before_command`` False: the scan only takes in what changed by
        the model's turn (a hook agent's prompt, which the model may think over long while files still change): the
        plan does not take it for its own, so a writer is scanned before it runs, as with a watcher."""
        if self._pending is not None:
            self._hand_over = self._hand_over and before_command
            return
        if not self.scans_before():
            return
        self._hand_over = before_command
        if self.workspace.scan_is_cheap:
            try:
                self.take_between(self.scan(), step)
            except Exception as e:
                self.fault("scanning before the model's turn", e)
            return
        box: list[Any] = []

        def work() -> None:
            try:
                box.append(self.scan())
            except BaseException as e:  # reported when the result is taken
                box.append(e)

        t = threading.Thread(target=work, name="ledger-prescan", daemon=True)
        t.start()
        self._pending = (t, box)

    def settle(self, step: int, *, discard: bool = False) -> Snapshot | None:
        """Waits for a background scan, records its changes as between commands, and returns its snapshot, or None.

        ``discard``: a command is under way, so the result goes and the scan after the command finds it all."""
        if self._pending is None:
            snap, self._ready = self._ready, None  # taken in already: its changes are booked
            return None if discard else snap
        self._ready = None
        t, box = self._pending
        self._pending = None
        t.join()
        if discard:
            if box and not isinstance(box[0], BaseException) and self.last is not None:
                # what it saw changed is read again by the next scan (its content kept there)
                rehash = getattr(self.workspace, "rehash", None)
                if rehash is not None:
                    rehash([c.path for c in delta(self.last, box[0])])
            return None
        if not box or isinstance(box[0], BaseException):
            self.fault("scanning in the background", box[0] if box else RuntimeError("no result"))
            return None
        snap = box[0]
        self.take_between(snap, step)
        return snap if self._hand_over else None

    def catch_up(self, step: int) -> None:
        """Takes the background scan's result in now, before the view is read, so that the view tells what it found
        (an edit made since the last command); the plan of command ``step`` takes the same snapshot as its prescan."""
        if self._pending is not None:
            self._ready = self.settle(step)

    def take_between(self, snap: Snapshot, step: int) -> None:
        """Makes ``snap`` the last snapshot; what changed since the previous one was made between commands."""
        if self.last is not None:
            external = self._delta(self.last, snap)
            if external:
                self.between(external, step)
        self.last = snap

    def before(self, readonly: bool, prescanned: bool, step: int) -> Snapshot | None:
        """The snapshot before command ``step``, scanning only if needed: not for a reader, nor a prescanned command."""
        if (self.scans_before() and not readonly and not prescanned) or self.last is None:
            self.take_between(self.scan(), step)
        return self.last

    def after(self, before: Snapshot | None, *, skip: bool) -> list[Change]:
        """What a command changed, scanning again unless a reader ran (``skip``) and a snapshot exists to compare."""
        if skip and self.last is not None:
            return []
        after = self.scan()
        # Against the last recorded snapshot, which is the plan's ``before`` unless another plan was
        # recorded in between (an agent running commands in parallel): no change counts twice.
        last = self.last if self.last is not None else before
        changes = self._delta(last, after) if last is not None else []
        self.last = after
        return changes

    def _delta(self, last: Snapshot, snap: Snapshot) -> list[Change]:
        """What changed from ``last`` to ``snap``, newly watched paths against their baselines."""
        baselines, self._baselines = self._baselines, {}
        return first_seen(delta(last, snap), snap, baselines)

    def watch(self, analysis: Analysis, step: int) -> None:
        """Watches the files command ``step`` names that no scan covers, from their state now (``first_seen``).

        A file it names that the next scan would record otherwise than the last did was changed or made since (between
        commands): the workspace is scanned first, so that the change is recorded at this step, as the scan at the
        model's turn would have recorded it, and a new file is not taken as first seen."""
        named = self._named(analysis)
        link_target = getattr(self.workspace, "link_target", None)
        if link_target is not None:
            # this machine's files: the file a link the command names resolves to is watched too, where no scan covers
            # it (outside the tree, ignored), or a read through the link would hold while its target changed
            named = list(dict.fromkeys(q for p in named for q in (p, link_target(p)) if q))
        if self._changed_since(named):
            self.take_between(self.scan(), step)
        watch_reads = getattr(self.workspace, "watch_reads", None)
        if watch_reads is not None:  # after that scan: a file it took in (made since) is one to watch
            watch_reads(k[2:] for k in analysis.read_keys if k[:2] == "f:")
        if self.workspace.watched() >= MAX_WATCHED:
            return
        last = self.last.files if self.last else {}
        new = [p for p in named if p not in last and p not in self._watched]
        if not new:
            return
        self._watched.update(new)
        states = self.workspace.watch(new)
        written = set(analysis.writes)
        for p in new:
            if states is not None:
                self._baselines[p] = states.get(os.path.normpath(p), UNSEEN)
            elif p not in written:
                # the workspace cannot tell its state now (a container's, until the command's report):
                # a file the command only reads is as it was when first seen; one it writes is
                # recorded as the scan finds it (a creation, where it is new to the scan)
                self._baselines[p] = UNSEEN

    def _named(self, analysis: Analysis) -> list[str]:
        """The paths the command reads or writes, but under /dev and /proc."""
        # a listing or a search too: a directory the scan no longer covers (untracked) then counts as changed
        paths = [k[2:] for k in analysis.read_keys if k[:2] in ("f:", "d:", "r:")]
        paths += [w for w in analysis.writes if w != ANY_FILE]
        return [p for p in dict.fromkeys(paths) if not p.startswith(("/dev/", "/proc/"))]

    def _asked(self, named: list[str]) -> list[str]:
        """Those of ``named`` whose change since the last scan would be booked late or to the command, unless scanned
        for now: where a scan is a walk, every one and the file each resolves to (none is taken around a read, and the
        one at the model's turn may have passed a file before it changed); with inotify only those the last scan
        lacks (the scan before a writer, or after a reader, reads the events queued for the others)."""
        last = self.last.files if self.last else {}
        if self.workspace.scan_is_cheap:
            return [p for p in named if p not in last and p not in self._watched]
        return list(dict.fromkeys(q for p in named for q in (p, os.path.realpath(p))))

    def _changed_since(self, named: list[str]) -> bool:
        """Whether the next scan records any of the paths ``_asked`` about ``named`` otherwise than the last; False
        where the workspace cannot tell (a container's)."""
        changed_since = getattr(self.workspace, "changed_since", None)
        asked = self._asked(named) if changed_since is not None else []
        return bool(asked) and bool(changed_since(asked))
