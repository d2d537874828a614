"""``ledger-run codex``: the real ``codex`` binary with the ledger's hooks, for one run.

Each run gets its own ``CODEX_HOME`` inside the run directory: the user's Codex configuration and
instructions are copied in (read, never edited), Codex writes its sessions there, the user's
``auth.json`` is linked, not copied (Codex rewrites the file in place when it refreshes a ChatGPT
login, so the refreshed tokens land in the user's own file and the user's login stays valid; the
link goes at the end of the run),
and the ledger's hooks are added for this run only (``-c hooks.<Event>=...``, after any hooks the
user's own configuration has). The hooks call ``ledger-run hook EVENT``, which talks to the hook
server this process runs (ledger_runtime/hooks/server.py) with the runtime in memory. Hook trust:
Codex skips hooks nobody trusted, so the run passes ``--dangerously-bypass-hook-trust`` (the
hooks it bypasses trust for are this run's and the user's own).
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional

import typer

from ledger_runtime import (  # noqa: F401 (hook_launcher: named here by tests)
    LedgerOptions,
    ctrl_c_is_the_agents,
    exec_either,
    fast_launcher,
    hook_launcher,
    json_value,
    run_agent,
    toml_inline,
    warn_unheard,
)

CODEX_VERSION = "0.171.0"  # the version this adapter is checked against (see README)
INSTALL_HINT = f"npm install -g @openai/codex@{CODEX_VERSION}"
COPIED_FILES = ("config.toml", "hooks.json", "AGENTS.md", "AGENTS.override.md")
AUTH_FILE = "auth.json"  # linked into the run's home, never copied
COPIED_DIRS = ("prompts", "rules", "skills")
BYPASS_TRUST = "--dangerously-bypass-hook-trust"
# Codex compacts its history when it fills up; the hooks follow its rollout, and after a compaction
# no answer refers to an output shown before it (codex_hooks.CodexHooks._follow_compactions).
CODEX_DEFAULTS: dict[str, Any] = {}


def register(app: typer.Typer) -> None:
    app.command(name="codex", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(codex)


def codex_cd(args: list[str]) -> str | None:
    """The directory a ``-C DIR`` / ``--cd DIR`` among codex's arguments names, if any."""
    for i, a in enumerate(args):
        if a in ("-C", "--cd") and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--cd="):
            return a[5:]
    return None


def with_cd(args: list[str], workdir: str) -> list[str]:
    """``args`` with the directory of ``-C`` / ``--cd`` replaced by ``workdir``."""
    out = list(args)
    for i, a in enumerate(out):
        if a in ("-C", "--cd") and i + 1 < len(out):
            out[i + 1] = workdir
        elif a.startswith("--cd="):
            out[i] = "--cd=" + workdir
    return out


def project_hooks(workdir: Path, user_home: Path) -> list[Path]:
    """Codex hook definitions of the project's own, from the work tree up to the file system's root
    (``.codex/hooks.json``, or hooks in a ``.codex/config.toml``); the user's own Codex home is not a
    project layer."""
    found = []
    try:
        home = user_home.resolve()
    except OSError:
        home = user_home
    for d in [workdir, *workdir.parents]:
        layer = d / ".codex"
        try:
            if not layer.is_dir() or layer.resolve() == home:
                continue
        except OSError:
            continue
        if (layer / "hooks.json").is_file():
            found.append(layer / "hooks.json")
        if (layer / "config.toml").is_file() and read_toml(layer / "config.toml").get("hooks"):
            found.append(layer / "config.toml")
    return found


def find_codex(explicit: str | None) -> str | None:
    from ledger_runtime import find_binary

    return find_binary(explicit, "LEDGER_CODEX_BIN", "codex")


def unheard_hint(code: int | None, home: Path, source: Path) -> str:
    """Why codex, ended with exit code ``code`` (None: not known), ran no hook, for the warning that says so. Its own
    message (a slip in config.toml, say) names the run's copy in ``home``, which the next run makes anew from the
    user's files in ``source``: the place to change them."""
    if not code:
        return ""
    if code > 128:
        return f"Codex was ended by a signal (exit code {code})"
    return (
        f"Codex ended with exit code {code}: its own message above says why; a file it names "
        f"in {home} is this run's copy of yours, made from {source}: change it there"
    )


