"""A new user following the agent guides (docs/codex.md, docs/claude-code.md, docs/gemini-cli.md, docs/opencode.md,
docs/mini-swe-agent.md) literally: each case as the user met it, through the real ``ledger-run`` and the real agent
binary in a subprocess with no terminal."""

from __future__ import annotations

import os
import shutil

import pytest
from cli_support import ledger_run, one_line_error
from conftest import make_repo

GEMINI_OK = bool(os.environ.get("LEDGER_GEMINI_BIN") or shutil.which("gemini"))


@pytest.mark.skipif(
    not GEMINI_OK,
    reason="no gemini binary on PATH or in $LEDGER_GEMINI_BIN (npm install -g "
    "@google/gemini-cli@0.61.0): this case needs its own message",
)
def test_gemini_pointed_at_a_base_url_is_told_to_select_an_auth_method_not_to_set_the_key_it_has(tmp_path):
    """docs/gemini-cli.md's headless run with GEMINI_API_KEY set and GOOGLE_GEMINI_BASE_URL naming the user's own
    endpoint, no auth method selected: Gemini CLI 0.61.0 takes 'gateway' from the URL, refuses it ("Invalid auth
    method selected.", exit 41), and ledger-run's warning said "the settings.json its message names" (it names
    none) "... or set GEMINI_API_KEY", which was set."""
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    home = tmp_path / "home"
    home.mkdir()
    run = tmp_path / "run"
    r = ledger_run(
        "gemini", "-w", str(repo), "-o", str(run), "--", "-p", "Fix it", "--yolo", "--skip-trust",
        env={"HOME": str(home), "GEMINI_API_KEY": "AIza-test-not-a-real-key", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9",
             "GEMINI_CLI_NO_RELAUNCH": "true"},
        without=("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA"), timeout=120,
    )  # fmt: skip
    assert r.returncode == 41, r.stderr[-2000:]
    said = " ".join(r.stderr.split())
    assert "Invalid auth method selected." in said, said  # Gemini CLI's own words, naming no settings file
    hint = said.split("before its first hook", 1)[1]
    assert "or set GEMINI_API_KEY" not in hint and "its message names" not in hint, said
    assert "takes 'gateway'" in hint, said
    assert f"set security.auth.selectedType in {home / '.gemini' / 'settings.json'}" in hint, said


def test_codex_s_own_cd_naming_another_directory_than_workdir_is_one_line_not_overridden(tmp_path):
    """docs/codex.md: everything after ``--`` goes to codex. ``ledger-run codex -w repo -- -C other exec ...`` ran
    Codex in repo: its -C was replaced by --workdir without a word, and the user's agent worked where they had not
    asked. The two naming one directory (codex -C alone, or both the same) still run."""
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    other = make_repo(tmp_path / "other", {"b.py": "y = 2\n"})
    missing = str(tmp_path / "no-codex-here")  # the check comes before the binary is looked for (--*-bin: no PATH)
    r = ledger_run(
        "codex", "-w", str(repo), "-o", str(tmp_path / "run"), "--codex-bin", missing, "--", "-C", str(other),
        "exec", "Fix it", timeout=60,
    )  # fmt: skip
    said = one_line_error(r)
    assert f"-C {other}" in said and str(repo) in said and "different directories" in said, said
    for args in (("-C", str(repo)), ("--cd=" + str(repo),)):  # the same directory: on to the binary
        out = str(tmp_path / "run2")
        r = ledger_run("codex", "-w", str(repo), "-o", out, "--codex-bin", missing, "--", *args, "exec", "x")
        assert "codex not found" in one_line_error(r), r.stderr


def test_opencode_run_dir_naming_another_directory_than_workdir_is_one_line_and_alone_is_the_work_tree(tmp_path):
    """docs/opencode.md: everything after ``--`` goes to opencode. ``ledger-run opencode -w repo -- run --dir other
    ...`` ran OpenCode in other while the ledger watched repo (its summary listed other/b.txt as a change of the
    work tree, and the model's outputs came from a tree the ledger did not snapshot). --dir alone is the work tree,
    as codex's -C is."""
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    other = make_repo(tmp_path / "other", {"b.py": "y = 2\n"})
    missing = str(tmp_path / "no-opencode-here")  # the check comes before the binary is looked for (--*-bin: no PATH)
    r = ledger_run(
        "opencode", "-w", str(repo), "-o", str(tmp_path / "run"), "--opencode-bin", missing, "--", "run", "--dir",
        str(other), "Fix it", timeout=60,
    )  # fmt: skip
    said = one_line_error(r)
    assert f"--dir {other}" in said and str(repo) in said and "different directories" in said, said
    r = ledger_run(
        "opencode", "-w", str(repo), "-o", str(tmp_path / "run2"), "--opencode-bin", missing, "--", "run",
        f"--dir={repo}", "x", timeout=60,
    )  # fmt: skip
    assert "opencode not found" in one_line_error(r), r.stderr
    from ledger_adapters.opencode.cli import run_dir_arg, with_run_dir

    assert run_dir_arg(["run", "--dir", "d", "x"]) == "d" and run_dir_arg(["run", "--dir=d"]) == "d"
    assert run_dir_arg(["run", "--attach", "http://h", "--dir", "d"]) is None  # a path on that server
    assert run_dir_arg(["attach", "http://h", "--dir", "d"]) is None and run_dir_arg(["run", "x"]) is None
    assert with_run_dir(["run", "--dir", "d", "x"], "/abs") == ["run", "--dir", "/abs", "x"]


def test_opencode_tui_project_naming_another_directory_than_workdir_is_one_line_and_alone_is_the_work_tree(tmp_path):
    """``ledger-run opencode -w repo -- other`` started OpenCode's TUI in other (``opencode [project]``) while the
    ledger watched repo, as ``run --dir`` did before; the project alone is the work tree."""
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    other = make_repo(tmp_path / "other", {"b.py": "y = 2\n"})
    missing = str(tmp_path / "no-opencode-here")
    base = ("opencode", "-o", str(tmp_path / "run"), "--opencode-bin", missing)
    said = one_line_error(ledger_run(*base[:1], "-w", str(repo), *base[1:], "--", "--model", "p/m", str(other)))
    assert f"project {other}" in said and str(repo) in said and "different directories" in said, said
    r = ledger_run(*base, "--", str(other), cwd=tmp_path)  # alone: the work tree, then the binary is looked for
    assert "opencode not found" in one_line_error(r), r.stderr
    r = ledger_run(*base[:1], "-w", str(repo), *base[1:], "--", "Fix the bug")  # a prompt where the TUI takes a path
    assert "opencode's project Fix the bug is not a directory" in one_line_error(r), r.stderr
    r = ledger_run(*base[:1], "-w", str(repo), *base[1:], "--", str(repo))  # the work tree named twice: one tree
    assert "opencode not found" in one_line_error(r), r.stderr
    from ledger_adapters.opencode.cli import tui_project_arg

    assert tui_project_arg(["d"]) == 0 and tui_project_arg(["--model", "p/m", "--pure", "d"]) == 3
    assert tui_project_arg(["-m", "p/m", "--port=0", "-c", "d"]) == 4 and tui_project_arg(["--odd", "v", "d"]) == 2
    assert tui_project_arg(["run", "x"]) is None and tui_project_arg(["serve"]) is None and tui_project_arg([]) is None
    assert tui_project_arg(["--model", "p/m"]) is None and tui_project_arg(["--cors", "a", "b"]) is None
    assert tui_project_arg(["--", "d"]) is None
