"""The tau2-bench airline (A1-A11) and retail (R1-R9) rules as predicates of the core policy gate
(ledger_runtime/gate.py), over a proposed WRITE tool call and the typed ledger of what the agent
has read (typed_ledger.py). The rules come from the domains' policy.md (table in
../shared/docs/tau2.md). A rule whose state is not in the ledger yet finds that, and says which
read to make: the gate never looks at the database behind the agent's back.

A predicate is ``check(call, ledger, context, rule) -> Finding | None`` with ``call`` a
``ToolCallProposal`` and ``context`` a ``Tau2Context`` (the domain's "now").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable

from ledger_harness.tau2.typed_ledger import TypedLedger
from ledger_runtime import Finding, Rule, build_rules

AIRLINE_NOW = datetime(2024, 5, 15, 15, 0, 0)
FLOWN = ("landed", "flying")
FREE_BAGS = {
    "regular": {"basic_economy": 0, "economy": 1, "business": 2},
    "silver": {"basic_economy": 1, "economy": 2, "business": 3},
    "gold": {"basic_economy": 2, "economy": 3, "business": 4},
}
CANCEL_REASONS = ("no longer needed", "ordered by mistake")


@dataclass(frozen=True)
class ToolCallProposal:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Tau2Context:
    domain: str
    now: datetime = AIRLINE_NOW


class Missing(Exception):
    """The rule needs a record the ledger does not have: the read to make."""

    def __init__(self, path: str, read: str):
        super().__init__(read)
        self.path = path
        self.read = read
        m = re.fullmatch(r"(\w+)\((.*)\)", read)
        self.call: tuple[str, dict[str, Any]] | None = None
        if m and "..." not in m.group(2):
            args = dict(re.findall(r"(\w+)='([^']*)'", m.group(2)))
            self.call = (m.group(1), args)


def need(ledger: TypedLedger, path: str, read: str) -> Any:
    value = ledger.get(path)
    if value is None:
        raise Missing(path, read)
    return value


def needs_state(check: Callable) -> Callable:
    """Turn a missing record into a finding that names the read to make."""

    def wrapped(call: ToolCallProposal, ledger: TypedLedger, context: Tau2Context, rule: Rule) -> Finding | None:
        try:
            return check(call, ledger, context, rule)
        except Missing as m:
            return Finding(
                f"{call.name} needs {m.path}, which is not in the ledger yet: call {m.read} first",
                {
                    "missing": m.path,
                    "read": m.read,
                    "read_call": {"name": m.call[0], "arguments": m.call[1]} if m.call else None,
                },
            )

    wrapped.__name__ = check.__name__
    return wrapped


def _reservation(call: ToolCallProposal, ledger: TypedLedger) -> dict[str, Any]:
    rid = call.arguments.get("reservation_id")
    return need(ledger, f"reservations.{rid}", f"get_reservation_details(reservation_id={rid!r})")


def _segment_status(ledger: TypedLedger, f: dict[str, Any], now: datetime) -> str | None:
    """A segment's status: from the ledger, or "flown"/"future" when its date alone decides it."""
    day = datetime.fromisoformat(f["date"])
    if day.date() > now.date():
        known = ledger.get(f"flights.{f['flight_number']}.{f['date']}")
        return known.get("status") if isinstance(known, dict) and known.get("status") else "future"
    known = need(
        ledger,
        f"flights.{f['flight_number']}.{f['date']}",
        f"get_flight_status(flight_number={f['flight_number']!r}, date={f['date']!r})",
    )
    return known.get("status") if isinstance(known, dict) else None


def _flown(ledger: TypedLedger, res: dict[str, Any], now: datetime) -> list[str]:
    return [
        f"{f['flight_number']} on {f['date']}"
        for f in res.get("flights") or []
        if _segment_status(ledger, f, now) in FLOWN
    ]


def _only(names: tuple[str, ...]) -> Callable:
    def deco(check: Callable) -> Callable:
        def wrapped(call, ledger, context, rule):
            return check(call, ledger, context, rule) if call.name in names else None

        wrapped.__name__ = check.__name__
        return wrapped

    return deco


# -- airline -------------------------------------------------------------------------------------


