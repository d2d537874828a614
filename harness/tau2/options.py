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
    return None
