"""What a call costs the OpenCode adapter must not grow with the session (issue 42): before each call is answered it
reads OpenCode's database for what the model got and for the outputs its prune cleared, and that read parsed every
part of every session of the run (a 100 MB session: 330-500 ms a call). It reads the rows added since its last read
and the rows of the calls it waits on, and gives what reading every part gives.

The database is a real SQLite file laid out as OpenCode 1.18.33 lays out its own (its ``part`` table and indexes,
read from a real run's ``opencode.db``); OpenCode updates a part in place (an upsert: the same rowid)."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest
from conftest import make_repo

import ledger_adapters.opencode.session as session
from ledger_adapters.opencode.hooks import OpenCodeHooks
from ledger_adapters.opencode.session import PartRows, tool_parts
from ledger_runtime import LedgerRuntime
from ledger_runtime.inspection import load

PART_TABLE = [
    """CREATE TABLE `part` (
          `id` text PRIMARY KEY,
          `message_id` text NOT NULL,
          `session_id` text NOT NULL,
          `time_created` integer NOT NULL,
          `time_updated` integer NOT NULL,
          `data` text NOT NULL
        )""",
    "CREATE INDEX `part_message_id_id_idx` ON `part` (`message_id`,`id`)",
    "CREATE INDEX `part_session_idx` ON `part` (`session_id`)",
]


def _opencode_db(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path)
    con.execute("pragma journal_mode=wal")  # as OpenCode writes it
    for sql in PART_TABLE:
        con.execute(sql)
    return con


def _put(con: sqlite3.Connection, n: int, sid: str, part: dict) -> None:
    """OpenCode's write of a part: an upsert by its id (a row updated keeps its rowid)."""
    con.execute(
        "insert into part values (?, 'msg', ?, ?, ?, ?) on conflict(id) do update set data = excluded.data,"
        " time_updated = excluded.time_updated",
        (f"prt_{n:08d}", sid, n, n, json.dumps(part)),
    )
    con.commit()


def _tool(call: str, output: str | None, compacted: bool = False) -> dict:
    times = {"start": 1, "end": 2, **({"compacted": 3} if compacted else {})}
    state = {"status": "completed", "output": output, "time": times} if output is not None else {"status": "running"}
    return {"type": "tool", "tool": "bash", "callID": call, "state": state}


def test_the_rows_a_call_parses_do_not_grow_with_the_session(tmp_path: Path, monkeypatch) -> None:
    """Each call parses the rows added since the last one and the rows of the calls waiting to be checked: the same
    number at the 10th call and the 200th, where every part of the session was parsed at each (200 calls, 2 rows
    each: 400 rows parsed twice by the last). What the model got is checked all the same: no record distrusted."""
    parsed = []
    real_json = session._json
    monkeypatch.setattr(session, "_json", lambda text: parsed.append(1) or real_json(text))
    repo = make_repo(tmp_path / "repo", {"calc.py": "def add(a, b):\n    return a + b\n"})
    con = _opencode_db(tmp_path / "opencode.db")
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, tmp_path / "opencode.db")
    per_call = []
    try:
        for i in range(200):
            call = {"tool": "bash", "callID": f"c{i}", "sessionID": "ses", "args": {"command": f"echo {i}"}}
            assert hooks.handle("ToolBefore", {**call, "directory": str(repo)}) is None
            _put(con, 2 * i, "ses", {"type": "text", "text": "x" * 1000})
            _put(con, 2 * i + 1, "ses", _tool(f"c{i}", None))
            parsed.clear()
            answer = hooks.handle(
                "ToolAfter", {**call, "directory": str(repo), "output": f"{i}\n", "metadata": {"exit": 0}}
            )
            per_call.append(len(parsed))
            _put(con, 2 * i + 1, "ses", _tool(f"c{i}", answer["output"] if answer else f"{i}\n"))
        assert list(hooks.to_check) == [200], "each call checked at the next one, but the last"
        hooks.finish()
    finally:
        con.close()
        rt.close()
    assert max(per_call[10:]) == per_call[10] <= 8, per_call[::20]
    assert not (tmp_path / "run" / "faults.log").exists()
    assert load(tmp_path / "run").state.distrusted == {}


def _every_part(db: Path, sid: str, calls: list[str]) -> tuple[dict, set]:
    """What reading every part gives: the calls' parts, and which of them a part of ``sid`` says were cleared."""
    whole = tool_parts(db, ["s1", "s2"])
    rows = sqlite3.connect(db).execute("select data from part where session_id = ?", (sid,)).fetchall()
    marked = {
        p.get("callID") for p in map(json.loads, (r for (r,) in rows)) if p["state"].get("time", {}).get("compacted")
    }
    return {c: whole[c] for c in calls if c in whole}, {c for c in calls if c in marked}


@pytest.mark.parametrize("seed", range(8))
def test_the_parts_read_row_by_row_are_those_of_reading_every_part(tmp_path: Path, seed: int) -> None:
    """Over random histories (parts added, updated in place, cleared, written again under a new rowid, the latest
    deleted and their rowids given again, a session joined late, one call's part twice), the calls' parts and the
    cleared ones are what reading every part gives."""
    rng = random.Random(seed)
    db = tmp_path / "opencode.db"
    con = _opencode_db(db)
    rows = PartRows()
    n, ids = 0, {}
    try:
        for _ in range(120):
            op = rng.random()
            call = f"c{rng.randrange(30)}"
            sid = "s1" if rng.random() < 0.7 else "s2"
            part = _tool(call, rng.choice([None, "out", "other"]), compacted=rng.random() < 0.2)
            if op < 0.5 or call not in ids:  # a new part (a call's second is its duplicate)
                ids[call] = (n, sid)
                n += 1
            elif op < 0.6:  # written again: deleted, inserted under a new rowid
                con.execute("delete from part where id = ?", (f"prt_{ids[call][0]:08d}",))
            elif op < 0.7:  # a revert: the latest parts deleted, the next ones given their rowids again
                con.execute("delete from part where rowid > (select max(rowid) from part) - ?", (rng.randrange(1, 4),))
            _put(con, ids[call][0], ids[call][1], part)
            calls = rng.sample([f"c{k}" for k in range(30)], rng.randrange(1, 6))
            sessions = ["s1", "s2"] if n > 40 else ["s1"]  # s2's rows before it joined are learned when it does
            if sessions == ["s1", "s2"]:
                assert rows.tool_parts(db, sessions, calls) == _every_part(db, "s1", calls)[0]
            assert set(rows.cleared(db, "s1", calls)) == _every_part(db, "s1", calls)[1]
    finally:
        con.close()
