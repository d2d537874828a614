"""A new user's hour again (issue 28), each checked by running the real command line: Ctrl-C in the
first seconds of any command, a config value of the wrong type, ``report --png``, a Docker
environment without a daemon, mini without a task and without a terminal, a command whose extra is
not installed, and one meaning of -w and -o across commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import ledger_run, one_line_error
from conftest import make_repo

FILES = {"calc.py": "def add(a, b):\n    return a - b\n"}


# -- Ctrl-C ---------------------------------------------------------------------------------------


def _past_interpreter_start(p: subprocess.Popen, deadline: float) -> bool:
    """Wait until the process has loaded its first extension module (the command line's imports
    load dozens; Python's own start-up, before any of our code runs, loads none here), or has ended
    (a fast command on a loaded machine: it is then done before the signal, as the test allows). False
    only when /proc cannot show it."""
    while time.monotonic() < deadline:
        if p.poll() is not None:  # (a zombie's maps read as empty: never wait for it to load anything)
            return True
        try:
            maps = Path(f"/proc/{p.pid}/maps").read_text()
        except OSError:
            return p.poll() is not None
        if "lib-dynload" in maps or ".cpython-3" in maps:
            return True
        time.sleep(0.005)
    return False


def _interrupt(args: list[str], delay: float) -> subprocess.CompletedProcess | None:
    p = subprocess.Popen(
        [sys.executable, "-m", "ledger_runtime", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "MSWEA_CONFIGURED": "1", "MSWEA_SILENT_STARTUP": "1", "COLUMNS": "200"},
    )
    if not _past_interpreter_start(p, time.monotonic() + 120):
        p.kill()
        p.communicate()
        pytest.skip("cannot see the process load its modules (/proc)")
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def test_a_ctrl_c_python_could_not_raise_still_ends_the_command():
    """A KeyboardInterrupt raised in a weak reference's callback (where a Ctrl-C lands when it comes
    during a lazy import: importlib's module locks) is "ignored" by Python, which prints a traceback
    and goes on; with the ledger's hook the command ends with one line and 130 (seen on CI: a mini
    interrupted at 0.3 s printed the traceback and went on to fail on its server)."""
    code = (
        "from ledger_runtime.cli.interrupt import on_lost_ctrl_c\n"
        "import weakref\n"
        "on_lost_ctrl_c()\n"
        "class A: pass\n"
        "def cb(_): raise KeyboardInterrupt\n"
        "a = A(); r = weakref.ref(a, cb); del a\n"
        "print('went on')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (130, "", "interrupted\n")
    plain = subprocess.run(
        [sys.executable, "-c", code.replace("on_lost_ctrl_c()", "pass")], capture_output=True, text=True, timeout=60
    )
    assert plain.returncode == 0 and "went on" in plain.stdout and "Traceback" in plain.stderr, "Python's own way"


@pytest.mark.slow
def test_ctrl_c_in_the_first_seconds_of_any_command_is_one_line_and_130(tmp_path):
    repo = make_repo(tmp_path / "repo", FILES)
    (tmp_path / "out" / "arm").mkdir(parents=True)
    commands = {
        "demo": ["demo", "-o", str(tmp_path / "demo-{n}")],
        "mini": ["mini", "-m", "hosted_vllm/m", "--api-base", "http://127.0.0.1:9/v1", "-t", "x", "-w", str(repo)]
        + ["-o", str(tmp_path / "mini-{n}")],
        "inspect": ["inspect", str(tmp_path / "nothing")],
        "config": ["config"],
        "report": ["report", str(tmp_path / "out"), "--no-png"],
        "tau2-gate": ["tau2-gate", "--domain", "airline"],
        "replay": ["replay", str(tmp_path / "nothing"), "--observations-only", "-o", str(tmp_path / "rp")],
    }
    for name, args in commands.items():
        interrupted = 0
        for n, delay in enumerate((0.0, 0.3, 1.0)):
            r = _interrupt([a.replace("{n}", str(n)) for a in args], delay)
            said = f"{name} after {delay} s: rc {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-3000:]}"
            assert "Traceback" not in r.stderr + r.stdout and "KeyboardInterrupt" not in r.stderr, said
            assert r.returncode >= 0, said  # not killed by the signal
            if r.returncode != 130:
                assert "interrupted" not in r.stdout + r.stderr, said
                continue  # done before the signal came: its own output and exit code
            said_on_stderr = [ln for ln in r.stderr.splitlines() if ln.strip()]  # the demo's says what it kept
            assert said_on_stderr == [] or [ln.split(":")[0] for ln in said_on_stderr] == ["interrupted"], said
            assert sum(ln.startswith("interrupted") for ln in (r.stdout + r.stderr).splitlines()) == 1, said
            interrupted += 1
        assert interrupted, f"{name} always ended before Ctrl-C"


# -- one line, naming what is wrong -----------------------------------------------------------------


@pytest.mark.parametrize(
    "setting, key",
    [("agent.step_limit=abc", "agent.step_limit"), ("environment.timeout=abc", "environment.timeout")],
)
@pytest.mark.slow
def test_a_config_value_of_the_wrong_type_names_its_key(tmp_path, setting, key):
    repo = make_repo(tmp_path / "repo", FILES)
    r = ledger_run(
        "mini",
        "-c",
        "mini.yaml",
        "-c",
        setting,
        "-m",
        "deterministic",
        "-t",
        "x",
        "-w",
        str(repo),
        "-o",
        str(tmp_path / "run"),
        "-y",
    )
    msg = one_line_error(r)
    assert f"-c {key}:" in msg and "'abc'" in msg, msg


def test_mini_without_a_task_and_without_a_terminal_says_a_task_is_needed(tmp_path):
    repo = make_repo(tmp_path / "repo", FILES)
    r = ledger_run("mini", "-m", "deterministic", "-w", str(repo), "-o", str(tmp_path / "run"), "-y", timeout=120)
    assert "-t TASK" in one_line_error(r)


def test_a_docker_environment_without_a_daemon_says_so(tmp_path):
    repo = make_repo(tmp_path / "repo", FILES)
    args = ["mini", "--environment-class", "docker", "--image", "python:3.11", "-m", "deterministic", "-t", "x"]
    args += ["-w", str(repo), "-o", str(tmp_path / "run"), "-y"]
    if subprocess.run(["which", "docker"], capture_output=True).returncode == 0:
        msg = one_line_error(ledger_run(*args, env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}))
        assert "the docker daemon is not running" in msg and "no-engine.sock" in msg, msg
    bare = tmp_path / "bin"
    bare.mkdir()
    msg = one_line_error(ledger_run(*args, env={"PATH": str(bare)}))
    assert "no docker command on PATH" in msg, msg


# -- report --png ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_report_png_is_written_where_asked_and_says_where(tmp_path):
    pytest.importorskip("matplotlib")
    arm = tmp_path / "out" / "baseline"
    arm.mkdir(parents=True)
    (arm / "preds.json").write_text(json.dumps({"a__b-1": {"model_patch": "", "model_name_or_path": "m"}}))
    out = str(tmp_path / "out")
    # into folders that are not there yet
    into = tmp_path / "figs" / "new" / "fig.png"
    r = ledger_run("report", out, "--png", str(into))
    assert r.returncode == 0, r.stderr[-2000:]
    assert into.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"figure: {into}" in " ".join(r.stdout.split())
    # a folder: report.png in it, nothing beside it
    folder = tmp_path / "folder"
    folder.mkdir()
    r = ledger_run("report", out, "--png", str(folder))
    assert r.returncode == 0, r.stderr[-2000:]
    assert (folder / "report.png").read_bytes()[:4] == b"\x89PNG"
    assert not (tmp_path / "folder.png").exists()
    assert f"figure: {folder / 'report.png'}" in " ".join(r.stdout.split())
    # a name without .png: that name, not name.png
    r = ledger_run("report", out, "--png", str(tmp_path / "plain"), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "plain").read_bytes()[:4] == b"\x89PNG" and not (tmp_path / "plain.png").exists()
    assert json.loads(r.stdout)["figure"] == str(tmp_path / "plain")
    # somewhere it cannot go: one line
    (tmp_path / "afile").write_text("x")
    assert "cannot write the figure" in one_line_error(
        ledger_run("report", out, "--png", str(tmp_path / "afile" / "f.png"))
    )


# -- a command whose extra is not installed -----------------------------------------------------------


def _without(tmp_path: Path, *modules: str) -> dict[str, str]:
    """The environment of a ledger-run that cannot import ``modules``, as after the base install alone
    (a sitecustomize that refuses them: the packages are installed in this test's environment)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        f"HIDDEN = {set(modules)!r}\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in HIDDEN:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Hide())\n"
    )
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


