"""A crafted ledger (issue 37 item 6): ``ledger-run inspect`` (the timeline, ``--json``, ``--html``,
``--step``, ``--output``, ``--expand``) reads any ledger file without a traceback, a hang or unbounded
memory. A blob is never inflated past the size it claims nor past what the run's writer stores; an event
field of the wrong type is folded as a value that says so, named in one ``damaged:`` line (exit 1), and
the record stays. A fuzz test (hypothesis) crafts event bodies, table columns and blob rows."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from conftest import make_repo

from ledger_runtime.cli.inspect_command import InspectOptions, run, validate
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.inspection import load
from ledger_runtime.runtime import LedgerRuntime

CALC = "def add(a, b):\n    return a - b\n" + "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(30))
COMMANDS = [
    "cat calc.py",
    "cat calc.py",  # a whole answer
    "sed -n '3,20p' calc.py",  # spans
    "sed -i '2s/a - b/a + b/' calc.py",
    "cat calc.py",  # a delta
    "python3 -c 'print(1)'",
    "false",
    "false",  # a NUDGE
]
MEASURE = "import resource, subprocess, sys; subprocess.run(sys.argv[1:], capture_output=True); "
MEASURE += "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory) -> Path:
    """A real run's ledger: reads, repeats, an edit, a re-read, a failure, a model call, a compaction."""
    base = tmp_path_factory.mktemp("crafted")
    repo = make_repo(base / "repo", {"calc.py": CALC})
    rt = LedgerRuntime(repo, base / "run", LedgerConfig(), task="make add add")
    ex = LocalExecutor()
    for c in COMMANDS:
        rt.run(c, ex)
    rt.note_model_call(0.01)
    rt.note_injection("note", "x")
    rt.forget_context()
    rt.close()
    return base / "run" / "ledger.sqlite"


def crafted(ledger: Path, where: Path, *changes: tuple[str, tuple]) -> Path:
    """A copy of ``ledger`` with SQL ``changes`` made to it (its append-only triggers dropped first)."""
    where.mkdir(parents=True, exist_ok=True)
    path = where / "ledger.sqlite"
    shutil.copy(ledger, path)
    db = sqlite3.connect(path)
    db.execute("DROP TRIGGER events_no_update")
    for sql, args in changes:
        with contextlib.suppress(sqlite3.IntegrityError):  # a NOT NULL the table holds: no such file
            db.execute(sql, args)
    db.commit()
    db.close()
    return where


def body(ledger: Path, kind: str, nth: int = 0) -> tuple[int, dict]:
    db = sqlite3.connect(ledger)
    seq, raw = db.execute("SELECT seq, body FROM events WHERE kind = ? ORDER BY seq", (kind,)).fetchall()[nth]
    db.close()
    return seq, json.loads(raw)


