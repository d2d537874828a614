"""What an agent wrote into the run directory, made private and masked when the run ends.

mini-swe-agent saves its trajectory (every message, so every output and any secret in them) after
each step into the file ``ledger-run mini`` names in the run directory; Codex keeps its rollouts and
SQLite state in the run's Codex home. The run directory is 0700; these make the files in it 0600 as
well, and mask the trajectory the way the ledger masks what it stores (redact.py), since it is ours
to name and the agent no longer needs it. Codex's own files are left as they are (``codex resume``
reads them) but owner-only.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from ledger_runtime.ledger.private import FILE_MODE, write_private
from ledger_runtime.ledger.redact import Redactor


def prepare_private(path: Path) -> None:
    """An empty file of the owner's only at ``path``, for an agent that then writes it in place
    (a write that truncates an existing file keeps its mode)."""
    write_private(path, b"")


def masked(value: Any, redactor: Redactor) -> Any:
    """``value`` (parsed JSON) with every string masked; keys kept."""
    if isinstance(value, str):
        return redactor.mask(value)
    if isinstance(value, list):
        return [masked(v, redactor) for v in value]
    if isinstance(value, dict):
        return {k: masked(v, redactor) for k, v in value.items()}
    return value


def mask_json_file(path: Path, redactor: Redactor) -> str | None:
    """Rewrite the JSON file at ``path`` with its secrets masked, owner-only. Returns a one-line
    problem (the file is left as it was), or None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        return f"{path}: not masked, it is not JSON that can be read ({type(e).__name__}: {e})"
    if redactor.active:
        out = masked(data, redactor)
        if out != data:
            try:
                write_private(path, json.dumps(out, indent=2))
            except OSError as e:
                return f"{path}: not masked ({e.strerror or e})"
    return make_private(path)


def make_private(path: Path) -> str | None:
    """``path`` (a regular file of ours) readable by its owner only; a problem in a line, or None."""
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) != FILE_MODE:
            os.chmod(path, FILE_MODE)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"{path}: cannot make it private ({e.strerror or e})"
    return None


def make_tree_private(root: Path) -> list[str]:
    """Every regular file of ours under ``root`` owner-only (links are not followed); the problems."""
    problems = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            problem = make_private(Path(dirpath) / name)
            if problem:
                problems.append(problem)
    return problems
