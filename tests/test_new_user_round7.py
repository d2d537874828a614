"""What a new user met, round seven: each case as the user met it, through the real ``ledger-run`` in a
subprocess with no terminal."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from cli_support import ledger_run, one_line_error, scripted_mini_config
from conftest import make_repo


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The run the README's demo makes."""
    out = tmp_path_factory.mktemp("demo") / "d"
    r = ledger_run("demo", "-o", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return out / "run"


def _check(tmp_path, text: str):
    """``ledger-run config --check`` of a settings file holding ``text``."""
    path = tmp_path / "ledger.toml"
    path.write_text(text)
    return ledger_run("config", "--check", str(path))


@pytest.mark.parametrize(
    "text, says",
    [
        # "no" is a word, not false: the rule stayed on, and --check said "valid"
        ('[ledger.policies.protected-paths]\nenabled = "no"\n', "enabled must be true or false, not 'no'"),
        # a rule set to false (not a table) was read as no settings at all: the rule stayed on
        ("[ledger.policies]\nrepeat-failure = false\n", "must be a table"),
        # a rule of one's own that is not a table: a traceback ('int' object has no attribute 'get')
        ("[ledger.policies]\nmine = 3\n", "unknown policy 'mine'"),
        # a count given as text, or 0: valid by --check, a fault at the first failing command
        ('[ledger.policies.repeat-failure]\nrevise_after = "3"\n', "revise_after must be a whole number >= 1"),
        ("[ledger.policies.repeat-failure]\nrevise_after = 0\n", "revise_after must be a whole number >= 1"),
        # a user rule's time limit on a built-in: accepted and never applied
        ("[ledger.policies.stale-edit]\ntime_limit_s = 5\n", "time_limit_s is for a rule of your own"),
        # noop-edit is decided after the command ran: that is how it works, not a setting
        ('[ledger.policies.noop-edit]\nafter_run = false\nverdict = "BLOCK"\n', "unknown key 'after_run'"),
    ],
)
def test_a_policy_setting_of_the_wrong_kind_is_refused_not_left_as_it_was(tmp_path, text, says):
    """docs/settings.md: "a value its section does not take, is a one-line error". A policy table's
    ``enabled = "no"`` (or ``repeat-failure = false``) left the rule on, and ``config --check`` said the file
    was valid."""
    error = one_line_error(_check(tmp_path, text))
    assert says in error and "ledger.policies" in error, error


def test_config_check_says_what_a_policy_table_changes(tmp_path):
    """docs/settings.md: ``config --check`` "says what a file changes". Of a policy table it said
    ``ledger.policies = a table``."""
    r = _check(
        tmp_path,
        '[ledger.policies.protected-paths]\nglobs = ["tests/*"]\n[ledger.policies.stale-edit]\nenabled = false\n',
    )
    assert r.returncode == 0, r.stderr
    said = r.stdout.strip()
    assert "a table" not in said, said
    assert 'ledger.policies.protected-paths.globs = ["tests/*"]' in said, said
    assert "ledger.policies.stale-edit.enabled = false" in said, said


GEMINI_OK = bool(os.environ.get("LEDGER_GEMINI_BIN") or __import__("shutil").which("gemini"))


@pytest.mark.skipif(
    not GEMINI_OK,
    reason="no gemini binary on PATH or in $LEDGER_GEMINI_BIN (npm install -g "
    "@google/gemini-cli@0.61.0): this case needs its own message",
)
def test_gemini_without_a_login_is_sent_to_the_user_s_settings_not_the_run_s(tmp_path):
    """The README's ``ledger-run gemini ... --yolo --skip-trust`` with no login: Gemini CLI said "Please set an
    Auth method in your RUN_DIR/gemini/home/.gemini/settings.json", the run's own copy, made anew at each run
    (an auth method set there is gone at the next), and ledger-run's warning said only "its own message above
    says why"."""
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    home = tmp_path / "home"
    home.mkdir()
    run = tmp_path / "run"
    r = ledger_run(
        "gemini", "-w", str(repo), "-o", str(run), "--", "-p", "Fix it", "--yolo", "--skip-trust",
        env={"HOME": str(home)}, without=("_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA"), timeout=120,
    )  # fmt: skip
    assert r.returncode == 41, r.stderr[-2000:]
    said = " ".join(r.stderr.split())
    assert str(run / "gemini" / "home" / ".gemini" / "settings.json") in said, said  # Gemini CLI's own words
    assert "ended with exit code 41 before its first hook" in said, said
    assert f"set the auth method in {home / '.gemini' / 'settings.json'}" in said, said
    assert "GEMINI_API_KEY" in said.split("before its first hook", 1)[1], said


def _printing_to(stdout, *args: str) -> subprocess.CompletedProcess:
    """``ledger-run ARGS``, its standard output ``stdout`` (a descriptor, or DEVNULL)."""
    return subprocess.run(
        [sys.executable, "-m", "ledger_runtime", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "100"},
    )


def _to_a_reader_gone(*args: str) -> subprocess.CompletedProcess:
    """``ledger-run ARGS | head -0``: its standard output a pipe whose reader has already left."""
    read, write = os.pipe()
    os.close(read)
    try:
        return _printing_to(write, *args)
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [("inspect", "RUN"), ("inspect", "RUN", "--json"), ("config",), ("--help",)])
def test_a_reader_that_left_early_is_not_a_damaged_ledger(demo_run, args):
    """``ledger-run inspect RUN | head`` exited 1, silently: docs/inspect.md's exit code for a ledger whose stored
    text is damaged (a script under ``set -o pipefail`` stopped there). A reader gone is 141 (128 + SIGPIPE, as
    a shell says of ``git log | head``), with nothing on stderr; the same output to /dev/null is 0."""
    args = tuple(str(demo_run) if a == "RUN" else a for a in args)
    r = _to_a_reader_gone(*args)
    assert (r.returncode, r.stderr) == (141, ""), (r.returncode, r.stderr[-2000:])
    quiet = _printing_to(subprocess.DEVNULL, *args)
    assert (quiet.returncode, quiet.stderr) == (0, ""), quiet.stderr[-2000:]


