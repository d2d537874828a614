"""The ledger's claims checked against the files themselves, not against its records.

The runtime checks each sentence it sends against its own records (decide/claims.py). A record can
be wrong, so the replay checks again, from what it can see for itself: the checkout at the base
commit (``git cat-file``) and the tree after each replayed command (``Files``: the state of every
file git does not ignore that differs from the base, and of every path the ledger named, after each
step). Checked:

- each line of a note of the state view the model would have been sent (``ViewEntry.claim``):
  "created", "deleted", "+a -b" / "changed", "back as at the start", "last at step N"; a file's
  view fresh ("lines 3-9 (step 4)": the file has what it had after step 4) or STALE ("changed at
  step N"); a command's "result holds", "no tracked file changed since", "may no longer hold: X
  changed at step N";
- each NUDGE reason: "no tracked file changed since step N, where this same command
  failed (exit E)", stale-edit's "X changed at step N ... after its last read on record, at step M";
- each stub of a context policy: "nothing but blank lines", "lines of it changed since" (a left-out
  file line whose file has other text there now), "shown again later" (its text is in a message
  sent after it), "superseded by step K (the same command)", and each line a part keeps.

A claim about something the replay did not see (a file outside the tree before the ledger named it)
is counted as unchecked, never as true or false.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ledger_runtime.held.context import KEEP, PART, HistoryOutput, Treatment
from ledger_runtime.records import Verdict, VerdictKind

ABSENT = ("absent",)


def file_state(path: str) -> tuple:
    """What a reader of ``path`` gets: absent, a link (its target text and what it resolves to), a
    file's SHA-256, or a directory/other."""
    try:
        if os.path.islink(path):
            target = os.readlink(path)
            return ("link", target, file_state(os.path.realpath(path)))
        if os.path.isdir(path):
            return ("dir",)
        with open(path, "rb") as f:
            return ("file", hashlib.sha256(f.read()).hexdigest())
    except FileNotFoundError:
        return ABSENT
    except OSError as e:
        return ("unreadable", e.errno)


@dataclass
class Files:
    """The work tree's files, after each step, as the replay sees them (the module docstring)."""

    root: str
    commit: str
    # path -> its states as seen, in order: (step, state, whether it changed at that step)
    history: dict[str, list[tuple[int, tuple, bool]]] = field(default_factory=dict)
    last_step: int = 0
    _base: dict[str, tuple] = field(default_factory=dict)

    def after_step(self, step: int, named: Iterable[str] = ()) -> None:
        """Look at the tree after step ``step`` (0: before the first): the files git does not ignore that
        differ from the base, every path looked at before, and ``named`` (the paths the ledger named)."""
        self.last_step = step
        for p in set(self._dirty()) | set(self.history) | {p for p in named if p}:
            state = file_state(p)
            seen = self.history.get(p)
            if seen is None:
                base = self.base(p)
                if base is None:  # outside the tree: known from now on
                    self.history[p] = [(step, state, False)]
                else:
                    self.history[p] = [] if state == base else [(step, state, step > 0)]
            elif state != (seen[-1][1] if seen else self.base(p)):
                seen.append((step, state, True))

    def in_tree(self, path: str) -> bool:
        return path.startswith(self.root.rstrip("/") + "/")

    def base(self, path: str) -> tuple | None:
        """A path's state at the base commit (None: not known, outside the tree)."""
        if not self.in_tree(path):
            return None
        if path not in self._base:
            rel = os.path.relpath(path, self.root)
            r = subprocess.run(["git", "cat-file", "blob", f"{self.commit}:{rel}"], cwd=self.root, capture_output=True)
            self._base[path] = ("file", hashlib.sha256(r.stdout).hexdigest()) if r.returncode == 0 else ABSENT
        return self._base[path]

    def at(self, path: str, step: int) -> tuple | None:
        """A path's state after step ``step`` (None: not known then)."""
        seen = self.history.get(path)
        if seen is None:
            return None
        for k, state, _ in reversed(seen):
            if k <= step:
                return state
        return self.base(path)

    def now(self, path: str) -> tuple | None:
        return self.at(path, self.last_step)

    def changes(self, path: str) -> list[int]:
        """The steps at which ``path`` changed, as far as the replay saw."""
        return [k for k, _, changed in self.history.get(path, ()) if changed]

    def changed_between(self, after: int, upto: int) -> list[str]:
        """The paths looked at that changed at a step after ``after``, up to ``upto``."""
        return sorted(p for p, seen in self.history.items() if any(after < k <= upto and c for k, _, c in seen))

    def _dirty(self) -> list[str]:
        """The files git does not ignore that differ from the base commit (committed since, staged,
        changed or untracked), as absolute paths."""
        out = subprocess.run(["git", "diff", "--name-only", "-z", self.commit], cwd=self.root, capture_output=True)
        others = subprocess.run(
            ["git", "ls-files", "-z", "--others", "--exclude-standard"], cwd=self.root, capture_output=True
        )
        names = out.stdout.split(b"\0") + others.stdout.split(b"\0")
        return [os.path.join(self.root, os.fsdecode(p)) for p in names if p]


