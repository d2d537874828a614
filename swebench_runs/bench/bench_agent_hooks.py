"""Benchmark of the Gemini CLI and OpenCode adapters: what a shell call costs through each agent, plainly,
with hooks that do nothing, and with the ledger.

1. Hook round trips against a real runtime over a small git repository (as ``ledger-run`` runs it), for
   the events around a ``cat`` (the second of two: its answer is a reference):
   - Gemini CLI (command hooks): the process Gemini CLI starts for a hook (``bash -c "RUN/gemini/hook
     EVENT"``, the run's hook script, which execs the hook client), from spawn to exit, against the run's
     Unix-socket hook server; floor: ``python3 -S -E -c pass``;
   - OpenCode (its plugin's HTTP calls): a POST of the event to the run's HTTP hook server, from request
     to answer.
2. The real agent against a fake model on loopback (tests/fake_gemini.py, tests/fake_completions.py), one
   session of ``--calls`` shell calls (``cat`` of a file, the same each time; for Gemini CLI each with a
   comment of its own, or its loop detection ends the session at the fifth), run plainly, with hooks
   that do nothing (Gemini CLI: a ``true`` command hook before and after each call; OpenCode: a plugin
   whose two tool hooks return at once), and through ``ledger-run``, ``--repeat`` times each, interleaved.
   A call's time is what the agent spends between the model's answer asking for it and the next request
   carrying its result (hooks, its permission check, the command, its bookkeeping; through the ledger,
   for Gemini CLI, the read of the answer that takes the output's place), timed by the fake server.

Prints a table (p50 and p95, ms) and writes JSON with the commit measured.

Run: ``python swebench_runs/bench/bench_agent_hooks.py [--agents gemini,opencode] [--n 40] [--calls 20] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "tests")]

from fake_completions import FakeCompletions, opencode_config, tool_results  # noqa: E402
from fake_gemini import FakeGemini, function_responses, gemini_env  # noqa: E402

from ledger_adapters.gemini.cli import GEMINI_VERSION, find_gemini  # noqa: E402
from ledger_adapters.gemini.hooks import GeminiHooks  # noqa: E402
from ledger_adapters.opencode.cli import OPENCODE_VERSION, find_opencode  # noqa: E402
from ledger_adapters.opencode.hooks import OpenCodeHooks  # noqa: E402
from ledger_runtime import (  # noqa: E402
    HookServer,
    HttpHookServer,
    LedgerRuntime,
    binary_version,
    fast_launcher,
    hook_launcher,
    hook_script,
)

OUT = HERE / "results" / "agent_hooks.json"
FILE = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(40))


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def stats(xs: list[float]) -> dict[str, Any]:
    return {"p50_ms": round(pct(xs, 0.5), 2), "p95_ms": round(pct(xs, 0.95), 2), "n": len(xs)}


def repo_at(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "calc.py").write_text(FILE)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b"}
    env["GIT_COMMITTER_EMAIL"] = "b@b"
    subprocess.run("git init -q && git add -A && git commit -qm start", shell=True, cwd=path, env=env, check=True)
    return path


def timed(argv: list[str], stdin: bytes) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    p = subprocess.run(argv, input=stdin, capture_output=True)
    return (time.perf_counter() - t0) * 1e3, p.stdout


def gemini_round_trips(tmp: Path, n: int) -> dict[str, list[float]]:
    """Gemini CLI's hook processes against a real runtime: BeforeTool and AfterTool of the second cat."""
    repo = repo_at(tmp / "gemini-hooks")
    rt = LedgerRuntime(repo, tmp / "gemini-hooks-run")
    hooks = GeminiHooks(rt, token="benchtoken")
    server = HookServer(hooks.handle, rt.report_fault, authorize=hooks.authorize)
    rows: dict[str, list[float]] = {"gemini hook BeforeTool": [], "gemini hook AfterTool": [], "python_start": []}
    try:
        script = hook_script(
            tmp / "gemini-hook", fast_launcher(), server.socket_path, tmp, server.keep_token("benchtoken")
        )
        out = subprocess.run(["cat", "calc.py"], cwd=repo, capture_output=True, text=True).stdout.rstrip("\n")
        llm = f"<untrusted_context>\nOutput: {out}\nProcess Group PGID: 1\n</untrusted_context>"
        base = {"cwd": str(repo), "tool_name": "run_shell_command", "tool_input": {"command": "cat calc.py"}}
        for _ in range(n):
            for j in range(2):
                w, _ = timed(["bash", "-c", f"{shlex.quote(str(script))} BeforeTool"], json.dumps(base).encode())
                after = {**base, "tool_response": {"llmContent": llm, "returnDisplay": out}}
                w2, _ = timed(["bash", "-c", f"{shlex.quote(str(script))} AfterTool"], json.dumps(after).encode())
                if j == 1:
                    rows["gemini hook BeforeTool"].append(w)
                    rows["gemini hook AfterTool"].append(w2)
            rows["python_start"].append(timed([sys.executable, "-S", "-E", "-c", "pass"], b"")[0])
    finally:
        server.close()
        rt.close()
    return rows


