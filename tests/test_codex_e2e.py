"""``ledger-run codex`` end to end: the REAL codex binary (the pinned npm package) against a fake
Responses API on loopback (tests/fake_responses.py), in `codex exec` and in the interactive TUI
(driven through a pseudo-terminal). Without a codex binary these tests skip, saying so; CI installs
it and sets LEDGER_REQUIRE_CODEX=1, which turns a missing binary into a failure."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import shutil
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest
from conftest import CALC_PROJECT, make_repo
from fake_responses import FakeResponses, codex_run_env, codex_user_home, developer_texts, function_outputs
from terminal import drawn, pump, visible

from ledger_adapters.codex.cli import CODEX_VERSION, find_codex, hook_launcher
from ledger_adapters.codex.rollout import is_ledger_note, item_text, model_inputs
from ledger_runtime.inspection import load
from ledger_runtime.records import VerdictKind

CODEX = find_codex(None)
if CODEX is None and os.environ.get("LEDGER_REQUIRE_CODEX"):
    raise RuntimeError(
        f"LEDGER_REQUIRE_CODEX is set but no codex binary was found (npm install -g @openai/codex@{CODEX_VERSION})"
    )
pytestmark = pytest.mark.skipif(
    CODEX is None,
    reason=f"no codex binary on PATH or in $LEDGER_CODEX_BIN (npm install -g @openai/codex@{CODEX_VERSION})",
)

TEST = "python3 -m unittest -q test_calc"
FIX = (
    "*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
    "*** End Patch\n"
)
SCRIPT = [
    ("exec", "cat calc.py"),
    ("exec", "cat calc.py"),
    ("exec", TEST),
    ("exec", TEST),
    ("patch", FIX),
    ("exec", TEST),
    ("say", "Fixed add(); the test passes."),
]


def ledger_run(*args: str, env: dict[str, str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([*hook_launcher(), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def rollout_commands(run_dir: Path) -> dict[str, list[str]]:
    """call id -> the command Codex actually executed, from the run's rollout files."""
    out = {}
    for f in (run_dir / "codex-home" / "sessions").rglob("rollout-*.jsonl"):
        for line in f.read_text().splitlines():
            p = json.loads(line).get("payload") or {}
            item = p.get("item") or {}
            if p.get("type") == "item_completed" and item.get("type") == "CommandExecution":
                out[item["id"]] = item["command"]
    return out


@pytest.fixture
def codex_env(tmp_path: Path):
    repo = make_repo(tmp_path / "repo", CALC_PROJECT)
    fake = FakeResponses(SCRIPT, workdir=str(repo))
    user_home = codex_user_home(tmp_path / "user-codex", fake.base_url)
    env = {**os.environ, "CODEX_HOME": str(user_home), "LEDGER_FAKE_KEY": "test", "LEDGER_CODEX_BIN": CODEX or ""}
    yield repo, fake, user_home, env
    fake.close()


