"""Looking inside a ledger after a run: the timeline, the summary, the state at any step, and what the model received.

``load`` opens a ledger read-only and folds its events; ``timeline`` and ``summary`` give the plain data ``--json``
prints; ``render_*`` draw it with rich.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ledger_runtime.analysis.display import short_command
from ledger_runtime.answers.build import ExpandError
from ledger_runtime.answers.transcript import Transcript
from ledger_runtime.config import LedgerConfig, from_mapping, is_setting
from ledger_runtime.inform import render
from ledger_runtime.json_text import UnreadableJSON, json_value
from ledger_runtime.ledger.private import read_record
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.ledger.store import LEDGER_FILE, LedgerStore, NotALedger, writer_max
from ledger_runtime.records import VerdictKind
from ledger_runtime.workspace.scanner import relative


@dataclass
class Loaded:
    path: Path
    meta: dict[str, Any]
    events: list[dict[str, Any]]
    state: LedgerState
    blobs: dict[str, str | None] = field(default_factory=dict)  # blobs read so far, by hash
    damaged: dict[str, str] = field(default_factory=dict)  # blobs read so far that do not read back: why
    unchecked: dict[str, str] = field(default_factory=dict)  # an older version's masked file contents: no sum to check

    def text(self, h: str | None) -> str | None:
        """A blob of the ledger as text, read on demand; None where missing or damaged, and ``damaged`` says why."""
        if h is None:
            return None
        if h not in self.blobs:
            store = LedgerStore.open(self.path, check=False)
            store.max_blob_bytes = self.blob_limit
            try:
                self.blobs[h] = store.text(h)
                self.damaged.update(store.damaged)
                self.unchecked.update(store.unchecked)
            finally:
                store.close()
        return self.blobs[h]

    def transcript(self) -> Transcript:
        return Transcript(self.state, self.text)

    @cached_property
    def config(self) -> LedgerConfig:
        """The run's settings as its ledger recorded them, or the defaults where they do not read."""
        raw = self.state.run.get("config")
        if not isinstance(raw, dict):
            return LedgerConfig()
        try:
            return from_mapping({k: v for k, v in raw.items() if is_setting(k)})
        except (ValueError, TypeError, AttributeError):
            self.state.damaged.append("run event: its settings do not read: shown with the defaults")
            return LedgerConfig()

    @cached_property
    def blob_limit(self) -> int:
        """The longest blob the run's writer stored, by its settings."""
        c = self.config
        return writer_max(c.truncation.max_stored_chars, c.scanning.max_content_bytes)


def find_ledger(path: str | Path) -> Path:
    """The ledger a path names, or the path as given where it names none.

    A ledger file, a run directory, a directory holding one in ``ledger/`` or ``run/``, or a trajectory whose
    ``info.ledger.path`` names it (or, if the run moved, the ledger beside it)."""
    p = Path(path)
    if p.is_dir():
        return _in_directory(p)
    if p.is_file() and p.name.endswith(".json"):
        named = _named_ledger(p)
        if named is UNREADABLE:
            return p
        if isinstance(named, str) and named:
            q = Path(named) if Path(named).is_absolute() else p.parent / named
            if q.exists():
                return q
            for beside in (p.parent / LEDGER_FILE, p.parent / "ledger" / LEDGER_FILE):  # the run moved
                if beside.is_file():
                    return beside
            raise NotALedger(p, f"the trajectory's ledger {named} is not there, nor beside it")
        raise NotALedger(p, "a JSON file without info.ledger.path (not a trajectory of a run with the ledger)")
    return p


