"""Nobody can silence Claude Code's hooks (issue 37 item 4). The HTTP hook server's deadline for a
request's line and headers is a deadline (5 s from the connection, not per read: a byte every 2 s does
not keep a connection), another user's connection is closed before it is read, a request without the
token is refused by the door without a thread, a slot or the runtime's lock, and what it drops or
refuses is said in faults.log. The whole of it: another uid floods the port with slow connections
beside a real claude session (the pinned binary against tests/fake_messages.py), whose hooks are all
answered and whose BLOCK holds (before: 0 of 20 hooks served, the reset ran, nothing recorded)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import CALC_PROJECT, make_repo

from ledger_runtime import HttpHookServer, hook_launcher

TOKEN = "0123456789abcdef0123456789abcdef"
OTHER_UID = 12346
# the flood, run by another user: keep N connections open, each sending a byte every 2 s and never
# the end of its headers; a connection the server closes is opened again at once. Says "flooding" once
# all are open, then twice a second how many connections it made and how many the server closed.
FLOOD = r"""
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])

def connect():
    while True:
        try:
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            c.setblocking(False)
            c.send(b"P")
            return c
        except OSError:
            time.sleep(0.01)

conns = [connect() for _ in range(n)]
last = [time.time()] * n
made, closed, said = n, 0, 0.0
print("flooding", flush=True)
while True:
    now = time.time()
    for i, c in enumerate(conns):
        try:
            dead = c.recv(64) == b""
        except BlockingIOError:
            dead = False
        except OSError:
            dead = True
        if dead:  # the server closed it: open another at once
            closed += 1
            c.close()
            conns[i], last[i] = connect(), now
            made += 1
        elif now - last[i] >= 2:
            try:
                c.send(b"O")
            except OSError:
                pass
            last[i] = now
    if now - said >= 0.5:
        print(f"made {made} closed {closed}", flush=True)
        said = now
    time.sleep(0.01)
"""


def as_another_user() -> str | None:
    """Why a flood from another uid cannot be run here (None: it can)."""
    if os.geteuid() != 0:
        return "not root: no other uid to flood from (run as root, as CI does)"
    if not os.path.exists("/usr/bin/python3"):
        return "no /usr/bin/python3 for the other user's flood"
    return None


class Flood:
    """Another user's slow connections to ``port`` (FLOOD), until ``stop()``."""

    def __init__(self, port: int, n: int):
        self.p = subprocess.Popen(
            ["/usr/bin/python3", "-S", "-c", FLOOD, str(port), str(n)],
            user=OTHER_UID,
            group=OTHER_UID,
            extra_groups=[],
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
        )
        self.lines: list[str] = []
        self.flooding = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.p.stdout:  # type: ignore[union-attr]
            self.lines.append(line.strip())
            if line.startswith("flooding"):
                self.flooding.set()

    def stop(self) -> None:
        self.p.kill()
        self.p.wait()


def post(port: int, body: bytes, headers: dict[str, str], path: str = "/hook/Stop") -> int:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("POST", path, body=body, headers=headers)
        return c.getresponse().status
    finally:
        c.close()


