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


@dataclass(frozen=True)
class AgentOptions:
    """What a ``ledger-run <agent>`` around an agent's own binary was given: the ledger's options, the
    agent's own arguments (after ``--``), and its executable (``--<agent>-bin``; None: the default)."""

    ledger: LedgerOptions = LedgerOptions()
    args: tuple[str, ...] = ()
    binary: str | None = None


def agent_command(name: str, start: Any, *, example: str, kept: str, pinned: str, doc: str) -> Any:
    """The typer command ``ledger-run <name>`` of an agent whose only options are the ledger's and its
    binary's: it builds an ``AgentOptions`` and exits with ``start(options)``. ``example``: the agent's
    arguments as the help shows them; ``kept``: what goes in the run directory beside the ledger;
    ``pinned``: the version the adapter is checked against. Register it with ``agent_context``."""

    def command(
        ctx: typer.Context,
        agent_args: list[str] | None = typer.Argument(
            None, help=f"Arguments for {name}, after `--` (e.g. -- {example}; none: an interactive session)."
        ),
        workdir: Path = LedgerOptions.workdir_option(),
        run_dir: Path | None = LedgerOptions.run_dir_option(f"the ledger and {kept}"),
        ledger_config: Path | None = LedgerOptions.ledger_config_option(),
        no_inform: bool = LedgerOptions.switch_option("--no-inform"),
        no_govern: bool = LedgerOptions.switch_option("--no-govern"),
        shadow: bool = LedgerOptions.switch_option(
            "--shadow", "Record and decide only: outputs as they are, no state view."
        ),
        binary: str | None = typer.Option(
            None,
            f"--{name}-bin",
            help=f"The {name} executable (default: ${'LEDGER_' + name.upper() + '_BIN'} when set, else {name} on PATH; "
            f"pinned: {pinned}).",
        ),
    ) -> None:
        ledger = LedgerOptions(workdir, run_dir, ledger_config, no_inform, no_govern, shadow)
        raise typer.Exit(start(AgentOptions(ledger, (*(agent_args or []), *ctx.args), binary)))

    command.__doc__ = doc
    return command


# what a command around an agent's binary takes: options it does not know are the agent's
agent_context = {"allow_extra_args": True, "ignore_unknown_options": True}
