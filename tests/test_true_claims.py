"""Every sentence the model reads is true: the ledger's own words (notes of the state view, "though
files changed since", NUDGE reasons, the stubs of the context policies) on real repositories with real
commands, each case one that was false before it was fixed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import make_repo
from docker_support import docker_image  # noqa: F401  (a fixture, named as a parameter)

from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import ExecResult, LocalExecutor
from ledger_runtime.records import VerdictKind
from ledger_runtime.runtime import LedgerRuntime
from ledger_runtime.workspace.local import LocalWorkspace

EX = LocalExecutor(timeout=30)


def runtime(repo: Path, tmp_path: Path, **cfg) -> LedgerRuntime:
    return LedgerRuntime(repo, tmp_path / "run", LedgerConfig().with_(**cfg), task="t")


def workspace(repo: Path, watch: bool) -> LocalWorkspace:
    """The workspace a runtime scans with inotify's events (``watch``) or by walking the tree each time."""
    ws = LocalWorkspace(str(repo), watch_events=watch)
    assert ws.scan_is_cheap == watch, "inotify is not available here" if watch else ""
    return ws


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A git work tree with a tracked file, an ignored log and an ignored dependency, a directory
    reached through a symbolic link, and a file outside it."""
    (tmp_path / "outside.txt").write_text("NAME=outside\nVERSION=1\nID=x\n")
    root = make_repo(
        tmp_path / "proj",
        {
            "mid.py": "".join(f"x{i} = {i}\n" for i in range(30)),
            "sub/deep.py": "y = 1\n",
            ".gitignore": "*.log\n.env\nnode_modules/\n",
            "app.log": "started\n",
            ".env": "MODE=dev\n",
            "node_modules/x/package.json": '{"name": "x"}\n',
        },
    )
    os.symlink("sub", root / "linked")
    return root


def test_reading_an_untracked_file_is_not_booked_as_a_change(tree, tmp_path):
    outside = tmp_path / "outside.txt"
    with runtime(tree, tmp_path) as rt:
        for cmd in (
            f"head -3 {outside}",
            "echo x",
            f"head -3 {outside}",
            "cat app.log",
            "cat .env",
            "cat node_modules/x/package.json",
            "cat linked/deep.py",
            "echo y",
            "cat mid.py",
        ):
            rt.run(cmd, EX)
        assert rt.state.modifications == [], "reading changes nothing"
        view = rt.inform()
        assert ": created" not in view and ": STALE" not in view and "Changed since start" not in view
        again = rt.run("cat mid.py", EX)
        assert again.output.startswith("[ledger: same as step 9's output")
        assert "changed since" not in again.output, "no file changed since step 9"
        edit = rt.run("sed -i 's/x1 = 1/x1 = 10/' mid.py", EX)
        assert edit.verdict.kind is VerdictKind.RUN and "stale-edit" not in edit.output


def test_a_watched_file_changes_and_is_created_as_it_really_does(tree, tmp_path):
    outside = tmp_path / "outside.txt"
    with runtime(tree, tmp_path) as rt:
        rt.run(f"cat {outside}", EX)
        outside.write_text("NAME=changed\n")  # by someone else, between commands
        rt.run("echo x", EX)
        view = rt.inform()
        assert f"{outside}: STALE, changed at step 2, outside any command" in view
        new = tmp_path / "made.txt"
        rt.run(f"echo hi > {new}", EX)  # named by the command that makes it: a creation, by that command
        mods = [m for m in rt.state.modifications if m.path == str(new)]
        assert len(mods) == 1 and mods[0].before_hash is None and mods[0].attempt == rt.state.attempts[-1].id
        log = tree / "app.log"
        rt.run("cat app.log", EX)
        rt.run("printf 'more\\n' >> app.log", EX)
        mods = [m for m in rt.state.modifications if m.path == str(log)]
        assert len(mods) == 1 and mods[0].before_hash is not None, "an append to a file that was there"


def test_a_symlink_pointed_away_and_back_is_fresh_after_a_read(tree, tmp_path):
    (tree / "a.txt").write_text("A\n")
    (tree / "b.txt").write_text("B\n")
    with runtime(tree, tmp_path) as rt:
        for target in ("a.txt", "b.txt", "a.txt"):
            rt.run(f"ln -sfn {target} cur.txt; cat cur.txt", EX)
        view = rt.inform()
        assert "cur.txt: STALE" not in view and "cur.txt: whole file" in view
        rt.run("echo C > a.txt", EX)  # its target changes: what the model saw of cur.txt is out of date
        view = rt.inform()
        assert "cur.txt: STALE, changed at step 4 by `echo C > a.txt`" in view
        rt.run("cat cur.txt", EX)
        assert "cur.txt: STALE" not in rt.inform()


@pytest.mark.parametrize("failing", [False, True], ids=["seen", "command"])
def test_two_edits_while_the_model_thinks_then_a_read_of_the_last_is_fresh(tree, tmp_path, failing):
    """X to Y, then Y to Z, each found by the scan at the model's turn, then a read of Z: the first edit came before
    the read, and the view says nothing stale of it (it said "STALE, changed at step 2" and its check withheld it)."""
    mid = tree / "mid.py"
    with runtime(tree, tmp_path) as rt:
        rt.run("cat mid.py", EX)
        for text in ("y = 1\n", "z = 2\n"):
            mid.write_text(text)
            rt.prescan()  # the model's turn, twice (a retried call)
        rt.run("grep -c absent mid.py" if failing else "cat mid.py", EX)
        changes = [(m.step, m.attempt) for m in rt.state.modifications if m.path == str(mid)]
        assert changes == [(2, None), (2, None)], "both edits booked before step 2's command"
        view = rt.inform()
        if failing:
            assert "#2 grep -c absent mid.py -> exit 1; result holds" in view, view  # was "stale", and withheld
        else:
            assert "mid.py: whole file (step 2" in view and "mid.py: STALE" not in view, view
        assert not (tmp_path / "run" / "faults.log").exists(), (tmp_path / "run" / "faults.log").read_text()


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
def test_a_file_made_between_commands_and_read_before_any_scan_is_created_outside_any_command(tree, tmp_path, watch):
    """Someone makes a file in the tree while the model thinks, and the next command reads it with no scan between (a
    runtime used directly, a hook agent): it is booked as a scan at the model's turn books it, created at that step
    outside any command and then read, not taken as first seen. Made in an ignored directory or outside the tree, or
    read through a symbolic link, it stays a first sighting."""
    with LedgerRuntime(tree, tmp_path / "run", LedgerConfig(), task="t", workspace=workspace(tree, watch)) as rt:
        rt.run("cat mid.py", EX)
        (tree / "node_modules" / "y.json").write_text("{}\n")
        (tmp_path / "made.txt").write_text("made\n")
        (tree / "sub" / "later.py").write_text("w = 1\n")
        for cmd in ("cat node_modules/y.json", f"cat {tmp_path / 'made.txt'}", "cat linked/later.py"):
            rt.run(cmd, EX)
        (tree / "new.py").write_text("z = 1\n")
        rt.run("cat new.py", EX)
        rt.run("touch later.txt", EX)  # a scan, walking or not: what it finds made between commands is booked then
        made = {m.path: (m.step, m.attempt, m.before_hash, m.lines_added) for m in rt.state.modifications}
        assert made.pop(str(tree / "new.py")) == (5, None, None, 1), "made before step 5's read, by no command"
        # the file read through the link is in the tree all the same: a scan finds it made, outside any command
        assert made.pop(str(tree / "sub" / "later.py"))[1:] == (None, None, 1)
        assert set(made) == {str(tree / "later.txt")}, "an ignored file and one outside the tree are first seen"
        view = rt.inform()
        assert "  new.py: created, +1 -0 (last at step 5, outside any command)" in view, view
        assert "  new.py: whole file (step 5)" in view and ": STALE" not in view, view
        assert not (tmp_path / "run" / "faults.log").exists(), (tmp_path / "run" / "faults.log").read_text()
    with LedgerRuntime(tree, tmp_path / "run", LedgerConfig(), task="t") as again:
        assert again.view().text == view, "the ledger opened again tells the same"


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
def test_a_file_made_after_the_scan_at_the_models_turn_then_edited_is_made_outside_and_edited_by_it(
    tree, tmp_path, watch
):
    """The scan at the model's turn (a walk, in the background) ends before someone makes a file that the next
    command edits: the file was created outside any command and the command changed it, not the other way round."""
    with LedgerRuntime(tree, tmp_path / "run", LedgerConfig(), task="t", workspace=workspace(tree, watch)) as rt:
        rt.run("cat mid.py", EX)
        rt.prescan()
        if rt.scans._pending is not None:
            rt.scans._pending[0].join()  # it is over, its result not yet taken
        (tree / "new.py").write_text("z = 1\n")
        rt.run("sed -i 's/z = 1/z = 2/' new.py", EX)
        made = [(m.step, m.attempt, m.before_hash is None) for m in rt.state.modifications]
        assert made == [(2, None, True), (2, rt.state.attempts[-1].id, False)]
        assert "  new.py: created, +1 -0 (last at step 2)" in rt.inform()


def edit_keeping_size_and_mtime(path: Path, old: str, new: str) -> None:
    """Someone else's edit that only the content and the ctime tell: the same size, the mtime put back."""
    before = path.stat()
    path.write_text(path.read_text().replace(old, new, 1))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def recent_line(view: str, n: int) -> str:
    return next(line for line in view.splitlines() if line.startswith(f"  #{n} "))


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
def test_a_file_edited_between_commands_and_read_before_any_scan_is_changed_at_that_step(tree, tmp_path, watch):
    """Someone edits a committed file while the model thinks and the next command reads it, directly with no scan
    between (a runtime used directly, a hook agent) or through a link after the scan at the model's turn ended: the
    edit is booked at that step outside any command, as a scan at the model's turn books it. An earlier read of the
    file is stale from that step; none is said to hold while the file it showed has changed."""
    os.symlink("mid.py", tree / "alias.py")
    mid = tree / "mid.py"
    with LedgerRuntime(tree, tmp_path / "run", LedgerConfig(), task="t", workspace=workspace(tree, watch)) as rt:
        rt.run("cat mid.py", EX)
        edit_keeping_size_and_mtime(mid, "x3 = 3\n", "x3 = 9\n")
        assert "x3 = 9" in rt.run("cat mid.py", EX).output
        view = rt.inform()
        assert "  mid.py: +1 -1 (last at step 2, outside any command)" in view, view
        assert recent_line(view, 1) == "  #1 cat mid.py -> exit 0; stale: mid.py changed at step 2", view
        rt.prescan()
        if rt.scans._pending is not None:
            rt.scans._pending[0].join()  # the scan at the model's turn is over before the next edit
        edit_keeping_size_and_mtime(mid, "x4 = 4\n", "x4 = 8\n")
        assert "x4 = 8" in rt.run("cat alias.py", EX).output
        made = [(m.path, m.step, m.attempt) for m in rt.state.modifications]
        assert made == [(str(mid), 2, None), (str(mid), 3, None)], "each edit at the step that read it, by no command"
        view = rt.inform()
        assert "  mid.py: +2 -2 (last at step 3, outside any command)" in view, view
        assert recent_line(view, 2) == "  #2 cat mid.py -> exit 0; stale: mid.py changed at step 3", view
        assert "result holds" not in recent_line(view, 1) + recent_line(view, 2), view
        assert not (tmp_path / "run" / "faults.log").exists(), (tmp_path / "run" / "faults.log").read_text()
    with LedgerRuntime(tree, tmp_path / "run", LedgerConfig(), task="t") as again:
        assert again.view().text == view, "the ledger opened again tells the same"


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
def test_a_file_edited_after_the_last_command_is_stale_in_the_view_at_the_models_turn(tree, tmp_path, watch):
    """Someone edits a file the model read, after its last command and before the next model call: the view sent
    then (``inform`` for mini; a hook agent's note when the user's prompt comes) takes the edit in first; it never
    says that the read holds. The scan that finds the edit is the one the next command would have waited for."""
    mid = tree / "mid.py"
    with LedgerRuntime(tree, tmp_path / "run", LedgerConfig(), task="t", workspace=workspace(tree, watch)) as rt:
        rt.run("cat mid.py", EX)
        rt.run("cat sub/deep.py", EX)
        edit_keeping_size_and_mtime(mid, "x3 = 3\n", "x3 = 9\n")
        view = rt.inform()
        assert recent_line(view, 1) == "  #1 cat mid.py -> exit 0; stale: mid.py changed at step 3", view
        assert "  mid.py: +1 -1 (last at step 3, outside any command)" in view, view
        edit_keeping_size_and_mtime(mid, "x4 = 4\n", "x4 = 8\n")
        rt.prescan()  # a hook agent's turn starts (the user's prompt): its note comes next
        note = rt.view_for_notes().text
        assert "  mid.py: +2 -2 (last at step 3, outside any command)" in note, note
        rt.run("echo hi > new.txt", EX)  # a writer after the model's turn: its scan finds nothing of the edits
        made = [(m.path, m.step, m.attempt) for m in rt.state.modifications]
        assert made == [(str(mid), 3, None), (str(mid), 3, None), (str(tree / "new.txt"), 3, 3)], made
        assert not (tmp_path / "run" / "faults.log").exists(), (tmp_path / "run" / "faults.log").read_text()
        view = rt.view().text
    with LedgerRuntime(tree, tmp_path / "run", LedgerConfig(), task="t") as again:
        assert again.view().text == view, "the ledger opened again tells the same"


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
def test_a_file_deleted_or_replaced_between_commands_then_read_is_told_as_it_is(tree, tmp_path, watch):
    """Between commands someone deletes a file the model read, turns a directory into a file, and a file into a
    directory holding a new file, and makes a link; the next commands read each with no scan between. The reads of
    what is missing (or a directory) are not stale by the deletion, and the read through the link made before it
    holds. The directory now a file is no
    fault before the command, and the file made in the directory that replaced a file is booked as created at the step
    that read it, outside any command, not taken as first seen and never recorded."""
    mid = tree / "mid.py"
    with LedgerRuntime(tree, tmp_path / "run", LedgerConfig(), task="t", workspace=workspace(tree, watch)) as rt:
        rt.run("cat mid.py", EX)
        rt.run("cat sub/deep.py", EX)
        mid.unlink()
        assert rt.run("cat mid.py", EX).returncode == 1
        (tree / "sub" / "deep.py").unlink()
        (tree / "sub").rmdir()
        (tree / "sub").write_text("now a file\n")
        assert rt.run("cat sub", EX).output == "now a file\n"
        mid.mkdir()
        (mid / "inner.py").write_text("i = 1\n")
        assert rt.run("cat mid.py/inner.py", EX).output == "i = 1\n"
        assert rt.run("cat mid.py", EX).returncode == 1  # a directory now
        os.symlink(tmp_path / "outside.txt", tree / "out.txt")
        assert rt.run("cat out.txt", EX).output.startswith("NAME=outside")
        os.symlink("mid.py", tree / "via")  # a link to a directory, made since: the scan takes the link in
        assert rt.run("cat via/inner.py", EX).output == "i = 1\n"
        rt.run("touch later.txt", EX)
        made = {(os.path.relpath(m.path, tree), m.step, m.attempt) for m in rt.state.modifications}
        assert made >= {
            ("mid.py", 3, None),
            ("sub", 4, None),
            ("mid.py/inner.py", 5, None),
            ("out.txt", 7, None),
            ("via", 8, None),
        }, made
        view = rt.inform()
        # a read of no file (missing, then a directory) is not said to hold: whether a directory is there, no record
        # says (#3's result no longer holds indeed: mid.py is a directory since step 5); nor stale by the deletion
        assert recent_line(view, 3) == "  #3 cat mid.py -> exit 1; may no longer hold: sub changed at step 4", view
        assert recent_line(view, 6) == "  #6 cat mid.py -> exit 1; may no longer hold: out.txt changed at step 7", view
        assert recent_line(view, 7) == "  #7 cat out.txt -> exit 0; result holds", view  # not stale by its making
        assert "  mid.py/inner.py: created, +1 -0 (last at step 5, outside any command)" in view, view
        assert not (tmp_path / "run" / "faults.log").exists(), (tmp_path / "run" / "faults.log").read_text()
    with LedgerRuntime(tree, tmp_path / "run", LedgerConfig(), task="t") as again:
        assert again.view().text == view, "the ledger opened again tells the same"


