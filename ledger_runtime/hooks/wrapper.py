"""``ledger-run wrap``: what an agent that runs commands itself (Codex) runs in place of each shell
command, so the model gets the ledger's answer instead of the raw output.

Codex's PostToolUse hook cannot replace an output, but PreToolUse can replace the command. The
ledger replaces it with ``ledger-run wrap --socket S --call ID -- COMMAND``: this process runs the
original command with the shell (stdin, environment and working directory are Codex's), collects its
output (stdout and stderr together), asks the run's hook server for the answer to it (event
``Answer``: the server records the attempt and builds the answer from this fresh output), prints
the answer, and exits with the command's own exit code.

It never changes what the command does, and never blocks the agent for a fault of ours:

- a command still running after ``--wait`` seconds (a server, a long test the model polls) gets
  its output so far and the rest as it comes, unchanged (the server records it as shown raw);
- an output over ``MAX_OUTPUT`` bytes is passed through the same way;
- when the server cannot be reached or answers nonsense, the raw output is printed and the fault
  goes to the run directory's ``faults.log``.

Like the hook client, it imports only the standard library (entry.py dispatches here first).
"""

from __future__ import annotations

import base64
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time

try:
    from ledger_runtime.hooks.client import DEFAULT_TIMEOUT_S, ask, log_fault
except ImportError:  # run by path (fasthook.py): this directory is on sys.path
    from client import DEFAULT_TIMEOUT_S, ask, log_fault  # type: ignore[no-redef]

DEFAULT_WAIT_S = 8.0  # Codex's exec_command yields after 10 s by default: answer before that
MAX_OUTPUT = 8 * 1024 * 1024
USAGE = "usage: ledger-run wrap --socket PATH --call ID [--token T] [--run-dir DIR] [--wait SECONDS] -- COMMAND"


def _args(argv: list[str]) -> dict[str, str] | None:
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out["command"] = (
                " ".join(argv[i + 1 :]) if len(argv) > i + 2 else (argv[i + 1] if i + 1 < len(argv) else "")
            )
            return out
        if a in ("--socket", "--call", "--run-dir", "--wait", "--token") and i + 1 < len(argv):
            out[a[2:]] = argv[i + 1]
            i += 2
            continue
        return None
    return None


def shell() -> str:
    """The shell to run the command with: bash where there is one (as Codex's own shell tool)."""
    for candidate in (os.environ.get("SHELL"), shutil.which("bash"), "/bin/sh"):
        if candidate and os.path.basename(candidate) in ("bash", "zsh", "sh", "dash") and os.access(candidate, os.X_OK):
            return candidate
    return "/bin/sh"


def exit_code(rc: int) -> int:
    return 128 - rc if rc < 0 else rc & 0xFF  # killed by a signal: as a shell reports it


def main(argv: list[str]) -> int:
    args = _args(argv)
    if args is None or "command" not in args:
        print(USAGE, file=sys.stderr)
        return 2
    command = args["command"]
    run_dir = args.get("run-dir")
    try:
        wait = float(args.get("wait") or DEFAULT_WAIT_S)
    except ValueError:
        wait = DEFAULT_WAIT_S
    started = time.perf_counter()
    try:
        proc = subprocess.Popen([shell(), "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as e:
        print(f"{shell()}: {e}", file=sys.stderr)
        return 127
    previous = {s: signal.signal(s, lambda n, f: proc.send_signal(n)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _run(proc, command, args, run_dir, wait, started)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _run(
    proc: subprocess.Popen, command: str, args: dict[str, str], run_dir: str | None, wait: float, started: float
) -> int:
    assert proc.stdout is not None
    out = sys.stdout.buffer
    buf = bytearray()
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + wait
    passthrough = False
    fd = proc.stdout.fileno()
    while True:
        left = deadline - time.monotonic()
        if not passthrough and (left <= 0 or len(buf) > MAX_OUTPUT):
            passthrough = True  # still running, or too much: the output so far, then the rest as it comes
            out.write(bytes(buf))
            out.flush()
        if not sel.select(timeout=None if passthrough else max(left, 0.01)):
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        if passthrough:
            out.write(chunk)
            out.flush()
            if len(buf) <= MAX_OUTPUT:
                buf += chunk
        else:
            buf += chunk
    sel.close()
    rc = exit_code(proc.wait())
    payload = {
        "tool_use_id": args.get("call"),
        "exit_code": rc,
        "output_b64": base64.b64encode(bytes(buf)).decode(),
        "complete": len(buf) <= MAX_OUTPUT,
        "shown_raw": passthrough,
        "elapsed_s": round(time.perf_counter() - started, 6),
    }
    text = _answer(args.get("socket"), run_dir, payload, command, args.get("token"))
    if not passthrough:
        out.write(text.encode("utf-8", "surrogateescape") if text is not None else bytes(buf))
        out.flush()
    return rc


def _answer(sock: str | None, run_dir: str | None, payload: dict, command: str, token: str | None = None) -> str | None:
    """The server's answer text; None (print the raw output) on any fault, which is logged."""
    if not sock:
        log_fault(run_dir, "Answer", f"no hook server socket given for `{command[:80]}`")
        return None
    try:
        raw = ask(sock, "Answer", json.dumps(payload).encode(), DEFAULT_TIMEOUT_S, token)
        if not raw.strip():
            return None  # the server kept the output as it is (or had nothing to say)
        data = json.loads(raw)
        text = data.get("text") if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise ValueError(f"no answer text in {raw[:80]!r}")
        return text
    except (OSError, ValueError) as e:
        log_fault(run_dir, "Answer", f"hook server {sock} gave no answer for `{command[:80]}`: {e}")
        return None
