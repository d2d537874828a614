"""Replay of recorded trajectories against the real repository: what the ledger would have reused,
nudged and saved, and whether every reuse would have been exact.

For each trajectory the repository is checked out at the instance's base commit in a fresh work
tree (``/testbed`` by default, where the recorded commands expect it), and every recorded command
runs, in order, through a LedgerRuntime in shadow mode: the verdict is decided and recorded, and the
command executes anyway, so each REUSE can be compared with what the command prints now.

Per command it records the verdict, the command's class, the time the ledger added, the size of the
state view the model would have received before it, and two independent judgements:

- soundness: an exact REUSE must hand back what the command prints now (volatile.py masks timings
  and the like); a subsumed-read REUSE must claim lines whose text is still exactly the same;
- the oracle of redundancy, computed from the fresh outputs and the replay's own SHA-256 of the
  files: a command is redundant when its output equals an earlier output of the same command
  (``exact``), or when every line it shows of a file was shown before while the file had the same
  content (``subsumed``).

``observations_only`` estimates redundancy from the recorded outputs alone, without a repository.
"""

from __future__ import annotations

import hashlib
import json
import re
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .commands import ANY_FILE, Analysis, analyze
from .config import LedgerConfig
from .executor import LocalExecutor
from .observe import Truncation
from .programs import resolve
from .records import Attempt, CommandClass, VerdictKind
from .runtime import LedgerRuntime, answer_text
from .trajectories import Trajectory, parse_observation
from .volatile import mask, same

RESULT_VERSION = 1
_NUMBER_PREFIX = re.compile(r"^\s*\d+\t")


class Skip(Exception):
    """A trajectory that cannot be replayed; the message says why."""


@dataclass
class ReplaySettings:
    repos: list[Path]
    out: Path
    workdir: Path = Path("/testbed")
    base_commits: dict[str, str] = field(default_factory=dict)
    repo_names: dict[str, str] = field(default_factory=dict)
    timeout: int | None = None  # None: the trajectory's own (60 s in the shared runs)
    config: LedgerConfig = field(default_factory=lambda: LedgerConfig(shadow=True))
    fresh_python: bool = True  # a new virtualenv per trajectory: pip installs stay there


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
    keep = set(keys[:h]) | set(keys[len(keys) - t:] if t else [])
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

    def judge(self, a: Analysis, output: str, shas: dict[str, str | None], totals: dict[str, int | None],
              epoch: int) -> str | None:
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

    def add(self, a: Analysis, output: str, shas: dict[str, str | None], totals: dict[str, int | None],
            epoch_after: int) -> None:
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


def _checkout(repo: Path, commit: str, workdir: Path) -> None:
    if workdir.exists() or workdir.is_symlink():
        if workdir.is_dir() and not workdir.is_symlink():
            shutil.rmtree(workdir)
        else:
            workdir.unlink()
    workdir.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    for args in (["clone", "-q", "--shared", "--no-checkout", str(repo), str(workdir)],
                 ["-C", str(workdir), "checkout", "-q", "--detach", commit]):
        r = subprocess.run(["git", *args], capture_output=True, text=True, env=env, timeout=900)
        if r.returncode != 0:
            raise Skip(f"git {args[0] if args[0] != '-C' else args[2]} failed: {r.stderr.strip()[:200]}")
    for args in (["config", "user.email", "replay@example.com"], ["config", "user.name", "replay"]):
        subprocess.run(["git", "-C", str(workdir), *args], capture_output=True, timeout=60)


