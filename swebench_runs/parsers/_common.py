"""Shared helpers for the parser scripts in this folder: loading commands, timing summaries, output.

Not a script of its own. ``load_commands`` reads every ``actions.jsonl.gz`` matched by a glob (in
sorted path order, rows in file order) and keeps the rows whose ``command`` is a non-empty string
(kinds action, submit and timeout; ``format_error`` rows carry no command).
"""

from __future__ import annotations

import glob
import gzip
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# shared/ lies beside the repository (/work/shared next to /work/main, and likewise in CI).
DEFAULT_DATA = str(REPO.parent / "shared" / "data" / "trajectories" / "*" / "actions.jsonl.gz")
DEFAULT_OUT = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True, slots=True)
class Row:
    """One agent command: where it comes from and its text."""

    source: str  # the trajectory folder (run name)
    instance_id: str
    step: int
    kind: str
    command: str


def load_commands(pattern: str) -> tuple[list[Row], dict]:
    """All rows with a non-empty string command, plus a summary of what was read."""
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"no files match {pattern!r} (pass --data GLOB)")
    rows: list[Row] = []
    total = 0
    kinds: dict[str, int] = {}
    for f in files:
        source = Path(f).parent.name
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                r = json.loads(line)
                total += 1
                kinds[r.get("kind")] = kinds.get(r.get("kind"), 0) + 1
                cmd = r.get("command")
                if isinstance(cmd, str) and cmd:
                    rows.append(Row(source, r.get("instance_id", ""), int(r.get("step") or 0), r.get("kind", ""), cmd))
    info = {
        "glob": pattern,
        "files": files,
        "rows": total,
        "rows_by_kind": dict(sorted(kinds.items(), key=lambda kv: str(kv[0]))),
        "commands": len(rows),
        "distinct_commands": len({r.command for r in rows}),
        "instances": len({(r.source, r.instance_id) for r in rows}),
    }
    return rows, info


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an already sorted list."""
    if not sorted_values:
        return float("nan")
    k = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[k - 1]


def timing_summary(seconds: list[float]) -> dict:
    """Median, p95 and max in microseconds per command, and the total in seconds."""
    s = sorted(seconds)
    return {
        "median_us": round(statistics.median(s) * 1e6, 2) if s else None,
        "p95_us": round(percentile(s, 95) * 1e6, 2) if s else None,
        "max_us": round(s[-1] * 1e6, 2) if s else None,
        "mean_us": round(statistics.fmean(s) * 1e6, 2) if s else None,
        "total_s": round(sum(s), 4),
    }


def one_line(text: str, width: int) -> str:
    """``text`` on one line (newlines shown as ⏎), cut to ``width`` characters."""
    flat = text.replace("\r", "").replace("\n", "⏎").replace("\t", " ")
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def write_json(out_dir: str | Path, name: str, payload: dict) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8")
    return path
