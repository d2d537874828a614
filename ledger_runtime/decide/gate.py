"""The policy gate: named rules that may refuse or annotate a command before it runs, composed with govern's verdict.

A rule's pure ``check(proposal, state, current, rule)``, or an ``after_run`` rule's ``check(proposal, outcome, rule)``,
returns a Finding or None; the finding's evidence is recorded under the rule's name. Built-in rules are in policies.py;
users add their own as ``check = "module:function"``. A check that raises is reported and allows: the gate fails open,
never in the agent's way.

The first that applies wins: BLOCK from any rule; REVISE from any rule, which drops the call and lets the agent keep its
turn; NUDGE from any rule or govern, which runs it with every note; RUN.
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import math
import os
import re
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from ledger_runtime.analysis.commands import Analysis
from ledger_runtime.json_text import nested_deeper
from ledger_runtime.records import Verdict, VerdictKind
from ledger_runtime.section import whole

GATE_KINDS = (VerdictKind.NUDGE, VerdictKind.REVISE, VerdictKind.BLOCK)
MAX_EVIDENCE_LEVELS = 100  # a rule's evidence is a few levels deep; a thousand fail where the ledger writes them


class PolicyError(ValueError):
    """A policy configuration the gate cannot use; the message names the rule and the key."""


@dataclass(frozen=True)
class Finding:
    """What a check found: why the rule applies, and the ledger state it read."""

    reason: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    ref_step: int | None = None
    verdict: VerdictKind | None = None  # a rule may escalate past its configured verdict (repeat-failure)


@dataclass(frozen=True)
class Rule:
    """One configured rule: its check, verdict, scope and parameters."""

    name: str
    check: Callable[..., Finding | None]
    verdict: VerdictKind
    params: Mapping[str, Any] = field(default_factory=dict)
    paths: tuple[str, ...] = ()
    workdir: str = ""
    time_limit_s: float | None = None  # a rule of the user's own: past it, a fault, and ALLOW
    after_run: bool = False  # decided after the command ran, from its Outcome (check_after)

    def param(self, key: str, default: Any = None) -> Any:
        return self.params.get(key, default)

    def in_scope(self, path: str) -> bool:
        """Whether the absolute ``path`` is in the rule's ``paths``, or there are none."""
        return not self.paths or any(matches(path, g, self.workdir) for g in self.paths)


def matches(path: str, glob: str, workdir: str) -> bool:
    """A glob without a slash matches the file name; with one, the path in the workspace, ``*`` crossing directories."""
    if "/" not in glob:
        return fnmatch.fnmatchcase(os.path.basename(path), glob)
    rel = os.path.relpath(path, workdir) if workdir and os.path.isabs(path) else path
    return fnmatch.fnmatchcase(rel, glob)


def _load_callable(spec: str, name: str) -> Callable[..., Finding | None]:
    module, _, attr = spec.partition(":") if ":" in spec else spec.rpartition(".")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except Exception as e:  # the user's module runs as it is imported: a SyntaxError or its own raise is theirs too
        # a my_rules.py beside the settings file, or in the current directory, is not importable as it is
        hint = " (a module of your own: put its directory on PYTHONPATH)" if isinstance(e, ModuleNotFoundError) else ""
        why = str(e) if isinstance(e, (ImportError, AttributeError, ValueError)) else f"{type(e).__name__}: {e}"
        raise PolicyError(f"policy {name!r}: cannot load check {spec!r}: {why}{hint}") from None
    if not callable(fn):
        raise PolicyError(f"policy {name!r}: {spec!r} is not callable")
    return fn


