"""Huge and deep trees (scanner.ScanBounds): a command that creates far more files than one scan takes
in, or a directory far deeper than a scan lists, is answered within the scan's bounds; the subtree
is untracked (a summary entry and a fault are recorded), later commands stay fast and changes
elsewhere are still recorded, and nothing in the untracked subtree is ever taken as unchanged. Real
files, real git repositories, the real runtime."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_runtime.config import ConfigError, LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.inform import result_holds
from ledger_runtime.records import VerdictKind
from ledger_runtime.runtime import LedgerRuntime
from ledger_runtime.workspace.local import LocalWorkspace
from ledger_runtime.workspace.scanner import UNTRACKED, ScanBounds, WorkspaceScanner, delta, untracked_entry

EX = LocalExecutor(timeout=600)
DEFAULTS = LedgerConfig()
# What a step may cost the ledger beyond the command's own run: one scan's budget, and the slack of a
# loaded two-core test machine (the intake stops at the first check past the budget; one git call and
# the listing of the files a scan did take in come on top).
BOUND_S = DEFAULTS.scanning.budget_s + 3.0
FAST_S = 1.5  # a later command, once the subtree is untracked


def usual_step(rt: LedgerRuntime) -> float:
    """What an ordinary step takes on this machine now (before the huge tree): the bounds above are
    idle-machine figures, and a loaded machine slows every step alike (the ordinary one too)."""
    return timed_step(rt, "echo ok > ok.txt")[1]


FILES = {"a.py": "x = 1\n", "b.txt": "b\n", "src/m.py": "m = 1\n", ".gitignore": "build/\n"}


def make_files(n: int, per_dir: int = 1000, top: str = "x") -> str:
    """A command creating ``n`` files under ``top/``, ``per_dir`` to a directory (and notes.txt)."""
    return (
        'python3 -c "import os\n'
        f"for i in range(0, {n}, {per_dir}):\n"
        f"    d = '{top}/d%d' % (i // {per_dir}); os.makedirs(d)\n"
        f"    for j in range(i, min({n}, i + {per_dir})): open(d + '/f%d' % j, 'w').write('line %d\\n' % j)\n"
        "open('notes.txt', 'w').write('made them\\n')\""
    )


def make_deep(depth: int) -> str:
    """A command creating a/a/a/... ``depth`` levels deep (beyond PATH_MAX: by directory fds)."""
    return (
        'python3 -c "import os\n'
        "fd = os.open('.', os.O_RDONLY)\n"
        f"for i in range({depth}):\n"
        "    os.mkdir('a', dir_fd=fd); nfd = os.open('a', os.O_RDONLY, dir_fd=fd); os.close(fd); fd = nfd\n"
        "os.close(os.open('bottom.txt', os.O_CREAT | os.O_WRONLY, dir_fd=fd))\""
    )


@pytest.fixture
def big(tmp_path: Path):
    """A repository for trees too big or too deep for Python's own clean-up (rm -rf, at the end)."""
    root = make_repo(tmp_path / "proj", FILES)
    yield root
    subprocess.run(["rm", "-rf", str(root)], check=False)


def timed_step(rt: LedgerRuntime, command: str):
    """Run one step as an agent does: the model's turn (the state view, the scan for what changed
    meanwhile), then the command. Its result, the time the whole step took, and the time the ledger
    added to the command's own run."""
    t = time.perf_counter()
    rt.inform()
    r = rt.run(command, EX)
    elapsed = time.perf_counter() - t
    return r, elapsed, elapsed - rt.state.attempt(r.attempt_id).duration_s


def modified(rt: LedgerRuntime, root: Path, rel: str) -> list:
    """The modifications of ``rel`` (``x/``: the entry of the untracked directory x)."""
    path = str(root / rel) + ("/" if rel.endswith("/") else "")
    return [m for m in rt.state.modifications if m.path == path]


def faults(run: Path) -> str:
    p = run / "faults.log"
    return p.read_text() if p.exists() else ""


