"""tau2-bench airline and retail: which canonical ledger paths each tool return fills (the path
map of the LedgerAgent paper). ``records(domain, tool, arguments, content)`` turns a successful
call's returned JSON into ``(path, record)`` pairs; ``stale(domain, tool, arguments)`` names the
paths a successful write changed without returning them (they are dropped: read them again).
VerdictFacts: tool names and return shapes of tau2-bench's tools (../shared/docs/tau2.md).
"""

from __future__ import annotations

from typing import Any

from ledger_runtime import UnreadableJSON, json_value

READS = {
    "airline": {
        "get_reservation_details",
        "get_user_details",
        "search_direct_flight",
        "search_onestop_flight",
        "get_flight_status",
        "list_all_airports",
    },
    "retail": {
        "find_user_id_by_email",
        "find_user_id_by_name_zip",
        "get_user_details",
        "get_order_details",
        "get_product_details",
        "get_item_details",
        "list_all_product_types",
    },
}
# retail's writes of one order: each returns the order as it now is
ORDER_WRITES = (
    "cancel_pending_order",
    "modify_pending_order_items",
    "modify_pending_order_address",
    "modify_pending_order_payment",
    "exchange_delivered_order_items",
    "return_delivered_order_items",
)
WRITES = {
    "airline": {
        "book_reservation",
        "cancel_reservation",
        "update_reservation_flights",
        "update_reservation_baggages",
        "update_reservation_passengers",
        "send_certificate",
    },
    "retail": {*ORDER_WRITES, "modify_user_address"},
}


def parse(content: Any) -> Any:
    if not isinstance(content, str):
        return content
    try:
        return json_value(content)
    except UnreadableJSON:  # not JSON, or nested past the parser: the text as it is
        return content


def _flight(f: dict[str, Any], date: str | None = None) -> tuple[str, dict[str, Any]] | None:
    number = f.get("flight_number")
    day = date or f.get("date")
    if not number or not day:
        return None
    return f"flights.{number}.{day}", {k: v for k, v in f.items() if k != "flight_number"}


# tools returning one record (JSON object) -> (collection, its id field)
_RESERVATION = ("reservations", "reservation_id")
_ORDER = ("orders", "order_id")
OBJECT_RETURNS = {
    "airline": {
        **{
            t: _RESERVATION
            for t in (
                "get_reservation_details",
                "book_reservation",
                "cancel_reservation",
                "update_reservation_flights",
                "update_reservation_baggages",
                "update_reservation_passengers",
            )
        },
        "get_user_details": ("users", "user_id"),
    },
    "retail": {
        **{t: _ORDER for t in ("get_order_details", *ORDER_WRITES)},
        "get_user_details": ("users", "user_id"),
        "modify_user_address": ("users", "user_id"),
        "get_product_details": ("products", "product_id"),
        "get_item_details": ("items", "item_id"),
    },
}


def records(domain: str, tool: str, arguments: dict[str, Any], content: Any) -> list[tuple[str, Any]]:
    value = parse(content)
    if tool in OBJECT_RETURNS.get(domain, {}) and isinstance(value, dict):
        collection, key = OBJECT_RETURNS[domain][tool]
        ident = value.get(key) or arguments.get(key)
        return [(f"{collection}.{ident}", value)] if ident else []
    if domain == "airline":
        if tool == "get_flight_status" and isinstance(value, str):
            return [(f"flights.{arguments.get('flight_number')}.{arguments.get('date')}", {"status": value})]
        if tool == "search_direct_flight" and isinstance(value, list):
            return [r for f in value if isinstance(f, dict) and (r := _flight(f, arguments.get("date")))]
        if tool == "search_onestop_flight" and isinstance(value, list):
            return [
                r for pair in value if isinstance(pair, list) for f in pair if isinstance(f, dict) and (r := _flight(f))
            ]
    elif tool in ("find_user_id_by_email", "find_user_id_by_name_zip") and isinstance(value, str):
        return [(f"session.found_users.{value}", True)]
    return []


def absorb(ledger: Any, domain: str, tool: str, arguments: dict[str, Any], content: Any) -> None:
    """A successful call's return into the ledger: stale paths dropped, records put; a flight's
    status is merged into what a search showed of it (origin, destination, seats)."""
    for path in stale(domain, tool, arguments, ledger):
        ledger.drop(path)
    merged = []
    for path, record in records(domain, tool, arguments, content):
        old = ledger.get(path)
        if path.startswith("flights.") and isinstance(old, dict) and isinstance(record, dict):
            record = {**old, **record}
        merged.append((path, record))
    ledger.absorb(merged, tool)


def stale(domain: str, tool: str, arguments: dict[str, Any], ledger: Any) -> list[str]:
    """Paths a successful write changed without returning them."""
    if domain == "airline":
        if tool == "send_certificate":
            return [f"users.{arguments.get('user_id')}"]
        if tool in ("book_reservation", "update_reservation_flights", "update_reservation_baggages"):
            # the payment comes off a gift card or certificate balance in the user's profile
            res = ledger.get(f"reservations.{arguments.get('reservation_id')}") or {}
            user = arguments.get("user_id") or res.get("user_id")
            return [f"users.{user}"] if user else []
    if domain == "retail" and tool in WRITES["retail"] and tool != "modify_user_address":
        order = ledger.get(f"orders.{arguments.get('order_id')}") or {}
        return [f"users.{order['user_id']}"] if order.get("user_id") else []
    return []
