"""Finds the values a text gives a secret's name, for masking (redact.py).

The forms are those of settings files and commands: NAME=VALUE, NAME: VALUE, "NAME": "VALUE", --NAME VALUE and .netrc's
"password VALUE". Names are looked for only at NAME_WORDS, so a long output is never scanned at every position.
``_worth_masking`` decides which values are secrets: code (``token = self.token``), a test log (``PASS: test_x``) and a
reference (``$TOKEN``) are not. Each span lies within one line.
"""

from __future__ import annotations

import functools
import re

from ledger_runtime.ledger.needles import Needles

MIN_SECRET_CHARS = 8  # shorter values ("1", "true", a port) would mask half of every output

NAME_WORDS = re.compile(r"pass|pw|secret|token|key|auth|credential|dsn", re.IGNORECASE)  # pw: pwd, MY_PW
# the same words looked for in lower case, one by one with ``str.find``: many times faster over a long output than
# IGNORECASE, which leaves the regular expression engine no literal to look for, and than the alternation in lower
# case, which stops at every p, s, t, k, a, c and d (none of them begins another, so the leftmost wins: see
# ``leftmost_words``)
_LOWER_WORDS = tuple(NAME_WORDS.pattern.split("|"))
_WORD_NEEDLES = Needles(_LOWER_WORDS)
_FOLDS_APART = ("\u0130", "\u0131", "\u017f")  # İ, ı, ſ: IGNORECASE matches them to i and s, lower() does not
NAME_REACH = 60  # characters of a name either side of its secret word
_NAME_BEFORE = re.compile(r"[\w.-]*\Z")
_NAME_AFTER = re.compile(r"[\w.-]*")
_VALUE = r"""(?:"(?P<dq>(?:[^"\\\n]|\\.)*)"|'(?P<sq>[^'\n]*)'|(?P<bare>[^\s"'`,;&|(){}\[\]<>\\]+))"""
_AFTER_NAME = re.compile(r"""(?P<close>["']?)[ \t]*(?P<sep>[=:])[ \t]*""" + _VALUE)
_AFTER_FLAG = re.compile(r"[ \t]+" + _VALUE)
_LINE_END = re.compile(r"""[ \t,]*(?:#[^\n]*)?(?:\r?$|['"])""", re.MULTILINE)
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_GIVES_VALUE = frozenset("=:\"' \t")
_SPACED_SEP = re.compile(r"[ \t]+[=:]")
STRONG = frozenset(
    "password passwd passphrase secret secrets token apikey credential credentials dsn authtoken accesstoken "
    "privatekey accesskey secretkey clientsecret authorization".split()
)
STRONG_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key")})
MEDIUM = frozenset({"pass", "pwd", "pw"})  # a password only where assigned (PASS: in a test log is not; DB_PW=)
NOT_NAMES = frozenset({"pwd", "oldpwd"})  # the working directory
STRONG_MIN, SETTING_MIN, FLAG_MIN, RANDOM_MIN = 6, MIN_SECRET_CHARS, 4, 16


@functools.lru_cache(maxsize=4096)
def secret_name(name: str) -> str | None:
    """How surely ``name`` names a secret, judged from its words; None when it names none.

    "strong": a password, token, API key. "medium": pass or pwd, only when assigned. "auth": only as a JSON key, since
    ``auth = ...`` is code. "weak": another key, only when its value looks random."""
    if name.lower().lstrip("-_") in NOT_NAMES:
        return None
    words = [w.lower() for w in _WORDS.findall(name)]
    if any(w in STRONG for w in words) or any(p in STRONG_PAIRS for p in zip(words, words[1:])):
        return "strong"
    if name.lower() == "auth":
        return "auth"  # docker's "auth": "BASE64"
    if any(w in MEDIUM for w in words):
        return "medium"
    return "weak" if "key" in words else None


def _random_looking(v: str) -> bool:
    """Whether a value looks like a key rather than a name; dots mark hosts, modules and versions."""
    return len(v) >= RANDOM_MIN and "." not in v and any(c.isdigit() for c in v) and any(c.isalpha() for c in v)


