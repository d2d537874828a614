"""``ledger-run mini`` on a model served by a server of your own (vLLM, ollama, any OpenAI-compatible
one), end to end: the real command, mini-swe-agent's real loop and real litellm, against a scripted
OpenAI-compatible server on loopback. A model whose price litellm does not know runs, and its cost is
recorded as unknown, never as $0; what it needs that is missing is said in one line, up front."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest
from cli_support import ledger_run as run
from cli_support import one_line_error
from conftest import make_repo
from fake_chat import FakeChat

FILES = {"calc.py": "def add(a, b):\n    return a - b\n"}
FIX = [
    {"command": "cat calc.py"},
    {"command": "sed -i 's/a - b/a + b/' calc.py"},
    {"command": "python3 -c 'import calc; assert calc.add(1, 2) == 3'"},
    {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"},
]


def ledger_run(*args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    """No provider's key or address from the machine, and mini-swe-agent's cost tracking as it comes."""
    return run(*args, env=env, timeout=timeout, without=("_API_KEY", "_API_BASE", "_BASE_URL", "MSWEA_COST_TRACKING"))


@pytest.fixture
def server():
    chat = FakeChat(FIX)
    yield chat
    chat.close()


def run_mini(tmp_path: Path, model: str, *args: str, env: dict | None = None):
    repo = make_repo(tmp_path / "repo", FILES)
    run = tmp_path / "run"
    r = ledger_run(
        "mini",
        "-m",
        model,
        "-t",
        "fix add",
        "-w",
        str(repo),
        "-o",
        str(run),
        "-y",
        "--exit-immediately",
        *args,
        env=env,
    )
    return repo, run, r


def inspect_json(run: Path) -> dict:
    r = ledger_run("inspect", str(run), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)["summary"]


def text_reply(command: str) -> str:
    return f"THOUGHT: next\n\n```mswea_bash_command\n{command}\n```"


@pytest.mark.parametrize(
    "model, how",
    [
        ("openai/stub", "variable"),  # the command: OPENAI_API_BASE, OPENAI_API_KEY=dummy
        ("hosted_vllm/stub", "--api-base"),  # vLLM's prefix: an address and no key
        ("hosted_vllm/stub", "text"),  # a server without tool calls: mini's text-based config
    ],
)
@pytest.mark.slow
def test_mini_runs_a_model_of_your_own_with_its_cost_unknown(tmp_path, server, model, how):
    env = {"OPENAI_API_KEY": "dummy"} if model.startswith("openai/") else {}
    args: list[str] = []
    if how == "variable":
        env["OPENAI_API_BASE"] = f"{server.base_url}/v1"
    else:
        args = ["--api-base", f"{server.base_url}/v1"]
    if how == "text":
        server.replies = [text_reply(r["command"]) for r in FIX]
        args += ["-c", "mini_textbased.yaml", "--model-class", "litellm_textbased"]
    repo, run, r = run_mini(tmp_path, model, *args, env=env)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    assert "Traceback" not in r.stderr + r.stdout and "DEBUG" not in r.stderr + r.stdout
    assert "Provider List" not in r.stdout + r.stderr  # litellm's banner, once per unpriced call
    # the real loop reached the server, ran its commands, and the fix is in the work tree
    assert len(server.requests) == 4 and server.requests[0]["model"] == "stub"
    assert "tools" in server.requests[0] if how != "text" else "tools" not in server.requests[0]
    assert "return a + b" in (repo / "calc.py").read_text()
    # the cost: unknown in the ledger, in inspect, in the trajectory; said once while running
    s = inspect_json(run)
    assert (s["model_calls"], s["model_cost"], s["model_calls_unpriced"]) == (4, None, 4)
    assert s["attempts"] == 4
    shown = ledger_run("inspect", str(run)).stdout
    assert "unknown (4 of 4 calls" in " ".join(shown.split())
    assert "$0" not in shown
    stats = json.loads((run / "trajectory.traj.json").read_text())["info"]["model_stats"]
    assert stats["unpriced_calls"] == 4
    assert f"litellm has no price for {model}" in r.stderr
    said = " ".join(r.stdout.split())  # the run's summary at its end
    assert "model calls / cost" in said and "4 / unknown (4 of 4" in said
    page = run / "page.html"
    assert ledger_run("inspect", str(run), "--html", str(page)).returncode == 0
    html = page.read_text()
    assert "cost unknown" in html and ">$0<" not in html and "; $0" not in html, "no $0 for a price nobody knows"


@pytest.mark.slow
def test_a_priced_model_on_your_server_is_billed_in_dollars(tmp_path, server):
    """A model litellm has a price for keeps it: the cost is dollars, from the usage the server
    reported, never 'unknown'."""
    repo, run, r = run_mini(
        tmp_path, "openai/gpt-4o-mini", "--api-base", f"{server.base_url}/v1", env={"OPENAI_API_KEY": "x"}
    )
    assert r.returncode == 0, r.stderr[-3000:]
    s = inspect_json(run)
    assert s["model_calls"] == 4 and s["model_calls_unpriced"] == 0
    assert s["model_cost"] is not None and s["model_cost"] > 0
    assert "no price" not in r.stderr


@pytest.mark.slow
def test_report_says_the_cost_of_unpriced_instances_is_unknown(tmp_path, server):
    """``ledger-run report`` over an arm whose model had no price: unknown, not $0."""
    _, run, r = run_mini(tmp_path, "hosted_vllm/stub", "--api-base", f"{server.base_url}/v1")
    assert r.returncode == 0, r.stderr[-3000:]
    arm = tmp_path / "out" / "baseline"
    (arm / "demo__calc-1").mkdir(parents=True)
    (arm / "demo__calc-1" / "demo__calc-1.traj.json").write_text((run / "trajectory.traj.json").read_text())
    pred = {"instance_id": "demo__calc-1", "model_patch": "diff", "model_name_or_path": "hosted_vllm/stub"}
    (arm / "preds.json").write_text(json.dumps({"demo__calc-1": pred}))
    rep = ledger_run("report", str(tmp_path / "out"), "--json", "--no-png")
    assert rep.returncode == 0, rep.stderr[-2000:]
    a = json.loads(rep.stdout)["arms"]["baseline"]
    assert a["totals"]["cost"] is None and a["cost_unknown_instances"] == 1 and a["totals"]["calls"] == 4
    text = ledger_run("report", str(tmp_path / "out"), "--no-png").stdout
    assert "unknown (1 instances' model has no price)" in " ".join(text.split())


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.slow
def test_what_a_model_of_your_own_lacks_is_said_up_front(tmp_path):
    repo = make_repo(tmp_path / "repo", FILES)
    common = ["-t", "x", "-w", str(repo), "-o", str(tmp_path / "run"), "-y"]
    t0 = time.monotonic()
    # a server that is not there: said before the run, not after minutes of retries
    port = _closed_port()
    msg = one_line_error(
        ledger_run("mini", "-m", "hosted_vllm/m", "--api-base", f"http://127.0.0.1:{port}/v1", *common)
    )
    assert f"nothing answers at http://127.0.0.1:{port}/v1" in msg
    # vLLM's prefix and no address
    msg = one_line_error(ledger_run("mini", "-m", "hosted_vllm/m", *common))
    assert "--api-base" in msg and "HOSTED_VLLM_API_BASE" in msg
    # ollama needs no key: litellm reaches it at its local default, which is what is checked
    msg = one_line_error(
        ledger_run("mini", "-m", "ollama/llama3", *common, env={"OLLAMA_API_BASE": f"http://127.0.0.1:{port}"})
    )
    assert "API key" not in msg and f"nothing answers at http://127.0.0.1:{port}" in msg
    # an OpenAI-compatible server and no key: which variable, and that any value does
    msg = one_line_error(ledger_run("mini", "-m", "openai/m", "--api-base", f"http://127.0.0.1:{port}/v1", *common))
    assert "OPENAI_API_KEY=dummy" in msg
    assert time.monotonic() - t0 < 240


@pytest.mark.slow
def test_a_config_mistake_is_one_line_at_once_not_minutes_of_retries(tmp_path, server):
    """No provider prefix with --api-base, an address without its scheme: said before the run; a
    request the server refuses as malformed (HTTP 400) ends the run at its first answer."""
    import http.server
    import threading

    repo = make_repo(tmp_path / "repo", FILES)
    common = ["-t", "x", "-w", str(repo), "-y", "--exit-immediately"]
    base = f"http://127.0.0.1:{server.port}/v1"
    t0 = time.monotonic()
    msg = one_line_error(ledger_run("mini", "-m", "scripted", "--api-base", base, *common, "-o", str(tmp_path / "a")))
    assert "-m openai/scripted" in msg
    bare = base.split("://", 1)[1]
    msg = one_line_error(ledger_run("mini", "-m", "openai/m", "--api-base", bare, *common, "-o", str(tmp_path / "b")))
    assert f"--api-base http://{bare}" in msg

    class Refuses(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.dumps({"error": {"message": "unknown parameter: tools", "type": "invalid_request_error"}})
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuses)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        r = ledger_run(
            "mini",
            "-m",
            "openai/m",
            "--api-base",
            url,
            *common,
            "-o",
            str(tmp_path / "c"),
            env={"OPENAI_API_KEY": "dummy"},
        )
        assert "BadRequestError" in one_line_error(r) and r.returncode == 1
    finally:
        httpd.shutdown()
    assert time.monotonic() - t0 < 90, "no minutes of retries"
