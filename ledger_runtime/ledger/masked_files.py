"""mini-swe-agent's trajectory file, masked once the agent is done with it.

The trajectory holds every output, so any secret in them. ``ledger-run mini`` makes the file owner-only before the run
and masks it here as the ledger masks what it stores. Codex's own files are made owner-only but not masked: ``codex
resume`` reads them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ledger_runtime.ledger.private import touch_private, write_private
from ledger_runtime.ledger.redact import Redactor


def masked(value: Any, redactor: Redactor) -> Any:
    """Parsed JSON with every string masked; keys kept."""
    if isinstance(value, str):
        return redactor.mask(value)
    if isinstance(value, list):
        return [masked(v, redactor) for v in value]
    if isinstance(value, dict):
        return {k: masked(v, redactor) for k, v in value.items()}
    return value


def mask_json_file(path: Path, redactor: Redactor) -> str | None:
    """Rewrites a JSON file owner-only with its secrets masked; returns a one-line problem (file unchanged), or None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        return f"{path}: not masked, it is not JSON that can be read ({type(e).__name__}: {e})"
    out = masked(data, redactor) if redactor.active else data
    try:
        if out != data:
            write_private(path, json.dumps(out, indent=2))
        else:
            touch_private(path)  # owner-only, as it stands
    except OSError as e:
        return f"{path}: not masked ({e.strerror or e})"
    return None
