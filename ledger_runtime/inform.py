"""inform: the state view, a compact rendering of the ledger for the model's prompt.

``render`` is pure: the same ledger renders to the same bytes. It shows the task, the files changed and seen (a stale
view names the step that changed the file), the recent commands and whether their results hold, and the last failing
run. Over budget it drops the oldest seen files, then commands, then changed files, and says how many. A line whose
claim the records do not bear out (decide/claims.py) is left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

from ledger_runtime.analysis.commands import RAW_ESCAPE
from ledger_runtime.analysis.display import short_command
from ledger_runtime.decide.claims import entry_fails
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.lines import one_line
from ledger_runtime.records import Attempt, CommandClass, LineSpan, Modification, Observation, VerdictKind
from ledger_runtime.section import Section, integer, setting
from ledger_runtime.workspace.scanner import relative
from ledger_runtime.workspace.signatures import MISSING


@dataclass(frozen=True)
class ViewSettings(Section):
    """The ``[ledger.view]`` settings: how large the state view is."""

    name = "view"
    flat = {"view_budget_tokens": "budget_tokens", "view_recent_attempts": "recent_attempts"}

    budget_tokens: int = setting(1200, integer(1))
    """Budget of the state view, in tokens estimated as characters / 4."""
    recent_attempts: int = setting(8, integer(0))
    """How many recent commands the state view lists at most."""


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
    entries: tuple[ViewEntry, ...] = ()  # every line of it, unbudgeted (what notes are made of)
    refused: tuple[str, ...] = ()  # lines left out because the records do not bear them out: why each


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _steps(steps: list[int]) -> str:
    return _sorted_steps(sorted(set(steps)))


def _sorted_steps(u: Sequence[int]) -> str:
    """``_steps`` of steps sorted and once each: what a long run's view keeps, written without sorting them again."""
    shown = ", ".join(str(s) for s in u[-3:])
    return ("step " if len(u) == 1 else "steps ") + ("…, " if len(u) > 3 else "") + shown


def _display(path: str, state: LedgerState) -> str:
    """A path as the view shows it: relative to the workspace, control characters escaped so it cannot write lines."""
    shown = relative(path, state.baseline.root) if state.baseline else path
    return one_line(shown)


ESCAPE_LINE = (
    "Answers: output you were already shown comes back as [ledger: ...] references to that step; "
    "end a command with `{escape}` to get its output in full."
)
_REFERENCING = ("whole", "spans", "delta")


def _changer(m: Modification, state: LedgerState) -> str:
    if m.attempt is None:
        return f"step {m.step}, outside any command"
    a = state.attempt(m.attempt)
    if a is None:
        return f"step {m.step}"
    whose = "" if _told(a) else "a subagent's "  # as the command list names it: the model never ran it
    return f"step {m.step} by {whose}`{short_command(a.command, 40)}`"


@dataclass(frozen=True)
class ViewEntry:
    """One line of the view; ``told_by`` is the step whose own output told the model what it says, else it is news."""

    section: str
    key: tuple
    text: str
    order: int
    told_by: int | None = None
    quiet: bool = False  # news for a note only, not a line of the view (a file back as at the start)
    claim: tuple = ()  # what it says of the run, as decide/claims.py checks it against the records


CHANGED, SEEN, COMMANDS = "Changed since start", "Seen (fresh unless marked STALE)", "Recent commands"
# what the view says of a command whose reads it does not know: only whether the files it tracks changed
UNTOUCHED, TOUCHED = "no tracked file changed since", "may no longer hold"


