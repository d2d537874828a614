"""A ``Modification``: a file's change, with its hashes and the lines changed since its last content and the start."""

from __future__ import annotations

from collections import OrderedDict

from ledger_runtime.analysis.commands import ANY_FILE, Analysis
from ledger_runtime.ledger.observe import line_delta
from ledger_runtime.ledger.redact import Redactor
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.ledger.store import LedgerStore
from ledger_runtime.records import Modification
from ledger_runtime.workspace.hashing import FileState
from ledger_runtime.workspace.local import Workspace
from ledger_runtime.workspace.scanner import Change

MASKED_CACHE_BYTES = 32 * 1024 * 1024  # masked contents kept in memory: what the next change is counted against


class Modifications:
    """Makes the ledger's record of each change the workspace saw.

    A content is masked once: stored masked under the file's digest, and a change is counted between masked contents.
    Recent masked contents stay in memory (``MASKED_CACHE_BYTES``), so the content after one change is the content
    before the next without reading it back; an older one is read back from the ledger, not masked again."""

    def __init__(self, store: LedgerStore, state: LedgerState, workspace: Workspace, redactor: Redactor):
        self.store, self.state, self.workspace, self.redactor = store, state, workspace, redactor
        self._masked: OrderedDict[str, bytes] = OrderedDict()
        self._masked_bytes = 0

    def of(self, c: Change, attempt_id: int | None, step: int, analysis: Analysis | None) -> Modification:
        """The record of change ``c``, made by attempt ``attempt_id`` (None: between commands)."""
        after_bytes = self._after(c) if c.after is not None else b""
        before_bytes = self._content(c.path, c.before) if c.before is not None else b""
        earlier = self.state.modifications_of(c.path)
        baseline_hash = earlier[0].before_hash if earlier else (c.before.digest if c.before else None)
        if baseline_hash is None:
            baseline_bytes: bytes | None = b""
        elif c.before is not None and baseline_hash == c.before.digest:
            baseline_bytes = before_bytes
        else:
            baseline_bytes = self._content(c.path, FileState(baseline_hash, 0, None))
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

    def _after(self, c: Change) -> bytes | None:
        """The content after ``c``, masked and stored under its digest; None when the scan did not keep it."""
        digest = c.after.digest
        known = self._recall(digest)
        if known is not None:
            return known
        data = self.workspace.kept().get(c.path)
        if data is None:
            return None
        masked = self.redactor.mask_bytes(data)
        self.store.put_masked_blob(masked, key=digest)
        self._remember(digest, masked)
        return masked

    def _content(self, path: str, fs: FileState) -> bytes | None:
        """A file's masked bytes for a digest: from memory, the ledger's blobs, or git at the baseline commit."""
        data = self._recall(fs.digest)
        if data is not None:
            return data
        commit = self.state.baseline.head_commit if self.state.baseline else None
        head = self.workspace.baseline_content(path, commit)
        if head is not None and self.workspace.digest(head) == fs.digest:
            masked = self.redactor.mask_bytes(head)  # as the blob is stored: what it is compared with is too
            self.store.put_masked_blob(masked, key=fs.digest)
            self._remember(fs.digest, masked)
            return masked
        return None

    def _recall(self, digest: str) -> bytes | None:
        """A masked content by its digest, from memory or the ledger."""
        data = self._masked.get(digest)
        if data is not None:
            self._masked.move_to_end(digest)
            return data
        data = self.store.blob(digest)
        if data is not None:
            self._remember(digest, data)
        return data

    def _remember(self, digest: str, data: bytes) -> None:
        if len(data) > MASKED_CACHE_BYTES // 4:
            return
        self._masked[digest] = data
        self._masked_bytes += len(data)
        while self._masked_bytes > MASKED_CACHE_BYTES:
            _, gone = self._masked.popitem(last=False)
            self._masked_bytes -= len(gone)


def _recognised(path: str, writes: tuple[str, ...]) -> bool:
    """Whether the command's analysis named ``path``, or a directory above it, as written."""
    if ANY_FILE in writes:
        return True
    for w in writes:
        if path == w or path.startswith(w.rstrip("/") + "/"):
            return True
    return False
