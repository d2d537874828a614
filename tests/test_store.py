"""The ledger file: append-only events, blobs, killed writers, and files that are not ledgers."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from ledger_runtime.ledger.store import LEDGER_FILE, LedgerStore, NotALedger
from ledger_runtime.workspace.hashing import digest_bytes


def test_events_and_blobs_round_trip(tmp_path):
    s = LedgerStore.create(tmp_path / "run", {"agent": "test"})
    h = s.put_blob(b"hello " * 500)
    s.append("attempt", {"id": 1, "x": "\udcff surrogate"}, step=1)
    s.append("observation", {"path": "/a"}, step=1)
    s.commit()
    s.close()
    r = LedgerStore.open(tmp_path / "run")
    events = list(r.events())
    assert [e["kind"] for e in events] == ["attempt", "observation"]
    assert events[0]["x"] == "\udcff surrogate" and events[0]["step"] == 1
    assert r.blob(h) == b"hello " * 500 and h == digest_bytes(b"hello " * 500)
    assert r.meta()["agent"] == "test" and r.meta()["format"] == "ledger-runtime"
    assert (tmp_path / "run" / LEDGER_FILE).exists()


def test_event_log_is_append_only(tmp_path):
    s = LedgerStore.create(tmp_path / "run")
    s.append("attempt", {"id": 1})
    s.commit()
    path = s.path
    s.close()
    conn = sqlite3.connect(path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE events SET body = '{}'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM events")


def test_uncommitted_events_are_not_visible_and_discard_returns_them(tmp_path):
    s = LedgerStore.create(tmp_path / "run")
    s.append("attempt", {"id": 1})
    other = LedgerStore.open(tmp_path / "run")
    assert list(other.events()) == []
    lost = s.discard_pending()
    assert len(lost) == 1 and lost[0][0] == "attempt"


def test_reopen_for_append_keeps_history(tmp_path):
    s = LedgerStore.create(tmp_path / "run")
    s.append("attempt", {"id": 1})
    s.commit()
    s.close()
    s2 = LedgerStore.create(tmp_path / "run")
    s2.append("attempt", {"id": 2})
    s2.commit()
    assert [e["id"] for e in s2.events()] == [1, 2]


def test_sigkill_mid_write_loses_nothing_committed(tmp_path):
    """A writer killed with SIGKILL while it appends: the ledger reopens with every committed
    event, in order, with no gap, and nothing half-written."""
    run = tmp_path / "run"
    script = textwrap.dedent(f"""
        import sys
        from ledger_runtime.ledger.store import LedgerStore
        s = LedgerStore.create({str(run)!r})
        i = 0
        while True:
            i += 1
            s.put_blob(("output %d " % i).encode() * 200)
            for j in range(5):
                s.append("observation", {{"i": i, "j": j, "pad": "x" * 300}}, step=i)
            s.commit()
            if i == 20:
                print("ready", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (run / (LEDGER_FILE + "-wal")).exists(), "the killed writer should leave its WAL behind"
    r = LedgerStore.open(run)
    events = list(r.events())
    steps = sorted({e["step"] for e in events})
    assert len(steps) >= 20
    assert steps == list(range(1, len(steps) + 1)), "committed steps are contiguous"
    per_step = {}
    for e in events:
        per_step.setdefault(e["step"], []).append(e["j"])
    assert all(js == [0, 1, 2, 3, 4] for js in per_step.values()), "a step is all there or not at all"
    for i in steps:
        assert r.blob(digest_bytes(("output %d " % i).encode() * 200)) is not None


def _error(path) -> str:
    with pytest.raises(NotALedger) as e:
        LedgerStore.open(path)
    msg = str(e.value)
    assert msg.startswith("not a ledger: ") and "\n" not in msg
    return msg


def test_not_a_ledger_errors(tmp_path):
    assert "no such file" in _error(tmp_path / "missing.sqlite")
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    assert "empty file" in _error(empty)
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    assert "not an SQLite database" in _error(text)
    foreign = tmp_path / "foreign.db"
    c = sqlite3.connect(foreign)
    c.execute("CREATE TABLE t(x)")
    c.commit()
    c.close()
    assert "not a ledger (no ledger tables)" in _error(foreign)
    marked = tmp_path / "other.db"
    c = sqlite3.connect(marked)
    c.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
    c.execute("INSERT INTO meta VALUES ('format', 'something-else')")
    c.commit()
    c.close()
    assert "no ledger format mark" in _error(marked)
    assert "no ledger.sqlite in this directory" in _error(tmp_path)


def test_truncated_and_corrupt_ledgers(tmp_path):
    s = LedgerStore.create(tmp_path / "run")
    for i in range(300):
        s.put_blob(os.urandom(2000))
        s.append("attempt", {"id": i, "pad": "y" * 500}, step=i)
        s.commit()
    s._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    s.close()
    data = s.path.read_bytes()
    truncated = tmp_path / "truncated.sqlite"
    truncated.write_bytes(data[: len(data) // 3])
    assert "corrupt or truncated" in _error(truncated)
    corrupt = tmp_path / "corrupt.sqlite"
    mid = len(data) // 2
    corrupt.write_bytes(data[:mid] + b"\xff" * 8192 + data[mid + 8192 :])
    _error(corrupt)


def test_newer_schema_is_refused(tmp_path):
    s = LedgerStore.create(tmp_path / "run")
    s._conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    s.close()
    assert "newer ledger-runtime" in _error(tmp_path / "run")


def _versions(n: int, lines: int = 4000) -> list[bytes]:
    """A long text and ``n`` versions of it, each the one before with a line changed (a file read
    again after each edit)."""
    body = [f"line {i}: some text of a long file, {i * 7 % 13}\n".encode() for i in range(lines)]
    out = [b"".join(body)]
    for k in range(n):
        body[(k * 911) % lines] = f"edited {k}\n".encode()
        out.append(b"".join(body))
    return out


def test_a_long_blob_changed_in_a_line_is_stored_as_that_change_and_reads_back_whole(tmp_path):
    """A long output read again after an edit is the earlier one with a line changed: it is stored as
    that change (a fraction of the size), and reads back byte for byte, in this process and in a new
    one (inspect), through chains of changes, also past the depth where a blob is stored whole again."""
    from ledger_runtime.ledger.store import PATCH_DEPTH

    versions = _versions(PATCH_DEPTH * 2 + 3)
    s = LedgerStore.create(tmp_path / "run")
    keys = []
    for i, v in enumerate(versions):
        keys.append(s.put_masked_blob(v))
        if i % 3 == 0:
            s.commit()
    s.commit()
    assert [s.blob(k) for k in keys] == versions
    s.close()
    conn = sqlite3.connect(tmp_path / "run" / LEDGER_FILE)
    rows = dict(conn.execute("SELECT hash, codec FROM blobs").fetchall())
    sizes = dict(conn.execute("SELECT hash, length(data) FROM blobs").fetchall())
    conn.close()
    patched = [k for k in keys if rows[k] == "patch"]
    assert len(patched) >= len(keys) - 4, rows  # all but the first (and one a chain's depth later)
    assert all(sizes[k] < len(versions[0]) // 20 for k in patched)
    r = LedgerStore.open(tmp_path / "run")
    assert [r.blob(k) for k in reversed(keys)] == list(reversed(versions))  # no recent blob to start from


def test_a_ledger_of_schema_1_gets_no_patches_and_a_patch_whose_base_is_gone_reads_as_missing(tmp_path):
    """Older readers know no patches: a ledger they wrote keeps whole blobs when this version appends.
    A patch that cannot be decoded (its base missing) is a missing blob, never a wrong one or a
    traceback; a blob whose commit failed is never the base of a later change."""
    a, b = _versions(1)
    old = LedgerStore.create(tmp_path / "old")
    old.set_meta("schema_version", 1)
    old.close()
    s = LedgerStore.create(tmp_path / "old")
    ka, kb = s.put_masked_blob(a), s.put_masked_blob(b)
    s.commit()
    s.close()
    conn = sqlite3.connect(tmp_path / "old" / LEDGER_FILE)
    assert {c for (c,) in conn.execute("SELECT codec FROM blobs")} <= {"zlib", "raw"}
    conn.close()

    s = LedgerStore.create(tmp_path / "new")
    ka = s.put_masked_blob(a)
    s.discard_pending()  # its commit failed: a is not in the file
    kb = s.put_masked_blob(b)
    s.commit()
    assert s.blob(kb) == b
    s.close()
    conn = sqlite3.connect(tmp_path / "new" / LEDGER_FILE)
    assert conn.execute("SELECT codec FROM blobs WHERE hash = ?", (kb,)).fetchone()[0] != "patch"
    conn.close()

    s = LedgerStore.create(tmp_path / "gone")
    ka, kb = s.put_masked_blob(a), s.put_masked_blob(b)
    s.commit()
    s.close()
    conn = sqlite3.connect(tmp_path / "gone" / LEDGER_FILE)
    assert conn.execute("SELECT codec FROM blobs WHERE hash = ?", (kb,)).fetchone()[0] == "patch"
    conn.execute("DELETE FROM blobs WHERE hash = ?", (ka,))
    conn.commit()
    conn.close()
    r = LedgerStore.open(tmp_path / "gone")
    assert r.blob(kb) is None and r.text(kb) is None


def test_a_damaged_blob_reads_as_missing_every_time_and_says_why(tmp_path):
    """A blob that does not read back whole (a patch of the wrong size, one whose base is damaged) is
    missing on every read of the same store, never served from its cache on the second, and never the
    base of a later read; ``damaged`` says why."""
    versions = _versions(3)
    s = LedgerStore.create(tmp_path / "run")
    keys = [s.put_masked_blob(v) for v in versions]
    s.commit()
    s.close()
    conn = sqlite3.connect(tmp_path / "run" / LEDGER_FILE)
    codecs = dict(conn.execute("SELECT hash, codec FROM blobs").fetchall())
    assert [codecs[k] for k in keys] == ["zlib", "patch", "patch", "patch"]
    conn.execute("UPDATE blobs SET size = size + 1 WHERE hash = ?", (keys[1],))
    conn.commit()
    conn.close()
    r = LedgerStore.open(tmp_path / "run")
    assert [r.blob(keys[1]), r.blob(keys[1])] == [None, None]
    assert r.damaged[keys[1]] == f"{len(versions[1])} bytes where {len(versions[1]) + 1} were stored"
    assert r.blob(keys[2]) is None and "does not apply" in r.damaged[keys[2]]  # built on the damaged one
    assert r.blob(keys[0]) == versions[0] and keys[0] not in r.damaged


def test_event_bodies_are_the_text_json_dumps_gave_them():
    """The one encoder ``append`` keeps writes each body as ``json.dumps(sort_keys, compact)`` did: the stored bytes of
    every event stay those older versions wrote (keys sorted, surrogates and non-ASCII escaped, NaN kept)."""
    import json
    import random

    from ledger_runtime.ledger.store import _BODY_JSON

    rng = random.Random(42)
    atoms = [0, -7, 2**70, 1.5, float("nan"), float("inf"), True, None, "", 'é\udcff\n"', "\u2028"]

    def value(depth):
        if depth > 3 or rng.random() < 0.4:
            return rng.choice(atoms)
        if rng.random() < 0.5:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {rng.choice(["b", "a", "Z", "é", "kind", "10", "9"]): value(depth + 1) for _ in range(rng.randrange(5))}

    for _ in range(2000):
        body = {"k": value(0), "x": value(1)}
        assert _BODY_JSON.encode(body) == json.dumps(body, separators=(",", ":"), sort_keys=True)


def test_each_commit_waits_for_a_lock_as_long_as_before(tmp_path):
    """The lock wait is set on the connection only when it changes, yet each commit gets the one it got when it was set
    per commit: LOCK_TIMEOUT_S; QUICK_LOCK_S after a commit failed for a lock, until one succeeds; and on a connection
    put in the store's place, the store's own again."""
    from ledger_runtime.ledger.store import LOCK_TIMEOUT_S, QUICK_LOCK_S, StoreError

    s = LedgerStore.create(tmp_path / "run")
    full, quick = int(LOCK_TIMEOUT_S * 1000), int(QUICK_LOCK_S * 1000)

    def commit(n):
        s.append("attempt", {"n": n}, step=n)
        s.commit()
        return s._conn.execute("PRAGMA busy_timeout").fetchone()[0]

    assert commit(1) == full
    holder = sqlite3.connect(str(s.path), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    for n, waited in ((2, full), (3, quick)):  # the first waits the whole time; the next, little
        with pytest.raises(StoreError, match="locked"):
            commit(n)
        s.discard_pending()
        assert s._conn.execute("PRAGMA busy_timeout").fetchone()[0] == waited
    holder.execute("ROLLBACK")
    holder.close()
    assert commit(4) == quick  # the first commit after the lock is gone still waits little: it succeeds
    assert commit(5) == full
    s._conn.close()
    s._conn = sqlite3.connect(str(s.path), isolation_level=None, timeout=7)  # another connection in its place
    assert commit(6) == full
    assert [e["n"] for e in s.events()] == [1, 4, 5, 6]


def test_a_commit_on_a_closed_store_raises_as_before_whatever_the_lock_wait_last_set(tmp_path):
    """The lock wait is set only when it changes, yet a commit on a store already closed fails as it did when the
    wait was set per commit: sqlite3's ProgrammingError at once, not a StoreError (a failed write, its records
    kept in faults.log), whether or not a commit set the wait before."""
    s = LedgerStore.create(tmp_path / "run")
    s.append("attempt", {"n": 1}, step=1)
    s.commit()  # the wait is set: the next commit skips the pragma
    s.close()
    s.append("attempt", {"n": 2}, step=2)
    with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
        s.commit()
