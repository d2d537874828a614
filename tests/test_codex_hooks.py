"""The Codex hook protocol, with payloads and rollout lines recorded from the real codex 0.171.0
(tests/data/codex): every event goes through a real ``ledger-run hook`` process to the hook server,
and the commands run for real in a git repository between PreToolUse and PostToolUse, as Codex
would run them. The real binary drives the same path in test_codex_e2e.py."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from conftest import make_repo

from ledger_adapters.codex.cli import hook_launcher, hook_overrides, make_codex_home
from ledger_adapters.codex.hooks import CodexHooks, truncation_for
from ledger_runtime.config import LedgerConfig
from ledger_runtime.hooks.server import HookServer
from ledger_runtime.inspection import load
from ledger_runtime.records import VerdictKind
from ledger_runtime.runtime import LedgerRuntime

DATA = Path(__file__).parent / "data" / "codex"
RECORDED = json.loads((DATA / "payloads.json").read_text())
CALC = "x = 1\nprint(x)\n"


class Session:
    """A ledger run with its hook server, fed recorded payloads through ``ledger-run hook``."""

    def __init__(
        self, tmp: Path, config: LedgerConfig | None = None, *, wrap: bool = False, files: dict[str, str] | None = None
    ):
        self.repo = make_repo(tmp / "repo", files or {"calc.py": CALC})
        self.run_dir = tmp / "run"
        self.transcript = tmp / "sessions" / "rollout-test.jsonl"
        self.transcript.parent.mkdir(parents=True)
        self.transcript.write_text("")
        self.rt = LedgerRuntime(self.repo, self.run_dir, config)
        self.hooks = CodexHooks(self.rt, wrap_launcher=hook_launcher() if wrap else None)
        self.server = HookServer(self.hooks.handle, self.rt.report_fault)
        self.hooks.socket_path = self.server.socket_path
        self.rollout = [
            line.replace("{cwd}", str(self.repo)) for line in (DATA / "rollout.jsonl").read_text().splitlines()
        ]
        self.named: set[str] = set()  # calls the rollout names (model_made)

    def payload(self, event: str, tool: str = "", nth: int = 0, **changes: Any) -> dict[str, Any]:
        found = [p for p in RECORDED if p["hook_event_name"] == event and p.get("tool_name", "") == tool][nth]
        text = json.dumps(found).replace("{cwd}", str(self.repo)).replace("{transcript}", str(self.transcript))
        return {**json.loads(text), **changes}

    def send(
        self, event: str, payload: dict[str, Any] | bytes, *, socket: str | None = None, run_dir: Path | None = None
    ) -> tuple[dict[str, Any] | None, subprocess.CompletedProcess]:
        raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        if isinstance(payload, dict) and event in ("PreToolUse", "PostToolUse"):
            self.model_made(payload)
        proc = subprocess.run(
            [
                *hook_launcher(),
                "hook",
                event,
                "--socket",
                socket or self.server.socket_path,
                "--run-dir",
                str(run_dir or self.run_dir),
            ],
            input=raw,
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout.decode().strip()
        return (json.loads(out) if out else None), proc

    def model_made(self, payload: dict[str, Any]) -> None:
        """Codex writes the model's call into the rollout before it runs it (and before its hooks): a
        call the model made is named there, with its command."""
        call, tool = payload.get("tool_use_id"), payload.get("tool_name")
        command = (
            (payload.get("tool_input") or {}).get("command") if isinstance(payload.get("tool_input"), dict) else None
        )
        if not isinstance(call, str) or not isinstance(command, str) or call in self.named:
            return
        self.named.add(call)
        if tool == "apply_patch":
            item = {"type": "custom_tool_call", "call_id": call, "name": "apply_patch", "input": command}
        else:
            item = {
                "type": "function_call",
                "call_id": call,
                "name": "exec_command",
                "arguments": json.dumps({"cmd": command}),
            }
        with open(self.transcript, "a") as f:
            f.write(json.dumps({"type": "response_item", "payload": item}) + "\n")

    def codex_runs(self, command: str, call_id: str) -> tuple[str, int]:
        """Run the command as Codex would, and append its rollout record (the recorded one, with
        the real output and exit code)."""
        p = subprocess.run(["bash", "-lc", command], cwd=self.repo, capture_output=True, text=True)
        output, code = p.stdout + p.stderr, p.returncode
        self.append_rollout(call_id, output=output, exit_code=code)
        return output, code

    def append_rollout(self, call_id: str, **item: Any) -> None:
        lines = []
        for line in self.rollout:
            e = json.loads(line)
            p = e["payload"]
            if p.get("call_id") == call_id or (p.get("item") or {}).get("id") == call_id:
                if "item" in p and item:
                    p["item"].update(
                        {"aggregated_output": item["output"], "exit_code": item["exit_code"]}
                        if p["item"]["type"] == "CommandExecution"
                        else item
                    )
                lines.append(json.dumps(e))
        with open(self.transcript, "a") as f:
            f.write("\n".join(lines) + "\n")

    def state(self):
        return load(self.run_dir).state

    def close(self) -> None:
        self.server.close()
        self.rt.close()


@pytest.fixture
def session(tmp_path: Path):
    s = Session(tmp_path)
    yield s
    s.close()


def context(answer: dict[str, Any] | None) -> str:
    return (answer or {}).get("hookSpecificOutput", {}).get("additionalContext", "")


LONG = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(40))


def test_recorded_session_through_hook_processes(tmp_path: Path) -> None:
    session = Session(tmp_path, wrap=True, files={"calc.py": LONG})
    try:
        _recorded_session(session)
    finally:
        session.close()


def _recorded_session(session: Session) -> None:
    start, _ = session.send("SessionStart", session.payload("SessionStart"))
    prompt, _ = session.send("UserPromptSubmit", session.payload("UserPromptSubmit"))
    assert start is None and prompt is None, "nothing is news yet, and no answer has spared anything to pay a note"
    assert session.state().baseline.task == "fix the bug"

    # a read: Codex runs the ledger's wrapper in its place, which runs it and prints the ledger's answer
    pre = session.payload("PreToolUse", "Bash")
    decision = session.send("PreToolUse", pre)[0]["hookSpecificOutput"]
    wrapped = decision["updatedInput"]["command"]
    assert (
        decision["permissionDecision"] == "allow"
        and " wrap --socket " in wrapped
        and "\ncat calc.py\nLEDGER_COMMAND_" in wrapped
    ), "the command itself, verbatim, in a here-document"
    out, code = session.codex_runs(wrapped, "c0")
    assert (out, code) == (LONG, 0), "the first time: the output as it is"
    first = session.state().attempts[0]
    assert (first.executed, first.exit_code, first.output_complete, first.command) == (True, 0, True, "cat calc.py")
    post, _ = session.send("PostToolUse", session.payload("PostToolUse", "Bash"))
    assert post is None and len(session.state().attempts) == 1, "recorded once, by the wrapper's answer"

    # the same read again: it runs, and the model gets a reference to what it already holds
    decision = session.send("PreToolUse", {**pre, "tool_use_id": "c0-again"})[0]["hookSpecificOutput"]
    out, code = session.codex_runs(decision["updatedInput"]["command"], "c0-again")
    assert out.startswith("[ledger: same as step 1's output (`cat calc.py`, exit 0)") and code == 0
    again = session.state().attempts[1]
    assert again.verdict.kind is VerdictKind.RUN and again.answer["kind"] == "whole"
    assert again.executed and again.command == "cat calc.py"
    note = context(
        session.send("PostToolUse", {**session.payload("PostToolUse", "Bash"), "tool_use_id": "c0-again"})[0]
    )
    assert "end a command with `# ledger:raw` to get its output in full" in note, "the escape, named once"

    # a failing script: its own exit code and output come back through the wrapper
    script = session.payload("PreToolUse", "Bash", 1)
    decision = session.send("PreToolUse", script)[0]["hookSpecificOutput"]
    out, code = session.codex_runs(decision["updatedInput"]["command"], "c1")
    assert (out, code) == ("1\n", 3)
    session.send("PostToolUse", session.payload("PostToolUse", "Bash", 1))
    assert session.state().attempts[2].exit_code == 3

    # apply_patch: not wrapped; an edit, recorded as a modification of calc.py by that attempt
    assert session.send("PreToolUse", session.payload("PreToolUse", "apply_patch"))[0] is None
    (session.repo / "calc.py").write_text(LONG.replace("return x + 7\n", "return x + 70\n"))
    session.append_rollout("c2")
    post, _ = session.send("PostToolUse", session.payload("PostToolUse", "apply_patch"))
    state = session.state()
    edit = state.attempts[3]
    assert edit.command_class.value == "modify" and edit.exit_code == 0
    mods = state.modifications_of_attempt(edit.id)
    assert [(Path(m.path).name, m.recognised, m.lines_added, m.lines_removed) for m in mods] == [
        ("calc.py", True, 1, 1)
    ]
    assert "calc.py: STALE" not in context(post), "the model's own edit: the patch's result told it"
    assert "calc.py: STALE, changed at step 4 by" in session.rt.view().text, "the state view has it"
    # the file changed: read again, the model gets what differs from the version it saw
    decision = session.send("PreToolUse", {**pre, "tool_use_id": "c9"})[0]["hookSpecificOutput"]
    out, code = session.codex_runs(decision["updatedInput"]["command"], "c9")
    assert out.startswith("[ledger: step 1's output (`cat calc.py`) with these changes") and code == 0
    assert "-    return x + 7\n+    return x + 70\n" in out
    # another program changes calc.py between two commands: the next note says so, no output showed it
    (session.repo / "calc.py").write_text(LONG.replace("return x + 7\n", "return x + 700\n"))
    echo = {**pre, "tool_use_id": "c10", "tool_input": {"command": "echo done"}}
    decision = session.send("PreToolUse", echo)[0]["hookSpecificOutput"]
    assert session.codex_runs(decision["updatedInput"]["command"], "c10") == ("done\n", 0)
    note = context(session.send("PostToolUse", {**session.payload("PostToolUse", "Bash"), "tool_use_id": "c10"})[0])
    assert note.startswith("<ledger_update") and "outside any command" in note, note
    assert "calc.py: STALE, changed at step" in note and "Changed since start" in note
    assert "Recent commands" not in note and len(note) <= LedgerConfig().context.note_chars
    state = session.state()
    assert state.injections and all(i["chars"] <= LedgerConfig().context.note_chars for i in state.injections)
    assert not (session.run_dir / "faults.log").exists()


def test_after_a_compaction_no_answer_refers_to_what_came_before(tmp_path: Path) -> None:
    session = Session(tmp_path, wrap=True, files={"calc.py": LONG})
    try:
        pre = session.payload("PreToolUse", "Bash")
        for call in ("c0", "c0-again"):
            decision = session.send("PreToolUse", {**pre, "tool_use_id": call})[0]["hookSpecificOutput"]
            out, _ = session.codex_runs(decision["updatedInput"]["command"], "c0")
        assert out.startswith("[ledger: same as step 1's output")
        with open(session.transcript, "a") as f:  # Codex rebuilt its history from a summary
            f.write(
                json.dumps(
                    {"timestamp": "2026-01-01T00:00:00Z", "type": "compacted", "payload": {"message": "summary"}}
                )
                + "\n"
            )
        decision = session.send("PreToolUse", {**pre, "tool_use_id": "c0-third"})[0]["hookSpecificOutput"]
        out, _ = session.codex_runs(decision["updatedInput"]["command"], "c0")
        assert out == LONG, "the outputs it was shown before the compaction are gone: the whole output again"
        assert session.state().context_floor == 3
    finally:
        session.close()


def test_a_wrapper_that_cannot_reach_the_ledger_prints_the_raw_output(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": LONG})
    cmd = [
        *hook_launcher(),
        "wrap",
        "--socket",
        str(tmp_path / "gone.sock"),
        "--call",
        "c0",
        "--run-dir",
        str(tmp_path),
        "--",
        "cat calc.py; exit 4",
    ]
    p = subprocess.run(cmd, cwd=repo, capture_output=True, timeout=60)
    assert (p.stdout.decode(), p.returncode) == (LONG, 4) and b"Traceback" not in p.stderr
    assert "gave no key" in (tmp_path / "faults.log").read_text()
    slow = [*cmd[:-2], "--wait", "0.3", "--", "echo first; sleep 1; echo second"]
    started = time.monotonic()
    p = subprocess.run(slow, cwd=repo, capture_output=True, timeout=60)
    assert p.stdout == b"first\nsecond\n" and p.returncode == 0 and time.monotonic() - started < 30


def test_output_the_rollout_lacks_is_kept_incomplete_and_never_reused(session: Session) -> None:
    pre = session.payload("PreToolUse", "Bash")
    session.send("PreToolUse", pre)
    subprocess.run(["bash", "-lc", "cat calc.py"], cwd=session.repo, check=True)  # no rollout record
    session.send("PostToolUse", {**session.payload("PostToolUse", "Bash"), "tool_response": "print(x)\n"})
    a = session.state().attempts[0]
    assert (a.exit_code, a.output_complete) == (None, False)
    assert session.rt.store.text(a.output_hash) == "print(x)\n"
    assert session.send("PreToolUse", {**pre, "tool_use_id": "c0-again"})[0] is None  # runs


def test_a_command_that_outlives_its_tool_call_is_completed_later(session: Session) -> None:
    """Codex returns from a long command with its first output and polls the rest (write_stdin, no
    hooks): the attempt is recorded unfinished, and completed once the rollout has its end."""
    run = session.payload("PreToolUse", "Bash", 1)
    session.send("PreToolUse", run)
    session.send("PostToolUse", {**session.payload("PostToolUse", "Bash", 1), "tool_response": "Process running"})
    a = session.state().attempts[0]
    assert (a.exit_code, a.output_complete) == (None, False)
    session.codex_runs(run["tool_input"]["command"], "c1")  # the rollout now has its end
    session.send("SessionStart", session.payload("SessionStart"))  # any later event folds it in
    a = session.state().attempts[0]
    assert (a.exit_code, a.output_complete) == (3, True) and session.rt.store.text(a.output_hash) == "1\n"
    assert session.rt.state.attempts[0].exit_code == 3


def test_a_read_completed_late_is_never_reused(session: Session) -> None:
    """Its read set was signed while it still ran: the file may have changed under it since."""
    pre = session.payload("PreToolUse", "Bash")
    session.send("PreToolUse", pre)
    session.send("PostToolUse", {**session.payload("PostToolUse", "Bash"), "tool_response": "x = 1"})
    session.codex_runs("cat calc.py", "c0")
    session.send("SessionStart", session.payload("SessionStart"))
    assert session.state().attempts[0].output_complete
    assert session.send("PreToolUse", {**pre, "tool_use_id": "c0-again"})[0] is None  # runs


def read_then_start_script(session: Session) -> tuple[dict, dict]:
    """`cat calc.py` run and recorded, then the recorded script started (PreToolUse only)."""
    pre = session.payload("PreToolUse", "Bash")
    session.send("PreToolUse", pre)
    session.codex_runs("cat calc.py", "c0")
    session.send("PostToolUse", session.payload("PostToolUse", "Bash"))
    script = session.payload("PreToolUse", "Bash", 1)
    assert session.send("PreToolUse", script)[0] is None
    return pre, script


def test_nudge_goes_with_pretooluse_once(session: Session) -> None:
    run = session.payload("PreToolUse", "Bash", 1)
    cmd = run["tool_input"]["command"]
    for n, call in enumerate(("c1", "c1-again")):
        pre, _ = session.send("PreToolUse", {**run, "tool_use_id": call})
        session.codex_runs(cmd, "c1")
        post, _ = session.send("PostToolUse", {**session.payload("PostToolUse", "Bash", 1), "tool_use_id": call})
        if n == 0:
            assert pre is None and "[ledger] NUDGE" not in context(post)
        else:
            assert context(pre).startswith("[ledger] NUDGE: repeat-failure: no tracked file changed since step 1")
            assert "[ledger] NUDGE" not in context(post)
    assert [a.verdict.kind for a in session.state().attempts] == [VerdictKind.RUN, VerdictKind.NUDGE]


def test_no_reuse_while_another_command_runs(session: Session) -> None:
    pre, _ = read_then_start_script(session)  # started, no PostToolUse yet
    assert session.send("PreToolUse", {**pre, "tool_use_id": "c0-parallel"})[0] is None  # runs: not reused


def test_posttooluse_without_pretooluse_and_unfinished_calls_are_recorded(session: Session) -> None:
    session.codex_runs("cat calc.py", "c0")
    session.send("PostToolUse", session.payload("PostToolUse", "Bash"))
    session.send("PreToolUse", session.payload("PreToolUse", "Bash", 1))
    session.codex_runs(session.payload("PreToolUse", "Bash", 1)["tool_input"]["command"], "c1")
    session.hooks.finish()  # the run ended before c1's PostToolUse
    attempts = session.state().attempts
    assert [(a.command.split()[0], a.exit_code, a.executed) for a in attempts] == [
        ("cat", 0, True),
        ("python", 3, True),
    ]


def test_faults_never_block_the_agent(session: Session, tmp_path: Path) -> None:
    faults = session.run_dir / "faults.log"
    for event, payload in (
        ("PreToolUse", b"{not json"),
        ("PreToolUse", b"[1, 2]"),
        ("Bogus", b"{}"),
        ("PreToolUse", json.dumps({"tool_name": "Bash", "tool_input": None}).encode()),
    ):
        answer, proc = session.send(event, payload)
        assert answer is None and proc.stdout == b""
    logged = [json.loads(line) for line in faults.read_text().splitlines()]
    assert any("not JSON" in f["error"] for f in logged) and any(
        "unknown hook event 'Bogus'" in f["error"] for f in logged
    )
    assert any("not a JSON object" in f["error"] for f in logged)
    # no server at all: the command runs, the fault goes to the run directory
    answer, proc = session.send("PreToolUse", session.payload("PreToolUse", "Bash"), socket=str(tmp_path / "gone.sock"))
    assert answer is None and "did not answer" in faults.read_text().splitlines()[-1]
    # no run directory either: one line on stderr, no traceback
    answer, proc = session.send(
        "PreToolUse",
        session.payload("PreToolUse", "Bash"),
        socket=str(tmp_path / "gone.sock"),
        run_dir=tmp_path / "nowhere",
    )
    assert answer is None and proc.stderr.decode().count("\n") == 1 and b"Traceback" not in proc.stderr


def test_locked_ledger_loses_nothing(session: Session) -> None:
    lock = sqlite3.connect(session.run_dir / "ledger.sqlite", isolation_level=None, timeout=0)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        assert session.send("PreToolUse", session.payload("PreToolUse", "Bash"))[0] is None
        session.codex_runs("cat calc.py", "c0")
        started = time.monotonic()
        answer, _ = session.send("PostToolUse", session.payload("PostToolUse", "Bash"))
        assert time.monotonic() - started < 60
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    kept = [json.loads(line) for line in (session.run_dir / "faults.log").read_text().splitlines()]
    records = [r for f in kept for r in f.get("records", [])]
    assert any(r["kind"] == "attempt" and r["command"] == "cat calc.py" for r in records)
    # the ledger works again once the lock is gone
    assert session.send("PreToolUse", session.payload("PreToolUse", "Bash", tool_use_id="c5"))[0] is None


def test_truncation_follows_the_calls_output_limit() -> None:
    assert truncation_for(None).limit == 20_000
    assert truncation_for({"max_output_tokens": 500}).limit == 1_000
    assert truncation_for({"max_output_tokens": "x"}).limit == 20_000


def test_codex_home_copies_the_users_config_without_touching_it(tmp_path: Path) -> None:
    user = tmp_path / "user-codex"
    user.mkdir()
    config = (
        'model = "gpt-5.5"\n[[hooks.PreToolUse]]\nmatcher = "Bash"\nhooks = [{type = "command", command = "mine"}]\n'
    )
    (user / "config.toml").write_text(config)
    (user / "auth.json").write_text('{"OPENAI_API_KEY": "sk-test"}')
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in user.iterdir()}
    home = make_codex_home(tmp_path / "run", user)
    assert (home / "config.toml").read_text() == config and (home / "auth.json").exists()
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in user.iterdir()} == before
    args = hook_overrides(["ledger-run"], "/tmp/s.sock", tmp_path / "run", tomllib.loads(config))
    values = {a.split("=", 1)[0]: tomllib.loads("v = " + a.split("=", 1)[1])["v"] for a in args[1::2]}
    assert set(values) == {"hooks.SessionStart", "hooks.UserPromptSubmit", "hooks.PreToolUse", "hooks.PostToolUse"}
    pre = values["hooks.PreToolUse"]
    assert pre[0]["hooks"][0]["command"] == "mine"  # the user's own hook stays, first
    assert pre[1]["matcher"] == "^(Bash|apply_patch)$"
    assert pre[1]["hooks"][0]["command"].startswith("ledger-run hook PreToolUse --socket /tmp/s.sock")


def test_hook_help_and_entry(tmp_path: Path) -> None:
    p = subprocess.run([*hook_launcher(), "hook", "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "PreToolUse" in p.stdout
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledger_runtime",
            "hook",
            "PreToolUse",
            "--socket",
            str(tmp_path / "none.sock"),
            "--run-dir",
            str(tmp_path),
        ],
        input=b"{}",
        capture_output=True,
    )
    assert p.returncode == 0 and p.stdout == b"" and (tmp_path / "faults.log").exists()


def test_codex_cd_argument_names_the_workdir() -> None:
    from ledger_adapters.codex.cli import codex_cd, with_cd

    assert codex_cd(["exec", "-C", "/repo", "task"]) == "/repo"
    assert with_cd(["-C", "repo", "exec", "t"], "/abs/repo") == ["-C", "/abs/repo", "exec", "t"]
    assert with_cd(["--cd=repo"], "/abs/repo") == ["--cd=/abs/repo"]
    assert codex_cd(["--cd=/r2"]) == "/r2" and codex_cd(["exec", "task"]) is None


def test_the_runs_record_is_the_main_models_rollouts_not_its_subagents(tmp_path: Path) -> None:
    """A subagent's rollout (``codex --enable multi_agent_v2``; its first line as codex 0.171.0 writes it, trimmed)
    holds the subagent's turns: the page's record of the model's side is the main model's rollouts only; one whose
    first line says nothing of a subagent (or is no JSON) stays."""
    from ledger_adapters.codex.rollout import locate

    day = tmp_path / "codex-home" / "sessions" / "2026" / "12" / "07"
    day.mkdir(parents=True)
    root = "01a25095-640c-7a31-9088-674edadbb8e0"
    main = {"session_id": root, "id": root, "source": "exec", "thread_source": "user", "base_instructions": "x" * 9**5}
    spawned = {"parent_thread_id": root, "depth": 1, "agent_path": "/root/reader", "agent_role": None}
    sub = {"session_id": root, "id": "01a25095-6547", "parent_thread_id": root, "thread_source": "subagent"}
    sub["source"] = {"subagent": {"thread_spawn": spawned}}
    older = {**sub, "thread_source": None}  # named a subagent's by its source alone
    for name, meta in [("1-main", main), ("2-sub", sub), ("3-older", older), ("4-odd", None)]:
        line = json.dumps({"type": "session_meta", "payload": meta}) if meta else "not json"
        (day / f"rollout-2026-12-07T12-58-1{name}.jsonl").write_text(line + '\n{"type":"response_item"}\n')
    assert [p.name.split("-")[-1] for p in locate(tmp_path / "ledger.sqlite")] == ["main.jsonl", "odd.jsonl"]


def test_a_subagents_command_that_outlives_its_tool_call_is_completed_from_its_rollout(session: Session) -> None:
    """A subagent's long command (its events carry ``agent_id`` and name its own rollout) is recorded unfinished,
    and completed once the subagent's rollout has its end, at the main model's next event: its end is never looked
    for in the main model's rollout alone."""
    main = session.transcript
    session.send("SessionStart", session.payload("SessionStart"))
    session.transcript = main.parent / "rollout-subagent.jsonl"  # the subagent's: its calls are named there
    sub = {"agent_id": "01a25095-6547", "agent_type": "default", "transcript_path": str(session.transcript)}
    run = {**session.payload("PreToolUse", "Bash", 1), **sub}
    session.send("PreToolUse", run)
    session.send("PostToolUse", {**session.payload("PostToolUse", "Bash", 1), **sub, "tool_response": "running"})
    a = session.state().attempts[0]
    assert (a.exit_code, a.output_complete, a.answer.get("held")) == (None, False, False)
    session.codex_runs(run["tool_input"]["command"], "c1")  # the subagent's rollout now has its end
    session.transcript = main
    session.send("SessionStart", session.payload("SessionStart"))  # the main model's next event folds it in
    a = session.state().attempts[0]
    assert (a.exit_code, a.output_complete) == (3, True) and session.rt.store.text(a.output_hash) == "1\n"


def test_a_conversation_keeps_the_shell_codex_took_when_it_started(tmp_path: Path, monkeypatch) -> None:
    # Codex reads the user's shell once per session, so the ledger reads it at the conversation's first call
    # (not with a getpwuid per call): a shell changed since is a new conversation's, not this one's
    import pwd

    session = Session(tmp_path, wrap=True)
    try:
        pre = session.payload("PreToolUse", "Bash")
        assert "updatedInput" in session.send("PreToolUse", pre)[0]["hookSpecificOutput"]
        real = pwd.getpwuid
        monkeypatch.setattr(pwd, "getpwuid", lambda uid: pwd.struct_passwd((*real(uid)[:6], "/usr/bin/fish")))
        again = session.send("PreToolUse", {**pre, "tool_use_id": "c0-again"})[0]
        assert again is not None and "updatedInput" in again["hookSpecificOutput"], "the session's bash: wrapped"
        other = tmp_path / "sessions" / "rollout-other.jsonl"
        other.write_text("")
        fresh = session.send("PreToolUse", {**pre, "tool_use_id": "c7", "transcript_path": str(other)})[0]
        assert fresh is None or "updatedInput" not in fresh["hookSpecificOutput"], "fish: the command runs as it is"
    finally:
        session.close()