def _changed_entries(state: LedgerState) -> list[ViewEntry]:
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
        told = _own(m, state)
        when = f"step {m.step}" if told is not None else _changer(m, state)  # whose change, where it is news
        text = f"  {_display(m.path, state)}: {what} (last at {when})"
        how = "deleted" if m.after_hash is None else "created" if created else "changed"
        claim = ("changed", m.path, how, m.step, m.attempt)
        out.append(ViewEntry(CHANGED, ("changed", m.path), text, m.step, told, claim=claim))
    for first, last in state.reverted_files():
        what = "removed again: it was not there at the start" if first.before_hash is None else "back as at the start"
        text = f"  {_display(last.path, state)}: {what} (step {last.step})"
        claim = ("changed", last.path, "back", last.step, last.attempt)
        out.append(
            ViewEntry(CHANGED, ("changed", last.path), text, last.step, _own(last, state), quiet=True, claim=claim)
        )
    out.sort(key=lambda e: (e.order, e.text))
    return out


def _seen_entries(state: LedgerState) -> list[ViewEntry]:
    """A line per file the model saw, remade only when its records change: a render costs files, not steps."""
    memo = state.view_memo.setdefault("seen", {})
    out = []
    for path in sorted(state.told_paths()):  # a subagent's reads showed the file to the subagent
        obs = state.told_observations_of(path)
        kept = memo.get(path)
        if kept is None or kept.changes != _changes(state, path, kept.targets) or _saw_other(kept, obs):
            kept = memo[path] = _Seen.of(state, path, kept.reads if kept is not None else None)
        elif kept.taken < len(obs):
            kept = memo[path] = kept.taking(state, path, obs[kept.taken :])
        out.append(kept.entry)
    return out


def _saw_other(kept: _Seen, obs: Sequence[Observation]) -> bool:
    """Whether a read not taken in yet saw what none before did, with no change recorded in between (one the ledger
    could not see): the line is made again from each content, as a fresh view of the records makes it."""
    seen = kept.reads.by_seen
    return any((o.content_hash, o.target, o.target_hash) not in seen for o in obs[kept.taken :])


def _changes(state: LedgerState, path: str, targets: tuple[str, ...]) -> tuple[int, ...]:
    """How many changes the ledger knows of a file and of the targets of the links it was read through."""
    return (len(state.modifications_of(path)), *(len(state.modifications_of(t)) for t in targets))


@dataclass
class _Reads:
    """The reads of one file the view has taken in, grouped by what they saw (the file's content, a link's target and
    its content): a read holds exactly when the others that saw the same do, so after a change of the file the view
    looks at each content it had, not at each read."""

    n: int = 0
    by_seen: dict[tuple, list[Observation]] = field(default_factory=dict)
    targets: set[str] = field(default_factory=set)
    steps: tuple[int, ...] = ()  # every read's step, sorted, once each
    newest: Observation | None = None  # the first read of the latest step

    def take(self, new: list[Observation]) -> None:
        for o in new:
            self.by_seen.setdefault((o.content_hash, o.target, o.target_hash), []).append(o)
            if o.target is not None:
                self.targets.add(o.target)
            if self.newest is None or o.step > self.newest.step:
                self.newest = o
        self.steps = _with_steps(self.steps, [o.step for o in new])
        self.n += len(new)


