"""``ledger-run config``: every setting with its default and what it does, as starter TOML, and the check of a file."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

from ledger_runtime.config import FLAT, SECTIONS, LedgerConfig, load_config
from ledger_runtime.decide.policies import BUILTINS
from ledger_runtime.section import Section, dotted, whole


def _docs_of(kind: type[Section]) -> dict[str, str]:
    """Key -> its description: the docstring under the field in the section's class."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(kind)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, after in zip(body, body[1:]):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split()).replace("``", "`")
    return docs


def setting_docs() -> dict[str, str]:
    """Every setting's sectioned name (``ledger.dedupe.min_lines``) -> the docstring under its field."""
    out = {dotted("", k): d for k, d in _docs_of(LedgerConfig).items() if k in LedgerConfig.keys()}
    for name, kind in SECTIONS.items():
        docs = _docs_of(kind)
        out.update({dotted(name, "" if k == kind.whole else k): docs.get(k, "") for k in kind.keys()})
    return out


def toml_inline(value: object) -> str:
    """A value as inline TOML, for a settings line or ``codex -c key=value``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_inline(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {toml_inline(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML for {type(value).__name__}")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_string(key)


_ESCAPED = re.compile(r'["\\\x00-\x1f\x7f\ud800-\udfff]')
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: every character as it is but the quote, the backslash and the
    control characters, escaped. Not JSON's escapes: a character past U+FFFF (an emoji in a path or a
    command) is a pair of surrogates there, which TOML refuses, and Codex with it the ledger's hooks."""
    return '"' + _ESCAPED.sub(lambda m: _SHORT.get(m.group(), f"\\u{ord(m.group()):04x}"), text) + '"'


def _comment(text: str, width: int) -> list[str]:
    return [f"# {line}" for line in textwrap.wrap(text, width - 2, break_on_hyphens=False)]


def starter_toml(width: int = 100) -> str:
    """The defaults as TOML in their sections, each under what it does, commented out: the file changes nothing yet."""
    docs = setting_docs()
    default = LedgerConfig()
    out = [
        "# ledger-run settings: ledger-run mini|codex|claude|gemini|opencode --ledger-config FILE",
        "# (or the [ledger] tables in a larger file). Every line below is a default, commented out:",
        "# uncomment what you change. Each room's settings are a table; the flat names of older files",
        "# (dedupe_min_lines = 3) still load.",
        "# Every setting at more length, and its flat name: docs/settings.md.",
        "# Check a file with: ledger-run config --check FILE",
        "",
        "[ledger]",
    ]
    for key in LedgerConfig.keys():
        out += [*_comment(docs[dotted("", key)], width), f"# {key} = {toml_inline(getattr(default, key))}", ""]
    for name, kind in SECTIONS.items():
        section = getattr(default, name)
        out += ["", f"[{dotted(name, '')}]"]
        if kind.whole:
            out += _comment(docs[dotted(name, "")], width)
            out += [f"# [{dotted(name, 'protected-paths')}]", '# globs = ["tests/*"]', ""]
            continue
        for key, value in section.table().items():
            out += [*_comment(docs[dotted(name, key)], width), f"# {key} = {toml_inline(value)}", ""]
    return "\n".join(out)


def check(path: Path) -> LedgerConfig:
    """The config ``path`` gives; ConfigError names what is wrong (config.py's read: a device or an endless file is
    not read past a settings file's size; TOML nested past the recursion limit is not TOML to us)."""
    return load_config(path)


def changed(config: LedgerConfig) -> dict[str, object]:
    """The settings that differ from the defaults, by their sectioned names."""
    default, mine = LedgerConfig().to_dict(), config.to_dict()
    # a built-in rule's key set to what it is anyway (globs = [], revise_after = 3) changes nothing
    rules = {name: params for name, (_, params) in BUILTINS.items()}
    out: dict[str, object] = {}
    for flat, (section, key) in FLAT.items():
        if mine[flat] != default[flat]:
            name = dotted(section, "" if key == getattr(SECTIONS.get(section), "whole", None) else key)
            out.update(_leaves(name, mine[flat], rules if section == "policies" else default[flat]))
    return out


def _is_count(default: object) -> bool:
    """Whether a built-in rule's key of this default takes a whole number (an int; a bool is not one)."""
    return isinstance(default, int) and not isinstance(default, bool)


def _leaves(name: str, value: object, default: object) -> dict[str, object]:
    """A table's changed keys, each by its dotted name (``ledger.policies.stale-edit.enabled``), so that what
    a file changes is said key by key, not as "a table"; any other value is its own leaf, as the rule takes it: a
    built-in rule's whole-number key written ``2.0`` is counted with 2 (gate.build_rules), so it is shown as 2."""
    if not isinstance(value, dict):
        if _is_count(default) and whole(value) is not None:
            return {name: whole(value)}
        return {name: value}
    was = default if isinstance(default, dict) else {}
    out: dict[str, object] = {}
    for key, v in value.items():
        if key not in was or was[key] != v:
            out.update(_leaves(f"{name}.{_toml_key(key)}", v, was.get(key)))
    return out
