"""Codex's hooks, answered from the ledger. ``CodexHooks.handle(event, payload)`` takes one hook
event (the JSON Codex writes to the hook's stdin) and returns the JSON to answer with, or None (let
the tool call go on). VerdictFacts about the protocol (Codex 0.171.0): ``../shared/docs/codex.md``.

- ``SessionStart``, ``UserPromptSubmit`` (which also names the task when the run started without one):
  a note of what is news in the state view, as ``additionalContext`` (prompt/notes.py).
- ``PreToolUse`` (``Bash``, ``apply_patch``): govern. A shell command that is to run is replaced by
  ``ledger-run wrap ... -- COMMAND`` (ledger_runtime/hooks/wrapper.py): it runs the command, and the ``Answer`` event it
  sends back here records the attempt and returns the answer built from the fresh output (repeats
  of what the model holds as references; a NUDGE note with it), which the wrapper prints with the
  command's own exit code. Codex's PostToolUse cannot replace an output; this way the model reads an
  ordinary result of the command it asked for. REVISE and BLOCK deny with the rule and the ledger
  state.
- ``PostToolUse``: records the attempt when the wrapper did not (the exit code and the whole output
  come from the rollout file, ``transcript_path``); answers with a note of the state view's news
  (what the model's own outputs did not show it, capped, paid from what the answers spared: these
  notes stay in Codex's history, each sent once).
- The rollout also says when Codex compacted its history: the outputs shown before are gone from the
  model's context then, and no later answer refers to them (``runtime.forget_context``).
- A subagent's events (``codex --enable multi_agent_v2``: ``agent_id`` in the payload, its own rollout as
  ``transcript_path``) are its conversation's, not the main model's: its calls are recorded and shown as they
  are (never the source of a reference, never counted as seen by the main model), it gets none of the main
  model's notes, and its rollout is not another conversation of the main model's (nothing is forgotten).

Commands other hooks or Codex itself stop after ``PreToolUse`` never get their ``PostToolUse``:
``finish()`` records them from the rollout when the run ends.

Served by ``serve()``: each event in a thread of its own, the runtime under ``lock`` only while it is
used (``Begin`` never waits for it; rollouts are read, transcript paths checked and outputs decoded
outside it), and two flags the PostToolUse hook tests in the shell before it starts an interpreter:
``post``, set by the server while the ledger needs a PostToolUse (a call that no wrapper will record,
news for the model), and ``fault``, set by a hook or wrapper that could
not reach the server. With both clear (the common case: a wrapped command, nothing new) the hook
ends at once. What it did for a wrapped call then happens at the next event: the check
of the wrapper's answer against what Codex's rollout says the model got.
"""

from __future__ import annotations

import base64
import json
import math
import os
import secrets
import shlex
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ledger_adapters.codex.rollout import RolloutReader, output_difference, reader_for
from ledger_runtime import (
    ExecResult,
    LedgerRuntime,
    Plan,
    Truncation,
    VerdictKind,
    ViewNotes,
    analyze,
    analyze_patch,
)

if TYPE_CHECKING:
    from ledger_runtime import HookServer

SHELL_TOOLS = ("Bash",)
PATCH_TOOLS = ("apply_patch",)
TOOL_MATCHER = "^(Bash|apply_patch)$"
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse")  # what Codex sends (``Answer``: the wrapper)
DEFAULT_OUTPUT_TOKENS = 10_000  # Codex's truncation_policy for its models: 10,000 tokens
# Codex budgets an output's head and tail in bytes, about 4 a token: count half that, so that what
# the ledger claims the model saw, it saw (for text of several bytes a character too)
BYTES_PER_TOKEN_SEEN = 2
DEFAULT_NOTE_CHARS = 600
# a fault flag stays set this long (the PostToolUse of a call whose PreToolUse could not reach the
# server comes once Codex has the call's result, within its yield time: 30 s at most)
FAULT_HOLD_S = 120.0
MAX_UNCHECKED = 256  # answers waiting for the rollout to say what the model got (the oldest go past it)


def answer(event: str, **fields: Any) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, **fields}}


