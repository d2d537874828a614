"""What a new user met, round four: each case as the user met it, through the real ``ledger-run`` in a
subprocess with no terminal."""

from __future__ import annotations

import pytest
from cli_support import ledger_run, one_line_error
from conftest import make_repo


@pytest.mark.parametrize(
    "command, usage",
    [
        ("inspect", "inspect [OPTIONS] RUN"),
        ("replay", "replay [OPTIONS] TRAJECTORIES..."),
        ("report", "report [OPTIONS] OUT"),
        ("codex", "codex [OPTIONS] [CODEX_ARGS]..."),
    ],
)
def test_usage_names_arguments_in_capitals_and_types_once_per_value(command, usage):
    """typer wrote ``inspect [OPTIONS] {run}`` and ``<list[Path]>`` for a repeated path."""
    r = ledger_run(command, "--help", env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    assert usage in r.stdout, r.stdout[:400]
    assert "{" not in r.stdout.splitlines()[1] and "<list[" not in r.stdout, r.stdout


# -- ledger-run mini's bad input: one short line, nothing of mini-swe-agent's or litellm's around it ---------


def _mini_error(tmp_path, *args: str, key: str = "x") -> tuple[str, str]:
    """``ledger-run mini ARGS`` in a fresh repository, no terminal: its one error line, and all it printed."""
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    r = ledger_run("mini", "-t", "x", "-w", str(repo), "-o", str(tmp_path / "run"), *args, env={"OPENAI_API_KEY": key})
    return one_line_error(r), r.stdout + r.stderr


@pytest.mark.parametrize(
    "args, says",
    [
        (("-y", "-m", "openai/gpt-5-mini", "--environment-class", "bogus"), "not one of mini-swe-agent's (docker,"),
        (("-y", "-m", "openai/gpt-5-mini", "--model-class", "bogus"), "not one of mini-swe-agent's (litellm,"),
        (
            ("-y", "-m", "openai/gpt-5-mini", "-c", "mini.yaml", "-c", "environment.environment_class=bogus"),
            "-c environment.environment_class=bogus: not one of mini-swe-agent's (docker,",
        ),
        (("-y", "-m", "openai/gpt-5-mini", "-c", "agent.step_limit"), "a setting is KEY=VALUE"),
        (("-y", "-m", "openai/gpt-5-mini", "-c", "no-such.yaml"), "no such config file"),
        (("-y", "-m", "openai/gpt-5-mini", "-c", "agent.step_limit=3"), "-c mini.yaml -c agent.step_limit=3"),
        (("-y", "-m", "scripted"), "litellm knows no provider for this name"),
        (
            (
                "-m",
                "openai/gpt-5-mini",
            ),
            "pass -y (--yolo)",
        ),
    ],
)
def test_mini_s_bad_input_is_one_short_line_and_nothing_else(tmp_path, args, says):
    """Each was mini-swe-agent's own error (every class or path it tried, on one 600-character line),
    prompt_toolkit's "Warning: Input is not a terminal", litellm's red "Provider List" banner and the
    whole system prompt before a failure at the first call, or a run ended by "EOFError" at the first
    confirmation nobody could give."""
    error, printed = _mini_error(tmp_path, *args)
    assert says in error, error
    assert len(error) < 260 and "PosixPath" not in error and "{" not in error, error
    assert printed.strip() == error, printed
    assert not (tmp_path / "run").exists()


def test_the_demo_and_inspect_leave_no_trailing_spaces_in_a_file(tmp_path):
    """rich padded the demo's notes under a command, wrapped lines and the summary's title, and every
    row of inspect's timeline, to 80 columns: a file or a pipe kept the spaces. And "1 times"."""
    demo = ledger_run("demo", "-o", str(tmp_path / "d"))
    inspect = ledger_run("inspect", str(tmp_path / "d" / "run"))
    for r in (demo, inspect):
        assert r.returncode == 0, r.stderr[-2000:]
        padded = [ln for ln in r.stdout.splitlines() if ln.endswith(" ")]
        assert not padded, padded
    assert "repeat-failure: no tracked file changed since step 4" in demo.stdout
    assert "│ steps / commands   │ 11 / 11 (11 executed)" in inspect.stdout
    assert "reached the model 1 time " in " ".join(demo.stdout.split())


def test_config_write_says_where_in_one_line(tmp_path):
    """At 80 columns the line broke before ``--ledger-config FILE``, the part to copy."""
    target = tmp_path / "a-settings-file-with-a-long-name.toml"
    r = ledger_run("config", "--write", str(target), env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        f"wrote {target}: every setting at its default, commented out; use it with --ledger-config {target}"
    ]


def test_mini_s_help_says_y_is_needed_without_a_terminal():
    """A run from a script without -y is refused (it ended in 'EOFError' at the first confirmation):
    the option's help says when it is needed."""
    r = ledger_run("mini", "--help", env={"COLUMNS": "200"})
    line = next(ln for ln in r.stdout.splitlines() if "--yolo" in ln)
    assert "needed with no terminal to ask on" in line, line


@pytest.mark.parametrize(
    "args, suggested",
    [
        (("demo", "--bogus"), None),
        (("replay", "--bogus"), None),
        (("demo", "--outt"), "--out"),
        (("inspect", "--ste"), "--step"),
        (("mini", "--modle"), "--model"),
    ],
)
def test_an_unknown_option_is_offered_only_options_like_it(args, suggested):
    """click compared names dashes included: ``demo --bogus`` was offered ``--out``, ``replay --bogus``
    ``--jobs, --out, --outputs``."""
    error = one_line_error(ledger_run(*args))
    if suggested is None:
        assert "Possible options" not in error, error
    else:
        assert f"(Possible options: {suggested})" in error, error


def test_the_demo_s_commands_to_copy_are_whole_on_their_lines_at_80_columns(tmp_path):
    """'look inside: ... (the state view at a step: ledger-run inspect RUN --step 5)' broke mid-command."""
    r = ledger_run("demo", "-o", str(tmp_path / "d"), env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr[-2000:]
    run = tmp_path / "d" / "run"
    lines = r.stdout.splitlines()
    assert f"look inside: ledger-run inspect {run}" in lines, lines[-4:]
    assert f"the state view at a step: ledger-run inspect {run} --step 5" in lines, lines[-4:]


def test_a_missing_argument_is_named_as_the_usage_line_names_it():
    """The usage line says RUN (typer's said {run}); the error said 'run'."""
    assert "Missing argument 'RUN'" in one_line_error(ledger_run("inspect", "--step", "3"))
    assert "Missing argument 'TRAJECTORIES'" in one_line_error(ledger_run("replay", "-j", "2"))