def build_rules(settings: Mapping[str, Any], workdir: str, builtins: Mapping[str, tuple[Callable, dict]]) -> list[Rule]:  # noqa: C901
    """The rules in force: the built-ins overridden by ``settings``, plus the user's own."""
    rules = []
    for name in settings:
        given = settings[name]
        if name not in builtins and not (isinstance(given, Mapping) and isinstance(given.get("check"), str)):
            raise PolicyError(
                f'unknown policy {name!r} (built in: {", ".join(builtins)}; your own need check = "module:function")'
            )
    for name in list(builtins) + [n for n in settings if n not in builtins]:
        given = settings.get(name)
        if given is None:  # YAML's `stale-edit:` with nothing under it: the rule as it comes
            given = {}
        if not isinstance(given, Mapping):  # `name = false` is not `enabled = false`: read as nothing, it left it on
            raise PolicyError(
                f"policy {name!r}: must be a table ([ledger.policies.{name}]; enabled = false turns it off), "
                f"not {_as_written(given)}"
            )
        check, defaults = builtins.get(name, (None, {"enabled": True, "verdict": "NUDGE"}))
        _check_keys(name, given, defaults, builtin=name in builtins)
        merged = {**defaults, **given}
        if not merged.get("enabled", True):
            continue
        try:
            verdict = VerdictKind(str(merged.get("verdict", "NUDGE")).upper())
        except ValueError:
            verdict = None
        if verdict not in GATE_KINDS:
            raise PolicyError(f"policy {name!r}: verdict must be NUDGE, REVISE or BLOCK, not {merged.get('verdict')!r}")
        if merged.get("after_run") and verdict is not VerdictKind.NUDGE:
            raise PolicyError(f"policy {name!r} is decided after the command ran: its verdict can only be NUDGE")
        limit = None
        if isinstance(merged.get("check"), str):
            check = _load_callable(merged["check"], name)
            limit = merged.get("time_limit_s", USER_RULE_TIME_LIMIT_S)
            if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit <= 0:
                raise PolicyError(f"policy {name!r}: time_limit_s must be a positive number of seconds, not {limit!r}")
        paths = merged.get("paths") or ()
        if isinstance(paths, str) or not all(isinstance(p, str) for p in paths):
            raise PolicyError(f"policy {name!r}: paths must be a list of globs")
        params = {
            k: whole(v) if isinstance(defaults.get(k), int) and not isinstance(defaults.get(k), bool) else v
            for k, v in merged.items()
            if k not in ("enabled", "verdict", "paths", "check", "after_run", "time_limit_s")
        }
        for key, default in defaults.items():  # a parameter given as a list by default must stay one
            if isinstance(default, list) and key in params:
                value = params[key]
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise PolicyError(f"policy {name!r}: {key} must be a list of strings, not {value!r}")
                if key.endswith("patterns"):
                    for v in value:
                        try:
                            re.compile(v)
                        except re.error as e:
                            raise PolicyError(
                                f"policy {name!r}: {key}: {v!r} is not a regular expression: {e}"
                            ) from None
        rules.append(
            Rule(
                name,
                check,
                verdict,
                params,
                tuple(paths),
                workdir,
                float(limit) if limit else None,
                bool(merged.get("after_run")),
            )
        )
    return rules


USER_RULE_TIME_LIMIT_S = 2.0


def _as_written(value: Any) -> str:
    """A setting's value as the file spells it: ``false``, not Python's ``False``."""
    return ("true" if value else "false") if isinstance(value, bool) else repr(value)


def _check_keys(name: str, given: Mapping[str, Any], defaults: Mapping[str, Any], *, builtin: bool) -> None:
    """Refuse a key ``[ledger.policies.<name>]`` does not take, or a value of the wrong kind: each would be left
    as it was without a word (``enabled = "no"`` kept the rule on; ``revise_after = "3"`` failed at its use)."""
    fixed = {"after_run"}  # how a rule works, not a setting
    known = (set(defaults) - fixed) | {"enabled", "verdict", "paths", "check", "time_limit_s"}
    for key in given:
        if key not in known:
            raise PolicyError(f"policy {name!r}: unknown key {key!r} (known: {', '.join(sorted(known))})")
    if "enabled" in given and not isinstance(given["enabled"], bool):
        raise PolicyError(f"policy {name!r}: enabled must be true or false, not {_as_written(given['enabled'])}")
    if builtin and "time_limit_s" in given:
        raise PolicyError(f'policy {name!r}: time_limit_s is for a rule of your own (check = "module:function")')
    for key, default in defaults.items():
        value = given.get(key)
        if key in given and isinstance(default, int) and not isinstance(default, bool):
            if (whole(value) or 0) < 1:
                raise PolicyError(f"policy {name!r}: {key} must be a whole number >= 1, not {_as_written(value)}")


def _run_rule(rule: Rule, *args: Any) -> Finding | None:
    """The rule's finding; a user's rule runs in a thread and raises TimeoutError past ``time_limit_s``."""
    if rule.time_limit_s is None:
        return rule.check(*args, rule)
    box: list[Any] = []

    def work() -> None:
        try:
            box.append((True, rule.check(*args, rule)))
        except Exception as e:
            box.append((False, e))
        except BaseException as e:  # SystemExit, KeyboardInterrupt from the rule: a fault like any other
            box.append((False, RuntimeError(f"{type(e).__name__}: {e}")))

    t = threading.Thread(target=work, name=f"policy-{rule.name}", daemon=True)
    t.start()
    t.join(rule.time_limit_s)
    if not box:
        raise TimeoutError(f"took longer than {rule.time_limit_s:g} s: allowed")
    ok, value = box[0]
    if not ok:
        raise value
    return value


def check_all(
    rules: list[Rule], proposal: Analysis, state: Any, current: Any, on_fault: Callable[[str, BaseException], None]
) -> list[Verdict]:
    """Every rule's verdict on the proposal; a rule that finds nothing, or raises, allows it."""
    return _verdicts([r for r in rules if not r.after_run], on_fault, proposal, state, current)


@dataclass(frozen=True)
class Outcome:
    """What a command that ran did, for the rules decided after it."""

    returncode: int | None
    changed: bool  # any file changed
    workdir: str = ""
    files: tuple[str, ...] = ()  # of the paths it writes, those that are files (known only when it changed none)
    missing: tuple[str, ...] = ()  # ...and those that do not exist after it


