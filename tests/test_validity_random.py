"""Randomized tests of the validity rule, on a real repository with real commands.

Random sequences mix reads (the kinds agents use) with changes made every way a file can change:
sed -i, scripts, appends, same-size rewrites, touch, rm, new files and directories, git checkout,
and edits made between commands behind the runtime's back. Two properties must hold:

1. after any change to a file in a command's read set, that command is never REUSEd; the test keeps
   its own content hashes of every path each command reads, independent of the ledger;
2. in shadow mode every REUSE the ledger decides is exact: the output it would hand back is
   byte-identical to the output the command prints when it runs.
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

import pytest

from conftest import git, make_repo
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.records import VerdictKind
from ledger_runtime.runtime import LedgerRuntime

EX = LocalExecutor(timeout=30)

FILES = {
    "a.py": "import os\nx = 1\n\ndef foo():\n    return x\n",
    "b.py": "y = 2\nz = 3\nw = 4\nv = 5\nu = 6\n",
    "sub/c.py": "def bar():\n    pass\n# foo here\n",
    "sub/d.txt": "plain text\nfoo\n",
    "docs/e.md": "# title\nfoo bar\n",
}

# (command, what its output is a function of). A plain path: the file's content; "dir/": every name
# and content below dir; "dir/:names": every name below dir; "dir:list": dir's entry names;
# "dir:listmeta": dir's entries with their stat data; "path:meta": the path's own stat data.
READS = [
    ("cat a.py", ["a.py"]),
    ("cat -n sub/c.py", ["sub/c.py"]),
    ("head -n 3 b.py", ["b.py"]),
    ("tail -n 2 a.py", ["a.py"]),
    ("sed -n '2,4p' b.py", ["b.py"]),
    ("nl -ba sub/c.py | sed -n '1,2p'", ["sub/c.py"]),
    ("grep -n foo a.py", ["a.py"]),
    ("grep -rn foo sub", ["sub/"]),
    ("grep -rn foo .", ["./"]),
    ("ls", [".:list"]),
    ("ls -la sub", ["sub:listmeta", ".:meta"]),
    ("ls -R docs", ["docs/:names"]),
    ("find . -name '*.py' | sort", ["./:names"]),
    ("wc -l a.py b.py", ["a.py", "b.py"]),
    ("cat a.py b.py", ["a.py", "b.py"]),
    ("diff a.py b.py", ["a.py", "b.py"]),
    ("cat sub/new.txt", ["sub/new.txt"]),
    ("cd sub && cat c.py", ["sub/c.py"]),
    ("awk 'NR>=1 && NR<=2' docs/e.md", ["docs/e.md"]),
    ("stat -c '%s %Y' b.py", ["b.py:meta"]),
    ("cat a.py | grep -n x", ["a.py"]),
]

TARGETS = ["a.py", "b.py", "sub/c.py", "sub/d.txt", "docs/e.md", "sub/new.txt"]


def _meta(p: str) -> str:
    st = os.lstat(p)
    return f"{st.st_mode}:{st.st_size}:{st.st_mtime_ns}:{st.st_nlink}"


def _fingerprint(root: Path, specs: list[str]) -> str:
    """The test's own account of what a command's output depends on (see READS)."""
    h = hashlib.sha256()
    for spec in specs:
        rel, _, how = spec.partition(":")
        p = root / rel
        h.update(spec.encode())
        if not os.path.lexists(p):
            h.update(b"missing")
        elif how == "meta":
            h.update(_meta(str(p)).encode())
        elif how in ("list", "listmeta"):
            for name in sorted(os.listdir(p)):
                if name == ".git" and rel == ".":
                    h.update(b".git")
                    continue
                h.update(name.encode() + (_meta(str(p / name)).encode() if how == "listmeta" else b""))
            if how == "listmeta":
                h.update(_meta(str(p)).encode())
        elif rel.endswith("/") or how == "names":
            for dirpath, dirnames, filenames in os.walk(p):
                dirnames.sort()
                h.update(f"D{dirpath}".encode())
                for name in sorted(filenames + [d for d in dirnames]):
                    fp = os.path.join(dirpath, name)
                    h.update(f"F{fp}".encode())
                    if how != "names" and os.path.isfile(fp) and not os.path.islink(fp):
                        h.update(Path(fp).read_bytes())
        else:
            h.update(p.read_bytes())
    return h.hexdigest()


def _change(rng: random.Random, root: Path) -> str:
    """One random change; returns a command that makes it, or '' when the test made it directly."""
    target = rng.choice(TARGETS)
    kind = rng.choice(["sed", "script", "append", "same-size", "touch", "rm", "new", "mkdir", "checkout", "direct"])
    if kind == "sed":
        return f"sed -i 's/o/0/' {target}"
    if kind == "script":
        return f"python3 -c \"import pathlib; pathlib.Path('{target}').write_text('rewritten {rng.random()}\\n')\""
    if kind == "append":
        return f"echo foo >> {target}"
    if kind == "same-size":
        p = root / target
        if p.exists() and p.stat().st_size:
            data = bytearray(p.read_bytes())
            data[0] = ord("Q") if data[0] != ord("Q") else ord("R")
            st = p.stat()
            p.write_bytes(bytes(data))
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime: only ctime moves
        return ""
    if kind == "touch":
        return f"touch {target}"
    if kind == "rm":
        return f"rm -f {target}"
    if kind == "new":
        return f"printf 'foo {rng.randint(0, 9)}\\n' > {rng.choice(['sub', 'docs', '.'])}/n{rng.randint(0, 3)}.py"
    if kind == "mkdir":
        return f"mkdir -p sub/dir{rng.randint(0, 2)}"
    if kind == "checkout":
        return "git checkout -- . 2>/dev/null; true"
    (root / target).parent.mkdir(parents=True, exist_ok=True)
    (root / target).write_text(f"direct {rng.random()}\n")
    return ""


@pytest.mark.parametrize("seed", range(8))
def test_no_reuse_after_a_change_and_every_reuse_is_exact(tmp_path, seed):
    rng = random.Random(seed)
    root = make_repo(tmp_path / "w", FILES)
    rt = LedgerRuntime(root, tmp_path / "run", LedgerConfig(shadow=True, reuse_output="full"))
    fingerprints: dict[int, str] = {}  # attempt id -> the test's fingerprint of its reads when it ran
    reuses = 0
    for _ in range(70):
        if rng.random() < 0.35:
            cmd = _change(rng, root)
            if cmd:
                rt.run(cmd, EX)
            continue
        cmd, paths = rng.choice(READS)
        now = _fingerprint(root, paths)
        r = rt.run(cmd, EX)
        a = rt.state.attempts[-1]
        fingerprints[a.id] = now
        if a.verdict.kind is VerdictKind.REUSE and a.verdict.ref_attempt is not None:
            reuses += 1
            ref = rt.state.attempt(a.verdict.ref_attempt)
            assert fingerprints[ref.id] == now, (
                f"seed {seed}: `{cmd}` reused step {ref.step} although something it reads changed since")
            assert a.shadow_output_hash == a.output_hash, (
                f"seed {seed}: unsound REUSE of `{cmd}`: step {ref.step} printed something else than it prints now")
            assert r.executed
    assert reuses > 0, "the sequence should exercise reuse at all"
    rt.close()


def test_reads_outside_the_root_and_of_ignored_files(tmp_path):
    root = make_repo(tmp_path / "w", {**FILES, ".gitignore": "*.log\n"})
    outside = tmp_path / "outside.txt"
    outside.write_text("one\n")
    (root / "debug.log").write_text("ignored\n")
    rt = LedgerRuntime(root, tmp_path / "run", LedgerConfig(reuse_output="full"))
    for path, new in ((str(outside), "two\n"), ("debug.log", "changed\n")):
        cmd = f"cat {path}"
        rt.run(cmd, EX)
        assert rt.run(cmd, EX).verdict.kind is VerdictKind.REUSE
        (outside if path.startswith("/") else root / path).write_text(new)
        r = rt.run(cmd, EX)
        assert r.verdict.kind is not VerdictKind.REUSE and r.output == new
    git(root, "status")  # nothing else to check: git state is never reused
