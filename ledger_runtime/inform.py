"""inform: the state view, a compact rendering of the ledger for the model's prompt.

``render(state, config)`` is pure: the same ledger renders to the same bytes. It shows the task
anchor, the files changed since the start (+/- lines), the files seen with their line ranges and
whether those views are still fresh (a stale one names the step that changed the file), the recent
commands with their exit status and whether their result still holds, and the last failing test or
script run. Over budget (tokens estimated as characters / 4) it drops the oldest seen files first,
then the oldest commands, then the oldest changed files, and says how many it left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledger_runtime.analysis.commands import RAW_ESCAPE
from ledger_runtime.analysis.display import short_command
from ledger_runtime.ledger.state import UNKNOWN, LedgerState
from ledger_runtime.records import Attempt, CommandClass, LineSpan, Modification, VerdictKind
from ledger_runtime.workspace.scanner import relative

if TYPE_CHECKING:
    from ledger_runtime.config import LedgerConfig

MAX_SPANS = 6  # line ranges listed per seen file (a grep -n over a long file can leave hundreds)

# how the state view is introduced where an adapter puts it into the prompt
VIEW_NOTE = "(Ledger runtime: current execution state; it replaces any earlier state view.)\n"


@dataclass(frozen=True)
class StateView:
    """The rendered view, its estimated size, and how many entries the budget left out."""

    text: str
    tokens: int
    omitted: int
    step: int


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def merge_spans(spans: list[LineSpan]) -> list[LineSpan]:
    out: list[LineSpan] = []
    for s in sorted(spans, key=lambda s: (s.start, s.end)):
        if out and s.start <= out[-1].end + 1:
            if s.end > out[-1].end:
                out[-1] = LineSpan(out[-1].start, s.end)
        else:
            out.append(s)
    return out


def _steps(steps: list[int]) -> str:
    u = sorted(set(steps))
    shown = ", ".join(str(s) for s in u[-3:])
    return ("step " if len(u) == 1 else "steps ") + ("…, " if len(u) > 3 else "") + shown


_CONTROL = {c: f"\\x{c:02x}" for c in range(32)} | {0x7F: "\\x7f", ord("\\"): "\\\\"}


def _display(path: str, state: LedgerState) -> str:
    """A path as the view shows it: relative to the workspace, control characters escaped (a file
    name with a newline must not be able to write lines of the view)."""
    shown = relative(path, state.baseline.root) if state.baseline else path
    return shown.translate(_CONTROL) if any(ord(c) < 32 or ord(c) == 0x7F for c in shown) else shown


ESCAPE_LINE = (
    "Answers: output you were already shown comes back as [ledger: ...] references to that step; "
    "end a command with `{escape}` to get its output in full."
)
_REFERENCING = ("whole", "spans", "delta")


def _changer(m: Modification, state: LedgerState) -> str:
    if m.attempt is None:
        return f"step {m.step}, outside any command"
    a = state.attempt(m.attempt)
    return f"step {m.step} by `{short_command(a.command, 40)}`" if a else f"step {m.step}"


def _changed_entries(state: LedgerState) -> list[tuple[int, str]]:
    out = []
    for m in state.changed_files():
        first = state.modifications_of(m.path)[0]
        created = first.before_hash is None
        if m.after_hash is None:
            what = "deleted"
        elif m.baseline_added is not None and m.baseline_removed is not None:
            what = ("created, " if created else "") + f"+{m.baseline_added} -{m.baseline_removed}"
        else:
            what = "created" if created else "changed"
        out.append((m.step, f"  {_display(m.path, state)}: {what} (last at step {m.step})"))
    out.sort(key=lambda e: (e[0], e[1]))
    return out


def _seen_entries(state: LedgerState) -> list[tuple[int, str]]:
    by_path: dict[str, list] = {}
    for o in state.observations:
        by_path.setdefault(o.path, []).append(o)
    out = []
    for path in sorted(by_path):
        obs = by_path[path]
        cur = state.current_hash(path)
        fresh = [o for o in obs if cur is UNKNOWN or o.content_hash == cur]
        last_step = max(o.step for o in obs)
        name = _display(path, state)
        if fresh:
            if any(o.spans is None for o in fresh):
                ranges = "whole file"
            else:
                spans = merge_spans([s for o in fresh for s in (o.spans or ())])
                shown = spans[:MAX_SPANS]
                ranges = ", ".join(f"lines {s}" if i == 0 else str(s) for i, s in enumerate(shown)) or "search matches"
                if len(spans) > MAX_SPANS:
                    ranges += f" and {len(spans) - MAX_SPANS} more ranges"
                if all(o.kind == "matches" for o in fresh) and not spans:
                    ranges = "search matches"
            note = ""
            if len(fresh) < len(obs):
                note = "; earlier views stale"
            out.append((last_step, f"  {name}: {ranges} ({_steps([o.step for o in fresh])}{note})"))
        else:
            newest = max(obs, key=lambda o: o.step)
            m = state.change_after(path, newest.step, newest.content_hash)
            why = f"changed at {_changer(m, state)}" if m else "changed since"
            if cur is None:
                why = f"deleted at step {m.step}" if m else "deleted"
            out.append((last_step, f"  {name}: STALE, {why}; seen at {_steps([o.step for o in obs])}"))
    return out


def result_holds(a: Attempt, state: LedgerState) -> tuple[bool, str]:
    """Whether an attempt's result still describes the workspace, and if not, why."""
    if a.command_class in (CommandClass.INSPECT, CommandClass.SEARCH) and a.pure:
        for key, sig in a.read_set.items():
            kind, path = key[:1], key[2:]
            if kind == "f":
                m = state.change_after(path, a.step + (0 if a.executed else 1), sig)
                if m is not None and (m.attempt != a.id):
                    return False, f"stale: {_display(path, state)} changed at step {m.step}"
            elif kind in ("d", "r"):
                prefix = path.rstrip("/") + "/"
                later = [
                    m
                    for m in state.modifications
                    if m.step > a.step and (m.path.startswith(prefix) or (kind == "d" and m.path == path))
                ]
                if later:
                    return False, f"stale: {_display(later[0].path, state)} changed at step {later[0].step}"
        return True, "holds"
    if a.epoch_after == state.epoch:
        return True, "holds: nothing changed since"
    later = [
        m
        for m in state.modifications
        if m.step > a.step or (m.step == a.step and m.attempt != a.id and m.attempt is not None and m.attempt > a.id)
    ]
    if later:
        return False, f"stale: {_display(later[0].path, state)} changed at step {later[0].step}"
    return False, "stale: files changed since"


