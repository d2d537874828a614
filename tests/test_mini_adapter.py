"""The mini-swe-agent adapter through the REAL agent loop, with mini-swe-agent's own scripted models
(text-based and tool-call) and the real LitellmModel answering from litellm's mock_response."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_support import scripted_mini_config
from conftest import CALC_PROJECT, make_repo
from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.environments.local import LocalEnvironment  # noqa: E402
from minisweagent.models.test_models import (
    DeterministicModel,
    DeterministicToolcallModel,  # noqa: E402
    make_output,
    make_toolcall_output,
)
from processes import running_under

from ledger_adapters.mini.environment import LedgerEnvironment, LedgerModel  # noqa: E402
from ledger_runtime.inspection import load  # noqa: E402

TEST = "python3 -m unittest -q test_calc"
FILES = CALC_PROJECT
SCRIPT = [
    "nl -ba calc.py | sed -n '1,80p'",
    "nl -ba calc.py | sed -n '20,100p'",
    TEST,
    TEST,
    "sed -i '2s/a - b/a + b/' calc.py",
    TEST,
    "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff",
]


class Recording:
    """Mixed into mini-swe-agent's scripted models: also keep the messages each query received."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.received: list[list[dict]] = []

    def query(self, messages, **kw):
        self.received.append([dict(m) for m in messages])
        return super().query(messages, **kw)


class RecordingModel(Recording, DeterministicModel):
    pass


class RecordingToolcallModel(Recording, DeterministicToolcallModel):
    pass


def text_outputs(cmds):
    return [
        make_output(f"step {i}\n```mswea_bash_command\n{c}\n```", [{"command": c}], cost=0.0)
        for i, c in enumerate(cmds)
    ]


def agent_for(model, env, tmp_path):
    return DefaultAgent(
        model,
        env,
        system_template="You fix bugs.",
        instance_template="{{task}}",
        cost_limit=0,
        step_limit=30,
        output_path=tmp_path / "traj.json",
    )


_OPEN: list = []  # the environments ledger_env made in this module's current test


def ledger_env(repo: Path, run: Path, **ledger):
    env = LedgerEnvironment(
        inner_class="local",
        cwd=str(repo),
        timeout=60,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        ledger={"run_dir": str(run), **ledger},
    )
    _OPEN.append(env)
    return env


@pytest.fixture(autouse=True)
def _cleaned_up():
    """Each environment is cleaned up after its test, as mini's runners do: its ledger, its watcher
    (an inotify instance of the user's) and its git process are closed."""
    yield
    while _OPEN:
        _OPEN.pop().cleanup()


def observations(messages):
    return [
        (m["content"], (m.get("extra") or {}).get("returncode")) for m in messages if m["role"] in ("user", "tool")
    ][1:]