# an HTTP credential under its scheme, quoted after a secret's name (JSON, TOML, YAML headers); a short one is no secret
_AUTH_SCHEME = re.compile(
    r"(?i:bearer|basic|token|bot|digest)[ \t]+(?:([^\s$<{*%%][^\s%%]{%d,})|\S*)" % (STRONG_MIN - 1)
)  # (not a placeholder: $TOKEN, <token>, {token}, %s)
_PLACEHOLDER = re.compile(
    r"[A-Z_]+|[a-z_]+"
)  # after a scheme: YOUR_API_KEY, your_token_here (a credential mixes cases)
_SEGMENT = r"(?:[0-9]+|[A-Z]+[0-9]*|(?:[a-z]+|[A-Z][a-z]+)(?:[A-Z][a-z]+)*[0-9]*)"
_WORDS_OF_CODE = re.compile(rf"_*{_SEGMENT}(?:_+{_SEGMENT})*_*")  # token_counts_per_batch2, DEFAULT_KEY_V2, apiKey2
_CODE_NAME = re.compile(r"[A-Za-z_]\w*(?:\.\w+)*")  # a variable, an attribute: code, not a value
_CONSTANT = re.compile(r"[A-Z_]+|[A-Za-z_]\w*(?:\.\w+)+")  # another constant, a dotted name


def _worth_masking(strength: str, form: str, value: str, quoted: bool, upper: bool) -> bool:
    """Whether a value given a name of this ``strength`` in this ``form`` is a secret to mask.

    Never: an empty value; one with a blank, ``%s``, ``$X``, ``<X>`` or ``{x}``; a bare path; a bare name of code, which
    makes ``password = hunter2`` code too; a value without a digit, unless after an upper-case NAME= (``.env``,
    ``export``)."""
    if not value or value[0] in "$<{*" or "%" in value or any(c.isspace() for c in value):
        return False
    if strength == "medium" and form == "colon":
        return False  # "PASS: test_x" in a test log
    if strength == "auth":
        return form == "json" and quoted and len(value) >= STRONG_MIN
    if strength == "weak":  # key=key_function_for_sort_2 is code
        return _random_looking(value) and (quoted or not _WORDS_OF_CODE.fullmatch(value))
    if not quoted and (form == "json" or value.startswith(("/", "~/", "./", "../"))):
        return False  # a number, true, null; a path
    if upper and form == "assign" and not quoted:
        return len(value) >= SETTING_MIN and not _CONSTANT.fullmatch(value)
    if not quoted and _CODE_NAME.fullmatch(value):
        # ``password = hunter2`` and ``token=tokenizer_output_2024`` are code; ``api_key=Zq8vN3kP0aLw7RtY`` is not
        return _random_looking(value) and not _WORDS_OF_CODE.fullmatch(value)
    return len(value) >= (FLAG_MIN if form == "flag" else STRONG_MIN) and any(c.isdigit() for c in value)


def _credential(scheme: re.Match[str], at: int) -> tuple[int, int] | None:
    """The span of the credential after an HTTP scheme in a value that begins at ``at``; None for a placeholder."""
    credential = scheme.group(1)
    if not credential or _PLACEHOLDER.fullmatch(credential):
        return None
    return at + scheme.start(1), at + scheme.end(1)