@pytest.mark.slow
def test_a_command_whose_extra_is_missing_names_the_extra(tmp_path):
    arm = tmp_path / "out" / "baseline"
    arm.mkdir(parents=True)
    (arm / "preds.json").write_text(json.dumps({"a__b-1": {"model_patch": "", "model_name_or_path": "m"}}))
    instances = tmp_path / "instances.jsonl"
    instances.write_text(json.dumps({"instance_id": "a__b-1", "problem_statement": "x", "repo": "a/b"}) + "\n")
    cases = [
        (["report", str(tmp_path / "out"), "--png", str(tmp_path / "f.png")], ("matplotlib",), "swebench"),
        (["swebench", "--instances", str(instances), "-o", str(tmp_path / "sb")], ("docker",), "swebench"),
        (["tau2-gate", "--domain", "airline"], ("tau2",), "tau2"),
        # mini-swe-agent missing: named before its config is read and before the dataset's download
        (["swebench", "--instances", str(instances), "-o", str(tmp_path / "sb")], ("minisweagent",), "swebench"),
        (["swebench", "-o", str(tmp_path / "sb")], ("minisweagent", "docker"), "swebench"),
        (["swebench", "evaluate", str(tmp_path / "out")], ("minisweagent",), "swebench"),
        (["replay", str(instances), "--context", "full", "--price-model", "gpt-5-mini"], ("litellm",), "mini"),
    ]
    for args, hidden, extra in cases:
        r = ledger_run(*args, env=_without(tmp_path, *hidden))
        assert r.returncode == 2, (args, r.stderr[-2000:])
        assert f"pip install 'ledger-runtime[{extra}]'" in one_line_error(r), (args, r.stderr)
        assert "warning" not in r.stderr, r.stderr  # every command still loads
    # what needs no extra works without them: the report without its figure, the demo
    r = ledger_run("report", str(tmp_path / "out"), "--no-png", env=_without(tmp_path, "matplotlib", "docker", "tau2"))
    assert r.returncode == 0, r.stderr[-2000:]
    lean = _without(tmp_path, "matplotlib")
    r = ledger_run("report", str(tmp_path / "out"), "--json", "--html", str(tmp_path / "arms.html"), env=lean)
    assert r.returncode == 0 and json.loads(r.stdout)["figure"] is None, r.stderr[-2000:]
    assert "no figure:" in r.stderr and "ledger-runtime[swebench]" in r.stderr and (tmp_path / "arms.html").exists()
    assert "nowhere: no arm results here" in one_line_error(ledger_run("report", str(tmp_path / "nowhere"), env=lean))
    r = ledger_run("demo", "-o", str(tmp_path / "demo"), env=_without(tmp_path, "matplotlib", "docker", "tau2"))
    assert r.returncode == 0, r.stderr[-2000:]
    r = ledger_run("swebench", "evaluate", str(tmp_path / "nowhere"), env=_without(tmp_path, "minisweagent"))
    assert "nowhere: no such directory" in one_line_error(r), "the directory first, then what it needs"


