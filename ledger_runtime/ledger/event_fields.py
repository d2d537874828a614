"""The types of the ledger's event fields, checked as each event is folded in.

Anyone who can write a ledger can craft one, and a field of the wrong type must not reach the code that reads it. A
missing or mistyped field becomes a value that says so (``[damaged field]``, 0, null) and is named in a ``damaged``
line; the event is never dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Collection

DAMAGED_TEXT = "[damaged field]"
MAX_WHOLE = 2**53  # a whole number past this is no step, count or id any writer makes


@dataclass(frozen=True)
class Type:
    """What a field must be: ``holds`` checks it, ``default`` replaces it if damaged, ``inner`` types its fields."""

    name: str
    holds: Callable[[Any], bool]
    default: Any = None
    nullable: bool = False
    inner: dict[str, Type] | None = None
    # ``inner``'s optional fields (all but its kind) and plan (``_plan_of``): worked out once, not per event
    optional: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)
    inner_plan: Plan = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "optional", frozenset(self.inner or ()) - {"kind"})
        object.__setattr__(self, "inner_plan", _plan_of(self.inner or {}))

    def or_null(self) -> Type:
        return Type(f"{self.name} or null", self.holds, None, True, self.inner)


# a spec as ``_fields`` walks it: per field its name, check, whether null is allowed, and its type
Plan = tuple[tuple[str, Callable[[Any], bool], bool, "Type"], ...]


def _plan_of(spec: dict[str, Type]) -> Plan:
    """``spec``'s fields in order, their checks at hand (``_fields`` runs on every event folded in)."""
    return tuple((name, t.holds, t.nullable, t) for name, t in spec.items())


# the checks below are run on every field of every event folded in: written as loops and chains of tests, not
# generators, since a long run folds tens of thousands of pieces and spans (each test as the docstrings say)


def _whole(v: Any) -> bool:
    return (type(v) is int or (isinstance(v, int) and not isinstance(v, bool))) and -MAX_WHOLE < v < MAX_WHOLE


def _count(v: Any) -> bool:
    return _whole(v) and v >= 0


def _number(v: Any) -> bool:
    # compared, not converted: an integer of hundreds of digits does not convert to a float (NaN and infinity fail too)
    return isinstance(v, (int, float)) and not isinstance(v, bool) and -MAX_WHOLE < v < MAX_WHOLE


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _texts(v: Any) -> bool:
    """A list of texts."""
    if not isinstance(v, list):
        return False
    for x in v:
        if not isinstance(x, str):
            return False
    return True


def _text_map(v: Any) -> bool:
    """An object of texts."""
    if not isinstance(v, dict):
        return False
    for k, x in v.items():
        if not (isinstance(k, str) and isinstance(x, str)):
            return False
    return True


def _pair(v: Any) -> bool:
    """A list of two counts."""
    return isinstance(v, list) and len(v) == 2 and _count(v[0]) and _count(v[1])


def _spans(v: Any) -> bool:
    """A list of pairs, each of a first line (1 or more) and a last line no less."""
    if not isinstance(v, list):
        return False
    for s in v:
        if not (_pair(s) and 1 <= s[0] <= s[1]):
            return False
    return True


def _piece(p: Any) -> bool:
    """One answer piece as ``Piece.to_list`` stores it: kind, start, end, ref, first, last."""
    return (
        isinstance(p, list)
        and len(p) == 6
        and isinstance(p[0], str)
        and _whole(p[1])
        and _whole(p[2])
        and _whole(p[4])
        and _whole(p[5])
        and (p[3] is None or _whole(p[3]))
    )


def _pieces(v: Any) -> bool:
    """A list of answer pieces."""
    if not isinstance(v, list):
        return False
    for p in v:
        if not _piece(p):
            return False
    return True


def _one_of(*values: str) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, str) and v in values


def _object(v: Any) -> bool:
    return isinstance(v, dict)


TEXT = Type("text", _text, DAMAGED_TEXT)
HASH = Type("a digest (text)", _text)  # a blob's key: null when damaged (the blob reads as missing)
WHOLE = Type("a whole number", _whole, 0)
COUNT = Type("a count (0 or more)", _count, 0)
NUMBER = Type("a number", _number, 0.0)
FLAG = Type("true or false", lambda v: isinstance(v, bool), False)
TEXTS = Type("a list of texts", _texts, [])
OBJECT = Type("an object", _object, {})

