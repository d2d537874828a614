"""``ledger-run claude``: the real ``claude`` binary (Claude Code) with the ledger's hooks, for one run.

The hooks are installed for this run only, through a settings file of the run's own passed with
``--settings`` (Claude Code adds it to the user's own settings, which it still reads and which are
never written): the user's login (``~/.claude``, ``CLAUDE_CONFIG_DIR``) and ``ANTHROPIC_API_KEY`` /
``ANTHROPIC_BASE_URL`` are used as they are, never copied. A ``--settings`` of the user's own among
claude's arguments is merged into the run's file while claude runs (owner-only), and taken out of it
when claude exits: the file keeps the ledger's hooks only. The hooks call ``ledger-run hook EVENT``, which
talks to the hook server this process runs (ledger_runtime/hooks/server.py) with the runtime in
memory; the run's secret is on the hook command lines, in the run's owner-only settings file.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Optional

import typer

from ledger_runtime import LedgerOptions, UnreadableJSON, ctrl_c_is_the_agents, json_value, warn_unheard

CLAUDE_VERSION = "2.1.332"  # the version this adapter is checked against (see README)
INSTALL_HINT = f"npm install -g @anthropic-ai/claude-code@{CLAUDE_VERSION}"
HOOK_TIMEOUT_S = 600
# claude's options that turn every hook off: the ledger could see nothing
HOOKS_OFF = ("--bare", "--safe-mode")
CREDENTIALS = ".credentials.json"
TRANSPORTS = ("http", "command")


def register(app: typer.Typer) -> None:
    app.command(name="claude", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(claude)


def find_claude(explicit: str | None) -> str | None:
    from ledger_runtime import find_binary

    return find_binary(explicit, "LEDGER_CLAUDE_BIN", "claude")


def claude_version(binary: str) -> str | None:
    from ledger_runtime import binary_version

    return binary_version(binary)


def config_dir(env: dict[str, str] | None = None) -> Path:
    """Where Claude Code keeps the user's settings, login and transcripts."""
    env = os.environ if env is None else env
    given = env.get("CLAUDE_CONFIG_DIR")
    return Path(given) if given else Path(env.get("HOME") or Path.home()) / ".claude"


def headless(args: list[str]) -> bool:
    """Whether claude runs with -p/--print (no person to answer a permission prompt)."""
    return any(a in ("-p", "--print") or (a.startswith("-") and not a.startswith("--") and "p" in a[1:]) for a in args)


def split_settings(args: list[str]) -> tuple[list[str], str | None]:
    """claude's arguments without a ``--settings X`` of the user's own, and that X."""
    out: list[str] = []
    given = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--settings" and i + 1 < len(args):
            given = args[i + 1]
            i += 2
            continue
        if a.startswith("--settings="):
            given = a.split("=", 1)[1]
            i += 1
            continue
        if a == "--":
            out += args[i:]
            break
        out.append(a)
        i += 1
    return out, given


MAX_SETTINGS_BYTES = 4 * 1024 * 1024  # a settings file past this is not read


def settings_text(path: Path, *, pipe: bool = False) -> str:
    """A settings file's text, at most MAX_SETTINGS_BYTES, read only from a regular file (a project's
    ``.claude/settings.json`` is the repository's: a link to ``/dev/zero`` would never end) or, with
    ``pipe``, a pipe too (the user's own ``--settings <(...)``); OSError when it cannot be read,
    ValueError when it is too long or not UTF-8."""
    import stat

    from ledger_runtime import read_record

    if pipe and stat.S_ISFIFO(os.stat(path).st_mode):
        with open(path, "rb") as f:
            data = f.read(MAX_SETTINGS_BYTES + 1)
    else:
        data = read_record(path, MAX_SETTINGS_BYTES + 1)
    if len(data) > MAX_SETTINGS_BYTES:
        raise ValueError(f"over {MAX_SETTINGS_BYTES:,} bytes: not a settings file")
    return data.decode("utf-8")


