"""Ledger runtime: an execution ledger around unmodified coding agents.

This package is the agent-agnostic core; adapters for specific agents (``ledger_adapters``) and
anything else built on it import what they need from here, and only from here: the names below are
the public API (docs/adapters.md says how an adapter uses them). They load on first use, so
importing the package costs nothing (the hook client's start-up depends on that). The evaluation
harness (``ledger_harness``: replay, SWE-bench arms, tau2) measures the rooms themselves; nothing
here imports it.

The rooms, from the bottom up (a room imports only rooms below it; tests/test_structure.py checks):
``records`` and ``lines`` (the vocabulary), ``analysis`` (what a command reads, shows and writes),
``workspace`` (snapshots, signatures, hashing, baseline), ``ledger`` (state, store, observations,
modifications, faults, masking), ``answers`` (the answer built from a fresh output), ``held`` (what
the model holds, the context policy), ``decide`` (govern, the policy gate, the final verdict),
``inform`` (the state view), ``config``, ``step`` (the stages of one step: plan, scan, respond,
record), ``runtime`` (the front that calls them), ``inspection``, ``trajectories`` (recorded runs),
``cli``; ``hooks`` stands alone (standard library only).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is not imported for it: the hook client's start-up pays for every module

__version__ = "0.1.0"

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
    "from_mapping": "config",
    "toml_inline": "config_file",
    # running commands, and the files they run on
    "ExecResult": "executor",
    "LocalExecutor": "executor",
    "kill_child_sessions": "executor",
    "child_groups": "executor",
    "Execute": "contract",
    "Adapter": "contract",
    "Workspace": "workspace.local",
    "LocalWorkspace": "workspace.local",
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
    "ANY_FILE": "analysis.commands",
    # records
    "Verdict": "records",
    "VerdictKind": "records",
    "Baseline": "records",
    "Truncation": "ledger.observe",
    "NotALedger": "ledger.store",
    "load": "inspection",
    "summary": "inspection",
    "render_summary": "inspection",
    "model_cost_text": "inspection",
    # privacy
    "secret_values": "ledger.redact",
    "private_dir": "ledger.private",
    "write_private": "ledger.private",
    "tighten": "ledger.private",
    "InUse": "ledger.private",
    "touch_private": "ledger.private",
    "mask_json_file": "ledger.masked_files",
    "masked": "ledger.masked_files",
    # the policy gate, for adapters with rules of their own
    "Rule": "decide.gate",
    "Finding": "decide.gate",
    "build_rules": "decide.gate",
    "check_all": "decide.gate",
    "compose": "decide.gate",
    # what of the history is sent
    "ContextPolicy": "held.context",
    "Said": "held.context",
    "Sticky": "held.context",
    "KEEP": "held.context",
    "stub_text": "held.context",
    "to_send": "held.context",
    "VIEW_NOTE": "inform",
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
    "HookServer": "hooks.server",
    "HttpHookServer": "hooks.http",
    "fasthook_script": "hooks",
    "hook_client": "hooks.compiled",
    "appended_lines": "hooks.tail",
    "refreshed": "hooks.tail",
    "hook_launcher": "cli.launch",
    "fast_launcher": "cli.launch",
    "exec_either": "cli.launch",
    "run_agent": "cli.launch",
    "find_binary": "cli.agents",
    "binary_version": "cli.agents",
    "warn_version": "cli.agents",
    "agent_config": "cli.agents",
    "run_dir_for": "cli.agents",
    "starting_run": "cli.agents",
    "run_pinned": "cli.agents",
    "LedgerOptions": "cli.options",
    "checked_workdir": "cli.options",
    # commands adapters add to ``ledger-run``
    "fail": "cli.errors",
    "err": "cli.errors",
    "interrupted": "cli.interrupt",
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
        ANY_FILE,
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
        agent_config,
        binary_version,
        find_binary,
        run_dir_for,
        run_pinned,
        starting_run,
        warn_version,
    )
    from ledger_runtime.cli.dirs import unwritable
    from ledger_runtime.cli.errors import err, fail
    from ledger_runtime.cli.interrupt import interrupted
    from ledger_runtime.cli.launch import exec_either, fast_launcher, hook_launcher, run_agent
    from ledger_runtime.cli.options import LedgerOptions, checked_workdir
    from ledger_runtime.config import ConfigError, LedgerConfig, from_mapping, load_config
    from ledger_runtime.config_file import toml_inline
    from ledger_runtime.contract import Adapter, Execute
    from ledger_runtime.decide.gate import Finding, Rule, build_rules, check_all, compose
    from ledger_runtime.executor import ExecResult, LocalExecutor, child_groups, kill_child_sessions
    from ledger_runtime.held.context import KEEP, ContextPolicy, Said, Sticky, stub_text, to_send
    from ledger_runtime.hooks import fasthook_script
    from ledger_runtime.hooks.compiled import hook_client
    from ledger_runtime.hooks.http import HttpHookServer
    from ledger_runtime.hooks.server import HookServer
    from ledger_runtime.hooks.tail import appended_lines, refreshed
    from ledger_runtime.inform import VIEW_NOTE
    from ledger_runtime.inspection import load, render_summary, summary
    from ledger_runtime.ledger.masked_files import mask_json_file, masked
    from ledger_runtime.ledger.observe import Truncation
    from ledger_runtime.ledger.private import InUse, private_dir, tighten, write_private
    from ledger_runtime.ledger.redact import secret_values
    from ledger_runtime.ledger.store import NotALedger
    from ledger_runtime.prompt.history import History, Message, Sent
    from ledger_runtime.prompt.notes import ViewNotes
    from ledger_runtime.records import Baseline, Verdict, VerdictKind
    from ledger_runtime.runtime import LedgerRuntime
    from ledger_runtime.step.plan import Plan, RunResult
    from ledger_runtime.trajectories import (
        Conversation,
        ModelTurn,
        RecordedFormat,
        RecordedStep,
        Trajectory,
        TrajectoryError,
    )
    from ledger_runtime.workspace.hashing import FileState
    from ledger_runtime.workspace.local import LocalWorkspace, Workspace
    from ledger_runtime.workspace.scanner import Snapshot, UntrackedTree
    from ledger_runtime.workspace.scanning import UNPACK_SOURCES, pack_sources, scanner_sources
    from ledger_runtime.workspace.signatures import PENDING
