"""The Baseline of a run (git HEAD, branch, dirty paths) and file contents at that HEAD.

``take_baseline`` never fails: no repository, an empty one, a detached HEAD or no git at all still give a Baseline.
``HeadContents`` reads tracked files at the baseline commit through one long-lived ``git cat-file --batch``, so a file's
first edit can still be counted in lines.
"""

from __future__ import annotations

import os
import subprocess
import threading

from ledger_runtime.records import Baseline
from ledger_runtime.workspace.scanner import Snapshot
from ledger_runtime.workspace.scanning.gitview import GIT


def take_baseline(root: str, snapshot: Snapshot, task: str = "") -> Baseline:
    head = branch = None
    dirty: tuple[str, ...] = ()
    is_git = _git(root, "rev-parse", "--is-inside-work-tree") == "true"
    if is_git:
        head = _git(root, "rev-parse", "--verify", "-q", "HEAD") or None  # None: no commit yet
        branch = _git(root, "symbolic-ref", "-q", "--short", "HEAD") or None  # None: a detached HEAD
        status = _git(root, "status", "--porcelain", "-z", "--untracked-files=no", strip=False) or ""
        dirty = tuple(sorted(p[3:] for p in status.split("\0") if len(p) > 3))
    return Baseline(
        root=os.path.abspath(root),
        is_git=is_git,
        head_commit=head,
        branch=branch,
        dirty_paths=dirty,
        file_count=len(snapshot.files),
        snapshot_digest=snapshot.digest,
        task=task,
    )


def _git(root: str, *args: str, strip: bool = True) -> str | None:
    """What ``git -C root ARGS`` prints; None where it fails."""
    try:
        p = subprocess.run([*GIT, "-C", root, *args], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if p.returncode != 0:
        return None
    out = os.fsdecode(p.stdout)
    return out.strip() if strip else out


class HeadContents:
    """Bytes of files at a commit, from ``git cat-file --batch`` started on first use."""

    def __init__(self, root: str, commit: str | None):
        self.root = root
        self.commit = commit
        self._proc: subprocess.Popen | None = None
        self._top: str | None = None
        self._lock = threading.Lock()
        self._broken = commit is None

    def get(self, path: str) -> bytes | None:
        if self._broken:
            return None
        with self._lock:
            try:
                return self._get(path)
            except (OSError, ValueError, subprocess.SubprocessError):
                self._broken = True
                self.close()
                return None

    def _get(self, path: str) -> bytes | None:
        if self._proc is None:
            top = subprocess.run(
                [*GIT, "-C", self.root, "rev-parse", "--show-toplevel"], capture_output=True, timeout=30
            )
            if top.returncode != 0:
                self._broken = True
                return None
            self._top = os.fsdecode(top.stdout.strip())
            self._proc = subprocess.Popen(
                [*GIT, "-C", self._top, "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        assert self._top is not None and self._proc.stdin and self._proc.stdout
        rel = os.path.relpath(path, self._top)
        if rel.startswith("..") or "\n" in rel:
            return None
        self._proc.stdin.write(os.fsencode(f"{self.commit}:{rel}") + b"\n")
        self._proc.stdin.flush()
        header = self._proc.stdout.readline()
        if not header or header.endswith(b"missing\n") or header.endswith(b"ambiguous\n"):
            return None
        parts = header.split()
        if len(parts) != 3:
            raise ValueError(f"unexpected cat-file header {header!r}")
        size = int(parts[2])
        data = self._proc.stdout.read(size)
        self._proc.stdout.read(1)  # the newline after the object
        return data if parts[1] == b"blob" else None

    def close(self) -> None:
        if self._proc is not None:
            try:
                self._proc.stdin.close()  # type: ignore[union-attr]
                self._proc.wait(timeout=5)
            except (OSError, subprocess.SubprocessError):
                self._proc.kill()
            self._proc = None