# the values the readers know (records.CommandClass, records.VerdictKind, answers.AnswerKind)
CLASSES = ("inspect", "search", "run", "modify", "env-change", "other")
VERDICTS = ("RUN", "REUSE", "NUDGE", "REVISE", "BLOCK")
ANSWERS = ("raw", "whole", "spans", "delta", "reused", "refused")

VERDICT = Type(
    "an object",
    _object,
    {"kind": "RUN"},
    inner={
        "kind": Type(f"one of {', '.join(VERDICTS)}", _one_of(*VERDICTS), "RUN"),
        "reason": Type("text", _text, ""),
        "ref_attempt": WHOLE.or_null(),
        "ref_step": WHOLE.or_null(),
        "rule": TEXT.or_null(),
        "evidence": OBJECT.or_null(),
    },
)
ANSWER = Type(
    "an object",
    _object,
    inner={
        "kind": Type(f"one of {', '.join(ANSWERS)}", _one_of(*ANSWERS), "raw"),
        "pieces": Type("a list of answer pieces", _pieces, []),
        "kept": Type("two counts", _pair).or_null(),
        "exact": FLAG,
        "held_from": WHOLE,
        "keys": TEXTS,
        "altered": FLAG,
        "held": FLAG,
    },
).or_null()

# per event kind: its fields (a field not named here is left as it is: readers ignore what they do not know)
FIELDS: dict[str, dict[str, Type]] = {
    "attempt": {
        "id": WHOLE,
        "step": WHOLE,
        "command": TEXT,
        "normalized": TEXT,
        "cwd": TEXT,
        "command_class": Type(f"one of {', '.join(CLASSES)}", _one_of(*CLASSES), "other"),
        "verdict": VERDICT,
        "executed": FLAG,
        "exit_code": WHOLE.or_null(),
        "output_hash": HASH.or_null(),
        "output_chars": COUNT,
        "truncated": FLAG,
        "duration_s": NUMBER,
        "read_set": Type("an object of texts", _text_map, {}),
        "read_set_stable": FLAG,
        "write_set": TEXTS,
        "epoch_before": WHOLE,
        "epoch_after": WHOLE,
        "env_epoch": WHOLE,
        "pure": FLAG,
        "parsed": FLAG,
        "submits": FLAG,
        "shown_chars": COUNT,
        "exception": TEXT.or_null(),
        "output_complete": FLAG,
        "applied": FLAG,
        "shadow_output_hash": HASH.or_null(),
        "shown_hash": HASH.or_null(),
        "answer": ANSWER,
    },
    "observation": {
        "path": TEXT,
        "kind": TEXT,
        "spans": Type("a list of line spans", _spans).or_null(),
        "content_hash": Type("a digest (text)", _text, ""),
        "lines_total": COUNT.or_null(),
        "step": WHOLE,
        "attempt": WHOLE,
    },
    "modification": {
        "path": TEXT,
        "before_hash": HASH.or_null(),
        "after_hash": HASH.or_null(),
        "lines_added": COUNT.or_null(),
        "lines_removed": COUNT.or_null(),
        "step": WHOLE,
        "attempt": WHOLE.or_null(),
        "recognised": FLAG,
        "baseline_added": COUNT.or_null(),
        "baseline_removed": COUNT.or_null(),
        "baseline_hash": HASH.or_null(),
        "epoch": WHOLE,
    },
    "baseline": {
        "root": TEXT,
        "is_git": FLAG,
        "head_commit": TEXT.or_null(),
        "branch": TEXT.or_null(),
        "dirty_paths": TEXTS,
        "file_count": COUNT,
        "snapshot_digest": Type("a digest (text)", _text, ""),
        "task": Type("text", _text, ""),
    },
    "run": {"config": OBJECT, "workdir": TEXT, "version": TEXT.or_null()},
    "completion": {
        "attempt": WHOLE,
        "exit_code": WHOLE.or_null(),
        "output_hash": HASH.or_null(),
        "output_chars": COUNT,
        "output_complete": FLAG,
        "read_set_stable": FLAG,
        "altered": FLAG,
    },
    "task": {"task": Type("text", _text, "")},
    "injection": {"event": TEXT, "chars": COUNT},
    "model_call": {"cost": NUMBER.or_null()},
    "context": {"from_step": WHOLE},
    "fault": {"where": TEXT.or_null(), "error": TEXT.or_null(), "command": TEXT.or_null(), "message": TEXT.or_null()},
}
# what every event carries beside its body (the row's columns)
ENVELOPE = {"step": WHOLE.or_null(), "at": NUMBER.or_null()}
# fields an event may lack (older ledgers, fields added later): checked only when present
OPTIONAL = {
    "attempt": set(FIELDS["attempt"]) - {"id", "step", "command", "command_class", "verdict"},
    "observation": {"spans", "lines_total"},
    "modification": set(FIELDS["modification"]) - {"path", "step"},
    "baseline": {"task", "branch", "head_commit", "dirty_paths", "is_git", "file_count", "snapshot_digest"},
    "run": {"config", "workdir", "version"},
    "completion": set(FIELDS["completion"]) - {"attempt"},
    "model_call": {"cost"},
    "fault": set(FIELDS["fault"]),
}
_ENVELOPE_OPTIONAL = set(ENVELOPE)
_ENVELOPE_PLAN = _plan_of(ENVELOPE)
_PLANS = {kind: _plan_of(spec) for kind, spec in FIELDS.items()}
_NONE: set[str] = set()


