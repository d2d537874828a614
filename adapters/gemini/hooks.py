"""Gemini CLI's hooks, answered from the ledger. ``GeminiHooks.handle(event, payload)`` takes one hook
event (the JSON Gemini CLI writes to the hook's stdin) and returns the JSON to answer with, or None (the
call goes on as Gemini CLI would make it). Facts about the protocol, checked against the real ``gemini``
0.61.0: docs/gemini-cli.md.

- ``SessionStart``, ``BeforeAgent`` (which also names the task): a note of the state view's news as
  ``additionalContext``. After ``/clear`` (a new session) the model holds none of the earlier notes or
  outputs: the next note is the whole view.
- ``BeforeTool``: govern. REVISE and BLOCK deny the call with the rule's reason (``ask`` instead for a
  REVISE in an interactive session: the user may let it run); ``write_file`` and ``replace`` go through
  the same policies as a shell edit. A call that is to run is not changed.
- ``AfterTool``: records the call. A command's output comes back as the ledger's answer: Gemini CLI's
  AfterTool cannot replace a result (0.61.0 has no ``tool_output``), but it can ask for a *tail call*
  whose result takes the place of the call's; the hook writes the command's result with the answer in
  place of its output (``Output: ...``, the exit code and the other lines as they were) to a file of the
  run's and asks for ``read_file`` of it, which shows a file as it is. The model reads an ordinary result
  of its command. A read (``read_file``) of a file that changed since the model saw it, by anything but
  its own edits, is flagged in the same turn with the diff. Then a note of the state view's news.
- ``AfterAgent``: the end of the model's turn is its submission: ``verify-before-submit`` denies it,
  with the reason, when files changed since the last test or script run (Gemini CLI sends the reason to
  the model as a new prompt; once: the next end goes through).

Gemini CLI's session file says what the payloads do not: the calls the model made and what it got for
each (written once the calls of a model message ended), and when it compressed or rewound its history
(then no later answer refers to what the model was shown before). The hooks name no call id: a
BeforeTool and its AfterTool are paired by the call's tool and arguments, and so is the session's record
of it. A record the session does not bear out is never the source of a reference (a fault says so).
Any fault of ours lets the call go on with its own output.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger_adapters.gemini.session import SessionReader, reader_for
from ledger_adapters.gemini.tools import (
    EDITS,
    READ,
    SEARCHES,
    SHELL,
    TRUNCATE_CHARS,
    ToolCall,
    cut_as_sent,
    cuts,
    llm_text,
    readable_whole,
    shell_result,
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
    write_private,
)

EVENTS = ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent")
TOOL_EVENTS = ("BeforeTool", "AfterTool")
# Gemini CLI cuts a result longer than 40,000 characters and saves the whole to a file: the ledger
# counts none of such an output as seen, and never answers it with references. It cuts the whole result
# (``Output: `` and the lines after the output too), counted in UTF-16 code units: the output of a result it
# cuts is counted as cut whatever its own length (GEMINI_CUT)
GEMINI_TRUNCATION = Truncation(TRUNCATE_CHARS, 0, 0, exact=False)
GEMINI_CUT = Truncation(1, 0, 0, exact=False)
STOP_LABEL = "(end of turn)"
STOP_REFUSED = "Your turn goes on: ending it again with nothing changed ends it."
ANSWERS = "ledger-answers"  # the directory of the run's answer files, in Gemini CLI's project temp directory


def answer(event: str, **fields: Any) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, **fields}}


def context(event: str, notes: list[str]) -> dict[str, Any] | None:
    notes = [n for n in notes if n]
    return answer(event, additionalContext="\n\n".join(notes)) if notes else None


def same_text(got: str, recorded: str, limit: int | None = TRUNCATE_CHARS) -> bool:
    """Whether the model got the recorded text (Gemini CLI may append a hook's context to it; a command's result
    it ``cuts`` past ``limit`` it cuts to a head and a tail)."""
    if not recorded.strip() or got.startswith(recorded.rstrip("\n")):
        return True
    return cuts(recorded, limit) and cut_as_sent(got, recorded)


@dataclass
class _Pending:
    plan: Plan
    started: float
    call: ToolCall
    seq: int  # in which order the hooks heard of the call (its BeforeTool)
    asked: bool = False  # the user was asked to let a REVISE'd call run


@dataclass
class _Check:
    """A record to check against the session: the call's key, the text the model got, and when."""

    key: str
    text: str
    after_seq: int  # the calls heard before it was recorded
    own_seq: int  # its own call's (0: none)
    batches: int  # model messages with calls the session had recorded whole by then


