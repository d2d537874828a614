"""The Codex hook chain as ``ledger-run codex`` serves it (``CodexHooks.serve``) and as Codex runs its
hook commands (``SHELL -c``): a PostToolUse hook that starts no interpreter when the ledger needs
nothing of it, and asks the server whenever it does (a command no wrapper recorded, news for the
model, a wrapper or hook that could not reach the server); and events served side by side, so that a
slow one holds up no other. Real hook and wrapper processes, a real server and runtime, real commands
in a git repository."""

from __future__ import annotations

import base64
import json
import math
import os
import subprocess
import threading
import time
import tomllib
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_adapters.codex.cli import fast_launcher, hook_overrides
from ledger_adapters.codex.hooks import CodexHooks
from ledger_adapters.codex.rollout import output_difference
from ledger_runtime.config import LedgerConfig
from ledger_runtime.inspection import load
from ledger_runtime.runtime import LedgerRuntime

TOKEN = "t0k3n"
BASH = "/bin/bash"
pytestmark = pytest.mark.usefixtures("hook_client")  # every test with each client: the compiled one, the Python one


class Served:
    """A runtime served as ``ledger-run codex`` serves it, and the hook commands Codex would run."""

    def __init__(self, tmp_path: Path, config: LedgerConfig | None = None, shell: str = BASH):
        self.repo = make_repo(tmp_path / "r", {"a.txt": "alpha\n" * 30, "b.txt": "beta\n"})
        self.run_dir = tmp_path / "run"
        self.rt = LedgerRuntime(self.repo, self.run_dir, config or LedgerConfig())
        self.hooks = CodexHooks(self.rt, wrap_launcher=fast_launcher(), token=TOKEN)
        self.server = self.hooks.serve()
        args = hook_overrides(
            fast_launcher(),
            self.server.socket_path,
            self.run_dir,
            {},
            token_file=self.server.keep_token(TOKEN),
            flags=self.hooks.flag_paths,
            shell=shell,
        )
        self.commands = {
            a.split("=", 1)[0].removeprefix("hooks."): tomllib.loads("v = " + a.split("=", 1)[1])["v"][-1]["hooks"][0][
                "command"
            ]
            for a in args[1::2]
        }

    def hook(self, event: str, payload: dict) -> dict | None:
        """The hook as Codex runs it: its command in the user's shell, the event's JSON on stdin."""
        p = subprocess.run(
            [BASH, "-c", self.commands[event]],
            input=json.dumps({"hook_event_name": event, **payload}).encode(),
            capture_output=True,
            timeout=60,
        )
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout) if p.stdout.strip() else None

    def call(self, call: str, command: str, **extra) -> tuple[str, dict | None]:
        """One shell call: PreToolUse, the command Codex gets back run as Codex runs it, PostToolUse.
        What the model is shown, and what the PostToolUse hook answered."""
        pre = {"tool_name": "Bash", "cwd": str(self.repo), "tool_use_id": call, "tool_input": {"command": command}}
        answer = self.hook("PreToolUse", {**pre, **extra})
        run = answer["hookSpecificOutput"]["updatedInput"]["command"] if answer else command
        p = subprocess.run([BASH, "-lc", run], cwd=self.repo, capture_output=True, text=True, timeout=60)
        shown = p.stdout + p.stderr
        return shown, self.hook("PostToolUse", {**pre, **extra, "tool_response": shown})

    def close(self) -> None:
        self.server.close()
        self.rt.close()


def test_the_post_hook_asks_the_server_only_when_the_ledger_needs_it(tmp_path: Path) -> None:
    """A wrapped command whose record made no news: its PostToolUse hook never reaches the server
    (no interpreter starts). A change the model was not shown: the PostToolUse after the command that
    found it asks, and the note reaches the model there."""
    s = Served(tmp_path, LedgerConfig().with_(view_share=math.inf))
    try:
        shown, post = s.call("c1", "cat a.txt")
        assert shown == "alpha\n" * 30
        assert post is not None, "the first note (the policies in force) came with the first PostToolUse"
        handled = s.server.handled
        shown, post = s.call("c2", "cat b.txt")
        assert shown == "beta\n" and post is None
        assert s.server.handled == handled + 3, "PreToolUse, Begin, Answer: the PostToolUse hook did not ask"
        assert not os.path.exists(s.hooks.flag_paths["post"])
        (s.repo / "a.txt").write_text("changed behind the model's back\n")  # news: the model saw a.txt
        shown, post = s.call("c3", "touch c.txt")
        assert post is not None, "the change is news: the PostToolUse hook asked, and got the note"
        assert "a.txt" in post["hookSpecificOutput"]["additionalContext"]
        handled = s.server.handled
        shown, post = s.call("c4", "cat b.txt")
        assert post is None and s.server.handled == handled + 3, "told once: nothing more to ask"
    finally:
        s.close()
    assert [a.command for a in load(s.run_dir).state.attempts] == ["cat a.txt", "cat b.txt", "touch c.txt", "cat b.txt"]


