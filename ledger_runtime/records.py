"""The ledger's typed records: immutable values, each to and from a JSON-able dict for the store's event log."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any


class CommandClass(str, Enum):
    """What a command does, as far as the ledger is concerned."""

    INSPECT = "inspect"  # reads files or listings and prints them
    SEARCH = "search"  # grep, find: looks for something
    RUN = "run"  # tests and scripts: output depends on the whole workspace
    MODIFY = "modify"  # writes files
    ENV = "env-change"  # installs packages, exports variables
    OTHER = "other"  # anything the analysis could not read, or that fits nowhere else


class VerdictKind(str, Enum):
    """What govern decided for a proposed command."""

    RUN = "RUN"
    REUSE = "REUSE"
    NUDGE = "NUDGE"
    REVISE = "REVISE"
    BLOCK = "BLOCK"

    @property
    def executes(self) -> bool:
        """Whether a command with this verdict runs, outside shadow mode."""
        return self in (VerdictKind.RUN, VerdictKind.NUDGE)


@dataclass(frozen=True, slots=True)
class LineSpan:
    """Lines ``start``..``end`` of a file, 1-based and inclusive."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 1 or self.end < self.start:
            raise ValueError(f"bad line span {self.start}-{self.end}")

    def __str__(self) -> str:
        return str(self.start) if self.start == self.end else f"{self.start}-{self.end}"


def _spans_to_json(spans: tuple[LineSpan, ...] | None) -> list[list[int]] | None:
    return None if spans is None else [[s.start, s.end] for s in spans]


def _spans_from_json(raw: Any) -> tuple[LineSpan, ...] | None:
    return None if raw is None else tuple(LineSpan(int(a), int(b)) for a, b in raw)


