"""What the ledger says in its own words, checked against its records before the model reads it.

A reference is checked by reading it back (answers/build.py); the ledger's other sentences are claims about the run,
such as "no tracked file changed since step 4, where this same command failed (exit 1)". Each claim is checked here by a
second reading of the records, written apart from the code that made the sentence. A claim the records do not bear out
is not sent, and the runtime logs a fault. Each check returns None when the claim holds, else why not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Collection, Iterable, Iterator

from ledger_runtime.records import Attempt, CommandClass, Modification, Observation, Verdict, VerdictKind

# what a repeat's note may say: only that the files the ledger tracks did not change (not that nothing did)
UNCHANGED_SINCE = "no tracked file changed since"


def after(state: Any, a: Attempt) -> Iterator[Modification]:
    """The modifications after attempt ``a``, less those its output showed: its own and those made while it ran.

    In order, as they are found: a caller that needs the first (or whether there is one) reads no further."""
    return (
        m
        for m in state.modifications_from(a.step)
        if m.step > a.step or (m.step == a.step and m.attempt is not None and m.attempt > a.id)
    )


def env_changed_after(state: Any, a: Attempt) -> bool:
    """Whether a command that changes the environment ran after ``a``."""
    return any(b.executed and b.command_class is CommandClass.ENV for b in state.attempts_after(a.id))


def changed_since(state: Any, attempt_id: int) -> str | None:
    """Checks "though files changed since" of a reference to an attempt's output."""
    a = state.attempt(attempt_id)
    if a is None:
        return f"attempt {attempt_id} is not in the ledger"
    return None if next(after(state, a), None) else f"no file changed after {state.label(attempt_id)}"


def unchanged_since(state: Any, a: Attempt | None, exit_code: Any = None) -> str | None:
    """Checks "no tracked file changed since step N, where this same command failed (exit E)"."""
    if a is None:
        return "the step it names is not in the ledger"
    if exit_code is not None and a.exit_code != exit_code:
        return f"step {a.step} exited {a.exit_code}, not {exit_code}"
    changed = next(after(state, a), None)
    if changed is not None:
        return f"{changed.path} changed at step {changed.step}"
    if env_changed_after(state, a):
        return f"the environment changed after step {a.step}"
    return None


def _attempt_at(state: Any, step: int, normalized: str, cwd: str, agent: str) -> Attempt | None:
    """The same agent's run of the command at ``step``: another agent's is not one this agent made."""
    return next((a for a in state.repeats_of(normalized, cwd, agent) if a.step == step and a.executed), None)


def _repeat_failure(found: dict, state: Any, normalized: str, cwd: str, agent: str) -> str | None:
    steps = found.get("failed_at") or ()
    for step in steps:
        a = _attempt_at(state, step, normalized, cwd, agent)
        if a is None or a.exit_code in (0, None):
            return f"the same command did not fail at step {step}" + (
                " for the agent that runs it" if a is None else ""
            )
    last = _attempt_at(state, max(steps), normalized, cwd, agent) if steps else None
    return unchanged_since(state, last, found.get("exit_code"))


def _stale_edit(found: dict, state: Any, normalized: str, cwd: str, agent: str) -> str | None:
    path, read, changed = found.get("path"), found.get("read_at"), found.get("changed_at")
    if changed is None:
        return None  # never read: says nothing of a change
    if not any(o.step == read and _by(state, o.attempt, agent) for o in state.observations_of(path)):
        return f"{path} was not read at step {read}" + (
            " by the agent that edits it" if any(o.step == read for o in state.observations_of(path)) else ""
        )
    if not any(m.step == changed and m.step >= read for m in state.modifications_of(path)):
        return f"{path} did not change at step {changed}"
    return None


def _by(state: Any, attempt_id: int | None, agent: str) -> bool:
    """Whether the attempt is ``agent``'s call ("": the main model's); a record naming none is taken as its."""
    a = state.attempt(attempt_id) if attempt_id is not None else None
    return a is None or a.agent == agent


