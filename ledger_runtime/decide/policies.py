"""Built-in coding policies for the gate, each a pure check with its default verdict and parameters.

- ``stale-edit`` (NUDGE): an in-place edit of a file the agent has not seen as it is: never read, or changed since by
  something other than its own recognised edits (a subagent's edits and reads are not its own; a subagent's edits are
  not judged).
- ``protected-paths`` (REVISE; ``globs``): an edit of a file that existed at the start and matches a glob.
- ``destructive`` (BLOCK; ``patterns``, ``extra_patterns``): ``git reset --hard``, ``git checkout -- .``, ``git clean
  -f``, ``git restore .``, ``rm -r`` of the workspace or a parent; never inside quotes, comments or heredocs.
- ``verify-before-submit`` (REVISE; ``ignore``): a submission when files that existed at the start changed after the
  last test or script run. Files the agent created are taken for scratch. Only once: the same submission again, nothing
  changed, goes through.
- ``noop-edit`` (NUDGE, after the command ran): an edit that changed no file.
- ``repeat-failure`` (NUDGE, REVISE from ``revise_after`` runs): the same failing command again with no tracked file
  changed since, by the same agent (a subagent's runs count for it alone, the main model's for the main model). A pure
  reader's repeat runs instead, answered against what the model holds.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

from ledger_runtime.analysis.commands import ANY_FILE, Analysis
from ledger_runtime.analysis.display import short_command
from ledger_runtime.analysis.patches import file_ops
from ledger_runtime.decide.claims import UNCHANGED_SINCE
from ledger_runtime.decide.gate import Finding, Outcome, PolicyError, Rule, build_rules, matches
from ledger_runtime.decide.workspace_now import WorkspaceNow
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.lines import one_line
from ledger_runtime.records import CommandClass, Observation, VerdictKind
from ledger_runtime.section import TABLE, Section, setting

IN_PLACE = re.compile(
    r"(^|[;&|(]\s*|\s)(sed|perl)\s+(-\S+\s+)*-[a-zA-Z]*i|(^|[;&|(]\s*|\s)(patch|ed|ex)\s|\bgit\s+apply\b"
)
_GIT = r"\bgit(?:\s+-[cC]\s+\S+|\s+--?[a-zA-Z][\w-]*(?:=\S+)?)*\s+"  # git and its global options
_ALL = r"\.?/?(?=\s|$|;|&|\|)"  # "." or "./" as the whole argument
DESTRUCTIVE = (
    _GIT + r"reset\s+(?:\S+\s+)*--hard\b",
    _GIT + r"checkout\s+(?:\S+\s+)*--\s+" + _ALL,
    _GIT + r"checkout\s+" + _ALL,
    _GIT + r"checkout\s+(?:\S+\s+)*(?:-f|--force)\b",
    _GIT + r"clean\s+(?:\S+\s+)*-[a-zA-Z]*f",
    _GIT + r"restore\s+(?:\S+\s+)*" + _ALL,
)
# an rm at the start of a command (not inside an argument such as echo 'rm -rf .')
_RM = re.compile(r"(?:^|[;&|(]|\n)\s*(?:sudo\s+)?rm\s+([^\n;&|)]+)")
_CD = re.compile(r"(?:^|[;&|(]|\n)\s*cd\s+([^\n;&|)]+)")
# a test or script run in a command the analysis classes otherwise: a modify's (`sed -i ... && pytest`) or an
# environment manager's, which may change the environment and runs the rest (`uv run pytest`, `conda run -n x ...`)
_RUN = re.compile(
    r"(?:^|[;&|(]|\n)\s*(?:timeout\s+\d+\s+)?"
    r"(?:(?:uv|poetry|pdm|pipenv|hatch|rye|conda|mamba|micromamba)\s+run\s+(?:-\S+\s+(?:[^-\s]\S*\s+)?)*)?"
    r"(?:python[0-9.]*|pytest|py\.test|tox|nox|make|bash|sh|\./)"
)


def _short(command: str, limit: int) -> str:
    return short_command(command, limit)


def _existing_writes(proposal: Analysis, current: WorkspaceNow) -> list[str]:
    return [w for w in proposal.writes if w != ANY_FILE and current.files.get(w) is not None]


def _display(path: str, rule: Rule) -> str:
    """A path as a reason names it: relative to the workdir, escaped so that it cannot write a line of the answer."""
    return one_line(
        os.path.relpath(path, rule.workdir) if rule.workdir and path.startswith(rule.workdir + os.sep) else path
    )


# the rules that judge a command by what the model was shown: the ledger keeps no record of what a subagent (Codex's
# multi_agent_v2, Claude Code's Task) read, so they do not judge its calls (they would say no read of it is on record)
SHOWN_RULES = ("stale-edit",)


def _subagents(state: LedgerState, attempt_id: int | None) -> bool:
    """Whether an attempt is a subagent's call: what it did, the model the ledger answers did not see done."""
    a = state.attempt(attempt_id) if attempt_id is not None else None
    return a is not None and a.agent != ""


