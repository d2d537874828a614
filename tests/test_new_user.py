"""What a new user hits first, each checked for real: one meaning of shadow mode, one-line errors where
a traceback used to be, mini's own -c, a container environment that gets the work tree, a hook
client that survives garbage."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import ledger_run, one_line_error, scripted_mini_config
from conftest import make_repo

from ledger_runtime.config import LedgerConfig, load_config
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime

FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n"
    + "".join(f"\n\ndef f{i}(x):\n    return x + {i}\n" for i in range(30))
}


# -- shadow mode: record and decide only, nothing reaches the model --------------------------------


def test_shadow_shows_the_model_nothing_unless_a_view_is_asked_for(tmp_path):
    repo = make_repo(tmp_path / "r", FILES)
    cfg = tmp_path / "ledger.toml"
    cfg.write_text("shadow = true\n")
    views = {}
    for name, config in (
        ("toml", load_config(cfg)),
        ("default", LedgerConfig()),
        ("asked", LedgerConfig(shadow=True, shadow_view=True)),
    ):
        rt = LedgerRuntime(repo, tmp_path / f"run-{name}", config)
        try:
            rt.run("cat calc.py", LocalExecutor())
            rt.run("cat calc.py", LocalExecutor())
            views[name] = rt.inform()
            second = rt.state.attempts[1]
            assert second.executed and second.applied is (name == "default")
        finally:
            rt.close()
    assert views["toml"] == "", "shadow = true in a config file puts no state view in the prompt"
    assert views["default"] and views["asked"], "a view where one is wanted"


def test_demo_shadow_reaches_the_model_with_nothing(tmp_path):
    r = ledger_run("demo", "--shadow", "-o", str(tmp_path / "d"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "notes of the state view reached the model 0 times" in " ".join(r.stdout.split())


# -- one-line errors ------------------------------------------------------------------------------


def test_demo_output_that_cannot_be_written(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    assert "is a file" in one_line_error(ledger_run("demo", "-o", str(f)))
    assert "cannot write the demo" in one_line_error(ledger_run("demo", "-o", "/proc/nope"))


def test_tau2_gate_names_a_missing_task_file():
    pytest.importorskip("tau2", reason="tau2-bench is not installed")
    msg = one_line_error(ledger_run("tau2-gate", "--domain", "airline", "--tasks", "nope.json"))
    assert "no task file nope.json" in msg and "tasks.json" in msg


def test_report_reads_every_predictions_format_the_harness_reads(tmp_path):
    pred = {"instance_id": "demo__calc-1", "model_patch": "diff", "model_name_or_path": "m"}
    (tmp_path / "out" / "listed").mkdir(parents=True)
    (tmp_path / "out" / "listed" / "preds.json").write_text(json.dumps([pred]))
    (tmp_path / "out" / "lines").mkdir()
    (tmp_path / "out" / "lines" / "preds.jsonl").write_text(json.dumps(pred) + "\n")
    r = ledger_run("report", str(tmp_path / "out"), "--json", "--no-png")
    assert r.returncode == 0, r.stderr[-2000:]
    arms = json.loads(r.stdout)["arms"]
    assert set(arms) == {"listed", "lines"} and all(a["instances"] == 1 for a in arms.values())
    (tmp_path / "out" / "listed" / "preds.json").write_text(json.dumps({"a": 3}))
    assert "preds.json cannot be read" in one_line_error(ledger_run("report", str(tmp_path / "out"), "--no-png"))


@pytest.mark.slow
def test_mini_without_an_api_key_says_which_variable(tmp_path):
    repo = make_repo(tmp_path / "r", FILES)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    t0 = time.monotonic()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledger_runtime",
            "mini",
            "-m",
            "openai/gpt-5-mini",
            "-t",
            "x",
            "-w",
            str(repo),
            "-o",
            str(tmp_path / "run"),
            "-y",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **env,
            "MSWEA_CONFIGURED": "1",
            "MSWEA_SILENT_STARTUP": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "COLUMNS": "200",
        },
        stdin=subprocess.DEVNULL,
    )
    took = time.monotonic() - t0
    assert "OPENAI_API_KEY" in one_line_error(r)
    # up front, not after minutes of retries: against the start-up the command cannot avoid, timed now
    # (a loaded machine slows both alike)
    t1 = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", "import litellm, minisweagent"],
        capture_output=True,
        timeout=300,
        env={**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MSWEA_SILENT_STARTUP": "1"},
    )
    floor = time.monotonic() - t1
    assert took < 2 * floor + 20, f"{took:.1f} s against a start-up of {floor:.1f} s"


def test_mini_container_environment_needs_an_image(tmp_path):
    repo = make_repo(tmp_path / "r", FILES)
    msg = one_line_error(
        ledger_run(
            "mini",
            "--environment-class",
            "docker",
            "-t",
            "x",
            "-w",
            str(repo),
            "-m",
            "deterministic",
            "-o",
            str(tmp_path / "run"),
        )
    )
    assert "--image" in msg


# -- mini's -c ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_mini_c_is_minis_own(tmp_path):
    """-c takes config files and KEY=VALUE specs, merged in order, as mini does."""
    repo = make_repo(tmp_path / "r", FILES)
    cfg = scripted_mini_config(
        tmp_path / "cfg.yaml",
        ["cat calc.py", "echo one", "echo two", "echo three", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"],
    )
    run = tmp_path / "run"
    r = ledger_run(
        "mini",
        "-c",
        str(cfg),
        "-c",
        "agent.step_limit=2",
        "-t",
        "look",
        "-w",
        str(repo),
        "-o",
        str(run),
        "-y",
        "--exit-immediately",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    traj = json.loads((run / "trajectory.traj.json").read_text())
    assert traj["info"]["exit_status"] == "LimitsExceeded"
    assert traj["info"]["config"]["agent"]["step_limit"] == 2
    bad = ledger_run("mini", "-c", "no-such-config.yaml", "-t", "x", "-w", str(repo))
    assert "no-such-config.yaml" in one_line_error(bad)


def test_mini_in_docker_works_on_the_work_tree(tmp_path, docker_image):  # noqa: F811
    """--environment-class docker --image IMAGE: the work tree is mounted into the container at the
    same path, commands start there, and what they write is in the work tree."""
    repo = make_repo(tmp_path / "r", FILES)
    cfg = scripted_mini_config(
        tmp_path / "cfg.yaml",
        [
            "cat calc.py",
            "sed -i 's/a - b/a + b/' calc.py && echo done > made.txt",
            "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",  # held back once: verify-before-submit
            "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
        ],
        interpreter=["bash", "-c"],
    )
    run = tmp_path / "run"
    bad = ledger_run(
        "mini",
        "-c",
        str(cfg),
        "-c",
        "environment.timeout=soon",
        "--environment-class",
        "docker",
        "--image",
        docker_image,
        "-t",
        "x",
        "-w",
        str(repo),
        "-o",
        str(tmp_path / "bad"),
        "-y",
    )
    assert "-c environment.timeout:" in one_line_error(bad)  # the key named, before a container starts
    r = ledger_run(
        "mini",
        "-c",
        str(cfg),
        "--environment-class",
        "docker",
        "--image",
        docker_image,
        "-t",
        "fix add",
        "-w",
        str(repo),
        "-o",
        str(run),
        "-y",
        "--exit-immediately",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "DEBUG" not in r.stdout + r.stderr  # mini-swe-agent logs each container's start at DEBUG
    assert (repo / "made.txt").read_text() == "done\n" and "a + b" in (repo / "calc.py").read_text()
    from ledger_runtime.inspection import load

    state = load(run).state
    assert state.attempts[0].exit_code == 0 and [
        os.path.basename(m.path) for m in state.modifications if m.attempt == state.attempts[1].id
    ] == ["calc.py", "made.txt"]


from docker_support import docker_image  # noqa: E402,F401  (fixture)

# -- the hook client -------------------------------------------------------------------------------


def test_hook_client_with_garbage_never_blocks_and_logs(tmp_path):
    fast = Path(__file__).resolve().parents[1] / "ledger_runtime" / "hooks" / "fasthook.py"
    for argv, stdin in (
        (["hook", 'Pre"Tool'], b"{}"),
        (["hook", "PreToolUse", "--socket", str(tmp_path / "none")], b"\xff\x00"),
        (["hook"], b""),
    ):
        r = subprocess.run(
            [sys.executable, "-S", "-E", str(fast), *argv, "--run-dir", str(tmp_path)],
            input=stdin,
            capture_output=True,
            timeout=60,
        )
        assert r.returncode == 0 and r.stdout == b"" and b"Traceback" not in r.stderr, r.stderr
    faults = [json.loads(ln) for ln in (tmp_path / "faults.log").read_text().splitlines()]
    assert len(faults) == 3 and "event's name" in faults[0]["error"] and "did not answer" in faults[1]["error"]


# -- past one machine -------------------------------------------------------------------------------


@pytest.mark.parametrize("env_class,prefix", [("singularity", "docker://"), ("swerex_modal", ""), ("docker", "")])
def test_any_environment_reaches_mini_swe_agent_wrapped(env_class, prefix):
    """--environment-class NAME: every arm wraps that environment in the ledger's, with the image named
    as mini-extra swebench names it, and Docker's labels only where Docker runs the instances."""
    from minisweagent.run.benchmarks.swebench import get_swebench_docker_image_name

    from ledger_adapters.mini.environment import image_for
    from ledger_harness.swebench.run import ENV_CLASS, arm_config, base_config, uses_docker

    cfg = base_config([], "openai/gpt-5-mini", None, env_class)
    assert uses_docker(cfg) is (env_class == "docker")
    for arm in ("ledger", "baseline"):
        env = arm_config(cfg, arm, "run1")["environment"]
        assert env["environment_class"] == ENV_CLASS and env["inner_class"] == env_class
        assert ("--label" in (env.get("run_args") or [])) is (env_class == "docker")
    name = get_swebench_docker_image_name({"instance_id": "demo__calc-1"})
    assert image_for(env_class, "", name) == prefix + name, "named as mini-extra swebench names it"
    assert image_for("local", "LocalEnvironment", name) is None