@_only(("cancel_reservation",))
@needs_state
def a1_cancel_basis(call, ledger, context, rule):
    res = _reservation(call, ledger)
    created = datetime.fromisoformat(res["created_at"])
    if context.now - created <= timedelta(hours=24) or res.get("cabin") == "business" or res.get("insurance") == "yes":
        return None
    statuses = {
        f"{f['flight_number']} on {f['date']}": _segment_status(ledger, f, context.now)
        for f in res.get("flights") or []
    }
    if any(s == "cancelled" for s in statuses.values()):
        return None
    return Finding(
        f"reservation {res['reservation_id']} may not be cancelled: booked {res['created_at']} (more than 24 h "
        f"ago), cabin {res.get('cabin')}, insurance {res.get('insurance')}, no segment cancelled by the "
        "airline; it needs one of those",
        {
            "created_at": res["created_at"],
            "cabin": res.get("cabin"),
            "insurance": res.get("insurance"),
            "segments": statuses,
        },
    )


@_only(("cancel_reservation",))
@needs_state
def a2_not_flown(call, ledger, context, rule):
    res = _reservation(call, ledger)
    flown = _flown(ledger, res, context.now)
    if flown:
        return Finding(
            f"reservation {res['reservation_id']} has flown segments ({', '.join(flown)}): it cannot be "
            "cancelled; transfer to a human agent",
            {"flown": flown},
        )
    return None


def _new_flights(call) -> list[tuple[str, str]]:
    return [(f.get("flight_number"), f.get("date")) for f in call.arguments.get("flights") or [] if isinstance(f, dict)]


@_only(("update_reservation_flights",))
@needs_state
def a3_basic_economy(call, ledger, context, rule):
    res = _reservation(call, ledger)
    old = [(f["flight_number"], f["date"]) for f in res.get("flights") or []]
    if res.get("cabin") == "basic_economy" and sorted(_new_flights(call)) != sorted(old):
        return Finding(
            f"reservation {res['reservation_id']} is basic economy: its flights cannot be changed "
            "(a cabin change alone is allowed)",
            {"cabin": "basic_economy", "flights": old},
        )
    return None


def _endpoints(ledger, res, call) -> list[tuple[str, str]]:
    known = {(f["flight_number"], f["date"]): (f["origin"], f["destination"]) for f in res.get("flights") or []}
    legs = []
    for number, day in _new_flights(call):
        if (number, day) in known:
            legs.append(known[(number, day)])
            continue
        f = need(ledger, f"flights.{number}.{day}", f"search_direct_flight(...) for flight {number} on {day}")
        if not isinstance(f, dict) or "origin" not in f:
            raise Missing(f"flights.{number}.{day}", f"search_direct_flight(...) for flight {number} on {day}")
        legs.append((f["origin"], f["destination"]))
    return legs


@_only(("update_reservation_flights",))
@needs_state
def a4_same_trip(call, ledger, context, rule):
    res = _reservation(call, ledger)
    if not isinstance(call.arguments.get("flights"), list) or not _new_flights(call):
        return Finding(
            "the new itinerary has no flights: a reservation's flights are changed, not removed "
            "(to drop a trip, cancel it)",
            {"flights": call.arguments.get("flights")},
        )
    legs = _endpoints(ledger, res, call)
    gaps = [f"{a[1]} -> {b[0]}" for a, b in zip(legs, legs[1:]) if a[1] != b[0]]
    if gaps:
        return Finding(f"the new flights do not connect ({', '.join(gaps)})", {"legs": legs})
    origin, destination = legs[0][0], legs[-1][1]
    stops = {d for _, d in legs}
    if res.get("flight_type") == "round_trip":
        ok = origin == res["origin"] and destination == res["origin"] and res["destination"] in stops
    else:
        ok = origin == res["origin"] and destination == res["destination"]
    if not ok:
        return Finding(
            f"the new flights go {origin} -> {destination} but reservation {res['reservation_id']} is "
            f"{res.get('flight_type')} {res['origin']} -> {res['destination']}: origin, destination and trip "
            "type must stay the same",
            {"legs": legs},
        )
    return None


@_only(("update_reservation_flights",))
@needs_state
def a5_cabin_after_flown(call, ledger, context, rule):
    res = _reservation(call, ledger)
    if call.arguments.get("cabin") in (None, res.get("cabin")):
        return None
    flown = _flown(ledger, res, context.now)
    if flown:
        return Finding(f"the cabin cannot change: segments already flown ({', '.join(flown)})", {"flown": flown})
    return None


