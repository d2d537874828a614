"""The hook server's HTTP face (ledger_runtime/hooks/http.py), which Claude Code's ``http`` hooks POST
to: a real server on loopback and real HTTP requests. Strangers (no token, the wrong path, a body too
large) are refused before the handler sees anything; a fault of the handler is an empty answer, the
agent goes on."""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from typing import Any

import pytest

from ledger_runtime import HttpHookServer

TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def served():
    calls: list[tuple[str, dict[str, Any]]] = []
    faults: list[str] = []

    def handler(event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        calls.append((event, payload))
        if payload.get("boom"):
            raise RuntimeError("a fault of ours")
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": "ok"}} if payload else None

    server = HttpHookServer(handler, lambda where, e: faults.append(f"{where}: {e}"), TOKEN)
    yield server, calls, faults
    server.close()


def post(server: HttpHookServer, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        c.request("POST", path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        c.close()


def test_an_event_with_the_token_is_answered(served) -> None:
    server, calls, faults = served
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    assert server.url("PreToolUse") == f"http://127.0.0.1:{server.port}/hook/PreToolUse"
    status, answer = post(server, "/hook/PreToolUse", json.dumps({"tool_name": "Bash"}).encode(), auth)
    assert status == 200 and answer["hookSpecificOutput"]["additionalContext"] == "ok"
    assert post(server, "/hook/Stop", b"{}", auth) == (200, {})  # no answer: an empty one
    assert calls == [("PreToolUse", {"tool_name": "Bash"}), ("Stop", {})] and not faults


def test_strangers_are_refused_before_the_handler(served) -> None:
    server, calls, faults = served
    body = b'{"tool_name": "Bash"}'
    assert post(server, "/hook/PreToolUse", body, {})[0] == 403
    assert post(server, "/hook/PreToolUse", body, {"Authorization": "Bearer " + "0" * 32})[0] == 403
    assert post(server, "/hook/../x", body, {"Authorization": f"Bearer {TOKEN}"})[0] == 403
    big = {"Authorization": f"Bearer {TOKEN}", "Content-Length": str(64 * 1024 * 1024)}
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    c.putrequest("POST", "/hook/PreToolUse")
    for k, v in big.items():
        c.putheader(k, v)
    c.endheaders()  # a body it announces as 64 MB: refused without being read
    assert c.getresponse().status == 413
    c.close()
    assert not calls and server.refused == 4
    server.close()  # what was not said yet (one line per 10 s) is said when it closes
    said = [int(m) for f in faults for m in re.findall(r"(\d+) refused", f)]
    assert sum(said) == 4, f"strangers are counted in the faults: {faults}"


def test_a_fault_of_the_handler_is_an_empty_answer(served) -> None:
    server, calls, faults = served
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert post(server, "/hook/PostToolUse", b'{"boom": 1}', auth) == (200, {})
    assert post(server, "/hook/PostToolUse", b"not json", auth) == (200, {})
    assert post(server, "/hook/PostToolUse", b"[1]", auth) == (200, {})
    assert [f.split(":")[0] for f in faults] == ["serving a hook"] * 3
    assert "payload is not JSON" in faults[1] and "not a JSON object" in faults[2]


def test_one_event_at_a_time_reaches_the_handler(served) -> None:
    server, calls, faults = served
    inside = []
    lock = threading.Lock()

    def slow(event: str, payload: dict[str, Any]) -> None:
        with lock:
            inside.append(1)
            assert len(inside) == 1
        threading.Event().wait(0.02)
        with lock:
            inside.pop()

    server.handler = slow
    auth = {"Authorization": f"Bearer {TOKEN}"}
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda: results.append(post(server, "/hook/PreToolUse", b"{}", auth)[0]))
        for _ in range(12)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [200] * 12 and not faults


def test_a_flood_of_idle_connections_holds_no_more_than_its_share(served) -> None:
    import socket

    from ledger_runtime.hooks import http as hooks_http

    server, calls, faults = served
    idle = []
    for _ in range(hooks_http.MAX_CONNECTIONS + 20):  # connections that never send a request
        c = socket.create_connection(("127.0.0.1", server.port))
        idle.append(c)
    deadline = time.monotonic() + 30  # the server takes them in its own time on a loaded machine
    while server.counts.crowded < 20 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.counts.crowded >= 20, "past the bound the longest-waiting connection is closed"
    for c in idle:
        c.close()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    deadline = time.monotonic() + 15  # the idle ones time out or go; the hooks are served again
    while time.monotonic() < deadline:
        try:
            if post(server, "/hook/Stop", b"{}", auth)[0] == 200:
                break
        except OSError:
            time.sleep(0.2)
    else:
        raise AssertionError("hooks are not served again after the flood")


def test_every_answer_is_one_write_that_nagle_cannot_hold_back(served, monkeypatch) -> None:
    """Claude Code keeps its connection and delays its ACKs: an answer whose body was written after its
    head waited for the ACK of the head (Nagle's algorithm), about 25 ms a hook (issue 42). Each answer,
    a hook's and a refusal's, is one write of head and body, on a socket with TCP_NODELAY."""
    import socket

    server, calls, faults = served
    writes: list[tuple[bytes, int]] = []  # what each write of the server sent, and TCP_NODELAY then
    for name in ("send", "sendall"):
        original = getattr(socket.socket, name)

        def recorded(self, data, *args, original=original):
            if self.getsockname()[1] == server.port:  # the server's end of a connection
                writes.append((bytes(data), self.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)))
            return original(self, data, *args)

        monkeypatch.setattr(socket.socket, name, recorded)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert post(server, "/hook/PreToolUse", b'{"tool_name": "Bash"}', auth)[0] == 200
    assert post(server, "/hook/PreToolUse", b"{}", {})[0] == 403
    assert [w.split(b"\r\n", 1)[0] for w, _ in writes] == [b"HTTP/1.1 200 OK", b"HTTP/1.1 403 Forbidden"]
    for data, no_delay in writes:
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"content-length: (\d+)", head)[1])
        assert len(body) == length and body.startswith(b"{") and no_delay, data
