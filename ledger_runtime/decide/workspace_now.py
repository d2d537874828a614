"""What the files are now, as a decision reads them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ledger_runtime.workspace.hashing import FileState


@dataclass(frozen=True)
class WorkspaceNow:
    """Signatures of read keys now (``sigs``), and the state of files the policies look at."""

    sigs: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, FileState | None] = field(default_factory=dict)
