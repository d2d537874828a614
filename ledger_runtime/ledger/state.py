"""LedgerState: the ledger's event log folded into queryable state.

The fold is pure, so the state at an earlier step is the fold of the events up to it. The modification log records every
change to a tracked file, so an observation is fresh while no later modification moved its file from the observed hash.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator, TypeVar

from ledger_runtime.ledger.event_fields import checked
from ledger_runtime.records import Attempt, Baseline, CommandClass, Modification, Observation, VerdictKind

T = TypeVar("T")

UNKNOWN = object()  # a path the ledger has no hash for
# events about what the model holds and was told: folded by the held room and the notes, not here
HELD_ONLY = frozenset({"lines", "told"})


@dataclass
class LedgerState:
    """Everything the ledger knows, indexed for govern and inform."""

    attempts: list[Attempt] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    modifications: list[Modification] = field(default_factory=list)
    baseline: Baseline | None = None
    run: dict[str, Any] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    # fields of events that were missing or of the wrong type (a crafted or damaged ledger), one line
    # each: folded with a value that says so (event_fields.py), never dropped
    damaged: list[str] = field(default_factory=list)
    # state-view text handed to the agent outside its prompt (hooks' context notes): event, chars
    injections: list[dict[str, Any]] = field(default_factory=list)
    # attempts whose record the agent's own log says the model did not get: attempt -> why
    distrusted: dict[int, str] = field(default_factory=dict)
    # the agent's model calls and their cost in dollars; a call whose price is not known adds to
    # unpriced_calls, never $0 to model_cost
    model_calls: int = 0
    model_cost: float = 0.0
    unpriced_calls: int = 0
    epoch: int = 0  # workspace changes so far
    env_epoch: int = 0  # environment changes so far (package installs, exports)
    step: int = 0
    context_floor: int = 0  # outputs of earlier steps are gone from the model's context (a compaction)
    _by_key: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    _obs_by_path: dict[str, list[Observation]] = field(default_factory=dict)
    _obs_by_target: dict[str, list[Observation]] = field(default_factory=dict)  # reads through a link, by its file
    _told_by_path: dict[str, list[Observation]] = field(default_factory=dict)  # the main model's own reads
    _mods_by_path: dict[str, list[Modification]] = field(default_factory=dict)
    _by_id: dict[int, Attempt] = field(default_factory=dict)
    _mods_by_attempt: dict[int, list[Modification]] = field(default_factory=dict)
    _reuse_sources: dict[int, int] = field(default_factory=dict)
    _labels: dict[int, str] = field(default_factory=dict)
    _by_label: dict[str, int] = field(default_factory=dict)
    _per_step: dict[int, int] = field(default_factory=dict)
    _mod_steps: list[int] = field(default_factory=list)  # modifications' steps, in order (nondecreasing)
    _ids_rise: bool = True  # the attempts are held in the order of their ids (a crafted ledger's may not be)
    revision: int = 0  # attempts changed in place so far (``complete``): what was derived from them may not hold
    # what the state view derived from this state, kept for the next render (inform.py's to fill)
    view_memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_events(cls, events: Iterable[dict[str, Any]], *, until_step: int | None = None) -> LedgerState:
        state = cls()
        for e in events:
            if until_step is not None and e.get("step") is not None and e["step"] > until_step:
                continue
            state.apply(e)
        return state

    def apply(self, event: dict[str, Any]) -> None:
        """Folds one event in, the one way anything enters the state; an unknown kind becomes a fault."""
        kind = event.get("kind")
        try:
            shadowed = event.get("shadowed")  # the record's own values under the event's names (an observation's kind)
            body = {**event, **shadowed} if isinstance(shadowed, dict) else event
            body, damaged = checked(kind, body)
            if damaged:
                self.damaged += damaged
            fold = FOLDS.get(kind) if isinstance(kind, str) else None
            if fold is not None:
                fold(self, body)
            elif kind not in HELD_ONLY:  # what the model holds and was told: held/held.py, prompt/notes.py
                self.faults.append({"message": f"unknown event kind {kind!r}", **event})
        except (KeyError, TypeError, ValueError, ArithmeticError) as e:  # ArithmeticError: int() of a damaged inf
            self.faults.append({"message": f"unreadable {kind} event {event.get('seq')}: {e}"})

    # -- one fold per event kind --------------------------------------------------------------------

    def _fold_attempt(self, body: dict[str, Any]) -> None:
        a = Attempt.from_dict(body)
        if a.id in self._by_id:  # a crafted ledger's: both kept, the id names the later one
            self.damaged.append(
                f"attempt event {body.get('seq')}: its id {a.id} is {self.label(a.id)}'s: "
                "kept, and references to the id read as this later attempt"
            )
        self._add_attempt(a)

    def _fold_observation(self, body: dict[str, Any]) -> None:
        self._add_observation(Observation.from_dict(body))

    def _fold_modification(self, body: dict[str, Any]) -> None:
        self._add_modification(Modification.from_dict(body), int(body.get("epoch", self.epoch + 1)))

    def _fold_baseline(self, body: dict[str, Any]) -> None:
        self.baseline = Baseline.from_dict(body)

    def _fold_run(self, body: dict[str, Any]) -> None:
        self.run = {k: v for k, v in body.items() if k not in ("seq", "kind", "step", "at", "shadowed")}

    def _fold_completion(self, body: dict[str, Any]) -> None:
        self._complete(int(body["attempt"]), body)

    def _fold_task(self, body: dict[str, Any]) -> None:
        if self.baseline is not None and not self.baseline.task:
            self.baseline = replace(self.baseline, task=str(body["task"]))

    def _fold_injection(self, body: dict[str, Any]) -> None:
        text = body.get("text")
        note = {"event": str(body["event"]), "chars": int(body["chars"]), "step": body.get("step")}
        self.injections.append({**note, **({"text": text} if isinstance(text, str) else {})})

    def _fold_model_call(self, body: dict[str, Any]) -> None:
        cost = body.get("cost")
        self.model_calls += 1
        if cost is None:
            self.unpriced_calls += 1
        else:
            self.model_cost += float(cost)

    def _fold_context(self, body: dict[str, Any]) -> None:
        self.context_floor = max(self.context_floor, int(body["from_step"]))

    def _fold_fault(self, body: dict[str, Any]) -> None:
        self.faults.append(body)

    def _fold_distrust(self, body: dict[str, Any]) -> None:
        """The agent's own log disowns the record; held/held.py folds this too."""
        self.distrusted.setdefault(int(body["attempt"]), str(body.get("why") or ""))

    # -- folding -------------------------------------------------------------------------------

    def _add_attempt(self, a: Attempt) -> None:
        self._ids_rise = self._ids_rise and (not self.attempts or a.id > self.attempts[-1].id)
        self.attempts.append(a)
        self._by_id[a.id] = a
        self._by_key.setdefault((a.normalized, a.cwd, a.agent), []).append(a.id)
        self.step = max(self.step, a.step)
        nth = self._per_step.get(a.step, 0) + 1
        self._per_step[a.step] = nth
        label = f"step {a.step}" + (f".{nth}" if nth > 1 else "")
        self._labels[a.id] = label
        self._by_label[label] = a.id
        if a.executed and a.command_class is CommandClass.ENV:
            self.env_epoch += 1
        if a.verdict.kind is VerdictKind.REUSE and a.verdict.ref_attempt is not None and not a.executed:
            # a run not run again stands for the run it reused; a command that ran is its own source
            self._reuse_sources[a.id] = self.source_of(a.verdict.ref_attempt)

    def _complete(self, attempt_id: int, fields: dict[str, Any]) -> None:
        """What a command left unfinished when recorded, known later."""
        old = self._by_id.get(attempt_id)
        if old is None:
            return
        new = replace(
            old,
            exit_code=fields.get("exit_code"),
            output_hash=fields.get("output_hash"),
            output_chars=int(fields.get("output_chars") or 0),
            output_complete=bool(fields.get("output_complete")),
            read_set_stable=bool(fields.get("read_set_stable", old.read_set_stable)),
            answer=replace(old.answer, altered=True) if fields.get("altered") and old.answer else old.answer,
        )
        self._by_id[attempt_id] = new
        self.revision += 1
        for i in range(len(self.attempts) - 1, -1, -1):
            if self.attempts[i].id == attempt_id:
                self.attempts[i] = new
                break

    def _add_observation(self, o: Observation) -> None:
        self.observations.append(o)
        self._obs_by_path.setdefault(o.path, []).append(o)
        by = self._by_id.get(o.attempt)
        if by is None or not by.agent:
            self._told_by_path.setdefault(o.path, []).append(o)
        if o.target is not None and o.target != o.path:
            self._obs_by_target.setdefault(o.target, []).append(o)

    def _add_modification(self, m: Modification, epoch: int) -> None:
        if self._mod_steps and m.step < self._mod_steps[-1]:
            self._mod_steps = []  # out of order (never so far): modifications_after looks at them all
        elif len(self._mod_steps) == len(self.modifications):
            self._mod_steps.append(m.step)
        self.modifications.append(m)
        self._mods_by_path.setdefault(m.path, []).append(m)
        if m.attempt is not None:
            self._mods_by_attempt.setdefault(m.attempt, []).append(m)
        self.epoch = max(self.epoch, epoch)

    # -- queries -------------------------------------------------------------------------------

    def attempt(self, attempt_id: int) -> Attempt | None:
        return self._by_id.get(attempt_id)

    def fold_attempts(self, key: Any, start: T, step: Callable[[T, Attempt], T]) -> T:
        """``step`` folded over the attempts from ``start``, kept in ``view_memo`` under ``key``: a later call folds in
        only the attempts added since, unless one was changed in place (``revision``), when it folds them all anew."""
        n = len(self.attempts)
        memo = self.view_memo.get(key)
        folded, value = (0, start) if memo is None or memo[0] != self.revision or memo[1] > n else memo[1:]
        for a in self.attempts[folded:]:
            value = step(value, a)
        self.view_memo[key] = (self.revision, n, value)
        return value

    @property
    def distinct_attempts(self) -> int:
        """How many attempt ids the ledger holds (fewer than ``attempts`` where two share one: a crafted ledger)."""
        return len(self._by_id)

    def label(self, attempt_id: int) -> str:
        """How answers name an attempt: "step 9" for step 9's first command, "step 9.2" for its second."""
        return self._labels.get(attempt_id, f"attempt {attempt_id}")

    def by_label(self, label: str) -> Attempt | None:
        i = self._by_label.get(label)
        return self._by_id.get(i) if i is not None else None

    def source_of(self, attempt_id: int) -> int:
        """The executed attempt behind a chain of reuses; itself when it ran."""
        return self._reuse_sources.get(attempt_id, attempt_id)

    def repeats_of(self, normalized: str, cwd: str, agent: str = "") -> Iterator[Attempt]:
        """Earlier attempts of the same command in the same directory by the same agent, newest first, as they are read.

        ``agent``: the subagent, as the agent names it ("": the main model); another's runs are not its repeats."""
        return (self._by_id[i] for i in reversed(self._by_key.get((normalized, cwd, agent), [])))

    def modifications_after(self, step: int) -> list[Modification]:
        """The modifications at ``step`` and after, in order."""
        if len(self._mod_steps) != len(self.modifications):
            return [m for m in self.modifications if m.step >= step]
        return self.modifications[bisect.bisect_left(self._mod_steps, step) :]

    def modifications_from(self, step: int) -> Iterator[Modification]:
        """``modifications_after`` one at a time: a caller that needs the first reads no further, nor copies the rest
        (a reference to a long run's first output asks whether anything changed since)."""
        mods = self.modifications
        if len(self._mod_steps) != len(mods):
            return (m for m in mods if m.step >= step)
        return (mods[k] for k in range(bisect.bisect_left(self._mod_steps, step), len(mods)))

    def attempts_after(self, attempt_id: int) -> list[Attempt]:
        """The attempts with a greater id than ``attempt_id``, in the order held."""
        if self._ids_rise:
            return self.attempts[bisect.bisect_right(self.attempts, attempt_id, key=lambda a: a.id) :]
        return [a for a in self.attempts if a.id > attempt_id]

    def observed_paths(self) -> Iterable[str]:
        return self._obs_by_path.keys()

    def observations_of(self, path: str) -> list[Observation]:
        return self._obs_by_path.get(path, [])

    def told_paths(self) -> Iterable[str]:
        """The paths the main model's own calls read (``told_observations_of``)."""
        return self._told_by_path.keys()

    def told_observations_of(self, path: str) -> list[Observation]:
        """The observations of ``path`` that the main model's own calls made, in order: what a subagent's call read
        showed the subagent, not the model the ledger answers (and the state view is for)."""
        return self._told_by_path.get(path, [])

    def reads_of(self, path: str) -> list[Observation]:
        """The observations of ``path``'s content, in step order: under its own name, and through a symbolic link
        that resolves to it (recorded under the link's name, ``target`` the file)."""
        through = self._obs_by_target.get(path)
        if not through:
            return self.observations_of(path)
        return sorted([*self.observations_of(path), *through], key=lambda o: o.step)

    def modifications_of(self, path: str) -> list[Modification]:
        return self._mods_by_path.get(path, [])

    def modifications_of_attempt(self, attempt_id: int) -> list[Modification]:
        return self._mods_by_attempt.get(attempt_id, [])

    def current_hash(self, path: str) -> object:
        """The path's latest known content hash (None: deleted), or UNKNOWN."""
        mods = self._mods_by_path.get(path)
        if mods:
            return mods[-1].after_hash
        obs = self._obs_by_path.get(path)
        return obs[-1].content_hash if obs else UNKNOWN

    def change_after(self, path: str, step: int, digest: str) -> Modification | None:
        """The first modification of ``path`` at or after ``step`` that left it other than ``digest``.

        Changes found between commands before ``step`` that led to ``digest`` came before the read that saw it: two
        edits while the model thought, X to Y then Y to Z, and a read of Z, is not stale by the first."""
        mods = [m for m in self._mods_by_path.get(path, []) if m.step >= step]
        start = 0
        for i, m in enumerate(mods):
            if m.step != step or m.attempt is not None:
                break
            if m.after_hash == digest:
                start = i + 1
        return next((m for m in mods[start:] if m.after_hash != digest), None)

    def is_fresh(self, o: Observation) -> bool:
        """Whether the ledger knows of no change to what the model saw of a file, or of a link's target."""
        cur = self.current_hash(o.path)
        if cur is not UNKNOWN and cur != o.content_hash:
            return False
        if o.target is None:
            return True
        cur = self.current_hash(o.target)
        return cur is UNKNOWN or cur == o.target_hash

    def staled_by(self, o: Observation) -> Modification | None:
        """The first modification after ``o`` that left its file, or a link's target, other than the model saw it."""
        m = self.change_after(o.path, o.step, o.content_hash)
        if o.target is not None and o.target_hash is not None:
            t = self.change_after(o.target, o.step, o.target_hash)
            if t is not None and (m is None or t.step < m.step):
                return t
        return m

    def changed_files(self) -> list[Modification]:
        """The latest modification of every path that now differs from the baseline, by path."""
        out = []
        for path in sorted(self._mods_by_path):
            mods = self._mods_by_path[path]
            first, last = mods[0], mods[-1]
            if last.after_hash != first.before_hash:
                out.append(last)
        return out

    def reverted_files(self) -> list[tuple[Modification, Modification]]:
        """The first and last modification of every path that changed and is now as at the start, by path."""
        out = []
        for path in sorted(self._mods_by_path):
            mods = self._mods_by_path[path]
            if mods[-1].after_hash == mods[0].before_hash:
                out.append((mods[0], mods[-1]))
        return out

    def in_context(self, step: int, context_steps: int) -> bool:
        """Whether the output of ``step`` is past the last compaction and in the last ``context_steps`` (0: all)."""
        return step >= self.context_floor and (context_steps <= 0 or step > self.step - context_steps)

    def modified_since(self, epoch_step: int, prefix: str | None = None) -> list[Modification]:
        return [m for m in self.modifications if m.step >= epoch_step and (prefix is None or m.path.startswith(prefix))]


# the fold of each event kind (LedgerState.apply)
FOLDS = {
    "attempt": LedgerState._fold_attempt,
    "observation": LedgerState._fold_observation,
    "modification": LedgerState._fold_modification,
    "baseline": LedgerState._fold_baseline,
    "run": LedgerState._fold_run,
    "completion": LedgerState._fold_completion,
    "task": LedgerState._fold_task,
    "injection": LedgerState._fold_injection,
    "model_call": LedgerState._fold_model_call,
    "context": LedgerState._fold_context,
    "fault": LedgerState._fold_fault,
    "distrust": LedgerState._fold_distrust,
}