def _has_commit(repo: Path, commit: str) -> bool:
    r = subprocess.run(["git", "--git-dir", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    return r.returncode == 0


def _python_env(dest: Path) -> dict[str, str]:
    """A fresh virtualenv (no project packages in it) first on PATH: what agents pip install lands there."""
    if dest.exists():
        shutil.rmtree(dest)
    subprocess.run([sys.executable, "-m", "venv", str(dest)], check=True, capture_output=True, timeout=300)
    return {"PATH": f"{dest}/bin:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(dest)}


def result_path(out: Path, instance_id: str) -> Path:
    return out / f"{instance_id}.json"


def replay_one(traj: Trajectory, settings: ReplaySettings, on_step: Callable[[int, int], None] | None = None) -> dict:
    """Replay one trajectory; returns its result (also written to OUT/<instance>.json)."""
    commit = traj.base_commit or settings.base_commits.get(traj.instance_id)
    if not commit:
        raise Skip("no base commit (give --instances with the SWE-bench instances)")
    repo = next((r for r in settings.repos if _has_commit(r, commit)), None)
    if repo is None:
        raise Skip(f"base commit {commit[:12]} is in none of the --repo directories")
    workdir = settings.workdir
    _checkout(repo, commit, workdir)
    run_dir = settings.out / "ledgers" / traj.instance_id
    if run_dir.exists():
        shutil.rmtree(run_dir)
    env = {**traj.env, "PYTHONHASHSEED": "0", "PAGER": "cat", "GIT_PAGER": "cat", "HOME": str(workdir.parent / ".replay-home")}
    if settings.fresh_python:
        env.update(_python_env(Path("/tmp") / f"ledger-replay-venv-{os.getpid()}"))
    (workdir.parent / ".replay-home").mkdir(exist_ok=True)
    timeout = settings.timeout or traj.timeout
    executor = LocalExecutor(timeout=timeout, env=env)
    config = settings.config.with_(shadow=True)
    trunc = Truncation(config.output_limit_chars, config.output_head_chars, config.output_tail_chars)
    rt = LedgerRuntime(workdir, run_dir, config, truncation=trunc,
                       meta={"replay_of": traj.instance_id, "source": traj.source})
    oracle = Oracle(trunc)
    rows: list[dict] = []
    commands = traj.commands
    started = time.time()
    try:
        for i, s in enumerate(commands):
            if on_step:
                on_step(i, len(commands))
            view_tokens = rt.view().tokens
            a = analyze(s.command, str(workdir))
            paths = [v.path for v in a.views]
            shas = {p: sha256_file(p) for p in paths}
            totals = {p: (fs.lines if (fs := rt.workspace.file_state(p)) else None) for p in paths}
            t0 = time.perf_counter()
            res = rt.run(s.command, executor, step=i + 1)
            total = time.perf_counter() - t0
            att = rt.state.attempts[-1]
            verdict = att.verdict
            judged = oracle.judge(a, res.output, shas, totals, att.epoch_before)
            row = {
                "step": i + 1, "kind": s.kind, "command": s.command[:300], "class": att.command_class.value,
                "parsed": att.parsed, "pure": att.pure, "verdict": verdict.kind.value, "reason": verdict.reason,
                "form": verdict.form.value if verdict.form else None, "exit": att.exit_code,
                "recorded_exit": s.returncode, "output_chars": len(res.output), "exec_ms": round(att.duration_s * 1000, 3),
                "overhead_ms": round((total - att.duration_s) * 1000, 3), "view_tokens": view_tokens,
                "prompt_tokens": (traj.prompt_chars[i] + 3) // 4 if i < len(traj.prompt_chars) else None,
                "redundant": judged,
            }
            if verdict.kind is VerdictKind.REUSE:
                row.update(_check_reuse(rt, att, res.output, a))
            rows.append(row)
            oracle.add(a, res.output, shas, totals, att.epoch_after)
    finally:
        rt.close()
    result = {"version": RESULT_VERSION, "instance_id": traj.instance_id, "status": "done",
              "repo": settings.repo_names.get(traj.instance_id) or traj.repo, "base_commit": commit,
              "commands": len(rows), "seconds": round(time.time() - started, 1), "faults": rt.faults,
              "rows": rows, "summary": summarize_rows(rows)}
    settings.out.mkdir(parents=True, exist_ok=True)
    result_path(settings.out, traj.instance_id).write_text(json.dumps(result, indent=1))
    return result


def _check_reuse(rt: LedgerRuntime, att: Attempt, fresh: str, a: Analysis) -> dict:
    """Would this REUSE have been exact? And what would it have handed the model?"""
    v = att.verdict
    ref = rt.state.attempt(v.ref_attempt) if v.ref_attempt is not None else None
    earlier = rt.store.text(ref.output_hash) if ref is not None and ref.output_hash else None
    shown, _ = answer_text(v, ref, earlier)
    out = {"would_show_chars": len(shown), "reuse": "exact" if ref is not None else "subsumed"}
    if ref is not None:
        sound = earlier is not None and same(earlier, fresh)
        out["sound"] = sound
        if not sound:
            out["evidence"] = {"ref_step": ref.step, "earlier": (earlier or "")[:400], "fresh": fresh[:400]}
        return out
    # A subsumed read: the lines it asks for, now, against the lines the covering steps showed.
    view = a.views[0]
    fs = rt.workspace.file_state(view.path)
    now = _lines_of(view, fresh, fs.lines if fs else None)
    then: dict[int, str] = {}
    for o in rt.state.observations_of(view.path):
        if o.step in v.covered_by:
            src = rt.state.attempt(o.attempt)
            text = rt.store.text(src.output_hash) if src and src.output_hash else None
            src_a = analyze(src.command, src.cwd) if src else None
            if text is not None and src_a is not None and len(src_a.views) == 1:
                sv = src_a.views[0]
                if sv.kind == "lines":
                    lines = _lines_of(sv, text, o.lines_total)
                    if lines:
                        then.update(_visible(text, rt.truncation, lines))
                elif sv.numbered:
                    then.update(_visible_numbered(text, rt.truncation))
    if not now:
        out["sound"] = None  # the fresh output is not a plain run of lines: cannot check line by line
        return out
    sound = all(then.get(n) == t for n, t in now.items())
    out["sound"] = sound
    if not sound:
        missing = [n for n, t in now.items() if then.get(n) != t][:5]
        out["evidence"] = {"covered_by": list(v.covered_by), "lines_differing": missing}
    return out


def summarize_rows(rows: list[dict]) -> dict:
    """Counts of one trajectory (summed across trajectories by the report)."""
    s: dict[str, Any] = {"commands": len(rows), "parsed": sum(r["parsed"] for r in rows)}
    s["verdicts"] = {}
    s["by_class"] = {}
    for r in rows:
        s["verdicts"][r["verdict"]] = s["verdicts"].get(r["verdict"], 0) + 1
        c = s["by_class"].setdefault(r["class"], {})
        c[r["verdict"]] = c.get(r["verdict"], 0) + 1
    reuses = [r for r in rows if r["verdict"] == "REUSE"]
    s["reuse_exact"] = sum(r.get("reuse") == "exact" for r in reuses)
    s["reuse_subsumed"] = sum(r.get("reuse") == "subsumed" for r in reuses)
    s["unsound"] = sum(r.get("sound") is False for r in reuses)
    s["unverified"] = sum(r.get("sound") is None for r in reuses)
    red = [r for r in rows if r["redundant"]]
    s["redundant"] = len(red)
    s["redundant_exact"] = sum(r["redundant"] == "exact" for r in red)
    s["redundant_subsumed"] = sum(r["redundant"] == "subsumed" for r in red)
    s["caught_reuse"] = sum(r["verdict"] == "REUSE" for r in red)
    s["caught_any"] = sum(r["verdict"] in ("REUSE", "NUDGE") for r in red)
    s["reuse_not_redundant"] = sum(1 for r in reuses if not r["redundant"])
    s["chars_spared"] = sum(r["output_chars"] - r.get("would_show_chars", r["output_chars"]) for r in reuses)
    s["not_executed"] = len(reuses)
    return s


def observations_only(traj: Trajectory, trunc: Truncation) -> dict:
    """Redundancy estimated from the recorded outputs alone (no repository): exact repeats with the
    same recorded output (tests and scripts only with no command in between that may have written),
    and line reads of a file that no command since could have written, judged by the analysis."""
    seen_out: dict[tuple[str, str], list[tuple[str, int]]] = {}
    shown: dict[str, set[int]] = {}
    writes = 0  # commands so far that may have written something
    rows = []
    for i, s in enumerate(traj.commands):
        a = analyze(s.command, "/testbed")
        raw = s.observation or ""
        rc, out = parse_observation(raw) if "<returncode>" in raw else (s.returncode, raw)
        judged = None
        key = (a.normalized, a.cwd)
        whole = a.command_class not in (CommandClass.INSPECT, CommandClass.SEARCH) or not a.pure
        if a.command_class not in (CommandClass.MODIFY, CommandClass.ENV) and not a.submits and any(
                o == mask(out) and (not whole or w == writes) for o, w in seen_out.get(key, [])):
            judged = "exact"
        span = _recorded_span(a, out, trunc) if rc in (0, None) else None
        if judged is None and span and a.command_class is CommandClass.INSPECT and \
                set(range(span[1], span[2] + 1)) <= shown.get(span[0], set()):
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
    return {"instance_id": traj.instance_id, "commands": len(rows), "redundant": len(red),
            "redundant_exact": sum(r["redundant"] == "exact" for r in red),
            "redundant_subsumed": sum(r["redundant"] == "subsumed" for r in red),
            "redundant_chars": sum(r["chars"] for r in red), "rows": rows}


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
        rng = resolve(v.selectors, 10 ** 9)
        if rng and n == rng[1] - rng[0] + 1:
            return (v.path, rng[0], rng[1])
    return None
