"""``ledger-run replay``: find the trajectories, replay them with a progress display, resume where a
previous run stopped, and print (and write) the summary."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from ledger_harness.replay import tree as replay_tree
from ledger_harness.replay.engine import (
    ReplaySettings,
    Skip,
    has_commit,
    instance_name,
    observations_only,
    replay_one,
    result_path,
)
from ledger_harness.replay.options import ReplayOptions, validate
from ledger_harness.replay.report import (
    aggregate,
    class_table,
    context_md,
    context_tables,
    load_results,
    results_by_code,
    results_md,
    summarize_context,
    tables,
)
from ledger_runtime import json_value, plain_console, shell_word
from ledger_runtime.inspection import Loaded, load, summary
from ledger_runtime.ledger.observe import Truncation
from ledger_runtime.ledger.private import private_dir, write_private
from ledger_runtime.ledger.store import NotALedger
from ledger_runtime.records import Baseline
from ledger_runtime.trajectories import RecordedFormat, Trajectory, TrajectoryError, formats, read_each


def _format(name: str | None, fail) -> RecordedFormat:
    """The format the recorded runs are read in: ``name``, or the only installed one the replay reads
    (some formats are read for the run's page only)."""
    problems: list[str] = []
    installed = formats(problems)
    known = {n: f for n, f in installed.items() if f.load is not None}
    for why in problems:
        Console(stderr=True).print(f"[yellow]note[/yellow] {why}", highlight=False)
    if name is not None:
        if name in installed and name not in known:
            fail(f"--format {name}: its recorded runs cannot be replayed (installed: {', '.join(sorted(known))})")
        if name not in known:
            fail(f"--format {name}: unknown (installed: {', '.join(sorted(known)) or 'none'})")
        return known[name]
    if len(known) != 1:
        fail(
            "no adapter that reads recorded runs is installed"
            if not known
            else f"give --format (installed: {', '.join(sorted(known))})"
        )
    return next(iter(known.values()))


def _instances(path: Path | None) -> tuple[dict[str, str], dict[str, str]]:
    commits: dict[str, str] = {}
    repos: dict[str, str] = {}
    if path is None:
        return commits, repos
    lines = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            lines += bool(line.strip())
            try:
                row = json_value(line, dict)
                commits[row["instance_id"]] = row["base_commit"]
                repos[row["instance_id"]] = row.get("repo", "")
            except (ValueError, KeyError, TypeError):  # not an instance: UnreadableJSON (nested too deep, say)
                continue
    if lines and not commits:
        raise ValueError(f"{path}: no line is a SWE-bench instance (JSON with instance_id and base_commit)")
    return commits, repos


def _fail(message: str, code: int = 2) -> None:
    """``cli.errors.fail``, imported when a replay fails (a worker process never needs it)."""
    from ledger_runtime.cli.errors import fail

    fail(message, code)


def run(o: ReplayOptions) -> None:
    """``ledger-run replay`` (its options: options.py, command.py): check the options, read the recorded
    runs, then either estimate from their observations alone, or replay them in a work tree of the
    replay's own and print (and write) the summary."""
    problem = validate(o) or (_report_problem(o.report) if o.report is not None else None)
    if problem is not None:
        _fail(problem)
    contexts, models = _arms(o)
    stderr = Console(stderr=True)
    fmt = _format(o.format, _fail)
    paths = list(o.trajectories)
    for p in paths:
        if p.is_file() and _is_ledger(p):
            _fail(f"{p} is a ledger file: pass the run directory ({p.parent}) or its trajectory")
    git_dirs, commits, repo_names = _sources(paths, [] if o.observations_only else o.repos, o.instances)
    notes: list[str] = []
    trajs, skipped = _trajectories(fmt, paths, o.filter, repo_names, notes)
    own = {t.instance_id: own_ledger(t) for t in trajs}
    trajs = _finished(trajs, own, skipped)
    if o.observations_only:
        _estimate(trajs, own, skipped, o.out, o.as_json, stderr)
        return
    _from_own_ledgers(trajs, own, o.base_commit is None, commits, notes)
    git_dirs = git_dirs or _git_dirs_of_ledgers(own, stderr)
    if not git_dirs:
        _fail(_no_repo(own))
    if o.base_commit is not None:
        _pin_base_commit(trajs, git_dirs, o.base_commit)
    trajs = _with_base_commits(trajs, commits, git_dirs, skipped, own)
    workdir = o.workdir
    if workdir is None:
        workdir, trajs = _own_workdir(fmt, trajs, own, o.out, skipped, stderr)
    inputs = [*paths, o.instances, o.report, o.out, *(loaded.path for loaded in own.values() if loaded is not None)]
    lock = _hold_tree(workdir, git_dirs, o.force, o.out, [i for i in inputs if i is not None])
    settings = ReplaySettings(
        repos=git_dirs,
        out=o.out,
        workdir=workdir,
        base_commits=commits,
        repo_names=repo_names,
        timeout=o.timeout,
        force=o.force,
        contexts=contexts,
        price_models=models,
        outputs=o.outputs,
    )
    prov = provenance(settings.config, o.jobs, o.outputs)  # the code as it is when the replay starts
    settings.code = {k: prov.get(k) for k in ("version", "commit", "dirty")}
    todo = _to_go(trajs, o.out, o.redo, contexts, models, o.jobs, stderr)
    try:
        skipped += _replay_all(todo, settings, o.jobs, stderr, notes)
    finally:
        lock.release()
    results = _results(o.out, trajs, skipped)
    prov["results_by"] = results_by_code(results)  # a resumed replay's earlier results came from other code
    agg = aggregate(results)
    what = replayed(paths, fmt.name, len(results), swebench=o.instances is not None)
    ctx = summarize_context(results) if contexts else None
    _print_summary(agg, what, ctx, models, skipped, notes, o.as_json)
    if o.report is not None:
        _write_report(o.report, list(o.argv), agg, skipped, notes, prov, what, ctx, models)
    _say_where(o.out, [r["instance_id"] for r in results], o.report, stderr)


def _say_where(out: Path, replayed: list[str], report: Path | None, stderr: Console) -> None:
    """Where the results went and how to look inside a replay's ledger: nothing said it, and ``inspect OUT`` found
    no ledger there (they are in ``OUT/ledgers/<name>``)."""
    ledgers = out / "ledgers" / (instance_name(replayed[0]) if len(replayed) == 1 else "<name>")
    where = f"results: {out}" + (f", report: {report}" if report is not None else "")
    stderr.print(
        f"{where}; look inside a replay's ledger: ledger-run inspect {shell_word(ledgers)}",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


def _is_ledger(path: Path) -> bool:
    """Whether ``path`` is a ledger (an SQLite file), not a recorded run."""
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _arms(o: ReplayOptions) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The context policies measured (``--context``, by their names; none: the arms none, answers and
    ledger only) and the models priced (``--price-model``), each with a price the replay can read
    (the options are valid: ``validate``)."""
    from ledger_runtime.held.context import ContextPolicy

    if not o.contexts:
        return o.contexts, o.price_models
    _priced(o.price_models)
    names = [ContextPolicy.parse(c).name for c in o.contexts]
    return tuple(dict.fromkeys(names)), o.price_models  # the arms none, answers and ledger are always measured


def _priced(models: tuple[str, ...]) -> None:
    """``--price-model``: each with a price the replay can read."""
    from ledger_harness.replay.meter import load_pricing

    for m in models:
        try:
            load_pricing(m)
        except ImportError as e:  # litellm's table: mini-swe-agent brings it
            from ledger_adapters.extras import install_line

            _fail(
                f"--price-model {m} needs {(e.name or 'litellm').split('.')[0]}, which the base install leaves out: "
                f"{install_line('mini')}"
            )
        except LookupError as e:
            _fail(f"--price-model {m}: {e}")


def _sources(paths: list[Path], repos, instances: Path | None) -> tuple[list[Path], dict[str, str], dict[str, str]]:
    """The trajectory files checked, and where the runs came from: the git directories of ``--repo``,
    and each ``--instances`` instance's base commit and repository."""
    missing = [p for p in paths if not p.exists()]
    if missing:
        _fail(f"no such trajectory file: {missing[0]}")
    git_dirs = _git_dirs(repos)
    commits, repo_names = _read_instances(instances)
    return git_dirs, commits, repo_names


def _git_dirs(repos) -> list[Path]:
    """The git directories of ``--repo`` (a clone or a git directory each)."""
    git_dirs = []
    for r in repos:
        g = replay_tree.git_dir(r)
        if g is None:
            _fail(f"--repo {r} is not a git repository (give a clone or a git directory)")
        git_dirs.append(g)
    return git_dirs


def _read_instances(instances: Path | None) -> tuple[dict[str, str], dict[str, str]]:
    """``--instances``: each SWE-bench instance's base commit and repository."""
    try:
        return _instances(instances)
    except OSError as e:
        _fail(f"cannot read --instances: {e.strerror or e}")
    except ValueError as e:
        _fail(f"--instances {e}")
    raise AssertionError("fail() raised")


def _trajectories(
    fmt: RecordedFormat, paths: list[Path], filter_: str | None, repo_names: dict[str, str], notes: list[str]
) -> tuple[list[Trajectory], list[tuple[str, str]]]:
    """The recorded runs to replay: read in ``fmt``, one per instance (the first), those whose instance
    id ``filter_`` matches, each with its repository (``repo_names`` where it names none); and the
    (instance, why) of those left out."""
    trajs, skipped = _read(fmt, paths, notes)
    unique = _first_of_each(trajs, skipped)
    trajs = _matching(unique, filter_) if filter_ else unique
    for t in trajs:
        t.repo = t.repo or repo_names.get(t.instance_id)
    return trajs, skipped


def _read(fmt: RecordedFormat, paths: list[Path], notes: list[str]) -> tuple[list[Trajectory], list[tuple[str, str]]]:
    """The recorded runs in ``paths`` read in ``fmt`` (one at least), and those that could not be."""
    assert fmt.load is not None  # _format picks only formats the replay reads
    items = [_named(t) for t in read_each(fmt, paths, notes)]
    trajs = [t for t in items if isinstance(t, Trajectory)]
    skipped = [_unread(e) for e in items if isinstance(e, TrajectoryError)]
    if not trajs:
        _fail(
            f"no trajectory could be read: {skipped[0][0]}: {skipped[0][1]}"
            if skipped
            else f"no {fmt.name} trajectories found in " + ", ".join(str(p) for p in paths)
        )
    return trajs, skipped


def _unread(e: TrajectoryError) -> tuple[str, str]:
    """(what, why) of a trajectory not read, from its error ``PATH: why``: said as ``what: why``, its message as it
    is (the whole message as the why printed the path twice)."""
    what, sep, why = str(e).partition(": ")
    return (what, why) if sep else (str(e), "not read")


def _named(t: Trajectory | TrajectoryError) -> Trajectory | TrajectoryError:
    """A trajectory whose instance id is text; one whose record names another kind of id is not read."""
    if isinstance(t, Trajectory) and (not isinstance(t.instance_id, str) or not t.instance_id):
        return TrajectoryError(f"{t.source}: its instance id is not text ({type(t.instance_id).__name__})")
    return t


def _first_of_each(trajs: list[Trajectory], skipped: list[tuple[str, str]]) -> list[Trajectory]:
    """One ledger and one result per instance: a second trajectory of it is skipped (and said so)."""
    seen: set[str] = set()
    unique = []
    for t in trajs:
        if t.instance_id in seen:
            skipped.append(
                (
                    t.instance_id,
                    f"{t.source}: a second trajectory of {t.instance_id} (one per instance: the first is replayed)",
                )
            )
            continue
        seen.add(t.instance_id)
        unique.append(t)
    return unique


def _matching(trajs: list[Trajectory], filter_: str) -> list[Trajectory]:
    """``--filter``: the runs whose instance id the regular expression matches (one at least)."""
    try:
        rx = re.compile(filter_)
    except re.error as e:
        _fail(f"--filter {filter_!r} is not a regular expression: {e}")
        raise AssertionError from e  # fail() raised
    trajs = [t for t in trajs if rx.search(t.instance_id)]
    if not trajs:
        _fail(f"no trajectory's instance id matches --filter {filter_!r}")
    return trajs


def _estimate(
    trajs: list[Trajectory],
    own: dict[str, Loaded | None],
    skipped: list[tuple[str, str]],
    out: Path,
    as_json: bool,
    stderr: Console,
) -> None:
    """``--observations-only``: the estimate from what the recorded runs observed, none replayed
    (those whose own ledger answered them already are skipped)."""
    from ledger_runtime.cli.dirs import unwritable

    problem = unwritable(out)
    if problem:
        _fail(f"cannot write results into -o {out}: {problem}")
    answered = {t.instance_id: why for t in trajs if (why := _answered(t, own[t.instance_id])) is not None}
    skipped += list(answered.items())
    trajs = [t for t in trajs if t.instance_id not in answered]
    if not trajs:
        _fail(f"nothing to estimate: {next(iter(answered.values()))}" if answered else "no trajectory to estimate")
    for iid, why in skipped:
        stderr.print(f"[yellow]skipped[/yellow] {iid}: {why}", highlight=False)
    _observations_only(trajs, out, as_json)


def _from_own_ledgers(
    trajs: list[Trajectory],
    own: dict[str, Loaded | None],
    take_commit: bool,
    commits: dict[str, str],
    notes: list[str],
) -> None:
    """Where the recorded runs came from: a run of ledger-run names its commit (taken where
    ``take_commit`` and neither the trajectory nor ``--instances`` gives one) and its repository in
    its ledger."""
    for t in trajs:
        led = own[t.instance_id]
        b = led.state.baseline if led is not None else None
        if b is None:
            continue
        if take_commit and not t.base_commit and t.instance_id not in commits and b.head_commit:
            _take_commit(t, b, notes)
        if b.root:
            t.repo = t.repo or b.root


def _take_commit(t: Trajectory, b: Baseline, notes: list[str]) -> None:
    """The commit a run of ledger-run started from, as the one to replay it from; a note when it
    started with uncommitted changes (the replay's checkout does not have them)."""
    t.base_commit = b.head_commit
    if b.dirty_paths:
        notes.append(
            f"{t.source}: its run started with uncommitted changes to {len(b.dirty_paths)} files "
            f"({', '.join(b.dirty_paths[:3])}{', ...' if len(b.dirty_paths) > 3 else ''}), which the replay's "
            f"checkout of {b.head_commit[:12]} does not have"
        )


def _git_dirs_of_ledgers(own: dict[str, Loaded | None], stderr: Console) -> list[Path]:
    """Without ``--repo``: the repositories the recorded runs' own ledgers ran in."""
    roots = sorted({b.root for led in own.values() if led is not None and (b := led.state.baseline) and b.root})
    git_dirs = [g for r in roots if (g := replay_tree.git_dir(Path(r))) is not None]
    if git_dirs:
        stderr.print(f"--repo: the recorded runs' own {', '.join(roots)}", highlight=False, soft_wrap=True)
    return git_dirs


def _no_repo(own: dict[str, Loaded | None]) -> str:
    """What to say when no repository is known: a run of ledger-run in a directory git does not hold has no commit
    to check out, which "give --repo" did not say (and --observations-only refuses a run with the ledger on)."""
    plain = [b.root for led in own.values() if led is not None and (b := led.state.baseline) and not b.is_git]
    if plain:
        return (
            f"the run worked in {plain[0]}, which is not a git repository: a replay starts from a commit, so give "
            "--repo DIR and --base-commit COMMIT of a repository that holds its files"
        )
    return "give --repo DIR (a clone or a git directory holding the base commits), or --observations-only"


def _with_base_commits(
    trajs: list[Trajectory],
    commits: dict[str, str],
    git_dirs: list[Path],
    skipped: list[tuple[str, str]],
    own: dict[str, Loaded | None] | None = None,
) -> list[Trajectory]:
    """The trajectories whose base commit is known (their own, or --instances') and in a --repo, before
    any is replayed; the others skipped, saying why; none left: one line (no progress bar first)."""
    kept = []
    for t in trajs:
        commit = t.base_commit or commits.get(t.instance_id)
        led = (own or {}).get(t.instance_id)
        b = led.state.baseline if led is not None else None
        if not commit and b is not None and not b.is_git:  # a run of ledger-run where git holds nothing
            skipped.append(
                (t.instance_id, f"no base commit: the run worked in {b.root}, which is not a git repository")
            )
        elif not commit:
            skipped.append((t.instance_id, "no base commit: give --base-commit, or --instances with its instance"))
        elif not any(has_commit(g, commit) for g in git_dirs):
            skipped.append((t.instance_id, f"base commit {commit[:12]} is in none of the --repo directories"))
        else:
            kept.append(t)
    if trajs and not kept:
        _fail(f"nothing to replay: {skipped[-1][0]}: {skipped[-1][1]}")
    return kept


def _pin_base_commit(trajs: list[Trajectory], git_dirs: list[Path], base_commit: str) -> None:
    """``--base-commit``: every run replayed from that commit (the first repository that has it)."""
    sha = next((c for g in git_dirs if (c := _commit_in(g, base_commit.strip()))), None)
    if sha is None:
        _fail(f"--base-commit {base_commit} is in none of the repositories ({', '.join(map(str, git_dirs))})")
    for t in trajs:
        t.base_commit = sha


def _own_workdir(
    fmt: RecordedFormat,
    trajs: list[Trajectory],
    own: dict[str, Loaded | None],
    out: Path,
    skipped: list[tuple[str, str]],
    stderr: Console,
) -> tuple[Path, list[Trajectory]]:
    """Without ``--workdir``: where to replay, and the runs that can be. The recorded runs' own trees
    are never replayed in place: a tree of the replay's own under ``out`` instead (a run whose
    commands name the tree it ran in is skipped); else where the format says its commands ran."""
    ran_in = {b.root for led in own.values() if led is not None and (b := led.state.baseline) and b.root}
    if ran_in and all(led is not None for led in own.values()) and ran_in != {fmt.root}:
        workdir = out / "worktree"
        stderr.print(
            f"--workdir: {workdir} (the recorded runs ran in {', '.join(sorted(ran_in))}; give --workdir to choose)",
            highlight=False,
            soft_wrap=True,  # the paths whole (a long one broke mid-name at 80 columns)
        )
        return workdir, _not_naming(trajs, ran_in, skipped)
    if not fmt.root:
        _fail(f"give --workdir: the {fmt.name} format does not say where its commands ran")
    return Path(fmt.root), trajs


def _not_naming(trajs: list[Trajectory], trees: set[str], skipped: list[tuple[str, str]]) -> list[Trajectory]:
    """The runs whose commands name none of the ``trees`` they ran in (replayed elsewhere, those would
    reach into them); the others skipped, and said so."""
    elsewhere = {t.instance_id: _names_tree(t, trees) for t in trajs}
    for iid, why in elsewhere.items():
        if why is not None:
            skipped.append((iid, why))
    trajs = [t for t in trajs if elsewhere[t.instance_id] is None]
    if not trajs:
        _fail(skipped[-1][1])
    return trajs


def _hold_tree(workdir: Path, git_dirs: list[Path], force: bool, out: Path, inputs: list[Path]) -> replay_tree.Lock:
    """The work tree checked (never one that holds a repository or one of the replay's ``inputs``: its
    trajectories, their ledgers, its instances file and report; ``force``: one not the replay's own)
    and locked for this replay, and ``out`` writable."""
    from ledger_runtime.cli.dirs import unwritable

    clash = replay_tree.overlaps(workdir, git_dirs)
    if clash is not None:
        _fail(
            f"--workdir {workdir} and --repo {clash} overlap: emptying the work tree would delete the repository; "
            "give another --workdir"
        )
    held = replay_tree.inside(workdir, inputs)
    if held is not None:
        _fail(
            f"--workdir {workdir} holds {held}, which this replay reads or writes: emptying it would delete that; "
            "give another --workdir"
        )
    problem = unwritable(out)  # first: the work tree's default is in it (-o a file was a traceback)
    if problem:
        _fail(f"cannot write results into -o {out}: {problem}")
    try:
        replay_tree.check_usable(workdir, force)
        lock = replay_tree.Lock(workdir)
    except replay_tree.TreeError as e:
        _fail(str(e))
        raise AssertionError from e  # fail() raised
    return lock


def _to_go(
    trajs: list[Trajectory],
    out: Path,
    redo: bool,
    contexts: tuple[str, ...],
    models: tuple[str, ...],
    jobs: int,
    stderr,
) -> list[Trajectory]:
    """The runs not replayed yet (with these arms and models; ``redo``: all of them), said on stderr."""
    todo = [t for t in trajs if redo or not _done(result_path(out, t.instance_id), t.instance_id, contexts, models)]
    stderr.print(
        f"{len(trajs)} {'trajectory' if len(trajs) == 1 else 'trajectories'}, "
        f"{len(trajs) - len(todo)} already replayed, {len(todo)} to go "
        f"({sum(len(t.commands) for t in todo)} commands)" + (f", {jobs} at a time" if jobs > 1 else "")
    )
    return todo


def _results(out: Path, trajs: list[Trajectory], skipped: list[tuple[str, str]]) -> list[dict]:
    """The results of the runs replayed (those of this replay's runs in ``out``, earlier ones
    included), the runs skipped written beside them (an earlier replay's list goes when none is)."""
    try:
        if skipped:
            write_private(private_dir(out) / "skipped.json", json.dumps(skipped, indent=1))
        else:
            (out / "skipped.json").unlink(missing_ok=True)
    except OSError as e:
        _fail(f"cannot write {out / 'skipped.json'}: {e.strerror or e}")
    results = [r for r in load_results(out) if r["instance_id"] in {t.instance_id for t in trajs}]
    if not results:
        _fail(
            f"no trajectory was replayed ({len(skipped)} skipped; the reasons above, and in {out / 'skipped.json'})", 1
        )
    return results


def _print_summary(agg: dict, what: str, ctx: dict | None, models, skipped, notes, as_json: bool) -> None:
    """The summary on stdout: JSON (``--json``), or the tables (the context arms' per priced model)."""
    if as_json:
        json.dump(
            {"summary": agg, "skipped": skipped, "notes": notes, **({"context": ctx} if ctx else {})},
            sys.stdout,
            indent=2,
            default=str,
        )
        sys.stdout.write("\n")
        return
    console = plain_console()  # no trailing spaces in a file or a pipe

    def measure(t: Table) -> int:
        return console.measure(t, options=console.options.update_width(10_000)).maximum

    for t in tables(agg, what, console.width, measure):
        console.print(t)
    console.print(class_table(agg["total"]))
    if ctx:
        for m in models:
            for t in context_tables(ctx, m, console.width, measure):  # no figure cut to "8…" nor broken
                console.print(t)
    for iid, why in skipped:
        console.print(f"skipped {iid}: {why}", highlight=False)


def _report_problem(report: Path) -> str | None:
    """Why ``--report`` cannot be written, said before the replay rather than after it (hours, for many runs)."""
    if report.is_dir():
        return f"cannot write --report {report}: it is a directory; name a file, such as {report / 'RESULTS.md'}"
    if report.exists() and not report.is_file():
        return f"cannot write --report {report}: it is not a regular file"
    above = next((p for p in report.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        return f"cannot write --report {report}: {above} is a file, not a directory"
    return None


def _write_report(report: Path, argv, agg: dict, skipped, notes, prov: dict, what: str, ctx, models) -> None:
    """``--report``: the results as Markdown, with the command that made them."""
    command = "ledger-run " + " ".join(shlex.quote(a) for a in argv[1:])
    try:
        report.parent.mkdir(parents=True, exist_ok=True)
        write_private(
            report,
            results_md(agg, command, skipped, notes, prov, what) + (context_md(ctx, models) if ctx else ""),
        )
    except OSError as e:
        _fail(f"cannot write --report {report}: {e.strerror or e}")


def replayed(paths: list[Path], format_name: str, n: int, swebench: bool) -> str:
    """What a replay replayed, for its report's title: how many trajectories of which agent (of
    SWE-bench instances, when their base commits came from an instances file), from where."""
    where = str(paths[0]) + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")
    kind = f"{n} {format_name} {'trajectory' if n == 1 else 'trajectories'}"
    return f"{kind}{' of SWE-bench instances' if swebench else ''} from {where}"


def _commit_in(git_dir: Path, name: str) -> str | None:
    """The commit ``name`` (a hash, a branch, a tag) is in the repository ``git_dir``; None: it is not there."""
    import subprocess

    r = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def own_ledger(t: Trajectory) -> Loaded | None:
    """The ledger the recorded run kept, when its record names one that is there (a run of
    ``ledger-run``: the demo's, ``mini``'s, a SWE-bench arm's); None for a run without one."""
    source = Path(t.source) if t.source else None
    if source is None or not source.is_file():
        return None
    try:
        return load(source)
    except NotALedger:
        return None


def _finished(
    trajs: list[Trajectory], own: dict[str, Loaded | None], skipped: list[tuple[str, str]]
) -> list[Trajectory]:
    """The runs that have ended: one whose ledger a live ``ledger-run`` still writes is skipped, saying so (replayed,
    its first steps would count as the whole run, and a later replay would take them as done)."""
    from ledger_runtime.ledger.private import still_running

    done = []
    for t in trajs:
        led = own.get(t.instance_id)
        going = still_running(led.path.parent) if led is not None else None
        if going:
            skipped.append((t.instance_id, f"{t.source}: {going}; replay it when it has finished"))
        else:
            done.append(t)
    if not done:
        _fail(f"nothing to replay: {skipped[-1][1]}")
    return done


def _answered(t: Trajectory, led: Loaded | None) -> str | None:
    """Why ``t``'s recorded outputs cannot be read for redundancy: they are the ledger's answers
    already (repeats came back as references); None when they are what its commands printed."""
    if led is None or not any(a.applied for a in led.state.attempts):
        return None
    s = summary(led.state)
    return (
        f"{t.source}: its outputs are already the ledger's answers (the run had the ledger on: repeats came back "
        f"as references), not what its commands printed; its ledger says what was spared, "
        f"{s['chars_spared']:,} characters (ledger-run inspect {shell_word(led.path)}); replay it to measure it "
        f"afresh (ledger-run replay {shell_word(t.source)})"
    )


def _names_tree(t: Trajectory, trees: set[str]) -> str | None:
    """Why ``t`` cannot be replayed in a tree of the replay's own: a command of it names the tree its
    run worked in by its path, and would act on it there."""
    for s in t.commands:
        for tree in trees:
            if tree in (s.command or ""):
                return (
                    f"{t.source}: its commands name {tree}, where it ran, by its path: replay it where they lead with "
                    f"--workdir {tree} --force (the tree is emptied first: only where losing its files is fine)"
                )
    return None


def _done(path: Path, instance_id: str, contexts: tuple[str, ...], models: tuple[str, ...] = ()) -> bool:
    """Whether a trajectory has a result: a finished one of this instance (with every asked-for context policy
    measured in every asked-for price model)."""
    if not path.exists():
        return False
    try:
        result = json_value(path.read_text())
    except (OSError, ValueError):  # UnreadableJSON, UnicodeDecodeError
        return False
    # a result of another shape (edited by hand, another tool's file; one naming no instance was then a KeyError
    # where the results are gathered) is not this instance's: replayed again
    if not isinstance(result, dict) or result.get("status") != "done" or result.get("instance_id") != instance_id:
        return False
    if not contexts:  # the price models are measured only with the context policies
        return True
    arms = _field(_field(result, "cost"), "arms")
    return all(m in _field(arms, c) for c in ("ledger", *contexts) if c != "full" for m in models)


def _field(obj: object, name: str) -> dict:
    """``obj[name]`` where both are JSON objects, else an empty one."""
    value = obj.get(name) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _replay_all(
    todo: list[Trajectory], settings: ReplaySettings, jobs: int, stderr: Console, notes: list[str]
) -> list[tuple[str, str]]:
    """Replay ``todo`` with a progress display, ``jobs`` at a time; returns the trajectories skipped.
    Ctrl-C, a SIGTERM to this process alone (``kill PID``) or a SIGHUP stops it and says what was kept (exit
    130, 143 or 129): no worker, and no command one ran, outlives the replay."""
    from ledger_harness.stopping import stopped_as_ctrl_c

    with stopped_as_ctrl_c() as stop:
        try:
            return _replay_todo(todo, settings, jobs, stderr, notes)
        except KeyboardInterrupt:
            print(
                f"interrupted: the finished trajectories are kept in {settings.out} (run the same command again "
                "to go on from there)",
                file=sys.stderr,
            )
            raise SystemExit(stop.exit_code()) from None


def _replay_todo(
    todo: list[Trajectory], settings: ReplaySettings, jobs: int, stderr: Console, notes: list[str]
) -> list[tuple[str, str]]:
    """``_replay_all`` without the stop: the progress display, one trajectory at a time or in workers."""
    skipped: list[tuple[str, str]] = []
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=stderr, transient=False) as progress:
        overall = progress.add_task("commands", total=sum(len(t.commands) for t in todo))

        def finished(t: Trajectory, why: str | None, failed: bool = False) -> None:
            if why is not None:
                skipped.append((t.instance_id, why))
                stderr.print(
                    f"[{'red' if failed else 'yellow'}]{'failed' if failed else 'skipped'}[/] {t.instance_id}: {why}",
                    highlight=False,
                )
            progress.advance(overall, len(t.commands))

        if jobs == 1:
            for t in todo:
                progress.update(overall, description=f"{t.instance_id:<32}")
                start = progress.tasks[0].completed
                try:
                    replay_one(
                        t, settings, on_step=lambda i, n, base=start: progress.update(overall, completed=base + i)
                    )
                    progress.update(overall, completed=start)
                    finished(t, None)
                except Skip as e:
                    progress.update(overall, completed=start)
                    finished(t, str(e))
                except Exception as e:  # one bad trajectory never stops the rest
                    progress.update(overall, completed=start)
                    finished(t, f"{type(e).__name__}: {e}", failed=True)
            return skipped
        _run_pools(todo, settings, jobs, notes, finished, progress, overall)
    return skipped


ISOLATION_NOTES = {
    "directory": "work trees: one private directory per worker (no mount namespaces here); commands naming the "
    "work tree by its absolute path ran against the shared one",
    "namespace-shared-tmp": "/tmp: shared by the workers (a path the replay needs, -o or --repo, lies under it); "
    "commands writing /tmp may have seen each other's files",
}


def _run_pools(  # noqa: C901
    todo: list[Trajectory], settings: ReplaySettings, jobs: int, notes: list[str], finished, progress, overall
) -> None:
    """``todo`` in worker processes, each in its own tree, in pools one after another. A worker that
    dies takes only the trajectories it was running: the rest go to a fresh pool (each trajectory is
    tried twice at most). Ctrl-C or SIGTERM (a KeyboardInterrupt here) stops the workers, and they
    their commands, before it goes on up."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    settings.workdir.mkdir(parents=True, exist_ok=True)  # the mount point of each worker's own tree
    replay_tree.sweep_stale_workers()
    ctx = multiprocessing.get_context("spawn")  # a fresh, single-threaded process: it may unshare
    remaining = list(todo)
    solo = False  # after a worker died: one trajectory per pool, so a death is its own trajectory's
    progress.update(overall, description=f"{len(todo)} trajectories, {jobs} at a time")
    while remaining:
        batch = remaining[:1] if solo else remaining
        remaining = remaining[1:] if solo else []
        pool = ProcessPoolExecutor(
            max_workers=1 if solo else jobs,
            mp_context=ctx,
            initializer=_worker_start,
            initargs=(str(settings.workdir), [settings.out, *settings.repos]),
        )
        futures = {pool.submit(_worker_replay, t, settings): t for t in batch}
        try:
            for fut in as_completed(futures):
                t = futures[fut]
                try:
                    how = fut.result()
                    kind = (how or "").split(":", 1)[0]
                    if kind in ISOLATION_NOTES and ISOLATION_NOTES[kind] not in notes:
                        notes.append(ISOLATION_NOTES[kind])
                    finished(t, None)
                except Skip as e:
                    finished(t, str(e))
                except BrokenProcessPool:  # a worker died (killed, out of memory): whose fault, solo tells
                    if solo:
                        finished(t, "its worker process died (killed by a command, or out of memory)", failed=True)
                    else:
                        remaining.append(t)
                except Exception as e:
                    finished(t, f"{type(e).__name__}: {e}", failed=True)
            pool.shutdown(wait=True)
        except KeyboardInterrupt:
            procs = list((getattr(pool, "_processes", None) or {}).values())
            manager = getattr(pool, "_executor_manager_thread", None)  # shutdown() drops it
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in procs:
                proc.terminate()
            _join_manager(manager)
            replay_tree.sweep_stale_workers()
            progress.stop()
            raise
        if remaining and not solo:
            solo = True
            notes.append("a worker process died: the trajectories it took down were replayed again one at a time")
    replay_tree.sweep_stale_workers()


def _join_manager(manager) -> None:
    """Wait for a pool's manager thread (taken before ``shutdown``, which forgets it) to see its workers
    gone and close its wake-up pipe. Python 3.11 wakes that thread again at exit, unlocked: one closing
    the pipe meanwhile printed "Exception ignored ... OSError: Bad file descriptor" after the one line
    an interrupt ends with."""
    if manager is not None:
        manager.join(timeout=10)


_ISOLATION: str | None = None


def _worker_start(workdir: str, keep: list[Path]) -> None:
    import signal

    global _ISOLATION
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, _worker_stopped)  # the parent stopping the pool
    _ISOLATION = replay_tree.isolate(Path(workdir), keep)


def _worker_stopped(signum, frame) -> None:
    """A worker stopped by the replay (Ctrl-C, SIGTERM): the command it was running goes with it (each
    leads a session of its own, which no signal to the worker reaches), then the worker exits."""
    from ledger_runtime.executor import kill_child_sessions

    kill_child_sessions()
    os._exit(143)


def _worker_replay(t: Trajectory, settings: ReplaySettings) -> str | None:
    from dataclasses import replace

    if _ISOLATION and _ISOLATION.startswith("directory:"):
        settings = replace(settings, workdir=Path(_ISOLATION.split(":", 1)[1]))
    replay_one(t, settings)
    return _ISOLATION


def code_dirs() -> list[Path]:
    """The folders of the code that decides a replay's figures: the runtime, the adapters (the
    trajectory formats, the agents' wrappers) and this harness; a change to any makes a report dirty."""
    import ledger_adapters
    import ledger_runtime

    return [Path(m.__file__).resolve().parent for m in (ledger_runtime, ledger_adapters)] + [
        Path(__file__).resolve().parents[1]
    ]


def provenance(config, jobs: int = 1, outputs: str = "fresh") -> dict:
    """The code and settings a report was made with: the commit of this checkout (and whether the
    core had uncommitted changes), the ledger settings that decide answers."""
    import subprocess
    import time

    from ledger_runtime import __version__

    code = code_dirs()
    here = code[0]
    out: dict = {
        "version": __version__,
        "written": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "jobs": jobs,
        "outputs": outputs,
    }
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--", *map(str, code)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        out["commit"] = head.stdout.strip() if head.returncode == 0 else None
        out["dirty"] = bool(dirty.stdout.strip()) if dirty.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        out["commit"] = None
    words = config.to_dict()  # the settings' words, as a file gives them (not their enums)
    out["settings"] = {
        k: words[k]
        for k in (
            "dedupe",
            "dedupe_min_lines",
            "dedupe_min_saving",
            "output_limit_chars",
            "output_head_chars",
            "output_tail_chars",
            "context_steps",
        )
    }
    return out


def _observations_only(trajs: list[Trajectory], out: Path, as_json: bool) -> None:
    trunc = Truncation()
    rows = [observations_only(t, trunc) for t in trajs]
    total = {
        "instances": len(rows),
        "commands": sum(r["commands"] for r in rows),
        "redundant": sum(r["redundant"] for r in rows),
        "redundant_exact": sum(r["redundant_exact"] for r in rows),
        "redundant_subsumed": sum(r["redundant_subsumed"] for r in rows),
        "redundant_chars": sum(r["redundant_chars"] for r in rows),
    }
    try:
        write_private(
            private_dir(out) / "observations-only.json", json.dumps({"total": total, "instances": rows}, indent=1)
        )
    except OSError as e:
        from ledger_runtime.cli.errors import fail

        fail(f"cannot write {out / 'observations-only.json'}: {e.strerror or e}")
    if as_json:
        json.dump(total, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    t = Table(title="Redundancy estimated from recorded observations")
    headers = {
        "instances": "runs",
        "commands": "commands",
        "redundant": "redundant",
        "redundant_exact": "exact",
        "redundant_subsumed": "subsumed",
        "redundant_chars": "their chars",
    }
    for k in total:
        t.add_column(headers.get(k, k.replace("_", " ")), justify="right")
    t.add_row(*[f"{v:,}" for v in total.values()])
    Console().print(t)
    share = total["redundant"] / total["commands"] if total["commands"] else 0
    Console().print(f"{share:.1%} of commands redundant ({total['redundant_chars']:,} characters of output)")
