"""Secrets masked before anything is stored: what the ledger keeps is ours, what the model sees is the agent's.

A ``Redactor`` masks the values of secret-looking environment variables, well-known token shapes, values given a
secret's name (secret_names.py) and the user's patterns. Each masked character becomes ``*`` and no pattern crosses a
line end, so a text keeps its length and lines and a line masks alike wherever it stands. Offsets into answers stay
true, and an answer masked alone expands to its output masked alone: references and their checks work on masked storage.
A masked value cannot be had back from the ledger; its length can.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ledger_runtime.ledger.json_strings import json_strings
from ledger_runtime.ledger.needles import Needles
from ledger_runtime.ledger.secret_names import MIN_SECRET_CHARS, named_spans
from ledger_runtime.section import BOOLEAN, STRINGS, Section, setting

MASK = "*"
# event fields that name places, not what was printed: never masked (a path is no secret's home, and
# a masked one would no longer match the file after a restart)
STRUCTURAL = frozenset(
    {
        "path",
        "paths",
        "cwd",
        "workdir",
        "root",
        "dirty_paths",
        "writes",
        "reads",
        "read_keys",
        "spans",
        "content_hash",
        "target",
        "target_hash",
        "before_hash",
        "after_hash",
        "baseline_hash",
        "output_hash",
        "shown_hash",
        "head_commit",
        "branch",
        "snapshot_digest",
    }
)
# a variable whose name says it holds a secret
SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|CREDENTIALS?|AUTH|"
    r"PRIVATE|SESSION|COOKIE|DSN)(?:_|$)|(?:APIKEY|TOKEN|SECRET|PASSWORD)$",
    re.IGNORECASE,
)
NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})
# Token shapes worth masking wherever they appear. Where a pattern has a group, only the group is
# masked (what stands before it stays readable). Each begins with a literal, which the regular
# expression engine finds at memchr speed: no pattern may begin with a class or an alternation.
# Token shapes, each the start of a word (a match right after a letter, digit, "_" or "-" is part of
# a name: task-queue-...)
TOKEN_SHAPES = (
    r"AKIA[0-9A-Z]{16}\b",  # AWS access key ids
    r"ASIA[0-9A-Z]{16}\b",
    r"sk-[A-Za-z0-9_-]{20,}",  # OpenAI, Anthropic (sk-ant-...), sk-proj-...
    r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"xox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
    r"AIza[0-9A-Za-z_-]{35}",  # Google API keys
    r"glpat-[A-Za-z0-9_-]{20,}",  # GitLab
    r"sk_live_[0-9A-Za-z]{10,}",  # Stripe secret and restricted keys, live and test
    r"sk_test_[0-9A-Za-z]{10,}",
    r"rk_live_[0-9A-Za-z]{10,}",
    r"rk_test_[0-9A-Za-z]{10,}",
    r"whsec_[0-9A-Za-z]{20,}",  # Stripe webhook secrets
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"npm_[A-Za-z0-9]{36}\b",  # npm
    r"pypi-[A-Za-z0-9_-]{40,}",  # PyPI upload tokens
    r"LS0tLS1CRUdJTi[A-Za-z0-9+/=]{16,}",  # base64 of "-----BEGIN ": a key (kubeconfig's client-key-data)
    # the mysql family's password glued to -p (``mysql -uroot -pSECRET db``), quoted or not
    r"mysql[a-z]*\b[^\n|;&]*?[ \t]-p(?:'([^'\n]+)'|\"([^\"\n]+)\"|([^\s'\"-][^\s'\"]*))",
    r"mariadb[a-z-]*\b[^\n|;&]*?[ \t]-p(?:'([^'\n]+)'|\"([^\"\n]+)\"|([^\s'\"-][^\s'\"]*))",
    r"sshpass[ \t]+-p[ \t]*([^\s]+)",
    r"curl\b[^\n|;&]*?[ \t](?:-u|--user)[ \t]+['\"]?[^\s:'\"]+:([^\s'\"@]+)",  # curl -u user:password
)
BUILTIN_PATTERNS = TOKEN_SHAPES + (
    # HTTP headers; not a placeholder of one case (YOUR_API_KEY in docs): a credential mixes cases or digits
    r"uthorization:[ \t]*(?:[Bb]earer|[Bb]asic|[Tt]oken)[ \t]+(?![A-Z_]+(?![\w.~+/=-])|[a-z_]+(?![\w.~+/=-]))"
    r"([A-Za-z0-9._~+/=-]{8,})",
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",  # JWTs (access and id tokens)
    # a password in a URL (.git-credentials, DATABASE_URL): scheme://user:PASSWORD@host
    r"://[^\s:/@'\"<>\[\]]{1,100}:([^\s/@'\"<>\[\]]{1,200})@",
    # a private key's body on one line (a service account's JSON: "-----BEGIN PRIVATE KEY-----\n...")
    r"-----BEGIN [A-Z ]{0,30}PRIVATE KEY-----([^-\n]{16,})-----END",
    r"hooks.slack.com/services/([A-Za-z0-9/_-]{16,})",  # Slack and Discord webhooks: the URL is the secret
    r"discord.com/api/webhooks/([A-Za-z0-9/_-]{16,})",
)


class RedactError(ValueError):
    """A pattern of the setting ``redaction.patterns`` that cannot be used; the message names it."""


def compile_patterns(patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    """The user's patterns, each matched within one line."""
    out = []
    for p in patterns:
        if not isinstance(p, str) or not p:
            raise RedactError(f"{p!r} is not a non-empty string")
        try:
            rx = re.compile(p, re.MULTILINE)
        except re.error as e:
            raise RedactError(f"{p!r} is not a regular expression: {e}") from None
        if rx.search("") is not None:
            raise RedactError(f"{p!r} matches the empty string")
        out.append(rx)
    return tuple(out)


