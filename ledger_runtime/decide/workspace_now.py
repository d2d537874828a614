"""What the files are now, as a decision reads them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ledger_runtime.workspace.hashing import FileState


@dataclass(frozen=True)
class WorkspaceNow:
    """The signatures of read keys now, and the state of the files the policies look at."""

    sigs: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, FileState | None] = field(default_factory=dict)
