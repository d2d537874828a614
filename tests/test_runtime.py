"""The runtime end to end on real repositories with real commands: verdicts, records, the state
view, shadow mode, and faults that must never stop the agent."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_adapters.mini.format import SUBMISSION  # the agent whose marker these commands use
from ledger_runtime.answers.transcript import Transcript
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.inspection import load, summary
from ledger_runtime.records import CommandClass, VerdictKind
from ledger_runtime.runtime import LedgerRuntime
from ledger_runtime.workspace.local import LocalWorkspace

EX = LocalExecutor(timeout=30)


def runtime(repo: Path, tmp_path: Path, **cfg) -> LedgerRuntime:
    return LedgerRuntime(
        repo, tmp_path / "run", LedgerConfig().with_(**cfg), task="Make test_add pass", submission=SUBMISSION
    )


def kinds(rt, *cmds):
    return [rt.run(c, EX).verdict.kind.value for c in cmds]


def expanded(rt: LedgerRuntime, attempt_id: int) -> str:
    """What the answer the model got stands for, decoded from the ledger alone."""
    t = Transcript(rt.state, rt.store.text)
    return t.expanded(rt.state.attempt(attempt_id))


def test_an_identical_output_comes_back_as_a_reference_and_always_runs(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    first = rt.run("cat pkg/util.py", EX)
    again = rt.run("cat  pkg/util.py", EX)
    assert again.executed, "every read runs"
    assert again.verdict.kind is VerdictKind.RUN, "a reference to an identical output is not a reuse"
    assert rt.state.attempts[-1].answer["kind"] == "whole"
    assert again.output.startswith("[ledger: same as step 1's output (`cat pkg/util.py`, exit 0)")
    assert len(again.output) < 120 and again.returncode == 0
    assert expanded(rt, again.attempt_id) == first.output
    (repo / "pkg" / "util.py").write_text("changed\n")
    third = rt.run("cat pkg/util.py", EX)
    assert third.verdict.kind is VerdictKind.RUN and third.output == "changed\n", "the fresh output, not the old"
    short = rt.run("cat calc.py", EX)
    tiny = rt.run("cat calc.py", EX)
    assert tiny.output == short.output, "a reference to a tiny output costs more than the output"


def test_lines_already_shown_come_back_as_references(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    rt.run("cat -n pkg/util.py", EX)
    r = rt.run("nl -ba pkg/util.py | sed -n '10,120p'", EX)
    fresh = EX("nl -ba pkg/util.py | sed -n '10,120p'", str(repo)).output
    assert r.executed and r.output.startswith("[ledger: lines 10-120 of step 1's output (`cat -n pkg/util.py`)")
    assert expanded(rt, r.attempt_id) == fresh
    (repo / "pkg" / "util.py").write_text((repo / "pkg" / "util.py").read_text().replace("return 33", "return 330"))
    mixed = rt.run("cat -n pkg/util.py", EX)
    assert "   101\t    return 330\n" in mixed.output, "the changed line comes back in full"
    assert expanded(rt, mixed.attempt_id) == EX("cat -n pkg/util.py", str(repo)).output
    assert rt.state.attempts[-1].answer["kind"] in ("spans", "delta")


def test_a_changed_file_read_again_is_a_delta_from_what_the_model_saw(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    rt.run("cat pkg/util.py", EX)
    rt.run("sed -i 's/return 7$/return 70/' pkg/util.py", EX)
    r = rt.run("cat pkg/util.py", EX)
    assert rt.state.attempts[-1].answer["kind"] == "delta"
    assert r.output.startswith("[ledger: step 1's output (`cat pkg/util.py`) with these changes, a unified diff")
    assert "\n-    return 7\n+    return 70\n" in r.output and len(r.output) < 400
    assert expanded(rt, r.attempt_id) == (repo / "pkg" / "util.py").read_text()


def test_the_raw_escape_gets_the_whole_output(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    first = rt.run("cat pkg/util.py", EX)
    raw = rt.run("cat pkg/util.py  # ledger:raw", EX)
    assert raw.output == first.output and raw.verdict.kind is VerdictKind.RUN
    rt.run("cat pkg/util.py", EX)
    assert "end a command with `# ledger:raw` to get its output in full" in rt.inform()


def test_cut_output_only_counts_the_visible_lines(repo, tmp_path):
    rt = runtime(repo, tmp_path, output_limit_chars=100, output_head_chars=40, output_tail_chars=40)
    rt.run("cat pkg/util.py", EX)
    obs = rt.state.observations[-1]
    assert obs.kind == "range" and len(obs.spans) == 2
    assert obs.spans[0].start == 1 and obs.spans[-1].end == obs.lines_total
    middle = rt.run("sed -n '60,70p' pkg/util.py", EX)
    assert middle.verdict.kind is VerdictKind.RUN and "[ledger" not in middle.output, (
        "the model never saw the middle of a cut output: nothing may refer to it"
    )


def test_repeated_test_run_is_nudged_until_something_changes(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    cmd = "python -m pytest -q test_calc.py -p no:cacheprovider"
    first = rt.run(cmd, EX)
    assert first.returncode != 0
    second = rt.run(cmd, EX)
    assert second.verdict.kind is VerdictKind.NUDGE and second.executed
    assert "no tracked file changed since step 1" in second.output and "failed" in second.output
    rt.run("sed -i '2s/a - b/a + b/' calc.py", EX)
    third = rt.run(cmd, EX)
    assert third.verdict.kind is VerdictKind.RUN and third.returncode == 0


def test_every_run_runs_however_often_it_repeats(repo, tmp_path):
    """No earlier run stands in for a repeat (reuse_runs is gone): a test run that nothing changed
    since runs again (its timings differ: a skipped run would have handed back the first one's)."""
    rt = runtime(repo, tmp_path)
    cmd = "python -m pytest -q test_calc.py -p no:cacheprovider"
    first = rt.run(cmd, EX)
    again = rt.run(cmd, EX)
    a = rt.state.attempts[-1]
    assert again.executed and a.executed and again.returncode == first.returncode
    assert again.verdict.kind is VerdictKind.NUDGE and a.answer["kind"] != "reused"


def test_modifications_are_recorded_with_line_counts(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    rt.run("sed -i '2s/a - b/a + b/' calc.py", EX)
    rt.run("python3 -c \"open('pkg/util.py', 'a').write('x = 1\\ny = 2\\n')\"", EX)
    rt.run("rm README.md && printf 'new\\n' > NEW.md", EX)
    by_path = {os.path.relpath(m.path, repo): m for m in rt.state.modifications}
    calc = by_path["calc.py"]
    assert calc.recognised and (calc.lines_added, calc.lines_removed) == (1, 1)
    util = by_path["pkg/util.py"]
    assert not util.recognised, "a script's change is only seen in the snapshot"
    assert (util.lines_added, util.lines_removed) == (2, 0)
    assert by_path["README.md"].after_hash is None and by_path["README.md"].lines_removed == 40
    assert by_path["NEW.md"].before_hash is None and by_path["NEW.md"].recognised
    s = summary(rt.state)
    assert {f["path"]: f["change"] for f in s["files_changed"]} == {
        "calc.py": "modified",
        "pkg/util.py": "modified",
        "README.md": "deleted",
        "NEW.md": "created",
    }


def test_noop_edit_gets_a_nudge(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    r = rt.run("sed -i 's/no such text/x/' calc.py", EX)
    assert r.verdict.kind is VerdictKind.NUDGE and "changed no file" in r.output


def test_changes_between_commands_are_recorded_as_such(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    rt.run("cat calc.py", EX)
    (repo / "calc.py").write_text("edited by the user\n")
    again = rt.run("cat calc.py", EX)  # a pure read: the scan after it (events) finds the edit, by no command
    assert again.verdict.kind is VerdictKind.RUN and again.output == "edited by the user\n"
    rt.run("python3 -c 'print(1)'", EX)
    m = [m for m in rt.state.modifications if m.path.endswith("calc.py")][0]
    assert m.attempt is None and not m.recognised
    assert m.step == 2 and m.lines_added == 1 and m.lines_removed == 6
    view = rt.inform()
    assert "calc.py: whole file (step 2; earlier views stale)" in view


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
@pytest.mark.parametrize("read", ["cat calc.py", "wc -l calc.py", "grep -n def calc.py"])
def test_an_edit_between_commands_read_later_keeps_its_line_counts(repo, tmp_path, read, watch):
    """The model thinks for a while after a user's edit: the file is no longer racy when it is hashed before the scan
    that records the edit (its read's probe; without events, the check of what the read names). The scan reads it
    again to keep it: the edit's lines count."""
    ws = LocalWorkspace(str(repo), watch_events=watch)
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig(), workspace=ws)
    rt.run("true", EX)
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b + 0\n")
    aged = os.stat(repo / "calc.py").st_mtime - 10
    os.utime(repo / "calc.py", (aged, aged))  # as after seconds of the model's thinking
    rt.run(read, EX)
    rt.run("touch later.txt", EX)
    (m,) = [m for m in rt.state.modifications if m.path.endswith("calc.py")]
    # at the read's step, by no command: found after it by the events, or before it by a walk, as the file it names
    # differs from the last snapshot
    assert m.attempt is None and m.step == 2
    assert (m.lines_added, m.lines_removed) == (1, 5), "the changed content was kept"
    rt.close()


def test_shadow_mode_always_executes_and_returns_real_output(repo, tmp_path):
    rt = runtime(repo, tmp_path, shadow=True)
    a = rt.run("cat pkg/util.py", EX)
    b = rt.run("cat pkg/util.py", EX)
    assert b.executed and b.output == a.output and b.verdict.kind is VerdictKind.RUN
    att = rt.state.attempts[-1]
    assert not att.applied and att.shown_chars < 120, "the ledger keeps what the model would have got"
    assert expanded(rt, att.id) == b.output
    nudge = rt.run("sed -i 's/zzz/y/' calc.py", EX)
    assert "[ledger]" not in nudge.output


def test_govern_off_decides_but_never_applies(repo, tmp_path):
    rt = runtime(repo, tmp_path, govern=False)
    rt.run("cat pkg/util.py", EX)
    r = rt.run("cat pkg/util.py", EX)
    assert r.executed and "[ledger" not in r.output and rt.state.attempts[-1].answer["kind"] == "whole"


def test_submission_output_is_never_touched(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    cmd = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"
    rt.run("sed -i '2s/a - b/a + b/' calc.py", EX)
    held = rt.run(cmd, EX)  # an edit and no test since: verify-before-submit holds it back, once, unrun
    assert not held.executed and held.verdict.kind is VerdictKind.REVISE and "COMPLETE_TASK" not in held.output
    first = rt.run(cmd, EX)
    second = rt.run(cmd, EX)
    assert first.executed and second.executed and second.output == first.output
    assert first.output.startswith("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n")
    (repo / "notes.txt").write_text("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n" + "x\n" * 300)
    first = rt.run("cat notes.txt", EX)
    again = rt.run("cat notes.txt", EX)
    assert again.executed and again.output == first.output, "an output that would submit is never deduped"


def test_state_view_is_deterministic_and_within_budget(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    for cmd in [
        "cat calc.py",
        "grep -n def pkg/util.py",
        "sed -n '1,5p' README.md",
        "python -m pytest -q test_calc.py -p no:cacheprovider",
        "sed -i '2s/a - b/a + b/' calc.py",
    ]:
        rt.run(cmd, EX)
    v1 = rt.inform()
    assert v1 == rt.inform()
    assert "Task: Make test_add pass" in v1
    assert "calc.py: +1 -1" in v1
    assert "calc.py: STALE, changed at step 5 by `sed -i" in v1
    assert "Last failing run: #4" in v1 and "may no longer hold: calc.py changed at step 5" in v1
    rt.close()
    again = load(tmp_path / "run")
    from ledger_runtime.inspection import view_at

    assert view_at(again, None) == v1, "the same ledger renders to the same bytes after reload"
    assert "Policies: BLOCK destructive; REVISE protected-paths, verify-before-submit; NUDGE stale-edit" in v1
    tiny = LedgerRuntime(repo, tmp_path / "run", LedgerConfig().with_(view_budget_tokens=110))
    view = tiny.view()
    assert len(view.text) <= 110 * 4 and view.omitted > 0 and "left out" in view.text


def test_a_reloaded_ledger_holds_every_record_as_it_was_made(repo, tmp_path):
    """Observations (their kind included: whole, range, matches), attempts and modifications read back
    from the file are the records the run made."""
    rt = runtime(repo, tmp_path)
    commands = ["cat calc.py", "grep -n def pkg/util.py", "sed -n '1,5p' README.md", "sed -i '2s/a - b/a + b/' calc.py"]
    for cmd in commands:
        rt.run(cmd, EX)
    live = rt.state
    assert {o.kind for o in live.observations} == {"whole", "matches", "range"}
    rt.close()
    again = load(tmp_path / "run").state
    assert [o.to_dict() for o in again.observations] == [o.to_dict() for o in live.observations]
    assert [a.to_dict() for a in again.attempts] == [a.to_dict() for a in live.attempts]
    assert [m.to_dict() for m in again.modifications] == [m.to_dict() for m in live.modifications]


def test_inform_off_gives_nothing(repo, tmp_path):
    rt = runtime(repo, tmp_path, inform=False)
    rt.run("cat calc.py", EX)
    assert rt.inform() == ""


def test_executor_exception_is_recorded_then_raised(repo, tmp_path):
    rt = runtime(repo, tmp_path)

    class Boom(Exception):
        pass

    def explode(command, cwd):
        raise Boom("agent-side exception")

    with pytest.raises(Boom):
        rt.run("cat calc.py", explode)
    a = rt.state.attempts[-1]
    assert a.exception and "agent-side exception" in a.exception and a.exit_code is None
    assert rt.run("cat calc.py", EX).verdict.kind is VerdictKind.RUN, "an interrupted read is never reused"


def test_unwritable_ledger_never_blocks_the_agent(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    rt.run("cat calc.py", EX)
    rt.store._conn.close()
    rt.store._conn = sqlite3.connect(":memory:")  # every write now fails: no tables
    r = rt.run("python3 -c 'print(42)'", EX)
    assert r.output == "42\n" and r.returncode == 0
    faults = (tmp_path / "run" / "faults.log").read_text()
    assert "writing the ledger" in faults and "print(42)" in faults, "the lost record is kept in faults.log"


def test_snapshot_fault_falls_back_to_plain_execution(repo, tmp_path):
    rt = runtime(repo, tmp_path)

    def broken(**kw):
        raise OSError("disk on fire")

    rt.workspace.scan = broken
    r = rt.run("echo still works", EX)
    assert r.output == "still works\n"
    assert "disk on fire" in (tmp_path / "run" / "faults.log").read_text()


def test_reopening_a_run_continues_it(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    first = rt.run("cat pkg/util.py", EX)
    rt.close()
    rt2 = runtime(repo, tmp_path)
    r = rt2.run("cat pkg/util.py", EX)
    assert r.answer == "whole" and rt2.state.attempts[-1].id == 2, "what the model holds is restored"
    assert expanded(rt2, 2) == first.output


def test_outputs_reach_the_agent_exactly(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    for cmd in ["printf 'no newline'", "printf '\\xff\\xfe binary'", "echo err >&2; exit 3"]:
        plain = EX(cmd, str(repo))
        got = rt.run(cmd, EX)
        assert (got.output, got.returncode) == (plain.output, plain.returncode)


def test_timeout_is_reported_like_the_executor_does(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    r = rt.run("sleep 5", LocalExecutor(timeout=0.5))
    assert r.returncode == -1 and "timed out" in r.exception_info
    assert rt.state.attempts[-1].command_class is CommandClass.OTHER


def test_many_matched_lines_do_not_flood_the_view(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    rt.run("grep -n return pkg/util.py", EX)
    line = [ln for ln in rt.inform().splitlines() if "pkg/util.py" in ln and "lines" in ln][0]
    assert "and 54 more ranges" in line and len(line) < 150


def test_same_output_after_a_change_is_said_so(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    test = "python3 -m unittest -q 2>&1 | grep -v '^Ran'"  # no timings: the same bytes when nothing is fixed
    (repo / "test_u.py").write_text(
        "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
        + "".join(f"    def test_{i}(self):\n        self.assertEqual(add(2, {i}), {2 + i})\n\n" for i in range(1, 4))
    )
    first = rt.run(test, EX)
    rt.run("sed -i 's/^def sub/def subtract/' calc.py", EX)  # a change that does not fix anything
    again = rt.run(test, EX)
    assert again.executed and again.output.startswith("[ledger: same as step 1's output")
    assert ", though files changed since]" in again.output
    assert expanded(rt, again.attempt_id) == expanded(rt, first.attempt_id) == EX(test, str(repo)).output


def test_a_run_directory_inside_the_workspace_is_never_scanned(tmp_path) -> None:
    """`ledger-run mini -o ledger-runs/x` from the repository: the ledger's own files are not the
    agent's changes."""
    from ledger_runtime.executor import LocalExecutor

    root = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    with LedgerRuntime(root, root / "ledger-runs" / "one") as rt:
        ex = LocalExecutor()
        rt.run("cat a.py", ex)
        rt.run("echo y > b.txt", ex)
        rt.run("cat a.py", ex)
        changed = {Path(m.path).name for m in rt.state.modifications}
    assert changed == {"b.txt"}
    import subprocess

    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
    assert "ledger-runs" not in status and "b.txt" in status


def test_an_agents_read_numbered_with_a_colon_is_checked_against_the_file(repo, tmp_path):
    """OpenCode's read shows each line after its number and ": ": what it claims is checked like cat -n's."""
    from ledger_runtime import ExecResult, analyze_read

    rt = runtime(repo, tmp_path)
    try:
        path = str(repo / "calc.py")
        lines = (repo / "calc.py").read_text().splitlines()
        for numbers, expected in ((range(1, len(lines) + 1), "whole"), (range(2, len(lines) + 2), None)):
            shown = "".join(f"{n}: {line}\n" for n, line in zip(numbers, lines))
            plan = rt.propose("read calc.py", analysis=analyze_read(path, str(repo), "read calc.py", numbered="colon"))
            rt.record(plan, ExecResult(f"<path>{path}</path>\n<content>\n{shown}</content>", 0), 0.0, shown_raw=True)
            seen = [o for o in rt.state.observations_of(path) if o.step == plan.step]
            assert [o.span_text() for o in seen] == ([expected] if expected else []), shown
    finally:
        rt.close()


def test_a_runtime_collects_the_young_generation_less_often_unless_the_host_chose(tmp_path):
    """A command allocates thousands of small containers: at CPython's default threshold (700) a first read set off a
    dozen collections. A runtime raises the default once; a threshold the host process set is its own."""
    import subprocess
    import sys

    root = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    probe = (
        "import gc, sys\n"
        "from pathlib import Path\n"
        "from ledger_runtime.runtime import LedgerRuntime, YOUNG_THRESHOLD\n"
        "if sys.argv[2] != 'default': gc.set_threshold(int(sys.argv[2]), 7, 9)\n"
        "before = gc.get_threshold()\n"
        "with LedgerRuntime(Path(sys.argv[1]), Path(sys.argv[1]) / ('run-' + sys.argv[2])) as rt:\n"
        "    print(before, gc.get_threshold(), YOUNG_THRESHOLD)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    outputs = {}
    for host in ("default", "500"):
        r = subprocess.run([sys.executable, "-c", probe, str(root), host], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        outputs[host] = r.stdout.strip()
    young = outputs["default"].split(") ")[-1]
    assert outputs["default"] == f"(700, 10, 10) ({young}, 10, 10) {young}" and int(young) > 700
    assert outputs["500"] == f"(500, 7, 9) (500, 7, 9) {young}", "the host's own threshold is left alone"
