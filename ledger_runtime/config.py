"""LedgerConfig: every setting of the runtime, with its default, loadable from a TOML file.

A TOML file may give the keys at the top level, or under a ``[ledger]`` table (then only that table
is read: the file may hold other tools' settings too). An unknown key is an error that names it; so
is a value of the wrong type.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any

from ledger_runtime.answers.build import Dedupe


class ConfigError(ValueError):
    """A config file or value the runtime cannot use; the message names the key."""


@dataclass(frozen=True)
class LedgerConfig:
    """Runtime settings. Defaults match mini-swe-agent's own limits where there is one."""

    inform: bool = True
    """Render the state view into the prompt before each model call."""
    govern: bool = True
    """Decide a verdict for each command before it runs (off: every command runs, still recorded)."""
    shadow: bool = False
    """Record and decide only: every command executes and returns its real output, and nothing
    reaches the model, no state view either (baselines, replays)."""
    shadow_view: bool = False
    """In shadow mode, still put the state view into the prompt (an inform-only run whose verdicts
    are recorded). Off: shadow mode changes nothing the model sees."""
    view_budget_tokens: int = 1200
    """Budget of the state view, in tokens estimated as characters / 4."""
    view_recent_attempts: int = 8
    """How many recent commands the state view lists at most."""
    dedupe: Dedupe = Dedupe.SPANS
    """What the model gets back for a command that ran: its fresh output with verbatim repeats of
    what it was already shown replaced by references ("spans": whole outputs, runs of lines and
    diffs of re-reads; "whole": whole outputs only; "off": the output as it is)."""
    dedupe_min_lines: int = 2
    """The shortest run of repeated lines that becomes a reference."""
    dedupe_min_saving: int = 60
    """Characters an answer must save the model at least (and each reference in it 40, or this if
    less); below that the output stays as it is."""
    nudge_repeats: bool = True
    """NUDGE a repeated run, or a repeated failing command, when nothing changed since."""
    output_limit_chars: int = 10000
    """Outputs this long or longer reach the model cut (mini-swe-agent: 10,000)..."""
    output_head_chars: int = 5000
    """...to their first ``output_head_chars``..."""
    output_tail_chars: int = 5000
    """...and last ``output_tail_chars`` characters."""
    max_stored_output_chars: int = 4 * 1024 * 1024
    """Outputs longer than this are stored as their first and last lines (about half of this each)
    with a line saying how much is left out; the model's answer is the output as it is."""
    max_hash_bytes: int = 64 * 1024 * 1024
    """Files larger than this are tracked by their stat data instead of their content."""
    max_content_bytes: int = 2 * 1024 * 1024
    """Changed text files up to this size are stored in the ledger, so diffs can be counted."""
    context_steps: int = 0
    """How many recent steps' outputs the model still has (0: all of them). Set by adapters whose
    agent drops old history."""
    context: str = "full"
    """What of the agent's earlier outputs is sent to the model (the agent's history is not changed):
    "full"; "window:M" (outputs older than the last M become a placeholder: the masking baseline);
    "validity" (an output with nothing both still true and shown nowhere later becomes a one-line
    stub); "validity+window:M" (older than the last M: only such lines are kept). See docs/context.md."""
    view_share: float = 0.5
    """The notes of the state view the model holds take at most this share of the characters the
    answers spared it so far (references, diffs), so that the ledger never makes a run dearer than
    the same run without it; ``inf``: no such bound. See docs/context.md."""
    context_note_chars: int = 600
    """The longest note of the state view (notes stay where they were sent: mini-swe-agent's copy of
    the history sent to its model, Codex's own history); what does not fit goes into the next note."""
    policies: dict = field(default_factory=dict)
    """The policy gate's rules: ``[policies.<name>]`` tables (enabled, verdict, paths, parameters);
    see docs/policies.md. Every built-in rule is on with its defaults unless set here."""
    redact: bool = True
    """Mask secrets before anything is stored (ledger blobs and events, faults.log, replay results):
    the values of the environment's secret-looking variables, well-known token shapes and
    ``redact_patterns``. What the model is shown is not changed."""
    redact_patterns: list = field(default_factory=list)
    """Regular expressions of more secrets to mask (each matched within one line; with a group,
    only the group is masked)."""
    rescan_before_command: bool = True
    """Scan the workspace before each command too, so changes made between commands (by the user
    or a background process) are recorded as such and not blamed on the next command."""
    scan_budget_s: float = 3.0
    """Seconds one scan spends at most taking in what is new (listing, classifying, hashing new
    entries); past it, what it was taking in is untracked: its contents are unknown from then on."""
    scan_max_new_entries: int = 1000
    """New entries (files and directories) one scan takes in under one new directory, or directly in
    a known one (twice this in all); past it, that directory is untracked: a summary and a fault are
    recorded, and its contents are unknown from then on (docs/settings.md, "Bounds of a scan")."""
    scan_max_depth: int = 64
    """Directory levels below the root that are listed; a directory deeper than that is untracked."""

    def __post_init__(self) -> None:
        """Every setting is checked here, and only here: a config that exists is one the runtime can use."""
        for name, kind in _CHOICES.items():  # one vocabulary per setting: the enum's
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, kind(value))
            except ValueError:
                allowed = " or ".join(repr(k.value) for k in kind)
                raise ConfigError(f"{name} must be {allowed}, not {value!r}") from None
        from ledger_runtime.decide.context import ContextError, ContextPolicy

        try:
            object.__setattr__(self, "_context_policy", ContextPolicy.parse(self.context))
        except ContextError as e:
            raise ConfigError(str(e)) from None
        if not self.view_share >= 0:  # NaN too
            raise ConfigError(f"view_share must be 0 or more (inf: no bound), not {self.view_share!r}")
        if not 0 < self.scan_budget_s < float("inf"):  # NaN too
            raise ConfigError(f"scan_budget_s must be a positive number of seconds, not {self.scan_budget_s!r}")
        if self.dedupe_min_lines < 1:
            raise ConfigError(f"dedupe_min_lines must be at least 1, not {self.dedupe_min_lines!r}")
        for name in (
            "view_budget_tokens",
            "output_limit_chars",
            "max_hash_bytes",
            "context_note_chars",
            "max_stored_output_chars",
            "scan_max_new_entries",
            "scan_max_depth",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)!r}")
        if self.policies:
            from ledger_runtime.decide.gate import PolicyError, build_rules
            from ledger_runtime.decide.policies import BUILTINS

            try:
                build_rules(self.policies, "", BUILTINS)
            except PolicyError as e:
                raise ConfigError(str(e)) from None
        from ledger_runtime.ledger.redact import RedactError, compile_patterns

        try:
            compile_patterns(self.redact_patterns)
        except RedactError as e:
            raise ConfigError(str(e)) from None
        for name in (
            "view_recent_attempts",
            "output_head_chars",
            "output_tail_chars",
            "context_steps",
            "max_content_bytes",
            "dedupe_min_saving",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must not be negative, not {getattr(self, name)!r}")

    @property
    def informs(self) -> bool:
        """Whether the state view reaches the model."""
        return self.inform and (not self.shadow or self.shadow_view)

    @property
    def context_policy(self):  # -> ContextPolicy (decide/context.py), parsed once with the check
        """The ``context`` setting, parsed."""
        return self._context_policy

    @property
    def applies(self) -> bool:
        """Whether verdicts take effect (otherwise they are decided and recorded only)."""
        return self.govern and not self.shadow

    def with_(self, **changes: Any) -> LedgerConfig:
        """A copy with some settings changed (unknown names are an error)."""
        return from_mapping({**self.to_dict(), **changes})

    def to_dict(self) -> dict[str, Any]:
        """Plain values (the settings' words, not their enums): TOML, JSON and ``from_mapping`` take them."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


# the settings that take one of a fixed set of words, and the enum that is their vocabulary
_CHOICES: dict[str, type[Enum]] = {"dedupe": Dedupe}

# settings that are no more: a file may still name them as they were off; on, the reason they went
REMOVED = {
    "reuse_runs": "reuse_runs was removed: a test run not run again hands back a prediction of its output, and "
    "what a run reads (the environment, files outside the tree, time, randomness) has no end; every command "
    "runs now, and a repeat comes back as a reference to an identical earlier output (docs/settings.md)",
    "reuse_output": "reuse_output was removed with reuse_runs (docs/settings.md)",
}


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _field_types() -> dict[str, type]:
    return {f.name: type(_plain(getattr(LedgerConfig(), f.name))) for f in fields(LedgerConfig)}


def from_mapping(values: dict[str, Any], *, origin: str = "config") -> LedgerConfig:
    """Build a config from a mapping, rejecting unknown keys and wrong types by name."""
    types = _field_types()
    clean: dict[str, Any] = {}
    for key, value in values.items():
        if key in REMOVED:
            if key == "reuse_runs" and value is True:
                raise ConfigError(f"{origin}: {REMOVED[key]}")
            continue  # off, or how an option that is no more was shown: nothing to do
        if key not in types:
            raise ConfigError(f"{origin}: unknown key {key!r} (known: {', '.join(sorted(types))})")
        want = types[key]
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)  # `view_share = 1` is a share too
        if want is int and isinstance(value, bool) or not isinstance(value, want):
            raise ConfigError(f"{origin}: {key!r} must be {want.__name__}, not {type(value).__name__}")
        clean[key] = value
    try:
        return replace(LedgerConfig(), **clean)
    except ConfigError as e:
        raise ConfigError(f"{origin}: {e}") from None


def load_config(
    path: str | Path | None = None, *, defaults: dict[str, Any] | None = None, **overrides: Any
) -> LedgerConfig:
    """Load a TOML config file (keys at the top level, or all under ``[ledger]``: a file with both is
    refused), then apply overrides.
    ``defaults``: an adapter's own defaults, which the file may still change."""
    values: dict[str, Any] = dict(defaults or {})
    if path is not None:
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {p}") from None
        except OSError as e:  # a directory, no permission
            raise ConfigError(f"{p}: cannot read it as a config file: {e.strerror or e}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{p}: not valid TOML: {e}") from None
        section = data.get("ledger")
        if section is not None:  # a [ledger] table in a larger file: the rest of it is not ours
            if not isinstance(section, dict):
                raise ConfigError(f"{p}: 'ledger' must be a table")
            ours = sorted(k for k in data if k in LedgerConfig.__dataclass_fields__)
            if ours:  # never half-read: settings in two places would leave one of them unread
                raise ConfigError(
                    f"{p}: {', '.join(ours)} {'is' if len(ours) == 1 else 'are'} set at the top level of a file "
                    "with a [ledger] table: put every setting in the [ledger] table (or all at the top level, "
                    "without one)"
                )
            values.update(section)
        else:
            values.update(data)
        config = from_mapping(values, origin=str(p))
    else:
        config = from_mapping(values, origin="defaults")
    return config.with_(**overrides) if overrides else config


DEFAULT = LedgerConfig()
__all__ = ["ConfigError", "LedgerConfig", "load_config", "from_mapping", "DEFAULT"]
