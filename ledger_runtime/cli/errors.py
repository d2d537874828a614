"""How a command of ``ledger-run`` (the core's and the adapters') says what went wrong: one line on
stderr, and its exit code."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.text import Text

from ledger_runtime.cli.printable import visible

stderr = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error and exit. The message is text, never markup: it may quote a path or a
    command (its control characters escaped)."""
    say("error:", message)
    raise typer.Exit(code)


def say(label: str, message: str) -> None:
    """One line on stderr under ``label`` (``damaged:``), the message as text, never markup."""
    stderr.print(Text.assemble((label, "red"), " ", visible(message)), highlight=False, soft_wrap=True)


class DamagedExit(SystemExit):
    """Exit code 1 for a damaged ledger, kept when its reader has left as well (``| head``): main makes a reader
    gone 141, which said nothing of the damage."""