_BUILTIN = compile_patterns(BUILTIN_PATTERNS)
# each built-in pattern's literal opening: a text without it cannot match, and ``in`` finds that out
# several times faster than the pattern's own search (a long output is masked in one pass a pattern)
# ("/" too: a password in a URL opens with "://", not the ":" most outputs hold, so its pattern runs only on those
# with a URL in them)
_OPENING = re.compile(r"[A-Za-z0-9_:/-]*?(?=[A-Za-z0-9_:/-][?*{]|[^A-Za-z0-9_:/-]|$)")
_BUILTIN_LITERAL = {rx: m.group() for rx in _BUILTIN if (m := _OPENING.match(rx.pattern)) is not None}
_WORD_START = frozenset(_BUILTIN[: len(TOKEN_SHAPES)])
# the openings looked for in one pass (needles.py); one of a single character (``:``) is looked for alone
_OPENINGS = Needles(tuple(dict.fromkeys(lit for lit in _BUILTIN_LITERAL.values() if len(lit) > 1)))
_IN_WORD = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """The environment's values to mask: of secret-looking names, MIN_SECRET_CHARS or longer, not existing paths."""
    out: set[str] = set()
    for name, value in environ.items():
        if name.upper() in NOT_SECRET_NAMES or not SECRET_NAME.search(name) or not isinstance(value, str):
            continue
        if value.startswith("/") and os.path.exists(value):
            continue  # SSH_AUTH_SOCK, GOOGLE_APPLICATION_CREDENTIALS: where a secret is, not the secret
        for part in value.splitlines():
            part = part.strip()
            if len(part) >= MIN_SECRET_CHARS:
                out.add(part)
    return sorted(out, key=lambda v: (-len(v), v))


def _login_key(key: str) -> bool:
    """Whether a login file's key names a key, a token or a secret: its values are masked."""
    return bool(re.search(r"key|token|secret", key, re.I))


def file_secrets(path: str | os.PathLike, *, all_values: bool = False) -> list[str]:
    """The values of an agent's login file (JSON: OAuth tokens, an API key it keeps) worth masking: its
    strings of at least 8 characters under a key that names a key, a token or a secret (every string:
    ``all_values``, for a file that holds nothing else); none when it cannot be read."""

    found: list[str] = []

    def walk(v: object, keyed: bool) -> None:
        if isinstance(v, str) and len(v) >= 8 and keyed:
            found.append(v)
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, keyed or _login_key(str(k)))
        elif isinstance(v, list):
            for x in v:
                walk(x, keyed)

    from ledger_runtime.json_text import NestedTooDeep, json_value
    from ledger_runtime.ledger.private import read_record

    try:  # a regular file only (a FIFO or /dev/zero in its place would hold the run's start)
        text = read_record(path).decode("utf-8")
        walk(json_value(text), all_values)
    except (NestedTooDeep, RecursionError):  # nested past what json reads: its strings, found without it
        found = [
            s.value
            for s in json_strings(text, _login_key)
            if not s.key and len(s.value) >= 8 and (all_values or s.named)
        ]
    except (OSError, ValueError):  # UnreadableJSON, UnicodeDecodeError: none
        return []
    return list(dict.fromkeys(found))


