"""LedgerConfig: every setting of the runtime, with its default, loadable from a TOML file.

The settings come in sections, each owned and checked by the room that uses it (section.py); the modes (``inform``,
``govern``, ``shadow``) are keys of their own. A file gives them at its top level or all under ``[ledger]``, and then
only that table is read. The flat names of older files (``dedupe_min_lines``) still load; setting one key both ways,
differently, is refused. An unknown key or a refused value is an error naming it as the file spells it.
"""

from __future__ import annotations

import os
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ledger_runtime.answers.build import DedupeSettings
from ledger_runtime.decide.policies import PolicySettings
from ledger_runtime.held.context import ContextSettings
from ledger_runtime.inform import ViewSettings
from ledger_runtime.ledger.observe import TruncationSettings
from ledger_runtime.ledger.redact import RedactionSettings
from ledger_runtime.section import BOOLEAN, ConfigError, Section, SettingError, dotted, plain, setting
from ledger_runtime.workspace.scanner import ScanSettings

SECTIONS: dict[str, type[Section]] = {
    s.name: s
    for s in (
        ViewSettings,
        DedupeSettings,
        TruncationSettings,
        ContextSettings,
        PolicySettings,
        RedactionSettings,
        ScanSettings,
    )
}

Path_ = tuple[str, str]  # (section, key): ("dedupe", "min_lines"); ("", "inform") for a key of [ledger] itself


