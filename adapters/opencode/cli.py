"""``ledger-run opencode``: the real ``opencode`` binary with the ledger in a plugin, for one run.

The plugin (plugin.js, written for the run as ``RUN_DIR/opencode/ledger.js``, owner-only, with the
run's hook server address and secret) is added for this run only through ``OPENCODE_CONFIG_CONTENT``,
the configuration OpenCode merges after the user's own files: the user's configuration, providers and
login (``~/.local/share/opencode/auth.json``) are used where they are, never copied. It runs inside
OpenCode and asks the HTTP hook server this process runs (ledger_runtime/hooks/http.py), with the
runtime in memory, over loopback: no process per call. Only OpenCode's own process speaks for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import typer

from ledger_runtime import AgentOptions, UnreadableJSON, ctrl_c_is_the_agents, json_value, warn_unheard

OPENCODE_VERSION = "1.18.33"  # the version this adapter is checked against (see README)
INSTALL_HINT = f"npm install -g opencode-ai@{OPENCODE_VERSION}"
PLUGIN = Path(__file__).with_name("plugin.js")


def register(app: typer.Typer) -> None:
    from ledger_runtime import agent_command, agent_context

    command = agent_command(
        "opencode",
        lambda options: run(validate(options)),
        example='run "fix the failing test"',
        kept="the run's plugin",
        pinned=OPENCODE_VERSION,
        doc="OpenCode (`opencode run ...` or the TUI) with the ledger in a plugin.",
    )
    app.command(name="opencode", context_settings=agent_context)(command)


def find_opencode(explicit: str | None) -> str | None:
    from ledger_runtime import find_binary

    return find_binary(explicit, "LEDGER_OPENCODE_BIN", "opencode")


def interactive(args: list[str]) -> bool:
    """Whether opencode runs its TUI (no subcommand such as ``run``): a person reads the next prompt."""
    return not any(not a.startswith("-") for a in args[:1])


def with_plugin(given: str | None, plugin: Path) -> str:
    """``OPENCODE_CONFIG_CONTENT`` for the run: the user's own (a JSON object, if any) with the ledger's
    plugin added after theirs. ValueError when theirs is not a JSON object."""
    try:
        config: Any = json_value(given, dict) if given and given.strip() else {}
    except UnreadableJSON as e:
        raise ValueError(f"OPENCODE_CONFIG_CONTENT: {e}") from None
    plugins = config.get("plugin") if isinstance(config.get("plugin"), list) else []
    return json.dumps({**config, "plugin": [*plugins, plugin.as_uri()]})


def plugin_source(url: str, token: str, is_interactive: bool) -> str:
    """The run's plugin: plugin.js with the hook server's address and the run's secret."""
    return (
        PLUGIN.read_text()
        .replace("__LEDGER_URL__", url)
        .replace("__LEDGER_TOKEN__", token)
        .replace("__LEDGER_INTERACTIVE__", "true" if is_interactive else "false")
    )


@dataclass(frozen=True)
class OpenCodeRun:
    """A ``ledger-run opencode`` that can start: the options checked, the binary found."""

    options: AgentOptions
    binary: str
    workdir: Path
    config: Any


def run_dir_arg(args: list[str]) -> str | None:
    """The directory ``opencode run --dir DIR`` (or ``--dir=DIR``) names, if any; None for another command, or a
    run attached to a server (``--attach``: its --dir is a path on that server)."""
    if not args or args[0] != "run" or any(a == "--attach" or a.startswith("--attach=") for a in args):
        return None
    for i, a in enumerate(args):
        if a == "--":
            return None
        if a == "--dir" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--dir="):
            return a[6:]
    return None


# opencode's commands (``opencode --help``, 1.18.33): any other first word is the TUI's: ``opencode [project]``
COMMANDS = frozenset(
    "completion acp mcp attach run debug providers auth agent upgrade uninstall serve web models stats export import "
    "github pr session plugin plug db".split()
)
# the TUI's options that take no value; any other takes the word after it (``--model p/m``: not the project), as
# opencode's parser (yargs) gives an option it does not know one too; ``--cors`` takes every word after it
TUI_FLAGS = frozenset(
    "--print-logs --pure --mdns -c --continue --fork --auto --mini --no-replay -h --help -v --version".split()
)


def tui_project_arg(args: list[str]) -> int | None:
    """Where in ``args`` the TUI's ``opencode [project]`` names the directory it starts in, if it does; None for a
    command (``run``, ``serve``...) or a TUI started where it is."""
    if not args or args[0] in COMMANDS:
        return None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return None
        if a == "--cors":
            return None  # an array: every word after it is one of its domains
        if not a.startswith("-") or a == "-":
            return i
        i += 1 if "=" in a or a in TUI_FLAGS else 2
    return None


def with_run_dir(args: list[str], workdir: str) -> list[str]:
    """``args`` with the directory of ``run --dir`` replaced by ``workdir``."""
    out = list(args)
    for i, a in enumerate(out):
        if a == "--":
            break
        if a == "--dir" and i + 1 < len(out):
            out[i + 1] = workdir
            break
        if a.startswith("--dir="):
            out[i] = "--dir=" + workdir
            break
    return out


