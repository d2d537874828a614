"""A crafted ledger file given to ``ledger-run inspect`` and to a run that reopens it, on angles the
earlier passes left: code in its schema. A view runs its query when it is read and a trigger on each
write, so a ledger carrying either of its own is refused in one line, before a row is read."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.inspection import load
from ledger_runtime.ledger import store
from ledger_runtime.ledger.store import NotALedger
from ledger_runtime.runtime import LedgerRuntime

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("schema")
    repo = make_repo(base / "repo", {"a.py": "print(1)\n"})
    rt = LedgerRuntime(repo, base / "run", LedgerConfig(), task="t")
    for c in ["cat a.py", "cat a.py", "echo hi > b.txt"]:
        rt.run(c, LocalExecutor())
    rt.close()
    return base / "run"


def copy_with(run_dir: Path, where: Path, *sql: str) -> Path:
    where.mkdir(parents=True)
    shutil.copy(run_dir / "ledger.sqlite", where / "ledger.sqlite")
    db = sqlite3.connect(where / "ledger.sqlite")
    for s in sql:
        db.execute(s)
    db.commit()
    db.close()
    return where


def test_inspect_of_a_ledger_whose_meta_is_an_endless_view_says_so_in_a_line(run_dir: Path, tmp_path: Path) -> None:
    """``meta`` made a recursive view that never ends: inspect read it for ever, its memory growing."""
    crafted = copy_with(
        run_dir,
        tmp_path / "v",
        "CREATE TABLE old_meta AS SELECT * FROM meta",
        "DROP TABLE meta",
        "CREATE VIEW meta AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) "
        "SELECT key, value FROM old_meta UNION ALL SELECT 'k' || x, 'v' FROM n",
    )
    for extra in ([], ["--json"], ["--html", str(tmp_path / "page.html")]):
        try:
            p = subprocess.run(
                [sys.executable, "-m", "ledger_runtime", "inspect", str(crafted), *extra],
                capture_output=True,
                text=True,
                timeout=60,
                env=ENV,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"inspect {extra} hung on a view that never ends")
        assert p.returncode != 0 and "Traceback" not in p.stderr
        assert (
            p.stderr.strip().count("\n") == 0 and "its schema makes meta a view, which no ledger writes" in p.stderr
        ), p.stderr


def test_a_run_reopening_a_ledger_with_a_trigger_of_its_own_is_refused_not_silently_emptied(
    run_dir: Path, tmp_path: Path
) -> None:
    """A trigger that ignores every insert into ``events``: a run on that ledger went on, recorded
    nothing and said nothing. Now its ledger is refused before the run starts."""
    crafted = copy_with(
        run_dir,
        tmp_path / "t",
        "CREATE TRIGGER keep_quiet BEFORE INSERT ON events BEGIN SELECT RAISE(IGNORE); END",
    )
    repo = make_repo(tmp_path / "repo", {"a.py": "print(1)\n"})
    with pytest.raises(NotALedger, match="a trigger on events \\('keep_quiet'\\), which no ledger writes"):
        rt = LedgerRuntime(repo, crafted, LedgerConfig(), task="t")
        try:
            rt.run("echo new > c.txt", LocalExecutor())
        finally:
            rt.close()
        assert [a.command for a in load(crafted).state.attempts][-1] == "echo new > c.txt", "the step was lost"


def test_only_the_ledgers_own_triggers_pass_and_a_missing_one_is_no_fault() -> None:
    foreign_code = store.foreign_code
    ours = "CREATE TRIGGER events_no_delete BEFORE DELETE ON events\n"
    ours += "BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END"
    assert foreign_code([("table", "meta", "meta", "CREATE TABLE meta (x)"), ("index", "i", "meta", None)]) is None
    assert foreign_code([("trigger", "events_no_delete", "events", ours)]) is None
    assert foreign_code([("trigger", "events_no_delete", "events", ours.replace("ABORT", "IGNORE"))]) is not None
    assert "'\\x1b[2J'" in (foreign_code([("trigger", "\x1b[2J", "blobs", "CREATE TRIGGER ...")]) or "")
    assert "makes meta a view" in (foreign_code([("view", "meta", "meta", "CREATE VIEW meta AS ...")]) or "")


def test_a_users_own_view_or_trigger_beside_the_ledgers_tables_is_no_fault(tmp_path: Path) -> None:
    """A view or trigger of a table the ledger never reads or writes (a user's own, made in ``sqlite3`` for a
    look at the data) runs for none of the ledger's work: such a ledger was refused as "crafted or damaged"."""
    foreign_code = store.foreign_code
    assert foreign_code([("view", "by_step", "by_step", "CREATE VIEW by_step AS SELECT step FROM events")]) is None
    assert (
        foreign_code([("trigger", "t", "notes", "CREATE TRIGGER t AFTER INSERT ON notes BEGIN SELECT 1; END")]) is None
    )
    repo = make_repo(tmp_path / "repo", {"a.py": "print(1)\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig(), task="t")
    rt.run("cat a.py", LocalExecutor())
    rt.close()
    with sqlite3.connect(tmp_path / "run" / "ledger.sqlite") as db:
        db.executescript(
            "CREATE VIEW by_step AS SELECT * FROM events; CREATE TABLE notes (x);"
            "CREATE TRIGGER t AFTER INSERT ON notes BEGIN SELECT 1; END;"
        )
    p = subprocess.run(
        [sys.executable, "-m", "ledger_runtime", "inspect", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert p.returncode == 0 and "cat a.py" in p.stdout, p.stderr
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig(), task="t")
    rt.run("cat a.py", LocalExecutor())
    rt.close()
    assert [a.command for a in load(tmp_path / "run").state.attempts] == ["cat a.py", "cat a.py"]


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_resumed_run_whose_ledger_is_damaged_or_crafted_says_so_in_one_line(
    run_dir: Path, tmp_path: Path, agent: str
) -> None:
    """A resumed session (``claude --resume``, ``codex resume``) goes on with the run directory's
    ledger: one truncated, or holding a view of its own, ended ``ledger-run`` with a traceback."""
    from cli_support import ledger_run

    repo = make_repo(tmp_path / "repo", {"a.py": "print(1)\n"})
    truncated = tmp_path / "truncated"
    truncated.mkdir(mode=0o700)
    (truncated / "ledger.sqlite").write_bytes((run_dir / "ledger.sqlite").read_bytes()[:4096])
    viewed = copy_with(run_dir, tmp_path / "viewed", "CREATE TRIGGER extra AFTER INSERT ON blobs BEGIN SELECT 1; END")
    resume = ["--", "--resume", "abc", "-p", "x"] if agent == "claude" else ["--", "resume", "abc"]
    for run, why in (
        (truncated, "corrupt or truncated"),
        (viewed, "a trigger on blobs ('extra'), which no ledger writes"),
    ):
        r = ledger_run(agent, f"--{agent}-bin", "/bin/true", "-w", str(repo), "-o", str(run), *resume, timeout=120)
        assert "Traceback" not in r.stderr, r.stderr[-1500:]
        assert r.returncode == 2 and f"error: not a ledger: {run / 'ledger.sqlite'}:" in r.stderr and why in r.stderr


def test_inspect_of_a_ledger_made_a_fifo_says_it_is_not_a_regular_file(tmp_path: Path) -> None:
    """It said "empty file", which a FIFO is not; nothing reads it (a read would wait for a writer)."""
    where = tmp_path / "run"
    where.mkdir(mode=0o700)
    os.mkfifo(where / "ledger.sqlite", 0o600)
    p = subprocess.run(
        [sys.executable, "-m", "ledger_runtime", "inspect", str(where)],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert p.returncode == 2 and p.stderr.strip().endswith("ledger.sqlite: not a regular file"), p.stderr


def test_meta_values_nested_past_the_parser_are_read_as_text(run_dir: Path, tmp_path: Path) -> None:
    """A meta value of 5,000 '[' raised RecursionError (not the ValueError of any other value that is
    not JSON): inspect, --json and --html ended with a traceback."""
    crafted = copy_with(
        run_dir,
        tmp_path / "m",
        "INSERT OR REPLACE INTO meta VALUES ('task', '" + "[" * 5000 + "')",
        "INSERT OR REPLACE INTO meta VALUES ('extra', '" + "{" * 5000 + "')",
    )
    for extra in ([], ["--json"], ["--html", str(tmp_path / "page.html")]):
        p = subprocess.run(
            [sys.executable, "-m", "ledger_runtime", "inspect", str(crafted), *extra],
            capture_output=True,
            text=True,
            timeout=120,
            env=ENV,
        )
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-1500:]


def test_an_event_body_nested_past_the_parser_is_a_fault_in_its_place(run_dir: Path, tmp_path: Path) -> None:
    """An event's body of 5,000 '[' raised RecursionError where the reader of events catches ValueError: inspect ended
    with a traceback, not the line that names the damaged event, and no later event was read."""
    crafted = copy_with(
        run_dir,
        tmp_path / "e",
        "DROP TRIGGER events_no_update",
        "UPDATE events SET body = '" + "[" * 5000 + "' WHERE seq = 2",
    )
    p = subprocess.run(
        [sys.executable, "-m", "ledger_runtime", "inspect", str(crafted), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
    )
    assert "Traceback" not in p.stderr and "event 2: its body does not read (JSON nested deeper" in p.stderr, p.stderr
    s = store.LedgerStore.open(crafted / "ledger.sqlite")
    events = list(s.events())
    s.close()
    assert [e["kind"] for e in events if e["seq"] == 2] == ["fault"]
    assert "nested deeper than it can be read" in next(e["message"] for e in events if e["seq"] == 2)
    assert len(events) > 2  # the events after it are read all the same


def test_a_resumed_run_never_writes_through_a_ledger_made_a_link(run_dir: Path, tmp_path: Path) -> None:
    """A run directory whose ledger.sqlite is a link to another run's ledger: a run that went on with it
    (a resumed session) appended its steps to the other run's ledger, as SQLite follows a link."""
    from cli_support import ledger_run

    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    shutil.copy(run_dir / "ledger.sqlite", other / "ledger.sqlite")
    before = [a.command for a in load(other).state.attempts]
    linked = tmp_path / "linked"
    linked.mkdir(mode=0o700)
    (linked / "ledger.sqlite").symlink_to(other / "ledger.sqlite")
    repo = make_repo(tmp_path / "repo", {"a.py": "print(1)\n"})
    with pytest.raises(OSError, match="symbolic link, never followed"):
        rt = LedgerRuntime(repo, linked, LedgerConfig(), task="t")
        try:
            rt.run("echo new > c.txt", LocalExecutor())
        finally:
            rt.close()
    assert [a.command for a in load(other).state.attempts] == before
    r = ledger_run("claude", "--claude-bin", "/bin/true", "-w", str(repo), "-o", str(linked), "--", "--resume", "x")
    assert r.returncode == 2 and "ledger.sqlite: it is a symbolic link, never followed" in r.stderr, r.stderr[-1500:]


def test_a_resumed_run_whose_ledger_is_a_fifo_says_it_is_not_a_regular_file(tmp_path: Path) -> None:
    """It said "No such device or address" (the open of a FIFO without a reader), which names nothing."""
    from cli_support import ledger_run

    where = tmp_path / "run"
    where.mkdir(mode=0o700)
    os.mkfifo(where / "ledger.sqlite", 0o600)
    repo = make_repo(tmp_path / "repo", {"a.py": "print(1)\n"})
    r = ledger_run("claude", "--claude-bin", "/bin/true", "-w", str(repo), "-o", str(where), "--", "--resume", "x")
    assert r.returncode == 2 and r.stderr.strip().endswith("ledger.sqlite: it is not a regular file"), r.stderr
