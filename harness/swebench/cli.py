"""``ledger-run swebench`` (run the arms; ``evaluate`` scores them) and ``ledger-run report``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from ledger_harness.swebench.run import ARMS, DEFAULT_ARMS, BadInput

if TYPE_CHECKING:
    from ledger_harness.swebench.options import SwebenchOptions

swebench_app = typer.Typer(
    help="SWE-bench with and without the ledger: mini-swe-agent's setup, once per arm.",
    invoke_without_command=True,
    no_args_is_help=False,
)


def register(app: typer.Typer) -> None:
    app.add_typer(swebench_app, name="swebench")
    app.command(name="report")(report)


def _fail(message: str) -> None:
    from ledger_runtime import fail

    fail(message)


def _check_page_target(html: Path | None) -> None:
    """As inspect --html: a page replaces only a page ledger-run wrote (it replaced any file, the arm's own
    preds.json included)."""
    from ledger_runtime.cli.inspect_command import not_a_page

    kept = not_a_page(html) if html is not None else None
    if kept:
        _fail(f"cannot write --html {html}: it is {kept}, not a page ledger-run wrote (the only file it replaces)")


def _docker_client():
    from ledger_adapters.extras import require

    require("swebench", "docker", "ledger-run swebench on Docker")
    try:
        import docker

        client = docker.from_env()
        client.ping()
        return client
    except Exception as e:
        _fail(f"no Docker engine: {type(e).__name__}: {e} (SWE-bench instances run in its containers)")


def _old_w(given: Optional[int], workers: int) -> int:
    """-w was the number of workers here; everywhere else it is the work tree (mini, codex). It still
    works, with a line saying so."""
    if given is None:
        return workers
    from ledger_runtime import stderr

    stderr.print(
        "warning: -w N is the old spelling of -j/--workers here (-w is the work tree in every other command)",
        highlight=False,
        markup=False,
    )
    return given


@swebench_app.callback()
def swebench(
    ctx: typer.Context,
    subset: str = typer.Option(
        "verified", "--subset", help="SWE-bench subset (verified, lite, full) or a dataset name."
    ),
    split: str = typer.Option("test", "--split", help="The dataset split."),
    slice_spec: str = typer.Option("", "--slice", help="Instances A:B of the (filtered) list."),
    filter_spec: str = typer.Option("", "--filter", help="Instance ids matching this regular expression."),
    instances: Optional[Path] = typer.Option(
        None,
        "--instances",
        help="A JSONL file of instances (or a directory with SPLIT.jsonl): offline, no dataset download.",
    ),
    model: Optional[str] = typer.Option(None, "-m", "--model", help="Model name, any litellm supports."),
    model_class: Optional[str] = typer.Option(
        None, "--model-class", help="mini-swe-agent model class (default: from the model name)."
    ),
    environment_class: Optional[str] = typer.Option(
        None,
        "--environment-class",
        help="mini-swe-agent environment the instances run in (default docker; swerex_modal on Modal, "
        "swerex_docker, singularity, or a class path). docs/swebench.md: running on Modal.",
    ),
    arms: str = typer.Option(",".join(DEFAULT_ARMS), "--arms", help="Comma-separated, of: " + ", ".join(ARMS) + "."),
    workers: int = typer.Option(1, "-j", "--workers", help="Instances run in parallel."),
    workers_w: Optional[int] = typer.Option(None, "-w", hidden=True, help="Old spelling of -j/--workers."),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Output directory: OUT/<arm>/..."),
    config: Optional[List[Path]] = typer.Option(
        None, "--config", "-c", help="mini-swe-agent YAML over its swebench.yaml (repeatable)."
    ),
    pull: bool = typer.Option(True, "--pull/--no-pull", help="Pull instance images that are not on the engine."),
    evaluate_after: bool = typer.Option(False, "--evaluate", help="Score the predictions with the SWE-bench harness."),
    eval_workers: Optional[int] = typer.Option(
        None, "--eval-workers", help="With --evaluate: the harness's parallel workers (default 4)."
    ),
    modal: bool = typer.Option(False, "--modal", help="With --evaluate: score on Modal (the harness's --modal)."),
) -> None:
    """Run mini-swe-agent on SWE-bench instances once per arm (resumable; Ctrl-C leaves no containers)."""
    from ledger_adapters.mini.cli import quiet_startup

    quiet_startup()
    if ctx.invoked_subcommand is not None:
        return
    from ledger_harness.swebench.options import SwebenchOptions

    run(
        SwebenchOptions(
            out=out,
            subset=subset,
            split=split,
            slice_spec=slice_spec,
            filter_spec=filter_spec,
            instances=instances,
            model=model,
            model_class=model_class,
            environment_class=environment_class,
            arms=arms,
            workers=_old_w(workers_w, workers),
            config=tuple(config or ()),
            pull=pull,
            evaluate_after=evaluate_after,
            eval_workers=eval_workers,
            modal=modal,
        )
    )


def run(o: SwebenchOptions) -> None:
    """``ledger-run swebench`` (its options: options.py): check them, find the instances and their
    images, run every arm on them, then score them if asked."""
    from rich.console import Console
    from rich.markup import escape

    from ledger_harness.stopping import stopped_as_ctrl_c
    from ledger_harness.swebench.options import EVAL_WORKERS, validate
    from ledger_harness.swebench.run import parse_arms
    from ledger_harness.swebench.run import run as run_arms
    from ledger_runtime import private_dir, shell_word, unwritable

    problem = validate(o)
    if problem is not None:
        _fail(problem)
        return
    assert o.out is not None  # validate says so
    problem = unwritable(o.out)  # before the dataset, the model's key and the images
    if problem is not None:
        _fail(f"cannot write results into -o {o.out}: {problem}")
        return
    console = Console(stderr=True)
    chosen_arms = parse_arms(o.arms)
    cfg, rows, client = _instances(o)
    private_dir(o.out)  # owner-only, as every run directory: predictions, trajectories and ledgers go there
    console.print(
        f"{len(rows)} instances x {len(chosen_arms)} arms ({', '.join(chosen_arms)}), {o.workers} workers -> {o.out}"
    )
    with stopped_as_ctrl_c() as stop:  # `kill PID`, a closed terminal: as Ctrl-C
        done = run_arms(
            o.out, chosen_arms, rows, cfg, workers=o.workers, console=console, client=client, command=sys.argv
        )
    console.print(
        f"{done['status']}: {done['ran']} instance runs; "
        + "; ".join(
            f"{a}: " + (", ".join(f"{k} {v}" for k, v in s.items()) or "nothing to do") for a, s in done["arms"].items()
        )
    )
    console.print(f"look at them: ledger-run report {escape(shell_word(o.out))}")
    if done["status"] == "interrupted":
        sys.exit(stop.exit_code())  # said above: not typer's Exit, after which ledger-run says "interrupted" again
    if o.evaluate_after:
        workers = EVAL_WORKERS if o.eval_workers is None else o.eval_workers
        _evaluate(o.out, o.subset, o.split, workers, console, o.modal)


def _instances(o: SwebenchOptions) -> tuple[dict, list[dict], object]:
    """The run's mini-swe-agent config, the instances chosen, and the Docker client their images are
    on (None where the environment brings its own); a one-line error for whatever is missing."""
    from ledger_adapters.extras import require

    require("swebench", "minisweagent", "ledger-run swebench")  # before its config, and before the dataset's download
    from rich.console import Console

    from ledger_adapters.mini.cli import model_config_problem
    from ledger_harness.swebench.run import (
        base_config,
        check_environment,
        load_instances,
        missing_image_error,
        missing_images,
        model_of,
        select,
        uses_docker,
    )

    try:
        cfg = base_config(list(o.config), o.model, o.model_class, o.environment_class)
        check_environment(cfg)
        if o.instances is None:  # the Hub's retries are held back: this says what is being waited for
            Console(stderr=True).print(
                f"loading SWE-bench {o.subset} ({o.split}) from the Hugging Face Hub (offline: --instances FILE.jsonl)",
                highlight=False,
                markup=False,
            )
        rows = select(
            load_instances(o.subset, o.split, o.instances), slice_spec=o.slice_spec, filter_spec=o.filter_spec
        )
        if uses_docker(cfg):  # a missing package first: the install is what to mend before anything else
            require("swebench", "docker", "ledger-run swebench on Docker")
        problem = model_config_problem(*model_of(cfg))  # not one container per instance, each retrying for minutes
        if problem:
            raise BadInput(problem)
        client = _docker_client() if uses_docker(cfg) else None  # other environments bring their own
        missing = missing_images(rows, client, pull=o.pull) if client is not None else {}
        if missing:
            raise BadInput(missing_image_error(missing))
    except BadInput as e:
        _fail(str(e))
        raise AssertionError from e  # fail() raised
    return cfg, rows, client


def _evaluate(out: Path, subset: str, split: str, workers: int, console, modal: bool = False) -> None:
    from ledger_adapters.extras import require

    if not out.is_dir():
        _fail(f"{out}: no such directory (the output directory of ledger-run swebench)")
    require("swebench", "minisweagent", "ledger-run swebench evaluate")
    from minisweagent.run.benchmarks.swebench import DATASET_MAPPING

    from ledger_harness.swebench.eval import evaluate as run_evaluation

    try:
        run_evaluation(
            out, dataset=DATASET_MAPPING.get(subset, subset), split=split, workers=workers, console=console, modal=modal
        )
    except BadInput as e:
        _fail(str(e))


@swebench_app.command("evaluate")
def evaluate(
    out: Path = typer.Argument(..., help="The output directory of ledger-run swebench."),
    subset: str = typer.Option(
        "verified", "--subset", help="SWE-bench subset (verified, lite, full) or a dataset name."
    ),
    split: str = typer.Option("test", "--split", help="The dataset split."),
    workers: int = typer.Option(4, "-j", "--workers", help="The harness's parallel workers."),
    workers_w: Optional[int] = typer.Option(None, "-w", hidden=True, help="Old spelling of -j/--workers."),
    modal: bool = typer.Option(
        False, "--modal", help="Score on Modal (the harness's --modal) instead of the local Docker engine."
    ),
    report_file: Optional[Path] = typer.Option(
        None, "--from-report", help="Read a harness report already made (one arm: OUT/<arm>) instead of running it."
    ),
) -> None:
    """Score each arm's predictions with the official SWE-bench harness; results.json per arm."""
    workers = _old_w(workers_w, workers)
    if workers < 1:  # as `ledger-run swebench --eval-workers`: the harness takes 0 or less as one at a time, unsaid
        _fail(f"-j/--workers must be 1 or more, not {workers}")
    from rich.console import Console

    from ledger_harness.swebench.eval import results_from_report

    if report_file is not None:
        try:
            results = results_from_report(out, report_file)
        except (BadInput, OSError, ValueError) as e:
            _fail(str(e))
            return
        n = sum(1 for r in results["instances"].values() if r["resolved"])
        print(f"{out.name}: {n}/{len(results['instances'])} resolved -> {out / 'results.json'}")
        return
    _evaluate(out, subset, split, workers, Console(stderr=True), modal)


