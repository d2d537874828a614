"""Benchmark: does a step cost the same at step 5,000 as at step 100? A long run, and a fresh ledger beside it.

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

The table has one row per window of steps: p50 and p95 of each figure, and the mean length of the
commands' outputs (the work a step's commands give the ledger: the cycle keeps it the same from window to
window, since its only edit, ``sed -i`` at every tenth step, changes the same four modules, so ``git diff
--stat`` and ``grep`` print as much at step 5,000 as at step 500; a window whose outputs are longer does
more work for the same command, and this column says so). The goal (issue 42 item 4): the last window
within 1.1x of steps 101-500, at the p50 and at the p95.

Three ratios are given, each at the p50 and the p95:

- ``ratio_last_to_101_500`` (``_p95``): the long run's last window over its own steps 101-500, measured
  minutes apart. The machine is shared: a load that comes and goes between the two moves this ratio
  either way, by more than the growth looked for. While the fresh ledger runs, each of the long one's
  steps follows one of its steps (colder caches): for this ratio as it was measured before, ``--fresh 0``
  (or its window 3,001-4,000, before the fresh ledger starts).
- ``ratio_last_to_fresh_101_500``: the long run's last window over the steps 101-500 of a fresh ledger
  (its own project, the same cycle of commands) driven in lockstep with the long one's last ``--fresh``
  steps (1,000 by default: its steps 101-500 are taken while the long one's 4,101-4,500 are), a step of
  each in turn, which goes first alternating. Both see the same load, the same process and the same
  commands: what differs is the history behind each step, which is what the ratio is for. What grows
  with the process rather than with one ledger's history (its heap, for the garbage collector and the
  caches) is paid by both alike and is not in this ratio: it is in the first.
- ``ratio_paired_to_fresh_101_500``: the same, with the long run's steps taken in turn with the fresh one's
  101-500 (4,101-4,500 by default): the two windows' steps alternate, so a burst of load on the machine
  falls on both alike, which the p95 needs most.

``--fresh 0`` runs the long ledger alone, as before (the first ratio only).

Reproduce (from /work/main, venv active)::

    python swebench_runs/bench/bench_long_run.py                       # 5,000 steps
    python swebench_runs/bench/bench_long_run.py --steps 1000 --out /tmp/long.json
    python swebench_runs/bench/bench_long_run.py --fresh 0 --no-inspect --out /tmp/long_alone.json  # the long one alone
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


class Driven:
    """One ledger driven through the cycle of commands, on a project of its own: ``step(i)`` runs step ``i`` and
    returns its figures (see the module docstring)."""

    def __init__(self, tmp: Path, tree: Path | None) -> None:
        self.root = tmp / "project"
        self.files, self.tests = None, "tests"
        if tree is not None:
            self.files, self.tests = use_tree(tree, self.root), "bench_tests"
        else:
            make_project(self.root)
        self.executor = LocalExecutor()
        self.own: list[float] = []
        self.out_chars = 0
        self.rt = LedgerRuntime(self.root, tmp / "run", LedgerConfig())
        self.history = History(
            notes=ViewNotes(limit_chars=self.rt.config.context.note_chars),
            view_share=self.rt.config.context.view_share,
        )
        self.messages: list[dict] = [{"role": "system", "content": "bench"}, {"role": "user", "content": "the task"}]
        # (an older adapter, measured as the before, has no AgentMessages: it reads every message each call)
        self.agent_messages = mini_context.AgentMessages() if hasattr(mini_context, "AgentMessages") else None

    def execute(self, cmd: str, cwd: str):
        t0 = time.perf_counter()
        try:
            res = self.executor(cmd, cwd)
            self.out_chars = len(res.output)
            return res
        finally:
            self.own.append(time.perf_counter() - t0)

    def step(self, i: int) -> dict[str, float]:
        self.own.clear()
        c0, t0 = time.process_time(), time.perf_counter()
        result = self.rt.run(command(i, self.files, self.tests), self.execute)  # (made in the timed part, as before)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        r0 = time.perf_counter()
        self.rt.view()
        render = time.perf_counter() - r0
        self.messages += [
            {
                "role": "assistant",
                "content": f"step {i}: THOUGHT ... ```bash\n{command(i, self.files, self.tests)}\n```",
            },
            {"role": "user", "content": result.output, "extra": {"ledger": {"attempt": result.attempt_id}}},
        ]
        m0 = time.perf_counter()
        self.rt.prescan()
        if self.agent_messages is not None:
            mini_context.history_for(self.messages, self.history, self.rt, _Model(), self.agent_messages)
        else:
            mini_context.history_for(self.messages, self.history, self.rt, _Model())
        turn = time.perf_counter() - m0
        return {
            "step": i,
            "overhead_ms": (wall - sum(self.own)) * 1e3,
            "cpu_ms": cpu * 1e3,
            "render_ms": render * 1e3,
            "turn_ms": turn * 1e3,
            "output_chars": self.out_chars,
        }

    def close(self) -> None:
        self.rt.close()


FIGURES = ("overhead_ms", "cpu_ms", "render_ms", "turn_ms")


def by_window(rows: list[dict[str, float]], spans: list[tuple[int, int]] = WINDOWS) -> list[dict]:
    """p50 and p95 of each figure per window of steps, the mean output's length, and the most memory."""
    windows = []
    for a, b in spans:
        w = [r for r in rows if a <= r["step"] <= b]
        if not w:
            continue
        rss = [r["rss_mb"] for r in w if "rss_mb" in r]
        windows.append(
            {
                "steps": f"{a}-{b}",
                **{
                    f"{k}_{q}": round(pct([r[k] for r in w], p), 2)
                    for k in FIGURES
                    for q, p in (("p50", 0.5), ("p95", 0.95))
                },
                "output_chars_mean": round(statistics.mean(r["output_chars"] for r in w), 1),
                "rss_mb": round(max(rss), 1) if rss else None,
            }
        )
    return windows


