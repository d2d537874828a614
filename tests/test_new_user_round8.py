"""What a new user met, round eight: each case as the user met it, through the real commands in a subprocess with
no terminal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from cli_support import ledger_run, one_line_error, scripted_outputs
from conftest import make_repo


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The run the README's demo makes."""
    out = tmp_path_factory.mktemp("demo") / "d"
    r = ledger_run("demo", "-o", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return out / "run"


@pytest.mark.parametrize(
    "text, says",
    [
        ("[ledger.policies.repeat-failure]\nrevise_after = 2.0\n", "ledger.policies.repeat-failure.revise_after"),
        ("[ledger.dedupe]\nmin_lines = 4.0\n", "ledger.dedupe.min_lines = 4"),
        ("[ledger.view]\nbudget_tokens = 800.0\n", "ledger.view.budget_tokens = 800"),
    ],
)
def test_a_whole_number_written_as_a_float_is_taken(tmp_path, text, says):
    """``revise_after = 2.0`` was accepted before round seven made value types strict, and refused after it
    ("must be a whole number >= 1, not 2.0"): 2.0 is a whole number. A value that is not one is still refused."""
    path = tmp_path / "ledger.toml"
    path.write_text(text)
    r = ledger_run("config", "--check", str(path))
    assert r.returncode == 0 and says in r.stdout, r.stderr
    path.write_text(text.replace(".0\n", ".5\n"))
    error = one_line_error(ledger_run("config", "--check", str(path)))
    assert ".5" in error, error


def test_a_whole_number_written_as_a_float_is_the_rule_s_number():
    """The rule that takes ``revise_after = 2.0`` counts with 2, as it would with ``revise_after = 2``."""
    from ledger_runtime.decide.gate import build_rules
    from ledger_runtime.decide.policies import BUILTINS

    rules = build_rules({"repeat-failure": {"revise_after": 2.0}}, "/tmp", BUILTINS)
    rule = next(r for r in rules if r.name == "repeat-failure")
    assert rule.param("revise_after", 3) == 2 and type(rule.param("revise_after", 3)) is int


@pytest.mark.parametrize(
    "ledger, says",
    [
        ({1: "x"}, "ledger settings: 1 is not the name of a setting"),
        (3, "ledger settings: must be a table of settings"),
        ({"run_dir": ["a"]}, "ledger settings: run_dir: Input should be a valid string"),
    ],
)
def test_mini_swe_agent_s_own_cli_says_a_wrong_ledger_section_in_one_line(tmp_path, ledger, says):
    """docs/mini-swe-agent.md: "Inside any mini-swe-agent config (so also ``mini-extra swebench``) ... ``ledger:``
    any ledger setting". With ``ledger: {1: x}`` mini-swe-agent's own CLI showed a traceback (TypeError: keywords
    must be strings); it now says the one thing wrong where a wrong setting is said, and the agent runs on."""
    import yaml
    from minisweagent.config import builtin_config_dir

    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    cfg = yaml.safe_load((builtin_config_dir / "mini.yaml").read_text())
    cfg["environment"] = {
        "environment_class": "ledger_adapters.mini.environment.LedgerEnvironment",
        "inner_class": "local",
        "cwd": str(repo),
        "ledger": ledger,
    }
    cfg["model"] = {
        "model_class": "ledger_adapters.mini.environment.LedgerModel",
        "inner_class": "deterministic",
        "model_name": "deterministic",
        "cost_per_call": 0.0,
        "outputs": scripted_outputs(["cat a.py", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]),
    }
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "MSWEA_SILENT_STARTUP": "1", "MSWEA_CONFIGURED": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    code = "from minisweagent.run.mini import app; app()"
    out = tmp_path / "t.traj.json"
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "-c",
            str(tmp_path / "mine.yaml"),
            "-t",
            "Read a.py",
            "-y",
            "--exit-immediately",
            "-o",
            str(out),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        stdin=subprocess.DEVNULL,
        cwd=repo,  # fmt: skip
    )
    said = r.stdout + r.stderr
    assert "Traceback" not in said, said[-3000:]
    lines = [ln for ln in said.splitlines() if "ledger disabled for this run" in ln]
    assert len(lines) == 1 and says in lines[0], said[-3000:]
    assert r.returncode == 0 and out.is_file(), said[-3000:]  # the agent ran, without the ledger


def test_a_page_is_never_written_unfiltered_under_a_filter(demo_run, tmp_path):
    """``inspect RUN --html P --json --verdict NUDGE``: the --json was filtered, the page written whole, without a
    word. A filter with --html is refused, --json or not."""
    page = tmp_path / "page.html"
    for args in (("--json", "--verdict", "NUDGE"), ("--json", "--class", "run")):
        error = one_line_error(ledger_run("inspect", str(demo_run), "--html", str(page), *args))
        assert "not the page" in error and "--html alone" in error, error
        assert not page.exists()
    both = ledger_run("inspect", str(demo_run), "--html", str(page), "--json")
    assert both.returncode == 0 and page.is_file() and json.loads(both.stdout)["timeline"], both.stderr[-2000:]