def _reads_by(state: LedgerState, path: str, agent: str) -> list[Observation]:
    """The reads of ``path`` on record that ``agent``'s own calls made ("": the main model's): another model's read
    showed the file to that model, not to this one."""
    return [o for o in state.reads_of(path) if (a := state.attempt(o.attempt)) is None or a.agent == agent]


def stale_edit(proposal: Analysis, state: LedgerState, current: WorkspaceNow, rule: Rule) -> Finding | None:
    if proposal.command_class is not CommandClass.MODIFY or proposal.submits:
        return None
    in_place = IN_PLACE.search(_unquoted(proposal.command)) is not None
    ops = file_ops(proposal.command) if proposal.normalized.startswith("apply_patch\n") else None
    updated = {os.path.normpath(os.path.join(proposal.cwd, o.path)) for o in ops or () if o.kind == "update"}
    if not in_place and not updated:
        return None
    for path in _existing_writes(proposal, current):
        if (updated and path not in updated) or not rule.in_scope(path):
            continue
        seen = _reads_by(state, path, proposal.agent)  # a read through a link to it is a read of it
        if not seen:
            made = state.modifications_of(path)
            if made and made[0].before_hash is None and not _subagents(state, made[0].attempt):
                continue  # the agent wrote it: it knows what is in it
            return Finding(
                # what the ledger knows: the reads it recognised (`cat $PWD/a.py` or a script's print is a read too)
                f"{_display(path, rule)} is edited in place, and no read of it is on record; "
                "read the part you edit first",
                {"path": path, "observations": 0},
            )
        last = seen[-1]
        foreign = [
            m
            for m in state.modifications_of(path)
            if m.step >= last.step and m.attempt != last.attempt and (not m.recognised or _subagents(state, m.attempt))
        ]
        if foreign:
            m = foreign[-1]
            whose = "a subagent's " if _subagents(state, m.attempt) else ""  # the model it nudges never ran it
            by = "outside any command" if m.attempt is None else f"by {whose}`{_command(state, m.attempt)}`"
            return Finding(
                f"{_display(path, rule)} changed at step {m.step} {by} after its last read on record, at step "
                f"{last.step}; read it again before editing it",
                {"path": path, "read_at": last.step, "changed_at": m.step},
                ref_step=m.step,
            )
    return None


def _command(state: LedgerState, attempt_id: int) -> str:
    a = state.attempt(attempt_id)
    return _short(a.command, 50) if a else "?"


def _existed_at_start(path: str, state: LedgerState) -> bool:
    mods = state.modifications_of(path)
    return not mods or mods[0].before_hash is not None


def protected_paths(proposal: Analysis, state: LedgerState, current: WorkspaceNow, rule: Rule) -> Finding | None:
    globs = tuple(rule.param("globs") or ())
    if not globs:
        return None
    for path in proposal.writes:
        if path == ANY_FILE or not _existed_at_start(path, state) or current.files.get(path) is None:
            continue
        for g in globs:
            if matches(path, g, rule.workdir):
                return Finding(
                    f"{_display(path, rule)} matches the protected glob {g!r}: leave it as it is "
                    f"(fix the code, not the tests or the configuration)",
                    {"path": path, "glob": g},
                )
    return None


# a rule's pattern compiled once: a function of its text alone (re.search looked it up in re's own cache each time)
_regex = lru_cache(maxsize=256)(re.compile)
_HEREDOC = re.compile(r"<<-?\s*['\"]?([A-Za-z_][\w-]*)['\"]?")
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")
_COMMENT = re.compile(r"(^|\s)#[^\n]*")


def _without_heredocs(command: str) -> str:
    """The command without its heredoc bodies: text written to a file is not run."""
    out: list[str] = []
    delimiter = None
    for line in command.splitlines():
        if delimiter is not None:
            if line.strip() == delimiter:
                delimiter = None
            continue
        out.append(line)
        m = _HEREDOC.search(line) if "<<" in line else None  # a line without "<<" starts no heredoc
        if m:
            delimiter = m.group(1)
    return "\n".join(out)


def _unquoted(command: str) -> str:
    """The command without heredoc bodies, quoted strings and comments: text an echo prints is not run."""
    return _unquoted_plain(_without_heredocs(command))


def _unquoted_plain(plain: str) -> str:
    """``_unquoted`` of a command already without its heredoc bodies (``_without_heredocs``)."""
    text = _QUOTED.sub("''", plain) if "'" in plain or '"' in plain else plain  # nothing quoted: nothing to cut
    return _COMMENT.sub(r"\1", text) if "#" in text else text  # no "#": no comment