def _netrc(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The span of the secret in .netrc's "password SECRET", on a line that is a netrc entry."""
    m = _AFTER_FLAG.match(text, end)
    if m is None or m.group("bare") is None or _LINE_END.match(text, m.end()) is None:
        return None
    line = text[text.rfind("\n", 0, start) + 1 : start].split()
    if line and not ({"machine", "login", "default"} & set(line)):
        return None
    value = m.group("bare")
    return (m.start("bare"), m.end("bare")) if len(value) >= FLAG_MIN else None


def named_spans(text: str) -> list[tuple[int, int]]:
    """The spans of the values ``text`` gives a secret's name, each within its line."""
    found: list[tuple[int, int]] = []
    done = 0
    for w_start, w_end in _name_words(text):
        if w_start < done:
            continue
        end = _NAME_AFTER.match(text, w_end, min(len(text), w_end + NAME_REACH)).end()
        done = end
        after = text[end : end + 1]
        if after not in _GIVES_VALUE:
            continue  # monkey.patch, tokenize(, a keyword...
        if after in " \t" and not _SPACED_SEP.match(text, end) and not _spaced_value(text, w_start, end):
            continue  # a word in a sentence: only .netrc's password and --flags take a value after a blank
        start = _NAME_BEFORE.search(text, max(0, w_start - NAME_REACH), w_start).start()
        strength = secret_name(text[start:end])
        upper = text[w_start:w_end].isupper()  # DB_PASSWORD=: a setting's name (whatever is glued before it)
        span = _named_value(text, start, end, strength, upper) if strength is not None else None
        if span is not None:
            found.append(span)
    return found


def _name_words(text: str) -> list[tuple[int, int]]:
    """The spans of NAME_WORDS' matches in ``text`` (read the words from ``text``): found in its lower
    case, which has the same offsets, where that matches as IGNORECASE does."""
    folded = text.lower()
    if len(folded) == len(text) and (text.isascii() or not any(c in text for c in _FOLDS_APART)):
        held = _WORD_NEEDLES.present(folded)  # (the words it holds, where the compiled search serves)
        return leftmost_words(folded, _LOWER_WORDS if held is None else held)
    return [m.span() for m in NAME_WORDS.finditer(text)]


def leftmost_words(text: str, words: tuple[str, ...]) -> list[tuple[int, int]]:
    """The spans ``re.finditer`` of the alternation of ``words`` gives, none of which begins another: every place of
    each word (one ``str.find`` scan a word absent), then from the left each that begins where the last taken ended
    or later. At a place, at most one word matches, so the alternation's order does not matter."""
    found = []
    for w in words:
        i = text.find(w)
        while i >= 0:
            found.append((i, i + len(w)))
            i = text.find(w, i + 1)
    found.sort()
    taken: list[tuple[int, int]] = []
    end = 0
    for a, b in found:
        if a >= end:
            taken.append((a, b))
            end = b
    return taken


def _spaced_value(text: str, word: int, end: int) -> bool:
    """Whether this name may take a value after a blank: .netrc's ``password`` or a ``--flag``."""
    if text[word:end].lower() == "password" and (word == 0 or text[word - 1] in " \t\n"):
        return True
    return text.rfind("--", max(0, word - NAME_REACH), word) >= 0


def _named_value(text: str, start: int, end: int, strength: str, upper: bool) -> tuple[int, int] | None:
    """The span of the value the name at ``start:end`` is given, when it is a secret to mask."""
    name = text[start:end]
    if name == "password":
        span = _netrc(text, start, end)
        if span is not None:
            return span
    m = _AFTER_NAME.match(text, end)
    if m is not None:
        opened = text[start - 1 : start] if start else ""
        form = (
            "json"
            if m.group("close") and m.group("close") == opened
            else "colon"
            if m.group("sep") == ":"
            else "assign"
        )
        form = "flag" if name.startswith("--") and form == "assign" else form
    elif name.startswith("--"):
        m, form = _AFTER_FLAG.match(text, end), "flag"
    if m is None:
        return None
    group = next(g for g in ("dq", "sq", "bare") if m.group(g) is not None)
    if group == "bare" and form == "colon" and _LINE_END.match(text, m.end()) is None:
        return None  # "PASS: Concrete indices correct": a word of a sentence, not a setting
    if group == "bare" and text[m.end() : m.end() + 1] in ("(", "["):
        return None  # a call, an index: code
    scheme = _AUTH_SCHEME.fullmatch(m.group(group)) if group != "bare" and strength == "strong" else None
    if scheme is not None:  # "Authorization": "Bearer X", Authorization = "Basic X": the credential after its scheme
        return _credential(scheme, m.start(group))
    if _worth_masking(strength, form, m.group(group), group != "bare", upper):
        return m.start(group), m.end(group)
    return None
