"""``ledger-run swebench``'s options as one value (``SwebenchOptions``), and ``validate``: the checks
that need nothing but the options themselves, each failing with the one line the command prints.
What needs the disk, the dataset or the engine (the configs, the instances, the images) is checked
where it is read (cli.py, run.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ledger_harness.swebench.run import DEFAULT_ARMS, BadInput, parse_arms


@dataclass(frozen=True)
class SwebenchOptions:
    """What ``ledger-run swebench`` was asked (its options, -w already read as -j)."""

    out: Path | None
    subset: str = "verified"
    split: str = "test"
    slice_spec: str = ""
    filter_spec: str = ""
    instances: Path | None = None
    model: str | None = None
    model_class: str | None = None
    environment_class: str | None = None
    arms: str = ",".join(DEFAULT_ARMS)
    workers: int = 1
    config: tuple[Path, ...] = ()
    pull: bool = True
    evaluate_after: bool = False
    eval_workers: int | None = None  # with evaluate_after; None: EVAL_WORKERS
    modal: bool = False


EVAL_WORKERS = 4  # the harness's parallel workers when --eval-workers is not given


def validate(o: SwebenchOptions) -> str | None:
    """The first thing wrong with the options alone (the line ``ledger-run swebench`` fails with), or None."""
    if o.out is None:
        return "-o OUT is required: where the arms' predictions, trajectories and ledgers go"
    try:
        parse_arms(o.arms)
    except BadInput as e:
        return str(e)
    if o.workers < 1:
        return f"-j/--workers must be 1 or more, not {o.workers}"
    # each was dropped without a word when nothing was scored
    if o.modal and not o.evaluate_after:
        return (
            "--modal goes with --evaluate (it scores the predictions on Modal); to run the instances there: "
            "--environment-class swerex_modal"
        )
    if o.eval_workers is not None and not o.evaluate_after:
        return "--eval-workers goes with --evaluate (the harness's parallel workers)"
    if o.eval_workers is not None and o.eval_workers < 1:
        return f"--eval-workers must be 1 or more, not {o.eval_workers}"
    return None