def check_after(
    rules: list[Rule], proposal: Analysis, outcome: Outcome, on_fault: Callable[[str, BaseException], None]
) -> list[Verdict]:
    """The verdicts of the after-run rules: NUDGE only, since the command ran."""
    return _verdicts([r for r in rules if r.after_run], on_fault, proposal, outcome)


def _verdicts(rules: list[Rule], on_fault: Callable[[str, BaseException], None], *args: Any) -> list[Verdict]:
    """Each rule's finding as a verdict; a rule that finds nothing, or raises, allows it."""
    out = []
    for rule in rules:
        try:
            found = _run_rule(rule, *args)
        except Exception as e:  # fail open: a broken rule never stops the agent (a user rule's sys.exit() neither)
            on_fault(f"policy {rule.name}", e)
            continue
        verdict = _verdict_of(rule, found, on_fault)
        if verdict is not None:
            out.append(verdict)
    return out


def after_run(before: Verdict, found: list[Verdict]) -> Verdict:
    """A command's verdict with the after-run findings joined to a NUDGE decided before, or in its place."""
    if not found:
        return before
    noop = found[0]
    if before.kind is not VerdictKind.NUDGE:
        return noop
    return Verdict(
        VerdictKind.NUDGE,
        f"{before.reason}; {noop.rule}: {noop.reason}",
        rule=f"{before.rule},{noop.rule}" if before.rule else noop.rule,
        evidence={**(before.evidence or {}), **(noop.evidence or {})},
    )


def _verdict_of(rule: Rule, found: Any, on_fault: Callable[[str, BaseException], None]) -> Verdict | None:
    """A rule's finding as a verdict; None when it found nothing or returned something faulty."""
    if found is None:
        return None
    try:
        if not isinstance(found, Finding):
            raise TypeError(f"returned {type(found).__name__}, not a Finding or None")
        # the evidence is written to the ledger as JSON: anything else is a fault of the rule, and so is JSON nested
        # deeper than the ledger writes, within a verdict within an event, wherever the step's stack stands
        if nested_deeper(found.evidence, MAX_EVIDENCE_LEVELS):
            raise ValueError(f"evidence nested deeper than {MAX_EVIDENCE_LEVELS} levels")
        evidence = json.loads(json.dumps(dict(found.evidence or {})))
        escalated = VerdictKind(found.verdict) if found.verdict is not None else rule.verdict
        if escalated not in GATE_KINDS:
            raise ValueError(f"verdict {found.verdict!r} is not NUDGE, REVISE or BLOCK")
    except (TypeError, ValueError) as e:
        on_fault(f"policy {rule.name}", e)
        return None
    kind = max(rule.verdict, escalated, key=GATE_KINDS.index)  # a rule may escalate, never weaken
    return Verdict(kind, str(found.reason), rule=rule.name, ref_step=found.ref_step, evidence=evidence)


def compose(governed: Verdict, gated: list[Verdict]) -> Verdict:
    """One verdict from govern's and the rules', in the module docstring's order."""
    for kind in (VerdictKind.BLOCK, VerdictKind.REVISE):
        hits = [v for v in gated if v.kind is kind]
        if hits:
            if len(hits) == 1:
                return replace(hits[0], evidence={hits[0].rule or "": hits[0].evidence})
            return Verdict(
                kind,
                "; ".join(f"{v.rule}: {v.reason}" for v in hits),
                rule=",".join(v.rule or "" for v in hits),
                evidence={v.rule or "": v.evidence for v in hits},
            )
    nudges = [v for v in gated if v.kind is VerdictKind.NUDGE]
    if nudges:
        reasons = [f"{v.rule}: {v.reason}" for v in nudges]
        if governed.kind is VerdictKind.NUDGE and not any(v.rule == "repeat-failure" for v in nudges):
            reasons.append(governed.reason)
        return Verdict(
            VerdictKind.NUDGE,
            "; ".join(reasons),
            rule=",".join(v.rule or "" for v in nudges),
            ref_attempt=governed.ref_attempt,
            ref_step=nudges[0].ref_step or governed.ref_step,
            evidence={v.rule or "": v.evidence for v in nudges},
        )
    return governed


def in_force(config: Any, rules: list[Rule]) -> str | None:
    """The state view's policies line, only where the rules act: govern on, not shadow mode."""
    return describe(rules) if config.applies else None


def describe(rules: list[Rule]) -> str:
    """The rules in force in one line, grouped by verdict, the strongest first."""
    groups = []
    for kind in (VerdictKind.BLOCK, VerdictKind.REVISE, VerdictKind.NUDGE):
        names = [r.name for r in rules if r.verdict is kind]
        if names:
            groups.append(f"{kind.value} {', '.join(names)}")
    return "; ".join(groups)
