"""The page of one run (``ledger-run inspect RUN --html FILE``): the whole run on one self-contained
page.

At the top the task, the summary and what the model calls took; then the run in order, one section
per step: the model's own words for it (its reasoning and response, from the agent's own record of
the run when one is found: cli/record.py), the command, its verdict and answer kind, how long it took
(the command; the model call, its tokens and cost where the record says), what the model received
(references as links to the step they name, notes marked, a diff coloured as one) beside what the
command printed when the two differ (once when they are the same), the files it changed as diffs, and
the state view after the step; then the submission (or the changes since the start). A small script
filters the steps by verdict and answer kind and searches them; the page reads the same without it.

A long run's page (past ``INLINE_LIMIT`` characters of the steps' bulk: a few hundred steps) keeps in
place each step's header and command, and the whole of its first steps; the rest of each step (what
the model received, what the command printed, the diffs, the state view, the model's words, the
notes) is packed in the page (cli/html.py's ``Bodies``: the same escaped HTML, each distinct fragment
once, compressed), and the script puts it in place when the step comes near the window, or a link or
the address names it (the figures at 5,000 steps: docs/inspect.md). Without script such a page says
where the rest is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from ledger_runtime.answers.build import LINES, NOTE, PATCH, SAME, TEXT, ExpandError, Piece
from ledger_runtime.answers.transcript import Transcript
from ledger_runtime.cli.html import ERRORS, Bodies, diff_lines, e, page
from ledger_runtime.cli.record import Entry, align, masked_record, plausible, secrets_masked, totals
from ledger_runtime.inspection import Loaded, distrusted, note_rows, summary, unified_diff, views_at
from ledger_runtime.ledger.redact import RedactError, Redactor
from ledger_runtime.lines import one_line
from ledger_runtime.trajectories import Conversation, ModelTurn, conversation_of

# Past this many characters of the steps' bulk (StepHtml), a page carries it packed: a page of tens
# of megabytes is slow to write, to move and to open. A packed page keeps the first steps' in place,
# up to INLINE_HEAD characters, so that its first screen shows before its script has unpacked the rest.
INLINE_LIMIT = 2_000_000
INLINE_HEAD = 100_000

# The browser lays out and paints only the steps near the window: a page of 5,000 steps opens in a
# fraction of the time (the rest keep a size until they are drawn: their last, or about a header's).
RUN_STYLE = ".step{content-visibility:auto;contain-intrinsic-size:auto 6em}"

NO_SCRIPT = (
    '<noscript><p class="dim">This page keeps the bulk of each step packed (what the model received, what the '
    "command printed, the diffs, the state view after it, the model's words, the notes): the page's script "
    "(JavaScript) shows it. Without it each step shows its header and its command; "
    "<code>ledger-run inspect RUN --step N --output</code> prints what the model received.</p></noscript>"
)

# The page's script: the filters and the search; on a packed page (cli/html.py's Bodies) it unpacks
# the steps' bulk and puts a step's in place when the step comes near the window or a link or the
# address names it; with that step, the steps above it that share the window, so that their growing
# does not push it away (the browser keeps in place what is on the screen as the page grows, and a step
# half under the bar at the top is on it). The search reads an unfilled step's text from its bulk
# parsed apart (a template: inert, never shown), so it finds what the step would show without growing
# the page.
SCRIPT = """
(function(){
var search=document.getElementById('search'),count=document.getElementById('count');
var items=[].slice.call(document.querySelectorAll('.step,.turn'));
var picked={verdict:'ALL',answer:'ALL'};
var packed=document.getElementById('bodies'),fragments=[],bodies={},texts=new Map(),observer=null;
function html(ids){return ids.map(function(i){var f=fragments[i];
  return typeof f==='string'?f:f.map(function(j){return fragments[j];}).join('');}).join('');}
function finds(root){return [].map.call(root.querySelectorAll('.find'),function(x){return x.textContent;});}
function parsed(h){var t=document.createElement('template');t.innerHTML=h;return t.content;}
function fill(s){
  var b=s&&bodies[s.id];if(!b)return;delete bodies[s.id];
  s.querySelector('header').insertAdjacentHTML('afterend',html(b[0]));
  s.insertAdjacentHTML('beforeend',html(b[1]));
  if(observer)observer.unobserve(s);
}
function text(s){
  if(texts.has(s))return texts.get(s);
  var b=bodies[s.id],t=b?finds(parsed(html(b[0]))).concat(finds(s),finds(parsed(html(b[1])))):finds(s);
  t=t.join('\\n').toLowerCase();texts.set(s,t);return t;
}
function apply(){
  var q=search.value.trim().toLowerCase(),shown=0,steps=0;
  items.forEach(function(s){
    var step=s.classList.contains('step');
    var ok=(picked.verdict==='ALL'||s.dataset.verdict===picked.verdict)&&
      (picked.answer==='ALL'||s.dataset.answer===picked.answer)&&(!q||text(s).indexOf(q)>=0);
    s.hidden=!ok;if(step){steps++;if(ok)shown++;}
  });
  count.textContent=shown+' of '+steps+' steps';
  document.querySelectorAll('nav button').forEach(function(b){
    b.setAttribute('aria-pressed',String(picked[b.dataset.group]===b.dataset.value));});
}
function go(t){
  if(!t)return;
  if(t.hidden){picked={verdict:'ALL',answer:'ALL'};search.value='';apply();}
  fill(t);
  for(var p=t.previousElementSibling,h=0;p&&h<innerHeight;p=p.previousElementSibling){
    if(!p.hidden){fill(p);h+=p.offsetHeight;}
  }
}
document.querySelectorAll('nav button').forEach(function(b){b.addEventListener('click',function(){
  picked[b.dataset.group]=b.dataset.value;apply();});});
search.addEventListener('input',apply);
document.addEventListener('click',function(ev){
  var a=ev.target.closest&&ev.target.closest('a.ref');if(!a)return;
  go(document.getElementById(a.getAttribute('href').slice(1)));
});
window.addEventListener('hashchange',function(){go(document.getElementById(location.hash.slice(1)));});
function ready(){document.body.dataset.ready='1';}
apply();
if(!packed){ready();return;}
function unpack(){
  var bin=atob(packed.textContent),bytes=new Uint8Array(bin.length);
  for(var i=0;i<bin.length;i++)bytes[i]=bin.charCodeAt(i);
  return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'))).json();
}
Promise.resolve().then(unpack).then(function(data){
  fragments=data.fragments;data.bodies.forEach(function(b){bodies[b[0]]=b[1];});
  texts.clear();apply();
  var t=location.hash&&document.getElementById(location.hash.slice(1));
  if(t){go(t);t.scrollIntoView();}
  observer=new IntersectionObserver(function(seen){
    seen.forEach(function(x){if(x.isIntersecting)fill(x.target);});ready();
  },{rootMargin:'1500px 0px'});
  var waiting=items.filter(function(s){return bodies[s.id];});
  waiting.forEach(function(s){observer.observe(s);});if(!waiting.length)ready();
}).catch(function(err){
  var p=document.createElement('p');p.className='distrusted';
  p.textContent='The steps\\' outputs could not be unpacked in this browser: '+err;
  document.querySelector('nav').after(p);window.onerror(String(err));ready();
});
})();
"""


def anchor(label: str) -> str:
    """The id of a step's section: "step 9" -> "step-9", "step 9.2" -> "step-9.2"."""
    return label.replace(" ", "-")


