"""Benchmark: what the ledger adds to one Codex shell call, end to end, for a command that does nothing;
alone and with 8 calls at once; with the Python hook client and wrapper, and with the compiled ones
(ledger_runtime/hooks/compiled.py) where this machine can build them.

Codex runs, for one ``exec_command``: the PreToolUse hook (``SHELL -c HOOK_COMMAND``, the user's login
shell; the hook hands back the wrapped command), the wrapped command itself (``bash -lc`` of the
wrapper line, whose process runs ``true`` and asks the server for the answer), and the PostToolUse
hook. This script runs the hook commands ``ledger-run codex`` gives Codex (``hook_overrides``), as
Codex runs them, against a hook server holding a real runtime over a small git repository (served
as ``ledger-run codex`` serves it), with the rollout Codex writes (the call named before its hooks
run, its end after the command), interleaved with its floors:

- ``floor``: two ``python3 -S -E -c pass`` starts (the two hook processes' interpreters, doing
  nothing) plus ``bash -lc true`` (the command as Codex runs it without the ledger);
- ``floor, hooks in shells``: the same, each interpreter started as Codex starts a hook command
  (``bash -c``): what two hooks that did nothing would cost (the goal is set against ``floor``);
- ``floor, compiled``: two starts of the compiled client (``--version``) plus ``bash -lc true``;
- ``floor, the chain's processes``: every process the compiled chain starts, doing none of the ledger's
  work: the PreToolUse hook's shell and client (``SHELL -c 'CLIENT --version'``), the command's login
  shell with the client in it and the inner shell the wrapper runs the command in (``bash -lc 'CLIENT
  --version; bash --noprofile -lc true'``: a fork where the wrapper is exec'd), and the PostToolUse
  hook's shell with its flag tests (nothing else runs while the flags are clear). What the chain costs
  over it is the ledger's work and the calls on its socket; a goal below it is below what Codex's shells
  and a wrapper that can pass on the command's exit code cost on this machine;
- ``plain``: ``bash -lc true`` alone.

Every process gets a HOME of its own with no login profile: a user's profile (a pyenv init costs
150 ms here) weighs on the chain and the floor alike and would hide the ledger's own cost.

Alone (``--n`` rounds): p50 and p95 of each (ms), wall time and CPU time (the processes', and this
process's meanwhile: starting them, and the server's threads, which do the chain's server work), each
chain's parts (the PreToolUse hook, the wrapped command, the PostToolUse hook) and the ratio of each
chain's p50 to the floor's. At once (``--workers`` threads, ``--rounds`` each): chains per second
against floors per second, PreToolUse hooks (clients of the server alone) against ``python -S -E -c
pass`` starts (twice as many rounds), and the CPU time of each. The machine is shared and noisy: the
ratios within one run are what to compare; on a loaded machine the CPU ratio says more of an idle
one's wall ratio than the wall ratio does. Writes JSON with the commit measured.

Run: ``python swebench_runs/bench/bench_hook_chain.py [--n 60] [--workers 8] [--rounds 10] [--out FILE]``.
The code measured is the one imported: with ``PYTHONPATH`` naming a tree of an earlier commit (its
``ledger_runtime`` and its ``adapters`` as ``ledger_adapters``) the same script measures that one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

import ledger_runtime
from ledger_adapters.codex.cli import fast_launcher, hook_overrides
from ledger_adapters.codex.hooks import CodexHooks
from ledger_runtime.config import LedgerConfig
from ledger_runtime.hooks.server import HookServer
from ledger_runtime.runtime import LedgerRuntime

ENV: dict[str, str] = {}  # every process's environment: a HOME of its own, with an empty login profile
SHELL = "/bin/bash"  # the login shell Codex runs hook commands with (``SHELL -c``)
TOKEN = "benchtoken"


def timed(argv: list[str], stdin: bytes = b"", cwd: Path | None = None) -> tuple[float, float, bytes]:
    """Wall and CPU time (ms) of one process: its own, and this process's meanwhile (starting it, and
    the hook server's threads serving it); exact when one thread starts processes."""
    before = cpu_now()
    t0 = time.perf_counter()
    p = subprocess.run(argv, input=stdin, capture_output=True, cwd=cwd, env=ENV)
    wall = time.perf_counter() - t0
    return wall * 1e3, (cpu_now() - before) * 1e3, p.stdout


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2)