def _baseline(stdout: str) -> str:
    return next(ln for ln in stdout.splitlines() if "baseline commit" in ln).split()[3]


@pytest.mark.parametrize(
    "gitconfig",
    [
        "[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = false\n",  # signs every commit (here: a signer that fails)
        "[core]\n\thooksPath = HOOKS\n",  # a pre-commit hook of the user's, for their own repositories
    ],
)
def test_the_demo_runs_whatever_the_user_s_git_config_says(demo_run, tmp_path, gitconfig):
    """The README's ``ledger-run demo`` for a user who signs commits (``commit.gpgsign``) or keeps hooks for every
    repository (``core.hooksPath``): a traceback (``CalledProcessError: ... 'commit', '-q', '-m', 'inventory:
    initial import'``) and a half-made workspace. The demo's repository is the demo's; and its baseline commit,
    which the summary prints, was a new hash at every run ("the demo prints the same figures wherever it runs")."""
    home = tmp_path / "home"
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "pre-commit").write_text("#!/bin/sh\necho 'pre-commit: refused' >&2\nexit 1\n")
    (hooks / "pre-commit").chmod(0o755)
    home.mkdir()
    (home / ".gitconfig").write_text(gitconfig.replace("HOOKS", str(hooks)))
    r = ledger_run("demo", "-o", str(tmp_path / "d"), env={"HOME": str(home)})
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    again = ledger_run("inspect", str(demo_run))  # the fixture's demo, made with the user's git config as it is
    assert _baseline(r.stdout) == _baseline(again.stdout), (r.stdout[-1500:], again.stdout[-1500:])


CODEX_OK = bool(os.environ.get("LEDGER_CODEX_BIN") or __import__("shutil").which("codex"))


@pytest.mark.skipif(
    not CODEX_OK,
    reason="no codex binary on PATH or in $LEDGER_CODEX_BIN (npm install -g "
    "@openai/codex@0.171.0): this case needs its own message",
)
def test_codex_s_config_error_is_sent_to_the_user_s_file_not_the_run_s_copy(tmp_path):
    """The README's ``ledger-run codex ... -- exec ...`` with a slip in ``~/.codex/config.toml``: Codex said "Error
    loading config.toml: RUN_DIR/codex-home/config.toml:1:9: ...", the run's copy (fixed there, the next run copies
    the user's file again, slip and all), and ledger-run said only that no hook reached the ledger."""
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text("model = \n")
    run = tmp_path / "run"
    args = ("codex", "-w", str(repo), "-o", str(run), "--", "exec", "Fix it")
    r = ledger_run(*args, env={"HOME": str(home)}, timeout=120)
    assert r.returncode != 0, r.stderr[-2000:]
    said = " ".join(r.stderr.split())
    assert str(run / "codex-home" / "config.toml") in said, said  # Codex's own words
    assert "no hook of Codex reached the ledger" in said, said
    hint = said.split("no hook of Codex reached the ledger", 1)[1]
    assert f"Codex ended with exit code {r.returncode}: its own message above says why" in hint, said
    assert str(home / ".codex") in hint, said


def _two_arms(out):
    for arm in ("baseline", "ledger"):
        (out / arm).mkdir(parents=True)
        preds = {"a__b-1": {"model_patch": "", "model_name_or_path": "m"}}
        (out / arm / "preds.json").write_text(__import__("json").dumps(preds))
    return out