def user_codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def make_codex_home(run_dir: Path, source: Path) -> Path:
    """The run's own CODEX_HOME, with copies of the user's configuration and a link to the user's
    credentials (see the module docstring)."""
    from ledger_runtime import private_dir, tighten

    home = private_dir(run_dir / "codex-home")
    if source.resolve() == home.resolve():
        return home
    for name in COPIED_FILES:
        src = source / name
        if src.is_file() and not (home / name).exists():
            shutil.copy2(src, home / name)
    for name in COPIED_DIRS:
        src = source / name
        if src.is_dir() and not (home / name).exists():
            shutil.copytree(src, home / name, symlinks=True)
    tighten(home)  # the copies hold credentials: owner only, whatever the user's files allowed
    link_credentials(home, source)  # last: nothing after it can fail and leave the link behind
    return home


def link_credentials(home: Path, source: Path) -> None:
    """``home/auth.json`` as a link to the user's (a copy an earlier version made is replaced: a
    copied ChatGPT login spends the refresh token the user's own file still holds)."""
    target, link = source / AUTH_FILE, home / AUTH_FILE
    if link.is_symlink() or link.exists():
        link.unlink()
    if target.is_file():
        link.symlink_to(target.resolve())


def login_secrets(source: Path) -> tuple[str, ...]:
    """The values of the user's Codex login (API key, tokens): masked in what the ledger stores,
    should the agent print the file."""
    from ledger_runtime import file_secrets

    return tuple(file_secrets(source / AUTH_FILE, all_values=True))


def unlink_credentials(home: Path) -> None:
    """At the end of a run: the run's home keeps no way to the user's credentials."""
    link = home / AUTH_FILE
    if link.is_symlink():
        link.unlink()


def keyring_note(source: Path, config: dict[str, Any]) -> str | None:
    """Why Codex may find no login in the run's home: credentials in the system keyring are keyed by
    the CODEX_HOME path, so a home of its own has none (None when the user's login is a file)."""
    mode = config.get("cli_auth_credentials_store", "file")
    if (source / AUTH_FILE).is_file() or mode == "file" or os.environ.get("CODEX_API_KEY"):
        return None
    return (
        f"ledger-run: your Codex login is in the system keyring (cli_auth_credentials_store = {mode!r}), "
        "which Codex keys by CODEX_HOME: this run's own home cannot use it. Give the run an API key "
        '(CODEX_API_KEY), or keep the login in a file (cli_auth_credentials_store = "file", then codex login).'
    )


def hook_overrides(
    launcher: list[str],
    socket_path: str,
    run_dir: Path,
    user_config: dict[str, Any],
    token_file: str | None = None,
    flags: dict[str, str] | None = None,
    shell: str | None = None,
    fallback: list[str] | None = None,
) -> list[str]:
    """``-c hooks.<Event>=[...]`` arguments: the user's own hooks for the event, then the ledger's.
    ``token_file``: where the hook reads the run's secret (never on Codex's command line, nor the
    hook's: every user of the machine can read those).
    ``flags``: the paths of the server's flags ``post`` and ``fault`` (CodexHooks.serve): the
    PostToolUse hook asks the server only when one is set, testing them in the shell that runs it
    (``shell``: the user's login shell, which Codex runs hook commands with), and the PreToolUse hook
    sets ``fault`` when it cannot reach the server. ``fallback``: the hook client to run where the
    launcher's program is gone (the compiled one's cache removed during the run), in a POSIX login shell."""
    from ledger_adapters.codex.hooks import EVENTS, POSIX_SHELLS, TOOL_MATCHER

    user_hooks = user_config.get("hooks") if isinstance(user_config.get("hooks"), dict) else {}
    args: list[str] = []
    posix = shell is not None and os.path.basename(shell) in POSIX_SHELLS
    for event in EVENTS:
        hook_args = [
            "hook",
            event,
            "--socket",
            socket_path,
            "--run-dir",
            str(run_dir),
            *(["--token-file", token_file] if token_file else []),
            *(["--flag-on-fault", flags["fault"]] if flags and event == "PreToolUse" else []),
        ]
        argv = [*launcher, *hook_args]
        line = exec_either(launcher, fallback, shlex.join(hook_args)) if posix and fallback else None
        command = line or shlex.join(argv)
        if flags and event == "PostToolUse":
            command = gated([flags["post"], flags["fault"]], argv, shell, line)
        ours: dict[str, Any] = {"hooks": [{"type": "command", "command": command, "timeout": 600}]}
        if event in ("PreToolUse", "PostToolUse"):
            ours = {"matcher": TOOL_MATCHER, **ours}
        theirs = user_hooks.get(event) if isinstance(user_hooks.get(event), list) else []
        args += ["-c", f"hooks.{event}={toml_inline([*theirs, ours])}"]
    return args