@dataclass
class Tally:
    """Claims checked, false (with the first few, and why), and not checkable."""

    checked: int = 0
    false: int = 0
    unknown: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, verdict: bool | None, what: str) -> None:
        if verdict is None:
            self.unknown += 1
            return
        self.checked += 1
        if not verdict:
            self.false += 1
            if len(self.examples) < 8:
                self.examples.append(what)

    def as_dict(self) -> dict:
        return {"checked": self.checked, "false": self.false, "unknown": self.unknown, "examples": self.examples}


def entry_true(claim: tuple, files: Files, state: Any) -> bool | None:
    """Whether a line of the state view is true of the files as they are (None: not known)."""
    check = {"changed": _changed_true, "seen": _seen_true, "command": _command_true}.get(claim[0]) if claim else None
    return check(claim, files, state) if check is not None else True


def _changed_true(claim: tuple, files: Files, state: Any) -> bool | None:
    _, path, how, last_step, _attempt = claim
    now = files.now(path)
    base = files.base(path)
    if base is None:  # outside the tree: as it was when the ledger first named it
        seen = files.history.get(path)
        base = seen[0][1] if seen else None
    if now is None or base is None:
        return None
    true = {
        "created": base == ABSENT and now != ABSENT,
        "deleted": now == ABSENT and base != ABSENT,
        "changed": ABSENT not in (base, now) and base != now,
        "back": base == now,
    }.get(how, True)
    changes = files.changes(path)
    return true and (not changes or changes[-1] == last_step)


def _seen_true(claim: tuple, files: Files, state: Any) -> bool | None:
    _, path, fresh_steps, stale_step = claim
    now = files.now(path)
    if now is None:
        return None
    if fresh_steps:  # the file has what it had when the model saw it then
        thens = [files.at(path, s) for s in fresh_steps]
        return None if None in thens else all(t == now for t in thens)
    seen_at = sorted({o.step for o in state.told_observations_of(path)})  # the model's reads, as the view's
    thens = [files.at(path, s) for s in seen_at]
    if None in thens:
        return None
    if any(t == now for t in thens):
        return False  # STALE, yet the file has what the model saw at one of those steps
    if stale_step is None:
        return True
    targets = {path, os.path.realpath(path)}
    return any(stale_step in files.changes(p) for p in targets)


def _command_true(claim: tuple, files: Files, state: Any) -> bool | None:
    _, attempt_id, holds, path, changed_step = claim
    a = state.attempt(attempt_id)
    if a is None:
        return None
    since = files.changed_between(a.step, files.last_step)
    if (
        holds
        and a.pure
        and all(
            k[:2] == "x:" or (k[:2] == "f:" and not s.startswith(("missing", "dir:"))) for k, s in a.read_set.items()
        )
    ):
        # "result holds": none of the files it read changed (a listing, a tree or stat data is more than files: the
        # ledger says of such a read only what it says of any other command)
        return not any(k[2:] in since for k in a.read_set if k.startswith("f:"))
    if holds:  # "no tracked file changed since"
        return not since
    return changed_step in files.changes(path) if path is not None else bool(since)


