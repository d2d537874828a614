"""How a command of ``ledger-run`` (the core's and the adapters') says what went wrong: one line on
stderr, and its exit code."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.text import Text

from ledger_runtime.cli.printable import visible

err = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error and exit. The message is text, never markup: it may quote a path or a
    command (its control characters escaped)."""
    err.print(Text.assemble(("error:", "red"), " ", visible(message)), highlight=False, soft_wrap=True)
    raise typer.Exit(code)
