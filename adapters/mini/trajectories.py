"""mini-swe-agent's recorded runs, read from its ``.traj.json`` files or ``actions.jsonl.gz`` rows
into the core's ``Trajectory`` (``ledger-run replay`` finds this reader through the
``ledger_runtime.trajectories`` entry point: ``FORMAT``).

A ``Trajectory`` is the list of ``RecordedStep``s (the command, and what the agent saw: return
code and output) of one instance. Both formats of mini-swe-agent are read: text-based runs (the
command in a fenced ```bash or ```mswea_bash_command block, the observation as
``<returncode>N</returncode><output>...</output>``) and tool-call runs (``extra.actions``, tool
messages). A file that cannot be read raises ``TrajectoryError`` with the reason, never a
traceback; one malformed row of a JSONL file is skipped with a note.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any, Iterator

from ledger_adapters.mini.context import text_of
from ledger_adapters.mini.format import MARKER, SUBMISSION
from ledger_runtime import RecordedFormat, RecordedStep, Trajectory, TrajectoryError, Truncation

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


def from_traj_json(path: Path) -> Trajectory:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise TrajectoryError(f"{path}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        msg = e.msg[:-3] if e.msg.endswith(" at") else e.msg  # json's "Invalid control character at"
        raise TrajectoryError(f"{path}: not JSON: {msg} at line {e.lineno}, column {e.colno}") from None
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise TrajectoryError(f"{path}: not a mini-swe-agent trajectory (no messages list)")
    iid = data.get("instance_id") or path.name.removesuffix(".traj.json")
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
                    row = json.loads(line)
                    by_id.setdefault(row["instance_id"], []).append(row)
                except (ValueError, KeyError, TypeError) as e:
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


FORMAT = RecordedFormat("mini-swe-agent", "/testbed", SUBMISSION, load, observation, with_answer)
