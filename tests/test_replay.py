"""ledger-run replay on a real repository and hand-written trajectories in mini-swe-agent's format."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git, make_repo
from processes import children, process_state, running_under

from ledger_adapters.mini.trajectories import from_traj_json
from ledger_harness.replay.engine import ReplaySettings, Skip, observations_only, replay_one
from ledger_harness.replay.volatile import mask, same
from ledger_runtime import TrajectoryError
from ledger_runtime.ledger.observe import Truncation

FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\n"
    + "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(40)),
    "test_calc.py": "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
}
RUN = "python3 -m unittest -q test_calc 2>&1 | grep -v '^Ran'"  # no timing: the same bytes when nothing changed
COMMANDS = [
    "cat calc.py",
    "cat calc.py",  # exact repeat: a reference to step 1, redundant
    "nl -ba calc.py | sed -n '10,60p'",  # subsumed, but numbered: other bytes, shown in full
    "nl -ba calc.py | sed -n '20,90p'",  # lines 20-60 as step 3 showed them: spans
    RUN,
    RUN,  # repeated run: NUDGE, and a reference, redundant
    "sed -i '2s/a - b/a + b/' calc.py",
    "cat calc.py",  # changed: a delta from what step 1 showed
    "grep -n 'def add' calc.py",
    "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff",
]


def traj_file(path: Path, instance_id: str, commands: list[str]) -> Path:
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for c in commands:
        msgs.append({"role": "assistant", "content": f"THOUGHT: go\n\n```bash\n{c}\n```"})
        msgs.append({"role": "user", "content": "<returncode>0</returncode>\n<output>\nrecorded\n</output>"})
    msgs.insert(3, {"role": "assistant", "content": "no command here"})  # a format error
    path.write_text(
        json.dumps({"instance_id": instance_id, "info": {"config": {"environment": {"timeout": 30}}}, "messages": msgs})
    )
    return path


def mirror(tmp_path: Path) -> tuple[Path, str]:
    src = make_repo(tmp_path / "src", FILES)
    bare = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(bare)], check=True)
    return bare, git(src, "rev-parse", "HEAD").strip()


def settings(tmp_path: Path, bare: Path, commit: str, iid: str) -> ReplaySettings:
    return ReplaySettings(
        repos=[bare],
        out=tmp_path / "out",
        workdir=tmp_path / "testbed",
        base_commits={iid: commit},
        repo_names={iid: "demo/calc"},
        fresh_python=False,
    )


def test_trajectory_formats(tmp_path):
    t = from_traj_json(traj_file(tmp_path / "a.traj.json", "demo__calc-1", COMMANDS))
    assert [s.command for s in t.commands] == COMMANDS
    assert [s.kind for s in t.steps][:2] == ["action", "format_error"]
    assert t.timeout == 30 and len(t.prompt_chars) == len(t.steps)
    bad = tmp_path / "bad.traj.json"
    bad.write_text("{not json")
    try:
        from_traj_json(bad)
        raise AssertionError("should not parse")
    except TrajectoryError as e:
        assert "not JSON" in str(e) and "\n" not in str(e)


def test_replay_verdicts_soundness_and_oracle(tmp_path):
    bare, commit = mirror(tmp_path)
    t = from_traj_json(traj_file(tmp_path / "a.traj.json", "demo__calc-1", COMMANDS))
    res = replay_one(t, settings(tmp_path, bare, commit, "demo__calc-1"))
    rows = res["rows"]
    assert [r["verdict"] for r in rows] == ["RUN", "RUN", "RUN", "RUN", "RUN", "NUDGE", "RUN", "RUN", "RUN", "REVISE"]
    assert [r["answer"] for r in rows] == [
        "raw",
        "whole",
        "raw",
        "spans",
        "raw",
        "whole",
        "raw",
        "delta",
        "raw",
        "refused",
    ]
    assert [r["redundant"] for r in rows][:8] == [None, "exact", "subsumed", "subsumed", None, "exact", None, None]
    assert all(r["sound"] is True for r in rows[:9]) and rows[9]["sound"] is None
    s = res["summary"]
    assert s["unsound"] == 0 and s["checked"] == 9 and s["redundant"] == 4 and s["caught"] == 3
    assert s["chars_spared"] == sum(r["visible_chars"] - r["shown_visible_chars"] for r in rows[:9]) > 0
    assert s["spared_by_kind"]["whole"] > 0 and s["spared_by_kind"]["spans"] > 0 and s["spared_by_kind"]["delta"] > 0
    assert s["repeated_chars"] >= s["spared_by_kind"]["whole"], "whole repeats are repeated lines too"
    assert all(r["overhead_ms"] >= 0 and r["view_tokens"] > 0 for r in rows)
    saved = json.loads((tmp_path / "out" / "demo__calc-1.json").read_text())
    assert saved["status"] == "done" and saved["repo"] == "demo/calc"


def test_skips_say_why(tmp_path):
    bare, commit = mirror(tmp_path)
    t = from_traj_json(traj_file(tmp_path / "a.traj.json", "demo__calc-2", COMMANDS[:2]))
    s = settings(tmp_path, bare, "0" * 40, "demo__calc-2")
    try:
        replay_one(t, s)
        raise AssertionError("should skip")
    except Skip as e:
        assert "in none of the --repo" in str(e)
    s.base_commits = {}
    try:
        replay_one(t, s)
        raise AssertionError("should skip")
    except Skip as e:
        assert "no base commit" in str(e)


@pytest.mark.slow
def test_cli_resumes_and_reports(tmp_path):
    bare, commit = mirror(tmp_path)
    trajs = tmp_path / "trajs"
    trajs.mkdir()
    traj_file(trajs / "demo__calc-1.traj.json", "demo__calc-1", COMMANDS)
    (trajs / "broken.traj.json").write_text('{"messages": 3}')
    inst = tmp_path / "instances.jsonl"
    inst.write_text(json.dumps({"instance_id": "demo__calc-1", "base_commit": commit, "repo": "demo/calc"}) + "\n")
    cmd = [
        sys.executable,
        "-m",
        "ledger_runtime.cli",
        "replay",
        str(trajs),
        "--repo",
        str(bare),
        "--instances",
        str(inst),
        "--workdir",
        str(tmp_path / "testbed"),
        "-o",
        str(tmp_path / "out"),
        "--report",
        str(tmp_path / "R.md"),
        "--json",
    ]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    data = json.loads(first.stdout)
    assert data["summary"]["total"]["unsound"] == 0 and data["summary"]["total"]["commands"] == len(COMMANDS)
    assert ["broken.traj.json", "not a mini-swe-agent trajectory (no messages list)"] in [
        [Path(what).name, why] for what, why in data["skipped"]
    ]  # the path once, as what was skipped, not again in why
    assert "| demo/calc | 1 |" in (tmp_path / "R.md").read_text()
    assert any("broken" in what for what, _ in json.loads((tmp_path / "out" / "skipped.json").read_text()))
    (trajs / "broken.traj.json").unlink()  # nothing is skipped now: the first replay's list goes
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert "1 already replayed, 0 to go" in again.stderr
    assert again.returncode == 0 and json.loads(again.stdout)["skipped"] == []
    assert not (tmp_path / "out" / "skipped.json").exists()
    assert "resumed" not in (tmp_path / "R.md").read_text()  # every result is this code's
    (result,) = [p for p in (tmp_path / "out").rglob("*.json") if '"code"' in p.read_text()]
    earlier = json.loads(result.read_text())
    earlier["code"] = {**earlier["code"], "commit": "e" * 40, "dirty": True}  # as an earlier replay by other code
    result.write_text(json.dumps(earlier))
    third = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stderr[-2000:]
    header = (tmp_path / "R.md").read_text().split("Reproduce:")[0]
    assert f"trajectories by commit: `{'e' * 40}` (with uncommitted changes): 1" in header, header


def test_observations_only_estimate(tmp_path):
    t = from_traj_json(
        traj_file(tmp_path / "a.traj.json", "x", ["cat a.py", "cat a.py", "sed -i s/a/b/ a.py", "cat a.py"])
    )
    est = observations_only(t, Truncation())
    assert est["redundant_exact"] == 1, "the repeat before the edit; the one after it is not"


def test_volatile_masks():
    assert same("Ran 3 tests in 0.012s\nOK\n", "Ran 3 tests in 0.340s\nOK\n")
    assert same("<object at 0x7f3a2c1b9d30>", "<object at 0x7f00aa11bb22>")
    assert not same("3 passed", "4 passed")
    assert mask("created /tmp/tmpab12cd34/x") == "created <TMP>/x"


def _cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ledger_runtime.cli", "replay", *args], capture_output=True, text=True, timeout=timeout
    )


def _one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


def _calc_case(
    tmp_path: Path, commands: list[str] = COMMANDS[:3], iid: str = "demo__calc-1"
) -> tuple[Path, Path, Path]:
    """A clone of the demo repository, its bare mirror, a directory with one trajectory, the instances file."""
    bare, commit = mirror(tmp_path)
    trajs = tmp_path / "trajs"
    trajs.mkdir(exist_ok=True)
    traj_file(trajs / f"{iid}.traj.json", iid, commands)
    inst = tmp_path / "instances.jsonl"
    inst.write_text(json.dumps({"instance_id": iid, "base_commit": commit, "repo": "demo/calc"}) + "\n")
    return bare, trajs, inst


@pytest.mark.slow
def test_a_workdir_the_replay_did_not_make_is_never_deleted(tmp_path):
    bare, trajs, inst = _calc_case(tmp_path)
    mine = tmp_path / "p"
    mine.mkdir()
    (mine / "notes.txt").write_text("x\n")
    common = [str(trajs), "--repo", str(bare), "--instances", str(inst), "--workdir", str(mine), "--json"]
    refused = _cli(*common, "-o", str(tmp_path / "o1"))
    assert "holds files a replay did not make" in _one_line_error(refused) and "--force" in refused.stderr
    assert (mine / "notes.txt").read_text() == "x\n"
    forced = _cli(*common, "-o", str(tmp_path / "o2"), "--force")
    assert forced.returncode == 0, forced.stderr[-2000:]
    assert not (mine / "notes.txt").exists() and (mine / "calc.py").exists()
    again = _cli(*common, "-o", str(tmp_path / "o3"))  # a tree the replay made is the replay's to reuse
    assert again.returncode == 0, again.stderr[-2000:]


def test_one_replay_per_work_tree(tmp_path):
    from ledger_harness.replay.tree import Lock

    bare, trajs, inst = _calc_case(tmp_path)
    tree = tmp_path / "testbed"
    held = Lock(tree)  # another replay holds it (a flock: another process is refused the same way)
    try:
        r = _cli(
            str(trajs), "--repo", str(bare), "--instances", str(inst), "--workdir", str(tree), "-o", str(tmp_path / "o")
        )
        assert "in use by another replay" in _one_line_error(r)
        assert not (tmp_path / "o").exists() and not tree.exists()
    finally:
        held.release()


@pytest.mark.slow
def test_repo_may_be_a_clone(tmp_path):
    bare, trajs, inst = _calc_case(tmp_path)
    r = _cli(
        str(trajs),
        "--repo",
        str(tmp_path / "src"),
        "--instances",
        str(inst),
        "--workdir",
        str(tmp_path / "testbed"),
        "-o",
        str(tmp_path / "o"),
        "--json",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["summary"]["total"]["instances"] == 1
    nogit = tmp_path / "plain"
    nogit.mkdir()
    bad = _cli(str(trajs), "--repo", str(nogit), "--instances", str(inst), "-o", str(tmp_path / "o2"))
    assert "not a git repository" in _one_line_error(bad)


def test_a_replay_where_everything_was_skipped_fails(tmp_path):
    bare, trajs, _ = _calc_case(tmp_path)
    inst = tmp_path / "wrong.jsonl"
    inst.write_text(json.dumps({"instance_id": "demo__calc-1", "base_commit": "0" * 40}) + "\n")
    r = _cli(
        str(trajs),
        "--repo",
        str(bare),
        "--instances",
        str(inst),
        "--workdir",
        str(tmp_path / "testbed"),
        "-o",
        str(tmp_path / "o"),
        "--report",
        str(tmp_path / "R.md"),
    )
    # said before any replay starts (no progress bar first), with why
    msg = _one_line_error(r)
    assert "nothing to replay" in msg and "in none of the --repo" in msg and r.returncode == 2
    assert "trajectories" not in r.stderr.replace(msg, ""), "no progress before the error"


@pytest.mark.slow
def test_observations_only_refuses_what_holds_no_trajectory(tmp_path):
    import gzip

    bad_json = tmp_path / "a.traj.json"
    bad_json.write_text("{not json")
    empty_gz = tmp_path / "actions.jsonl.gz"
    empty_gz.write_bytes(b"")
    fake_gz = tmp_path / "fake.jsonl.gz"
    fake_gz.write_bytes(b"this is not gzip")
    shape = tmp_path / "shape.traj.json"
    shape.write_text(json.dumps([1, 2, 3]))
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    zero = tmp_path / "zero.jsonl.gz"
    with gzip.open(zero, "wt") as f:
        f.write("")
    for source in (bad_json, empty_gz, fake_gz, shape, empty_dir, zero):
        r = _cli(str(source), "--observations-only", "-o", str(tmp_path / "o"))
        _one_line_error(r)


def _isolation_case(base: Path, n: int, shared: str) -> tuple[list[str], Path]:
    """``n`` trajectories that each write their id into the work tree and into ``shared`` (a file in
    /tmp), wait, and read both back: with a shared tree or /tmp, one would read another's."""
    src = make_repo(base / "src", FILES)
    commit = git(src, "rev-parse", "HEAD").strip()
    trajs = base / "trajs"
    trajs.mkdir()
    rows = []
    for i in range(n):
        iid = f"demo__calc-{i}"
        cmd = f"echo {iid} > mine.txt && echo {iid} > {shared} && sleep 2 && cat mine.txt {shared}"
        traj_file(trajs / f"{iid}.traj.json", iid, [cmd])
        rows.append(json.dumps({"instance_id": iid, "base_commit": commit, "repo": "demo/calc"}))
    (base / "inst.jsonl").write_text("\n".join(rows) + "\n")
    return [
        str(trajs),
        "--repo",
        str(src),
        "--instances",
        str(base / "inst.jsonl"),
        "-o",
        str(base / "out"),
        "-j",
        "2",
    ], base


