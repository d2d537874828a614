"""The replay benchmark's report: per-trajectory results summed per repository and in total,
printed as rich tables and written as RESULTS.md."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from rich.table import Table

TARGETS = {"unsound": 0, "coverage": 0.90, "overhead_p50_ms": 10.0, "view_p95_tokens": 1200}


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def aggregate(results: Iterable[dict]) -> dict[str, dict[str, Any]]:
    """Totals per repository and overall ('total')."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        groups[r.get("repo") or "?"].append(r)
        groups["total"].append(r)
    return {repo: _group(rs) for repo, rs in sorted(groups.items(), key=lambda kv: (kv[0] == "total", kv[0]))}


def _group(results: list[dict]) -> dict[str, Any]:
    rows = [row for r in results for row in r["rows"]]
    sums: dict[str, Any] = defaultdict(int)
    by_class: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in results:
        for k, v in r["summary"].items():
            if isinstance(v, (int, float)):
                sums[k] += v
        for cls, verdicts in r["summary"]["by_class"].items():
            for verdict, n in verdicts.items():
                by_class[cls][verdict] += n
    overhead = [row["overhead_ms"] for row in rows]
    ratio = [row["overhead_ms"] / row["exec_ms"] for row in rows if row["exec_ms"] and row["exec_ms"] > 0]
    views = [row["view_tokens"] for row in rows]
    prompts = [row["prompt_tokens"] for row in rows if row.get("prompt_tokens") is not None]
    red = sums["redundant"]
    return {
        "instances": len(results), "commands": sums["commands"], "parsed": sums["parsed"],
        "parse_coverage": sums["parsed"] / sums["commands"] if sums["commands"] else None,
        "reuse_exact": sums["reuse_exact"], "reuse_subsumed": sums["reuse_subsumed"],
        "unsound": sums["unsound"], "unverified": sums["unverified"],
        "redundant": red, "redundant_exact": sums["redundant_exact"], "redundant_subsumed": sums["redundant_subsumed"],
        "caught_reuse": sums["caught_reuse"], "caught_any": sums["caught_any"],
        "coverage_reuse": sums["caught_reuse"] / red if red else None,
        "coverage_any": sums["caught_any"] / red if red else None,
        "reuse_not_redundant": sums["reuse_not_redundant"],
        "chars_spared": sums["chars_spared"], "tokens_spared": sums["chars_spared"] // 4,
        "not_executed": sums["not_executed"],
        "overhead_ms_p50": _pct(overhead, 0.5), "overhead_ms_p95": _pct(overhead, 0.95),
        "overhead_ratio_p50": _pct(ratio, 0.5), "overhead_ratio_p95": _pct(ratio, 0.95),
        "view_tokens_p50": _pct(views, 0.5), "view_tokens_p95": _pct(views, 0.95),
        "prompt_tokens_p50": _pct(prompts, 0.5), "prompt_tokens_p95": _pct(prompts, 0.95),
        "by_class": {c: dict(v) for c, v in sorted(by_class.items())},
        "faults": sums["faults"] if "faults" in sums else sum(r.get("faults", 0) for r in results),
    }


def _f(v: Any, fmt: str = "{:,}") -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and fmt == "{:,}":
        return f"{v:,.1f}"
    return fmt.format(v)


def table(agg: dict[str, dict[str, Any]]) -> Table:
    t = Table(title="Replay of recorded trajectories (shadow mode)")
    for c in ("repository", "inst", "cmds", "REUSE", "unsound", "redundant", "caught", "+NUDGE", "ovh ms p50",
              "view p95"):
        t.add_column(c, justify="left" if c == "repository" else "right")
    for repo, g in agg.items():
        t.add_row(repo, str(g["instances"]), _f(g["commands"]), str(g["reuse_exact"] + g["reuse_subsumed"]),
                  str(g["unsound"]), str(g["redundant"]), _f(g["coverage_reuse"], "{:.0%}"),
                  _f(g["coverage_any"], "{:.0%}"), _f(g["overhead_ms_p50"], "{:.1f}"),
                  _f(g["view_tokens_p95"], "{:.0f}"))
    return t