def _verify_before_submit(found: dict, state: Any, normalized: str, cwd: str, agent: str) -> str | None:
    last_run = found.get("last_run_step")
    for path in found.get("changed") or ():
        mods = state.modifications_of(path)
        if not mods or (last_run is not None and mods[-1].step <= last_run):
            return f"{path} did not change after step {last_run}"
    return None


def _destructive(found: dict, state: Any, normalized: str, cwd: str, agent: str) -> str | None:
    """Checks "would throw away the changes to X, Y": each changed since the start, or was uncommitted at it."""
    base = state.baseline
    dirty = {os.path.join(base.root, p) for p in base.dirty_paths} if base is not None else set()
    for path in found.get("paths") or ():
        mods = state.modifications_of(path)
        if path not in dirty and (not mods or mods[-1].after_hash == mods[0].before_hash):
            return f"{path} has no change to throw away"
    return None


# what each built-in rule's reason says of the run, read from its evidence
RULE_CLAIMS = {
    "destructive": _destructive,
    "repeat-failure": _repeat_failure,
    "stale-edit": _stale_edit,
    "verify-before-submit": _verify_before_submit,
}


def verdict_fails(v: Verdict, state: Any, normalized: str, cwd: str, agent: str = "") -> str | None:
    """Why a verdict's reason says what the records do not bear out, or None; users' rules are not checked.

    ``agent``: the subagent whose command it is ("": the main model); a repeat is of its own runs only."""
    if v.kind is VerdictKind.NUDGE and v.rule is None and v.ref_attempt is not None:  # govern's repeat
        ref = state.attempt(v.ref_attempt)
        if ref is not None and (ref.normalized, ref.cwd, ref.agent) != (normalized, cwd, agent):
            return f"step {ref.step} is not a run of this command by the agent that runs it"
        return unchanged_since(state, ref)
    evidence = v.evidence or {}
    if v.rule and "," not in v.rule and v.rule not in evidence:  # one rule's verdict, before gate.compose
        evidence = {v.rule: evidence}
    for rule, found in evidence.items():
        check = RULE_CLAIMS.get(rule)
        why = check(found, state, normalized, cwd, agent) if check is not None and isinstance(found, dict) else None
        if why is not None:
            return why
    return None


# -- the state view ----------------------------------------------------------------------------------


def _fresh(state: Any, o: Observation) -> bool:
    """Whether the file, and a link's target, still has what ``o`` saw."""
    return _holds(state, o.path, o.content_hash) and (o.target is None or _holds(state, o.target, o.target_hash))


def _changed_claim(claim: tuple, state: Any) -> str | None:
    """Checks "X: created / deleted / changed, +a -b (last at step N ...)" and "X: back as at the start"."""
    _, path, how, step, attempt = claim
    mods = state.modifications_of(path)
    if not mods:
        return f"{path}: no change of it is recorded"
    first, last = mods[0], mods[-1]
    if (last.step, last.attempt) != (step, attempt):
        return f"{path}: its last change is at step {last.step}, not {step}"
    wrong = {
        "deleted": last.after_hash is not None,
        "created": first.before_hash is not None or last.after_hash is None,
        "changed": last.after_hash is None or first.before_hash is None,
    }
    if wrong.get(how):
        return f"{path}: it was not {how}" if how != "created" else f"{path}: it was there at the start"
    back = last.after_hash == first.before_hash
    if back != (how == "back"):
        return f"{path}: it is as at the start" if back else f"{path}: it is not as at the start"
    return None


def _seen_claim(claim: tuple, state: Any) -> str | None:
    """Checks "X: lines ... (steps ...)" and "X: STALE, changed at step N"."""
    _, path, fresh_steps, stale_step = claim
    obs = state.told_observations_of(path)  # the model's own reads: a subagent's showed the file to the subagent
    fresh = _fresh_steps(state, path, obs)
    if fresh_steps and not set(fresh_steps) <= fresh:
        step = min(set(fresh_steps) - fresh)
        if not any(o.step == step for o in obs):
            return f"{path}: the model did not read it at step {step}"
        return f"{path}: what it saw at step {step} no longer holds"
    if not fresh_steps and fresh:
        return f"{path}: what it saw at step {max(fresh)} still holds"
    if not fresh_steps and stale_step is not None and not _changed_at(state, obs, stale_step):
        return f"{path}: it did not change at step {stale_step}"
    return None