@pytest.mark.slow
def test_a_command_creating_30000_files_is_answered_within_the_bound(big, tmp_path):
    rt = LedgerRuntime(big, tmp_path / "run", LedgerConfig())  # the default bounds
    n = 30 * DEFAULTS.scanning.max_new_entries  # a million behaves the same: the scan stops at the same point
    scanner = rt.workspace.scanner
    usual = usual_step(rt)
    reads = scanner.cache.reads
    r, elapsed, ledger_s = timed_step(rt, make_files(n))
    assert r.returncode == 0 and len(list((big / "x").iterdir())) == n // 1000
    assert ledger_s < BOUND_S + 3 * usual, f"the ledger held the agent {ledger_s:.1f} s (the step {elapsed:.1f} s)"
    assert scanner.cache.reads - reads <= 2 * DEFAULTS.scanning.max_new_entries, "it read no more than it takes in"
    # the summary: one entry for the untracked directory, and a fault that says what happened
    summary = modified(rt, big, "x/")
    assert len(summary) == 1 and summary[0].after_hash.startswith(UNTRACKED) and summary[0].attempt == r.attempt_id
    assert not [m for m in rt.state.modifications if m.path.startswith(str(big / "x") + "/d")], "no file of it"
    log = faults(tmp_path / "run")
    assert f"x/: more than {DEFAULTS.scanning.max_new_entries:,} new entries appeared under it in one scan" in log
    assert rt.faults == 1 and ["UntrackedTree" in e["error"] for e in rt.store.events(["fault"])] == [True]
    assert modified(rt, big, "notes.txt"), "what the same command wrote elsewhere is recorded"
    # later commands stay fast: nothing under x/ is walked, hashed or watched again
    reads = scanner.cache.reads
    assert scanner.watcher is None or scanner.watcher.watched < 10
    assert not [d for d in scanner._dirs if d.startswith(str(big / "x") + os.sep)]
    r2, elapsed2, _ = timed_step(rt, "echo hi > b.txt")
    assert elapsed2 < FAST_S + 3 * usual, f"the next command took {elapsed2:.1f} s (an ordinary one {usual:.2f})"
    assert [m.attempt for m in modified(rt, big, "b.txt")] == [r2.attempt_id], "b.txt's change is recorded"
    # b.txt, and the few files just written that a stat cannot vouch for yet (racy): never x/'s 30,000
    assert scanner.cache.reads - reads <= 10
    r3, elapsed3, _ = timed_step(rt, "sed -i 's/1/2/' src/m.py")
    assert elapsed3 < FAST_S + 3 * usual and [m.attempt for m in modified(rt, big, "src/m.py")] == [r3.attempt_id]
    size = sum(p.stat().st_size for p in (tmp_path / "run").glob("ledger.sqlite*"))
    assert size < 2_000_000, f"the ledger is {size:,} bytes"
    rt.close()


@pytest.mark.slow
def test_a_10000_deep_directory_is_answered_within_the_bound(big, tmp_path):
    rt = LedgerRuntime(big, tmp_path / "run", LedgerConfig())
    scanner = rt.workspace.scanner
    usual = usual_step(rt)
    t = time.perf_counter()
    scanner._since_full = scanner.cross_check_every
    rt.workspace.scan()
    usual_walk = time.perf_counter() - t
    calls = scanner.git_calls
    r, elapsed, ledger_s = timed_step(rt, make_deep(10_000))
    assert r.returncode == 0
    assert ledger_s < BOUND_S + 3 * usual, f"the ledger held the agent {ledger_s:.1f} s (the step {elapsed:.1f} s)"
    assert scanner.git_calls - calls <= DEFAULTS.scanning.max_depth + 2, "one git call per level listed, no more"
    summary = modified(rt, big, "a/")
    assert len(summary) == 1 and summary[0].after_hash.startswith(UNTRACKED)
    assert f"more than {DEFAULTS.scanning.max_depth} levels below the root" in faults(tmp_path / "run")
    assert max(d.count(os.sep) for d in scanner._dirs) - str(big).count(os.sep) <= DEFAULTS.scanning.max_depth
    r2, elapsed2, _ = timed_step(rt, "echo hi > b.txt")
    assert elapsed2 < FAST_S + 3 * usual and [m.attempt for m in modified(rt, big, "b.txt")] == [r2.attempt_id]
    # the whole walk, on the schedule's cross-check or when the watcher cannot vouch, is fast too
    t = time.perf_counter()
    scanner._since_full = scanner.cross_check_every
    rt.workspace.scan()
    assert time.perf_counter() - t < FAST_S + 3 * usual_walk
    rt.close()


