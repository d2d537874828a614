"""``ledger-run gemini``: the real ``gemini`` binary (Gemini CLI) with the ledger's hooks, for one run.

The hooks are installed for this run only, in a Gemini CLI home of the run's own (home.py): the user's
login, trusted folders, extensions and memory are used where they are (linked), their settings are
merged with the ledger's hooks while gemini runs and not kept after. Each hook is the run's owner-only
hook script (``RUN_DIR/gemini/hook EVENT``: Gemini CLI runs command hooks only), which asks the hook
server this process runs (ledger_runtime/hooks/server.py), with the runtime in memory, over a Unix
socket; the run's secret is in an owner-only file the script names.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from ledger_runtime import AgentOptions, ctrl_c_is_the_agents, warn_unheard

GEMINI_VERSION = "0.61.0"  # the version this adapter is checked against (see README)
INSTALL_HINT = f"npm install -g @google/gemini-cli@{GEMINI_VERSION}"
# why a run may hear no hook: Gemini CLI runs none in a folder it does not trust
UNTRUSTED_HINT = "Gemini CLI runs hooks only in a trusted folder: headless, pass --skip-trust, or trust the folder once"
HOOK_TIMEOUT_MS = 600_000
NO_LOGIN_EXIT = 41  # Gemini CLI's exit code when it has no auth method (its FatalAuthenticationError)


def unheard_hint(
    args: list[str], code: int | None, user_settings: Path | None = None, env: dict[str, str] | None = None
) -> str:
    """Why gemini, run with ``args`` and ended with exit code ``code`` (None: not known), ran no hook: it stopped
    before its first (no login: exit 41), which its own message says, or the folder was not trusted. The trust was
    blamed even with --skip-trust given, when what stopped it was a missing login. For the login, ``user_settings``
    is where to set it: Gemini CLI's message names the run's own settings.json, made anew at each run. Where ``env``
    (gemini's environment) already chose an auth method, Gemini CLI refused that one: setting GEMINI_API_KEY is no
    cure then; GOOGLE_GEMINI_BASE_URL with no auth method selected is one Gemini CLI 0.61.0 refuses."""
    if code and code > 128 and _signal_name(code - 128):  # killed: it had no message to give
        return f"Gemini CLI was ended by {_signal_name(code - 128)} (exit code {code}) before its first hook"
    chosen = env_auth(env or {})
    if code == NO_LOGIN_EXIT and user_settings is not None and chosen is not None and chosen[1] == "gateway":
        return (
            f"Gemini CLI ended with exit code {code} before its first hook: GOOGLE_GEMINI_BASE_URL is set, and with no "
            f"auth method selected in the settings Gemini CLI {GEMINI_VERSION} takes 'gateway' from it, which it "
            f'refuses; set security.auth.selectedType in {user_settings} ("gemini-api-key", with GEMINI_API_KEY set, '
            "reaches GOOGLE_GEMINI_BASE_URL too)"
        )
    if code == NO_LOGIN_EXIT and user_settings is not None:
        return (
            f"Gemini CLI ended with exit code {code} before its first hook, for want of a login: the settings.json "
            f"its message names is this run's copy, made anew at each run; set the auth method in {user_settings}"
            + ("" if chosen else ", or set GEMINI_API_KEY")
        )
    if code:
        return f"Gemini CLI ended with exit code {code} before its first hook: its own message above says why"
    return "" if "--skip-trust" in args else UNTRUSTED_HINT


# Gemini CLI 0.61.0's getAuthTypeFromEnv, in its order: the variable that picks the auth method with none selected
ENV_AUTH = (
    ("GOOGLE_GENAI_USE_GCA", "oauth-personal"),
    ("GOOGLE_GENAI_USE_VERTEXAI", "vertex-ai"),
    ("GOOGLE_GEMINI_BASE_URL", "gateway"),
    ("GEMINI_API_KEY", "gemini-api-key"),
)


def env_auth(env: dict[str, str]) -> tuple[str, str] | None:
    """(variable, auth method) that ``env`` chooses for Gemini CLI when its settings select none, or None."""
    for variable, method in ENV_AUTH:
        value = env.get(variable)
        if value and (value == "true" or not variable.startswith("GOOGLE_GENAI_USE_")):
            return variable, method
    return None


def _signal_name(number: int) -> str | None:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return None


HOOK_NAME = "ledger-run"


def register(app: typer.Typer) -> None:
    from ledger_runtime import agent_command, agent_context

    command = agent_command(
        "gemini",
        lambda options: run(validate(options)),
        example='-p "fix the failing test"',
        kept="the run's Gemini CLI home",
        pinned=GEMINI_VERSION,
        doc="Gemini CLI (`gemini -p ...` or the interactive session) with the ledger in its hooks.",
    )
    app.command(name="gemini", context_settings=agent_context)(command)


def find_gemini(explicit: str | None) -> str | None:
    from ledger_runtime import find_binary

    return find_binary(explicit, "LEDGER_GEMINI_BIN", "gemini")


def headless(args: list[str]) -> bool:
    """Whether gemini runs with -p/--prompt (no person to answer a permission prompt)."""
    return any(a in ("-p", "--prompt") or a.startswith("--prompt=") for a in args)


def ledger_hooks(script: Path) -> dict[str, dict[str, Any]]:
    """The ledger's hook definition for each event: the run's hook script, with the tools it follows."""
    from ledger_adapters.gemini.hooks import EVENTS, TOOL_EVENTS
    from ledger_adapters.gemini.tools import GOVERNED_MATCHER, TOOL_MATCHER

    out = {}
    for event in EVENTS:
        hook = {"type": "command", "command": f"{shlex.quote(str(script))} {event}", "name": HOOK_NAME}
        definition: dict[str, Any] = {"hooks": [{**hook, "timeout": HOOK_TIMEOUT_MS}]}
        if event in TOOL_EVENTS:
            definition = {"matcher": GOVERNED_MATCHER if event == "BeforeTool" else TOOL_MATCHER, **definition}
        out[event] = definition
    return out


@dataclass(frozen=True)
class GeminiRun:
    """A ``ledger-run gemini`` that can start: the options checked, the binary found, the settings read."""

    options: AgentOptions
    binary: str
    workdir: Path
    config: Any
    settings: dict[str, Any]


def validate(options: AgentOptions, env: dict[str, str] | None = None) -> GeminiRun:
    """The run ``options`` ask for, or the one-line error (``fail``) of the first thing wrong with them:
    the work tree, the binary, the ledger's settings, the user's Gemini CLI settings, and settings that
    turn the hooks off."""
    import os

    from ledger_adapters.gemini.home import hooks_off, read_settings, user_dir
    from ledger_runtime import binary_not_found, checked_workdir, fail

    workdir = checked_workdir(options.ledger.workdir)
    binary = find_gemini(options.binary)
    if binary is None:
        fail(binary_not_found(options.binary, "LEDGER_GEMINI_BIN", "gemini", INSTALL_HINT, "--gemini-bin"))
    config = options.ledger.config()
    user = user_dir(dict(os.environ if env is None else env))
    try:
        settings = read_settings(user / "settings.json")
        project = read_settings(workdir / ".gemini" / "settings.json")
    except ValueError as e:
        fail(str(e))
    for path, found in ((user / "settings.json", settings), (workdir / ".gemini" / "settings.json", project)):
        if hooks_off(found):
            fail(f"{path} sets hooksConfig.enabled to false: Gemini CLI would run none of the ledger's hooks")
    return GeminiRun(options, binary, workdir, config, settings)


def run(valid: GeminiRun) -> int:
    """Run gemini as ``valid`` says, with the ledger in its hooks; its exit code."""
    from ledger_runtime import run_pinned

    args = list(valid.options.args)

    def start(run_dir: Path, version: str | None) -> int:
        meta = {"agent": "gemini", "gemini_version": version, "gemini_args": args}
        return run_gemini(valid.binary, args, valid.workdir, run_dir, valid.config, valid.settings, meta=meta)

    def kept(run_dir: Path) -> str:
        return f"Gemini CLI's sessions (masked copies): {run_dir / 'sessions'}"

    return run_pinned(
        "gemini", valid.binary, (GEMINI_VERSION, INSTALL_HINT), valid.options.ledger.run_dir, valid.workdir, start, kept
    )


@ctrl_c_is_the_agents
def run_gemini(
    binary: str,
    args: list[str],
    workdir: Path,
    run_dir: Path,
    config: Any,
    settings: dict[str, Any],
    *,
    meta: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> int:
    """Run gemini with the ledger's hooks until it exits; returns its exit code."""
    import os
    import secrets

    from ledger_adapters.gemini import home
    from ledger_adapters.gemini.hooks import GEMINI_TRUNCATION, GeminiHooks
    from ledger_adapters.gemini.tools import cut_limit
    from ledger_runtime import (
        HookServer,
        LedgerRuntime,
        fast_launcher,
        file_secrets,
        hook_script,
        keep_masked_jsonl,
        private_dir,
        regular_only,
        run_agent,
    )

    base = dict(env if env is not None else os.environ)
    user = home.user_dir(base)
    login = tuple(v for name in home.LOGIN_FILES for v in file_secrets(user / name))  # masked in what the ledger keeps
    runtime = LedgerRuntime(workdir, run_dir, config, meta=meta, secrets=login, truncation=GEMINI_TRUNCATION)
    where = private_dir(run_dir / "gemini")
    gemini_dir = home.build(where / "home", user)
    token = secrets.token_hex(16)  # the run's secret: in an owner-only file the hook script names
    try:  # the work tree's settings were read before the run (validate): a change since is Gemini CLI's to read
        project = home.read_settings(workdir / ".gemini" / "settings.json")
    except ValueError:
        project = {}
    hooks = GeminiHooks(
        runtime,
        note_chars=config.context.note_chars,
        cut_chars=cut_limit(settings, project),
        token=token,
        sessions_dir=str(gemini_dir / "tmp"),
        interactive=not headless(args),
    )
    try:
        server = HookServer(hooks.handle, runtime.report_fault, authorize=hooks.authorize)
    except BaseException:  # no socket (SocketDirError): the ledger is closed, the caller says why
        runtime.close()
        raise
    fallback = fast_launcher(compiled=False)  # where the compiled client goes missing during the run
    ours = ledger_hooks(
        hook_script(where / "hook", fast_launcher(), server.socket_path, run_dir, server.keep_token(token), fallback)
    )
    code: int | None = None
    try:
        home.write_settings(gemini_dir, home.with_hooks(settings, ours))
        child_env = {k: v for k, v in base.items() if k not in ("LEDGER_HOOK_SOCKET", "LEDGER_RUN_DIR")}
        child_env.update(GEMINI_CLI_HOME=str(where / "home"), PWD=str(workdir))
        code = run_agent([binary, *args], workdir, child_env)
        return code
    finally:
        unstripped: OSError | None = None
        try:  # the user's own settings (an API key in an MCP server's env, say) are not kept: the ledger's hooks are
            home.strip(gemini_dir, ours)
        except OSError as e:  # what gemini ran left a link or a directory there: said, and the agent's exit code kept
            unstripped = e
        finally:
            server.close()
            with server.lock:
                if unstripped is not None:
                    runtime.report_fault("tidying the run's Gemini CLI home", unstripped)
                try:
                    hooks.finish()
                except Exception as e:
                    runtime.report_fault("finishing the run", e)
                try:
                    keep_masked_jsonl(regular_only(hooks.sessions), run_dir / "sessions", runtime.redactor)
                except Exception as e:
                    runtime.report_fault("keeping Gemini CLI's sessions", e)
                runtime.close()
            # after the finish: a warning that cannot be printed cuts nothing
            warn_unheard("Gemini CLI", server.handled, unheard_hint(args, code, user / "settings.json", base))
