"""Attacks through settings files: a work tree's ``.claude/settings.json``, ``.codex/config.toml`` and
``.gemini/settings.json`` are the repository's, and a cloned repository may hold anything there (JSON or
TOML nested past Python's recursion limit, a link to ``/dev/zero``, bytes that are not text); so may a
``--ledger-config`` file given to ``ledger-run config --check``. Each is a one-line error or a file not
read, never a traceback, a hang or the memory filled."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_support import ledger_run, one_line_error
from conftest import make_repo

from ledger_adapters.claude.cli import hooks_disabled, user_settings
from ledger_adapters.codex.cli import read_toml
from ledger_adapters.gemini.home import read_settings

DEEP_JSON = "[" * 100_000
DEEP_TOML = "a = " + "[" * 5_000 + "]" * 5_000 + "\n"
SHAPES = ("deep", "zero", "binary")


def crafted(path: Path, shape: str, deep: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if shape == "zero":
        os.symlink("/dev/zero", path)
    elif shape == "binary":
        path.write_bytes(b"\xff\xfe{}")
    else:
        path.write_text(deep)
    return path


@pytest.mark.parametrize("shape", SHAPES)
def test_a_crafted_gemini_settings_file_is_a_value_error_naming_it(tmp_path: Path, shape: str) -> None:
    path = crafted(tmp_path / ".gemini" / "settings.json", shape, DEEP_JSON)
    with pytest.raises(ValueError, match=f"^{path}: "):
        read_settings(path)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_crafted_claude_settings_file_is_not_read(tmp_path: Path, shape: str) -> None:
    crafted(tmp_path / ".claude" / "settings.json", shape, DEEP_JSON)
    assert hooks_disabled(tmp_path, tmp_path / "home") is None
    with pytest.raises(ValueError, match="^--settings "):
        user_settings(str(tmp_path / ".claude" / "settings.json"))


@pytest.mark.parametrize("shape", SHAPES)
def test_a_crafted_codex_config_is_not_read(tmp_path: Path, shape: str) -> None:
    assert read_toml(crafted(tmp_path / ".codex" / "config.toml", shape, DEEP_TOML)) == {}


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_a_repository_with_crafted_settings_gets_no_traceback(tmp_path: Path, agent: str) -> None:
    repo = make_repo(tmp_path / "repo", {"README": "hi\n"})
    crafted(repo / ".claude" / "settings.json", "deep", DEEP_JSON)
    crafted(repo / ".gemini" / "settings.json", "deep", DEEP_JSON)
    crafted(repo / ".codex" / "config.toml", "deep", DEEP_TOML)
    args = ["--", "exec", "x"] if agent == "codex" else ["--", "-p", "x"]
    r = ledger_run(
        agent, f"--{agent}-bin", "/bin/true", "-w", str(repo), "-o", str(tmp_path / "run"), *args,
        env={"HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    if agent == "gemini":  # Gemini CLI's settings are read before the run: the file that is wrong is named
        said = f"error: {repo / '.gemini' / 'settings.json'}: JSON nested deeper than it can be read"
        assert one_line_error(r) == said
    else:
        assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.parametrize(
    "target,said",
    [
        ("deep", "deep.toml: not valid TOML: nested deeper than it can be read"),
        ("/dev/zero", "/dev/zero: a device that reads on past 4,194,304 bytes, not a settings file"),
        ("big", "big.toml: 5,000,000 bytes, over the 4,194,304 of a settings file"),
    ],
)
def test_config_check_of_a_crafted_file_is_one_line(tmp_path: Path, target: str, said: str) -> None:
    (tmp_path / "deep.toml").write_text(DEEP_TOML)
    (tmp_path / "big.toml").write_bytes(b"#" * 5_000_000)
    path = target if target.startswith("/") else str(tmp_path / f"{target}.toml")
    assert one_line_error(ledger_run("config", "--check", path, timeout=60)).endswith(said)


def test_config_check_still_reads_an_empty_device(tmp_path: Path) -> None:
    r = ledger_run("config", "--check", "/dev/null")
    assert (r.returncode, r.stdout.strip()) == (0, "/dev/null: valid; every setting at its default")


@pytest.mark.parametrize(
    "given,why",
    [
        (DEEP_JSON, "JSON nested deeper than it can be read"),
        ('{"plugin": ', "not JSON: Expecting value at line 1, column 12"),
        ("[1]", "not a JSON object (a JSON array)"),
    ],
)
def test_opencodes_own_config_content_that_is_not_json_is_one_line_naming_it(
    tmp_path: Path, given: str, why: str
) -> None:
    repo = make_repo(tmp_path / "repo", {"README": "hi\n"})
    r = ledger_run(
        "opencode", "--opencode-bin", "/bin/true", "-w", str(repo), "-o", str(tmp_path / "run"), "--", "run", "x",
        env={"HOME": str(tmp_path / "home"), "OPENCODE_CONFIG_CONTENT": given},
    )  # fmt: skip
    assert one_line_error(r) == f"error: OPENCODE_CONFIG_CONTENT: {why}: the ledger adds its plugin to it"


def test_codex_hook_overrides_with_characters_past_u_ffff_are_toml_codex_reads(tmp_path: Path) -> None:
    import tomllib

    from ledger_adapters.codex.cli import hook_overrides

    config = '[[hooks.PreToolUse]]\nhooks = [{type = "command", command = "notify \\"🚀 started\\""}]\n'
    run = tmp_path / "runs 🚀" / "run"  # a work tree or run directory with an emoji in its path
    args = hook_overrides(["ledger-run"], "/tmp/s.sock", run, tomllib.loads(config))
    values = {a.split("=", 1)[0]: tomllib.loads("v = " + a.split("=", 1)[1])["v"] for a in args[1::2]}
    pre = values["hooks.PreToolUse"]
    assert pre[0]["hooks"][0]["command"] == 'notify "🚀 started"'
    assert f"--run-dir '{run}'" in pre[1]["hooks"][0]["command"]


def test_the_users_own_settings_from_a_pipe_are_still_read(tmp_path: Path) -> None:
    import threading

    fifo = tmp_path / "settings"  # as `--settings <(...)` hands them
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text('{"env": {"A": "1"}}'))
    writer.start()
    assert user_settings(str(fifo)) == {"env": {"A": "1"}}
    writer.join(timeout=10)
