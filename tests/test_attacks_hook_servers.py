"""The hook servers (the Unix socket server of Codex's, Gemini's and OpenCode's hooks, and the HTTP one
of Claude Code's) under hostile local clients, on angles the earlier passes left: a first line that
the parser cannot take, and other faults of ours while reading a stranger. Real servers, a real
runtime, real hook processes."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from test_hook_chain import HELD_LIMIT_S, Served, _held_rule_config, _send
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
        # a token that is not ASCII: secrets.compare_digest raised TypeError in the same thread
        assert _stranger(server.socket_path, '{"event": "PreToolUse", "token": "\u00e9"}\n{}'.encode()) == b""
        assert _stranger(server.socket_path, '{"event": "Begin", "token": "\u00e9", "call": "c0"}\n{}'.encode()) == b""
        t0 = time.monotonic()
        shown = _codex_runs(repo, server, run_dir, "c0", "echo real 0")
        assert shown == "real 0\n" and time.monotonic() - t0 < 10
    finally:
        server.close()
        rt.close()
    assert [a.command for a in load(run_dir).state.attempts] == ["echo real 0"]
    faults = run_dir / "faults.log"
    said = faults.read_text() if faults.exists() else ""
    assert "reading a hook call" not in said and "TypeError" not in said, "a stranger is dropped, not a fault of ours"


@pytest.mark.usefixtures("hook_client")
def test_a_stranger_dropped_while_an_event_is_slow_does_not_hold_up_a_wrappers_begin(tmp_path: Path) -> None:
    """The door that reads every first line said its dropped connections under the runtime's lock: one
    stranger (no token) dropped while an event ran long, and the door waited for that event to end, so
    a wrapper's Begin, answered by the door, waited too (the rule's whole time limit, 30 s)."""
    import custom_rules

    custom_rules.HELD_RELEASE.set()
    s = Served(tmp_path, _held_rule_config())
    try:
        pre = {"tool_name": "Bash", "cwd": str(s.repo), "tool_use_id": "c1", "tool_input": {"command": "echo one"}}
        wrapped = s.hook("PreToolUse", pre)["hookSpecificOutput"]["updatedInput"]["command"]
        secret = wrapped.split("--token ")[1].split()[0]
        custom_rules.HELD_BEGUN.clear()
        custom_rules.HELD_RELEASE.clear()
        slow = threading.Thread(
            target=s.hook, args=("PreToolUse", {**pre, "tool_use_id": "c2", "tool_input": {"command": "echo two"}})
        )
        slow.start()
        assert custom_rules.HELD_BEGUN.wait(120), "the slow event reached the rule"
        dropped = s.server.dropped
        assert _stranger(s.server.socket_path, b'{"event": "PreToolUse"}\n{}') == b""
        deadline = time.monotonic() + 10
        while s.server.dropped == dropped and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # the door's round ends with what it says of the drop
        t0 = time.monotonic()
        begun = _send(s.server.socket_path, "Begin", secret, "c1", {"tool_use_id": "c1", "key": "k" * 32})
        took = time.monotonic() - t0
        still_held = slow.is_alive() and not custom_rules.HELD_RELEASE.is_set()
        custom_rules.HELD_RELEASE.set()
        slow.join()
        assert begun.strip() == b'{"ok": true}', begun
        assert still_held and took < HELD_LIMIT_S / 3, f"the Begin waited {took:.1f} s, for the slow event"
    finally:
        custom_rules.HELD_RELEASE.set()
        s.close()
    faults = s.run_dir / "faults.log"
    deadline = time.monotonic() + 10  # said by a thread of its own, once the slow event let the lock go
    while not (faults.exists() and "1 connection(s) dropped" in faults.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "1 connection(s) dropped before a call" in faults.read_text()


def test_a_fault_while_reading_strangers_is_said_once_a_while_not_once_a_stranger(tmp_path: Path) -> None:
    """A fault of ours on a first line (here an ``authorize`` that breaks on one token) drops that
    connection only; a stranger repeating it 50 times cost 50 lines of faults and 50 threads. Every
    dropped connection is said by the end, those of the last 10 s too (they were never said)."""
    import re

    from ledger_runtime.hooks.server import HookServer

    faults: list[str] = []
    said: list[str] = []

    def authorize(event: str, token: str | None, call: str | None) -> bool:
        if token == "boom":
            raise RuntimeError("a fault of ours")
        return token == "tok"

    def on_fault(where: str, e: BaseException) -> None:
        faults.append(where)
        said.append(str(e))

    server = HookServer(lambda e, p: {"ok": e}, on_fault, authorize=authorize)
    try:
        for _ in range(50):
            assert _stranger(server.socket_path, b'{"event": "X", "token": "boom"}\n{}') == b""
        assert _stranger(server.socket_path, b'{"event": "X", "token": "tok"}\n{}') == b'{"ok": "X"}\n'
        time.sleep(0.5)
    finally:
        server.close()
    assert faults.count("reading a hook call") == 1 and server.dropped == 50, faults
    assert sum(int(m.group(1)) for m in (re.match(r"(\d+) connection\(s\) dropped", x) for x in said) if m) == 50


def test_a_fault_said_outside_its_except_block_keeps_its_own_trace(tmp_path: Path) -> None:
    """The hook server says faults from threads of their own, outside the block that caught them: the
    log's trace was "NoneType: None" (traceback.format_exc of no exception being handled)."""
    import json

    from ledger_runtime.ledger.faults import FaultLog
    from ledger_runtime.ledger.redact import Redactor

    def broken() -> None:
        raise RuntimeError("a fault of ours")

    try:
        broken()
    except RuntimeError as e:
        caught = e
    log = FaultLog(tmp_path, Redactor.off())
    log.add("reading a hook call", caught)
    log.add("serving hooks", ConnectionError("3 connection(s) dropped"))
    first, second = (json.loads(line) for line in (tmp_path / "faults.log").read_text().splitlines())
    assert "in broken" in first["trace"] and first["trace"].endswith("RuntimeError: a fault of ours\n")
    assert second["trace"] == "ConnectionError: 3 connection(s) dropped\n"