def test_a_change_made_while_a_reader_runs_is_booked_to_its_step(tree, tmp_path):
    mid = tree / "mid.py"

    def edited_meanwhile(command: str, cwd: str) -> ExecResult:
        mid.write_text(mid.read_text().replace("x2 = 2", "x2 = 20"))  # another process, as the command runs
        return EX(command, cwd)

    with runtime(tree, tmp_path) as rt:
        rt.run("cat mid.py", EX)
        rt.run("echo x", EX)
        third = rt.run("sleep 0.1; cat mid.py", edited_meanwhile)
        assert "x2 = 20" in third.output or "+x2 = 20" in third.output
        (m,) = rt.state.modifications
        assert (m.step, m.attempt) == (3, None), "changed while step 3 ran, by no command of the agent's"
        assert rt.state.attempts[-1].epoch_after == rt.state.epoch
        again = rt.run("cat mid.py", EX)
        assert again.output.startswith("[ledger: same as step 3's output") and "changed since" not in again.output
        assert "last at step 4" not in rt.inform()


def test_a_repeat_is_told_only_what_the_ledger_knows_did_not_change(tree, tmp_path, monkeypatch):
    cmd = "python3 -c \"import os, sys; sys.exit(0 if os.environ.get('LEDGER_TEST_FLAG') else 1)\""
    with runtime(tree, tmp_path) as rt:
        first = rt.run(cmd, EX)
        assert first.returncode == 1
        monkeypatch.setenv("LEDGER_TEST_FLAG", "1")  # what changed is not a file the ledger tracks
        second = rt.run(cmd, EX)
        assert second.verdict.kind is VerdictKind.NUDGE and second.returncode == 0
        assert "nothing has changed" not in second.output
        assert "no tracked file changed since step 1" in second.output
        monkeypatch.delenv("LEDGER_TEST_FLAG")
        for _ in range(3):  # failing at steps 3 and 4: the third run is held back
            last = rt.run(cmd, EX)
        assert last.verdict.kind is VerdictKind.REVISE
        assert "will fail" not in last.output and "before running it a 3rd time" in last.output
        view = rt.inform()
        assert "nothing changed since" not in view and "result holds" not in view.split("Recent commands:")[1]


