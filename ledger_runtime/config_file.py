"""``ledger-run config``: every setting with its default and what it does, as TOML a user can start
from; and the check of a file against what LedgerConfig accepts."""

from __future__ import annotations

import ast
import inspect
import json
import re
import textwrap
from dataclasses import fields
from pathlib import Path

from ledger_runtime.config import LedgerConfig, load_config


def setting_docs() -> dict[str, str]:
    """Setting name -> its description (the docstring under the field in config.py)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(LedgerConfig)))
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


def toml_inline(value: object) -> str:
    """A value as inline TOML (a settings line, ``codex -c key=value``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_inline(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {toml_inline(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML for {type(value).__name__}")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def starter_toml(width: int = 100) -> str:
    """The defaults as TOML, every key commented out (a file made from it changes nothing until a
    line is uncommented), each under what it does."""
    docs = setting_docs()
    default = LedgerConfig()
    out = [
        "# ledger-run settings: ledger-run mini|codex --ledger-config FILE (or a [ledger] table in a larger",
        "# file, with every setting in that table). Every line below is a default, commented out: uncomment",
        "# what you change. Every setting at more length: docs/settings.md.",
        "# Check a file with: ledger-run config --check FILE",
        "",
    ]
    for f in fields(LedgerConfig):
        if f.name == "policies":
            continue
        for line in textwrap.wrap(docs.get(f.name, ""), width - 2, break_on_hyphens=False):
            out.append(f"# {line}")
        out += [f"# {f.name} = {toml_inline(getattr(default, f.name))}", ""]
    for line in textwrap.wrap(docs.get("policies", ""), width - 2, break_on_hyphens=False):
        out.append(f"# {line}")
    out += ["# [policies.protected-paths]", '# globs = ["tests/*"]', ""]
    return "\n".join(out)


def check(path: Path) -> LedgerConfig:
    """The config ``path`` gives (ConfigError names what is wrong)."""
    return load_config(path)


def changed(config: LedgerConfig) -> dict[str, object]:
    """The settings that differ from the defaults."""
    default = LedgerConfig()
    return {
        f.name: getattr(config, f.name)
        for f in fields(LedgerConfig)
        if getattr(config, f.name) != getattr(default, f.name)
    }
