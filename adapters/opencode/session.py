"""OpenCode's own record of a run: its database (``opencode.db``, SQLite, under ``$XDG_DATA_HOME/opencode``),
where each session's messages are rows and each tool call is a ``part`` (its call id, input, state:
``completed`` with the ``output`` the model got, or ``error``). What the hooks read of it (``ToolParts``):
the calls the model made and what it got for each, to check what the ledger recorded. What the run
keeps of it (``export``): its sessions' messages and parts, masked, in ``RUN_DIR/sessions/<id>.json``,
which the run's page reads as the model's side of the run (``conversation``; ``FORMAT``).

Only read, never written: each read opens the database read-only (``mode=ro``), so a database OpenCode
is writing is read as it stands (SQLite's WAL), and one that cannot be read reads as nothing.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger_adapters.opencode.tools import tool_call
from ledger_runtime import (
    Conversation,
    ModelTurn,
    RecordedFormat,
    TrajectoryError,
    UnreadableJSON,
    json_value,
    read_record,
)


def db_path(env: dict[str, str]) -> Path:
    """Where OpenCode keeps its database for this environment."""
    if env.get("OPENCODE_DB"):
        return Path(env["OPENCODE_DB"])
    return _data_dir(env) / "opencode.db"


def auth_path(env: dict[str, str]) -> Path:
    """Where OpenCode keeps the user's login (API keys, OAuth tokens) for this environment."""
    return _data_dir(env) / "auth.json"


def _data_dir(env: dict[str, str]) -> Path:
    """OpenCode's data directory for this environment (XDG's data home, else ~/.local/share)."""
    data = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME") or str(Path.home()), ".local", "share")
    return Path(data) / "opencode"


# how long a read made while a call waits for its answer waits on a lock: OpenCode writes in WAL mode, where a reader
# never waits, so a lock is another program's, and the call goes on without the read
CALL_WAIT_S = 0.05
ROWIDS_A_QUERY = 500  # SQLite before 3.32 takes 999 parameters a query


def _connect(db: Path, wait: float) -> sqlite3.Connection:
    # the path quoted: a '?', a '#' or a '%' in it would name another file, opened read-write
    return sqlite3.connect(f"file:{urllib.parse.quote(str(db))}?mode=ro", uri=True, timeout=wait)