def test_codex_exec_with_the_ledger(codex_env, tmp_path: Path) -> None:
    repo, fake, user_home, env = codex_env
    config_before = (user_home / "config.toml").read_bytes()
    (user_home / "auth.json").write_text('{"OPENAI_API_KEY": null}\n')
    run_dir = tmp_path / "run"
    p = ledger_run(
        "codex",
        "--workdir",
        str(repo),
        "-o",
        str(run_dir),
        "--",
        "exec",
        "--skip-git-repo-check",
        "Fix the failing test in test_calc.py",
        env=env,
        cwd=repo,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"ledger-run inspect {run_dir}" in p.stderr
    assert "no hook of" not in p.stderr, "the hooks reached the ledger: no warning"
    state = load(run_dir).state
    # the run says which hook client its hooks and wrapper ran: the compiled one where it could be built
    from ledger_runtime import hook_client

    which = state.run["hook_client"]  # "compiled: PATH (built)", or "python: why not"
    assert which.startswith(("compiled:", "python:")) and which.split(" (")[0] == hook_client().split(" (")[0]
    rows = [(a.command.splitlines()[0], a.verdict.kind, a.executed, a.exit_code) for a in state.attempts]
    assert rows == [
        ("cat calc.py", VerdictKind.RUN, True, 0),
        ("cat calc.py", VerdictKind.RUN, True, 0),
        (TEST, VerdictKind.RUN, True, 1),
        (TEST, VerdictKind.NUDGE, True, 1),
        ("*** Begin Patch", VerdictKind.RUN, True, 0),
        (TEST, VerdictKind.RUN, True, 0),
    ], rows
    assert not (run_dir / "faults.log").exists()

    # every command ran inside the ledger's wrapper, which printed the ledger's answer to it: the
    # output the first time, a reference to it the second time
    executed = rollout_commands(run_dir)
    assert all(
        " wrap --socket " in executed[c][-1] and "\ncat calc.py\nLEDGER_COMMAND_" in executed[c][-1]
        for c in ("call_0", "call_1")
    )
    seen = function_outputs(fake.agent_requests[2])
    calc = (repo / "calc.py").read_text()
    assert seen["call_0"].endswith(CALC_PROJECT["calc.py"])
    assert "[ledger: same as step 1's output (`cat calc.py`, exit 0)]" in seen["call_1"]
    assert len(seen["call_1"]) < 400, "the model did not get the file a second time"

    # a note of the state view reached the model once the reference spared it the file (how answers
    # read: news no output showed it), and the nudge came with the run's own output
    assert not any("<ledger" in t for t in developer_texts(fake.agent_requests[0])), "nothing is news yet"
    after_reuse = developer_texts(fake.agent_requests[2])
    assert any(t.startswith("(Ledger runtime:") and "Answers: output you were already shown" in t for t in after_reuse)
    nudged = function_outputs(fake.agent_requests[4])["call_3"]
    assert "[ledger] NUDGE: repeat-failure: no tracked file changed since step 3" in nudged
    after_edit = developer_texts(fake.agent_requests[5])
    assert not any("calc.py: STALE" in t for t in after_edit), "the model's own patch: its result told it"
    notes = [i["chars"] for i in state.injections]
    assert notes and max(notes) <= 600  # each note is capped
    # what the rollout says each model call was sent is what Codex sent, all but its own base
    # instructions (the first item of every call, the same each time): the cost meter bills rollouts
    (rollout,) = (run_dir / "codex-home" / "sessions").rglob("rollout-*.jsonl")
    rebuilt = model_inputs(str(rollout))
    sent = [r["input"][1:] for r in fake.agent_requests]
    assert [[i.get("id") for i in c] for c in rebuilt] == [[i.get("id") for i in c] for c in sent]
    assert [[item_text(i) for i in c] for c in rebuilt] == [[item_text(i) for i in c] for c in sent]
    assert sum(is_ledger_note(i) for i in rebuilt[-1]) == len(state.injections), "every note, once, kept"

    # the apply_patch edit is a modification of calc.py by that step
    edit = state.attempts[4]
    mods = state.modifications_of_attempt(edit.id)
    assert [(Path(m.path).name, m.lines_added, m.lines_removed, m.recognised) for m in mods] == [
        ("calc.py", 1, 1, True)
    ]
    assert "return a + b" in calc
    # the user's own Codex home was read, never written; the run has its own
    assert (user_home / "config.toml").read_bytes() == config_before and not (user_home / "sessions").exists()
    assert not os.path.lexists(run_dir / "codex-home" / "auth.json"), "the link to the user's login went at the end"
    assert (user_home / "auth.json").read_text() == '{"OPENAI_API_KEY": null}\n'
    assert list((run_dir / "codex-home" / "sessions").rglob("rollout-*.jsonl"))
    codex_files = [f for f in (run_dir / "codex-home").rglob("*") if f.is_file() and not f.is_symlink()]
    assert any(f.suffix == ".sqlite" for f in codex_files), "Codex keeps state (and outputs) in SQLite files"
    loose = [str(f) for f in codex_files if f.stat().st_mode & 0o077]
    assert not loose, f"Codex's own files are owner-only once the run ends: {loose}"
    inspect = ledger_run("inspect", str(run_dir), "--json", env=env, cwd=repo)
    # a reference to an identical output: the repeated read (and the repeated failing test, a NUDGE, when
    # its output did not change: pytest prints its own timing)
    assert inspect.returncode == 0 and json.loads(inspect.stdout)["summary"]["answers"]["whole"] >= 1


def test_codex_shadow_runs_everything_and_shows_nothing(codex_env, tmp_path: Path) -> None:
    repo, fake, user_home, env = codex_env
    run_dir = tmp_path / "shadow"
    p = ledger_run(
        "codex",
        "--shadow",
        "--workdir",
        str(repo),
        "-o",
        str(run_dir),
        "--",
        "exec",
        "--skip-git-repo-check",
        "Fix the failing test",
        env=env,
        cwd=repo,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    state = load(run_dir).state
    second = state.attempts[1]
    assert second.verdict.kind is VerdictKind.RUN and second.answer["kind"] == "whole"
    assert second.executed and not second.applied
    assert rollout_commands(run_dir)["call_1"][-1] == "cat calc.py"
    assert not any("ledger" in t for body in fake.agent_requests for t in developer_texts(body))


@pytest.mark.browser
def test_codex_s_page_shows_the_model_s_side_from_its_rollout(tmp_path: Path) -> None:
    """The run's page reads Codex's rollout: the model's reasoning summary at its step, its last
    message standing alone, each response's tokens; in a real headless browser."""
    from browser import Browser

    repo = make_repo(tmp_path / "repo", CALC_PROJECT)
    fake = FakeResponses(SCRIPT, workdir=str(repo), thoughts={2: "The test should tell me what fails."})
    env = codex_run_env(dict(os.environ), fake, tmp_path / "user-codex", CODEX or "")
    run_dir = tmp_path / "run"
    try:
        p = ledger_run(
            "codex",
            "--workdir",
            str(repo),
            "-o",
            str(run_dir),
            "--",
            "exec",
            "--skip-git-repo-check",
            "Fix calc",
            env=env,
            cwd=repo,
        )
    finally:
        fake.close()
    assert p.returncode == 0, p.stderr[-3000:]
    page = tmp_path / "run.html"
    r = ledger_run("inspect", str(run_dir), "--html", str(page), env=env, cwd=repo)
    assert r.returncode == 0, r.stderr
    b = Browser()
    try:
        b.open(page)
        assert b.js("document.querySelector('#task pre').textContent") == "Fix calc"
        assert b.js("document.querySelector('#step-3 .reasoning').textContent") == "The test should tell me what fails."
        assert len(b.visible(".turn .said")) == 1 and b.js(
            "[].map.call(document.querySelectorAll('.turn .said'), function(x){return x.textContent;})"
        ) == ["Fixed add(); the test passes."]
        facts = b.js("[].map.call(document.querySelectorAll('.step .facts'), function(x){return x.textContent;})")
        assert len(facts) == 6 and all("100 tokens in, 10 out" in f for f in facts), facts
        b.screenshot(tmp_path / "codex.png")
    finally:
        b.close()


class Tui:
    """``ledger-run codex`` in the interactive TUI, on a pseudo-terminal."""

    def __init__(self, repo: Path, env: dict[str, str], run_dir: Path):
        self.screen = bytearray()
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: ledger-run codex in the terminal
            os.chdir(repo)
            os.execve(
                hook_launcher()[0],
                [*hook_launcher(), "codex", "-o", str(run_dir), "--", "--no-alt-screen"],
                {**env, "TERM": "xterm-256color"},
            )
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))

    def pump(self, seconds: float) -> None:
        pump(self.fd, self.screen, seconds)

    def until(self, done, seconds: float) -> bool:
        end = time.monotonic() + seconds
        while not done() and time.monotonic() < end:
            self.pump(0.2)
        return bool(done())

    def ask(self, fake, prompt: bytes, requests: int) -> None:
        """Type ``prompt`` once the TUI is ready, press Enter until the model is asked (a key pressed
        while the input box is still being drawn can be dropped on a loaded machine), and wait for the
        model's ``requests`` calls."""
        assert self.until(lambda: drawn(self.screen, "Ask Codex"), 60), visible(self.screen)
        os.write(self.fd, prompt)
        self.until(lambda: drawn(self.screen, prompt[-12:].decode(), 4000), 10)
        for _ in range(3):
            os.write(self.fd, b"\r")
            if self.until(lambda: len(fake.agent_requests) > 0, 10):
                break
        else:
            raise AssertionError(f"the prompt never reached the model: {visible(self.screen)}")
        assert self.until(lambda: len(fake.agent_requests) >= requests, 120), visible(self.screen)
        self.pump(2)

    def kill(self) -> None:
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)