def _user_of(call, ledger) -> dict[str, Any]:
    uid = call.arguments.get("user_id")
    if not uid:
        uid = _reservation(call, ledger)["user_id"]
    return need(ledger, f"users.{uid}", f"get_user_details(user_id={uid!r})")


@_only(("update_reservation_flights", "update_reservation_baggages"))
@needs_state
def a6_update_payment(call, ledger, context, rule):
    pid = call.arguments.get("payment_id")
    user = _user_of(call, ledger)
    method = (user.get("payment_methods") or {}).get(pid)
    if method is None or method.get("source") not in ("credit_card", "gift_card"):
        kind = "not in the user's profile" if method is None else f"a {method.get('source')}"
        return Finding(
            f"payment {pid} is {kind}: an update is paid with one credit card or gift card from the profile",
            {"payment_id": pid, "methods": sorted(user.get("payment_methods") or {})},
        )
    return None


@_only(("update_reservation_baggages",))
@needs_state
def a7_no_bag_removal(call, ledger, context, rule):
    res = _reservation(call, ledger)
    new, old = call.arguments.get("total_baggages"), res.get("total_baggages") or 0
    if isinstance(new, (int, float)) and new < old:
        return Finding(f"checked bags can be added, not removed: {old} -> {new}", {"total_baggages": old})
    return None


@_only(("update_reservation_baggages", "book_reservation"))
@needs_state
def a8_free_bags(call, ledger, context, rule):
    user = _user_of(call, ledger)
    if call.name == "book_reservation":
        cabin, passengers = call.arguments.get("cabin"), len(call.arguments.get("passengers") or [])
    else:
        res = _reservation(call, ledger)
        cabin, passengers = res.get("cabin"), len(res.get("passengers") or [])
    free = FREE_BAGS.get(user.get("membership", "regular"), FREE_BAGS["regular"]).get(cabin, 0) * passengers
    total, nonfree = call.arguments.get("total_baggages"), call.arguments.get("nonfree_baggages")
    if isinstance(total, int) and isinstance(nonfree, int) and nonfree != max(0, total - free):
        return Finding(
            f"{total} bags with {free} free ({user.get('membership')} member, {cabin}, {passengers} passengers) "
            f"means {max(0, total - free)} non-free bags, not {nonfree}",
            {"membership": user.get("membership"), "cabin": cabin, "passengers": passengers, "free": free},
        )
    return None


@_only(("book_reservation",))
@needs_state
def a9_booking_limits(call, ledger, context, rule):
    user = _user_of(call, ledger)
    passengers = call.arguments.get("passengers") or []
    pays = [p.get("payment_id") for p in call.arguments.get("payment_methods") or [] if isinstance(p, dict)]
    methods = user.get("payment_methods") or {}
    unknown = [p for p in pays if p not in methods]
    kinds = [(methods.get(p) or {}).get("source") for p in pays]
    problems = []
    if len(passengers) > 5:
        problems.append(f"{len(passengers)} passengers (at most 5)")
    if unknown:
        problems.append(f"payment methods not in the profile: {', '.join(map(str, unknown))}")
    for kind, limit in (("certificate", 1), ("credit_card", 1), ("gift_card", 3)):
        if kinds.count(kind) > limit:
            problems.append(f"{kinds.count(kind)} {kind.replace('_', ' ')}s (at most {limit})")
    if problems:
        return Finding(
            "the booking breaks the limits: " + "; ".join(problems), {"passengers": len(passengers), "payments": pays}
        )
    return None


@_only(("update_reservation_passengers",))
@needs_state
def a10_passenger_count(call, ledger, context, rule):
    res = _reservation(call, ledger)
    new, old = len(call.arguments.get("passengers") or []), len(res.get("passengers") or [])
    if new != old:
        return Finding(f"the number of passengers cannot change ({old} -> {new})", {"passengers": old})
    return None


