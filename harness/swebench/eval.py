"""Scoring an ``ledger-run swebench`` output with the official SWE-bench harness.

For each arm, ``python -m swebench.harness.run_evaluation`` runs on ``OUT/<arm>/preds.json``
(needs ``pip install swebench``, a Docker engine, and the instance images, which the harness
builds or pulls). Its report (``<model>.<run_id>.json``, with ``resolved_ids``,
``unresolved_ids``, ``error_ids``, ``empty_patch_ids``) is kept as ``OUT/<arm>/evaluation/`` and
read into ``OUT/<arm>/results.json``: each instance's status, resolved or not.
"""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

from ledger_harness.swebench.run import BadInput, preds_file, read_json, read_preds, write_json
from ledger_runtime import shell_word

STATUS_KEYS = (
    ("resolved_ids", "resolved"),
    ("unresolved_ids", "unresolved"),
    ("error_ids", "error"),
    ("empty_patch_ids", "empty patch"),
)


def arm_dirs(out: Path) -> list[Path]:
    dirs = sorted(d for d in out.iterdir() if preds_file(d)) if out.is_dir() else []
    if not dirs:
        raise BadInput(
            f"{out}: no arm results here (OUT/<arm>/preds.json or preds.jsonl); "
            f"run ledger-run swebench -o {shell_word(out)} first"
        )
    return dirs


def arm_preds(arm_dir: Path) -> dict[str, dict[str, Any]]:
    """The arm's predictions, any format the harness reads; BadInput when they cannot be read."""
    path = preds_file(arm_dir)
    if path is None:
        raise BadInput(f"{arm_dir}: no preds.json or preds.jsonl")
    try:
        return read_preds(path)
    except (OSError, ValueError) as e:
        raise BadInput(
            f"{path} cannot be read ({e}); a run may be writing it, or rerun ledger-run swebench on "
            "this output to rebuild it"
        ) from None


def results_from_report(arm_dir: Path, report: Path) -> dict[str, Any]:
    """Read a harness report into ``results.json``: instance -> status and resolved."""
    try:
        data = read_json(report)
    except (OSError, ValueError) as e:
        raise BadInput(f"{report}: not a SWE-bench harness report: {e}") from None
    if not isinstance(data, dict) or "resolved_ids" not in data:
        raise BadInput(f"{report}: not a SWE-bench harness report (no resolved_ids)")
    preds = arm_preds(arm_dir)
    statuses = {iid: "not scored" for iid in preds}
    for key, status in STATUS_KEYS:
        for iid in data.get(key) or []:
            statuses[iid] = status
    results = {
        "report": str(report),
        "instances": {iid: {"status": s, "resolved": s == "resolved"} for iid, s in sorted(statuses.items())},
    }
    write_json(arm_dir / "results.json", results)
    return results


def harness_command(
    predictions: Path, *, dataset: str, split: str, workers: int, run_id: str, report_dir: Path, modal: bool = False
) -> list[str]:
    """The SWE-bench harness's command line for one arm's predictions."""
    cmd = [
        sys.executable,
        "-m",
        "swebench.harness.run_evaluation",
        "--dataset_name",
        dataset,
        "--split",
        split,
        "--predictions_path",
        str(predictions.resolve()),
        "--max_workers",
        str(workers),
        "--run_id",
        run_id,
        "--report_dir",
        str(report_dir.resolve()),
    ]
    return cmd + (["--modal", "true"] if modal else [])


def evaluate(out: Path, *, dataset: str, split: str, workers: int, console: Any, modal: bool = False) -> dict[str, Any]:
    if importlib.util.find_spec("swebench") is None:
        raise BadInput("the official SWE-bench harness is not installed: pip install swebench")
    done = {}
    for arm_dir in arm_dirs(out):
        preds = arm_preds(arm_dir)
        path = preds_file(arm_dir)
        model = next((p.get("model_name_or_path") for p in preds.values()), "model") or "model"
        # the harness skips instances it already has a report for under the same run id: one per predictions
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:10]
        run_id = f"ledger-{arm_dir.name}-{digest}"
        report_dir = arm_dir / "evaluation"
        report_dir.mkdir(exist_ok=True)
        console.print(f"scoring {arm_dir.name}: {len(preds)} predictions with the SWE-bench harness...")
        cmd = harness_command(
            path, dataset=dataset, split=split, workers=workers, run_id=run_id, report_dir=report_dir, modal=modal
        )
        p = subprocess.run(cmd, cwd=report_dir)
        report = report_dir / f"{model.replace('/', '__')}.{run_id}.json"
        if p.returncode != 0 or not report.exists():
            raise BadInput(
                f"the SWE-bench harness failed for {arm_dir.name} (exit {p.returncode}); its logs are in "
                f"{report_dir}/logs"
            )
        done[arm_dir.name] = results_from_report(arm_dir, report)
    return done