def _write_arms_page(html: Path, rep: dict) -> None:
    """``report --html FILE``: the arms side by side on one page, owner-only (a one-line error if it cannot be)."""
    import os

    from ledger_harness.swebench.page import arms_page
    from ledger_runtime import private_dir, write_private

    try:
        if not os.path.lexists(html.parent):  # as --png's: made owner-only; one there already is left as it is
            private_dir(html.parent)
        write_private(html, arms_page(rep))
    except OSError as e:
        above = next((p for p in html.parents if os.path.lexists(p)), None)  # mkdir said only "Not a directory"
        file = above is not None and above.exists() and not above.is_dir()
        _fail(f"cannot write --html {html}: {f'{above} is a file, not a directory' if file else e.strerror or e}")


def report(
    out: Path = typer.Argument(..., help="The output directory of ledger-run swebench."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole report as JSON on stdout."),
    png: Optional[str] = typer.Option(  # a string: a Path drops the slash of `figs/`
        None,
        "--png",
        metavar="<path>",
        help="Where the figure goes: a file (its folders made), or a folder for report.png in it (default "
        "OUT/report.png).",
    ),
    no_png: bool = typer.Option(False, "--no-png", help="No figure."),
    html: Optional[Path] = typer.Option(
        None, "--html", help="Also write the arms side by side as one self-contained HTML page here."
    ),
) -> None:
    """The arms of a ledger-run swebench output side by side: resolved, cost, calls, tokens, re-reads."""
    from rich.console import Console

    from ledger_adapters.extras import missing
    from ledger_harness.swebench.report import build, figure_path, print_report, write_png

    if png is not None and no_png:  # which one the user meant is not ours to guess: a figure named, or none
        _fail(f"--png {png} asks for a figure and --no-png for none: give one of them")
    try:
        rep = build(out)  # the output directory checked first, whatever the figure needs
    except BadInput as e:
        _fail(str(e))
        return
    _check_page_target(html)
    problem = None if no_png else missing("swebench", "matplotlib.pyplot", "the figure of ledger-run report")
    if problem and png is not None:  # the figure asked for by name: it cannot be made
        _fail(problem + " (or pass --no-png)")
    if problem:  # the default figure: the report goes on without it, and says so
        Console(stderr=True).print(f"no figure: {problem}", highlight=False, markup=False)
    try:
        figure = None if no_png or problem else write_png(rep, figure_path(png, out))
    except BadInput as e:
        _fail(str(e))
        return
    if html is not None:
        _write_arms_page(html, rep)
    if as_json:
        page = str(html) if html is not None else None
        print(json.dumps({**rep, "figure": str(figure) if figure else None, "page": page}, indent=1, default=str))
        return
    from ledger_runtime import plain_console

    console = plain_console()  # no trailing spaces in a file or a pipe
    print_report(rep, console)
    if figure:
        console.print(f"figure: {figure}")
    if html is not None:  # said as the figure is: where to open it
        console.print(f"page: {html}", soft_wrap=True, highlight=False, markup=False)