# what a gated hook runs when its flags are clear: nothing, its input unread (Codex 0.171.0 writes a
# hook's input into the pipe and goes on whether it is read or not, past a pipe's 64 KiB too: a
# `cat` to read it would be a process more on every call; tests/test_codex_e2e.py checks it)
DRAIN = "exit 0"


def gated(flags: list[str], argv: list[str], shell: str | None, line: str | None = None) -> str:
    """A hook command that runs ``argv`` (in a POSIX login shell: the shell text ``line`` where it is
    given) only when one of ``flags`` (files) exists, and otherwise ends at once. Codex runs a hook command
    with the user's login shell (``SHELL -c``): a POSIX one reads the tests itself; any other runs /bin/sh
    for them."""
    from ledger_adapters.codex.hooks import POSIX_SHELLS

    if shell is not None and os.path.basename(shell) in POSIX_SHELLS:
        tests = " || ".join(f"[ -e {shlex.quote(f)} ]" for f in flags)
        return f"{tests} || {DRAIN}; {line or 'exec ' + shlex.join(argv)}"
    tests = " || ".join(f'[ -e "${i + 1}" ]' for i in range(len(flags)))
    script = f'{tests} || {DRAIN}; shift {len(flags)}; exec "$@"'
    return shlex.join(["/bin/sh", "-c", script, "ledger-hook", *flags, *argv])


MAX_TOML_BYTES = 4 * 1024 * 1024  # a Codex config past this is not read


def read_toml(path: Path) -> dict[str, Any]:
    """A Codex config file's settings; {} for one that cannot be read as TOML: a work tree's
    ``.codex/config.toml`` is the repository's, and may be anything (a link to a device, nesting past the
    recursion limit, bytes that are not text)."""
    from ledger_runtime import read_record

    try:
        data = read_record(path, MAX_TOML_BYTES + 1)
        return tomllib.loads(data.decode("utf-8")) if len(data) <= MAX_TOML_BYTES else {}
    except (OSError, ValueError, RecursionError):  # ValueError: TOMLDecodeError, UnicodeDecodeError
        return {}


@dataclass(frozen=True)
class CodexOptions:
    """What ``ledger-run codex`` was given: the ledger's options, codex's own arguments, the codex
    executable and whether the repository's own hooks may run."""

    ledger: LedgerOptions = LedgerOptions()
    args: tuple[str, ...] = ()
    codex_bin: str | None = None
    allow_project_hooks: bool = False


@dataclass(frozen=True)
class CodexRun:
    """A ``ledger-run codex`` that can start: the options checked, the binary found, the settings read."""

    options: CodexOptions
    binary: str
    args: list[str]
    workdir: Path
    config: Any


