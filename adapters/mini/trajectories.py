"""mini-swe-agent's recorded runs, read from its ``.traj.json`` files or ``actions.jsonl.gz`` rows
into the core's ``Trajectory`` (``ledger-run replay`` finds this reader through the
``ledger_runtime.trajectories`` entry point: ``FORMAT``).

A ``Trajectory`` is the list of ``RecordedStep``s (the command, and what the agent saw: return
code and output) of one instance. Both formats of mini-swe-agent are read: text-based runs (the
command in a fenced ```bash or ```mswea_bash_command block, the observation as
``<returncode>N</returncode><output>...</output>``) and tool-call runs (``extra.actions``, tool
messages). A file that cannot be read raises ``TrajectoryError`` with the reason, never a
traceback; one malformed row of a JSONL file is skipped with a note.

For the run's page, ``conversation`` reads a ``.traj.json`` as the model's side of the run: each
call's text and reasoning (chat messages, tool calls, and Responses API outputs alike), the commands
it asked for, its tokens and cost as mini-swe-agent kept them; ``locate`` finds the trajectory of a
ledger (the run directory's ``trajectory.traj.json``, a SWE-bench instance's ``<iid>.traj.json``).
"""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path
from typing import Any, Iterator

from ledger_adapters.mini.context import text_of
from ledger_adapters.mini.format import MARKER, SUBMISSION
from ledger_runtime import (
    Conversation,
    ModelTurn,
    RecordedFormat,
    RecordedStep,
    Trajectory,
    TrajectoryError,
    Truncation,
    UnreadableJSON,
    json_value,
    read_record,
)

_FENCE = re.compile(r"```(?:bash|mswea_bash_command|sh)\s*\n(.*?)\n?```", re.S)
_RC = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUTPUT = re.compile(r"<output>\n?(.*?)</output>", re.S)
_HEAD_TAIL = re.compile(r"<output_head>\n?(.*?)</output_head>.*?<output_tail>\n?(.*?)</output_tail>", re.S)


def parse_observation(text: str) -> tuple[int | None, str]:
    """Return code and output of a mini-swe-agent observation message (head and tail if cut)."""
    rc_m = _RC.search(text)
    rc = int(rc_m.group(1)) if rc_m else None
    m = _OUTPUT.search(text)
    if m:
        return rc, m.group(1)
    ht = _HEAD_TAIL.search(text)
    if ht:
        return rc, ht.group(1) + ht.group(2)
    return rc, text


