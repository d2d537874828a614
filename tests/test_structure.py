"""The structure the code keeps: no import cycles (function-level imports included), the core
imports no agent, model library or container engine, and adapters reach the core through its
public API (``ledger_runtime``'s ``__init__``) only; neither imports the evaluation harness
(``ledger_harness``, harness/), which builds on both. Read from the source with ``ast``: nothing is
imported, so a cycle hidden inside a function is found too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ledger_runtime

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "ledger_runtime": ROOT / "ledger_runtime",
    "ledger_adapters": ROOT / "adapters",
    "ledger_harness": ROOT / "harness",
}
AGENT_LIBRARIES = ("ledger_adapters", "minisweagent", "litellm", "docker", "tau2", "openai", "yaml")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg, base in PACKAGES.items():
        for path in base.rglob("*.py"):
            parts = [pkg, *path.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()
API = dict(ledger_runtime._EXPORTS)  # name -> the module of ledger_runtime that defines it


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path) -> set[str]:
    """What module ``name`` imports, those under ``if TYPE_CHECKING`` included (a type an import
    names is a dependency, whether or not the import runs)."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):  # imports for type checking are imports too
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - child.level + 1]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                found.add(mod)
                for a in child.names:  # `from pkg import submodule`
                    if f"{mod}.{a.name}" in MODULES:
                        found.add(f"{mod}.{a.name}")
                    elif mod == "ledger_runtime" and a.name in API:  # a name of the API: where it is defined
                        found.add(f"ledger_runtime:{a.name}")
            visit(child)

    visit(tree)
    return found


def _resolve(target: str) -> str | None:
    """The project module an import names (the longest known prefix; for a name of the public API, the
    module that defines it: it is loaded on first use), or None."""
    if target.startswith("ledger_runtime:"):
        return f"ledger_runtime.{API[target.split(':', 1)[1]]}"
    parts = target.split(".")
    while parts:
        if ".".join(parts) in MODULES:
            return ".".join(parts)
        parts.pop()
    return None


GRAPH = {m: {r for t in _imports(m, p) if (r := _resolve(t)) and r != m} for m, p in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_the_graph_is_read():
    # the reading itself must see real edges, or the checks below would pass on nothing
    assert "ledger_runtime.ledger.store" in GRAPH["ledger_runtime.runtime"]
    assert "ledger_runtime" in GRAPH["ledger_adapters.mini.environment"]
    assert "ledger_harness.replay.engine" in GRAPH["ledger_harness.replay.cli"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def _room(module: str) -> str:
    """The room a module is in: its subpackage (``ledger_runtime.decide``), or itself at the top."""
    return ".".join(module.split(".")[:2])


ROOMS = {}
for _m, _targets in GRAPH.items():
    ROOMS.setdefault(_room(_m), set()).update(_room(t) for t in _targets if _room(t) != _room(_m))


def test_no_cycles_between_rooms():
    # the subpackages layer: a room never imports, through any module, a room that imports it
    cycles = _cycles(ROOMS)
    assert not cycles, "rooms in a cycle: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_core_imports_no_agent():
    bad = {
        m: sorted(t for t in _imports(m, p) if t.split(".")[0] in AGENT_LIBRARIES)
        for m, p in MODULES.items()
        if m.startswith("ledger_runtime")
    }
    assert not {m: t for m, t in bad.items() if t}


def test_neither_the_core_nor_an_adapter_imports_the_harness():
    # the harness (replay, SWE-bench arms, tau2) joins ledger-run through entry points; the runtime
    # and the adapters work without it
    bad = {
        m: sorted(t for t in _imports(m, p) if t.split(".")[0] == "ledger_harness")
        for m, p in MODULES.items()
        if m.startswith(("ledger_runtime", "ledger_adapters"))
    }
    assert not {m: t for m, t in bad.items() if t}


def test_the_harness_check_sees_an_import_of_it(tmp_path):
    # the check above reads imports as the graph does: a function-level one counts too
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    from ledger_harness.replay import engine\n")
    assert "ledger_harness.replay" in _imports("ledger_runtime.m", mod)


def test_adapters_use_the_public_api_only():
    inner = {
        m: sorted(t for t in _imports(m, p) if t.startswith("ledger_runtime."))
        for m, p in MODULES.items()
        if m.startswith("ledger_adapters")
    }
    assert not {m: t for m, t in inner.items() if t}


def test_the_public_api_resolves():
    for name in ledger_runtime.__all__:
        assert getattr(ledger_runtime, name) is not None, name
    with pytest.raises(AttributeError):
        ledger_runtime.no_such_name  # noqa: B018


def test_every_package_is_listed_for_installation() -> None:
    """pyproject.toml names the packages one by one: a new room left out of that list imports in a
    checkout (an editable install) and is missing from a wheel, where every import of it fails."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join([pkg, *init.parent.relative_to(base).parts])
        for pkg, base in PACKAGES.items()
        for init in base.rglob("__init__.py")
    }
    assert found - listed == set(), "packages missing from [tool.setuptools] packages in pyproject.toml"
    assert listed - found == set(), "packages listed in pyproject.toml that do not exist"
