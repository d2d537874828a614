"""Replay of recorded trajectories against the real repository: what the model would have been
handed for each command, what that spared, and whether every answer stood for exactly the output.

For each trajectory the repository is checked out at the instance's base commit in a fresh work
tree (where the recorded commands expect it, which the trajectory's format says: ``/testbed`` for
mini-swe-agent's SWE-bench runs), and every recorded command
runs, in order, through a LedgerRuntime in shadow mode: verdicts and answers are decided and
recorded (the ledger keeps the text the model would have received), and the command executes, so
each answer can be checked against what the command prints now.

Per command it records the verdict, the answer's kind (raw, whole, spans, delta; reused for a run
not run again; refused), the command's class, the characters the model would have seen with and
without the ledger (after the agent's cut), the time the ledger added, the size of the state view
the model would have received before it, and independent judgements:

- soundness (answers/transcript.py): the answer, read as the model reads it, expands to the fresh output
  byte for byte, and every reference names lines its source showed literally (a run not run again,
  in a ledger from before reuse_runs was removed: what the run prints now, also with volatile text
  masked);
- what could be spared: characters of whole lines of the output the model had already been shown
  verbatim (``RepeatedLines``, from the outputs alone);
- the oracle of redundancy, computed from the fresh outputs and the replay's own SHA-256 of the
  files: a command is redundant when its output equals an earlier output of the same command
  (``exact``), or when every line it shows of a file was shown before while the file had the same
  content (``subsumed``);
- the ledger's claims checked against the files themselves (replay/truth.py): every line of the
  state view at every step, every NUDGE and REVISE reason, and (with context policies) every stub
  sent: ``claims`` in the result, false ones with why.

``observations_only`` estimates redundancy from the recorded outputs alone, without a repository.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ledger_harness.replay import tree as replay_tree
from ledger_harness.replay.truth import Files, entry_true, verdict_true
from ledger_harness.replay.truth import Tally as ClaimTally
from ledger_harness.replay.volatile import mask, same
from ledger_runtime.analysis.commands import ANY_FILE, Analysis, analyze
from ledger_runtime.analysis.programs import resolve
from ledger_runtime.answers.build import AnswerKind, ExpandError, split_lines
from ledger_runtime.answers.transcript import Transcript
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.ledger.observe import Truncation
from ledger_runtime.ledger.private import DIRECTORY, private_dir, refusal, write_private
from ledger_runtime.records import Attempt, CommandClass
from ledger_runtime.runtime import LedgerRuntime
from ledger_runtime.trajectories import Trajectory

RESULT_VERSION = 1
REFERRING = ("whole", "spans", "delta", "reused")  # answers that stand for an output through a reference
_NUMBER_PREFIX = re.compile(r"^\s*\d+\t")


class Skip(Exception):
    """A trajectory that cannot be replayed; the message says why."""


@dataclass
class ReplaySettings:
    repos: list[Path]
    out: Path
    workdir: Path | None = None  # None: where the trajectory's format says its commands ran
    base_commits: dict[str, str] = field(default_factory=dict)
    repo_names: dict[str, str] = field(default_factory=dict)
    timeout: int | None = None  # None: the trajectory's own (60 s in the shared runs)
    config: LedgerConfig = field(default_factory=lambda: LedgerConfig(shadow=True))
    fresh_python: bool = True  # a new virtualenv per trajectory: pip installs stay there
    force: bool = False  # use --workdir even when it holds files a replay did not make
    code: dict = field(default_factory=dict)  # the code it ran (version, commit): each result names it
    contexts: tuple[str, ...] = ()  # context policies to measure in the open loop (replay/meter.py)
    price_models: tuple[str, ...] = ("gpt-5-mini",)  # whose prices and tokens the calls are billed in
    keep_prompts: tuple[str, ...] = ()  # arms whose prompts the result holds, call by call
    # what the ledger is given as each command's output: "fresh" (what it prints now) or "recorded" (what
    # the agent got in the recorded run, in its own environment; the command still runs, for its effects)
    outputs: str = "fresh"


def sha256_file(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _lines_of(view, output: str, total: int | None) -> dict[int, str] | None:
    """File line number -> text, for a command whose output is exactly a run of a file's lines."""
    if total is None or view.kind != "lines":
        return None
    rng = resolve(view.selectors, total)
    if rng is None:
        return None
    lo, hi = rng
    lines = output.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != hi - lo + 1:
        return None
    if view.numbered:
        lines = [_NUMBER_PREFIX.sub("", ln, count=1) for ln in lines]
    return {lo + i: text for i, text in enumerate(lines)}


