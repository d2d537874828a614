"""``ledger-run config``: every setting with its default and what it does, as TOML a user can start
from; and the check of a file against what LedgerConfig accepts."""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from dataclasses import fields
from pathlib import Path

from .config import LedgerConfig, load_config


def setting_docs() -> dict[str, str]:
    """Setting name -> its description (the docstring under the field in config.py)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(LedgerConfig)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, after in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr) \
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string
    raise TypeError(type(v).__name__)


def starter_toml(width: int = 100) -> str:
    """The defaults as TOML, every key commented out (a file made from it changes nothing until a
    line is uncommented), each under what it does."""
    docs = setting_docs()
    default = LedgerConfig()
    out = ["# ledger-run settings (ledger-run --ledger-config FILE, or [ledger] in a larger file).",
           "# Every line below is a default, commented out: uncomment what you change.",
           "# Check a file with: ledger-run config --check FILE", ""]
    for f in fields(LedgerConfig):
        if f.name == "policies":
            continue
        for line in textwrap.wrap(docs.get(f.name, ""), width - 2, break_on_hyphens=False):
            out.append(f"# {line}")
        out += [f"# {f.name} = {toml_value(getattr(default, f.name))}", ""]
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
    return {f.name: getattr(config, f.name) for f in fields(LedgerConfig) if getattr(config, f.name) != getattr(default, f.name)}