def test_text_model_end_to_end(tmp_path):
    repo = make_repo(tmp_path / "repo", FILES)
    inner = RecordingModel(outputs=text_outputs(SCRIPT), cost_per_call=0.0)
    model = LedgerModel(inner_class="deterministic", outputs=[])
    model.inner = inner
    env = ledger_env(repo, tmp_path / "run")
    agent = agent_for(model, env, tmp_path)
    info = agent.run("Make test_add pass")
    assert info["exit_status"] == "Submitted"
    assert "+    return a + b" in info["submission"] and "[ledger]" not in info["submission"]
    verdicts = [m["extra"]["ledger"]["verdict"] for m in agent.messages if "ledger" in (m.get("extra") or {})]
    assert verdicts == ["RUN", "RUN", "RUN", "NUDGE", "RUN", "RUN"], "the submission step raises before its observation"
    answers = [m["extra"]["ledger"]["answer"] for m in agent.messages if "ledger" in (m.get("extra") or {})]
    assert answers[:2] == ["raw", "spans"], answers
    second = [m for m in agent.messages if m["role"] == "user"][2]["content"]
    assert "[ledger: lines 20-80 of step 1's output (`nl -ba calc.py | sed -n '1,80p'`) repeat here" in second
    assert "    81\t" in second and "    19\t" not in second, "new lines in full, repeated ones by reference"
    # what the model was sent at a call is, message for message, the start of what it is sent at the next:
    # the notes of the state view are sent once and kept where they were sent (the provider's cache holds)
    for before, after in zip(inner.received, inner.received[1:]):
        assert [m["content"] for m in after[: len(before)]] == [m["content"] for m in before]
    last = [m["content"] for m in inner.received[-1]]
    notes = [c for c in last if "<ledger_update" in c]
    assert notes and all(c.startswith("<returncode>") for c in notes), "appended to an output, not a message"
    assert "Answers: output you were already shown comes back as [ledger: ...] references" in "".join(notes)
    assert "Recent commands" not in "".join(notes), "only what the model's own outputs did not show it"
    assert not any("<ledger_update" in str(m.get("content")) for m in agent.messages), "the agent's history is its own"
    assert model.views_injected == len(notes)
    traj = json.loads((tmp_path / "traj.json").read_text())
    assert traj["info"]["ledger"]["path"].endswith("ledger.sqlite")
    assert traj["info"]["config"]["environment_type"] == "ledger_adapters.mini.environment.LedgerEnvironment"
    assert traj["messages"][5]["extra"]["ledger"]["answer"] == "spans"
    loaded = load(tmp_path / "run")
    assert [a.step for a in loaded.state.attempts] == list(range(1, 8))
    assert loaded.state.attempts[-1].submits


