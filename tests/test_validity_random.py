"""Randomized tests of answers, on a real repository with real commands.

Random sequences mix reads (the kinds agents use) with changes made every way a file can change:
sed -i, scripts, appends, same-size rewrites, touch, rm, new files and directories, git checkout,
and edits made between commands behind the runtime's back; and a test run. For every answer the
model gets, checked independently of the runtime:

1. it expands (transcript.py, reading the answer's text as the model does) to exactly what the
   command prints when the test runs it again itself, at once, with nothing changed in between;
2. every reference names lines its source showed literally, where the model saw them (not in the
   part the agent cut from a long output), in a step the model still holds;
3. every kind of answer happens: whole outputs, spans and deltas.

And no command is ever answered without running (reuse_runs is gone): every answer is a fresh run's.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections import Counter
from pathlib import Path

import pytest
from conftest import git, make_repo

from ledger_runtime.answers.build import LINES, PATCH, SAME, split_lines
from ledger_runtime.answers.transcript import Transcript
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.ledger.observe import Truncation
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


RUN_TEST = "python3 -m unittest -q 2>&1 | tail -n 1"  # an allow-listed test run with no timing in what it prints


def _check_references(rt: LedgerRuntime, t: Transcript, a, config: LedgerConfig, seed: int) -> None:
    """Every line reference names lines its source answer carried literally where the model saw them,
    in a step the model still holds."""
    trunc = Truncation(config.truncation.limit_chars, config.truncation.head_chars, config.truncation.tail_chars)
    for p in t.pieces(a) or []:
        if p.kind not in (LINES, SAME, PATCH):
            continue
        src = rt.state.attempt(p.ref)
        assert src is not None and src.id < a.id
        if config.context.steps:
            assert src.step > a.step - config.context.steps - 1, f"seed {seed}: step {a.step} refers to {src.step}"
        if p.kind != LINES:
            continue
        want = "".join(split_lines(t.expanded(src))[p.first - 1 : p.last])
        shown = t.shown(src)
        kept = trunc.kept(shown)
        visible = [shown] if kept is None else [shown[: kept[0]], shown[-kept[1] :] if kept[1] else ""]
        assert any(want in part for part in visible), (
            f"seed {seed}: step {a.step} refers to lines {p.first}-{p.last} of step {src.step}, "
            "which the model did not see there"
        )


CONFIGS = [
    LedgerConfig().with_(dedupe_min_saving=20, dedupe_min_lines=2),
    LedgerConfig().with_(dedupe_min_saving=20, dedupe_min_lines=2, context_steps=4),
    LedgerConfig().with_(
        dedupe_min_saving=10,
        dedupe_min_lines=1,
        output_limit_chars=1200,
        output_head_chars=500,
        output_tail_chars=400,
    ),
]


@pytest.mark.slow
def test_every_answer_expands_to_what_the_command_prints(tmp_path):
    kinds: Counter = Counter()
    for seed in range(9):
        kinds += _sequence(tmp_path / f"seed{seed}", seed)
    for kind in ("whole", "spans", "delta"):
        assert kinds[kind] >= 3, f"every kind of answer must be exercised, not only: {kinds}"
    assert kinds["reused"] == 0, "no command is answered without running"


def _sequence(tmp_path: Path, seed: int) -> Counter:
    rng = random.Random(seed)
    config = CONFIGS[seed % len(CONFIGS)]
    big = {k: v + "".join(f"# filler line {i} of {k}\n" for i in range(25)) for k, v in FILES.items()}
    root = make_repo(
        tmp_path / "w",
        {
            **big,
            "test_t.py": "import unittest\nimport a\n\n\n"
            "class T(unittest.TestCase):\n    def test_x(self):\n"
            "        self.assertEqual(a.x, 1)\n",
        },
    )
    rt = LedgerRuntime(root, tmp_path / "run", config)
    t = Transcript(rt.state, rt.store.text)
    fingerprints: dict[int, str] = {}  # attempt id -> the test's fingerprint of what a run reads
    kinds: Counter = Counter()
    for _ in range(90):
        if rng.random() < 0.3:
            cmd = _change(rng, root)
            if cmd:
                rt.run(cmd, EX)
            continue
        if rng.random() < 0.15:
            cmd, paths = RUN_TEST, ["a.py", "test_t.py"]  # what the test run reads
        else:
            cmd, paths = rng.choice(READS)
        before = _fingerprint(root, paths)
        r = rt.run(cmd, EX)
        now = EX(cmd, str(root)).output  # what it prints now, run by the test itself
        a = rt.state.attempts[-1]
        kind = a.answer["kind"]
        kinds[kind] += 1
        assert r.output == t.shown(a), "the model gets exactly the text the ledger keeps"
        assert t.expanded(a) == now, f"seed {seed}: `{cmd}` ({kind}) does not stand for what it prints now"
        _check_references(rt, t, a, config, seed)
        fingerprints[a.id] = before
        assert a.executed, f"seed {seed}: `{cmd}` was answered without running"
    rt.close()
    return kinds


def test_all_answer_kinds_happen_across_seeds_with_a_cut(tmp_path):
    """The cut-output configuration still dedupes: references into what the model saw of a cut output."""
    rng = random.Random(99)
    config = CONFIGS[2]
    root = make_repo(tmp_path / "w", {"big.py": "".join(f"line {i}: {'x' * (50 + i % 7)}\n" for i in range(80))})
    rt = LedgerRuntime(root, tmp_path / "run", config)
    t = Transcript(rt.state, rt.store.text)
    seen = Counter()
    for _ in range(40):
        lo = rng.randint(1, 70)
        cmd = rng.choice(
            [f"sed -n '{lo},{lo + rng.randint(2, 9)}p' big.py", "cat big.py", "head -n 5 big.py", "tail -n 4 big.py"]
        )
        rt.run(cmd, EX)
        a = rt.state.attempts[-1]
        seen[a.answer["kind"]] += 1
        assert t.expanded(a) == EX(cmd, str(root)).output
        _check_references(rt, t, a, config, 99)
    assert seen["spans"] >= 3, seen


def test_reads_outside_the_root_and_of_ignored_files(tmp_path):
    root = make_repo(tmp_path / "w", {**FILES, ".gitignore": "*.log\n"})
    outside = tmp_path / "outside.txt"
    body = "".join(f"outside line {i}\n" for i in range(30))
    outside.write_text(body)
    (root / "debug.log").write_text(body.replace("outside", "ignored"))
    rt = LedgerRuntime(root, tmp_path / "run", LedgerConfig())
    for path, new in ((str(outside), "two\n"), ("debug.log", "changed\n")):
        cmd = f"cat {path}"
        rt.run(cmd, EX)
        assert rt.run(cmd, EX).output.startswith("[ledger: same as")
        (outside if path.startswith("/") else root / path).write_text(new)
        r = rt.run(cmd, EX)
        assert r.output == new
    git(root, "status")
