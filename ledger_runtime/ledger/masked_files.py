"""The agents' own records, masked: mini-swe-agent's trajectory when the run ends, copies of session files.

A hooked agent's session files (JSON lines) are copied masked into the run directory.

The trajectory holds every output, so any secret in them. ``ledger-run mini`` makes the file owner-only before the run
and masks it here as the ledger masks what it stores. Codex's own files are made owner-only but not masked: ``codex
resume`` reads them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from ledger_runtime.json_text import NestedTooDeep, UnreadableJSON, json_value
from ledger_runtime.ledger.json_strings import mask_json_text
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


def with_names(text: str, redactor: Redactor) -> str:
    """A JSON text masked once more as one text, where that leaves it JSON: a value is masked by the name beside it
    (``"api_key": "..."``, which a string masked alone does not show); else as it was."""
    out = redactor.mask(text)
    if out == text:
        return text
    try:
        json.loads(out, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError):  # a mask that broke the JSON (a quote masked) or made two keys one
        return text  # each string's masking alone
    return out


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different, else ValueError: a reader would keep one of two alike."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("two keys alike")
    return out


def masked_json(value: Any, environ: Mapping[str, str] | None = None) -> str:
    """``value`` as JSON text (indented) with secrets masked as the ledger masks them (this process's environment's,
    known shapes, values under a secret's name): for a record of a run's settings and command line, which may name a
    model's API key or a proxy's password."""
    redactor = Redactor.for_run(os.environ if environ is None else environ)
    plain = json.loads(json.dumps(value, default=str))
    return with_names(json.dumps(masked(plain, redactor), indent=2), redactor) + "\n"


def mask_json_file(path: Path, redactor: Redactor) -> str | None:
    """Rewrites a JSON file owner-only with its secrets masked; returns a one-line problem (file unchanged), or None."""
    try:
        text = path.read_text(encoding="utf-8")
        data = json_value(text)
        out = masked(data, redactor) if redactor.active else data
        dumped = json.dumps(out, indent=2)
        named = with_names(dumped, redactor) if redactor.active else dumped  # mini's info.config: model_kwargs.api_key
        new = named if out != data or named != dumped else None
    except FileNotFoundError:
        return None
    except (NestedTooDeep, RecursionError):  # nested past what json reads (or a walk of it): strings masked in place
        new = mask_json_text(text, redactor.mask) if redactor.active else text
        new = None if new == text else new
    except UnreadableJSON as e:
        return f"{path}: not masked, it is not JSON that can be read ({e})"
    except (OSError, ValueError) as e:  # UnicodeDecodeError
        return f"{path}: not masked, it is not JSON that can be read ({type(e).__name__}: {e})"
    try:
        if new is not None:
            write_private(path, new)
        else:
            touch_private(path)  # owner-only, as it stands
    except OSError as e:
        return f"{path}: not masked ({e.strerror or e})"
    return None


def keep_masked_jsonl(sources: dict[str, str], out: Path, redactor: Redactor) -> None:
    """Masked copies (owner-only) of an agent's session files of JSON lines (``sources``: session id ->
    path), one ``<stem>.jsonl`` each in ``out``, and ``sessions.json`` naming where they came from: the
    run keeps what the model was sent after the agent's own files are gone. A file that cannot be read
    is left out; a line that is not JSON is masked as text."""
    from ledger_runtime.ledger.private import private_dir

    if not sources:
        return
    private_dir(out)
    from ledger_runtime.ledger.private import read_record

    for path in sources.values():
        try:  # a regular file only: a FIFO or /dev/zero in its place would hold the run's end
            lines = read_record(path).decode("utf-8", "replace").splitlines()
        except OSError:
            continue
        kept = []
        for line in lines:
            try:
                kept.append(json.dumps(masked(json_value(line), redactor)))
            except (NestedTooDeep, RecursionError):  # nested past what json reads: its strings masked where they stand
                kept.append(mask_json_text(line, redactor.mask))
            except UnreadableJSON:  # not JSON: kept as masked text
                kept.append(redactor.mask(line))
        write_private(out / f"{Path(path).stem}.jsonl", "".join(x + "\n" for x in kept))
    write_private(out / "sessions.json", json.dumps(sources, indent=1) + "\n")
