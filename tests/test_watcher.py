"""Event-driven scans (inotify, watcher.py): a scan re-lists and re-hashes only what the kernel said
changed, and must give exactly the snapshot a full walk gives, whatever happened in between."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import git, make_repo

from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime
from ledger_runtime.workspace.scanner import ScanBounds, WorkspaceScanner, delta
from ledger_runtime.workspace.watcher import Watcher

pytestmark = pytest.mark.skipif(Watcher.open() is None, reason="no inotify on this machine (Linux only)")

FILES = {f"pkg{i}/mod{j}.py": f"x = {i * 10 + j}\n" for i in range(4) for j in range(5)}
FILES.update({".gitignore": "*.log\nbuild/\n", "README.md": "# r\n", "pkg0/sub/deep.py": "d\n"})


def truth(root: Path) -> dict[str, str]:
    """A full walk by a scanner that never watched anything."""
    s = WorkspaceScanner(str(root), watch_events=False)
    return {p: fs.digest for p, fs in s.scan().files.items()}


def ops(rng: random.Random, root: Path) -> None:
    files = [p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts]
    dirs = [p for p in root.rglob("*") if p.is_dir() and ".git" not in p.parts]
    kind = rng.choice(
        [
            "write",
            "append",
            "create",
            "delete",
            "rename",
            "mkdir-tree",
            "rmtree",
            "move-dir",
            "symlink",
            "ignored",
            "gitignore",
            "checkout",
            "add-f",
            "same-size",
        ]
    )
    if kind in ("write", "append", "delete", "rename", "same-size") and not files:
        kind = "create"
    if kind == "write":
        rng.choice(files).write_text(f"w {rng.random()}\n")
    elif kind == "append":
        with open(rng.choice(files), "a") as f:
            f.write("more\n")
    elif kind == "create":
        d = rng.choice(dirs + [root])
        (d / f"new{rng.randint(0, 99)}.py").write_text("n\n")
    elif kind == "delete":
        rng.choice(files).unlink()
    elif kind == "rename":
        f = rng.choice(files)
        f.rename(f.with_name(f"renamed{rng.randint(0, 99)}.py"))
    elif kind == "mkdir-tree":
        d = root / f"t{rng.randint(0, 9)}" / "a" / "b"
        d.mkdir(parents=True, exist_ok=True)
        (d / "leaf.py").write_text("leaf\n")
    elif kind == "rmtree" and dirs:
        shutil.rmtree(rng.choice(dirs), ignore_errors=True)
    elif kind == "move-dir" and dirs:
        src = rng.choice(dirs)
        if src.exists():
            dst = root / f"moved{rng.randint(0, 99)}"
            if not dst.exists():
                src.rename(dst)
    elif kind == "symlink":
        link = root / f"link{rng.randint(0, 9)}"
        if not link.exists() and not link.is_symlink():
            os.symlink("README.md", link)
    elif kind == "ignored":
        (root / f"x{rng.randint(0, 9)}.log").write_text("ignored\n")
    elif kind == "gitignore":
        with open(root / ".gitignore", "a") as f:
            f.write(f"renamed{rng.randint(0, 99)}.py\n")
    elif kind == "checkout":
        subprocess.run(["git", "-C", str(root), "checkout", "-q", "--", "."], capture_output=True)
    elif kind == "add-f":
        logs = list(root.glob("*.log"))
        if logs:
            git(root, "add", "-f", str(rng.choice(logs)))
    elif kind == "same-size" and files:
        f = rng.choice(files)
        data = bytearray(f.read_bytes())
        if data:
            data[0] = ord("Q") if data[0] != ord("Q") else ord("R")
            st = f.stat()
            f.write_bytes(bytes(data))
            os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.slow
def test_watched_scans_give_what_a_full_walk_gives(tmp_path, seed):
    rng = random.Random(seed)
    root = make_repo(tmp_path / "w", FILES)
    # never fall back on a walk by schedule; no time budget (a scan slowed past 3 s by a loaded machine
    # would stop taking in new entries and mark their directory untracked: by design, not this test's subject)
    s = WorkspaceScanner(str(root), cross_check_every=10_000, bounds=ScanBounds(budget_s=600))
    prev = s.scan()
    for step in range(60):
        for _ in range(rng.randint(1, 3)):
            ops(rng, root)
        snap = s.scan()
        got = {p: fs.digest for p, fs in snap.files.items()}
        want = truth(root)
        assert got == want, f"seed {seed} step {step}: {set(got) ^ set(want)} differ, or contents"
        full = {c.path for c in delta_full(prev, snap)}
        assert {c.path for c in delta(prev, snap)} == full, "the changes it carries are the changes"
        prev = snap
    assert s.incremental_scans > 30, "most scans were incremental"


def delta_full(a, b):
    from ledger_runtime.workspace.scanner import Snapshot

    return delta(Snapshot(a.files, a.root), Snapshot(b.files, b.root))


def test_a_scan_after_nothing_changed_reads_nothing(tmp_path):
    root = make_repo(tmp_path / "w", {f"d{i}/f{j}.py": "x\n" for i in range(20) for j in range(20)})
    s = WorkspaceScanner(str(root))
    s.scan()
    reads = s.cache.reads
    walks = s.full_scans
    for _ in range(5):
        assert s.scan().changes == []
    assert s.cache.reads == reads and s.full_scans == walks and s.incremental_scans >= 5
    (root / "d3" / "f7.py").write_text("changed\n")
    snap = s.scan()
    assert [os.path.relpath(c.path, root) for c in snap.changes] == ["d3/f7.py"] and s.cache.reads == reads + 1


def test_it_walks_when_it_cannot_vouch_for_the_tree(tmp_path):
    root = make_repo(tmp_path / "w", FILES)
    s = WorkspaceScanner(str(root), cross_check_every=3)
    s.scan()
    for _ in range(4):
        s.scan()
    assert s.full_scans == 2 and s.incremental_scans == 3, "after cross_check_every increments, a full walk"
    s.watcher.failed = True  # a watch that could not be added (the per-user limit)
    (root / "README.md").write_text("x\n")
    s.scan()
    assert s.full_scans == 3 and s.watcher is None, "then it walks, as without inotify"
    assert {os.path.relpath(p, root) for p in s.scan().files} >= {"README.md"}


def test_a_runtime_records_changes_between_commands_with_the_watcher(tmp_path):
    root = make_repo(tmp_path / "w", FILES)
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:
        ex = LocalExecutor()
        rt.run("touch x", ex)
        (root / "pkg1" / "mod2.py").write_text("by the user\n")
        rt.run("echo y > y.txt", ex)
        mods = {(os.path.relpath(m.path, root), m.attempt) for m in rt.state.modifications}
        assert ("pkg1/mod2.py", None) in mods, "made between commands"
        assert ("y.txt", 2) in mods and ("x", 1) in mods
        assert rt.workspace.scanner.incremental_scans >= 3


@pytest.mark.parametrize("watch", [True, False])
def test_changes_between_commands_are_taken_while_the_model_thinks(tmp_path, watch):
    """The state view is rendered when the model's turn starts: the scan for changes made since the
    last command is taken then (in the background where it is a walk), recorded as made between
    commands, and the next command's own path has one scan, the one after it."""
    from ledger_runtime.workspace.local import LocalWorkspace

    root = make_repo(tmp_path / "r", FILES)
    ws = LocalWorkspace(str(root), watch_events=watch)
    rt = LedgerRuntime(root, tmp_path / "run", LedgerConfig(), workspace=ws)
    ex = LocalExecutor()
    try:
        rt.run("touch a.txt", ex)
        (root / "pkg1" / "mod2.py").write_text("x = 'edited by hand'\n")
        scans = ws.scanner.full_scans + ws.scanner.incremental_scans
        rt.inform()  # the model's turn
        if watch:
            assert [os.path.relpath(m.path, root) for m in rt.state.modifications if m.attempt is None] == [
                "pkg1/mod2.py"
            ], "taken at once: a watched scan costs what changed"
        rt.run("echo b > b.txt", ex)
        between = [m for m in rt.state.modifications if m.attempt is None]
        ours = [m for m in rt.state.modifications if m.attempt == rt.state.attempts[-1].id]
        assert [os.path.relpath(m.path, root) for m in between] == ["pkg1/mod2.py"] and [
            os.path.relpath(m.path, root) for m in ours
        ] == ["b.txt"]
        used = ws.scanner.full_scans + ws.scanner.incremental_scans - scans
        # a watched scan at the model's turn, at the command (reading the events queued since), after it;
        # a walk only at the model's turn and after the command
        assert used == (3 if watch else 2), "without a watcher the walk before the command was taken before it"
        (root / "c.txt").write_text("made while no view was rendered\n")
        rt.run("echo d > d.txt", ex)  # no model turn in between: the scan before the command finds it
        assert sorted(os.path.relpath(m.path, root) for m in rt.state.modifications if m.attempt is None) == [
            "c.txt",
            "pkg1/mod2.py",
        ]
    finally:
        rt.close()