def opencode_round_trips(tmp: Path, n: int) -> dict[str, list[float]]:
    """OpenCode's plugin calls against a real runtime: ToolBefore and ToolAfter of the second cat."""
    repo = repo_at(tmp / "opencode-hooks")
    rt = LedgerRuntime(repo, tmp / "opencode-hooks-run")
    hooks = OpenCodeHooks(rt, None)
    server = HttpHookServer(hooks.handle, rt.report_fault, "benchtoken")
    rows: dict[str, list[float]] = {"opencode ToolBefore (HTTP)": [], "opencode ToolAfter (HTTP)": []}

    def post(event: str, payload: dict[str, Any]) -> float:
        req = urllib.request.Request(server.url(event), data=json.dumps(payload).encode())
        req.add_header("Authorization", "Bearer benchtoken")
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()
        return (time.perf_counter() - t0) * 1e3

    try:
        out = subprocess.run(["cat", "calc.py"], cwd=repo, capture_output=True, text=True).stdout
        for i in range(n):
            for j in range(2):
                call = {"tool": "bash", "sessionID": "s", "callID": f"c{i}-{j}", "directory": str(repo)}
                call["args"] = {"command": "cat calc.py"}
                w = post("ToolBefore", call)
                w2 = post("ToolAfter", {**call, "output": out, "metadata": {"exit": 0}})
                if j == 1:
                    rows["opencode ToolBefore (HTTP)"].append(w)
                    rows["opencode ToolAfter (HTTP)"].append(w2)
    finally:
        server.close()
        rt.close()
    return rows


def gemini_session(binary: str, tmp: Path, calls: int, kind: str, tag: str) -> list[float]:
    """One Gemini CLI session of ``calls`` cats: each call's time inside gemini (ms)."""
    repo = repo_at(tmp / f"repo-{tag}")
    # each call told apart by a comment: Gemini CLI stops a session that repeats a call five times (a loop)
    fake = FakeGemini([("bash", f"cat calc.py  # call {i}") for i in range(calls)] + [("say", "Done.")])
    home = tmp / f"home-{tag}"
    (home / ".gemini").mkdir(parents=True)
    settings: dict[str, Any] = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    if kind == "empty hooks":
        hook = {"matcher": "run_shell_command", "hooks": [{"type": "command", "command": "true"}]}
        settings["hooks"] = {"BeforeTool": [hook], "AfterTool": [hook]}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    env = gemini_env(os.environ, fake, home)
    gemini_args = ["-p", "read calc.py", "--yolo", "--skip-trust", "-m", "gemini-2.5-pro"]
    if kind == "ledger":
        argv = [*hook_launcher(), "gemini", "--gemini-bin", binary, "-w", str(repo), "-o", str(tmp / f"run-{tag}")]
        argv += ["--", *gemini_args]
    else:
        argv = [binary, *gemini_args]
    try:
        p = subprocess.run(argv, env=env, cwd=repo, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"gemini failed ({tag}): {p.stderr[-1500:]}")
        second = json.dumps(function_responses(fake.requests[-1]).get("call_1_0"))
        if kind == "ledger" and "[ledger: same as" not in second:
            raise RuntimeError(f"the ledger did not answer the repeated cat: {second[:160]}")
        times = fake.times
        return [(times[k + 1][0] - times[k][1]) * 1e3 for k in range(min(calls, len(times) - 1))]
    finally:
        fake.close()


EMPTY_PLUGIN = """export const Empty = async () => ({
  "tool.execute.before": async () => {},
  "tool.execute.after": async () => {},
})
"""


