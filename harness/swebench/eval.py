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
    """The arms of ``ledger-run swebench -o OUT`` (BadInput: what ``out`` is instead, a run, an arm, a file)."""
    dirs = sorted(d for d in out.iterdir() if preds_file(d)) if out.is_dir() else []
    if not dirs and out.is_dir() and preds_file(out):
        above = shell_word(out.parent if out.name not in ("", ".", "..") else out.resolve().parent)
        raise BadInput(f"{out} is one arm's results: give the directory above it, which holds the arms ({above})")
    run = None if dirs else _run_in(out)
    if run:  # "report" after a run of mini, the demo or an agent: that is inspect's
        raise BadInput(
            f"{out} holds a run of the ledger, not the output of ledger-run swebench (arms side by side): "
            f"ledger-run inspect {run}"
        )
    if not dirs and out.is_file():
        raise BadInput(f"{out} is a file: give the output directory of ledger-run swebench (OUT/<arm>/preds.json)")
    if not dirs:
        raise BadInput(
            f"{out}: no arm results here (OUT/<arm>/preds.json or preds.jsonl); "
            f"run ledger-run swebench -o {shell_word(out)} first"
        )
    return dirs


def _run_in(path: Path) -> str | None:
    """What to give ``inspect`` (shell-quoted) where ``path`` is or holds a run of the ledger (a ledger file, a
    run directory, a demo's ``-o``, a trajectory, ``ledger-runs/``), else None."""
    from ledger_runtime import NotALedger
    from ledger_runtime.inspection import find_ledger

    try:
        found = find_ledger(path)
    except NotALedger as e:  # a directory of runs names the last of them
        said = str(e)
        return said.split("ledger-run inspect ", 1)[1] if "ledger-run inspect " in said else None
    except OSError:
        return None
    return shell_word(path) if found != path or found.name == "ledger.sqlite" else None


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