@_only(("send_certificate",))
@needs_state
def a11_certificate(call, ledger, context, rule):
    uid = call.arguments.get("user_id")
    user = need(ledger, f"users.{uid}", f"get_user_details(user_id={uid!r})")
    amount = call.arguments.get("amount")
    mine = [
        e.record for e in ledger.under("reservations") if isinstance(e.record, dict) and e.record.get("user_id") == uid
    ]
    if not mine:
        raise Missing(
            f"reservations.<one of {uid}'s>", "get_reservation_details for the reservation the complaint is about"
        )
    eligible = [
        r
        for r in mine
        if user.get("membership") in ("silver", "gold") or r.get("insurance") == "yes" or r.get("cabin") == "business"
    ]
    if not eligible:
        return Finding(
            f"{uid} gets no compensation: a regular member, and no reservation read is insured or business",
            {"membership": user.get("membership")},
        )
    cases = []
    for r in eligible:
        statuses = {_segment_status(ledger, f, context.now) for f in r.get("flights") or []}
        n = len(r.get("passengers") or [])
        cases += [(100 * n, r["reservation_id"])] if "cancelled" in statuses else []
        cases += [(50 * n, r["reservation_id"])] if "delayed" in statuses else []
    if not cases:
        return Finding(
            f"no reservation of {uid} that was read has a cancelled or delayed flight: no certificate is due",
            {"reservations": [r["reservation_id"] for r in eligible]},
        )
    if amount not in [a for a, _ in cases]:
        return Finding(
            f"a certificate of {amount} matches no case: $100 per passenger for a cancelled flight, $50 for "
            f"a delayed one: {sorted(set(cases))}",
            {"allowed": sorted(set(cases))},
        )
    return None


# -- retail --------------------------------------------------------------------------------------------


def _order(call, ledger) -> dict[str, Any]:
    oid = call.arguments.get("order_id")
    return need(ledger, f"orders.{oid}", f"get_order_details(order_id={oid!r})")


@needs_state
def r1_authenticated(call, ledger, context, rule):
    found = sorted(e.path.split(".", 2)[2] for e in ledger.under("session.found_users"))
    if not found:
        raise Missing("session.found_users", "find_user_id_by_email or find_user_id_by_name_zip")
    if len(found) > 1:
        return Finding(
            f"more than one user was looked up in this conversation ({', '.join(found)}): one user per conversation",
            {"users": found},
        )
    user = found[0]
    owner = call.arguments.get("user_id") if call.name == "modify_user_address" else _order(call, ledger).get("user_id")
    if owner != user:
        return Finding(
            f"the target belongs to {owner}, not to the authenticated user {user}", {"user": user, "owner": owner}
        )
    return None


def _status_must_be(call, ledger, wanted: str, actions: str) -> Finding | None:
    order = _order(call, ledger)
    if order.get("status") != wanted:
        return Finding(
            f"order {order.get('order_id')} is {order.get('status')!r}: only a {wanted!r} order can be {actions}",
            {"status": order.get("status")},
        )
    return None


@_only(
    (
        "cancel_pending_order",
        "modify_pending_order_items",
        "modify_pending_order_address",
        "modify_pending_order_payment",
    )
)
@needs_state
def r2_pending(call, ledger, context, rule):
    return _status_must_be(call, ledger, "pending", "cancelled or modified")


def _product_of_item(ledger, order, item_id) -> str | None:
    for it in order.get("items") or []:
        if it.get("item_id") == item_id:
            return it.get("product_id")
    return None


@_only(("modify_pending_order_items", "exchange_delivered_order_items"))
@needs_state
def r4_same_product(call, ledger, context, rule):
    order = _order(call, ledger)
    olds, news = call.arguments.get("item_ids") or [], call.arguments.get("new_item_ids") or []
    if len(olds) != len(news):
        return Finding(f"{len(olds)} items for {len(news)} new ones: each item needs one new item", {})
    for old, new in zip(olds, news):
        pid = _product_of_item(ledger, order, old)
        if pid is None:
            return Finding(f"item {old} is not in order {order.get('order_id')}", {"item": old})
        product = need(ledger, f"products.{pid}", f"get_product_details(product_id={pid!r})")
        variant = (product.get("variants") or {}).get(new)
        if variant is None:
            return Finding(
                f"{new} is not an item of product {pid} ({product.get('name')}): the product cannot change",
                {"product": pid, "new_item": new},
            )
        if new == old:
            return Finding(f"{new} is the same item: a new item must have different options", {"item": new})
        if not variant.get("available"):
            return Finding(f"item {new} of {product.get('name')} is not available", {"item": new})
    return None


