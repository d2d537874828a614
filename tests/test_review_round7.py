"""A reviewer's pass over round seven: what its changes broke or missed, each through the real ``ledger-run`` in a
subprocess (or the real settings loader)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from cli_support import ledger_run, one_line_error
from conftest import make_repo

from ledger_runtime.config import from_mapping


def test_a_yaml_rule_with_nothing_under_it_is_the_rule_with_its_defaults():
    """``policies:`` / ``stale-edit:`` with every key under it commented out is YAML's null: it was the rule as it
    comes, and round seven's "must be a table" refused it (a mini -c file that ran the day before)."""
    config = from_mapping(yaml.safe_load("policies:\n  stale-edit:\n    # verdict: REVISE\n  noop-edit:\n"))
    assert set(config.policies.rules) == {"stale-edit", "noop-edit"}


def test_a_rule_module_that_fails_as_it_is_imported_is_one_line(tmp_path):
    """``check = "my_rules:f"`` where my_rules.py raises as it is imported (a SyntaxError, a RuntimeError): a
    traceback from ``config --check``, and from ``ledger-run mini``'s new check before the run."""
    (tmp_path / "broken_rules.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "ledger.toml").write_text('[ledger.policies.mine]\ncheck = "broken_rules:f"\n')
    r = ledger_run("config", "--check", str(tmp_path / "ledger.toml"), env={"PYTHONPATH": _with(tmp_path)})
    assert "boom at import" in one_line_error(r), r.stderr[-2000:]


def _with(path) -> str:
    return ":".join([str(path), *sys.path])


def test_the_demo_never_writes_into_the_repository_git_dir_names(tmp_path):
    """``GIT_DIR`` in the environment (a git hook, ``git rebase -x``, a script that exports it): the demo's
    ``git init``/``add``/``commit`` went to that repository, and its project was committed on the user's branch."""
    mine = tmp_path / "mine"
    subprocess.run(["git", "init", "-q", str(mine)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(mine),
            "-c",
            "user.name=u",
            "-c",
            "user.email=u@x",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    head = subprocess.run(["git", "-C", str(mine), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    r = ledger_run("demo", "-o", str(tmp_path / "d"), env={"GIT_DIR": str(mine / ".git")})
    assert r.returncode == 0, r.stderr[-2000:]
    after = subprocess.run(["git", "-C", str(mine), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert after == head
    assert "baseline commit" in r.stdout and (tmp_path / "d" / "workspace" / ".git").is_dir()


@pytest.mark.parametrize("args", [("config",), ("config", "--help")])
def test_a_closed_standard_output_is_one_line(args):
    """``ledger-run config >&-``: Python has no sys.stdout, and the first print was an AttributeError traceback."""
    r = subprocess.run(
        [sys.executable, "-m", "ledger_runtime", *args],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=120,
        preexec_fn=lambda: __import__("os").close(1),
    )
    assert "standard output is closed" in one_line_error(r)


def test_mini_s_check_of_a_c_file_s_ledger_settings_is_one_line_for_a_key_that_is_not_a_name(tmp_path):
    """A -c file whose ``environment.ledger`` has ``1: x`` (YAML reads a number): ``ledger-run mini``'s new check
    before the run ended in ``TypeError: keywords must be strings``, a traceback."""
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (tmp_path / "odd.yaml").write_text("environment:\n  ledger:\n    1: x\n")
    r = ledger_run(
        "mini",
        "-c",
        "mini.yaml",
        "-c",
        str(tmp_path / "odd.yaml"),
        "-t",
        "x",
        "-m",
        "openai/gpt-5-mini",
        "--yolo",
        cwd=str(repo),
        env={"OPENAI_API_KEY": "sk-test"},
    )
    assert "1 is not the name of a setting" in one_line_error(r)


def test_a_damaged_ledger_is_exit_1_and_says_so_when_its_reader_has_left_too(tmp_path):
    """``ledger-run inspect RUN --json | head`` of a ledger whose stored outputs do not read back: round seven made a
    reader gone 141, and the ``damaged:`` lines (said after the output) and exit code 1 went with it: a script under
    ``set -o pipefail`` read "the reader left", never "the ledger is damaged"."""
    import os
    import shutil
    import sqlite3

    r = ledger_run("demo", "-o", str(tmp_path / "d"))
    assert r.returncode == 0, r.stderr[-2000:]
    run = tmp_path / "damaged"
    shutil.copytree(tmp_path / "d" / "run", run)
    db = sqlite3.connect(run / "ledger.sqlite")
    db.execute("UPDATE blobs SET codec = 'zlib', data = X'00ff'")
    db.commit()
    db.close()
    read, write = os.pipe()
    os.close(read)  # `| head -0`: the reader has left
    try:
        gone = subprocess.run(
            [sys.executable, "-m", "ledger_runtime", "inspect", str(run), "--json"],
            stdout=write,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert gone.returncode == 1 and "Traceback" not in gone.stderr, (gone.returncode, gone.stderr[-2000:])
    assert "damaged: the ledger's blob " in gone.stderr, gone.stderr[-2000:]


def test_config_check_lists_no_rule_key_set_to_what_it_is_anyway(tmp_path):
    """Round seven's ``config --check`` lists what a file changes key by key, and compared a rule's keys with no
    rule at all: ``globs = []`` and ``revise_after = 3`` (each a built-in's default) were said to be changes."""
    path = tmp_path / "ledger.toml"
    path.write_text(
        "[ledger.policies.protected-paths]\nglobs = []\n[ledger.policies.repeat-failure]\nrevise_after = 3\n"
        '[ledger.policies.stale-edit]\nverdict = "REVISE"\n'
    )
    r = ledger_run("config", "--check", str(path))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == f'{path}: valid; ledger.policies.stale-edit.verdict = "REVISE"', r.stdout


@pytest.mark.parametrize("make", ["fifo", "device"])
def test_config_write_to_what_is_no_regular_file_names_no_force_that_fails(tmp_path, make):
    """``config --write /dev/null`` (or a FIFO): "exists: pass --force to replace it", and with --force "it is not a
    regular file", the loop round seven ended for a directory."""
    import os

    target = tmp_path / "fifo" if make == "fifo" else __import__("pathlib").Path(os.devnull)
    if make == "fifo":
        os.mkfifo(target)
    said = one_line_error(ledger_run("config", "--write", str(target)))
    assert "--force" not in said and "not a regular file" in said, said


def test_a_swebench_arm_keeps_the_rules_of_its_ledger_settings_file(tmp_path):
    """``ledger-run swebench --config`` whose ``environment.ledger`` names a ``config_file`` that sets rules: the arm's
    own ``policies`` table (SWE-bench's protected paths) replaced the file's whole, and a ``protected-paths`` set only
    for its verdict lost SWE-bench's globs: both without a word."""
    from ledger_adapters.mini.environment import LedgerSettings, ledger_config
    from ledger_harness.swebench.protected import SWEBENCH_PROTECTED
    from ledger_harness.swebench.run import arm_config

    settings = tmp_path / "ledger.toml"
    settings.write_text('[ledger.policies.stale-edit]\nverdict = "REVISE"\n')
    for inline, verdict in (({}, "REVISE"), ({"policies": {"protected-paths": {"verdict": "BLOCK"}}}, "BLOCK")):
        given = {"environment_class": "docker", "ledger": {"config_file": str(settings), **inline}}
        ledger = arm_config({"environment": given, "model": {"model_name": "x"}}, "ledger", "run1")["environment"]
        rules = ledger_config(LedgerSettings(**ledger["ledger"])).policies.rules
        assert rules["stale-edit"] == {"verdict": "REVISE"}, rules
        assert rules["protected-paths"].get("globs") == list(SWEBENCH_PROTECTED), rules
        assert rules["protected-paths"].get("verdict", "REVISE") == verdict
