"""The plan stage: a proposed command, its reads signed and its verdict decided, held in a ``Plan`` until done."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from ledger_runtime.analysis.commands import ANY_FILE, Analysis
from ledger_runtime.decide.claims import verdict_fails
from ledger_runtime.decide.gate import Rule, check_all
from ledger_runtime.decide.govern import govern
from ledger_runtime.decide.verdict import VerdictFacts, final
from ledger_runtime.decide.workspace_now import WorkspaceNow
from ledger_runtime.records import RUN, CommandClass, Verdict, VerdictKind
from ledger_runtime.workspace.scanner import Snapshot

MAX_POLICY_FILES = 32  # files an edit writes whose state the policies get
# Read keys worth signing: a file's content, a path's existence and stat data (one stat each). Listings
# and subtrees are not signed: nothing decides on them any more (the state view matches their paths
# against the modifications), and a subtree can be all of / (a read of it must never hash it).
SIGNED = ("f:", "x:", "m:")


@dataclass
class RunResult:
    """What the agent gets back for one command."""

    output: str
    returncode: int | None
    verdict: Verdict
    executed: bool
    attempt_id: int | None
    exception_info: str = ""
    extra: dict[str, Any] | None = None
    note: str | None = None  # the NUDGE note appended to the output, if any
    answer: str = "raw"  # how the output came back (answers.AnswerKind): raw, whole, spans, delta, reused, refused


@dataclass
class Plan:
    """A proposed command with its verdict, between deciding and recording.

    Adapters whose agent runs the command itself, with hooks before and after, hold the plan in between. The verdict is
    decided from ``facts``, to which ``let_run`` and ``ran_instead`` add."""

    command: str
    cwd: str  # the directory asked for (the analysis reads one with a NUL, which no directory has, as the work tree)
    step: int
    analysis: Analysis
    facts: VerdictFacts
    applied: bool  # the verdict takes effect (govern on, not shadow)
    before: Snapshot | None
    pre_sigs: dict[str, str]
    shown_raw: bool = False  # the model got the output as it is, whatever the ledger would answer
    # the model the ledger answers gets this output; False: another model does (a subagent the agent
    # started): recorded and shown as it is, never the source of a reference, never counted as seen
    held: bool = True
    agent: str = ""  # the subagent that made the call, as the agent names it ("": the main model)
    # the paths an edit names, as they were before it ran (``named_state``): on this machine only, None elsewhere
    named_before: dict[str, tuple[int, int, int] | None] | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "verdict":
            raise AttributeError("a plan's verdict is decided from its facts: use let_run() or ran_instead()")
        object.__setattr__(self, name, value)
        if name == "facts":  # the verdict is never older than the facts it is decided from
            object.__setattr__(self, "_verdict", final(value))

    @property
    def verdict(self) -> Verdict:
        """The verdict as decided so far, before the command ran."""
        return self._verdict

    def verdict_after(self, found: tuple[Verdict, ...] | list[Verdict]) -> Verdict:
        """The verdict once the command ran and the after-run rules found ``found``."""
        return final(replace(self.facts, after=tuple(found)) if found else self.facts)

    def let_run(self) -> None:
        """The user was asked about this refused command and let it run."""
        self.facts = replace(self.facts, user_let_run=True)

    def ran_instead(self) -> None:
        """The ledger could not answer without running it, a fault: it runs."""
        self.facts = replace(self.facts, fault=True)

    def subagents_nudge(self) -> str:
        """The NUDGE of a subagent's repeat of its own run (its repeats are its own: the step cited is its), which its
        output, shown as it is, does not carry; "" for any other call."""
        if self.agent and self.applied and self.verdict.kind is VerdictKind.NUDGE:
            return f"[ledger] NUDGE: {self.verdict.reason}."
        return ""


def verdict_facts(
    analysis: Analysis,
    workspace: Any,
    state: Any,
    config: Any,
    rules: list[Rule],
    on_fault: Callable[[str, BaseException], None],
) -> tuple[VerdictFacts, dict[str, str]]:
    """What the verdict of ``analysis`` is decided from, and the signatures of what it reads now.

    Only a pure command's reads are signed: they are the only ones a check may rely on."""
    pre_keys = {k for k in analysis.read_keys if k[:2] in SIGNED} if analysis.pure else set()
    sigs = workspace.sign_many(pre_keys, exact=False)
    files = {}
    if analysis.command_class is CommandClass.MODIFY:  # the policies look at what an edit writes
        files = {w: workspace.file_state(w) for w in analysis.writes[:MAX_POLICY_FILES] if w != ANY_FILE}
    current = WorkspaceNow(sigs, files)
    governed = govern(analysis, state, current, config.nudge_repeats)
    gated = check_all(rules, analysis, state, current, on_fault)
    if not _borne_out(governed, analysis, state, on_fault):
        governed = RUN
    return VerdictFacts(governed, tuple(v for v in gated if _borne_out(v, analysis, state, on_fault))), sigs


def _borne_out(v: Verdict, analysis: Analysis, state: Any, on_fault: Callable[[str, BaseException], None]) -> bool:
    """Whether the ledger's records bear out what a verdict's reason says of the run.

    A claim they do not bear out is never sent: the verdict is dropped, and a fault says why."""
    why = (
        verdict_fails(v, state, analysis.normalized, analysis.cwd, analysis.agent)
        if v.kind is not VerdictKind.RUN
        else None
    )
    if why is not None:
        on_fault(f"checking the reason of {v.rule or 'govern'}'s {v.kind.value}", ValueError(why))
    return why is None
