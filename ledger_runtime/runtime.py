"""LedgerRuntime: the ledger around one agent run. ``inform()`` before each model call,
``run(command, execute)`` for each command.

One step of ``run``: analyse the command, scan the workspace (changes made since the last command
are recorded as such), decide a verdict (govern and the policy gate). RUN and NUDGE execute through
the adapter's ``execute``; the workspace is scanned again (never around a pure reader, which writes
nothing). Then the fresh output is compared with what the model already holds and the answer is
built (answers/build.py: the output with verbatim repeats as references); the attempt, the exact text the
model gets, what the command showed (checked against the files) and what it changed are committed in
one transaction before the answer goes back. Only REVISE and BLOCK answer without running. In
shadow mode every command executes and returns its real output; verdicts and answers are decided
and recorded only (the ledger keeps the text the model would have got). Verdicts are also decided
and recorded when govern is off, so runs with and without govern are measured alike.

A fault of the ledger never stops the agent: it is logged (``faults.log`` in the run directory,
and the ledger when that works) and the command runs as if there were no ledger.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import threading
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

from ledger_runtime import __version__
from ledger_runtime.analysis.commands import ANY_FILE, Analysis, analyze
from ledger_runtime.analysis.submission import NO_SUBMISSION, Submission
from ledger_runtime.answers.build import (
    AS_PRINTED,
    NOTE,
    Answer,
    AnswerKind,
    Cut,
    ExpandError,
    Piece,
    build,
    expand,
    masked_kept,
    mistakable,
    raw,
    split_lines,
)
from ledger_runtime.config import LedgerConfig
from ledger_runtime.decide.current import Current
from ledger_runtime.decide.gate import (
    Outcome,
    after_run,
    build_rules,
    check_after,
    check_all,
    compose,
    describe,
    in_force,
)
from ledger_runtime.decide.govern import govern
from ledger_runtime.decide.policies import BUILTINS
from ledger_runtime.executor import ExecResult
from ledger_runtime.held.context import Line, Said
from ledger_runtime.held.delivered import delivered_lines, seen_lines
from ledger_runtime.held.holds import Held
from ledger_runtime.held.holds import command_key as _command_key
from ledger_runtime.held.output import HeldOutput
from ledger_runtime.inform import StateView, render
from ledger_runtime.ledger.clean_outputs import CleanOutputs
from ledger_runtime.ledger.faults import FaultLog
from ledger_runtime.ledger.modifications import Modifications
from ledger_runtime.ledger.observe import FactRun, FileText, Truncation, observations
from ledger_runtime.ledger.private import hold, private_dir, write_private
from ledger_runtime.ledger.redact import Redactor
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.ledger.store import LedgerStore, StoreError
from ledger_runtime.records import Attempt, CommandClass, Modification, Verdict, VerdictKind
from ledger_runtime.workspace.local import LocalWorkspace, Workspace
from ledger_runtime.workspace.scanner import Change, Snapshot, delta
from ledger_runtime.workspace.signatures import PENDING

MAX_WATCHED = 4096
MAX_POLICY_FILES = 32  # files an edit writes whose state the policies get
MAX_DELIVERED_CHARS = 4 * 1024 * 1024  # longer outputs are never the source of a reference
# Read keys worth signing: a file's content, a path's existence and stat data (one stat each). Listings
# and subtrees are not signed: nothing decides on them any more (the state view matches their paths
# against the modifications), and a subtree can be all of / (a read of it must never hash it).
SIGNED = ("f:", "x:", "m:")
UNSIGNED = "unsigned"
LOCK_FILE = ".lock"  # held by the runtime that writes the run directory
FREEZE_FILES = 10_000  # a tree this big: what the first scan made is kept out of Python's cyclic collector


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
    """A proposed command with its verdict, between deciding and recording (``propose`` ->
    ``answer`` or the command runs -> ``record``). Adapters whose agent runs the command itself
    (hooks before and after it) hold the plan in between."""

    command: str
    cwd: str
    step: int
    analysis: Analysis
    verdict: Verdict
    applied: bool  # the verdict takes effect (govern on, not shadow)
    before: Snapshot | None
    pre_sigs: dict[str, str]
    shown_raw: bool = False  # the model got the output as it is, whatever the ledger would answer
    # the model the ledger answers gets this output; False: another model does (a subagent the agent
    # started): recorded and shown as it is, never the source of a reference, never counted as seen
    held: bool = True


def not_run_answer(v: Verdict, *, refused: str | None = None) -> tuple[Answer, int]:
    """What the agent gets instead of running a command (REVISE, BLOCK): the verdict's reason and
    what became of the command (``refused``: what the adapter's agent asked for that is not done, in
    place of "The command was not run..."). Returns the answer and the return code to report. (No
    earlier output is handed back in place of a run: a REUSE is only read from older ledgers.)"""
    by = f" by policy {v.rule}" if v.rule else ""
    tail = refused or "The command was not run" + (
        " (it is refused outright)." if v.kind is VerdictKind.BLOCK else "; this turn is still yours."
    )
    text = f"[ledger] {v.kind.value}{by}: {v.reason}.\n{tail}"
    return Answer(AnswerKind.REFUSED, text, (Piece(NOTE, 0, len(text)),)), 1


class LedgerRuntime:
    """The runtime for one run; see the module docstring."""

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
        """``line_facts``: keep, for each output the model holds, which of its lines are which file
        lines (what ``said`` tells a context policy); by default where the configured context policy
        is not ``full``, the only one that asks nothing of them."""
        self.workdir = workspace.root if workspace is not None else os.path.abspath(workdir)
        self.run_dir = Path(run_dir)
        self.submission = submission  # how the agent submits: the adapter knows
        self._line_facts = line_facts
        private_dir(self.run_dir)  # what the agent saw, secrets included: its owner's only
        # one runtime per run directory: a second would write the same attempt ids
        self._lock = hold(self.run_dir / LOCK_FILE, f"run directory {self.run_dir}")
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
        self.state = LedgerState.from_events(self.store.events())
        self.modifications = Modifications(self.store, self.state, self.workspace, self.redactor)
        self.rules = build_rules(self.config.policies.rules, self.workdir, BUILTINS)
        self._next_id = max((a.id for a in self.state.attempts), default=0) + 1
        self._now: int | None = None  # the step being answered
        self.held = Held(self, now=lambda: self._now, snapshot=lambda: self._last, refers=self._refers)
        self.delivered, self.facts, self._standing = self.held.delivered, self.held.facts, self.held.answers
        if self._line_facts is None:
            self._line_facts = not self.config.context_policy.full
        self.held.restore()
        self._last: Snapshot | None = self.workspace.scan()
        if len(self._last.files) >= FREEZE_FILES:
            _freeze_long_lived()
        self._pending: tuple[threading.Thread, list[Any]] | None = None  # a scan running while the model thinks
        if self.state.baseline is None:
            baseline = self.workspace.baseline(self._last, task)
            self.store.append(
                "run",
                {
                    "version": __version__,
                    "workdir": self.workdir,
                    "config": self.config.to_dict(),
                    "started_at": time.time(),
                    **(meta or {}),
                },
            )
            self.store.append("baseline", baseline.to_dict())
            self.store.commit()
            self.state.baseline = baseline

    # -- inform --------------------------------------------------------------------------------

    def view(self, *, as_applied: bool = False) -> StateView:
        """The state view now. ``as_applied``: as the model of a run whose verdicts take effect would
        see it (a replay in shadow mode measures that run)."""
        policies = describe(self.rules) if as_applied else in_force(self.config, self.rules)
        return render(self.state, self.config, policies=policies, as_applied=as_applied)

    def view_for_notes(self) -> StateView | None:
        """The state view the notes of the view are made from (prompt/notes.py); None when inform is
        off, in shadow mode, or on a fault."""
        if not self.config.informs:
            return None
        try:
            return self.view()
        except Exception as e:
            self._fault("rendering the state view", e)
            return None

    def view_note(self, notes: Any, *, dry_run: bool = False) -> str:
        """For an agent that keeps the notes of the state view in its history (hooks: Codex, Claude
        Code): the next note of ``notes`` (a ``ViewNotes``), the view's news since the model was last
        told (prompt/notes.py), paid from what the answers spared it (``context.view_share``), recorded as an
        injection; "" when there is none (inform off, shadow mode, a fault, nothing news, no budget).
        ``dry_run``: the note there would be now, ``notes`` left as they were and nothing recorded."""
        view = self.view_for_notes()
        if view is None:
            return ""
        share = self.config.context.view_share
        budget = None if math.isinf(share) else int(self.spared_total() * share) - notes.chars
        if dry_run:
            notes = dataclasses.replace(notes, notes=list(notes.notes))
        text = notes.next(view, len(notes.notes), budget=budget)
        if text and not dry_run:
            self.note_injection("note", text)
        return text

    def inform(self) -> str:
        """The state view to put into the prompt now ("" when inform is off, in shadow mode, or on a
        fault). The model's turn starts now: the scan for changes made since the last command starts
        too, in the background (``prescan``)."""
        self.prescan()
        if not self.config.informs:
            return ""
        try:
            return self.view().text
        except Exception as e:
            self._fault("rendering the state view", e)
            return ""

    def spared(self, attempt_id: int | None) -> int:
        """Characters the answer of an attempt spared the model: what the agent would have shown of the
        output as it is, less what it showed of the answer (0 where the verdict did not take effect)."""
        a = self.state.attempt(attempt_id) if attempt_id is not None else None
        if a is None or not a.applied:
            return 0
        return self.truncation.seen_chars(a.output_chars) - self.truncation.seen_chars(a.shown_chars)

    def spared_total(self) -> int:
        """``spared`` summed over every attempt so far."""
        return sum(self.spared(a.id) for a in self.state.attempts)

    def prescan(self) -> None:
        """Take the scan before the next command now, while the model thinks: changes made since the
        last command are recorded as made between commands, off the next command's path. Where a
        scan is a walk of the tree (no watcher) it runs in the background and the next command's plan
        takes its result; with a watcher it costs what changed and runs here, and the command's plan
        still reads the events queued after it, so "between commands" stays exact."""
        if self._pending is not None or not self._scans_before():
            return
        if self.workspace.scan_is_cheap:
            try:
                self._take_between(
                    self.workspace.scan(keep_limit=self.config.scanning.max_content_bytes), self.state.step + 1
                )
            except Exception as e:
                self._fault("scanning before the model's turn", e)
            return
        box: list[Any] = []

        def work() -> None:
            try:
                box.append(self.workspace.scan(keep_limit=self.config.scanning.max_content_bytes))
            except BaseException as e:  # reported when the result is taken
                box.append(e)

        t = threading.Thread(target=work, name="ledger-prescan", daemon=True)
        t.start()
        self._pending = (t, box)

    def _settle(self, *, discard: bool = False) -> Snapshot | None:
        """Wait for a background scan, record what it found as changes made between commands, and
        return its snapshot (None when none was running or it failed). ``discard``: a command is
        under way (the scan may have seen part of what it does): drop the result, the scan after the
        command finds it all."""
        if self._pending is None:
            return None
        t, box = self._pending
        self._pending = None
        t.join()
        if discard:
            if box and not isinstance(box[0], BaseException) and self._last is not None:
                # what it saw changed is read again by the next scan (its content kept there)
                rehash = getattr(self.workspace, "rehash", None)
                if rehash is not None:
                    rehash([c.path for c in delta(self._last, box[0])])
            return None
        if not box or isinstance(box[0], BaseException):
            self._fault("scanning in the background", box[0] if box else RuntimeError("no result"))
            return None
        snap = box[0]
        self._take_between(snap, self.state.step + 1)
        return snap

    def _take_between(self, snap: Snapshot, step: int) -> None:
        """Make ``snap`` the last snapshot; what changed since the previous one was made between commands."""
        if self._last is not None:
            external = delta(self._last, snap)
            if external:
                self._record_changes(external, None, step, analysis=None)
                self.store.commit()
        self._last = snap

    def _scans_before(self) -> bool:
        return self.config.scanning.rescan_before_command and self.workspace.rescan_before_command

    def complete(self, attempt_id: int, res: ExecResult) -> None:
        """Fold in what an executed command that was recorded unfinished gave in the end (an agent
        whose tool returned before the command ended: its exit code and whole output)."""
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
            self.state.complete(attempt_id, fields)
        except Exception as e:
            self._fault("completing a command", e)

    def set_task(self, task: str) -> None:
        """Name the task when the run started without one (an agent that gets it later)."""
        if task.strip() and self.state.baseline is not None and not self.state.baseline.task:
            self._commit([("task", {"task": task})], self.state.step)
            self.state.apply({"kind": "task", "task": task})

    def note_injection(self, event: str, text: str) -> None:
        """Record state-view text handed to the agent outside its prompt (it stays in its history)."""
        if text:
            self._commit([("injection", {"event": event, "chars": len(text)})], self.state.step)
            self.state.injections.append({"event": event, "chars": len(text), "step": self.state.step})

    def note_model_call(self, cost: float | None) -> None:
        """Record one of the agent's model calls and its cost in dollars; None: the price of the model
        is not known (a local model, one the price table lacks), recorded as unknown, never as $0."""
        event = {"cost": None if cost is None else float(cost)}
        self._commit([("model_call", event)], self.state.step)
        self.state.apply({"kind": "model_call", **event})

    # -- run -------------------------------------------------------------------------------------

    def run(
        self,
        command: str,
        execute: Callable[[str, str], ExecResult],
        *,
        cwd: str | None = None,
        step: int | None = None,
    ) -> RunResult:
        """Govern, execute (or not), record; returns what the agent should see."""
        plan = self.propose(command, cwd=cwd, step=step)
        if plan is None:
            res = execute(command, os.path.abspath(cwd or self.workdir))
            return RunResult(
                res.output, res.returncode, Verdict(VerdictKind.RUN), True, None, res.exception_info, res.extra
            )
        if plan.applied and not plan.verdict.kind.executes:
            answer = self.answer(plan)
            if answer is not None:
                return answer
        self._prepare(plan)
        started = time.perf_counter()
        try:
            res = execute(command, plan.cwd)
        except BaseException as exc:  # Submitted, interrupts: record what happened, then let it go on
            self._safely(self._record_run, plan, None, time.perf_counter() - started, exc)
            raise
        return self.record(plan, res, time.perf_counter() - started)

    # -- the steps of run, for adapters whose agent runs the command itself ----------------------

    def propose(
        self, command: str, *, cwd: str | None = None, step: int | None = None, analysis: Analysis | None = None
    ) -> Plan | None:
        """Analyse, scan and govern ``command``. None on a fault of the ledger (logged): then the
        command just runs, unrecorded."""
        cwd = os.path.abspath(cwd or self.workdir)
        step = step if step is not None else self.state.step + 1
        try:
            return self._plan(command, cwd, step, analysis)
        except Exception as e:
            self._fault("before the command", e, command)
            return None

    def answer(self, plan: Plan, *, refused: str | None = None) -> RunResult | None:
        """What the agent gets instead of running the command (the plan's verdict does not
        execute), recorded. None when the earlier output cannot be had (logged): the verdict
        becomes RUN and the command must run. ``refused``: what a refusal says became of what the
        agent asked for, when that was not a command ("The command was not run..." otherwise)."""
        try:
            return self._answer(plan, refused)
        except Exception as e:
            self._fault("answering without running", e, plan.command)
            plan.verdict = Verdict(VerdictKind.RUN, "ledger fault: ran instead")
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
        """Record what running the planned command gave; returns what the agent should see.
        ``truncation``: how the agent cut this output, when not as usual (``self.truncation``);
        ``shown_raw``: the agent already got the output as it is (a command it ran itself)."""
        plan.shown_raw = plan.shown_raw or shown_raw
        try:
            self._settle(discard=True)
            return self._record_run(plan, res, elapsed, None, truncation)
        except Exception as e:
            self._fault("recording the command", e, plan.command)
            return RunResult(res.output, res.returncode, plan.verdict, True, None, res.exception_info, res.extra)

    def _plan(self, command: str, cwd: str, step: int, analysis: Analysis | None = None) -> Plan:
        analysis = analysis or analyze(command, cwd, self.submission)
        prescanned = self._settle()  # the scan taken while the model thought, if any
        # A reader needs no scan: it changes nothing, and what it shows is checked against the files
        # after it ran. Changes made before it are found by the next scan that does run.
        if (self._scans_before() and not analysis.readonly and prescanned is None) or self._last is None:
            self._take_between(self.workspace.scan(keep_limit=self.config.scanning.max_content_bytes), step)
        before = self._last
        pre_keys = {k for k in analysis.read_keys if k[:2] in SIGNED} if analysis.pure else set()
        sigs = self.workspace.sign_many(pre_keys, exact=False)
        files = {}
        if analysis.command_class is CommandClass.MODIFY:  # the policies look at what an edit writes
            files = {w: self.workspace.file_state(w) for w in analysis.writes[:MAX_POLICY_FILES] if w != ANY_FILE}
        current = Current(sigs, files)
        verdict = compose(
            govern(analysis, self.state, current, self.config),
            check_all(self.rules, analysis, self.state, current, self._policy_fault),
        )
        return Plan(command, cwd, step, analysis, verdict, self.config.applies, before, sigs)

    def _prepare(self, plan: Plan) -> None:
        """Hand the workspace the command about to run, as analysed (one that signs inside the
        command reads it from here; a workspace written before ``prepare`` existed has none)."""
        prepare = getattr(self.workspace, "prepare", None)
        if prepare is None:
            return
        try:
            prepare(plan.analysis)
        except Exception as e:
            self._fault("preparing the workspace for the command", e, plan.command)

    def _policy_fault(self, where: str, error: BaseException) -> None:
        self._fault(where + " (treated as ALLOW)", error)

    # -- what the model holds (held/holds.py) -------------------------------------------------------

    def _held_from(self, now: int | None = None) -> int:
        return self.held.held_from(now)

    def holds(self, attempt_id: int) -> bool:
        return self.held.holds(attempt_id)

    def standing(self) -> Collection[int]:
        return self.held.standing()

    def outlived(self, attempt_id: int) -> tuple[str, str] | None:
        return self.held.outlived(attempt_id)

    def holds_step(self, step: int) -> bool:
        return self.held.holds_step(step)

    def _held_output(self, label: str) -> tuple[int, list[str]] | None:
        return self.held.held_output(label)

    def _in_place(self, answer: Answer) -> str | None:
        return self.held.in_place(answer)

    def forget_context(self) -> None:
        """The agent dropped the outputs it was shown so far from its history (a compaction): no
        later answer refers to them."""
        event = {"from_step": self.state.step + 1}
        self._commit([("context", event)], self.state.step)
        self.state.apply({"kind": "context", **event})
        self.held.forget_gone()

    def distrust(self, attempt_id: int, why: str) -> None:
        """The agent's own record says the model got something else than the ledger recorded for
        this attempt: it is never the source of a reference (a fault says why)."""
        self.held.distrust(attempt_id)
        self._fault("checking what the model got", ValueError(why))

    def _source(self, a: Attempt) -> HeldOutput:
        return self.held.source(a)

    def _deliver(self, a: Attempt, output: str, answer: Answer, *args: Any, **kwargs: Any) -> None:
        self.held.deliver(a, output, answer, *args, **kwargs)

    def said(self, attempt_id: int, index: int, chars: int = 0, *, raw: bool = False) -> Said | None:
        return self.held.said(attempt_id, index, chars, raw=raw)

    def history(self, outputs: Sequence[tuple[int | None, int]], *, raw: bool = False) -> list[Said]:
        return self.held.history(outputs, raw=raw)

    def still_true(self, line: Line) -> bool:
        return self.held.still_true(line)

    # -- answering ---------------------------------------------------------------------------------

    def _answer_record(
        self,
        answer: Answer,
        kept: tuple[int, int] | None,
        trunc: Truncation,
        keys: tuple[str, ...] = (),
        altered: bool = False,
    ) -> dict[str, Any]:
        """An answer as the ledger keeps it: its pieces, and what the check of it needs (what the
        agent showed of it, the first step the model held, the keys it is a re-read's base under;
        ``altered``: the output is not stored as it was, see ``stored_output``)."""
        return {
            **answer.to_dict(),
            "kept": list(kept) if kept else None,
            "exact": trunc.exact,
            "held_from": self._held_from(),
            "keys": list(keys),
            **({"altered": True} if altered else {}),
        }

    def stored_output(self, output: str) -> str:
        """An output as the ledger keeps it: secrets masked, then cut to ``truncation.max_stored_chars``
        (masked first: a cut through a secret would leave a piece no pattern knows) - what a check
        of its answer compares the expansion with. (A long output like one stored as printed is
        masked in what differs: clean_outputs.py.)"""
        limit = self.config.truncation.max_stored_chars
        if len(output) <= limit:
            return self._clean.masked(output, self.redactor.mask)
        return masked_kept(output, limit, self.redactor.mask)

    def _put_output(self, output: str) -> tuple[str, str]:
        """Store an output as ``stored_output`` says; returns its key and what is stored (``output``
        itself when nothing was masked or cut)."""
        stored = self.stored_output(output)  # masked already: the store does not mask it again
        if stored is output:
            self._clean.remember(output)
        return self.store.put_masked(stored), stored

    def _refers(self, output: str) -> bool:
        """Whether an output is short enough to be answered with references and be their source
        (a longer one is answered as it is, and stored cut)."""
        return len(output) <= min(MAX_DELIVERED_CHARS, self.config.truncation.max_stored_chars)

    def _answer(self, plan: Plan, refused: str | None = None) -> RunResult:
        """A verdict that does not run the command (REVISE, BLOCK), answered and recorded."""
        self._now = plan.step
        v = plan.verdict
        answer, returncode = not_run_answer(v, refused=refused)
        kept = self.truncation.kept(answer.text)
        shown_hash = self.store.put_text(answer.text)
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
            shown_hash=shown_hash,
            answer=self._answer_record(answer, kept, self.truncation),
        )
        self._commit([("attempt", attempt.to_dict())], plan.step)
        self.state.add_attempt(attempt)
        return RunResult(answer.text, returncode, v, False, attempt.id, answer=answer.kind.value)

    def _fresh_answer(
        self, plan: Plan, verdict: Verdict, output: str, lines: Callable[[], list[str]], trunc: Truncation
    ) -> Answer:
        """The answer to a command that ran: its fresh output (``lines``: its lines, split once a step),
        deduped against what the model holds (never a submission, never a command that asks for its
        raw output)."""
        a = plan.analysis
        notes = [f"[ledger] NUDGE: {verdict.reason}."] if verdict.kind is VerdictKind.NUDGE else []
        if self.submission.in_output(output) or a.submits:
            return raw(output)  # the agent reads the marker off the output's first line: nothing may move it
        if (plan.shown_raw and plan.applied) or not plan.held:
            return raw(output)  # what the agent got: recorded as it was (shadow mode: what it would have got)
        if not self._refers(output):  # the model sees its head and tail
            if mistakable(_seen_of(output, trunc)):
                return raw(output, [*notes, AS_PRINTED])
            return raw(output, notes)
        if mistakable(output):  # text a reader could take for ours: shown as printed, and said so
            return raw(output, [*notes, AS_PRINTED])
        if a.raw:
            return raw(output, notes)
        epoch = self.state.epoch

        def same_note(src: HeldOutput) -> str:
            shown = self.delivered.items.get(src.attempt)
            if shown is not None and shown.epoch_after != epoch:
                return ", though files changed since"
            return ""

        self.delivered.window = trunc.kept(output)
        answer = build(
            output,
            self.delivered,
            self.dedupe,
            base_keys=_read_keys_of(a),
            notes=notes,
            same_note=same_note,
            cut=Cut(trunc.limit, trunc.head, trunc.tail, trunc.exact),
            lines=lines(),
        )
        return self._checked(answer, output, notes, lines)

    def _checked(
        self, answer: Answer, output: str, notes: list[str], lines: Callable[[], list[str]] | None = None
    ) -> Answer:
        """``answer``, once its references are read back as the model reads them and found to stand for
        exactly ``output`` (from the outputs the ledger holds in memory); else, a fault of ours, the
        output as it is. Every reference the model gets is checked so, before it gets it."""
        if answer.kind is AnswerKind.RAW:
            return answer

        try:
            ok = expand(answer.text, answer.pieces, self._held_output, lambda: output, own_lines=lines) == output
        except ExpandError as e:
            ok, why = False, str(e)
        else:
            why = "it expands to other bytes than the output"
        if ok:
            return answer
        self._fault("checking an answer before the model gets it", ValueError(why))
        return raw(output, notes)

    def _record_run(  # noqa: C901
        self,
        plan: Plan,
        res: ExecResult | None,
        elapsed: float,
        exc: BaseException | None,
        truncation: Truncation | None = None,
    ) -> RunResult:
        trunc = truncation or self.truncation
        analysis = plan.analysis
        self._watch(analysis)
        if analysis.readonly and exc is None and self.workspace.rescan_before_command and self._last is not None:
            # A reader writes nothing: skip the scan. Were the analysis ever wrong, the next
            # command's scan still finds the change, recorded as made between commands.
            changes: list[Change] = []
        else:
            after = self.workspace.scan(keep_limit=self.config.scanning.max_content_bytes)
            # Against the last recorded snapshot, which is plan.before unless another plan was
            # recorded in between (an agent running commands in parallel): no change counts twice.
            last = self._last if self._last is not None else plan.before
            changes = delta(last, after) if last is not None else []
            self._last = after
        output = res.output if res is not None else ""
        lines = cache(lambda: split_lines(output))  # the output's lines: split once, where needed
        texts = self._file_texts(analysis, output, lines) if res is not None else {}
        # a file the output is checked against signs as the content it was checked against
        post_sigs = {"f:" + p: t.digest for p, t in texts.items() if "f:" + p in plan.pre_sigs}
        post_sigs.update(self.workspace.sign_many([k for k in plan.pre_sigs if k not in post_sigs]))
        read_keys = analysis.read_keys if analysis.pure else ()
        stable = all(plan.pre_sigs.get(k) in (PENDING, post_sigs.get(k)) for k in read_keys if k in plan.pre_sigs)
        output_hash, stored = self._put_output(output) if res is not None else (None, output)
        altered = stored is not output
        verdict = plan.verdict
        if verdict.kind.executes and res is not None:  # the rules decided after it ran (noop-edit)
            found = check_after(self.rules, analysis, self._outcome(analysis, res, changes), self._policy_fault)
            verdict = after_run(verdict, found)
        self._now = plan.step
        if not verdict.kind.executes:  # shadow mode, govern off: what the model would have got instead
            answer = not_run_answer(verdict)[0]
        else:
            answer = self._fresh_answer(plan, verdict, output, lines, trunc) if res is not None else raw("")
        shown = answer.text
        shown_hash = None
        record = answer  # the answer as stored: a long raw one over the output as it is stored
        if res is not None and len(output) > self.config.truncation.max_stored_chars:
            record = raw(stored, [shown[p.start : p.end] for p in answer.pieces if p.kind == NOTE])
        if res is not None:
            shown_hash = output_hash if shown == output else self.store.put_text(record.text)
        epoch_after = self.state.epoch + (1 if changes else 0)
        attempt = self._attempt(
            plan,
            executed=True,
            exit_code=res.returncode if res is not None else None,
            output_hash=output_hash,
            output_chars=len(output),
            truncated=trunc.cuts(shown),
            duration=elapsed,
            read_set={k: post_sigs.get(k, UNSIGNED) for k in read_keys},
            stable=stable,
            epoch_after=epoch_after,
            shown_chars=len(shown),
            verdict=verdict,
            exception=(self.redactor.mask(f"{type(exc).__name__}: {exc}")[:500] if exc is not None else None),
            output_complete=res.output_complete if res is not None else False,
            submits=analysis.submits or self.submission.in_output(output),
            shown_hash=shown_hash,
            answer=self._answer_record(record, trunc.kept(shown), trunc, _read_keys_of(analysis), altered)
            | ({} if plan.held else {"held": False})
            if res is not None
            else None,
        )
        events: list[tuple[str, dict]] = [("attempt", attempt.to_dict())]
        obs = []
        got = None
        if res is not None and plan.held:
            got = (
                delivered_lines(output, answer, trunc.kept(shown), lines())
                if len(output) <= MAX_DELIVERED_CHARS
                else None
            )
            seen = None
            if analysis.views:  # what the model saw of the files the output shows (nothing to see otherwise)
                seen = seen_lines(output, answer, trunc.kept(shown), got)
                if answer.kind is AnswerKind.WHOLE:  # the model has of it what it saw of the earlier output
                    seen = self.delivered.seen_through(answer.refs[0]) or seen
            facts: list[FactRun] = []
            obs = observations(
                analysis,
                output,
                res.returncode,
                texts,
                seen,
                step=plan.step,
                attempt=attempt.id,
                facts=facts,
                submission=self.submission,
                out_lines=lines() if analysis.views else None,
            )
            if facts and self._line_facts:
                self.facts[attempt.id] = facts
            if answer.refs and plan.applied and self.config.context.steps > 0:
                # an agent that keeps only its last steps: what the answer stands for, should what it refers
                # to leave the model before the answer does (an answer's references as the model reads them)
                self._standing.keep(attempt.id, plan.step, answer.refs, shown, self._in_place(answer))
            events += [("observation", o.to_dict()) for o in obs]
        # what may fail is worked out before anything is kept: the ledger on disk and in memory agree
        mods = [self.modifications.of(c, attempt.id, plan.step, analysis) for c in changes]
        events += [("modification", {**m.to_dict(), "epoch": epoch_after}) for m in mods]
        self._commit(events, plan.step)
        self.state.add_attempt(attempt)
        for m in mods:
            self.state.add_modification(m, epoch_after)
        for o in obs:
            self.state.add_observation(o)
        if res is None:
            return RunResult("", None, verdict, True, attempt.id)
        if answer.kind is not AnswerKind.REFUSED and plan.held:
            self._deliver(
                attempt,
                output,
                answer,
                trunc.kept(shown),
                trunc.exact,
                _read_keys_of(analysis),
                got,
                None if altered else output_hash,
            )
        if attempt.id not in self.delivered.items:
            self.facts.pop(attempt.id, None)  # the lines of an output the model does not hold are never asked of
        elif attempt.id in self.facts:  # held once: the lines the delivered outputs hold
            intern = self.delivered.intern
            self.facts[attempt.id] = [r._replace(was=[intern(t) for t in r.was]) for r in self.facts[attempt.id]]
        note = next(
            (t for p in answer.pieces if p.kind == NOTE and (t := shown[p.start : p.end].strip()) != AS_PRINTED), None
        )
        out_text = shown if plan.applied else output
        return RunResult(
            out_text,
            res.returncode,
            verdict,
            True,
            attempt.id,
            res.exception_info,
            res.extra,
            note if plan.applied else None,
            answer.kind.value if plan.applied else AnswerKind.RAW.value,
        )

    def _outcome(self, a: Analysis, res: ExecResult, changes: list[Change]) -> Outcome:
        """What the command did, for the rules decided after it ran. Which of the paths an edit names
        are files, and which are missing, is read only for an edit that changed nothing (and only
        where the workspace's files are this machine's)."""
        if changes or a.command_class is not CommandClass.MODIFY or not a.writes:
            return Outcome(res.returncode, bool(changes), self.workdir)
        if not self.workspace.rescan_before_command:
            return Outcome(res.returncode, False, self.workdir, tuple(a.writes))
        named = [w for w in a.writes if w != ANY_FILE]
        return Outcome(
            res.returncode,
            False,
            self.workdir,
            tuple(w for w in named if not os.path.isdir(w)),
            tuple(w for w in named if not os.path.lexists(w)),
        )

    def _file_texts(self, analysis: Analysis, output: str, lines: Callable[[], list[str]]) -> dict[str, FileText]:
        """The files a command's views name, as they are now (what its ``output`` is checked against;
        a file whose text is the output takes its ``lines``)."""
        out = {}
        for v in analysis.views:
            if v.path in out:
                continue
            data = self.workspace.content(v.path, self.config.scanning.max_content_bytes)
            if data is not None:
                out[v.path] = FileText.of(self.workspace.digest(data), data, (output, lines))
        return out

    def _attempt(
        self,
        plan: Plan,
        *,
        executed: bool,
        exit_code: int | None,
        output_hash: str | None,
        output_chars: int,
        truncated: bool,
        duration: float,
        read_set: dict[str, str],
        stable: bool,
        epoch_after: int,
        shown_chars: int,
        verdict: Verdict,
        exception: str | None,
        output_complete: bool,
        submits: bool | None = None,
        shown_hash: str | None = None,
        answer: dict[str, Any] | None = None,
    ) -> Attempt:
        a = plan.analysis
        attempt_id = self._next_id
        self._next_id += 1
        return Attempt(
            id=attempt_id,
            step=plan.step,
            command=plan.command,
            normalized=a.normalized,
            cwd=a.cwd,
            command_class=a.command_class,
            verdict=verdict,
            executed=executed,
            exit_code=exit_code,
            output_hash=output_hash,
            output_chars=output_chars,
            truncated=truncated,
            duration_s=round(duration, 6),
            read_set=read_set,
            read_set_stable=stable,
            write_set=a.writes,
            epoch_before=self.state.epoch,
            epoch_after=epoch_after,
            env_epoch=self.state.env_epoch,
            pure=a.pure,
            parsed=a.parsed,
            submits=a.submits if submits is None else submits,
            shown_chars=shown_chars,
            exception=exception,
            output_complete=output_complete,
            applied=plan.applied,
            shown_hash=shown_hash,
            answer=answer,
        )

    # -- modifications -----------------------------------------------------------------------------

    def _record_changes(
        self, changes: list[Change], attempt_id: int | None, step: int, *, analysis: Analysis | None
    ) -> list[Modification]:
        epoch = self.state.epoch + (1 if changes else 0)
        mods = [self.modifications.of(c, attempt_id, step, analysis) for c in changes]
        self._commit([("modification", {**m.to_dict(), "epoch": epoch}) for m in mods], step)
        for m in mods:
            self.state.add_modification(m, epoch)
        return mods

    def _watch(self, analysis: Analysis) -> None:
        """Track files named by commands that the workspace scan does not cover (outside the root,
        or ignored), so their later changes are recorded too."""
        if self.workspace.watched() >= MAX_WATCHED:
            return
        last = self._last.files if self._last else {}
        # a listing or a search too: a directory the scan no longer covers (untracked) then counts as changed
        paths = [k[2:] for k in analysis.read_keys if k[:2] in ("f:", "d:", "r:")]
        paths += [w for w in analysis.writes if w != ANY_FILE]
        self.workspace.watch(
            p for p in paths if p not in last and not p.startswith("/dev/") and not p.startswith("/proc/")
        )

    # -- persistence and faults ----------------------------------------------------------------------

    def _commit(self, events: list[tuple[str, dict]], step: int) -> None:
        for kind, body in events:
            self.store.append(kind, body, step)
        try:
            self.store.commit()
        except StoreError as e:
            lost = self.store.discard_pending()
            self._fault("writing the ledger", e, records=[json.loads(b) | {"kind": k} for k, _, b in lost])

    def report_fault(self, where: str, error: BaseException, command: str | None = None) -> None:
        """Log a fault of the ledger's own making (an adapter's too): faults.log and the ledger."""
        self._fault(where, error, command)

    def _fault(
        self, where: str, error: BaseException, command: str | None = None, records: list[dict] | None = None
    ) -> None:
        self.fault_log.add(where, error, command, records)

    @property
    def faults(self) -> int:
        """Faults of the ledger so far (each logged; none ever stops the agent)."""
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


def _seen_of(output: str, trunc: Truncation) -> str:
    """What the model may read of an output answered as it is: where the agent cuts it exactly, its
    head and tail (a line between them, so that nothing reads across the cut); else all of it."""
    kept = trunc.kept(output) if trunc.exact else None
    if kept is None:
        return output
    head, tail = kept
    return output[:head] + "\n" + (output[len(output) - tail :] if tail else "")


def _freeze_long_lived() -> None:
    """Move every object alive now out of the reach of Python's cyclic garbage collector (``gc.freeze``).
    The first scan of a big tree makes an object per file that lives as long as the run (its state
    in the snapshot and the hash cache); each full collection would walk them all (about 90 ms at
    100,000 files, at unforeseeable moments of the agent's run). Reference counting still frees them;
    only a cycle among them, should one ever become garbage, is kept."""
    gc.collect()
    gc.freeze()


def _ignore_in_git(run_dir: Path, workdir: str) -> None:
    """A run directory inside the workspace (``-o ledger-runs/...`` from the repository) ignores
    itself, so ``git status`` and ``git add -A`` in the agent's repository leave it out."""
    try:
        inside = run_dir.resolve().is_relative_to(Path(workdir).resolve())
        marker = run_dir / ".gitignore"
        if inside and not marker.exists():
            write_private(marker, "# the ledger's run directory: not part of the repository\n*\n")
    except OSError:
        pass


def _read_keys_of(a: Analysis) -> tuple[str, ...]:
    """Keys under which a read's output is the base of a later delta re-read: the same command in the
    same directory, and the same lines of the same file read another way."""
    if a.command_class not in (CommandClass.INSPECT, CommandClass.SEARCH):
        return ()
    keys = [_command_key(a.cwd, a.normalized)]
    if a.outputs == 1 and len(a.views) == 1 and a.views[0].kind == "lines":
        v = a.views[0]
        keys.append(f"v:{v.path}\0{v.selectors!r}\0{v.numbered}")
    return tuple(keys)
