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
