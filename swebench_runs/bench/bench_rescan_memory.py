"""Benchmark: the ledger's resident memory across its first full re-scans of a freshly cloned repository.

A fresh clone's files all have timestamps within the hash cache's racy window, so the scans after it read the tree
again; a full re-scan (the cross-check every ``cross_check_every`` scans) reads every file whose timestamp it cannot
trust. The ledger must hold no copy of what it reads unless it may be a change it records (issue 42 item 4: RSS
jumped ~30 MB at the first full re-scan after a clone, 128 MB at 20k files).

A real ``LedgerRuntime`` runs ``--steps`` commands (``true``: nothing changes) in a fresh clone of ``--repo``, and the
resident memory (``/proc/self/statm``) is read after every step. The table gives it after the first step, at a few
steps, and its peak, with the full scans done.

Reproduce (from /work/main, venv active; any git repository or bare git directory will do)::

    python swebench_runs/bench/bench_rescan_memory.py --repo /path/to/a/repo
    PYTHONPATH=/path/to/older/checkout python swebench_runs/bench/bench_rescan_memory.py --repo ... --out /tmp/b.json

Results go to ``swebench_runs/bench/results/rescan_memory.json`` unless ``--out`` says otherwise, with the commit
of the ``ledger_runtime`` measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import ledger_runtime
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def commit_of(path: Path) -> str:
    git = ["git", "-C", str(path)]
    r = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True)
    return r.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", required=True, type=Path, help="a git repository or bare git directory to clone")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "rescan_memory.json")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ledger-rescan-"))
    root = tmp / "clone"
    try:
        subprocess.run(["git", "clone", "-q", str(args.repo), str(root)], check=True, capture_output=True)
        files = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True).stdout.count("\n")
        executor = LocalExecutor()
        rss: list[float] = []
        with LedgerRuntime(root, tmp / "run", LedgerConfig()) as runtime:
            for _ in range(args.steps):
                runtime.run("true", executor)
                rss.append(rss_mb())
            full_scans = getattr(getattr(runtime.workspace, "scanner", None), "full_scans", None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    marks = sorted({0, *range(49, args.steps, 50), args.steps - 1})
    out = {
        "commit": commit_of(Path(ledger_runtime.__file__).resolve().parents[1]),
        "repo": str(args.repo),
        "files": files,
        "steps": args.steps,
        "full_scans": full_scans,
        "rss_mb_after_step": {str(i + 1): round(rss[i], 1) for i in marks},
        "rss_mb_peak": round(max(rss), 1),
        "rss_mb_growth": round(max(rss) - rss[0], 1),
        "command": " ".join(["python", "swebench_runs/bench/bench_rescan_memory.py", *sys.argv[1:]]),
    }
    print(f"{files:,} files, {args.steps} steps, {full_scans} full scans")
    print(f"{'after step':>10} {'RSS MB':>7}")
    for step, mb in out["rss_mb_after_step"].items():
        print(f"{step:>10} {mb:>7.1f}")
    print(f"{'peak':>10} {out['rss_mb_peak']:>7.1f}  (+{out['rss_mb_growth']} MB over the first step)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out} (ledger_runtime at {out['commit']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
