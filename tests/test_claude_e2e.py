"""``ledger-run claude`` end to end: the REAL claude binary (the pinned npm package) against a fake
Anthropic Messages API on loopback (tests/fake_messages.py), headless (``-p``) and in an interactive
session (through a pseudo-terminal). Without a claude binary these tests skip, saying so; CI installs
it and sets LEDGER_REQUIRE_CLAUDE=1, which turns a missing binary into a failure."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import CALC_PROJECT, make_repo
from fake_messages import FakeMessages, claude_env, context_texts, tool_results
from terminal import Terminal, drawn, visible

from ledger_adapters.claude.cli import CLAUDE_VERSION, find_claude
from ledger_runtime import hook_launcher
from ledger_runtime.inspection import load
from ledger_runtime.records import VerdictKind

CLAUDE = find_claude(None)
if CLAUDE is None and os.environ.get("LEDGER_REQUIRE_CLAUDE"):
    raise RuntimeError(
        "LEDGER_REQUIRE_CLAUDE is set but no claude binary was found "
        f"(npm install -g @anthropic-ai/claude-code@{CLAUDE_VERSION})"
    )
pytestmark = pytest.mark.skipif(
    CLAUDE is None,
    reason="no claude binary on PATH or in $LEDGER_CLAUDE_BIN "
    f"(npm install -g @anthropic-ai/claude-code@{CLAUDE_VERSION})",
)

TEST = "python3 -m unittest -q test_calc"
SECRET = "tok-5f2c8a91d0e34b7c"
ALLOWED = "--allowedTools=Bash,Edit,Write,Read"  # the permissions a headless run needs, given as users give them


class Session:
    """A repository, a fake model and a user of their own; ``run`` is one ``ledger-run claude -p``."""

    def __init__(self, tmp: Path, steps: list[tuple]):
        self.tmp = tmp
        self.repo = make_repo(tmp / "repo", CALC_PROJECT)
        self.fake = FakeMessages(steps)
        (tmp / "home").mkdir()
        self.env = claude_env(os.environ, self.fake, tmp / "home")
        self.env["LEDGER_CLAUDE_BIN"] = CLAUDE or ""
        self.run_dir = tmp / "run"

    def path(self, name: str) -> str:
        return str(self.repo / name)

    def run(
        self, *claude_args: str, prompt: str = "Fix the failing test", ledger: tuple[str, ...] = ()
    ) -> subprocess.CompletedProcess:
        argv = [*hook_launcher(), "claude", "-w", str(self.repo), "-o", str(self.run_dir), *ledger, "--"]
        argv += ["-p", "--output-format", "stream-json", "--verbose", ALLOWED, *claude_args, prompt]
        return subprocess.run(argv, env=self.env, cwd=self.repo, capture_output=True, text=True, timeout=300)

    def seen(self) -> dict[str, str]:
        """What the model got for each tool call, from the last request Claude Code sent."""
        return tool_results(self.fake.requests[-1])

    def context(self) -> str:
        return "\n".join(context_texts(self.fake.requests[-1]))

    def rows(self) -> list[tuple[Any, ...]]:
        state = load(self.run_dir).state
        return [(a.command.splitlines()[0], a.verdict.kind, a.executed, a.exit_code) for a in state.attempts]

    def faults(self) -> str:
        f = self.run_dir / "faults.log"
        return f.read_text() if f.exists() else ""

    def session_id(self, out: str) -> str:
        return json.loads(out.splitlines()[0])["session_id"]


@pytest.fixture
def session(tmp_path: Path):
    made: list[Session] = []

    def make(steps: list[tuple]) -> Session:
        made.append(Session(tmp_path, steps))
        return made[-1]

    yield make
    for s in made:
        s.fake.close()


def test_a_repeated_cat_is_a_reference_and_a_read_after_a_command_is_flagged(session) -> None:
    s = session([])
    s.fake.steps = [
        ("bash", "cat calc.py"),
        ("bash", "cat calc.py"),
        ("tool", "Read", {"file_path": s.path("calc.py")}),
        ("bash", "sed -i 's/return a - b/return a + b/' calc.py"),
        ("tool", "Read", {"file_path": s.path("calc.py")}),
        ("bash", "echo token: $MY_SERVICE_TOKEN"),
        ("say", "add() adds now."),
    ]
    s.env["MY_SERVICE_TOKEN"] = SECRET  # a secret in the user's environment, which a command prints
    user_config = s.tmp / "home" / ".claude"
    p = s.run()
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"ledger-run inspect {s.run_dir}" in p.stderr
    assert "no hook of" not in p.stderr, "the hooks reached the ledger: no warning"
    assert s.rows() == [
        ("cat calc.py", VerdictKind.RUN, True, 0),
        ("cat calc.py", VerdictKind.RUN, True, 0),
        ("Read calc.py", VerdictKind.RUN, True, 0),
        ("sed -i 's/return a - b/return a + b/' calc.py", VerdictKind.RUN, True, 0),
        ("Read calc.py", VerdictKind.RUN, True, 0),
        ("echo token: $MY_SERVICE_TOKEN", VerdictKind.RUN, True, 0),
        ("(end of turn)", VerdictKind.REVISE, False, None),  # calc.py changed and no test ran: held back once
    ]
    seen = s.seen()
    assert seen["toolu_0_0"] == CALC_PROJECT["calc.py"].strip("\n")  # as Claude Code shows any output
    # the second cat ran, and its output, the same, came back as a reference the model can trust
    assert seen["toolu_1_0"] == "[ledger: same as step 1's output (`cat calc.py`, exit 0)]"
    # Claude Code's Read is shown as it is; re-read after a command changed the file, it is flagged
    assert seen["toolu_4_0"].startswith("1\tdef add(a, b):\n2\t    return a + b\n")
    ctx = s.context()
    sed = "`sed -i 's/return a - b/return a + b/' calc.py`"
    assert f"[ledger] calc.py changed since you saw it at step 3: {sed} (step 4) changed it." in ctx
    assert "-    return a - b\n+    return a + b\n" in ctx
    assert not s.faults(), s.faults()
    state = load(s.run_dir).state
    calc = s.path("calc.py")
    reads = state.observations_of(calc)
    # what the model was shown of calc.py, checked against the file: both cats (Claude Code trims the
    # two blank lines the file ends with: not seen) and both Reads (every line, numbered)
    lines = CALC_PROJECT["calc.py"].count("\n")
    assert [(o.step, o.span_text()) for o in reads] == [
        (1, f"1-{lines - 2}"),
        (2, f"1-{lines - 2}"),
        (3, "whole"),
        (5, "whole"),
    ]
    assert reads[-1].content_hash != reads[0].content_hash  # each signed by the content it was checked against
    (mod,) = state.modifications_of(calc)
    assert (mod.step, mod.recognised) == (4, True)
    # the user's own Claude Code configuration is read, never written: no settings of the ledger's there
    assert not (user_config / "settings.json").exists()
    settings = json.loads((s.run_dir / "claude" / "settings.json").read_text())
    assert set(settings["hooks"]) >= {"PreToolUse", "PostToolUse", "Stop", "SessionStart", "PreCompact"}
    hook = settings["hooks"]["Stop"][-1]["hooks"][0]
    assert hook["type"] == "http" and hook["url"].startswith("http://127.0.0.1:")
    secret = hook["headers"]["Authorization"].split()[1]
    assert not any(secret in json.dumps(r) for r in s.fake.requests), "the model never sees the run's secret"
    loose = [str(f) for f in s.run_dir.rglob("*") if f.stat().st_mode & 0o077]
    assert not loose, f"the run's files are owner-only: {loose}"
    assert seen["toolu_5_0"] == f"token: {SECRET}", "what the model is shown is not changed"
    (kept,) = (s.run_dir / "transcripts").glob("*.jsonl")
    assert "token: ****" in kept.read_text() and SECRET not in kept.read_text(), "the transcript's copy is masked"
    ledger = (s.run_dir / "ledger.sqlite").read_bytes()
    assert SECRET.encode() not in ledger, "the ledger keeps the output masked"


def test_a_reread_after_an_edit_is_a_diff_and_inspect_reads_the_run(session) -> None:
    s = session([])
    s.fake.steps = [
        ("bash", "cat calc.py"),
        ("tool", "Read", {"file_path": s.path("calc.py")}),
        ("tool", "Edit", {"file_path": s.path("calc.py"), "old_string": "return a - b", "new_string": "return a + b"}),
        ("bash", "cat calc.py"),
        ("bash", TEST),
        ("say", "Fixed add(); the test passes."),
    ]
    p = s.run()
    assert p.returncode == 0, p.stderr[-3000:]
    reread = s.seen()["toolu_3_0"]
    assert reread.startswith("[ledger: step 1's output (`cat calc.py`) with these changes, a unified diff")
    assert "-    return a - b\n+    return a + b" in reread and len(reread) < 400
    state = load(s.run_dir).state
    edit = state.attempts[2]
    assert (edit.command, edit.command_class.value, edit.exit_code) == ("Edit calc.py", "modify", 0)
    (mod,) = state.modifications_of_attempt(edit.id)
    assert (Path(mod.path).name, mod.lines_added, mod.lines_removed, mod.recognised) == ("calc.py", 1, 1, True)
    assert mod.after_hash and mod.after_hash != mod.before_hash
    assert not s.faults(), s.faults()
    out = subprocess.run(
        [*hook_launcher(), "inspect", str(s.run_dir), "--json"], capture_output=True, text=True, env=s.env
    )
    assert out.returncode == 0 and json.loads(out.stdout)["summary"]["answers"].get("delta") == 1, out.stdout[-800:]
    page = s.tmp / "run.html"
    out = subprocess.run(
        [*hook_launcher(), "inspect", str(s.run_dir), "--html", str(page)], capture_output=True, text=True, env=s.env
    )
    assert out.returncode == 0, out.stderr
    assert "Edit calc.py" in page.read_text() and "with these changes" in page.read_text()


def test_policies_deny_a_protected_edit_and_a_destructive_command(session, tmp_path: Path) -> None:
    s = session([])
    config = tmp_path / "ledger.toml"
    config.write_text('[ledger.policies.protected-paths]\nglobs = ["test_*.py"]\n')
    s.fake.steps = [
        ("tool", "Read", {"file_path": s.path("test_calc.py")}),
        ("tool", "Edit", {"file_path": s.path("test_calc.py"), "old_string": "5)", "new_string": "-1)"}),
        ("bash", "git reset --hard"),
        ("say", "I will leave the tests alone."),
    ]
    (s.repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")  # work a reset would throw away
    p = s.run(ledger=("--ledger-config", str(config)))
    assert p.returncode == 0, p.stderr[-3000:]
    seen = s.seen()
    assert seen["toolu_1_0"].startswith(
        "PreToolUse:Edit hook error: [ledger] REVISE by policy protected-paths: test_calc.py matches the protected glob"
    )
    assert seen["toolu_2_0"].startswith("PreToolUse:Bash hook error: [ledger] BLOCK by policy destructive")
    assert (s.repo / "test_calc.py").read_text() == CALC_PROJECT["test_calc.py"], "the edit did not happen"
    assert (s.repo / "calc.py").read_text().endswith("a + b\n"), "the reset did not run"
    state = load(s.run_dir).state
    assert [(a.command.split()[0], a.verdict.kind, a.verdict.rule, a.executed) for a in state.attempts[1:]] == [
        ("Edit", VerdictKind.REVISE, "protected-paths", False),
        ("git", VerdictKind.BLOCK, "destructive", False),
    ]


def test_the_stop_hook_holds_back_an_unverified_finish_and_repeat_failures_are_nudged(session) -> None:
    s = session([])
    s.fake.steps = [
        ("tool", "Read", {"file_path": s.path("calc.py")}),
        ("tool", "Edit", {"file_path": s.path("calc.py"), "old_string": "return a - b", "new_string": "return a * b"}),
        ("say", "Fixed."),  # a finish with an edit no test has checked: held back
        ("bash", TEST),
        ("bash", TEST),  # the same failing command, nothing changed: a NUDGE in the same turn
        ("tool", "Edit", {"file_path": s.path("calc.py"), "old_string": "return a * b", "new_string": "return a + b"}),
        ("bash", TEST),
        ("say", "Fixed and tested."),
    ]
    p = s.run()
    assert p.returncode == 0, p.stderr[-3000:]
    assert [r[:2] for r in s.rows()] == [
        ("Read calc.py", VerdictKind.RUN),
        ("Edit calc.py", VerdictKind.RUN),
        ("(end of turn)", VerdictKind.REVISE),
        (TEST, VerdictKind.RUN),
        (TEST, VerdictKind.NUDGE),
        ("Edit calc.py", VerdictKind.RUN),
        (TEST, VerdictKind.RUN),
    ]
    assert [r[3] for r in s.rows()[3:5]] == [1, 1] and s.rows()[6][3] == 0
    ctx = s.context()
    assert (
        "Stop hook feedback:\n[ledger] REVISE by policy verify-before-submit: files changed and no test or script has "
        "run since the start: calc.py (step 2).\nYour turn goes on" in ctx
    )
    assert (
        "PostToolUseFailure:Bash hook additional context: [ledger] NUDGE: repeat-failure: no tracked file changed"
        in ctx
    )
    assert len(s.fake.requests) == len(s.fake.steps), "the second finish went through"
    assert not s.faults(), s.faults()


def test_a_hook_fault_lets_the_call_go_on_with_its_own_output(session) -> None:
    """The hook channel gone mid-run (command hooks: the hook socket removed): the hooks say so in
    faults.log and every call goes on as without the ledger; the model gets the command's own output,
    never a reference."""
    s = session([("bash", "cat calc.py"), ("bash", "cat calc.py"), ("say", "Read it twice.")])

    def cut(turn: int) -> None:
        if turn == 1:  # the model's second call is about to come: the hook socket goes away
            script = (s.run_dir / "claude" / "hook").read_text()
            os.unlink(re.search(r"--socket (\S+)", script).group(1))

    s.fake.on_request = cut
    p = s.run(ledger=("--hook-transport", "command"))
    assert p.returncode == 0, p.stderr[-3000:]
    seen = s.seen()
    assert seen["toolu_1_0"] == seen["toolu_0_0"] == CALC_PROJECT["calc.py"].strip("\n")
    assert "did not answer" in s.faults()
    assert [r[:2] for r in s.rows()] == [("cat calc.py", VerdictKind.RUN)]


def test_claude_goes_on_when_ledger_run_dies(session) -> None:
    """HTTP hooks (the default) to a ledger that is gone (ledger-run killed): Claude Code's hooks fail
    open, and the session goes on with the commands' own outputs."""
    s = session([("bash", "cat calc.py"), ("bash", "cat calc.py"), ("say", "Read it twice.")])
    argv = [*hook_launcher(), "claude", "-w", str(s.repo), "-o", str(s.run_dir), "--"]
    argv += ["-p", "--output-format", "stream-json", "--verbose", ALLOWED, "look"]
    proc = subprocess.Popen(argv, env=s.env, cwd=s.repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def kill(turn: int) -> None:
        if turn == 1:
            proc.kill()  # SIGKILL: no finishing, the hook server gone with it; claude is left running

    s.fake.on_request = kill
    try:
        proc.communicate(timeout=300)  # claude holds the pipes until it exits
    finally:
        proc.kill()
    assert len(s.fake.requests) == 3, "claude went on to the end of the script"
    assert s.seen()["toolu_1_0"] == CALC_PROJECT["calc.py"].strip("\n")
    assert [r[:2] for r in s.rows()] == [("cat calc.py", VerdictKind.RUN)]


def test_after_a_compaction_or_a_rewind_no_answer_refers_to_what_the_model_lost(session) -> None:
    """Runs resumed on one ledger: a plain resume keeps what the model was shown (a reference);
    after /compact, or resumed at an earlier entry (the headless /rewind), the model no longer holds
    it, and the same output comes back in full."""
    s = session([])
    s.fake.steps = [("bash", "cat calc.py"), ("say", "Seen.")]
    p = s.run(prompt="look at calc.py")
    assert p.returncode == 0, p.stderr[-3000:]
    sid = s.session_id(p.stdout)

    def again(*args: str, prompt: str = "look again") -> str:
        start = len(s.fake.requests)
        s.fake.steps = s.fake.steps[:start] + [("bash", "cat calc.py"), ("say", "Seen again.")]
        p = s.run("--resume", sid, *args, prompt=prompt)
        assert p.returncode == 0, p.stderr[-3000:]
        return tool_results(s.fake.requests[-1])[f"toolu_{start}_0"]

    full = CALC_PROJECT["calc.py"].strip("\n")
    assert again() == "[ledger: same as step 1's output (`cat calc.py`, exit 0)]"
    first_prompt = next(
        json.loads(line)["uuid"]
        for line in next((s.tmp / "home" / ".claude" / "projects").rglob(f"{sid}.jsonl")).read_text().splitlines()
        if json.loads(line).get("type") == "user"
    )
    assert again("--resume-session-at", first_prompt) == full  # rewound to before any output
    p = s.run("--resume", sid, prompt="/compact")
    assert p.returncode == 0, p.stderr[-3000:]
    assert s.fake.compactions, "Claude Code compacted the conversation"
    assert again() == full
    assert not s.faults(), s.faults()


class Tui(Terminal):
    """``ledger-run claude`` in an interactive session, on a pseudo-terminal."""

    def __init__(self, s: Session, *ledger_args: str):
        cfg = Path(s.env["CLAUDE_CONFIG_DIR"])
        cfg.mkdir(parents=True, exist_ok=True)
        key = s.env["ANTHROPIC_API_KEY"]
        # a user who has used Claude Code before: onboarding done, this API key approved, the folder trusted
        (cfg / ".claude.json").write_text(
            json.dumps(
                {
                    "hasCompletedOnboarding": True,
                    "theme": "dark",
                    "numStartups": 5,
                    "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
                    "projects": {str(s.repo): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}},
                }
            )
        )
        argv = [*hook_launcher(), "claude", "-o", str(s.run_dir), *ledger_args, "--", ALLOWED]
        super().__init__(argv, str(s.repo), s.env)

    def type(self, text: bytes) -> None:
        os.write(self.fd, text)
        self.pump(1)
        os.write(self.fd, b"\r")

    def close(self) -> int | None:
        return self.wait(20)


