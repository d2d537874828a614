"""Benchmark: what a long output costs the ledger, beside what it costs the command that printed it.

A real ``LedgerRuntime`` drives commands through ``LocalExecutor`` in a small git repository holding
files of ``--lines`` lines (50,000 by default, about 3.5 MB: lines of code-like text). For each case
it records the ledger's CPU over the step (this process: the command runs in a child) and the
command's own CPU (the children's, over the executor's call), with the wall time of both:

- ``first read``: ``cat`` of a file never read before (the output is new: masked, stored, answered);
- ``re-read after an edit``: a ``sed -i`` changes one line, then ``cat`` again (a delta or spans answer);
- ``identical re-read``: ``cat`` again with nothing changed;
- ``10 MB`` / ``100 MB`` outputs (``yes`` cut by ``head -c``): longer than the ledger stores, so it
  keeps their head and tail and masks only those.

The executor reads and decodes the output in this process, as it would without the ledger (an
agent's own executor does the same): that CPU (``reading``) is given apart, not counted as the
ledger's.

Each case runs ``--repeat`` times on a new file each time (the re-reads on the file just read);
the table gives medians and p95, and the ratio of the ledger's CPU to the command's. The machine is
shared and noisy: compare the ratios within one run, and runs of two commits on the same machine.

Reproduce (from /work/main, venv active)::

    python swebench_runs/bench/bench_big_outputs.py
    PYTHONPATH=/path/to/older/checkout python swebench_runs/bench/bench_big_outputs.py --out /tmp/before.json

Results go to ``swebench_runs/bench/results/big_outputs.json`` unless ``--out`` says otherwise, with
the commit of the ``ledger_runtime`` measured.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ledger_runtime
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime

CASES = ("first read", "re-read after an edit", "identical re-read", "10 MB output", "100 MB output")


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def module_text(n: int, tag: int) -> str:
    line = "    value_{i} = compute({i}, {r}, '{tag}')  # line {i} of a long module\n"
    return "".join(line.format(i=i, r=i * 7 % 13, tag=tag) for i in range(n))


def commit_of(path: Path) -> str:
    git = ["git", "-C", str(path)]
    r = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True)
    return r.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "big_outputs.json")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ledger-big-"))
    root = tmp / "project"
    root.mkdir()
    for k in range(args.repeat):
        (root / f"big{k}.py").write_text(module_text(args.lines, k))
    git = ["git", "-c", "user.email=b@e", "-c", "user.name=bench"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=root, check=True)
    executor = LocalExecutor(timeout=600)
    own: list[tuple[float, float, float]] = []  # the command's wall and CPU, and the executor's own CPU here

    def execute(command: str, cwd: str):
        t0, c0, p0 = time.perf_counter(), children_cpu(), time.process_time()
        try:
            return executor(command, cwd)
        finally:
            own.append((time.perf_counter() - t0, children_cpu() - c0, time.process_time() - p0))

    rows: dict[str, list[dict[str, float]]] = {c: [] for c in CASES}
    answers: dict[str, str] = {}
    rt = LedgerRuntime(root, tmp / "run", LedgerConfig())
    try:
        for k in range(args.repeat):
            steps = [
                ("first read", f"cat big{k}.py"),
                (None, f"sed -i 's/^    value_{args.lines // 2} = .*/    value = {k}/' big{k}.py"),
                ("re-read after an edit", f"cat big{k}.py"),
                ("identical re-read", f"cat big{k}.py"),
                ("10 MB output", f"yes 'line of output {k}' | head -c 10000000"),
                ("100 MB output", f"yes 'line of output {k}' | head -c 100000000"),
            ]
            for case, command in steps:
                own.clear()
                rt.inform()  # the model's turn, as an adapter calls it (untimed: it overlaps the model)
                t0, c0 = time.perf_counter(), time.process_time()
                result = rt.run(command, execute)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                if case is None:
                    continue
                cmd_wall, cmd_cpu, reading = own[0]
                rows[case].append(
                    {
                        # the executor reads and decodes the output in this process: without the
                        # ledger the same (its adapter's executor), so it is not the ledger's
                        "ledger_cpu_ms": (cpu - reading) * 1e3,
                        "reading_cpu_ms": reading * 1e3,
                        "ledger_wall_ms": (wall - cmd_wall) * 1e3,
                        "command_cpu_ms": cmd_cpu * 1e3,
                        "command_wall_ms": cmd_wall * 1e3,
                        "shown_chars": len(result.output),
                    }
                )
                answers[case] = result.answer
    finally:
        rt.close()
        subprocess.run(["rm", "-rf", str(tmp)])
    table = {}
    for case, xs in rows.items():
        med = {k: statistics.median(r[k] for r in xs) for k in xs[0]}
        table[case] = {
            **{f"{k}_p50": round(v, 2) for k, v in med.items()},
            **{f"{k}_p95": round(pct([r[k] for r in xs], 0.95), 2) for k in ("ledger_cpu_ms", "ledger_wall_ms")},
            "ratio_cpu_p50": round(med["ledger_cpu_ms"] / med["command_cpu_ms"], 1) if med["command_cpu_ms"] else None,
            "answer": answers[case],
            "n": len(xs),
        }
    head = f"{'case':24} {'ledger CPU p50/p95 ms':>22} {'wall p50':>9} {'command CPU':>12} {'wall':>7} {'ratio':>6}"
    print(head + "  answer")
    for case, t in table.items():
        print(
            f"{case:24} {t['ledger_cpu_ms_p50']:>11.1f} /{t['ledger_cpu_ms_p95']:>8.1f} "
            f"{t['ledger_wall_ms_p50']:>9.1f} "
            f"{t['command_cpu_ms_p50']:>12.1f} {t['command_wall_ms_p50']:>7.1f} {t['ratio_cpu_p50']:>5}x  "
            f"{t['answer']} ({t['shown_chars_p50']:,.0f} chars shown)"
        )
    out = {
        "commit": commit_of(Path(ledger_runtime.__file__).resolve().parents[1]),
        "lines": args.lines,
        "repeat": args.repeat,
        "cases": table,
        "command": " ".join(["python", "swebench_runs/bench/bench_big_outputs.py", *sys.argv[1:]]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out} (ledger_runtime at {out['commit']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
