"""Options a new user met that one command took and its sibling refused, or that were taken and meant something
unsaid: each through the real commands in a subprocess with no terminal."""

from __future__ import annotations

import json
import re
import stat

import pytest
from cli_support import ledger_run, one_line_error, scripted_mini_config
from conftest import make_repo


def test_evaluate_refuses_no_workers_as_the_run_does(tmp_path):
    """``ledger-run swebench --evaluate --eval-workers 0`` was refused ("must be 1 or more") while ``ledger-run
    swebench evaluate -j 0`` passed 0 to the SWE-bench harness, which takes 0 or less as one at a time."""
    (tmp_path / "out" / "ledger").mkdir(parents=True)
    (tmp_path / "out" / "ledger" / "preds.json").write_text(json.dumps({"a__b-1": {"model_patch": ""}}))
    for switch in ("-j", "--workers"):
        error = one_line_error(ledger_run("swebench", "evaluate", str(tmp_path / "out"), switch, "0"))
        assert "-j/--workers must be 1 or more, not 0" in error, error


def test_config_check_shows_a_rule_s_count_as_the_rule_takes_it(tmp_path):
    """``revise_after = 2.0`` is counted with 2 by the rule, and ``min_lines = 4.0`` was already shown as 4:
    ``config --check`` said ``revise_after = 2.0``."""
    path = tmp_path / "ledger.toml"
    path.write_text("[ledger.policies.repeat-failure]\nrevise_after = 2.0\n[ledger.dedupe]\nmin_lines = 4.0\n")
    r = ledger_run("config", "--check", str(path))
    assert r.returncode == 0, r.stderr
    assert re.search(r"revise_after = 2(?![.\d])", r.stdout) and "min_lines = 4," in r.stdout, r.stdout


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The run the README's demo makes."""
    out = tmp_path_factory.mktemp("demo") / "d"
    r = ledger_run("demo", "-o", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return out / "run"


def test_the_page_s_folders_are_made_owner_only(tmp_path, demo_run):
    """``report --png figs/`` makes its folder; ``inspect RUN --html pages/run.html`` said only "No such file
    or directory". The folders made are owner-only, as the page is."""
    page = tmp_path / "pages" / "deep" / "run.html"
    r = ledger_run("inspect", str(demo_run), "--html", str(page))
    assert r.returncode == 0, r.stderr[-2000:]
    assert page.is_file() and stat.S_IMODE(page.stat().st_mode) == 0o600
    for folder in (tmp_path / "pages", tmp_path / "pages" / "deep"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_a_page_under_a_file_is_refused_in_one_line(tmp_path, demo_run):
    """A file where a folder of the page's path should be: named, and left as it was."""
    (tmp_path / "notes").write_text("mine")
    error = one_line_error(ledger_run("inspect", str(demo_run), "--html", str(tmp_path / "notes" / "run.html")))
    assert f"{tmp_path / 'notes'} is a file, not a directory" in error, error
    assert (tmp_path / "notes").read_text() == "mine"


@pytest.mark.parametrize("limit", ["-1", "nan"])
def test_a_negative_cost_limit_is_refused(tmp_path, limit):
    """mini-swe-agent's help: "Cost limit. Set to 0 to disable."; it stops at ``0 < cost_limit <= cost``, so
    ``-l -1`` ran with no limit without a word."""
    pytest.importorskip("minisweagent", reason="ledger-run mini needs mini-swe-agent")
    repo = make_repo(tmp_path / "repo", {"a.py": "print(1)\n"})
    cfg = scripted_mini_config(tmp_path / "s.yaml", ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"])
    r = ledger_run("mini", "-c", str(cfg), "-t", "t", "-w", str(repo), "-y", "-l", limit)
    error = one_line_error(r)
    assert f"-l/--cost-limit must be 0 (no limit) or more dollars, not {limit}" in error, error
    assert not (repo / "ledger-runs").exists()


def test_an_address_the_scripted_model_does_not_take_is_said_unused(tmp_path):
    """``--api-base URL`` with ``model_class: deterministic`` (it takes no model_kwargs, so no address) was
    dropped unsaid, and kept in the trajectory's config as if the run had used it."""
    pytest.importorskip("minisweagent", reason="ledger-run mini needs mini-swe-agent")
    repo = make_repo(tmp_path / "repo", {"a.py": "print(1)\n"})
    cfg = scripted_mini_config(tmp_path / "s.yaml", ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"])
    url = "http://127.0.0.1:9/v1"
    run_dir = str(tmp_path / "run")
    r = ledger_run(
        "mini", "-c", str(cfg), "-t", "t", "-w", str(repo), "-y", "--api-base", url, "--run-dir", str(run_dir)
    )
    assert r.returncode == 0, r.stderr[-2000:]
    said = [ln for ln in r.stderr.splitlines() if url in ln]
    assert said == [
        f"warning: --api-base {url} is not used: the model class deterministic takes no model_kwargs (its address)"
    ], r.stderr[-2000:]
    traj = json.loads((tmp_path / "run" / "trajectory.traj.json").read_text())
    assert url not in json.dumps(traj["info"]["config"]), traj["info"]["config"].get("model")


def test_the_arms_page_s_folders_are_made_owner_only(tmp_path):
    """``report OUT --html pages/arms.html`` said only "No such file or directory", as ``inspect --html`` did."""
    out = tmp_path / "out"
    (out / "ledger").mkdir(parents=True)
    (out / "ledger" / "preds.json").write_text(json.dumps({"a__b-1": {"model_patch": "", "model_name_or_path": "m"}}))
    page = tmp_path / "pages" / "arms.html"
    r = ledger_run("report", str(out), "--no-png", "--html", str(page))
    assert r.returncode == 0, r.stderr[-2000:]
    assert stat.S_IMODE(page.stat().st_mode) == 0o600 and stat.S_IMODE(page.parent.stat().st_mode) == 0o700
    (tmp_path / "notes").write_text("mine")
    error = one_line_error(ledger_run("report", str(out), "--no-png", "--html", str(tmp_path / "notes" / "a.html")))
    assert f"{tmp_path / 'notes'} is a file, not a directory" in error, error