def _in_directory(p: Path) -> Path:
    """The ledger of the run directory ``p`` (in it, or in its ``ledger/`` or ``run/``), or ``p`` itself where there
    is none; NotALedger naming a run under it, where it holds runs."""
    for sub in ("", "ledger", "run"):
        if (p / sub / LEDGER_FILE).is_file():
            return p / sub / LEDGER_FILE
    runs = _runs_under(p)
    if runs:  # ledger-runs/ itself, a replay's -o: "no ledger.sqlite in this directory" was all it said
        more = f"; it holds {len(runs)} runs, the last" if len(runs) > 1 else "; it holds a run"
        raise NotALedger(
            p, f"no {LEDGER_FILE} in this directory{more}: ledger-run inspect {shlex.quote(str(runs[-1]))}"
        )
    return p


def _runs_under(p: Path, most: int = 1000) -> list[Path]:
    """The run directories directly under ``p``, its ``ledgers/`` (a replay's) or its ``ledger-runs/``, in order of
    name (of time, in ``ledger-runs/``); the first ``most`` entries of each looked at."""
    found: list[Path] = []
    for parent in (p, p / "ledgers", p / "ledger-runs"):
        try:
            with os.scandir(parent) as entries:
                names = sorted(e.name for _, e in zip(range(most), entries) if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
        found += [parent / n for n in names if any((parent / n / s / LEDGER_FILE).is_file() for s in ("", "run"))]
    return found


UNREADABLE = object()  # a JSON file that cannot be read, or not as a mapping


def _named_ledger(p: Path) -> Any:
    """What a JSON file says under ``info.ledger.path``: None for nothing, UNREADABLE, or NotALedger if unparsable."""
    try:
        return (json_value(read_record(p).decode("utf-8")).get("info") or {}).get("ledger", {}).get("path")
    except (UnreadableJSON, UnicodeDecodeError) as e:
        raise NotALedger(p, f"a JSON file that does not parse ({e})") from None
    except (OSError, AttributeError):
        return UNREADABLE


def load(path: str | Path) -> Loaded:
    """Opens a ledger read-only; raises store.NotALedger with a one-line reason."""
    store = LedgerStore.open(find_ledger(path))
    try:
        events = list(store.events())
        meta = store.meta()
    finally:
        store.close()
    state = LedgerState.from_events(events)
    state.damaged[:0] = store.damaged_events
    return Loaded(store.path, meta, events, state)


def _display(path: str, state: LedgerState) -> str:
    return relative(path, state.baseline.root) if state.baseline else path


def keep_row(row: dict[str, Any], verdicts: set[str] | None, classes: set[str] | None) -> bool:
    """Whether a timeline row passes the filters; None is no filter."""
    return (verdicts is None or row["verdict"] in verdicts) and (classes is None or row["class"] in classes)


DISTRUSTED_WHERE = "checking what the model got"  # the fault runtime.distrust logs
_DISTRUSTED = re.compile(r"^ValueError: attempt (\d+): (.*)$", re.DOTALL)


def distrusted(state: LedgerState) -> dict[int, str]:
    """The attempts whose record the agent's own log says the model did not get, each with why.

    From ``distrust`` events and, in older ledgers, from the faults the adapters' checks logged."""
    out: dict[int, str] = {
        a: why.split(": ", 1)[-1] if why.startswith("attempt ") else why for a, why in state.distrusted.items()
    }
    for f in state.faults:
        error = f.get("error")
        m = _DISTRUSTED.match(error) if f.get("where") == DISTRUSTED_WHERE and isinstance(error, str) else None
        if m is not None:
            out.setdefault(int(m.group(1)), m.group(2))
    return out


def timeline(state: LedgerState, transcript: Transcript | None = None) -> list[dict[str, Any]]:
    """One row per attempt: step, verdict, class, command, exit code, answer kind, files changed, why distrusted.

    With a ``transcript``, also ``shown``, the exact text the model received, and ``expanded``, what it stands for."""
    rows = []
    doubted = distrusted(state)
    for a in state.attempts:
        extra: dict[str, Any] = {}
        if transcript is not None:
            try:
                expanded = transcript.expanded(a) if a.executed or a.answer_kind == "reused" else None
            except ExpandError as e:
                expanded = None
                extra["expand_error"] = str(e)
            extra.update(shown=transcript.shown(a), expanded=expanded)
        rows.append(
            {
                "attempt": a.id,
                "step": a.step,
                "verdict": a.verdict.kind.value,
                "rule": a.verdict.rule,
                "applied": a.applied,
                "reason": a.verdict.reason,
                "ref_step": a.verdict.ref_step,
                "class": a.command_class.value,
                "command": a.command,
                "executed": a.executed,
                "exit_code": a.exit_code,
                "output_chars": a.output_chars,
                "shown_chars": a.shown_chars,
                "answer": a.answer_kind,
                "duration_s": a.duration_s,
                "files_changed": [_display(m.path, state) for m in state.modifications_of_attempt(a.id)],
                "distrusted": doubted.get(a.id),
                **({"exception": a.exception} if a.exception else {}),  # interrupted, or could not start: why
                "agent": a.agent or None,  # a subagent's call: the subagent's name for itself
                **extra,
            }
        )
    return rows


REFERENCING = ("whole", "spans", "delta", "reused")


def notes(state: LedgerState, step: int | None = None) -> list[dict[str, Any]]:
    """The state view's notes the model was sent, each with the step it followed and its text; ``step`` filters them."""
    return [
        {"step": i.get("step"), "event": i.get("event"), "chars": i.get("chars"), "text": i.get("text")}
        for i in state.injections
        if step is None or i.get("step") == step
    ]


def note_rows(state: LedgerState) -> dict[int, list[dict[str, Any]]]:
    """The notes by the step they were sent after, which a timeline shows after that step's commands."""
    out: dict[int, list[dict[str, Any]]] = {}
    for n in notes(state):
        if isinstance(n["step"], int):
            out.setdefault(n["step"], []).append(n)
    return out


def outputs_at(loaded: Loaded, step: int) -> list[tuple[Any, str | None, str | None]]:
    """The attempts of ``step``, each with the exact text the model received and its expansion."""
    t = loaded.transcript()
    out = []
    for a in loaded.state.attempts:
        if a.step != step:
            continue
        try:
            expanded = t.expanded(a)
        except ExpandError as e:
            expanded = f"(this answer does not expand: {e})"
        out.append((a, t.shown(a), expanded))
    return out


def unified_diff(loaded: Loaded, before_hash: str | None, after_hash: str | None, name: str = "") -> str | None:
    """A file's change as unified-diff text; None when the ledger did not keep both contents."""
    before = "" if before_hash is None else loaded.text(before_hash)
    after = "" if after_hash is None else loaded.text(after_hash)
    if before is None or after is None:
        return None
    a, b = (f"a/{name}", f"b/{name}") if name else ("before", "after")
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        for line in difflib.unified_diff(before.splitlines(True), after.splitlines(True), a, b, n=2)
    )