def test_toolcall_model_several_calls_share_a_step_and_a_note_follows_tool_results(tmp_path):
    repo = make_repo(tmp_path / "repo", FILES)

    def call(i, cmd):
        return {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": cmd})},
        }

    turns = [
        [("a", "cat calc.py"), ("b", "ls")],
        [("c", "cat calc.py"), ("d", TEST)],
        [("e", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")],
    ]
    outputs = [
        make_toolcall_output(
            None, [call(i, c) for i, c in t], [{"command": c, "tool_call_id": f"call_{i}"} for i, c in t]
        )
        for t in turns
    ]
    inner = RecordingToolcallModel(outputs=outputs, cost_per_call=0.0)
    model = LedgerModel(inner_class="minisweagent.models.test_models.DeterministicToolcallModel", outputs=[])
    model.inner = inner
    env = ledger_env(repo, tmp_path / "run")
    agent = agent_for(model, env, tmp_path)
    assert agent.run("look")["exit_status"] == "Submitted"
    last = inner.received[-1]
    roles = [m["role"] for m in last]
    assert roles[-4:] == ["assistant", "tool", "tool", "user"] and "<ledger_update" in last[-1]["content"], (
        "the note follows the tool results, in a user message of its own"
    )
    steps = [a.step for a in load(tmp_path / "run").state.attempts]
    assert steps == [1, 1, 2, 2, 3]
    tools = [m for m in agent.messages if m["role"] == "tool"]
    assert tools[2]["extra"]["ledger"]["answer"] == "whole" and tools[2]["tool_call_id"] == "call_c"
    assert tools[2]["content"].count("[ledger: same as step 1's output (`cat calc.py`, exit 0)") == 1


def test_switches_off_gives_the_same_observations_as_plain_mini(tmp_path):
    """With inform and govern off, a scripted run sees exactly what plain mini-swe-agent sees."""
    plain_repo = make_repo(tmp_path / "repo", FILES)
    plain = agent_for(
        DeterministicModel(outputs=text_outputs(SCRIPT), cost_per_call=0.0),
        LocalEnvironment(cwd=str(plain_repo), env={"PYTHONDONTWRITEBYTECODE": "1"}),
        tmp_path / "p",
    )
    plain.run("task")
    shutil.rmtree(plain_repo)
    ledger_repo = make_repo(tmp_path / "repo", FILES)  # the same path, the same content
    env = ledger_env(ledger_repo, tmp_path / "run", inform=False, govern=False)
    wrapped = agent_for(
        LedgerModel(inner_class="deterministic", outputs=text_outputs(SCRIPT), cost_per_call=0.0), env, tmp_path / "l"
    )
    wrapped.run("task")

    def scrub(obs):  # unittest prints its own timing
        import re

        return [(re.sub(r"in \d+\.\d+s", "in Xs", c), rc) for c, rc in obs]

    assert scrub(observations(wrapped.messages)) == scrub(observations(plain.messages))
    assert wrapped.messages[-1]["content"] == plain.messages[-1]["content"], "same submission"
    attempts = load(tmp_path / "run").state.attempts
    assert [a.answer["kind"] for a in attempts][:2] == ["raw", "spans"], "decided and recorded, never applied"
    assert not any(a.applied for a in attempts)


class Keeping(DeterministicModel):
    """A model that keeps every list of messages it is handed (as one passing them to litellm, whose logging may keep
    them), with its items and their text as handed; or, ``keep=False``, none (mini-swe-agent's models read the list
    into one of their own and let it go). ``sent``: the text of each, as a model sends it (without its extras)."""

    def __init__(self, keep: bool, **kw):
        super().__init__(**kw)
        self.keep, self.kept, self.sent = keep, [], []

    def query(self, messages, **kw):
        self.sent.append(json.dumps([{k: v for k, v in m.items() if k != "extra"} for m in messages]))  # as sent
        if self.keep:
            self.kept.append((messages, list(messages), json.dumps(messages, default=str)))
        return super().query(messages, **kw)


def test_a_list_the_model_kept_is_never_changed_and_one_it_let_go_is_built_on(tmp_path):
    """The list handed to the model at a call is made from the one handed out at the call before, in place, where
    nobody kept that one (the model let it go, and LedgerModel lets its ``last_sent`` go first): a call does not copy
    the whole history again. A list the model kept is never changed by a later call, and the model is sent the same
    text whether it keeps the lists or not."""
    script = [  # (the test run's last line only: its time differs from run to run)
        "nl -ba calc.py | sed -n '1,80p'",
        "nl -ba calc.py | sed -n '20,100p'",
        "sed -i '2s/a - b/a + b/' calc.py",
        "cat calc.py",
        "python3 -m unittest -q test_calc 2>&1 | tail -1",
        "cat calc.py",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff",
    ]
    sent = {}
    for keep in (True, False):
        repo = make_repo(tmp_path / f"repo{keep}", FILES)
        inner = Keeping(keep, outputs=text_outputs(script), cost_per_call=0.0)
        model = LedgerModel(inner_class="deterministic", outputs=[])
        model.inner = inner
        built_on = []
        handed_back = model.agent_messages._handed_back

        def counted():  # (the list handed back is not kept here: that would keep it from the next call)
            given = handed_back()
            built_on.append(given is not None)
            return given

        model.agent_messages._handed_back = counted
        env = ledger_env(repo, tmp_path / f"run{keep}")
        assert agent_for(model, env, tmp_path / f"t{keep}").run("Make test_add pass")["exit_status"] == "Submitted"
        sent[keep] = inner.sent
        for handed, items, text in inner.kept:
            assert len(handed) == len(items) and all(a is b for a, b in zip(handed, items))
            assert json.dumps(handed, default=str) == text
        assert len(inner.sent) == len(script) and model.views_injected
        assert sum(built_on) == (0 if keep else len(script) - 1), built_on
    assert sent[True] == sent[False]


def test_litellm_model_with_mock_response(tmp_path):
    litellm = pytest.importorskip("litellm")
    from litellm.integrations.custom_logger import CustomLogger

    seen: list[list[dict]] = []

    class Capture(CustomLogger):
        def log_pre_api_call(self, model, messages, kwargs):
            seen.append(messages)

    litellm.callbacks = [Capture()]
    try:
        repo = make_repo(tmp_path / "repo", FILES)
        calls = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": "cat calc.py"})},
            }
        ]
        model = LedgerModel(
            inner_class="litellm",
            model_name="gpt-4o-mini",
            cost_tracking="ignore_errors",
            model_kwargs={"mock_response": "Reading the file.", "mock_tool_calls": calls},
        )
        env = ledger_env(repo, tmp_path / "run")
        agent = DefaultAgent(
            model, env, system_template="sys", instance_template="{{task}}", step_limit=3, cost_limit=0
        )
        assert agent.run("read it")["exit_status"] == "LimitsExceeded"
    finally:
        litellm.callbacks = []
    tools = [m for m in agent.messages if m["role"] == "tool"]
    assert [(t["extra"]["ledger"]["verdict"], t["extra"]["ledger"]["answer"]) for t in tools] == [
        ("RUN", "raw"),
        ("RUN", "whole"),
        ("RUN", "whole"),
    ]
    assert len(seen) == 3 and seen[2][-1]["role"] == "user" and "<ledger_update" in seen[2][-1]["content"]
    assert seen[2][-2]["role"] == "tool" and seen[2][: len(seen[1])] == seen[1], "nothing sent before changed"