def ratios(last: dict, base: dict) -> dict[str, dict[str, float | None]]:
    """Each figure's ``last`` over its ``base``, at the p50 and at the p95."""
    return {
        q: {k: round(last[f"{k}_{q}"] / base[f"{k}_{q}"], 2) if base[f"{k}_{q}"] else None for k in FIGURES}
        for q in ("p50", "p95")
    }


def print_table(title: str, windows: list[dict]) -> None:
    print(
        f"\n{title}\n{'steps':>10} {'overhead p50/p95 ms':>20} {'cpu p50/p95 ms':>16} {'render p50/p95 ms':>18}"
        f" {'turn p50/p95 ms':>16} {'out chars':>9} {'rss MB':>7}"
    )
    for w in windows:
        print(
            f"{w['steps']:>10} {w['overhead_ms_p50']:>9.1f} /{w['overhead_ms_p95']:>8.1f} "
            f"{w['cpu_ms_p50']:>7.1f} /{w['cpu_ms_p95']:>7.1f} {w['render_ms_p50']:>8.2f} /{w['render_ms_p95']:>7.2f} "
            f"{w['turn_ms_p50']:>7.2f} /{w['turn_ms_p95']:>7.2f} {w['output_chars_mean']:>9.0f} "
            f"{w['rss_mb'] or float('nan'):>7.0f}"
        )