def changes(loaded: Loaded, mods: Iterable[Any]) -> list[dict[str, Any]]:
    """Modifications as plain data, each with its diff (None: the ledger did not keep the contents)."""
    return [
        {
            "path": _display(m.path, loaded.state),
            "change": m.change,
            "step": m.step,
            "added": m.lines_added,
            "removed": m.lines_removed,
            "recognised": m.recognised,
            "diff": unified_diff(loaded, m.before_hash, m.after_hash, _display(m.path, loaded.state)),
        }
        for m in mods
    ]


def _visible_counter(state: LedgerState):
    """How many characters of an n-character text the model sees after the agent cuts it, by the run's settings."""
    cfg = state.run.get("config")
    default = LedgerConfig().truncation
    got = {
        name: v if _number(v := (cfg.get(name, fallback) if isinstance(cfg, dict) else fallback)) else fallback
        for name, fallback in (
            ("output_limit_chars", default.limit_chars),
            ("output_head_chars", default.head_chars),
            ("output_tail_chars", default.tail_chars),
        )
    }
    limit, kept = got["output_limit_chars"], got["output_head_chars"] + got["output_tail_chars"]
    return lambda n: n if n < limit else min(n, kept)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def summary(state: LedgerState) -> dict[str, Any]:
    """Totals: verdicts, answers and what they spared, files changed since the start, faults, model calls."""
    verdicts = Counter(a.verdict.kind.value for a in state.attempts)
    applied = [a for a in state.attempts if a.applied]
    reused = [a for a in applied if a.verdict.kind is VerdictKind.REUSE]
    deduped = [a for a in applied if a.answer_kind in REFERENCING]
    seen = _visible_counter(state)
    # net (the references cost too), and of what the model sees: a cut output counts as its kept part
    spared_chars = sum(seen(a.output_chars) - seen(a.shown_chars) for a in deduped)
    shadow = [a for a in state.attempts if not a.applied and a.answer_kind in REFERENCING]
    answers = Counter(a.answer_kind for a in state.attempts)
    changed = []
    for m in state.changed_files():
        first = state.modifications_of(m.path)[0]
        changed.append(
            {
                "path": _display(m.path, state),
                "change": "deleted"
                if m.after_hash is None
                else ("created" if first.before_hash is None else "modified"),
                "added": m.baseline_added,
                "removed": m.baseline_removed,
                "last_step": m.step,
            }
        )
    b = state.baseline
    return {
        "workdir": b.root if b else None,
        "head_commit": b.head_commit if b else None,
        "task": b.task if b else "",
        "steps": state.step,
        "attempts": len(state.attempts),
        "executed": sum(1 for a in state.attempts if a.executed),
        "verdicts": dict(sorted(verdicts.items())),
        "classes": dict(sorted(Counter(a.command_class.value for a in state.attempts).items())),
        "answers": dict(sorted(answers.items())),
        "reused": len(reused),
        "nudged": sum(1 for a in applied if a.verdict.kind is VerdictKind.NUDGE),
        "not_executed": sum(1 for a in state.attempts if not a.executed),
        "chars_spared": spared_chars,
        "tokens_spared_estimate": (spared_chars + 3) // 4,
        "shadow_answers": len(shadow),
        "shadow_chars_spared": sum(seen(a.output_chars) - seen(a.shown_chars) for a in shadow),
        "observations": len(state.observations),
        "modifications": len(state.modifications),
        "files_changed": changed,
        "faults": len(state.faults),
        "distrusted": len(distrusted(state)),  # records the agent's own log says the model did not get
        # notes of the state view an agent keeps in its history (Codex's hook notes; a prompt view
        # like mini-swe-agent's is sent afresh each call and is not counted here)
        # the agent's model calls as its adapter recorded them (mini-swe-agent's); the cost is None
        # when any call's price was not known (never a $0 that was not billed as $0)
        "model_calls": state.model_calls,
        "model_cost": None if state.unpriced_calls or not state.model_calls else round(state.model_cost, 6),
        "model_calls_unpriced": state.unpriced_calls,
        "context_notes": len(state.injections),
        "context_note_chars": sum(i["chars"] for i in state.injections),
    }