def user_settings(given: str | None) -> dict[str, Any]:
    """The settings of the user's own ``--settings`` (a file or a JSON string); {} for none."""
    if not given:
        return {}
    text = given
    if not given.lstrip().startswith("{"):
        try:
            text = settings_text(Path(given), pipe=True)
        except OSError as e:
            raise ValueError(f"--settings {given}: {e.strerror or e}") from e
        except ValueError as e:
            raise ValueError(f"--settings {given}: {e}") from e
    try:
        return json_value(text, dict)
    except UnreadableJSON as e:  # JSON given on the command line is not quoted: it may hold a key (its env)
        raise ValueError(f"--settings {'(the JSON given)' if text is given else given}: {e}") from None


def hook_settings(hook: Callable[[str], dict[str, Any]], base: dict[str, Any]) -> dict[str, Any]:
    """``base`` (the user's own --settings, if any) with the ledger's hooks added after its own;
    ``hook(event)`` is the ledger's hook for an event (an ``http`` or a ``command`` one)."""
    from ledger_adapters.claude.hooks import EVENTS, TOOL_EVENTS
    from ledger_adapters.claude.tools import GOVERNED_MATCHER, TOOL_MATCHER

    settings = dict(base)
    hooks = dict(settings.get("hooks") or {}) if isinstance(settings.get("hooks"), dict) else {}
    for event in EVENTS:
        ours: dict[str, Any] = {"hooks": [{**hook(event), "timeout": HOOK_TIMEOUT_S}]}
        if event in TOOL_EVENTS:
            ours = {"matcher": GOVERNED_MATCHER if event == "PreToolUse" else TOOL_MATCHER, **ours}
        theirs = hooks.get(event) if isinstance(hooks.get(event), list) else []
        hooks[event] = [*theirs, ours]
    settings["hooks"] = hooks
    return settings


def http_hook(url: Callable[[str], str], token: str) -> Callable[[str], dict[str, Any]]:
    """The ledger's hook as an HTTP one: Claude Code POSTs the event to the run's server, no process."""
    return lambda event: {"type": "http", "url": url(event), "headers": {"Authorization": f"Bearer {token}"}}


def command_hook(script: Path) -> Callable[[str], dict[str, Any]]:
    """The ledger's hook as a command: the run's hook script, which runs the hook client."""
    return lambda event: {"type": "command", "command": f"{shlex.quote(str(script))} {event}"}


def login_secrets(home: Path, env: dict[str, str] | None = None) -> tuple[str, ...]:
    """The values of the user's Claude Code login (OAuth tokens, an API key it keeps): masked in what the
    ledger stores, should the agent print the file."""
    from ledger_runtime import file_secrets

    env = os.environ if env is None else env
    state = Path(env.get("CLAUDE_CONFIG_DIR") or "") / ".claude.json" if env.get("CLAUDE_CONFIG_DIR") else None
    state = state or Path(env.get("HOME") or Path.home()) / ".claude.json"
    found = [*file_secrets(home / CREDENTIALS, all_values=True), *file_secrets(state)]
    return tuple(dict.fromkeys(found))


def hooks_disabled(workdir: Path, home: Path) -> Path | None:
    """A settings file that turns every hook off (``disableAllHooks``), if the user or project has one."""
    project = workdir / ".claude"
    for path in (home / "settings.json", project / "settings.json", project / "settings.local.json"):
        try:
            if json_value(settings_text(path), dict).get("disableAllHooks") is True:
                return path
        except (OSError, ValueError):  # UnreadableJSON
            continue
    return None


@dataclass(frozen=True)
class ClaudeOptions:
    """What ``ledger-run claude`` was given: the ledger's options, claude's own arguments, the hook
    transport and the claude executable."""

    ledger: LedgerOptions = LedgerOptions()
    args: tuple[str, ...] = ()
    hook_transport: str = "http"
    claude_bin: str | None = None


@dataclass(frozen=True)
class ClaudeRun:
    """A ``ledger-run claude`` that can start: the options checked, the binary found, the settings read."""

    options: ClaudeOptions
    binary: str
    args: list[str]
    workdir: Path
    config: Any
    settings: dict[str, Any]


