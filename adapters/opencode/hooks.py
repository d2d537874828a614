"""OpenCode's plugin hooks, answered from the ledger. The run's plugin (plugin.js) POSTs each event to
the HTTP hook server of the ``ledger-run`` that started OpenCode; ``OpenCodeHooks.handle(event,
payload)`` returns the answer ({} : the call goes on as OpenCode makes it). Facts about the plugin API,
checked against the real ``opencode`` 1.18.33: docs/opencode.md.

- ``ToolBefore`` (``tool.execute.before``): govern. REVISE and BLOCK refuse the call: the plugin throws
  the refusal, and the model reads it as the call's error. A call that is to run is not changed (its
  arguments as the model wrote them: OpenCode's own permission check, inside the tool, sees them).
- ``ToolAfter`` (``tool.execute.after``): records the call. A command's output comes back as the
  ledger's answer (the plugin sets ``output``, which is what the model reads); a read of a file that
  changed since the model saw it, by anything but its own edits, is flagged with the diff after the
  read; then a note of the state view's news after the result.
- ``Prompt`` (``chat.message``): names the task (the first prompt).
- ``Event`` (bus events): ``session.created`` with a parent is a subagent's session, whose calls are
  recorded and shown as they are; ``session.compacted``: the outputs shown before are gone from the
  model's context, no later answer refers to them (so too when OpenCode's prune clears a recorded call's
  output, ``time.compacted``: read from its database before each call is answered as well, since the bus event
  may come after the next call); a tool part in ``error`` is a call that failed
  before ``tool.execute.after`` (refused by OpenCode's permissions, a tool's error); ``session.idle``
  ends a turn, the model's submission: in an interactive session ``verify-before-submit`` answers with
  its reason as the next prompt (OpenCode has no hook that holds a turn back).

What OpenCode's database says the model got for each call is checked against what the ledger recorded;
a record it does not bear out is never the source of a reference. Any fault of ours lets the call go on.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger_adapters.opencode.session import CALL_WAIT_S, PartRows, tool_parts
from ledger_adapters.opencode.tools import (
    EDITS,
    NO_OUTPUT,
    READ,
    SEARCHES,
    SHELL,
    ToolCall,
    read_whole,
    shell_output,
    tool_call,
)
from ledger_runtime import (
    ExecResult,
    LedgerRuntime,
    Plan,
    SeenFiles,
    Truncation,
    VerdictKind,
    ViewNotes,
    analyze_submission,
    file_text,
)

# OpenCode cuts a long command output (its first 2,000 lines or 50 KB, the whole saved to a file): the
# ledger counts none of such an output as seen, and never answers it with references
OPENCODE_TRUNCATION = Truncation(51_200, 0, 0, exact=False)
STOP_LABEL = "(end of turn)"
STOP_REFUSED = "Your turn goes on: ending it again with nothing changed ends it."
UNCHECKED_AFTER_S = 600.0  # a record OpenCode's database never names is given up on after this long


@dataclass
class _Pending:
    plan: Plan
    started: float
    call: ToolCall
    session: Any = None  # the session that made the call


@dataclass
class OpenCodeHooks:
    runtime: LedgerRuntime
    db: Path | None = None  # OpenCode's database, to check what the model got (None: not checked)
    note_chars: int = 600
    pending: dict[str, _Pending] = field(default_factory=dict)  # call id -> its plan, between before and after
    recorded: dict[str, int] = field(default_factory=dict)  # call id -> the attempt its one record is
    to_check: dict[int, tuple[str, str, float]] = field(default_factory=dict)  # attempt -> (call, text, since)
    sessions: list[str] = field(default_factory=list)  # the sessions of the run, the main one first
    subagents: set[str] = field(default_factory=set)  # sessions a subagent runs in
    conversation: str | None = None  # the main session the outputs the model holds were shown in
    files: SeenFiles | None = None
    notes: ViewNotes | None = None
    cleared: int = 0  # the last attempt recorded when an output was cleared (OpenCode's prune)
    unread: bool = False  # a read of OpenCode's database failed, and a fault said so (once)
    parts: PartRows = field(default_factory=PartRows)  # where the calls' parts are in OpenCode's database

    def __post_init__(self) -> None:
        self.files = self.files or SeenFiles(self.runtime, EDITS)
        if self.notes is None:
            self.notes = self.runtime.told
            self.notes.limit_chars = self.note_chars

    def handle(self, event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        self._session(payload.get("sessionID"))
        if event in ("ToolBefore", "ToolAfter"):
            self._conversation(payload.get("sessionID"))
        if event == "ToolBefore":
            return self.before(payload)
        if event == "ToolAfter":
            self._check()
            self._pruned()
            return self.after(payload)
        if event == "Prompt":
            if isinstance(payload.get("prompt"), str) and not self._subagent(payload.get("sessionID")):
                self.runtime.set_task(payload["prompt"])
            return None
        if event == "Event":
            return self.bus(payload)
        raise ValueError(f"unknown hook event {event!r}")

    def _subagent(self, sid: Any) -> bool:
        """Whether ``sid`` names a subagent's session (a session id is text: anything else names none)."""
        return isinstance(sid, str) and sid in self.subagents

    def _conversation(self, sid: Any) -> None:
        """A call of a main session other than the last (the TUI's ``/new``, another session picked): that
        session holds none of the outputs shown in the other, and no answer refers to them."""
        if not isinstance(sid, str) or self._subagent(sid) or sid == self.conversation:
            return
        if self.conversation is not None:
            self.runtime.forget_context()  # its event resets the notes (the whole view next)
            self.files.forget()
        self.conversation = sid

    def _session(self, sid: Any) -> None:
        if isinstance(sid, str) and sid not in self.sessions:
            self.sessions.append(sid)

    # -- govern ----------------------------------------------------------------------------------

    def _call(self, payload: dict[str, Any]) -> ToolCall | None:
        cwd = payload.get("directory") if isinstance(payload.get("directory"), str) else self.runtime.workdir
        return tool_call(payload.get("tool"), payload.get("args"), cwd, self.runtime.workdir)

    def before(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        call_id, call = payload.get("callID"), self._call(payload)
        if not isinstance(call_id, str) or call is None or call_id in self.pending or call_id in self.recorded:
            return None
        sid = payload.get("sessionID")
        agent = sid if self._subagent(sid) else ""  # the subagent that made the call ("": the main model)
        plan = self.runtime.propose(call.label, cwd=call.analysis.cwd, analysis=call.analysis, agent=agent)
        if plan is None:
            return None
        plan.held = not agent  # a subagent's output is the subagent's
        if plan.applied and plan.verdict.kind in (VerdictKind.REVISE, VerdictKind.BLOCK):
            res = self.runtime.answer(plan)
            if res is not None:
                return {"deny": res.output}
        self.pending[call_id] = _Pending(plan, time.perf_counter(), call, payload.get("sessionID"))
        return None

    # -- record ----------------------------------------------------------------------------------

    def _take(self, call_id: Any, payload: dict[str, Any]) -> _Pending | None:
        """The call's plan from ToolBefore. A call is recorded once: a second ToolAfter for it is not
        recorded, and its first record is never a source either (two claims for one call); one whose
        ToolBefore never came is recorded, never a source."""
        if not isinstance(call_id, str):
            return None
        if call_id in self.recorded:
            self.to_check.pop(self.recorded[call_id], None)
            self.runtime.distrust(self.recorded[call_id], f"call {call_id}: a second ToolAfter for it (not recorded)")
            return None
        pending = self.pending.pop(call_id, None)
        if pending is not None:
            return pending
        call, sid = self._call(payload), payload.get("sessionID")
        agent = sid if self._subagent(sid) else ""  # a subagent's call: its runs are not the main model's repeats
        plan = (
            self.runtime.propose(call.label, cwd=call.analysis.cwd, analysis=call.analysis, agent=agent)
            if call
            else None
        )
        if plan is None or call is None:
            return None
        plan.held = False  # not a call the ledger saw start
        return _Pending(plan, time.perf_counter(), call, payload.get("sessionID"))

    def _record(self, call_id: str, pending: _Pending, res: ExecResult, *, shown_raw: bool = True) -> Any:
        run = self.runtime.record(
            pending.plan,
            res,
            time.perf_counter() - pending.started,
            truncation=OPENCODE_TRUNCATION,
            shown_raw=shown_raw,
        )
        if run.attempt_id is not None:
            self.recorded[call_id] = run.attempt_id
        return run

    def _expect(self, run: Any, call_id: str, text: str) -> None:
        """What the model got for the call (``text``), checked against OpenCode's database later."""
        if run.attempt_id is not None and self.db is not None and run.verdict.kind.executes:
            self.to_check[run.attempt_id] = (call_id, text, time.monotonic())

    def after(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        call_id = payload.get("callID")
        pending = self._take(call_id, payload)
        if pending is None:
            return None
        output, metadata, tool = payload.get("output"), payload.get("metadata"), pending.call.tool
        if tool == SHELL:
            return self._shell(call_id, pending, output, metadata)
        text = output if isinstance(output, str) else ""
        flag = ""
        whole = read_whole(metadata) if tool == READ else None
        if whole is not None and pending.plan.held:
            current = file_text(pending.call.path or "")
            whole = current if current is not None and current.splitlines() == whole.split("\n") else None
            flag = self.files.changed(pending.call.path or "", pending.plan.step, whole)
        if tool in SEARCHES or (tool == READ and "<content>" not in text):
            pending.plan.held = False  # the tool's own format, or no lines of a file: never referred to
        run = self._record(call_id, pending, ExecResult(text, 0))
        if whole is not None and pending.plan.held and run.attempt_id is not None:
            self.files.saw(pending.call.path or "", pending.plan.step, whole)
        if tool in EDITS and run.attempt_id is not None and pending.plan.held:
            self.files.saw_now(pending.call.path)  # OpenCode told it the edit was made (a subagent's: the subagent)
        shown = self._with_notes(text, [flag, self._view_note(pending)])
        self._expect(run, call_id, shown)
        return {"output": shown} if shown != text else None

    def _shell(self, call_id: str, pending: _Pending, output: Any, metadata: Any) -> dict[str, Any] | None:
        found = shell_output(output, metadata)
        if found is None:  # no output text: the call ran all the same, and is recorded so (never a source)
            pending.plan.held = False
            no_text = ExecResult(
                "", None, "no result: tool.execute.after carried no output text", output_complete=False
            )
            self._record(call_id, pending, no_text)
            return None
        text, code, whole = found
        replaceable = whole and pending.plan.held and pending.plan.applied
        res = ExecResult(text, code, output_complete=whole)
        run = self._record(call_id, pending, res, shown_raw=not replaceable)
        answer = run.output if replaceable and run.attempt_id is not None else text
        note = (run.note or pending.plan.subagents_nudge()) if not replaceable else ""
        shown = self._with_notes(answer or NO_OUTPUT, [note, self._view_note(pending)])
        self._expect(run, call_id, shown)
        return {"output": shown} if shown != output else None

    def _with_notes(self, text: str, notes: list[str]) -> str:
        notes = [n for n in notes if n]
        return text + "".join("\n\n" + n for n in notes)

    def _view_note(self, pending: _Pending) -> str:
        """The note of the state view's news after a call; none after a subagent's: the notes are the main
        model's, told once, and the subagent's context is not its."""
        return "" if self._subagent(pending.session) else self.runtime.view_note(self.notes)

    # -- the bus ---------------------------------------------------------------------------------

    def bus(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        kind, props = payload.get("type"), payload.get("properties")
        props = props if isinstance(props, dict) else {}
        if kind == "session.created":
            info = props.get("info") if isinstance(props.get("info"), dict) else {}
            if isinstance(info.get("id"), str) and info.get("parentID"):
                self.subagents.add(info["id"])
            self._session(info.get("id"))
        elif kind == "session.compacted" and not self._subagent(props.get("sessionID")):
            self.runtime.forget_context()  # its event resets the notes (the whole view next)
            self.files.forget()
        elif kind == "message.part.updated":
            if not self._cleared(props.get("part")):
                self._failed(props.get("part"))
        elif kind == "session.idle" and not self._subagent(props.get("sessionID")):
            return self._stop(payload.get("interactive") is True)
        return None

    def _cleared(self, part: Any) -> bool:
        """Whether ``part`` is a call whose output OpenCode cleared from what it sends the model (its prune,
        ``"compaction": {"prune": true}``: "[Old tool result content cleared]"), which no session.compacted
        tells: the outputs shown before may be gone from the model's context, as after a compaction (no later
        answer refers to them, the next note is the whole view), once per prune of calls the ledger recorded."""
        state = part.get("state") if isinstance(part, dict) and isinstance(part.get("state"), dict) else {}
        times = state.get("time") if isinstance(state.get("time"), dict) else {}
        if state.get("status") != "completed" or not times.get("compacted"):
            return False
        call = part.get("callID") if isinstance(part.get("callID"), str) else None  # a call id is text
        if not self._subagent(part.get("sessionID")):
            self._forget_cleared(call)
        return True

    def _pruned(self) -> None:
        """The outputs OpenCode's database says its prune cleared in the main session, read before a call is answered:
        the bus event that tells it may reach the ledger after the next call, whose answer could then refer to an
        output the model no longer holds."""
        if self.db is None or self.conversation is None:
            return
        try:
            since = [
                call for call, attempt in self.recorded.items() if attempt > self.cleared
            ]  # an older call cleared forgets nothing
            calls = self.parts.cleared(self.db, self.conversation, since)
        except sqlite3.Error as e:
            self._unreadable(e)
            return
        for call in calls:
            self._forget_cleared(call)

    def _unreadable(self, error: sqlite3.Error) -> None:
        """OpenCode's database could not be read (locked by another program, not there, another version's layout): the
        call goes on, the bus event alone tells a cleared output, and one line says so."""
        if not self.unread:
            self.unread = True
            where = "could not read OpenCode's database (a cleared output is known by its bus event alone)"
            self.runtime.report_fault(where, error)

    def _forget_cleared(self, call: str | None) -> None:
        """A recorded call's output cleared: no later answer refers to the outputs shown so far, once per prune."""
        if call in self.recorded and self.recorded[call] > self.cleared:
            self.cleared = max(self.recorded.values())
            self.runtime.forget_context()  # its event resets the notes (the whole view next)
            self.files.forget()

    def _failed(self, part: Any) -> None:
        """A call that failed before tool.execute.after (OpenCode's permission refused it, its tool
        failed): recorded with its error, exit code 1."""
        if not isinstance(part, dict) or not isinstance(part.get("callID"), str) or part["callID"] not in self.pending:
            return
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        error = state.get("error") if isinstance(state.get("error"), str) else "the call failed"
        pending = self.pending.pop(part["callID"])
        self._record(part["callID"], pending, ExecResult(error, 1))

    def _stop(self, interactive: bool) -> dict[str, Any] | None:
        """The end of a turn, the model's submission: in an interactive session a rule against it is
        answered with the reason as the next prompt (``opencode run`` ends with the turn: not judged)."""
        if not interactive:
            return None
        plan = self.runtime.propose(STOP_LABEL, analysis=analyze_submission(STOP_LABEL, self.runtime.workdir))
        if plan is None or not plan.applied or plan.verdict.kind not in (VerdictKind.REVISE, VerdictKind.BLOCK):
            return None
        res = self.runtime.answer(plan, refused=STOP_REFUSED)
        return {"prompt": res.output} if res is not None else None

    # -- what OpenCode's database says the model got ---------------------------------------------------

    def _check(self, *, final: bool = False) -> None:
        """Each record's text must be what OpenCode's database says the model got for its call; a record
        the database does not name is given up on after a while, and at the end of the run."""
        if not self.to_check or self.db is None:
            return
        now = time.monotonic()
        try:  # a call waits for this read: a lock is not waited on then
            parts = self._parts_waited_on(now, final)
        except sqlite3.Error as e:
            self._unreadable(e)
            if final:  # never a source: what the model got is not known
                for attempt, (call, _, _) in list(self.to_check.items()):
                    self.runtime.distrust(
                        attempt, f"attempt {attempt}: call {call}: OpenCode's database could not be read"
                    )
                self.to_check.clear()
            return
        for attempt, (call, text, since) in list(self.to_check.items()):
            part = parts.get(call)
            state = part.get("state") if part and isinstance(part.get("state"), dict) else {}
            why = None
            if state.get("status") == "completed":
                got = state.get("output") if isinstance(state.get("output"), str) else ""
                why = None if got == text else "OpenCode's database has another text for it"
            elif part is None and (final or now - since > UNCHECKED_AFTER_S):
                why = "OpenCode's database never names it"
            elif not final:
                continue
            del self.to_check[attempt]
            if why is not None:
                self.runtime.distrust(attempt, f"attempt {attempt}: call {call}: {why}")

    def _parts_waited_on(self, now: float, final: bool) -> dict[str, Any]:
        """The parts of the calls waiting to be checked (their rows and the new ones read, never the whole sessions);
        raises sqlite3.Error. Before a record is given up on, the whole sessions are read: a part whose rowid was
        reused (a row deleted, another added) is found there."""
        wait = 2.0 if final else CALL_WAIT_S
        parts = self.parts.tool_parts(self.db, self.sessions, [call for call, _, _ in self.to_check.values()], wait)
        late = [
            c for c, _, since in self.to_check.values() if c not in parts and (final or now - since > UNCHECKED_AFTER_S)
        ]
        if late:
            whole = tool_parts(self.db, self.sessions, wait)
            parts.update({call: whole[call] for call in late if call in whole})
        return parts

    def finish(self) -> None:
        """At the end of the run: the texts OpenCode's database now has are checked, and the calls whose
        result never came are recorded as such."""
        self._check(final=True)
        for call_id, pending in list(self.pending.items()):
            self._record(
                call_id,
                pending,
                ExecResult("", None, "no result: the call ended without tool.execute.after", output_complete=False),
            )
        self.pending.clear()