def test_codex_tui_with_the_ledger(codex_env, tmp_path: Path) -> None:
    repo, fake, user_home, env = codex_env
    fake.steps = [("exec", "cat calc.py"), ("exec", "cat calc.py"), ("say", "add() subtracts.")]
    with open(user_home / "config.toml", "a") as f:  # a trusted project: no trust prompt
        f.write(f'\n[projects."{repo}"]\ntrust_level = "trusted"\n')
    run_dir = tmp_path / "tui"
    tui = Tui(repo, env, run_dir)
    try:
        tui.ask(fake, b"what is wrong with calc.py", 3)
        os.write(tui.fd, b"\x03")
        tui.pump(1)
        os.write(tui.fd, b"\x03")
        tui.pump(3)
    finally:
        tui.kill()
        os.close(tui.fd)
    screen = tui.screen
    state = load(run_dir).state
    assert [(a.command, a.verdict.kind, a.executed) for a in state.attempts] == [
        ("cat calc.py", VerdictKind.RUN, True),
        ("cat calc.py", VerdictKind.RUN, True),
    ], screen[-2000:]
    assert state.attempts[1].answer["kind"] == "whole"
    assert state.baseline.task == "what is wrong with calc.py"


def test_codex_gets_a_deny_for_a_blocked_command(codex_env, tmp_path: Path) -> None:
    repo, fake, user_home, env = codex_env
    fake.steps = [("exec", "git reset --hard"), ("say", "I will not reset.")]
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")  # uncommitted work a reset would lose
    run_dir = tmp_path / "deny"
    p = ledger_run(
        "codex",
        "--workdir",
        str(repo),
        "-o",
        str(run_dir),
        "--",
        "exec",
        "--skip-git-repo-check",
        "Clean up the repository",
        env=env,
        cwd=repo,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert (repo / "calc.py").read_text().endswith("a + b\n"), "the reset did not run"
    seen = function_outputs(fake.agent_requests[1])["call_0"]
    assert seen.startswith("Command blocked by PreToolUse hook: [ledger] BLOCK by policy destructive")
    state = load(run_dir).state
    assert [(a.verdict.kind, a.verdict.rule, a.executed) for a in state.attempts] == [
        (VerdictKind.BLOCK, "destructive", False)
    ]


def test_codex_with_a_relative_binary_and_a_long_tmpdir(codex_env, tmp_path: Path) -> None:
    """--codex-bin relative to where ledger-run was started (codex itself starts in the work tree),
    and a TMPDIR too long for a Unix socket's path (the hook socket goes under /tmp instead)."""
    repo, fake, user_home, env = codex_env
    bindir = Path(CODEX).resolve().parent
    long_tmp = tmp_path / ("t" * 90)
    long_tmp.mkdir()
    run_dir = tmp_path / "rel"
    p = subprocess.run(
        [
            *hook_launcher(),
            "codex",
            "--codex-bin",
            "./" + Path(CODEX).resolve().name,
            "--workdir",
            str(repo),
            "-o",
            str(run_dir),
            "--",
            "exec",
            "--skip-git-repo-check",
            "Fix the failing test",
        ],
        env={**env, "TMPDIR": str(long_tmp)},
        cwd=bindir,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert len(load(run_dir).state.attempts) >= 3, "the hooks reached the ledger: the socket had a path that fits"
    assert not (run_dir / "faults.log").exists()


def test_codex_with_a_run_dir_that_cannot_be_written(codex_env, tmp_path: Path) -> None:
    repo, fake, user_home, env = codex_env
    p = ledger_run("codex", "--workdir", str(repo), "-o", "/proc/ledger-run-here", "--", "exec", "x", env=env, cwd=repo)
    assert p.returncode == 2 and "cannot write the run into -o /proc/ledger-run-here" in p.stderr
    assert "Traceback" not in p.stderr and not fake.agent_requests, "said before codex started"


def test_sigterm_stops_codex_and_finishes_the_ledger(codex_env, tmp_path: Path) -> None:
    """SIGTERM (or SIGHUP) to ledger-run reaches Codex; the ledger is finished and the hook socket's
    directory removed."""
    import glob
    import signal
    import tempfile

    repo, fake, user_home, env = codex_env
    fake.steps = [("exec", "cat calc.py"), ("exec", "cat calc.py"), ("say", "add() subtracts.")]
    with open(user_home / "config.toml", "a") as f:
        f.write(f'\n[projects."{repo}"]\ntrust_level = "trusted"\n')
    # a temp dir of its own (short: the socket's path): what other processes make in /tmp meanwhile is not ours
    private = tempfile.mkdtemp(prefix="lt-")
    sockets = os.path.join(private, "ledger-hook-*")
    run_dir = tmp_path / "term"
    tui = Tui(repo, {**env, "TMPDIR": private}, run_dir)
    status = None
    try:
        tui.ask(fake, b"what is wrong with calc.py", 3)
        assert glob.glob(sockets), "the hook socket's directory is there while the session runs"
        os.kill(tui.pid, signal.SIGTERM)
        end = time.time() + 30
        while time.time() < end:
            tui.pump(0.2)
            done, code = os.waitpid(tui.pid, os.WNOHANG)
            if done:
                status = code
                break
    finally:
        if status is None:
            tui.kill()
        os.close(tui.fd)
    assert status is not None, "ledger-run codex did not stop on SIGTERM: " + tui.screen[-1500:].decode(
        errors="replace"
    )
    assert len(load(run_dir).state.attempts) == 2
    assert not glob.glob(sockets), "the hook socket's directory is removed"
    shutil.rmtree(private, ignore_errors=True)


def test_codex_refuses_a_run_directory_another_ledger_writes(codex_env, tmp_path: Path) -> None:
    from ledger_runtime.config import LedgerConfig
    from ledger_runtime.runtime import LedgerRuntime

    repo, fake, user_home, env = codex_env
    held = LedgerRuntime(repo, tmp_path / "held", LedgerConfig())
    try:
        p = ledger_run(
            "codex", "--workdir", str(repo), "-o", str(tmp_path / "held"), "--", "exec", "x", env=env, cwd=repo
        )
    finally:
        held.close()
    assert p.returncode == 2 and "in use by another ledger" in p.stderr and "Traceback" not in p.stderr
    assert not fake.agent_requests


def test_codex_refuses_a_repository_with_hooks_of_its_own(codex_env, tmp_path: Path) -> None:
    """The run passes --dangerously-bypass-hook-trust for the ledger's hooks; Codex applies it to every
    layer, so a repository's own hooks would run unreviewed: refused unless asked for."""
    repo, fake, user_home, env = codex_env
    (repo / ".codex").mkdir()
    (repo / ".codex" / "hooks.json").write_text('{"PreToolUse": []}\n')
    p = ledger_run("codex", "--workdir", str(repo), "-o", str(tmp_path / "r1"), "--", "exec", "x", env=env, cwd=repo)
    assert p.returncode == 2 and ".codex/hooks.json defines Codex hooks" in p.stderr and not fake.agent_requests
    (repo / ".codex" / "hooks.json").unlink()
    (repo / ".codex" / "config.toml").write_text("[hooks]\nPreToolUse = []\n")
    p = ledger_run("codex", "--workdir", str(repo), "-o", str(tmp_path / "r2"), "--", "exec", "x", env=env, cwd=repo)
    assert p.returncode == 2 and ".codex/config.toml defines Codex hooks" in p.stderr
    p = ledger_run(
        "codex",
        "--allow-project-hooks",
        "--workdir",
        str(repo),
        "-o",
        str(tmp_path / "r3"),
        "--",
        "exec",
        "--skip-git-repo-check",
        "Fix the failing test",
        env=env,
        cwd=repo,
    )
    assert p.returncode == 0, p.stderr[-2000:]


# commands whose meaning a wrapper could change: bash syntax under SHELL=/bin/sh, a job left in the
# background, a terminal, another shell, no login shell, a long here-document full of quotes, an error
# message that names the line
QUOTED = "cat <<'EOF' | wc -c\n" + "x'y'z\n" * 3300 + "EOF"  # 20 KB, 6,600 single quotes
SAME_MEANING = [
    {
        "cmd": "echo {1..3}; [[ a == a ]] && echo dbl; x=hello; echo ${x:0:1}; echo $'t\\tab'; a=(p q); "
        "echo ${a[1]}; echo 'echo sourced' > s.sh; source ./s.sh; shopt login_shell; echo $0"
    },
    {"cmd": "sleep 25 & echo started-bg"},
    {"cmd": "[ -t 1 ] && echo tty || echo pipe; read -p 'name? ' n; echo got $n", "tty": True, "yield_time_ms": 3000},
    {"cmd": "echo $0 {1..3}", "shell": "/bin/sh"},
    {"cmd": "shopt login_shell", "login": False},
    {"cmd": QUOTED},
    {"cmd": "no_such_command_here"},
    {"cmd": "yes | head -n 2; echo ${PIPESTATUS[0]}"},  # SIGPIPE as a shell gives it (Python ignores it)
    {"cmd": 'echo $FROM_PROFILE; wc -l < "$HOME/profile-ran"'},  # the login profile read once per command
    {"cmd": "printf 'not UTF-8: \\377\\376 end\\n'; printf 'x%.0s' $(seq 1 300)"},  # bytes as they came
    # 30,000 control characters: 180 KB of JSON for the PostToolUse hook, which ends without reading it
    {"cmd": "head -c 30000 /dev/zero | tr '\\0' '\\1'; echo; echo end"},
]
PROFILE = 'echo ran >> "$HOME/profile-ran"\nexport FROM_PROFILE=yes\n'
# Codex snapshots the login profile at a session's start, off the commands' path, and runs a command with `-c` and
# the snapshot once it is ready, with `-lc` before: which one a first command gets is a race (a loaded machine lost
# it in one run of the two and not the other: 'login_shell on' against 'off', the profile read twice against once).
# Both runs without the snapshot: each command in Codex's login shell, the same in both.
NO_SNAPSHOT = ("--disable", "shell_snapshot")


def _seen(fake: FakeResponses) -> dict[str, str]:
    """What the model got for each call, without what differs from run to run (ids, wall times)."""
    import re

    out = function_outputs(fake.agent_requests[-1])
    return {
        c: re.sub(r"session ID \d+", "session ID N", re.sub(r"^(Chunk ID|Wall time): .*\n", "", text, flags=re.M))
        for c, text in out.items()
    }


def test_a_wrapped_command_means_what_it_means_without_the_ledger(codex_env, tmp_path: Path) -> None:
    """Side by side with plain Codex: each command gives the model the same output and exit code with
    the ledger as without it, and the ledger records that exit code."""
    repo, _, _, env = codex_env
    plain_repo = make_repo(tmp_path / "plain-repo", CALC_PROJECT)  # each run in a tree of its own
    env = {**env, "SHELL": "/bin/sh"}  # the wrapper must not take the shell from $SHELL
    homes = {}
    for name in ("plain", "ledger"):  # a login profile of each run's own, that counts its readings
        homes[name] = tmp_path / f"{name}-user"
        homes[name].mkdir()
        (homes[name] / ".bash_profile").write_text(PROFILE)
    steps = [("exec", c) for c in SAME_MEANING]
    plain = FakeResponses(steps, workdir=str(plain_repo))
    ledger = FakeResponses(steps, workdir=str(repo))
    try:
        plain_home = codex_user_home(tmp_path / "plain-home", plain.base_url)
        p = subprocess.run(
            [CODEX, *NO_SNAPSHOT, "exec", "--skip-git-repo-check", "go"],
            env={**env, "CODEX_HOME": str(plain_home), "HOME": str(homes["plain"])},
            cwd=plain_repo,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert p.returncode == 0, p.stderr[-2000:]
        ledger_home = codex_user_home(tmp_path / "ledger-home", ledger.base_url)
        run_dir = tmp_path / "run"
        started = time.monotonic()
        p = ledger_run(
            "codex",
            "--workdir",
            str(repo),
            "-o",
            str(run_dir),
            "--",
            *NO_SNAPSHOT,
            "exec",
            "--skip-git-repo-check",
            "go",
            env={**env, "CODEX_HOME": str(ledger_home), "HOME": str(homes["ledger"])},
            cwd=repo,
        )
        elapsed = time.monotonic() - started
        assert p.returncode == 0, p.stderr[-2000:]
        without, with_ledger = _seen(plain), _seen(ledger)
    finally:
        plain.close()
        ledger.close()
    assert without == with_ledger
    # (login_shell as Codex ran it: a login shell, without the snapshot)
    assert "1 2 3\ndbl\nh\nt\tab\nq\nsourced\nlogin_shell    \ton" in with_ledger["call_0"]
    assert with_ledger["call_1"].startswith("Process exited with code 0\n") and "started-bg" in with_ledger["call_1"]
    assert "tty\r\nname? " in with_ledger["call_2"] and "login_shell    \toff" in with_ledger["call_4"]
    assert "Output:\n19800\n" in with_ledger["call_5"] and "line 1: no_such_command_here" in with_ledger["call_6"]
    assert elapsed < 60, "the background job held nothing up"
    state = load(run_dir).state
    codes = {a.command.split()[0]: a.exit_code for a in state.attempts}
    assert codes["sleep"] == 0 and codes["shopt"] == 1 and codes["no_such_command_here"] == 127
    executed = rollout_commands(run_dir)
    # a terminal's command runs as it is, in the terminal: its output says "tty" (through the wrapper's
    # pipe it would say "pipe"); Codex writes its item when the session ends, which may end first
    assert "call_2" not in executed or " wrap --socket " not in executed["call_2"][-1]
    assert all(" wrap --socket " in executed[f"call_{i}"][-1] for i in (0, 1, 3, 4, 5, 6, 7))
    assert "Output:\ny\ny\n141\n" in with_ledger["call_7"]
    # what the login profile set reached the command, and the profile ran as often as without the
    # ledger (Codex reads it once per session into a snapshot, or once per command)
    assert "Output:\nyes\n" in with_ledger["call_8"] and without["call_8"] == with_ledger["call_8"]
    assert with_ledger["call_10"].endswith("\nend\n") and "\x01" * 1000 in with_ledger["call_10"]
    hooks_said = [line for line in p.stderr.splitlines() if line.startswith("hook: ")]
    assert not [line for line in hooks_said if "Failed" in line or "failed" in line], hooks_said
