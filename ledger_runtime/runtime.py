"""LedgerRuntime: the ledger around one agent run; ``inform()`` before each model call, ``run()`` for each command.

A step analyses the command, scans the workspace and decides a verdict (govern and the policy gate). RUN and NUDGE
execute through the adapter's ``execute``; the fresh output is compared with what the model holds and the answer built
(answers/build.py). The attempt, the exact text the model gets, what the command showed and what it changed are
committed in one transaction before the answer goes back. Only REVISE and BLOCK answer without running.

In shadow mode, and with govern off, verdicts and answers are decided and recorded only, so runs with and without them
are measured alike. The stages are modules of step/; this class calls them in order and holds the run's state. A ledger
fault never stops the agent: it is logged, and the command runs as if there were no ledger.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import time
from functools import cache
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

from ledger_runtime._version import __version__
from ledger_runtime.analysis.commands import ANY_FILE, Analysis, analyze, naming_no_nul
from ledger_runtime.analysis.submission import NO_SUBMISSION, Submission
from ledger_runtime.answers.build import (
    Answer,
    AnswerKind,
    ExpandError,
    expand,
    raw,
    split_lines,
)
from ledger_runtime.config import LedgerConfig
from ledger_runtime.decide.claims import changed_since
from ledger_runtime.decide.gate import Outcome, build_rules, check_after, describe, in_force
from ledger_runtime.decide.policies import BUILTINS, SHOWN_RULES
from ledger_runtime.executor import ExecResult
from ledger_runtime.held.context import HistoryOutput, Line
from ledger_runtime.held.delivered import delivered_lines, seen_lines
from ledger_runtime.held.held import Held, facts_event
from ledger_runtime.inform import StateView, render
from ledger_runtime.ledger.clean_outputs import CleanOutputs
from ledger_runtime.ledger.faults import FaultLog
from ledger_runtime.ledger.modifications import Modifications
from ledger_runtime.ledger.needles import prepare as prepare_search
from ledger_runtime.ledger.observe import FactRun, FileText, Truncation, observations
from ledger_runtime.ledger.private import lock_file, private_dir, write_private
from ledger_runtime.ledger.redact import Redactor
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.ledger.store import LedgerStore, StoreError
from ledger_runtime.prompt.notes import ViewNotes, apply_told, told_event
from ledger_runtime.records import RUN, Attempt, CommandClass, Modification, Observation, Verdict, VerdictKind
from ledger_runtime.step.plan import Plan, RunResult, verdict_facts
from ledger_runtime.step.record import (
    Execution,
    attempt_events,
    file_texts,
    modification_events,
    named_state,
    new_attempt,
    outcome,
    read_set,
    stored_output,
)
from ledger_runtime.step.respond import (
    answer_record,
    as_stored,
    fresh_answer,
    not_run_answer,
    read_keys_of,
    run_result,
)
from ledger_runtime.step.scan import Scans
from ledger_runtime.workspace.local import LocalWorkspace, Workspace
from ledger_runtime.workspace.scanner import Change, Snapshot

MAX_DELIVERED_CHARS = 4 * 1024 * 1024  # longer outputs are never the source of a reference
LOCK_FILE = ".lock"  # held by the runtime that writes the run directory
FREEZE_FILES = 10_000  # a tree this big: what the first scan made is kept out of Python's cyclic collector
DEFAULT_YOUNG_THRESHOLD = 700  # CPython's gc.get_threshold()[0] unless the host process set its own
YOUNG_THRESHOLD = 10_000  # allocations between collections of the young generation, in a process running a ledger


class LedgerRuntime:
    """The runtime for one run."""

    def __init__(
        self,
        workdir: str | os.PathLike,
        run_dir: str | os.PathLike,
        config: LedgerConfig | None = None,
        *,
        task: str = "",
        truncation: Truncation | None = None,
        meta: dict[str, Any] | None = None,
        workspace: Workspace | None = None,
        secrets: tuple[str, ...] = (),
        submission: Submission = NO_SUBMISSION,
        line_facts: bool | None = None,
    ):
        """``line_facts``: keep which held output lines are which file lines; default: unless the policy is ``full``."""
        self.workdir = workspace.root if workspace is not None else os.path.abspath(workdir)
        self.run_dir = Path(run_dir)
        self.submission = submission  # how the agent submits: the adapter knows
        self._line_facts = line_facts
        private_dir(self.run_dir)  # what the agent saw, secrets included: its owner's only
        # one runtime per run directory: a second would write the same attempt ids
        self._lock = lock_file(self.run_dir / LOCK_FILE, f"run directory {self.run_dir}")
        try:
            self._open(config, task, truncation, meta, workspace, secrets)
        except BaseException:
            self._release()
            raise

    def _open(
        self,
        config: LedgerConfig | None,
        task: str,
        truncation: Truncation | None,
        meta: dict[str, Any] | None,
        workspace: Workspace | None,
        secrets: tuple[str, ...],
    ) -> None:
        _ignore_in_git(self.run_dir, self.workdir)
        self.config = config or LedgerConfig()
        # what the ledger keeps has the secrets masked: this process's environment's, and
        # ``secrets`` (values an adapter gives the agent's commands, a container's environment)
        self.redactor = (
            Redactor.for_run(os.environ, self.config.redaction.patterns).with_values(secrets)
            if self.config.redaction.enabled
            else Redactor.off()
        )
        if self.redactor.active:
            prepare_search(wait=False)  # masking's search in C, built once into the user's cache (needles.py)
        self._clean = CleanOutputs()  # long outputs stored as printed: the next like them is masked in what differs
        self.fault_log = FaultLog(self.run_dir, self.redactor)  # none ever stops the agent
        self.dedupe = self.config.dedupe
        self.truncation = truncation or self.config.truncation.truncation()
        # the run directory may lie inside the workspace (`-o ledger-runs/...` from the repository):
        # its files are the ledger's own, never the agent's work
        self.workspace = workspace or LocalWorkspace(
            self.workdir,
            max_hash_bytes=self.config.scanning.max_hash_bytes,
            exclude=[str(self.run_dir.resolve())],
            bounds=self.config.scanning.bounds,
            report=self._fault,
        )
        self.store = LedgerStore.create(self.run_dir, redactor=self.redactor)
        self.fault_log.store = self.store
        self.state = LedgerState()
        self.modifications = Modifications(self.store, self.state, self.workspace, self.redactor)
        self.rules = build_rules(self.config.policies.rules, self.workdir, BUILTINS)
        self._refused_lines: set[str] = set()  # lines of the view the records did not bear out, reported
        if self._line_facts is None:
            self._line_facts = not self.config.context_policy.full
        self.held = Held(
            self.state,
            self.config.context.steps,
            self.redactor,
            self.truncation,
            self.workspace,
            snapshot=lambda: self._last,
            refers=self._refers,
            line_facts=self._line_facts,
            max_content_bytes=self.config.scanning.max_content_bytes,
        )
        self.told = ViewNotes(limit_chars=self.config.context.note_chars)  # what notes told the model (view_note)
        self._damaged_told: set[str] = set()  # blobs named in a fault as not reading back
        for event in self.store.events():  # a ledger opened again: what it held, folded as it was made
            self._fold(event, self.store.text)
        self._tell_damaged()
        self._next_id = max((a.id for a in self.state.attempts), default=0) + 1
        self.scans = Scans(
            self.workspace, self.config.scanning, self.workspace.scan(), self._record_between, self._fault
        )
        if len(self._last.files) >= FREEZE_FILES:
            _freeze_long_lived()
        _collect_young_less_often()
        if self.state.baseline is None:
            baseline = self.workspace.baseline(self._last, task)
            run = {
                "version": __version__,
                "workdir": self.workdir,
                "config": self.config.to_dict(),
                "started_at": time.time(),
                **(meta or {}),
            }
            self._commit([("run", run), ("baseline", baseline.to_dict())], 0)

    # -- inform --------------------------------------------------------------------------------

    def view(self, *, as_applied: bool = False) -> StateView:
        """The state view now; ``as_applied``: as a run whose verdicts take effect sees it (a shadow replay)."""
        policies = describe(self.rules) if as_applied else in_force(self.config, self.rules)
        return render(self.state, self.config.view, policies=policies, as_applied=as_applied)

    def view_for_notes(self, *, catch_up: bool = True) -> StateView | None:
        """The state view the notes are made from; None when inform is off, in shadow mode, or on a fault.

        ``catch_up``: the scan taken at the model's turn is waited for first, so that the view tells what it found."""
        if not self.config.informs:
            return None
        if catch_up:
            self._catch_up()
        try:
            return self._checked_view()
        except Exception as e:
            self._fault("rendering the state view", e)
            return None

    def _checked_view(self) -> StateView:
        """The state view now, less its lines the records do not bear out, each reported as a fault once."""
        view = self.view()
        for why in view.refused:
            if why not in self._refused_lines:
                self._refused_lines.add(why)
                self._fault("checking the state view before the model reads it", ValueError(why))
        return view

    def view_note(self, notes: Any, *, dry_run: bool = False) -> str:
        """The next note of ``notes`` for an agent that keeps notes in its history (hooks), recorded as an injection.

        It is the view's news, paid from what the answers spared (``context.view_share``); "" when there is none.
        ``dry_run`` changes and records nothing."""
        view = self.view_for_notes(catch_up=not dry_run)
        if view is None:
            return ""
        share = self.config.context.view_share
        budget = None if math.isinf(share) else int(self.spared_total() * share) - notes.chars
        if dry_run:
            notes = dataclasses.replace(notes, notes=list(notes.notes), told=dict(notes.told))
            return notes.next(view, len(notes.notes), budget=budget)
        if notes is not self.told:  # an adapter's own notes: what they told is not the ledger's to keep
            text = notes.next(view, len(notes.notes), budget=budget)
            if text:
                self.note_injection("note", text)
            return text
        before = (dict(notes.told), notes.since_step)
        told = dataclasses.replace(notes, notes=list(notes.notes), told=dict(notes.told))
        text = told.next(view, len(told.notes), budget=budget)
        change = told_event(before, told, text)
        if change is not None:
            self._commit([("told", change)], self.state.step)  # folded into self.told: see _fold
        if text:
            self.note_injection("note", text)
        return text

    def inform(self) -> str:
        """The state view for the prompt now, "" when there is none; also starts the scan before the next command."""
        self.prescan()
        if not self.config.informs:
            return ""
        self._catch_up()
        try:
            return self._checked_view().text
        except Exception as e:
            self._fault("rendering the state view", e)
            return ""

    def spared(self, attempt_id: int | None) -> int:
        """Characters an attempt's answer spared the model, 0 where the verdict did not take effect."""
        a = self.state.attempt(attempt_id) if attempt_id is not None else None
        if a is None or not a.applied:
            return 0
        return self.truncation.seen_chars(a.output_chars) - self.truncation.seen_chars(a.shown_chars)

    def spared_total(self) -> int:
        """``spared`` summed over every attempt so far: the new attempts' added to the sum the last call made (summed
        anew where an attempt was changed in place, or always where two share an id), so a long run's note costs the new
        ones."""
        state = self.state
        if state.distinct_attempts != len(state.attempts):
            return sum(self.spared(a.id) for a in state.attempts)
        return state.fold_attempts(("spared", self.truncation), 0, lambda total, a: total + self.spared(a.id))

    @property
    def _last(self) -> Snapshot | None:
        """The last snapshot of the workspace, the scan stage's."""
        return self.scans.last

    def prescan(self, *, before_command: bool = True) -> None:
        """Takes the scan before the next command now, while the model thinks; ``before_command`` False: a scan at a
        hook agent's prompt, which only takes in what changed by then (``Scans.prescan``)."""
        self.scans.prescan(self.state.step + 1, before_command=before_command)

    def _catch_up(self) -> None:
        """Takes in the scan started at the model's turn before the view is read (``Scans.catch_up``)."""
        try:
            self.scans.catch_up(self.state.step + 1)
        except Exception as e:
            self._fault("scanning before the model's turn", e)

    def _settle(self, *, discard: bool = False) -> Snapshot | None:
        """Waits for a background scan and takes its result; ``discard`` drops it while a command is under way."""
        return self.scans.settle(self.state.step + 1, discard=discard)

    def _fold(self, event: dict[str, Any], texts: Callable[[str | None], str | None]) -> None:
        """Folds one stored event into the state, what the model holds and what the notes told it: the one way in."""
        self.state.apply(event)
        kind = event.get("kind")
        try:
            self.held.apply(event, texts)
            if kind == "told":
                apply_told(self.told, event)
            elif kind == "context":
                self.told.reset(full=True)  # the notes went with the history: the whole view next
        except (KeyError, TypeError, ValueError, IndexError, ArithmeticError) as e:  # a crafted or damaged event: kept
            self.state.faults.append(
                {"message": f"unreadable {kind} event {event.get('seq')}: {type(e).__name__}: {e}"}
            )

    def finish_command(self, attempt_id: int, res: ExecResult) -> None:
        """Folds in the exit code and whole output of a command recorded unfinished: its agent's tool returned early."""
        try:
            self._settle(discard=True)
            a = self.state.attempt(attempt_id)
            if a is None or not a.executed:
                return
            output_hash, stored = self._put_output(res.output)
            altered = stored is not res.output
            # its read set was signed while it still ran: it never vouches for a reuse
            fields = {
                "attempt": attempt_id,
                "exit_code": res.returncode,
                "output_hash": output_hash,
                "output_chars": len(res.output),
                "output_complete": res.output_complete,
                "read_set_stable": False,
                **({"altered": True} if altered else {}),
            }
            self._commit([("completion", fields)], a.step)
        except Exception as e:
            self._fault("completing a command", e)

    def set_task(self, task: str) -> None:
        """Names the task when the run started without one, for an agent that gets it later."""
        if task.strip() and self.state.baseline is not None and not self.state.baseline.task:
            self._commit([("task", {"task": task})], self.state.step)

    def note_injection(self, event: str, text: str) -> None:
        """Records state-view text handed to the agent outside its prompt, which stays in its history."""
        if text:
            self._commit([("injection", {"event": event, "chars": len(text), "text": text})], self.state.step)

    def note_model_call(self, cost: float | None) -> None:
        """Records one model call and its cost in dollars; None: the price is unknown, recorded so, never as $0."""
        self._commit([("model_call", {"cost": None if cost is None else float(cost)})], self.state.step)

    # -- run -------------------------------------------------------------------------------------

    def run(
        self,
        command: str,
        execute: Callable[[str, str], ExecResult],
        *,
        cwd: str | None = None,
        step: int | None = None,
    ) -> RunResult:
        """Governs, executes or not, and records; returns what the agent should see."""
        plan = self.propose(command, cwd=cwd, step=step)
        if plan is None:
            res = execute(command, os.path.abspath(cwd or self.workdir))
            return RunResult(res.output, res.returncode, RUN, True, None, res.exception_info, res.extra)
        if plan.applied and not plan.verdict.kind.executes:
            answer = self.answer(plan)
            if answer is not None:
                return answer
        self._prepare(plan)
        started = time.perf_counter()
        try:
            res = execute(command, plan.cwd)
        except BaseException as exc:  # Submitted, interrupts: record what happened, then let it go on
            self._safely(self._record_interrupted, plan, time.perf_counter() - started, exc)
            raise
        return self.record(plan, res, time.perf_counter() - started)

    # -- the steps of run, for adapters whose agent runs the command itself ----------------------

    def propose(
        self,
        command: str,
        *,
        cwd: str | None = None,
        step: int | None = None,
        analysis: Analysis | None = None,
        agent: str = "",
    ) -> Plan | None:
        """Analyses, scans and governs ``command``; None on a ledger fault, and the command then runs unrecorded.

        ``agent``: the subagent that made the call, as the agent names it ("": the main model)."""
        cwd = os.path.abspath(cwd or self.workdir)
        step = step if step is not None else self.state.step + 1
        try:
            return self._plan(command, cwd, step, analysis, agent)
        except Exception as e:
            self._fault("before the command", e, command)
            return None

    def answer(self, plan: Plan, *, refused: str | None = None) -> RunResult | None:
        """What the agent gets instead of running the command, recorded; None on a fault, and the command must run."""
        try:
            return self._answer(plan, refused)
        except Exception as e:
            self._fault("answering without running", e, plan.command)
            plan.ran_instead()
            return None

    def record(
        self,
        plan: Plan,
        res: ExecResult,
        elapsed: float,
        *,
        truncation: Truncation | None = None,
        shown_raw: bool = False,
    ) -> RunResult:
        """Records what running the planned command gave; returns what the agent should see.

        ``shown_raw``: the agent already showed the output as it is."""
        plan.shown_raw = plan.shown_raw or shown_raw
        try:
            self._settle(discard=True)
            return self._record_ran(plan, res, elapsed, truncation or self.truncation)
        except Exception as e:
            self._fault("recording the command", e, plan.command)
            return RunResult(res.output, res.returncode, plan.verdict, True, None, res.exception_info, res.extra)

    def _plan(self, command: str, cwd: str, step: int, analysis: Analysis | None = None, agent: str = "") -> Plan:
        # a directory with a NUL (no directory has such a name) is analysed as the work tree, but the plan keeps the
        # directory asked for: the command runs there or nowhere (the executor says it could not start), never in the
        # work tree it was not asked to run in
        analysis = naming_no_nul(analysis or analyze(command, cwd, self.submission), self.workdir)
        if agent:  # its repeats are its own runs: the policies and govern read whose proposal it is here
            analysis = dataclasses.replace(analysis, agent=agent)
        prescanned = self._settle()  # the scan taken while the model thought, if any
        before = self.scans.before(analysis.readonly, prescanned is not None, step)
        self.scans.watch(analysis, step)  # before it runs: a file it names is tracked from its state now
        facts, sigs = verdict_facts(analysis, self.workspace, self.state, self.config, self.rules, self._policy_fault)
        if agent:  # what a subagent was shown is not on record: the rules that judge by it do not judge its call
            facts = dataclasses.replace(facts, gated=tuple(v for v in facts.gated if v.rule not in SHOWN_RULES))
        plan = Plan(command, cwd, step, analysis, facts, self.config.applies, before, sigs, agent=agent)
        if analysis.command_class is CommandClass.MODIFY and self.workspace.rescan_before_command:
            plan.named_before = {w: named_state(w) for w in analysis.writes if w != ANY_FILE}
        return plan

    def _prepare(self, plan: Plan) -> None:
        """Hands the workspace the command about to run, for one that signs inside the command."""
        prepare = getattr(self.workspace, "prepare", None)
        if prepare is None:
            return
        try:
            prepare(plan.analysis)
        except Exception as e:
            self._fault("preparing the workspace for the command", e, plan.command)

    def _policy_fault(self, where: str, error: BaseException) -> None:
        self._fault(where + " (treated as ALLOW)", error)

    # -- what the model holds (held/held.py) -------------------------------------------------------

    @property
    def delivered(self):
        """The earlier outputs the model holds, as the held room keeps them."""
        return self.held.delivered

    def holds_attempt(self, attempt_id: int) -> bool:
        return self.held.holds_attempt(attempt_id)

    def standing(self) -> Collection[int]:
        return self.held.standing()

    def resent_as(self, attempt_id: int) -> tuple[str, str] | None:
        return self.held.resent_as(attempt_id)

    def held_next(self, step: int) -> bool:
        return self.held.held_next(step)

    def forget_context(self) -> None:
        """The agent dropped the outputs shown so far from its history, a compaction: no later answer refers to them."""
        self._commit([("context", {"from_step": self.state.step + 1})], self.state.step)

    def distrust(self, attempt_id: int, why: str) -> None:
        """The agent's record says the model got something else for this attempt: never a source; a fault says why."""
        self._commit([("distrust", {"attempt": attempt_id, "why": why})], self.state.step)
        self._fault("checking what the model got", ValueError(why))

    def said(self, attempt_id: int, index: int, chars: int = 0, *, raw: bool = False) -> HistoryOutput | None:
        return self.held.said(attempt_id, index, chars, raw=raw)

    def history(
        self, outputs: Sequence[tuple[int | None, int]], *, raw: bool = False, expanded: Collection[int] = ()
    ) -> list[HistoryOutput]:
        return self.held.history(outputs, raw=raw, expanded=expanded)

    def still_true(self, line: Line) -> bool:
        return self.held.still_true(line)

    # -- answering ---------------------------------------------------------------------------------

    def stored_output(self, output: str) -> str:
        """An output as the ledger keeps it, masked then cut: what a check of its answer compares with."""
        return stored_output(output, self.config.truncation.max_stored_chars, self._clean, self.redactor.mask)

    def _put_output(self, output: str) -> tuple[str, str]:
        """Stores an output as ``stored_output`` says; returns its key and what is stored."""
        stored = self.stored_output(output)  # masked already: the store does not mask it again
        if stored is output:
            self._clean.remember(output)
        return self.store.put_masked(stored), stored

    def _put_shown(self, shown: str, record: Answer, output: str, output_hash: str) -> str:
        """Stores the text the model got for an output; returns its key: the output's own, where they are the same."""
        return output_hash if shown == output else self.store.put_text(record.text)

    def _refers(self, output: str) -> bool:
        """Whether an output is short enough to be answered with references and be their source; else stored cut."""
        return len(output) <= min(MAX_DELIVERED_CHARS, self.config.truncation.max_stored_chars)

    def _answer(self, plan: Plan, refused: str | None = None) -> RunResult:
        """A refused command (REVISE, BLOCK), answered and recorded."""
        v = plan.verdict
        answer, returncode = not_run_answer(v, refused=refused)
        kept = self.truncation.kept(answer.text)
        attempt = self._attempt(
            plan,
            executed=False,
            exit_code=None if v.kind in (VerdictKind.REVISE, VerdictKind.BLOCK) else returncode,
            output_hash=None,
            output_chars=0,
            truncated=self.truncation.cuts(answer.text),
            duration=0.0,
            read_set={},
            stable=True,
            epoch_after=self.state.epoch,
            shown_chars=len(answer.text),
            verdict=v,
            exception=None,
            output_complete=True,
            shown_hash=self.store.put_text(answer.text),
            answer=answer_record(
                answer, kept, self.truncation.exact, self.held.first_held_step(plan.step), agent=plan.agent
            ),
        )
        self._commit_attempt(plan.step, attempt)
        return RunResult(answer.text, returncode, v, False, attempt.id, answer=answer.kind.value)

    def _fresh_answer(
        self, plan: Plan, verdict: Verdict, output: str, lines: Callable[[], list[str]], trunc: Truncation
    ) -> Answer:
        """The answer to a command that ran, checked; for a verdict that does not run it, the refusal it would get."""
        if not verdict.kind.executes:
            return not_run_answer(verdict)[0]
        answer, notes = fresh_answer(
            plan,
            verdict,
            output,
            lines,
            trunc,
            submission=self.submission,
            refers=self._refers(output),
            pool=self.held.delivered.at(self.held.first_held_step(plan.step), trunc.kept(output)),
            dedupe=self.dedupe,
            epoch=self.state.epoch,
            changed_since=self._changed_since,
        )
        return self._checked(answer, output, notes, lines)

    def _changed_since(self, attempt_id: int) -> bool:
        """Whether the records bear out that files changed after an attempt; if not, a fault, and no claim."""
        why = changed_since(self.state, attempt_id)
        if why is not None:
            self._fault("checking 'though files changed since'", ValueError(why))
        return why is None

    def _checked(
        self, answer: Answer, output: str, notes: list[str], lines: Callable[[], list[str]] | None = None
    ) -> Answer:
        """``answer`` if its references, read back as the model reads them, stand for exactly ``output``; else raw.

        Every reference is checked so before the model gets it; a failed check is a fault of ours."""
        if answer.kind is AnswerKind.RAW:
            return answer

        try:
            ok = expand(answer.text, answer.pieces, self.held.held_output, lambda: output, own_lines=lines) == output
        except ExpandError as e:
            ok, why = False, str(e)
        else:
            why = "it expands to other bytes than the output"
        if ok:
            return answer
        self._fault("checking an answer before the model gets it", ValueError(why))
        return raw(output, notes)

    # -- recording ---------------------------------------------------------------------------------

    def _record_ran(self, plan: Plan, res: ExecResult, elapsed: float, trunc: Truncation) -> RunResult:
        """Records a command that ran to its end; returns what the agent gets."""
        analysis = plan.analysis
        changes = self._changes_after(plan)
        output = res.output
        lines = cache(lambda: split_lines(output))  # the output's lines: split once, where needed
        texts = file_texts(analysis, output, lines, self.workspace, self.config.scanning.max_content_bytes)
        # a file the output is checked against signs as the content it was checked against
        checked = {"f:" + p: t.digest for p, t in texts.items() if "f:" + p in plan.pre_sigs}
        ran = self._ran(plan, elapsed, changes, checked)
        output_hash, stored = self._put_output(output)
        altered = stored is not output
        verdict = self._verdict_after(plan, res, ran)
        answer = self._fresh_answer(plan, verdict, output, lines, trunc)
        shown = answer.text
        kept = trunc.kept(shown)  # what the agent showed of the answer: worked out once, used throughout
        record = as_stored(answer, stored, output, self.config.truncation.max_stored_chars)
        keys = read_keys_of(analysis)
        attempt = self._attempt(
            plan,
            **ran.fields(verdict, shown, trunc),
            exit_code=res.returncode,
            output_hash=output_hash,
            output_chars=len(output),
            # why it never ran, kept as an interrupted command's reason is: "exit -1" alone says nothing of it
            exception=None if res.started else self.redactor.mask(res.exception_info or "could not start")[:500],
            output_complete=res.output_complete,
            submits=analysis.submits or self.submission.in_output(output),
            shown_hash=self._put_shown(shown, record, output, output_hash),
            answer=answer_record(
                record, kept, trunc.exact, self.held.first_held_step(plan.step), keys, altered, plan.held, plan.agent
            ),
        )
        delivered_now = None
        obs: list[Observation] = []
        facts: list[FactRun] = []
        if plan.held:
            delivered_now = (
                delivered_lines(output, answer, kept, lines()) if len(output) <= MAX_DELIVERED_CHARS else None
            )
            obs = self._observe(plan, attempt.id, res, texts, answer, kept, delivered_now, lines, facts)
            if delivered_now is not None:
                self.held.pending_lines = (
                    attempt.id,
                    delivered_now,
                )  # what the fold of the attempt would work out again
        line_facts = facts_event(attempt.id, facts, lines()) if facts and self._line_facts else None
        mods = self._modifications(ran, attempt, plan)
        in_memory = {output_hash: output} if not altered else None  # stored as printed: the same text
        self._commit_attempt(plan.step, attempt, obs, mods, ran.epoch_after, facts=line_facts, texts=in_memory)
        self.held.pending_lines = None
        return run_result(plan, res, verdict, attempt.id, answer)

    def _record_interrupted(self, plan: Plan, elapsed: float, exc: BaseException) -> RunResult:
        """Records a command whose run ended in ``exc``, a submission or an interrupt: its changes, no output."""
        analysis = plan.analysis
        ran = self._ran(plan, elapsed, self._changes_after(plan, interrupted=True), {})
        verdict = plan.verdict
        # shadow mode, govern off: what the model would have got instead
        shown = not_run_answer(verdict)[0].text if not verdict.kind.executes else raw("").text
        attempt = self._attempt(
            plan,
            **ran.fields(verdict, shown, self.truncation),
            exit_code=None,
            output_hash=None,
            output_chars=0,
            exception=self.redactor.mask(f"{type(exc).__name__}: {exc}")[:500],
            output_complete=False,
            submits=analysis.submits or self.submission.in_output(""),
        )
        self._commit_attempt(plan.step, attempt, [], self._modifications(ran, attempt, plan), ran.epoch_after)
        return RunResult("", None, verdict, True, attempt.id)

    def _changes_after(self, plan: Plan, *, interrupted: bool = False) -> list[Change]:
        """What the planned command changed.

        A reader writes nothing: what changed meanwhile is recorded at its step as made outside any command. Where a
        scan walks the tree, none is taken around a reader."""
        readonly = plan.analysis.readonly and not interrupted
        if readonly and self.workspace.rescan_before_command and not self.workspace.scan_is_cheap:
            return self.scans.after(plan.before, skip=True)
        changes = self.scans.after(plan.before, skip=False)
        if readonly and changes:
            self._record_between(changes, plan.step)
            return []
        return changes

    def _ran(self, plan: Plan, elapsed: float, changes: list[Change], post_sigs: dict[str, str]) -> Execution:
        """What running the planned command did: read set signed after it and if it held, changes, epoch after."""
        post_sigs.update(self.workspace.sign_many([k for k in plan.pre_sigs if k not in post_sigs]))
        signed, stable = read_set(plan, post_sigs)
        return Execution(elapsed, signed, stable, changes, self.state.epoch + (1 if changes else 0))

    def _observe(
        self,
        plan: Plan,
        attempt_id: int,
        res: ExecResult,
        texts: dict[str, FileText],
        answer: Answer,
        kept: tuple[int, int] | None,
        delivered_now: tuple[list[str], list[bool]] | None,
        lines: Callable[[], list[str]],
        facts: list[FactRun],
    ) -> list[Observation]:
        """What the model saw of the files the output shows, checked against ``texts``; ``facts`` gets checked runs."""
        analysis, output = plan.analysis, res.output
        seen = None
        if analysis.views:  # what the model saw of the files the output shows (nothing to see otherwise)
            seen = seen_lines(output, answer, kept, delivered_now)
            if answer.kind is AnswerKind.WHOLE:  # the model has of it what it saw of the earlier output
                seen = self.held.delivered.seen_through(answer.refs[0]) or seen
        obs = observations(
            analysis,
            output,
            res.returncode,
            texts,
            seen,
            step=plan.step,
            attempt=attempt_id,
            facts=facts,
            submission=self.submission,
            out_lines=lines() if analysis.views else None,
        )
        return obs

    def _modifications(self, ran: Execution, attempt: Attempt, plan: Plan) -> list[Modification]:
        return [self.modifications.of(c, attempt.id, plan.step, plan.analysis) for c in ran.changes]

    def _commit_attempt(
        self,
        step: int,
        attempt: Attempt,
        obs: Sequence[Observation] = (),
        mods: Sequence[Modification] = (),
        epoch_after: int = 0,
        *,
        facts: dict | None = None,
        texts: dict[str, str] | None = None,
    ) -> None:
        """Commits an attempt's events, then folds them in; what may fail is done first, so disk and memory agree."""
        self._commit(attempt_events(attempt, obs, mods, epoch_after, facts), step, texts)

    def _verdict_after(self, plan: Plan, res: ExecResult, ran: Execution) -> Verdict:
        """The verdict of a command that ran, with the after-run rules' findings."""
        if not plan.verdict.kind.executes:
            return plan.verdict
        did = self._outcome(plan, res, ran.changes)
        return plan.verdict_after(check_after(self.rules, plan.analysis, did, self._policy_fault))

    def _outcome(self, plan: Plan, res: ExecResult, changes: list[Change]) -> Outcome:
        """What the command did, for the after-run rules."""
        local = self.workspace.rescan_before_command
        return outcome(plan.analysis, res, changes, self.workdir, local, plan.named_before)

    def _attempt(self, plan: Plan, **fields: Any) -> Attempt:
        """The planned command's attempt, numbered next."""
        attempt_id = self._next_id
        self._next_id += 1
        return new_attempt(plan, attempt_id, self.state, **fields)

    # -- modifications -----------------------------------------------------------------------------

    def _record_between(self, changes: list[Change], step: int) -> None:
        """Records changes made between commands, before ``step``."""
        epoch = self.state.epoch + (1 if changes else 0)
        mods = [self.modifications.of(c, None, step, None) for c in changes]
        self._commit(modification_events(mods, epoch), step)

    # -- persistence and faults ----------------------------------------------------------------------

    def _commit(
        self,
        events: list[tuple[str, dict]],
        step: int,
        texts: dict[str, str] | None = None,
    ) -> None:
        """Stores ``events`` in one transaction, then folds each in as stored; ``texts`` holds outputs in memory by key.

        A failed write is a fault, its records kept in faults.log; the run goes on."""
        stored = [self.store.append(kind, body, step) for kind, body in events]
        try:
            self.store.commit()
        except StoreError as e:
            lost = self.store.discard_pending()
            self._fault("writing the ledger", e, records=[json.loads(b) | {"kind": k} for k, _, b in lost])
        store_text = self.store.text
        read = store_text if not texts else (lambda key: texts.get(key) if key in texts else store_text(key))
        for event in stored:
            self._fold(event, read)
        self._tell_damaged()

    def _tell_damaged(self) -> None:
        """A fault for each blob read back from the ledger that did not read as stored: it was read as missing."""
        for h, why in list(self.store.damaged.items()):
            if h not in self._damaged_told:
                self._damaged_told.add(h)
                self._fault("reading the ledger", ValueError(f"blob {h}: {why}: read as missing"))

    def report_fault(self, where: str, error: BaseException, command: str | None = None) -> None:
        """Logs a fault of the ledger's own making, or an adapter's."""
        self._fault(where, error, command)

    def _fault(
        self, where: str, error: BaseException, command: str | None = None, records: list[dict] | None = None
    ) -> None:
        self.fault_log.add(where, error, command, records)

    @property
    def faults(self) -> int:
        """Faults of the ledger so far; none ever stops the agent."""
        return self.fault_log.count

    def _safely(self, fn, *args) -> None:
        try:
            fn(*args)
        except Exception as e:
            self._fault("recording an interrupted command", e)

    def close(self) -> None:
        self.fault_log.close()
        self._settle(discard=True)
        self.workspace.close()
        self.store.close()
        self._release()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def __enter__(self) -> LedgerRuntime:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _freeze_long_lived() -> None:
    """Moves every object alive now out of reach of the cyclic garbage collector (``gc.freeze``).

    A big tree's first scan makes an object per file for the whole run, and each full collection would walk them all,
    about 90 ms at 100,000 files. Reference counting still frees them; only a cycle among them would be kept."""
    gc.collect()
    gc.freeze()


def _collect_young_less_often() -> None:
    """Raises the cyclic garbage collector's young-generation threshold from the interpreter's default (700).

    A command allocates thousands of small containers (a first read of 2,000 lines indexes a tuple or two a line), so
    at 700 a command set off a dozen collections and, now and then, an older generation's: 10% of a command's CPU,
    a third of a first read's p95. Reference counting frees all but cycles; 10,000 allocations of them wait at most.
    A threshold the host process set itself is left as it is."""
    threshold = gc.get_threshold()
    if threshold[0] == DEFAULT_YOUNG_THRESHOLD:
        gc.set_threshold(YOUNG_THRESHOLD, *threshold[1:])


def _ignore_in_git(run_dir: Path, workdir: str) -> None:
    """Makes a run directory inside the workspace ignore itself, so ``git status`` and ``git add -A`` leave it out."""
    try:
        inside = run_dir.resolve().is_relative_to(Path(workdir).resolve())
        marker = run_dir / ".gitignore"
        if inside and not marker.exists():
            write_private(marker, "# the ledger's run directory: not part of the repository\n*\n")
    except OSError:
        pass
