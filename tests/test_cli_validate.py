"""The commands' ``validate`` called directly, without typer: bad options give the one-line error the
command line prints (``error: ...`` on stderr, exit 2), good ones the run they ask for."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from ledger_adapters.claude.cli import ClaudeOptions
from ledger_adapters.claude.cli import validate as validate_claude
from ledger_adapters.codex.cli import CODEX_DEFAULTS, CodexOptions
from ledger_adapters.codex.cli import validate as validate_codex
from ledger_runtime import LedgerOptions


def _error(capsys: pytest.CaptureFixture[str], check, options) -> str:
    """The one line ``check(options)`` prints before it exits with 2."""
    with pytest.raises(typer.Exit) as e:
        check(options)
    assert e.value.exit_code == 2
    return capsys.readouterr().err


@pytest.fixture
def agent_bin(tmp_path: Path) -> str:
    """An executable that stands for the agent's (validate only finds it)."""
    path = tmp_path / "bin" / "agent"
    path.parent.mkdir()
    path.write_text("#!/bin/sh\necho 1.0.0\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A work tree, with the agents' homes of the user's empty and out of it."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    (tmp_path / "workdir").mkdir()
    return tmp_path / "workdir"


def test_the_ledger_options_apply_their_switches_to_the_settings(tmp_path):
    config = LedgerOptions(no_inform=True, no_govern=True, shadow=True).config()
    assert (config.inform, config.govern, config.shadow) == (False, False, True)
    bad = tmp_path / "bad.toml"
    bad.write_text("no_such_setting = 1\n")
    with pytest.raises(typer.Exit):
        LedgerOptions(ledger_config=bad).config()


def test_claude_options_that_cannot_run_say_why_in_one_line(workdir, agent_bin, capsys, tmp_path):
    ok = LedgerOptions(workdir=workdir)
    err = _error(capsys, validate_claude, ClaudeOptions(ok, hook_transport="pigeon", claude_bin=agent_bin))
    assert err == "error: --hook-transport must be one of http, command, not 'pigeon'\n"
    err = _error(capsys, validate_claude, ClaudeOptions(ok, args=("-p", "hi", "--bare"), claude_bin=agent_bin))
    assert err.startswith("error: claude --bare turns Claude Code's hooks off")
    err = _error(capsys, validate_claude, ClaudeOptions(LedgerOptions(workdir=tmp_path / "nope"), claude_bin=agent_bin))
    assert err == f"error: --workdir {tmp_path / 'nope'} is not a directory\n"
    err = _error(capsys, validate_claude, ClaudeOptions(ok, claude_bin=str(tmp_path / "none")))
    assert err.startswith(f"error: claude not found at {tmp_path / 'none'}: install the pinned version")
    settings = ("--settings", '{"disableAllHooks": true}')
    err = _error(capsys, validate_claude, ClaudeOptions(ok, args=settings, claude_bin=agent_bin))
    assert err == "error: --settings sets disableAllHooks: Claude Code would run none of the ledger's hooks\n"
    settings = ("--settings", '{"env": {"ANTHROPIC_API_KEY": "sk-ant-api03-SECRETVALUE"')  # cut short: not JSON
    err = _error(capsys, validate_claude, ClaudeOptions(ok, args=settings, claude_bin=agent_bin))
    assert err == "error: --settings (the JSON given): not JSON: Expecting ',' delimiter at line 1, column 57\n", err


def test_claude_options_that_can_run_are_the_run(workdir, agent_bin):
    settings = '{"env": {"A": "1"}}'
    given = ClaudeOptions(
        LedgerOptions(workdir=workdir, shadow=True), args=("-p", "hi", "--settings", settings), claude_bin=agent_bin
    )
    run = validate_claude(given)
    assert (run.binary, run.args, run.workdir, run.settings) == (agent_bin, ["-p", "hi"], workdir, {"env": {"A": "1"}})
    assert run.config.shadow and run.options is given


def test_codex_options_that_cannot_run_say_why_in_one_line(workdir, agent_bin, capsys, tmp_path):
    err = _error(capsys, validate_codex, CodexOptions(LedgerOptions(workdir=tmp_path / "nope"), codex_bin=agent_bin))
    assert err == f"error: --workdir {tmp_path / 'nope'} is not a directory\n"
    err = _error(capsys, validate_codex, CodexOptions(args=("-C", str(tmp_path / "gone")), codex_bin=agent_bin))
    assert err == f"error: --workdir {tmp_path / 'gone'} is not a directory\n"
    (workdir / ".codex").mkdir()
    (workdir / ".codex" / "hooks.json").write_text("{}")
    err = _error(capsys, validate_codex, CodexOptions(LedgerOptions(workdir=workdir), codex_bin=agent_bin))
    assert err.startswith(f"error: {workdir / '.codex' / 'hooks.json'} defines Codex hooks of the repository's own")
    allowed = CodexOptions(LedgerOptions(workdir=workdir), codex_bin=str(tmp_path / "none"), allow_project_hooks=True)
    err = _error(capsys, validate_codex, allowed)
    assert err.startswith(f"error: codex not found at {tmp_path / 'none'}: install the pinned version")


def test_codex_options_that_can_run_are_the_run(workdir, agent_bin, monkeypatch):
    monkeypatch.chdir(workdir.parent)
    run = validate_codex(CodexOptions(args=("exec", "-C", "workdir", "fix it"), codex_bin=agent_bin))
    assert (run.binary, run.workdir, run.args) == (agent_bin, workdir, ["exec", "-C", str(workdir), "fix it"])
    assert run.config.inform and CODEX_DEFAULTS == {}


@pytest.fixture
def quiet_mini(monkeypatch: pytest.MonkeyPatch) -> None:
    """mini's validate sets these for mini-swe-agent's start-up: put back after the test."""
    for name, value in (
        ("MSWEA_CONFIGURED", "1"),
        ("MSWEA_SILENT_STARTUP", "1"),
        ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
    ):
        monkeypatch.setenv(name, value)


def test_mini_options_that_cannot_run_say_why_in_one_line(workdir, capsys, tmp_path, quiet_mini, monkeypatch):
    from ledger_adapters.mini.cli import MiniOptions
    from ledger_adapters.mini.cli import validate as validate_mini

    out = tmp_path / "run"
    ok = LedgerOptions(workdir=workdir, run_dir=out)
    err = _error(capsys, validate_mini, MiniOptions(LedgerOptions(workdir=tmp_path / "nope"), task="t"))
    assert err == f"error: --workdir {tmp_path / 'nope'} is not a directory\n"
    err = _error(capsys, validate_mini, MiniOptions(ok, task="t", context="sometimes"))
    assert err.startswith("error: ") and "sometimes" in err and err.count("\n") == 1
    err = _error(capsys, validate_mini, MiniOptions(ok, task="t", config=(str(tmp_path / "none.yaml"),)))
    assert err.startswith(f"error: -c {tmp_path / 'none.yaml'}: no such config file") and err.count("\n") == 1
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    err = _error(capsys, validate_mini, MiniOptions(ok))
    assert err == "error: no task: pass -t TASK (there is no terminal to ask for one)\n"
    assert not out.exists(), "a run that could not start leaves no empty run directory behind"


def test_mini_options_that_can_run_are_the_run(workdir, tmp_path, quiet_mini):
    from ledger_adapters.mini.cli import MiniOptions
    from ledger_adapters.mini.cli import validate as validate_mini

    options = MiniOptions(
        LedgerOptions(workdir=workdir, run_dir=tmp_path / "run", shadow=True),
        model="openai/gpt-5-mini",
        api_base="http://127.0.0.1:9/v1",
        task="fix it",
        context="window:3",
        yolo=True,
    )
    run = validate_mini(options)
    assert (run.workdir, run.run_dir, run.task, run.inner_env, run.inner_model) == (
        workdir,
        tmp_path / "run",
        "fix it",
        "local",
        "",
    )
    env, model = run.cfg["environment"], run.cfg["model"]
    assert env["environment_class"] == "ledger_adapters.mini.environment.LedgerEnvironment"
    assert env["ledger"] == {
        "run_dir": str(tmp_path / "run"),
        "inform": True,
        "govern": True,
        "shadow": True,
        "task": "fix it",
        "context": "window:3",
    }
    assert model["model_name"] == "openai/gpt-5-mini"
    assert model["model_kwargs"]["api_base"] == "http://127.0.0.1:9/v1"
    assert run.cfg["agent"]["mode"] == "yolo"
    assert run.cfg["agent"]["output_path"] == str(tmp_path / "run" / "trajectory.traj.json")


@pytest.fixture
def ledger(repo: Path, tmp_path: Path) -> Path:
    """A run of two commands (steps 1 and 2)."""
    from ledger_runtime import LedgerConfig, LedgerRuntime, LocalExecutor

    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig(), task="read")
    for command in ("ls", "ls -a"):
        rt.run(command, LocalExecutor())
    rt.close()
    return tmp_path / "run"