def _seconds(s: float | None) -> str:
    if s is None:
        return ""
    if s < 60:
        return f"{s:.2f} s" if s < 10 else f"{s:.1f} s"
    return f"{int(s // 60)} min {s % 60:.0f} s"


def _money(v: float | None) -> str:
    """Dollars, to a cent where that is much, to the last significant digits where not."""
    if v is None:
        return ""
    return f"${v:,.2f}" if v >= 1 else f"${v:.4f}" if v >= 0.01 else "$0" if v == 0 else f"${v:.6f}".rstrip("0")


def _tokens(inp: int | None, cached: int | None, out: int | None) -> str:
    parts = []
    if inp is not None:
        parts.append(f"{inp:,} tokens in" + (f" ({cached:,} cached)" if cached else ""))
    if out is not None:
        parts.append(f"{out:,} out")
    return ", ".join(parts)


def _linked(part: str, ref: int | None, loaded: Loaded) -> str:
    """A reference line with the step it names as a link to that step's section."""
    if ref is None:
        return e(part)
    label = loaded.state.label(ref)
    at = part.find(f"{label}'s output")
    if at < 0 or loaded.state.attempt(ref) is None:
        return e(part)
    return e(part[:at]) + f'<a class="ref" href="#{e(anchor(label))}">{e(label)}</a>' + e(part[at + len(label) :])


