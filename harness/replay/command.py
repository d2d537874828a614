"""``ledger-run replay``'s options, and its registration on the command line (the
``ledger_runtime.commands`` entry point ``replay``): the work itself is in cli.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

HELP = (
    "Replay recorded trajectories through the ledger (shadow mode) against the real repository.\n\n"
    "Every recorded command runs again, as you, on this machine: a trajectory you did not make can do whatever "
    "its commands say (read your files, reach the network, delete what you may delete). Replay trajectories you "
    "do not trust inside a container or as a user of their own (docs/swebench.md); -j's mount namespaces give "
    "each worker its own work tree and /tmp, and isolate nothing else."
)


def register(app: typer.Typer) -> None:
    app.command(name="replay", help=HELP)(replay)


def replay(
    trajectories: list[Path] = typer.Argument(
        ...,
        help="Recorded runs: files, or directories of them, in a "
        "format an installed adapter reads (mini-swe-agent: "
        ".traj.json, actions.jsonl(.gz)).",
    ),
    repo: list[Path] = typer.Option(
        [],
        "--repo",
        help="A clone or a git directory (bare or not) holding the "
        "instances' commits; repeat for several repositories. Default, for a run of ledger-run: the "
        "repository it ran in, as its ledger recorded it.",
    ),
    workdir: Optional[Path] = typer.Option(
        None,
        "--workdir",
        help="Where each checkout goes (default: where the "
        "recorded commands ran, as their format says: /testbed for "
        "mini-swe-agent's; for a run of ledger-run elsewhere, OUT/worktree). A directory that holds "
        "files and no replay's mark is refused; a tree a replay made is replaced whole.",
    ),
    format_: Optional[str] = typer.Option(
        None, "--format", help="The recorded runs' format (default: the only one installed adapters read)."
    ),
    force: bool = typer.Option(
        False, "--force", help="Use --workdir even when it holds files a replay did not make (they are deleted)."
    ),
    jobs: int = typer.Option(
        1,
        "--jobs",
        "-j",
        help="Replay this many trajectories at a time, each in its own "
        "work tree (as root, a private mount namespace: its own work tree and /tmp, nothing else isolated).",
    ),
    out: Path = typer.Option(Path("replay-results"), "--out", "-o", help="Per-trajectory JSON goes here."),
    instances: Optional[Path] = typer.Option(
        None, "--instances", help="SWE-bench instances (JSONL): base commits and repositories of .traj.json files."
    ),
    base_commit: Optional[str] = typer.Option(
        None,
        "--base-commit",
        help="The commit every trajectory starts from (a hash, a branch, a tag of --repo). Default: the "
        "instance's (--instances), or the one the run's own ledger recorded (a run of ledger-run).",
    ),
    timeout: Optional[int] = typer.Option(None, "--timeout", help="Seconds per command (default: the recorded run's)."),
    observations_only: bool = typer.Option(
        False, "--observations-only", help="Estimate redundancy from the recorded outputs alone, no repository."
    ),
    filter_: Optional[str] = typer.Option(None, "--filter", help="Only instance ids matching this regex."),
    redo: bool = typer.Option(False, "--redo", help="Replay trajectories that already have a result."),
    report: Optional[Path] = typer.Option(None, "--report", help="Also write the summary as Markdown here."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
    context: Optional[str] = typer.Option(
        None,
        "--context",
        help="Also bill every model call's prompt, as each arm would have sent it (none, answers, ledger, "
        "view-every-call, the offline bound) and under these context policies, joined by commas: full, "
        "window:M, validity, validity+window:M. Uncached, cached and written tokens, cost, lines lost.",
    ),
    price_model: Optional[str] = typer.Option(
        None,
        "--price-model",
        help="With --context: the models whose tokens, prices (litellm's table) and caching rule bill the calls, "
        "joined by commas, for example gpt-5-mini, claude-sonnet-4-5 and gemini/gemini-2.5-pro. "
        "Default: gpt-5-mini.",
    ),
    outputs: str = typer.Option(
        "fresh",
        "--outputs",
        help="What the ledger is given as each command's output: fresh (what it prints now) or recorded "
        "(what the agent got in the recorded run; the command still runs, for its effects).",
    ),
) -> None:
    """Replay recorded trajectories through the ledger (shadow mode) against the real repository."""
    from ledger_harness.replay.cli import run
    from ledger_harness.replay.options import ReplayOptions

    run(
        ReplayOptions(
            trajectories=tuple(trajectories),
            repos=tuple(repo),
            workdir=workdir,
            out=out,
            instances=instances,
            timeout=timeout,
            observations_only=observations_only,
            filter=filter_,
            redo=redo,
            report=report,
            as_json=as_json,
            argv=tuple(sys.argv),
            jobs=jobs,
            force=force,
            context=context,
            price_model=price_model,
            format=format_,
            outputs=outputs,
            base_commit=base_commit,
        )
    )
