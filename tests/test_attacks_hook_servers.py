"""The hook servers (the Unix socket server of Codex's, Gemini's and OpenCode's hooks, and the HTTP one
of Claude Code's) under hostile local clients, on angles the earlier passes left: a first line that
the parser cannot take, and other faults of ours while reading a stranger. Real servers, a real
runtime, real hook processes."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from test_hook_channel import _codex_runs, _server

from ledger_runtime.inspection import load


def _stranger(path: str, data: bytes) -> bytes:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(path)
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        return s.recv(100)
    except OSError:
        return b""
    finally:
        s.close()


def test_a_first_line_nested_too_deep_does_not_end_the_socket_server(tmp_path: Path) -> None:
    """A first line of 4,000 '[' (no token needed) raised RecursionError in the thread that reads every
    first line: the thread died with a traceback, and no later hook of the run was answered."""
    repo, rt, hooks, server = _server(tmp_path)
    run_dir = tmp_path / "run"
    try:
        assert _stranger(server.socket_path, b"[" * 4000 + b"\n") == b""
        assert _stranger(server.socket_path, b'{"event": ' * 400 + b"\n") == b""
        t0 = time.monotonic()
        shown = _codex_runs(repo, server, run_dir, "c0", "echo real 0")
        assert shown == "real 0\n" and time.monotonic() - t0 < 10
    finally:
        server.close()
        rt.close()
    assert [a.command for a in load(run_dir).state.attempts] == ["echo real 0"]