def test_inspect_options_that_cannot_go_on_say_why_in_one_line(ledger, capsys, tmp_path):
    from ledger_runtime.cli.inspect_command import InspectOptions
    from ledger_runtime.cli.inspect_command import validate as validate_inspect

    def error(**given) -> str:
        return _error(capsys, validate_inspect, InspectOptions(given.pop("run", ledger), **given))

    assert error(verdict="run,maybe") == ("error: --verdict: unknown MAYBE (known: RUN, REUSE, NUDGE, REVISE, BLOCK)\n")
    assert error(command_class="nap").startswith("error: --class: unknown nap (known: inspect, search, ")
    assert error(verdict=" ,") == "error: --verdict: give at least one of RUN, REUSE, NUDGE, REVISE, BLOCK\n"
    broken = tmp_path / "t.traj.json"
    broken.write_text('{"info": {"ledger": ')  # a trajectory cut short
    assert error(run=broken).startswith(f"error: not a ledger: {broken}: a JSON file that does not parse (")
    (tmp_path / "empty").mkdir()
    not_a_ledger = error(run=tmp_path / "empty")
    assert not_a_ledger.startswith("error: ") and not_a_ledger.count("\n") == 1
    assert error(step=-1) == "error: --step must be 0 or more, not -1\n"
    assert error(step=9) == "error: --step 9 is past the last step of this ledger (2)\n"
    assert error(expand=True) == "error: --output and --expand need --step N (the step whose command to show)\n"
    assert error(raw=True) == "error: --raw goes with --step N (its state view, --output or --expand)\n"
    assert error(step=1, raw=True, as_json=True) == "error: --raw is for text on stdout: not with --json or --html\n"
    assert error(trajectory=tmp_path / "t.json") == (
        "error: --trajectory goes with --html (the page shows the model's words from it)\n"
    )
    assert error(html=tmp_path / "p.html", trajectory=tmp_path / "t.json") == (
        f"error: --trajectory {tmp_path / 't.json'}: no such file\n"
    )
    assert error(step=1, html=tmp_path / "p.html") == (
        "error: --html writes the whole run's page (each step is a section of it): not with --step\n"
    )


