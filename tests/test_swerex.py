"""Past one machine: the ledger around mini-swe-agent's SWE-ReX environments, against a REAL SWE-ReX
server (``swerex-remote``, from PyPI) in a container on the local engine (swerex_support.py).

``swerex_docker`` and ``swerex_modal`` differ only in where the server runs: both send every command as
an HTTP request to a ``RemoteRuntime``. So this is the path a Modal (or Fargate) run takes, end to
end: the command through the ledger into the remote runtime, the container helper installed through
that same runtime, each command's snapshot riding in the command's own request, an edit recorded, a
repeated read answered by a reference, the deployment stopped when the instance is done.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import subprocess
import time
from pathlib import Path

import pytest
from minisweagent.agents.default import DefaultAgent
from minisweagent.models.test_models import make_output
from swerex_support import swerex_image  # noqa: F401  (fixture)
from test_swebench_arms import instances_file, ledger_run, scripted_config

from ledger_adapters.mini.environment import LedgerEnvironment, LedgerModel
from ledger_runtime.inspection import load
from ledger_runtime.records import VerdictKind

# pull never: the image is local, and a pull would go to a registry this machine cannot reach
SWEREX_CFG = {"cwd": "/testbed", "timeout": 30, "deployment_extra_kwargs": {"pull": "never", "startup_timeout": 120}}
TEST = "python3 -m unittest -q test_calc"


def containers(image: str) -> list[str]:
    """Names of the containers of ``image``, running or not."""
    r = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"ancestor={image}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return r.stdout.split()


def left_running(image: str, before: set[str], wait: float = 20.0) -> set[str]:
    """Containers of ``image`` not in ``before`` still there after up to ``wait`` seconds: one that was
    stopped goes within moments (``docker run --rm`` removes it once killed), one left running stays."""
    deadline = time.monotonic() + wait
    while (left := set(containers(image)) - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def outputs(cmds: list[str]) -> list[dict]:
    return [make_output(f"step {i}", [{"command": c}], cost=0.0) for i, c in enumerate(cmds)]


def test_a_scripted_agent_through_a_swerex_server(swerex_image, tmp_path):  # noqa: F811
    cmds = [
        "cat calc.py",
        "cat calc.py",
        TEST,
        "sed -i '2s/a - b/a + b/' calc.py",
        "cat calc.py",
        TEST,
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff",
    ]
    env = LedgerEnvironment(
        inner_class="swerex_docker", image=swerex_image, **SWEREX_CFG, ledger={"run_dir": str(tmp_path / "run")}
    )
    try:
        deployment = env.inner.deployment
        name = deployment.container_name
        assert type(env.inner).__name__ == "SwerexDockerEnvironment"
        assert type(deployment.runtime).__name__ == "RemoteRuntime", "commands go over SWE-ReX's HTTP protocol"
        inspect = subprocess.run(["docker", "inspect", name], capture_output=True, text=True, timeout=30)
        assert "swerex-remote --auth-token" in " ".join(json.loads(inspect.stdout)[0]["Config"]["Cmd"])
        assert type(env.container.transport).__name__ == "EnvExec", "the helper reached through the runtime"
        agent = DefaultAgent(
            LedgerModel(inner_class="deterministic", outputs=outputs(cmds), cost_per_call=0.0),
            env,
            system_template="s",
            instance_template="{{task}}",
            cost_limit=0,
        )
        info = agent.run("fix add")
        assert env.container.round_trips == 1, "only installing the helper took a request of its own"
        assert env.container.reports_in_band == len(cmds), "each command's snapshot rode in the command's request"
    finally:
        env.cleanup()
    assert not left_running(swerex_image, set(containers(swerex_image)) - {name}), "cleanup stopped the deployment"
    assert info["exit_status"] == "Submitted"
    assert info["submission"].startswith("diff --git a/calc.py b/calc.py") and "@@ledger" not in info["submission"]
    assert "+    return a + b" in info["submission"]
    state = load(tmp_path / "run").state
    assert [a.verdict.kind for a in state.attempts][:2] == [VerdictKind.RUN, VerdictKind.RUN]
    shown = [m["content"] for m in agent.messages if "ledger" in (m.get("extra") or {})]
    assert "[ledger: same as step 1's output (`cat calc.py`, exit 0)" in shown[1], "the repeat: a reference"
    reread = state.attempts[4]
    assert reread.answer["kind"] == "delta" and "+    return a + b" in shown[4], "the read after the edit: a diff"
    calc = [m for m in state.modifications if m.path == "/testbed/calc.py"]
    assert len(calc) == 1 and calc[0].recognised and (calc[0].lines_added, calc[0].lines_removed) == (1, 1)
    assert calc[0].attempt == state.attempts[3].id, "the edit is the sed's"
    assert state.baseline.head_commit and state.baseline.root == "/testbed"


CASES = [
    "echo err >&2; echo more err >&2",
    "printf 'no trailing newline'",
    "exit 3",
    "echo before; false",
    "ls /nope",
    "echo 'unterminated",
    "trap 'echo own trap' EXIT; echo body",
    "python3 -c \"import sys; sys.stdout.write('x' * 20000)\"",
    "cd /tmp && pwd",
]


def test_outputs_return_codes_and_timeouts_as_without_the_ledger(swerex_image, tmp_path):  # noqa: F811
    """The same SWE-ReX server, asked with and without the ledger around it."""
    env = LedgerEnvironment(
        inner_class="swerex_docker",
        image=swerex_image,
        **{**SWEREX_CFG, "timeout": 2},
        ledger={"run_dir": str(tmp_path / "run"), "govern": False, "inform": False},
    )
    try:
        for cmd in CASES:
            a = env.inner.execute({"command": cmd})
            b = env.execute({"command": cmd})
            assert (b["output"], b["returncode"], b["exception_info"]) == (
                a["output"],
                a["returncode"],
                a["exception_info"],
            ), cmd
        timed_out = "echo start > started.txt; sleep 10; echo never"
        a = env.inner.execute({"command": timed_out})
        trips = env.container.round_trips
        b = env.execute({"command": timed_out})
        assert (b["output"], b["returncode"], b["exception_info"]) == (a["output"], -1, a["exception_info"])
        assert "Timeout" in b["exception_info"]
        assert env.container.round_trips == trips + 1, "a timed-out command's snapshot costs one request"
        trips = env.container.round_trips
        assert env.execute({"command": "echo fine"})["output"] == "fine\n"
        assert env.container.round_trips == trips, "and the next command's rides in band again"
    finally:
        env.cleanup()
    state = load(tmp_path / "run").state
    assert len(state.attempts) == len(CASES) + 2
    assert any(m.path == "/testbed/started.txt" for m in state.modifications), "the timed-out command's file"


def test_ledger_run_swebench_on_swerex(swerex_image, tmp_path):  # noqa: F811
    """``ledger-run swebench --environment-class swerex_docker``: the arms run in SWE-ReX deployments,
    the instance's image reaches the environment, nothing is pulled, and no container is left."""
    data = instances_file(tmp_path / "instances.jsonl", swerex_image, ["demo__calc-1"])
    out = tmp_path / "out"
    before = set(containers(swerex_image))
    r = ledger_run(
        "swebench",
        "--instances",
        str(data),
        "--environment-class",
        "swerex_docker",
        "--arms",
        "ledger,baseline",
        "-o",
        str(out),
        "--config",
        str(scripted_config(tmp_path / "scripted.yaml")),
        "--no-pull",
        tmp=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert not left_running(swerex_image, before), "every deployment was stopped"
    for arm in ("ledger", "baseline"):
        preds = json.loads((out / arm / "preds.json").read_text())
        assert "+    return a + b" in preds["demo__calc-1"]["model_patch"], (arm, preds)
        manifest = json.loads((out / arm / "manifest.json").read_text())
        assert manifest["config"]["environment"]["inner_class"] == "swerex_docker"
        traj = json.loads((out / arm / "demo__calc-1" / "demo__calc-1.traj.json").read_text())
        assert traj["info"]["config"]["inner_environment_type"].endswith("SwerexDockerEnvironment")
        assert traj["info"]["config"]["environment"]["image"] == swerex_image
    state = load(out / "ledger" / "demo__calc-1" / "ledger").state
    assert [a.verdict.kind for a in state.attempts][:2] == [VerdictKind.RUN, VerdictKind.RUN]
    assert state.attempts[1].applied and state.attempts[1].answer["kind"] == "whole"
    assert any(m.path == "/testbed/calc.py" and m.recognised for m in state.modifications)


def test_an_instance_stops_its_deployment_when_it_ends(swerex_image, tmp_path):  # noqa: F811
    """In a worker thread, as the arms run: SWE-ReX's own clean-up on garbage collection needs an event
    loop the thread does not have, so without ours each instance would leave its container (on Modal:
    its sandbox) running."""
    import threading

    from ledger_harness.swebench.run import ArmProgress, arm_config, base_config, run_instance

    data = instances_file(tmp_path / "instances.jsonl", swerex_image, ["demo__calc-1"])
    instance = json.loads(data.read_text().splitlines()[0])
    cfg = base_config([scripted_config(tmp_path / "scripted.yaml")], None, None, "swerex_docker")
    cfg = arm_config(cfg, "ledger", "run1")

    class Bar:
        def update(self, *a, **k):
            pass

    arm_dir = tmp_path / "ledger"
    arm_dir.mkdir()
    progress = ArmProgress(Bar(), None, "ledger")
    before = set(containers(swerex_image))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(run_instance, instance, arm_dir, cfg, progress, threading.Event()).result()
        assert progress.last == {"demo__calc-1": "Submitted"}
        assert not left_running(swerex_image, before), "the instance's deployment was stopped as it ended"


@pytest.mark.parametrize(
    "env_class,expected",
    [
        ("swerex_modal", "needs modal, which is not installed: pip install 'swe-rex[modal]'"),
        ("swerex_dokcer", "did you mean 'swerex_docker'"),
    ],
)
def test_a_missing_or_misspelt_environment_is_one_line_before_anything_runs(tmp_path, env_class, expected):
    """swe-rex's Modal deployment needs the modal package; a misspelt class is named with the closest."""
    if env_class == "swerex_modal" and importlib.util.find_spec("modal") is not None:
        pytest.skip("modal is installed here: the case needs a machine without it (CI's test extra has none)")
    data = instances_file(tmp_path / "instances.jsonl", "ledger-test/none:never", ["demo__calc-1"])
    out = tmp_path / "out"
    r = ledger_run(
        "swebench",
        "--instances",
        str(data),
        "--environment-class",
        env_class,
        "-o",
        str(out),
        "--config",
        str(scripted_config(tmp_path / "scripted.yaml")),
        tmp=tmp_path,
    )
    assert r.returncode != 0 and expected in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (out / "ledger").exists(), "nothing ran"


def test_on_modal_the_arms_take_mini_swe_agents_modal_settings():
    """mini-swe-agent ships the settings a SWE-bench instance needs on Modal (swebench_modal.yaml: a
    start-up long enough to build the image, the sandbox's lifetime): the arms start from them; the
    user's files and options still win."""
    import yaml
    from minisweagent.config import builtin_config_dir

    from ledger_harness.swebench.run import base_config

    upstream = yaml.safe_load((Path(builtin_config_dir) / "benchmarks" / "swebench_modal.yaml").read_text())
    env = base_config([], "openai/gpt-5-mini", None, "swerex_modal")["environment"]
    for key in ("startup_timeout", "runtime_timeout", "deployment_timeout", "install_pipx"):
        assert env[key] == upstream["environment"][key], key
    assert env["environment_class"] == "swerex_modal" and env["cwd"] == "/testbed"
    docker = base_config([], "openai/gpt-5-mini", None, "docker")["environment"]
    assert "deployment_timeout" not in docker


@pytest.mark.parametrize("env_class", ["swerex_docker", "swerex_modal"])
def test_the_instance_image_reaches_swerex_environments(env_class):
    from minisweagent.run.benchmarks.swebench import get_swebench_docker_image_name

    from ledger_adapters.mini.environment import image_for

    name = get_swebench_docker_image_name({"instance_id": "demo__calc-1"})
    assert image_for(env_class, "", name) == name