_NL_LINE = re.compile(r"^\s*(\d+)\t(.*)$")
_GREP_LINE = re.compile(r"^(\d+)[:-](.*)$")


def _numbered_lines(output: str) -> dict[int, str]:
    """File lines of an output whose lines carry their numbers (nl, cat -n, grep -n)."""
    out: dict[int, str] = {}
    for ln in output.split("\n"):
        m = _NL_LINE.match(ln) or _GREP_LINE.match(ln)
        if m:
            out[int(m.group(1))] = m.group(2)
    return out


def _visible_numbered(output: str, trunc: Truncation) -> dict[int, str]:
    """Numbered lines of an output, as far as the model saw them (only whole lines of a cut one)."""
    cut = trunc.visible(output)
    if cut is None:
        return _numbered_lines(output)
    head, tail = cut
    head_lines = head.split("\n")[:-1]  # the last piece is partial (or empty)
    tail_lines = tail.split("\n")[1:]  # the first piece is partial
    return _numbered_lines("\n".join(head_lines)) | _numbered_lines("\n".join(tail_lines))


def _visible(output: str, trunc: Truncation, numbers: dict[int, str]) -> dict[int, str]:
    """The part of ``numbers`` the model actually saw of an output it may have got cut."""
    if not trunc.cuts(output):
        return numbers
    head, tail = trunc.visible(output) or ("", "")
    h = head.count("\n")
    pieces = tail.split("\n")
    if pieces and pieces[-1] == "":
        pieces.pop()
    t = max(len(pieces) - 1, 0)
    keys = sorted(numbers)
    keep = set(keys[:h]) | set(keys[len(keys) - t :] if t else [])
    return {k: numbers[k] for k in keep}


class Oracle:
    """Redundancy from fresh outputs and independent file hashes (see the module docstring).

    Exact: the same command printed the same (masked) output before; for tests and scripts, whose
    output depends on the whole workspace, also with no file changed since (by the snapshots).
    Subsumed: every line a line read shows was shown before (cat, sed -n, nl, or numbered grep
    output), while the file had the same SHA-256, and the model saw those lines (not cut away)."""

    def __init__(self, trunc: Truncation):
        self.trunc = trunc
        self.outputs: dict[tuple[str, str], list[tuple[str, int]]] = {}  # (normalized, cwd) -> (masked, epoch after)
        self.shown: dict[str, dict[str, dict[int, str]]] = {}  # path -> sha256 -> lines seen with that content

    def judge(
        self, a: Analysis, output: str, shas: dict[str, str | None], totals: dict[str, int | None], epoch: int
    ) -> str | None:
        """'exact', 'subsumed' or None, judged before this output is added."""
        cls = a.command_class
        if cls not in (CommandClass.MODIFY, CommandClass.ENV) and not a.submits:
            masked = mask(output)
            whole_workspace = cls not in (CommandClass.INSPECT, CommandClass.SEARCH) or not a.pure
            for earlier, earlier_epoch in self.outputs.get((a.normalized, a.cwd), []):
                if earlier == masked and (not whole_workspace or earlier_epoch == epoch):
                    return "exact"
        if a.outputs == 1 and len(a.views) == 1 and a.views[0].kind == "lines" and cls is CommandClass.INSPECT:
            v = a.views[0]
            lines = _lines_of(v, output, totals.get(v.path))
            sha = shas.get(v.path)
            if lines and sha is not None:
                seen = self.shown.get(v.path, {}).get(sha, {})
                if all(seen.get(n) == text for n, text in lines.items()):
                    return "subsumed"
        return None

    def add(
        self, a: Analysis, output: str, shas: dict[str, str | None], totals: dict[str, int | None], epoch_after: int
    ) -> None:
        self.outputs.setdefault((a.normalized, a.cwd), []).append((mask(output), epoch_after))
        if a.outputs != 1:
            return
        for v in a.views:
            sha = shas.get(v.path)
            if sha is None:
                continue
            if v.kind == "lines":
                lines = _lines_of(v, output, totals.get(v.path))
                seen = _visible(output, self.trunc, lines) if lines else {}
            elif v.numbered:
                seen = _visible_numbered(output, self.trunc)
            else:
                seen = {}
            if seen:
                self.shown.setdefault(v.path, {}).setdefault(sha, {}).update(seen)