def test_mini_s_banner_is_off_though_the_user_set_nothing(tmp_path):
    """mini-swe-agent prints a banner ("This is mini-swe-agent version ...") when imported unless told not to: the
    demo and mini, and their one-line errors, import it quietly (the user's environment sets nothing)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSWEA_")}
    for args, code in (
        (["demo", "-o", str(tmp_path / "demo")], 0),
        (["mini", "-w", str(tmp_path / "nowhere"), "-t", "x"], 2),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "ledger_runtime", *args],
            capture_output=True,
            text=True,
            timeout=300,
            env={**env, "HOME": str(tmp_path / "home"), "COLUMNS": "200", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
            stdin=subprocess.DEVNULL,
        )
        assert r.returncode == code, (args, r.stderr[-2000:])
        assert "mini-swe-agent version" not in r.stdout + r.stderr, (args, r.stdout[:500], r.stderr[:500])
        assert "Traceback" not in r.stderr, r.stderr[-2000:]


# -- -w and -o ------------------------------------------------------------------------------------


def _commands():
    import typer

    from ledger_runtime.cli.main import app

    def walk(cmd, path):
        yield path, cmd
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            yield from walk(sub, f"{path} {name}")

    yield from walk(typer.main.get_command(app), "ledger-run")


def test_w_and_o_mean_one_thing_in_every_command():
    seen_w, seen_o = [], []
    for path, cmd in _commands():
        for p in cmd.params:
            if "-w" in p.opts and not p.hidden:
                seen_w.append(path)
                assert "--workdir" in p.opts, f"{path}: -w is {p.opts}, not the work tree"
            if "-o" in p.opts:
                seen_o.append(path)
                assert "--out" in p.opts, f"{path}: -o is {p.opts}; every -o is -o/--out, where the output goes"
    assert {"ledger-run mini", "ledger-run codex"} <= set(seen_w)
    assert {"ledger-run mini", "ledger-run codex", "ledger-run demo", "ledger-run swebench"} <= set(seen_o)


def test_swebench_w_is_the_old_spelling_of_workers(tmp_path):
    instances = tmp_path / "instances.jsonl"
    instances.write_text(json.dumps({"instance_id": "a__b-1", "problem_statement": "x"}) + "\n")
    common = ["swebench", "--instances", str(instances), "--environment-class", "local", "-o", str(tmp_path / "a")]
    r = ledger_run(*common, "-w", "0")
    assert "-j/--workers must be 1 or more, not 0" in one_line_error(r)  # -w was taken as the workers
    assert "-w N is the old spelling of -j/--workers" in r.stderr
    r = ledger_run(*common, "-j", "0")
    assert "-j/--workers must be 1 or more, not 0" in one_line_error(r) and "old spelling" not in r.stderr
    r = ledger_run("mini", "--out", str(tmp_path / "run"), "--run-dir", str(tmp_path / "run"), "--help")
    assert r.returncode == 0