@pytest.mark.slow
def test_parallel_replays_each_see_their_own_tree(tmp_path):
    import os
    import shutil
    import tempfile
    import uuid

    namespaces = os.geteuid() == 0  # otherwise each worker has a private tree elsewhere, and /tmp is shared
    base = Path(tempfile.mkdtemp(dir="/var/tmp")) if os.path.isdir("/var/tmp") else tmp_path
    shared = f"/tmp/ledger-replay-test-{uuid.uuid4().hex[:12]}.txt"  # its own name: never another run's file
    try:
        args, base = _isolation_case(base, 2, shared)
        tree = base / "testbed"
        r = _cli(*args, "--workdir", str(tree), "--json")
        assert r.returncode == 0, r.stderr[-3000:]
        notes = json.loads(r.stdout)["notes"]
        # /tmp stays shared, and the notes say so, when the interpreter or a path the replay needs is under it
        own_tmp = namespaces and not any(n.startswith("/tmp: shared") for n in notes)
        if namespaces and sys.prefix.startswith("/tmp/"):
            assert not own_tmp, "a worker must still see its interpreter under /tmp"
        for i in range(2):
            res = json.loads((base / "out" / f"demo__calc-{i}.json").read_text())
            assert res["rows"][0]["exit"] == 0
        ledgers = sorted((base / "out" / "ledgers").iterdir())
        assert len(ledgers) == 2
        from ledger_runtime.inspection import load as load_ledger

        for i, led in enumerate(ledgers):
            loaded = load_ledger(led)
            a = loaded.state.attempts[-1]
            text = loaded.transcript().expanded(a)
            mine, shared = text.splitlines()
            assert mine == led.name, "a worker saw another's tree"
            assert shared == led.name or not own_tmp, "a worker saw another's /tmp"
        assert not tree.exists() or not any(tree.iterdir()), "the workers' trees are their own"
    finally:
        Path(shared).unlink(missing_ok=True)  # (left in the real /tmp where the workers share it)
        if base != tmp_path:
            shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_a_second_trajectory_of_an_instance_is_skipped_not_mixed_in(tmp_path):
    bare, trajs, inst = _calc_case(tmp_path)
    (trajs / "again").mkdir()
    traj_file(trajs / "again" / "demo__calc-1.traj.json", "demo__calc-1", COMMANDS[:1])
    r = _cli(
        str(trajs),
        "--repo",
        str(bare),
        "--instances",
        str(inst),
        "--workdir",
        str(tmp_path / "tb"),
        "-o",
        str(tmp_path / "o"),
        "--json",
        "-j",
        "2",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    data = json.loads(r.stdout)
    assert data["summary"]["total"]["commands"] == 3 and any("a second trajectory" in why for _, why in data["skipped"])


def test_force_never_empties_a_work_tree_that_holds_the_repository(tmp_path):
    bare, trajs, inst = _calc_case(tmp_path)
    src = tmp_path / "src"
    for workdir in (src, tmp_path):  # the clone itself, and a directory holding it
        r = _cli(
            str(trajs),
            "--repo",
            str(src),
            "--instances",
            str(inst),
            "--workdir",
            str(workdir),
            "-o",
            str(tmp_path / "o"),
            "--force",
        )
        assert "overlap" in _one_line_error(r)
    assert (src / "calc.py").exists() and (src / ".git").is_dir()


def test_force_never_empties_a_work_tree_that_holds_what_the_replay_reads(tmp_path):
    """--force empties a work tree of what is in it, but never of the replay's own trajectories, instances
    file or results (-o): those are refused as a repository is."""
    bare, trajs, inst = _calc_case(tmp_path)
    tree = tmp_path / "tree"
    tree.mkdir()
    mine = tree / "t.traj.json"
    mine.write_bytes(next(trajs.glob("*.json")).read_bytes())
    cases = [(str(mine), str(inst), tmp_path / "o"), (str(trajs), str(tree / "i.jsonl"), tmp_path / "o")]
    cases.append((str(trajs), str(inst), tree / "results"))  # each checkout would empty the results written
    (tree / "i.jsonl").write_bytes(inst.read_bytes())
    for traj, instances, out in cases:
        r = _cli(
            traj,
            "--repo",
            str(bare),
            "--instances",
            instances,
            "--workdir",
            str(tree),
            "-o",
            str(out),
            "--force",
        )
        assert "which this replay reads or writes" in _one_line_error(r)
    assert mine.exists() and (tree / "i.jsonl").exists()


def test_the_lock_holds_whatever_the_tmpdir(tmp_path):
    import os

    from ledger_harness.replay.tree import Lock

    bare, trajs, inst = _calc_case(tmp_path)
    tree = tmp_path / "testbed"
    held = Lock(tree)
    try:
        other = tmp_path / "other-tmp"
        other.mkdir()
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "ledger_runtime.cli",
                "replay",
                str(trajs),
                "--repo",
                str(bare),
                "--instances",
                str(inst),
                "--workdir",
                str(tree),
                "-o",
                str(tmp_path / "o"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "TMPDIR": str(other)},
        )
        assert "in use by another replay" in _one_line_error(r)
    finally:
        held.release()


