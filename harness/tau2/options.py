"""``ledger-run tau2-gate``'s options as one value (``Tau2GateOptions``), and ``validate``: the checks
that need nothing but the options themselves, each failing with the one line the command prints.
What needs tau2 or its data (the data directory, the task files) is checked where it is read (cli.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DOMAINS = ("airline", "retail")


@dataclass(frozen=True)
class Tau2GateOptions:
    """What ``ledger-run tau2-gate`` was asked."""

    domain: str
    data: Path | None = None  # None: the installed tau2's data
    tasks: tuple[str, ...] = ()  # task files in <data>/<domain>/ (none: every tasks*.json there)
    out: Path | None = None
    as_json: bool = False


def validate(o: Tau2GateOptions) -> str | None:
    """The first thing wrong with the options alone (the line ``ledger-run tau2-gate`` fails with), or None."""
    if o.domain not in DOMAINS:
        return f"--domain must be airline or retail, not {o.domain!r}"
    if o.out is not None:  # said before the replay (a minute), not as a traceback after it
        if o.out.is_dir():
            return f"cannot write -o {o.out}: it is a directory; name a file, such as {o.out / 'tau2-gate.json'}"
        if o.out.exists() and not o.out.is_file():
            return f"cannot write -o {o.out}: it is not a regular file"
        above = next((p for p in o.out.parents if p.exists()), None)
        if above is not None and not above.is_dir():
            return f"cannot write -o {o.out}: {above} is a file, not a directory"
    return None