def received(text: str, pieces: list[Piece] | None, loaded: Loaded) -> str:
    """What the model received, marked up piece by piece: output as text, the ledger's notes and
    references marked, each reference's step a link, a diff coloured as a diff."""
    if not pieces or pieces[-1].end != len(text):
        return e(text)
    out = []
    for p in pieces:
        part = text[p.start : p.end]
        if p.kind == TEXT:
            out.append(e(part))
        elif p.kind == NOTE:
            out.append(f'<span class="note">{e(part)}</span>')
        elif p.kind in (LINES, SAME):
            out.append(f'<span class="ref">{_linked(part, p.ref, loaded)}</span>')
        elif p.kind == PATCH:
            head, _, body = part.partition("\n")
            out.append(f'<span class="ref">{_linked(head + chr(10), p.ref, loaded)}</span>' + diff_lines(body))
        else:  # CUT, AGAIN: the ledger's words about lines of this same output
            out.append(f'<span class="ref">{e(part)}</span>')
    return "".join(out)


def _diff(loaded: Loaded, before_hash: str | None, after_hash: str | None, name: str = "") -> str:
    """A file's change as a coloured unified diff, when the ledger kept both contents."""
    return "".join(_diff_parts(loaded, before_hash, after_hash, name))


def _diff_parts(loaded: Loaded, before_hash: str | None, after_hash: str | None, name: str = "") -> list[str]:
    text = unified_diff(loaded, before_hash, after_hash, name)
    if text is None:
        return ['<p class="dim">(content not kept: binary, too large, or unknown before the run)</p>']
    return ['<pre class="diff find">', diff_lines(text), "</pre>"] if text else ['<p class="dim">(no line changed)</p>']


def _model(turn: ModelTurn | None, first: bool, label: str) -> list[str]:
    """The model's own words for a step: its reasoning and its response."""
    if turn is None:
        return []
    if not first:
        return [f'<p class="dim">the model asked for this command in the same call as {e(label)}</p>']
    parts = ['<div class="model"><h3>the model</h3>']
    if turn.reasoning:
        parts += ['<pre class="reasoning find">', e(turn.reasoning), "</pre>"]
    if turn.text:
        parts += ['<pre class="said find">', e(turn.text), "</pre>"]
    elif not turn.reasoning:
        parts.append('<p class="dim">(no text: the call asked for the command alone)</p>')
    return [*parts, "</div>"]


def _call(turn: ModelTurn | None, unpriced: bool = False) -> list[str]:
    """What a model call took, as far as the record says (``unpriced``: the run's model has no known
    price, so a $0 the record says is a cost nobody knows)."""
    if turn is None:
        return []
    took = [f"model {_seconds(turn.seconds)}"] if turn.seconds is not None else []
    tokens = _tokens(turn.input_tokens, turn.cached_tokens, turn.output_tokens)
    cost = ["cost unknown"] if unpriced and not turn.cost else [_money(turn.cost)] if turn.cost is not None else []
    return took + ([tokens] if tokens else []) + cost


class StepHtml(NamedTuple):
    """A step's section in its pieces, in the order the section has them: ``top`` (its tag and its
    header) and ``middle`` (the command, and what the ledger doubts or decided of it) are small;
    ``model`` (the model's words, before the command) and ``rest`` (what the model received and the
    command printed, the diffs, the state view, the notes) are the bulk, each a list of HTML fragments,
    which a big page carries packed (``Bodies``) and its script puts in place."""

    id: str
    top: str
    model: list[str]
    middle: str
    rest: list[str]

    def inline(self) -> str:
        return self.top + "".join(self.model) + self.middle + "".join(self.rest) + "</section>"

    def skeleton(self) -> str:
        """The section without its bulk: what a packed page has of it before its script fills it."""
        return self.top + self.middle + "</section>"


def _outputs(loaded: Loaded, transcript: Transcript, a: Any) -> list[str]:
    """What the model received, beside what the command printed when the two differ."""
    who = "the subagent" if a.agent else "the model"
    got = f"what {who} received" if a.applied else f"what {who} would have received (shadow)"
    shown = transcript.shown(a)
    try:
        printed = transcript.expanded(a) if a.executed else None
    except ExpandError as err:
        printed = f"(this answer does not expand: {err})"
    marked = (
        received(shown, transcript.pieces(a), loaded)
        if shown
        else '<span class="dim">(nothing: the command printed nothing)</span>'
        if shown is not None
        else '<span class="dim">(not recorded)</span>'
    )
    if printed is None:
        return [f'<h3>{got} (the command did not run)</h3><pre class="shown find">', marked, "</pre>"]
    if printed == shown:
        return [f'<h3>{got}: what the command printed</h3><pre class="shown find">', marked, "</pre>"]
    return [
        f'<div class="pair"><div><h3>{got}</h3><pre class="shown find">',
        marked,
        '</pre></div><div><h3>what the command printed</h3><pre class="printed find">',
        e(printed),
        "</pre></div></div>",
    ]