def validate(options: CodexOptions) -> CodexRun:
    """The run ``options`` ask for, or the one-line error (``fail``) of the first thing wrong with them:
    the work tree (codex's ``-C`` when ``--workdir`` is not given; the two naming different directories is refused:
    the ``-C`` was replaced by ``--workdir`` unsaid, and Codex worked where the user had not asked), hooks of the
    repository's own, the binary, the ledger's settings."""
    from ledger_runtime import binary_not_found, checked_workdir, fail

    args = list(options.args)
    given = codex_cd(args)
    workdir = options.ledger.workdir
    named = workdir != Path(".")
    if given is not None and not named:
        workdir = Path(given)  # codex -C DIR: the ledger watches the same directory
    workdir = checked_workdir(workdir)
    if given is not None and named and Path(given).resolve() != workdir:
        fail(
            f"--workdir {workdir} and codex's -C {given} name different directories (the ledger would watch one, "
            "Codex work in the other): give one of them"
        )
    if given is not None:  # codex starts in the workdir: its -C must not be relative to here
        args = with_cd(args, str(workdir))
    found = project_hooks(workdir, user_codex_home())
    if found and not options.allow_project_hooks:
        fail(
            f"{found[0]} defines Codex hooks of the repository's own, which this run would execute unreviewed "
            f"(the ledger's own hooks need {BYPASS_TRUST}, and Codex applies it to every layer): remove them, or "
            "pass --allow-project-hooks to run them anyway"
        )
    binary = find_codex(options.codex_bin)
    if binary is None:
        fail(binary_not_found(options.codex_bin, "LEDGER_CODEX_BIN", "codex", INSTALL_HINT, "--codex-bin"))
    return CodexRun(options, binary, args, workdir, options.ledger.config(defaults=CODEX_DEFAULTS))


def run(valid: CodexRun) -> int:
    """Run codex as ``valid`` says, with the ledger in its hooks; its exit code."""
    from ledger_runtime import run_pinned

    def start(run_dir: Path, version: str | None) -> int:
        meta = {"agent": "codex", "codex_version": version, "codex_args": valid.args}
        return run_codex(valid.binary, valid.args, valid.workdir, run_dir, valid.config, meta=meta)

    def kept(run_dir: Path) -> str:
        return f"Codex sessions: {run_dir / 'codex-home' / 'sessions'}"

    return run_pinned(
        "codex",
        valid.binary,
        (CODEX_VERSION, INSTALL_HINT),
        valid.options.ledger.run_dir,
        valid.workdir,
        start,
        kept,
        resuming=resumes(valid.args),
    )


# codex's options that take a value as the next argument (codex 0.171.0, ``codex --help``, ``codex exec --help``)
VALUE_OPTIONS = frozenset(
    "-c --config --enable --disable --remote --remote-auth-token-env -i --image -m --model --local-provider -p "
    "--profile -s --sandbox -C --cd --add-dir -a --ask-for-approval --thread-source --cyber-access-program "
    "--output-schema --color -o --output-last-message".split()
)


def resumes(args: list[str]) -> bool:
    """Whether codex's arguments resume a session of its own (``codex resume``, ``codex exec resume``, with any
    options before: ``--enable multi_agent_v2 exec resume``): its ledger may then go on in the run directory that
    holds it."""
    words: list[str] = []
    value = False  # the argument is the value of the option before it
    for a in args:
        if value:
            value = False
        elif a.startswith("-"):
            value = a in VALUE_OPTIONS
        else:
            words.append(a)
    return words[:1] == ["resume"] or words[:2] == ["exec", "resume"]


