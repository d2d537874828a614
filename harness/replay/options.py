"""``ledger-run replay``'s options as one value (``ReplayOptions``), and ``validate``: the checks that
need nothing but the options themselves, each failing with the one line the command prints. What
needs the disk or the installed packages (the files, the repositories, the prices, the formats) is
checked where it is read (cli.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

OUTPUTS = ("fresh", "recorded")


@dataclass(frozen=True)
class ReplayOptions:
    """What ``ledger-run replay`` was asked (its options, by the names command.py gives them)."""

    trajectories: tuple[Path, ...]
    repos: tuple[Path, ...] = ()
    workdir: Path | None = None
    out: Path = Path("replay-results")
    instances: Path | None = None
    timeout: int | None = None
    observations_only: bool = False
    filter: str | None = None
    redo: bool = False
    report: Path | None = None
    as_json: bool = False
    argv: tuple[str, ...] = ()  # the command line, for the report's provenance
    jobs: int = 1
    force: bool = False
    context: str | None = None
    price_model: str | None = None  # None: not given (gpt-5-mini)
    format: str | None = None
    outputs: str = "fresh"
    base_commit: str | None = None

    @property
    def contexts(self) -> tuple[str, ...]:
        """``--context``: the context policies to measure, as given (blanks left out)."""
        return listed(self.context)

    @property
    def price_models(self) -> tuple[str, ...]:
        """``--price-model``: the models that price the calls, as given (blanks left out)."""
        return listed("gpt-5-mini" if self.price_model is None else self.price_model)


def listed(option: str | None) -> tuple[str, ...]:
    """The names of a comma-separated option, blanks left out."""
    return tuple(c.strip() for c in (option or "").split(",") if c.strip())


def _context_wrong(o: ReplayOptions) -> str | None:
    """The first thing wrong with ``--context`` and ``--price-model``, or None."""
    from ledger_runtime.held.context import ContextError, ContextPolicy

    try:
        for c in o.contexts:
            ContextPolicy.parse(c)
    except ContextError as e:
        return f"--context: {e}"
    if o.contexts and o.observations_only:
        return "--context measures a replay: it cannot go with --observations-only"
    if o.price_model is not None and not o.contexts:  # it was dropped without a word
        return "--price-model goes with --context (it bills what each arm would have sent the model)"
    if o.contexts and not o.price_models:
        return "--price-model: give at least one model"
    return None


def validate(o: ReplayOptions) -> str | None:
    """The first thing wrong with the options alone (the line ``ledger-run replay`` fails with), or None."""
    if o.outputs not in OUTPUTS:
        return f"--outputs must be fresh or recorded, not {o.outputs!r}"
    wrong = _context_wrong(o)
    if wrong:
        return wrong
    if o.jobs < 1:
        return f"-j must be 1 or more, not {o.jobs}"
    if o.timeout is not None and o.timeout < 1:
        return f"--timeout must be 1 second or more, not {o.timeout}"
    if o.base_commit is not None and not o.base_commit.strip():
        return "--base-commit: give a commit (its hash, or a name the repository knows)"
    if o.observations_only and o.report is not None:
        return "--report is for replays; --observations-only writes OUT/observations-only.json (and --json)"
    return None