def _price_due(call, ledger, order) -> float | None:
    olds, news = call.arguments.get("item_ids") or [], call.arguments.get("new_item_ids") or []
    due = 0.0
    for old, new in zip(olds, news):
        pid = _product_of_item(ledger, order, old)
        product = ledger.get(f"products.{pid}") or {}
        variant = (product.get("variants") or {}).get(new)
        price_old = next((i.get("price") for i in order.get("items") or [] if i.get("item_id") == old), None)
        if variant is None or price_old is None:
            return None
        due += variant.get("price", 0) - price_old
    return due


@_only(("modify_pending_order_items", "exchange_delivered_order_items", "modify_pending_order_payment"))
@needs_state
def r5_gift_card_balance(call, ledger, context, rule):
    pid = call.arguments.get("payment_method_id")
    if not isinstance(pid, str) or not pid.startswith("gift_card"):
        return None
    order = _order(call, ledger)
    user = need(ledger, f"users.{order['user_id']}", f"get_user_details(user_id={order['user_id']!r})")
    balance = ((user.get("payment_methods") or {}).get(pid) or {}).get("balance")
    if call.name == "modify_pending_order_payment":
        due = sum(i.get("price", 0) for i in order.get("items") or [])
    else:
        due = _price_due(call, ledger, order)
    if due is not None and balance is not None and due > 0 and balance + 1e-9 < due:
        return Finding(
            f"gift card {pid} has {balance:.2f}, short of the {due:.2f} due", {"balance": balance, "due": due}
        )
    return None


@_only(("modify_pending_order_payment",))
@needs_state
def r6_new_payment(call, ledger, context, rule):
    order = _order(call, ledger)
    current = [p.get("payment_method_id") for p in order.get("payment_history") or []][:1]
    if call.arguments.get("payment_method_id") in current:
        return Finding(
            f"{current[0]} is the order's payment method already: choose a different one", {"current": current[0]}
        )
    return None


@_only(("exchange_delivered_order_items", "return_delivered_order_items"))
@needs_state
def r7_delivered(call, ledger, context, rule):
    return _status_must_be(call, ledger, "delivered", "returned or exchanged")


@_only(("return_delivered_order_items",))
@needs_state
def r8_refund_method(call, ledger, context, rule):
    order = _order(call, ledger)
    pid = call.arguments.get("payment_method_id")
    original = {p.get("payment_method_id") for p in order.get("payment_history") or []}
    if pid in original:
        return None
    user = need(ledger, f"users.{order['user_id']}", f"get_user_details(user_id={order['user_id']!r})")
    if str(pid).startswith("gift_card") and pid in (user.get("payment_methods") or {}):
        return None
    return Finding(
        f"a refund goes to an original payment method of the order ({', '.join(sorted(original))}) or an "
        f"existing gift card, not {pid}",
        {"original": sorted(original)},
    )


@_only(("cancel_pending_order",))
def r9_cancel_reason(call, ledger, context, rule):
    reason = call.arguments.get("reason")
    if reason not in CANCEL_REASONS:
        return Finding(
            f"the reason must be 'no longer needed' or 'ordered by mistake', not {reason!r}", {"reason": reason}
        )
    return None


AIRLINE = {
    "A1": a1_cancel_basis,
    "A2": a2_not_flown,
    "A3": a3_basic_economy,
    "A4": a4_same_trip,
    "A5": a5_cabin_after_flown,
    "A6": a6_update_payment,
    "A7": a7_no_bag_removal,
    "A8": a8_free_bags,
    "A9": a9_booking_limits,
    "A10": a10_passenger_count,
    "A11": a11_certificate,
}
RETAIL = {
    "R1": r1_authenticated,
    "R2": r2_pending,
    "R4": r4_same_product,
    "R5": r5_gift_card_balance,
    "R6": r6_new_payment,
    "R7": r7_delivered,
    "R8": r8_refund_method,
    "R9": r9_cancel_reason,
}
BLOCKING = {"A2"}  # explicitly forbidden: refused outright (transfer to a human)


def rules_for(domain: str, settings: dict[str, Any] | None = None) -> list[Rule]:
    table = AIRLINE if domain == "airline" else RETAIL
    builtins = {
        name: (check, {"enabled": True, "verdict": "BLOCK" if name in BLOCKING else "REVISE"})
        for name, check in table.items()
    }
    return build_rules(settings or {}, "", builtins)
