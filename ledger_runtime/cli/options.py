"""The ledger's options of a ``ledger-run <agent>`` command (``mini``, ``codex``, ``claude``), declared
once: where the agent works (``-w``), where the run goes (``-o``), the ledger's settings and its
switches (``--ledger-config``, ``--no-inform``, ``--no-govern``, ``--shadow``). ``LedgerOptions`` holds
what they say, for the command's own options object, and declares each: a command's parameter has
``LedgerOptions.switch_option("--shadow")`` (or ``workdir_option()``, ...) as its default."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from ledger_runtime.cli.errors import fail

# the ledger's switches and what they do
SWITCHES = {
    "--no-inform": "Do not give the model the state view.",
    "--no-govern": "Run every command (verdicts are still recorded).",
    "--shadow": "Record and decide only: run every command, no state view.",
}


@dataclass(frozen=True)
class LedgerOptions:
    """The ledger's options of one ``ledger-run <agent>`` command, as given."""

    workdir: Path = Path(".")
    run_dir: Path | None = None
    ledger_config: Path | None = None
    no_inform: bool = False
    no_govern: bool = False
    shadow: bool = False

    @staticmethod
    def workdir_option() -> Any:
        """``-w/--workdir``: the repository the agent works in."""
        return typer.Option(Path("."), "--workdir", "-w", help="The repository the agent works in.")

    @staticmethod
    def run_dir_option(what: str) -> Any:
        """``-o/--out/--run-dir``: where ``what`` (the ledger and the agent's own files) go."""
        return typer.Option(None, "-o", "--out", "--run-dir", help=f"Where {what} go (default: ledger-runs/<time>).")

    @staticmethod
    def ledger_config_option() -> Any:
        """``--ledger-config``: the ledger's settings file."""
        return typer.Option(None, "--ledger-config", help="Ledger settings (TOML).")

    @staticmethod
    def switch_option(flag: str, help: str | None = None) -> Any:
        """A switch of the ledger's (``--no-inform``, ``--no-govern``, ``--shadow``: ``SWITCHES``), with its
        help or the command's own words for it."""
        return typer.Option(False, flag, help=help or SWITCHES[flag])

    def config(self, defaults: dict[str, Any] | None = None) -> Any:
        """The ledger's settings with the switches; a bad settings file is a one-line error."""
        from ledger_runtime.cli.agents import agent_config

        return agent_config(
            self.ledger_config,
            no_inform=self.no_inform,
            no_govern=self.no_govern,
            shadow=self.shadow,
            defaults=defaults,
        )


def checked_workdir(workdir: Path) -> Path:
    """``--workdir``, absolute; a one-line error when it is not a directory."""
    workdir = workdir.resolve()
    if not workdir.is_dir():
        fail(f"--workdir {workdir} is not a directory")
    return workdir
