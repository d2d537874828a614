"""SWE-bench arms side by side as one self-contained HTML page (``ledger-run report OUT --html FILE``),
on the runtime's page frame (ledger_runtime/cli/html.py: every text escaped there)."""

from __future__ import annotations

from typing import Any

from ledger_runtime.cli.html import READY, e, page


def arms_page(report: dict[str, Any]) -> str:
    """SWE-bench arms side by side (the dict ``ledger-run report --json`` prints)."""
    arms = report.get("arms") or {}
    names = list(arms)
    rows = [
        ("instances", lambda a: a.get("instances")),
        ("submitted", lambda a: a.get("submitted")),
        ("resolved", lambda a: a.get("resolved")),
        ("cost $", lambda a: "unknown" if a.get("cost_unknown_instances") else (a.get("totals") or {}).get("cost")),
        ("model calls", lambda a: (a.get("totals") or {}).get("calls")),
        ("input tokens", lambda a: (a.get("totals") or {}).get("input_tokens")),
        ("re-reads", lambda a: a.get("re_reads")),
        ("reuses", lambda a: a.get("reuses")),
        ("output chars spared", lambda a: a.get("chars_spared")),
    ]
    table = ['<table class="sum"><tr><td></td>' + "".join(f"<td><b>{e(n)}</b></td>" for n in names) + "</tr>"]
    for label, get in rows:
        table.append(f"<tr><td>{e(label)}</td>" + "".join(f"<td>{e(_fmt(get(arms[n])))}</td>" for n in names) + "</tr>")
    table.append("</table>")
    pairs = "".join(
        f"<p>{e(p['a'])} vs {e(p['b'])}: {p.get('both', 0)} resolved by both, only {e(p['a'])} "
        f"{len(p.get('only_a') or [])}, only {e(p['b'])} {len(p.get('only_b') or [])}, McNemar p = "
        f"{e(_fmt(p.get('p_value')))}</p>"
        for p in report.get("paired") or []
    )
    ids = sorted({iid for n in names for iid in (arms[n].get("rows") or {})})
    steps = []
    for iid in ids:
        cells = []
        for n in names:
            r = (arms[n].get("rows") or {}).get(iid) or {}
            led = r.get("ledger") or {}
            cells.append(
                f"<td>{e(n)}</td>"
                f"<td>{e({True: 'resolved', False: 'unresolved'}.get(r.get('resolved'), 'not scored'))}"
                f"</td><td>{e(_fmt(r.get('calls')))} calls</td><td>{e(_fmt(led.get('re_reads')))} re-reads</td>"
                f"<td>{e(_fmt(led.get('chars_spared')))} chars spared</td>"
                f'<td class="dim">{e(r.get("problem") or "")}</td>'
            )
        steps.append(
            f'<section class="step" data-verdict="ARM"><h2>{e(iid)}</h2><table class="sum">'
            + "".join(f"<tr>{c}</tr>" for c in cells)
            + "</table></section>"
        )
    steps = "".join(steps)
    return page(
        f"SWE-bench arms: {report.get('out', '')}",
        f"<h1>SWE-bench arms: {e(report.get('out', ''))}</h1>" + "".join(table) + pairs + steps,
        READY,
    )


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)
