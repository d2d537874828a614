"""Benchmark of the Claude Code adapter: what one hook costs, beside what Claude Code itself spends on a
tool call without the ledger.

1. Hook round trips against a real runtime over a small git repository (as ``ledger-run claude`` runs
   it), for ``PreToolUse`` and ``PostToolUse`` of a Bash ``cat`` (the second of two: its answer is a
   reference) and ``PostToolUse`` of a Read, between which the command runs as Claude Code runs it:
   - ``http`` (the default transport): a POST of the event to the run's HTTP hook server, on a new
     connection, from request to answer;
   - ``command`` (``--hook-transport command``): the process Claude Code starts for a command hook
     (``sh -c "RUN/claude/hook EVENT"``, the run's hook script, which execs the hook client), from
     spawn to exit, against the run's Unix-socket hook server.
   Floors, interleaved: ``python3 -S -E -c pass`` (an interpreter's start) and a command hook's round
   trip to a server that answers nothing (``command floor``).
2. The real ``claude`` against a fake Messages API on loopback (tests/fake_messages.py), one session of
   ``--calls`` Bash calls (``cat`` of a file, the same each time), run plainly (``claude -p``, no hooks),
   with two HTTP hooks per call that answer ``{}`` at once (what Claude Code itself spends on hooks:
   answered in one write, as the ledger's server answers, and, beside it, as ``http.server`` answers by
   default, its head and body in two writes, which Nagle's algorithm and Claude Code's delayed ACK hold
   up), and through ``ledger-run claude`` with each transport, ``--repeat`` times each, interleaved. A tool
   call's time is what Claude Code spends between the model's answer asking for it and the next request
   carrying its result (hooks, permission checks, the command, its own bookkeeping), timed by the fake
   server.

Prints a table (p50 and p95, ms) and writes JSON with the commit measured.

Run: ``python swebench_runs/bench/bench_claude_hooks.py [--n 60] [--calls 20] [--repeat 3]``. The code
measured is the one imported (``ledger-run claude`` too): with ``PYTHONPATH`` naming a tree of an earlier
commit (its ``ledger_runtime`` and its ``adapters`` as ``ledger_adapters``) the same script measures that one.
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
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "tests")]

from fake_messages import FakeMessages, claude_env, tool_results  # noqa: E402

from ledger_adapters.claude.cli import CLAUDE_VERSION, claude_version, find_claude  # noqa: E402
from ledger_adapters.claude.hooks import ClaudeHooks  # noqa: E402
from ledger_runtime import fast_launcher, hook_launcher, hook_script  # noqa: E402
from ledger_runtime.config import LedgerConfig  # noqa: E402
from ledger_runtime.hooks.server import HookServer  # noqa: E402
from ledger_runtime.runtime import LedgerRuntime  # noqa: E402

OUT = HERE / "results" / "claude_hooks.json"
FILE = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(40))


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2) if xs else 0.0


def stats(xs: list[float]) -> dict[str, Any]:
    return {"n": len(xs), "p50_ms": pct(xs, 0.5), "p95_ms": pct(xs, 0.95)}


def repo_at(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "calc.py").write_text(FILE)
    for a in (["init", "-q"], ["add", "-A"], ["-c", "user.email=b@e", "-c", "user.name=b", "commit", "-qm", "i"]):
        subprocess.run(["git", *a], cwd=path, check=True, capture_output=True)
    return path


def timed(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    p = subprocess.run(argv, input=stdin, capture_output=True, env=env)
    return (time.perf_counter() - t0) * 1e3, p.stdout


def post(url: str, token: str, payload: dict[str, Any]) -> tuple[float, bytes]:
    """An HTTP hook's round trip, on a new connection (ms), and the answer."""
    import http.client
    from urllib.parse import urlsplit

    u = urlsplit(url)
    t0 = time.perf_counter()
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        c.request("POST", u.path, body=json.dumps(payload), headers={"Authorization": f"Bearer {token}"})
        body = c.getresponse().read()
    finally:
        c.close()
    return (time.perf_counter() - t0) * 1e3, body


def secret_for(server: HookServer, token: str) -> str:
    """What the hook script is given for the run's secret: the file that holds it (the secret is on no
    command line), or, at an earlier commit (``PYTHONPATH``), the secret itself."""
    import inspect

    if "token_file" in inspect.signature(hook_script).parameters:
        return server.keep_token(token)
    return token


