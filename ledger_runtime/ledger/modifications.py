"""What a change to a file is in the ledger: a ``Modification`` with its content hashes, the lines it
added and removed since the file's last content, and since the run's start (the baseline)."""

from __future__ import annotations

from ledger_runtime.analysis.commands import ANY_FILE, Analysis
from ledger_runtime.ledger.observe import line_delta
from ledger_runtime.ledger.redact import Redactor
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.ledger.store import LedgerStore
from ledger_runtime.records import Modification
from ledger_runtime.workspace.hashing import FileState
from ledger_runtime.workspace.local import Workspace
from ledger_runtime.workspace.scanner import Change


class Modifications:
    """Makes the ledger's record of each change the workspace saw (the contents come from the
    ledger's blobs, the workspace's last scan, or git at the baseline commit)."""

    def __init__(self, store: LedgerStore, state: LedgerState, workspace: Workspace, redactor: Redactor):
        self.store, self.state, self.workspace, self.redactor = store, state, workspace, redactor

    def of(self, c: Change, attempt_id: int | None, step: int, analysis: Analysis | None) -> Modification:
        """The record of change ``c``, made by attempt ``attempt_id`` (None: between commands)."""
        kept = self.workspace.kept()
        after_bytes = kept.get(c.path) if c.after is not None else b""
        if c.after is not None and after_bytes is not None:
            self.store.put_blob(after_bytes, key=c.after.digest)
        before_bytes = self._content(c.path, c.before) if c.before is not None else b""
        earlier = self.state.modifications_of(c.path)
        baseline_hash = earlier[0].before_hash if earlier else (c.before.digest if c.before else None)
        if baseline_hash is None:
            baseline_bytes: bytes | None = b""
        elif c.before is not None and baseline_hash == c.before.digest:
            baseline_bytes = before_bytes
        else:
            baseline_bytes = self._content(c.path, FileState(baseline_hash, 0, None))
        # the ledger's blobs are masked: counted against the new content masked alike (line by line)
        after_bytes = self.redactor.mask_bytes(after_bytes) if after_bytes else after_bytes
        d = line_delta(before_bytes, after_bytes) if before_bytes is not None and after_bytes is not None else None
        if c.before is not None and baseline_hash == c.before.digest:
            b = d  # the first change since the start: the same two contents
        elif c.after is not None and baseline_hash == c.after.digest:
            b = None if after_bytes is None or b"\0" in after_bytes[:8192] else (0, 0)  # back to the start
        else:
            b = (
                line_delta(baseline_bytes, after_bytes)
                if baseline_bytes is not None and after_bytes is not None
                else None
            )
        recognised = attempt_id is not None and analysis is not None and _recognised(c.path, analysis.writes)
        return Modification(
            path=c.path,
            before_hash=c.before.digest if c.before else None,
            after_hash=c.after.digest if c.after else None,
            lines_added=d[0] if d else None,
            lines_removed=d[1] if d else None,
            step=step,
            attempt=attempt_id,
            recognised=recognised,
            baseline_added=b[0] if b else None,
            baseline_removed=b[1] if b else None,
            baseline_hash=baseline_hash,
        )

    def _content(self, path: str, fs: FileState) -> bytes | None:
        """A file's bytes for a digest: from the ledger's blobs, or from git at the baseline commit."""
        data = self.store.blob(fs.digest)
        if data is not None:
            return data
        commit = self.state.baseline.head_commit if self.state.baseline else None
        head = self.workspace.baseline_content(path, commit)
        if head is not None and self.workspace.digest(head) == fs.digest:
            self.store.put_blob(head, key=fs.digest)
            return self.redactor.mask_bytes(head)  # as the blob is stored: what it is compared with is too
        return None


def _recognised(path: str, writes: tuple[str, ...]) -> bool:
    """Whether the command's analysis named ``path`` (or a directory above it) as written."""
    if ANY_FILE in writes:
        return True
    for w in writes:
        if path == w or path.startswith(w.rstrip("/") + "/"):
            return True
    return False