def test_report_says_where_its_page_went_and_refuses_a_figure_it_would_not_make(tmp_path):
    """docs/inspect.md's ``ledger-run report OUT --html arms.html``: the figure's path was said (``figure: ...``),
    the page's was not, in the text or in ``--json``; and ``--png fig.png --no-png`` made no figure, without a
    word about the file asked for by name."""
    out = _two_arms(tmp_path / "out")
    page = tmp_path / "arms.html"
    r = ledger_run("report", str(out), "--html", str(page), "--no-png")
    assert r.returncode == 0 and page.is_file(), r.stderr[-2000:]
    assert f"page: {page}" in r.stdout.splitlines(), r.stdout[-1000:]
    j = ledger_run("report", str(out), "--html", str(page), "--no-png", "--json")
    assert j.returncode == 0 and __import__("json").loads(j.stdout)["page"] == str(page), j.stdout[-500:]

    error = one_line_error(ledger_run("report", str(out), "--png", str(tmp_path / "fig.png"), "--no-png"))
    assert "--png" in error and "--no-png" in error, error
    assert not (tmp_path / "fig.png").exists()


def test_a_page_is_not_asked_for_with_a_filter_it_would_drop(demo_run, tmp_path):
    """docs/inspect.md: ``--verdict NUDGE,REVISE --class run``: "only some commands in the timeline (and --json)".
    ``inspect RUN --html page.html --verdict NUDGE`` wrote the page with every step and said only "wrote page.html"
    (round five's rule: a switch inspect would drop is refused)."""
    page = tmp_path / "page.html"
    for args in (("--verdict", "NUDGE"), ("--class", "run")):
        error = one_line_error(ledger_run("inspect", str(demo_run), "--html", str(page), *args))
        assert "not the page" in error and "buttons" in error, error
        assert not page.exists()
    # with --json as well the page was written whole too: refused since round eight (test_new_user_round8.py)


def test_config_write_to_a_directory_is_not_sent_to_force(tmp_path):
    """``ledger-run config --write DIR`` said "DIR exists: pass --force to replace it"; run as printed, it said
    "cannot write DIR: it is not a regular file"."""
    (tmp_path / "settings").mkdir()
    for extra in ((), ("--force",)):
        error = one_line_error(ledger_run("config", "--write", str(tmp_path / "settings"), *extra))
        assert "is a directory" in error and "--force" not in error, error
        assert str(tmp_path / "settings" / "ledger.toml") in error, error
    assert list((tmp_path / "settings").iterdir()) == []


def test_a_mini_config_of_a_few_keys_is_sent_to_mini_yaml_as_keys_are(tmp_path):
    """docs/mini-swe-agent.md: "giving ``-c`` replaces the default ``mini.yaml`` unless you name it". A file of the
    user's own that sets a few keys (``environment.ledger``, say) said only ``-c agent.system_template: Field
    required``; ``-c KEY=VALUE`` alone was told to add ``-c mini.yaml``, a file was not."""
    import shlex

    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    mine = tmp_path / "my ledger.yaml"
    mine.write_text("environment:\n  ledger:\n    shadow: true\n")
    base = ("mini", "-m", "openai/gpt-5-mini", "-t", "Read a.py", "-w", str(repo), "-y", "-o", str(tmp_path / "run"))
    error = one_line_error(ledger_run(*base, "-c", str(mine), without=("_API_KEY",)))
    assert "agent.system_template: Field required" in error, error
    fix = shlex.split(error.split("which sets it: ", 1)[1].rstrip(")"))
    assert fix == ["-c", "mini.yaml", "-c", str(mine)], error
    again = one_line_error(ledger_run(*base, *fix, without=("_API_KEY",)))  # as printed: past -c, to the key
    assert "OPENAI_API_KEY" in again and "Field required" not in again, again


@pytest.mark.parametrize(
    "ledger, says",
    [
        ({"shadoww": True}, "-c environment.ledger: unknown key 'shadoww'"),
        ({"dedupe_min_lines": 0}, "-c environment.ledger: dedupe_min_lines: expected an integer >= 1, got 0"),
        ({"policies": {"protected-paths": False}}, "must be a table"),
        ({"config_file": "no-such.toml"}, "config file not found: no-such.toml"),
    ],
)
def test_a_mini_config_s_ledger_settings_are_checked_before_the_run(tmp_path, ledger, says):
    """docs/mini-swe-agent.md's ``environment.ledger`` keys (docs/settings.md: "an unknown key, or a value its
    section does not take, is a one-line error naming the key"): ``ledger-run mini -c mine.yaml`` with a slip there
    ran the agent WITHOUT the ledger, after a line ("ledger disabled for this run: ...") that scrolled away under the
    agent's, and ended with ``ledger: RUN/ledger.sqlite`` and ``look inside: ledger-run inspect RUN``, of a ledger
    that was never made."""
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    mine = scripted_mini_config(tmp_path / "mine.yaml", ["cat a.py", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"],
                                ledger=ledger)  # fmt: skip
    run = tmp_path / "run"
    r = ledger_run("mini", "-c", str(mine), "-t", "Read a.py", "-w", str(repo), "-y", "-o", str(run), cwd=tmp_path)
    error = one_line_error(r)
    assert error.startswith("error: ") and says in error, error
    assert not (run / "trajectory.traj.json").exists()  # nothing ran