@dataclass(frozen=True, slots=True)
class Verdict:
    """govern's decision for one proposal; ``ref_attempt`` and ``ref_step`` name the earlier attempt it relies on.

    REUSE is no longer made, only read from older ledgers, whose keys ``form``, ``covered_by`` and ``estimated_chars``
    are left out.
    """

    kind: VerdictKind
    reason: str = ""
    ref_attempt: int | None = None
    ref_step: int | None = None
    rule: str | None = None
    evidence: dict[str, Any] | None = None  # the ledger state a policy read to decide (gate.py)

    def to_dict(self) -> dict[str, Any]:
        return {
            "evidence": self.evidence,
            "kind": self.kind.value,
            "reason": self.reason,
            "ref_attempt": self.ref_attempt,
            "ref_step": self.ref_step,
            "rule": self.rule,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        """A verdict as the ledger keeps it; keys it does not know, from older ledgers, are left out."""
        return cls(
            kind=VerdictKind(d["kind"]),
            reason=d.get("reason", ""),
            ref_attempt=d.get("ref_attempt"),
            ref_step=d.get("ref_step"),
            rule=d.get("rule"),
            evidence=d.get("evidence"),
        )


RUN = Verdict(VerdictKind.RUN)

_ANSWER_KEYS = frozenset(("kind", "pieces", "kept", "exact", "held_from", "keys", "altered", "held", "agent"))


@dataclass(frozen=True, slots=True)
class AnswerRecord(Mapping):
    """How the text the model got for an attempt stands for its output, as the ledger keeps it.

    ``kind`` and ``pieces`` are the answer's; a piece of an older ledger may not decode. The rest is what its check
    needs: ``kept``, the first and last characters the agent showed (None: all); ``exact``, whether that cut is known;
    ``altered``, the output is stored masked or cut; ``held``, False when another model got it; ``agent``, the subagent
    that made the call, as the agent names it ("": the main model). ``first_held_step`` and
    ``base_keys`` are stored as ``held_from`` and ``keys``. It also reads as its stored JSON object, and ``extra`` keeps
    older ledgers' unknown keys."""

    kind: str = "raw"
    pieces: tuple[tuple[Any, ...], ...] = ()
    kept: tuple[int, int] | None = None
    exact: bool = True
    first_held_step: int = 0
    base_keys: tuple[str, ...] = ()  # stored as "keys"
    altered: bool = False
    held: bool = True
    agent: str = ""
    extra: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            **dict(self.extra),
            "kind": self.kind,
            "pieces": [list(p) for p in self.pieces],
            "kept": list(self.kept) if self.kept else None,
            "exact": self.exact,
            "held_from": self.first_held_step,  # the stored key predates the name
            "keys": list(self.base_keys),
            **({"altered": True} if self.altered else {}),
            **({} if self.held else {"held": False}),
            **({"agent": self.agent} if self.agent else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AnswerRecord:
        """An answer as the ledger keeps it; what older ledgers lack takes its default."""
        if type(d) is not dict and isinstance(d, AnswerRecord):
            return d
        pieces = d.get("pieces") or ()
        return cls(
            kind=d.get("kind") or "raw",
            pieces=tuple(tuple(p) if isinstance(p, (list, tuple)) else p for p in pieces),
            kept=tuple(d["kept"]) if d.get("kept") else None,
            exact=d.get("exact", True),
            first_held_step=d.get("held_from") or 0,
            base_keys=tuple(d.get("keys") or ()),
            altered=bool(d.get("altered")),
            held=d.get("held") is not False,
            agent=d["agent"] if isinstance(d.get("agent"), str) else "",
            extra=tuple((k, v) for k, v in d.items() if k not in _ANSWER_KEYS),
        )

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    def __bool__(self) -> bool:
        # its stored object always has its six keys: true, as ``len`` would say, without building it (the
        # state view asks ``a.answer`` of every attempt it shows, each render)
        return True


@dataclass(frozen=True, slots=True)
class Attempt:
    """One proposed command and what became of it.

    ``read_set`` maps read keys to their signatures when it ran; ``read_set_stable`` is False when one moved meanwhile.
    ``shown_hash`` names the exact text the model received and ``answer`` how it stands for the output, so the ledger
    can always say what the model saw and meant. The epochs count workspace and environment changes.
    """

    id: int
    step: int
    command: str
    normalized: str
    cwd: str
    command_class: CommandClass
    verdict: Verdict
    executed: bool
    exit_code: int | None
    output_hash: str | None
    output_chars: int
    truncated: bool  # the output reached the model cut (head and tail only)
    duration_s: float
    read_set: dict[str, str] = field(default_factory=dict)
    read_set_stable: bool = True
    write_set: tuple[str, ...] = ()
    epoch_before: int = 0
    epoch_after: int = 0
    env_epoch: int = 0
    pure: bool = False
    parsed: bool = True
    submits: bool = False
    shown_chars: int = 0  # characters the agent was handed (a reuse stub is shorter than the output)
    exception: str | None = None
    output_complete: bool = True  # the stored output is the whole output (False: the agent's tool cut it)
    applied: bool = True  # the verdict took effect (False: shadow mode or govern off, decided and recorded only)
    shadow_output_hash: str | None = None  # in shadow mode: hash of the output a REUSE would have given
    shown_hash: str | None = None  # the exact text the model received (in shadow mode: would have received)
    answer: AnswerRecord | None = None  # how that text stands for the output (a mapping is read as one)

    def __post_init__(self) -> None:
        answer = self.answer
        # ``type(...) is dict`` first: a stored answer is a JSON object, and isinstance of an ABC costs more
        if answer is not None and (type(answer) is dict or not isinstance(answer, AnswerRecord)):
            # an empty or unreadable answer (not a JSON object) says nothing: no answer, the text as it was
            readable = type(answer) is dict or isinstance(answer, Mapping)
            object.__setattr__(self, "answer", AnswerRecord.from_dict(answer) if readable and answer else None)

    @property
    def agent(self) -> str:
        """The subagent that made the call, as the agent names it; "" for the main model's."""
        return self.answer.agent if self.answer else ""

    @property
    def answer_kind(self) -> str:
        """How the output came back: the answer's kind, or raw where the ledger keeps no answer."""
        return self.answer.kind if self.answer else "raw"

    def to_dict(self) -> dict[str, Any]:
        d = {name: getattr(self, name) for name in _ATTEMPT_FIELDS}
        d["command_class"] = self.command_class.value
        d["verdict"] = self.verdict.to_dict()
        d["write_set"] = list(self.write_set)
        d["answer"] = self.answer.to_dict() if self.answer is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Attempt:
        kw = {name: d[name] for name in _ATTEMPT_FIELDS if name in d}
        kw["command_class"] = CommandClass(d["command_class"])
        kw["verdict"] = Verdict.from_dict(d["verdict"])
        kw["write_set"] = tuple(d.get("write_set") or ())
        return cls(**kw)


# the fields' names, in order: ``fields()`` walks the class's every time, and every attempt folded in asks
_ATTEMPT_FIELDS = tuple(f.name for f in fields(Attempt))


@dataclass(frozen=True, slots=True)
class Observation:
    """What the agent saw of a file: which lines (``spans`` None: all), and the file's content hash then.

    For a path read through a symbolic link that hash is the link's own, and its ``target`` must still have
    ``target_hash``.
    """

    path: str
    kind: str
    spans: tuple[LineSpan, ...] | None
    content_hash: str
    lines_total: int | None
    step: int
    attempt: int
    target: str | None = None
    target_hash: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "path": self.path,
            "kind": self.kind,
            "spans": _spans_to_json(self.spans),
            "content_hash": self.content_hash,
            "lines_total": self.lines_total,
            "step": self.step,
            "attempt": self.attempt,
        }
        if self.target is not None:
            out |= {"target": self.target, "target_hash": self.target_hash}
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Observation:
        return cls(
            path=d["path"],
            kind=d["kind"],
            spans=_spans_from_json(d.get("spans")),
            content_hash=d["content_hash"],
            lines_total=d.get("lines_total"),
            step=d["step"],
            attempt=d["attempt"],
            target=d.get("target"),
            target_hash=d.get("target_hash"),
        )

    def span_text(self) -> str:
        if self.spans is None:
            return "whole"
        return ",".join(str(s) for s in self.spans)


@dataclass(frozen=True, slots=True)
class Modification:
    """A change to one file, found by comparing snapshots; a None hash means created or deleted.

    ``recognised``: the command that made it named the file as written; else it was only seen in the snapshot, or came
    between commands (``attempt`` None). Line counts are None when a side is binary, too large or unknown.
    """

    path: str
    before_hash: str | None
    after_hash: str | None
    lines_added: int | None
    lines_removed: int | None
    step: int
    attempt: int | None
    recognised: bool
    baseline_added: int | None = None  # net +/- of the file against the baseline, after this change
    baseline_removed: int | None = None
    baseline_hash: str | None = None  # the file's content at the start (None: did not exist)

    @property
    def change(self) -> str:
        if self.before_hash is None:
            return "created"
        if self.after_hash is None:
            return "deleted"
        return "modified"

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in _MODIFICATION_FIELDS}  # flat: asdict's deep copy costs 10x

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Modification:
        return cls(**{name: d.get(name) for name in _MODIFICATION_FIELDS})


_MODIFICATION_FIELDS = tuple(f.name for f in fields(Modification))


@dataclass(frozen=True, slots=True)
class Baseline:
    """The workspace when the run started, so that "changed since the start" is always answerable."""

    root: str
    is_git: bool
    head_commit: str | None
    branch: str | None
    dirty_paths: tuple[str, ...]
    file_count: int
    snapshot_digest: str
    task: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["dirty_paths"] = list(self.dirty_paths)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Baseline:
        kw = {name: d.get(name) for name in _BASELINE_FIELDS}
        kw["dirty_paths"] = tuple(d.get("dirty_paths") or ())
        kw["task"] = d.get("task") or ""
        return cls(**kw)


_BASELINE_FIELDS = tuple(f.name for f in fields(Baseline))


def command_key(cwd: str, normalized: str) -> str:
    """Identifies runs of the same command: its directory and its normalized text."""
    return f"c:{cwd}\0{normalized}"
