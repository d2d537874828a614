"""Self-contained HTML pages: a run's (``ledger-run inspect RUN --html FILE``, cli/html_run.py) and
the harness's (SWE-bench arms side by side: ledger_harness.swebench.page): no network, no external
file. Every text on a page, a command's output and the model's own words included, is escaped here
(control and bidi characters made visible, then HTML-escaped): nothing a run holds becomes markup.

A big page can carry the bodies of its sections packed (``Bodies``): the same escaped HTML, cut into
fragments, each distinct fragment once, compressed (zlib) and base64-encoded in one inert
``<script type="application/octet-stream">``, which the page's own script unpacks with the browser's
``DecompressionStream`` and puts in place when a section is wanted. The page stays one file, and
what reaches ``innerHTML`` is only what this module escaped.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import zlib
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


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode("ascii") + "'"


def policy(script: str, style: str) -> str:
    """The page's Content-Security-Policy: its own script and its own style, by their hashes, and
    nothing else (no other script, inline handler, style, image, font, frame, form or connection), so
    that markup in what a run holds would run nothing and load nothing were it ever not escaped."""
    return (
        f"default-src 'none'; script-src {_sha256(script)}; style-src {_sha256(style)}; "
        "base-uri 'none'; form-action 'none'"
    )


# how a page says ledger-run wrote it: ``inspect --html`` replaces a page of its own, never a user's HTML file
HEAD = '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
GENERATOR = '<meta name="generator" content="ledger-run">'


def page(title: str, body: str, script: str = "", style: str = "") -> str:
    """A whole page: ``STYLE`` and ``style`` (the page's own rules) in its head, ``script`` at its end,
    and a policy (``policy``) that lets the browser run and apply those two alone."""
    css = STYLE + style
    return (
        f"{HEAD}{GENERATOR}"
        f'<meta http-equiv="Content-Security-Policy" content="{policy(script, css)}"><title>{e(title)}</title>'
        f"<style>{css}</style></head><body>{body}<script>{script}</script></body></html>\n"
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


ERRORS = "window.onerror=function(m){document.body.dataset.errors=(document.body.dataset.errors||'')+m+';'};"
# what a test waits for (tests/browser.py): the page's script ran, and the page is ready to be read
READY = ERRORS + "document.body.dataset.ready='1';"

PACKED = "bodies"  # the id of the packed bodies' element


class Bodies:
    """The bodies of a page's sections, kept apart from the page and packed into it: each body is
    given as parts (lists of HTML fragments, escaped already), and each distinct fragment is stored
    once, so an output shown at a hundred steps, or the same heading at every step, costs its size
    once before compression. A fragment of several lines is stored as the list of its lines, each
    line once too (an HTML string joined back from its pieces is the same string): a long text that
    differs from an earlier one in a few lines, the state view a step later, adds only those.
    Joining a body's parts' fragments gives exactly the HTML they were given as."""

    def __init__(self) -> None:
        self.fragments: list[str | list[int]] = []  # a text, or the ids of the lines it is made of
        self._index: dict[str, int] = {}
        self.bodies: list[tuple[str, list[list[int]]]] = []

    def _id(self, text: str, split: bool = True) -> int:
        i = self._index.get(text)
        if i is None:
            lines = text.splitlines(keepends=True) if split and "\n" in text else [text]
            entry: str | list[int] = text if len(lines) == 1 else [self._id(line, False) for line in lines]
            i = self._index[text] = len(self.fragments)
            self.fragments.append(entry)
        return i

    def add(self, section: str, *parts: list[str]) -> None:
        """The body of the section whose id is ``section``: its ``parts``, each a list of fragments."""
        self.bodies.append((section, [[self._id(f) for f in part if f] for part in parts]))

    def packed(self) -> str:
        """The element that carries the bodies in the page (base64 of zlib of JSON: no markup in it)."""
        data = json.dumps(
            {"fragments": self.fragments, "bodies": self.bodies}, ensure_ascii=False, separators=(",", ":")
        )
        # level 6: at 5,000 steps 0.6 s for 12 MB of JSON; level 9 is 1.5% smaller and takes 1.4 s
        text = base64.b64encode(zlib.compress(data.encode(), 6)).decode("ascii")
        return f'<script type="application/octet-stream" id="{PACKED}">{text}</script>'


def unpacked(page_text: str) -> dict[str, list[str]] | None:
    """The bodies a page carries packed, by section id, each as its parts' HTML (what the page's script
    puts in place), or None for a page that carries none."""
    m = re.search(f'<script type="application/octet-stream" id="{PACKED}">([^<]*)</script>', page_text)
    if m is None:
        return None
    data = json.loads(zlib.decompress(base64.b64decode(m.group(1))))
    fragments = data["fragments"]

    def text(i: int) -> str:
        f = fragments[i]
        return f if isinstance(f, str) else "".join(fragments[j] for j in f)

    return {section: ["".join(text(i) for i in part) for part in parts] for section, parts in data["bodies"]}
