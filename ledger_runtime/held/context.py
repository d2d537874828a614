"""Context by validity: which earlier outputs in an agent's history are sent to the model (docs/context.md).

Only the copy sent changes. ``full`` sends all; ``window:M``, the masking baseline (Lindenbauer et al., "The Complexity
Trap", 2025), sends older outputs as a placeholder; ``validity`` stubs an output with nothing both still true and shown
nowhere later; ``validity+window:M`` keeps only such lines of older outputs. The latest output, and any a sent output
refers to, is kept.

``treatments`` is recomputed from the whole history at every call, since a line shown later is shown nowhere once that
later output goes. ``RewriteSchedule`` keeps the cached prefix: what must come back comes at once, what may go waits
until it pays. ``stub_holds`` checks a stub's claims independently of ``treatments``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

from ledger_runtime.section import TEXT, Section, integer, number, setting

KEEP, STUB, PART = "keep", "stub", "part"


class ContextError(ValueError):
    """A ``context`` setting that is not a policy; the message says which are."""


@dataclass(frozen=True)
class ContextPolicy:
    """What of the history is sent."""

    validity: bool = False
    window: int = 0  # keep the last ``window`` outputs whole (0: no window)

    @classmethod
    def parse(cls, text: str) -> ContextPolicy:
        t = (text or "").strip().lower()
        if t == "full":
            return cls()
        if t == "validity":
            return cls(validity=True)
        for prefix, validity in (("window:", False), ("validity+window:", True)):
            if t.startswith(prefix):
                try:
                    m = int(t[len(prefix) :])
                except ValueError:
                    m = 0
                if m < 1:
                    raise ContextError(f"context {text!r}: the window must be a whole number of outputs, 1 or more")
                return cls(validity=validity, window=m)
        raise ContextError(f"context must be full, window:M, validity or validity+window:M, not {text!r}")

    @property
    def name(self) -> str:
        if self.validity:
            return f"validity+window:{self.window}" if self.window else "validity"
        return f"window:{self.window}" if self.window else "full"

    @property
    def full(self) -> bool:
        return not self.validity and not self.window


@dataclass(frozen=True)
class ContextSettings(Section):
    """The ``[ledger.context]`` settings: what of the agent's earlier outputs and the state view's notes is sent."""

    name = "context"
    flat = {
        "context": "policy",
        "context_steps": "steps",
        "context_note_chars": "note_chars",
        "view_share": "view_share",
    }

    policy: str = setting("full", TEXT)
    """What of the agent's earlier outputs is sent to the model (the agent's history is not changed):
    "full"; "window:M" (outputs older than the last M become a placeholder: the masking baseline);
    "validity" (an output with nothing both still true and shown nowhere later becomes a one-line
    stub); "validity+window:M" (older than the last M: only such lines are kept). See docs/context.md."""
    steps: int = setting(0, integer(0))
    """How many recent steps' outputs the model still has (0: all of them). Set by adapters whose
    agent drops old history."""
    note_chars: int = setting(600, integer(1))
    """The longest note of the state view (notes stay where they were sent: mini-swe-agent's copy of
    the history sent to its model, Codex's own history); what does not fit goes into the next note."""
    view_share: float = setting(0.5, number(at_least=0, infinite=True))
    """The notes of the state view the model holds take at most this share of the characters the
    answers spared it so far (references, diffs), so that the ledger never makes a run dearer than
    the same run without it; ``inf``: no such bound. See docs/context.md."""

    def validate(self) -> None:
        try:
            object.__setattr__(self, "_parsed", ContextPolicy.parse(self.policy))
        except ContextError as e:
            raise self.refuse("policy", str(e)) from None

    @property
    def parsed(self) -> ContextPolicy:
        """The ``policy`` setting, parsed once with the check."""
        return self._parsed  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Line:
    """One output line the model got literally; a checked view's file line also has ``path``, ``number`` and text."""

    text: str
    path: str | None = None
    number: int | None = None
    was: str = ""

    @property
    def blank(self) -> bool:
        return not self.text.strip()

    @property
    def is_file(self) -> bool:
        return self.path is not None and self.number is not None

    @property
    def fact(self) -> tuple:
        """What the line tells: that file line with that text, or else its text."""
        return ("file", self.path, self.number, self.was) if self.is_file else ("text", self.text)


@dataclass(frozen=True)
class HistoryOutput:
    """One earlier output at one call, as the policy decides on it; made by ``Held.history``."""

    index: int  # its position among the outputs of the history, oldest first
    attempt: int | None  # the ledger's attempt (None: an output the ledger did not answer)
    label: str  # "step 7"
    command: str  # the command, short
    key: str | None  # identifies runs of the same command (cwd and normalized text); None: none
    supersedable: bool  # a later run of it says what it prints now (not an edit, not an env change)
    lines: tuple[Line, ...]  # its lines the model got literally
    refs: tuple[int, ...] = ()  # attempts its references point at
    chars: int = 0  # its size as sent whole


@dataclass(frozen=True)
class Stub:
    """Why an output, or with ``kept`` all but those lines, is left out."""

    stale: int = 0  # file lines whose file has other text there now
    later: bool = False  # other lines of it are shown again by outputs sent after it
    superseded_by: str | None = None  # label of a later run of the same command
    window: int = 0  # window:M: older than the last M (nothing else was looked at)

    def reason(self) -> str:
        if self.window:
            return f"older than the last {self.window} outputs"
        parts = []
        if self.stale:  # no count: more of its lines may change, and "3 lines changed" would stop being true
            parts.append("lines of it changed since")
        if self.later:
            parts.append("the rest shown again later" if parts else "shown again later")
        if self.superseded_by:
            parts.append(f"superseded by {self.superseded_by} (the same command)")
        return "; ".join(parts) or "nothing but blank lines"


class Treatment(NamedTuple):
    kind: str  # KEEP, STUB or PART
    stub: Stub | None = None
    kept: tuple[int, ...] = ()  # PART: the indexes of the lines kept

    def keeps(self, i: int) -> bool:
        return self.kind == KEEP or (self.kind == PART and i in self.kept)


StillTrue = Callable[[Line], bool]


def treatments(saids: Sequence[HistoryOutput], policy: ContextPolicy, still_true: StillTrue) -> list[Treatment]:  # noqa: C901
    """How each earlier output is sent under ``policy``, oldest first."""
    n = len(saids)
    out: list[Treatment] = [Treatment(KEEP)] * n
    if policy.full:
        return out
    recent_from = n - policy.window if policy.window else n
    if not policy.validity:  # by age; but an output a kept later one refers to is kept: it stands for it
        needed_by: set[int] = set()
        for j in range(n - 1, -1, -1):
            s = saids[j]
            if s.index >= recent_from or s.attempt in needed_by:
                needed_by.update(s.refs)
            else:
                out[j] = Treatment(STUB, Stub(window=policy.window))
        return out
    later: set[tuple] = set()  # what the outputs sent after this one tell (Line.fact)
    later_runs: dict[str, str] = {}  # command key -> label of a later run still sent
    needed: set[int] = set()  # attempts later outputs refer to
    for j in range(n - 1, -1, -1):
        s = saids[j]
        if j == n - 1 or s.attempt is None or s.attempt in needed or (policy.window and j >= recent_from):
            t = Treatment(KEEP)
        else:
            t = _judge(
                s, still_true, later, later_runs.get(s.key) if s.supersedable else None, partial=bool(policy.window)
            )
            if t.kind != KEEP and s.chars and len(stub_text(s, t)) >= s.chars:
                t = Treatment(KEEP)  # a stub no shorter than the output saves nothing
        out[j] = t
        if t.kind != STUB:
            later.update(sent_facts(s, t))
            if t.kind == KEEP:
                needed.update(s.refs)
                if s.key is not None:
                    later_runs.setdefault(s.key, s.label)
    return out


def sent_facts(s: HistoryOutput, t: Treatment) -> set[tuple]:
    """What the lines of ``s`` that ``t`` sends tell; blank lines tell nothing."""
    return {line.fact for i, line in enumerate(s.lines) if t.keeps(i) and not line.blank}


def _judge(
    s: HistoryOutput, still_true: StillTrue, later: set[tuple], superseded_by: str | None, partial: bool
) -> Treatment:
    stale = 0
    shown_later = False
    unique: list[int] = []
    for i, line in enumerate(s.lines):
        if line.blank:
            continue
        if line.is_file and not still_true(line):
            stale += 1
            continue
        if line.fact in later:
            shown_later = True
        elif line.is_file or superseded_by is None:  # else: the command prints something else now
            unique.append(i)
    if unique and not partial:
        return Treatment(KEEP)
    stub = Stub(stale, shown_later, superseded_by)
    if unique:
        return Treatment(PART, stub, tuple(unique))
    return Treatment(STUB, stub)


def stub_holds(
    s: HistoryOutput, t: Treatment, after: Sequence[tuple[HistoryOutput, Treatment]], still_true: StillTrue
) -> bool:
    """Whether what a stub or partial output says of ``s`` is true of the outputs sent after it.

    Each kept line still holds. Each line left out is blank, changed in its file, shown again later, or a non-file line
    superseded by a later run sent whole; each is covered by a reason the stub gives, and each reason holds of some
    line."""
    shown = set().union(*(sent_facts(a, ta) for a, ta in after))
    runs = [(a.label, ta.kind) for a, ta in after if s.key is not None and a.key == s.key]
    return _stub_holds(s, t, shown, runs, still_true)


def _stub_holds(
    s: HistoryOutput, t: Treatment, shown: set[tuple], runs: Sequence[tuple[str, str]], still_true: StillTrue
) -> bool:
    """``stub_holds``, given the facts the later outputs show as sent and the later runs of the same command."""
    if t.kind == KEEP or t.stub is None:
        return True
    if t.stub.window:
        return True  # the baseline says only how old it is
    rerun = s.supersedable and any(kind == KEEP for _, kind in runs)
    if t.kind == PART and not _kept_hold(s, t, rerun, still_true):
        return False
    sup = t.stub.superseded_by
    if sup is not None and (not rerun or not any(label == sup for label, _ in runs)):
        return False
    stale = later = 0
    for i, line in enumerate(s.lines):
        if t.keeps(i) or line.blank:
            continue
        changed, again = line.is_file and not still_true(line), line.fact in shown
        stale += changed
        later += again
        # each line left out is covered by a reason it gives: "lines of it changed since", "shown again
        # later", "superseded by" (of a line that is no file line); none given: "nothing but blank lines"
        if not ((changed and t.stub.stale) or (again and t.stub.later) or (sup is not None and not line.is_file)):
            return False
    return (stale > 0 or not t.stub.stale) and (later > 0 or not t.stub.later)  # and each reason it gives is so


def checked(
    saids: Sequence[HistoryOutput], treatments: Sequence[Treatment], still_true: StillTrue
) -> tuple[list[Treatment], list[str]]:
    """``treatments`` with every stub whose claims do not hold sent whole instead, and why each was.

    The last check before the model reads them, apart from what decided them, newest first so what follows is final."""
    out = list(treatments)
    refused: list[str] = []
    shown: set[tuple] = set()
    runs: dict[str, list[tuple[str, str]]] = {}
    for j in range(len(saids) - 1, -1, -1):
        s, t = saids[j], out[j]
        if t.kind != KEEP and not _stub_holds(s, t, shown, runs.get(s.key, []) if s.key else [], still_true):
            refused.append(f"{s.label}'s output: {stub_text(s, t).splitlines()[0]} does not hold")
            out[j] = t = Treatment(KEEP)
        shown |= sent_facts(s, t)
        if s.key is not None:
            runs.setdefault(s.key, []).append((s.label, t.kind))
    return out, refused


def _kept_hold(s: HistoryOutput, t: Treatment, rerun: bool, still_true: StillTrue) -> bool:
    """Whether each line a partial output keeps still holds, as ``stub_holds`` says."""
    for i in t.kept:
        line = s.lines[i]
        if (line.is_file and not still_true(line)) or (not line.is_file and rerun):
            return False
    return True


def valid_unique_dropped(
    saids: Sequence[HistoryOutput], treatments: Sequence[Treatment], still_true: StillTrue
) -> list[tuple[int, int]]:
    """The (output, line) indexes left out though still true and shown nowhere later: lines the model lost.

    Computed from what is sent, whatever decided it."""
    later: set[tuple] = set()
    later_runs: set[str] = set()
    lost: list[tuple[int, int]] = []
    for j in range(len(saids) - 1, -1, -1):
        s, t = saids[j], treatments[j]
        superseded = s.supersedable and s.key is not None and s.key in later_runs
        for i, line in enumerate(s.lines):
            if t.keeps(i) or line.blank or line.fact in later:
                continue
            if still_true(line) if line.is_file else not superseded:
                lost.append((s.index, i))
        later |= sent_facts(s, t)
        if t.kind == KEEP and s.key is not None:
            later_runs.add(s.key)
    return lost


# -- what is sent -----------------------------------------------------------------------------------


def to_send(
    saids: Sequence[HistoryOutput],
    policy: ContextPolicy,
    still_true: StillTrue,
    sticky: RewriteSchedule,
    texts: Sequence[str],
    positions: Sequence[int],
    refused: list[str] | None = None,
) -> list[Treatment]:
    """How each output is sent at this call: ``treatments`` applied through ``sticky``, then ``checked``.

    ``refused`` gets why a stub was sent whole; ``positions`` says where among ``texts`` each output stands."""
    desired = treatments(saids, policy, still_true)
    if policy.full:
        return desired
    suffix = [0] * (len(texts) + 1)
    for k in range(len(texts) - 1, -1, -1):
        suffix[k] = suffix[k + 1] + len(texts[k])

    def size(s: HistoryOutput, t: Treatment) -> int:
        return s.chars if t.kind == KEEP else len(stub_text(s, t, texts[positions[s.index]].count("\n") + 1))

    applied = sticky.apply(desired, saids, [suffix[k] for k in positions], size, still_true)
    sent, wrong = checked(saids, applied, still_true)
    if wrong:
        sticky.applied.update((s.index, t) for s, t in zip(saids, sent))  # what was sent, as sent
        if refused is not None:
            refused.extend(wrong)
    return sent


def placeholder(lines: int) -> str:
    """The masking baseline's text for an output of ``lines`` lines left out, as in the Complexity Trap's runs."""
    return f"Old environment output: ({lines} lines omitted)"


def stub_text(s: HistoryOutput, t: Treatment, lines: int | None = None) -> str:
    """What the model gets in place of an output, or its part, left out; ``lines`` sizes the baseline's placeholder."""
    assert t.stub is not None
    if t.stub.window:
        return placeholder(len(s.lines) if lines is None else lines)
    if t.kind == STUB:
        return f"[ledger: {s.label}'s output (`{s.command}`) left out: {t.stub.reason()}]"
    head = (
        f"[ledger: {s.label}'s output (`{s.command}`), only its lines that still hold and are shown nowhere "
        f"later; the rest left out: {t.stub.reason()}]\n"
    )
    body = []
    for i in t.kept:
        line = s.lines[i]
        text = line.text if line.text.endswith("\n") else line.text + "\n"
        if line.is_file:
            was = line.was if line.was.endswith("\n") else line.was + "\n"
            body.append(f"{line.path}:{line.number}: {was}")
        else:
            body.append(text)
    return head + "".join(body)


@dataclass
class RewriteSchedule:
    """Applies decisions so the prompt's cached prefix stays; the ratios are prices over an uncached input token.

    ``cache_ratio`` is a cached token's (gpt-5-mini: 0.1), ``write_ratio`` a cache-written one's (Anthropic: 1.25;
    others: 1)."""

    cache_ratio: float = 0.1
    write_ratio: float = 1.0
    min_calls_ahead: int = 4
    applied: dict[int, Treatment] = field(default_factory=dict)  # output index -> what was sent last
    calls: int = 0

    def apply(
        self,
        desired: Sequence[Treatment],
        saids: Sequence[HistoryOutput],
        after_chars: Sequence[int],
        sent_chars: Callable[[HistoryOutput, Treatment], int],
        still_true: StillTrue | None = None,
    ) -> list[Treatment]:
        """What to send at this call; a stub sent before whose claims no longer hold is replaced at once."""
        self.calls += 1
        now = [self.applied.get(s.index, Treatment(KEEP)) for s in saids]
        must = [
            j
            for j, (d, a) in enumerate(zip(desired, now))
            if _restores(d, a, len(saids[j].lines))
            or (
                d != a
                and a.kind != KEEP
                and still_true is not None
                and not stub_holds(saids[j], a, list(zip(saids[j + 1 :], desired[j + 1 :])), still_true)
            )
        ]
        may = [j for j, (d, a) in enumerate(zip(desired, now)) if j not in must and d != a]
        for j in must:
            now[j] = desired[j]
        if may:
            first_break = min(must) if must else len(saids)
            free = [j for j in may if j > first_break]  # after a break the cache is lost anyway
            costly = [j for j in may if j <= first_break]
            for j in free:
                now[j] = desired[j]
            if costly:
                saving = sum(sent_chars(saids[j], now[j]) - sent_chars(saids[j], desired[j]) for j in costly)
                lost = after_chars[min(costly)] - (after_chars[first_break] if first_break < len(saids) else 0)
                # the calls to come, unknown: a run goes on about as long again, but a rewrite that
                # does not pay back costs all that follows it, and one that waits only its saving of a
                # call: count on half of that
                ahead = max(self.min_calls_ahead, self.calls) / 2
                if rewrite_pays(saving, lost, ahead, self.cache_ratio, self.write_ratio):
                    for j in costly:
                        now[j] = desired[j]
        self.applied = {s.index: t for s, t in zip(saids, now)}
        return now


def rewrite_pays(saving: int, lost: int, calls_ahead: float, cache: float, write: float) -> bool:
    """Whether changing messages already sent pays for the prompt cache it breaks.

    ``saving``: characters the change takes out; ``lost``: characters from the first change to the prompt's end, which
    the cache no longer holds; ``calls_ahead``: the calls still to come; ``cache`` and ``write``: the prices of a cached
    and of a cache-written character over an uncached one. Kept, this call reads ``lost`` from the cache and every call
    to come pays for the saving's characters too (``saving * cache * calls_ahead``). Changed, this call writes what
    follows the change less the saving, and spares the saving at once. So it pays when ``saving * (write + cache *
    calls_ahead) >= lost * (write - cache)``."""
    return saving * (write + cache * calls_ahead) >= lost * (write - cache)


def _restores(desired: Treatment, applied: Treatment, n: int) -> bool:
    """Whether ``desired`` sends a line ``applied`` leaves out, which must then be sent at once."""
    return any(desired.keeps(i) and not applied.keeps(i) for i in range(n)) or (
        desired.kind == KEEP and applied.kind != KEEP
    )


__all__ = [
    "ContextPolicy",
    "ContextError",
    "Line",
    "HistoryOutput",
    "Stub",
    "Treatment",
    "RewriteSchedule",
    "rewrite_pays",
    "treatments",
    "to_send",
    "stub_holds",
    "valid_unique_dropped",
    "stub_text",
    "placeholder",
    "KEEP",
    "STUB",
    "PART",
]
