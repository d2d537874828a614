"""``ledger-run swebench`` says what cannot work before it starts a container."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import ledger_run, one_line_error


def test_swebench_without_the_model_s_key_says_so_before_any_container(tmp_path: Path) -> None:
    """Without the key, each instance's container started and its model retried for minutes; and without a Docker
    engine the error named the engine. The key is checked first, as ``ledger-run mini`` checks it."""
    path = tmp_path / "instances.jsonl"
    path.write_text(json.dumps({"instance_id": "a__b-1", "base_commit": "0" * 40, "problem_statement": "x"}) + "\n")
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    r = ledger_run(
        "swebench",
        "--instances",
        str(path),
        "-m",
        "openai/gpt-5-mini",
        "-o",
        str(tmp_path / "o"),
        env=env,
        without=("_API_KEY",),
    )
    assert one_line_error(r) == "error: no API key for openai/gpt-5-mini: set OPENAI_API_KEY (or pass another -m)"
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