@dataclass
class _Answer:
    """An answer file the tail read shows the model instead of a command's result."""

    attempt: int
    text: str
    notes: list[str]


@dataclass
class GeminiHooks:
    runtime: LedgerRuntime
    note_chars: int = 600
    token: str | None = None  # the run's secret, carried by every hook call; None: not checked
    sessions_dir: str | None = None  # where the run's session files are: a transcript_path elsewhere is not read
    interactive: bool = False  # a person answers permission prompts: a REVISE asks them
    cut_chars: int | None = TRUNCATE_CHARS  # past this Gemini CLI cuts a command's result (the user's ``cut_limit``)
    pending: dict[str, list[_Pending]] = field(default_factory=dict)  # call key -> calls heard, not yet ended
    heard: int = 0
    to_check: dict[int, _Check] = field(default_factory=dict)
    confirmed: dict[str, int] = field(default_factory=dict)  # call key -> session calls already matched
    last_record: dict[str, int] = field(default_factory=dict)  # call key -> its latest record
    answers: dict[str, _Answer] = field(default_factory=dict)  # answer file -> what it holds
    files: SeenFiles | None = None
    notes: ViewNotes | None = None
    readers: dict[str, SessionReader] = field(default_factory=dict)
    session: str | None = None  # the conversation's session file (its newest)
    sessions: dict[str, str] = field(default_factory=dict)  # session id -> its file
    resets: int = 0

    def __post_init__(self) -> None:
        self.files = self.files or SeenFiles(self.runtime, EDITS)
        if self.notes is None:
            self.notes = self.runtime.told
            self.notes.limit_chars = self.note_chars

    def authorize(self, event: str, token: str | None, call: str | None) -> bool:
        """A hook's call carries the run's secret (from the owner-only hook script)."""
        return self.token is None or (token is not None and secrets.compare_digest(self.token, token))

    def handle(self, event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        self._follow(payload)
        if event == "BeforeTool":
            return self.before_tool(payload)
        if event == "AfterTool":
            return self.after_tool(payload)
        if event == "SessionStart":
            if payload.get("source") == "clear" and self.notes.notes:
                self._forget()
            # the model's turn starts: what changed since is news (and made between commands)
            self.runtime.prescan(before_command=False)
            return context("SessionStart", [self._view_note()])
        if event == "BeforeAgent":
            prompt = payload.get("prompt")
            if isinstance(prompt, str):
                self.runtime.set_task(prompt)
            self.runtime.prescan(before_command=False)  # the user may have changed files since the last command
            return context("BeforeAgent", [self._view_note()])
        if event == "AfterAgent":
            return self.stop()
        if event in ("SessionEnd", "PreCompress", "Notification", "BeforeModel", "AfterModel"):
            return None
        raise ValueError(f"unknown hook event {event!r}")

    # -- the session file: what the model got, and what it no longer holds --------------------------

    def _follow(self, payload: dict[str, Any]) -> None:
        path = payload.get("transcript_path")
        if not isinstance(path, str) or not path.endswith(".jsonl") or not os.path.isabs(path) or "\0" in path:
            return  # not a session file's path (a NUL in it names no file)
        if self.sessions_dir is not None and not os.path.realpath(path).startswith(
            os.path.realpath(self.sessions_dir) + os.sep
        ):
            return
        if path != self.session:
            if isinstance(payload.get("session_id"), str):
                self.sessions[payload["session_id"]] = path
            if self.session is not None:
                self._forget()  # another conversation: the model holds nothing the ledger showed it
            self.session = path
            reader = reader_for(self.readers, path)
            self.resets = reader.resets if reader else 0
        reader = reader_for(self.readers, self.session)
        if reader is not None and reader.resets > self.resets:
            self.resets = reader.resets
            self._forget()

    def _forget(self) -> None:
        """The model's context lost what it was shown (a compression, a rewind, a new conversation)."""
        self.runtime.forget_context()  # its event resets the notes (the whole view next)
        self.files.forget()

    def _check(self, current: int = 0, *, final: bool = False) -> None:
        """What the session says the model got for each call the ledger recorded must be the text the
        ledger recorded, for a call the model made; else the record is never the source of a reference.
        Gemini CLI writes a model message's calls once they all ended, so a record the session does not
        name is given up on once the session records later calls, at once when it came while the
        ``current`` call ran (a call made with it is named with it), and at the end of the run."""
        reader = reader_for(self.readers, self.session)
        calls = reader.calls if reader is not None else []
        batches = reader.batches if reader is not None else 0
        found: dict[str, list[str]] = {}
        for c in calls:
            found.setdefault(c.key, []).append(c.text)
        for attempt, c in sorted(self.to_check.items()):
            texts = found.get(c.key, [])[self.confirmed.get(c.key, 0) :]
            why = None
            if texts:
                self.confirmed[c.key] = self.confirmed.get(c.key, 0) + 1
                why = (
                    None
                    if same_text(texts[0], c.text, self.cut_chars)
                    else "the session's result is not the text recorded for it"
                )
            elif current and c.after_seq >= current and c.own_seq != current:
                why = "recorded while another call ran, and the session does not name it"
            elif batches > c.batches:
                why = "the session names later calls but not this one"
            elif final:
                why = "the session never names it"
            else:
                continue
            del self.to_check[attempt]
            if why is not None:
                self.runtime.distrust(attempt, f"attempt {attempt}: {why}")

    # -- inform ----------------------------------------------------------------------------------

    def _view_note(self) -> str:
        return self.runtime.view_note(self.notes)

    # -- govern ----------------------------------------------------------------------------------

    def _call(self, payload: dict[str, Any]) -> ToolCall | None:
        cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else self.runtime.workdir
        return tool_call(payload.get("tool_name"), payload.get("tool_input"), cwd, self.runtime.workdir)

    def before_tool(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        call = self._call(payload)
        if call is None:
            return None
        self.heard += 1
        plan = self.runtime.propose(call.label, cwd=call.analysis.cwd, analysis=call.analysis)
        if plan is None:
            return None
        pending = _Pending(plan, time.perf_counter(), call, self.heard)
        if plan.applied and plan.verdict.kind in (VerdictKind.REVISE, VerdictKind.BLOCK):
            if self.interactive and plan.verdict.kind is VerdictKind.REVISE:
                pending.asked = True  # the user decides; AfterTool says they let it run
                self.pending.setdefault(call.key, []).append(pending)
                by = f" by policy {plan.verdict.rule}" if plan.verdict.rule else ""
                return {"decision": "ask", "systemMessage": f"[ledger] REVISE{by}: {plan.verdict.reason}."}
            res = self.runtime.answer(plan)
            if res is not None:
                return {"decision": "deny", "reason": res.output}
        self.pending.setdefault(call.key, []).append(pending)
        return None

    def stop(self) -> dict[str, Any] | None:
        """The model ends its turn: its submission. Denied, with the reason, by a rule against it."""
        self._settle_unanswered()
        plan = self.runtime.propose(STOP_LABEL, analysis=analyze_submission(STOP_LABEL, self.runtime.workdir))
        if plan is None or not plan.applied or plan.verdict.kind not in (VerdictKind.REVISE, VerdictKind.BLOCK):
            return None
        res = self.runtime.answer(plan, refused=STOP_REFUSED)
        return {"decision": "deny", "reason": res.output} if res is not None else None

    # -- record ----------------------------------------------------------------------------------

    def _take(self, call: ToolCall) -> _Pending | None:
        """The call's plan from BeforeTool, or one made now (a read or search, which has none). An
        AfterTool for a governed call whose BeforeTool was answered already is a second claim for one
        call: not recorded, and the first record is never a source either."""
        queue = self.pending.get(call.key)
        if queue:
            return queue.pop(0)
        first = self.last_record.get(call.key)
        if call.tool in (SHELL, *EDITS) and first is not None and first in self.to_check:
            del self.to_check[first]
            self.runtime.distrust(first, f"attempt {first}: a second AfterTool for one call (not recorded)")
            return None
        plan = self.runtime.propose(call.label, cwd=call.analysis.cwd, analysis=call.analysis)
        if plan is None:
            return None
        if call.tool in (SHELL, *EDITS):
            plan.held = False  # its BeforeTool never came: not a call the ledger saw start
        return _Pending(plan, time.perf_counter(), call, 0)

    def after_tool(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        args = payload.get("tool_input") if isinstance(payload.get("tool_input"), dict) else {}
        if (
            payload.get("tool_name") == READ
            and isinstance(args.get("file_path"), str)
            and args["file_path"] in self.answers
        ):
            return self._read_back(args["file_path"], payload.get("tool_response"))
        call = self._call(payload)
        pending = self._take(call) if call is not None else None
        if pending is None:
            return None
        self._check(pending.seq)
        if pending.asked:  # the user let a REVISE'd call run
            pending.plan.let_run()
        response = payload.get("tool_response")
        if call.tool == SHELL:
            return self._shell(pending, response)
        text = llm_text(response)
        failed = isinstance(response, dict) and bool(response.get("error"))
        if call.tool == READ and text is not None and not failed:
            return self._read(pending, text)
        if call.tool in SEARCHES or text is None:
            pending.plan.held = False  # the tool's own format: recorded, never referred to
        run = self._record(pending, ExecResult(text or "", 1 if failed else 0), text or "")
        if call.tool in EDITS and not failed and run.attempt_id is not None:
            self.files.saw_now(call.path)  # Gemini CLI tells it the edit was made: it holds the file as it is
        return context("AfterTool", [self._view_note()])

    def _record(
        self, pending: _Pending, res: ExecResult, expect: str, *, shown_raw: bool = True, cut: bool = False
    ) -> Any:
        """Record the call; the text the model got (``expect``) is checked against the session later. ``cut``:
        Gemini CLI cuts the result (none of its output counts as seen)."""
        truncation = GEMINI_CUT if cut else GEMINI_TRUNCATION
        run = self.runtime.record(
            pending.plan, res, time.perf_counter() - pending.started, truncation=truncation, shown_raw=shown_raw
        )
        if run.attempt_id is not None:
            self.last_record[pending.call.key] = run.attempt_id
            if pending.plan.held and self.session is not None and os.path.isfile(self.session):
                reader = reader_for(self.readers, self.session)
                batches = reader.batches if reader is not None else 0
                self.to_check[run.attempt_id] = _Check(pending.call.key, expect, self.heard, pending.seq, batches)
        return run

    def _shell(self, pending: _Pending, response: Any) -> dict[str, Any] | None:
        result, text = shell_result(response), llm_text(response) or ""
        if result is None:  # cancelled, backgrounded, summarised: Gemini CLI's own words
            pending.plan.held = False
            self._record(pending, ExecResult(text, None, output_complete=False), text)
            return None
        cut = cuts(text, self.cut_chars)
        replaceable = pending.plan.held and pending.plan.applied and not cut
        res = ExecResult(result.output, result.returncode)
        run = self._record(pending, res, text, shown_raw=not replaceable, cut=cut)
        replaced = result.with_output(run.output)
        if replaceable and run.attempt_id is not None and run.output != result.output and readable_whole(replaced):
            path = self._answer_file(run.attempt_id, replaced)
            if path is not None:
                if run.attempt_id in self.to_check:
                    self.to_check[run.attempt_id].text = replaced
                self.answers[path] = _Answer(run.attempt_id, replaced, [self._view_note()])
                return answer("AfterTool", tailToolCallRequest={"name": READ, "args": {"file_path": path}})
        notes = [run.note if not replaceable and run.note else "", self._view_note()]
        return context("AfterTool", notes)

    def _answer_file(self, attempt: int, text: str) -> str | None:
        """Write an answer for the tail read: in Gemini CLI's project temp directory (the session
        file's grandparent), which its read_file may read; None where there is none."""
        if self.session is None:
            return None
        where = Path(self.session).parent.parent / ANSWERS
        try:
            from ledger_runtime import private_dir

            path = private_dir(where) / f"answer-{attempt}.txt"
            write_private(path, text)
        except OSError as e:
            self.runtime.report_fault("writing an answer for Gemini CLI to read", e)
            return None
        return str(path)

    def _read_back(self, path: str, response: Any) -> dict[str, Any] | None:
        """The tail read of an answer: what the model got must be the answer, word for word."""
        a = self.answers.pop(path)
        if llm_text(response) != a.text:
            self.to_check.pop(a.attempt, None)
            self.runtime.distrust(a.attempt, f"attempt {a.attempt}: the answer read back is not the answer written")
        try:
            os.unlink(path)
        except OSError:
            pass
        return context("AfterTool", a.notes)

    def _read(self, pending: _Pending, text: str) -> dict[str, Any] | None:
        path, step = pending.call.path or "", pending.plan.step
        whole = text if text == file_text(path) and pending.call.label == f"read_file {self._shown(path)}" else None
        flag = self.files.changed(path, step, whole) if pending.plan.held else ""
        run = self._record(pending, ExecResult(text, 0), text)
        if whole is not None and pending.plan.held and run.attempt_id is not None:
            self.files.saw(path, step, whole)
        return context("AfterTool", [flag, self._view_note()])

    def _shown(self, path: str) -> str:
        from ledger_runtime import shown_path

        return shown_path(path, self.runtime.workdir)

    def _settle_unanswered(self) -> None:
        """At the end of a turn, the calls that got no AfterTool: one the user was asked about and refused
        is refused; one Gemini CLI's own policy denied (or the user, at its prompt) is recorded with what
        the session says the model got, exit code 1."""
        reader = reader_for(self.readers, self.session)
        failed: dict[str, list[str]] = {}
        for c in reader.calls if reader is not None else []:
            if c.status != "success":
                failed.setdefault(c.key, []).append(c.text)
        for key, queue in list(self.pending.items()):
            for p in list(queue):
                if p.asked:
                    self.runtime.answer(p.plan)
                elif failed.get(key):
                    p.plan.held = False  # Gemini CLI's words, not a command's output
                    self._record(p, ExecResult(failed[key].pop(0), 1), "")
                else:
                    continue
                queue.remove(p)
            if not queue:
                del self.pending[key]

    def finish(self) -> None:
        """At the end of the run: the texts the session now has are checked, the calls whose result
        never came are recorded as such, and the answer files left are removed."""
        self._check(final=True)
        self._settle_unanswered()
        for queue in self.pending.values():
            for p in queue:
                self.runtime.record(
                    p.plan,
                    ExecResult("", None, "no result: the call ended without an AfterTool hook", output_complete=False),
                    time.perf_counter() - p.started,
                    shown_raw=True,
                )
        self.pending.clear()
        for path in list(self.answers):
            try:
                os.unlink(path)
            except OSError:
                pass
        self.answers.clear()