def test_a_command_no_wrapper_records_is_recorded_at_its_post_hook(tmp_path: Path) -> None:
    """A call that is not wrapped (a terminal's, ``tty: true``) is recorded from its PostToolUse, and a
    wrapper that cannot reach the server sets the fault flag, so its call is recorded there too."""
    rollout = tmp_path / "rollout.jsonl"
    args = {"cmd": "echo in a terminal", "tty": True}
    line = {
        "type": "response_item",
        "payload": {"type": "function_call", "call_id": "t1", "arguments": json.dumps(args)},
    }
    rollout.write_text(json.dumps(line) + "\n")
    s = Served(tmp_path)
    try:
        shown, post = s.call("t1", "echo in a terminal", transcript_path=str(rollout))
        assert shown == "in a terminal\n"
        assert [a.command for a in s.rt.state.attempts] == ["echo in a terminal"], "recorded at its PostToolUse"
        # a wrapper whose Begin the server refuses (its secret spent): the output as it is, the fault flag set
        pre = {"tool_name": "Bash", "cwd": str(s.repo), "tool_use_id": "w1", "tool_input": {"command": "echo w"}}
        wrapped = s.hook("PreToolUse", pre)["hookSpecificOutput"]["updatedInput"]["command"]
        s.hooks.call_tokens.pop("w1")  # as if another process had traded the call's secret first
        shown = subprocess.run([BASH, "-lc", wrapped], cwd=s.repo, capture_output=True, text=True).stdout
        assert shown == "w\n" and os.path.exists(s.hooks.flag_paths["fault"])
        assert s.hook("PostToolUse", {**pre, "tool_response": shown}) is None
        assert [a.command for a in s.rt.state.attempts] == ["echo in a terminal", "echo w"]
        # the flag is kept a while (a call whose PreToolUse could not ask may still be running), then
        # cleared by the first PostToolUse that finds every call recorded
        fault = s.hooks.flag_paths["fault"]
        assert os.path.exists(fault)
        os.utime(fault, (time.time() - 600, time.time() - 600))
        shown, post = s.call("c1", "echo one")
        # cleared after the PostToolUse's answer, off the hook's path: the client may read it first
        deadline = time.monotonic() + 10
        while os.path.exists(fault) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not os.path.exists(fault), "every call recorded, the flag old: cleared"
        handled = s.server.handled
        shown, post = s.call("c2", "echo fast")
        assert shown == "fast\n" and s.rt.state.attempts[-1].command == "echo fast"
        assert s.server.handled == handled + 3, "the PostToolUse hook did not ask"
    finally:
        s.close()


def test_a_hook_that_cannot_reach_the_server_sets_the_fault_flag(tmp_path: Path) -> None:
    """The PreToolUse hook finds no server (here: the socket gone): the command runs as it is, and the
    fault flag makes the PostToolUse hook ask, so a server that is back records the command."""
    s = Served(tmp_path)
    moved = s.server.socket_path + ".away"
    try:
        os.rename(s.server.socket_path, moved)
        pre = {"tool_name": "Bash", "cwd": str(s.repo), "tool_use_id": "x1", "tool_input": {"command": "echo x"}}
        assert s.hook("PreToolUse", pre) is None
        assert os.path.exists(s.hooks.flag_paths["fault"])
        os.rename(moved, s.server.socket_path)
        s.hook("PostToolUse", {**pre, "tool_response": "x\n"})
        assert [a.command for a in s.rt.state.attempts] == ["echo x"]
    finally:
        if os.path.exists(moved):
            os.rename(moved, s.server.socket_path)
        s.close()


