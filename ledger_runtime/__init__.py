"""Ledger runtime: an execution ledger around unmodified coding agents.

The agent-agnostic core. Adapters import only from here: the names below are the public API (docs/adapters.md), loaded
on first use so that importing the package costs nothing, which the hook client's start-up depends on. The harness
measures the rooms; nothing here imports it.

The rooms, from the bottom up, each importing only rooms below it (tests/test_structure.py): ``records`` and ``lines``,
the vocabulary, and ``json_text``, JSON records read; ``analysis``, what a command reads, shows and writes;
``workspace``, snapshots and signatures; ``ledger``, state, store and masking; ``answers``, built from fresh outputs;
``held``, what the model holds; ``decide``, the verdicts; ``inform``, the state view; ``config``; ``step``, one step's
stages; ``runtime``, their front; ``inspection``; ``trajectories``, recorded runs; ``cli``. ``hooks`` stands alone on
the standard library and ``json_text``.
"""

from __future__ import annotations

import sys

from ledger_runtime._version import __version__

TYPE_CHECKING = False  # typing is not imported for it: the hook client's start-up pays for every module

# name -> the module that defines it
_EXPORTS = {
    # the runtime and its step
    "LedgerRuntime": "runtime",
    "RunResult": "step.plan",
    "Plan": "step.plan",
    "Submission": "analysis.submission",
    "NO_SUBMISSION": "analysis.submission",
    # settings
    "LedgerConfig": "config",
    "ConfigError": "config",
    "load_config": "config",
    "toml_inline": "config_file",
    # running commands, and the files they run on
    "ExecResult": "executor",
    "LocalExecutor": "executor",
    "kill_child_sessions": "executor",
    "child_groups": "executor",
    "Execute": "contract",
    "Adapter": "contract",
    "Workspace": "workspace.local",
    "Snapshot": "workspace.scanner",
    "UntrackedTree": "workspace.scanner",
    # the scanner shipped into a container, to run there as a helper next to the commands
    "scanner_sources": "workspace.scanning",
    "pack_sources": "workspace.scanning",
    "UNPACK_SOURCES": "workspace.scanning",
    "FileState": "workspace.hashing",
    "PENDING": "workspace.signatures",
    # what a command is
    "Analysis": "analysis.commands",
    "analyze": "analysis.commands",
    "analyze_patch": "analysis.commands",
    "analyze_read": "analysis.commands",
    "analyze_edit": "analysis.commands",
    "analyze_search": "analysis.commands",
    "analyze_submission": "analysis.commands",
    # records
    "Verdict": "records",
    "VerdictKind": "records",
    "Baseline": "records",
    "Truncation": "ledger.observe",
    "NotALedger": "ledger.store",
    "load": "inspection",
    "summary": "inspection",
    "render_summary": "inspection",
    # privacy
    "secret_values": "ledger.redact",
    "file_secrets": "ledger.redact",
    "private_dir": "ledger.private",
    "write_private": "ledger.private",
    "tighten": "ledger.private",
    "InUse": "ledger.private",
    "touch_private": "ledger.private",
    "mask_json_file": "ledger.masked_files",
    "keep_masked_jsonl": "ledger.masked_files",
    "masked": "ledger.masked_files",
    "masked_json": "ledger.masked_files",
    # the policy gate, for adapters with rules of their own
    "Rule": "decide.gate",
    "Finding": "decide.gate",
    "build_rules": "decide.gate",
    "check_all": "decide.gate",
    "compose": "decide.gate",
    # what of the history is sent
    "RewriteSchedule": "held.context",
    "to_send": "held.context",
    "ContextPolicy": "held.context",
    "ContextError": "held.context",
    "History": "prompt.history",
    "Message": "prompt.history",
    "Sent": "prompt.history",
    "ViewNotes": "prompt.notes",
    # agents that run commands themselves (hooks)
    # recorded runs, for adapters whose agent records them (``ledger-run replay`` reads them; the run's
    # page shows the model's side of them)
    "Trajectory": "trajectories",
    "RecordedStep": "trajectories",
    "TrajectoryError": "trajectories",
    "RecordedFormat": "trajectories",
    "ModelTurn": "trajectories",
    "Conversation": "trajectories",
    "read_record": "ledger.private",
    "taken_conversation": "ledger.private",
    "leave_conversation": "ledger.private",
    "regular_only": "trajectories",
    "MAX_RECORD_BYTES": "ledger.private",
    "json_value": "json_text",
    "UnreadableJSON": "json_text",
    "SeenFiles": "seen",
    "file_diff": "seen",
    "file_text": "seen",
    "shown_path": "seen",
    "HookServer": "hooks.server",
    "HttpHookServer": "hooks.http",
    "hook_client": "hooks.compiled",
    "appended_lines": "hooks.tail",
    "refreshed": "hooks.tail",
    "hook_launcher": "cli.launch",
    "fast_launcher": "cli.launch",
    "hook_script": "cli.launch",
    "loopback_unproxied": "cli.launch",
    "exec_either": "cli.launch",
    "run_agent": "cli.launch",
    "ctrl_c_is_the_agents": "cli.launch",
    "find_binary": "cli.agents",
    "binary_not_found": "cli.agents",
    "binary_version": "cli.agents",
    "run_dir_for": "cli.agents",
    "run_pinned": "cli.agents",
    "warn_unheard": "cli.agents",
    "LedgerOptions": "cli.options",
    "AgentOptions": "cli.options",
    "agent_command": "cli.options",
    "agent_context": "cli.options",
    "checked_workdir": "cli.options",
    # commands adapters add to ``ledger-run``
    "fail": "cli.errors",
    "stderr": "cli.errors",
    "interrupted": "cli.interrupt",
    "plain_console": "cli.printable",
    "shell_word": "cli.printable",
    "unwritable": "cli.dirs",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger_runtime' has no attribute {name!r}")
    qualified = f"{__name__}.{module}"
    __import__(qualified)
    value = getattr(sys.modules[qualified], name)
    globals()[name] = value  # the next lookup is a plain one
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # for type checkers and editors: the same names, imported eagerly
    from ledger_runtime.analysis.commands import (
        Analysis,
        analyze,
        analyze_edit,
        analyze_patch,
        analyze_read,
        analyze_search,
        analyze_submission,
    )
    from ledger_runtime.analysis.submission import NO_SUBMISSION, Submission
    from ledger_runtime.cli.agents import (
        binary_not_found,
        binary_version,
        find_binary,
        run_dir_for,
        run_pinned,
        warn_unheard,
    )
    from ledger_runtime.cli.dirs import unwritable
    from ledger_runtime.cli.errors import fail, stderr
    from ledger_runtime.cli.interrupt import interrupted
    from ledger_runtime.cli.launch import (
        ctrl_c_is_the_agents,
        exec_either,
        fast_launcher,
        hook_launcher,
        hook_script,
        loopback_unproxied,
        run_agent,
    )
    from ledger_runtime.cli.options import AgentOptions, LedgerOptions, agent_command, agent_context, checked_workdir
    from ledger_runtime.cli.printable import plain_console, shell_word
    from ledger_runtime.config import ConfigError, LedgerConfig, load_config
    from ledger_runtime.config_file import toml_inline
    from ledger_runtime.contract import Adapter, Execute
    from ledger_runtime.decide.gate import Finding, Rule, build_rules, check_all, compose
    from ledger_runtime.executor import ExecResult, LocalExecutor, child_groups, kill_child_sessions
    from ledger_runtime.held.context import ContextError, ContextPolicy, RewriteSchedule, to_send
    from ledger_runtime.hooks.compiled import hook_client
    from ledger_runtime.hooks.http import HttpHookServer
    from ledger_runtime.hooks.server import HookServer
    from ledger_runtime.hooks.tail import appended_lines, refreshed
    from ledger_runtime.inspection import load, render_summary, summary
    from ledger_runtime.ledger.masked_files import keep_masked_jsonl, mask_json_file, masked, masked_json
    from ledger_runtime.ledger.observe import Truncation
    from ledger_runtime.ledger.private import MAX_RECORD_BYTES, InUse, private_dir, read_record, tighten, write_private
    from ledger_runtime.ledger.redact import file_secrets, secret_values
    from ledger_runtime.ledger.store import NotALedger
    from ledger_runtime.prompt.history import History, Message, Sent
    from ledger_runtime.prompt.notes import ViewNotes
    from ledger_runtime.records import Baseline, Verdict, VerdictKind
    from ledger_runtime.runtime import LedgerRuntime
    from ledger_runtime.seen import SeenFiles, file_diff, file_text, shown_path
    from ledger_runtime.step.plan import Plan, RunResult
    from ledger_runtime.trajectories import (
        Conversation,
        ModelTurn,
        RecordedFormat,
        RecordedStep,
        Trajectory,
        TrajectoryError,
        regular_only,
    )
    from ledger_runtime.workspace.hashing import FileState
    from ledger_runtime.workspace.local import Workspace
    from ledger_runtime.workspace.scanner import Snapshot, UntrackedTree
    from ledger_runtime.workspace.scanning import UNPACK_SOURCES, pack_sources, scanner_sources
    from ledger_runtime.workspace.signatures import PENDING
