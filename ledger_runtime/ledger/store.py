"""The ledger file: one SQLite database per run (WAL), an append-only event log and a content-addressed blob table.

A step's events are committed together before the agent sees the step's result, so a killed run loses nothing the agent
acted on; triggers refuse updates and deletes. Blobs are keyed by their xxh3_128 hash, zlib-compressed when that helps.
A long blob that is a recent one with a part changed is stored as that change (codec ``patch``), at most ``PATCH_DEPTH``
deep; ledgers of schema 1 get no patches, so older readers can open them. Opening anything else raises ``NotALedger``:
``not a ledger: <path>: <why>``.

A blob read back from the file is checked, once, against its hash (``sums`` holds the hash of what is stored where the
key is another: a file's masked content under the file's digest): one that does not match is read as missing, and named
in ``damaged``; the copies a live run keeps in memory are not read back. A ledger of an older version kept no sums: its
masked file contents cannot be checked, and read as missing too, named in ``unchecked`` (the ledger is not damaged).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
import urllib.parse
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterable, Iterator

from ledger_runtime.json_text import UnreadableJSON, json_value
from ledger_runtime.ledger.private import private_dir, touch_private
from ledger_runtime.ledger.redact import Redactor
from ledger_runtime.lines import common_prefix, common_suffix
from ledger_runtime.workspace.hashing import digest_bytes

FORMAT = "ledger-runtime"
SCHEMA_VERSION = 2  # 2: blobs may be patches of other blobs
PATCH_MIN_BYTES = 64 * 1024  # a blob this long may be stored as a change of a recent one...
PATCH_MAX_SHARE = 4  # ...when the part that differs is at most a quarter of it
PATCH_DEPTH = 8  # changes of changes at most this deep (a read decodes each)
RECENT_BLOBS = 4  # long blobs kept in memory, written or read lately: what a new one may be a change of
PEEK = 1024  # a recent blob is compared with a new one only where they begin or end alike
LEDGER_FILE = "ledger.sqlite"
# the longest blob read back: what a writer with the default settings stores is at most 16 MiB (an
# output of 4 Mi characters, 4 bytes each at most) and a file's content 2 MiB; a reader that knows the
# run's settings reads no more than they let it write (writer_max)
MAX_BLOB_BYTES = 64 * 1024 * 1024
BLOB_SLACK_BYTES = 64 * 1024  # an answer's notes beside the output it stands for
# A writer waits this long for a lock another process holds on the ledger (an open `sqlite3` shell),
# and after a commit failed for a lock only QUICK_LOCK_S until one succeeds again: a locked ledger
# costs a command a second once, then next to nothing (what cannot be written goes to faults.log).
LOCK_TIMEOUT_S = 1.0
QUICK_LOCK_S = 0.05
# an event body's text: ``json.dumps`` with these arguments, without making an encoder per event
_BODY_JSON = json.JSONEncoder(separators=(",", ":"), sort_keys=True)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    step INTEGER,
    at REAL NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_step ON events(step);
CREATE TABLE IF NOT EXISTS blobs (
    hash TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    codec TEXT NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS sums (hash TEXT PRIMARY KEY, sum TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
"""


class NotALedger(Exception):
    """The path is not a ledger this version can read; ``str()`` is the one-line message."""

    def __init__(self, path: str | os.PathLike, why: str):
        self.path = str(path)
        self.why = why
        super().__init__(f"not a ledger: {self.path}: {why}")


class StoreError(Exception):
    """Writing to the ledger failed: a full disk, permissions, a locked file."""


def writer_max(max_stored_chars: int, max_content_bytes: int) -> int:
    """The longest blob a writer with these settings stores: 4 bytes a character and notes, capped at MAX_BLOB_BYTES."""
    return min(MAX_BLOB_BYTES, max(4 * max_stored_chars, max_content_bytes) + BLOB_SLACK_BYTES)


