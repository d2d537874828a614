"""Nothing the product writes follows a link or lands in another user's file: a shared directory
such as /tmp may hold one planted there. Files are written to a new file beside them and renamed
onto their name, never onto a link (refused, its target untouched) or another user's file; appends
(faults.log) never go through a link or into a file of another uid; a run directory that is a link
or another user's is refused before anything starts. "Another user" is uid 12345 in a sticky
directory (as root: root passes the kernel's sticky check, so the product's own check is tested)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_runtime.cli.dirs import unwritable
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.ledger.private import DIRECTORY, FILE, NotOurs, refusal, write_private
from ledger_runtime.runtime import LedgerRuntime

OTHER = 12345
ME = os.geteuid()
as_root = pytest.mark.skipif(ME != 0, reason="another user's file needs root to make (os.chown)")


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ledger_runtime", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)


@pytest.fixture
def sticky(tmp_path) -> Path:
    """A directory like /tmp: anyone may make files in it, only their owner may replace them."""
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o1777)
    return d


@pytest.fixture
def run(tmp_path) -> Path:
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    try:
        rt.run("cat a.py", LocalExecutor())
    finally:
        rt.close()
    return tmp_path / "run"


def victim(path: Path) -> Path:
    path.write_text("keep me\n")
    os.chmod(path, 0o644)
    return path


def untouched(path: Path) -> bool:
    return path.read_text() == "keep me\n" and stat.S_IMODE(path.stat().st_mode) == 0o644


def test_the_decision_is_a_pure_function_of_lstat(tmp_path):
    link = tmp_path / "l"
    link.symlink_to(tmp_path)
    (tmp_path / "f").write_text("")
    lst = {name: os.lstat(tmp_path / name) for name in ("l", "f")}
    here = os.lstat(tmp_path)
    assert refusal(None, ME, DIRECTORY) is None and refusal(None, ME, FILE) is None
    assert refusal(here, ME, DIRECTORY) is None and refusal(lst["f"], ME, FILE) is None
    assert "symbolic link" in refusal(lst["l"], ME, DIRECTORY) and "symbolic link" in refusal(lst["l"], ME, FILE)
    assert "not a directory" in refusal(lst["f"], ME, DIRECTORY) and "not a regular file" in refusal(here, ME, FILE)
    assert refusal(here, ME + 1, DIRECTORY) == f"it belongs to another user (uid {here.st_uid})"
    assert "another user" in refusal(lst["f"], ME + 1, FILE)


def test_the_html_page_never_follows_a_planted_link(run, sticky, tmp_path):
    target = victim(tmp_path / "precious.txt")
    (sticky / "link.html").symlink_to(target)
    r = cli("inspect", str(run), "--html", str(sticky / "link.html"))
    one_line_error(r, str(sticky / "link.html"), "symbolic link")
    assert untouched(target), "the link's target is never written"
    page = sticky / "report.html"
    for _ in range(2):  # a new page, then over our own earlier page
        r = cli("inspect", str(run), "--html", str(page))
        assert r.returncode == 0, r.stderr
        assert page.read_text().startswith("<!DOCTYPE html>") and page.stat().st_uid == ME
        assert stat.S_IMODE(page.stat().st_mode) == 0o600
    assert sorted(p.name for p in sticky.iterdir()) == ["link.html", "report.html"], "no temporary file left"


@as_root
def test_the_html_page_never_goes_into_another_users_file(run, sticky):
    planted = sticky / "report.html"
    planted.write_text("theirs\n")
    os.chmod(planted, 0o666)
    os.chown(planted, OTHER, OTHER)
    r = cli("inspect", str(run), "--html", str(planted))
    one_line_error(r, str(planted), "belongs to another user (uid 12345)")
    assert planted.read_text() == "theirs\n" and planted.stat().st_uid == OTHER
    assert sorted(p.name for p in sticky.iterdir()) == ["report.html"]


def test_settings_files_and_replay_results_never_follow_a_link(sticky, tmp_path):
    target = victim(tmp_path / "precious.toml")
    (sticky / "l.toml").symlink_to(target)
    one_line_error(cli("config", "--write", str(sticky / "l.toml"), "--force"), "symbolic link")
    (sticky / "dangling.toml").symlink_to(tmp_path / "made-through-the-link.toml")
    one_line_error(cli("config", "--write", str(sticky / "dangling.toml")), "symbolic link")
    assert untouched(target) and not (tmp_path / "made-through-the-link.toml").exists()
    # what write_private writes (replay results, reports, Codex's answers)
    (sticky / "result.json").symlink_to(target)
    with pytest.raises(NotOurs, match="symbolic link"):
        write_private(sticky / "result.json", "{}")
    assert untouched(target) and (sticky / "result.json").is_symlink()
    write_private(sticky / "fresh.json", "{}")
    assert stat.S_IMODE((sticky / "fresh.json").stat().st_mode) == 0o600


@as_root
def test_write_private_refuses_another_users_file(sticky):
    planted = sticky / "result.json"
    planted.write_text("theirs\n")
    os.chown(planted, OTHER, OTHER)
    with pytest.raises(NotOurs, match="another user") as e:
        write_private(planted, "{}")
    assert isinstance(e.value, OSError) and e.value.filename == str(planted)
    assert planted.read_text() == "theirs\n"
    r = cli("config", "--write", str(planted), "--force")
    one_line_error(r, str(planted), "belongs to another user")


def test_faults_log_never_follows_a_planted_link(tmp_path, capsys):
    repo = make_repo(tmp_path / "repo", {"a.py": "x\n"})
    target = victim(tmp_path / "precious.log")
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    try:
        (tmp_path / "run" / "faults.log").unlink(missing_ok=True)
        (tmp_path / "run" / "faults.log").symlink_to(target)
        rt.report_fault("a test", RuntimeError("boom"))
    finally:
        rt.close()
    assert untouched(target)
    err = capsys.readouterr().err
    assert "a fault could not be written" in err and "symbolic link" in err and "a test: RuntimeError: boom" in err


@as_root
def test_faults_log_of_another_user_is_refused(tmp_path, capsys):
    repo = make_repo(tmp_path / "repo", {"a.py": "x\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    log = tmp_path / "run" / "faults.log"
    try:
        log.write_text("")
        os.chown(log, OTHER, OTHER)
        rt.report_fault("a test", RuntimeError("boom"))
    finally:
        rt.close()
    assert log.read_text() == "", "nothing appended to another user's file"
    assert "belongs to another user" in capsys.readouterr().err


@pytest.mark.parametrize("planted", ["link", "other"])
def test_the_hook_clients_faults_log_is_never_a_planted_one(tmp_path, planted):
    if planted == "other" and ME != 0:
        pytest.skip("another user's file needs root to make (os.chown)")
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    target = victim(tmp_path / "precious.log")
    if planted == "link":
        (run / "faults.log").symlink_to(target)
    else:
        (run / "faults.log").write_text("keep me\n")
        os.chmod(run / "faults.log", 0o644)
        os.chown(run / "faults.log", OTHER, OTHER)
        target = run / "faults.log"
    fast = Path(__file__).resolve().parents[1] / "ledger_runtime" / "hooks" / "fasthook.py"
    r = subprocess.run(
        [sys.executable, "-S", "-E", str(fast), "hook", "PreToolUse", "--run-dir", str(run)],
        input=b"{}",
        capture_output=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")},
    )
    assert r.returncode == 0 and untouched(target)
    assert b"no hook server" in r.stderr, "the fault goes to stderr instead"


def test_a_run_directory_that_is_a_link_is_refused(tmp_path, sticky):
    repo = make_repo(tmp_path / "repo", {"a.py": "x\n"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (sticky / "run").symlink_to(elsewhere)
    with pytest.raises(NotOurs, match="symbolic link"):
        LedgerRuntime(repo, sticky / "run", LedgerConfig())
    assert "symbolic link" in unwritable(sticky / "run")
    (sticky / "dangling").symlink_to(tmp_path / "not-yet")
    assert "symbolic link" in unwritable(sticky / "dangling") and not (tmp_path / "not-yet").exists()
    r = cli("demo", "-o", str(sticky / "run"))
    one_line_error(r, str(sticky / "run"), "symbolic link")
    # the agents' commands too: -o is checked as given, before anything starts
    r = cli("mini", "-o", str(sticky / "run"), "-t", "x", "-w", str(repo), "-m", "deterministic")
    one_line_error(r, str(sticky / "run"), "symbolic link")
    from ledger_adapters.codex.cli import find_codex

    if find_codex(None):  # (without a codex binary the command stops before, saying so)
        r = cli("codex", "-w", str(repo), "-o", str(sticky / "run"), "--", "exec", "x")
        one_line_error(r, str(sticky / "run"), "symbolic link")
    assert list(elsewhere.iterdir()) == [], "nothing was put where the link points"


def test_a_run_directory_under_a_linked_parent_is_fine_and_private(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": "x\n"})
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "tmp").symlink_to(real)  # as /tmp is on macOS
    old = os.umask(0o022)
    try:
        rt = LedgerRuntime(repo, tmp_path / "tmp" / "runs" / "one", LedgerConfig())
        rt.close()
    finally:
        os.umask(old)
    assert stat.S_IMODE((real / "runs" / "one").stat().st_mode) == 0o700
    assert unwritable(tmp_path / "tmp" / "runs" / "two") is None


@as_root
def test_a_run_directory_of_another_user_is_refused(tmp_path, sticky):
    repo = make_repo(tmp_path / "repo", {"a.py": "x\n"})
    planted = sticky / "run"
    planted.mkdir()
    os.chmod(planted, 0o777)
    os.chown(planted, OTHER, OTHER)
    with pytest.raises(NotOurs, match="another user"):
        LedgerRuntime(repo, planted, LedgerConfig())
    assert unwritable(planted) == "it belongs to another user (uid 12345)"
    r = cli("demo", "-o", str(planted))
    one_line_error(r, str(planted), "belongs to another user")
    assert list(planted.iterdir()) == [] and stat.S_IMODE(planted.stat().st_mode) == 0o777, "left as it was"


def test_the_replay_lock_is_never_another_users_file_nor_a_fifo(tmp_path, sticky):
    from ledger_harness.replay.engine import result_path
    from ledger_harness.replay.tree import Lock, TreeError

    tree = sticky / "tree"
    lock = sticky / ".tree.ledger-replay.lock"
    lock.write_text("theirs\n")
    os.chown(lock, OTHER, OTHER)
    with pytest.raises(TreeError, match="belongs to another user"):
        Lock(tree)
    assert lock.read_text() == "theirs\n", "their file is not written"
    lock.unlink()
    os.mkfifo(lock)
    with pytest.raises(TreeError, match="not a regular file"):
        Lock(tree)  # at once: a FIFO is never opened for a blocking write
    lock.unlink()
    Lock(tree).release()
    out = tmp_path / "out"
    for bad in ("../escaped", "a/../../b", ".hidden", "/abs/path"):
        assert result_path(out, bad).parent == out, bad