@dataclass(frozen=True)
class LedgerConfig(Section):
    """Runtime settings; defaults match mini-swe-agent's own limits where there is one."""

    inform: bool = setting(True, BOOLEAN)
    """Render the state view into the prompt before each model call."""
    govern: bool = setting(True, BOOLEAN)
    """Decide a verdict for each command before it runs (off: every command runs, still recorded)."""
    shadow: bool = setting(False, BOOLEAN)
    """Record and decide only: every command executes and returns its real output, and nothing
    reaches the model, no state view either (baselines, replays)."""
    shadow_view: bool = setting(False, BOOLEAN)
    """In shadow mode, still put the state view into the prompt (an inform-only run whose verdicts
    are recorded). Off: shadow mode changes nothing the model sees."""
    nudge_repeats: bool = setting(True, BOOLEAN)
    """NUDGE a repeated run, or a repeated failing command, when no file the ledger tracks changed since."""
    view: ViewSettings = field(default_factory=ViewSettings)
    dedupe: DedupeSettings = field(default_factory=DedupeSettings)
    truncation: TruncationSettings = field(default_factory=TruncationSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    policies: PolicySettings = field(default_factory=PolicySettings)
    redaction: RedactionSettings = field(default_factory=RedactionSettings)
    scanning: ScanSettings = field(default_factory=ScanSettings)

    def validate(self) -> None:
        for name, kind in SECTIONS.items():
            if not isinstance(getattr(self, name), kind):
                raise SettingError(name, "", f"expected {kind.__name__}, got {getattr(self, name)!r}")

    @property
    def informs(self) -> bool:
        """Whether the state view reaches the model."""
        return self.inform and (not self.shadow or self.shadow_view)

    @property
    def context_policy(self):  # -> ContextPolicy (held/context.py), parsed once with the check
        """The ``context.policy`` setting, parsed."""
        return self.context.parsed

    @property
    def applies(self) -> bool:
        """Whether verdicts take effect rather than being decided and recorded only."""
        return self.govern and not self.shadow

    def with_(self, **changes: Any) -> LedgerConfig:
        """A copy with some settings changed, by flat name, own key or whole section."""
        return self.updated(changes)

    def updated(self, changes: Mapping[str, Any], *, origin: str = "config") -> LedgerConfig:
        """``with_`` for a mapping from a named ``origin``, such as a mini-swe-agent config or the command line."""
        given, names = settings_in(changes, origin=origin)
        return _build({**_every(self), **given}, names, origin=origin)

    def to_dict(self) -> dict[str, Any]:
        """Every setting under its flat name, as ledgers and results always recorded them; ``from_mapping`` reads it."""
        return {flat: plain(getattr(self._section(path[0]), path[1])) for flat, path in FLAT.items()}

    def sections(self) -> dict[str, Any]:
        """Every setting as a ``[ledger]`` table gives it: its own keys, then a table per section."""
        return {**self.table(), **{name: getattr(self, name).table() for name in SECTIONS}}

    def _section(self, name: str) -> Section:
        return getattr(self, name) if name else self


# every flat name (the key's name before there were sections, and a top-level key's own) -> its path
FLAT: dict[str, Path_] = {
    **{key: ("", key) for key in LedgerConfig.keys()},
    **{flat: (name, key) for name, kind in SECTIONS.items() for flat, key in kind.flat.items()},
}

# settings that are no more: a file may still name them as they were off; on, the reason they went
REMOVED = {
    "reuse_runs": "reuse_runs was removed: a test run not run again hands back a prediction of its output, and "
    "what a run reads (the environment, files outside the tree, time, randomness) has no end; every command "
    "runs now, and a repeat comes back as a reference to an identical earlier output (docs/settings.md)",
    "reuse_output": "reuse_output was removed with reuse_runs (docs/settings.md)",
}


def is_setting(key: str) -> bool:
    """Whether ``key`` names a setting or a section, at the top of a file or of a ``[ledger]`` table."""
    return key in FLAT or key in SECTIONS


def _every(config: LedgerConfig) -> dict[Path_, Any]:
    """Every setting of ``config`` by its path."""
    return {path: getattr(config._section(path[0]), path[1]) for path in FLAT.values()}


def settings_in(  # noqa: C901
    values: Mapping[str, Any], *, origin: str, prefix: str = ""
) -> tuple[dict[Path_, Any], dict[Path_, str]]:
    """The settings one source gives, by path, and each one's name as the source spells it.

    A key given flat and in its section with different values is refused: which was meant is not ours to guess.
    """
    got: dict[Path_, Any] = {}
    names: dict[Path_, str] = {}

    def put(path: Path_, value: Any, name: str) -> None:
        if path in got and plain(got[path]) != plain(value):
            raise ConfigError(
                f"{origin}: {names[path]} = {plain(got[path])!r} and {name} = {plain(value)!r} set the same "
                "setting to different values: keep one (the sectioned form: ledger-run config)"
            )
        got[path] = value
        names.setdefault(path, name)

    for key, value in values.items():
        if key in REMOVED:
            if key == "reuse_runs" and value is True:
                raise ConfigError(f"{origin}: {REMOVED[key]}")
            continue  # off, or how an option that is no more was shown: nothing to do
        kind = SECTIONS.get(key)
        if kind is not None and isinstance(value, Section):
            value = value.table()
        if kind is not None and kind.whole:
            put((key, kind.whole), value, prefix + key)
        elif kind is not None and isinstance(value, Mapping):
            for k, v in value.items():
                if k not in kind.keys():
                    raise ConfigError(
                        f"{origin}: unknown key {prefix + key + '.' + k!r} (known in [{dotted(key, '')}]: "
                        f"{', '.join(kind.keys())})"
                    )
                put((key, k), v, f"{prefix}{key}.{k}")
        elif key in FLAT:
            put(FLAT[key], value, prefix + key)
        elif kind is not None:
            raise ConfigError(f"{origin}: {prefix + key}: expected a table ([{dotted(key, '')}]), got {value!r}")
        else:
            known = [*LedgerConfig.keys(), *(f"[{name}]" for name in SECTIONS)]
            raise ConfigError(
                f"{origin}: unknown key {prefix + key!r} (known: {', '.join(known)}; the flat names "
                "of older files: docs/settings.md)"
            )
    return got, names


def _build(paths: Mapping[Path_, Any], names: Mapping[Path_, str], *, origin: str) -> LedgerConfig:
    """The config of these settings by path, the rest at default; a refused one is named as its source spelled it."""
    by_section: dict[str, dict[str, Any]] = {}
    for (section, key), value in paths.items():
        by_section.setdefault(section, {})[key] = value
    try:
        parts = {name: kind(**by_section.get(name, {})) for name, kind in SECTIONS.items()}
        return LedgerConfig(**by_section.get("", {}), **parts)
    except SettingError as e:
        path = (e.section, e.key or (SECTIONS[e.section].whole if e.section in SECTIONS else ""))
        raise ConfigError(f"{origin}: {names.get(path, dotted(e.section, e.key))}: {e.detail}") from None


def from_mapping(values: Mapping[str, Any], *, origin: str = "config") -> LedgerConfig:
    """A config from flat names, sections or both."""
    given, names = settings_in(values, origin=origin)
    return _build(given, names, origin=origin)


MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a settings file is a few KiB: past this it is not read (a link to /dev/zero)


def _read(p: Path) -> dict[str, Any]:
    try:
        with open(p, "rb") as f:  # (a pipe too: --ledger-config <(...))
            st = os.fstat(f.fileno())
            if stat.S_ISREG(st.st_mode) and st.st_size > MAX_CONFIG_BYTES:
                raise ConfigError(f"{p}: {st.st_size:,} bytes, over the {MAX_CONFIG_BYTES:,} of a settings file")
            data = f.read(MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:
            what = "a device that reads" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "it reads"
            raise ConfigError(f"{p}: {what} on past {MAX_CONFIG_BYTES:,} bytes, not a settings file")
        return tomllib.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {p}") from None
    except OSError as e:  # a directory, no permission
        raise ConfigError(f"{p}: cannot read it as a config file: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    except RecursionError:
        raise ConfigError(f"{p}: not valid TOML: nested deeper than it can be read") from None


def load_config(
    path: str | Path | None = None, *, defaults: dict[str, Any] | None = None, **overrides: Any
) -> LedgerConfig:
    """Loads a TOML config file, then applies overrides; the file may change an adapter's ``defaults``."""
    paths, names = settings_in(defaults or {}, origin="defaults")
    origin = "defaults"
    if path is not None:
        p = Path(path)
        origin = str(p)
        data = _read(p)
        table, prefix = data, ""
        if "ledger" in data:  # a [ledger] table in a larger file: the rest of it is not ours
            table, prefix = data["ledger"], "ledger."
            if not isinstance(table, dict):
                raise ConfigError(f"{p}: 'ledger' must be a table")
            ours = sorted(k for k in data if is_setting(k))
            if ours:  # never half-read: settings in two places would leave one of them unread
                raise ConfigError(
                    f"{p}: {', '.join(ours)} {'is' if len(ours) == 1 else 'are'} set at the top level of a file "
                    "with a [ledger] table: put every setting in the [ledger] table (or all at the top level, "
                    "without one)"
                )
        given, names = settings_in(table, origin=origin, prefix=prefix)
        paths.update(given)
    config = _build(paths, names, origin=origin)
    return config.with_(**overrides) if overrides else config


DEFAULT = LedgerConfig()
__all__ = ["ConfigError", "LedgerConfig", "load_config", "from_mapping", "DEFAULT", "SECTIONS", "FLAT"]
