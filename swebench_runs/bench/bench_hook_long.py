"""Benchmark: does the Codex hook path cost the same per call at call 3,000 as at call 300? (issue 42 item 4)

``bench_long_run.py`` measures a long run through the mini adapter; this one measures the hook path. A hook
server over a real runtime (``bench_hook_chain.Chain``: the hook commands ``ledger-run codex`` gives Codex,
run as Codex runs them, with the compiled client where this machine has one) serves ``--calls`` shell calls
(3,000 by default) over a small generated project in a git repository (``bench_long_run.make_project``),
cycling through what agents do (``bench_long_run.command``: whole-file reads, ``sed -n``, ``nl | sed``,
greps, an edit with ``sed -i``, a repro script, ``git diff``, ``ls``, pytest every 100 calls). The rollout
grows as Codex writes it: the ``function_call`` line before the hooks run, then the command's
``item_completed`` event, its ``function_call_output`` and a ``token_count`` after it.

For each call it records the server's thread CPU (``time.thread_time`` around each event's handler, and
around the work done after an answer, off the client's path) per event: PreToolUse, the wrapper's Begin
and Answer, PostToolUse where its flags open it; their sum per call; and the resident memory
(``/proc/self/statm``) every 100 calls. The table gives p50 and p95 per window of calls, and the ratio
of the last window (the last 1,000 calls) to calls 101-500. The goal: within 1.1x at the p50 and p95.
The processes' own time (shells, clients, the commands) is not in these figures: it does not grow with
the run.

Run (from the repository, ``PYTHONPATH`` naming the packages measured):
``python swebench_runs/bench/bench_hook_long.py [--calls 3000] [--out FILE]``. Writes JSON with the commit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_hook_chain as chain_bench  # noqa: E402
from bench_long_run import command, commit_of, make_project, pct, rss_mb  # noqa: E402

import ledger_runtime  # noqa: E402

EVENTS = ("PreToolUse", "Begin", "Answer", "PostToolUse")


class Timings:
    """Server thread CPU (ms) per event kind, for the call being driven."""

    def __init__(self) -> None:
        self.now: dict[str, float] = {}
        self.lock = threading.Lock()

    def add(self, kind: str, ms: float) -> None:
        with self.lock:
            self.now[kind] = self.now.get(kind, 0.0) + ms

    def take(self) -> dict[str, float]:
        with self.lock:
            got, self.now = self.now, {}
        return got


TIMINGS = Timings()


def instrument(server) -> None:
    """Time the server's handler and its ``after`` (both run in the server's threads)."""
    handle = server._handle

    def timed_handle(event, body, call=None, raw=False):
        c0 = time.thread_time()
        try:
            return handle(event, body, call, raw)
        finally:
            TIMINGS.add(event, (time.thread_time() - c0) * 1e3)

    server._handle = timed_handle
    after = server.after
    if after is not None:

        def timed_after(event, call):
            c0 = time.thread_time()
            try:
                after(event, call)
            finally:
                TIMINGS.add(f"after {event}", (time.thread_time() - c0) * 1e3)

        server.after = timed_after


class LongChain(chain_bench.Chain):
    """The Codex chain over a generated project, a varied command per call."""

    def __init__(self, tmp: Path, launcher: list[str], fallback: list[str] | None = None) -> None:
        super().__init__(tmp, launcher, fallback)
        make_project(self.repo)  # committed over the chain's first commit: the runtime sees it at the first call
        instrument(self.server)

    def said(self, payload: dict, kind: str = "response_item") -> None:
        with open(self.rollout, "a") as f:
            f.write(json.dumps({"type": kind, "payload": payload}) + "\n")

    def call(self, cmd: str) -> str:
        """One shell call through the chain, as Codex makes it; the output the model is shown."""
        call = self._call("c")
        self.said(
            {"type": "function_call", "name": "exec_command", "call_id": call, "arguments": json.dumps({"cmd": cmd})}
        )
        payload = {
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "cwd": str(self.repo),
            "tool_use_id": call,
            "tool_input": {"command": cmd},
            "transcript_path": str(self.rollout),
        }
        run = lambda argv, data=b"", cwd=None: subprocess.run(  # noqa: E731
            argv, input=data, capture_output=True, cwd=cwd, env=chain_bench.ENV
        )
        out = run([chain_bench.SHELL, "-c", self.commands["PreToolUse"]], json.dumps(payload).encode()).stdout
        hook = json.loads(out).get("hookSpecificOutput", {}) if out.strip() else {}
        wrapped = hook.get("updatedInput", {}).get("command", cmd)
        p = run(["bash", "-lc", wrapped], cwd=self.repo)
        shown = p.stdout.decode(errors="replace")
        item = {"type": "CommandExecution", "id": call, "aggregated_output": shown, "exit_code": p.returncode}
        self.said({"type": "item_completed", "item": {**item, "status": "completed"}}, "event_msg")
        self.said({"type": "function_call_output", "call_id": call, "output": shown})
        self.said({"type": "token_count", "info": None}, "event_msg")
        post = {**payload, "hook_event_name": "PostToolUse", "tool_response": shown}
        run([chain_bench.SHELL, "-c", self.commands["PostToolUse"]], json.dumps(post).encode())
        return shown


def windows(calls: int) -> list[tuple[int, int]]:
    """Calls 1-100 and 101-500, then windows to the last 1,000 calls, each window after the one before."""
    spans = [(1, 100), (101, 500)]
    edge = 500
    for b in (1000, 2000, 3000, 4000, 5000, calls - 1000):
        if edge < b <= calls - 1000:
            spans.append((edge + 1, b))
            edge = b
    spans.append((edge + 1, calls))
    return spans


def by_window(rows: list[dict], spans: list[tuple[int, int]], kinds: list[str]) -> list[dict]:
    out = []
    for a, b in spans:
        w = [r for r in rows if a <= r["call"] <= b]
        if not w:
            continue
        rss = [r["rss_mb"] for r in w if "rss_mb" in r]
        row = {"calls": f"{a}-{b}", "rss_mb": round(max(rss), 1) if rss else None}
        for k in kinds:
            xs = [r[k] for r in w if k in r]
            if xs:
                row[f"{k} p50"] = round(pct(xs, 0.5), 3)
                row[f"{k} p95"] = round(pct(xs, 0.95), 3)
        out.append(row)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "hook_long.json")
    args = ap.parse_args()
    if args.calls < 1500:
        print("--calls must be at least 1500 (calls 101-500, then the last 1,000)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="ledger-hook-long-"))
    (tmp / "home").mkdir()
    chain_bench.ENV.update({**os.environ, "HOME": str(tmp / "home")})
    clients = chain_bench.launchers()
    name = "compiled" if "compiled" in clients else "python"
    chain = LongChain(tmp / "chain", clients[name], clients["python"] if name == "compiled" else None)
    rows: list[dict] = []
    t0 = time.monotonic()
    try:
        for i in range(1, args.calls + 1):
            TIMINGS.take()
            chain.call(command(i))
            time.sleep(0.002)  # the work after an answer ends off the client's path: let it finish
            got = TIMINGS.take()
            got["total"] = sum(got.values())
            row = {"call": i, **got}
            if i % 100 == 0:
                row["rss_mb"] = rss_mb()
                print(f"\r{i}/{args.calls} calls, {time.monotonic() - t0:.0f} s", end="", file=sys.stderr, flush=True)
            rows.append(row)
        faults = chain.faults()
    finally:
        chain.close()
    print(file=sys.stderr)
    kinds = [k for k in ("total", *EVENTS, *(f"after {e}" for e in EVENTS)) if any(k in r for r in rows)]
    table = by_window(rows, windows(args.calls), kinds)
    base, last = table[1], table[-1]
    ratio = {
        k: {q: round(last[f"{k} {q}"] / base[f"{k} {q}"], 2) if base.get(f"{k} {q}") else None for q in ("p50", "p95")}
        for k in kinds
        if f"{k} p50" in last and f"{k} p50" in base
    }
    print(f"server thread CPU per call, ms (p50 / p95), client: {name}")
    print(f"{'calls':>11} " + " ".join(f"{k:>17}" for k in kinds) + f" {'rss MB':>7}")
    for w in table:
        cells = [f"{w.get(f'{k} p50', float('nan')):>8.3f}/{w.get(f'{k} p95', float('nan')):<8.3f}" for k in kinds]
        print(f"{w['calls']:>11} " + " ".join(cells) + f" {w['rss_mb'] or float('nan'):>7.0f}")
    print(
        f"{'last/101-500':>11} "
        + " ".join(f"{ratio[k]['p50']:>8}/{ratio[k]['p95']:<8}" if k in ratio else f"{'':>17}" for k in kinds)
    )
    if faults:
        print(f"faults.log:\n{faults[-2000:]}")
    out = {
        "commit": commit_of(Path(ledger_runtime.__file__).parent),
        "calls": args.calls,
        "client": name,
        "windows": table,
        "ratio_last_to_101_500": ratio,
        "faults": len(faults.splitlines()),
        "command": " ".join(
            [
                *([f"PYTHONPATH={os.environ['PYTHONPATH']}"] if os.environ.get("PYTHONPATH") else []),
                "python swebench_runs/bench/bench_hook_long.py",
                *sys.argv[1:],
            ]
        ),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    subprocess.run(["rm", "-rf", str(tmp)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
