"""JSON text read as a value, every way it can fail one error that says why in a line.

Records the ledger reads (hook payloads, an agent's session lines, settings, trajectories) may be anything: text that
is not JSON, JSON nested past what the parser reads (a RecursionError, which no ``except ValueError`` catches), JSON of
another shape. Standard library only: the hook server uses it too."""

from __future__ import annotations

import json
from typing import Any, Callable

_NAMES = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


class UnreadableJSON(ValueError):
    """Text that does not read as JSON, or not as the kind asked for; the reason in one line, quoting none of the
    text (it may hold a secret)."""


class NestedTooDeep(UnreadableJSON):
    """JSON nested past what the parser reads: text that may still be JSON, whose strings can be found without
    parsing it (``ledger.json_strings``)."""


def json_kind(value: Any) -> str:
    """What a JSON value is, in words: ``a JSON object``, ``a JSON array``, ``JSON null``."""
    return "JSON null" if value is None else _a(f"JSON {_NAMES.get(type(value), type(value).__name__)}")


def _a(words: str) -> str:
    return ("an " if words[0] in "aeiou" else "a ") + words


def json_value(
    text: str | bytes | bytearray, kind: type | None = None, parse_int: Callable[[str], Any] | None = None
) -> Any:
    """``json.loads(text)``, and when ``kind`` is given (``dict``, ``list``) a value of that type; UnreadableJSON
    otherwise. The success path is ``json.loads`` itself: the hot path pays one call more."""
    try:
        value = json.loads(text) if parse_int is None else json.loads(text, parse_int=parse_int)
    except json.JSONDecodeError as e:
        msg = e.msg[:-3] if e.msg.endswith(" at") else e.msg  # json's "Invalid control character at"
        raise UnreadableJSON(f"not JSON: {msg} at line {e.lineno}, column {e.colno}") from None
    except RecursionError:
        raise NestedTooDeep("JSON nested deeper than it can be read") from None
    except UnicodeDecodeError:
        raise UnreadableJSON("not JSON: bytes that are not UTF-8 text") from None
    except TypeError:  # json.loads' only TypeError: text of another type
        raise UnreadableJSON(f"not JSON text: {_a(type(text).__name__)}") from None
    except ValueError as e:  # an integer past Python's limit on digits
        raise UnreadableJSON(f"not JSON that can be read: {str(e).split(';')[0][:120]}") from None
    if kind is not None and not isinstance(value, kind):
        raise UnreadableJSON(f"not {_a('JSON ' + _NAMES.get(kind, kind.__name__))} ({json_kind(value)})")
    return value


def nested_deeper(value: Any, levels: int) -> bool:
    """Whether a value holds arrays or objects nested more than ``levels`` deep: one that does may fail where
    ``json.dumps`` writes it (a RecursionError, at a depth that depends on the caller's own stack). Walked without
    recursion."""
    todo = [(value, 0)]
    while todo:
        v, depth = todo.pop()
        if isinstance(v, (dict, list, tuple)):
            if depth >= levels:
                return True
            todo.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False
