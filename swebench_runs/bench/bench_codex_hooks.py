"""Benchmark of the Codex adapter's hooks: what one hook costs Codex, and how much context its notes add.

What it measures (times in ms, median (p50) and 95th percentile):

1. Hook round trip: for each command of a session (bench_adapter.py's SWE-bench-like mix over the
   sympy-shaped tree, or ``--tree``), the wall time of the process Codex starts for the hook,
   ``ledger-run hook PreToolUse`` (and ``PostToolUse``), from spawn to exit, with the event's JSON
   on stdin, against a hook server holding the run's runtime (as ``ledger-run codex`` runs it).
   Between the two, the command runs as Codex runs it (``bash -lc`` in the tree; a REUSE runs the
   replacement command the hook handed back) and its record is appended to a rollout file, which
   the PostToolUse reads. The time inside the server (the ledger's own work: scan, analysis,
   govern, the SQLite commit) is timed apart, per event.
2. Floors, interleaved with the above: starting ``python3 -c pass`` (the interpreter alone) and a
   ``ledger-run hook`` round trip to a server that answers nothing at once (process start, the
   client's imports, the socket).
3. Context notes: the size of the state view given at SessionStart and of every PostToolUse note
   (characters; tokens estimated as characters / 4), and their sum over the session, which is what
   stays in Codex's history.
4. With a codex binary (``--codex``, default when one is found): the real codex against a fake
   Responses server on loopback (tests/fake_responses.py), the same scripted 7-step session run
   plainly (``codex exec``, no hooks) and through ``ledger-run codex``, ``--codex-repeat`` times
   each, interleaved; the difference per tool call is what the ledger adds to a Codex run, hooks
   included.

Run: ``python swebench_runs/bench/bench_codex_hooks.py [--tree DIR] [--commands 150]``; prints a table
and writes ``swebench_runs/bench/results/codex_hooks.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "tests")]

import bench_adapter  # noqa: E402
import bench_core  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from ledger_adapters.codex.cli import find_codex, hook_launcher  # noqa: E402
from ledger_adapters.codex.hooks import CodexHooks  # noqa: E402
from ledger_runtime.config import LedgerConfig  # noqa: E402
from ledger_runtime.hooks.server import HookServer  # noqa: E402
from ledger_runtime.runtime import LedgerRuntime  # noqa: E402

OUT = HERE / "results" / "codex_hooks.json"
TARGET_P50_MS = 150.0


def summary(ms: list[float]) -> dict:
    return bench_core.summary([x / 1000 for x in ms]) if ms else {"n": 0}


def spawn(cmd: list[str], stdin: bytes) -> tuple[float, bytes]:
    t = time.perf_counter()
    p = subprocess.run(cmd, input=stdin, capture_output=True)
    ms = (time.perf_counter() - t) * 1000
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} exited {p.returncode}: {p.stderr[-300:]!r}")
    return ms, p.stdout


class TimedHooks:
    """The run's CodexHooks, with the server-side time of each event kept."""

    def __init__(self, hooks: CodexHooks):
        self.hooks = hooks
        self.inside: dict[str, list[float]] = {}

    def handle(self, event: str, payload: dict) -> dict | None:
        t = time.perf_counter()
        try:
            return self.hooks.handle(event, payload)
        finally:
            self.inside.setdefault(event, []).append((time.perf_counter() - t) * 1000)


def rollout_line(call_id: str, command: str, output: str, code: int) -> str:
    return json.dumps(
        {
            "type": "event_msg",
            "payload": {
                "type": "item_completed",
                "item": {
                    "type": "CommandExecution",
                    "id": call_id,
                    "command": ["/bin/bash", "-lc", command],
                    "status": "completed" if code == 0 else "failed",
                    "aggregated_output": output,
                    "exit_code": code,
                },
            },
        }
    )