def test_an_agent_that_does_not_answer_its_version_is_said_within_seconds(tmp_path):
    """A ``codex`` on PATH that never answers ``--version`` showed nothing for 60 s (the version check's wait). A
    line now says what is waited for within a few seconds, and the wait ends sooner."""
    fake = tmp_path / "bin" / "codex"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nif [ "$1" = --version ]; then exec sleep 1000; fi\nexit 0\n')
    fake.chmod(0o755)
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}", "COLUMNS": "200"}
    env.pop("LEDGER_CODEX_BIN", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ledger_runtime",
            "codex",
            "-w",
            str(repo),
            "-o",
            str(tmp_path / "run"),
            "--",
            "exec",
            "hi",
        ],  # fmt: skip
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,  # fmt: skip
        start_new_session=True,
    )
    try:
        began = time.monotonic()
        line = proc.stderr.readline()
        waited = time.monotonic() - began
    finally:
        proc.send_signal(signal.SIGINT)  # a user's Ctrl-C: the version check's own child goes too
        proc.wait(timeout=30)
    assert f"waiting for `{fake} --version`" in line and waited < 15, (waited, line)
    assert "Traceback" not in proc.stderr.read()
    from ledger_runtime.cli.agents import VERSION_TIMEOUT_S

    assert VERSION_TIMEOUT_S <= 30


def test_report_s_figure_in_a_folder_written_as_one(tmp_path):
    """``report --png``'s help: "a file (its folders made), or a folder for report.png in it". ``--png figs/`` (a
    folder not there yet) wrote the figure as a file named ``figs``."""
    pytest.importorskip("matplotlib", reason="the figure needs matplotlib (pip install -e '.[swebench]')")
    out = tmp_path / "out"
    for arm in ("baseline", "ledger"):
        (out / arm).mkdir(parents=True)
        (out / arm / "preds.json").write_text(json.dumps({"a__b-1": {"model_patch": "", "model_name_or_path": "m"}}))
    r = ledger_run("report", str(out), "--png", f"{tmp_path / 'figs'}/")
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "figs" / "report.png").is_file(), sorted(p.name for p in tmp_path.iterdir())
    assert f"figure: {tmp_path / 'figs' / 'report.png'}" in r.stdout, r.stdout[-500:]


@pytest.mark.parametrize(
    "args, says",
    [
        (("--modal",), "--modal goes with --evaluate"),
        (("--eval-workers", "2"), "--eval-workers goes with --evaluate"),
        (("--eval-workers", "0", "--evaluate"), "--eval-workers must be 1 or more, not 0"),
    ],
)
def test_a_scoring_switch_without_the_scoring_is_refused(tmp_path, args, says):
    """``ledger-run swebench``'s help: "--modal  With --evaluate: score on Modal", "--eval-workers  With --evaluate".
    Without --evaluate each was dropped without a word, and the run went on to the model and the images."""
    instances = tmp_path / "instances.jsonl"
    instances.write_text(json.dumps({"instance_id": "a__b-1", "repo": "a/b", "base_commit": "0" * 40}) + "\n")
    r = ledger_run(
        "swebench", "-m", "openai/gpt-5-mini", "--instances", str(instances), "-o", str(tmp_path / "o"), *args
    )
    error = one_line_error(r)
    assert says in error, error
    assert not (tmp_path / "o").exists()


def test_an_image_whose_pull_failed_is_not_sent_to_docker_pull():
    """``ledger-run swebench`` (its images pulled by default) with no registry in reach said "get it with `docker
    pull IMAGE`": the pull it had just tried, and that had failed, without its reason."""
    from ledger_harness.swebench.run import missing_image_error

    failed = missing_image_error({"sweb.eval.a": "dial tcp: lookup registry-1.docker.io: no such host", "b": "x"})
    assert "pulling it failed (dial tcp: lookup registry-1.docker.io: no such host)" in failed, failed
    assert "docker pull" not in failed and "(and 1 more)" in failed, failed
    unpulled = missing_image_error({"sweb.eval.a": ""})  # --no-pull
    assert "get it with `docker pull sweb.eval.a`" in unpulled, unpulled


@pytest.mark.slow  # the Hub's client tries for about 30 s
def test_a_dataset_that_cannot_be_reached_is_one_line_not_the_hub_s_retries(tmp_path):
    """``ledger-run swebench -m M -o OUT`` with no network: the Hub's own warning for each try of each request
    ("'[Errno -2] Name or service not known' thrown while requesting HEAD https://huggingface.co/...") came before
    the one error line; now a line says what is loading, and the error says what to do."""
    pytest.importorskip("datasets", reason="ledger-run swebench needs its extra: pip install -e '.[swebench]'")
    env = {"HF_ENDPOINT": "http://hub.invalid", "HF_HOME": str(tmp_path / "hf"), "OPENAI_API_KEY": "sk-none"}
    r = ledger_run("swebench", "-m", "openai/gpt-5-mini", "-o", str(tmp_path / "o"), env=env, timeout=120)
    error = one_line_error(r)
    assert "cannot load the dataset" in error and "--instances FILE.jsonl" in error, error
    others = [ln for ln in r.stderr.splitlines() if ln.strip() and ln != error]
    assert others == [
        "loading SWE-bench verified (test) from the Hugging Face Hub (offline: --instances FILE.jsonl)"
    ], r.stderr


@pytest.mark.parametrize("switch", ["--model-class", "--environment-class"])
def test_a_class_on_the_command_line_is_over_the_config_s(tmp_path, switch):
    """``ledger-run mini -c mini.yaml -c scripted.yaml --model-class X`` (or ``--environment-class X`` with a config
    naming its environment class): the config's class won and the switch was dropped without a word (mini's own
    CLI, and ``-m`` over ``model_name``, put the command line last)."""
    from cli_support import scripted_mini_config

    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    mine = scripted_mini_config(tmp_path / "mine.yaml", ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"],
                                environment_class="local")  # fmt: skip
    args = ("mini", "-c", str(mine), "-t", "Read a.py", "-w", str(repo), "-y", "-o", str(tmp_path / "run"))
    error = one_line_error(ledger_run(*args, switch, "nosuch"))
    assert error.startswith(f"error: {switch} nosuch: not one of mini-swe-agent's"), error
    assert not (tmp_path / "run" / "trajectory.traj.json").exists()