def destructive(proposal: Analysis, state: LedgerState, current: WorkspaceNow, rule: Rule) -> Finding | None:
    plain = _without_heredocs(proposal.command)
    text = _unquoted_plain(plain)
    patterns = tuple(rule.param("patterns") or DESTRUCTIVE) + tuple(rule.param("extra_patterns") or ())
    for pattern in patterns:
        m = _regex(pattern).search(text)
        if m:
            return _work_lost(m.group(0).strip(), text, pattern, state, rule)
    root = os.path.normpath(rule.workdir or proposal.cwd)
    for m in _RM.finditer(plain):
        try:
            words = shlex.split(m.group(1), comments=True)
        except ValueError:
            continue
        flags = "".join(w[1:] for w in words if w.startswith("-") and not w.startswith("--"))
        if "r" not in flags.lower() and "--recursive" not in words:
            continue
        cwd = _cwd_at(plain, m.start(), proposal.origin or proposal.cwd)
        if cwd is None:
            continue  # a cd we cannot follow: do not guess
        for w in (w for w in words if w and not w.startswith("-")):
            w = w.replace("${PWD}", cwd).replace("$PWD", cwd)
            if "$" in w or "`" in w:
                continue
            whole = w.rstrip("/").endswith("*") and os.path.basename(w.rstrip("/")) in ("*", ".*")
            target = os.path.normpath(os.path.join(cwd, os.path.expanduser(os.path.dirname(w) if whole else w)))
            if target == root or root.startswith(target.rstrip("/") + "/") or target == "/":
                return Finding(
                    f"`rm {m.group(1).strip()[:60]}` would delete the workspace {root}",
                    {"target": target, "workspace": root},
                )
    return None


def _work_lost(matched: str, text: str, pattern: str, state: LedgerState, rule: Rule) -> Finding:
    """The refusal of a command that discards uncommitted work, naming the changed and dirty files the ledger knows.

    What it does not track may be lost all the same; ``git clean -x`` removes ignored files too."""
    changed = [m.path for m in state.changed_files()]
    base = state.baseline
    dirty = [os.path.join(base.root, p) for p in base.dirty_paths] if base is not None else []
    paths = sorted(set(changed) | set(dirty))
    shown = ", ".join(_display(p, rule) for p in paths[:4]) + (f" (+{len(paths) - 4} more)" if len(paths) > 4 else "")
    known = f"the ledger knows of changes to {shown}" if paths else "the ledger knows of none now"
    ignored = (
        " and the files git ignores"
        if "clean" in pattern and re.search(r"\bclean\s+(?:\S+\s+)*-[a-zA-Z]*x", text)
        else ""
    )
    return Finding(
        f"`{matched}` discards uncommitted work{ignored} ({known}); undo specific changes instead "
        f"(e.g. git checkout -- FILE)",
        {"pattern": pattern, "paths": paths},
    )


def _cwd_at(command: str, position: int, cwd: str) -> str | None:
    """The directory a command is in at ``position``, following the plain ``cd DIR`` before it."""
    for m in _CD.finditer(command[:position]):
        try:
            words = shlex.split(m.group(1))
        except ValueError:
            return None
        if len(words) != 1 or "$" in words[0] or "`" in words[0] or words[0] == "-":
            return None
        cwd = os.path.normpath(os.path.join(cwd, os.path.expanduser(words[0])))
    return cwd


def verify_before_submit(proposal: Analysis, state: LedgerState, current: WorkspaceNow, rule: Rule) -> Finding | None:
    if not proposal.submits:
        return None
    ignore = tuple(rule.param("ignore") or ())
    root = (rule.workdir or proposal.cwd).rstrip("/") + "/"
    # files the agent created are its scratch (reproduction scripts) far more often than its fix
    changed = [
        m
        for m in state.changed_files()
        if m.path.startswith(root)
        and rule.in_scope(m.path)
        and state.modifications_of(m.path)[0].before_hash is not None
        and not any(matches(m.path, g, rule.workdir) for g in ignore)
    ]
    if not changed:
        return None
    runs = [
        a
        for a in state.attempts
        if a.executed
        and not a.submits
        and (
            a.command_class is CommandClass.RUN
            or (a.command_class in (CommandClass.MODIFY, CommandClass.ENV) and _RUN.search(_unquoted(a.command)))
        )
    ]
    last_run = runs[-1] if runs else None
    after = [m for m in changed if last_run is None or m.step > last_run.step]
    if not after:
        return None
    # once: the same rule already held this submission back, and nothing changed since
    if any(
        a.verdict.kind is VerdictKind.REVISE
        and a.verdict.rule
        and rule.name in a.verdict.rule.split(",")
        and a.epoch_before == state.epoch
        for a in state.attempts
    ):
        return None
    names = ", ".join(f"{_display(m.path, rule)} (step {m.step})" for m in after[:4]) + (" …" if len(after) > 4 else "")
    if last_run is None:
        why = f"files changed and no test or script has run since the start: {names}"
    else:
        whose = ", a subagent's" if last_run.agent else ""  # the model never saw a subagent's run
        why = (
            f"files changed after the last test or script run (step {last_run.step}{whose}: "
            f"`{_short(last_run.command, 50)}`): {names}; run the tests again"
            + (", or submit again to submit as is" if rule.verdict is VerdictKind.REVISE else "")
        )
    return Finding(
        why,
        {"changed": [m.path for m in after], "last_run_step": last_run.step if last_run else None},
        ref_step=last_run.step if last_run else None,
    )