@dataclass(frozen=True)
class _Seen:
    """What the model's reads of one file add up to, and its line of the view.

    Taken in a read at a time while no change to the file is recorded, so a render costs the reads that are new, not
    every read of the run; made again when a change is (``changes``), from each content the reads saw (``_Reads``)."""

    taken: int  # the file's observations taken in, in the order the ledger holds them
    changes: tuple[int, ...]  # _changes() when they were
    targets: tuple[str, ...]  # the targets of links the file was read through, sorted
    fresh_steps: tuple[int, ...]  # the steps of the reads the model holds as the file is now, sorted, once each
    spans: tuple[tuple[int, int], ...]  # the lines those reads showed, merged; whole: one of them showed all of it
    whole: bool
    only_matches: bool  # every fresh read was a search
    stale: bool  # some read no longer holds
    last_step: int
    entry: ViewEntry
    reads: _Reads = field(default_factory=_Reads, compare=False)

    @classmethod
    def of(cls, state: LedgerState, path: str, reads: _Reads | None = None) -> _Seen:
        """The file's facts from all the model's reads (``reads``: those taken in before, kept)."""
        obs = state.told_observations_of(path)
        if reads is None or reads.n > len(obs):
            reads = _Reads()
        reads.take(obs[reads.n :])
        targets = tuple(sorted(reads.targets))
        fresh = [o for group in reads.by_seen.values() if state.is_fresh(group[0]) for o in group]
        facts = _Seen(
            len(obs),
            _changes(state, path, targets),
            targets,
            _with_steps((), [o.step for o in fresh]),
            _merged([(x.start, x.end) for o in fresh for x in (o.spans or ())]),
            any(o.spans is None for o in fresh),
            all(o.kind == "matches" for o in fresh),
            len(fresh) < len(obs),
            max(0, reads.newest.step) if reads.newest is not None else 0,
            _EMPTY,
            reads,
        )
        return replace(facts, entry=_seen_entry(state, path, facts))

    def taking(self, state: LedgerState, path: str, new: list[Observation]) -> _Seen:
        """These facts with the reads ``new`` taken in, and the file's line made again."""
        if self.taken and any(o.target is not None and o.target not in self.targets for o in new):
            return _Seen.of(state, path, self.reads)  # read through a link to another file: its changes count too
        self.reads.take(new)
        fresh = [o for o in new if state.is_fresh(o)]
        spans = list(self.spans) + [(x.start, x.end) for o in fresh for x in (o.spans or ())]
        facts = _Seen(
            self.taken + len(new),
            self.changes,
            self.targets,
            _with_steps(self.fresh_steps, [o.step for o in fresh]),
            _merged(spans),
            self.whole or any(o.spans is None for o in fresh),
            self.only_matches and all(o.kind == "matches" for o in fresh),
            self.stale or len(fresh) < len(new),
            max([self.last_step, *(o.step for o in new)]),
            _EMPTY,
            self.reads,
        )
        return replace(facts, entry=_seen_entry(state, path, facts))


def _with_steps(steps: tuple[int, ...], new: list[int]) -> tuple[int, ...]:
    """``steps`` (sorted, once each) with ``new`` in: appended where they all come after them, as a long run's reads do,
    so taking a read costs the reads that are new, not a sort of every read of the file."""
    add = sorted(set(new))
    if not add:
        return steps
    if not steps or add[0] > steps[-1]:
        return steps + tuple(add)
    return tuple(sorted(set(steps).union(add)))


