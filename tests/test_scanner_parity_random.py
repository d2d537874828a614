"""The local workspace and the container helper agree after every one of a random sequence of operations.

Hypothesis draws a layout (the root at the top of a repository, a directory below it, or a linked
worktree, whose ``.git`` is a file), a way for the local scanner to find changes (inotify's events, or a
walk), a way to compare digests (test_helper_parity.py: translated, or both hashing as the helper does),
and a sequence of operations on the real tree: files created, edited, deleted and renamed, directories
made, renamed and removed, symlinks (dangling, to files, to directories), chmods, ``.gitignore`` files at
the root and below it, ``.git/info/exclude`` (the common directory's, for a worktree), and git's index
(``git add``, ``git rm --cached``, commits). After each operation both workspaces scan
(``Pair.snapshots``): the same snapshot, the same changes since the last one, the same kept and
baseline contents and the same file states, of every path of the tree and a few that are not there (so
ContainerWorkspace's answers without a round trip are checked too), or the test fails with the shortest
sequence that shows it.

The helper runs on this machine (the transport "env": what a container runs, through a shell); with a
Docker engine, a shorter run does the same with the helper in a real container.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import age, git, make_repo
from docker_support import BASE_IMAGE, docker_image  # noqa: F401  (a fixture, named as a parameter)
from test_helper_parity import Pair, entries

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

FILES = ["a.txt", "b.log", "c.tmp", "sub/d.txt", "sub/e.log", "sub/deep/f.py", "g.pyc", "keep.log"]
DIRS = ["sub", "sub/deep", "new", "new/inner"]
RULES = ["*.log", "*.tmp", "deep/", "sub/", "!keep.log", "new/", "*.txt", "/c.tmp", "e.log"]
TEXTS = [b"", b"one\n", b"one\ntwo\n", b"no newline", b"\0binary\n", b"same size\n", b"SAME SIZE\n"]
LAYOUTS = ["top", "subdirectory", "worktree"]

path = st.sampled_from(FILES + DIRS)
OPERATIONS = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(FILES), st.sampled_from(TEXTS)),
    st.tuples(st.just("append"), st.sampled_from(FILES), st.sampled_from(TEXTS)),
    st.tuples(st.just("remove"), path),
    st.tuples(st.just("rename"), path, path),
    st.tuples(st.just("mkdir"), st.sampled_from(DIRS)),
    st.tuples(st.just("symlink"), st.sampled_from(FILES + ["link", "sub/link"]), st.sampled_from(FILES + DIRS)),
    st.tuples(st.just("chmod"), st.sampled_from(FILES)),
    st.tuples(st.just("gitignore"), st.sampled_from(["", "sub", "sub/deep"]), st.lists(st.sampled_from(RULES))),
    st.tuples(st.just("exclude"), st.lists(st.sampled_from(RULES))),
    st.tuples(st.just("add"), st.sampled_from(FILES + ["."])),
    st.tuples(st.just("add -f"), st.sampled_from(FILES)),
    st.tuples(st.just("rm --cached"), st.sampled_from(FILES)),
    st.tuples(st.just("commit")),
)


def make_tree(base: Path, layout: str) -> Path:
    """A repository with a few files, and the root the workspaces look at in ``layout``."""
    top = make_repo(
        base / "repo",
        {"a.txt": "a\n", "sub/d.txt": "d\n", "sub/deep/f.py": "F = 1\n", ".gitignore": "*.tmp\n", "keep.log": "k\n"},
    )
    if layout == "subdirectory":
        return top / "sub"
    if layout == "worktree":
        git(top, "worktree", "add", "-q", str(base / "wt"))
        age(base / "wt", 10.0)
        return base / "wt"
    return top


def apply(root: Path, op: tuple) -> None:  # noqa: C901
    """One operation on the tree; one that cannot be done (a rename onto a directory that is not
    empty, a git command git refuses) leaves the tree as it was, as it would for an agent."""
    kind, *args = op
    p = root / args[0] if args and isinstance(args[0], str) and kind not in ("gitignore", "exclude") else None
    try:
        if kind in ("write", "append"):
            if p.is_dir() and not p.is_symlink():
                return
            p.parent.mkdir(parents=True, exist_ok=True)
            with open(p, "ab" if kind == "append" else "wb") as f:
                f.write(args[1])
        elif kind == "remove":
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif os.path.lexists(p):
                p.unlink()
        elif kind == "rename":
            dst = root / args[1]
            if os.path.lexists(p) and not str(dst).startswith(str(p) + os.sep):
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.rename(p, dst)
        elif kind == "mkdir":
            p.mkdir(parents=True, exist_ok=True)
        elif kind == "symlink":
            if not os.path.lexists(p):
                p.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(os.path.relpath(root / args[1], p.parent), p)
        elif kind == "chmod":
            if p.is_file() and not p.is_symlink():
                p.chmod(p.stat().st_mode ^ 0o100)
        elif kind == "gitignore":
            d = root / args[0]
            if d.is_dir() and not d.is_symlink():
                (d / ".gitignore").write_text("".join(r + "\n" for r in args[1]))
        elif kind == "exclude":
            common = Path(git(root, "rev-parse", "--git-common-dir").strip())
            common = common if common.is_absolute() else root / common
            (common / "info").mkdir(exist_ok=True)
            (common / "info" / "exclude").write_text("".join(r + "\n" for r in args[0]))
        elif kind in ("add", "add -f", "rm --cached"):
            git(root, *kind.split(), "-q", "--", args[0])
        elif kind == "commit":
            git(root, "commit", "-q", "--allow-empty", "-m", "a commit")
    except (OSError, Exception) as e:  # a git command that failed (CalledProcessError): as for an agent
        if isinstance(e, (KeyboardInterrupt, AssertionError)):
            raise


def check_sequence(layout: str, watch_events: bool, translated: bool, ops: list, where: str) -> None:
    base = Path(tempfile.mkdtemp(prefix="ledger-parity-"))
    pair = None
    try:
        root = make_tree(base, layout)
        pair = Pair(base, root, translated=translated, watch_events=watch_events, python=None, where=where)
        pair.snapshots("the first snapshot")
        for n, op in enumerate(ops):
            apply(root, op)
            what = f"after operation {n} {op!r}"
            pair.snapshots(what)
            # every path of the tree (ignored ones, directories, links) and a few that are not there
            paths = entries(root) - {str(root / ".git")} | {str(root / p) for p in FILES + DIRS}
            pair.file_states(paths | {str(root / "link" / "d.txt"), str(root / "a.txt" / "x")}, what)
    finally:
        if pair is not None:
            pair.close()
        shutil.rmtree(base, ignore_errors=True)


SEQUENCES = dict(
    layout=st.sampled_from(LAYOUTS),
    watch_events=st.booleans(),
    translated=st.booleans(),
    ops=st.lists(OPERATIONS, min_size=1, max_size=12),
)
SETTINGS = dict(
    deadline=None, database=None, print_blob=True, suppress_health_check=list(hypothesis.HealthCheck)
)  # no .hypothesis/ in the tree; a failure prints how to replay it (@reproduce_failure)


@pytest.mark.slow
@hypothesis.settings(max_examples=40, derandomize=True, **SETTINGS)  # the same 40 at every run: see below
@hypothesis.given(**SEQUENCES)
def test_random_operations_leave_both_workspaces_agreeing(layout, watch_events, translated, ops):
    check_sequence(layout, watch_events, translated, ops, "here")


# Found at random by the test above (CI at d703fe0): a file the next operation replaces by a link that resolves to
# nothing readable, a link to itself or a dangling one. Both workspaces agreed; the check itself read the path's bytes
# to see its content kept, and failed (ELOOP, ENOENT) on a path that a link took, whose content is nothing to keep.
FOUND = [
    [("symlink", "b.log", "a.txt"), ("rename", "b.log", "a.txt")],  # a.txt: a link to "a.txt", itself
    [("symlink", "b.log", "b.log"), ("rename", "b.log", "a.txt")],  # b.log a link to itself, renamed: a dangling one
]


@pytest.mark.slow
@pytest.mark.parametrize("ops", FOUND, ids=["a link to itself over a file", "a dangling link over a file"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("watch_events", [True, False], ids=["inotify", "walk"])
@pytest.mark.parametrize("translated", [True, False], ids=["translated", "blake2b"])
def test_a_file_replaced_by_a_link_that_resolves_to_nothing_leaves_both_agreeing(layout, watch_events, translated, ops):
    check_sequence(layout, watch_events, translated, ops, "here")


@pytest.mark.slow
def test_random_operations_leave_both_workspaces_agreeing_in_a_container(docker_image):  # noqa: F811
    # the same 8 sequences at every run (CI's too): a container run is too slow to search widely, and a case it found
    # once is pinned where it belongs (a file back in the snapshot, its hash cached: test_workspace, test_helper_parity)
    @hypothesis.settings(max_examples=8, derandomize=True, **SETTINGS)
    @hypothesis.given(**SEQUENCES)
    def run(layout, watch_events, translated, ops):
        check_sequence(layout, watch_events, translated, ops, BASE_IMAGE)

    run()
