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


def test_swebench_refuses_an_output_directory_that_is_a_link_or_shared(tmp_path: Path) -> None:
    """``-o`` was taken as given: through a link (the predictions and ledgers went where its owner chose, a
    ``preds.json`` planted as a link was written through) or a shared sticky directory (made 0700 for the run). It
    is checked as every run directory is, before any instance or model is looked for."""
    path = tmp_path / "instances.jsonl"
    path.write_text(json.dumps({"instance_id": "a__b-1", "base_commit": "0" * 40, "problem_statement": "x"}) + "\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "o"
    link.symlink_to(elsewhere)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    for out, why in ((link, "it is a symbolic link"), (shared, "it is a shared directory")):
        r = ledger_run("swebench", "--instances", str(path), "-m", "openai/gpt-5-mini", "-o", str(out))
        line = one_line_error(r)
        assert line.startswith(f"error: cannot write results into -o {out}: {why}"), line
    assert not any(elsewhere.iterdir())
    assert (shared.stat().st_mode & 0o7777) == 0o1777


def test_swebench_writes_its_json_owner_only_and_never_through_a_link(tmp_path: Path) -> None:
    """The arms' JSON files (predictions, timings, manifest) were written with the umask's mode, through a link
    planted where one goes."""
    import os

    from ledger_harness.swebench.run import write_json

    target = tmp_path / "target"
    target.write_text("theirs")
    (tmp_path / "preds.json").symlink_to(target)
    old = os.umask(0)
    try:
        try:
            write_json(tmp_path / "preds.json", {"a": 1})
        except OSError:
            pass
        write_json(tmp_path / "timings.json", {"b": 2})
    finally:
        os.umask(old)
    assert target.read_text() == "theirs"
    assert (tmp_path / "timings.json").stat().st_mode & 0o777 == 0o600
    assert json.loads((tmp_path / "timings.json").read_text()) == {"b": 2}