def _merged(spans: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(set(spans)):
        if out and start <= out[-1][1] + 1:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return tuple(out)


_EMPTY = ViewEntry(SEEN, (), "", 0)


def _seen_entry(state: LedgerState, path: str, seen: _Seen) -> ViewEntry:
    """The line of one file the model saw: the lines it holds as they are now, or STALE and why."""
    name = _display(path, state)
    if seen.fresh_steps:
        if seen.whole:
            ranges = "whole file"
        else:
            shown = [str(LineSpan(a, b)) for a, b in seen.spans[:MAX_SPANS]]
            ranges = ", ".join(f"lines {s}" if i == 0 else s for i, s in enumerate(shown)) or "search matches"
            if len(seen.spans) > MAX_SPANS:
                ranges += f" and {len(seen.spans) - MAX_SPANS} more ranges"
            if seen.only_matches and not seen.spans:
                ranges = "search matches"
        note = "; earlier views stale" if seen.stale else ""
        # a fresh view the model has just read: the newest read told it so; fresh again after an
        # edit (a revert): that edit's own command, where it was one
        mods = state.modifications_of(path)
        told = seen.last_step if seen.fresh_steps[-1] == seen.last_step else _own(mods[-1] if mods else None, state)
        text = f"  {name}: {ranges} ({_sorted_steps(seen.fresh_steps)}{note})"
        claim = ("seen", path, seen.fresh_steps, None)
        return ViewEntry(SEEN, ("seen", path), text, seen.last_step, told, claim=claim)
    newest = seen.reads.newest
    m = state.staled_by(newest) if newest is not None else None
    why = f"changed at {_changer(m, state)}" if m else "changed since"
    if state.current_hash(path) is None:  # the change that matters is the deletion, not the first change after the view
        mods = state.modifications_of(path)
        m = mods[-1] if mods else m
        why = f"deleted at step {m.step}" if m else "deleted"
    text = f"  {name}: STALE, {why}; seen at {_sorted_steps(seen.reads.steps)}"
    return ViewEntry(
        SEEN, ("seen", path), text, seen.last_step, _own(m, state), claim=("seen", path, (), m.step if m else None)
    )


def result_holds(a: Attempt, state: LedgerState) -> tuple[bool, str]:
    """Whether an attempt's result still describes the workspace, and if not, why.

    A pure reader's read set is known; for any other command only whether a tracked file changed since."""
    holds, why, _ = _holds(a, state)
    return holds, why


def _known_reads(a: Attempt) -> bool:
    """Whether the ledger knows all an attempt's result depends on: a pure reader's read set, of files' contents only.

    Only those do its records of changes cover: a listing or a tree (``ls``, ``find``, ``grep -r``) takes in files
    git ignores and empty directories, stat data (``stat``, ``du``) modes and times, a read of no file (missing, or a
    directory) whether a directory is there, and none of these is a change the ledger records. A ``cd DIR`` counts
    where the command read a file there."""
    if a.command_class not in (CommandClass.INSPECT, CommandClass.SEARCH) or not a.pure:
        return False
    files = [k[2:] for k in a.read_set if k[:2] == "f:"]
    for key, sig in a.read_set.items():
        kind, path = key[:2], key[2:]
        if kind == "f:" and sig.startswith((MISSING, "dir:")):
            return False  # no file there: whether a directory is there (empty, or made with files) no record says
        if kind == "x:" and not any(f.startswith(path.rstrip("/") + "/") for f in files):
            return False
        if kind not in ("f:", "x:"):
            return False
    return True


def _holds(a: Attempt, state: LedgerState) -> tuple[bool, str, Modification | None]:
    """``result_holds``, and the change that ended it, if one is known."""
    if _known_reads(a):
        for key, sig in a.read_set.items():
            kind, path = key[:1], key[2:]
            if kind == "f":
                m = _read_changed(state, a, path, sig)
                if m is not None and (m.attempt != a.id):
                    return False, f"stale: {_display(path, state)} changed at step {m.step}", m
        return True, "holds", None
    if a.epoch_after == state.epoch:
        return True, UNTOUCHED, None
    later = [
        m
        for m in state.modifications_after(a.step)
        if m.step > a.step or (m.step == a.step and m.attempt != a.id and m.attempt is not None and m.attempt > a.id)
    ]
    if later:
        return False, f"{TOUCHED}: {_display(later[0].path, state)} changed at step {later[0].step}", later[0]
    return False, f"{TOUCHED}: tracked files changed since", None


def _read_changed(state: LedgerState, a: Attempt, path: str, sig: str) -> Modification | None:
    """The first change after ``a`` read ``path`` (signed ``sig``) that left it other than it read it: by ``sig``,
    but for a read through a link by what it saw (the link's own hash and its target's: ``sig`` has not the link's)."""
    seen = _link_seen(state.observations_of(path), a)
    if seen is not None:
        return state.staled_by(seen)  # the link, or the file it resolves to: a change of either is
    step = a.step + (0 if a.executed else 1)
    m = state.change_after(path, step, _file_digest(sig))
    digest, through, real = sig.partition("@")  # a file read through a link is signed with the file it resolved to
    t = state.change_after(real, step, _file_digest(digest)) if through else None
    return t if t is not None and (m is None or t.step < m.step) else m


def _link_seen(observations: Sequence[Observation], a: Attempt) -> Observation | None:
    """What attempt ``a`` saw of a file through a link, among the file's observations (in the order their attempts were
    numbered and recorded): looked for from the latest down to ``a``'s only, for a file read a thousand times is looked
    at on every render."""
    for o in reversed(observations):
        if o.attempt < a.id:
            return None
        if o.attempt == a.id and o.target is not None:
            return o
    return None


def _file_digest(sig: str) -> str | None:
    """A read set's signature of a file as a modification's digest: none where no file was there to read (missing, or
    a directory), as a deletion leaves it."""
    return None if sig.startswith((MISSING, "dir:")) else sig


def _own(m: Modification | None, state: LedgerState) -> int | None:
    """The step of a recognised edit's command, whose own result told the model what ``m`` means; else None (a
    subagent's edit too: its result told the subagent, not the model the notes are for)."""
    if m is None or not m.recognised or m.attempt is None:
        return None
    return m.step if _told(state.attempt(m.attempt)) else None


def _told(a: Attempt | None) -> bool:
    """Whether the attempt's own result went to the model the notes are for (not a subagent's call)."""
    return a is not None and not a.agent


def _named(a: Attempt) -> str:
    """A command as the view names it: a subagent's says so, wherever it is cited (the model never ran it)."""
    return short_command(a.command) if _told(a) else f"(a subagent's) {short_command(a.command)}"


def _attempt_entry(a: Attempt, state: LedgerState) -> ViewEntry:
    """A command's line: told by its own step while it says what its result said, news once that no longer holds.

    It is news too when the command changed files it was not asked to, as a script or formatter does."""
    cmd = _named(a)
    key = ("command", a.id)
    own = a.step if _told(a) else None  # the step whose own result told the model: never a subagent's
    if a.verdict.kind is VerdictKind.REUSE and not a.executed:
        text = f"  #{a.step} {cmd} -> not run again: reused step {a.verdict.ref_step}'s result"
        return ViewEntry(COMMANDS, key, text, a.step, own)
    if a.verdict.kind in (VerdictKind.REVISE, VerdictKind.BLOCK) and not a.executed:
        rule = f" ({a.verdict.rule})" if a.verdict.rule else ""
        return ViewEntry(COMMANDS, key, f"  #{a.step} {cmd} -> {a.verdict.kind.value}{rule}, not run", a.step, own)
    status = "no exit code" if a.exit_code is None else f"exit {a.exit_code}"
    if a.exception:
        status += f", {a.exception.splitlines()[0][:60]}"
    mods = state.modifications_of_attempt(a.id)
    if a.command_class is CommandClass.MODIFY or mods:
        if mods:
            names = ", ".join(_display(m.path, state) for m in mods[:3]) + (
                f" +{len(mods) - 3} more" if len(mods) > 3 else ""
            )
            told = own if all(m.recognised for m in mods) else None
            return ViewEntry(COMMANDS, key, f"  #{a.step} {cmd} -> {status}; changed {names}", a.step, told)
        if a.command_class is CommandClass.MODIFY:
            return ViewEntry(COMMANDS, key, f"  #{a.step} {cmd} -> {status}; changed no tracked file", a.step)
    holds, why, m = _holds(a, state)
    twin = _same_as(a, state)
    same = f"; same output as #{twin}" if twin is not None else ""
    verdict = ("result holds" if _known_reads(a) else why) if holds else why
    text = f"  #{a.step} {cmd} -> {status}{same}; {verdict}"
    claim = ("command", a.id, holds, m.path if m else None, m.step if m else None)
    return ViewEntry(COMMANDS, key, text, a.step, own if holds else None, claim=claim)


def _same_as(a: Attempt, state: LedgerState) -> int | None:
    """The step whose identical output ``a``'s ``whole`` answer referred to, if any."""
    if a.answer_kind != "whole":
        return None
    ref = next((p[3] for p in a.answer.pieces if p and p[0] == "same" and len(p) > 3), None)
    earlier = state.attempt(ref) if isinstance(ref, int) else None
    return earlier.step if earlier is not None else None


def _failing(a: Attempt) -> bool:
    return a.command_class is CommandClass.RUN and a.executed and a.exit_code not in (0, None)


def _fixes(b: Attempt, a: Attempt) -> bool:
    return b.executed and b.exit_code == 0 and (b.normalized, b.cwd) == (a.normalized, a.cwd)


def _last_failing(state: LedgerState) -> tuple[int | None, Attempt | None]:
    """The index of the last failing run and its later run that passed, looking at attempts since the last render."""
    n = len(state.attempts)
    memo = state.view_memo.get("failing")
    if memo is None or memo[0] != state.revision or memo[1] > n:
        memo = (state.revision, 0, None, None)
    _, scanned, index, fixed = memo
    for i in range(n - 1, scanned - 1, -1):  # a newer failure replaces the one kept
        if _failing(state.attempts[i]):
            index, fixed, scanned = i, None, i + 1
            break
    if index is not None and fixed is None:
        a = state.attempts[index]
        fixed = next((b for b in state.attempts[max(scanned, index + 1) :] if _fixes(b, a)), None)
    state.view_memo["failing"] = (state.revision, n, index, fixed)
    return index, fixed


def _referenced(state: LedgerState, as_applied: bool) -> bool:
    """Whether an answer so far referred to earlier output (one that took effect, unless ``as_applied``), folding in
    the attempts since the last render: a run with none (shadow mode) would look at every attempt at each render."""
    return state.fold_attempts(
        ("referenced", as_applied),
        False,
        lambda found, a: found or ((a.applied or as_applied) and a.answer_kind in _REFERENCING),
    )


def _last_failing_run(state: LedgerState) -> ViewEntry | None:
    i, fixed = _last_failing(state)
    if i is None:
        return None
    a = state.attempts[i]
    if fixed is not None:
        # a subagent's pass is said to be its own: the model never saw that run
        verdict = f"since passed: the same command exited 0 at #{fixed.step}" + (
            "" if _told(fixed) else ", a subagent's run"
        )
        told = fixed.step if _told(fixed) else None
    else:
        holds, why, m = _holds(a, state)
        verdict = why if not why.startswith("stale: ") else why.replace("stale: ", "may no longer hold: ")
        told = (a.step if _told(a) else None) if holds else _own(m, state)
    text = f"Last failing run: #{a.step} {_named(a)} (exit {a.exit_code}); {verdict}"
    return ViewEntry("", ("failing",), text, a.step, told)


def _last_refusal(state: LedgerState, as_applied: bool = False) -> ViewEntry | None:
    """The last REVISE or BLOCK, while nothing has changed since it."""
    for a in reversed(state.attempts):
        if a.verdict.kind in (VerdictKind.REVISE, VerdictKind.BLOCK) and (a.applied or as_applied):
            if a.epoch_before != state.epoch or a.env_epoch != state.env_epoch:
                return None
            reason = a.verdict.reason if len(a.verdict.reason) <= 240 else a.verdict.reason[:239] + "…"
            whose = "" if _told(a) else ", a subagent's command"
            text = f"Refused at #{a.step} ({a.verdict.kind.value}, {a.verdict.rule}{whose}): {reason}"
            return ViewEntry("", ("refused",), text, a.step, a.step if _told(a) else None)
        if a.executed and a.step < state.step - 8:
            return None
    return None


def view_entries(
    state: LedgerState,
    view: ViewSettings,
    *,
    policies: str | None = None,
    as_applied: bool = False,
) -> list[ViewEntry]:
    """Every line of the state view, unbudgeted, in order: head, changed and seen files, commands, last failure.

    ``as_applied``: the view of a run whose verdicts took effect, as a shadow replay's."""
    out: list[ViewEntry] = []
    task = (state.baseline.task if state.baseline else "").strip()
    if task:
        first = " ".join(task.split())
        out.append(ViewEntry("", ("task",), "Task: " + (first[:157] + "…" if len(first) > 160 else first), 0))
    if policies:
        out.append(ViewEntry("", ("policies",), "Policies: " + policies, 0))
    if policies is not None and _referenced(state, as_applied):
        out.append(ViewEntry("", ("answers",), ESCAPE_LINE.format(escape=RAW_ESCAPE), 0))
    out += _changed_entries(state)
    out += _seen_entries(state)
    recent = state.attempts[-view.recent_attempts :] if view.recent_attempts else []
    out += [_attempt_entry(a, state) for a in recent]
    for last in (_last_failing_run(state), _last_refusal(state, as_applied)):
        if last is not None:
            out.append(last)
    return out


def _assemble(open_tag: str, close_tag: str, entries: list[ViewEntry], tail: list[str]) -> str:
    """The lines of ``entries`` under their section headers, with a section's count where it has one."""
    lines = [open_tag]
    counts = {CHANGED: sum(e.section == CHANGED and not e.quiet for e in entries)}
    section = None
    for e in entries:
        if e.section and e.section != section:
            n = counts.get(e.section)
            lines.append(f"{e.section} ({n}):" if n else f"{e.section}:")
        section = e.section
        lines.append(e.text)
    lines += tail
    lines.append(close_tag)
    return "\n".join(lines)


def render(
    state: LedgerState,
    view: ViewSettings,
    *,
    policies: str | None = None,
    as_applied: bool = False,
) -> StateView:
    """The state view within ``view.budget_tokens``; its ``entries`` are every line, unbudgeted, for the notes."""
    every, refused = checked(view_entries(state, view, policies=policies, as_applied=as_applied), state)
    entries = [e for e in every if not e.quiet]
    budget_chars = view.budget_tokens * 4
    open_tag, close_tag = f'<ledger_state step="{state.step}">', "</ledger_state>"
    # what goes first when the view is over its budget: the oldest seen file, then command, then
    # changed file; the fewest dropped that fit (a binary search: the text shortens with each)
    droppable = (SEEN, COMMANDS, CHANGED)
    order = [
        i
        for section in droppable
        for i in sorted((i for i, e in enumerate(entries) if e.section == section), key=lambda i: entries[i].order)
    ]

    def assemble(omitted: int) -> str:
        gone = set(order[:omitted])
        kept = [e for i, e in enumerate(entries) if i not in gone]
        tail = [f"({omitted} older entries left out to stay within {view.budget_tokens} tokens)"] if omitted else []
        if not kept and not omitted:
            tail = ["Nothing recorded yet."]
        return _assemble(open_tag, close_tag, kept, tail)

    omitted = 0
    text = assemble(0)
    if len(text) > budget_chars and order:
        lo, hi = 1, len(order)  # assemble(hi) is the shortest there is
        while lo < hi:
            mid = (lo + hi) // 2
            if len(assemble(mid)) <= budget_chars:
                hi = mid
            else:
                lo = mid + 1
        omitted = lo
        text = assemble(omitted)
    if len(text) > budget_chars:  # the fixed parts alone are too long: cut, never overflow
        text = text[: budget_chars - 20].rstrip() + "\n…</ledger_state>"
    return StateView(text, estimate_tokens(text), omitted, state.step, every, refused)


def checked(entries: list[ViewEntry], state: LedgerState) -> tuple[tuple[ViewEntry, ...], tuple[str, ...]]:
    """The entries whose claims the records bear out, and why each other one is left out."""
    memo = state.view_memo.setdefault("claims", {})
    kept, refused = [], []
    for e in entries:
        if e.section == SEEN:
            hit = memo.get(e.key)
            if hit is None or hit[0] is not e:
                hit = memo[e.key] = (e, entry_fails(e.claim, state))
            why = hit[1]
        else:
            why = entry_fails(e.claim, state)
        if why is None:
            kept.append(e)
        else:
            refused.append(why)
    return tuple(kept), tuple(refused)
