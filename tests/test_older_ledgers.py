"""A ledger written by a version before blob sums (commit ced2f3b) is not damaged: its masked file contents cannot be
checked against their hash, so they read as missing (never the source of a reference), and ``inspect`` says so in one
note and exits 0; a blob that is a change of one of them still reads back, its own hash checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.inspection import load
from ledger_runtime.runtime import LedgerRuntime

OLDER = "ced2f3b"  # the last commit whose ledgers have no sums table
ROOT = Path(__file__).resolve().parents[1]
TOKEN = "ghp_" + "Z8k2" * 9
WRITER = f"""
import sys
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime
rt = LedgerRuntime(sys.argv[1], sys.argv[2], LedgerConfig(), task="t")
ex = LocalExecutor(timeout=30)
rt.run("echo 'TOKEN={TOKEN}' > creds.env", ex)
rt.run("cat creds.env", ex)
# a long file with a token: the output of cat is stored as a change of the file's masked content
rt.run("python3 -c \\"print('TOKEN={TOKEN}'); print('x = 1' * 20000)\\" > big.env", ex)
rt.run("cat big.env", ex)
rt.close()
"""


def older_code(dest: Path) -> Path:
    """The ledger_runtime package as commit ced2f3b had it, from this checkout's history."""
    got = subprocess.run(["git", "-C", str(ROOT), "archive", OLDER, "ledger_runtime"], capture_output=True)
    if got.returncode != 0:
        pytest.skip(f"commit {OLDER} is not in this checkout's history: {got.stderr.decode()[:200]}")
    with tarfile.open(fileobj=BytesIO(got.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


@pytest.fixture
def older_run(repo, tmp_path) -> Path:
    code = older_code(tmp_path / "older")
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(code)}
    argv = [sys.executable, "-c", WRITER, str(repo), str(run)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=tmp_path)  # not this checkout's code
    assert done.returncode == 0, done.stderr
    assert not (run / "ledger.sqlite").read_bytes().count(b"blob_sums"), "written by the older code"
    return run


def inspect(*args: str) -> subprocess.CompletedProcess:
    env = {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "NO_COLOR": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    argv = [sys.executable, "-m", "ledger_runtime", "inspect", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env)


def test_an_older_ledger_is_not_damaged_its_masked_contents_read_as_missing(older_run, tmp_path):
    got = inspect(str(older_run), "--json")
    assert got.returncode == 0, got.stderr
    data = json.loads(got.stdout)
    assert data["damaged"] == {} and len(data["unchecked"]) == 2, data
    assert "damaged" not in got.stderr and got.stderr.count("note:") == 1, got.stderr
    assert inspect(str(older_run), "--html", str(tmp_path / "p.html")).returncode == 0

    loaded = load(older_run / "ledger.sqlite")
    contents = [m.after_hash for m in loaded.state.modifications]
    assert [loaded.text(h) for h in contents] == [None, None] and sorted(loaded.unchecked) == sorted(contents)
    out = loaded.text(loaded.state.attempts[3].output_hash)  # a change of big.env's masked content
    assert out is not None and out.startswith("TOKEN=****") and TOKEN not in out
    assert loaded.damaged == {}


def test_a_resumed_older_ledger_logs_no_fault_and_refers_to_nothing_unchecked(older_run, repo):
    rt = LedgerRuntime(repo, older_run, LedgerConfig(), task="t")
    again = rt.run("cat creds.env", LocalExecutor(timeout=30))
    rt.close()
    assert again.output == f"TOKEN={TOKEN}\n"
    assert not (older_run / "faults.log").exists() or "blob" not in (older_run / "faults.log").read_text()