def class_table(g: dict[str, Any]) -> Table:
    t = Table(title="Verdicts by command class (all trajectories)")
    verdicts = sorted({v for c in g["by_class"].values() for v in c})
    t.add_column("class")
    for v in verdicts:
        t.add_column(v, justify="right")
    for cls, counts in g["by_class"].items():
        t.add_row(cls, *[str(counts.get(v, 0)) for v in verdicts])
    return t


def results_md(agg: dict[str, dict[str, Any]], command: str, skipped: list[tuple[str, str]], notes: list[str]) -> str:
    tot = agg["total"]
    lines = ["# Replay of recorded SWE-bench Verified trajectories", "",
             "Every recorded command of each trajectory ran again, in order, through the ledger in shadow mode "
             "(verdicts decided and recorded, every command executed), in a fresh checkout of the instance's "
             "base commit at /testbed. See `ledger_runtime/replay.py` for the definitions.", "",
             "Reproduce:", "", "```bash", command, "```", "",
             "| repository | instances | commands | parse coverage | REUSE exact | REUSE subsumed | unsound | "
             "redundant (exact / subsumed) | caught by REUSE | caught by REUSE or NUDGE | chars spared (tokens) | "
             "not executed | overhead ms p50 / p95 | overhead / command time p50 / p95 | view tokens p50 / p95 | "
             "prompt tokens p50 / p95 |",
             "|" + "---|" * 16]
    for repo, g in agg.items():
        lines.append(
            f"| {repo} | {g['instances']} | {g['commands']} | {_f(g['parse_coverage'], '{:.2%}')} | {g['reuse_exact']} | "
            f"{g['reuse_subsumed']} | {g['unsound']} | {g['redundant']} ({g['redundant_exact']} / {g['redundant_subsumed']}) | "
            f"{_f(g['coverage_reuse'], '{:.1%}')} | {_f(g['coverage_any'], '{:.1%}')} | {g['chars_spared']:,} ({g['tokens_spared']:,}) | "
            f"{g['not_executed']} | {_f(g['overhead_ms_p50'], '{:.1f}')} / {_f(g['overhead_ms_p95'], '{:.1f}')} | "
            f"{_f(g['overhead_ratio_p50'], '{:.2f}')} / {_f(g['overhead_ratio_p95'], '{:.2f}')} | "
            f"{_f(g['view_tokens_p50'], '{:.0f}')} / {_f(g['view_tokens_p95'], '{:.0f}')} | "
            f"{_f(g['prompt_tokens_p50'], '{:.0f}')} / {_f(g['prompt_tokens_p95'], '{:.0f}')} |")
    lines += ["", "## Targets", "",
              f"- unsound reuses: {tot['unsound']} (target 0); unverifiable subsumed reuses: {tot['unverified']}",
              f"- redundant commands caught: {_f(tot['coverage_reuse'], '{:.1%}')} by REUSE, "
              f"{_f(tot['coverage_any'], '{:.1%}')} by REUSE or NUDGE (target 90%)",
              f"- overhead p50: {_f(tot['overhead_ms_p50'], '{:.1f}')} ms per command (target <= 10 ms)",
              f"- state view p95: {_f(tot['view_tokens_p95'], '{:.0f}')} tokens (target <= 1,200)", "",
              "## Verdicts by command class", "", "| class | " + " | ".join(sorted({v for c in tot['by_class'].values() for v in c})) + " |",
              "|---|" + "---|" * len({v for c in tot['by_class'].values() for v in c})]
    verdicts = sorted({v for c in tot['by_class'].values() for v in c})
    for cls, counts in tot["by_class"].items():
        lines.append(f"| {cls} | " + " | ".join(str(counts.get(v, 0)) for v in verdicts) + " |")
    if skipped:
        lines += ["", "## Skipped", ""] + [f"- {iid}: {why}" for iid, why in skipped]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def load_results(out: Path) -> list[dict]:
    import json

    results = []
    for p in sorted(out.glob("*.json")):
        try:
            data = json.loads(p.read_text())
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("status") == "done":
            results.append(data)
    return results


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
