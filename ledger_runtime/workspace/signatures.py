"""Signatures of read keys on this machine: the portable scanner's, with the local hash cache, and ``PENDING``.

``scanning/signatures.py`` says what each key signs; ``PENDING`` is the runtime's word for a signature not known before
a command."""

from __future__ import annotations

from ledger_runtime.workspace.scanning.filestate import PSEUDO_TREES  # noqa: F401
from ledger_runtime.workspace.scanning.signatures import MISSING, Probe  # noqa: F401

PENDING = "pending"  # a signature not known before a command; taken as unchanged by it
