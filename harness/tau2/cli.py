"""``ledger-run tau2-gate``: the LedgerAgent gate evaluated on tau2-bench without a model
(gate.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional

import typer

if TYPE_CHECKING:
    from ledger_harness.tau2.options import Tau2GateOptions


def register(app: typer.Typer) -> None:
    app.command(name="tau2-gate")(tau2_gate)


def evaluate(data: Path, domain: str, task_files: list[str], on_task: Any = None) -> dict[str, Any]:  # noqa: C901
    """The gate's report; ``on_task(done, total, what)`` after each task replayed (for a progress bar)."""
    from ledger_harness.tau2.gate import (
        forbidden_cancellations,
        load_tasks,
        replay_forbidden,
        replay_gold,
        replay_violation,
        violations,
    )

    report: dict[str, Any] = {"domain": domain, "data": str(data), "task_sets": {}}
    sets = {name: load_tasks(data, domain, name) for name in task_files}
    total = sum(len(ts) * (2 if domain == "airline" else 1) for ts in sets.values()) + 1
    done = 0

    def tick(what: str) -> None:
        nonlocal done
        done += 1
        if on_task is not None:
            on_task(done, total, what)

    for name, tasks in sets.items():
        allowed, refused, rejected = [], [], []
        for t in tasks:
            tick(f"{name}: gold actions")
            for o in replay_gold(data, domain, t):
                row = {"task": t["id"], "tool": o.name, "arguments": o.arguments}
                if o.executed:
                    allowed.append(row)
                    if o.tool_error:
                        rejected.append({**row, "tool_result": o.result})
                else:
                    refused.append(
                        {**row, "verdict": o.verdict.kind.value, "rule": o.verdict.rule, "reason": o.verdict.reason}
                    )
        must_not = []
        if domain == "airline":
            for t in tasks:
                tick(f"{name}: forbidden cancellations")
                for rid, o in zip(forbidden_cancellations(t), replay_forbidden(data, t)):
                    must_not.append(
                        {
                            "task": t["id"],
                            "reservation": o.arguments.get("reservation_id"),
                            "caught": not o.executed,
                            "verdict": o.verdict.kind.value,
                            "rule": o.verdict.rule,
                            "reason": o.verdict.reason,
                        }
                    )
        report["task_sets"][name] = {
            "tasks": len(tasks),
            "gold_writes": len(allowed) + len(refused),
            "gold_writes_allowed": len(allowed),
            "gold_writes_allowed_but_rejected_by_the_tool": rejected,
            "gold_writes_refused": refused,
            "must_not_cancel": {
                "cases": len(must_not),
                "caught": sum(1 for m in must_not if m["caught"]),
                "rows": must_not,
            },
        }
    rows = []
    for v in violations(data, domain):
        o = replay_violation(data, domain, v)
        fired = (o.verdict.rule or "").split(",")
        rows.append(
            {
                "rule": v.rule,
                "violation": v.what,
                "tool": v.name,
                "caught": not o.executed and v.rule in fired,
                "verdict": o.verdict.kind.value,
                "rules": o.verdict.rule,
                "reason": o.verdict.reason,
            }
        )
    report["violations"] = {"generated": len(rows), "caught": sum(1 for r in rows if r["caught"]), "rows": rows}
    tick("generated violations")
    return report


