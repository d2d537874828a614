"""Self-contained HTML pages: a run's (``ledger-run inspect RUN --html FILE``, cli/html_run.py) and
SWE-bench arms side by side (``ledger-run report OUT --html FILE``, here): no network, no external
file. Every text on a page, a command's output and the model's own words included, is escaped here
(control and bidi characters made visible, then HTML-escaped): nothing a run holds becomes markup.
"""

from __future__ import annotations

import html
from typing import Any

from ledger_runtime.cli.printable import visible

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1400px;padding:0 2em 2em;color:#1d1d1f}
h1{font-size:1.4em}h2{font-size:1.15em;margin:0}
table.sum td{padding:2px 12px 2px 0;vertical-align:top}
.step,.turn{border:1px solid #ddd;border-radius:6px;margin:1em 0;padding:.6em 1em;scroll-margin-top:6.5em}
.turn{border-style:dashed}
.step header,.turn header{display:flex;gap:1em;align-items:baseline;flex-wrap:wrap}
.v,.k{font-weight:600;padding:0 .4em;border-radius:3px}
.v-RUN{background:#eee}.v-REUSE{background:#d6f5d6}.v-NUDGE{background:#fff0c2}
.v-REVISE{background:#f3d9f7}.v-BLOCK{background:#ffd6d6}.k{background:#e8eefc;font-weight:500}
pre{background:#f7f7f9;padding:.5em;overflow:auto;max-height:28em;white-space:pre-wrap;word-break:break-word;
    margin:.3em 0}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em}
.pair h3,.step h3,.turn h3{font-size:.95em;margin:.6em 0 0}
.dim{color:#666}.add{background:#d2f4d9;color:#0b4d1b}.del{background:#fadadd;color:#82071e}.hunk{color:#6639ba}
.ref{background:#e3ecff;color:#1c3c8c}.note{background:#fff3c4}
.said{background:#f3f0fa}.reasoning{background:#f3f0fa;color:#555;font-style:italic}
nav{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #ddd;z-index:1}
nav button{margin-right:.3em}nav button[aria-pressed=true]{font-weight:700;outline:2px solid #1c3c8c}
nav input{width:18em;margin-left:.5em}
[hidden]{display:none!important}
"""


def e(text: Any) -> str:
    """Text for a page: control and bidi characters shown as escapes (an RLO would reverse what
    follows it), then HTML-escaped."""
    return html.escape(visible("" if text is None else str(text)), quote=True)


def page(title: str, body: str, script: str = "") -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>'
        f"<style>{STYLE}</style></head><body>{body}<script>{script}</script></body></html>\n"
    )


def diff_lines(text: str) -> str:
    """Unified-diff text, each added, removed and hunk line marked for its colour."""
    out = []
    for line in text.splitlines(keepends=True):
        cls = (
            "add"
            if line.startswith("+") and not line.startswith("+++")
            else "del"
            if line.startswith("-") and not line.startswith("---")
            else "hunk"
            if line.startswith("@@")
            else ""
        )
        out.append(f'<span class="{cls}">{e(line)}</span>' if cls else e(line))
    return "".join(out)


READY = "window.onerror=function(m){document.body.dataset.errors=(document.body.dataset.errors||'')+m+';'};" + (
    "document.body.dataset.ready='1';"
)


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