def measure_hooks(tree: Path, session: list, work: Path, console: Console) -> dict:
    run_dir = work / "run"
    transcript = work / "rollout.jsonl"
    transcript.write_text("")
    rt = LedgerRuntime(tree, run_dir, LedgerConfig())
    timed = TimedHooks(CodexHooks(rt))
    server = HookServer(timed.handle, rt.report_fault)
    noop = HookServer(lambda e, p: None, rt.report_fault)
    launcher = hook_launcher()
    base = {
        "session_id": "bench",
        "turn_id": "t",
        "transcript_path": str(transcript),
        "cwd": str(tree),
        "model": "gpt-5.5",
        "permission_mode": "bypassPermissions",
    }

    def hook(event: str, payload: dict, sock: str) -> tuple[float, dict | None]:
        ms, out = spawn(
            [*launcher, "hook", event, "--socket", sock, "--run-dir", str(run_dir)],
            json.dumps({**base, "hook_event_name": event, **payload}).encode(),
        )
        return ms, json.loads(out) if out.strip() else None

    times: dict[str, list[float]] = {"PreToolUse": [], "PostToolUse": [], "python_start": [], "hook_floor": []}
    notes: list[int] = []
    verdicts: dict[str, int] = {}
    try:
        _, start = hook("SessionStart", {"source": "startup"}, server.socket_path)
        view_chars = len((start or {}).get("hookSpecificOutput", {}).get("additionalContext", ""))
        for i, c in enumerate(session):
            call = f"call_{i}"
            times["python_start"].append(spawn([sys.executable, "-c", "pass"], b"")[0])
            times["hook_floor"].append(
                hook(
                    "PreToolUse",
                    {"tool_name": "Bash", "tool_input": {"command": "true"}, "tool_use_id": "noop"},
                    noop.socket_path,
                )[0]
            )
            ms, pre = hook(
                "PreToolUse",
                {"tool_name": "Bash", "tool_input": {"command": c.command}, "tool_use_id": call},
                server.socket_path,
            )
            times["PreToolUse"].append(ms)
            decided = (pre or {}).get("hookSpecificOutput", {})
            command = decided.get("updatedInput", {}).get("command", c.command)
            p = subprocess.run(
                ["bash", "-lc", command], cwd=tree, capture_output=True, text=True, errors="replace", timeout=120
            )
            output = p.stdout + p.stderr
            with open(transcript, "a") as f:
                f.write(rollout_line(call, command, output, p.returncode) + "\n")
            ms, post = hook(
                "PostToolUse",
                {
                    "tool_name": "Bash",
                    "tool_input": {"command": command},
                    "tool_response": output[-2000:],
                    "tool_use_id": call,
                },
                server.socket_path,
            )
            times["PostToolUse"].append(ms)
            note = (post or {}).get("hookSpecificOutput", {}).get("additionalContext", "")
            if note:
                notes.append(len(note))
        for a in rt.state.attempts:
            key = a.verdict.kind.value + ("" if a.executed else " (not run)")
            verdicts[key] = verdicts.get(key, 0) + 1
        faults = (run_dir / "faults.log").read_text().count("\n") if (run_dir / "faults.log").exists() else 0
    finally:
        server.close()
        noop.close()
        rt.close()
    return {
        "commands": len(session),
        "round_trip_ms": {k: summary(v) for k, v in times.items()},
        "inside_server_ms": {k: summary(v) for k, v in timed.inside.items()},
        "client_and_transport_ms": {
            "PreToolUse": summary(
                [a - b for a, b in zip(times["PreToolUse"], timed.inside["PreToolUse"][: len(times["PreToolUse"])])]
            )
        },
        "context": {
            "session_start_view_chars": view_chars,
            "notes": len(notes),
            "note_chars": summary([float(n) for n in notes]) if notes else {"n": 0},
            "note_chars_total": sum(notes),
            "note_tokens_total_estimate": (sum(notes) + 3) // 4,
            "note_cap_chars": LedgerConfig().context.note_chars,
        },
        "verdicts": verdicts,
        "faults": faults,
    }


def measure_codex(binary: str, repeat: int, work: Path, console: Console) -> dict:
    from conftest import CALC_PROJECT, make_repo
    from fake_responses import FakeResponses, codex_user_home
    from test_codex_e2e import SCRIPT

    calls = sum(1 for k, _ in SCRIPT if k != "say")
    walls: dict[str, list[float]] = {"plain": [], "ledger": []}
    for r in range(repeat):
        for arm in ("plain", "ledger") if r % 2 == 0 else ("ledger", "plain"):
            d = work / f"codex-{arm}-{r}"
            repo = make_repo(d / "repo", CALC_PROJECT)
            fake = FakeResponses(SCRIPT, workdir=str(repo))
            home = codex_user_home(d / "home", fake.base_url)
            env = {**os.environ, "CODEX_HOME": str(home), "LEDGER_FAKE_KEY": "bench"}
            codex_args = ["exec", "--skip-git-repo-check", "Fix the failing test"]
            if arm == "plain":
                cmd = [binary, *codex_args]
            else:
                cmd = [*hook_launcher(), "codex", "--codex-bin", binary, "-o", str(d / "run"), "--", *codex_args]
            t = time.perf_counter()
            p = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, timeout=300)
            walls[arm].append((time.perf_counter() - t) * 1000)
            fake.close()
            if p.returncode != 0:
                raise RuntimeError(f"{arm} codex run failed: {p.stderr[-500:]!r}")
    added = [b - a for a, b in zip(walls["plain"], walls["ledger"])]
    return {
        "repeat": repeat,
        "tool_calls_per_run": calls,
        "run_wall_ms": {k: summary(v) for k, v in walls.items()},
        "added_per_run_ms": summary(added),
        # includes the fixed start-up (ledger-run's imports, codex --version, the first scan)
        "added_per_tool_call_ms": summary([a / calls for a in added]),
    }