def test_nothing_in_an_untracked_subtree_is_taken_as_unchanged(tmp_path):
    root = make_repo(tmp_path / "proj", FILES)
    rt = LedgerRuntime(root, tmp_path / "run", LedgerConfig().with_(scan_max_new_entries=100))
    timed_step(rt, make_files(1000, per_dir=100))
    assert str(root / "x") in rt.workspace.scanner.untracked
    first, _, _ = timed_step(rt, "cat x/d1/f105")
    assert first.output == "line 105\n"
    listing, _, _ = timed_step(rt, "ls x/d2")
    search, _, _ = timed_step(rt, "grep -rn 'line 7' x/")
    failing, _, _ = timed_step(rt, "python3 -c \"import sys; sys.exit(open('x/d3/f300').read() != 'ok\\n')\"")
    assert failing.returncode == 1
    # another process changes the file, adds one to the listing and fixes what the run reads
    subprocess.run(
        ["sh", "-c", "echo changed > x/d1/f105; echo new > x/d2/g; echo ok > x/d3/f300; echo line 7 > x/d4/h"],
        cwd=root,
        check=True,
    )
    view = rt.inform()  # the model's turn: what the ledger says now
    assert "x/d1/f105: STALE, changed at step 6, outside any command; seen at step 2" in view, view
    state = rt.state
    for a in (first, listing, search, failing):
        holds, why = result_holds(state.attempt(a.attempt_id), state)
        assert not holds, f"{state.attempt(a.attempt_id).command}: {why}"
    again = rt.run("cat x/d1/f105", EX)
    assert again.output == "changed\n" and again.answer != "whole", "the fresh output, never the earlier one"
    # a repeat of a failing run is never told that nothing changed since: x/ is unknown
    fails = "python3 -c 'import sys; sys.exit(3)'"
    timed_step(rt, fails)
    repeated, _, _ = timed_step(rt, fails)
    assert repeated.verdict.kind is VerdictKind.RUN, repeated.verdict
    rt.close()


