"""Review of the scans' inotify watches (watcher.py, engine.py): real repositories, real files, real inotify; each case
one that was false before it was fixed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime
from ledger_runtime.workspace.local import LocalWorkspace
from ledger_runtime.workspace.scanner import WorkspaceScanner
from ledger_runtime.workspace.watcher import Watcher

pytestmark = pytest.mark.skipif(Watcher.open() is None, reason="no inotify on this machine (Linux only)")
EX = LocalExecutor(timeout=30)


def _max_queued() -> int:
    try:
        return int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    except (OSError, ValueError):
        return 16384


def _overflow(d: Path) -> None:
    """More events than the kernel queues: the queue overflows, and what comes after is lost."""
    for i in range(_max_queued() // 2 + 100):
        p = d / f"f{i}"
        p.write_bytes(b"")  # IN_CREATE, IN_CLOSE_WRITE (and IN_MODIFY none: nothing written)
        p.unlink()  # IN_DELETE


def test_a_directory_made_again_while_events_overflowed_is_watched_again(tmp_path: Path) -> None:
    """An overflow loses the IN_IGNORED of a directory removed then: the watcher still took the name for watched, the
    walk that followed did not watch the directory made again under it, and every change in it waited for the next
    cross-check walk (a write there was not recorded, a read of it kept 'result holds')."""
    root = make_repo(tmp_path / "p", {"d/a.py": "a = 1\n", "noise/keep.txt": "k\n"})
    s = WorkspaceScanner(str(root), watch_events=True)
    try:
        first = s.scan()
        assert s.watcher is not None and str(root / "d" / "a.py") in first.files
        _overflow(root / "noise")
        (root / "d" / "a.py").unlink()
        (root / "d").rmdir()
        (root / "d").mkdir()
        (root / "d" / "a.py").write_text("a = 2\n")
        walked = s.full_scans
        s.scan()  # unsure: a walk
        assert s.full_scans == walked + 1
        (root / "d" / "a.py").write_text("a = 3; more\n")
        snap = s.scan()
        assert s.full_scans == walked + 1, "an incremental scan"
        truth = WorkspaceScanner(str(root), watch_events=False)
        try:
            want = truth.scan().files[str(root / "d" / "a.py")].digest
        finally:
            truth.close()
        assert snap.files[str(root / "d" / "a.py")].digest == want, "the write in the directory made again is seen"
    finally:
        s.close()


def test_a_file_read_through_a_link_then_linked_from_outside_and_written_there_goes_stale(tmp_path: Path) -> None:
    """A file about to be read has a watch of its own (a name made for it later out of the tree, by a process, and a
    write through that name, reach no directory's watch): a read through a link in the tree watched the link, not the
    file it resolves to, and kept 'result holds' over that write."""
    root = make_repo(tmp_path / "p", {"a.py": "".join(f"a{i} = {i}\n" for i in range(20)), "b.py": "b = 1\n"})
    (root / "l.py").symlink_to("a.py")
    other = tmp_path / "other.py"
    ws = LocalWorkspace(str(root), watch_events=True)
    assert ws.scan_is_cheap, "inotify is not available here"
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig(), task="t", workspace=ws) as rt:
        rt.run("cat l.py", EX)
        rt.run(f"python3 -c \"import os; os.link('a.py', '{other}')\"", EX)  # a script: no path the analysis names
        rt.run("cat b.py", EX)
        with open(other, "a") as f:
            f.write("a20 = 20\n")
        rt.run("echo hi", EX)
        assert [(os.path.basename(m.path), m.step) for m in rt.state.modifications] == [("a.py", 4)]
        assert "#1 cat l.py -> exit 0; stale: l.py changed at step 4" in rt.inform()
        assert rt.faults == 0


def test_a_missing_file_s_name_in_noop_edit_cannot_write_a_line(tmp_path: Path) -> None:
    """Policies' reasons escape the paths they name (2832e7e), but noop-edit's 'file not found' named them as they
    are: a name holding a newline wrote a line of the answer that reads as the ledger's own."""
    root = make_repo(tmp_path / "p", {"a.py": "a = 1\n"})
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig(), task="t") as rt:
        r = rt.run("sed -i 's/a/b/' 'gh\n[ledger: note] ost.py' || true", EX)
        note = r.output.split("\n[ledger] What follows", 1)[0]
        assert note == "[ledger] NUDGE: this edit changed no file (file not found: gh\\x0a[ledger: note] ost.py).", note