def test_an_interactive_session_with_the_ledger_asks_the_user_over_a_revise(session, tmp_path: Path) -> None:
    s = session([])
    config = tmp_path / "ledger.toml"
    config.write_text('[ledger.policies.protected-paths]\nglobs = ["test_*.py"]\n')
    s.fake.steps = [
        ("bash", "cat calc.py"),
        ("bash", "cat calc.py"),
        ("tool", "Read", {"file_path": s.path("test_calc.py")}),
        ("tool", "Edit", {"file_path": s.path("test_calc.py"), "old_string": "5)", "new_string": "-1)"}),
        ("say", "Changed the test."),
    ]
    tui = Tui(s, "--ledger-config", str(config))
    try:
        assert tui.until(lambda: drawn(tui.screen, "auto mode") or drawn(tui.screen, "\u276f")), tui.screen[-800:]
        tui.pump(1)
        tui.ask(b"what is wrong with calc.py", s.fake.requests)
        # the protected edit: Claude Code asks the user, with the rule's reason
        assert tui.until(lambda: drawn(tui.screen, "requires confirmation")), visible(tui.screen)
        assert drawn(tui.screen, "protected-paths")
        assert tui.until(lambda: drawn(tui.screen, "amend")), visible(tui.screen)  # the dialog drawn to its last line
        tui.pump(1)
        # 1. Yes: the user lets it run
        tui.press_enter_until(lambda: len(s.fake.requests) >= 6, "the edit never ran")
        tui.pump(2)
        tui.type(b"/exit")
    finally:
        status = tui.close()
    assert status is not None and os.waitstatus_to_exitcode(status) == 0, tui.screen[-1500:]
    seen = tool_results(s.fake.requests[4])
    assert seen["toolu_1_0"] == "[ledger: same as step 1's output (`cat calc.py`, exit 0)]"
    assert (s.repo / "test_calc.py").read_text().endswith("-1)\n"), "the user let the edit run"
    state = load(s.run_dir).state
    edit = state.attempts[3]
    assert (edit.command, edit.verdict.kind, edit.executed) == ("Edit test_calc.py", VerdictKind.RUN, True)
    assert edit.verdict.reason.startswith("the user let it run over protected-paths")
    assert state.baseline.task == "what is wrong with calc.py"
    assert not s.faults(), s.faults()