def test_a_flood_in_a_known_directory_keeps_what_it_held(tmp_path):
    root = make_repo(tmp_path / "proj", FILES)
    rt = LedgerRuntime(root, tmp_path / "run", LedgerConfig().with_(scan_max_new_entries=100))
    cmd = "python3 -c \"[open('src/g%d.py' % i, 'w').write('') for i in range(500)]\""
    r, _, _ = timed_step(rt, cmd)
    u = rt.workspace.scanner.untracked[str(root / "src")]
    assert u.kept == 1 and "what it held before (1 entries) is still tracked" in faults(tmp_path / "run")
    assert modified(rt, root, "src/")[0].attempt == r.attempt_id
    assert not [m for m in rt.state.modifications if m.path.startswith(str(root / "src" / "g"))]
    timed_step(rt, "sed -i 's/1/2/' src/m.py")
    assert len(modified(rt, root, "src/m.py")) == 1, "the file src/ held before is still tracked"
    timed_step(rt, "rm src/m.py")
    assert modified(rt, root, "src/m.py")[-1].after_hash is None
    rt.close()


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
def test_untracked_until_removed_then_tracked_again(tmp_path, watch):
    root = make_repo(tmp_path / "proj", FILES)
    s = WorkspaceScanner(str(root), watch_events=watch, bounds=ScanBounds(max_new_entries=50, max_depth=8))
    before = s.scan()
    for i in range(6):
        os.makedirs(root / f"x/d{i}")
        for j in range(20):
            (root / f"x/d{i}/f{j}").write_text("z")
    os.makedirs(root / "/".join(["deep"] + ["a"] * 20))
    (root / "y.txt").write_text("y")
    snap = s.scan()
    assert sorted(s.untracked) == [str(root / "deep"), str(root / "x")]
    changed = {c.path for c in delta(before, snap)}
    assert changed == {str(root / "y.txt"), untracked_entry(str(root / "x")), untracked_entry(str(root / "deep"))}
    read: list[str] = []
    real_read = s.cache._read
    s.cache._read = lambda path, *a: read.append(path) or real_read(path, *a)  # which files are read
    (root / "x/d1/f1").write_text("changed")
    (root / "a.py").write_text("x = 2\n")
    later = s.scan()
    assert {c.path for c in delta(snap, later)} == {str(root / "a.py"), *(untracked_entry(u) for u in s.untracked)}
    assert str(root / "a.py") in read and not [p for p in read if "/x/" in p], "nothing under x/ is hashed again"
    (root / ".gitignore").write_text("build/\n*.log\n")  # git lists the tree again: x/ stays out of it
    relisted = s.scan()
    assert sorted(s.untracked) == [str(root / "deep"), str(root / "x")]
    assert not [p for p in relisted.files if p.startswith(str(root / "x") + "/d")]
    subprocess.run(["rm", "-rf", str(root / "x")], check=True)
    gone = s.scan()
    assert sorted(s.untracked) == [str(root / "deep")]
    assert [c.after for c in delta(relisted, gone) if c.path == untracked_entry(str(root / "x"))] == [None]
    os.makedirs(root / "x")
    (root / "x/small.txt").write_text("s")
    back = s.scan()
    assert str(root / "x/small.txt") in back.files, "a new x/ is tracked again"
    s.close()


def test_the_time_budget_untracks_what_it_was_taking_in(tmp_path):
    root = make_repo(tmp_path / "proj", FILES)
    s = WorkspaceScanner(str(root), watch_events=False, bounds=ScanBounds(budget_s=1e-6))
    s.scan()
    os.makedirs(root / "x")
    (root / "x/f").write_text("f")
    snap = s.scan()
    assert "within 1e-06 s" in next(iter(s.untracked.values())).reason
    assert str(root / "x/f") not in snap.files
    s.close()


def test_the_bounds_are_checked_settings():
    with pytest.raises(ConfigError, match="scan_budget_s"):
        LedgerConfig().with_(scan_budget_s=float("nan"))
    with pytest.raises(ConfigError, match="scan_max_depth"):
        LedgerConfig().with_(scan_max_depth=0)
    with pytest.raises(ConfigError, match="scan_max_new_entries"):
        LedgerConfig().with_(scan_max_new_entries=-1)


def test_without_inotify_the_fault_is_reported_on_the_runtimes_own_thread(tmp_path):
    root = make_repo(tmp_path / "proj", FILES)
    reported: list[tuple[str, str]] = []
    ws = LocalWorkspace(
        str(root),
        watch_events=False,  # every scan a walk: the one at the model's turn runs in the background
        bounds=ScanBounds(max_new_entries=100),
        report=lambda where, e: reported.append((threading.current_thread().name, str(e))),
    )
    rt = LedgerRuntime(root, tmp_path / "run", LedgerConfig(), workspace=ws)
    rt.run(make_files(1000, per_dir=100), EX)
    subprocess.run(make_files(1000, per_dir=100, top="y"), shell=True, cwd=root, check=True)  # between commands
    rt.inform()
    r = rt.run("echo hi > b.txt", EX)
    assert sorted(u.rsplit("/", 1)[-1] for u in ws.scanner.untracked) == ["x", "y"]
    assert [name for name, _ in reported] == [threading.current_thread().name] * 2
    assert [m.attempt for m in modified(rt, root, "y/")][:1] == [None], "y/ appeared between commands"
    assert [m.attempt for m in modified(rt, root, "b.txt")] == [r.attempt_id]
    rt.close()