def test_a_wrappers_answer_is_checked_at_the_next_event(tmp_path: Path) -> None:
    """No PostToolUse hook asks after a wrapped command (its flags clear): the check of the answer
    against what Codex's rollout says the model got happens at the next event. A record someone else
    made for the call (its secret taken before the wrapper traded it) is never a reference source."""
    s = Served(tmp_path)
    expected = "".join(f"expected line {i}\n" for i in range(40))
    (s.repo / "expected.txt").write_text(expected)
    (s.repo / "real.py").write_text("for i in range(40):\n    print(f'real line {i}')\n")
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text("")
    pre = {"tool_name": "Bash", "cwd": str(s.repo), "tool_use_id": "c1", "tool_input": {"command": "python3 real.py"}}
    try:
        wrapped = s.hook("PreToolUse", {**pre, "transcript_path": str(rollout)})
        wrapped = wrapped["hookSpecificOutput"]["updatedInput"]["command"]
        secret = wrapped.split("--token ")[1].split()[0]
        assert _send(s.server.socket_path, "Begin", secret, "c1", {"tool_use_id": "c1", "key": "k" * 32}).strip()
        fake = {"tool_use_id": "c1", "exit_code": 0, "complete": True, "shown_raw": False}
        fake["output_b64"] = base64.b64encode(expected.encode()).decode()
        assert _send(s.server.socket_path, "Answer", "k" * 32, "c1", fake).strip(), "the thief's record was taken"
        shown = subprocess.run([BASH, "-lc", wrapped], cwd=s.repo, capture_output=True, text=True).stdout
        assert shown.startswith("real line 0"), "the wrapper, refused, printed the real output"
        item = {"type": "CommandExecution", "id": "c1", "aggregated_output": shown, "exit_code": 0}
        with open(rollout, "a") as f:
            f.write(json.dumps({"type": "event_msg", "payload": {"type": "item_completed", "item": item}}) + "\n")
        # no PostToolUse for c1: the next call's events check it
        again, _ = s.call("c2", "cat expected.txt", transcript_path=str(rollout))
        assert again == expected, "the file's content, not a reference to the record the model never got"
    finally:
        s.close()
    faults = (s.run_dir / "faults.log").read_text()
    # sizes and where they part, never the text: a mismatch seen once (under load) says what the rollout held
    sizes = f"(rollout {len(shown)} bytes, answer {len(expected)} bytes, first difference at byte 0)"
    assert f"the rollout's output is not the answer recorded for it {sizes}" in faults, faults


@pytest.mark.parametrize(
    ("rollout", "answer", "said"),
    [
        ("", "abc\n", "rollout 0 bytes, answer 4 bytes, first difference at byte 0"),  # the rollout had none of it
        ("abc", "abc\n", "rollout 3 bytes, answer 4 bytes, first difference at byte 3"),  # its end lost
        ("abX\n", "abc\n", "rollout 4 bytes, answer 4 bytes, first difference at byte 2"),
        ("é", "e", "rollout 2 bytes, answer 1 bytes, first difference at byte 0"),  # bytes, as Codex read them
    ],
)
def test_a_mismatched_answer_is_told_in_sizes_never_in_text(rollout: str, answer: str, said: str) -> None:
    assert output_difference(rollout, answer) == said


@pytest.mark.parametrize("shell", ["/bin/sh", "/usr/bin/fish"])
def test_the_post_hooks_test_reads_in_any_login_shell(tmp_path: Path, shell: str) -> None:
    """A POSIX login shell reads the flag test itself; another (fish) gets it through /bin/sh."""
    s = Served(tmp_path, shell=shell)
    try:
        command = s.commands["PostToolUse"]
        assert command.startswith("[ -e ") if shell == "/bin/sh" else command.startswith("/bin/sh -c ")
        shown, post = s.call("c1", "echo one")
        handled = s.server.handled
        p = subprocess.run([BASH, "-c", command], input=b"{}" * 40_000, capture_output=True, timeout=60)
        assert (p.returncode, p.stdout, s.server.handled) == (0, b"", handled), "ended at once, its input unread"
        s.server.set_flag("post", True)
        pre = {"tool_name": "Bash", "cwd": str(s.repo), "tool_use_id": "c1", "tool_input": {"command": "echo one"}}
        s.hook("PostToolUse", {**pre, "tool_response": shown})
        assert s.server.handled == handled + 1, "the flag set: the hook asked"
    finally:
        s.close()