def test_a_scan_dropped_because_a_command_was_under_way_loses_no_content(tmp_path):
    """A model's turn inside a command (propose, then a view, then record): the background walk is
    dropped, and the change it saw is still read and counted by the scan after the command."""
    from ledger_runtime.workspace.local import LocalWorkspace

    root = make_repo(tmp_path / "r", FILES)
    ws = LocalWorkspace(str(root), watch_events=False)
    rt = LedgerRuntime(root, tmp_path / "run", LedgerConfig(), workspace=ws)
    try:
        plan = rt.propose("echo b > b.txt")
        (root / "pkg1" / "mod2.py").write_text("x = 12\nadded = 1\nadded = 2\n")
        past = os.stat(root / "pkg1" / "mod2.py").st_mtime - 5
        os.utime(root / "pkg1" / "mod2.py", (past, past))  # not racy: a cached digest is trusted
        rt.prescan()
        res = LocalExecutor()(plan.command, str(root))
        rt.record(plan, res, 0.01)
        mod = next(m for m in rt.state.modifications if m.path.endswith("pkg1/mod2.py"))
        assert (mod.lines_added, mod.lines_removed) == (2, 0) and rt.store.blob(mod.after_hash) is not None
    finally:
        rt.close()


def test_a_watcher_dropped_unclosed_gives_its_instance_back_and_closes_once(tmp_path):
    """inotify instances are the user's (fs.inotify.max_user_instances, 128 for all their processes):
    a watcher nobody closed gives its instance back when it goes, and a second close() never closes
    the file that has taken its descriptor's number since."""
    import gc

    from conftest import _inotify_instances

    before = _inotify_instances()
    w = Watcher.open()
    assert _inotify_instances() == before + 1
    del w
    gc.collect()
    assert _inotify_instances() == before, "the dropped watcher's instance is given back"
    w = Watcher.open()
    number = w.fd
    w.close()
    with open(tmp_path / "f", "w") as f:
        assert f.fileno() == number  # the lowest free number: the one the watcher had
        w.close()
        f.write("still open\n")
    assert (tmp_path / "f").read_text() == "still open\n"