def _checkout(repo: Path, commit: str, workdir: Path, force: bool = False) -> None:
    try:
        replay_tree.check_usable(workdir, force)
        replay_tree.clear(workdir)
    except replay_tree.TreeError as e:
        raise Skip(str(e)) from None
    except OSError as e:
        raise Skip(f"cannot empty --workdir {workdir}: {e.strerror}") from None
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    for args in (
        ["clone", "-q", "--shared", "--no-checkout", str(repo), str(workdir)],
        ["-C", str(workdir), "checkout", "-q", "--detach", commit],
    ):
        r = subprocess.run(["git", *args], capture_output=True, text=True, env=env, timeout=900)
        if r.returncode != 0:
            raise Skip(f"git {args[0] if args[0] != '-C' else args[2]} failed: {r.stderr.strip()[:200]}")
    replay_tree.mark(workdir)
    for args in (["config", "user.email", "replay@example.com"], ["config", "user.name", "replay"]):
        subprocess.run(["git", "-C", str(workdir), *args], capture_output=True, timeout=60)


def has_commit(repo: Path, commit: str) -> bool:
    r = subprocess.run(["git", "--git-dir", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    return r.returncode == 0


def _python_env(dest: Path) -> dict[str, str]:
    """A fresh virtualenv (no project packages in it) first on PATH: what agents pip install lands there."""
    subprocess.run([sys.executable, "-m", "venv", str(dest)], check=True, capture_output=True, timeout=300)
    return {"PATH": f"{dest}/bin:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(dest)}


NAME_MAX_CHARS = 200  # a file name stays under every file system's limit (255 bytes), with room for ".json"
RUN_MARK = ".ledger-replay-run"  # in a ledger directory a replay made: the next replay of the instance may remove it
_NOT_IN_NAME = re.compile(r"[/\\\x00-\x1f\x7f]")


def instance_name(instance_id: str) -> str:
    """A trajectory's ``instance_id`` as a plain file name (its result's, its ledger directory's):
    never a path, whatever the file says. A ``/``, a ``\\``, a control character or a leading ``.``
    becomes ``_`` (``../x`` is ``_._x``, ``/home/you`` is ``_home_you``); an empty id is ``_``; a
    long one is cut, with a digest of the whole so that two long ids stay apart."""
    name = _NOT_IN_NAME.sub("_", instance_id)
    name = "_" + name[1:] if name.startswith(".") else name or "_"
    if len(name.encode("utf-8", "surrogateescape")) > NAME_MAX_CHARS:
        digest = hashlib.sha256(instance_id.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        name = name.encode("utf-8", "surrogateescape")[: NAME_MAX_CHARS - 17].decode("utf-8", "ignore") + "-" + digest
    return name


def result_path(out: Path, instance_id: str) -> Path:
    """Where an instance's result goes: inside ``out`` whatever the trajectory names it (``instance_name``)."""
    return out / f"{instance_name(instance_id)}.json"


def ledger_dir(out: Path, instance_id: str) -> Path:
    """A fresh directory for an instance's ledger, ``OUT/ledgers/<instance_name>``: one an earlier replay
    made (its mark in it) is removed first; anything else there is never removed (Skip, saying so)."""
    parent = private_dir(out / "ledgers")
    run_dir = parent / instance_name(instance_id)
    try:
        st = os.lstat(run_dir)
    except FileNotFoundError:
        st = None
    if st is not None:
        why = refusal(st, os.geteuid(), DIRECTORY)
        if why is None and not os.path.isfile(run_dir / RUN_MARK):
            why = "a replay did not make it (no replay's mark in it)"
        if why is not None:
            raise Skip(f"{run_dir} exists and {why}: it is not removed; move it away, or give another -o")
        shutil.rmtree(run_dir)  # never follows a link inside it
    private_dir(run_dir)
    write_private(run_dir / RUN_MARK, "made by ledger-run replay; the next replay of this instance removes it\n")
    return run_dir


def visible_chars(text: str, trunc: Truncation) -> int:
    """Characters of ``text`` the model sees once the agent has cut it."""
    kept = trunc.kept(text)
    return len(text) if kept is None else min(len(text), kept[0] + kept[1])


class RepeatedLines:
    """An independent measure of what dedupe could spare: characters of an output that are whole
    lines the model had already been shown verbatim (in the visible part of an earlier output, as
    the agent got them without the ledger), and whole outputs it had already been shown."""

    def __init__(self, trunc: Truncation):
        self.trunc = trunc
        self.lines: set[str] = set()
        self.outputs: set[str] = set()

    def judge(self, output: str) -> tuple[int, bool]:
        lines = split_lines(output)
        kept = self.trunc.kept(output)
        if kept is not None:  # the agent shows only the head and the tail of it anyway
            lines = split_lines(output[: kept[0]])[:-1] + (split_lines(output[-kept[1] :])[1:] if kept[1] else [])
        return sum(len(x) for x in lines if x in self.lines), output in self.outputs

    def add(self, output: str) -> None:
        kept = self.trunc.kept(output)
        self.outputs.add(output)
        if kept is None:
            self.lines.update(split_lines(output))
        else:
            self.lines.update(split_lines(output[: kept[0]])[:-1])
            if kept[1]:
                self.lines.update(split_lines(output[-kept[1] :])[1:])


def replay_one(traj: Trajectory, settings: ReplaySettings, on_step: Callable[[int, int], None] | None = None) -> dict:
    """Replay one trajectory; returns its result (also written to OUT/<instance>.json)."""
    commit = traj.base_commit or settings.base_commits.get(traj.instance_id)
    if not commit:
        raise Skip("no base commit: give --base-commit, or --instances with the SWE-bench instances")
    repo = next((r for r in settings.repos if has_commit(r, commit)), None)
    if repo is None:
        raise Skip(f"base commit {commit[:12]} is in none of the --repo directories")
    workdir = settings.workdir or (Path(traj.recorded.root) if traj.recorded.root else None)
    if workdir is None:
        raise Skip("no work tree: give --workdir (the trajectory's format names none)")
    run_dir = ledger_dir(settings.out, traj.instance_id)
    _checkout(repo, commit, workdir, settings.force)
    scratch = Path(tempfile.mkdtemp(prefix="ledger-replay-"))  # HOME and the virtualenv: removed at the end
    try:
        return _replay_in(traj, settings, commit, workdir, run_dir, scratch, on_step)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _replay_in(
    traj: Trajectory,
    settings: ReplaySettings,
    commit: str,
    workdir: Path,
    run_dir: Path,
    scratch: Path,
    on_step: Callable[[int, int], None] | None,
) -> dict:
    (scratch / "home").mkdir()
    env = {**traj.env, "PYTHONHASHSEED": "0", "PAGER": "cat", "GIT_PAGER": "cat", "HOME": str(scratch / "home")}
    if settings.fresh_python:
        env.update(_python_env(scratch / "venv"))
    timeout = settings.timeout or traj.timeout
    executor = LocalExecutor(timeout=timeout, env=env)
    config = settings.config.with_(shadow=True)
    trunc = Truncation(config.truncation.limit_chars, config.truncation.head_chars, config.truncation.tail_chars)
    rt = LedgerRuntime(
        workdir,
        run_dir,
        config,
        truncation=trunc,
        submission=traj.recorded.submission,
        meta={"replay_of": traj.instance_id, "source": traj.source},
        line_facts=bool(settings.contexts) or None,  # the meter measures context policies: it asks of them
    )
    oracle = Oracle(trunc)
    repeated = RepeatedLines(trunc)
    files = Files(str(workdir), commit)
    files.after_step(0)
    claims = ClaimTally()
    transcript = Transcript(rt.state, rt.store.text)
    meter = None
    if settings.contexts:
        from ledger_harness.replay.meter import CostMeter, load_pricing
        from ledger_runtime.held.context import ContextPolicy

        meter = CostMeter(
            traj,
            [ContextPolicy.parse(c) for c in settings.contexts],
            [load_pricing(m) for m in settings.price_models],
            trunc,
            view_share=config.context.view_share,
            note_chars=config.context.note_chars,
            keep=settings.keep_prompts,
            truth=(files, claims),
        )
    rows: list[dict] = []
    commands = traj.commands
    started = time.time()
    recorded = settings.outputs == "recorded"
    try:
        for i, s in enumerate(commands):
            if on_step:
                on_step(i, len(commands))
            view = rt.view()
            view_tokens = view.tokens
            _check_view(rt, files, claims, i)
            if meter is not None:  # the model calls up to the one that asked for this command
                meter.measure(s.call, rt)
            a = analyze(s.command, str(workdir), traj.recorded.submission)
            paths = [v.path for v in a.views]
            shas = {p: sha256_file(p) for p in paths}
            totals = {p: (fs.lines if (fs := rt.workspace.file_state(p)) else None) for p in paths}
            t0 = time.perf_counter()
            res = rt.run(s.command, _as_recorded(traj, s, executor) if recorded else executor, step=i + 1)
            total = time.perf_counter() - t0
            att = rt.state.attempts[-1]
            verdict = att.verdict
            said = verdict_true(verdict, files, i + 1, rows)
            claims.add(said, f"step {i + 1}: {verdict.kind.value} {verdict.reason[:200]}")
            files.after_step(i + 1, _named(rt))
            judged = oracle.judge(a, res.output, shas, totals, att.epoch_before)
            rep_chars, rep_whole = repeated.judge(res.output)
            shown = transcript.shown(att) or ""
            kind = transcript.kind(att)
            row = {
                "step": i + 1,
                "kind": s.kind,
                "command": rt.redactor.mask(s.command)[:300],
                "class": att.command_class.value,
                "parsed": att.parsed,
                "pure": att.pure,
                "verdict": verdict.kind.value,
                "reason": verdict.reason,
                "answer": kind,
                "exit": att.exit_code,
                "recorded_exit": s.returncode,
                "output_chars": len(res.output),
                "visible_chars": visible_chars(res.output, trunc),
                "shown_chars": len(shown),
                "shown_visible_chars": visible_chars(shown, trunc),
                "repeated_chars": rep_chars,
                "repeated_whole": rep_whole,
                "exec_ms": round(att.duration_s * 1000, 3),
                "overhead_ms": round((total - att.duration_s) * 1000, 3),
                "view_tokens": view_tokens,
                "prompt_tokens": (traj.prompt_chars[i] + 3) // 4 if i < len(traj.prompt_chars) else None,
                "redundant": judged,
            }
            # the ledger keeps the output masked (and cut, when long): its answer is checked against it so
            row.update(_soundness(transcript, att, rt.stored_output(res.output), kind))
            rows.append(row)
            if meter is not None:
                meter.attempt_done(s.reply, att.id, shown, res.output)
            oracle.add(a, res.output, shas, totals, att.epoch_after)
            repeated.add(res.output)
        if meter is not None:
            meter.measure(None, rt)
    finally:
        rt.close()
    result = {
        "version": RESULT_VERSION,
        "instance_id": traj.instance_id,
        "status": "done",
        "code": settings.code,
        "outputs": settings.outputs,
        "repo": settings.repo_names.get(traj.instance_id) or traj.repo,
        "base_commit": commit,
        "commands": len(rows),
        "seconds": round(time.time() - started, 1),
        "faults": rt.faults,
        "claims": rt.redactor.mask_obj(claims.as_dict()),
        "rows": rt.redactor.mask_obj(rows),
        "summary": summarize_rows(rows),
        **({"cost": meter.result()} if meter is not None else {}),
    }
    private_dir(settings.out)
    write_private(result_path(settings.out, traj.instance_id), json.dumps(result, indent=1))
    return result


def _named(rt: LedgerRuntime) -> set[str]:
    """The paths the ledger's records name (what its claims may be about)."""
    return set(rt.state.observed_paths()) | {m.path for m in rt.state.modifications}


def _check_view(rt: LedgerRuntime, files: Files, claims: ClaimTally, step: int) -> None:
    """Every line of the state view the model would be told from now, against the files (after ``step``)."""
    for e in rt.view(as_applied=True).entries:
        if e.claim:
            claims.add(entry_true(e.claim, files, rt.state), f"after step {step}: {e.text.strip()[:200]}")


def _as_recorded(traj: Trajectory, s, execute: Callable[[str, str], Any]) -> Callable[[str, str], Any]:
    """Runs the command (its effects on the work tree are real), and hands the ledger the output the
    agent got for step ``s`` in the recorded run, with its return code (``--outputs recorded``); a
    step with no recorded output gets what the command printed now."""

    def run(command: str, cwd: str):
        res = execute(command, cwd)
        if s.observation is None:
            return res
        rc, out = traj.recorded.observation(s.observation, s.returncode)
        return replace(res, output=out, returncode=rc if rc is not None else res.returncode, output_complete=True)

    return run


def _soundness(transcript: Transcript, att: Attempt, fresh: str, kind: str) -> dict:
    """The check of one answer against the fresh output (transcript.Check). Built from the fresh
    output (every command that ran): its expansion must be the output, byte for byte, and every
    reference must name what the model held. A run not run again (reuse_runs, removed): the earlier
    output it hands back against what the run prints now, exactly and with volatile text masked.
    A refusal stands for no output: nothing to check."""
    if kind == AnswerKind.REFUSED.value:
        return {"sound": None}
    check = transcript.check(att, fresh)
    out: dict[str, Any] = {"sound": check.sound}
    if kind == AnswerKind.REUSED.value:
        try:
            earlier = transcript.expanded(att)
        except ExpandError:
            earlier = None
        out["sound_masked"] = check.held and earlier is not None and same(earlier, fresh)
    if not check.sound:
        try:
            got = transcript.expanded(att)
        except ExpandError:
            got = None
        out["evidence"] = {
            "error": check.error,
            "exact": check.exact,
            "held": check.held,
            "why": check.why,
            "expanded": (got or "")[:400],
            "fresh": fresh[:400],
        }
    return out


def summarize_rows(rows: list[dict]) -> dict:
    """Counts of one trajectory (summed across trajectories by the report)."""
    s: dict[str, Any] = {"commands": len(rows), "parsed": sum(r["parsed"] for r in rows)}
    s["verdicts"] = {}
    s["by_class"] = {}
    s["answers"] = {}
    s["spared_by_kind"] = {}
    s["spared_by_class"] = {}
    s["visible_by_class"] = {}
    for r in rows:
        s["verdicts"][r["verdict"]] = s["verdicts"].get(r["verdict"], 0) + 1
        c = s["by_class"].setdefault(r["class"], {})
        c[r["verdict"]] = c.get(r["verdict"], 0) + 1
        s["answers"][r["answer"]] = s["answers"].get(r["answer"], 0) + 1
        spared = _spared(r)
        s["spared_by_kind"][r["answer"]] = s["spared_by_kind"].get(r["answer"], 0) + spared
        s["spared_by_class"][r["class"]] = s["spared_by_class"].get(r["class"], 0) + spared
        s["visible_by_class"][r["class"]] = s["visible_by_class"].get(r["class"], 0) + r["visible_chars"]
    s["checked"] = sum(r.get("sound") is not None for r in rows)
    # of those, the answers that hold a reference (the rest are the output as it is: compared with itself)
    s["checked_refs"] = sum(r.get("sound") is not None and r["answer"] in REFERRING for r in rows)
    s["unsound"] = sum(r.get("sound") is False for r in rows)
    s["unsound_masked"] = sum(r.get("sound") is False and r.get("sound_masked") is False for r in rows)
    s["output_chars"] = sum(r["output_chars"] for r in rows)
    s["visible_chars"] = sum(r["visible_chars"] for r in rows)
    s["shown_visible_chars"] = sum(r["shown_visible_chars"] for r in rows if r["answer"] != AnswerKind.REFUSED.value)
    s["chars_spared"] = sum(_spared(r) for r in rows)
    s["repeated_chars"] = sum(r["repeated_chars"] for r in rows)
    red = [r for r in rows if r["redundant"]]
    s["redundant"] = len(red)
    s["redundant_exact"] = sum(r["redundant"] == "exact" for r in red)
    s["redundant_subsumed"] = sum(r["redundant"] == "subsumed" for r in red)
    s["caught"] = sum(r["answer"] not in ("raw", "refused") for r in red)
    s["not_executed"] = sum(r["answer"] == AnswerKind.REUSED.value for r in rows)
    # run again here, not in the recorded run's image (the host's Python, no project installed)
    s["exit_differs"] = sum(r.get("recorded_exit") is not None and r["exit"] != r["recorded_exit"] for r in rows)
    s["exit_recorded"] = sum(r.get("recorded_exit") is not None for r in rows)
    return s


def _spared(r: dict) -> int:
    """Characters of output the answer spares the model (after the agent's cut, both sides)."""
    if r["answer"] == AnswerKind.REFUSED.value:
        return 0
    return r["visible_chars"] - r["shown_visible_chars"]


def observations_only(traj: Trajectory, trunc: Truncation) -> dict:
    """Redundancy estimated from the recorded outputs alone (no repository): exact repeats with the
    same recorded output (tests and scripts only with no command in between that may have written),
    and line reads of a file that no command since could have written, judged by the analysis."""
    seen_out: dict[tuple[str, str], list[tuple[str, int]]] = {}
    shown: dict[str, set[int]] = {}
    writes = 0  # commands so far that may have written something
    rows = []
    root = traj.recorded.root or "/"
    for i, s in enumerate(traj.commands):
        a = analyze(s.command, root, traj.recorded.submission)
        raw = s.observation or ""
        rc, out = traj.recorded.observation(raw, s.returncode)
        judged = None
        key = (a.normalized, a.cwd)
        whole = a.command_class not in (CommandClass.INSPECT, CommandClass.SEARCH) or not a.pure
        if (
            a.command_class not in (CommandClass.MODIFY, CommandClass.ENV)
            and not a.submits
            and any(o == mask(out) and (not whole or w == writes) for o, w in seen_out.get(key, []))
        ):
            judged = "exact"
        span = _recorded_span(a, out, trunc) if rc in (0, None) else None
        if (
            judged is None
            and span
            and a.command_class is CommandClass.INSPECT
            and set(range(span[1], span[2] + 1)) <= shown.get(span[0], set())
        ):
            judged = "subsumed"
        rows.append({"step": i + 1, "class": a.command_class.value, "redundant": judged, "chars": len(out)})
        seen_out.setdefault(key, []).append((mask(out), writes))
        may_write = a.command_class in (CommandClass.MODIFY, CommandClass.RUN, CommandClass.OTHER, CommandClass.ENV)
        if a.command_class in (CommandClass.RUN, CommandClass.OTHER, CommandClass.ENV) or ANY_FILE in a.writes:
            shown.clear()
        for w in a.writes:
            shown.pop(w, None)
        writes += may_write
        if span:
            shown.setdefault(span[0], set()).update(range(span[1], span[2] + 1))
    red = [r for r in rows if r["redundant"]]
    return {
        "instance_id": traj.instance_id,
        "commands": len(rows),
        "redundant": len(red),
        "redundant_exact": sum(r["redundant"] == "exact" for r in red),
        "redundant_subsumed": sum(r["redundant"] == "subsumed" for r in red),
        "redundant_chars": sum(r["chars"] for r in red),
        "rows": rows,
    }


def _recorded_span(a: Analysis, out: str, trunc: Truncation) -> tuple[str, int, int] | None:
    """The file lines a recorded output shows, when that can be told from the output alone."""
    if a.outputs != 1 or len(a.views) != 1 or a.views[0].kind != "lines" or trunc.cuts(out):
        return None
    v = a.views[0]
    n = out.count("\n") + (0 if out.endswith("\n") or not out else 1)
    if n == 0:
        return None
    if not v.selectors:
        return (v.path, 1, n)
    if all(sel[0] in ("range", "head") for sel in v.selectors):
        rng = resolve(v.selectors, 10**9)
        if rng and n == rng[1] - rng[0] + 1:
            return (v.path, rng[0], rng[1])
    return None
