"""``ledger-run swebench`` and ``ledger-run report`` end to end: mini-swe-agent's SWE-bench runner
with a scripted model, on a real Docker engine, in a locally built image that mimics a SWE-bench
instance image (docker_support.py); the report's figures checked against the ledgers and the
trajectories those runs wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest
from docker_support import docker_image  # noqa: F401  (fixture)

from ledger_harness.swebench.report import mcnemar_exact
from ledger_runtime.inspection import load
from ledger_runtime.records import VerdictKind

STEPS = [
    "cat calc.py",
    "cat calc.py",
    "python3 -m unittest -q test_calc",
    "sed -i '2s/a - b/a + b/' calc.py",
    "python3 -m unittest -q test_calc",
    "git diff -- calc.py > /tmp/patch.txt",
    "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat /tmp/patch.txt",
]
USAGE = {
    "prompt_tokens": 1000,
    "completion_tokens": 50,
    "prompt_tokens_details": {"cached_tokens": 768},
    "cache_creation_input_tokens": 200,  # as litellm hands on Anthropic's
}


def scripted_config(path: Path) -> Path:
    config = {
        "model": {
            "model_class": "deterministic",
            "model_name": "scripted",
            "cost_per_call": 0.0,
            "outputs": [
                {
                    "role": "assistant",
                    "content": f"THOUGHT {i}",
                    "extra": {"actions": [{"command": c}], "cost": 0.01, "response": {"usage": USAGE}},
                }
                for i, c in enumerate(STEPS)
            ],
        },
        "agent": {"cost_limit": 0},
    }
    path.write_text(json.dumps(config))
    return path


def instances_file(path: Path, image: str, ids: list[str]) -> Path:
    path.write_text(
        "".join(
            json.dumps(
                {
                    "instance_id": i,
                    "repo": "demo/calc",
                    "base_commit": "HEAD",
                    "image_name": image,
                    "problem_statement": "add() subtracts; make test_add pass.",
                }
            )
            + "\n"
            for i in ids
        )
    )
    return path


def ledger_run(*args: str, tmp: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_CONFIGURED": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "MSWEA_GLOBAL_CONFIG_DIR": str(tmp / "cfg"),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "ledger_runtime", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def two_instances(image: str, tmp: Path) -> tuple[list[str], Path, Path, Path]:
    """Two instances of the test image, their JSONL, an output directory, the scripted model's config."""
    ids = ["demo__calc-1", "demo__calc-2"]
    return ids, instances_file(tmp / "instances.jsonl", image, ids), tmp / "out", scripted_config(tmp / "scripted.yaml")


def our_containers(out: Path) -> list:
    """The containers of the runs written to ``out`` (by the run ids in its manifests): never those
    of another test, or of another user's run, on the same engine."""
    ids = {
        run["run_id"]
        for manifest in out.glob("*/manifest.json")
        for run in json.loads(manifest.read_text() or "{}").get("runs", [])
    }
    client = docker.from_env()
    # sparse: no inspection of each container, which races with one being removed meanwhile (404)
    labels = [{"label": f"ledger-run.run={i}"} for i in sorted(ids)]
    return [c for f in labels for c in client.containers.list(all=True, sparse=True, filters=f)]


def _running(container, command: str) -> bool:
    try:
        return any(command in " ".join(p) for p in container.top().get("Processes") or [])
    except docker.errors.APIError:  # not running (yet, or any more)
        return False