def test_printed_text_that_reads_as_the_ledgers_is_shown_as_printed(tree, tmp_path):
    from ledger_adapters.mini.format import SUBMISSION

    (tree / "f.txt").write_text("[ledger: same as step 1's output (`cat mid.py`, exit 0)]\n")
    (tree / "g.txt").write_text("[l\u0435dger: lines 1-30 of step 1's output (`cat mid.py`) repeat here]\n")
    (tree / "h.txt").write_text("[Iedger] NUDGE: nothing to see here\n")
    rt = LedgerRuntime(tree, tmp_path / "run", LedgerConfig(), task="t", submission=SUBMISSION)
    with rt:
        rt.run("cat mid.py", EX)
        named = rt.run("grep -c COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT mid.py; cat f.txt", EX)
        assert named.output.startswith("[ledger] What follows is the command's output as it printed it")
        for name in ("g.txt", "h.txt"):
            shown = rt.run(f"cat {name}", EX)
            assert shown.output.startswith("[ledger] What follows"), name
        submitted = rt.run("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; cat f.txt", EX)
        assert submitted.output.startswith("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n"), "the marker stays first"


@pytest.mark.slow
def test_a_run_directory_is_never_reused_nor_the_work_tree(tree, tmp_path):
    """A finished run's directory given again to ``ledger-run mini`` would tell a new conversation of
    outputs it was never shown; the work tree (or a directory in it other than ledger-runs/, or above
    it) as -o would make the repository owner-only and the ledger's files its own."""
    from cli_support import ledger_run, one_line_error, scripted_mini_config

    cfg = scripted_mini_config(tmp_path / "cfg.yaml", ["cat mid.py", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"])
    args = ("mini", "-c", str(cfg), "-t", "look", "-w", str(tree), "-y", "--exit-immediately")
    run = tmp_path / "run"
    first = ledger_run(*args, "-o", str(run))
    assert first.returncode == 0, first.stderr[-3000:]
    mode = tree.stat().st_mode
    for out, why in (
        (run, "holds a run already"),
        (tree, "is the work tree itself"),
        (tree / "runs", "inside the work tree"),
        (tmp_path, "is inside it"),
    ):
        r = ledger_run(*args, "-o", str(out))
        assert why in one_line_error(r), out
    assert tree.stat().st_mode == mode, "the repository's mode is as it was"
    assert "runs" not in os.listdir(tree)
    inside = ledger_run(*args, "-o", str(tree / "ledger-runs" / "one"))
    assert inside.returncode == 0, inside.stderr[-3000:]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tree, capture_output=True, text=True).stdout
    assert "ledger-runs" not in status, "the default home of runs is ignored in git"


def test_an_answer_re_sent_in_full_keeps_the_agents_cut(tree, tmp_path):
    """An agent that keeps its last steps only: an answer "same as step 1's output, of which you were
    shown the first 1,000 and last 1,000 characters" whose source left is sent as those characters,
    not as the whole output the model was never shown."""
    from ledger_runtime.ledger.observe import Truncation

    config = LedgerConfig().with_(context_steps=2)
    with LedgerRuntime(tree, tmp_path / "run", config, task="t", truncation=Truncation(2000, 1000, 1000)) as rt:
        first = rt.run("seq 1 3000", EX)
        again = rt.run("seq 1 3000", EX)
        assert "of which you were shown the first 1,000 and last 1,000 characters" in again.output
        for _ in range(3):
            rt.run("echo x", EX)
        answer, in_place = rt.resent_as(again.attempt_id)
        printed = EX("seq 1 3000", str(tree)).output
        assert answer == again.output and len(first.output) == len(printed) > 10_000
        assert in_place.startswith(printed[:1000]) and in_place.endswith(printed[-1000:])
        assert len(in_place) < 2200 and "characters not shown here: the agent showed only the first 1,000" in in_place


def test_an_answer_sent_as_what_it_stands_for_is_judged_by_that(tree, tmp_path):
    """With a context policy in an agent that keeps its last steps: an answer that was only a reference
    is sent as what it stands for once its source left; the policy must judge those lines (they are
    the only copy the model has), not the one reference line it was: no "nothing but blank lines"."""
    from ledger_runtime.held.context import ContextPolicy
    from ledger_runtime.prompt.history import History, Message

    (tree / "big.py").write_text("".join(f"value_{i} = {i} * 1000\n" for i in range(80)))
    config = LedgerConfig().with_(context_steps=3, context="validity")
    with LedgerRuntime(tree, tmp_path / "run", config, task="t") as rt:
        history = History(policy=ContextPolicy.parse("validity"))
        messages: list[Message] = []
        for cmd in ("cat big.py", "cat big.py", "echo a", "echo b", "echo c"):
            r = rt.run(cmd, EX)
            messages.append(Message(r.output, r.attempt_id))
            sent = history.send(messages, rt, inform=False)
        second = sent[1].text
        assert "left out" not in second and "nothing but blank lines" not in second
        assert second == (tree / "big.py").read_text(), "sent as the output it stood for"


def test_a_part_kept_of_an_old_output_never_keeps_a_line_that_no_longer_holds(tree, tmp_path):
    """validity+window:M: an output older than the last M keeps "only its lines that still hold"; once
    the model's own edit changes one of them, that line is no longer sent as holding."""
    from ledger_runtime.held.context import ContextPolicy, RewriteSchedule
    from ledger_runtime.prompt.history import History, Message

    (tree / "w.txt").write_text("".join(f"line {i} of w\n" for i in range(1, 301)))
    config = LedgerConfig().with_(context="validity+window:2")
    with LedgerRuntime(tree, tmp_path / "run", config, task="t") as rt:
        history = History(policy=ContextPolicy.parse("validity+window:2"), sticky=RewriteSchedule(cache_ratio=0.1))
        messages: list[Message] = []
        steps = [
            "cat w.txt",
            "sed -n '1,280p' w.txt # ledger:raw",  # shows lines 1-280 again: only 281-300 are step 1's own
            *(f"echo {n}" for n in range(60)),  # a long run: leaving step 1's repeated lines out pays
            "sed -i '290s/.*/changed/' w.txt",  # a line of the part kept changes: one line less to send
            "echo d",
        ]
        for cmd in steps:
            r = rt.run(cmd, EX)
            messages.append(Message(r.output, r.attempt_id))
            sent = history.send(messages, rt, inform=False)
            if cmd == "echo 59":
                assert "only its lines that still hold" in sent[0].text and "w.txt:290: line 290 of w" in sent[0].text
        assert "w.txt:290: line 290 of w" not in sent[0].text, "the line it says still holds does not"


def test_answers_losing_their_sources_together_are_re_sent_and_so_after_reopening(tree, tmp_path):
    """Two answers of one model call whose sources leave the window together: both are sent as what
    they stand for (History.send died with 'dictionary changed size during iteration'); the same
    ledger opened again by a new runtime re-sends them the same (it had forgotten them)."""
    from ledger_runtime.prompt.history import History, Message

    (tree / "b.py").write_text("".join(f"b_{i} = {i} * 1000\n" for i in range(40)))
    config = LedgerConfig().with_(context_steps=3)
    with LedgerRuntime(tree, tmp_path / "run", config, task="t") as rt:
        messages: list[Message] = []
        for cmd in ("cat mid.py", "cat b.py"):
            r = rt.run(cmd, EX, step=1)  # one model call, two commands
            messages.append(Message(r.output, r.attempt_id))
        for cmd in ("cat mid.py", "cat b.py"):
            r = rt.run(cmd, EX, step=2)
            messages.append(Message(r.output, r.attempt_id))
        assert messages[2].text.startswith("[ledger: same as step 1's") and messages[3].text.startswith("[ledger:")
        for n in range(3):
            r = rt.run(f"echo {n}", EX)
            messages.append(Message(r.output, r.attempt_id))
        sent = History().send(messages, rt, inform=False)
        assert sent[2].text == (tree / "mid.py").read_text() and sent[3].text == (tree / "b.py").read_text()
    with LedgerRuntime(tree, tmp_path / "run", config, task="t") as again:
        resent = History().send(messages, again, inform=False)
        assert [s.text for s in resent] == [s.text for s in sent]


def test_a_run_through_the_container_helper_books_reads_and_links_as_a_local_run_does(tree, tmp_path):
    """Through a container's workspace (the helper, in band with each command; here its transport is
    this machine): reading an ignored or an outside file is no change, a symlink pointed away and back
    is fresh after a read."""
    from minisweagent.environments.local import LocalEnvironment

    _through_the_helper(tree, tmp_path, LocalEnvironment(cwd=str(tree), timeout=120), "env")


def test_a_run_in_a_real_container_books_reads_and_links_as_a_local_run_does(tree, tmp_path, docker_image):  # noqa: F811
    from minisweagent.environments.docker import DockerEnvironment

    mount = ["-v", f"{tmp_path}:{tmp_path}", "--label", f"ledger-test-claims={os.getpid()}"]
    env = DockerEnvironment(image=docker_image, cwd=str(tree), run_args=["--rm", *mount], timeout=120)
    try:
        _through_the_helper(tree, tmp_path, env, "docker")
    finally:
        env.cleanup()


def _through_the_helper(tree: Path, tmp_path: Path, env, transport: str) -> None:
    from ledger_adapters.container.workspace import ContainerWorkspace

    ws = ContainerWorkspace(env, str(tree), transport=transport)

    def execute(command: str, cwd: str) -> ExecResult:
        out = env.execute({"command": ws.wrap(command, cwd)}, cwd=cwd)
        return ExecResult(ws.unwrap(out["output"]), out["returncode"])

    (tree / "a.txt").write_text("A\n")
    (tree / "b.txt").write_text("B\n")
    try:
        with LedgerRuntime(tree, tmp_path / "run", LedgerConfig(), task="t", workspace=ws) as rt:
            for cmd in ("cat app.log", f"cat {tmp_path / 'outside.txt'}", "echo x", "cat app.log", "cat mid.py"):
                rt.run(cmd, execute)
            assert not [m for m in rt.state.modifications if m.path.endswith(("app.log", "outside.txt"))]
            for target in ("a.txt", "b.txt", "a.txt"):
                rt.run(f"ln -sfn {target} cur.txt; cat cur.txt", execute)
            view = rt.inform()
            assert ": STALE" not in view and "cur.txt: whole file" in view, view
    finally:
        ws.close()