def _after(loaded: Loaded, a: Any, label: str, view: str, told: list[dict[str, Any]]) -> list[str]:
    """What a step left: the files its command changed, as diffs; the state view after it; the notes
    the model was sent after it."""
    out: list[str] = []
    for m in loaded.state.modifications_of_attempt(a.id):
        out += [f'<h3 class="find">{e(_shown_path(loaded, m.path))} ({e(m.change)})</h3>']
        out += _diff_parts(loaded, m.before_hash, m.after_hash)
    if view:
        out += [f"<details><summary>the state view after {e(label)}</summary><pre>", e(view), "</pre></details>"]
    for n in told:
        text = (
            n["text"] if n["text"] is not None else f"(a note of {n['chars']:,} characters; this ledger kept no text)"
        )
        out += [f'<h3>the note the model was sent after {e(label)}</h3><pre class="note find">', e(text), "</pre>"]
    return out


def _step(
    loaded: Loaded,
    transcript: Transcript,
    a: Any,
    label: str,
    turn: ModelTurn | None,
    first: bool,
    lead: str,
    view: str,
    doubted: str | None = None,
    told: list[dict[str, Any]] | None = None,
    unpriced: bool = False,
) -> StepHtml:
    kind = a.answer_kind
    v = a.verdict
    facts = [
        e(a.command_class.value),
        f"exit {e(a.exit_code if a.exit_code is not None else '-')}",
        f"{a.shown_chars:,} of {a.output_chars:,} characters",
    ]
    if a.executed:
        facts.append(f"command {_seconds(a.duration_s)}")
    facts += [e(x) for x in (_call(turn, unpriced) if first else [])]
    if a.agent:
        facts.append(f"a subagent's call ({e(one_line(a.agent)[:80])})")
    top = (
        f'<section class="step" id="{e(anchor(label))}" data-verdict="{e(v.kind.value)}" data-answer="{e(kind)}">'
        f'<header><h2>{e(label)}</h2><span class="v v-{e(v.kind.value)}">{e(v.kind.value)}</span>'
        f'<span class="k">{e(kind)}</span><span>{e(v.rule or "")}</span>'
        f'<span class="dim facts">{"; ".join(facts)}</span></header>'
    )
    middle = [f'<pre class="cmd find">{e(a.command)}</pre>']
    if doubted:
        middle.append(
            f'<p class="distrusted find">distrusted: the agent\'s own log disowns this record ({e(doubted)})</p>'
        )
    if v.reason:
        middle.append(f'<p class="dim find">{e(v.reason)}</p>')
    rest = _outputs(loaded, transcript, a) + _after(loaded, a, label, view, told or [])
    return StepHtml(anchor(label), top, _model(turn, first, lead), "".join(middle), rest)


def _turn_alone(turn: ModelTurn, n: int) -> str:
    """A model call no step of the ledger answers: a format error, a last message, a command the
    ledger did not see."""
    facts = "; ".join(e(x) for x in _call(turn))
    asked = "".join(f'<pre class="cmd find">{e(c)}</pre>' for c in turn.commands)
    return (
        f'<section class="turn" id="call-{n}" data-verdict="" data-answer=""><header><h2>model call {n}</h2>'
        f'<span class="dim facts">{facts}</span></header>{"".join(_model(turn, True, ""))}'
        + (f"<h3>asked for commands the ledger did not record</h3>{asked}" if asked else "")
        + "</section>"
    )


def _shown_path(loaded: Loaded, path: str) -> str:
    b = loaded.state.baseline
    root = b.root.rstrip("/") + "/" if b and b.root else ""
    return path[len(root) :] if root and path.startswith(root) else path