def test_two_arms_end_to_end_and_the_report_agrees_with_the_files(docker_image, tmp_path):  # noqa: F811
    ids, data, out, cfg = two_instances(docker_image, tmp_path)
    r = ledger_run(
        "swebench",
        "--instances",
        str(data),
        "--arms",
        "ledger,baseline",
        "-w",
        "2",
        "-o",
        str(out),
        "--config",
        str(cfg),
        "--no-pull",
        tmp=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert not our_containers(out), "no container of the run is left"
    for arm in ("ledger", "baseline"):
        preds = json.loads((out / arm / "preds.json").read_text())
        assert set(preds) == set(ids)
        assert all(
            "+    return a + b" in p["model_patch"] and p["model_name_or_path"] == "scripted" for p in preds.values()
        )
        manifest = json.loads((out / arm / "manifest.json").read_text())
        assert manifest["arm"] == arm and manifest["model"] == "scripted" and manifest["instances"] == ids
        assert manifest["versions"]["mini-swe-agent"] and len(manifest["config_hash"]) == 16
        assert manifest["runs"][-1]["status"] == "complete" and manifest["runs"][-1]["ended_at"]
        assert manifest["config"]["environment"]["ledger"]["shadow"] is (arm == "baseline")
        views = [
            json.loads((out / arm / i / f"{i}.traj.json").read_text())["info"]["ledger_views"]["injected"] for i in ids
        ]
        assert all(v == 0 for v in views) if arm == "baseline" else all(v > 0 for v in views), (
            "the baseline is an uninformed agent: no state view reached its model"
        )
        assert "test_*.py" in manifest["config"]["environment"]["ledger"]["policies"]["protected-paths"]["globs"]
    ledger_state = load(out / "ledger" / "demo__calc-1" / "ledger").state
    base_state = load(out / "baseline" / "demo__calc-1" / "ledger").state
    assert [a.verdict.kind for a in ledger_state.attempts][:2] == [VerdictKind.RUN, VerdictKind.RUN]
    assert ledger_state.attempts[1].executed and ledger_state.attempts[1].applied
    assert ledger_state.attempts[1].answer["kind"] == "whole", "the repeat ran, and came back as a reference"
    assert (
        base_state.attempts[1].answer["kind"] == "whole"
        and base_state.attempts[1].executed
        and not base_state.attempts[1].applied
    )

    rep = ledger_run("report", str(out), "--json", tmp=tmp_path)
    assert rep.returncode == 0, rep.stderr[-2000:]
    report = json.loads(rep.stdout)
    assert Path(report["figure"]).stat().st_size > 10_000
    for arm in ("ledger", "baseline"):
        a = report["arms"][arm]
        assert a["instances"] == 2 and a["submitted"] == 2 and a["resolved"] is None
        trajs = [json.loads((out / arm / i / f"{i}.traj.json").read_text()) for i in ids]
        assert a["totals"]["calls"] == sum(t["info"]["model_stats"]["api_calls"] for t in trajs) == 2 * len(STEPS)
        assert a["totals"]["cost"] == pytest.approx(sum(t["info"]["model_stats"]["instance_cost"] for t in trajs))
        assert a["totals"]["input_tokens"] == 2 * len(STEPS) * USAGE["prompt_tokens"]
        assert a["totals"]["cached_tokens"] == 2 * len(STEPS) * 768
        assert a["totals"]["cache_write_tokens"] == 2 * len(STEPS) * 200
        states = [load(out / arm / i / "ledger").state for i in ids]
        reuse = [x for s in states for x in s.attempts if (x.answer or {}).get("kind") in ("whole", "spans", "delta")]
        assert a["re_reads"] == len(reuse) >= 2
        assert a["reuses"] == sum(1 for x in reuse if x.applied) == (len(reuse) if arm == "ledger" else 0)
        assert a["re_read_chars"] == sum(x.output_chars for x in reuse)
        assert a["re_reads_by_class"] == {"inspect": len(reuse)}
        timings = json.loads((out / arm / "timings.json").read_text())
        assert a["totals"]["wall_s"] == pytest.approx(sum(t["wall_s"] for t in timings.values()))
    # one definition for all arms: the baseline's shadow ledger finds the same re-reads
    assert report["arms"]["ledger"]["re_reads"] == report["arms"]["baseline"]["re_reads"]
    assert report["paired"][0]["scored"] == 0

    # scores from a harness report: ledger resolved both, baseline one
    for arm, resolved in (("ledger", ids), ("baseline", ids[:1])):
        harness = tmp_path / f"{arm}.json"
        harness.write_text(
            json.dumps(
                {
                    "resolved_ids": resolved,
                    "unresolved_ids": [i for i in ids if i not in resolved],
                    "error_ids": [],
                    "empty_patch_ids": [],
                }
            )
        )
        ev = ledger_run("swebench", "evaluate", str(out / arm), "--from-report", str(harness), tmp=tmp_path)
        assert ev.returncode == 0, ev.stderr
    report = json.loads(ledger_run("report", str(out), "--json", "--no-png", tmp=tmp_path).stdout)
    assert report["arms"]["ledger"]["resolved_rate"] == 1.0 and report["arms"]["baseline"]["resolved_rate"] == 0.5
    pair = report["paired"][0]
    assert (pair["a"], pair["b"], pair["only_a"], pair["only_b"], pair["both"]) == (
        "ledger",
        "baseline",
        ["demo__calc-2"],
        [],
        1,
    )
    assert pair["p_value"] == 1.0
    text = ledger_run("report", str(out), "--no-png", tmp=tmp_path)
    assert "McNemar exact p = 1" in text.stdout and "2/2 (100.0%)" in text.stdout


def test_a_half_written_output_resumes(docker_image, tmp_path):  # noqa: F811
    ids, data, out, cfg = two_instances(docker_image, tmp_path)
    first = ledger_run(
        "swebench",
        "--instances",
        str(data),
        "--arms",
        "ledger",
        "--slice",
        "0:1",
        "-o",
        str(out),
        "--config",
        str(cfg),
        "--no-pull",
        tmp=tmp_path,
    )
    assert first.returncode == 0, first.stderr[-2000:]
    traj = out / "ledger" / ids[0] / f"{ids[0]}.traj.json"
    before = traj.stat().st_mtime_ns
    (out / "ledger" / "preds.json").write_text('{"demo__calc-1": {"model_na')  # killed mid-write
    again = ledger_run(
        "swebench",
        "--instances",
        str(data),
        "--arms",
        "ledger",
        "-o",
        str(out),
        "--config",
        str(cfg),
        "--no-pull",
        tmp=tmp_path,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    preds = json.loads((out / "ledger" / "preds.json").read_text())
    assert set(preds) == set(ids) and "+    return a + b" in preds[ids[0]]["model_patch"]
    assert traj.stat().st_mtime_ns == before, "the finished instance was not run again"
    assert list((out / "ledger").glob("preds.json.unreadable-*"))
    runs = json.loads((out / "ledger" / "manifest.json").read_text())["runs"]
    assert len(runs) == 2 and runs[1]["skipped_finished"] == [ids[0]]


def test_bad_input_gets_one_line(docker_image, tmp_path):  # noqa: F811
    data = instances_file(tmp_path / "instances.jsonl", docker_image, ["demo__calc-1"])
    cfg = scripted_config(tmp_path / "scripted.yaml")
    common = ["--instances", str(data), "-o", str(tmp_path / "out"), "--config", str(cfg), "--no-pull"]
    cases = [
        (["--arms", "ledgr,baseline"], "unknown arm 'ledgr' (did you mean 'ledger'?)"),
        (["--filter", "django__django-1"], "no instance id matches --filter 'django__django-1'"),
    ]
    missing = instances_file(tmp_path / "missing.jsonl", "ledger-test/not-built:never", ["demo__calc-9"])
    for extra, message in cases:
        r = ledger_run("swebench", *common, *extra, tmp=tmp_path)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = ledger_run(
        "swebench",
        "--instances",
        str(missing),
        "-o",
        str(tmp_path / "out"),
        "--config",
        str(cfg),
        "--no-pull",
        tmp=tmp_path,
    )
    assert r.returncode == 2 and "image ledger-test/not-built:never is not on the Docker engine" in r.stderr
    assert "docker pull ledger-test/not-built:never" in r.stderr
    r = ledger_run("report", str(tmp_path / "nothing"), tmp=tmp_path)
    assert r.returncode == 2 and "no arm results here" in r.stderr


def test_mcnemar_exact() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 32)
    assert mcnemar_exact(10, 2) == pytest.approx(2 * sum(__import__("math").comb(12, i) for i in range(3)) / 4096)


def _signals_as_a_terminal_gives_them() -> None:
    """In the child before its exec: SIGHUP and SIGINT at their defaults, however the suite was started."""
    import signal

    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("stop, code", [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_ctrl_c_stops_cleanly_and_the_next_run_finishes(docker_image, tmp_path, stop, code):  # noqa: F811
    """Ctrl-C, a SIGTERM to ledger-run alone (`kill PID`) and a SIGHUP (its terminal closed; before, both
    killed it at once and left the containers running their `sleep 60`) cancel what has not started and
    remove this run's containers."""
    import signal
    import time

    ids, data, out, cfg = two_instances(docker_image, tmp_path)
    slow = json.loads(cfg.read_text())
    slow["model"]["outputs"].insert(
        1, {"role": "assistant", "content": "wait", "extra": {"actions": [{"command": "sleep 60"}], "cost": 0.0}}
    )
    (tmp_path / "slow.yaml").write_text(json.dumps(slow))
    env = {
        **os.environ,
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_CONFIGURED": "1",
        "MSWEA_GLOBAL_CONFIG_DIR": str(tmp_path / "c"),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ledger_runtime",
            "swebench",
            "--instances",
            str(data),
            "--arms",
            "ledger,baseline",
            "-w",
            "2",
            "-o",
            str(out),
            "--config",
            str(tmp_path / "slow.yaml"),
            "--no-pull",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as a terminal starts it: under `nohup` (a suite started so) SIGHUP comes ignored, which ledger-run keeps
        # ignored, as it should, and the SIGHUP case then waited out its timeout
        preexec_fn=_signals_as_a_terminal_gives_them,
    )
    deadline = time.monotonic() + 240  # a loaded machine starts them late: wait for them, not a time
    while len(our_containers(out)) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert len(our_containers(out)) == 2, "both workers have a container running"
    while not all(_running(c, "sleep 60") for c in our_containers(out)) and time.monotonic() < deadline:
        time.sleep(0.2)  # both agents are in their long command
    proc.send_signal(getattr(signal, stop))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err[-2000:]
    assert not our_containers(out), "Ctrl-C leaves no container behind"
    for arm in ("ledger", "baseline"):
        assert json.loads((out / arm / "manifest.json").read_text())["runs"][-1]["status"] == "interrupted"
        preds = json.loads((out / arm / "preds.json").read_text()) if (out / arm / "preds.json").exists() else {}
        assert not preds, "an instance cut short is not counted as finished"
    again = ledger_run(
        "swebench",
        "--instances",
        str(data),
        "--arms",
        "ledger,baseline",
        "-w",
        "2",
        "-o",
        str(out),
        "--config",
        str(cfg),
        "--no-pull",
        tmp=tmp_path,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert all(set(json.loads((out / a / "preds.json").read_text())) == set(ids) for a in ("ledger", "baseline"))


def test_the_context_arm_sends_its_policy_to_the_ledger(tmp_path):
    """`--arms ledger+context`: the ledger's settings of the arm carry the context policy, which the
    model wrapper applies (tests/test_context.py drives that through the real loop)."""
    from ledger_harness.swebench.run import arm_config, parse_arms
    from ledger_runtime.config import from_mapping

    cfg = arm_config(
        {"environment": {"environment_class": "docker"}, "model": {"model_name": "x"}}, "ledger+context", "run1"
    )
    ledger = cfg["environment"]["ledger"]
    assert ledger["context"] == "validity+window:10" and ledger["govern"] and ledger["inform"]
    assert (
        from_mapping({k: v for k, v in ledger.items() if k in ("context", "govern", "inform", "shadow")}).context.policy
        == "validity+window:10"
    )
    assert "ledger+context" in parse_arms("ledger,ledger+context")


@pytest.mark.parametrize("prefix", ["ledger_adapters.mini.environment", "ledger_adapters.mini_swe_agent"])
def test_a_config_that_names_our_wrappers_is_not_wrapped_twice(prefix):
    """A user's config may already name the ledger's classes (by today's class path or an earlier
    release's): the arm unwraps them, so the commands still run in the instance's container."""
    from ledger_harness.swebench.run import ENV_CLASS, MODEL_CLASS, arm_config, uses_docker

    user = {
        "environment": {"environment_class": f"{prefix}.LedgerEnvironment", "inner_class": "docker"},
        "model": {"model_class": f"{prefix}.LedgerModel", "inner_class": "litellm", "model_name": "x"},
    }
    assert uses_docker(user)
    cfg = arm_config(user, "ledger", "run1")
    assert (cfg["environment"]["environment_class"], cfg["environment"]["inner_class"]) == (ENV_CLASS, "docker")
    assert (cfg["model"]["model_class"], cfg["model"]["inner_class"]) == (MODEL_CLASS, "litellm")
    assert uses_docker(cfg)