@pytest.fixture
def served():
    faults: list[str] = []
    release = threading.Event()
    inside = threading.Event()

    def handler(event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        if payload.get("slow"):
            inside.set()
            release.wait(60)
        return {"ok": event}

    server = HttpHookServer(handler, lambda where, e: faults.append(f"{where}: {e}"), TOKEN)
    yield server, faults, inside, release
    release.set()
    server.close()


@pytest.mark.slow
def test_a_byte_every_second_does_not_keep_a_connection_past_its_deadline(served) -> None:
    server, faults, _, _ = served
    c = socket.create_connection(("127.0.0.1", server.port))
    sent = 0
    try:
        for _ in range(15):  # 15 s at a byte a second; the deadline is 5 s from the connection
            c.send(b"P")
            sent += 1
            time.sleep(1)
    except OSError:
        pass
    try:
        closed = c.recv(1) == b""
    except OSError:
        closed = True
    c.close()
    assert closed and sent < 15, f"the connection was kept for {sent} bytes"
    assert server.counts.slow == 1
    server.close()
    assert any("1 dropped: headers not whole within 5 s" in f for f in faults), faults


def test_requests_without_the_token_take_no_slot_and_no_lock(served) -> None:
    """70 requests with a wrong token while one event holds the runtime's lock: each is refused at once
    (before: each waited for the lock in a slot, and the real hook after them got 503)."""
    server, faults, inside, release = served
    auth = {"Authorization": f"Bearer {TOKEN}"}
    slow = threading.Thread(target=post, args=(server.port, b'{"slow": 1}', auth))
    slow.start()
    assert inside.wait(30)
    codes: list[int] = []

    def stranger() -> None:
        codes.append(post(server.port, b"{}", {"Authorization": "Bearer " + "f" * 32}))

    strangers = [threading.Thread(target=stranger) for _ in range(70)]
    for t in strangers:
        t.start()
    for t in strangers:
        t.join(60)
    assert codes == [403] * 70 and inside.is_set() and slow.is_alive(), "refused while the slow event still ran"
    real: list[int] = []
    hook = threading.Thread(target=lambda: real.append(post(server.port, b"{}", auth)))
    hook.start()
    release.set()
    hook.join(60)
    slow.join(60)
    assert real == [200]


def test_another_users_connections_are_closed_before_they_are_read(served) -> None:
    why = as_another_user()
    if why:
        pytest.skip(why)
    server, faults, _, _ = served
    flood = Flood(server.port, 140)
    try:
        assert flood.flooding.wait(60), flood.lines
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert [post(server.port, b"{}", auth) for _ in range(20)] == [200] * 20
        deadline = time.monotonic() + 60
        while server.counts.strangers < 140 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.counts.strangers >= 140 and not server.counts.crowded
    finally:
        flood.stop()
    server.close()
    assert any("closed: another user's" in f for f in faults), faults


CLAUDE = None
try:
    from ledger_adapters.claude.cli import CLAUDE_VERSION, find_claude

    CLAUDE = find_claude(None)
except ImportError:  # pragma: no cover
    CLAUDE_VERSION = "?"


@pytest.mark.agent
def test_a_real_claude_session_beside_another_users_flood_is_answered_and_its_block_holds(tmp_path: Path) -> None:
    if CLAUDE is None:
        if os.environ.get("LEDGER_REQUIRE_CLAUDE"):
            raise RuntimeError("LEDGER_REQUIRE_CLAUDE is set but no claude binary was found")
        pytest.skip(f"no claude binary (npm install -g @anthropic-ai/claude-code@{CLAUDE_VERSION})")
    why = as_another_user()
    if why:
        pytest.skip(why)
    from fake_messages import FakeMessages, claude_env

    repo = make_repo(tmp_path / "repo", CALC_PROJECT)
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")  # work a reset would throw away
    steps = [("bash", f"echo step {i}") for i in range(4)] + [("bash", "git reset --hard"), ("say", "done")]
    fake = FakeMessages(steps)
    (tmp_path / "home").mkdir()
    env = claude_env(os.environ, fake, tmp_path / "home")
    env["LEDGER_CLAUDE_BIN"] = CLAUDE
    run_dir = tmp_path / "run"
    floods: list[Flood] = []

    def before_first_call(turn: int) -> None:
        """The flood starts once the run's server listens, and is in full before the model's first answer.
        The model's second answer comes after 6 s: longer than a server may keep an idle connection
        (5 s before), so claude connects again, beside the flood, for the hooks after it."""
        if turn == 1:
            time.sleep(6)
        if turn:
            return
        settings = json.loads((run_dir / "claude" / "settings.json").read_text())
        url = settings["hooks"]["Stop"][-1]["hooks"][0]["url"]
        floods.append(Flood(int(url.split(":")[2].split("/")[0]), 140))
        assert floods[0].flooding.wait(60), floods[0].lines  # open: every hook from here on has them beside it

    fake.on_request = before_first_call
    argv = [*hook_launcher(), "claude", "-w", str(repo), "-o", str(run_dir), "--"]
    argv += ["-p", "--output-format", "stream-json", "--verbose", "--allowedTools=Bash", "go"]
    try:
        p = subprocess.run(argv, env=env, cwd=repo, capture_output=True, text=True, timeout=300)
    finally:
        for f in floods:
            f.stop()
        fake.close()
    assert p.returncode == 0, p.stderr[-3000:]
    closed = [int(line.split()[3]) for line in floods[0].lines if line.startswith("made")] if floods else []
    assert closed and closed[-1] >= 140, ("the flood ran beside the session, and was closed each time", closed)
    from fake_messages import tool_results

    from ledger_runtime.inspection import load
    from ledger_runtime.records import VerdictKind

    seen = tool_results(fake.requests[-1])
    assert seen["toolu_4_0"].startswith("PreToolUse:Bash hook error: [ledger] BLOCK by policy destructive"), seen
    assert (repo / "calc.py").read_text().endswith("a + b\n"), "the reset did not run"
    attempts = [(a.command, a.verdict.kind) for a in load(run_dir).state.attempts]
    assert attempts == [
        *[(f"echo step {i}", VerdictKind.RUN) for i in range(4)],
        ("git reset --hard", VerdictKind.BLOCK),
    ], "every hook was answered: every call recorded"
    faults = (run_dir / "faults.log").read_text()
    assert "closed: another user's" in faults, faults
    assert "serving a hook" not in faults, faults
