"""Self-contained HTML pages: a run's (``ledger-run inspect RUN --html FILE``, cli/html_run.py) and
the harness's (SWE-bench arms side by side: ledger_harness.swebench.page): no network, no external
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
.distrusted{color:#a40000;font-weight:bold}
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