def _fresh_steps(state: Any, path: str, obs: list[Observation]) -> frozenset[int]:
    """The steps of the reads of ``path`` that still hold, taken in a read at a time while no change is recorded.

    Kept in the state's view memo by path: the reads counted, grouped by what they saw (the file's content, a link's
    target and its content), the link targets among them and how many changes the ledger holds of the file and of
    each target; a change to any of them, or a read through a new link, counts anew, a group at a time: a read
    holds exactly when the others that saw the same do, so a file read a thousand times and changed a hundred
    costs a look at each content it had, not at each read."""
    memo = state.view_memo.setdefault("claims.fresh", {})
    kept = memo.get(path)
    if kept is None or kept.n > len(obs):
        kept = memo[path] = _Reads()
    new = obs[kept.n :]
    for o in new:
        kept.seen.setdefault((o.content_hash, o.target, o.target_hash), []).append(o.step)
        if o.target is not None:
            kept.targets.add(o.target)
    kept.n = len(obs)
    changes = _change_counts(state, path, kept.targets)
    if changes == kept.changes:
        kept.steps = kept.steps | {o.step for o in new if _fresh(state, o)}
    else:
        kept.changes = changes
        kept.steps = frozenset(
            step
            for (content, target, target_hash), steps in kept.seen.items()
            if _holds(state, path, content) and (target is None or _holds(state, target, target_hash))
            for step in steps
        )
    return kept.steps


@dataclass
class _Reads:
    """``_fresh_steps``' memo of one path."""

    n: int = 0
    seen: dict[tuple, list[int]] = field(default_factory=dict)  # (content, target, its content) -> the reads' steps
    targets: set[str] = field(default_factory=set)
    changes: tuple[int, ...] | None = None
    steps: frozenset[int] = frozenset()


def _holds(state: Any, path: str, seen: Any) -> bool:
    """Whether ``path`` still has what a read saw (``seen``): no change of it is recorded, or its last left that."""
    mods = state.modifications_of(path)
    return not mods or mods[-1].after_hash == seen


def _change_counts(state: Any, path: str, targets: Collection[str]) -> tuple[int, ...]:
    return (len(state.modifications_of(path)), *(len(state.modifications_of(t)) for t in sorted(targets)))


def _command_claim(claim: tuple, state: Any) -> str | None:
    """Checks "#N cmd -> exit E; result holds / no tracked file changed since / may no longer hold: X changed at M"."""
    _, attempt_id, holds, path, step = claim
    a = state.attempt(attempt_id)
    if a is None:
        return f"attempt {attempt_id} is not in the ledger"
    if holds and not _reads_files(a) and next(after(state, a), None) is not None:
        return f"#{a.step}: files changed since"
    if not holds and path is not None and not any(m.path == path and m.step == step for m in after(state, a)):
        return f"#{a.step}: {path} did not change at step {step}"
    return None


def _reads_files(a: Attempt) -> bool:
    """Whether a command's result is said to hold by its read set: a pure reader that read files that were there (and
    entered directories) only; any other result holds only while no tracked file changed after it."""
    reader = a.command_class in (CommandClass.INSPECT, CommandClass.SEARCH) and a.pure
    return reader and all(
        k[:2] == "x:" or (k[:2] == "f:" and not sig.startswith(("missing", "dir:"))) for k, sig in a.read_set.items()
    )


ENTRY_CLAIMS = {"changed": _changed_claim, "seen": _seen_claim, "command": _command_claim}


def entry_fails(claim: tuple, state: Any) -> str | None:
    """Why a state view line says what the records do not bear out, or None; ``claim`` is ``ViewEntry.claim``."""
    check = ENTRY_CLAIMS.get(claim[0]) if claim else None
    return check(claim, state) if check is not None else None


def _changed_at(state: Any, obs: Iterable[Observation], step: int) -> bool:
    paths = {p for o in obs for p in (o.path, o.target) if p is not None}
    return any(m.step == step for p in paths for m in state.modifications_of(p))


__all__ = ["after", "changed_since", "unchanged_since", "verdict_fails", "entry_fails"]
