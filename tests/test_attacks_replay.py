"""Attacks on ``ledger-run replay`` with crafted trajectories: a file of a shape its reader never saw
(nesting past Python's recursion limit, an object where a list goes, a number past a float's range, a
list for an instance id) is one line that names it, never a traceback; the other files are read all the
same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import ledger_run, one_line_error
from conftest import make_repo

MESSAGES = [
    {"role": "system", "content": "you fix bugs"},
    {"role": "user", "content": "fix it"},
    {"role": "assistant", "content": "```bash\nls\n```"},
    {"role": "user", "content": "<returncode>0</returncode><output>a\n</output>"},
]

CRAFTED = {
    "deep": "[" * 100_000 + "]" * 100_000,
    "extra": json.dumps({"messages": [{"role": "assistant", "content": "x", "extra": "actions"}]}),
    "info": json.dumps({"info": [1], "messages": []}),
    "huge": '{"info": {"config": {"environment": {"timeout": 1e400}}}, "messages": []}',
    "env": json.dumps({"info": {"config": {"environment": {"env": [1, 2]}}}, "messages": []}),
    "iid": json.dumps({"instance_id": [1], "messages": MESSAGES}),
}


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_a_crafted_trajectory_is_one_line_naming_it(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.traj.json"
    path.write_text(CRAFTED[name])
    error = one_line_error(ledger_run("replay", str(path), "--observations-only", "--out", str(tmp_path / "out")))
    assert error.startswith("error: no trajectory could be read: ") and f"{name}.traj.json" in error


def test_a_crafted_actions_file_is_one_line(tmp_path: Path) -> None:
    rows = [{"instance_id": "i", "step": "x", "command": "ls"}, {"instance_id": "i", "step": 1, "command": "ls"}]
    path = tmp_path / "actions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    error = one_line_error(ledger_run("replay", str(path), "--observations-only", "--out", str(tmp_path / "out")))
    assert "actions.jsonl: the mini-swe-agent reader failed" in error


def test_a_crafted_trajectory_costs_the_others_nothing(tmp_path: Path) -> None:
    (tmp_path / "bad.traj.json").write_text(CRAFTED["deep"])
    (tmp_path / "good.traj.json").write_text(json.dumps({"instance_id": "good", "messages": MESSAGES}))
    paths = [str(tmp_path / f) for f in ("bad.traj.json", "good.traj.json")]
    r = ledger_run("replay", *paths, "--observations-only", "--json", "--out", str(tmp_path / "out"))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    said = " ".join(r.stderr.split())
    assert "bad.traj.json: JSON nested deeper than it can be read" in said
    assert json.loads(r.stdout)["instances"] == 1


@pytest.mark.parametrize(
    "content,said",
    [
        (b"\xff\n", "cannot be read: 'utf-8' codec can't decode byte 0xff"),
        (b"[" * 100_000 + b"\n", "instances.jsonl:1: not a JSON line: JSON nested deeper than it can be read"),
    ],
)
def test_swebench_instances_that_are_not_json_lines_are_one_line(tmp_path: Path, content: bytes, said: str) -> None:
    path = tmp_path / "instances.jsonl"
    path.write_bytes(content)
    r = ledger_run("swebench", "--instances", str(path), "--model", "x", "-o", str(tmp_path / "out"), timeout=120)
    assert said in one_line_error(r)


def test_replay_instances_nested_too_deep_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "good.traj.json").write_text(json.dumps({"instance_id": "good", "messages": MESSAGES}))
    (tmp_path / "instances.jsonl").write_text("[" * 100_000 + "\n")
    argv = ["replay", str(tmp_path / "good.traj.json"), "--instances", str(tmp_path / "instances.jsonl")]
    repo = make_repo(tmp_path / "repo", {"README": "hi\n"})
    error = one_line_error(ledger_run(*argv, "--repo", str(repo), "--out", str(tmp_path / "out")))
    assert error.endswith("instances.jsonl: no line is a SWE-bench instance (JSON with instance_id and base_commit)")


@pytest.mark.parametrize("kept", ["[1]", '{"cost": [1]}', '{"cost": {"arms": {"ledger": [1]}}}', "[" * 100_000])
def test_a_kept_result_of_another_shape_is_not_done(tmp_path: Path, kept: str) -> None:
    """A result file in the output directory edited by hand (or another tool's): the trajectory is replayed again
    (``_done`` is False), never a traceback that stops the replay of every trajectory."""
    from ledger_harness.replay.cli import _done

    path = tmp_path / "good.json"
    path.write_text(kept)
    assert _done(path, "good", ("window:10",), ("gpt-5-mini",)) is False
    arms = {"ledger": {"gpt-5-mini": {}}, "window:10": {"gpt-5-mini": {}}}
    path.write_text(json.dumps({"instance_id": "good", "status": "done", "cost": {"arms": arms}}))
    assert _done(path, "good", ("window:10",), ("gpt-5-mini",)) is True, "a result of the right shape is kept"


@pytest.mark.slow
def test_a_kept_result_marked_done_naming_no_instance_is_replayed_again(tmp_path: Path) -> None:
    """A result file in ``-o`` marked done but naming no instance (edited by hand, another tool's) was taken as the
    instance's result, then a KeyError traceback where the results are gathered, after the whole replay."""
    from test_replay import _calc_case

    bare, trajs, inst = _calc_case(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "demo__calc-1.json").write_text(json.dumps({"status": "done"}))
    argv = [str(trajs), "--repo", str(bare), "--instances", str(inst), "--workdir", str(tmp_path / "testbed")]
    r = ledger_run("replay", *argv, "-o", str(out), "--json", timeout=600)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "0 already replayed, 1 to go" in r.stderr
    assert json.loads(r.stdout)["summary"]["total"]["instances"] == 1
    assert json.loads((out / "demo__calc-1.json").read_text())["instance_id"] == "demo__calc-1"


def test_a_trajectory_not_read_is_named_once(tmp_path: Path) -> None:
    """``skipped P: why``: the reader's message starts with the path, which was printed before it as well."""
    bad = tmp_path / "bad.traj.json"
    bad.write_text('{"messages": 3}')
    (tmp_path / "good.traj.json").write_text(json.dumps({"instance_id": "good", "messages": MESSAGES}))
    r = ledger_run("replay", str(bad), str(tmp_path / "good.traj.json"), "--observations-only", "--json",
                   "--out", str(tmp_path / "out"))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    said = " ".join(r.stderr.split())
    assert f"skipped {bad}: not a mini-swe-agent trajectory (no messages list)" in said, said
    assert said.count(str(bad)) == 1, said


def test_a_replay_s_output_directory_with_brackets_is_named_as_it_is(tmp_path: Path) -> None:
    """The replay's closing line names the output directory: one such as ``out[/x]`` was read as markup (an error at
    the end of a whole replay, or a name shown otherwise than it is)."""
    import io

    from rich.console import Console

    from ledger_harness.replay.cli import _say_where

    out = tmp_path / "out[/x][bold]"
    said = io.StringIO()
    _say_where(out, ["a__b-1"], None, Console(file=said, width=80))
    assert f"results: {out};" in " ".join(said.getvalue().split()), said.getvalue()