def _final(loaded: Loaded, record: Conversation | None) -> str:
    """The submission the agent's record holds, or else the changes since the start, from the ledger."""
    if record is not None and record.submission and record.submission.strip():
        return (
            '<section id="final"><h2>Submission</h2><p class="dim">as the agent\'s record holds it</p>'
            f'<pre class="diff find">{diff_lines(record.submission)}</pre></section>'
        )
    changed = loaded.state.changed_files()
    if not changed:
        return '<section id="final"><h2>Final patch</h2><p class="dim">no file changed since the start</p></section>'
    parts = []
    for m in changed:
        first = loaded.state.modifications_of(m.path)[0]
        name = _shown_path(loaded, m.path)
        parts.append(f"<h3>{e(name)}</h3>{_diff(loaded, first.before_hash, m.after_hash, name)}")
    return (
        '<section id="final"><h2>Final patch</h2><p class="dim">every file changed since the start, as the ledger '
        "kept it</p>" + "".join(parts) + "</section>"
    )


def _summary(s: dict[str, Any], record: Conversation | None, problems: list[str]) -> str:
    spared = (
        ("output spared", f"{s['chars_spared']:,} characters (~{s['tokens_spared_estimate']:,} tokens)")
        if not s["shadow_answers"] or s["chars_spared"]
        else (
            "output the ledger would have spared (shadow: the model got each output as printed)",
            f"{s['shadow_chars_spared']:,} characters (~{(s['shadow_chars_spared'] + 3) // 4:,} tokens)",
        )
    )
    rows = [
        ("workdir", s["workdir"]),
        ("steps / commands", f"{s['steps']} / {s['attempts']} ({s['executed']} executed)"),
        ("verdicts", ", ".join(f"{k} {v}" for k, v in s["verdicts"].items()) or "none"),
        ("answers", ", ".join(f"{k} {v}" for k, v in s["answers"].items()) or "none"),
        spared,
        ("files changed", ", ".join(f["path"] for f in s["files_changed"]) or "none"),
        ("faults", s["faults"]),
    ]
    if record is not None:
        t = totals(record.turns)
        calls = ", ".join(
            x
            for x in (
                f"{t['calls']:,}",
                _tokens(t["input_tokens"], t["cached_tokens"], t["output_tokens"]),
                "cost unknown" if s.get("model_calls_unpriced") else _money(t["cost"]),
                _seconds(t["seconds"]),
            )
            if x
        )
        rows += [("model calls", calls), ("the agent's record", record.source)]
    else:
        rows.append(("the agent's record", "; ".join(problems) or "none found beside the ledger (--trajectory FILE)"))
    return '<table class="sum">' + "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in rows) + "</table>"


def _nav(loaded: Loaded) -> str:
    attempts = loaded.state.attempts
    verdicts = sorted({a.verdict.kind.value for a in attempts})
    kinds = sorted({a.answer_kind for a in attempts})

    def group(name: str, values: list[str]) -> str:
        return (
            f'<span class="group">{name}: '
            + "".join(
                f'<button data-group="{name}" data-value="{e(v)}">{e(v if v != "ALL" else "all")}</button>'
                for v in ["ALL", *values]
            )
            + "</span> "
        )

    return (
        "<nav>"
        + group("verdict", verdicts)
        + group("answer", kinds)
        + '<label>search <input id="search" type="search" placeholder="text in a step"></label> '
        + '<span id="count" class="dim"></span></nav>'
    )


def page_redactor(loaded: Loaded, learned: list[str]) -> Redactor:
    """How the page masks the agent's record: as the run's ledger masked what it stored (the built-in
    shapes and the run's own patterns; nothing when the run kept secrets as they are), with the values
    the ledger masked in the commands it kept (``learned``)."""
    settings = loaded.config.redaction
    if not settings.enabled:
        return Redactor.off()
    try:
        base = Redactor.for_run({}, settings.patterns)
    except RedactError:  # patterns a crafted ledger carries: the built-in ones
        base = Redactor.for_run({})
    # each as it is: values the ledger did mask, of any length it masked (a password of 7 characters
    # after mysql -p), not guesses at an environment's secrets, which with_values keeps to 8 or more
    values = sorted(set(base.values) | {v for v in learned if v and "\n" not in v}, key=lambda v: (-len(v), v))
    return Redactor(values, base.patterns, names=base.names)


