"""``ledger-run swebench`` keeps each arm's settings and command line in ``manifest.json``: a model's API key or a
proxy's password there is masked as the ledger masks it (before: written in clear)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from ledger_harness.swebench.run import base_config, run

KEY = "abcd1234efgh5678ijkl"  # a key of no known shape: masked by the name it is given
PROXY_PASSWORD = "hunter2pass"
SHAPED = "sk-proj-" + "Vq3T" * 8  # a key of a known shape, given on the command line


def test_the_manifest_masks_the_settings_secrets(tmp_path: Path) -> None:
    config = base_config([], "openai/gpt-5-mini", None)
    config["model"]["model_kwargs"] = {
        "api_key": KEY,
        "api_base": f"https://user:{PROXY_PASSWORD}@proxy.example/v1",
    }
    command = ["ledger-run", "swebench", "-c", f"model.model_kwargs.api_key={SHAPED}"]
    out = tmp_path / "out"
    run(out, ["ledger"], [], config, workers=1, console=Console(file=io.StringIO()), client=None, command=command)
    text = (out / "ledger" / "manifest.json").read_text()
    assert KEY not in text and PROXY_PASSWORD not in text and SHAPED not in text, text
    manifest = json.loads(text)
    assert manifest["config"]["model"]["model_kwargs"]["api_key"] == "*" * len(KEY)
    assert manifest["runs"][-1]["status"] == "complete"
    assert (out / "ledger" / "manifest.json").stat().st_mode & 0o777 == 0o600


def test_an_instance_trajectory_masks_the_model_key(tmp_path: Path, monkeypatch) -> None:
    """mini-swe-agent saves each instance's trajectory with its settings in ``info.config``: the model's API key
    there is masked as the ledger masks it, and the file is owner-only (before: in clear, 0644)."""
    from fake_chat import FakeChat

    monkeypatch.setenv("MSWEA_COST_TRACKING", "ignore_errors")  # a scripted model litellm has no price for
    chat = FakeChat([{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}])
    try:
        config = base_config([], "openai/scripted", None, "local")
        config["model"]["model_kwargs"] = {"api_key": KEY, "api_base": f"{chat.base_url}/v1"}
        config["agent"]["cost_limit"] = 0
        config["environment"]["cwd"] = str(tmp_path)
        instance = {"instance_id": "demo__calc-1", "problem_statement": "fix it", "image_name": "none"}
        out = tmp_path / "out"
        run(out, ["ledger"], [instance], config, workers=1, console=Console(file=io.StringIO()), client=None)
    finally:
        chat.close()
    traj = out / "ledger" / "demo__calc-1" / "demo__calc-1.traj.json"
    data = json.loads(traj.read_text())
    assert data["info"]["config"]["model"]["model_kwargs"]["api_key"] == "*" * len(KEY)
    assert traj.stat().st_mode & 0o777 == 0o600
    leaks = [p for p in out.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaks == []
