"""What a command needs beyond the base install (``pip install ledger-runtime``: codex, claude,
inspect, replay, config), and the extra of pyproject.toml that brings it: mini-swe-agent for ``mini``
and ``demo`` (``[mini]``), the SWE-bench arms and their report (``[swebench]``: mini-swe-agent, the
Docker SDK, matplotlib) and the tau2 gate (``[tau2]``). A command whose extra is missing says which
one to install, in one line, and exits 2."""

from __future__ import annotations

import importlib


def install_line(extra: str) -> str:
    return f"pip install 'ledger-runtime[{extra}]'"


def missing(extra: str, module: str, what: str) -> str | None:
    """The one-line error when ``module`` (of ``extra``) cannot be imported, else None. Imported, not
    only looked up: a package that is there but broken is as missing."""
    try:
        importlib.import_module(module)
    except ImportError as e:
        name = (e.name or module).split(".")[0]
        return f"{what} needs {name}, which the base install leaves out: {install_line(extra)}"
    return None


def require(extra: str, module: str, what: str) -> None:
    """Fail the command (one line, exit 2) when ``module`` of ``extra`` is missing."""
    problem = missing(extra, module, what)
    if problem:
        from ledger_runtime import fail

        fail(problem)