def _query(db: Path, sql: str, args: tuple[Any, ...], wait: float = 2.0) -> list[tuple[Any, ...]]:
    """The rows of ``sql``; raises sqlite3.Error when the database cannot be read (not there, locked, other tables)."""
    con = _connect(db, wait)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def _rows(db: Path, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    try:
        return _query(db, sql, args)
    except sqlite3.Error:
        return []


def _json(text: Any) -> dict[str, Any]:
    try:
        return json_value(text, dict)
    except UnreadableJSON:  # a part nested past the parser (a model's tool input) too
        return {}


def _tool_call_id(part: dict[str, Any]) -> str | None:
    return part["callID"] if part.get("type") == "tool" and isinstance(part.get("callID"), str) else None


def tool_parts(db: Path, session_ids: list[str], wait: float = 2.0) -> dict[str, dict[str, Any]]:
    """call id -> the tool part OpenCode recorded for it (``tool``, ``state``), of these sessions; raises sqlite3.Error
    when the database cannot be read (``wait``: seconds a lock is waited on)."""
    if not session_ids:
        return {}
    marks = ",".join("?" * len(session_ids))
    out = {}
    sql = f"select data from part where session_id in ({marks}) order by id"
    for (data,) in _query(db, sql, tuple(session_ids), wait):
        part = _json(data)
        if _tool_call_id(part) is not None:
            out[part["callID"]] = part
    return out


def _cleared_ids(rows: list[Any]) -> list[str]:
    out = []
    for data in rows:
        part = _json(data)
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        times = state.get("time") if isinstance(state.get("time"), dict) else {}
        if _tool_call_id(part) is not None and times.get("compacted"):
            out.append(part["callID"])
    return out


@dataclass
class PartRows:
    """Where each tool call's part is in OpenCode's database (its rowid), learned from the rows a session added since
    the last read: a read of a few calls' parts parses those calls' rows and the new ones, never the whole session
    (a long session's outputs were read and parsed at every call, a cost growing with the run). OpenCode updates a
    part in place (an upsert keeps its rowid); a part written again under a new rowid is a new row, learned so; a row
    whose rowid was learned for another part is found by the part's call id, read with it."""

    read_to: dict[str, tuple[int, Any]] = field(default_factory=dict)  # session id -> its last row learned (rowid, id)
    rows: dict[str, list[int]] = field(default_factory=dict)  # call id -> the rowids of its tool parts

    def _learn(self, con: sqlite3.Connection, session_ids: list[str]) -> None:
        for sid in session_ids:
            rowid, part_id = self.read_to.get(sid, (0, None))
            if rowid and con.execute("select id from part where rowid = ?", (rowid,)).fetchall() != [(part_id,)]:
                # the last row learned is gone (OpenCode's revert deletes the latest parts): SQLite gives a rowid
                # past the largest there is, so the rows added since may have rowids learned before; learned anew
                rowid = 0
            sql = "select rowid, id, data from part where session_id = ? and rowid > ? order by rowid"
            for rowid, part_id, data in con.execute(sql, (sid, rowid)):
                self.read_to[sid] = (rowid, part_id)
                call = _tool_call_id(_json(data))
                if call is not None and rowid not in self.rows.setdefault(call, []):
                    self.rows[call].append(rowid)

    def _parts_of(self, con: sqlite3.Connection, calls: list[str], where: str, args: tuple[Any, ...]) -> list[Any]:
        """The data of these calls' rows that meet ``where``, by part id (a chunk of rowids a query: SQLite's limit on
        a query's parameters)."""
        rowids = sorted({r for c in calls for r in self.rows.get(c, [])})
        out = []
        for i in range(0, len(rowids), ROWIDS_A_QUERY):
            chunk = rowids[i : i + ROWIDS_A_QUERY]
            sql = f"select data from part where rowid in ({','.join('?' * len(chunk))}){where} order by id"
            out += [data for (data,) in con.execute(sql, (*chunk, *args))]
        return out

    def tool_parts(self, db: Path, session_ids: list[str], calls: list[str], wait: float = 2.0) -> dict[str, Any]:
        """call id -> the tool part OpenCode recorded for it (``tool``, ``state``), of these calls in these sessions
        (its last by part id, as ``tool_parts``); raises sqlite3.Error when the database cannot be read (``wait``:
        seconds a lock is waited on)."""
        if not session_ids or not calls:
            return {}
        con = _connect(db, wait)
        try:
            con.execute("begin")  # one snapshot: the rows learned are the rows read
            self._learn(con, session_ids)
            wanted, out = set(calls), {}
            for data in self._parts_of(con, calls, "", ()):
                part = _json(data)
                if _tool_call_id(part) in wanted:
                    out[part["callID"]] = part
            return out
        finally:
            con.close()

    def cleared(self, db: Path, session_id: str, calls: list[str]) -> list[str]:
        """Which of these calls' tool parts in this session have their output cleared from what OpenCode sends the model
        (its prune, ``"compaction": {"prune": true}``: ``state.time.compacted``), in order; raises sqlite3.Error when
        the database cannot be read (a lock is waited on ``CALL_WAIT_S``: a call waits for this read)."""
        if not calls:
            return []
        con = _connect(db, CALL_WAIT_S)
        try:
            con.execute("begin")
            self._learn(con, [session_id])
            # only the rows that name it are parsed
            rows = self._parts_of(con, calls, " and session_id = ? and data like ?", (session_id, "%compacted%"))
            wanted = set(calls)
            return [c for c in _cleared_ids(rows) if c in wanted]
        finally:
            con.close()


def export(db: Path, session_ids: list[str]) -> dict[str, dict[str, Any]]:
    """session id -> the session (its row's title and parent) with its messages, each with its parts, in order."""
    out: dict[str, dict[str, Any]] = {}
    for sid in session_ids:
        rows = _rows(db, "select title, parent_id, directory from session where id = ?", (sid,))
        if not rows:
            continue
        title, parent, directory = rows[0]
        messages = []
        for mid, data in _rows(db, "select id, data from message where session_id = ? order by id", (sid,)):
            parts = [_json(p) for (p,) in _rows(db, "select data from part where message_id = ? order by id", (mid,))]
            messages.append({"id": mid, "info": _json(data), "parts": parts})
        out[sid] = {"id": sid, "title": title, "parent": parent, "directory": directory, "messages": messages}
    return out


# -- the model's side of a run, for its page ------------------------------------------------------------


def _turn(info: dict[str, Any], parts: list[dict[str, Any]], workdir: str) -> ModelTurn:
    tokens = info.get("tokens") if isinstance(info.get("tokens"), dict) else {}
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    times = info.get("time") if isinstance(info.get("time"), dict) else {}
    commands = []
    for p in parts:
        state = p.get("state") if isinstance(p.get("state"), dict) else {}
        found = tool_call(p.get("tool"), state.get("input"), workdir, workdir) if p.get("type") == "tool" else None
        if found is not None:
            commands.append(found.label)
    seconds = None
    if isinstance(times.get("created"), int) and isinstance(times.get("completed"), int):
        seconds = max(0, times["completed"] - times["created"]) / 1000
    return ModelTurn(
        "\n".join(p.get("text", "") for p in parts if p.get("type") == "text" and not p.get("synthetic")),
        "\n".join(p.get("text", "") for p in parts if p.get("type") == "reasoning"),
        tuple(commands),
        _int(tokens.get("input")),
        _int(cache.get("read")),
        _int(tokens.get("output")),
        info.get("cost")
        if isinstance(info.get("cost"), (int, float)) and not isinstance(info.get("cost"), bool)
        else None,
        seconds,
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def conversation(path: Path) -> Conversation:
    """A session the run kept (``export``) as the model's side of the run: one turn per model call (an
    assistant message: its text, reasoning, tool calls, tokens, cost and time)."""
    try:
        session = json_value(read_record(path))
    except (OSError, ValueError) as e:  # UnreadableJSON
        raise TrajectoryError(f"{path}: cannot read: {e}") from None
    if not isinstance(session, dict) or not isinstance(session.get("messages"), list) or "parent" not in session:
        raise TrajectoryError(f"{path}: not an OpenCode session kept by ledger-run (no messages)")
    turns, task = [], ""
    for m in session["messages"]:
        info, parts = m.get("info") or {}, [p for p in m.get("parts") or [] if isinstance(p, dict)]
        if info.get("role") == "user" and not task:
            task = "\n".join(p.get("text", "") for p in parts if p.get("type") == "text" and not p.get("synthetic"))
        elif info.get("role") == "assistant" and info.get("mode") != "compaction":
            where = info.get("path") if isinstance(info.get("path"), dict) else {}
            turns.append(_turn(info, parts, str(where.get("root") or session.get("directory") or "/")))
    return Conversation(str(path), turns, task)


def locate(ledger: Path) -> list[Path]:
    """The sessions the run that kept ``ledger`` took from OpenCode's database (``sessions/*.json``
    beside it), but its subagents' (their calls are not the main model's); oldest first."""
    found = []
    for path in sorted((ledger.parent / "sessions").glob("ses_*.json")):
        try:
            if _json(read_record(path).decode()).get("parent") is None:
                found.append(path)
        except OSError:
            continue
    return found


FORMAT = RecordedFormat("opencode", locate=locate, conversation=conversation)