_BUILTIN_SET = frozenset(_BUILTIN)
_PLAIN = frozenset({int, float, bool, type(None)})  # JSON's values with no text in them
KNOWN_CHARS = 256  # a text up to this long is looked up among those masked before
KNOWN_TEXTS = 4096  # how many are kept: all are dropped when the table is full
_UNCHANGED: Any = object()  # what a known text with nothing to mask is known as
# long texts with nothing to mask, the last few kept whole: a file's content masked as an edit's blob comes back as
# the output of the ``cat`` after it (an equal text is found by comparing, cheap beside the patterns: unequal
# lengths at once, equal ones up to their first difference)
CLEAN_MIN_CHARS = 4096
CLEAN_MAX_CHARS = 4 * 1024 * 1024
CLEAN_KEPT = 4


def _groups(m: re.Match[str]) -> list[tuple[int, int]]:
    """What of a match to mask: its groups that matched, or all of it when it has none."""
    if m.re.groups:
        return [m.span(g) for g in range(1, m.re.groups + 1) if m.start(g) >= 0 and m.end(g) > m.start(g)]
    return [m.span()] if m.end() > m.start() else []


def _plan(rx: re.Pattern[str]) -> tuple[re.Pattern[str], str | None, bool]:
    """A pattern, its literal opening where it is a built-in one (None: the user's), and whether it starts a word."""
    return rx, _BUILTIN_LITERAL.get(rx, "") if rx in _BUILTIN_SET else None, rx in _WORD_START


