"""How a command of ``ledger-run`` (the core's and the adapters') says what went wrong: one line on
stderr, and its exit code."""

from __future__ import annotations

import typer
from rich.console import Console

err = Console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    """Print a one-line error and exit."""
    err.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)
