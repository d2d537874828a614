"""File operations of the patch envelope that coding agents send to an ``apply_patch`` tool.

The hunks are the tool's business.
"""

from __future__ import annotations

import os
from typing import NamedTuple

BEGIN = "*** Begin Patch"
_OPS = {"*** Add File: ": "add", "*** Update File: ": "update", "*** Delete File: ": "delete"}
_MOVE = "*** Move to: "


class FileOp(NamedTuple):
    """One file operation: add, update or delete ``path``; ``move_to`` renames an update's file."""

    kind: str
    path: str
    move_to: str | None = None


def file_ops(text: str) -> list[FileOp] | None:
    """The file operations of a patch, or None if ``text`` is no patch envelope."""
    lines = text.strip().splitlines()
    # `apply_patch <<'EOF'` through a shell, or the tool's own input
    start = next((i for i, line in enumerate(lines) if line.strip() == BEGIN), None)
    if start is None:
        return None
    ops: list[FileOp] = []
    for line in lines[start + 1 :]:
        if line.startswith(_MOVE) and ops and ops[-1].kind == "update":
            ops[-1] = ops[-1]._replace(move_to=line[len(_MOVE) :].strip())
            continue
        for prefix, kind in _OPS.items():
            if line.startswith(prefix):
                path = line[len(prefix) :].strip()
                if path:
                    ops.append(FileOp(kind, path))
                break
    return ops


def written_paths(ops: list[FileOp], cwd: str) -> list[str]:
    """Absolute paths the operations write, a move's source and target both."""
    out: list[str] = []
    for op in ops:
        for p in (op.path, op.move_to):
            if p:
                out.append(os.path.normpath(os.path.join(cwd, p)))
    return list(dict.fromkeys(out))