def test_a_fault_of_another_kind_is_said_though_a_strangers_was_said_a_moment_ago(tmp_path: Path) -> None:
    """Faults while reading first lines were said once in 10 s whatever they were: a stranger repeating
    one fault hid any other fault of ours in those 10 s (the first of each kind is said, as it is)."""
    from ledger_runtime.hooks.server import HookServer

    faults: list[str] = []

    def authorize(event: str, token: str | None, call: str | None) -> bool:
        if token == "boom":
            raise RuntimeError("a stranger's fault")
        if token == "bang":
            raise KeyError("another fault of ours")
        return token == "tok"

    server = HookServer(lambda e, p: {"ok": e}, lambda where, e: faults.append(f"{where}: {e!r}"), authorize=authorize)
    try:
        for _ in range(20):
            assert _stranger(server.socket_path, b'{"event": "X", "token": "boom"}\n{}') == b""
        assert _stranger(server.socket_path, b'{"event": "X", "token": "bang"}\n{}') == b""
        assert _stranger(server.socket_path, b'{"event": "X", "token": "bang"}\n{}') == b""
    finally:
        server.close()
    reading = [f for f in faults if f.startswith("reading a hook call")]
    assert len(reading) == 2 and "stranger's fault" in reading[0] and "another fault" in reading[1], faults


def test_what_the_door_says_is_said_before_close_returns(tmp_path: Path) -> None:
    """The door says faults from threads of their own, which wait for the lock a slow event holds; close()
    did not wait for them, so a fault was said after the run had ended (in faults.log past the run's
    summary, and into a closed ledger), and a thread of the server outlived close()."""
    from ledger_runtime.hooks.server import HookServer

    said: list[str] = []
    server = HookServer(lambda e, p: {"ok": e}, lambda where, e: said.append(str(e)), authorize=lambda *a: False)
    before = set(threading.enumerate())
    holding, release = threading.Event(), threading.Event()

    def slow_event() -> None:  # another holder of the runtime's lock, as a slow event is
        with server.lock:
            holding.set()
            release.wait(3)

    holder = threading.Thread(target=slow_event)
    holder.start()
    holding.wait(5)
    try:
        assert _stranger(server.socket_path, b'{"event": "X", "token": "no"}\n{}') == b""
        deadline = time.monotonic() + 5
        while server.dropped == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.7)  # the door's round that says the drop
        threading.Timer(1.0, release.set).start()
    finally:
        server.close()
    assert said == ["1 connection(s) dropped before a call (no first line in time, no token, too many)"], said
    holder.join()
    left = [t for t in set(threading.enumerate()) - before if t.is_alive() and not isinstance(t, threading.Timer)]
    assert not left, left


def test_no_thread_to_be_had_drops_that_call_and_the_server_goes_on(tmp_path: Path) -> None:
    """A call's thread that cannot start (the process at its limit of threads; here a stack no thread can
    have) raised out of the fault's own saying, whose thread could not start either: the thread reading
    every first line died, and no later hook of the run was answered; close() then raised joining a thread
    that never started. Now that call is dropped (its client fails open, its command runs) and said at
    close, and the next call is answered."""
    from ledger_runtime.hooks.server import HookServer

    said: list[str] = []
    server = HookServer(lambda e, p: {"ok": e}, lambda where, e: said.append(str(e)), authorize=lambda *a: True)
    try:
        threading.stack_size(1 << 44)  # no thread starts now: as at the process's limit
        try:
            assert _stranger(server.socket_path, b'{"event": "X", "token": "t"}\n{}') == b""
        finally:
            threading.stack_size(0)
        assert _stranger(server.socket_path, b'{"event": "X", "token": "t"}\n{}') == b'{"ok": "X"}\n'
    finally:
        server.close()
    assert server.dropped == 1 and any("1 connection(s) dropped" in s for s in said), said