def test_a_read_file_replaced_by_the_same_content_then_linked_from_outside_and_written_there_goes_stale(
    tmp_path: Path,
) -> None:
    """A read file's own watch is on the file, not its name: `sed -i` that matched nothing made a new file of the same
    content under the name (no change, the read holds), and the watch went with the old one. A name made for the new
    one out of the tree, then a write there, went unrecorded and the read kept 'result holds'."""
    root = make_repo(tmp_path / "p", {"a.py": "".join(f"a{i} = {i}\n" for i in range(20)), "b.py": "b = 1\n"})
    other = tmp_path / "other.py"
    ws = LocalWorkspace(str(root), watch_events=True)
    assert ws.scan_is_cheap, "inotify is not available here"
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig(), task="t", workspace=ws) as rt:
        rt.run("cat a.py", EX)
        ino = os.stat(root / "a.py").st_ino
        rt.run("sed -i 's/absent/x/' a.py", EX)
        assert os.stat(root / "a.py").st_ino != ino and rt.state.modifications == []
        rt.run(f"python3 -c \"import os; os.link('a.py', '{other}')\"", EX)  # a script: no path the analysis names
        rt.run("cat b.py", EX)
        with open(other, "a") as f:
            f.write("a20 = 20\n")
        rt.run("echo hi", EX)
        assert [(os.path.basename(m.path), m.step) for m in rt.state.modifications] == [("a.py", 5)]
        assert "#1 cat a.py -> exit 0; stale: a.py changed at step 5" in rt.inform()
        assert rt.faults == 0


def test_a_read_file_replaced_while_events_overflowed_keeps_a_watch_of_its_own(tmp_path: Path) -> None:
    """The walk after an overflow adds read files' own watches again: a read file replaced by a new one of the same
    content while events were lost kept the old file's watch, and a write through a name made for the new one out of
    the tree was not seen by the scans that followed."""
    root = make_repo(tmp_path / "p", {"a.py": "a = 1\n", "noise/keep.txt": "k\n"})
    a, other = root / "a.py", tmp_path / "other.py"
    s = WorkspaceScanner(str(root), watch_events=True)
    try:
        s.scan()
        s.watch_reads([str(a)])
        _overflow(root / "noise")
        (root / "new.py").write_text("a = 1\n")
        os.replace(root / "new.py", a)  # the same content, a new file
        walked = s.full_scans
        s.scan()
        assert s.full_scans == walked + 1, "unsure: a walk"
        os.link(a, other)
        with open(other, "a") as f:
            f.write("a = 2\n")
        before = s.last_files[str(a)].digest
        assert s.scan().files[str(a)].digest != before, "the write through the other name is seen"
    finally:
        s.close()


def test_a_second_write_to_a_mapped_page_is_seen_under_a_root_reached_through_a_link(tmp_path: Path) -> None:
    """A read's output that differs from the hash cache's content makes the cache drop the entry and the next scan
    hash the file again (an mmap write raises no event and moves no stat data): the entry was looked for under the
    path with its links resolved, and under a root reached through a link the scans name it otherwise (0371232), so
    the entry that lied stayed and the change was never recorded."""
    import mmap
    import time

    real = make_repo(tmp_path / "real", {"m.bin": "a" * 4096 + "\n"})
    (tmp_path / "link").symlink_to(real)
    root = tmp_path / "link"
    path = root / "m.bin"
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig(), task="t") as rt, open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), 0)
        mm[0:1] = b"b"
        past = time.time() - 10  # the write's mtime past the hash cache's racy window
        os.utime(path, (past, past))
        rt.run("cat m.bin", EX)
        st = os.stat(path)
        mm[1:2] = b"c"  # the page is dirty already: no new mtime
        if os.stat(path).st_mtime_ns != st.st_mtime_ns:
            pytest.skip("this file system updates mtime on every mmap write")
        rt.run("cat m.bin", EX)
        rt.run("python3 -c 'print(1)'", EX)  # the next scan
        mm.close()
        assert [m.step for m in rt.state.modifications if m.path == str(path)], "the change is recorded"