def drive(args: argparse.Namespace, tmp: Path) -> tuple[Driven, list[dict], list[dict]]:
    """Runs the long ledger's steps, and the fresh one's in lockstep with its last ``--fresh`` (the two alternate
    which goes first); returns the long one (closed) and the rows of each."""
    long_run = Driven(tmp / "long", args.tree)
    fresh: Driven | None = None
    rows: list[dict] = []
    fresh_rows: list[dict] = []
    start = args.steps - args.fresh  # the long one's step after which the fresh one starts
    try:
        for i in range(1, args.steps + 1):
            if args.fresh and i == start + 1:
                fresh = Driven(tmp / "fresh", args.tree)
            if fresh is not None and i % 2:
                fresh_rows.append(fresh.step(i - start))
            rows.append(long_run.step(i))
            if fresh is not None and not i % 2:
                fresh_rows.append(fresh.step(i - start))
            if i % 100 == 0:
                rows[-1]["rss_mb"] = rss_mb()
                print(f"step {i}: rss {rows[-1]['rss_mb']:.0f} MB", file=sys.stderr, flush=True)
    finally:
        long_run.close()
        if fresh is not None:
            fresh.close()
    return long_run, rows, fresh_rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument(
        "--fresh",
        type=int,
        default=1000,
        help="steps of a fresh ledger driven in lockstep with the long one's last steps (0: the long one alone)",
    )
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "long_run.json")
    ap.add_argument("--no-inspect", action="store_true", help="skip the inspect timings")
    ap.add_argument("--keep", action="store_true", help="keep the projects and the runs (the long one's is printed)")
    ap.add_argument(
        "--tree", type=Path, help="a git checkout to run in (a real project: sympy) instead of the generated one"
    )
    args = ap.parse_args()
    args.fresh = max(0, min(args.fresh, args.steps))
    tmp = Path(tempfile.mkdtemp(prefix="ledger-long-"))
    long_run, rows, fresh_rows = drive(args, tmp)
    windows = by_window(rows)
    base = next((w for w in windows if w["steps"] == "101-500"), windows[0])
    last = windows[-1]
    ratio = ratios(last, base)
    print_table("the long run", windows)
    print(f"last window / steps {base['steps']}: p50 {ratio['p50']}, p95 {ratio['p95']}")
    fresh_windows = by_window(fresh_rows)
    fresh_base = next((w for w in fresh_windows if w["steps"] == "101-500"), None)
    fresh_ratio = ratios(last, fresh_base) if fresh_base is not None else None
    start = args.steps - args.fresh
    paired = by_window(rows, [(start + 101, start + 500)]) if fresh_base is not None else []
    paired_ratio = ratios(paired[0], fresh_base) if paired else None
    if fresh_windows:
        print_table(f"a fresh ledger, in lockstep with the long one's steps {start + 1}-{args.steps}", fresh_windows)
    if fresh_ratio is not None and paired_ratio is not None:
        print(
            f"long run's {last['steps']} / the fresh one's 101-500: p50 {fresh_ratio['p50']}, p95 {fresh_ratio['p95']}"
        )
        print(
            f"long run's {paired[0]['steps']} / the fresh one's 101-500, step by step in turn: "
            f"p50 {paired_ratio['p50']}, p95 {paired_ratio['p95']}"
        )
    inspect = {}
    run_dir = tmp / "long" / "run"
    if not args.no_inspect:
        launcher = [sys.executable, "-m", "ledger_runtime"]
        inspect["text"] = timed_process([*launcher, "inspect", str(run_dir)])
        inspect["html"] = timed_process([*launcher, "inspect", str(run_dir), "--html", str(tmp / "page.html")])
        print(f"inspect {args.steps} steps: text {inspect['text']}, html {inspect['html']}")
    commit = commit_of(Path(ledger_runtime.__file__).resolve().parents[1])
    median_cmd = statistics.median(r["overhead_ms"] for r in rows)
    out = {
        "commit": commit,
        "steps": args.steps,
        "fresh": args.fresh,
        "tree": str(args.tree) if args.tree else None,
        "files": len(long_run.rt._last.files) if long_run.rt._last else None,
        "windows": windows,
        "ratio_last_to_101_500": ratio["p50"],
        "ratio_last_to_101_500_p95": ratio["p95"],
        "fresh_windows": fresh_windows,
        "ratio_last_to_fresh_101_500": fresh_ratio,
        "paired_window": paired[0] if paired else None,
        "ratio_paired_to_fresh_101_500": paired_ratio,
        "overhead_ms_median_all": round(median_cmd, 2),
        "inspect": inspect,
        "command": " ".join(["python", "swebench_runs/bench/bench_long_run.py", *sys.argv[1:]]),
    }
    faults = run_dir / "faults.log"
    out["faults"] = len(faults.read_text().splitlines()) if faults.exists() else 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}; faults: {out['faults']}")
    if args.keep:
        print(f"kept {tmp}: the long run's ledger is {run_dir}")
    else:
        subprocess.run(["rm", "-rf", str(tmp)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