def inspect(run_dir: Path, **options: Any) -> tuple[int, str, str]:
    """``ledger-run inspect`` in this process: (exit code, stdout, stderr). Anything raised but the
    command's own exits fails the test (a traceback)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            run(validate(InspectOptions(run=run_dir, **options)))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except Exception as e:  # typer.Exit (the one-line errors) carries its code
            if type(e).__name__ != "Exit":
                raise
            code = e.exit_code  # type: ignore[attr-defined]
    return code, out.getvalue(), err.getvalue()


VARIANTS = [
    {},
    {"as_json": True},
    {"step": 5},
    {"step": 5, "as_json": True},
    {"step": 5, "output": True},
    {"step": 2, "expand": True},
]


def every_view(run_dir: Path) -> list[tuple[int, str, str]]:
    """Every way of inspecting the run, the page too; each line on stderr says what it is."""
    got = [inspect(run_dir, **v) for v in VARIANTS] + [inspect(run_dir, html=run_dir / "page.html")]
    for code, _, err in got:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert all(ln.startswith(("error:", "damaged:", "wrote ")) for ln in lines), err
    return got


def test_a_blob_that_inflates_past_its_size_or_the_writers_maximum_is_not_read(ledger: Path, tmp_path: Path) -> None:
    """A 100 KiB blob that inflates to 48 MiB: claimed as 48 MiB (more than the run's writer stores)
    and claimed as 100 bytes (a lie): neither is inflated; inspect --json's memory stays that of the
    same ledger without it (before: it decompressed all of it and printed it, 1.3 GB for 256 MiB)."""
    zeros = zlib.compress(b"\0" * (48 << 20), 9)
    first = load(ledger.parent).state.attempts[0]
    honest = crafted(
        ledger,
        tmp_path / "honest",
        ("UPDATE blobs SET size = ?, codec = 'zlib', data = ? WHERE hash = ?", (48 << 20, zeros, first.shown_hash)),
    )
    lying = crafted(
        ledger,
        tmp_path / "lying",
        ("UPDATE blobs SET size = 100, codec = 'zlib', data = ? WHERE hash = ?", (zeros, first.shown_hash)),
    )
    cli = [sys.executable, "-m", "ledger_runtime.cli", "inspect", "--json"]

    def peak(run_dir: Path) -> int:
        p = subprocess.run([sys.executable, "-c", MEASURE, *cli, str(run_dir)], capture_output=True, text=True)
        return int(p.stdout.strip()) * 1024  # kilobytes on Linux

    plain = peak(ledger.parent)
    for run_dir, why in [(honest, "more than a ledger writes"), (lying, "bytes where 100 were stored")]:
        p = subprocess.run([*cli, str(run_dir)], capture_output=True, text=True, timeout=300)
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
        assert f"damaged: the ledger's blob {first.shown_hash[:12]}" in p.stderr and why in p.stderr, p.stderr
        data = json.loads(p.stdout)
        assert data["timeline"][0]["shown"] is None and why in data["damaged"][first.shown_hash]
        assert peak(run_dir) < plain + (24 << 20), "the blob was inflated"


@pytest.mark.parametrize(
    "kind,field,value,named",
    [
        ("attempt", "command", {"x": 1}, "command is an object, not text"),
        ("attempt", "output_chars", "1234", "output_chars is text, not a count"),
        ("attempt", "read_set", ["f:/x"], "read_set is a list, not an object of texts"),
        ("attempt", "step", {"x": 1}, "step is an object, not a whole number"),
        ("attempt", "id", "seven", "id is text, not a whole number"),
        ("run", "config", [1, 2], "config is a list, not an object"),
        ("observation", "path", 10**30, "path is a number out of range, not text"),
        ("modification", "after_hash", {"h": 1}, "after_hash is an object, not a digest"),
        ("baseline", "root", {"x": 1}, "root is an object, not text"),
    ],
)
def test_an_event_field_of_the_wrong_type_is_shown_as_damaged(
    ledger: Path, tmp_path: Path, kind: str, field: str, value: Any, named: str
) -> None:
    seq, b = body(ledger, kind)
    b[field] = value
    run_dir = crafted(ledger, tmp_path / "r", ("UPDATE events SET body = ? WHERE seq = ?", (json.dumps(b), seq)))
    got = every_view(run_dir)
    for code, _, err in got:
        assert code in (1, 2), err  # 2: --step 5 of a ledger whose step 5 the damage moved away
        assert code == 2 or f"damaged: {kind} event {seq}: {named}" in err, err
    assert len(load(run_dir).state.attempts) == len(COMMANDS), "the damaged record is kept"
    data = json.loads(got[1][1])
    assert any(f"{kind} event {seq}: {field} " in line for line in data["damaged_fields"])
    if field == "command":
        assert data["timeline"][0]["command"] == "[damaged field]"


def test_rows_whose_columns_are_not_their_types_are_read_as_damaged(ledger: Path, tmp_path: Path) -> None:
    first = load(ledger.parent).state.attempts[0]
    run_dir = crafted(
        ledger,
        tmp_path / "r",
        ("UPDATE events SET step = 'five' WHERE seq = 3", ()),
        ("UPDATE events SET at = 'noon' WHERE seq = 4", ()),
        ("UPDATE events SET kind = 7 WHERE seq = 5", ()),
        ("UPDATE events SET body = 12 WHERE seq = 6", ()),
        ("UPDATE blobs SET size = 'big' WHERE hash = ?", (first.shown_hash,)),
        ("UPDATE meta SET value = 5 WHERE key = 'created_at'", ()),
    )
    for code, _, err in every_view(run_dir):
        assert code in (1, 2), err  # 2: --step of a command the damage moved away
    _, _, err = inspect(run_dir, as_json=True)
    assert "damaged: event 3: its step is not a whole number: read as none" in err
    assert f"the ledger's blob {first.shown_hash[:12]} a row whose columns are not" in err
    schema = crafted(ledger, tmp_path / "s", ("UPDATE meta SET value = 'two' WHERE key = 'schema_version'", ()))
    code, _, err = inspect(schema)
    assert code == 2 and err.startswith("error: not a ledger:") and "schema version is not a number" in err


hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed: pip install -e '.[test]'")
st = pytest.importorskip("hypothesis.strategies")

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
SQL_VALUE = (
    st.none()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=40)
)


def paths_into(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON value a crafted one can go (keys of objects, indexes of lists)."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths_into(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths_into(v, (*prefix, i))
    return out


def replaced(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    value = json.loads(json.dumps(value))
    at = value
    for p in path[:-1]:
        at = at[p]
    at[path[-1]] = new
    return value


@pytest.mark.slow
@hypothesis.settings(max_examples=120, deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(data=st.data())
def test_fuzz_no_crafted_ledger_makes_inspect_fail_with_a_traceback(ledger: Path, tmp_path_factory, data) -> None:
    db = sqlite3.connect(ledger)
    events = db.execute("SELECT seq, body FROM events ORDER BY seq").fetchall()
    blobs = [h for (h,) in db.execute("SELECT hash FROM blobs")]
    db.close()
    changes = []
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        what = data.draw(st.sampled_from(["body", "body", "body", "column", "blob"]), label="what")
        if what == "body":
            seq, raw = data.draw(st.sampled_from(events), label="event")
            b = json.loads(raw)
            path = data.draw(st.sampled_from(paths_into(b)[1:] or [()]), label="path")
            new = replaced(b, path, data.draw(JSON, label="value"))
            changes.append(("UPDATE events SET body = ? WHERE seq = ?", (json.dumps(new), seq)))
        elif what == "column":
            seq, _ = data.draw(st.sampled_from(events), label="event")
            col = data.draw(st.sampled_from(["kind", "step", "at", "body"]), label="column")
            changes.append((f"UPDATE events SET {col} = ? WHERE seq = ?", (data.draw(SQL_VALUE, label="value"), seq)))
        else:
            h = data.draw(st.sampled_from(blobs), label="blob")
            col = data.draw(st.sampled_from(["size", "codec", "data"]), label="column")
            changes.append((f"UPDATE blobs SET {col} = ? WHERE hash = ?", (data.draw(SQL_VALUE, label="value"), h)))
    run_dir = crafted(ledger, tmp_path_factory.mktemp("fuzz"), *changes)
    for code, _, err in every_view(run_dir):
        assert code in (0, 1, 2), err
