"""The one reader of JSON records (``json_value``): every way a record fails to read is one UnreadableJSON whose
line says why, and the readers that used ``json.loads`` with their own ``except`` clauses, several of which let JSON
nested past the parser (a RecursionError, no ValueError) end in a traceback, now say it or skip the record."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_runtime import UnreadableJSON, json_value, mask_json_file
from ledger_runtime.json_text import json_kind, nested_deeper
from ledger_runtime.ledger.redact import Redactor

DEEP = "[" * 5000 + "]" * 5000
SECRET = "sekrit-value-1234"


@pytest.mark.parametrize(
    "text,kind,said",
    [
        ("{", None, "not JSON: Expecting property name enclosed in double quotes at line 1, column 2"),
        ('["a\x01"]', None, "not JSON: Invalid control character at line 1, column 4"),
        ("[" * 5000, None, "JSON nested deeper than it can be read"),
        ('{"a":' * 5000, dict, "JSON nested deeper than it can be read"),
        (b"\xff\xfe\xfd", None, "not JSON: bytes that are not UTF-8 text"),
        (None, None, "not JSON text: a NoneType"),
        ("1" * 5000, None, "not JSON that can be read: Exceeds the limit (4300 digits) for integer string conversion"),
        ("[1]", dict, "not a JSON object (a JSON array)"),
        ("null", dict, "not a JSON object (JSON null)"),
        ("true", dict, "not a JSON object (a JSON boolean)"),
        ('"x"', list, "not a JSON array (a JSON string)"),
    ],
)
def test_each_way_a_record_fails_to_read_is_one_line_saying_why(text, kind, said) -> None:
    with pytest.raises(UnreadableJSON) as e:
        json_value(text, kind)
    assert str(e.value).startswith(said) and "\n" not in str(e.value)
    assert isinstance(e.value, ValueError), "callers that catch ValueError keep catching it"


def test_a_record_that_reads_is_what_json_loads_gives() -> None:
    assert json_value('{"a": [1, 2.5, null, true]}', dict) == {"a": [1, 2.5, None, True]}
    assert json_value(b"[1]", list) == [1] and json_value(bytearray(b"3")) == 3
    assert json_value("1" * 5000, parse_int=len) == 5000


def test_the_error_quotes_none_of_the_text() -> None:
    # a record may hold a secret: the line says why it does not read, never what it holds
    for text in (f'{{"key": "{SECRET}"', f'["{SECRET}"]', f'"{SECRET}"'):
        with pytest.raises(UnreadableJSON) as e:
            json_value(text, dict)
        assert SECRET not in str(e.value)


@pytest.mark.parametrize(
    "value,kind", [({}, "a JSON object"), ([], "a JSON array"), (None, "JSON null"), (1.5, "a JSON number")]
)
def test_json_kind_names_a_value(value, kind) -> None:
    assert json_kind(value) == kind


def test_nested_deeper_counts_levels_without_recursion() -> None:
    deep: list = []
    for _ in range(100_000):  # past any recursion limit: the walk is a loop
        deep = [deep]
    assert nested_deeper(deep, 100) and not nested_deeper({"a": [[1]]}, 3) and nested_deeper({"a": [[1]]}, 2)
    assert not nested_deeper("text", 0) and not nested_deeper({"a": 1, "b": [2]}, 2)


def test_a_json_file_nested_too_deep_is_masked_in_place_not_a_traceback(tmp_path: Path) -> None:
    """mask_json_file caught ValueError: JSON nested past the parser ended the run's last step with a traceback,
    and JSON just under it did so where masking walked it. Now its strings are masked where they stand."""
    for depth in [*range(700, 1001, 10), 5000]:  # where the parser stops and masking goes on depends on the stack
        under = tmp_path / f"under{depth}.json"
        under.write_text("[" * depth + f'"{SECRET}"' + "]" * depth)
        said = mask_json_file(under, Redactor([SECRET]))
        assert said is None, said
        assert SECRET not in under.read_text()


def test_agent_records_nested_too_deep_are_skipped_or_named_not_a_traceback(tmp_path: Path) -> None:
    """Each of these readers let RecursionError through: a rollout's first line, the user's auth.json, a
    mini-swe-agent trajectory (replay's safety net named it only as "the reader failed: RecursionError"), an
    actions.jsonl row, which lost every row after it with it."""
    from ledger_adapters.codex.cli import login_secrets
    from ledger_adapters.codex.rollout import is_subagents
    from ledger_adapters.mini import trajectories

    (tmp_path / "rollout.jsonl").write_text(DEEP + "\n")
    assert is_subagents(tmp_path / "rollout.jsonl") is False
    (tmp_path / "auth.json").write_text(DEEP)
    assert login_secrets(tmp_path) == ()
    traj = tmp_path / "x.traj.json"
    traj.write_text(DEEP)
    with pytest.raises(trajectories.TrajectoryError, match="x.traj.json: JSON nested deeper than it can be read"):
        trajectories.conversation(traj)
    assert trajectories._names(traj, tmp_path / "ledger.sqlite") is False
    actions = tmp_path / "actions.jsonl"
    actions.write_text(DEEP + "\n" + '{"instance_id": "i", "step": 1, "command": "ls"}\n')
    notes: list[str] = []
    assert [t.instance_id for t in trajectories.from_actions_jsonl(actions, notes)] == ["i"]
    assert notes == [f"{actions}:1: skipped a malformed row (JSON nested deeper than it can be read)"]


def test_harness_records_nested_too_deep_read_as_text_or_are_skipped(tmp_path: Path) -> None:
    """A tau2 tool's result nested past the parser ended LedgerAgent's step with a traceback, and a replay's result
    file so nested ended the replay's report."""
    from ledger_harness.replay.report import load_results
    from ledger_harness.tau2.paths import parse

    assert parse(DEEP) == DEEP
    (tmp_path / "a.json").write_text(DEEP)
    (tmp_path / "b.json").write_text('{"status": "done", "instance_id": "b"}')
    assert [r["instance_id"] for r in load_results(tmp_path)] == ["b"]


@pytest.mark.parametrize(
    "text,said",
    [
        ("not json", "not JSON: Expecting value at line 1, column 1"),
        (DEEP, "JSON nested deeper than it can be read"),
        ('{"id": 1}', "not a JSON array (a JSON object)"),
        # a list of other things: each was read as a task, and the first that is not one was a traceback
        ("[1]", 'task 1 is not a task (a JSON object with an "id" string)'),
        ('[{"id": "0"}, {"id": 2}]', 'task 2 is not a task (a JSON object with an "id" string)'),
    ],
)
def test_tau2_gate_of_a_task_file_that_is_not_a_list_of_tasks_is_one_line(tmp_path: Path, text: str, said: str) -> None:
    """``ledger-run tau2-gate --data`` read each tasks*.json with json.loads and nothing around it: a traceback."""
    import subprocess
    import sys

    (tmp_path / "airline").mkdir()
    (tmp_path / "airline" / "db.json").write_text("{}")
    (tmp_path / "airline" / "tasks.json").write_text(text)
    r = subprocess.run(
        [sys.executable, "-m", "ledger_runtime", "tau2-gate", "--domain", "airline", "--data", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in r.stderr and r.returncode != 0, r.stderr[-2000:]
    assert r.stderr.strip() == f"error: {tmp_path / 'airline' / 'tasks.json'}: {said}"


@pytest.mark.parametrize(
    "text,said",
    [
        ("{}", "not a tau2 database (flights: Field required (and 2 more))"),
        ("not json", "not a tau2 database ("),
    ],
)
def test_tau2_gate_of_a_database_that_is_not_tau2_s_is_one_line(tmp_path: Path, text: str, said: str) -> None:
    """A ``--data`` whose db.json is not tau2's: its pydantic error (many lines) or JSON error was a traceback, after
    the task file read whole."""
    import subprocess
    import sys

    pytest.importorskip("tau2", reason="tau2-gate replays with tau2's tools (pip install 'ledger-runtime[tau2]')")
    (tmp_path / "airline").mkdir()
    (tmp_path / "airline" / "db.json").write_text(text)
    (tmp_path / "airline" / "tasks.json").write_text('[{"id": "0"}]')
    r = subprocess.run(
        [sys.executable, "-m", "ledger_runtime", "tau2-gate", "--domain", "airline", "--data", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in r.stderr and r.returncode != 0, r.stderr[-2000:]
    lines = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith(f"error: {tmp_path / 'airline' / 'db.json'}: {said}"), r.stderr