def print_report(console: Console, report: dict) -> None:
    h = report["hooks"]
    t = Table(title=f"Codex hooks: {h['commands']} commands, {report['tree']['files']} files")
    for col in ("what", "p50 ms", "p95 ms"):
        t.add_column(col, justify="right" if col != "what" else "left")
    rows = [
        ("PreToolUse round trip (ledger-run hook process)", h["round_trip_ms"]["PreToolUse"]),
        ("PostToolUse round trip", h["round_trip_ms"]["PostToolUse"]),
        ("  inside the server: PreToolUse", h["inside_server_ms"]["PreToolUse"]),
        ("  inside the server: PostToolUse", h["inside_server_ms"]["PostToolUse"]),
        ("floor: python3 -c pass", h["round_trip_ms"]["python_start"]),
        ("floor: ledger-run hook to a server that answers nothing", h["round_trip_ms"]["hook_floor"]),
    ]
    for name, s in rows:
        t.add_row(name, f"{s['p50_ms']:.1f}", f"{s['p95_ms']:.1f}")
    if "codex" in report:
        c = report["codex"]
        t.add_row(
            f"real codex: added per run ({c['repeat']} runs each, {c['tool_calls_per_run']} tool calls)",
            f"{c['added_per_run_ms']['p50_ms']:.0f}",
            f"{c['added_per_run_ms']['p95_ms']:.0f}",
        )
        t.add_row(
            "  per tool call, start-up included",
            f"{c['added_per_tool_call_ms']['p50_ms']:.1f}",
            f"{c['added_per_tool_call_ms']['p95_ms']:.1f}",
        )
        t.add_row(
            "real codex: whole run, plain",
            f"{c['run_wall_ms']['plain']['p50_ms']:.0f}",
            f"{c['run_wall_ms']['plain']['p95_ms']:.0f}",
        )
        t.add_row(
            "real codex: whole run, with the ledger",
            f"{c['run_wall_ms']['ledger']['p50_ms']:.0f}",
            f"{c['run_wall_ms']['ledger']['p95_ms']:.0f}",
        )
    console.print(t)
    ctx = h["context"]
    console.print(
        f"context: SessionStart view {ctx['session_start_view_chars']} chars; {ctx['notes']} PostToolUse notes, "
        f"p50 {ctx['note_chars'].get('p50_ms', 0):.0f} / p95 {ctx['note_chars'].get('p95_ms', 0):.0f} / "
        f"max {ctx['note_chars'].get('max_ms', 0):.0f} chars (cap {ctx['note_cap_chars']}); "
        f"{ctx['note_chars_total']:,} chars (~{ctx['note_tokens_total_estimate']:,} tokens) over the session"
    )
    console.print(f"verdicts: {h['verdicts']}; faults: {h['faults']}")
    p50 = h["round_trip_ms"]["PreToolUse"]["p50_ms"]
    console.print(
        f"target: hook round trip p50 <= {TARGET_P50_MS:.0f} ms: "
        f"{'met' if max(p50, h['round_trip_ms']['PostToolUse']['p50_ms']) <= TARGET_P50_MS else 'MISSED'}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", help="the source tree (bench_core's generated tree when missing or empty)")
    ap.add_argument("--commands", type=int, default=150)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--codex", choices=("auto", "yes", "no"), default="auto")
    ap.add_argument("--codex-repeat", type=int, default=5)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    console = Console()
    work = Path(tempfile.mkdtemp(prefix="ledger-bench-codex-"))
    try:
        source, origin, generated = bench_adapter.prepare_source(args, work, console)
        tree = bench_adapter.copy_tree(source, work / "tree", time.time() - 3600)
        session = bench_adapter.build_session(tree, args.commands, random.Random(args.seed), generated)
        report: dict[str, Any] = {
            "tree": {"origin": origin, **bench_core.tree_stats(tree)},
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        }
        console.print(f"{len(session)} commands through ledger-run hook...")
        report["hooks"] = measure_hooks(tree, session, work, console)
        binary = find_codex(None)
        if args.codex == "yes" and binary is None:
            console.print("no codex binary: pass --codex no, or install it")
            return 2
        if binary and args.codex != "no":
            console.print(f"the real codex ({binary}), plain and with the ledger, {args.codex_repeat} runs each...")
            report["codex"] = {"binary": binary, **measure_codex(binary, args.codex_repeat, work, console)}
        report["command"] = "python swebench_runs/bench/bench_codex_hooks.py " + " ".join(argv or sys.argv[1:])
        print_report(console, report)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
        console.print(f"wrote {args.out}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