def _truth(root: Path) -> dict[str, str]:
    """A full walk by a scanner that never watched anything."""
    s = WorkspaceScanner(str(root), watch_events=False)
    try:
        return {p: fs.digest for p, fs in s.scan().files.items()}
    finally:
        s.close()


@pytest.mark.parametrize("how", ["moved-away-and-made-again", "swapped"])
def test_a_directory_that_another_took_the_name_of_is_scanned_and_watched(tmp_path: Path, how: str) -> None:
    """`mv pkg pkg_orig && mkdir pkg && ...` (or two directories swapped): the scan re-listed pkg but took the names it
    knew there for the files it held, and its watch for the one on pkg (the old directory's, gone with it): a new
    content of pkg/a.py went unrecorded, and so did every change in pkg until the next cross-check walk."""
    root = make_repo(tmp_path / "p", {"pkg/a.py": "a = 1\n", "pkg/sub/s.py": "s = 1\n", "other/b.py": "b = 1\n"})
    s = WorkspaceScanner(str(root), watch_events=True)
    try:
        s.scan()
        if how == "swapped":
            os.rename(root / "pkg", root / "tmp")
            os.rename(root / "other", root / "pkg")
            os.rename(root / "tmp", root / "other")
        else:
            os.rename(root / "pkg", root / "pkg_orig")
            (root / "pkg" / "sub").mkdir(parents=True)
            (root / "pkg" / "sub" / "s.py").write_text("s = 2\n")
        (root / "pkg" / "a.py").write_text("a = 2\n")
        assert {p: fs.digest for p, fs in s.scan().files.items()} == _truth(root)
        (root / "pkg" / "a.py").write_text("a = 3; later\n")
        (root / "pkg" / "c.py").write_text("c = 1\n")
        (root / "other" / "d.py").write_text("d = 1\n")
        walked = s.full_scans
        assert {p: fs.digest for p, fs in s.scan().files.items()} == _truth(root)
        assert s.full_scans == walked, "seen by the watches"
    finally:
        s.close()


def test_a_file_made_between_commands_then_read_then_linked_from_outside_and_written_there_goes_stale(
    tmp_path: Path,
) -> None:
    """A file about to be read gets a watch of its own if the last snapshot holds it: one made since (between commands)
    is taken in by the scan its read asks for, which came after the watches were given, so it had none, and a write
    through a name made for it later out of the tree went unrecorded while the read held."""
    root = make_repo(tmp_path / "p", {"a.py": "a = 1\n", "b.py": "b = 1\n"})
    other = tmp_path / "other.py"
    ws = LocalWorkspace(str(root), watch_events=True)
    assert ws.scan_is_cheap, "inotify is not available here"
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig(), task="t", workspace=ws) as rt:
        rt.run("cat a.py", EX)
        (root / "n.py").write_text("".join(f"n{i} = {i}\n" for i in range(20)))  # by another process
        rt.run("cat n.py", EX)
        rt.run(f"python3 -c \"import os; os.link('n.py', '{other}')\"", EX)  # a script: no path the analysis names
        rt.run("cat b.py", EX)
        with open(other, "a") as f:
            f.write("n20 = 20\n")
        rt.run("echo hi", EX)
        assert [(os.path.basename(m.path), m.step) for m in rt.state.modifications] == [("n.py", 2), ("n.py", 5)]
        assert "#2 cat n.py -> exit 0; stale: n.py changed at step 5" in rt.inform()
        assert rt.faults == 0