def truncation_for(args: dict[str, Any] | None) -> Truncation:
    """What of an output the model sees, at least: Codex keeps the head and tail of an output over
    its token limit (the call's ``max_output_tokens``, else the model's 10,000), budgeted in bytes."""
    tokens = DEFAULT_OUTPUT_TOKENS
    if args and isinstance(args.get("max_output_tokens"), int) and args["max_output_tokens"] > 0:
        tokens = min(tokens, args["max_output_tokens"])
    limit = tokens * BYTES_PER_TOKEN_SEEN
    return Truncation(limit, limit // 2, limit // 2, exact=False, unit="bytes")


# the shells Codex may run a command with whose ``-c`` the wrapper runs the same way (wrapper.SHELLS)
POSIX_SHELLS = ("bash", "sh", "dash", "zsh", "ksh", "mksh")
# the shell Codex started for the wrapper line says what it is: its binary, and whether it is a login
# shell (Codex runs ``-lc``, or ``-c`` with a snapshot of what the login profile set), as the status of
# a test (0: a login shell) that forks nothing: POSIX syntax, so any of POSIX_SHELLS reads it; bash and
# zsh can tell, the others say no (127: no such command). Then the shell becomes the wrapper (exec).
LOGIN_TEST = "{ shopt -q login_shell || [[ -o login ]]; } 2>/dev/null"
AS_THIS_SHELL = '--shell "$0" --login-status $?'
# a here-document up to a pipe's 64 KiB needs no temporary file (bash 5.1+; dash always pipes): past it,
# and past Linux's 128 KiB for one argument, the command runs as it is
MAX_WRAPPED_BYTES = 60_000
DEFAULT_YIELD_MS = 10_000  # exec_command's yield_time_ms: how long Codex waits before it says "still running"


def wait_for(args: dict[str, Any] | None, size: int, user_shell: str | None = None) -> float | None:
    """How long the wrapper waits for a call's end before it passes the output through as it comes
    (before Codex would say "still running": the call's ``yield_time_ms``); None when the wrapper
    could not run the call as Codex does: a terminal (``tty``: the command's stdout must be Codex's
    own terminal), a shell that is not a POSIX one (the call's, or ``user_shell``: the user's as
    Codex took it, read now when not given), a command too long to pass once more."""
    args = args or {}
    if args.get("tty") is True or size > MAX_WRAPPED_BYTES:
        return None
    given = args.get("shell")
    if given is not None and (not isinstance(given, str) or os.path.basename(given) not in POSIX_SHELLS):
        return None
    if given is None and os.path.basename(user_shell or default_shell()) not in POSIX_SHELLS:
        return None
    yield_ms = args.get("yield_time_ms")
    yield_ms = (
        min(max(float(yield_ms), 250.0), 30_000.0)
        if isinstance(yield_ms, (int, float)) and not isinstance(yield_ms, bool) and math.isfinite(yield_ms)
        else DEFAULT_YIELD_MS
    )
    seconds = yield_ms / 1000
    return round(max(seconds - min(2.0, seconds / 4), 0.05), 3)  # answer before Codex yields


def default_shell() -> str:
    """The user's shell, as Codex takes it when a call names none."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"
    except (ImportError, KeyError):
        return os.environ.get("SHELL") or "/bin/sh"


def wrapper_line(launcher: list[str], fallback: list[str] | None, options: list[str]) -> str:
    """The line Codex's shell runs in place of a command: it says what shell it is and becomes the wrapper
    (``launcher wrap OPTIONS``), which reads the command on descriptor 3; with a ``fallback``, that one
    where the launcher's program is gone (``exec_either``)."""
    from ledger_runtime import exec_either

    if fallback is None:
        return f"{LOGIN_TEST}; exec {shlex.join([*launcher, 'wrap', *options])} {AS_THIS_SHELL} --command-fd 3"
    args = f'{shlex.join(["wrap", *options])} --shell "$0" --login-status "$1" --command-fd 3'
    return f"{LOGIN_TEST}; set -- $?; {{ {exec_either(launcher, fallback, args)}; }}"


def here_document(line: str, command: str) -> str:
    """``line`` with ``command`` on its file descriptor 3, verbatim: a here-document whose quoted
    delimiter appears nowhere in the command (nothing in it is expanded, nothing is quoted again)."""
    while True:
        delimiter = f"LEDGER_COMMAND_{secrets.token_hex(8)}"
        if delimiter not in command:
            return f"{line} 3<<'{delimiter}'\n{command}\n{delimiter}"


def not_made(rollout: RolloutReader | None, call: Any, command: str) -> str | None:
    """Why a call is not one the model made, as Codex's rollout says (None: it made it, with this
    command): its record is then never the source of a reference."""
    if rollout is None:
        return "no rollout of this run names it"
    named = rollout.named.get(call) if isinstance(call, str) else None
    if named is None:
        return "the rollout does not name it"
    if named.strip() != command.strip():
        return "the rollout names it with another command"
    return None


def subagent(payload: dict[str, Any]) -> bool:
    """Whether an event is a subagent's (its payload names the agent; the main model's names none)."""
    agent = payload.get("agent_id")
    return isinstance(agent, str) and agent != ""


@dataclass
class _Pending:
    plan: Plan
    started: float
    tool: str
    transcript: Any


@dataclass
class CodexHooks:
    runtime: LedgerRuntime
    note_chars: int = DEFAULT_NOTE_CHARS
    pending: dict[str, _Pending] = field(default_factory=dict)
    answered: dict[str, int] = field(default_factory=dict)  # tool_use_id -> attempt id (not run)
    # tool_use_id -> (attempt id, is a patch) of commands recorded before the rollout had their end
    # (a long-running command Codex left running and polls with write_stdin)
    # (and the rollout that will have its end: the main model's, or a subagent's own)
    unfinished: dict[str, tuple[int, bool, Any]] = field(default_factory=dict)
    unfinished_pure: dict[str, bool] = field(default_factory=dict)
    notes: ViewNotes | None = None  # what the model was told of the state view (prompt/notes.py)
    rollouts: dict[str, RolloutReader] = field(default_factory=dict)
    # rollout -> the user's shell read at its conversation's first call: Codex reads it once per session
    user_shells: dict[str, str] = field(default_factory=dict)
    last_transcript: str | None = None
    # how to run ``ledger-run wrap`` (None: commands are not wrapped, and the model gets raw outputs)
    wrap_launcher: list[str] | None = None
    # how to run it where wrap_launcher's program is gone (the compiled client, its cache removed during
    # the run): the shell runs the first that is there, so a command never fails for a wrapper missing
    wrap_fallback: list[str] | None = None
    socket_path: str | None = None
    recorded: dict[str, int] = field(default_factory=dict)  # tool_use_id -> attempt id (answered by the wrapper)
    answer_texts: dict[str, str] = field(default_factory=dict)  # tool_use_id -> the answer its wrapper printed
    compactions: int = 0  # compactions of Codex's history seen so far
    # the run's secret, on the hook command lines only (never in the agent's environment); None: calls
    # are not checked (tests driving the hooks directly)
    token: str | None = None
    call_tokens: dict[str, str] = field(default_factory=dict)  # tool_use_id -> the secret of its wrapper
    call_keys: dict[str, str] = field(default_factory=dict)  # tool_use_id -> the key its wrapper traded it for
    _auth_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # where Codex writes this run's rollouts: a transcript_path elsewhere (or not a regular file) is not read
    sessions_dir: str | None = None
    # held while the runtime (and this object's tables) is used: by each event, and by whoever else
    # touches the runtime (the server's faults, the end of the run)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    # calls whose PostToolUse the ledger needs: every call after its PreToolUse but those denied (no
    # PostToolUse comes) and those wrapped (the wrapper records them; one that cannot raises "fault"),
    # until its PostToolUse comes
    expect_post: set[str] = field(default_factory=set)
    # tool_use_id -> (attempt id, transcript) of calls a wrapper recorded whose answer is not yet
    # checked against what the rollout says the model got (_check_answers)
    unchecked: dict[str, tuple[int, Any]] = field(default_factory=dict)
    # sets or clears one of the server's flags ("post", "fault"); None (no serve()): every
    # PostToolUse hook asks the server
    set_flag: Callable[[str, bool], None] | None = None
    flag_age: Callable[[str], float | None] | None = None
    flag_paths: dict[str, str] = field(default_factory=dict)
    posted: dict[str, int] = field(default_factory=dict)  # call -> the attempt its PostToolUse recorded
    # where a run leaves the conversation its ledger's outputs were shown in (its rollout and compactions) for
    # the next run in the run directory (``codex resume``); None: not kept
    conversation_file: str | None = None
    previous: dict[str, Any] | None = None  # what the previous run left there (None: nothing, or a new ledger)
    goes_on: bool = False  # the ledger holds steps of an earlier run: its conversation must be this one
    unknown: bool = False  # an event named no rollout before one did: forgotten, as another conversation

    def __post_init__(self) -> None:
        if self.notes is None:  # what the notes told the model: the runtime's, a fold of its ledger
            self.notes = self.runtime.told
            self.notes.limit_chars = self.note_chars
        self.goes_on = self.runtime.state.step > 0
        if self.conversation_file is not None:
            from ledger_runtime import taken_conversation

            self.previous = taken_conversation(self.conversation_file, self.runtime.state.step)

    # -- dispatch --------------------------------------------------------------------------------

    def authorize(self, event: str, token: str | None, call: str | None) -> bool:
        """A hook call carries the run's secret. A wrapper speaks for its own call only: its ``Begin``
        with the secret of that call (on its command line, so readable by the command it runs, which
        has not started yet), which trades it for a key only the wrapper holds; its ``Answer`` with
        that key. Each is taken once; a wrong one does not use up the real wrapper's."""
        if self.token is None:
            return True
        if event in ("Begin", "Answer"):
            held = self.call_tokens if event == "Begin" else self.call_keys
            with self._auth_lock:  # called from the server's reading thread: taken once, even in a race
                expected = held.get(call) if call is not None else None
                if expected is None or token is None or not secrets.compare_digest(expected, token):
                    return False
                del held[call]  # type: ignore[arg-type]
                return True
        return token is not None and secrets.compare_digest(self.token, token)

    def begin(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        """A wrapper is about to run its command: the key it will answer with."""
        call, key = payload.get("tool_use_id"), payload.get("key")
        if not isinstance(call, str) or call not in self.pending or not isinstance(key, str) or len(key) < 16:
            return None
        if self.token is not None:
            with self._auth_lock:
                self.call_keys[call] = key
        return {"ok": True}

    def _transcript(self, path: Any) -> str | None:
        """``path`` when it may be read as this run's rollout: absolute, and under the sessions directory."""
        if not isinstance(path, str) or not os.path.isabs(path) or "\0" in path:
            return None
        if self.sessions_dir is not None:
            real = os.path.realpath(path)
            root = os.path.realpath(self.sessions_dir)
            if not real.startswith(root + os.sep):
                return None
        return path

    def handle(self, event: str, payload: dict[str, Any]) -> dict[str, Any] | None:  # noqa: C901
        """Answer one event. Only what uses the runtime holds ``lock``: a ``Begin`` not at all, and
        the transcript's path, the rollouts' new lines and a wrapper's output are read before it."""
        if event == "Begin":
            return self.begin(payload)
        if "transcript_path" in payload:  # only a rollout of this run is ever read
            payload = {**payload, "transcript_path": self._transcript(payload.get("transcript_path"))}
        call_id = payload.get("tool_use_id")
        waiting = self.pending.get(call_id) if isinstance(call_id, str) else None
        paths = {payload.get("transcript_path"), waiting.transcript if waiting else None, self.last_transcript}
        paths.update(transcript for _, _, transcript in list(self.unfinished.values()))
        for path in paths:
            reader_for(self.rollouts, path)  # read now, outside the lock: the event's code looks them up
        if event == "Answer":
            return self._answer(payload)
        with self.lock:
            self._before_event(payload)
            if event == "PreToolUse":
                out = self.pre_tool_use(payload)
                if self.expect_post:  # set before the answer goes: the call's PostToolUse is needed
                    self._flag("post", True)
                return out
            if event == "PostToolUse":
                return self.post_tool_use(payload)
            if event == "SessionStart":
                return self.session_start(payload)
            if event == "UserPromptSubmit":
                return self.user_prompt_submit(payload)
            if event == "Stop":
                return None
        raise ValueError(f"unknown hook event {event!r}")

    def _before_event(self, payload: dict[str, Any]) -> None:
        """What every event does first: follow the rollout (its transcript, unfinished commands that
        have ended, compactions) and check the answers of calls recorded since against it."""
        path = payload.get("transcript_path")
        if subagent(payload):
            pass  # its own rollout, its own conversation: nothing new about the main model's
        elif isinstance(path, str) and path != self.last_transcript:
            self._conversation(path)
        elif self.last_transcript is None and self.goes_on and not self.unknown:
            self.unknown = True  # a run on an earlier ledger, in a conversation it cannot name: one that holds nothing
            self.runtime.forget_context()
        if self.unfinished:
            self.complete_unfinished()
        self._follow_compactions()
        if self.unchecked:
            self._check_answers()

    def after(self, event: str, call: str | None) -> None:
        """Once a note may have been given (PostToolUse, SessionStart, UserPromptSubmit) and its
        answer sent: whether the next PostToolUse hook still has anything to ask. Off the hook's path,
        under the lock; a flag is only ever set before an answer goes (PreToolUse, Answer), so a
        PostToolUse that comes before this clears it asks, and nothing is lost."""
        if event in ("Begin", "PreToolUse", "Answer") or self.set_flag is None:
            return  # those set the flag as it must be before their answers go
        with self.lock:
            self._flag("post", bool(self.expect_post) or self._news_waiting())
            if event == "PostToolUse" and not self.pending and self._fault_age() > FAULT_HOLD_S:
                self._flag("fault", False)  # every call the server knows of is recorded, and one it
                # never saw start (its PreToolUse hook could not ask) has had its PostToolUse by now

    def _flag(self, name: str, on: bool) -> None:
        if self.set_flag is not None:
            self.set_flag(name, on)

    def _fault_age(self) -> float:
        """Seconds since a hook last set the fault flag (infinite when it is clear)."""
        age = self.flag_age("fault") if self.flag_age is not None else None
        return math.inf if age is None else age

    def serve(self) -> HookServer:
        """The hook server for these hooks, as ``ledger-run codex`` runs it (see the module docstring)."""
        from ledger_runtime import HookServer

        server = HookServer(
            self.handle,
            self.runtime.report_fault,
            self.authorize,
            lock=self.lock,
            serialize=False,
            after=self.after,
            quick=frozenset({"Begin"}),  # self.begin: a key put in a table, nothing else
        )
        self.socket_path = server.socket_path
        self.flag_paths = {name: server.flag_path(name) for name in ("post", "fault")}
        self.set_flag = server.set_flag
        self.flag_age = server.flag_age
        return server

    def _rollout(self, path: Any) -> RolloutReader | None:
        """The rollout at ``path`` as read so far (``handle`` reads its new lines before the lock)."""
        return reader_for(self.rollouts, path, refresh=False)

    # -- inform ----------------------------------------------------------------------------------

    def _inform(self, event: str) -> dict[str, Any] | None:
        """The note when the model's turn starts (the session, the user's prompt): what changed since is news."""
        self.runtime.prescan(before_command=False)
        text = self._view_note()
        return answer(event, additionalContext=text) if text else None

    def _view_note(self, *, dry_run: bool = False) -> str:
        """A note of the state view's news since the model was last told, paid from what the answers
        spared it; "" when there is none. Codex keeps every note in its history: each is sent once.
        ``dry_run``: the note there would be now, the model's notes as they were."""
        return self.runtime.view_note(self.notes, dry_run=dry_run)

    def _news_waiting(self) -> bool:
        """Whether the next PostToolUse would give the model a note."""
        return bool(self._view_note(dry_run=True))

    def session_start(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        return None if subagent(payload) else self._inform("SessionStart")

    def user_prompt_submit(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        if subagent(payload):
            return None  # the main model's notes are its own, and a subagent's task is not the run's
        prompt = payload.get("prompt")
        if isinstance(prompt, str):
            self.runtime.set_task(prompt)
        return self._inform("UserPromptSubmit")

    # -- govern ----------------------------------------------------------------------------------

    def _proposal(self, payload: dict[str, Any]) -> tuple[str, str, str] | None:
        tool = payload.get("tool_name")
        tool_input = payload.get("tool_input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if tool not in SHELL_TOOLS + PATCH_TOOLS or not isinstance(command, str) or not command.strip():
            return None
        cwd = payload.get("cwd")
        cwd = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else self.runtime.workdir
        return str(tool), command, cwd

    def _pending(self, payload: dict[str, Any]) -> _Pending | None:
        """The tool call as a planned command (analysed, workspace scanned, verdict decided)."""
        proposal = self._proposal(payload)
        if proposal is None:
            return None
        tool, command, cwd = proposal
        analysis = analyze_patch(command, cwd) if tool in PATCH_TOOLS else analyze(command, cwd)
        agent = payload["agent_id"] if subagent(payload) else ""
        plan = self.runtime.propose(command, cwd=cwd, analysis=analysis, agent=agent)
        if plan is None:
            return None
        plan.held = not agent  # a subagent's output is the subagent's
        return _Pending(plan, time.perf_counter(), tool, payload.get("transcript_path"))

    def pre_tool_use(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        call_id = payload.get("tool_use_id")
        if isinstance(call_id, str):  # whatever comes of it, the ledger needs to hear how it ended
            self.expect_post.add(call_id)
        pending = self._pending(payload) if isinstance(call_id, str) else None
        if pending is None:
            return None
        plan = pending.plan
        if plan.applied and not plan.verdict.kind.executes:  # REVISE, BLOCK: the call is denied, with why
            res = self.runtime.answer(plan)
            if res is not None:
                self.answered[call_id] = res.attempt_id or 0
                self.expect_post.discard(call_id)  # a denied call gets no PostToolUse
                return answer("PreToolUse", permissionDecision="deny", permissionDecisionReason=res.output)
        self.pending[call_id] = pending
        wrapped = self._wrapped(call_id, pending)
        if wrapped is not None:  # the NUDGE note comes back with the answer
            self.expect_post.discard(call_id)  # its wrapper records it (or, failing, raises "fault")
            return answer("PreToolUse", permissionDecision="allow", updatedInput={"command": wrapped})
        if plan.applied and plan.verdict.kind is VerdictKind.NUDGE:
            return answer("PreToolUse", additionalContext=f"[ledger] NUDGE: {plan.verdict.reason}.")
        return None

    def _wrapped(self, call_id: str, pending: _Pending) -> str | None:
        """The wrapper command line that runs the shell command as Codex would and prints the
        ledger's answer; None where it could not keep the command's meaning (the command runs as it is)."""
        plan = pending.plan
        if (
            self.wrap_launcher is None
            or self.socket_path is None
            or pending.tool not in SHELL_TOOLS
            or not plan.applied
            or not plan.verdict.kind.executes
            or self.runtime.config.dedupe.mode == "off"
            or plan.analysis.raw
            or plan.analysis.submits
        ):
            return None
        transcript = pending.transcript or self.last_transcript
        rollout = self._rollout(transcript)
        args = rollout.arguments.get(call_id) if rollout is not None else None
        if rollout is not None and rollout.sandbox not in (None, "danger-full-access"):
            return None  # Codex's sandbox refuses the wrapper's socket: it would only add its cost
        wait = wait_for(args, len(plan.command.encode()), self.user_shell(transcript))
        if wait is None:
            return None
        extra: list[str] = []
        if self.token is not None:
            secret = secrets.token_hex(16)
            with self._auth_lock:
                self.call_tokens[call_id] = secret
            extra = ["--token", secret]
        options = [
            "--socket",
            self.socket_path,
            "--call",
            call_id,
            *extra,
            "--run-dir",
            str(self.runtime.run_dir),
            "--wait",
            f"{wait:g}",
            *(["--flag-on-fault", self.flag_paths["fault"]] if "fault" in self.flag_paths else []),
        ]
        return here_document(wrapper_line(self.wrap_launcher, self.wrap_fallback, options), plan.command)

    def user_shell(self, transcript: Any) -> str:
        """The user's shell as Codex runs a call of the conversation whose rollout is ``transcript`` that names
        none: Codex reads it once, when the session starts; read here at the conversation's
        first call, not at each (a ``getpwuid`` per call), and each time where no rollout names the conversation."""
        if not isinstance(transcript, str):
            return default_shell()
        shell = self.user_shells.get(transcript)
        if shell is None:
            shell = self.user_shells[transcript] = default_shell()
        return shell

    def _answer(self, payload: dict[str, Any]) -> dict[str, Any] | bytes | None:
        """A wrapper's ``Answer``: its output decoded and the answer encoded outside the lock. The
        wrapper sends the output as it came (``raw``) and gets the answer so; a call that sends it in
        JSON (``output_b64``) gets it so (``text_b64``)."""
        raw = payload.get("raw")
        data = raw if isinstance(raw, bytes) else base64.b64decode(str(payload.get("output_b64") or ""))
        output = data.decode("utf-8", "surrogateescape")  # not UTF-8: kept as it came, and given back so
        code = payload.get("exit_code")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        elapsed = float(payload.get("elapsed_s") or 0.0)
        with self.lock:
            self._before_event(payload)
            text = self.answer_event(payload, output, code, elapsed)
        if text is None:
            return None  # not ours (or recorded already): the wrapper prints the raw output
        answer_bytes = text.encode("utf-8", "surrogateescape")
        return answer_bytes if isinstance(raw, bytes) else {"text_b64": base64.b64encode(answer_bytes).decode()}

    def answer_event(self, payload: dict[str, Any], output: str, code: int | None, elapsed: float) -> str | None:
        """The wrapper ran a command: record it; the text the model gets (None: not a call of ours)."""
        call_id = payload.get("tool_use_id")
        pending = self.pending.pop(call_id, None) if isinstance(call_id, str) else None
        if pending is None:
            return None
        rollout = self._rollout(pending.transcript or self.last_transcript)
        args = rollout.arguments.get(call_id) if rollout is not None else None
        res = ExecResult(output, code, output_complete=bool(payload.get("complete", True)) and code is not None)
        unmade = not_made(rollout, call_id, pending.plan.command)
        if unmade:
            pending.plan.held = False
        run = self.runtime.record(
            pending.plan, res, elapsed, truncation=truncation_for(args), shown_raw=bool(payload.get("shown_raw"))
        )
        if unmade and run.attempt_id is not None:
            self.distrust(run.attempt_id, call_id, unmade)
        if run.attempt_id is None:  # not recorded: its PostToolUse records it
            self.expect_post.add(call_id)
        else:
            self.recorded[call_id] = run.attempt_id
        # before the answer goes, as it must be when the call's PostToolUse hook looks: set when the
        # record made news (or another call needs its PostToolUse), clear otherwise
        self._flag("post", bool(self.expect_post) or self._news_waiting())
        if run.attempt_id is not None:
            if not payload.get("shown_raw"):
                self.answer_texts[call_id] = run.output
                self.unchecked[call_id] = (run.attempt_id, pending.transcript)
                while len(self.unchecked) > MAX_UNCHECKED:  # a rollout that never says: not held forever
                    oldest = next(iter(self.unchecked))
                    del self.unchecked[oldest]
                    self.answer_texts.pop(oldest, None)
        return run.output

    def _conversation(self, path: str) -> None:
        """The events name another rollout: another conversation (``/new``), which holds none of the outputs
        shown before; or, at a run's first event on a ledger an earlier run left, the conversation resumed,
        which holds them only when it is the one that run left, not compacted since."""
        first, self.last_transcript = self.last_transcript is None, path
        rollout = self._rollout(path)
        now = rollout.compactions if rollout is not None else 0
        left = self.previous or {}
        if first and self.unknown:
            self.compactions = now  # forgotten already, at the event that named none
            return
        if first and not self.goes_on:
            return  # a new ledger: its compactions are followed from 0, as ever
        if first and left.get("transcript") == path:
            self.compactions = left["compactions"]  # the earlier run's: one since is followed as any
            return
        self.runtime.forget_context()  # its event resets the notes (the whole view next)
        self.compactions = now

    def _follow_compactions(self) -> None:
        """Codex compacted its history: what it showed the model before is gone from its context."""
        rollout = self._rollout(self.last_transcript)
        if rollout is not None and rollout.compactions > self.compactions:
            self.compactions = rollout.compactions
            self.runtime.forget_context()  # its event resets the notes (the whole view next)

    # -- record ----------------------------------------------------------------------------------

    def post_tool_use(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        call_id = payload.get("tool_use_id")
        if isinstance(call_id, str):
            self.expect_post.discard(call_id)
        if isinstance(call_id, str) and call_id in self.answered:  # denied: nothing ran
            del self.answered[call_id]
            return None
        if isinstance(call_id, str) and call_id in self.recorded:  # the wrapper's answer recorded it
            del self.recorded[call_id]
            self._check_answers()
            view = "" if subagent(payload) else self._view_note()
            return answer("PostToolUse", additionalContext=view) if view else None
        if isinstance(call_id, str) and call_id in self.posted:  # recorded once: a second claim is not
            self.distrust(self.posted[call_id], call_id, "a second PostToolUse for it (not recorded)")
            return None
        pending = self.pending.pop(call_id, None) if isinstance(call_id, str) else None
        if pending is None:  # no PreToolUse seen for it: record it now, its changes as made before it
            pending = self._pending(payload)
            if pending is None:
                return None
        run = self._record_post(call_id, pending, payload)
        notes = []
        if run.note and not (
            pending.plan.applied
            and pending.plan.verdict.kind is VerdictKind.NUDGE
            and run.verdict == pending.plan.verdict
        ):  # that NUDGE went with PreToolUse
            notes.append(run.note)
        view = "" if subagent(payload) else self._view_note()  # the main model's notes: not a subagent's
        if view:
            notes.append(view)
        return answer("PostToolUse", additionalContext="\n".join(notes)) if notes else None

    def _record_post(self, call_id: Any, pending: _Pending, payload: dict[str, Any]) -> Any:
        """Record a call no wrapper answered (the model got its output as it is), from the rollout where
        it has the call's end; a call the rollout does not name with this command is never a source."""
        rollout = self._rollout(payload.get("transcript_path") or pending.transcript)
        res, trunc = self._result(pending, call_id, rollout, payload.get("tool_response"))
        unmade = not_made(rollout, call_id, pending.plan.command)
        if unmade:
            pending.plan.held = False
        run = self.runtime.record(
            pending.plan, res, time.perf_counter() - pending.started, truncation=trunc, shown_raw=True
        )
        if run.attempt_id is None or not isinstance(call_id, str):
            return run
        self.posted[call_id] = run.attempt_id
        if unmade:
            self.distrust(run.attempt_id, call_id, unmade)
        if not res.output_complete:
            transcript = payload.get("transcript_path") or pending.transcript
            self.unfinished[call_id] = (run.attempt_id, pending.tool in PATCH_TOOLS, transcript)
            self.unfinished_pure[call_id] = pending.plan.analysis.readonly
        return run

    def distrust(self, attempt: int, call: str, why: str) -> None:
        """The record ``attempt`` of ``call`` is not what the model got: never a source (a fault says
        which attempt and why; inspect shows the step so)."""
        self.runtime.distrust(attempt, f"attempt {attempt}: call {call}: {why}")

    def _check_answers(self, final: bool = False) -> None:
        """What Codex's rollout says each wrapper printed must be the answer the ledger built for its
        call: else the record came from someone else (a command that answered for its own call when
        its wrapper could not) and is never the source of a reference. Checked at the next event
        once the rollout has the call's end (a call whose rollout is not known cannot be)."""
        for call_id, (attempt_id, transcript) in list(self.unchecked.items()):
            rollout = self._rollout(transcript or self.last_transcript)
            rec = rollout.commands.get(call_id) if rollout is not None else None
            if rec is None and rollout is not None and not final:
                continue  # not ended in the rollout yet
            del self.unchecked[call_id]
            sent = self.answer_texts.pop(call_id, None)
            # Codex reads the bytes as UTF-8, what is not UTF-8 replaced
            sent = sent.encode("utf-8", "surrogateescape").decode("utf-8", "replace") if sent is not None else None
            if sent is not None and rec is not None and rec.output != sent:
                why = f"the rollout's output is not the answer recorded for it ({output_difference(rec.output, sent)})"
                self.distrust(attempt_id, call_id, why)
            elif rec is None and final:
                self.distrust(attempt_id, call_id, "the rollout never ended it")

    def _result(
        self, pending: _Pending, call_id: Any, rollout: RolloutReader | None, tool_response: Any
    ) -> tuple[ExecResult, Truncation]:
        """The command's exit code and whole output from the rollout when it has them; else the
        hook's output text, marked incomplete (never reused)."""
        args = rollout.arguments.get(call_id) if rollout is not None and isinstance(call_id, str) else None
        trunc = truncation_for(args)
        records = (rollout.patches if pending.tool in PATCH_TOOLS else rollout.commands) if rollout else {}
        rec = records.get(call_id) if isinstance(call_id, str) else None
        if rec is not None:
            return ExecResult(rec.output, rec.exit_code, output_complete=rec.exit_code is not None), trunc
        text = tool_response if isinstance(tool_response, str) else json.dumps(tool_response)
        return ExecResult(text, None, output_complete=False), trunc

    def complete_unfinished(self) -> None:
        """Fold in the ends the rollouts now have of commands recorded unfinished (each in the rollout of the
        conversation that made it: the main model's or a subagent's)."""
        for call_id, (attempt_id, patch, transcript) in list(self.unfinished.items()):
            rollout = self._rollout(transcript or self.last_transcript)
            if rollout is None:
                continue
            rec = (rollout.patches if patch else rollout.commands).get(call_id)
            if rec is not None and rec.exit_code is not None:
                self.runtime.finish_command(attempt_id, ExecResult(rec.output, rec.exit_code))
                del self.unfinished[call_id]
                self.unfinished_pure.pop(call_id, None)

    def finish(self) -> None:
        """At the end of the run: record the commands whose PostToolUse never came, and the ends of
        commands recorded unfinished; check the answers not checked yet."""
        for reader in list(self.rollouts.values()):
            reader.refresh()
        self._check_answers(final=True)
        self._follow_compactions()
        self.unchecked.clear()
        self.answer_texts.clear()
        self.complete_unfinished()
        for call_id, pending in list(self.pending.items()):
            rollout = self._rollout(pending.transcript or self.last_transcript)
            res, trunc = self._result(pending, call_id, rollout, "")
            if rollout is None or (call_id not in rollout.commands and call_id not in rollout.patches):
                res = ExecResult(
                    "", None, "no result: the tool call ended without a PostToolUse hook", output_complete=False
                )
            self.runtime.record(
                pending.plan, res, time.perf_counter() - pending.started, truncation=trunc, shown_raw=True
            )
            del self.pending[call_id]
        if self.conversation_file is not None and self._rollout(self.last_transcript) is not None:
            from ledger_runtime import leave_conversation  # last: with the step the ledger ends at

            step = self.runtime.state.step
            try:
                leave_conversation(self.conversation_file, self.last_transcript, self.compactions, 0, step)
            except OSError as e:
                self.runtime.report_fault("leaving the conversation for a resumed run", e)