def hook_round_trips(tmp: Path, n: int) -> dict[str, Any]:
    from ledger_runtime import HttpHookServer

    repo = repo_at(tmp / "hooks-repo")
    env = {**os.environ, "HOME": str(tmp)}
    runtimes, servers = [], []
    rows: dict[str, list[float]] = {}
    base = {"session_id": "s", "cwd": str(repo), "permission_mode": "default"}
    calc = str(repo / "calc.py")
    read = {"type": "text", "file": {"filePath": calc, "content": FILE, "numLines": 121, "startLine": 1}}
    read["file"]["totalLines"] = 121
    output = FILE.strip("\n")
    senders = {}
    for transport in ("http", "command"):
        rt = LedgerRuntime(repo, tmp / f"hooks-run-{transport}", LedgerConfig())
        hooks = ClaudeHooks(rt, token="benchtoken")
        runtimes.append(rt)
        if transport == "http":
            hs = HttpHookServer(hooks.handle, rt.report_fault, "benchtoken")
            senders[transport] = lambda event, p, hs=hs: post(hs.url(event), "benchtoken", p)
        else:
            hs = HookServer(hooks.handle, rt.report_fault, authorize=hooks.authorize)
            script = hook_script(
                tmp / "hook", fast_launcher(), hs.socket_path, tmp / "hooks-run-command", secret_for(hs, "benchtoken")
            )
            cmd = shlex.quote(str(script))
            senders[transport] = lambda event, p, cmd=cmd: timed(
                ["sh", "-c", f"{cmd} {event}"], json.dumps(p).encode(), env
            )
        servers.append(hs)
        for k in ("PreToolUse Bash", "PostToolUse Bash", "PostToolUse Read"):
            rows[f"{transport} {k}"] = []
    silent = HookServer(lambda event, payload: None, runtimes[0].report_fault)
    servers.append(silent)
    floor = hook_script(
        tmp / "floor-hook", fast_launcher(), silent.socket_path, tmp / "hooks-run-http", secret_for(silent, "x")
    )
    rows |= {"python_start": [], "command floor": []}
    try:
        for i in range(n):
            for transport, send in senders.items():
                for j in range(2):  # the second cat's answer is a reference
                    call = f"c{i}_{j}"
                    pre = {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": call}
                    pre["tool_input"] = {"command": "cat calc.py"}
                    w, _ = send("PreToolUse", pre)
                    subprocess.run(["bash", "-c", "cat calc.py"], cwd=repo, capture_output=True)
                    post_ = {**pre, "hook_event_name": "PostToolUse"}
                    post_["tool_response"] = {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}
                    w2, out = send("PostToolUse", post_)
                    if j == 1:
                        rows[f"{transport} PreToolUse Bash"].append(w)
                        rows[f"{transport} PostToolUse Bash"].append(w2)
                        assert b"same as" in out, out[:200]
                p = {**base, "hook_event_name": "PostToolUse", "tool_name": "Read", "tool_use_id": f"r{i}"}
                p |= {"tool_input": {"file_path": calc}, "tool_response": read}
                rows[f"{transport} PostToolUse Read"].append(send("PostToolUse", p)[0])
            rows["python_start"].append(timed([sys.executable, "-S", "-E", "-c", "pass"], b"", env)[0])
            rows["command floor"].append(timed(["sh", "-c", f"{shlex.quote(str(floor))} PreToolUse"], b"{}", env)[0])
    finally:
        for hs in servers:
            hs.close()
        for rt in runtimes:
            rt.close()
    return {k: stats(v) for k, v in rows.items()}


def empty_hooks(tmp: Path, one_write: bool) -> tuple[Any, Path]:
    """An HTTP server whose hooks answer ``{}`` at once, and a settings file that installs them for
    PreToolUse and PostToolUse of Bash: what Claude Code itself spends on two hooks per call.
    ``one_write``: the answer's head and body in one write, on a socket without Nagle's algorithm (as the
    ledger's server answers); else as ``http.server`` answers by default, the head flushed, then the body:
    on a connection Claude Code keeps alive, the body waits for the ACK of the head, which the client
    delays (about 25 ms a hook, issue 42)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Empty(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = one_write

        def log_message(self, *a: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            if one_write:
                self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
                return
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Empty)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/hook"
    hook = {"matcher": "Bash", "hooks": [{"type": "http", "url": url}]}
    settings = tmp / f"empty-hooks-{int(one_write)}.json"
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [hook], "PostToolUse": [hook]}}))
    return httpd, settings


def claude_session(binary: str, tmp: Path, calls: int, ledger: str | None, tag: str) -> tuple[list[float], float]:
    """One session of ``calls`` Bash calls: each call's time inside claude (ms), and the session's wall
    time. ``ledger``: the hook transport of ``ledger-run claude``; ``empty`` or ``empty-two-writes``: two
    empty HTTP hooks (empty_hooks); None: claude alone."""
    repo = repo_at(tmp / f"repo-{tag}")
    fake = FakeMessages([("bash", "cat calc.py")] * calls + [("say", "Done.")])
    home = tmp / f"home-{tag}"
    home.mkdir()
    env = claude_env(os.environ, fake, home)
    env["LEDGER_CLAUDE_BIN"] = binary
    argv = ["-p", "--output-format", "stream-json", "--verbose", "--allowedTools=Bash", "read calc.py"]
    if ledger in ("empty", "empty-two-writes"):
        argv = [binary, "--settings", str(tmp / f"empty-hooks-{int(ledger == 'empty')}.json"), *argv]
    elif ledger:
        argv = [*hook_launcher(), "claude", "-w", str(repo), "-o", str(tmp / f"run-{tag}")]
        argv += ["--hook-transport", ledger, "--", "-p", "--output-format", "stream-json", "--verbose"]
        argv += ["--allowedTools=Bash", "read calc.py"]
    else:
        argv = [binary, *argv]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(argv, env=env, cwd=repo, capture_output=True, text=True, timeout=600)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"claude failed ({tag}): {p.stderr[-1500:]}")
        seen = tool_results(fake.requests[-1])
        if ledger in ("http", "command") and not seen.get("toolu_1_0", "").startswith("[ledger: same as"):
            raise RuntimeError(f"the ledger did not answer the repeated cat: {seen.get('toolu_1_0', '')[:120]!r}")
        times = fake.times
        gaps = [(times[k + 1][0] - times[k][1]) * 1e3 for k in range(min(calls, len(times) - 1))]
    finally:
        fake.close()
    return gaps, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=40, help="hook round trips of each kind")
    ap.add_argument("--calls", type=int, default=20, help="Bash calls per claude session")
    ap.add_argument("--repeat", type=int, default=3, help="claude sessions of each kind")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ledger-claude-bench-"))
    result: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "hooks": hook_round_trips(tmp, args.n),
    }
    binary = find_claude(None)
    if binary is not None:
        kinds = {
            "plain": None,
            "empty http hooks, two writes": "empty-two-writes",
            "empty http hooks": "empty",
            "ledger http": "http",
            "ledger command": "command",
        }
        servers = [empty_hooks(tmp, one_write)[0] for one_write in (False, True)]
        per: dict[str, list[float]] = {k: [] for k in kinds}
        walls: dict[str, list[float]] = {k: [] for k in kinds}
        for r in range(args.repeat):
            order = list(kinds) if r % 2 == 0 else list(reversed(kinds))
            for kind in order:
                gaps, wall = claude_session(binary, tmp, args.calls, kinds[kind], f"{kind.replace(' ', '-')}{r}")
                per[kind].extend(gaps)
                walls[kind].append(round(wall, 2))
        for httpd in servers:
            httpd.shutdown()
        result["claude"] = {
            "version": claude_version(binary),
            "pinned": CLAUDE_VERSION,
            "calls_per_session": args.calls,
            "sessions": args.repeat,
            "per_bash_call": {k: stats(v) for k, v in per.items()},
            "added_per_call_p50_ms": {
                k: round(pct(per[k], 0.5) - pct(per["plain"], 0.5), 2) for k in kinds if k != "plain"
            },
            "over_plain": {
                k: {
                    q: round(pct(per[k], f) / max(pct(per["plain"], f), 1e-9), 2)
                    for q, f in (("p50", 0.5), ("p95", 0.95))
                }
                for k in kinds
                if k != "plain"
            },
            "session_wall_s": walls,
        }
    else:
        result["claude"] = {"skipped": "no claude binary on PATH or in $LEDGER_CLAUDE_BIN"}
    shutil.rmtree(tmp, ignore_errors=True)
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Claude Code hooks (ms; hook round trips n={args.n})")
    for col in ("what", "p50", "p95", "n"):
        table.add_column(col, justify="right" if col != "what" else "left")
    for k, v in result["hooks"].items():
        table.add_row(k, str(v["p50_ms"]), str(v["p95_ms"]), str(v["n"]))
    c = result["claude"]
    for k, v in c.get("per_bash_call", {}).items():
        table.add_row(f"claude: a Bash call, {k}", str(v["p50_ms"]), str(v["p95_ms"]), str(v["n"]))
    Console().print(table)
    for k, v in c.get("added_per_call_p50_ms", {}).items():
        r = c["over_plain"][k]
        print(f"added per Bash call (p50), {k}: {v} ms ({r['p50']}x plain at the p50, {r['p95']}x at the p95)")
    import ledger_runtime

    code = Path(ledger_runtime.__file__).parent  # the commit of the code measured (PYTHONPATH: an earlier one)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=code).stdout
    result["commit"] = commit.strip()
    pythonpath = [f"PYTHONPATH={os.environ['PYTHONPATH']}"] if os.environ.get("PYTHONPATH") else []
    result["command"] = " ".join([*pythonpath, "python", "swebench_runs/bench/bench_claude_hooks.py", *sys.argv[1:]])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