def run_page(
    loaded: Loaded,
    record_path: Path | None = None,
    inline_limit: int = INLINE_LIMIT,
    inline_head: int = INLINE_HEAD,
    *,
    conversation: Conversation | None = None,
) -> str:
    """The page of one run; ``record_path``: the agent's own record of it (default: found beside the
    ledger by the installed formats), ``conversation``: that record as already read from it. When the bulk
    of its steps (``StepHtml``) passes ``inline_limit`` characters, the page carries it packed, but for the
    first steps' up to ``inline_head`` characters, and its script puts a step's in place when it is wanted
    (0 and 0: every step's packed)."""
    state = loaded.state
    s = summary(state)
    problems: list[str] = []
    record = conversation if conversation is not None else conversation_of(loaded.path, record_path, problems)
    entries = align(record.turns if record else [], state.attempts)
    transcript = loaded.transcript()  # one, so each answer is expanded once
    if record is not None:  # the agent's record is its own file, unmasked: the page shows it masked
        record = plausible(masked_record(record, page_redactor(loaded, secrets_masked(entries, transcript.shown))))
        entries = align(record.turns, state.attempts)
    task = s["task"] or (record.task if record else "")
    head = [
        f"<h1>Run in {e(s['workdir'])}</h1>",
        f'<section id="task"><h2>Task</h2><pre class="task">{e(task or "(not recorded)")}</pre></section>',
        _summary(s, record, problems),
        _nav(loaded),
    ]
    run = _sections(loaded, transcript, entries, bool(s.get("model_calls_unpriced")))
    between = [m for m in state.modifications if m.attempt is None]
    if between:
        run.append(
            "<h2>Changes made between commands</h2>"
            + "".join(
                f"<h3>{e(_shown_path(loaded, m.path))} (before step {m.step}, {e(m.change)})</h3>"
                f"{_diff(loaded, m.before_hash, m.after_hash)}"
                for m in between
            )
        )
    run.append(_final(loaded, record))
    title, top = f"ledger: {s['workdir']}", "".join(head)
    if sum(_bulk(x) for x in run) <= inline_limit:
        body = "".join(x.inline() if isinstance(x, StepHtml) else x for x in run)
        return page(title, top + body, ERRORS + SCRIPT, RUN_STYLE)
    return page(title, top + NO_SCRIPT + _packed(run, inline_head), ERRORS + SCRIPT, RUN_STYLE)


def _bulk(x: StepHtml | str) -> int:
    return sum(len(f) for f in (*x.model, *x.rest)) if isinstance(x, StepHtml) else 0


def _packed(run: list[StepHtml | str], inline_head: int) -> str:
    """The run with its steps' bulk packed (``Bodies``), but for the first steps' up to ``inline_head``."""
    bodies, out, kept = Bodies(), [], 0
    for x in run:
        if isinstance(x, StepHtml):
            kept += _bulk(x)  # once past the head, every later step is packed too
            if kept > inline_head:
                bodies.add(x.id, x.model, x.rest)
            x = x.inline() if kept <= inline_head else x.skeleton()
        out.append(x)
    return "".join(out) + bodies.packed()


def _sections(loaded: Loaded, transcript: Transcript, entries: list[Entry], unpriced: bool) -> list[StepHtml | str]:
    """The run in order: a section per command (its step's), and one per model call no command answers."""
    state = loaded.state
    views = views_at(loaded, {a.step for a in state.attempts})
    doubted = distrusted(state)
    told = note_rows(state)
    labels = _labels(state.attempts)
    out: list[StepHtml | str] = []
    calls = 0
    for entry in entries:
        calls += entry.turn is not None
        if not entry.attempts:
            out.append(_turn_alone(entry.turn, calls))
            continue
        lead = labels[id(entry.attempts[0])]
        for i, a in enumerate(entry.attempts):
            last_of_step = i + 1 == len(entry.attempts) or entry.attempts[i + 1].step != a.step
            view = views.get(a.step, "") if last_of_step else ""
            notes_after = told.get(a.step, []) if last_of_step else []
            out.append(
                _step(
                    loaded,
                    transcript,
                    a,
                    labels[id(a)],
                    entry.turn,
                    i == 0,
                    lead,
                    view,
                    doubted.get(a.id),
                    notes_after,
                    unpriced,
                )
            )
    return out


def _labels(attempts: list[Any]) -> dict[int, str]:
    """Each attempt's label (by the object's identity), as the state gives it ("step 9", "step 9.2"), but
    from its own place in the run: a crafted ledger whose attempts share an id (the state labels the id
    once, by the last of them) still has a section, and an anchor, per attempt, none shared."""
    out: dict[int, str] = {}
    nth: dict[int, int] = {}
    for a in attempts:
        nth[a.step] = nth.get(a.step, 0) + 1
        out[id(a)] = f"step {a.step}" + (f".{nth[a.step]}" if nth[a.step] > 1 else "")
    return out
