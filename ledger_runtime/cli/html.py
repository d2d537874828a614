"""One self-contained HTML page of a run (``ledger-run inspect RUN --html FILE``) and of SWE-bench
arms side by side (``ledger-run report OUT --html FILE``): no network, no external file.

A run's page: the summary and what was spared, then one section per command: its verdict, the
command, what the model received beside what the command printed (they differ where references
stand for lines the model already held), the files it changed as diffs, and the state view as it
was at that step. A small script filters the steps by verdict; the page reads the same without it.
"""

from __future__ import annotations

import difflib
import html
from typing import Any

from ledger_runtime.answers.build import ExpandError
from ledger_runtime.cli.printable import visible
from ledger_runtime.inspection import Loaded, summary, views_at
from ledger_runtime.ledger.state import LedgerState

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1400px;padding:1em 2em;color:#1d1d1f}
h1{font-size:1.4em}h2{font-size:1.15em;margin:0}
table.sum td{padding:2px 12px 2px 0;vertical-align:top}
.step{border:1px solid #ddd;border-radius:6px;margin:1em 0;padding:.6em 1em}
.step header{display:flex;gap:1em;align-items:baseline;flex-wrap:wrap}
.v{font-weight:600;padding:0 .4em;border-radius:3px}
.v-RUN{background:#eee}.v-REUSE{background:#d6f5d6}.v-NUDGE{background:#fff0c2}
.v-REVISE{background:#f3d9f7}.v-BLOCK{background:#ffd6d6}
pre{background:#f7f7f9;padding:.5em;overflow:auto;max-height:28em;white-space:pre-wrap;word-break:break-word;
    margin:.3em 0}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em}
.pair h3,.step h3{font-size:.95em;margin:.6em 0 0}
.dim{color:#666}.add{color:#116611}.del{color:#aa1111}
nav button{margin-right:.4em}
"""

SCRIPT = """
window.onerror=function(m){document.body.dataset.errors=(document.body.dataset.errors||'')+m+';'};
document.querySelectorAll('nav button').forEach(function(b){b.addEventListener('click',function(){
  var v=b.dataset.verdict;document.querySelectorAll('.step').forEach(function(s){
    s.style.display=(v==='ALL'||s.dataset.verdict===v)?'':'none';});});});
document.body.dataset.ready='1';
"""


def _e(text: Any) -> str:
    """Text for the page: control and bidi characters shown as escapes (an RLO would reverse what
    follows it), then HTML-escaped."""
    return html.escape(visible("" if text is None else str(text)), quote=True)


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{STYLE}</style></head><body>{body}<script>{SCRIPT}</script></body></html>\n"
    )


def _diff(loaded: Loaded, m: Any) -> str:
    """A modification as a unified diff, when the ledger kept both contents."""
    before = "" if m.before_hash is None else loaded.text(m.before_hash)
    after = "" if m.after_hash is None else loaded.text(m.after_hash)
    if before is None or after is None:
        return '<p class="dim">(content not kept: binary, too large, or unknown before the run)</p>'
    lines = []
    for ln in difflib.unified_diff(before.splitlines(), after.splitlines(), "before", "after", lineterm="", n=2):
        cls = (
            "add"
            if ln.startswith("+") and not ln.startswith("+++")
            else "del"
            if ln.startswith("-") and not ln.startswith("---")
            else ""
        )
        lines.append(f'<span class="{cls}">{_e(ln)}</span>' if cls else _e(ln))
    return "<pre>" + "\n".join(lines) + "</pre>" if lines else '<p class="dim">(no line changed)</p>'


def _summary_table(s: dict[str, Any]) -> str:
    rows = [
        ("workdir", s["workdir"]),
        ("steps / commands", f"{s['steps']} / {s['attempts']} ({s['executed']} executed)"),
        ("verdicts", ", ".join(f"{k} {v}" for k, v in s["verdicts"].items()) or "none"),
        ("answers", ", ".join(f"{k} {v}" for k, v in s["answers"].items()) or "none"),
        ("output spared", f"{s['chars_spared']:,} characters (~{s['tokens_spared_estimate']:,} tokens)"),
        ("files changed", ", ".join(f["path"] for f in s["files_changed"]) or "none"),
        ("faults", s["faults"]),
    ]
    return '<table class="sum">' + "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows) + "</table>"


def run_page(loaded: Loaded) -> str:
    """The page of one run."""
    state: LedgerState = loaded.state
    transcript = loaded.transcript()
    s = summary(state)
    verdicts = sorted({a.verdict.kind.value for a in state.attempts})
    parts = [
        f"<h1>Ledger of {_e(s['workdir'])}</h1>",
        _summary_table(s),
        '<nav>show: <button data-verdict="ALL">all</button>'
        + "".join(f'<button data-verdict="{_e(v)}">{_e(v)}</button>' for v in verdicts)
        + "</nav>",
    ]
    before = views_at(loaded, {a.step - 1 for a in state.attempts if a.step > 1})
    views = {a.step: before.get(a.step - 1, "") for a in state.attempts}
    for a in state.attempts:
        shown = transcript.shown(a)
        try:
            printed = transcript.expanded(a) if a.executed else None
        except ExpandError as e:
            printed = f"(this answer does not expand: {e})"
        kind = (a.answer or {}).get("kind", "raw")
        v = a.verdict
        head = (
            f'<header><h2>step {a.step}</h2><span class="v v-{_e(v.kind.value)}">{_e(v.kind.value)}</span>'
            f'<span>{_e(v.rule or "")}</span><span class="dim">{_e(a.command_class.value)}; '
            f"exit {_e(a.exit_code if a.exit_code is not None else '-')}; answer {_e(kind)}; "
            f"{a.shown_chars:,} of {a.output_chars:,} characters</span></header>"
        )
        body = [head, f'<pre class="cmd">{_e(a.command)}</pre>']
        if v.reason:
            body.append(f'<p class="dim">{_e(v.reason)}</p>')
        body.append(
            '<div class="pair"><div><h3>what the model received</h3>'
            f'<pre class="shown">{_e(shown if shown is not None else "(not recorded)")}</pre></div>'
            "<div><h3>what the command printed</h3>"
            f'<pre class="printed">{_e(printed if printed is not None else "(not run)")}</pre></div></div>'
        )
        for m in state.modifications_of_attempt(a.id):
            body.append(f"<h3>{_e(m.path)} ({_e(m.change)})</h3>{_diff(loaded, m)}")
        if views[a.step]:
            body.append(
                f"<details><summary>the state view before this step</summary><pre>{_e(views[a.step])}</pre></details>"
            )
        parts.append(
            f'<section class="step" data-verdict="{_e(v.kind.value)}" id="step-{a.id}">' + "".join(body) + "</section>"
        )
    between = [m for m in state.modifications if m.attempt is None]
    if between:
        parts.append(
            "<h2>Changes made between commands</h2>"
            + "".join(
                f"<h3>{_e(m.path)} (before step {m.step}, {_e(m.change)})</h3>{_diff(loaded, m)}" for m in between
            )
        )
    return _page(f"ledger: {s['workdir']}", "".join(parts))


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
    table = ['<table class="sum"><tr><td></td>' + "".join(f"<td><b>{_e(n)}</b></td>" for n in names) + "</tr>"]
    for label, get in rows:
        table.append(
            f"<tr><td>{_e(label)}</td>" + "".join(f"<td>{_e(_fmt(get(arms[n])))}</td>" for n in names) + "</tr>"
        )
    table.append("</table>")
    pairs = "".join(
        f"<p>{_e(p['a'])} vs {_e(p['b'])}: {p.get('both', 0)} resolved by both, only {_e(p['a'])} "
        f"{len(p.get('only_a') or [])}, only {_e(p['b'])} {len(p.get('only_b') or [])}, McNemar p = "
        f"{_e(_fmt(p.get('p_value')))}</p>"
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
                f"<td>{_e(n)}</td>"
                f"<td>{_e({True: 'resolved', False: 'unresolved'}.get(r.get('resolved'), 'not scored'))}"
                f"</td><td>{_e(_fmt(r.get('calls')))} calls</td><td>{_e(_fmt(led.get('re_reads')))} re-reads</td>"
                f"<td>{_e(_fmt(led.get('chars_spared')))} chars spared</td>"
                f'<td class="dim">{_e(r.get("problem") or "")}</td>'
            )
        steps.append(
            f'<section class="step" data-verdict="ARM"><h2>{_e(iid)}</h2><table class="sum">'
            + "".join(f"<tr>{c}</tr>" for c in cells)
            + "</table></section>"
        )
    steps = "".join(steps)
    return _page(
        f"SWE-bench arms: {report.get('out', '')}",
        f"<h1>SWE-bench arms: {_e(report.get('out', ''))}</h1>" + "".join(table) + pairs + steps,
    )


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)