def repeat_failure(proposal: Analysis, state: LedgerState, current: WorkspaceNow, rule: Rule) -> Finding | None:
    if proposal.submits or proposal.pure or proposal.command_class in (CommandClass.MODIFY, CommandClass.ENV):
        return None  # a pure reader's repeat runs: its answer refers to what the model holds
    chain = []
    for a in state.repeats_of(proposal.normalized, proposal.cwd, proposal.agent):  # its own: another's ran apart
        if not a.executed:
            continue
        if a.exit_code in (0, None) or a.epoch_after != state.epoch or a.env_epoch != state.env_epoch or a.exception:
            break
        chain.append(a)
    if not chain:
        return None
    steps = sorted(a.step for a in chain)
    revise_after = int(rule.param("revise_after", 3))
    where = ", ".join(str(s) for s in steps[-4:])
    reason = f"{UNCHANGED_SINCE} step {steps[-1]}, where this same command failed (exit {chain[0].exit_code})" + (
        f"; it failed at steps {where}" if len(steps) > 1 else ""
    )
    evidence = {"failed_at": steps, "exit_code": chain[0].exit_code}
    if len(chain) + 1 >= revise_after:
        return Finding(
            reason + f"; change something before running it a {_nth(len(chain) + 1)} time",
            evidence,
            ref_step=steps[-1],
            verdict=VerdictKind.REVISE,
        )
    return Finding(reason, evidence, ref_step=steps[-1])


def _nth(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st."""
    tail = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{tail}"


def noop_edit(proposal: Analysis, outcome: Outcome, rule: Rule) -> Finding | None:
    """An edit, not a submission, that changed no file; directories are not tracked."""
    if proposal.command_class is not CommandClass.MODIFY or not proposal.writes or outcome.changed or proposal.submits:
        return None
    if not outcome.files:
        return None
    if outcome.returncode not in (0, None):
        why = f"it failed (exit {outcome.returncode})"
    elif outcome.missing:
        why = "file not found: " + ", ".join(one_line(os.path.relpath(m, outcome.workdir)) for m in outcome.missing[:3])
    else:
        why = "a pattern that did not match, or the wrong file?"
    return Finding(
        f"this edit changed no file ({why})",
        evidence={"noop-edit": {"writes": list(proposal.writes[:5]), "missing": list(outcome.missing[:5])}},
    )


BUILTINS: dict[str, tuple[Callable[..., Finding | None], dict[str, Any]]] = {
    "stale-edit": (stale_edit, {"enabled": True, "verdict": "NUDGE"}),
    "protected-paths": (protected_paths, {"enabled": True, "verdict": "REVISE", "globs": []}),
    "destructive": (
        destructive,
        {"enabled": True, "verdict": "BLOCK", "patterns": list(DESTRUCTIVE), "extra_patterns": []},
    ),
    "verify-before-submit": (
        verify_before_submit,
        {
            "enabled": True,
            "verdict": "REVISE",
            # the patch a submission prints is not code to test
            "ignore": ["patch.txt", "*.patch", "*.diff", "*.orig", "*.rej"],
        },
    ),
    "noop-edit": (noop_edit, {"enabled": True, "verdict": "NUDGE", "after_run": True}),
    "repeat-failure": (repeat_failure, {"enabled": True, "verdict": "NUDGE", "revise_after": 3}),
}


@dataclass(frozen=True)
class PolicySettings(Section):
    """The ``[ledger.policies]`` settings: one table per rule, ``[ledger.policies.<name>]``."""

    name = "policies"
    flat = {"policies": "rules"}
    whole = "rules"  # the section's keys are the rules' names

    rules: dict = setting(dict, TABLE, factory=True)
    """The policy gate's rules: ``[ledger.policies.<name>]`` tables (enabled, verdict, paths, parameters);
    see docs/policies.md. Every built-in rule is on with its defaults unless set here."""

    def validate(self) -> None:
        if self.rules:
            try:
                build_rules(self.rules, "", BUILTINS)
            except PolicyError as e:
                raise self.refuse(self.whole, str(e)) from None
