"""How often each policy of the gate would have fired on real SWE-bench runs, and whether any fires
on the submission of a run that resolved its instance.

Input: the ledgers the replay benchmark wrote (``ledger-run replay ... -o swebench_runs/replay/results``,
one per trajectory, every recorded command executed again in shadow mode; see
``swebench_runs/replay/RESULTS.md``) and ``resolved.csv`` of the shared trajectories. For each ledger
the events are folded in order, and right before each command's attempt the gate's rules (the
built-ins with their defaults, plus ``protected-paths`` with the SWE-bench globs, as
``ledger-run swebench`` sets them) are asked about that command against the state so far. The run
itself is not changed: what the rules say is what they would have said at that point of the real
run. A file counts as existing unless the ledger saw it deleted.

Run: ``python swebench_runs/policies/policy_replay.py [--ledgers DIR] [--resolved CSV]``; prints a
table and writes ``swebench_runs/policies/results.json`` and ``RESULTS.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ledger_adapters.mini.format import SUBMISSION  # the recorded agent's marker
from ledger_harness.swebench.protected import SWEBENCH_PROTECTED
from ledger_runtime.analysis.commands import analyze
from ledger_runtime.decide.gate import build_rules, check_all
from ledger_runtime.decide.govern import WorkspaceNow
from ledger_runtime.decide.policies import BUILTINS
from ledger_runtime.ledger.state import UNKNOWN, LedgerState
from ledger_runtime.ledger.store import LedgerStore, NotALedger
from ledger_runtime.records import Attempt
from ledger_runtime.workspace.hashing import FileState

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LEDGERS = ROOT / "swebench_runs" / "replay" / "results" / "ledgers"
RESOLVED = (
    ROOT.parent
    / "shared"
    / "data"
    / "trajectories"
    / "20251118_mini-v1.15.0_gemini-3-pro-preview-20251118"
    / "resolved.csv"
)
EXISTS = FileState("exists", 0, None)
MIRRORS = Path("/work/.mirror")
REPOS = {
    "psf": "psf+requests",
    "pallets": "pallets+flask",
    "pytest-dev": "pytest-dev+pytest",
    "pylint-dev": "pylint-dev+pylint",
    "mwaskom": "mwaskom+seaborn",
    "pydata": "pydata+xarray",
    "sphinx-doc": "sphinx-doc+sphinx",
}


class BaseTree:
    """The files of the instance's repository at its base commit (what existed at the start)."""

    def __init__(self, iid: str, commit: str | None, root: str, mirrors: Path):
        self.root = root.rstrip("/") + "/"
        self.files: set[str] = set()
        self.dirs: set[str] = set()
        repo = mirrors / REPOS.get(iid.split("__")[0], "") / "repo"
        if commit and repo.exists():
            out = subprocess.run(
                ["git", "--git-dir", str(repo), "ls-tree", "-r", "--name-only", commit], capture_output=True, text=True
            ).stdout
            self.files = {self.root + p for p in out.splitlines()}
            self.dirs = {d for p in self.files for d in _parents(p)}

    def exists(self, path: str, state: LedgerState) -> bool:
        cur = state.current_hash(path)
        if cur is not UNKNOWN:
            return cur is not None
        return path in self.files


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(2, len(parts))]


def current_for(analysis, state: LedgerState, tree: BaseTree) -> WorkspaceNow:
    files = {w: (EXISTS if tree.exists(w, state) else None) for w in analysis.writes}
    return WorkspaceNow({}, files)


def replay_ledger(path: Path, mirrors: Path = MIRRORS) -> dict:
    store = LedgerStore.open(path)
    try:
        events = list(store.events())
    finally:
        store.close()
    state = LedgerState()
    rules = None
    tree = None
    fired = []
    gate_us: list[float] = []
    commands = 0
    for e in events:
        if e.get("kind") == "attempt":
            a = Attempt.from_dict(e)
            if rules is None:
                root = state.baseline.root if state.baseline else "/testbed"
                rules = build_rules({"protected-paths": {"globs": list(SWEBENCH_PROTECTED)}}, root, BUILTINS)
                tree = BaseTree(path.parent.name, state.baseline.head_commit if state.baseline else None, root, mirrors)
            analysis = analyze(a.command, a.cwd, SUBMISSION)
            commands += 1
            current = current_for(analysis, state, tree)
            t0 = time.perf_counter()
            verdicts = check_all(rules, analysis, state, current, lambda w, err: None)
            gate_us.append((time.perf_counter() - t0) * 1e6)
            for v in verdicts:
                fired.append(
                    {
                        "step": a.step,
                        "rule": v.rule,
                        "verdict": v.kind.value,
                        "reason": v.reason,
                        "command": a.command[:200],
                        "submission": analysis.submits,
                    }
                )
            # noop-edit is decided after a command: an edit whose attempt changed no file
        state.apply(e)
        if e.get("kind") == "attempt":
            pass
    for a in state.attempts:  # as the runtime decides it: an edit of files (not directories) that changed none
        files = [w for w in a.write_set if w not in (tree.dirs if tree else set()) and not w.endswith("/")]
        if (
            a.command_class.value == "modify"
            and files
            and a.executed
            and not a.submits
            and not state.modifications_of_attempt(a.id)
            and a.exception is None
            and not re.match(r"\s*(mkdir|rmdir)\b", a.command)
        ):
            fired.append(
                {
                    "step": a.step,
                    "rule": "noop-edit",
                    "verdict": "NUDGE",
                    "reason": "this edit changed no file",
                    "command": a.command[:200],
                    "submission": False,
                }
            )
    return {
        "commands": commands,
        "fired": fired,
        "submitted": any(a.submits for a in state.attempts),
        "gate_us": gate_us,
    }