def validate(options: AgentOptions, env: dict[str, str] | None = None) -> OpenCodeRun:
    """The run ``options`` ask for, or the one-line error (``fail``) of the first thing wrong with them:
    the work tree (``run --dir``, or the TUI's project, when ``--workdir`` is not given; the two naming different
    directories is refused: the ledger watched one, OpenCode worked in the other), the binary, the ledger's settings,
    the user's ``OPENCODE_CONFIG_CONTENT``."""
    import os

    from ledger_runtime import binary_not_found, checked_workdir, fail

    args = list(options.args)
    project = tui_project_arg(args)
    given = run_dir_arg(args) if project is None else args[project]
    if project is not None and not Path(given).is_dir():
        fail(
            f"opencode's project {given} is not a directory: `opencode DIR` starts its TUI in DIR "
            "(a prompt goes to `opencode run PROMPT`)"
        )
    workdir = options.ledger.workdir
    named = workdir != Path(".")
    if given is not None and not named:
        workdir = Path(given)  # opencode run --dir DIR: the ledger watches the same directory
    workdir = checked_workdir(workdir)
    if given is not None and named and Path(given).resolve() != workdir:
        what = f"opencode's --dir {given}" if project is None else f"opencode's project {given}"
        fail(
            f"--workdir {workdir} and {what} name different directories (the ledger would watch "
            "one, OpenCode work in the other): give one of them"
        )
    if project is not None:  # opencode starts in the workdir: its project must not be relative to here
        options = replace(options, args=tuple(args[:project] + [str(workdir)] + args[project + 1 :]))
    elif given is not None:
        options = replace(options, args=tuple(with_run_dir(args, str(workdir))))
    binary = find_opencode(options.binary)
    if binary is None:
        fail(binary_not_found(options.binary, "LEDGER_OPENCODE_BIN", "opencode", INSTALL_HINT, "--opencode-bin"))
    config = options.ledger.config()
    try:
        with_plugin((os.environ if env is None else env).get("OPENCODE_CONFIG_CONTENT"), PLUGIN)
    except ValueError as e:
        fail(f"{e}: the ledger adds its plugin to it")
    return OpenCodeRun(options, binary, workdir, config)


def run(valid: OpenCodeRun) -> int:
    """Run opencode as ``valid`` says, with the ledger in its plugin; its exit code."""
    from ledger_runtime import run_pinned

    args = list(valid.options.args)

    def start(run_dir: Path, version: str | None) -> int:
        meta = {"agent": "opencode", "opencode_version": version, "opencode_args": args}
        return run_opencode(valid.binary, args, valid.workdir, run_dir, valid.config, meta=meta)

    def kept(run_dir: Path) -> str:
        return f"OpenCode's sessions (masked copies): {run_dir / 'sessions'}"

    pinned = (OPENCODE_VERSION, INSTALL_HINT)
    return run_pinned("opencode", valid.binary, pinned, valid.options.ledger.run_dir, valid.workdir, start, kept)


@ctrl_c_is_the_agents
def run_opencode(
    binary: str,
    args: list[str],
    workdir: Path,
    run_dir: Path,
    config: Any,
    *,
    meta: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> int:
    """Run opencode with the ledger's plugin until it exits; returns its exit code."""
    import os
    import secrets

    from ledger_adapters.opencode.hooks import OPENCODE_TRUNCATION, OpenCodeHooks
    from ledger_adapters.opencode.session import auth_path, db_path, export
    from ledger_runtime import (
        HttpHookServer,
        LedgerRuntime,
        file_secrets,
        loopback_unproxied,
        private_dir,
        run_agent,
        write_private,
    )

    base = dict(env if env is not None else os.environ)
    # the values of the user's login (OAuth's "refresh" and "access" bear no secret's name): masked in what is kept
    login = tuple(file_secrets(auth_path(base), all_values=True))
    runtime = LedgerRuntime(workdir, run_dir, config, meta=meta, truncation=OPENCODE_TRUNCATION, secrets=login)
    db = db_path(base)
    hooks = OpenCodeHooks(runtime, db, note_chars=config.context.note_chars)
    token = secrets.token_hex(16)  # the run's secret: in the owner-only plugin, never in the environment
    try:
        server = HttpHookServer(hooks.handle, runtime.report_fault, token)
    except BaseException:
        runtime.close()
        raise
    try:
        plugin = private_dir(run_dir / "opencode") / "ledger.js"
        write_private(plugin, plugin_source(server.url(""), token, interactive(args)))
        child_env = loopback_unproxied(
            {k: v for k, v in base.items() if k not in ("LEDGER_HOOK_SOCKET", "LEDGER_RUN_DIR")}
        )
        child_env.update(
            OPENCODE_CONFIG_CONTENT=with_plugin(base.get("OPENCODE_CONFIG_CONTENT"), plugin), PWD=str(workdir)
        )
        # only opencode's own process speaks for it: a command it runs is another process
        return run_agent([binary, *args], workdir, child_env, server.launched)
    finally:
        server.close()
        with server.lock:
            try:
                hooks.finish()
            except Exception as e:
                runtime.report_fault("finishing the run", e)
            try:
                keep_sessions(export(db, hooks.sessions), run_dir / "sessions", runtime.redactor)
            except Exception as e:
                runtime.report_fault("keeping OpenCode's sessions", e)
            runtime.close()
        warn_unheard("OpenCode", server.handled)  # after the finish: a warning that cannot be printed cuts nothing


def keep_sessions(sessions: dict[str, dict[str, Any]], out: Path, redactor: Any) -> None:
    """Masked copies (owner-only) of the run's sessions from OpenCode's database, one JSON file each."""
    from ledger_runtime import masked, private_dir, write_private

    if not sessions:
        return
    private_dir(out)
    for sid, session in sessions.items():
        write_private(out / f"{sid}.json", json.dumps(masked(session, redactor), indent=1) + "\n")