def tau2_gate(
    domain: str = typer.Option(..., "--domain", help="airline or retail"),
    data: Optional[Path] = typer.Option(
        None,
        "--data",
        help="tau2 data: a directory with <domain>/db.json and tasks*.json (default: the installed tau2's data)",
    ),
    tasks: Optional[List[str]] = typer.Option(
        None, "--tasks", help="task files in <data>/<domain>/ (default: every tasks*.json there)"
    ),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Write the report as JSON here."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """The LedgerAgent gate on tau2-bench, no model: gold writes replayed against the real tau2 tools,
    generated violations of every rule, and the cancellations tasks forbid."""
    from ledger_harness.tau2.options import Tau2GateOptions

    run(Tau2GateOptions(domain=domain, data=data, tasks=tuple(tasks or ()), out=out, as_json=as_json))


def run(o: Tau2GateOptions) -> None:
    """``ledger-run tau2-gate`` (its options: options.py): check them, find tau2's data and the task
    files, replay them with a progress bar, and print (and write) the report."""
    from ledger_harness.tau2.gate import BadTaskFile, Tau2Missing
    from ledger_harness.tau2.options import validate
    from ledger_runtime import fail, write_private

    problem = validate(o)
    if problem is not None:
        fail(problem)
    _quiet_tau2()
    data = _data_dir(o)
    files = _task_files(data, o.domain, list(o.tasks))
    try:
        report = _replayed(data, o.domain, files)
    except (Tau2Missing, BadTaskFile) as e:
        fail(str(e))
        return
    if o.out:
        try:
            o.out.parent.mkdir(parents=True, exist_ok=True)
            write_private(o.out, json.dumps(report, indent=1) + "\n")  # owner-only, never through a link
        except OSError as e:  # not writable, or made a directory meanwhile: one line
            fail(f"cannot write -o {o.out}: {e.strerror or e}")
    if o.as_json:
        print(json.dumps(report, indent=1))
        return
    _print_report(report, o.domain)


def _quiet_tau2() -> None:
    """tau2 installed (its extra), and its logging down to warnings: it logs every tool call at DEBUG."""
    import logging

    from ledger_adapters.extras import require

    require("tau2", "tau2", "ledger-run tau2-gate (the real tau2-bench tools)")
    try:
        from loguru import logger

        logger.remove()  # tau2 logs every tool call at DEBUG
    except ImportError:
        pass
    logging.getLogger("tau2").setLevel(logging.WARNING)


def _data_dir(o: Tau2GateOptions) -> Path:
    """``--data``, or the installed tau2's: one that holds the domain's database."""
    from ledger_harness.tau2.gate import Tau2Missing, default_data_dir
    from ledger_runtime import fail

    try:
        data = o.data or default_data_dir()
    except Tau2Missing as e:
        fail(str(e))
        raise AssertionError from e  # fail() raised
    if data is None or not (data / o.domain / "db.json").is_file():
        fail(
            f"no tau2 data for {o.domain}: pass --data DIR with {o.domain}/db.json and tasks.json "
            "(or pip install 'ledger-runtime[tau2]')"
        )
        raise AssertionError("fail() raised")
    return data


def _task_files(data: Path, domain: str, tasks: list[str]) -> list[str]:
    """``--tasks``, or every tasks*.json of the domain: each one there, one at least."""
    from ledger_runtime import fail

    files = tasks or sorted(p.name for p in (data / domain).glob("tasks*.json"))
    missing = [f for f in files if not (data / domain / f).is_file()]
    if missing:
        there = ", ".join(sorted(p.name for p in (data / domain).glob("tasks*.json"))) or "none"
        fail(f"no task file {missing[0]} in {data / domain} (there: {there})")
    if not files:
        fail(f"no tasks*.json in {data / domain}")
    return files


def _replayed(data: Path, domain: str, files: list[str]) -> dict[str, Any]:
    """The gate's report (``evaluate``), with a progress bar on stderr while it replays."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        bar = progress.add_task(f"{domain}: replaying", total=None)
        return evaluate(
            data,
            domain,
            files,
            lambda done, total, what: progress.update(bar, completed=done, total=total, description=f"{domain} {what}"),
        )


def _print_report(report: dict[str, Any], domain: str) -> None:
    """The report as a table of the task sets, the refused gold writes, and the violations caught."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = Table(title=f"tau2-bench {domain}: the LedgerAgent gate on the real tools")
    for col in (
        "task set",
        "gold writes",
        "allowed",
        "refused",
        "tool rejects an allowed one",
        "must-not cancel caught",
    ):
        t.add_column(col, justify="right" if col != "task set" else "left")
    for name, s in report["task_sets"].items():
        mn = s["must_not_cancel"]
        t.add_row(
            name,
            str(s["gold_writes"]),
            str(s["gold_writes_allowed"]),
            str(len(s["gold_writes_refused"])),
            str(len(s["gold_writes_allowed_but_rejected_by_the_tool"])),
            f"{mn['caught']}/{mn['cases']}" if mn["cases"] else "-",
        )
    console.print(t)
    for name, s in report["task_sets"].items():
        for r in s["gold_writes_refused"]:
            console.print(f"  {name} task {r['task']}: {r['tool']} {r['verdict']} by {r['rule']}: {r['reason']}")
    v = report["violations"]
    console.print(
        f"generated violations caught: {v['caught']}/{v['generated']} "
        + ", ".join(f"{r['rule']} {'ok' if r['caught'] else 'MISSED'}" for r in v["rows"])
    )