def _attempt_line(a: Attempt, state: LedgerState) -> str:
    cmd = short_command(a.command)
    if a.verdict.kind is VerdictKind.REUSE and not a.executed:
        return f"  #{a.step} {cmd} -> not run again: reused step {a.verdict.ref_step}'s result"
    if a.verdict.kind in (VerdictKind.REVISE, VerdictKind.BLOCK) and not a.executed:
        rule = f" ({a.verdict.rule})" if a.verdict.rule else ""
        return f"  #{a.step} {cmd} -> {a.verdict.kind.value}{rule}, not run"
    status = "no exit code" if a.exit_code is None else f"exit {a.exit_code}"
    if a.exception:
        status += f", {a.exception.splitlines()[0][:60]}"
    mods = state.modifications_of_attempt(a.id)
    if a.command_class is CommandClass.MODIFY or mods:
        if mods:
            names = ", ".join(_display(m.path, state) for m in mods[:3]) + (
                f" +{len(mods) - 3} more" if len(mods) > 3 else ""
            )
            return f"  #{a.step} {cmd} -> {status}; changed {names}"
        if a.command_class is CommandClass.MODIFY:
            return f"  #{a.step} {cmd} -> {status}; changed no file"
    holds, why = result_holds(a, state)
    same = f"; same output as #{a.verdict.ref_step}" if a.verdict.kind is VerdictKind.REUSE else ""
    return f"  #{a.step} {cmd} -> {status}{same}; {'result holds' if holds else why}"


def _last_failing_run(state: LedgerState) -> str | None:
    for i in range(len(state.attempts) - 1, -1, -1):
        a = state.attempts[i]
        if a.command_class is CommandClass.RUN and a.executed and a.exit_code not in (0, None):
            fixed = next(
                (
                    b
                    for b in state.attempts[i + 1 :]
                    if b.executed and b.exit_code == 0 and (b.normalized, b.cwd) == (a.normalized, a.cwd)
                ),
                None,
            )
            if fixed is not None:
                verdict = f"since passed: the same command exited 0 at #{fixed.step}"
            else:
                holds, why = result_holds(a, state)
                verdict = (
                    "still holds: nothing changed since" if holds else why.replace("stale: ", "may no longer hold: ")
                )
            return f"Last failing run: #{a.step} {short_command(a.command)} (exit {a.exit_code}); {verdict}"
    return None


