"""The fault log: what went wrong in the ledger's own making, readable after the run.

A fault never stops the agent; ``faults.log`` in the run directory, and the ledger when that works, are where it shows.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback
from pathlib import Path

from ledger_runtime.ledger.private import append_private
from ledger_runtime.ledger.redact import Redactor
from ledger_runtime.ledger.store import LedgerStore

FAULTS_FILE = "faults.log"
log = logging.getLogger("ledger_runtime")


class FaultLog:
    """Faults of one run: counted, masked, written to ``faults.log`` and, when it works, the ledger."""

    def __init__(self, run_dir: Path, redactor: Redactor):
        self.path = run_dir / FAULTS_FILE
        self.redactor = redactor
        self.store: LedgerStore | None = None  # set once the ledger is open
        self.count = 0  # faults so far
        self.unwritten = 0  # faults that could not even be written to faults.log

    def add(
        self, where: str, error: BaseException, command: str | None = None, records: list[dict] | None = None
    ) -> None:
        """Logs one fault; ``records`` are what could not be written to the ledger, kept here instead."""
        entry = {
            "at": time.time(),
            "where": where,
            "error": f"{type(error).__name__}: {error}",
            "command": command,
            # the error's own (format_exc is the exception being handled: none for one reported from another thread)
            "trace": "".join(traceback.format_exception(error, limit=6)),
        }
        if records:
            entry["records"] = records
        entry = self.redactor.mask_obj(entry)  # the log lines below are written somewhere too
        self.count += 1
        log.warning("ledger fault %s: %s", where, entry["error"])
        try:
            with append_private(self.path) as f:
                f.write(json.dumps(entry, default=str) + "\n")
        except OSError as e:  # a full disk, most likely: the one place left to say so
            self.unwritten += 1
            print(
                f"ledger-run: a fault could not be written to {self.path} ({e.strerror or e}): "
                f"{where}: {entry['error']}" + ("; its records are lost" if records else ""),
                file=sys.stderr,
            )
        if records is None and self.store is not None:
            try:
                self.store.append("fault", {k: v for k, v in entry.items() if k != "trace"})
                self.store.commit()
            except Exception:
                self.store.discard_pending()

    def close(self) -> None:
        if self.unwritten:
            print(
                f"ledger-run: {self.unwritten} fault(s) of this run could not be written (disk full?); "
                "the ledger may lack the steps they name",
                file=sys.stderr,
            )