def inflated(data: bytes, size: int) -> bytes:
    """``data`` decompressed to at most ``size`` bytes and one more: a crafted blob never inflates past its claim."""
    d = zlib.decompressobj()
    out = d.decompress(data, size + 1)
    if len(out) <= size and not d.eof and not d.unconsumed_tail:
        raise zlib.error("the compressed data ends early")
    return out


def _unfit(size: Any, codec: Any, data: Any, most: int) -> str | None:
    """Why a blob's row cannot be its bytes: columns of the wrong type, or a size past ``most``."""
    if not isinstance(size, int) or not isinstance(codec, str) or not isinstance(data, bytes):
        return "a row whose columns are not a size, a codec and bytes"
    if not 0 <= size <= most:
        return f"says it is {size:,} bytes, more than a ledger writes ({most:,})"
    return None


def _code(sql: Any) -> str:
    return " ".join(str(sql).split())


_OUR_CODE: dict[tuple[str, str], str] = {}
OUR_TABLES = ("meta", "events", "blobs", "sums")  # what a ledger reads and writes
_SUMS = _SCHEMA[_SCHEMA.index("CREATE TABLE IF NOT EXISTS sums") :].split("\n")[0]
UNCHECKABLE = "stored by an older version under a key that is not its hash, with no sum to check it against"
SUMS_MARK = "blob_sums"  # in meta: every blob of this ledger stored under a key that is not its hash has its sum


def foreign_code(objects: Iterable[tuple[Any, Any, Any, Any]]) -> str | None:
    """Why a ledger's schema (its sqlite_master rows: type, name, tbl_name, sql) holds code that reading or
    writing the ledger would run and no ledger writes, or None. A view runs its query when read (a recursive
    ``meta`` never ends: ``inspect`` hung on one) and a trigger on one of the ledger's tables runs on each
    write of a run that reopens it (one ignoring every insert emptied the run). A view or trigger of a table
    the ledger never touches (a user's own, made for a look at the data) runs for none of it: left alone.
    Tables and indexes are data, judged row by row where they are read."""
    if not _OUR_CODE:
        db = sqlite3.connect(":memory:")
        db.executescript(_SCHEMA)
        _OUR_CODE.update({(t, n): _code(q) for t, n, q in db.execute("SELECT type, name, sql FROM sqlite_master")})
        db.close()
    for kind, name, table, sql in objects:
        ours = name if kind == "view" else table
        if kind in ("view", "trigger") and ours in OUR_TABLES and _OUR_CODE.get((kind, name)) != _code(sql):
            what = f"makes {ours} a view" if kind == "view" else f"holds a trigger on {ours} ({str(name)[:40]!r})"
            return f"its schema {what}, which no ledger writes: reading or writing it would run that code"
    return None


def ledger_path(path: str | os.PathLike) -> Path:
    """The ledger file for a run directory or a ledger file path."""
    p = Path(path)
    return p / LEDGER_FILE if p.is_dir() else p


def _why(e: BaseException) -> str:
    msg = str(e).strip() or type(e).__name__
    if "file is not a database" in msg:
        return "not an SQLite database (or a corrupt one)"
    if "malformed" in msg:
        return "the database is corrupt or truncated"
    return msg.splitlines()[0]


Event = dict[str, Any]


MAX_DIGITS = 4000  # below Python's limit on converting integers from text (4300 digits)


def _whole(text: str) -> int | float:
    """A JSON integer of an event's body; one too long for Python to read (a crafted ledger's) reads as
    infinity, which no field takes: the field is named as damaged, and the event is kept."""
    return int(text) if len(text) <= MAX_DIGITS else math.inf


def _body(text: str) -> Any:
    """An event's body; read again with ``_whole`` only where an integer too long for Python made it fail (a crafted
    ledger's): a hook through every integer of every event would double the time a ledger takes to read."""
    try:
        return json_value(text, dict)
    except UnreadableJSON:
        return json_value(text, dict, parse_int=_whole)


