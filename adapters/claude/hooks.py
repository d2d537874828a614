"""Claude Code's hooks, answered from the ledger. ``ClaudeHooks.handle(event, payload)`` takes one
hook event (the JSON Claude Code writes to the hook's stdin) and returns the JSON to answer with, or
None (the call goes on as Claude Code would make it). VerdictFacts about the protocol, checked against the
real ``claude`` 2.1.332: docs/claude-code.md.

- ``SessionStart``, ``UserPromptSubmit`` (which also names the task): a note of the state view's news
  as ``additionalContext``. After a compaction (``source: compact``) or ``/clear`` the model holds
  none of the earlier notes or outputs: the next note is the whole view.
- ``PreToolUse``: govern. REVISE and BLOCK deny the call with the rule's reason (``ask`` instead
  for a REVISE in an interactive session: the user may let it run); Edit and Write go through the
  same policies as a shell edit (protected paths). A call that is to run is not changed: Claude Code
  then asks the user's permission for the command the model wrote, as without the ledger.
- ``PostToolUse``: records the call. A Bash command's output comes back as the ledger's answer
  (``updatedToolOutput``: repeats of what the model holds as references, a NUDGE note with it); Read,
  Edit and Write are recorded as they are (observations with the lines the model was shown and their
  hashes; modifications with the file's hashes after the edit). A Read of a file that changed since
  the model last saw it, by anything but its own Edit and Write, is flagged in the same turn with the
  diff (``additionalContext``), and so is Claude Code's "unchanged since last read" when the file did
  change. Then a note of the state view's news, if any.
- ``PostToolUseFailure``: a call that failed (a command's non-zero exit): recorded; Claude Code lets
  no hook replace this output, so it goes as it is, and a NUDGE goes as context.
- ``Stop``: the end of the model's turn is its submission: ``verify-before-submit`` blocks it, with
  the reason, when files changed since the last test or script run (once: the next stop goes through).
- ``PreCompact`` and the transcript (a compaction boundary, a rewind to an earlier entry, a new
  session after ``/clear``): the outputs shown before are gone from the model's context, and no later
  answer refers to them.

Calls of a subagent (``agent_id`` in the payload) are recorded and shown as they are: their outputs
are the subagent's, never referred to for the main model. What the model got is checked against the
transcript once Claude Code has written it: a text the ledger did not foresee is never the source of
a reference (a fault says so). Any fault of ours lets the call go on with its own output.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any

from ledger_adapters.claude.tools import (
    EDITS,
    READS,
    SEARCHES,
    SHELL,
    ToolCall,
    edit_text,
    failure,
    read_content,
    read_text,
    search_text,
    shell_output,
    tool_call,
    unchanged_stub,
)
from ledger_adapters.claude.transcript import TranscriptReader, reader_for
from ledger_runtime import (
    ExecResult,
    LedgerRuntime,
    Plan,
    SeenFiles,
    Truncation,
    Verdict,
    VerdictKind,
    ViewNotes,
    analyze_submission,
    shown_path,
)

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact", "Stop")
TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
DEFAULT_NOTE_CHARS = 600
# Claude Code keeps a Bash output of up to 30,000 characters in the conversation; a longer one is
# saved to a file and the model reads a preview of it (its first 2 KB, cut at a line): the ledger
# counts none of such an output as seen, and never answers it with references
CLAUDE_TRUNCATION = Truncation(30_000, 0, 0, exact=False)
FORESEEN = ("Edit", "Write")  # the tools whose result the ledger words exactly as Claude Code does
STOP_LABEL = "(end of turn)"
STOP_REFUSED = "Your turn goes on: ending it again with nothing changed ends it."
UNCHECKED_AFTER_S = 600.0  # a text never found in the transcript is given up on after this long


def answer(event: str, **fields: Any) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, **fields}}


def context(event: str, notes: list[str]) -> dict[str, Any] | None:
    notes = [n for n in notes if n]
    return answer(event, additionalContext="\n\n".join(notes)) if notes else None


@dataclass
class _Pending:
    plan: Plan
    started: float
    call: ToolCall
    asked: bool = False  # the user was asked to let a REVISE'd call run


@dataclass
class ClaudeHooks:
    runtime: LedgerRuntime
    note_chars: int = DEFAULT_NOTE_CHARS
    # the run's secret, for command hooks (an HTTP hook's is checked by its server); None: not checked
    token: str | None = None
    # where Claude Code keeps this user's transcripts: a transcript_path elsewhere is not read
    projects_dir: str | None = None
    interactive: bool = False  # a person answers permission prompts: a REVISE asks them
    pending: dict[str, _Pending] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)  # calls not governed before they ran
    # attempt -> (its call, the text the model got, since when): each record checked, a second one for
    # the same call never takes the place of the first's check
    to_check: dict[int, tuple[str, str, float]] = field(default_factory=dict)
    recorded: dict[str, int] = field(default_factory=dict)  # call -> the attempt its one record is
    first_heard: dict[str, int] = field(default_factory=dict)  # call -> in which order the hooks heard of it
    files: SeenFiles | None = None  # what the model last saw of each file in full
    notes: ViewNotes | None = None
    readers: dict[str, TranscriptReader] = field(default_factory=dict)
    transcript: str | None = None  # the conversation's transcript (its newest)
    transcripts: dict[str, str] = field(default_factory=dict)  # session id -> transcript path
    compactions: int = 0  # compactions of the current transcript taken into account
    branches: int = 0  # rewinds of the current transcript taken into account
    # where a run leaves the conversation its ledger's outputs were shown in (its transcript, compactions and
    # rewinds) for the next run in the run directory (``--resume``); None: not kept
    conversation_file: str | None = None
    # what the previous run left there, when the ledger goes on from one (None: nothing, or a new ledger)
    previous: dict[str, Any] | None = None
    goes_on: bool = False  # the ledger holds steps of an earlier run: its conversation must be this one
    unknown: bool = False  # an event named no transcript before one did: forgotten, as another conversation
    subagent: bool = False  # the event handled is a subagent's: what it answers reaches the subagent only

    def __post_init__(self) -> None:
        self.files = self.files or SeenFiles(self.runtime, EDITS)
        if self.notes is None:  # what the notes told the model: the runtime's, a fold of its ledger
            self.notes = self.runtime.told
            self.notes.limit_chars = self.note_chars
        self.goes_on = self.runtime.state.step > 0
        if self.conversation_file is not None:
            from ledger_runtime import taken_conversation

            self.previous = taken_conversation(self.conversation_file, self.runtime.state.step)

    # -- dispatch --------------------------------------------------------------------------------

    def authorize(self, event: str, token: str | None, call: str | None) -> bool:
        """A command hook's call carries the run's secret (from the owner-only hook script)."""
        if self.token is None:
            return True
        return token is not None and secrets.compare_digest(self.token, token)

    def handle(self, event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        self.subagent = bool(payload.get("agent_id"))
        self._follow(payload)
        if event == "PreToolUse":
            return self.pre_tool_use(payload)
        if event == "PostToolUse":
            return self.post_tool_use(payload)
        if event == "PostToolUseFailure":
            return self.post_tool_use_failure(payload)
        if event == "SessionStart":
            return self.session_start(payload)
        if event == "UserPromptSubmit":
            return self.user_prompt_submit(payload)
        if event == "PreCompact":
            self._forget()
            return None
        if event == "Stop":
            return self.stop(payload)
        if event in ("SubagentStop", "SessionEnd", "Notification"):
            return None
        raise ValueError(f"unknown hook event {event!r}")

    # -- the transcript: what the model got, and what it no longer holds ---------------------------

    def _transcript_path(self, path: Any) -> str | None:
        """``path`` when it may be read as this user's transcript: absolute, under the projects directory."""
        if not isinstance(path, str) or not os.path.isabs(path) or not path.endswith(".jsonl") or "\0" in path:
            return None
        if self.projects_dir is not None:
            real, root = os.path.realpath(path), os.path.realpath(self.projects_dir)
            if not real.startswith(root + os.sep):
                return None
        return path

    def _follow(self, payload: dict[str, Any]) -> None:
        """Before each event: the transcript it names (a new one after /clear is a new conversation),
        its compactions and rewinds, and the checks of what the model got."""
        if payload.get("agent_id"):
            return  # a subagent's event names the main transcript too: nothing new about the conversation
        path = self._transcript_path(payload.get("transcript_path"))
        if path is None and self.transcript is None and self.goes_on and not self.unknown:
            self.unknown = True  # a run on an earlier ledger, in a conversation it cannot name: one that holds nothing
            self._forget()
        if path is not None and path != self.transcript:
            session = payload.get("session_id")
            if isinstance(session, str):
                self.transcripts[session] = path
            first = self.transcript is None
            if not first:
                self._forget()  # another conversation: the model holds nothing the ledger showed it
            self.transcript = path
            reader = reader_for(self.readers, path)
            self.compactions, self.branches = (reader.compactions, reader.branches) if reader else (0, 0)
            if first and self.goes_on and not self.unknown:  # on an earlier run's ledger: resumed, or another one
                left = self.previous or {}
                if left.get("transcript") == path and reader is not None:
                    self.compactions, self.branches = left.get("compactions", 0), left.get("branches", 0)
                else:
                    self._forget()  # not the conversation the earlier run left (or it never said): it holds nothing
        reader = reader_for(self.readers, self.transcript)
        if reader is None:
            return
        if reader.compactions > self.compactions or reader.branches > self.branches:
            self.compactions, self.branches = reader.compactions, reader.branches
            self._forget()
        self._heard(payload.get("tool_use_id"))
        self._check(reader, payload.get("tool_use_id"))

    def _forget(self) -> None:
        """The model's context lost what it was shown (a compaction, a rewind, a new conversation)."""
        self.runtime.forget_context()  # its event resets the notes (the whole view next)
        self.files.forget()

    def _check(self, reader: TranscriptReader, current: Any = None) -> None:
        """Before each event: what the transcript says the model got for each call the ledger recorded
        must be the text the ledger recorded, for a call the model made with that command; else the
        record is never the source of a reference. Claude Code writes its entries in order but late,
        so a record whose call the transcript does not name is given up on once it names a call the
        hooks heard of later, and at once when it came while the ``current`` call (this event's) ran:
        a call made with this one is named with it, and a record that is not the model's must never
        be the source of this call's answer (a parallel call's record may be lost so: savings, never truth)."""
        now = time.monotonic()
        latest = max((self.first_heard[c] for c in reader.calls if c in self.first_heard), default=0)
        during = self.first_heard.get(current, latest + 1) if isinstance(current, str) else latest + 1
        for attempt, (call, text, since) in list(self.to_check.items()):
            why = self._unconfirmed(reader, call, text)
            if why is None and call not in reader.calls and call != current:
                heard = self.first_heard.get(call, 0)
                if heard < latest:
                    why = "the transcript names later calls but not this one"
                elif heard > during:
                    why = "recorded while another call ran, and the transcript does not name it"
            if why is None and reader.results.get(call) is None:
                if now - since <= UNCHECKED_AFTER_S:
                    continue
                why = "no result in the transcript to check it against"
            del self.to_check[attempt]
            if why is not None:
                self.distrust(attempt, call, why)

    def _unconfirmed(self, reader: TranscriptReader, call: str, text: str) -> str | None:
        """Why the transcript says the record of ``call`` is not what the model got (None: it does not,
        or not yet)."""
        got = reader.results.get(call)
        if got is not None and not same_text(got.text, text):
            return "the transcript's result is not the text recorded for it"
        made = reader.calls.get(call)
        a = self.runtime.state.attempt(self.recorded.get(call, -1))
        command = made[1].get("command") if made and made[0] == SHELL and isinstance(made[1], dict) else None
        if (
            a is not None
            and isinstance(command, str)
            and command not in (a.command, self.runtime.redactor.mask(a.command))
        ):
            return "the transcript names it with another command"
        return None

    def distrust(self, attempt: int, call: str, why: str) -> None:
        """The record ``attempt`` of ``call`` is not what the model got: never a source (a fault says
        which attempt and why; inspect shows the step so)."""
        self.runtime.distrust(attempt, f"attempt {attempt}: call {call}: {why}")

    def _heard(self, call_id: Any) -> None:
        if isinstance(call_id, str) and call_id not in self.first_heard:
            self.first_heard[call_id] = len(self.first_heard) + 1

    # -- inform ----------------------------------------------------------------------------------

    def _view_note(self) -> str:
        """A note of the state view's news (each sent once: Claude Code keeps it in its history); none in a
        subagent's call: the notes are the main model's, told once, and the subagent's context is not its."""
        return "" if self.subagent else self.runtime.view_note(self.notes)

    def session_start(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        if payload.get("source") in ("compact", "clear") and self.notes.notes:
            self._forget()  # PreCompact did so unless the hook missed it
        self._turn_starts()
        return context("SessionStart", [self._view_note()])

    def user_prompt_submit(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        prompt = payload.get("prompt")
        if isinstance(prompt, str):
            self.runtime.set_task(prompt)
        self._turn_starts()  # the user may have changed files since the last command
        return context("UserPromptSubmit", [self._view_note()])

    def _turn_starts(self) -> None:
        """The model's turn starts: what changed since the last scan is news, made between commands; but not while a
        call is under way (its PreToolUse seen, no result yet, here or in the transcript): what it wrote is its own,
        and the scan after it finds that."""
        if not self._under_way():
            self.runtime.prescan(before_command=False)

    def _under_way(self) -> bool:
        running = [c for c, p in self.pending.items() if not p.asked]
        if not running:
            return False
        reader = reader_for(self.readers, self.transcript)
        ended = reader.results if reader is not None else {}
        return any(c not in ended for c in running)

    # -- govern ----------------------------------------------------------------------------------

    def _call(self, payload: dict[str, Any]) -> ToolCall | None:
        cwd = payload.get("cwd")
        cwd = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else self.runtime.workdir
        return tool_call(payload.get("tool_name"), payload.get("tool_input"), cwd, self.runtime.workdir)

    def _plan(self, call: ToolCall, payload: dict[str, Any]) -> Plan | None:
        agent = payload.get("agent_id")
        agent = agent if isinstance(agent, str) else ""  # the subagent that made the call ("": the main model)
        plan = self.runtime.propose(call.label, cwd=call.analysis.cwd, analysis=call.analysis, agent=agent)
        if plan is None:
            return None
        plan.held = not payload.get("agent_id")  # a subagent's output is the subagent's
        return plan

    def pre_tool_use(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        call_id = payload.get("tool_use_id")
        self._heard(call_id)
        call = self._call(payload) if isinstance(call_id, str) else None
        if call is None:
            return None
        if call.tool in READS or call.tool in SEARCHES:  # no rule for a read: recorded once it ran
            self.started[call_id] = time.perf_counter()
            return None
        plan = self._plan(call, payload)
        if plan is None:
            return None
        pending = _Pending(plan, time.perf_counter(), call)
        if plan.applied and plan.verdict.kind in (VerdictKind.REVISE, VerdictKind.BLOCK):
            if self.interactive and plan.verdict.kind is VerdictKind.REVISE:
                pending.asked = True  # the user decides; PostToolUse says they let it run
                self.pending[call_id] = pending
                return answer("PreToolUse", permissionDecision="ask", permissionDecisionReason=refusal(plan.verdict))
            res = self.runtime.answer(plan)
            if res is not None:
                return answer("PreToolUse", permissionDecision="deny", permissionDecisionReason=res.output)
        self.pending[call_id] = pending
        return None

    def stop(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        """The model ends its turn: its submission. Blocked, with the reason, by a rule against it."""
        plan = self.runtime.propose(STOP_LABEL, analysis=analyze_submission(STOP_LABEL, self.runtime.workdir))
        if plan is None or not plan.applied or plan.verdict.kind not in (VerdictKind.REVISE, VerdictKind.BLOCK):
            return None
        res = self.runtime.answer(plan, refused=STOP_REFUSED)
        return {"decision": "block", "reason": res.output} if res is not None else None

    # -- record ----------------------------------------------------------------------------------

    def _take(self, call_id: Any, payload: dict[str, Any]) -> _Pending | None:
        """The call's plan from PreToolUse, or one made now (no PreToolUse was seen for it, or it was a
        read). A call is recorded once: a second PostToolUse for it is not recorded, and its first
        record is never a source either (two claims for one call: at least one is not Claude Code's).
        A governed call (a command, an edit) recorded without its PreToolUse is never a source."""
        self._heard(call_id)
        if isinstance(call_id, str) and call_id in self.recorded:
            self.to_check = {a: c for a, c in self.to_check.items() if c[0] != call_id}
            self.distrust(self.recorded[call_id], call_id, "a second PostToolUse for it (not recorded)")
            return None
        pending = self.pending.pop(call_id, None) if isinstance(call_id, str) else None
        if pending is not None:
            return pending
        call = self._call(payload)
        plan = self._plan(call, payload) if call is not None else None
        if plan is None or call is None:
            return None
        if call.tool == SHELL or call.tool in EDITS:
            plan.held = False  # its PreToolUse never came: not a call the ledger saw start
        started = self.started.pop(call_id, None) if isinstance(call_id, str) else None
        return _Pending(plan, started if started is not None else time.perf_counter(), call)

    def post_tool_use(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        call_id = payload.get("tool_use_id")
        pending = self._take(call_id, payload)
        if pending is None:
            return None
        if pending.asked:  # the user let a REVISE'd call run
            pending.plan.let_run()
        tool, response = pending.call.tool, payload.get("tool_response")
        if tool == SHELL:
            return self._shell(call_id, pending, response)
        if tool in READS:
            return self._read(call_id, pending, response, payload)
        if tool in EDITS:
            text = edit_text(tool, response, pending.call.path or "")
            run = self._record(call_id, pending, ExecResult(text, 0), shown_raw=True, foreseen=tool in FORESEEN)
            if run.attempt_id is not None and pending.plan.held:  # Claude Code tells the model it holds the file
                self.files.saw_now(pending.call.path)  # (a subagent's edit: the subagent, not the main model)
            return context("PostToolUse", [run.note or "", self._view_note()])
        self._record(call_id, pending, ExecResult(search_text(response), 0), shown_raw=True, foreseen=False)
        return context("PostToolUse", [self._view_note()])

    def _record(
        self,
        call_id: Any,
        pending: _Pending,
        res: ExecResult,
        *,
        shown_raw: bool,
        foreseen: bool = True,
        expect: Any = None,
    ) -> Any:
        """Record the call. The text the model got (``expect``, else the answer) is checked against the
        transcript later; a text the ledger does not foresee exactly (``foreseen`` False: a search's,
        an image's, a tool's whose wording it does not know) is recorded, never referred to."""
        if not foreseen:
            pending.plan.held = False
        run = self.runtime.record(
            pending.plan,
            res,
            time.perf_counter() - pending.started,
            truncation=CLAUDE_TRUNCATION,
            shown_raw=shown_raw,
        )
        if run.attempt_id is not None and isinstance(call_id, str):
            self.recorded[call_id] = run.attempt_id
        if (
            run.attempt_id is not None
            and isinstance(call_id, str)
            and pending.plan.held
            and self.transcript is not None
            and os.path.isfile(self.transcript)  # none with --no-session-persistence: nothing to check against
        ):
            text = expect if isinstance(expect, str) else run.output
            self.to_check[run.attempt_id] = (call_id, text, time.monotonic())
        return run

    def _shell(self, call_id: Any, pending: _Pending, response: Any) -> dict[str, Any] | None:
        found = shell_output(response)
        if found is None:
            return None
        output, plain = found
        replaceable = plain and pending.plan.held and pending.plan.applied
        interrupted = isinstance(response, dict) and response.get("interrupted") is True
        running = isinstance(response, dict) and bool(response.get("backgroundTaskId"))
        code = None if interrupted or running or not plain else 0
        res = ExecResult(output, code, output_complete=code is not None)
        run = self._record(call_id, pending, res, shown_raw=not replaceable)
        fields: dict[str, Any] = {}
        if replaceable and run.attempt_id is not None and run.output != output:
            fields["updatedToolOutput"] = {**response, "stdout": run.output}
        elif not replaceable and (run.note or pending.plan.subagents_nudge()):
            fields["additionalContext"] = run.note or pending.plan.subagents_nudge()
        view = self._view_note()
        if view:
            fields["additionalContext"] = "\n\n".join(x for x in (fields.get("additionalContext"), view) if x)
        return answer("PostToolUse", **fields) if fields else None

    def _read(self, call_id: Any, pending: _Pending, response: Any, payload: dict[str, Any]) -> dict[str, Any] | None:
        path = pending.call.path or ""
        flag = ""
        if pending.plan.held:
            now = read_content(response)
            stub = "Claude Code" if unchanged_stub(response) else None
            flag = self.files.changed(path, pending.plan.step, now[0] if now and now[1] else None, stub=stub)
        text = read_text(response)
        if text is None:  # an image, a notebook, a PDF, or Claude Code's stub: no lines of a file to check
            kind = response.get("type") if isinstance(response, dict) else None
            text = f"({kind or 'no text'}: {shown_path(path, self.runtime.workdir)})"
            pending.plan = replace(pending.plan, analysis=replace(pending.plan.analysis, views=(), pure=False))
            run = self._record(call_id, pending, ExecResult(text, 0), shown_raw=True, foreseen=False)
        else:
            run = self._record(call_id, pending, ExecResult(text, 0), shown_raw=True)
        found = read_content(response)
        if found is not None and found[1] and pending.plan.held and run.attempt_id is not None:
            self.files.saw(path, pending.plan.step, found[0])
        return context("PostToolUse", [flag, self._view_note()])

    def post_tool_use_failure(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        call_id = payload.get("tool_use_id")
        pending = self._take(call_id, payload)
        if pending is None:
            return None
        if pending.asked:  # the user did not let the REVISE'd call run
            self.runtime.answer(pending.plan)
            return None
        error = payload.get("error")
        output, code = failure(error)
        if payload.get("is_interrupt") is True:
            code = None
        res = ExecResult(output, code, output_complete=code is not None)
        shell = pending.call.tool == SHELL
        run = self._record(call_id, pending, res, shown_raw=True, foreseen=shell, expect=error if shell else None)
        notes = []
        plan = pending.plan
        if pending.call.tool == SHELL and plan.applied and plan.verdict.kind is VerdictKind.NUDGE:
            notes.append(f"[ledger] NUDGE: {plan.verdict.reason}." if plan.held else plan.subagents_nudge())
        elif pending.call.tool == SHELL and run.note and plan.held:
            notes.append(run.note)
        notes.append(self._view_note())
        return context("PostToolUseFailure", notes)

    def finish(self) -> None:
        """At the end of the run: the calls whose result never came are recorded as such, the texts
        the transcript now has are checked, and the conversation is left for a run that resumes it."""
        reader = reader_for(self.readers, self.transcript)
        if reader is not None:
            self._follow({"transcript_path": self.transcript})  # a compaction or a rewind at the very end
        if reader is not None:
            self._check(reader)
            for attempt, (call, _, _) in list(self.to_check.items()):  # the transcript is whole now
                if reader.results.get(call) is None:
                    self.distrust(attempt, call, "the transcript never gave it a result")
            self.to_check.clear()
        for call_id, pending in list(self.pending.items()):
            if pending.asked:  # the user did not let it run
                self.runtime.answer(pending.plan)
            else:
                self.runtime.record(
                    pending.plan,
                    ExecResult("", None, "no result: the call ended without a PostToolUse hook", output_complete=False),
                    time.perf_counter() - pending.started,
                    shown_raw=True,
                )
            del self.pending[call_id]
        if reader is not None and self.conversation_file is not None:  # last: with the step the ledger ends at
            from ledger_runtime import leave_conversation

            step = self.runtime.state.step
            try:
                leave_conversation(self.conversation_file, self.transcript, self.compactions, self.branches, step)
            except OSError as e:
                self.runtime.report_fault("leaving the conversation for a resumed run", e)


def refusal(v: Verdict) -> str:
    """A REVISE's reason as a permission prompt shows it."""
    by = f" by policy {v.rule}" if v.rule else ""
    return f"[ledger] {v.kind.value}{by}: {v.reason}."


def same_text(got: str, recorded: str) -> bool:
    """Whether the model got the recorded text: Claude Code trims the blank lines around a command's
    output, and may add a line of its own (a hint, "(Bash completed with no output)")."""
    want = recorded.strip("\n").rstrip()
    return not want or want in got
