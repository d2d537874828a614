"""The strings of a JSON text, found without parsing it into objects: for a file nested past what ``json`` reads.

``json.loads`` (and any walk of what it returns) raises RecursionError on a text nested some thousand levels deep: a
user's login file or an agent's record of that shape still has its secrets found and masked, from its strings here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Iterator

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.S)


@dataclass(frozen=True)
class JsonString:
    """A string of a JSON text: where its token stands, its value, whether it is a key, and whether a key above it
    (or its own, for a value) is one ``named`` picked out."""

    start: int
    end: int
    value: str
    key: bool
    named: bool


def _value(token: str) -> str:
    """A string token's value; a token that does not decode (a bad escape, no closing quote): its text."""
    try:
        value = json.loads(token)
    except ValueError:
        return token.strip('"')
    return value if isinstance(value, str) else token


def json_strings(text: str, named: Callable[[str], bool] = lambda key: False) -> Iterator[JsonString]:
    """Every string of ``text`` in order, at any depth (one loop, no recursion); a text that is not quite JSON is
    read as far as its tokens go."""
    frames: list[list[bool]] = []  # per open container: [object, named above, expecting a key, its key named]
    for m in _TOKEN.finditer(text):
        tok = m.group()
        top = frames[-1] if frames else None
        under = bool(top and (top[1] or (top[0] and top[3])))
        if tok in ("{", "["):
            frames.append([tok == "{", under, tok == "{", False])
        elif tok in ("}", "]"):
            del frames[-1:]
        elif tok in (":", ",") and top and top[0]:  # a key comes after a comma, its value after a colon
            top[2], top[3] = (True, False) if tok == "," else (False, top[3])
        elif tok.startswith('"'):
            value = _value(tok)
            if top and top[0] and top[2]:
                top[3] = named(value)
                yield JsonString(m.start(), m.end(), value, True, top[1])
            else:
                yield JsonString(m.start(), m.end(), value, False, under)


def mask_json_text(text: str, mask: Callable[[str], str]) -> str:
    """``text`` with every string (keys too) masked by ``mask`` and written back as JSON: the same document where it
    parses, its secrets masked, at any depth."""
    out, at = [], 0
    for s in json_strings(text):
        masked = mask(s.value)
        if masked != s.value:
            out += [text[at : s.start], json.dumps(masked)]
            at = s.end
    return "".join(out) + text[at:] if out else text