def _last_refusal(state: LedgerState) -> str | None:
    """The last REVISE or BLOCK, while nothing has changed since it."""
    for a in reversed(state.attempts):
        if a.verdict.kind in (VerdictKind.REVISE, VerdictKind.BLOCK) and a.applied:
            if a.epoch_before != state.epoch or a.env_epoch != state.env_epoch:
                return None
            reason = a.verdict.reason if len(a.verdict.reason) <= 240 else a.verdict.reason[:239] + "…"
            return f"Refused at #{a.step} ({a.verdict.kind.value}, {a.verdict.rule}): {reason}"
        if a.executed and a.step < state.step - 8:
            return None
    return None


def render(state: LedgerState, config: LedgerConfig, *, policies: str | None = None) -> StateView:
    """The state view of ``state`` under ``config.view_budget_tokens``."""
    head = [f'<ledger_state step="{state.step}">']
    task = (state.baseline.task if state.baseline else "").strip()
    if task:
        first = " ".join(task.split())
        head.append("Task: " + (first[:157] + "…" if len(first) > 160 else first))
    if policies:
        head.append("Policies: " + policies)
    if policies is not None and any(a.applied and (a.answer or {}).get("kind") in _REFERENCING for a in state.attempts):
        head.append(ESCAPE_LINE.format(escape=RAW_ESCAPE))
    changed = _changed_entries(state)
    seen = _seen_entries(state)
    attempts = (
        [(a.step, _attempt_line(a, state)) for a in state.attempts[-config.view_recent_attempts :]]
        if config.view_recent_attempts
        else []
    )
    failing = _last_failing_run(state)
    refused = _last_refusal(state)
    budget_chars = config.view_budget_tokens * 4
    omitted = 0

    def assemble() -> str:
        lines = list(head)
        if changed:
            lines.append(f"Changed since start ({len(changed)}):")
            lines += [t for _, t in changed]
        if seen:
            lines.append("Seen (fresh unless marked STALE):")
            lines += [t for _, t in seen]
        if attempts:
            lines.append("Recent commands:")
            lines += [t for _, t in attempts]
        if failing:
            lines.append(failing)
        if refused:
            lines.append(refused)
        if omitted:
            lines.append(f"({omitted} older entries left out to stay within {config.view_budget_tokens} tokens)")
        if len(lines) == 1:
            lines.append("Nothing recorded yet.")
        lines.append("</ledger_state>")
        return "\n".join(lines)

    text = assemble()
    while len(text) > budget_chars and (seen or attempts or changed):
        for entries in (seen, attempts, changed):
            if entries:
                oldest = min(range(len(entries)), key=lambda i: entries[i][0])
                entries.pop(oldest)
                omitted += 1
                break
        text = assemble()
    if len(text) > budget_chars:  # the fixed parts alone are too long: cut, never overflow
        text = text[: budget_chars - 20].rstrip() + "\n…</ledger_state>"
    return StateView(text, estimate_tokens(text), omitted, state.step)


def _is_header(line: str) -> bool:
    return not line.startswith(" ") and line.endswith(":")


def view_delta(view: StateView, shown: set[str], limit_chars: int) -> tuple[str, set[str]]:
    """The lines of ``view`` the agent has not been shown (``shown``: lines it was given before),
    under their section headers, as a short note of at most ``limit_chars`` characters; for agents
    whose context notes pile up in their history, where the whole view each time would not do.
    Returns the note ("" when nothing is new) and the lines it showed. Lines that did not fit are
    not marked shown, so a later note carries them."""
    body = view.text.splitlines()[1:-1]  # between <ledger_state> and </ledger_state>
    head, tail = f'<ledger_update step="{view.step}">', "</ledger_update>"
    more = "({} more new lines, left for a later update)"
    budget = limit_chars - len(head) - len(tail) - 2 - len(more.format(9999)) - 1
    out: list[str] = []
    showed: set[str] = set()
    header = None
    header_out = False
    left = 0
    for line in body:
        if _is_header(line):
            header, header_out = line, False
            continue
        if line in shown or line.startswith("(") and line.endswith("tokens)"):
            continue
        add = ([header] if header is not None and not header_out else []) + [short_line(line)]
        cost = sum(len(a) + 1 for a in add)
        if cost > budget:
            left += 1
            continue
        budget -= cost
        out += add
        header_out = True
        showed.add(line)
    if not out:
        return "", showed
    if left:
        out.append(more.format(left))
    return "\n".join([head, *out, tail]), showed


def short_line(line: str, limit: int = 160) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"