class Redactor:
    """Masks secrets in text; ``Redactor.off()`` masks nothing."""

    def __init__(
        self, values: Iterable[str] = (), patterns: Iterable[re.Pattern[str]] = _BUILTIN, *, names: bool = True
    ):
        self.values = tuple(v for v in values if v and "\n" not in v)
        self.patterns = tuple(patterns)
        self.names = names  # values given a secret's name (named_spans)
        self._plan = tuple(map(_plan, self.patterns))  # each pattern's part, worked out once
        # short texts masked before, as masked: an event's fields repeat from step to step (a verdict, an
        # answer's kind, a command), and a text masks alike each time (the settings above never change)
        self._known: dict[str, Any] = {}
        self._clean: tuple[str, ...] = ()  # long texts found with nothing to mask, the latest first

    @classmethod
    def off(cls) -> Redactor:
        return cls((), (), names=False)

    @classmethod
    def for_run(cls, environ: Mapping[str, str] | None = None, user_patterns: Iterable[str] = ()) -> Redactor:
        """The environment's secret values, the built-in token shapes and the user's patterns."""
        env = os.environ if environ is None else environ
        return cls(secret_values(env), _BUILTIN + compile_patterns(user_patterns))

    def with_values(self, values: Iterable[str]) -> Redactor:
        """This redactor, also masking ``values``, such as an adapter's environment for the agent."""
        extra = secret_values({f"SECRET_{i}": v for i, v in enumerate(values)}) if values else []
        return Redactor(
            sorted(set(self.values) | set(extra), key=lambda v: (-len(v), v)), self.patterns, names=self.names
        )

    @property
    def active(self) -> bool:
        return bool(self.values or self.patterns or self.names)

    def spans(self, text: str) -> list[tuple[int, int]]:  # noqa: C901
        """The character ranges of ``text`` to mask, merged, in order."""
        found: list[tuple[int, int]] = []
        for v in self.values:
            i = text.find(v)
            while i >= 0:
                found.append((i, i + len(v)))
                i = text.find(v, i + 1)  # overlapping occurrences too
        if self.names:
            found += named_spans(text)
        held = _OPENINGS.present(text) if self._plan else None  # the openings it holds (compiled search)
        for rx, literal, word_start in self._plan:
            if literal is not None:
                if literal not in (text if held is None or len(literal) < 2 else held):
                    continue
                for m in rx.finditer(text):
                    if word_start and m.start() and text[m.start() - 1] in _IN_WORD:
                        continue
                    found += _groups(m)
            else:  # the user's: matched within each line, so a line masks alike wherever it stands
                if rx.search(text) is None:
                    continue
                at = 0
                for line in text.split("\n"):
                    found += [(a + at, b + at) for m in rx.finditer(line) for a, b in _groups(m)]
                    at += len(line) + 1
        if not found:
            return []
        found.sort()
        merged = [found[0]]
        for a, b in found[1:]:
            if a <= merged[-1][1]:
                if b > merged[-1][1]:
                    merged[-1] = (merged[-1][0], b)
            else:
                merged.append((a, b))
        return merged

    def mask(self, text: str) -> str:
        """``text`` with every secret's characters as ``*``."""
        if not self.active or not text:
            return text
        if len(text) > KNOWN_CHARS:
            if text in self._clean:
                return text
            masked = self._masked(text)
            if masked is text and CLEAN_MIN_CHARS <= len(text) <= CLEAN_MAX_CHARS:
                self._clean = (text, *self._clean[: CLEAN_KEPT - 1])  # one assignment: a thread reads either
            return masked
        known = self._known.get(text)
        if known is None:
            if len(self._known) >= KNOWN_TEXTS:
                self._known.clear()
            masked = self._masked(text)
            known = self._known[text] = _UNCHANGED if masked is text else masked
        return text if known is _UNCHANGED else known  # the text itself when nothing is masked: callers ask ``is``

    def _masked(self, text: str) -> str:
        spans = self.spans(text)
        if not spans:
            return text
        parts, at = [], 0
        for a, b in spans:
            parts.append(text[at:a])
            # a masked range keeps its line ends ("\r" too): lines stay where they were
            parts.append(re.sub(r"[^\r\n]", MASK, text[a:b]))
            at = b
        parts.append(text[at:])
        return "".join(parts)

    def mask_bytes(self, data: bytes) -> bytes:
        """``mask`` of UTF-8 bytes; undecodable bytes pass through."""
        if not self.active or not data:
            return data
        text = data.decode("utf-8", "surrogateescape")
        masked = self.mask(text)
        return data if masked is text else masked.encode("utf-8", "surrogateescape")

    def mask_obj(self, obj: Any) -> Any:
        """Every string in a JSON-like value masked but dict keys and STRUCTURAL values, which a restart matches."""
        return self._mask_value(obj) if self.active else obj

    def _mask_value(self, obj: Any) -> Any:
        kind = type(obj)
        if kind in _PLAIN:  # most of an event's fields: nothing to mask, nothing to walk
            return obj
        if kind is str:
            return self.mask(obj)
        if kind is dict:
            return {k: v if k in STRUCTURAL or type(v) in _PLAIN else self._mask_value(v) for k, v in obj.items()}
        if kind is list or kind is tuple:
            return [v if type(v) in _PLAIN else self._mask_value(v) for v in obj]
        if isinstance(obj, str):  # a subclass: as its base
            return self.mask(obj)
        if isinstance(obj, dict):
            return {k: v if k in STRUCTURAL else self._mask_value(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self._mask_value(v) for v in obj]
        return obj


__all__ = ["Redactor", "RedactError", "secret_values", "compile_patterns", "BUILTIN_PATTERNS", "MASK"]


@dataclass(frozen=True)
class RedactionSettings(Section):
    """The ``[ledger.redaction]`` settings: which secrets are masked before anything is stored."""

    name = "redaction"
    flat = {"redact": "enabled", "redact_patterns": "patterns"}

    enabled: bool = setting(True, BOOLEAN)
    """Mask secrets before anything is stored (ledger blobs and events, faults.log, replay results):
    the values of the environment's secret-looking variables, well-known token shapes and
    ``patterns``. What the model is shown is not changed."""
    patterns: list = setting(list, STRINGS, factory=True)
    """Regular expressions of more secrets to mask (each matched within one line; with a group,
    only the group is masked)."""

    def validate(self) -> None:
        try:
            compile_patterns(self.patterns)
        except RedactError as e:
            raise self.refuse("patterns", str(e)) from None