def test_evaluate_on_modal_passes_the_harness_its_flag(tmp_path):
    from ledger_harness.swebench.eval import harness_command

    preds = tmp_path / "preds.json"
    preds.write_text("{}")
    local = harness_command(preds, dataset="d", split="test", workers=2, run_id="r", report_dir=tmp_path)
    remote = harness_command(preds, dataset="d", split="test", workers=2, run_id="r", report_dir=tmp_path, modal=True)
    assert "--modal" not in local and remote[-2:] == ["--modal", "true"] and remote[:-2] == local


def test_every_option_says_what_it_does():
    """Every option of every command has help text; the internal hook command is not in the help."""
    import typer

    from ledger_runtime.cli.main import app

    cmd = typer.main.get_command(app)
    missing = []

    def walk(c, path):
        for p in c.params:
            if p.param_type_name == "option" and not getattr(p, "help", None) and p.name not in ("help",):
                missing.append(f"{path} {p.opts[0]}")
        for name, sub in getattr(c, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(cmd, "ledger-run")
    assert not missing, missing
    top = ledger_run("--help")
    assert top.returncode == 0 and " hook " not in top.stdout and " config " in top.stdout


def test_every_setting_is_documented():
    from ledger_runtime.config import FLAT, SECTIONS
    from ledger_runtime.config_file import setting_docs

    text = (Path(__file__).resolve().parents[1] / "docs" / "settings.md").read_text()
    docs = setting_docs()
    assert len(docs) == len(FLAT) and all(docs.values()), "every key has its description in its section's class"
    assert [n for n in SECTIONS if f"`[ledger.{n}]`" not in text] == [], "docs/settings.md shows every section"
    assert [n for n in FLAT if f"`{n}`" not in text] == [], "docs/settings.md names every flat name"
    keys = {f"`{key}`" for section, key in FLAT.values() if key != getattr(SECTIONS.get(section), "whole", "")}
    assert [k for k in keys if k not in text] == [], "docs/settings.md names every key of a section"


def io_file(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "printed.toml"
    f.write_text(text)
    return f


def test_config_command_writes_checks_and_prints(tmp_path):
    import tomllib

    printed = ledger_run("config")
    assert printed.returncode == 0 and load_config(io_file(tmp_path, printed.stdout)) == LedgerConfig()
    assert all(t == {} for t in tomllib.loads(printed.stdout)["ledger"].values()), "every default commented out"
    assert "[ledger.dedupe]\n# What the model gets back" in printed.stdout and '\n# mode = "spans"\n' in printed.stdout
    assert "# shadow_view = false" in printed.stdout
    f = tmp_path / "ledger.toml"
    assert ledger_run("config", "--write", str(f)).returncode == 0
    assert (f.stat().st_mode & 0o777) == 0o600
    assert "exists" in one_line_error(ledger_run("config", "--write", str(f)))
    assert "--force goes with --write" in one_line_error(ledger_run("config", "--force"))
    f.write_text(f.read_text().replace("# shadow_view = false", "shadow_view = true"))
    ok = ledger_run("config", "--check", str(f))
    assert ok.returncode == 0 and "shadow_view = true" in ok.stdout
    f.write_text("dedupe = 'some'\n")
    assert "dedupe: expected 'spans' or 'whole' or 'off', got 'some'" in one_line_error(
        ledger_run("config", "--check", str(f))
    )
    text = ledger_run("config").stdout.replace("# min_lines = 2", "min_lines = 3")
    f.write_text(text)  # a line uncommented in its section: that setting changes, nothing else
    ok = ledger_run("config", "--check", str(f))
    assert ok.returncode == 0 and ok.stdout.strip().endswith("valid; ledger.dedupe.min_lines = 3"), ok.stdout
    f.write_text(text + "\n[ledger.extra]\n")
    assert "unknown key 'ledger.extra'" in one_line_error(ledger_run("config", "--check", str(f)))
    f.write_text("dedupe_min_lines = 4\n[dedupe]\nmin_lines = 3\n")  # an older flat key beside its section
    line = one_line_error(ledger_run("config", "--check", str(f)))
    assert "dedupe_min_lines = 4 and dedupe.min_lines = 3 set the same setting to different values" in line


def test_ctrl_c_in_the_demo_says_what_was_kept(tmp_path):
    import signal

    p = subprocess.Popen(
        [sys.executable, "-m", "ledger_runtime", "demo", "-o", str(tmp_path / "d")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "80", "MSWEA_SILENT_STARTUP": "1"},
    )
    out = []
    sent = False
    for line in p.stdout:
        out.append(line)
        if line.startswith("step  1") and not sent:
            p.send_signal(signal.SIGINT)  # the demo takes about a second: this lands mid-run
            sent = True
    assert p.wait(timeout=120) == 130, "".join(out)
    (said,) = [line for line in out if line.startswith("interrupted:")]
    assert f"interrupted: the ledger of the steps so far is kept in {tmp_path / 'd' / 'run'} " in said, "one line"
    assert f"(ledger-run inspect {tmp_path / 'd' / 'run'})" in said, "at 80 columns too: the paths are for copying"
    from ledger_runtime.inspection import load

    assert load(tmp_path / "d" / "run").state.attempts, "the steps before Ctrl-C are in the ledger"


def test_tables_fit_80_columns_without_breaking_words(tmp_path):
    from rich.cells import cell_len
    from rich.console import Console

    from ledger_harness.replay.report import aggregate, table
    from ledger_runtime.inspection import load, print_inspection

    long_path = "inventory/pricing_and_discounts.py"
    repo = make_repo(tmp_path / "r", {**FILES, long_path: "x = 1\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    try:
        for cmd in (
            "cat inventory/pricing_and_discounts.py",
            "sed -i 's/x = 1/x = 2/' inventory/pricing_and_discounts.py",
            "python3 -c 'print(1)' && echo " + "a_rather_long_argument_without_any_space_in_it" * 2,
        ):
            rt.run(cmd, LocalExecutor())
    finally:
        rt.close()
    console = Console(width=80, record=True, file=open(os.devnull, "w"))
    print_inspection(load(tmp_path / "run"), console)
    row = {
        "rows": [],
        "repo": "sphinx-doc/sphinx",
        "instance_id": "x",
        "summary": {
            "commands": 1,
            "parsed": 1,
            "verdicts": {},
            "by_class": {},
            "answers": {},
            "spared_by_kind": {},
            "spared_by_class": {},
            "visible_by_class": {},
            "checked": 1,
            "unsound": 0,
            "unsound_masked": 0,
            "output_chars": 10,
            "visible_chars": 10,
            "shown_visible_chars": 10,
            "chars_spared": 0,
            "repeated_chars": 0,
            "redundant": 0,
            "redundant_exact": 0,
            "redundant_subsumed": 0,
            "caught": 0,
            "not_executed": 0,
        },
    }
    console.print(table(aggregate([row])))
    text = console.export_text()
    assert max(cell_len(line) for line in text.splitlines()) <= 80
    for line in text.splitlines():
        for word in line.split():
            if "pricing" in word:  # whole, or abbreviated with a mark: never cut silently
                assert long_path in word or word.startswith("…") or word.endswith("…"), line
    for header in ("repository", "commands", "unsound", "spared", "repeated", "caught", "files changed"):
        assert header in text, header


def test_the_timeline_shows_each_answer_and_fills_the_terminal(tmp_path):
    from rich.cells import cell_len

    from ledger_adapters.mini.demo import FIX

    d = tmp_path / "d"
    assert ledger_run("demo", "-o", str(d)).returncode == 0
    answers = ["raw", "raw", "spans", "raw", "whole", "raw", "raw", "delta", "raw", "raw", "raw"]
    for columns in (80, 200):
        r = ledger_run("inspect", str(d), env={"COLUMNS": str(columns)})
        assert r.returncode == 0, r.stderr
        lines = r.stdout.split("Summary")[0].splitlines()
        assert max(cell_len(line) for line in lines) <= columns
        header = next(line for line in lines if line.lstrip().startswith("step"))
        assert header.split()[:5] == ["step", "verdict", "class", "answer", "command"], header
        rows = [line for line in lines if re.match(r"\s*\d+ ", line)]
        assert len(rows) == 11, "each command on one line"
        at = header.index("answer")
        assert [row[at:].split()[0] for row in rows] == answers
        edit = rows[6]
        if columns == 80:
            assert "sed -i 's/return r" in edit and "…" in edit and "inventory/pricing.py" not in edit.split("…")[0]
        else:
            assert FIX in edit and edit.rstrip().endswith(" inventory/pricing.py"), edit


@pytest.mark.slow
def test_inspect_filters_and_finds_the_ledger_of_anything_a_run_left(tmp_path):
    import shutil

    d = tmp_path / "d"
    assert ledger_run("demo", "-o", str(d)).returncode == 0
    traj = d / "run" / "trajectory.traj.json"
    rows = json.loads(ledger_run("inspect", str(traj), "--json", "--verdict", "nudge").stdout)["timeline"]
    assert [r["verdict"] for r in rows] == ["NUDGE"]
    runs = json.loads(ledger_run("inspect", str(d), "--json", "--class", "run").stdout)["timeline"]
    assert runs and {r["class"] for r in runs} == {"run"} and len(runs) == 3
    assert "unknown FOO" in one_line_error(ledger_run("inspect", str(d), "--verdict", "foo"))
    # a SWE-bench-shaped folder, moved from where the trajectory says its ledger is
    inst = tmp_path / "OUT" / "ledger" / "demo__calc-1"
    inst.mkdir(parents=True)
    shutil.move(str(d / "run"), str(inst / "ledger"))
    shutil.move(str(inst / "ledger" / "trajectory.traj.json"), str(inst / "demo__calc-1.traj.json"))
    for target in (inst, inst / "demo__calc-1.traj.json"):
        r = ledger_run("inspect", str(target), "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["summary"]["attempts"] == 11, r.stderr
    (tmp_path / "x.json").write_text("{}")
    assert "without info.ledger.path" in one_line_error(ledger_run("inspect", str(tmp_path / "x.json")))


def test_shell_completion_completes_commands_and_options():
    script = Path(sys.executable).parent / "ledger-run"  # completion is keyed by the program's name
    if not script.exists():
        pytest.skip(f"no ledger-run script next to {sys.executable} (pip install -e .)")
    env = {**os.environ, "_LEDGER_RUN_COMPLETE": "complete_bash"}
    first = subprocess.run(
        [str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "COMP_WORDS": "ledger-run ins", "COMP_CWORD": "1"},
    )
    assert first.stdout.split() == ["inspect"], first.stderr
    opt = subprocess.run(
        [str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "COMP_WORDS": "ledger-run inspect --ver", "COMP_CWORD": "2"},
    )
    assert opt.stdout.split() == ["--verdict"]
    assert "--install-completion" in ledger_run("--help").stdout


def test_readme_stays_short_with_the_two_commands_and_the_quickstarts():
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert len(text.splitlines()) <= 160
    assert 'pip install -e ".[mini]" && ledger-run demo' in text and 'pip install -e ".[test]" && pytest -q' in text
    assert "## Quickstart: mini-swe-agent" in text and "## Quickstart: Codex" in text
    root = Path(__file__).resolve().parents[1]
    for page in re.findall(r"`(docs/[a-z0-9-]+\.md)`", text):
        assert (root / page).is_file(), page


@pytest.mark.slow
def test_replay_leaves_nothing_behind_in_tmp(tmp_path):
    import glob
    import tempfile

    from test_replay import COMMANDS, mirror, traj_file

    bare, commit = mirror(tmp_path)
    traj_file(tmp_path / "a.traj.json", "demo__calc-1", COMMANDS[:2])
    (tmp_path / "i.jsonl").write_text(json.dumps({"instance_id": "demo__calc-1", "base_commit": commit}) + "\n")
    private = tmp_path / "tmp"  # a /tmp of its own: what other processes leave in the shared one is not ours
    private.mkdir()
    pattern = os.path.join(str(private), "*")
    before = set(glob.glob(pattern))
    r = ledger_run(
        "replay",
        str(tmp_path / "a.traj.json"),
        "--repo",
        str(bare),
        "--instances",
        str(tmp_path / "i.jsonl"),
        "--workdir",
        str(tmp_path / "tb"),
        "-o",
        str(tmp_path / "o"),
        env={"TMPDIR": str(private)},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    left = {p for p in set(glob.glob(pattern)) - before if not p.endswith(f"-{os.getuid()}")}
    assert not left, left
    assert tempfile.gettempdir() != str(private), "the test's own process was not moved"


def test_an_answer_cut_short_is_not_passed_on(tmp_path):
    """The hook server ends its answer with a newline; a client that gets JSON without it (a server
    that died mid-send) prints nothing, logs the fault and exits 0: the command runs."""
    import socket
    import threading

    path = str(tmp_path / "s.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(2)
    answers = [b'{"hookSpecificOutput": {"permissionDecision": "deny"}', b'{"ok": true}\n']

    def serve():
        for answer in answers:
            c, _ = srv.accept()
            while c.recv(65536):
                pass
            c.sendall(answer)
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    fast = Path(__file__).resolve().parents[1] / "ledger_runtime" / "hooks" / "fasthook.py"
    outs = [
        subprocess.run(
            [sys.executable, "-S", "-E", str(fast), "hook", "PreToolUse", "--socket", path, "--run-dir", str(tmp_path)],
            input=b"{}",
            capture_output=True,
            timeout=60,
        )
        for _ in answers
    ]
    srv.close()
    assert outs[0].returncode == 0 and outs[0].stdout == b"", "cut short: nothing passed on"
    assert outs[1].stdout == b'{"ok": true}\n'
    assert "cut short" in (tmp_path / "faults.log").read_text()


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "--step", "abc", "."],
        ["inspect"],
        ["bogus"],
        ["--nosuch"],
        ["config", "--check", "/"],
        ["replay", ".", "--filter", "(", "--observations-only"],
    ],
)
@pytest.mark.slow
def test_usage_errors_are_one_line_too(args):
    assert one_line_error(ledger_run(*args)).startswith("error: ")


# -- what the docs say is what the commands do --------------------------------------------------------


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("demo") / "d"
    r = ledger_run("demo", "-o", str(d))
    assert r.returncode == 0, r.stderr[-2000:]
    return d


@pytest.mark.browser
def test_step_n_is_the_state_after_step_n_in_the_terminal_the_json_and_the_page(demo_run, tmp_path):
    from browser import Browser

    from ledger_runtime.cli.printable import visible

    docs = (Path(__file__).resolve().parents[1] / "docs" / "inspect.md").read_text()
    assert "`--step N` always means the state *after* step N" in docs
    printed = ledger_run("inspect", str(demo_run), "--step", "5").stdout
    assert printed.startswith('<ledger_state step="5">'), printed[:200]
    # the state view, then the note the model was sent after the step (the demo's is there)
    terminal, note = printed.split("\n(the note the model was sent after step 5, ", 1)
    assert note.split("\n", 1)[1].startswith("(Ledger runtime: what your commands' own output did not show you")
    assert json.loads(ledger_run("inspect", str(demo_run), "--step", "5", "--json").stdout)["state_view"] + "\n" == (
        terminal
    )
    rows = json.loads(ledger_run("inspect", str(demo_run), "--json").stdout)["timeline"]
    assert [r["state_view"] + "\n" for r in rows if r["step"] == 5] == [terminal]
    page = tmp_path / "run.html"
    assert ledger_run("inspect", str(demo_run), "--html", str(page)).returncode == 0
    b = Browser()
    try:
        b.open(page)
        assert b.js("document.querySelector('#step-5 details summary').textContent") == "the state view after step 5"
        assert b.js("document.querySelector('#step-5 details pre').textContent") + "\n" == visible(terminal)
    finally:
        b.close()


def test_json_has_every_step_s_state_view_and_the_diffs_of_its_changes(demo_run):
    data = json.loads(ledger_run("inspect", str(demo_run), "--json").stdout)
    rows = data["timeline"]
    assert all(r["state_view"].startswith(f'<ledger_state step="{r["step"]}">') for r in rows)
    (edit,) = [r for r in rows if r["modifications"]]
    (m,) = edit["modifications"]
    assert (m["path"], m["change"], m["added"], m["removed"], m["step"]) == (
        "inventory/pricing.py",
        "modified",
        1,
        1,
        7,
    )
    assert m["diff"].startswith("--- a/inventory/pricing.py\n+++ b/inventory/pricing.py\n@@ ")
    assert "\n-    return round(price * percent, 2)\n+    return round(price * (1 - percent / 100), 2)\n" in m["diff"]
    assert data["between_commands"] == []
    one = json.loads(ledger_run("inspect", str(demo_run), "--step", "7", "--json").stdout)
    assert one["commands"][0]["modifications"] == [m]


def test_settings_at_the_top_and_in_a_ledger_table_are_refused_never_half_read(tmp_path):
    from ledger_runtime.config import ConfigError

    both = tmp_path / "both.toml"
    both.write_text("dedupe = 'off'\nname = 'a tool of its own'\n\n[ledger]\nshadow = true\n")
    line = one_line_error(ledger_run("config", "--check", str(both)))
    assert "dedupe is set at the top level of a file with a [ledger] table" in line, line
    with pytest.raises(ConfigError, match="dedupe"):
        load_config(both)
    table = tmp_path / "table.toml"
    table.write_text("name = 'a tool of its own'\n\n[ledger]\nshadow = true\n")  # other keys are not ours
    assert load_config(table).shadow is True
    docs = (Path(__file__).resolve().parents[1] / "docs" / "settings.md").read_text()
    assert "a setting at its top level is refused" in docs


def test_a_moved_run_s_trajectory_finds_its_ledger_beside_it(demo_run, tmp_path):
    import shutil

    from ledger_harness.swebench.report import instance_figures

    moved = tmp_path / "moved"
    shutil.copytree(demo_run, moved)
    shutil.rmtree(demo_run.parent / "gone", ignore_errors=True)
    traj = moved / "run" / "trajectory.traj.json"
    named = json.loads(traj.read_text())["info"]["ledger"]["path"]
    os.rename(demo_run, demo_run.parent / "gone")  # the ledger it names is not there any more
    try:
        assert not Path(named).exists()
        r = ledger_run("inspect", str(traj), "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["ledger"] == str(moved / "run" / "ledger.sqlite")
        page = tmp_path / "p.html"
        assert ledger_run("inspect", str(moved / "run"), "--html", str(page)).returncode == 0
        assert page.read_text().count('class="said find"') == 11, "the moved trajectory is the run's record"
        # a SWE-bench arm moved elsewhere: the instance's ledger, beside its trajectory, is found
        inst = tmp_path / "OUT" / "ledger" / "demo__calc-1"
        inst.mkdir(parents=True)
        shutil.copytree(moved / "run", inst / "ledger")
        shutil.move(str(inst / "ledger" / "trajectory.traj.json"), str(inst / "demo__calc-1.traj.json"))
        row = instance_figures(tmp_path / "OUT" / "ledger", "demo__calc-1", {}, {})
        assert row["ledger"] and row["ledger"]["commands"] == 11 and "problem" not in row, row
    finally:
        os.rename(demo_run.parent / "gone", demo_run)


def test_the_config_printout_points_at_docs_not_at_source_files():
    root = Path(__file__).resolve().parents[1]
    text = ledger_run("config").stdout
    assert not re.findall(r"[\w/]+\.py\b", text), re.findall(r"[\w/]+\.py\b", text)
    named = set(re.findall(r"docs/[a-z0-9-]+\.md", text))
    assert "docs/settings.md" in named and all((root / d).is_file() for d in named), named


@pytest.mark.slow
def test_the_readme_s_demo_figures_are_what_the_demo_prints_wherever_it_runs(tmp_path):
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## What the demo shows", 1)[1]
    blocks = re.findall(r"```\n(.*?)```", section, re.S)
    shown = [line for line in blocks[0].splitlines() if line != "..."]
    printed = []
    for where in (tmp_path / "a", tmp_path / ("a-much-longer-directory-name-" * 3) / "deeper" / "b"):
        r = ledger_run("demo", "-o", str(where))
        assert r.returncode == 0, r.stderr[-2000:]
        steps = r.stdout.split("\nagent finished")[0]
        lines = [ln.rstrip() for ln in steps.splitlines() if ln.startswith(("step ", "             "))]
        assert lines[: len(shown)] == shown, "\n".join(lines)
        printed.append(lines)
        for step, block in ((3, blocks[1]), (8, blocks[2])):
            assert ledger_run("inspect", str(where), "--step", str(step), "--output").stdout == block
    assert printed[0] == printed[1], "the same figures on any path"
    assert "depends on where the demo runs" not in readme


@pytest.mark.slow
def test_the_replay_s_cost_table_is_readable_at_80_columns(tmp_path):
    """The cost table of ``--context`` arms has a dozen columns: at 80 (a terminal's, and piped output's) every
    cell was cut to "8…"; narrower than the table, it turns (a column per arm, a row per figure): every figure whole."""
    from test_replay import COMMANDS, mirror, traj_file

    bare, commit = mirror(tmp_path)
    traj_file(tmp_path / "a.traj.json", "demo__calc-1", COMMANDS[:3])
    (tmp_path / "i.jsonl").write_text(json.dumps({"instance_id": "demo__calc-1", "base_commit": commit}) + "\n")
    args = ["replay", str(tmp_path / "a.traj.json"), "--repo", str(bare), "--instances", str(tmp_path / "i.jsonl")]
    args += ["--context", "full,window:2", "--price-model", "gpt-5-mini", "--workdir", str(tmp_path / "tb")]
    r = ledger_run(*args, "-o", str(tmp_path / "o"), env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr[-2000:]
    table = r.stdout[r.stdout.index("billed as gpt-5-mini") :]
    assert "…" not in table and "input USD" in table and "vs none" in table, table
    assert max(map(len, table.splitlines())) <= 80, table
    assert not [line for line in r.stdout.splitlines() if line.endswith(" ")], r.stdout  # piped: none padded
