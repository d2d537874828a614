"""The mini-swe-agent adapter in a REAL Docker container: the snapshot rides in the command's own
docker exec, outputs, return codes and timeouts behave exactly as without the ledger."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from cli_support import scripted_outputs
from docker_support import docker_image  # noqa: F401  (fixture)
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.docker import DockerEnvironment
from minisweagent.models.test_models import make_output

from ledger_adapters.mini.environment import LedgerEnvironment, LedgerModel
from ledger_runtime.inspection import load

DOCKER_CFG = {"cwd": "/testbed", "timeout": 30, "interpreter": ["bash", "-c"], "env": {"PAGER": "cat"}}
TEST = "python3 -m unittest -q test_calc"


def outputs(cmds):
    return [make_output(f"step {i}", [{"command": c}], cost=0.0) for i, c in enumerate(cmds)]


@pytest.mark.parametrize("transport", ["docker", "env"])
def test_scripted_agent_in_a_container(docker_image, tmp_path, transport):
    """``env``: the helper reaches the container through the environment's own execute, as it does
    for environments that are not Docker (singularity, SWE-ReX...)."""
    cmds = [
        "cat calc.py",
        "cat calc.py",
        TEST,
        TEST,
        "sed -i '2s/a - b/a + b/' calc.py",
        TEST,
        "nl -ba calc.py | sed -n '1,5p'",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff",
    ]
    env = LedgerEnvironment(
        inner_class="docker",
        image=docker_image,
        **DOCKER_CFG,
        ledger={"run_dir": str(tmp_path / "run"), "helper_transport": transport},
    )
    try:
        assert type(env.container.transport).__name__ == ("DockerExec" if transport == "docker" else "EnvExec")
        agent = DefaultAgent(
            LedgerModel(inner_class="deterministic", outputs=outputs(cmds), cost_per_call=0.0),
            env,
            system_template="s",
            instance_template="{{task}}",
            cost_limit=0,
        )
        info = agent.run("fix add")
        assert env.container.round_trips == 1, "only installing the helper took an exec of its own"
        assert env.container.reports_in_band == 8, "every command ran, and its report rode in its own exec"
    finally:
        env.cleanup()
    assert info["exit_status"] == "Submitted"
    assert info["submission"].startswith("diff --git a/calc.py b/calc.py") and "@@ledger" not in info["submission"]
    verdicts = [m["extra"]["ledger"]["verdict"] for m in agent.messages if "ledger" in (m.get("extra") or {})]
    assert verdicts == ["RUN", "RUN", "RUN", "NUDGE", "RUN", "RUN", "RUN"]
    shown = [m["content"] for m in agent.messages if "ledger" in (m.get("extra") or {})]
    assert "[ledger: same as step 1's output (`cat calc.py`, exit 0)" in shown[1]
    state = load(tmp_path / "run").state
    calc = [m for m in state.modifications if m.path == "/testbed/calc.py"]
    assert len(calc) == 1 and calc[0].recognised and (calc[0].lines_added, calc[0].lines_removed) == (1, 1)
    assert calc[0].baseline_added == 1, "line counts against the baseline come from git inside the container"
    assert state.baseline.head_commit and state.baseline.root == "/testbed"


CASES = [
    "echo err >&2; echo more err >&2",
    "printf 'no trailing newline'",
    "exit 3",
    "echo before; false",
    "ls /nope",
    "for i in 1 2 3; do echo $i; done",
    "echo 'unterminated",
    "trap 'echo own trap' EXIT; echo body",
    "python3 -c \"import sys; sys.stdout.write('x' * 20000)\"",
    "cd /tmp && pwd",
    "echo $0; echo $-",
]


def test_outputs_and_return_codes_are_exactly_as_without_the_ledger(docker_image, tmp_path):
    plain = DockerEnvironment(image=docker_image, **DOCKER_CFG)
    ledgered = LedgerEnvironment(
        inner_class="docker",
        image=docker_image,
        **DOCKER_CFG,
        ledger={"run_dir": str(tmp_path / "run"), "govern": False, "inform": False},
    )
    try:
        for cmd in CASES:
            a = plain.execute({"command": cmd})
            b = ledgered.execute({"command": cmd})
            assert (b["output"], b["returncode"], b["exception_info"]) == (
                a["output"],
                a["returncode"],
                a["exception_info"],
            ), cmd
        # stdout and stderr travel apart through docker exec and interleave at random, with or without
        # the ledger: compare their lines, not their order
        for mixed, rc in (("echo out; echo err >&2; exit 4", 4), ("cat calc.py | head -3\n(", 2)):
            a, b = plain.execute({"command": mixed}), ledgered.execute({"command": mixed})
            assert sorted(a["output"].splitlines()) == sorted(b["output"].splitlines()), mixed
            assert a["returncode"] == b["returncode"] == rc
    finally:
        plain.cleanup()
        ledgered.cleanup()
    attempts = load(tmp_path / "run").state.attempts
    assert len(attempts) == len(CASES) + 2


def test_timeout_behaves_as_without_the_ledger(docker_image, tmp_path):
    plain = DockerEnvironment(image=docker_image, **{**DOCKER_CFG, "timeout": 2})
    ledgered = LedgerEnvironment(
        inner_class="docker",
        image=docker_image,
        **{**DOCKER_CFG, "timeout": 2},
        ledger={"run_dir": str(tmp_path / "run")},
    )
    try:
        a = plain.execute({"command": "echo start; sleep 10; echo never"})
        trips = ledgered.container.round_trips
        b = ledgered.execute({"command": "echo start; sleep 10; echo never"})
        assert ledgered.container.round_trips == trips + 1, "a timed-out command's snapshot costs one exec"
        assert b["returncode"] == a["returncode"] == -1
        assert re.sub(r"[0-9a-f]{64}", "CID", b["exception_info"]) == re.sub(
            r"[0-9a-f]{64}", "CID", a["exception_info"]
        ), "the same message, command text included, up to the container id"
        trips = ledgered.container.round_trips
        after = ledgered.execute({"command": "echo fine"})
        assert after["output"] == "fine\n"
        assert ledgered.container.round_trips == trips, "and the next command's rides in band again"
    finally:
        plain.cleanup()
        ledgered.cleanup()
    attempt = load(tmp_path / "run").state.attempts[0]
    assert attempt.exit_code == -1


def test_mini_extra_swebench_runs_the_adapter_by_class_path(docker_image, tmp_path):
    """mini-extra swebench fixes its agent class; the environment and model wrappers plug in by class
    path from YAML, and the instance's image reaches the wrapped docker environment."""
    data = tmp_path / "dataset"
    data.mkdir()
    row = {
        "instance_id": "demo__calc-1",
        "repo": "demo/calc",
        "base_commit": "HEAD",
        "image_name": docker_image,
        "problem_statement": "add() subtracts; make test_add pass.",
    }
    (data / "test.jsonl").write_text(json.dumps(row) + "\n")
    steps = [
        "cat calc.py",
        "cat calc.py",
        "sed -i '2s/a - b/a + b/' calc.py",
        "python3 -m unittest -q test_calc",
        "git diff -- calc.py > patch.txt",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt",
    ]
    config = {
        "environment": {
            "environment_class": "ledger_adapters.mini.environment.LedgerEnvironment",
            "inner_class": "docker",
            "ledger": {"dedupe": "spans"},
        },
        "model": {
            "model_class": "ledger_adapters.mini.environment.LedgerModel",
            "inner_class": "deterministic",
            "model_name": "deterministic",
            "cost_per_call": 0.0,
            "outputs": scripted_outputs(steps),
        },
        "agent": {"cost_limit": 0},
    }
    (tmp_path / "ledger.yaml").write_text(json.dumps(config))
    out = tmp_path / "out"
    env = {
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_CONFIGURED": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "MSWEA_GLOBAL_CONFIG_DIR": str(tmp_path / "cfg"),
    }
    import shutil
    import sys

    mini_extra = shutil.which("mini-extra", path=str(__import__("pathlib").Path(sys.executable).parent))
    r = subprocess.run(
        [
            mini_extra,
            "swebench",
            "--subset",
            str(data),
            "--split",
            "test",
            "-o",
            str(out),
            "-c",
            "swebench.yaml",
            "-c",
            str(tmp_path / "ledger.yaml"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    preds = json.loads((out / "preds.json").read_text())
    assert "+    return a + b" in preds["demo__calc-1"]["model_patch"]
    traj = json.loads((out / "demo__calc-1" / "demo__calc-1.traj.json").read_text())
    assert traj["info"]["exit_status"] == "Submitted"
    ledger_path = traj["info"]["ledger"]["path"]
    assert ledger_path == str((out / "demo__calc-1" / "ledger" / "ledger.sqlite").resolve())
    state = load(ledger_path).state
    assert [a.verdict.kind.value for a in state.attempts][:2] == ["RUN", "RUN"]
    assert state.attempts[1].answer["kind"] == "whole"
    assert state.baseline.task.startswith("add() subtracts")
