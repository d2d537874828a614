"""Workspace snapshots on real git repositories and plain directories: whatever makes a change,
the delta shows it; unchanged files are not read again; odd files never crash a scan."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import age, git, make_repo, write_files

from ledger_runtime.workspace.hashing import HashCache, digest_bytes
from ledger_runtime.workspace.scanner import WorkspaceScanner, delta
from ledger_runtime.workspace.signatures import MISSING, Probe


def rel(root: Path, snap) -> set[str]:
    return {os.path.relpath(p, root) for p in snap.files}


def changes(root: Path, scanner: WorkspaceScanner, before):
    after = scanner.scan()
    return after, {
        (os.path.relpath(c.path, root), "created" if c.before is None else "deleted" if c.after is None else "modified")
        for c in delta(before, after)
    }


def test_tracked_and_untracked_but_not_ignored(repo):
    write_files(
        repo,
        {
            "new.py": "x = 1\n",
            "debug.log": "noise\n",
            "build/out.txt": "b\n",
            "__pycache__/calc.cpython-311.pyc": b"\0\1",
        },
    )
    snap = WorkspaceScanner(str(repo)).scan()
    files = rel(repo, snap)
    assert {"calc.py", "test_calc.py", "pkg/util.py", ".gitignore", "new.py"} <= files
    assert not any(f.endswith(".log") or f.startswith("build/") or "__pycache__" in f for f in files)
    assert not any(f.startswith(".git/") for f in files)


def test_not_a_git_repository_uses_builtin_ignores(tmp_path):
    root = tmp_path / "plain"
    write_files(root, {"a.py": "1\n", "sub/b.txt": "2\n", "__pycache__/a.pyc": b"\0", "node_modules/x/y.js": "z"})
    s = WorkspaceScanner(str(root))
    assert not s.is_git
    assert rel(root, s.scan()) == {"a.py", "sub/b.txt"}


def test_unchanged_files_are_not_read_again(repo):
    s = WorkspaceScanner(str(repo))
    s.scan()
    reads, calls = s.cache.reads, s.git_calls
    for _ in range(3):
        s.scan()
    assert s.cache.reads == reads, "stat cache: no file re-read when nothing changed"
    assert s.git_calls == calls, "no git call when nothing changed"


@pytest.mark.parametrize(
    "command, expected",
    [
        ("sed -i 's/a - b/a + b/' calc.py", {("calc.py", "modified")}),
        (
            "python3 -c \"import pathlib; [pathlib.Path(p).write_text('# x\\n') "
            "for p in ('calc.py', 'pkg/util.py', 'gen.py')]\"",
            {("calc.py", "modified"), ("pkg/util.py", "modified"), ("gen.py", "created")},
        ),
        ("rm test_calc.py", {("test_calc.py", "deleted")}),
        ("mv calc.py calc2.py", {("calc.py", "deleted"), ("calc2.py", "created")}),
        ("mkdir -p deep/er && echo hi > deep/er/f.txt", {("deep/er/f.txt", "created")}),
        ("echo x >> debug.log && mkdir -p build && echo y > build/z", set()),
        ("ln -s calc.py link.py", {("link.py", "created")}),
    ],
)
def test_delta_finds_changes_whoever_made_them(repo, command, expected):
    s = WorkspaceScanner(str(repo))
    before = s.scan()
    subprocess.run(command, shell=True, cwd=repo, check=True)
    _, got = changes(repo, s, before)
    assert got == expected


def test_git_checkout_and_formatter_rewrites(repo):
    s = WorkspaceScanner(str(repo))
    (repo / "calc.py").write_text("changed\n")
    before = s.scan()
    git(repo, "checkout", "--", "calc.py")
    _, got = changes(repo, s, before)
    assert got == {("calc.py", "modified")}
    # a formatter rewriting a file in place with the same size and the same mtime: ctime still moves
    p = repo / "pkg" / "util.py"
    st = p.stat()
    before = s.scan()
    data = p.read_bytes()
    p.write_bytes(data.replace(b"return 1\n", b"return 7\n", 1))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    _, got = changes(repo, s, before)
    assert got == {("pkg/util.py", "modified")}


def test_file_created_in_empty_directory_is_found(repo):
    (repo / "empty" / "nested").mkdir(parents=True)
    age(repo, 10)
    s = WorkspaceScanner(str(repo))
    before = s.scan()
    (repo / "empty" / "nested" / "late.py").write_text("late\n")
    _, got = changes(repo, s, before)
    assert got == {("empty/nested/late.py", "created")}


def test_new_gitignore_and_git_add_change_the_listing(repo):
    s = WorkspaceScanner(str(repo))
    (repo / "notes.tmp").write_text("n\n")
    before = s.scan()
    assert "notes.tmp" in rel(repo, before)
    (repo / ".gitignore").write_text("*.log\nbuild/\n__pycache__/\n*.tmp\n")
    after, got = changes(repo, s, before)
    assert got == {(".gitignore", "modified"), ("notes.tmp", "deleted")}
    # a force-added ignored file is tracked, so it counts again
    git(repo, "add", "-f", "notes.tmp")
    _, got = changes(repo, s, after)
    assert got == {("notes.tmp", "created")}


def test_odd_files_never_crash(tmp_path):
    root = make_repo(tmp_path / "odd", {"ok.py": "1\n"})
    (root / "bin.dat").write_bytes(bytes(range(256)) * 10)
    os.mkfifo(root / "pipe")
    (root / "dangling").symlink_to(root / "nowhere")
    (root / "loop").symlink_to("loop")
    weird = os.fsencode(str(root)) + b"/caf\xe9-\xff.py"
    with open(weird, "wb") as f:
        f.write(b"latin-1 name\n")
    (root / "big.bin").write_bytes(b"z" * 5000)
    s = WorkspaceScanner(str(root), max_hash_bytes=4096)
    snap = s.scan()
    names = rel(root, snap)
    assert {"ok.py", "bin.dat", "dangling", "loop", "big.bin"} <= names
    assert "pipe" not in names, "FIFOs are never opened"
    assert any(n.startswith("caf") for n in names)
    assert snap.files[str(root / "bin.dat")].lines is None, "binary files have no line count"
    assert snap.files[str(root / "big.bin")].digest.startswith("large:")
    assert snap.files[str(root / "dangling")].digest.startswith("link:")
    # the big file changes: its stat token changes with it
    (root / "big.bin").write_bytes(b"y" * 5001)
    _, got = changes(root, s, snap)
    assert ("big.bin", "modified") in got


def test_vanished_file_is_just_absent(tmp_path):
    cache = HashCache()
    p = tmp_path / "gone.txt"
    p.write_text("x\n")
    st = os.lstat(p)
    p.unlink()
    assert cache.state(str(p), st) is None, "a file that vanishes between stat and read is absent, not an error"
    assert cache.state(str(tmp_path / "never")) is None


def test_unreadable_file_gets_a_token_that_still_changes():
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="ledger-perm-", dir="/tmp"))  # reachable by an unprivileged user
    os.chmod(base, 0o755)
    root = base / "perm"
    write_files(root, {"secret.txt": "s\n", "open.txt": "o\n"})
    os.chmod(root / "secret.txt", 0)
    os.chmod(root, 0o755)
    code = textwrap.dedent(f"""
        import sys
        from ledger_runtime.workspace.scanner import WorkspaceScanner
        s = WorkspaceScanner({str(root)!r})
        print(s.scan().files[{str(root / "secret.txt")!r}].digest, flush=True)
        sys.stdin.readline()
        print(s.scan().files[{str(root / "secret.txt")!r}].digest, flush=True)
    """)
    if os.geteuid() == 0:  # root reads everything: run the scan as an unprivileged user
        if shutil.which("setpriv") is None:
            pytest.skip("running as root and setpriv is missing: cannot drop privileges to test unreadable files")
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code]
    else:
        cmd = [sys.executable, "-c", code]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd="/"
    )
    first = proc.stdout.readline().strip()
    (root / "secret.txt").write_text("a longer secret\n")  # still mode 000
    proc.stdin.write("\n")
    proc.stdin.flush()
    second = proc.stdout.readline().strip()
    err = proc.stderr.read()
    proc.wait()
    shutil.rmtree(base, ignore_errors=True)
    if not first and "Permission denied" in err:
        pytest.skip(f"the unprivileged user cannot run this Python: {err.strip()[:200]}")
    assert proc.returncode == 0, err
    assert first.startswith("unreadable") and second.startswith("unreadable") and first != second


def test_watched_paths_outside_the_root(repo, tmp_path):
    outside = tmp_path / "elsewhere.py"
    outside.write_text("1\n")
    s = WorkspaceScanner(str(repo))
    s.watch([str(outside)])
    before = s.scan()
    assert str(outside) in before.files
    outside.write_text("2\n")
    _, got = changes(repo, s, before)
    assert (os.path.relpath(outside, repo), "modified") in got


def test_hash_is_xxh3_128_of_the_bytes(repo):
    snap = WorkspaceScanner(str(repo)).scan()
    data = (repo / "calc.py").read_bytes()
    fs = snap.files[str(repo / "calc.py")]
    assert fs.digest == digest_bytes(data) and fs.size == len(data) and fs.lines == 6


def test_probe_signatures_follow_what_commands_read(repo):
    cache = HashCache()
    p = Probe(cache)
    f = f"f:{repo}/calc.py"
    d = f"d:{repo}/pkg"
    r = f"r:{repo}"
    before = p.sign_many([f, d, r, f"x:{repo}/pkg", f"f:{repo}/none.py"])
    assert before[f"x:{repo}/pkg"] == "dir" and before[f"f:{repo}/none.py"] == MISSING
    assert p.sign_many([f, d, r]) == {k: before[k] for k in (f, d, r)}, "stable when nothing changes"
    (repo / "debug.log").write_text("ignored by git, still read by grep -r\n")
    after = p.sign_many([f, d, r])
    assert after[r] != before[r] and after[f] == before[f] and after[d] == before[d]
    (repo / "pkg" / "new.py").write_text("")
    assert p.sign(d) != before[d]


def test_the_ledgers_own_reads_leave_access_times_as_they_were(tmp_path):
    """Reads with O_NOATIME (the file's owner, or root, may ask for it): hashing a file and reading
    its content for the ledger leave its atime as it was, where a plain read would have moved it."""
    import os
    import time

    from conftest import make_repo

    from ledger_runtime.workspace.local import LocalWorkspace

    root = make_repo(tmp_path / "w", {"a.txt": "some content\n" * 100, "b.txt": "more\n" * 100})
    old = time.time() - 3 * 86400
    for name in ("a.txt", "b.txt"):
        os.utime(root / name, (old + 86400, old))  # atime after mtime, both days ago: relatime moves it on a read
    ws = LocalWorkspace(str(root))
    assert ws.file_state(str(root / "a.txt")) is not None
    assert ws.content(str(root / "a.txt"), 1 << 20) == b"some content\n" * 100
    assert os.stat(root / "a.txt").st_atime == old + 86400, "the ledger's reads did not move it"
    with open(root / "b.txt", "rb") as f:  # the control: a plain read does, on this file system
        f.read()
    moved = os.stat(root / "b.txt").st_atime != old + 86400
    if not moved:
        pytest.skip("this file system keeps no access times (noatime): nothing to compare against")


def test_the_baseline_of_a_repository_an_empty_one_a_detached_head_and_no_repository(tmp_path):
    """The baseline comes from the git command (GitPython is not installed: its import failed quietly
    and every baseline had no HEAD, so no line counts against the start)."""
    from ledger_runtime.workspace.baseline import take_baseline

    repo = make_repo(tmp_path / "r", {"a.py": "a\n", "b.py": "b\n"})
    (repo / "a.py").write_text("changed\n")
    s = WorkspaceScanner(str(repo))
    b = take_baseline(str(repo), s.scan(), "task")
    head = git(repo, "rev-parse", "HEAD").strip()
    assert (b.is_git, b.head_commit, b.branch, b.dirty_paths, b.task) == (True, head, "main", ("a.py",), "task")
    git(repo, "checkout", "-q", "--detach")
    b = take_baseline(str(repo), s.scan())
    assert (b.head_commit, b.branch) == (head, None)
    empty = tmp_path / "e"
    empty.mkdir()
    git(empty, "init", "-q")
    b = take_baseline(str(empty), WorkspaceScanner(str(empty)).scan())
    assert (b.is_git, b.head_commit) == (True, None)  # no commit yet (its branch is the one to be born)
    plain = tmp_path / "p"
    plain.mkdir()
    b = take_baseline(str(plain), WorkspaceScanner(str(plain)).scan())
    assert (b.is_git, b.head_commit, b.branch, b.dirty_paths) == (False, None, None, ())


def test_a_scan_keeps_the_content_of_changed_files_only(repo):
    """A scan keeps the bytes of a file it had to read only where they may be a change (the ledger stores a
    modification's content from them): not the baseline's, not a file read again with the same bytes (a cross-check
    after a clone, whose every timestamp is racy, held a copy of the whole tree); a changed file's and a new one's,
    yes (issue 42 item 4)."""
    scanner = WorkspaceScanner(str(repo))
    scanner.scan(keep_limit=1 << 20)
    assert scanner.cache.kept == {}, "the baseline is no change"
    for p in Path(repo).rglob("*"):
        if p.is_file() and ".git" not in p.parts:
            os.utime(p)  # read again: the same bytes
    scanner.scan(keep_limit=1 << 20)
    assert scanner.cache.reads > 0 and scanner.cache.kept == {}, "nothing changed: no copy held"
    changed = next(p for p in Path(repo).rglob("*.py") if ".git" not in p.parts)
    changed.write_text("changed\n")
    (Path(repo) / "new.txt").write_text("new\n")
    scanner.scan(keep_limit=1 << 20)
    assert scanner.cache.kept == {str(changed): b"changed\n", str(Path(repo) / "new.txt"): b"new\n"}


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
def test_a_file_back_in_the_snapshot_has_its_content_kept_though_its_hash_is_cached(repo, watch):
    """A file the snapshot dropped (excluded) and takes in again, unchanged on disk, is a change: its content is kept as
    a new file's is, though the hash cache still vouches for it (it was read only where its hash was racy, so whether
    the change's content was kept depended on timing; the container's parity test found the two workspaces differ)."""
    sub = Path(repo) / "sub"
    sub.mkdir()
    ignore = sub / ".gitignore"
    ignore.write_text("*.log\n")
    os.utime(ignore, (time.time() - 3600, time.time() - 3600))  # old: the cache vouches for it at once
    exclude = Path(repo) / ".git" / "info" / "exclude"
    leave, back = lambda: exclude.write_text("sub/\n"), lambda: exclude.write_text("")  # noqa: E731
    leave_and_come_back(repo, watch, ignore, leave, back, b"*.log\n")


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
def test_a_file_added_back_to_the_index_has_its_content_kept_though_its_hash_is_cached(repo, watch):
    """The same through git's index alone: a tracked file the ignore rules match leaves the snapshot with ``git rm
    --cached`` and comes back with ``git add -f``, unchanged on disk (with inotify, the scan that sees only the index
    change takes it in as a file named by an event, and the hash cache vouched for it there too)."""
    log = Path(repo) / "forced.log"
    log.write_text("kept\n")
    git(repo, "add", "-f", "forced.log")
    git(repo, "commit", "-q", "-m", "a log git tracks although it ignores *.log")
    os.utime(log, (time.time() - 3600, time.time() - 3600))
    leave = lambda: git(repo, "rm", "-q", "--cached", "forced.log")  # noqa: E731
    leave_and_come_back(repo, watch, log, leave, lambda: git(repo, "add", "-f", "forced.log"), b"kept\n")


def leave_and_come_back(repo, watch: bool, path: Path, leave, back, content: bytes) -> None:
    """``path`` is in a scan's snapshot, out of the next one's after ``leave()``, and back in the one after ``back()``,
    unchanged on disk: that scan keeps its ``content``, though the hash cache vouched for it."""
    scanner = WorkspaceScanner(str(repo), watch_events=watch)
    try:
        assert str(path) in scanner.scan(keep_limit=1 << 20).files
        leave()
        assert str(path) not in scanner.scan(keep_limit=1 << 20).files
        back()
        assert str(path) in scanner.scan(keep_limit=1 << 20).files
        assert scanner.cache.kept == {str(path): content}
    finally:
        scanner.close()


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
def test_a_file_back_in_the_snapshot_written_unseen_is_not_kept_as_the_state_the_cache_vouched_for(repo, watch):
    """Where a file back in the snapshot no longer holds the bytes the cache vouched for (a second write to a mapped
    page moves no stat data), the bytes read are not kept as the recorded state's content: the cache forgets the file,
    and the next scan reads it, records the change and keeps its content."""
    import mmap

    sub = Path(repo) / "sub"
    sub.mkdir()
    path = sub / "m.txt"
    path.write_text("a" * 4096 + "\n")
    exclude = Path(repo) / ".git" / "info" / "exclude"
    scanner = WorkspaceScanner(str(repo), watch_events=watch)
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), 0)
        try:
            mm[0:1] = b"b"
            past = time.time() - 10  # past the hash cache's racy window
            os.utime(path, (past, past))
            first = scanner.scan(keep_limit=1 << 20).files[str(path)]
            exclude.write_text("sub/\n")
            assert str(path) not in scanner.scan(keep_limit=1 << 20).files
            st = os.stat(path)
            mm[1:2] = b"c"  # the page is dirty already: no new mtime
            if os.stat(path).st_mtime_ns != st.st_mtime_ns:
                pytest.skip("this file system updates mtime on every mmap write")
            exclude.write_text("")
            assert scanner.scan(keep_limit=1 << 20).files[str(path)] == first  # as the cache vouched for it
            assert scanner.cache.kept == {}
            now = scanner.scan(keep_limit=1 << 20).files[str(path)]
            assert now.digest == digest_bytes(path.read_bytes()) != first.digest
            assert scanner.cache.kept == {str(path): path.read_bytes()}
        finally:
            mm.close()
            scanner.close()


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
def test_a_directory_removed_and_made_again_is_seen_whole_by_the_next_scan(tmp_path, watch):
    """``rm -r pkg; mkdir pkg; echo > pkg/a.py``: git still knows pkg/a.py, so the scanner's listing of pkg kept the
    name, and the new directory's file waited for the scan after next (the parity property test found it)."""
    repo = make_repo(tmp_path / "r", {"pkg/a.py": "x = 1\n", "pkg/b.py": "y = 2\n", "top.py": "z = 3\n"})
    scanner = WorkspaceScanner(str(repo), watch_events=watch)
    scanner.scan(keep_limit=1000)
    shutil.rmtree(repo / "pkg")
    gone = scanner.scan(keep_limit=1000)
    assert not any("/pkg/" in p for p in gone.files)
    (repo / "pkg").mkdir()
    (repo / "pkg" / "a.py").write_text("")
    back = scanner.scan(keep_limit=1000)
    assert str(repo / "pkg" / "a.py") in back.files and str(repo / "pkg" / "b.py") not in back.files
    assert back.files[str(repo / "pkg" / "a.py")].size == 0
    scanner.close()


@pytest.mark.parametrize("watch", [True, False], ids=["inotify", "walk"])
@pytest.mark.parametrize("in_git", [True, False], ids=["git", "plain"])
def test_the_files_the_next_scan_records_otherwise_are_told_before_it(tmp_path, watch, in_git):
    """``changed_since``, asked before a scan, names the files the scan then records otherwise than the last: one it
    holds edited since (the same size and mtime: the content tells), and new files in the tree, in a new directory too.
    Not one held and unchanged, one git or the built-in list ignores, one behind a link to a directory, one outside the
    root, a directory, nor a path that is not there. The edited file's content is read again by the scan, and kept."""
    files = {"a.py": "1\n", "sub/b.py": "2\n", ".gitignore": "*.log\nnode_modules/\n"}
    if in_git:
        root = make_repo(tmp_path / "r", files)
    else:
        root = tmp_path / "r"
        write_files(root, files)
    os.symlink("sub", root / "linked")
    scanner = WorkspaceScanner(str(root), watch_events=watch)
    before = scanner.scan()
    made = ["new.py", "fresh/deep/c.py", "node_modules/x/y.js", "sub/new.log", "sub/d.py"]
    write_files(root, {m: "m\n" for m in made})
    (tmp_path / "out.py").write_text("o\n")
    was = os.stat(root / "a.py")
    (root / "a.py").write_text("9\n")
    os.utime(root / "a.py", ns=(was.st_atime_ns, was.st_mtime_ns))
    named = [str(root / m) for m in [*made, "linked/d.py", "a.py", "sub/b.py", "fresh", "missing.py"]]
    named.append(str(tmp_path / "out.py"))
    told = scanner.changed_since(named)
    after = scanner.scan(keep_limit=1000)
    assert sorted(told) == sorted(p for p in named if after.files.get(p) != before.files.get(p))
    expected = ["new.py", "fresh/deep/c.py", "sub/d.py"] + ([] if in_git else ["sub/new.log"])
    assert sorted(told) == sorted(str(root / m) for m in ["a.py", *expected])
    assert scanner.cache.kept.get(str(root / "a.py")) == b"9\n"
    scanner.close()
