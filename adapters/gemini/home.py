"""The run's own Gemini CLI home, so that the ledger's hooks are installed for this run only.

Gemini CLI reads hooks from its settings files only: the user's (``~/.gemini/settings.json``), the
project's (``.gemini/settings.json`` in the work tree) and the system's (root-owned files: Gemini CLI
skips one whose directories another user could write, or that root does not own). So the run points
``GEMINI_CLI_HOME`` at a home of its own, ``RUN_DIR/gemini/home``, whose ``.gemini`` holds a link to
every entry of the user's own ``.gemini`` (the login, trusted folders, extensions, memory, commands,
policies: used where they are, never copied), except two: ``settings.json``, the user's settings with the
ledger's hooks added after their own while gemini runs (owner-only), and the ledger's hooks alone once
it exits (``strip``), and ``tmp``, where Gemini CLI keeps the run's sessions (read by the hooks and the
run's page). A file Gemini CLI writes in place of a link (a login it refreshed by renaming, a new one)
is removed when the run ends, when it is one of the login's (``LOGIN_FILES``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

KEPT_APART = ("settings.json", "tmp")
LOGIN_FILES = ("oauth_creds.json", "google_accounts.json", "gemini-credentials.json", "mcp-oauth-tokens.json")
MAX_SETTINGS_BYTES = 4 * 1024 * 1024  # a settings file past this is not read (nor one that is not a regular file)
_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)


def user_dir(env: dict[str, str]) -> Path:
    """The user's own ``.gemini`` directory (under ``$GEMINI_CLI_HOME`` when set, else ``$HOME``)."""
    return Path(env.get("GEMINI_CLI_HOME") or env.get("HOME") or Path.home()) / ".gemini"


def read_settings(path: Path) -> dict[str, Any]:
    """A Gemini CLI settings file (JSON with comments); {} when there is none. ValueError, saying which
    file, when it is not an object: a work tree's ``.gemini/settings.json`` is the repository's, and may
    be anything (a link to ``/dev/zero``, nesting past the recursion limit, bytes that are not text)."""
    from ledger_runtime import UnreadableJSON, json_value, read_record

    try:
        data = read_record(path, MAX_SETTINGS_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror or e}") from e
    if len(data) > MAX_SETTINGS_BYTES:
        raise ValueError(f"{path}: over {MAX_SETTINGS_BYTES:,} bytes: not a settings file")
    try:
        text = data.decode("utf-8-sig")
        return json_value(_COMMENT.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", text) or "{}", dict)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not JSON ({type(e).__name__}: {e})") from e
    except UnreadableJSON as e:
        raise ValueError(f"{path}: {e}") from None


def hooks_off(settings: dict[str, Any]) -> bool:
    """Whether these settings turn Gemini CLI's hooks off (``hooksConfig.enabled: false``)."""
    config = settings.get("hooksConfig")
    return isinstance(config, dict) and config.get("enabled") is False


def with_hooks(settings: dict[str, Any], ours: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``settings`` with the ledger's hook definition for each event added after the user's own."""
    out = dict(settings)
    hooks = dict(out.get("hooks") or {}) if isinstance(out.get("hooks"), dict) else {}
    for event, definition in ours.items():
        theirs = hooks.get(event) if isinstance(hooks.get(event), list) else []
        hooks[event] = [*theirs, definition]
    out["hooks"] = hooks
    return out


def build(home: Path, user: Path) -> Path:
    """The run's ``.gemini`` under ``home`` (owner-only), linking every entry of the user's ``user``
    directory but ``KEPT_APART``; returns it."""
    from ledger_runtime import private_dir

    gemini = private_dir(private_dir(home) / ".gemini")
    private_dir(gemini / "tmp")
    try:
        names = sorted(os.listdir(user))
    except OSError:
        names = []  # no Gemini CLI setup of the user's yet
    for name in names:
        if name in KEPT_APART or name.endswith(".tmp") or os.path.lexists(gemini / name):
            continue
        os.symlink(user / name, gemini / name)
    return gemini


def write_settings(gemini: Path, settings: dict[str, Any]) -> Path:
    """The run's settings file (owner-only)."""
    from ledger_runtime import write_private

    path = gemini / "settings.json"
    write_private(path, json.dumps(settings, indent=1) + "\n")
    return path


def strip(gemini: Path, ours: dict[str, dict[str, Any]]) -> None:
    """Once gemini exited: the run's settings hold the ledger's hooks alone (no copy of the user's
    settings is kept), a login file Gemini CLI wrote in place of a link is removed, and what it wrote
    (its sessions) is owner-only."""
    from ledger_runtime import tighten

    failed: list[OSError] = []  # each step is taken whatever the others met; the first failure is raised
    for step in (
        lambda: write_settings(gemini, with_hooks({}, ours)),
        lambda: tighten(gemini.parent),
        *(lambda name=name: _remove_login(gemini / name) for name in LOGIN_FILES),
    ):
        try:
            step()
        except OSError as e:
            failed.append(e)
    if failed:
        raise failed[0]


def _remove_login(path: Path) -> None:
    """A login file Gemini CLI wrote in place of the link to the user's: not kept in the run."""
    if path.exists() and not path.is_symlink():
        path.unlink()
