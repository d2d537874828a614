"""Benchmark: does a step cost the same at step 5,000 as at step 100? One ledger, a long run.

A real ``LedgerRuntime`` drives ``--steps`` commands (5,000 by default) through ``LocalExecutor`` on
a small generated project in a git repository, cycling through what agents do: whole-file reads,
line ranges (``sed -n``, ``nl | sed -n``), greps, an edit (``sed -i``), a repro script, ``git diff``,
``ls``, and ``python -m pytest`` every 100 steps. For each step it records:

- the ledger's overhead: the wall time of ``runtime.run`` minus the command's own (the executor's
  call, timed inside), and the CPU time of this process over the step (the commands run in child
  processes, so this is the ledger's own CPU: git subprocesses the scanner starts are not in it);
- the render of the state view (``runtime.view()``), timed alone after the step;
- the model's turn as the mini-swe-agent adapter takes it before each model call (``LedgerModel``:
  ``prescan``, then ``history_for``: the agent's messages, two a step, through the ledger's
  ``History`` with its notes of the state view), on the messages of the run so far;
- the resident memory (``/proc/self/statm``) every 100 steps.

Then it times ``ledger-run inspect RUN`` and ``ledger-run inspect RUN --html PAGE`` on the finished
ledger, as processes (wall and CPU of the child).

The table has one row per window of steps (p50 and p95 of each figure) and the ratio of the last
window's p50 to the window from step 101 to 500 (the goal: within 1.5x). The machine is shared and
noisy: the ratios within one run are what to compare.

Reproduce (from /work/main, venv active)::

    python swebench_runs/bench/bench_long_run.py                       # 5,000 steps
    python swebench_runs/bench/bench_long_run.py --steps 1000 --out /tmp/long.json
    python swebench_runs/bench/bench_long_run.py --tree /tmp/bench-cost/sympy-src --out .../long_run_sympy.json

``--tree`` runs in a copy of a real checkout (sympy: about 2,000 files) instead of the generated project:
the same cycle of commands over 40 of its modules (each given a ``VALUE = 0`` line to edit).

Results go to ``swebench_runs/bench/results/long_run.json`` unless ``--out`` says otherwise, with
the commit measured.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ledger_runtime
from ledger_adapters.mini import context as mini_context
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.prompt.history import History
from ledger_runtime.prompt.notes import ViewNotes
from ledger_runtime.runtime import LedgerRuntime

MODULES = 40
WINDOWS = [(1, 100), (101, 500), (501, 1000), (1001, 2000), (2001, 3000), (3001, 4000), (4001, 5000)]


def make_project(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    (root / "tests").mkdir()
    for k in range(MODULES):
        body = [f'"""Module {k}."""', "", f"VALUE = {k}", ""]
        for f in range(30):
            body += [f"def f{f}(x):", f"    # step of module {k}, function {f}", f"    return x * {f} + VALUE", ""]
        (root / "src" / f"mod{k}.py").write_text("\n".join(body) + "\n")
    (root / "src" / "__init__.py").write_text("")
    (root / "repro.py").write_text("import sys\nsys.path.insert(0, 'src')\nimport mod0\nprint(mod0.f1(2))\n")
    (root / "tests" / "test_mod.py").write_text(
        "import sys\nsys.path.insert(0, 'src')\nimport mod0\n\n\ndef test_f0():\n    assert mod0.f0(1) == mod0.VALUE\n"
    )
    run = lambda *a: subprocess.run(["git", *a], cwd=root, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("-c", "user.email=b@e", "-c", "user.name=bench", "add", "-A")
    run("-c", "user.email=b@e", "-c", "user.name=bench", "commit", "-qm", "init")


def use_tree(tree: Path, root: Path) -> list[str]:
    """A copy of the git checkout ``tree`` at ``root`` (its files committed), with MODULES of its Python
    files marked for the edits, a repro script and a small test; returns the marked files' paths."""
    subprocess.run(["git", "clone", "-q", "--shared", str(tree), str(root)], check=True)
    files = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if ".git" not in p.parts and "test" not in str(p) and 2_000 < p.stat().st_size < 40_000
    )
    step = max(1, len(files) // MODULES)
    chosen = files[::step][:MODULES]
    for f in chosen:
        with open(root / f, "a") as fh:
            fh.write("\nVALUE = 0\n")
    (root / "repro.py").write_text(f"print(open({chosen[0]!r}).read().count('def '))\n")
    (root / "bench_tests").mkdir()
    (root / "bench_tests" / "test_bench.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    run = lambda *a: subprocess.run(["git", *a], cwd=root, check=True, capture_output=True)  # noqa: E731
    run("-c", "user.email=b@e", "-c", "user.name=bench", "add", "-A")
    run("-c", "user.email=b@e", "-c", "user.name=bench", "commit", "-qm", "bench")
    return chosen


def command(i: int, files: list[str] | None = None, tests: str = "tests") -> str:
    """Step ``i``'s command (1-based): a cycle of what agents do, over the modules (``files``: their
    paths; the generated project's by default)."""
    if i % 100 == 0:
        return f"python3 -m pytest -q {tests} -p no:cacheprovider"
    files = files or [f"src/mod{k}.py" for k in range(MODULES)]
    k, k2 = i % len(files), (i * 7 + 3) % len(files)
    top = files[k].split("/")[0] if "/" in files[k] else "."
    return [
        f"cat {files[k]}",
        f"sed -n '10,40p' {files[k]}",
        f"nl -ba {files[k]} | sed -n '1,30p'",
        f'grep -n "def " {files[k]}',
        f"sed -i 's/^VALUE = .*/VALUE = {i}/' {files[k]}",
        "python3 repro.py",
        f'grep -rn "VALUE =" {top} | head -20',
        "git diff --stat",
        f"cat {files[k2]}",
        f"ls {top}",
    ][i % 10]


class _Model:
    """What ``history_for`` asks of mini-swe-agent's model: a note in a message of its own format."""

    def format_message(self, **kwargs):
        return dict(kwargs)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def commit_of(path: Path) -> str:
    """The commit of the ledger_runtime measured (``+changes`` where its checkout has uncommitted ones)."""
    git = ["git", "-C", str(path)]
    r = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True)
    return r.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def timed_process(argv: list[str]) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "rc": p.returncode}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "long_run.json")
    ap.add_argument("--no-inspect", action="store_true", help="skip the inspect timings")
    ap.add_argument("--keep", action="store_true", help="keep the project and the run (the path is printed)")
    ap.add_argument(
        "--tree", type=Path, help="a git checkout to run in (a real project: sympy) instead of the generated one"
    )
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ledger-long-"))
    root = tmp / "project"
    files, tests = None, "tests"
    if args.tree is not None:
        files, tests = use_tree(args.tree, root), "bench_tests"
    else:
        make_project(root)
    executor = LocalExecutor()
    own: list[float] = []

    def execute(cmd: str, cwd: str):
        t0 = time.perf_counter()
        try:
            return executor(cmd, cwd)
        finally:
            own.append(time.perf_counter() - t0)

    rows: list[dict[str, float]] = []
    rt = LedgerRuntime(root, tmp / "run", LedgerConfig())
    history = History(
        notes=ViewNotes(limit_chars=rt.config.context.note_chars), view_share=rt.config.context.view_share
    )
    messages: list[dict] = [{"role": "system", "content": "bench"}, {"role": "user", "content": "the task"}]
    # (an older adapter, measured as the before, has no AgentMessages: it reads every message each call)
    agent_messages = mini_context.AgentMessages() if hasattr(mini_context, "AgentMessages") else None
    try:
        for i in range(1, args.steps + 1):
            own.clear()
            c0, t0 = time.process_time(), time.perf_counter()
            result = rt.run(command(i, files, tests), execute)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            r0 = time.perf_counter()
            rt.view()
            render = time.perf_counter() - r0
            messages += [
                {"role": "assistant", "content": f"step {i}: THOUGHT ... ```bash\n{command(i, files, tests)}\n```"},
                {"role": "user", "content": result.output, "extra": {"ledger": {"attempt": result.attempt_id}}},
            ]
            m0 = time.perf_counter()
            rt.prescan()
            if agent_messages is not None:
                mini_context.history_for(messages, history, rt, _Model(), agent_messages)
            else:
                mini_context.history_for(messages, history, rt, _Model())
            turn = time.perf_counter() - m0
            rows.append(
                {
                    "step": i,
                    "overhead_ms": (wall - sum(own)) * 1e3,
                    "cpu_ms": cpu * 1e3,
                    "render_ms": render * 1e3,
                    "turn_ms": turn * 1e3,
                }
            )
            if i % 100 == 0:
                rows[-1]["rss_mb"] = rss_mb()
                print(f"step {i}: rss {rows[-1]['rss_mb']:.0f} MB", file=sys.stderr, flush=True)
    finally:
        rt.close()
    windows = []
    for a, b in WINDOWS:
        w = [r for r in rows if a <= r["step"] <= b]
        if not w:
            continue
        rss = [r["rss_mb"] for r in w if "rss_mb" in r]
        windows.append(
            {
                "steps": f"{a}-{b}",
                **{
                    f"{k}_{q}": round(pct([r[k] for r in w], p), 2)
                    for k in ("overhead_ms", "cpu_ms", "render_ms", "turn_ms")
                    for q, p in (("p50", 0.5), ("p95", 0.95))
                },
                "rss_mb": round(max(rss), 1) if rss else None,
            }
        )
    base = next((w for w in windows if w["steps"] == "101-500"), windows[0])
    last = windows[-1]
    ratios = {
        k: round(last[f"{k}_p50"] / base[f"{k}_p50"], 2) if base[f"{k}_p50"] else None
        for k in ("overhead_ms", "cpu_ms", "render_ms", "turn_ms")
    }
    print(
        f"\n{'steps':>10} {'overhead p50/p95 ms':>20} {'cpu p50/p95 ms':>16} {'render p50/p95 ms':>18}"
        f" {'turn p50/p95 ms':>16} {'rss MB':>7}"
    )
    for w in windows:
        print(
            f"{w['steps']:>10} {w['overhead_ms_p50']:>9.1f} /{w['overhead_ms_p95']:>8.1f} "
            f"{w['cpu_ms_p50']:>7.1f} /{w['cpu_ms_p95']:>7.1f} {w['render_ms_p50']:>8.2f} /{w['render_ms_p95']:>7.2f} "
            f"{w['turn_ms_p50']:>7.2f} /{w['turn_ms_p95']:>7.2f} {w['rss_mb'] or float('nan'):>7.0f}"
        )
    print(f"last window / steps {base['steps']} (p50): {ratios}")
    inspect = {}
    if not args.no_inspect:
        launcher = [sys.executable, "-m", "ledger_runtime"]
        inspect["text"] = timed_process([*launcher, "inspect", str(tmp / "run")])
        inspect["html"] = timed_process([*launcher, "inspect", str(tmp / "run"), "--html", str(tmp / "page.html")])
        print(f"inspect {args.steps} steps: text {inspect['text']}, html {inspect['html']}")
    commit = commit_of(Path(ledger_runtime.__file__).resolve().parents[1])
    median_cmd = statistics.median(r["overhead_ms"] for r in rows)
    out = {
        "commit": commit,
        "steps": args.steps,
        "tree": str(args.tree) if args.tree else None,
        "files": len(rt._last.files) if rt._last else None,
        "windows": windows,
        "ratio_last_to_101_500": ratios,
        "overhead_ms_median_all": round(median_cmd, 2),
        "inspect": inspect,
        "command": " ".join(["python", "swebench_runs/bench/bench_long_run.py", *sys.argv[1:]]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    faults = tmp / "run" / "faults.log"
    out["faults"] = len(faults.read_text().splitlines()) if faults.exists() else 0
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}; faults: {out['faults']}")
    if args.keep:
        print(f"kept {tmp}")
    else:
        subprocess.run(["rm", "-rf", str(tmp)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