def verdict_true(v: Verdict, files: Files, step: int, rows: Sequence[dict]) -> bool | None:
    """Whether a verdict's reason, given before step ``step`` ran, is true of the files (None: not
    known); ``rows``: the replay's rows of the steps before it (their exit codes)."""
    if v.kind not in (VerdictKind.NUDGE, VerdictKind.REVISE):
        return True
    evidence = v.evidence or {}
    if v.rule and "," not in v.rule and v.rule not in evidence:
        evidence = {v.rule: evidence}
    if v.rule is None and v.ref_step is not None:  # govern's repeat
        return not files.changed_between(v.ref_step, step - 1)
    for rule, found in evidence.items():
        if rule == "repeat-failure" and isinstance(found, dict):
            steps = [s for s in found.get("failed_at") or [] if 0 < s <= len(rows)]
            if not steps or any(rows[s - 1]["exit"] in (0, None) for s in steps):
                return False
            if rows[steps[-1] - 1]["exit"] != found.get("exit_code") or files.changed_between(max(steps), step - 1):
                return False
        elif rule == "stale-edit" and isinstance(found, dict) and found.get("changed_at") is not None:
            if found["changed_at"] not in files.changes(found["path"]):
                return False
    return True


def stub_true(s: HistoryOutput, t: Treatment, later_texts: str, later_runs: set[str], lines_now: Callable) -> bool:
    """Whether a stub (or a part) of output ``s`` is true: its reason of the lines it leaves out, read
    from the files (``lines_now(path)``: a file's lines now, None when unreadable) and from the text
    sent after it (``later_texts``: a line of it shown again is a whole line there, as printed or
    without a line number before it; ``later_runs``: the commands, by directory and text (``HistoryOutput.key``),
    of outputs sent whole after it)."""
    if t.kind == KEEP or t.stub is None or t.stub.window:
        return True
    shown = later_lines(later_texts)
    rerun = s.supersedable and s.key is not None and s.key in later_runs
    changed = later = 0
    for i, line in enumerate(s.lines):
        differs = _differs(line, lines_now)
        if t.keeps(i):
            if t.kind == PART and (differs or (line.path is None and rerun)):
                return False  # "only its lines that still hold"
            continue
        if not line.text.strip():
            continue
        again = line.text.rstrip("\n") in shown or bool(line.was and line.was.rstrip("\n") in shown)
        changed += differs
        later += again
        covered = (differs and t.stub.stale) or (again and t.stub.later) or (t.stub.superseded_by and line.path is None)
        if not covered:
            return False  # a line its reason does not cover ("nothing but blank lines": none may be left)
    if (t.stub.stale and not changed) or (t.stub.later and not later):
        return False  # a reason it gives that holds of no line
    return not t.stub.superseded_by or rerun


def _differs(line, lines_now: Callable) -> bool:
    """Whether a line that is a file's line has other text in the file now."""
    if line.path is None or line.number is None:
        return False
    now = lines_now(line.path)
    return now is not None and (line.number > len(now) or now[line.number - 1] != line.was.rstrip("\n"))


_NUMBERED = re.compile(r"^\s*\d+[\t:]")  # cat -n, nl, grep -n


def later_lines(text: str) -> set[str]:
    """The lines of ``text``, each also without a line number before it (``cat -n``, ``grep -n``)."""
    lines = set(text.split("\n"))
    return lines | {_NUMBERED.sub("", x, count=1) for x in lines}


__all__ = ["Files", "Tally", "entry_true", "verdict_true", "stub_true", "file_state"]
