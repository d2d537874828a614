"""Benchmark: what the ledger adds to one Codex shell call, end to end, for a command that does nothing.

Codex runs, for one ``exec_command``: the PreToolUse hook process (``ledger-run hook PreToolUse``,
which hands back the wrapped command), the wrapped command itself (``bash -lc`` of the wrapper line,
whose process runs ``true`` and asks the server for the answer), and the PostToolUse hook process.
This script times that chain against a hook server holding a real runtime over a small git
repository (as ``ledger-run codex`` runs it), interleaved with its floors:

- ``floor``: two ``python3 -S -E -c pass`` starts (the two hook processes' interpreters, doing
  nothing) plus ``bash -lc true`` (the command as Codex runs it without the ledger);
- ``plain``: ``bash -lc true`` alone.

Every process gets a HOME of its own with no login profile: a user's profile (a pyenv init costs
150 ms here) weighs on the chain and the floor alike and would hide the ledger's own cost.

It prints p50 and p95 of each (ms), wall time and the children's CPU time, and the ratio of the
chain's p50 to the floor's (the goal: within 1.5x), and writes JSON with the commit measured.
The machine is shared and noisy: the ratio within one run is what to compare.

Run: ``python swebench_runs/bench/bench_hook_chain.py [--n 60] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ledger_adapters.codex.cli import fast_launcher
from ledger_adapters.codex.hooks import CodexHooks
from ledger_runtime.config import LedgerConfig
from ledger_runtime.hooks.server import HookServer
from ledger_runtime.runtime import LedgerRuntime

ENV: dict[str, str] = {}  # every process's environment: a HOME of its own, with an empty login profile


def timed(argv: list[str], stdin: bytes = b"", cwd: Path | None = None) -> tuple[float, float, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, input=stdin, capture_output=True, cwd=cwd, env=ENV)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall * 1e3, cpu * 1e3, p.stdout


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "hook_chain.json")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ledger-chain-"))
    (tmp / "home").mkdir()  # a login profile of the user's own would weigh on both sides alike: none
    ENV.update({**os.environ, "HOME": str(tmp / "home")})
    repo = tmp / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    for a in (["init", "-q"], ["add", "-A"], ["-c", "user.email=b@e", "-c", "user.name=b", "commit", "-qm", "i"]):
        subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)
    token = "benchtoken"
    rt = LedgerRuntime(repo, tmp / "run", LedgerConfig())
    hooks = CodexHooks(rt, wrap_launcher=fast_launcher(), token=token)
    server = HookServer(hooks.handle, rt.report_fault, authorize=hooks.authorize)
    hooks.socket_path = server.socket_path
    hook = [*fast_launcher(), "hook"]
    rows: dict[str, list[tuple[float, float]]] = {"chain": [], "floor": [], "plain": []}
    try:
        for i in range(args.n):
            payload = {
                "hook_event_name": "PreToolUse",
                "tool_name": "Bash",
                "cwd": str(repo),
                "tool_use_id": f"c{i}",
                "tool_input": {"command": "true"},
            }
            for kind in ["chain", "floor", "plain"] if i % 2 else ["plain", "floor", "chain"]:
                if kind == "plain":
                    w, c, _ = timed(["bash", "-lc", "true"], cwd=repo)
                elif kind == "floor":
                    w1, c1, _ = timed([sys.executable, "-S", "-E", "-c", "pass"])
                    w2, c2, _ = timed(["bash", "-lc", "true"], cwd=repo)
                    w3, c3, _ = timed([sys.executable, "-S", "-E", "-c", "pass"])
                    w, c = w1 + w2 + w3, c1 + c2 + c3
                else:
                    ev = ["--socket", server.socket_path, "--token", token]
                    w1, c1, out = timed([*hook, "PreToolUse", *ev], json.dumps(payload).encode())
                    wrapped = json.loads(out)["hookSpecificOutput"]["updatedInput"]["command"]
                    w2, c2, _ = timed(["bash", "-lc", wrapped], cwd=repo)
                    post = {**payload, "hook_event_name": "PostToolUse", "tool_response": ""}
                    w3, c3, _ = timed([*hook, "PostToolUse", *ev], json.dumps(post).encode())
                    w, c = w1 + w2 + w3, c1 + c2 + c3
                rows[kind].append((w, c))
    finally:
        server.close()
        rt.close()
    table = {
        k: {
            "wall_p50_ms": pct([w for w, _ in v], 0.5),
            "wall_p95_ms": pct([w for w, _ in v], 0.95),
            "cpu_p50_ms": pct([c for _, c in v], 0.5),
        }
        for k, v in rows.items()
    }
    ratio = round(table["chain"]["wall_p50_ms"] / table["floor"]["wall_p50_ms"], 2)
    ratio_cpu = round(table["chain"]["cpu_p50_ms"] / table["floor"]["cpu_p50_ms"], 2)
    print(f"{'':>6} {'wall p50':>9} {'wall p95':>9} {'cpu p50':>8}   (ms, n={args.n})")
    for k, v in table.items():
        print(f"{k:>6} {v['wall_p50_ms']:>9} {v['wall_p95_ms']:>9} {v['cpu_p50_ms']:>8}")
    print(f"chain / floor (p50): wall {ratio}x, cpu {ratio_cpu}x")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = {
        "commit": commit,
        "n": args.n,
        "table": table,
        "chain_over_floor_p50": {"wall": ratio, "cpu": ratio_cpu},
        "command": " ".join(["python", "swebench_runs/bench/bench_hook_chain.py", *sys.argv[1:]]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    subprocess.run(["rm", "-rf", str(tmp)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