def test_a_full_disk_never_breaks_the_agent(tmp_path):
    """A real fault: the ledger lives on a tiny tmpfs that fills up; commands still run."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs (a real full disk)")
    small = tmp_path / "small"
    small.mkdir()
    if os.system(f"mount -t tmpfs -o size=160k tmpfs {small} 2>/dev/null") != 0:
        pytest.skip("mounting a tmpfs is not allowed here")
    env = None
    try:
        repo = make_repo(tmp_path / "repo", {"big.txt": "x" * 400_000 + "\n", **FILES})
        env = ledger_env(repo, small / "run")
        cmds = ["cat big.txt | wc -c", "cat big.txt", "echo done"]
        agent = agent_for(
            LedgerModel(
                inner_class="deterministic",
                outputs=text_outputs(cmds + ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]),
                cost_per_call=0.0,
            ),
            env,
            tmp_path,
        )
        info = agent.run("task")
        assert info["exit_status"] == "Submitted"
        obs = observations(agent.messages)
        assert obs[0][0].strip().endswith("400001\n</output>") or "400001" in obs[0][0]
        assert "done" in obs[2][0]
        assert env.runtime.faults > 0, "the ledger really could not write"
    finally:
        if env is not None:
            env.cleanup()
        os.system(f"umount {small} 2>/dev/null || umount -l {small}")


def test_workspace_deleted_under_the_agent(tmp_path):
    repo = make_repo(tmp_path / "repo", FILES)
    # the policies that would stop this are off: the point is a workspace gone under the ledger
    env = ledger_env(
        repo, tmp_path / "run", policies={"destructive": {"enabled": False}, "verify-before-submit": {"enabled": False}}
    )
    cmds = [f"rm -rf {repo}/* {repo}/.git", "echo still here", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
    agent = agent_for(
        LedgerModel(inner_class="deterministic", outputs=text_outputs(cmds), cost_per_call=0.0), env, tmp_path
    )
    assert agent.run("task")["exit_status"] == "Submitted"
    assert "still here" in observations(agent.messages)[1][0]
    assert any(m.after_hash is None for m in load(tmp_path / "run").state.modifications)


def test_unknown_ledger_setting_is_a_clear_error(tmp_path):
    repo = make_repo(tmp_path / "repo", FILES)
    env = ledger_env(repo, tmp_path / "run", reuse_outptu="full")
    assert env.runtime is None, "a bad setting disables the ledger (logged), the agent still runs"
    out = env.execute({"command": "echo hi"})
    assert out["output"] == "hi\n"


@pytest.mark.slow
def test_ctrl_c_in_a_mini_run_without_a_terminal_ends_it_with_one_line(tmp_path):
    """Ctrl-C makes mini-swe-agent ask the user what to do; with no terminal its read fails (EOFError):
    the run ends as interrupted (one line, 130; the ledger kept), not as "the run stopped: EOFError"."""
    import signal
    import subprocess
    import sys
    import time

    repo = make_repo(tmp_path / "repo", FILES)
    scripted_mini_config(tmp_path / "cfg.yaml", ["cat calc.py", "sleep 117"])
    run = tmp_path / "run"
    args = ["mini", "-c", str(tmp_path / "cfg.yaml"), "-t", "t", "-w", str(repo), "-o", str(run), "-y"]
    p = subprocess.Popen(
        [sys.executable, "-m", "ledger_runtime.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "COLUMNS": "200", "MSWEA_CONFIGURED": "1", "MSWEA_SILENT_STARTUP": "1"},
    )
    deadline = time.monotonic() + 120
    while p.poll() is None and time.monotonic() < deadline and not running_under(p.pid, "sleep"):
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130 and err.rstrip().endswith("interrupted"), err[-2000:]
    assert "EOFError" not in err and "Traceback" not in err, err[-2000:]
    assert [a.command for a in load(run).state.attempts][:1] == ["cat calc.py"], "the ledger is kept"
    deadline = time.monotonic() + 10
    while _sleeping(117) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _sleeping(117), "the interrupted command went with the Ctrl-C, as in a terminal"


def _sleeping(seconds: int) -> list[str]:
    """The processes running ``sleep SECONDS`` (from /proc): the command this test's run was in."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes() == f"sleep\0{seconds}\0".encode():
                found.append(cmdline.parent.name)
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_ledger_run_mini_command(tmp_path):
    """`ledger-run mini` end to end, with mini-swe-agent's scripted model set in a YAML config."""
    import subprocess
    import sys

    repo = make_repo(tmp_path / "repo", FILES)
    # the edit is not followed by a test run: verify-before-submit holds the first submission back once
    steps = [
        "echo the token is $MY_SERVICE_TOKEN",  # a secret the trajectory must not keep in clear
        "cat calc.py",
        "cat calc.py",
        "sed -i '2s/a - b/a + b/' calc.py",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    ]
    secret = "s3cr3t-" + "value-1234567"
    scripted_mini_config(tmp_path / "cfg.yaml", steps)
    run = tmp_path / "run"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledger_runtime.cli",
            "mini",
            "-c",
            str(tmp_path / "cfg.yaml"),
            "-t",
            "make add add",
            "--workdir",
            str(repo),
            "-o",
            str(run),
            "-y",
            "--exit-immediately",
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
        env={**os.environ, "COLUMNS": "200", "MY_SERVICE_TOKEN": secret},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    trajectory = (run / "trajectory.traj.json").read_text()
    assert "the token is " + "*" * len(secret) in trajectory and secret not in trajectory, "masked, as in the ledger"
    assert (run / "trajectory.traj.json").stat().st_mode & 0o777 == 0o600
    assert f"ledger: {run / 'ledger.sqlite'}" in r.stdout.replace("\n", "") or str(run / "ledger.sqlite") in r.stdout
    state = load(run).state
    assert [a.verdict.kind.value for a in state.attempts] == ["RUN", "RUN", "RUN", "RUN", "REVISE", "RUN"]
    assert state.attempts[4].verdict.rule == "verify-before-submit" and not state.attempts[4].executed
    assert state.baseline.task == "make add add"
    assert json.loads((run / "trajectory.traj.json").read_text())["info"]["exit_status"] == "Submitted"
    bad = subprocess.run(
        [sys.executable, "-m", "ledger_runtime.cli", "mini", "--workdir", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "is not a directory" in bad.stderr and "Traceback" not in bad.stderr


def test_the_submission_marker_in_any_form_ends_the_run(tmp_path):
    """mini-swe-agent submits when an output's first line, stripped, is the marker (surrounding spaces,
    a CRLF line end). Whatever the ledger recorded of the file before, the read that prints that line
    first must end the run, through the real loop."""
    marker = "  COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT  \r\n"
    repo = make_repo(tmp_path / "repo", {**FILES, "notes.txt": marker + "".join(f"note {i}\n" for i in range(40))})
    script = [
        "nl -s ': ' -ba notes.txt",
        "cat -n notes.txt | head -n 20",
        "sed -n '1p' notes.txt",
        "echo never reached",
    ]
    env = ledger_env(repo, tmp_path / "run")
    agent = agent_for(
        LedgerModel(inner_class="deterministic", outputs=text_outputs(script), cost_per_call=0.0), env, tmp_path
    )
    info = agent.run("read the notes")
    assert info["exit_status"] == "Submitted"
    attempts = load(tmp_path / "run").state.attempts
    assert [a.command for a in attempts] == script[:3], "the third read submitted"
