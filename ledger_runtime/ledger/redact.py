"""Secrets masked before anything is stored: what the ledger keeps is ours, what the model is shown is
the agent's business.

A ``Redactor`` masks the values of the environment's secret-looking variables, well-known token
shapes (AWS, OpenAI and Anthropic, GitHub, Slack, Google keys; ``NAME_TOKEN=...`` assignments;
``Authorization:`` headers) and the user's own patterns (setting ``[ledger.redaction]`` ``patterns``). A masked
character becomes ``*``: the text keeps its length and its lines, and a line masks the same way
wherever it stands (no pattern reaches across a line end). So offsets into an answer stay true, an
answer masked on its own expands to its output masked on its own, and a run of lines two outputs
share is still shared once both are masked: references and their checks work on masked storage.

What a masked value was cannot be had back from the ledger; its length can (said in SECURITY.md).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

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
MIN_SECRET_CHARS = 8  # shorter values ("1", "true", a port) would mask half of every output
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
    r"uthorization:[ \t]*(?:[Bb]earer|[Bb]asic|[Tt]oken)[ \t]+([A-Za-z0-9._~+/=-]{8,})",  # HTTP headers
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",  # JWTs (access and id tokens)
    # a password in a URL (.git-credentials, DATABASE_URL): scheme://user:PASSWORD@host
    r"://[^\s:/@'\"<>\[\]]{1,100}:([^\s/@'\"<>\[\]]{1,200})@",
    # a private key's body on one line (a service account's JSON: "-----BEGIN PRIVATE KEY-----\n...")
    r"-----BEGIN [A-Z ]{0,30}PRIVATE KEY-----([^-\n]{16,})-----END",
    r"hooks.slack.com/services/([A-Za-z0-9/_-]{16,})",  # Slack and Discord webhooks: the URL is the secret
    r"discord.com/api/webhooks/([A-Za-z0-9/_-]{16,})",
)


# -- values named as secrets ------------------------------------------------------------------------
# A value given a secret's name, in the forms settings files and commands give it: NAME=VALUE (.env,
# .npmrc, an ini or TOML file, a query string), NAME: VALUE alone on its line (YAML, a header), "NAME":
# "VALUE" (JSON, a Python dict), --NAME VALUE (a flag), .netrc's "password VALUE". The name is found
# from the words in it (secret_name): found at each occurrence of one of NAME_WORDS, it is never
# scanned for at every position of a long output.
NAME_WORDS = re.compile(r"pass|pwd|secret|token|key|auth|credential|dsn", re.IGNORECASE)
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
MEDIUM = frozenset({"pass", "pwd"})  # a password only where a setting is assigned (PASS: in a test log is not)
NOT_NAMES = frozenset({"pwd", "oldpwd"})  # the working directory
STRONG_MIN, SETTING_MIN, FLAG_MIN, RANDOM_MIN = 6, MIN_SECRET_CHARS, 4, 16


@functools.lru_cache(maxsize=4096)
def secret_name(name: str) -> str | None:
    """How surely ``name`` names a secret, from its words (``_authToken``: auth, token; ``X-Api-Key``:
    x, api, key): "strong" (a password, a token, an API key...), "medium" (pass, pwd: only when
    assigned), "auth" (only as a JSON key: ``auth = ...`` is code), "weak" (another key: only a value
    that looks random), None (no secret's name)."""
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
    """A key's value rather than a name: long, letters and digits, no dots (hosts, modules, versions)."""
    return len(v) >= RANDOM_MIN and "." not in v and any(c.isdigit() for c in v) and any(c.isalpha() for c in v)


_CODE_NAME = re.compile(r"[A-Za-z_]\w*(?:\.\w+)*")  # a variable, an attribute: code, not a value
_CONSTANT = re.compile(r"[A-Z_]+|[A-Za-z_]\w*(?:\.\w+)+")  # another constant, a dotted name


def _worth_masking(strength: str, form: str, value: str, quoted: bool, upper: bool) -> bool:
    """Whether a value given a name of this ``strength`` in this ``form`` is a secret to mask (a pure
    decision: the name scan finds them, this says which). A value with a blank, a format (``%s``), a
    variable (``$X``, ``<X>``, ``{x}``) or nothing is none; so is a bare path, a bare name of code
    (``token = self.token``, ``password = user_pw2``: read as code, so ``password = hunter2`` in an
    ini file too), and a value with no digit but after an upper-case NAME= (``.env``, ``export``)."""
    if not value or value[0] in "$<{*" or "%" in value or any(c.isspace() for c in value):
        return False
    if strength == "medium" and form == "colon":
        return False  # "PASS: test_x" in a test log
    if strength == "auth":
        return form == "json" and quoted and len(value) >= STRONG_MIN
    if strength == "weak":
        return _random_looking(value)
    if not quoted and (form == "json" or value.startswith(("/", "~/", "./", "../"))):
        return False  # a number, true, null; a path
    if upper and form == "assign" and not quoted:
        return len(value) >= SETTING_MIN and not _CONSTANT.fullmatch(value)
    if not quoted and _CODE_NAME.fullmatch(value):
        return False
    return len(value) >= (FLAG_MIN if form == "flag" else STRONG_MIN) and any(c.isdigit() for c in value)


def _netrc(text: str, start: int, end: int) -> tuple[int, int] | None:
    """.netrc's "password SECRET": the secret's span, on a line that is a netrc entry (it names a
    machine or a login, or holds the password alone)."""
    m = _AFTER_FLAG.match(text, end)
    if m is None or m.group("bare") is None or _LINE_END.match(text, m.end()) is None:
        return None
    line = text[text.rfind("\n", 0, start) + 1 : start].split()
    if line and not ({"machine", "login", "default"} & set(line)):
        return None
    value = m.group("bare")
    return (m.start("bare"), m.end("bare")) if len(value) >= FLAG_MIN else None


def named_spans(text: str) -> list[tuple[int, int]]:
    """The spans of values ``text`` gives a secret's name (see NAME_WORDS), each within its line. Only
    a name followed by what gives it a value (``=``, ``:``, a quote, a blank) is looked at further."""
    found: list[tuple[int, int]] = []
    done = 0
    for w in NAME_WORDS.finditer(text):
        if w.start() < done:
            continue
        end = _NAME_AFTER.match(text, w.end(), min(len(text), w.end() + NAME_REACH)).end()
        done = end
        after = text[end : end + 1]
        if after not in _GIVES_VALUE:
            continue  # monkey.patch, tokenize(, a keyword...
        if after in " \t" and not _SPACED_SEP.match(text, end) and not _spaced_value(text, w.start(), end):
            continue  # a word in a sentence: only .netrc's password and --flags take a value after a blank
        start = _NAME_BEFORE.search(text, max(0, w.start() - NAME_REACH), w.start()).start()
        strength = secret_name(text[start:end])
        upper = w.group().isupper()  # DB_PASSWORD=: a setting's name (whatever is glued before it)
        span = _named_value(text, start, end, strength, upper) if strength is not None else None
        if span is not None:
            found.append(span)
    return found


def _spaced_value(text: str, word: int, end: int) -> bool:
    """Whether the name ending at ``end`` (its secret word at ``word``) may take a value after a blank:
    .netrc's ``password`` or a ``--flag``."""
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
    if _worth_masking(strength, form, m.group(group), group != "bare", upper):
        return m.start(group), m.end(group)
    return None


class RedactError(ValueError):
    """A pattern of the setting ``redaction.patterns`` that cannot be used; the message names it."""


def compile_patterns(patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    """The user's patterns, each matched within one line (``^`` and ``$`` are line ends)."""
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
_OPENING = re.compile(r"[A-Za-z0-9_:-]*?(?=[A-Za-z0-9_:-][?*{]|[^A-Za-z0-9_:-]|$)")
_BUILTIN_LITERAL = {rx: m.group() for rx in _BUILTIN if (m := _OPENING.match(rx.pattern)) is not None}
_WORD_START = frozenset(_BUILTIN[: len(TOKEN_SHAPES)])
_IN_WORD = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """The values worth masking among an environment's variables: those of secret-looking names,
    at least MIN_SECRET_CHARS long, not a path that exists; a value of several lines by its lines."""
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


_BUILTIN_SET = frozenset(_BUILTIN)


def _groups(m: re.Match[str]) -> list[tuple[int, int]]:
    """What of a match to mask: its groups that matched, or all of it when it has none."""
    if m.re.groups:
        return [m.span(g) for g in range(1, m.re.groups + 1) if m.start(g) >= 0 and m.end(g) > m.start(g)]
    return [m.span()] if m.end() > m.start() else []


class Redactor:
    """Masks secrets in text (see the module docstring). ``Redactor.off()`` masks nothing."""

    def __init__(
        self, values: Iterable[str] = (), patterns: Iterable[re.Pattern[str]] = _BUILTIN, *, names: bool = True
    ):
        self.values = tuple(v for v in values if v and "\n" not in v)
        self.patterns = tuple(patterns)
        self.names = names  # values given a secret's name (named_spans)

    @classmethod
    def off(cls) -> Redactor:
        return cls((), (), names=False)

    @classmethod
    def for_run(cls, environ: Mapping[str, str] | None = None, user_patterns: Iterable[str] = ()) -> Redactor:
        """The environment's secret values, the built-in token shapes and the user's patterns."""
        env = os.environ if environ is None else environ
        return cls(secret_values(env), _BUILTIN + compile_patterns(user_patterns))

    def with_values(self, values: Iterable[str]) -> Redactor:
        """This redactor, also masking ``values`` (an adapter's environment for the agent)."""
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
        for rx in self.patterns:
            if rx in _BUILTIN_SET:
                if _BUILTIN_LITERAL.get(rx, "") not in text:
                    continue
                for m in rx.finditer(text):
                    if rx in _WORD_START and m.start() and text[m.start() - 1] in _IN_WORD:
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
        """``text`` with every secret's characters as ``*`` (same length, same lines)."""
        if not self.active or not text:
            return text
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
        """``mask`` of bytes read as UTF-8 (undecodable bytes pass through as they are)."""
        if not self.active or not data:
            return data
        text = data.decode("utf-8", "surrogateescape")
        masked = self.mask(text)
        return data if masked is text else masked.encode("utf-8", "surrogateescape")

    def mask_obj(self, obj: Any) -> Any:
        """Every string in a JSON-like value masked (dict keys stay as they are, and so do the
        values of STRUCTURAL keys: paths and directories, which a restarted runtime matches)."""
        if not self.active:
            return obj
        if isinstance(obj, str):
            return self.mask(obj)
        if isinstance(obj, dict):
            return {k: v if k in STRUCTURAL else self.mask_obj(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.mask_obj(v) for v in obj]
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