def markdown(report: dict) -> str:
    prov = report.get("provenance") or {}
    lines = [
        "# The policy gate on real SWE-bench runs",
        "",
        f"Reproduce: `{report['command']}` (needs the replay ledgers: see ../replay/RESULTS.md).",
        "",
        f"Made with ledger-runtime {prov.get('version', '?')} at commit `{prov.get('commit') or 'unknown'}`"
        + (" (with uncommitted changes)" if prov.get("dirty") else "")
        + f", {prov.get('written', '?')}.",
        "",
        f"{report['runs']} mini-swe-agent runs (Gemini 3 Pro preview, SWE-bench Verified), {report['commands']:,} "
        "commands; each rule asked right before each command, against the ledger state at that point of the "
        "real run (the built-in rules with their defaults, protected-paths with the SWE-bench globs).",
        "",
        f"The gate's time per command (all six rules): p50 {report['gate_time']['p50_us']} us, p95 "
        f"{report['gate_time']['p95_us']} us.",
        "",
        "| policy | fired | per 1,000 commands | runs | verdicts |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for name, p in report["policies"].items():
        vs = ", ".join(f"{k} {v}" for k, v in sorted(p["verdicts"].items()))
        lines.append(f"| {name} | {p['fired']} | {p['per_1000_commands']} | {p['instances']} | {vs} |")
    cases = report["on_resolved_submissions"]
    lines += [
        "",
        f"## Submissions of runs that resolved their instance ({report['resolved_runs']} runs)",
        "",
        f"A policy fires on {len(cases)} of them" + (":" if cases else "."),
        "",
    ]
    for c in cases:
        lines.append(f"- `{c['instance']}` step {c['step']}: {c['rule']} ({c['verdict']}): {c['reason']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ledgers", default=str(LEDGERS))
    ap.add_argument("--resolved", default=str(RESOLVED))
    ap.add_argument("--out", default=str(HERE))
    args = ap.parse_args(argv)
    console = Console()
    resolved = {r["instance_id"]: r["resolved"] == "True" for r in csv.DictReader(open(args.resolved))}
    per_instance = {}
    for d in sorted(Path(args.ledgers).iterdir()):
        try:
            per_instance[d.name] = replay_ledger(d / "ledger.sqlite")
        except NotALedger as e:
            console.print(f"skip {d.name}: {e}")
    counts: Counter[str] = Counter()
    instances: dict[str, set] = defaultdict(set)
    verdicts: Counter[tuple[str, str]] = Counter()
    on_resolved_submissions = []
    commands = sum(r["commands"] for r in per_instance.values())
    for iid, r in per_instance.items():
        for f in r["fired"]:
            counts[f["rule"]] += 1
            instances[f["rule"]].add(iid)
            verdicts[(f["rule"], f["verdict"])] += 1
            if f["submission"] and resolved.get(iid):
                on_resolved_submissions.append({"instance": iid, **f})
    rules = list(BUILTINS)
    t = Table(title=f"Policies on {len(per_instance)} real SWE-bench runs ({commands:,} commands)")
    for col in ("policy", "fired", "per 1,000 commands", "instances", "verdicts"):
        t.add_column(col, justify="left" if col in ("policy", "verdicts") else "right")
    for name in rules:
        vs = ", ".join(f"{k[1]} {v}" for k, v in sorted(verdicts.items()) if k[0] == name)
        t.add_row(
            name, str(counts[name]), f"{1000 * counts[name] / max(1, commands):.1f}", str(len(instances[name])), vs
        )
    console.print(t)
    n_resolved = sum(1 for iid in per_instance if resolved.get(iid))
    times = sorted(t for r in per_instance.values() for t in r["gate_us"])
    gate = {
        "p50_us": round(statistics.median(times), 1),
        "p95_us": round(times[int(0.95 * (len(times) - 1))], 1),
        "max_us": round(times[-1], 1),
    }
    console.print(f"the gate per command (all six rules): p50 {gate['p50_us']} us, p95 {gate['p95_us']} us")
    console.print(
        f"submissions of resolved runs ({n_resolved}) on which a policy fires: {len(on_resolved_submissions)}"
    )
    for c in on_resolved_submissions:
        console.print(f"  {c['instance']} step {c['step']}: {c['rule']} {c['verdict']}: {c['reason'][:160]}")
    from ledger_harness.replay.cli import provenance
    from ledger_runtime.config import LedgerConfig

    report = {
        "command": "python swebench_runs/policies/policy_replay.py",
        "provenance": provenance(LedgerConfig()),
        "runs": len(per_instance),
        "commands": commands,
        "resolved_runs": n_resolved,
        "gate_time": gate,
        "policies": {
            n: {
                "fired": counts[n],
                "per_1000_commands": round(1000 * counts[n] / max(1, commands), 2),
                "instances": len(instances[n]),
                "verdicts": {k[1]: v for k, v in verdicts.items() if k[0] == n},
            }
            for n in rules
        },
        "on_resolved_submissions": on_resolved_submissions,
        "fired": {iid: r["fired"] for iid, r in per_instance.items() if r["fired"]},
    }
    out = Path(args.out)
    (out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "RESULTS.md").write_text(markdown(report))
    console.print(f"wrote {out / 'results.json'} and {out / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