HELD_LIMIT_S = 30.0


def _held_rule_config() -> LedgerConfig:
    return LedgerConfig().with_(
        policies={"held": {"check": "custom_rules:held", "verdict": "BLOCK", "time_limit_s": HELD_LIMIT_S}}
    )


def test_a_slow_event_does_not_hold_up_a_wrappers_begin(tmp_path: Path) -> None:
    """One PreToolUse is held in the runtime (a user's rule that runs until the test lets it go, up to
    its time limit); meanwhile another call's wrapper trades its secret for its key, and is answered
    while the rule still runs (behind the lock, it waited out the rule's whole time limit before)."""
    import custom_rules

    custom_rules.HELD_RELEASE.set()  # the first PreToolUse passes the rule at once
    s = Served(tmp_path, _held_rule_config())
    try:
        pre = {"tool_name": "Bash", "cwd": str(s.repo), "tool_use_id": "c1", "tool_input": {"command": "echo one"}}
        wrapped = s.hook("PreToolUse", pre)["hookSpecificOutput"]["updatedInput"]["command"]
        secret = wrapped.split("--token ")[1].split()[0]
        custom_rules.HELD_BEGUN.clear()  # the next one is held
        custom_rules.HELD_RELEASE.clear()
        slow = threading.Thread(
            target=s.hook,
            args=("PreToolUse", {**pre, "tool_use_id": "c2", "tool_input": {"command": "echo two"}}),
        )
        slow.start()
        assert custom_rules.HELD_BEGUN.wait(120), "the slow event reached the rule"
        t0 = time.monotonic()
        begun = _send(s.server.socket_path, "Begin", secret, "c1", {"tool_use_id": "c1", "key": "k" * 32})
        took = time.monotonic() - t0
        still_held = slow.is_alive() and not custom_rules.HELD_RELEASE.is_set()
        custom_rules.HELD_RELEASE.set()
        slow.join()
        assert begun.strip() == b'{"ok": true}', begun
        assert still_held and took < HELD_LIMIT_S, f"the Begin waited {took:.1f} s, for the rule's time limit"
    finally:
        custom_rules.HELD_RELEASE.set()
        s.close()


def test_a_slow_rollout_read_does_not_hold_up_another_clients_hook(tmp_path: Path) -> None:
    """A PostToolUse whose rollout has grown by 400,000 lines (a long session resumed) reads them
    outside the runtime's lock: another call's PreToolUse is answered while the read goes on (under
    the lock it would wait for the whole read, so the reading call could not still be running)."""
    big = tmp_path / "rollout.jsonl"
    item = {"type": "event_msg", "payload": {"type": "item_completed", "item": {"type": "Reasoning", "id": "r"}}}
    big.write_bytes((json.dumps(item) + "\n").encode() * 400_000)
    s = Served(tmp_path)
    try:
        post = {"tool_name": "Bash", "cwd": str(s.repo), "tool_use_id": "old", "tool_input": {"command": "true"}}
        reading = threading.Thread(
            target=s.hook, args=("PostToolUse", {**post, "transcript_path": str(big), "tool_response": ""})
        )
        s.server.set_flag("post", True)
        t0 = time.monotonic()
        reading.start()
        time.sleep(0.2)
        pre = {"tool_name": "Bash", "cwd": str(s.repo), "tool_use_id": "c1", "tool_input": {"command": "echo one"}}
        t1 = time.monotonic()
        answer = s.hook("PreToolUse", pre)
        answered_after = time.monotonic() - t1
        still_reading = reading.is_alive()
        reading.join()
        read_for = time.monotonic() - t0
        assert answer is not None and "updatedInput" in answer["hookSpecificOutput"]
        assert still_reading, f"the PreToolUse waited {answered_after:.2f} s, until the {read_for:.2f} s read ended"
        assert answered_after < read_for / 2, (answered_after, read_for)
    finally:
        s.close()


def _send(sock: str, event: str, token: str, call: str, body: dict) -> bytes:
    import socket

    c = socket.socket(socket.AF_UNIX)
    c.settimeout(30)
    c.connect(sock)
    c.sendall(json.dumps({"event": event, "token": token, "call": call}).encode() + b"\n" + json.dumps(body).encode())
    c.shutdown(socket.SHUT_WR)
    out = c.recv(65536)
    c.close()
    return out
