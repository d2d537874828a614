"""Two replays of the same trajectories side by side: the time the ledger added per command (p50,
p95, by command class) and the characters the answers spared, so that an old and a new version of
the ledger are compared within one session on one machine (these machines are shared and noisy:
compare the ratios, not the absolute times across sessions).

    python swebench_runs/replay/compare_runs.py OLD_RESULTS NEW_RESULTS [--labels old,new] [--json OUT.json]

Each argument is a ``ledger-run replay -o`` directory. Only trajectories present in both count.
Rows written by a replay from before answers were recorded have no ``visible_chars``: their
characters spared are those of the REUSE verdicts, as that replay counted them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table


def load(d: Path) -> dict[str, dict]:
    out = {}
    for p in sorted(d.glob("*.json")):
        try:
            x = json.loads(p.read_text())
        except ValueError:
            continue
        if isinstance(x, dict) and x.get("status") == "done":
            out[x["instance_id"]] = x
    return out


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def figures(results: dict[str, dict], ids: list[str]) -> dict:
    rows = [r for i in ids for r in results[i]["rows"]]
    by_class: dict[str, list[float]] = {}
    for r in rows:
        by_class.setdefault(r["class"], []).append(r["overhead_ms"])
    seen = sum(r.get("visible_chars", r["output_chars"]) for r in rows)
    if rows and "visible_chars" in rows[0]:
        spared = sum(r["visible_chars"] - r["shown_visible_chars"] for r in rows if r["answer"] != "refused")
    else:
        spared = sum(
            r["output_chars"] - r.get("would_show_chars", r["output_chars"]) for r in rows if r["verdict"] == "REUSE"
        )
    ov = [r["overhead_ms"] for r in rows]
    return {
        "commands": len(rows),
        "overhead_ms_p50": pct(ov, 0.5),
        "overhead_ms_p95": pct(ov, 0.95),
        "overhead_ms_p50_by_class": {c: round(statistics.median(v), 3) for c, v in sorted(by_class.items())},
        "chars_seen": seen,
        "chars_spared": spared,
        "spared_share": spared / seen if seen else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--labels", default="A,B")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    la, lb = (args.labels.split(",") + ["B"])[:2]
    ra, rb = load(args.a), load(args.b)
    ids = sorted(set(ra) & set(rb))
    if not ids:
        print("no trajectory is in both", file=sys.stderr)
        return 2
    fa, fb = figures(ra, ids), figures(rb, ids)
    t = Table(title=f"{len(ids)} trajectories, {fa['commands']:,} commands, replayed by both")
    for c in ("", la, lb, f"{lb} / {la}"):
        t.add_column(c, justify="left" if not c else "right")

    def ratio(x, y):
        return f"{y / x:.2f}" if x and y is not None else "-"

    t.add_row(
        "overhead ms p50",
        f"{fa['overhead_ms_p50']:.2f}",
        f"{fb['overhead_ms_p50']:.2f}",
        ratio(fa["overhead_ms_p50"], fb["overhead_ms_p50"]),
    )
    t.add_row(
        "overhead ms p95",
        f"{fa['overhead_ms_p95']:.2f}",
        f"{fb['overhead_ms_p95']:.2f}",
        ratio(fa["overhead_ms_p95"], fb["overhead_ms_p95"]),
    )
    for c in sorted(set(fa["overhead_ms_p50_by_class"]) | set(fb["overhead_ms_p50_by_class"])):
        x, y = fa["overhead_ms_p50_by_class"].get(c), fb["overhead_ms_p50_by_class"].get(c)
        t.add_row(f"  p50 {c}", f"{x:.2f}" if x is not None else "-", f"{y:.2f}" if y is not None else "-", ratio(x, y))
    t.add_row(
        "chars spared",
        f"{fa['chars_spared']:,} ({fa['spared_share']:.1%})",
        f"{fb['chars_spared']:,} ({fb['spared_share']:.1%})",
        "",
    )
    Console().print(t)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "trajectories": len(ids),
                    la: fa,
                    lb: fb,
                    "command": "python swebench_runs/replay/compare_runs.py "
                    + " ".join(sys.argv[1:] if argv is None else argv),
                },
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
