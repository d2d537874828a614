"""A typed, schema-anchored ledger of what an agent has observed through its tools (the LedgerAgent
paper's ledger, for tool-calling agents).

Records live at canonical paths (``reservations.ABC123``, ``users.mia_li_3668``,
``flights.HAT001.2024-05-16``); a domain's path map (an adapter's) turns each successful READ
return into records, and each successful WRITE return refreshes the paths it affects. Failed calls
change nothing. ``render`` gives the same text for the same ledger, under a character budget
(oldest records left out first, and said so).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass(frozen=True)
class Entry:
    """One record: where it is, what it says, and which call put it there (step, tool)."""

    path: str
    record: Any
    step: int
    source: str


@dataclass
class TypedLedger:
    entries: dict[str, Entry] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)  # conversation facts (the authenticated user...)
    step: int = 0

    def put(self, path: str, record: Any, source: str) -> None:
        self.entries[path] = Entry(path, record, self.step, source)

    def drop(self, path: str) -> None:
        """Forget a record a write made stale without returning its new state."""
        self.entries.pop(path, None)

    def get(self, path: str) -> Any:
        e = self.entries.get(path)
        return e.record if e is not None else None

    def under(self, prefix: str) -> list[Entry]:
        return [e for p, e in sorted(self.entries.items()) if p.startswith(prefix + ".")]

    def absorb(self, records: Iterable[tuple[str, Any]], source: str) -> None:
        self.step += 1
        for path, record in records:
            self.put(path, record, source)

    def render(self, budget_chars: int = 6000) -> str:
        """The ledger as deterministic text: facts, then records by path (newest kept when over budget)."""
        head = ["<ledger>"]
        for k in sorted(self.facts):
            head.append(f"{k}: {json.dumps(self.facts[k], sort_keys=True)}")
        lines = [
            f"{e.path} (step {e.step}, {e.source}): {json.dumps(e.record, sort_keys=True, separators=(',', ':'))}"
            for e in sorted(self.entries.values(), key=lambda e: (e.step, e.path))
        ]
        omitted = 0
        while lines and sum(len(x) + 1 for x in head + lines) + 80 > budget_chars:
            lines.pop(0)
            omitted += 1
        tail = [f"({omitted} older records left out; read them again if needed)"] if omitted else []
        return "\n".join(head + lines + tail + ["</ledger>"])