class LedgerStore:
    """A ledger file open for appending (``create``) or reading (``open``)."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        writable: bool,
        redactor: Redactor | None = None,
        schema: int = SCHEMA_VERSION,
    ):
        self.path = path
        self._conn = conn
        self.writable = writable
        self._patches = schema >= 2  # a ledger older readers may open gets whole blobs only
        self._recent: OrderedDict[str, tuple[bytes, int]] = OrderedDict()  # key -> (long blob, patch depth)
        # every blob and event body is masked with it before it is queued (redact.py)
        self.redactor = redactor or Redactor.off()
        self._locked = False  # the last commit failed for a lock
        # the connection the last commit set a busy_timeout on, and that timeout in ms
        self._busy: tuple[sqlite3.Connection, int] | None = None
        self._pending: list[tuple[str, int | None, str]] = []
        self._pending_blobs: dict[str, tuple[int, str, bytes]] = {}
        self._pending_sums: dict[str, str] = {}  # key -> hash of the bytes stored under it, where they differ
        self._checked: set[str] = set()  # blobs read back from the file that matched their hash
        self._summed = True  # written by a version that keeps ``sums`` (open: the mark in meta says)
        self._sums_table = True  # the file has a ``sums`` table to write to
        self.damaged: dict[str, str] = {}  # blobs in the file that do not read back: key -> why (read as missing)
        self.unchecked: dict[str, str] = {}  # an older version's, keyed not by their hash, no sum: read as missing
        self.damaged_events: list[str] = []  # event rows whose columns are not of their types (events())
        self.max_blob_bytes = MAX_BLOB_BYTES  # a blob that says it is longer is not read (writer_max: a run's own)

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def create(
        cls, path: str | os.PathLike, meta: dict[str, Any] | None = None, *, redactor: Redactor | None = None
    ) -> LedgerStore:
        """Creates a ledger and its directory, or opens an existing one to append; ``redactor`` masks the writes."""
        p = Path(path)
        if p.is_dir() or not p.suffix:
            private_dir(p)
            p = p / LEDGER_FILE
        else:
            private_dir(p.parent)
        # made before SQLite makes it (its -wal and -shm files take the database's mode); one that is there is
        # ours, a regular file, not a link (SQLite follows one: a resumed run wrote into the file it named)
        touch_private(p)
        if p.stat().st_size > 0:
            store = cls.open(p, writable=True)
            store.redactor = redactor or Redactor.off()
            return store
        try:
            conn = sqlite3.connect(str(p), isolation_level=None, check_same_thread=False, timeout=LOCK_TIMEOUT_S)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a committed step survives a killed process
            conn.executescript(_SCHEMA)
            rows = {"format": FORMAT, "schema_version": str(SCHEMA_VERSION), "created_at": repr(time.time())}
            rows[SUMS_MARK] = "1"
            rows.update({k: json.dumps(v) for k, v in (meta or {}).items()})
            with conn:
                conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", rows.items())
        except sqlite3.Error as e:
            raise StoreError(f"cannot create ledger {p}: {e}") from None
        return cls(p, conn, True, redactor)

    @classmethod
    def open(cls, path: str | os.PathLike, *, writable: bool = False, check: bool = True) -> LedgerStore:  # noqa: C901
        """Opens an existing ledger, or raises NotALedger; ``check`` reads the whole file for SQLite's quick check."""
        p = ledger_path(path)
        if not p.exists():
            if Path(path).is_dir():  # named as given: "/tmp/ledger.sqlite: no ledger.sqlite in this directory" was not
                raise NotALedger(path, f"no {LEDGER_FILE} in this directory")
            raise NotALedger(p, "no such file")
        if p.is_dir():
            raise NotALedger(p, "is a directory")
        if not p.is_file():  # a FIFO would hold the read of its first bytes; a device is no file of ours
            raise NotALedger(p, "not a regular file")
        if p.stat().st_size == 0:
            raise NotALedger(p, "empty file")
        try:
            with open(p, "rb") as f:
                head = f.read(16)
        except OSError as e:
            raise NotALedger(p, _why(e)) from None
        if head != b"SQLite format 3\x00":
            raise NotALedger(p, "not an SQLite database")
        try:
            conn = sqlite3.connect(str(p), isolation_level=None, check_same_thread=False, timeout=10)
            conn.execute("PRAGMA query_only=0" if writable else "PRAGMA query_only=1")
            try:
                schema = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
            except sqlite3.OperationalError as e:
                # a ledger on read-only media, or in a directory one may not write (SQLite cannot
                # make its -shm file there): read it as it is on disk
                if writable or not any(w in str(e) for w in ("unable to open", "readonly", "read-only")):
                    raise
                conn.close()
                wal = Path(str(p) + "-wal")
                if wal.exists() and wal.stat().st_size > 0:  # read as on disk, it would lack those steps
                    raise NotALedger(
                        p,
                        "its latest steps are still in its -wal file, which cannot be read here "
                        "(read-only): copy the run directory somewhere writable to inspect it",
                    ) from None
                conn = sqlite3.connect(
                    f"file:{urllib.parse.quote(str(p.resolve()))}?mode=ro&immutable=1",
                    uri=True,
                    isolation_level=None,
                    check_same_thread=False,
                    timeout=10,
                )
                schema = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
            foreign = foreign_code(schema)
            if foreign:
                raise NotALedger(p, foreign)
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("format") != FORMAT:
                raise NotALedger(p, "an SQLite database, but not a ledger (no ledger format mark)")
            try:
                version = int(meta.get("schema_version", "0"))
            except (TypeError, ValueError):
                raise NotALedger(p, "its schema version is not a number (damaged)") from None
            if version > SCHEMA_VERSION:
                raise NotALedger(p, f"written by a newer ledger-runtime (schema {version} > {SCHEMA_VERSION})")
            tables = {name for kind, name, _, _ in schema if kind == "table"}
            for table in ("events", "blobs"):
                if table not in tables:
                    raise NotALedger(p, f"a ledger without its {table} table (damaged)")
            if check and conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise NotALedger(p, "the database is corrupt or truncated")
        except NotALedger:
            raise
        except sqlite3.Error as e:
            if "no such table" in str(e):
                raise NotALedger(p, "an SQLite database, but not a ledger (no ledger tables)") from None
            raise NotALedger(p, _why(e)) from None
        if writable:
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(LOCK_TIMEOUT_S * 1000)}")
        store = cls(p, conn, writable, schema=version)
        store._summed = meta.get(SUMS_MARK) == "1"
        if writable:
            try:  # a ledger of an older version, resumed: the sums of the blobs this run adds
                conn.execute(_SUMS)
            except sqlite3.Error:  # locked meanwhile: its blobs go without sums, read back as an older version's
                store._summed = store._sums_table = False
        return store

    def close(self) -> None:
        try:
            self._conn.close()
        except sqlite3.Error:
            pass

    # -- writing -------------------------------------------------------------------------------

    def put_blob(self, data: bytes, key: str | None = None) -> str:
        """Queues ``data``, masked, for the next commit; returns its key.

        A file's content goes under ``key``, the file's digest, whatever hash its workspace uses; other blobs under
        their own hash."""
        return self._put(self.redactor.mask_bytes(data), key)

    def put_masked_blob(self, data: bytes, key: str | None = None) -> str:
        """``put_blob`` for ``data`` this store's redactor has masked already."""
        return self._put(data, key)

    def put_text(self, text: str) -> str:
        """Queues ``text``, masked, for the next commit; returns its key."""
        return self.put_masked(self.redactor.mask(text))

    def put_masked(self, text: str) -> str:
        """``put_text`` for ``text`` this store's redactor has masked already."""
        return self._put(text.encode("utf-8", "surrogateescape"))

    def _put(self, data: bytes, key: str | None = None) -> str:
        h = key or digest_bytes(data)
        if h not in self._pending_blobs and not self._stored(h):
            if key is not None:  # a file's content under the file's digest: what it reads back as is checked
                own = digest_bytes(data)
                if own != key:
                    self._pending_sums[key] = own
            patch = self._as_patch(data) if self._patches and len(data) >= PATCH_MIN_BYTES else None
            if patch is not None:
                self._pending_blobs[h] = (len(data), "patch", patch[0])
                self._keep(h, data, patch[1])
                return h
            # level 1: a changed file is stored on the command's path; deeper levels cost 3-4x the time
            packed = zlib.compress(data, 1) if len(data) > 512 else data
            codec = "zlib" if packed is not data and len(packed) < len(data) else "raw"
            self._pending_blobs[h] = (len(data), codec, packed if codec == "zlib" else data)
            self._keep(h, data, 0)
        return h

    def _as_patch(self, data: bytes) -> tuple[bytes, int] | None:
        """``data`` as a change of the recent blob sharing most of its ends, and its depth; None if none does."""
        best = None
        for key, (base, depth) in self._recent.items():
            if depth >= PATCH_DEPTH or (base[:PEEK] != data[:PEEK] and base[-PEEK:] != data[-PEEK:]):
                continue
            p = common_prefix(base, data)
            s = min(common_suffix(base, data), len(data) - p, len(base) - p)
            if best is None or p + s > best[1] + best[2]:
                best = (key, p, s, depth)
        if best is None:
            return None
        key, p, s, depth = best
        middle = data[p : len(data) - s]
        if len(middle) * PATCH_MAX_SHARE > len(data):
            return None
        return f"{key} {p} {s} {depth + 1}\n".encode() + zlib.compress(middle, 1), depth + 1

    def _keep(self, h: str, data: bytes, depth: int) -> None:
        if len(data) < PATCH_MIN_BYTES:
            return
        self._recent[h] = (data, depth)
        self._recent.move_to_end(h)
        while len(self._recent) > RECENT_BLOBS:
            self._recent.popitem(last=False)

    def _stored(self, h: str) -> bool:
        """Whether a blob is already in the file."""
        try:
            return self._conn.execute("SELECT 1 FROM blobs WHERE hash = ?", (h,)).fetchone() is not None
        except sqlite3.Error:
            return False

    def append(self, kind: str, body: dict[str, Any], step: int | None = None) -> dict[str, Any]:
        """Queues an event, masked, for the next commit; returns it as ``events`` reads it, less ``seq`` and ``at``."""
        body = self.redactor.mask_obj(body)
        self._pending.append((kind, step, _BODY_JSON.encode(body)))
        return event_of(body, kind, step)

    def commit(self) -> None:
        """Writes every queued event and blob in one transaction."""
        if not self._pending and not self._pending_blobs:
            return
        now = time.time()
        busy_ms = int((QUICK_LOCK_S if self._locked else LOCK_TIMEOUT_S) * 1000)
        if self._busy is None or self._busy[0] is not self._conn or self._busy[1] != busy_ms:
            # set when it changes: a pragma per commit cost as much as the rest of the commit's Python
            self._conn.execute(f"PRAGMA busy_timeout={busy_ms}")
            self._busy = (self._conn, busy_ms)
        else:  # a closed connection raises here, as the pragma did: outside the try, not a failed write (StoreError)
            self._conn.total_changes  # noqa: B018
        try:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany(
                    "INSERT OR IGNORE INTO blobs(hash, size, codec, data) VALUES (?, ?, ?, ?)",
                    [(h, size, codec, data) for h, (size, codec, data) in self._pending_blobs.items()],
                )
                if self._pending_sums and self._sums_table:
                    sums = list(self._pending_sums.items())
                    self._conn.executemany("INSERT OR IGNORE INTO sums(hash, sum) VALUES (?, ?)", sums)
                self._conn.executemany(
                    "INSERT INTO events(kind, step, at, body) VALUES (?, ?, ?, ?)",
                    [(k, s, now, b) for k, s, b in self._pending],
                )
        except sqlite3.Error as e:
            self._locked = "locked" in str(e) or "busy" in str(e)
            raise StoreError(f"cannot write to {self.path}: {e}") from None
        self._locked = False
        self._pending.clear()
        self._pending_blobs.clear()
        self._pending_sums.clear()

    def discard_pending(self) -> list[tuple[str, int | None, str]]:
        """Drops the queued events after a failed commit and returns them, to be logged."""
        pending, self._pending = self._pending, []
        for h in self._pending_blobs:  # never the base of a later change: it is not in the file
            self._recent.pop(h, None)
        self._pending_blobs.clear()
        self._pending_sums.clear()
        return pending

    def set_meta(self, key: str, value: Any) -> None:
        try:
            with self._conn:
                self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))
        except sqlite3.Error as e:
            raise StoreError(f"cannot write to {self.path}: {e}") from None

    # -- reading -------------------------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in self._conn.execute("SELECT key, value FROM meta"):
            try:
                out[k] = json_value(v)
            except UnreadableJSON:  # not JSON, or nested past the parser: the text
                out[k] = v
        return out

    def events(self, kinds: Iterable[str] | None = None) -> Iterator[Event]:
        """Events in order, each ``{"seq", "kind", "step", "at", **body}``; an unreadable row becomes a ``fault``.

        A body's own value under one of those names, such as an observation's ``kind``, is kept in ``"shadowed"``."""
        sql = "SELECT seq, kind, step, at, body FROM events"
        params: tuple = ()
        if kinds is not None:
            kinds = list(kinds)
            sql += f" WHERE kind IN ({','.join('?' * len(kinds))})"
            params = tuple(kinds)
        sql += " ORDER BY seq"
        try:
            rows = self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise NotALedger(self.path, _why(e)) from None
        for seq, kind, step, at, body in rows:
            kind, step, at = self._envelope(seq, kind, step, at)
            try:
                data = _body(body)
            except UnreadableJSON as e:
                self.damaged_events.append(
                    f"event {seq}: its body does not read ({str(e)[:200]}): a fault in its place"
                )
                yield {"seq": seq, "kind": "fault", "step": step, "at": at, "message": f"unreadable event {seq}: {e}"}
                continue
            yield event_of(data, kind, step, seq, at)

    def _envelope(self, seq: Any, kind: Any, step: Any, at: Any) -> tuple[str, int | None, float]:
        """An event row's kind, step and time as their types say; a crafted row's are named in ``damaged_events``."""
        wrong = []
        if not isinstance(kind, str):
            wrong.append(f"its kind is {kind!r}, not text")
            kind = repr(kind)
        if step is not None and (not isinstance(step, int) or isinstance(step, bool) or abs(step) >= 2**53):
            wrong.append("its step is not a whole number: read as none")
            step = None
        if not isinstance(at, (int, float)) or isinstance(at, bool) or not math.isfinite(at):
            wrong.append("its time is not a number: read as 0")
            at = 0.0
        self.damaged_events += [f"event {seq}: {w}" for w in wrong]
        return kind, step, at

    def blob(self, h: str, _depth: int = 0) -> bytes | None:
        """A blob's bytes; None where it is missing or damaged, with the reason in ``damaged``."""
        recent = self._recent.get(h)
        if recent is not None:
            return recent[0]
        from_file = h not in self._pending_blobs
        if not from_file:
            size, codec, data = self._pending_blobs[h]
        elif h in self.damaged or (h in self.unchecked and not _depth):
            return None
        else:
            row = self._conn.execute("SELECT size, codec, data FROM blobs WHERE hash = ?", (h,)).fetchone()
            if row is None:
                return None
            size, codec, data = row
        why = _unfit(size, codec, data, self.max_blob_bytes)
        if why is not None:
            self.damaged[h] = why
            return None
        out, patch_depth = self._decoded(h, codec, bytes(data), size, _depth)
        if out is not None and len(out) != size:
            self.damaged[h] = f"{len(out)} bytes where {size} were stored"
            return None
        if out is not None and from_file and h not in self._checked and not self._matches(h, out, _depth):
            return out if _depth else None  # the base of a change: what it makes is checked, this is not kept
        if out is not None:  # only what read back whole is kept for later reads and patches
            self._keep(h, out, patch_depth)
        return out

    def _matches(self, h: str, data: bytes, depth: int) -> bool:
        """Whether a blob read back from the file is the one stored under ``h``; where read for itself (not as the base
        of a change) and not, named in ``damaged`` or ``unchecked``."""
        why = self._mismatch(h, data)
        if why is None:
            self._checked.add(h)
        elif not depth:
            (self.unchecked if why == UNCHECKABLE else self.damaged)[h] = why
        return why is None

    def _mismatch(self, h: str, data: bytes) -> str | None:
        """Why a blob read back from the file is not the one stored under ``h`` (its bytes hash to another), or None."""
        own = digest_bytes(data)
        if own == h:
            return None
        try:
            row = self._conn.execute("SELECT sum FROM sums WHERE hash = ?", (h,)).fetchone()
        except sqlite3.Error:  # a ledger of an older version, read-only: no sums
            row = None
        if row is not None and row[0] == own:
            return None
        if row is None and not self._summed:
            return UNCHECKABLE
        return "does not match its hash: changed since it was stored"

    def _decoded(self, h: str, codec: str, data: bytes, size: int, depth: int) -> tuple[bytes | None, int]:
        """A stored blob's bytes and patch depth; None where they do not decode."""
        try:
            if codec == "raw":
                return data, 0
            if codec == "zlib":
                return inflated(data, size), 0
            if codec == "patch":
                decoded = self._unpatch(h, data, size, depth)
                if decoded is None:
                    self.damaged.setdefault(h, "a change of another blob that does not apply")
                    return None, 0
                return decoded
            self.damaged[h] = f"stored with an unknown codec {codec!r}"
        except zlib.error as e:
            self.damaged[h] = f"does not decompress ({e})"
        return None, 0

    def _unpatch(self, h: str, packed: bytes, size: int, depth: int) -> tuple[bytes, int] | None:
        """A blob stored as a change of another, and its patch depth; None where it does not decode."""
        line, _, rest = packed.partition(b"\n")
        try:
            key, p, s, d = line.decode("ascii").split(" ")
            p, s, d = int(p), int(s), int(d)
        except ValueError:
            return None
        if depth > PATCH_DEPTH or key == h or p < 0 or s < 0 or p + s > size:
            return None
        base = self.blob(key, depth + 1)
        if base is None or p + s > len(base):
            return None
        middle = inflated(rest, size - p - s)  # zlib.error: damaged (_decoded)
        return base[:p] + middle + base[len(base) - s :], d

    def has_blob(self, h: str) -> bool:
        if h in self._pending_blobs:
            return True
        return self._conn.execute("SELECT 1 FROM blobs WHERE hash = ?", (h,)).fetchone() is not None

    def text(self, h: str | None) -> str | None:
        data = self.blob(h) if h else None
        return None if data is None else data.decode("utf-8", "surrogateescape")


def event_of(
    body: dict[str, Any], kind: str, step: int | None, seq: int | None = None, at: float | None = None
) -> Event:
    """An event as ``LedgerStore.events`` reads it back."""
    envelope = {"seq": seq, "kind": kind, "step": step, "at": at}
    shadowed = {k: body[k] for k in envelope if k in body and body[k] != envelope[k]}
    return {**body, **envelope, **({"shadowed": shadowed} if shadowed else {})}
