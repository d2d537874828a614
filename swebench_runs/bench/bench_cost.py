"""What the ledger adds to one command, by workspace size: is it proportional to what changed?

Trees: a real sympy checkout (about 2,000 files; ``--sympy`` names a git directory or a clone) and
copies of it ten and forty-eight times over (about 20,000 and 100,000 files), each a git repository
with everything committed and a second commit that changes about 300 files (for ``git checkout``).

For each tree, each operation runs ``--repeat`` times through ``LedgerRuntime.run`` (the runtime a
mini-swe-agent run uses, LocalExecutor) and the same number of times bare (``bash -c`` through the
same LocalExecutor), interleaved, in the same process; "added" is the ledger's time for a command
minus the command's own (the runtime times the command inside its step, so the bare twin is only
there to show the command's own cost side by side). The bare twin changes the same tree; its change
is taken, as every change made between commands, when the state view is rendered for the model's
turn (``rt.inform()``, untimed: it overlaps the model's thinking). Operations:

- ``touch x``: a trivial impure command (it changes a file's stat data, not its content);
- a pure read: ``sed -n '100,160p'`` of a source file;
- ``sed -i`` of one file (alternating between two edits, so every run changes it);
- ``git checkout`` between the two commits (about 300 files change each time); and the same with no
  bare twin between the ledger's runs (``every change the ledger's``: each checkout's 300 changes are
  taken after the command, as the command's, not at the model's turn; the bare command's own cost is
  measured apart, before, on the same tree);
- ``find / -maxdepth 3 -name x``: a read of the whole file system;
- ``git add -A`` after a one-file change (git's index changes).

Also the hook round trip of the Codex adapter: the process Codex starts for a hook (``python -S -E
fasthook.py hook PreToolUse``) against a hook server holding a runtime, from spawn to exit, beside
the interpreter's own start (``python -S -c pass``) and the console script (``ledger-run hook``).

Targets (the per-command cost issue): trivial impure added p50 <= 2 ms at 2k files and <= 10 ms at
100k; ``git checkout`` of ~300 files <= 100 ms added; nothing under / adds more than 1 s; hook round
trip p50 <= 15 ms.

Run: ``python swebench_runs/bench/bench_cost.py --sympy /path/to/sympy.git [--sizes 1,10,48]
[--repeat 15] [--work /tmp/bench-cost]``; prints a table and writes
``swebench_runs/bench/results/cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from ledger_runtime.config import LedgerConfig  # noqa: E402
from ledger_runtime.executor import LocalExecutor  # noqa: E402
from ledger_runtime.runtime import LedgerRuntime  # noqa: E402

OUT = HERE / "results" / "cost.json"
ALONE = "alone: "  # an operation whose commands only the ledger runs (no bare twin between them)
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@example.com",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@example.com",
}
TARGETS = {
    "touch_p50_ms_2k": 2.0,
    "touch_p50_ms_100k": 10.0,
    "checkout_p50_ms": 100.0,
    "root_read_max_ms": 1000.0,
    "hook_p50_ms": 15.0,
}


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=GIT_ENV
    ).stdout


def pct(v: list[float], q: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def make_tree(sympy: Path, work: Path, copies: int) -> Path:
    """A git repository of ``copies`` copies of the sympy tree, all committed, and a branch ``b``
    that changes about 300 files."""
    root = work / f"tree-x{copies}"
    if (root / ".git").exists() and (root / ".bench-ready").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    src = work / "sympy-src"
    if not src.exists():
        subprocess.run(["git", "clone", "-q", "--shared", str(sympy), str(src)], check=True)
    root.mkdir(parents=True)
    for i in range(copies):
        dest = root if copies == 1 else root / f"copy{i:02d}"
        subprocess.run(
            ["cp", "-a", *[str(p) for p in src.iterdir() if p.name != ".git"], str(dest if copies == 1 else _mk(dest))],
            check=True,
        )
    git(root, "init", "-q", "-b", "a")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a")
    py = sorted(p for p in root.rglob("*.py") if ".git" not in p.parts)[:300]
    git(root, "checkout", "-q", "-b", "b")
    for p in py:
        with open(p, "a") as f:
            f.write("# changed on branch b\n")
    git(root, "commit", "-q", "-am", "b: 300 files")
    git(root, "checkout", "-q", "a")
    (root / ".bench-ready").write_text("")
    git(root, "add", ".bench-ready")
    git(root, "commit", "-q", "-m", "ready")
    git(root, "checkout", "-q", "b")
    git(root, "merge", "-q", "a", "-m", "m")
    git(root, "checkout", "-q", "a")
    return root


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (user + system)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _mk(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def operations(root: Path) -> list[tuple[str, list[str]]]:
    """(name, the commands it cycles through)."""
    source = next(p for p in sorted(root.rglob("basic.py")) if "core" in p.parts and ".git" not in p.parts)
    rel = os.path.relpath(source, root)
    return [
        ("touch x (trivial impure)", ["touch x"]),
        ("sed -n (pure read)", [f"sed -n '100,160p' {rel}"]),
        (
            "sed -i (one file)",
            [
                f"sed -i 's/^# BENCH A$/# BENCH B/;t;s/^# BENCH B$/# BENCH A/' {rel} || true",
                f"sed -i '1s/^/# BENCH A\\n/' {rel}",
            ],
        ),
        ("git checkout (~300 files)", ["git checkout -q b", "git checkout -q a"]),
        (ALONE + "git checkout (~300 files), every change the ledger's", ["git checkout -q b", "git checkout -q a"]),
        ("find / -maxdepth 3 -name x", ["find / -maxdepth 3 -name x 2>/dev/null | head -n 3"]),
        ("git add -A", ["echo y >> x && git add -A"]),
    ]


def measure(root: Path, repeat: int) -> dict[str, Any]:
    run_dir = Path(tempfile.mkdtemp(prefix="bench-cost-run-"))
    ex = LocalExecutor(timeout=600)
    rt = LedgerRuntime(root, run_dir, LedgerConfig())
    out: dict[str, Any] = {"files": len(rt._last.files) if rt._last else None}
    try:
        for name, cmds in operations(root):
            added: list[float] = []
            bare: list[float] = []
            turn: list[float] = []  # the state view and the scan of the twin's change, before the model call
            cpu: list[float] = []  # this process's CPU over the ledger's step (the command runs in a child)
            sub_cpu: list[float] = []  # children's CPU over the step less the bare twin's: the git the ledger runs
            bare_sub: list[float] = []
            alone = name.startswith(ALONE)
            name = name.removeprefix(ALONE)
            # each operation starts from the clean first commit: an earlier one's edit (sed -i of a
            # file the second commit changes too) made every checkout fail, and measured the failure
            ex("git checkout -q -f a && git clean -q -fd", str(root))
            rt.inform()
            failed = 0
            if alone:  # the bare command's own cost, apart: the ledger's runs then take every change
                for i in range(repeat + repeat % 2):
                    t0, c0 = time.perf_counter(), _children_cpu()
                    ex(cmds[i % len(cmds)], str(root))
                    bare.append((time.perf_counter() - t0) * 1000)
                    bare_sub.append((_children_cpu() - c0) * 1000)
            for i in range(repeat):
                cmd = cmds[i % len(cmds)]
                if not alone:
                    t0, c0 = time.perf_counter(), _children_cpu()
                    ex(cmd, str(root))
                    bare.append((time.perf_counter() - t0) * 1000)
                    bare_sub.append((_children_cpu() - c0) * 1000)
                    cmd = cmds[(i + 1) % len(cmds)] if len(cmds) > 1 else cmd  # undo what the bare run did
                # the model's turn: the bare twin's change is taken then, as any change between commands
                t0 = time.perf_counter()
                rt.inform()
                turn.append((time.perf_counter() - t0) * 1000)
                t0, p0, c0 = time.perf_counter(), time.process_time(), _children_cpu()
                rt.run(cmd, ex)
                total = (time.perf_counter() - t0) * 1000
                cpu.append((time.process_time() - p0) * 1000)
                failed += rt.state.attempts[-1].exit_code not in (0, None)
                sub_cpu.append((_children_cpu() - c0) * 1000)
                added.append(total - rt.state.attempts[-1].duration_s * 1000)
            out[name] = {
                "added_p50_ms": round(statistics.median(added), 3),
                "added_p95_ms": round(pct(added, 0.95), 3),
                "added_max_ms": round(max(added), 3),
                "bare_p50_ms": round(statistics.median(bare), 3),
                "bare_p95_ms": round(pct(bare, 0.95), 3),
                "model_turn_p50_ms": round(statistics.median(turn), 3),
                "cpu_p50_ms": round(statistics.median(cpu), 3),
                "cpu_p95_ms": round(pct(cpu, 0.95), 3),
                # the children's CPU beyond the command's own (the bare twin's median): git the ledger ran
                "sub_cpu_p50_ms": round(statistics.median(sub_cpu) - statistics.median(bare_sub), 3),
                "n": repeat,
                "failed": failed,  # runs whose command failed (none is expected: each is a real change)
            }
        scanner = rt.workspace.scanner
        out["scans"] = {
            "incremental": scanner.incremental_scans,
            "full": scanner.full_scans,
            "watcher": scanner.watcher is not None,
        }
    finally:
        rt.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        git(root, "checkout", "-q", "-f", "a")
        git(root, "clean", "-q", "-fd")
    return out


def hooks(root: Path, repeat: int) -> dict[str, Any]:
    from ledger_adapters.codex.cli import fast_launcher, hook_launcher
    from ledger_adapters.codex.hooks import CodexHooks
    from ledger_runtime.hooks.server import HookServer

    run_dir = Path(tempfile.mkdtemp(prefix="bench-cost-hooks-"))
    rt = LedgerRuntime(root, run_dir, LedgerConfig())
    h = CodexHooks(rt, wrap_launcher=fast_launcher())
    server = HookServer(h.handle, rt.report_fault)
    h.socket_path = server.socket_path
    times: dict[str, list[float]] = {
        "python -S -c pass": [],
        "fasthook PreToolUse": [],
        "ledger-run hook PreToolUse": [],
    }
    try:
        for i in range(repeat):
            payload = json.dumps(
                {
                    "hook_event_name": "PreToolUse",
                    "tool_name": "Bash",
                    "cwd": str(root),
                    "tool_input": {"command": "cat README.md"},
                    "tool_use_id": f"c{i}",
                    "transcript_path": str(run_dir / "none.jsonl"),
                }
            ).encode()
            for name, argv in (
                ("python -S -c pass", [sys.executable, "-S", "-c", "pass"]),
                (
                    "fasthook PreToolUse",
                    [*fast_launcher(), "hook", "PreToolUse", "--socket", server.socket_path, "--run-dir", str(run_dir)],
                ),
                (
                    "ledger-run hook PreToolUse",
                    [*hook_launcher(), "hook", "PreToolUse", "--socket", server.socket_path, "--run-dir", str(run_dir)],
                ),
            ):
                t0 = time.perf_counter()
                subprocess.run(argv, input=payload, capture_output=True, check=False)
                times[name].append((time.perf_counter() - t0) * 1000)
                h.pending.clear()
    finally:
        server.close()
        rt.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    return {
        k: {"p50_ms": round(statistics.median(v), 3), "p95_ms": round(pct(v, 0.95), 3), "n": len(v)}
        for k, v in times.items()
    }


def _commit() -> str:
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True
    )
    return r.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sympy", type=Path, required=True, help="a sympy git directory or clone")
    ap.add_argument("--sizes", default="1,10,48", help="copies of the sympy tree per workspace")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bench-cost")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    console = Console()
    report: dict[str, Any] = {
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()},
        "command": "python swebench_runs/bench/bench_cost.py " + " ".join(argv or sys.argv[1:]),
        "commit": _commit(),
        "targets": TARGETS,
        "trees": {},
    }
    for copies in (int(x) for x in args.sizes.split(",")):
        console.print(f"tree x{copies}: preparing…")
        root = make_tree(args.sympy, args.work, copies)
        console.print(f"tree x{copies}: measuring…")
        report["trees"][str(copies)] = measure(root, args.repeat)
    first = make_tree(args.sympy, args.work, int(args.sizes.split(",")[0]))
    report["hooks"] = hooks(first, args.repeat * 2)
    t = Table(title="Time the ledger adds per command (ms), beside the command itself")
    t.add_column("operation")
    for copies, r in report["trees"].items():
        t.add_column(f"{r['files']:,} files: added p50 / p95", justify="right")
        t.add_column("CPU p50 (+git)", justify="right")
        t.add_column("bare p50", justify="right")
    for name, _ in operations(first):
        name = name.removeprefix(ALONE)
        row = [name]
        for r in report["trees"].values():
            x = r[name]
            row += [
                f"{x['added_p50_ms']:.1f} / {x['added_p95_ms']:.1f}",
                f"{x['cpu_p50_ms']:.1f} (+{max(0.0, x['sub_cpu_p50_ms']):.1f})",
                f"{x['bare_p50_ms']:.1f}",
            ]
        t.add_row(*row)
    console.print(t)
    ht = Table(title="Hook round trip (ms)")
    for c in ("process", "p50", "p95"):
        ht.add_column(c, justify="left" if c == "process" else "right")
    for k, v in report["hooks"].items():
        ht.add_row(k, f"{v['p50_ms']:.1f}", f"{v['p95_ms']:.1f}")
    console.print(ht)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
