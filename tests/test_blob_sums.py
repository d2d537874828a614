"""A blob read back from a ledger is the one stored under its key: one changed on disk since (or crafted) is read as
missing and named, on a resumed run (a fault) and in ``inspect`` (a ``damaged`` line), never the source of an answer."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ledger_adapters.mini.format import SUBMISSION
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.inspection import load
from ledger_runtime.runtime import LedgerRuntime

EX = LocalExecutor(timeout=30)
TOKEN = "ghp_" + "Z8k2" * 9


def runtime(repo: Path, run: Path) -> LedgerRuntime:
    return LedgerRuntime(repo, run, LedgerConfig(), task="Make test_add pass", submission=SUBMISSION)


def rewrite_blob(ledger: Path, key: str, data: bytes) -> None:
    """Someone with the ledger file changes what a blob holds, its key kept."""
    db = sqlite3.connect(ledger)
    with db:
        db.execute("UPDATE blobs SET size = ?, codec = 'raw', data = ? WHERE hash = ?", (len(data), data, key))
    db.close()


def test_a_changed_blob_is_read_as_missing_on_resume_and_in_inspect(repo, tmp_path):
    run = tmp_path / "run"
    rt = runtime(repo, run)
    first = rt.run("cat pkg/util.py", EX)
    rt.run(f"echo 'TOKEN={TOKEN}' > creds.env", EX)  # a file's masked content: stored under the file's digest
    output_key = rt.state.attempts[0].output_hash
    rt.close()
    assert "return 7\n" in first.output
    forged = first.output.replace("return 7\n", "return 8\n")
    rewrite_blob(run / "ledger.sqlite", output_key, forged.encode())
    # the file now reads as the blob does: before, the model was told "same as step 1's output", which it never got
    (repo / "pkg/util.py").write_text(forged)

    rt2 = runtime(repo, run)
    again = rt2.run("cat pkg/util.py", EX)
    rt2.run(f"echo 'TOKEN={TOKEN}x' > creds.env", EX)  # the masked content before it is read back, and checks
    rt2.close()
    assert again.output == forged, "the whole output, never a reference to what the model did not get"
    faults = [json.loads(line) for line in (run / "faults.log").read_text().splitlines()]
    named = [f["error"] for f in faults if "blob" in f["error"]]
    assert len(named) == 1 and output_key in named[0] and "does not match its hash" in named[0], named
    assert TOKEN not in (run / "ledger.sqlite").read_bytes().decode("latin-1")

    loaded = load(run / "ledger.sqlite")
    assert loaded.text(output_key) is None and "does not match its hash" in loaded.damaged[output_key]
    masked_file = [m for m in loaded.state.modifications if m.path.endswith("creds.env")][-1]
    assert "*" in (loaded.text(masked_file.after_hash) or ""), "a masked file's content reads back: its sum"
    assert list(loaded.damaged) == [output_key]
