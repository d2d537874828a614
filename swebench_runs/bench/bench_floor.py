"""Benchmark: the ledger's CPU per command class, beside the floor of what any ledger must do.

A real ``LedgerRuntime`` drives ``--history`` realistic commands (bench_core's scripted session on
its sympy-shaped tree: reads, windows, greps, edits, test runs) through ``LocalExecutor``, so the
model holds a history of outputs as it would in the middle of a run. Then, ``--repeat`` times and in
one interleaved loop, it runs one command of each class:

- ``first read``: ``cat`` of a 2,000-line module never read before (added to the tree for this);
- ``identical re-read``: that ``cat`` again;
- ``window read``: ``sed -n 'a,bp'`` of a window of a module read before;
- ``grep``: ``grep -n`` of a word in a module; ``grep -r``: ``grep -rn`` over its package;
- ``edit``: ``sed -i`` of one line; ``re-read after an edit``: ``cat`` of the edited module;
- ``ls``: ``ls -la`` of a package; ``git status``; ``run``: ``python -c`` printing a line.

For each it records the ledger's CPU over the step (this process: the command runs in a child),
less the executor's own reading and decoding of the output (an agent's executor does that without
the ledger too), and the floor: what any ledger of this command must do, timed right after it in
the same loop on the same bytes:

- drain an inotify queue over the tree's directories (``workspace.watcher.Watcher``, a second one);
- hash the output and the bytes of every file the command changed (sha256);
- insert one row holding the output into a SQLite file in WAL mode and commit it.

The ratio of the two medians is the figure (issue 42: a first read of a 2,000-line file <= 5 ms
p50 and <= 8 ms p95 of ledger CPU; every other class <= 5x its floor at the p50). The machine is
shared and noisy: compare the ratios within one run, and runs of two commits on the same machine.
``--profile [CLASS]`` prints where a class's time goes (cProfile, cumulative; first reads by default),
and the table then holds that class's time under the profiler.

Reproduce (from /work/main, venv active)::

    python swebench_runs/bench/bench_floor.py
    python swebench_runs/bench/bench_floor.py --repeat 40 --history 300
    PYTHONPATH=/path/to/older/checkout python swebench_runs/bench/bench_floor.py --out /tmp/before.json

Results go to ``swebench_runs/bench/results/floor.json`` unless ``--out`` says otherwise, with the
commit of the ``ledger_runtime`` measured.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import os
import pstats
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_core  # noqa: E402  (the tree and the scripted session)

import ledger_runtime  # noqa: E402
from ledger_runtime.config import LedgerConfig  # noqa: E402
from ledger_runtime.executor import LocalExecutor  # noqa: E402
from ledger_runtime.runtime import LedgerRuntime  # noqa: E402
from ledger_runtime.workspace.watcher import Watcher  # noqa: E402

CLASSES = (
    "first read",
    "identical re-read",
    "window read",
    "grep",
    "grep -r",
    "edit",
    "re-read after an edit",
    "ls",
    "git status",
    "run",
)
FIRST_READ_LINES = 2000


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def commit_of(path: Path) -> str:
    git = ["git", "-C", str(path)]
    r = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True)
    return r.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def module_of_lines(rng: random.Random, n: int, title: str) -> str:
    """A Python module of exactly ``n`` lines, shaped like the tree's others."""
    text = bench_core.python_module(rng, 200 * n, title)
    lines = text.splitlines(keepends=True)
    while len(lines) < n:
        lines += bench_core.python_module(rng, 40 * n, title).splitlines(keepends=True)
    return "".join(lines[:n])