def validate(options: ClaudeOptions) -> ClaudeRun:
    """The run ``options`` ask for, or the one-line error (``fail``) of the first thing wrong with them:
    the transport, a claude option that turns the hooks off, the work tree, the binary, the ledger's
    settings, the user's ``--settings`` and a settings file that turns every hook off."""
    from ledger_runtime import binary_not_found, checked_workdir, fail

    _check_hooks_on(options)
    workdir = checked_workdir(options.ledger.workdir)
    binary = find_claude(options.claude_bin)
    if binary is None:
        fail(binary_not_found(options.claude_bin, "LEDGER_CLAUDE_BIN", "claude", INSTALL_HINT, "--claude-bin"))
    config = options.ledger.config()
    args, given = split_settings(list(options.args))
    try:
        base = user_settings(given)
    except ValueError as e:
        fail(str(e))
    off_by = hooks_disabled(workdir, config_dir())
    if off_by is not None or base.get("disableAllHooks") is True:
        fail(f"{off_by or '--settings'} sets disableAllHooks: Claude Code would run none of the ledger's hooks")
    return ClaudeRun(options, binary, args, workdir, config, base)


def _check_hooks_on(options: ClaudeOptions) -> None:
    """A transport Claude Code has, and none of claude's options that turn every hook off."""
    from ledger_runtime import fail

    if options.hook_transport not in TRANSPORTS:
        fail(f"--hook-transport must be one of {', '.join(TRANSPORTS)}, not {options.hook_transport!r}")
    off = next((a for a in options.args if a in HOOKS_OFF), None)
    if off is not None:
        fail(f"claude {off} turns Claude Code's hooks off, and the ledger works through them: run without {off}")


def run(valid: ClaudeRun) -> int:
    """Run claude as ``valid`` says, with the ledger in its hooks; its exit code."""
    from ledger_runtime import run_pinned

    def start(run_dir: Path, version: str | None) -> int:
        return run_claude(
            valid.binary,
            valid.args,
            valid.workdir,
            run_dir,
            valid.config,
            settings=valid.settings,
            transport=valid.options.hook_transport,
            meta={"agent": "claude", "claude_version": version, "claude_args": valid.args},
        )

    def kept(run_dir: Path) -> str:
        return f"Claude Code's transcripts (masked copies): {run_dir / 'transcripts'}"

    return run_pinned(
        "claude",
        valid.binary,
        (CLAUDE_VERSION, INSTALL_HINT),
        valid.options.ledger.run_dir,
        valid.workdir,
        start,
        kept,
        resuming=resumes(valid.args),
    )


def resumes(args: list[str]) -> bool:
    """Whether claude's arguments resume a session of its own (``--resume ID``, ``--continue``): its
    ledger may then go on in the run directory that holds it."""
    return any(a in ("-r", "--resume", "-c", "--continue") or a.startswith("--resume=") for a in args)


def claude(
    ctx: typer.Context,
    claude_args: Optional[List[str]] = typer.Argument(
        None, help='Arguments for claude, after `--` (e.g. -- -p "fix the failing test"; none: an interactive session).'
    ),
    workdir: Path = LedgerOptions.workdir_option(),
    run_dir: Optional[Path] = LedgerOptions.run_dir_option("the ledger and the run's hook settings"),
    ledger_config: Optional[Path] = LedgerOptions.ledger_config_option(),
    no_inform: bool = LedgerOptions.switch_option("--no-inform"),
    no_govern: bool = LedgerOptions.switch_option("--no-govern"),
    shadow: bool = LedgerOptions.switch_option(
        "--shadow", "Record and decide only: outputs as they are, no state view."
    ),
    hook_transport: str = typer.Option(
        "http",
        "--hook-transport",
        help="How Claude Code reaches the ledger: http (a request per event, no process) or command "
        "(a process per event: where HTTP hooks are not allowed or go through a proxy).",
    ),
    claude_bin: Optional[str] = typer.Option(
        None,
        "--claude-bin",
        help=f"The claude executable (default: $LEDGER_CLAUDE_BIN when set, else claude on PATH; "
        f"pinned: {CLAUDE_VERSION}).",
    ),
) -> None:
    """Claude Code (`claude -p ...` or the interactive session) with the ledger in its hooks."""
    ledger = LedgerOptions(workdir, run_dir, ledger_config, no_inform, no_govern, shadow)
    options = ClaudeOptions(ledger, (*(claude_args or []), *ctx.args), hook_transport, claude_bin)
    raise typer.Exit(run(validate(options)))