def test_a_trajectory_named_for_the_page_that_no_format_reads_is_an_error_not_a_line_on_the_page(ledger, tmp_path):
    """``inspect RUN --html P --trajectory FILE`` with a FILE that is no agent's record: one line and exit 2, no page
    (it said so only inside the page's summary, with exit 0)."""
    from cli_support import ledger_run, one_line_error

    for name, text in (("passwd", "root:x:0:0:root:/root:/bin/bash\n"), ("x.json", '{"x": 1}\n')):
        (tmp_path / name).write_text(text)
        r = ledger_run("inspect", str(ledger), "--html", str(tmp_path / "p.html"), "--trajectory", str(tmp_path / name))
        line = one_line_error(r)
        assert r.returncode == 2 and f"--trajectory {tmp_path / name}: no installed format reads it (" in line, line
        assert "not a mini-swe-agent trajectory" in line and not (tmp_path / "p.html").exists()


def test_inspect_options_that_can_go_on_are_the_inspection(ledger, capsys):
    from ledger_runtime.cli.inspect_command import InspectOptions, run
    from ledger_runtime.cli.inspect_command import validate as validate_inspect

    inspection = validate_inspect(InspectOptions(ledger, verdict=" run , reuse", command_class="Inspect"))
    assert (inspection.verdicts, inspection.classes) == ({"RUN", "REUSE"}, {"inspect"})
    assert inspection.loaded.state.step == 2
    # --output without its trajectory check: --trajectory is looked at only for a page
    at_step = validate_inspect(InspectOptions(ledger, step=2, output=True, trajectory=Path("not-there")))
    run(at_step)
    assert capsys.readouterr().out.strip()