def views_at(loaded: Loaded, steps: Iterable[int]) -> dict[int, str]:
    """``view_at`` for each of ``steps``, in one pass over the events where they come in step order.

    Otherwise each view is folded anew."""
    wanted = sorted(set(steps))
    events = loaded.events
    numbered = [e["step"] for e in events if e.get("step") is not None]
    if any(b < a for a, b in zip(numbered, numbered[1:])):
        return {s: view_at(loaded, s) for s in wanted}
    out: dict[int, str] = {}
    state = LedgerState()
    at = 0
    known: list[str | None] = []  # the rules in force: the same at every step once the run's root is known
    for s in wanted:
        while at < len(events) and (events[at].get("step") is None or events[at]["step"] <= s):
            state.apply(events[at])
            at += 1
        if not known and state.baseline is not None:
            known.append(_policies(loaded, state))
        policies = known[0] if known else _policies(loaded, state)
        out[s] = render(state, loaded.config.view, policies=policies).text
    return out


def _policies(loaded: Loaded, state: LedgerState) -> str | None:
    from ledger_runtime.decide.gate import PolicyError, build_rules, in_force
    from ledger_runtime.decide.policies import BUILTINS

    config = loaded.config
    try:
        rules = build_rules(config.policies.rules, state.baseline.root if state.baseline else "", BUILTINS)
    except PolicyError:
        rules = []
    return in_force(config, rules)


