"""The ``ledger-run`` command line (typer + rich).

Human output goes to the terminal through rich; ``--json`` prints plain, stable JSON on stdout.
Errors are one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ledger_runtime._version import __version__
from ledger_runtime.cli.errors import DamagedExit, fail, stderr  # adapters' commands use them too

app = typer.Typer(
    name="ledger-run",
    help="An execution ledger around coding agents: inform (a state view in the prompt) and govern "
    "(references to what the model holds, nudge, revise, block) for every shell command.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"ledger-run {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Optional[bool] = typer.Option(
        None, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """ledger-run: wrap a coding agent in an execution ledger."""


@app.command()
def inspect(
    run: Path = typer.Argument(
        ...,
        help="A run directory (holding ledger.sqlite), a ledger file, a trajectory "
        "(.traj.json, by its info.ledger.path) or a SWE-bench OUT/<arm>/<instance>.",
    ),
    step: Optional[int] = typer.Option(
        None, "--step", "-s", help="Show the state view after this step (0: at the start, before any command)."
    ),
    output: bool = typer.Option(
        False, "--output", help="With --step: print the exact text the model received for that step's command."
    ),
    expand: bool = typer.Option(
        False,
        "--expand",
        help="With --step: print what that text stands for, every "
        "\\[ledger: ...] reference replaced by the bytes it names.",
    ),
    raw: bool = typer.Option(
        False,
        "--raw",
        help="With --step (its state view, --output or --expand): print the text byte for byte, control "
        "characters included, for pipes and files. Without it, control and bidi characters are shown "
        "escaped (\\x1b, \\u202e): a terminal would act on them.",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print machine-readable JSON on stdout: the summary, and per command what the model received "
        "(shown), what it stands for (expanded), the files it changed with their diffs and the state view "
        "after its step; with --step, that step's.",
    ),
    verdict: Optional[str] = typer.Option(
        None,
        "--verdict",
        help="Only commands with these verdicts in the timeline (comma-separated: RUN,REUSE,NUDGE,...).",
    ),
    command_class: Optional[str] = typer.Option(
        None,
        "--class",
        help="Only commands of these classes in the timeline (inspect,search,run,modify,env-change,other).",
    ),
    html: Optional[Path] = typer.Option(None, "--html", help="Write the run as one self-contained HTML page here."),
    trajectory: Optional[Path] = typer.Option(
        None,
        "--trajectory",
        help="With --html: the agent's own record of the run (a mini-swe-agent .traj.json, a Codex rollout), "
        "for the model's words, tokens and cost at each step. Default: the one beside the ledger.",
    ),
) -> None:
    """Look inside a ledger: the timeline, the summary, the state view at a step, or what the model
    received at a step."""
    from ledger_runtime.cli import inspect_command

    options = inspect_command.InspectOptions(
        run,
        step=step,
        output=output,
        expand=expand,
        raw=raw,
        as_json=as_json,
        verdict=verdict,
        command_class=command_class,
        html=html,
        trajectory=trajectory,
    )
    inspect_command.run(inspect_command.validate(options))


@app.command()
def config(
    write: Optional[Path] = typer.Option(
        None,
        "--write",
        help="Write a starter settings file here (every default, commented out) instead of printing it.",
    ),
    check: Optional[Path] = typer.Option(
        None, "--check", help="Validate a settings file: say what it changes, or the one thing wrong with it."
    ),
    force: bool = typer.Option(False, "--force", help="With --write: replace an existing file."),
) -> None:
    """Every setting with its default and what it does (TOML), a starter file, or the check of one."""
    from ledger_runtime.config import ConfigError
    from ledger_runtime.config_file import changed, starter_toml, toml_inline
    from ledger_runtime.config_file import check as check_file

    if check is not None and write is not None:
        fail("give --write FILE or --check FILE, not both")
    if force and write is None:
        fail("--force goes with --write FILE (it replaces an existing file)")
    if check is not None:
        if check.is_dir():
            fail(f"--check {check} is a directory: give a settings file (TOML)")
        try:
            cfg = check_file(check)
        except ConfigError as e:
            fail(str(e))
            return
        except OSError as e:
            fail(f"cannot read --check {check}: {e.strerror or e}")
            return
        diff = changed(cfg)
        print(
            f"{check}: valid; "
            + (
                ", ".join(f"{k} = {toml_inline(v)}" for k, v in diff.items())
                if diff
                else "every setting at its default"
            )
        )
        return
    if write is None:
        sys.stdout.write(starter_toml())
        return
    _write_starter(write, force, starter_toml())


def _write_starter(write: Path, force: bool, text: str) -> None:
    """``config --write FILE``: the starter file, owner-only, replacing a file only with ``--force``."""
    from ledger_runtime.cli.printable import shell_word
    from ledger_runtime.ledger.private import write_private

    if write.is_dir():  # --force would not help: "pass --force" led to "it is not a regular file"
        fail(f"--write {write} is a directory: give a file, {shell_word(write / 'ledger.toml')} say")
    if write.exists() and not write.is_file() and not write.is_symlink():  # a device, a FIFO: --force would not help
        fail(f"--write {write} is not a regular file: give a file, {shell_word(write.parent / 'ledger.toml')} say")
    if write.exists() and not force:
        fail(f"{write} exists: pass --force to replace it")
    try:
        write_private(write, text)
    except OSError as e:
        fail(f"cannot write {write}: {e.strerror or e}")
    stderr.print(
        f"wrote {write}: every setting at its default, commented out; use it with --ledger-config {shell_word(write)}",
        highlight=False,
        markup=False,
        soft_wrap=True,  # one line, the path whole for copying
    )


def _plugins() -> None:
    """Commands that adapters add (``ledger_runtime.commands`` entry points): registered by name,
    so the core never imports an adapter itself. A broken plugin costs its commands, nothing more."""
    from importlib.metadata import entry_points

    for ep in entry_points(group="ledger_runtime.commands"):
        try:
            ep.load()(app)
        except Exception as e:
            stderr.print(f"[yellow]warning:[/yellow] commands from {ep.value} unavailable: {e}")


_plugins()

# the order a new user meets them in: the main job, the agents, looking inside, the settings, the benchmarks
ORDER = ("demo", "mini", "codex", "claude", "inspect", "config", "replay", "swebench", "report", "tau2-gate")


def _tidy_help() -> None:
    """The commands listed in ``ORDER``, each described by the first sentence of its docstring on one
    line (a docstring's own line breaks would break the listing mid-sentence); flags shown with no
    type after them (typer shows ``<bool>`` after every flag, which takes no value), a value given once
    per use by its own type (``<path>``, not ``<list[Path]>``), and arguments in the usage line as
    ``RUN`` and ``[CODEX_ARGS]...`` (typer writes ``{run}``)."""
    rank = {name: n for n, name in enumerate(ORDER)}

    def name(c) -> str:  # type: ignore[no-untyped-def]
        return c.name or (c.callback.__name__.replace("_", "-") if c.callback else "")

    app.registered_commands.sort(key=lambda c: rank.get(name(c), len(ORDER)))
    for c in app.registered_commands:
        doc = c.help or (c.callback.__doc__ if c.callback else None) or ""
        first = " ".join(doc.strip().split("\n\n")[0].split())
        if first and c.short_help is None:
            c.short_help = first
    _plain_parameters()


def _plain_parameters() -> None:
    """Once: how typer shows parameters in help, as ``_tidy_help`` says."""
    from typer.core import TyperArgument, TyperOption

    if getattr(TyperOption, "_ledger_plain", False):
        return
    for cls in (TyperOption, TyperArgument):
        cls.display_type_rich = _shown_type(cls.display_type_rich)  # type: ignore[method-assign]
        cls._ledger_plain = True  # type: ignore[attr-defined]
    TyperArgument._usage_display_name = _usage_name  # type: ignore[method-assign]
    TyperArgument.get_error_hint = _error_name  # type: ignore[method-assign]


def _shown_type(shown):  # type: ignore[no-untyped-def]
    """typer's type of a parameter in help: none for a flag, the element's for a list."""

    def display_type_rich(self, ctx):  # type: ignore[no-untyped-def]
        if getattr(self, "is_flag", False):
            return None
        text = shown(self, ctx)
        if isinstance(text, str) and text.startswith("<list[") and text.endswith("]>"):
            return f"<{text[6:-2].lower()}>"
        return text

    return display_type_rich


def _error_name(self) -> str:  # type: ignore[no-untyped-def]
    """An argument as an error names it (``Missing argument 'RUN'``): as the usage line does."""
    return f"'{(self.metavar or self.name or '').upper().replace('-', '_')}'"


def _usage_name(self) -> str:  # type: ignore[no-untyped-def]
    """An argument in the usage line: ``RUN`` when required, ``[CODEX_ARGS]`` when not, ``...`` when repeated."""
    name = _error_name(self).strip("'")
    name = name if self.required else f"[{name}]"
    return name + ("..." if self.nargs != 1 else "")


@app.command(hidden=True, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def hook(
    ctx: typer.Context,
    event: str = typer.Argument(
        ..., help="The agent's hook event: SessionStart, UserPromptSubmit, PreToolUse, PostToolUse."
    ),
    socket_path: Optional[str] = typer.Option(
        None, "--socket", help="The run's hook server (default: $LEDGER_HOOK_SOCKET)."
    ),
    run_dir: Optional[str] = typer.Option(
        None, "--run-dir", help="Where faults are logged (default: $LEDGER_RUN_DIR)."
    ),
) -> None:
    """Serve one agent hook event: its JSON on stdin, the answer on stdout (ledger-run codex registers this).
    A fault never blocks the agent: the command runs and the fault goes to the run's faults.log."""
    from ledger_runtime.hooks.client import main as hook_main

    args = (
        [event]
        + (["--socket", socket_path] if socket_path else [])
        + (["--run-dir", run_dir] if run_dir else [])
        + list(ctx.args)
    )  # --token
    raise typer.Exit(hook_main(args))


def _close_suggestions_only(e: Exception) -> None:
    """An unknown option's suggestions (click's ``Possible options``) kept only where they are like it
    by name: click compares them dashes included, so ``--bogus`` was offered ``--out``."""
    from difflib import SequenceMatcher

    given = str(getattr(e, "option_name", "") or "").lstrip("-")
    possibilities = getattr(e, "possibilities", None)
    if given and possibilities:
        e.possibilities = [p for p in possibilities if SequenceMatcher(None, given, p.lstrip("-")).ratio() >= 0.7]


EXIT_STDOUT_CLOSED = 141  # 128 + SIGPIPE: what a shell reports of `git log | head`, a reader that left early


def _stdout_closed(at_start: tuple[int, int] | None) -> bool:
    """Whether a write met a closed standard output (EPIPE: ``ledger-run inspect RUN | head``) and the rest was sent
    nowhere: click wraps the stream (its PacifyFlushWrapper), rich puts /dev/null on its descriptor (``at_start``:
    what was there before, by device and inode); each then exits 1."""
    if type(sys.stdout).__name__ == "PacifyFlushWrapper":
        return True
    now, null = _fd_identity(1), _fd_identity(None)
    return now is not None and now == null and now != at_start


def _fd_identity(fd: int | None) -> tuple[int, int] | None:
    """The device and inode of descriptor ``fd`` (None: of /dev/null), or None when there is none."""
    import os

    try:
        st = os.fstat(fd) if fd is not None else os.stat(os.devnull)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _refuse_a_closed_stdout() -> None:
    """``ledger-run ... >&-``: Python has no standard output to print to, and the first print was a traceback."""
    if sys.stdout is None:
        if sys.stderr is not None:
            print(
                "error: standard output is closed: give it a file, or /dev/null to drop what it prints", file=sys.stderr
            )
        sys.exit(2)


def main() -> None:
    """Entry point of the ``ledger-run`` script (entry.py sends ``hook`` straight to hookclient.py)."""
    try:  # typer 0.2x carries its own click
        from typer._click.exceptions import ClickException, UsageError
    except ImportError:  # a typer that uses click itself
        from click.exceptions import ClickException, UsageError  # type: ignore[no-redef]
    Abort = typer.Abort
    from ledger_runtime.cli.interrupt import interrupted

    _tidy_help()
    _refuse_a_closed_stdout()
    stdout_at_start = _fd_identity(1)
    try:
        code = app(standalone_mode=False)
    except SystemExit as e:
        # click and rich exit 1 for a reader gone (`| head`): inspect's exit code for a damaged ledger
        if e.code == 1 and not isinstance(e, DamagedExit) and _stdout_closed(stdout_at_start):
            sys.exit(EXIT_STDOUT_CLOSED)
        raise
    except (KeyboardInterrupt, Abort):
        interrupted()
    except UsageError as e:  # one line, with where to look, as every other error
        if type(e).__name__ == "NoArgsIsHelpError":  # no arguments: the help, as asked for by no_args_is_help
            if e.format_message().strip():
                e.show()
            sys.exit(2)
        where = e.ctx.command_path if e.ctx is not None else "ledger-run"
        _close_suggestions_only(e)
        stderr.print(f"[red]error:[/red] {e.format_message()} (see {where} --help)", highlight=False, soft_wrap=True)
        sys.exit(2)
    except ClickException as e:
        stderr.print(f"[red]error:[/red] {e.format_message()}", highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    if code == 130:  # typer turns Ctrl-C in a command into a silent exit 130; commands that say more exit themselves
        interrupted()
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