def cpu_now() -> float:
    """CPU seconds of this process (the server's threads) and of its children that have ended."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


def launchers() -> dict[str, list[str]]:
    """The hook clients to measure: the Python one, and the compiled one where there is one (an earlier
    commit: the one it had)."""
    try:
        python = fast_launcher(compiled=False)
    except TypeError:  # an earlier commit: one launcher
        return {"python": fast_launcher()}
    found = fast_launcher()
    return {"python": python, **({"compiled": found} if found != python else {})}


class Chain:
    """A hook server over a real runtime, the hook commands ``ledger-run codex`` would give Codex with the
    hook client ``launcher``, and the rollout Codex writes."""

    def __init__(self, tmp: Path, launcher: list[str], fallback: list[str] | None = None):
        tmp.mkdir()
        self.repo = tmp / "repo"
        self.repo.mkdir()
        (self.repo / "a.py").write_text("x = 1\n")
        for a in (["init", "-q"], ["add", "-A"], ["-c", "user.email=b@e", "-c", "user.name=b", "commit", "-qm", "i"]):
            subprocess.run(["git", *a], cwd=self.repo, check=True, capture_output=True)
        self.run_dir = tmp / "run"
        self.rt = LedgerRuntime(self.repo, self.run_dir, LedgerConfig())
        self.hooks = CodexHooks(self.rt, wrap_launcher=launcher, token=TOKEN)
        if fallback is not None:  # as ledger-run codex runs the compiled client: the Python one named too
            self.hooks.wrap_fallback = fallback
        self.rollout = tmp / "rollout.jsonl"
        self.rollout.write_text("")
        if hasattr(self.hooks, "serve"):
            self.server = self.hooks.serve()
            extra: dict = {"flags": self.hooks.flag_paths, "shell": SHELL}
        else:  # an earlier commit: one event at a time, every hook a Python process
            self.server = HookServer(self.hooks.handle, self.rt.report_fault, authorize=self.hooks.authorize)
            self.hooks.socket_path = self.server.socket_path
            extra = {}
        if hasattr(self.server, "keep_token"):  # the secret in a file the command line names
            extra["token_file"] = self.server.keep_token(TOKEN)
        else:  # an earlier commit: the secret on the command line
            extra["token"] = TOKEN
        if fallback is not None:
            extra["fallback"] = fallback
        args = hook_overrides(launcher, self.server.socket_path, self.run_dir, {}, **extra)
        self.commands = {}
        for value in args[1::2]:
            name, _, table = value.partition("=")
            entries = tomllib.loads(f"x = {table}")["x"]
            self.commands[name.removeprefix("hooks.")] = entries[-1]["hooks"][0]["command"]
        self.calls = 0
        self._ids = threading.Lock()

    def _call(self, prefix: str) -> str:
        with self._ids:
            self.calls += 1
            return f"{prefix}{self.calls}"

    def _said(self, line: dict) -> None:
        """A line of the rollout, as Codex writes it (whole lines, appended)."""
        with self._ids, open(self.rollout, "a") as f:
            f.write(json.dumps(line) + "\n")

    def _payload(self, call: str) -> dict:
        self._said(
            {
                "type": "response_item",
                "payload": {"type": "function_call", "call_id": call, "arguments": json.dumps({"cmd": "true"})},
            }
        )
        return {
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "cwd": str(self.repo),
            "tool_use_id": call,
            "tool_input": {"command": "true"},
            "transcript_path": str(self.rollout),
        }

    def run(self) -> tuple[list[float], float]:
        """One call through the chain: the wall time of each part (ms), and their CPU time (ms)."""
        call = self._call("c")
        payload = self._payload(call)
        w1, c1, out = timed([SHELL, "-c", self.commands["PreToolUse"]], json.dumps(payload).encode())
        wrapped = json.loads(out)["hookSpecificOutput"]["updatedInput"]["command"]
        w2, c2, shown = timed(["bash", "-lc", wrapped], cwd=self.repo)
        item = {"type": "CommandExecution", "id": call, "aggregated_output": shown.decode(), "exit_code": 0}
        self._said(
            {"type": "event_msg", "payload": {"type": "item_completed", "item": {**item, "status": "completed"}}}
        )
        post = {**payload, "hook_event_name": "PostToolUse", "tool_response": shown.decode()}
        w3, c3, _ = timed([SHELL, "-c", self.commands["PostToolUse"]], json.dumps(post).encode())
        return [w1, w2, w3], c1 + c2 + c3

    def pre_hook(self) -> None:
        """One PreToolUse hook alone (a client of the server), as Codex runs it."""
        timed([SHELL, "-c", self.commands["PreToolUse"]], json.dumps(self._payload(self._call("h"))).encode())

    def faults(self) -> str:
        path = self.run_dir / "faults.log"
        return path.read_text() if path.exists() else ""

    def close(self) -> None:
        self.server.close()
        self.rt.close()


def floor(repo: Path, shell: bool = False, start: list[str] | None = None) -> tuple[float, float]:
    """Two interpreter starts and the command; ``shell``: each start as Codex runs a hook command
    (``SHELL -c``), what two hooks that do nothing would cost; ``start``: another process than the
    interpreter (the compiled client's ``--version``)."""
    start = start or [sys.executable, "-S", "-E", "-c", "pass"]
    if shell:
        start = [SHELL, "-c", " ".join(start)]
    w1, c1, _ = timed(start)
    w2, c2, _ = timed(["bash", "-lc", "true"], cwd=repo)
    w3, c3, _ = timed(start)
    return w1 + w2 + w3, c1 + c2 + c3


def processes(repo: Path, compiled: list[str]) -> tuple[float, float]:
    """The processes the compiled chain starts, each doing none of the ledger's work (``floor, the chain's
    processes`` above)."""
    client = shlex.join([*compiled, "--version"])
    w1, c1, _ = timed([SHELL, "-c", client])
    w2, c2, _ = timed(["bash", "-lc", f"{client} >/dev/null; bash --noprofile -lc true"], cwd=repo)
    w3, c3, _ = timed([SHELL, "-c", f"[ -e {shlex.quote(str(repo / 'no-post'))} ] || exit 0; exec true"])
    return w1 + w2 + w3, c1 + c2 + c3


def at_once(work, workers: int, rounds: int) -> dict[str, float]:
    """``workers`` threads each doing ``work()`` ``rounds`` times: per second, and CPU ms per one."""
    start = threading.Barrier(workers + 1)

    def worker() -> None:
        start.wait()
        for _ in range(rounds):
            work()

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    cpu0 = cpu_now()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu = cpu_now() - cpu0
    done = workers * rounds
    return {"per_s": round(done / wall, 2), "wall_s": round(wall, 2), "cpu_ms_each": round(cpu * 1e3 / done, 2)}


def p50s(rows: list[tuple[float, float]]) -> dict[str, float]:
    return {
        "wall_p50_ms": pct([w for w, _ in rows], 0.5),
        "wall_p95_ms": pct([w for w, _ in rows], 0.95),
        "cpu_p50_ms": pct([c for _, c in rows], 0.5),
    }


def ratio(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {"wall": round(a["wall_p50_ms"] / b["wall_p50_ms"], 2), "cpu": round(a["cpu_p50_ms"] / b["cpu_p50_ms"], 2)}


def measure(chains: dict[str, Chain], repo: Path, n: int, compiled: list[str] | None):
    """``n`` interleaved rounds of every chain and floor: (rows, each chain's parts)."""
    rows: dict[str, list[tuple[float, float]]] = {f"chain, {k}": [] for k in chains}
    rows |= {"floor": [], "floor, hooks in shells": [], "plain": []}
    if compiled:
        rows["floor, compiled"] = []
        rows["floor, the chain's processes"] = []
    parts: dict[str, list[list[float]]] = {k: [] for k in chains}
    for i in range(n):
        kinds = list(rows)
        for kind in kinds if i % 2 else kinds[::-1]:
            if kind == "plain":
                w, c, _ = timed(["bash", "-lc", "true"], cwd=repo)
            elif kind == "floor, the chain's processes" and compiled:
                w, c = processes(repo, compiled)
            elif kind.startswith("floor"):
                start = [*compiled, "--version"] if kind == "floor, compiled" and compiled else None
                w, c = floor(repo, shell=kind == "floor, hooks in shells", start=start)
            else:
                walls, c = chains[kind.removeprefix("chain, ")].run()
                parts[kind.removeprefix("chain, ")].append(walls)
                w = sum(walls)
            rows[kind].append((w, c))
    return rows, parts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "hook_chain.json")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ledger-chain-"))
    (tmp / "home").mkdir()  # a login profile of the user's own would weigh on both sides alike: none
    ENV.update({**os.environ, "HOME": str(tmp / "home")})
    clients = launchers()
    chains = {
        name: Chain(tmp / name, launcher, clients["python"] if name == "compiled" else None)
        for name, launcher in clients.items()
    }
    repo = next(iter(chains.values())).repo
    compiled = clients.get("compiled")
    try:
        rows, parts = measure(chains, repo, args.n, compiled)
        together = {}
        if args.workers > 0 and args.rounds > 0:
            together["floor"] = at_once(lambda: floor(repo), args.workers, args.rounds)
            for name, chain in chains.items():
                together[f"chain, {name}"] = at_once(chain.run, args.workers, args.rounds)
            start = [sys.executable, "-S", "-E", "-c", "pass"]
            together["python start"] = at_once(lambda: timed(start), args.workers, args.rounds * 2)
            for name, chain in chains.items():
                together[f"PreToolUse hook, {name}"] = at_once(chain.pre_hook, args.workers, args.rounds * 2)
        faults = {name: chain.faults() for name, chain in chains.items()}
    finally:
        for chain in chains.values():
            chain.close()
    table = {k: p50s(v) for k, v in rows.items()}
    split = {
        chain: {
            name: {"wall_p50_ms": pct([p[i] for p in got], 0.5), "wall_p95_ms": pct([p[i] for p in got], 0.95)}
            for i, name in enumerate(("PreToolUse hook", "wrapped command", "PostToolUse hook"))
        }
        for chain, got in parts.items()
    }
    over_floor = {name: ratio(table[f"chain, {name}"], table["floor"]) for name in chains}
    over_shells = {name: ratio(table[f"chain, {name}"], table["floor, hooks in shells"]) for name in chains}
    over_plain = {name: ratio(table[f"chain, {name}"], table["plain"]) for name in chains}
    procs = table.get("floor, the chain's processes")
    over_procs = {name: ratio(table[f"chain, {name}"], procs) for name in chains if name == "compiled" and procs}
    print(f"{'':>24} {'wall p50':>9} {'wall p95':>9} {'cpu p50':>8}   (ms, n={args.n})")
    for k, v in table.items():
        print(f"{k:>24} {v['wall_p50_ms']:>9} {v['wall_p95_ms']:>9} {v['cpu_p50_ms']:>8}")
    for chain, got in split.items():
        for k, v in got.items():
            print(f"{chain + ': ' + k:>32} {v['wall_p50_ms']:>9} {v['wall_p95_ms']:>9}")
    for name in chains:
        print(
            f"chain, {name} (p50): {over_floor[name]['wall']}x the floor wall, {over_floor[name]['cpu']}x cpu; "
            f"{over_shells[name]['wall']}x with the hooks in shells; {over_plain[name]['wall']}x plain"
            + (f"; {over_procs[name]['wall']}x the chain's processes" if name in over_procs else "")
        )
    if procs:
        print(
            f"the chain's processes alone (no ledger work): {procs['wall_p50_ms']} ms p50 wall, "
            f"{round(procs['wall_p50_ms'] / table['plain']['wall_p50_ms'], 2)}x plain"
        )
    throughput = {}
    if together:
        print(f"\n{args.workers} at once: {'per s':>7} {'wall s':>7} {'cpu ms each':>12}")
        for k, v in together.items():
            print(f"{k:>26} {v['per_s']:>7} {v['wall_s']:>7} {v['cpu_ms_each']:>12}")
        for name in chains:
            throughput[f"chain, {name} / floor"] = round(
                together[f"chain, {name}"]["per_s"] / together["floor"]["per_s"], 2
            )
            throughput[f"PreToolUse hook, {name} / python start"] = round(
                together[f"PreToolUse hook, {name}"]["per_s"] / together["python start"]["per_s"], 2
            )
        print("throughput: " + ", ".join(f"{k} {v}" for k, v in throughput.items()))
    for name, text in faults.items():
        if text:
            print(f"faults.log ({name}):\n{text[-2000:]}")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=Path(ledger_runtime.__file__).parent,
    ).stdout.strip()
    out = {
        "commit": commit,
        "n": args.n,
        "clients": clients,
        "table": table,
        "parts": split,
        "chain_over_floor_p50": over_floor,
        "chain_over_floor_hooks_in_shells_p50": over_shells,
        "chain_over_plain_p50": over_plain,
        "chain_over_its_processes_p50": over_procs,
        "at_once": {"workers": args.workers, "rounds": args.rounds, **together, "throughput": throughput},
        "faults": {name: len(text.splitlines()) for name, text in faults.items()},
        "command": " ".join(
            [
                *([f"PYTHONPATH={os.environ['PYTHONPATH']}"] if os.environ.get("PYTHONPATH") else []),
                "python",
                "swebench_runs/bench/bench_hook_chain.py",
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