def codex(
    ctx: typer.Context,
    codex_args: Optional[List[str]] = typer.Argument(
        None, help='Arguments for codex, after `--` (e.g. -- exec "fix the failing test"; none: the interactive TUI).'
    ),
    workdir: Path = LedgerOptions.workdir_option(),
    run_dir: Optional[Path] = LedgerOptions.run_dir_option("the ledger, Codex's home and sessions"),
    ledger_config: Optional[Path] = LedgerOptions.ledger_config_option(),
    no_inform: bool = LedgerOptions.switch_option("--no-inform"),
    no_govern: bool = LedgerOptions.switch_option("--no-govern"),
    shadow: bool = LedgerOptions.switch_option("--shadow"),
    codex_bin: Optional[str] = typer.Option(
        None,
        "--codex-bin",
        help=f"The codex executable (default: $LEDGER_CODEX_BIN when set, else codex on PATH; "
        f"pinned: {CODEX_VERSION}).",
    ),
    allow_project_hooks: bool = typer.Option(
        False,
        "--allow-project-hooks",
        help="Run even when the repository defines Codex hooks of its own "
        "(the run trusts every hook layer: they would run unreviewed).",
    ),
) -> None:
    """Codex CLI (`codex exec ...` or the interactive TUI) with the ledger in its hooks."""
    ledger = LedgerOptions(workdir, run_dir, ledger_config, no_inform, no_govern, shadow)
    options = CodexOptions(ledger, (*(codex_args or []), *ctx.args), codex_bin, allow_project_hooks)
    raise typer.Exit(run(validate(options)))


@ctrl_c_is_the_agents
def run_codex(
    binary: str,
    args: list[str],
    workdir: Path,
    run_dir: Path,
    config: Any,
    *,
    meta: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    source_home: Path | None = None,
) -> int:
    """Run codex with the ledger's hooks until it exits; returns its exit code."""
    from ledger_adapters.codex.hooks import CodexHooks, default_shell
    from ledger_runtime import LedgerRuntime, hook_client

    source = source_home or user_codex_home()
    # which hook client the hooks and the wrapper run (the compiled one, built now at first use, or why not)
    meta = {**(meta or {}), "hook_client": hook_client()}
    # the run directory's lock first: a second run on it is refused before it touches the home
    runtime = LedgerRuntime(workdir, run_dir, config, meta=meta, secrets=login_secrets(source))
    try:
        home = make_codex_home(run_dir, source)
    except BaseException:
        runtime.close()
        raise
    note = keyring_note(source, read_toml(source / "config.toml"))
    if note:
        print(note, file=sys.stderr)
    # the run's secret: on the hook command lines, never in the environment the agent's commands get
    token = secrets.token_hex(16)
    # the compiled hook client where there is one; the Python one where it goes missing during the run
    fallback = None if fast_launcher() == fast_launcher(compiled=False) else fast_launcher(compiled=False)
    hooks = CodexHooks(
        runtime,
        note_chars=config.context.note_chars,
        wrap_launcher=fast_launcher(),
        wrap_fallback=fallback,
        token=token,
        sessions_dir=str(home / "sessions"),
        conversation_file=str(run_dir / "codex-conversation.json"),
    )
    try:
        server = hooks.serve()
    except BaseException:  # no socket (SocketDirError): the ledger is closed, the caller says why
        runtime.close()
        unlink_credentials(home)
        raise
    code: int | None = None
    try:
        cmd = [
            binary,
            BYPASS_TRUST,
            *hook_overrides(
                fast_launcher(),
                server.socket_path,
                run_dir,
                read_toml(source / "config.toml"),
                token_file=server.keep_token(token),
                flags=hooks.flag_paths,
                shell=default_shell(),
                fallback=fallback,
            ),
            *args,
        ]
        base = env if env is not None else os.environ
        child_env = {
            **{k: v for k, v in base.items() if k not in ("LEDGER_HOOK_SOCKET", "LEDGER_RUN_DIR")},
            "CODEX_HOME": str(home),
        }
        code = run_agent(cmd, workdir, child_env)
        return code
    finally:
        server.close()
        with server.lock:
            try:
                hooks.finish()
            except Exception as e:
                runtime.report_fault("finishing the run", e)
            from ledger_runtime import tighten

            try:  # Codex's rollouts and SQLite state: owner-only
                tighten(home)
            except OSError as e:
                runtime.report_fault("making the Codex home private", e)
            runtime.close()
            unlink_credentials(home)
        # after the finish: a warning that cannot be printed cuts nothing
        warn_unheard("Codex", server.handled, unheard_hint(code, home, source))