class Floor:
    """What any ledger of a command must do: drain inotify, hash what changed, store one row."""

    def __init__(self, root: Path, db: Path):
        self.watcher = Watcher.open()
        if self.watcher:
            for d, dirs, _ in os.walk(root):
                dirs[:] = [x for x in dirs if x != ".git"]
                self.watcher.add(d)
        self.conn = sqlite3.connect(db)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("CREATE TABLE rows (step INTEGER PRIMARY KEY, digest TEXT, body TEXT)")
        self.conn.commit()

    def __call__(self, output: str, changed: list[Path]) -> float:
        t0 = time.process_time()
        if self.watcher:
            self.watcher.drain()
        digest = hashlib.sha256(output.encode()).hexdigest()
        for p in changed:
            hashlib.sha256(p.read_bytes()).hexdigest()
        self.conn.execute("INSERT INTO rows (digest, body) VALUES (?, ?)", (digest, output))
        self.conn.commit()
        return time.process_time() - t0

    def close(self) -> None:
        if self.watcher:
            self.watcher.close()
        self.conn.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=25)
    ap.add_argument("--history", type=int, default=150, help="commands driven before the measured ones")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--profile", nargs="?", const="first read", choices=CLASSES, help="print where a class's time goes (cProfile)"
    )
    ap.add_argument("--callers", help="with --profile: who called the functions this regex names (pstats)")
    ap.add_argument("--sort", default="cumulative", help="the profile's order (pstats: cumulative, tottime...)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "floor.json")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="ledger-floor-"))
    root = tmp / "sympy"
    print(f"generating the tree in {root}...", file=sys.stderr)
    bench_core.generate_tree(root)
    session = bench_core.build_session(root, rng, generated=True)  # before the fresh modules: never read
    fresh = [root / "sympy" / "core" / f"fresh_{k}.py" for k in range(args.repeat)]
    for k, p in enumerate(fresh):
        p.write_text(module_of_lines(rng, FIRST_READ_LINES, f"fresh {k}"))
    bench_core._git(root, "add", "-A")
    bench_core._git(root, "commit", "-qm", "fresh modules")
    bench_core.age_tree(root)
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    executor = LocalExecutor(timeout=120, env=env)
    own: list[tuple[float, float, str]] = []  # the command's wall, the executor's own CPU here, its output

    def execute(command: str, cwd: str):
        t0, p0 = time.perf_counter(), time.process_time()
        result = executor(command, cwd)
        own.append((time.perf_counter() - t0, time.process_time() - p0, result.output))
        return result

    rows: dict[str, list[dict[str, float]]] = {c: [] for c in CLASSES}
    answers: dict[str, dict[str, int]] = {c: {} for c in CLASSES}
    runtime = LedgerRuntime(root, tmp / "run", LedgerConfig(), task="Fix the numbers printing bug in sympy/core.")
    floor = Floor(root, tmp / "floor.sqlite")
    profile = cProfile.Profile() if args.profile else None
    try:
        for _ in range(args.history):
            runtime.inform()
            runtime.run(session.command(), execute)
        time.sleep(2.2)  # out of the hash cache's racy window, as a few seconds into a real run
        for k in range(args.repeat):
            f = session.rng.choice(session.focus)
            rel = session.rel(f)
            a, b = session.window(f)
            pkg = os.path.dirname(rel)
            steps = [
                ("first read", f"cat {fresh[k].relative_to(root)}", []),
                ("identical re-read", f"cat {fresh[k].relative_to(root)}", []),
                ("window read", f"sed -n '{a},{b}p' {rel}", []),
                ("grep", f"grep -n '{session.word()}' {rel}", []),
                ("grep -r", f"grep -rn 'def {session.rng.choice(bench_core.WORDS)}' {pkg}", []),
                ("edit", session.edit(f), [Path(f)]),
                ("re-read after an edit", f"cat {rel}", []),
                ("ls", f"ls -la {pkg}", []),
                ("git status", "git status", []),
                ("run", "python -c 'print(42)'", []),
            ]
            for case, command, changed in steps:
                own.clear()
                runtime.inform()  # the model's turn, as an adapter calls it (untimed: it overlaps the model)
                if profile and case == args.profile:
                    profile.enable()
                t0, c0 = time.perf_counter(), time.process_time()
                result = runtime.run(command, execute)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                if profile:
                    profile.disable()
                cmd_wall, reading, output = own[0] if own else (0.0, 0.0, "")
                rows[case].append(
                    {
                        "ledger_cpu_ms": (cpu - reading) * 1e3,
                        "ledger_wall_ms": (wall - cmd_wall) * 1e3,
                        "command_wall_ms": cmd_wall * 1e3,
                        "floor_cpu_ms": floor(output, changed) * 1e3,
                    }
                )
                kind = result.answer or "none"
                answers[case][kind] = answers[case].get(kind, 0) + 1
    finally:
        runtime.close()
        floor.close()
        shutil.rmtree(tmp, ignore_errors=True)
    table = {}
    for case, xs in rows.items():
        col = {k: [r[k] for r in xs] for k in xs[0]}
        med = {k: statistics.median(v) for k, v in col.items()}
        table[case] = {
            **{f"{k}_p50": round(v, 3) for k, v in med.items()},
            **{f"{k}_p95": round(pct(v, 0.95), 3) for k, v in col.items()},
            "ratio_p50": round(med["ledger_cpu_ms"] / med["floor_cpu_ms"], 1) if med["floor_cpu_ms"] else None,
            "answers": answers[case],
            "n": len(xs),
        }
    print(
        f"{'class':24} {'ledger CPU p50/p95 ms':>22} {'floor p50 ms':>13} {'x floor':>8} {'command wall':>13}  answers"
    )
    for case, t in table.items():
        print(
            f"{case:24} {t['ledger_cpu_ms_p50']:>11.2f} /{t['ledger_cpu_ms_p95']:>8.2f} "
            f"{t['floor_cpu_ms_p50']:>13.2f} {t['ratio_p50']:>7}x {t['command_wall_ms_p50']:>13.1f}  "
            + ", ".join(f"{k} {v}" for k, v in t["answers"].items())
        )
    out = {
        "commit": commit_of(Path(ledger_runtime.__file__).resolve().parents[1]),
        "history": args.history,
        "repeat": args.repeat,
        "first_read_lines": FIRST_READ_LINES,
        "classes": table,
        "command": " ".join(["python", "swebench_runs/bench/bench_floor.py", *sys.argv[1:]]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out} (ledger_runtime at {out['commit']})")
    if profile:
        s = io.StringIO()
        st = pstats.Stats(profile, stream=s).sort_stats(args.sort)
        st.print_stats(40)
        if args.callers:
            st.print_callers(args.callers)
        print(s.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