@pytest.mark.slow
def test_parallel_workers_survive_a_worker_that_dies_and_say_when_tmp_is_shared(tmp_path):
    """A trajectory whose command kills its worker fails alone (found by trying again one at a time); the others are
    replayed. With -o under /tmp the workers share /tmp, and the notes say so."""
    import os

    src = make_repo(tmp_path / "src", FILES)
    commit = git(src, "rev-parse", "HEAD").strip()
    trajs = tmp_path / "trajs"
    trajs.mkdir()
    rows = []
    for i, cmd in enumerate(["cat calc.py", "kill -9 $PPID", "grep -n add calc.py", "ls"]):
        iid = f"demo__calc-{i}"
        traj_file(trajs / f"{iid}.traj.json", iid, [cmd])
        rows.append(json.dumps({"instance_id": iid, "base_commit": commit}))
    (tmp_path / "i.jsonl").write_text("\n".join(rows) + "\n")
    r = _cli(
        str(trajs),
        "--repo",
        str(src),
        "--instances",
        str(tmp_path / "i.jsonl"),
        "--workdir",
        str(tmp_path / "tb"),
        "-o",
        str(tmp_path / "o"),
        "-j",
        "2",
        "--json",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(r.stdout)
    assert data["summary"]["total"]["instances"] == 3
    assert [iid for iid, why in data["skipped"] if "died" in why] == ["demo__calc-1"]
    if os.geteuid() == 0:
        assert any(n.startswith("/tmp: shared") for n in data["notes"]), data["notes"]


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("how", ["ctrl-c", "kill"])
def test_ctrl_c_stops_a_replay(tmp_path, how, jobs):
    """Ctrl-C (SIGINT to the whole process group) or ``kill PID`` (SIGTERM to the replay alone) stop a
    replay with one line, one trajectory at a time or in parallel; its worker processes go with it (a
    SIGTERM once left them running, idle, for ever), and so do the commands running (each in a session
    of its own, which neither signal reaches: they were once left to their timeout)."""
    import os
    import signal
    import time

    src = make_repo(tmp_path / "src", FILES)
    commit = git(src, "rev-parse", "HEAD").strip()
    trajs = tmp_path / "trajs"
    trajs.mkdir()
    rows = []
    for i in range(6):
        traj_file(trajs / f"demo__calc-{i}.traj.json", f"demo__calc-{i}", ["sleep 300"])
        rows.append(json.dumps({"instance_id": f"demo__calc-{i}", "base_commit": commit}))
    (tmp_path / "i.jsonl").write_text("\n".join(rows) + "\n")
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ledger_runtime.cli",
            "replay",
            str(trajs),
            "--repo",
            str(src),
            "--instances",
            str(tmp_path / "i.jsonl"),
            "--workdir",
            str(tmp_path / "tb"),
            "-o",
            str(tmp_path / "o"),
            "-j",
            jobs,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240  # a loaded machine starts the workers late: wait for them, not a time
    while not running_under(p.pid, "sleep") and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    workers = children(p.pid)
    commands = running_under(p.pid, "sleep")
    t0 = time.monotonic()
    if how == "ctrl-c":
        os.killpg(p.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
    else:
        os.kill(p.pid, signal.SIGTERM)  # the replay's own process only
    out, err = p.communicate(timeout=120)
    assert p.returncode == (130 if how == "ctrl-c" else 143) and time.monotonic() - t0 < 45, err[-2000:]
    assert "interrupted: the finished trajectories are kept" in err and "Traceback" not in err
    assert workers, "the replay had started its workers"
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{w}").exists() for w in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [w for w in workers if Path(f"/proc/{w}").exists() and "Z" not in process_state(w)]
    assert not left, f"worker processes resent_as the replay: {left}"
    assert commands, "the workers were running their commands"
    while any(Path(f"/proc/{c}").exists() for c in commands) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [c for c in commands if Path(f"/proc/{c}").exists() and "Z" not in process_state(c)]
    assert not left, f"the commands the workers ran resent_as the replay: {left}"


def test_replay_results_keep_no_secret(tmp_path):
    """A command that prints a token: its replay's JSON and ledger hold it masked, and its answers
    still check out against the output masked the same way."""
    token = "ghp_" + "Zz9" * 12
    bare, commit = mirror(tmp_path)
    cmds = [f"echo 'GH_TOKEN={token}' > .env && cat .env calc.py", "cat .env calc.py"]
    t = from_traj_json(traj_file(tmp_path / "a.traj.json", "demo__calc-1", cmds))
    res = replay_one(t, settings(tmp_path, bare, commit, "demo__calc-1"))
    # the lines masking left alone are still sources: the token's line comes back in full
    assert [r["sound"] for r in res["rows"]] == [True, True] and res["rows"][1]["answer"] == "spans"
    out = tmp_path / "out"
    stored = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert token.encode() not in stored and b"GH_TOKEN=" in stored


def ledger_run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ledger_runtime", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200", "MSWEA_SILENT_STARTUP": "1"},
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_the_demo_s_own_trajectory_replays_as_it_is(tmp_path):
    """A run of ledger-run replays with nothing more than its trajectory: its ledger names the commit
    and the repository it started from; the replay works in a tree of its own, never in the run's."""
    d = tmp_path / "d"
    assert ledger_run("demo", "-o", str(d)).returncode == 0
    traj = d / "run" / "trajectory.traj.json"
    fixed = (d / "workspace" / "inventory" / "pricing.py").read_text()
    out = tmp_path / "out"
    r = ledger_run("replay", str(traj), "-o", str(out), "--report", str(out / "RESULTS.md"), "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    total = json.loads(r.stdout)["summary"]["total"]
    assert total["commands"] == 11 and total["unsound"] == 0 and total["chars_spared"] > 0
    assert f"--repo: the recorded runs' own {d / 'workspace'}" in r.stderr
    assert f"--workdir: {out / 'worktree'}" in " ".join(r.stderr.split())
    assert (d / "workspace" / "inventory" / "pricing.py").read_text() == fixed, "the run's own tree is left alone"
    title = (out / "RESULTS.md").read_text().splitlines()[0]
    assert title == f"# Replay of 1 mini-swe-agent trajectory from {traj}", title
    table = ledger_run("replay", str(traj), "-o", str(out))  # done already: the table of the results
    assert table.returncode == 0 and "Replay of 1 mini-swe-agent trajectory from" in table.stdout


@pytest.mark.slow
def test_a_base_commit_given_on_the_command_line(tmp_path):
    bare, commit = mirror(tmp_path)
    traj = traj_file(tmp_path / "a.traj.json", "demo__calc-1", COMMANDS[:3])
    common = ["--repo", str(bare), "--workdir", str(tmp_path / "tb"), "-o", str(tmp_path / "o")]
    r = ledger_run("replay", str(traj), *common, "--base-commit", commit[:10], "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout)["summary"]["total"]["commands"] == 3
    assert json.loads((tmp_path / "o" / "demo__calc-1.json").read_text())["base_commit"] == commit
    bad = ledger_run("replay", str(traj), *common, "--base-commit", "nosuch", "--redo")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().startswith("error: --base-commit nosuch is in none of the repositories")
    without = ledger_run("replay", str(traj), *common[:-1], str(tmp_path / "o2"))
    assert without.returncode == 2 and "no base commit: give --base-commit" in " ".join(without.stderr.split())


@pytest.mark.slow
def test_observations_only_says_a_ledger_s_own_outputs_are_its_answers(tmp_path):
    d = tmp_path / "d"
    assert ledger_run("demo", "-o", str(d)).returncode == 0
    r = ledger_run("replay", str(d / "run" / "trajectory.traj.json"), "--observations-only", "-o", str(tmp_path / "o"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "redundant" not in r.stdout, r.stdout
    assert "its outputs are already the ledger's answers" in r.stderr and "ledger-run inspect" in r.stderr
    # a shadow run's outputs are what its commands printed: those can be estimated
    s = tmp_path / "s"
    assert ledger_run("demo", "--shadow", "-o", str(s)).returncode == 0
    ok = ledger_run("replay", str(s / "run" / "trajectory.traj.json"), "--observations-only", "-o", str(tmp_path / "o"))
    assert ok.returncode == 0, ok.stderr
    assert re.search(r"[1-9]\d*\.\d% of commands redundant", ok.stdout), ok.stdout