def _read(path: Path) -> dict[str, Any]:
    """A ``.traj.json`` file's JSON (TrajectoryError, one line, when it is not one)."""
    try:
        data = json_value(read_record(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise TrajectoryError(f"{path}: cannot read: {e}") from None
    except UnreadableJSON as e:
        raise TrajectoryError(f"{path}: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise TrajectoryError(f"{path}: not a mini-swe-agent trajectory (no messages list)")
    return data


def _run_name(path: Path) -> str:
    """The name a trajectory with no ``instance_id`` is replayed under: its file's, but for ``ledger-run mini``'s and
    the demo's (every one ``trajectory.traj.json``), its run directory's (``ledger-runs/<time>``; the demo's
    ``-o`` directory, whose ``run/`` holds it). All were "trajectory": a replay of ``ledger-runs/`` replayed the first
    run and skipped the others as second trajectories of one instance."""
    if path.name != "trajectory.traj.json":
        return path.name.removesuffix(".traj.json")
    run = Path(os.path.abspath(path)).parent
    return (run.parent.name if run.name == "run" else run.name) or "trajectory"


def from_traj_json(path: Path) -> Trajectory:  # noqa: C901
    data = _read(path)
    iid = data.get("instance_id") or _run_name(path)
    cfg = ((data.get("info") or {}).get("config") or {}).get("environment") or {}
    steps: list[RecordedStep] = []
    prompt: list[int] = []
    msgs = data["messages"]
    chars = 0
    i = 0
    step = 0
    while i < len(msgs):
        m = msgs[i]
        if not isinstance(m, dict):
            raise TrajectoryError(f"{path}: message {i} is not an object")
        role = m.get("role")
        if role != "assistant":
            chars += len(text_of(m))
            i += 1
            continue
        text = text_of(m)
        actions = ((m.get("extra") or {}).get("actions")) or []
        commands = [a.get("command") for a in actions if isinstance(a, dict) and a.get("command")]
        if not commands:
            found = _FENCE.findall(text)
            commands = found if len(found) == 1 else []  # mini-swe-agent: exactly one block, else a format error
        chars += len(text)
        replies = []
        j = i + 1
        while j < len(msgs) and isinstance(msgs[j], dict) and msgs[j].get("role") in ("user", "tool", "exit"):
            replies.append(msgs[j])
            j += 1
        if not commands:
            steps.append(
                RecordedStep(
                    step,
                    "format_error",
                    None,
                    None,
                    text_of(replies[0]) if replies else None,
                    i,
                    i + 1 if replies else None,
                )
            )
            prompt.append(chars)
        for k, cmd in enumerate(commands):
            reply = text_of(replies[k]) if k < len(replies) else None
            kind = "action"
            rc, out = parse_observation(reply) if reply is not None else (None, None)
            if reply is not None and "<returncode>" not in reply and MARKER in cmd:
                kind, rc, out = "submit", None, reply
            elif reply is not None and ("timed out" in reply.lower() and rc in (None, -1)):
                kind = "timeout"
            steps.append(RecordedStep(step, kind, cmd, rc, out, i, i + 1 + k if k < len(replies) else None))
            prompt.append(chars)
        for r in replies:
            chars += len(text_of(r))
        step += 1
        i = j
    return Trajectory(
        iid,
        steps,
        env=dict(cfg.get("env") or {}),
        timeout=int(cfg.get("timeout") or 60),
        source=str(path),
        prompt_chars=prompt,
        messages=[(str(m.get("role")), text_of(m)) for m in msgs],
        format=FORMAT,
    )


def from_actions_jsonl(path: Path, notes: list[str] | None = None) -> Iterator[Trajectory]:
    """One Trajectory per instance of an ``actions.jsonl(.gz)`` file."""
    opener = gzip.open if path.suffix == ".gz" else open
    by_id: dict[str, list[dict[str, Any]]] = {}
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                try:
                    row = json_value(line, dict)
                    by_id.setdefault(row["instance_id"], []).append(row)
                except (ValueError, KeyError, TypeError) as e:  # UnreadableJSON: nested past the parser too
                    if notes is not None:
                        notes.append(f"{path}:{n}: skipped a malformed row ({e})")
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise TrajectoryError(f"{path}: cannot read: {e}") from None
    for iid, rows in by_id.items():
        rows.sort(key=lambda r: r.get("step", 0))
        steps = [
            RecordedStep(
                int(r.get("step", 0)),
                str(r.get("kind") or "action"),
                r.get("command"),
                r.get("returncode"),
                r.get("observation"),
            )
            for r in rows
        ]
        yield Trajectory(
            iid,
            steps,
            repo=rows[0].get("repo"),
            base_commit=rows[0].get("base_commit"),
            source=str(path),
            format=FORMAT,
        )


def _expand(paths: list[Path]) -> list[Path]:
    """The files: a directory stands for its ``.traj.json`` files (and its subdirectories')."""
    out = []
    for p in paths:
        if p.is_dir():
            out += sorted(p.glob("*.traj.json")) + sorted(p.glob("*/*.traj.json"))
        else:
            out.append(p)
    return out


def load(paths: list[Path], notes: list[str]) -> Iterator[Trajectory | TrajectoryError]:
    """Every trajectory in ``paths`` (files, or directories of ``.traj.json`` files); a file that
    cannot be read yields its TrajectoryError."""
    for p in _expand(paths):
        try:
            if p.name.endswith((".jsonl", ".jsonl.gz")):
                yield from from_actions_jsonl(p, notes)
            else:
                yield from_traj_json(p)
        except TrajectoryError as e:
            yield e


def with_answer(message: str, answer: str, trunc: Truncation) -> str:
    """A recorded observation message with its output replaced by ``answer`` as the agent shows it
    (cut to its head and tail when long, as mini-swe-agent cuts)."""
    kept = trunc.kept(answer)
    shown = (
        answer
        if kept is None
        else (answer[: kept[0]] + "\n[... output cut ...]\n" + answer[-kept[1] :] if kept[1] else answer[: kept[0]])
    )
    start = message.find("<output>")
    end = message.rfind("</output>")
    if start >= 0 and end > start:
        return message[: start + len("<output>\n")] + shown + message[end:]
    head = message.find("<output_head>")
    tail_end = message.rfind("</output_tail>")
    if head >= 0 and tail_end > head:
        return message[:head] + "<output>\n" + shown + "</output>" + message[tail_end + len("</output_tail>") :]
    return shown


# SWE-bench's images hold the repository at /testbed: the recorded commands name it
def observation(text: str, returncode: int | None) -> tuple[int | None, str]:
    """A step's recorded observation: a whole observation message is parsed; what is the output
    already (an actions.jsonl row) is taken as it is, with its recorded return code."""
    return parse_observation(text) if "<returncode>" in text else (returncode, text)


# -- the model's side of a run, for its page ----------------------------------------------------------


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _count(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def _usage(m: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
    """(input, cached input, output) tokens of a model call: litellm's chat usage (in the response
    mini-swe-agent keeps), or a Responses API object's own."""
    response = (m.get("extra") or {}).get("response")
    usage = (response if isinstance(response, dict) else m).get("usage")
    if not isinstance(usage, dict):
        return None, None, None
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    if cached is None:
        cached = _count(usage.get("cache_read_input_tokens"))
    return (
        _count(usage.get("prompt_tokens", usage.get("input_tokens"))),
        cached,
        _count(usage.get("completion_tokens", usage.get("output_tokens"))),
    )


def _said(m: dict[str, Any]) -> tuple[str, str]:
    """(text, reasoning) of a model message: a chat message (reasoning_content, thinking blocks) or a
    Responses API object (its message and reasoning items)."""
    if m.get("object") == "response":
        text, thought = [], []
        for item in m.get("output") or []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "message":
                text += [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
            elif item.get("type") == "reasoning":
                thought += [c.get("text", "") for c in item.get("summary") or [] if isinstance(c, dict)]
        return "\n".join(t for t in text if t), "\n".join(t for t in thought if t)
    reasoning = m.get("reasoning_content")
    if not isinstance(reasoning, str) or not reasoning:
        blocks = m.get("thinking_blocks") or []
        reasoning = "\n".join(b.get("thinking", "") for b in blocks if isinstance(b, dict) and b.get("thinking"))
    return text_of(m), reasoning


def _is_model(m: Any) -> bool:
    return isinstance(m, dict) and (m.get("role") == "assistant" or m.get("object") == "response")


def conversation(path: Path) -> Conversation:
    """A ``.traj.json`` as the model's side of the run: one turn per model call, in order."""
    if not path.name.endswith(".json"):
        raise TrajectoryError(f"{path}: not a mini-swe-agent trajectory (not a .traj.json file)")
    data = _read(path)
    msgs = data["messages"]
    turns = []
    for i, m in enumerate(msgs):
        if not _is_model(m):
            continue
        extra = m.get("extra") if isinstance(m.get("extra"), dict) else {}
        actions = extra.get("actions") if isinstance(extra.get("actions"), list) else []
        commands = [a["command"] for a in actions if isinstance(a, dict) and isinstance(a.get("command"), str)]
        text, reasoning = _said(m)
        if not commands and not actions:
            found = _FENCE.findall(text)
            commands = found if len(found) == 1 else []
        before = (msgs[i - 1].get("extra") or {}) if i and isinstance(msgs[i - 1], dict) else {}
        start, end = _number(before.get("timestamp")), _number(extra.get("timestamp"))
        seconds = end - start if start is not None and end is not None and 0 <= end - start < 86400 else None
        inp, cached, out = _usage(m)
        got = []  # the messages after the call, up to the next one: its commands' outputs
        for r in (msgs[j] for j in range(i + 1, len(msgs))):  # (no copy of the rest at each call: a record is long)
            if _is_model(r):
                break
            got.append(text_of(r) if isinstance(r, dict) else "")
        cost = _number(extra.get("cost"))
        turns.append(ModelTurn(text, reasoning, tuple(commands), inp, cached, out, cost, seconds, tuple(got)))
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    task = next((text_of(m) for m in msgs if isinstance(m, dict) and m.get("role") == "user"), "")
    submission = info.get("submission")
    return Conversation(str(path), turns, task, submission if isinstance(submission, str) else None)


def _names(path: Path, ledger: Path) -> bool:
    """Whether the trajectory ``path`` is of the run that kept ``ledger``: its ``info.ledger.path`` is
    that file, or (the run was moved) names one that is not there, and the ledger lies beside the
    trajectory or in the ``ledger/`` beside it."""
    try:
        data = json_value(read_record(path).decode("utf-8"))
        named = ((data.get("info") or {}).get("ledger") or {}).get("path")
    except (OSError, ValueError, AttributeError):  # UnreadableJSON: nested past the parser too
        return False
    if not isinstance(named, str) or not named:
        return False
    q = Path(named) if Path(named).is_absolute() else path.parent / named
    try:
        if q.exists():
            return q.resolve() == ledger.resolve()
        return ledger.parent.resolve() in (path.parent.resolve(), (path.parent / "ledger").resolve())
    except OSError:
        return False


def locate(ledger: Path) -> list[Path]:
    """The trajectory of the run that kept ``ledger``: beside it (``ledger-run mini``, the demo), or in
    the directory above (a SWE-bench instance's ``<iid>.traj.json`` beside its ``ledger/``)."""
    here = ledger.parent
    found = sorted(here.glob("*.traj.json")) + (
        sorted(here.parent.glob("*.traj.json")) if here.name == "ledger" else []
    )
    return [p for p in found if _names(p, ledger)][:1]


FORMAT = RecordedFormat(
    "mini-swe-agent",
    "/testbed",
    SUBMISSION,
    load,
    observation,
    with_answer,
    locate=locate,
    conversation=conversation,
)