def described(v: Any) -> str:
    """What a value is, as a damaged line says it."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true or false"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            return "not a finite number"
        return "a number out of range" if abs(v) >= MAX_WHOLE else "a negative number" if v < 0 else "a number"
    if isinstance(v, str):
        return "text"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    return type(v).__name__


# an event's place as a damaged line names it: its kind and seq, then the names of the objects the field is in
Where = tuple[Any, ...]


_MISSING = object()  # a field the event lacks (None is a value it may hold)


def _fields(
    body: dict[str, Any], spec: Plan, optional: Collection[str], where: Where, out: dict | None = None
) -> tuple[dict, list[str]]:
    """``body`` with every field of ``spec`` as its type says, and a line naming each that was not.

    ``out``: where the fields go (``body`` itself, to check an event already copied once); a copy of ``body`` if None.
    ``where`` names the event for the lines, formatted only when one is written (``_where``)."""
    if out is None:
        out = dict(body)
    damaged: list[str] = []
    for name, holds, nullable, t in spec:
        v = body.get(name, _MISSING)
        if v is _MISSING:
            if name not in optional:
                out[name] = t.default
                damaged.append(f"{_where(where)}: {name} is missing: shown as {_shown(t.default)}")
            continue
        if v is None and nullable:
            continue
        if not holds(v):
            out[name] = t.default
            damaged.append(f"{_where(where)}: {name} is {described(v)}, not {t.name}: shown as {_shown(t.default)}")
        elif t.inner is not None:
            out[name], inner = _fields(v, t.inner_plan, t.optional, (*where, name))
            damaged += inner
    return out, damaged


def _where(where: Where) -> str:
    kind, seq, *inner = where
    return ": ".join((f"{kind if isinstance(kind, str) else 'an'} event {seq}", *inner))


def _shown(default: Any) -> str:
    return "null" if default is None else repr(default) if not isinstance(default, str) else f"{default!r}"


def checked(kind: Any, event: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``event`` with its fields as their types say, and a line per field that was not.

    ``kind`` comes apart because an observation's body has a ``kind`` of its own."""
    where = (kind, event.get("seq"))
    out, damaged = _fields(event, _ENVELOPE_PLAN, _ENVELOPE_OPTIONAL, where)
    spec = _PLANS.get(kind) if isinstance(kind, str) else None
    if spec is None:
        return out, damaged
    body, more = _fields(out, spec, OPTIONAL.get(kind, _NONE), where, out)  # into the copy the envelope's check made
    if more and kind == "attempt" and any(line.startswith(f"{_where(where)}: id ") for line in more):
        body["id"] = -abs(int(event.get("seq") or 0)) - 1  # an id of its own, which nothing names
    return body, damaged + more