def _render_at(loaded: Loaded, state: LedgerState) -> str:
    return render(state, loaded.config.view, policies=_policies(loaded, state)).text


def view_at(loaded: Loaded, step: int | None) -> str:
    """The state view as it was at the end of ``step``, or of the last step when None."""
    state = loaded.state if step is None else LedgerState.from_events(loaded.events, until_step=step)
    return _render_at(loaded, state)


_STYLE = {"RUN": "white", "REUSE": "green", "NUDGE": "yellow", "REVISE": "magenta", "BLOCK": "red"}


FILE_CELL = 18  # the narrowest the files column gets: a file's name still shows
NARROWEST = 8  # the narrowest the files and commands get in a terminal too narrow for FILE_CELL


def _abbreviated(path: str, n: int) -> str:
    """``path`` in at most ``n`` characters, keeping its end, the file's name, and marking the cut "…"."""
    return path if len(path) <= n else "…" + path[-(n - 1) :]


def _widths(rows: list[dict[str, Any]], width: int) -> dict[str, int]:
    """Each column's width in a terminal ``width`` wide: paths up to a third of what is left, commands the rest."""
    out = {
        "step": max([len(str(r["step"])) for r in rows] + [len("step")]),
        "verdict": min(16, max([len(w) for r in rows for w in _verdict_text(r).split()] + [len("verdict")])),
        "class": max([len(r["class"]) for r in rows] + [len("class")]),
        "answer": max([len(r["answer"]) for r in rows] + [len("answer")]),
        "exit": max([len(str(r["exit_code"])) for r in rows] + [len("exit")]),
    }
    # the table's divider between the 7 columns; in a terminal too narrow for the files and commands at their
    # usual least, they give way (the verdicts, a column rich shrinks first, went from the timeline below 64)
    rest = max(width - sum(out.values()) - 6, 2 * NARROWEST)
    least = min(FILE_CELL, rest // 2)
    paths = [len(f) for r in rows for f in r["files_changed"]]
    out["files changed"] = min(max(paths), max(least, rest // 3)) if paths else min(len("files changed"), rest // 2)
    out["command"] = max(rest - out["files changed"], NARROWEST)
    return out


def _verdict_text(r: dict[str, Any]) -> str:
    text = r["verdict"] + (f" {r['rule']}" if r["rule"] else "") + ("" if r["applied"] else " (shadow)")
    return text + (" DISTRUSTED" if r.get("distrusted") else "")


def render_timeline(state: LedgerState, rows: list[dict[str, Any]] | None = None, width: int = 80) -> Table:
    """The timeline as a table for a terminal ``width`` columns wide, a command to a line, cut with "…" where needed."""
    rows = timeline(state) if rows is None else rows
    sent = note_rows(state)
    widths = _widths(rows, width)
    command_cell, file_cell = widths["command"], widths["files changed"]
    t = Table(title="Timeline", show_lines=False, expand=False, box=box.SIMPLE_HEAD, show_edge=False, padding=0)
    if not rows:
        t.caption = "no command is recorded in this ledger"
    for col in ("step", "verdict", "class", "answer", "command", "exit", "files changed"):
        t.add_column(
            col,
            justify="right" if col in ("step", "exit") else "left",
            no_wrap=col != "verdict",
            overflow="ellipsis",
            min_width=widths[col] if col != "command" else min(widths[col], len("command")),
            max_width=widths[col],
        )
    for r in rows:
        files = "\n".join(_abbreviated(f, file_cell) for f in r["files_changed"][:4]) + (
            f"\n+{len(r['files_changed']) - 4} more" if len(r["files_changed"]) > 4 else ""
        )
        t.add_row(  # commands and file names as text, never as markup
            str(r["step"]),
            Text(_verdict_text(r), style=_STYLE.get(r["verdict"], "")),
            r["class"],
            r["answer"],
            Text(short_command(("(subagent) " if r.get("agent") else "") + r["command"], command_cell)),
            "" if r["exit_code"] is None else str(r["exit_code"]),
            Text(files),
        )
        last = r is rows[-1] or rows[rows.index(r) + 1]["step"] != r["step"]
        for n in sent.get(r["step"], []) if last else ():  # what the model was told after the step
            first = next((ln for ln in (n["text"] or "").splitlines() if ln.strip() and ln.startswith("  ")), "")
            said = f"note, {n['chars']:,} characters" + (f": {first.strip()}" if first else "")
            t.add_row("", Text("NOTE", style="cyan"), "", "", Text(short_command(said, command_cell)), "", "")
    return t


def render_summary(s: dict[str, Any]) -> Group:
    t = Table(title="Summary", show_header=False)
    t.add_column("what")
    t.add_column("value", overflow="fold")
    t.add_row("workdir", Text(str(s["workdir"])))
    if s["head_commit"]:
        t.add_row("baseline commit", s["head_commit"][:12])
    t.add_row("steps / commands", f"{s['steps']} / {s['attempts']} ({s['executed']} executed)")
    t.add_row("verdicts", ", ".join(f"{k} {v}" for k, v in s["verdicts"].items()) or "none")
    t.add_row("answers", ", ".join(f"{k} {v}" for k, v in s["answers"].items()) or "none")
    if s["reused"]:  # a ledger from before REUSE meant only "not run" (an identical output is a whole answer)
        t.add_row("reused / nudged", f"{s['reused']} / {s['nudged']}")
    else:
        t.add_row("nudged", str(s["nudged"]))
    t.add_row("output spared", f"{s['chars_spared']:,} characters (~{s['tokens_spared_estimate']:,} tokens)")
    if s["shadow_answers"]:
        t.add_row(
            "shadow answers",
            f"{s['shadow_answers']} with references (would have spared {s['shadow_chars_spared']:,} characters)",
        )
    files = [
        f"{f['path']} ({f['change']}" + (f", +{f['added']} -{f['removed']}" if f["added"] is not None else "") + ")"
        for f in s["files_changed"]
    ]
    t.add_row("files changed", Text("\n".join(files) or "none"))
    if s.get("model_calls"):
        t.add_row("model calls / cost", f"{s['model_calls']} / {model_cost_text(s)}")
    if s["context_notes"]:
        t.add_row(
            "context notes", f"{s['context_notes']} ({s['context_note_chars']:,} characters in the agent's history)"
        )
    if s["faults"]:
        t.add_row("faults", Text(str(s["faults"]), style="red"))
    if s.get("distrusted"):
        t.add_row("distrusted", Text(f"{s['distrusted']} records the agent's own log disowns", style="red"))
    return Group(t)


def model_cost_text(s: dict[str, Any]) -> str:
    """The run's model cost as the summary says it: dollars, or unknown and why."""
    if s.get("model_cost") is not None:
        return f"${s['model_cost']:.4f}"
    unpriced = s.get("model_calls_unpriced") or 0
    return f"unknown ({unpriced} of {s.get('model_calls', 0)} calls to a model with no known price)"


def print_inspection(
    loaded: Loaded,
    console: Console,
    rows: list[dict[str, Any]] | None = None,
    shown: Callable[[Any], Any] = lambda data: data,
) -> None:
    """The timeline and the summary; ``shown`` escapes the characters a terminal would act on."""
    rows = shown(timeline(loaded.state) if rows is None else rows)
    console.print(render_timeline(loaded.state, rows, console.width))
    console.print(render_summary(shown(summary(loaded.state))))