@ctrl_c_is_the_agents
def run_claude(
    binary: str,
    args: list[str],
    workdir: Path,
    run_dir: Path,
    config: Any,
    *,
    settings: dict[str, Any] | None = None,
    transport: str = "http",
    meta: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> int:
    """Run claude with the ledger's hooks until it exits; returns its exit code."""
    from ledger_adapters.claude.hooks import CLAUDE_TRUNCATION, ClaudeHooks
    from ledger_runtime import (
        HookServer,
        HttpHookServer,
        LedgerRuntime,
        fast_launcher,
        hook_script,
        keep_masked_jsonl,
        loopback_unproxied,
        private_dir,
        regular_only,
        run_agent,
        write_private,
    )

    base = dict(env if env is not None else os.environ)
    home = config_dir(base)
    runtime = LedgerRuntime(
        workdir, run_dir, config, meta=meta, secrets=login_secrets(home, base), truncation=CLAUDE_TRUNCATION
    )
    import secrets

    token = secrets.token_hex(16)  # the run's secret: in the owner-only settings or hook script, never in the env
    hooks = ClaudeHooks(
        runtime,
        note_chars=config.context.note_chars,
        token=token,
        projects_dir=str(home / "projects"),
        interactive=not headless(args),
        conversation_file=str(run_dir / "claude" / "conversation.json"),
    )
    server: Any
    try:
        if transport == "http":
            server = HttpHookServer(hooks.handle, runtime.report_fault, token)
        else:
            server = HookServer(hooks.handle, runtime.report_fault, authorize=hooks.authorize)
    except BaseException:  # no socket (SocketDirError): the ledger is closed, the caller says why
        runtime.close()
        raise
    untidy: list[OSError] = []
    try:
        where = private_dir(run_dir / "claude")
        if transport == "http":
            hook = http_hook(server.url, token)
        else:
            secret = server.keep_token(token)
            fallback = fast_launcher(compiled=False)  # where the compiled client goes missing during the run
            script = hook_script(where / "hook", fast_launcher(), server.socket_path, run_dir, secret, fallback)
            hook = command_hook(script)
        path = where / "settings.json"
        write_private(path, json.dumps(hook_settings(hook, settings or {}), indent=1) + "\n")
        try:
            cmd = [binary, "--settings", str(path), *args]
            child_env = {k: v for k, v in base.items() if k not in ("LEDGER_HOOK_SOCKET", "LEDGER_RUN_DIR")}
            if transport == "http":
                child_env = loopback_unproxied(child_env)
            # over HTTP only claude's own process speaks for it (a command it runs is another process)
            return run_agent(cmd, workdir, child_env, getattr(server, "launched", None))
        finally:  # the user's own settings (an API key in their env, say) are not kept: the ledger's hooks are
            try:
                if settings:
                    write_private(path, json.dumps(hook_settings(hook, {}), indent=1) + "\n")
            except OSError as e:  # what claude ran left a link there: said, and the agent's exit code kept
                untidy.append(e)
    finally:
        server.close()
        with server.lock:
            for e in untidy:
                runtime.report_fault("tidying the run's Claude Code settings", e)
            try:
                hooks.finish()
            except Exception as e:
                runtime.report_fault("finishing the run", e)
            try:
                keep_masked_jsonl(regular_only(hooks.transcripts), run_dir / "transcripts", runtime.redactor)
            except Exception as e:
                runtime.report_fault("keeping Claude Code's transcripts", e)
            runtime.close()
        warn_unheard("Claude Code", server.handled)  # after the finish: a warning that cannot be printed cuts nothing
