"""The types of the ledger's event fields, checked as each event is folded in.

Anyone who can write a ledger can craft one, and a field of the wrong type must not reach the code that reads it. A
missing or mistyped field becomes a value that says so (``[damaged field]``, 0, null) and is named in a ``damaged``
line; the event is never dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

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

    def or_null(self) -> Type:
        return Type(f"{self.name} or null", self.holds, None, True, self.inner)


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -MAX_WHOLE < v < MAX_WHOLE


def _count(v: Any) -> bool:
    return _whole(v) and v >= 0


def _number(v: Any) -> bool:
    # compared, not converted: an integer of hundreds of digits does not convert to a float (NaN and infinity fail too)
    return isinstance(v, (int, float)) and not isinstance(v, bool) and -MAX_WHOLE < v < MAX_WHOLE


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _texts(v: Any) -> bool:
    return isinstance(v, list) and all(_text(x) for x in v)


def _text_map(v: Any) -> bool:
    return isinstance(v, dict) and all(_text(k) and _text(x) for k, x in v.items())


def _pair(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(_count(x) for x in v)


def _spans(v: Any) -> bool:
    return isinstance(v, list) and all(_pair(s) and 1 <= s[0] <= s[1] for s in v)


def _piece(p: Any) -> bool:
    """One answer piece as ``Piece.to_list`` stores it: kind, start, end, ref, first, last."""
    return (
        isinstance(p, list)
        and len(p) == 6
        and _text(p[0])
        and all(_whole(x) for x in p[1:3] + p[4:6])
        and (p[3] is None or _whole(p[3]))
    )


def _pieces(v: Any) -> bool:
    return isinstance(v, list) and all(_piece(p) for p in v)


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


def _fields(body: dict[str, Any], spec: dict[str, Type], optional: set[str], where: str) -> tuple[dict, list[str]]:
    """``body`` with every field of ``spec`` as its type says, and a line naming each that was not."""
    out, damaged = dict(body), []
    for name, t in spec.items():
        if name not in body:
            if name not in optional:
                out[name] = t.default
                damaged.append(f"{where}: {name} is missing: shown as {_shown(t.default)}")
            continue
        v = body[name]
        if v is None and t.nullable:
            continue
        if not t.holds(v):
            out[name] = t.default
            damaged.append(f"{where}: {name} is {described(v)}, not {t.name}: shown as {_shown(t.default)}")
        elif t.inner is not None:
            out[name], inner = _fields(v, t.inner, set(t.inner) - {"kind"}, f"{where}: {name}")
            damaged += inner
    return out, damaged


def _shown(default: Any) -> str:
    return "null" if default is None else repr(default) if not isinstance(default, str) else f"{default!r}"


def checked(kind: Any, event: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``event`` with its fields as their types say, and a line per field that was not.

    ``kind`` comes apart because an observation's body has a ``kind`` of its own."""
    where = f"{kind if isinstance(kind, str) else 'an'} event {event.get('seq')}"
    out, damaged = _fields(event, ENVELOPE, set(ENVELOPE), where)
    spec = FIELDS.get(kind) if isinstance(kind, str) else None
    if spec is None:
        return out, damaged
    body, more = _fields(out, spec, OPTIONAL.get(kind, set()), where)
    if kind == "attempt" and any(line.startswith(f"{where}: id ") for line in more):
        body["id"] = -abs(int(event.get("seq") or 0)) - 1  # an id of its own, which nothing names
    return body, damaged + more