def opencode_session(binary: str, tmp: Path, calls: int, kind: str, tag: str) -> list[float]:
    """One ``opencode run`` session of ``calls`` cats: each call's time inside opencode (ms)."""
    repo = repo_at(tmp / f"repo-{tag}")
    fake = FakeCompletions([("bash", "cat calc.py")] * calls + [("say", "Done.")])
    home = tmp / f"home-{tag}"
    config = opencode_config(fake)
    if kind == "empty hooks":
        plugin = tmp / f"empty-{tag}.js"
        plugin.write_text(EMPTY_PLUGIN)
        config["plugin"] = [plugin.as_uri()]
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE", "XDG_"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local" / "share"))
    env.update(XDG_STATE_HOME=str(home / ".local" / "state"), XDG_CACHE_HOME=str(home / ".cache"), PWD=str(repo))
    env.update(OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1")
    if kind == "ledger":
        argv = [*hook_launcher(), "opencode", "--opencode-bin", binary, "-w", str(repo), "-o", str(tmp / f"run-{tag}")]
        argv += ["--", "run", "read calc.py"]
    else:
        argv = [binary, "run", "read calc.py"]
    try:
        p = subprocess.run(
            argv, env=env, cwd=repo, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
        )
        if p.returncode != 0:
            raise RuntimeError(f"opencode failed ({tag}): {p.stderr[-1500:]}")
        second = tool_results(fake.requests[-1]).get("call_1_0", "")
        if kind == "ledger" and not second.startswith("[ledger: same as"):
            raise RuntimeError(f"the ledger did not answer the repeated cat: {second[:160]!r}")
        times = fake.times
        return [(times[k + 1][0] - times[k][1]) * 1e3 for k in range(min(calls, len(times) - 1))]
    finally:
        fake.close()


AGENTS = {
    "gemini": (find_gemini, gemini_session, GEMINI_VERSION),
    "opencode": (find_opencode, opencode_session, OPENCODE_VERSION),
}


def sessions(agent: str, tmp: Path, calls: int, repeat: int) -> dict[str, Any]:
    find, session, pinned = AGENTS[agent]
    binary = find(None)
    if binary is None:
        return {"skipped": f"no {agent} binary on PATH or in $LEDGER_{agent.upper()}_BIN"}
    kinds = ["plain", "empty hooks", "ledger"]
    per: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(repeat):
        for kind in kinds if r % 2 == 0 else list(reversed(kinds)):
            per[kind].extend(session(binary, tmp, calls, kind, f"{agent}-{kind.replace(' ', '-')}{r}"))
    return {
        "version": binary_version(binary),
        "pinned": pinned,
        "calls_per_session": calls,
        "sessions": repeat,
        "per_shell_call": {k: stats(v) for k, v in per.items()},
        "added_per_call_p50_ms": {k: round(pct(per[k], 0.5) - pct(per["plain"], 0.5), 2) for k in kinds[1:]},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", default="gemini,opencode")
    ap.add_argument("--n", type=int, default=40, help="hook round trips of each kind")
    ap.add_argument("--calls", type=int, default=20, help="shell calls per session")
    ap.add_argument("--repeat", type=int, default=3, help="sessions of each kind")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    agents = [a for a in args.agents.split(",") if a]
    tmp = Path(tempfile.mkdtemp(prefix="ledger-agent-bench-"))
    rows: dict[str, list[float]] = {}
    if "gemini" in agents:
        rows |= gemini_round_trips(tmp, args.n)
    if "opencode" in agents:
        rows |= opencode_round_trips(tmp, args.n)
    result: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "load_average": os.getloadavg(),
        "hooks": {k: stats(v) for k, v in rows.items()},
    }
    for agent in agents:
        result[agent] = sessions(agent, tmp, args.calls, args.repeat)
    result["load_average_after"] = os.getloadavg()
    shutil.rmtree(tmp, ignore_errors=True)
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Gemini CLI and OpenCode hooks (ms; hook round trips n={args.n})")
    for col in ("what", "p50", "p95", "n"):
        table.add_column(col, justify="right" if col != "what" else "left")
    for k, v in result["hooks"].items():
        table.add_row(k, str(v["p50_ms"]), str(v["p95_ms"]), str(v["n"]))
    for agent in agents:
        for k, v in result[agent].get("per_shell_call", {}).items():
            table.add_row(f"{agent}: a shell call, {k}", str(v["p50_ms"]), str(v["p95_ms"]), str(v["n"]))
    Console().print(table)
    for agent in agents:
        for k, v in result[agent].get("added_per_call_p50_ms", {}).items():
            print(f"{agent}: added per shell call (p50), {k}: {v} ms")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    result["commit"] = commit.strip()
    result["command"] = " ".join(["python", "swebench_runs/bench/bench_agent_hooks.py", *sys.argv[1:]])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
