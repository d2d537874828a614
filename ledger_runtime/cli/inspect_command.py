"""``ledger-run inspect`` (its options are declared in cli/main.py): what it was given
(``InspectOptions``), the check of it (``validate``: the ledger loaded, the filters known, the switches
that go together) and the run (``run``: what the model received at a step, the run's page, JSON, the
state view at a step, or the timeline and summary)."""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ledger_runtime.cli.errors import DamagedExit, fail, say, stderr
from ledger_runtime.cli.printable import plain_console, visible, visible_data
from ledger_runtime.inspection import (
    changes,
    keep_row,
    load,
    notes,
    outputs_at,
    print_inspection,
    summary,
    timeline,
    view_at,
    views_at,
)
from ledger_runtime.ledger.private import still_running
from ledger_runtime.ledger.store import NotALedger
from ledger_runtime.records import CommandClass, VerdictKind


@dataclass(frozen=True)
class InspectOptions:
    """What ``ledger-run inspect`` was given (``as_json``: ``--json``, ``command_class``: ``--class``)."""

    run: Path
    step: int | None = None
    output: bool = False
    expand: bool = False
    raw: bool = False
    as_json: bool = False
    verdict: str | None = None
    command_class: str | None = None
    html: Path | None = None
    trajectory: Path | None = None


@dataclass(frozen=True)
class Inspection:
    """An inspection that can go on: its options checked, the ledger loaded, the timeline's filters
    (None: no filter)."""

    options: InspectOptions
    loaded: Any
    verdicts: set[str] | None
    classes: set[str] | None


def validate(options: InspectOptions) -> Inspection:
    """The inspection ``options`` ask for, or the one-line error (``fail``) of the first thing wrong with
    them: a filter's unknown name, a file that is no ledger, a step it does not have, switches that do
    not go together, a trajectory that is not there."""
    verdicts = _choices(options.verdict, [v.value for v in VerdictKind], "--verdict", upper=True)
    classes = _choices(options.command_class, [c.value for c in CommandClass], "--class")
    try:
        loaded = load(options.run)
    except NotALedger as e:
        fail(str(e))
    going = still_running(loaded.path.parent)
    if going:  # what it shows is the ledger so far: a step may be missing, a model call not yet answered
        say("note:", f"{going}: this is its ledger so far")
    _check_step(options.step, loaded.state.step, going)
    _check_switches(options)
    if not (options.output or options.expand):
        _check_trajectory(options)
    return Inspection(options, loaded, verdicts, classes)


def _choices(given: Optional[str], known: list[str], option: str, upper: bool = False) -> set[str] | None:
    """A comma-separated filter, checked against the names it may hold (None: no filter)."""
    if given is None:
        return None
    picked = {(x.strip().upper() if upper else x.strip().lower()) for x in given.split(",") if x.strip()}
    unknown = sorted(picked - set(known))
    if not picked:
        fail(f"{option}: give at least one of {', '.join(known)}")
    if unknown:
        fail(f"{option}: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    return picked


def _check_step(step: int | None, last: int, going: str | None = None) -> None:
    """``--step`` within the ledger (``last``: its last step; ``going``: why there may be more to come)."""
    if step is not None and step < 0:
        fail(f"--step must be 0 or more, not {step}")
    if step is not None and step > last:
        later = f"; {going}: try again when it has made that step" if going else ""
        fail(f"--step {step} is past the last step of this ledger ({last}){later}")


def _check_switches(options: InspectOptions) -> None:
    """The switches that need ``--step``, and those that do not go together."""
    step = options.step
    if (options.output or options.expand) and step is None:
        fail("--output and --expand need --step N (the step whose command to show)")
    if options.raw and step is None:
        fail("--raw goes with --step N (its state view, --output or --expand)")
    if options.raw and (options.as_json or options.html is not None):
        fail("--raw is for text on stdout: not with --json or --html")
    if step is not None and options.html is not None:
        fail("--html writes the whole run's page (each step is a section of it): not with --step")
    # each of these printed one and dropped the other without a word
    if options.output and options.expand:
        fail("--output or --expand, not both: what the model received, or what it stands for")
    if (options.output or options.expand) and options.as_json:
        fail("--json with --step N has both (each command's shown and expanded): not with --output or --expand")
    filtered = options.verdict is not None or options.command_class is not None
    if step is not None and filtered:
        fail("--verdict and --class filter the timeline: not with --step")
    if options.html is not None and filtered:  # the page was written whole, without a word (with --json too)
        fail(
            "--verdict and --class filter the timeline and --json, not the page: it has every step, and buttons "
            "to filter them (write it with --html alone)"
        )


def _check_trajectory(options: InspectOptions) -> None:
    """``--trajectory`` only with ``--html``, and a file."""
    if options.trajectory is not None and options.html is None:
        fail("--trajectory goes with --html (the page shows the model's words from it)")
    if options.trajectory is not None and not options.trajectory.is_file():
        fail(f"--trajectory {options.trajectory}: no such file")


def run(inspection: Inspection) -> None:
    """Print (or write) what ``inspection`` asks for; a blob of the ledger that did not read back, and
    a field of an event that was missing or of the wrong type, is said on stderr, one line each, and
    the exit code is 1."""
    gone = None  # the reader left (`| head`): the damage found is still said, on stderr
    try:
        _run(inspection)
    except NotALedger as e:  # the ledger became unreadable while its blobs were read
        fail(str(e))
    except BrokenPipeError as e:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # what is still buffered goes nowhere
        gone = e
    except SystemExit as e:  # rich's on a broken pipe: /dev/null is on stdout already
        if e.code != 1 or isinstance(e, DamagedExit):
            raise
        gone = e
    damaged = inspection.loaded.damaged
    lines = [f"the ledger's blob {h[:12]} {why}: shown as missing" for h, why in damaged.items()]
    lines += inspection.loaded.state.damaged
    for line in lines[:MAX_DAMAGED]:
        say("damaged:", line)
    if len(lines) > MAX_DAMAGED:
        say("damaged:", f"{len(lines) - MAX_DAMAGED} more")
    unchecked = len(inspection.loaded.unchecked)
    if unchecked:  # not damage: a ledger of an older version kept nothing to check them against
        say("note:", f"masked file contents of an older version have no sum to check: {unchecked} shown as missing")
    if lines:
        raise DamagedExit(1)
    if gone is not None:
        raise gone


MAX_DAMAGED = 20  # damaged blobs and fields named one by one


def _run(inspection: Inspection) -> None:
    options, loaded = inspection.options, inspection.loaded
    if options.output or options.expand:
        _print_outputs(inspection)
    elif options.html is not None or options.as_json:
        if options.html is not None:
            _write_page(inspection, options.html)
        if options.as_json:  # both, when both are asked for
            _print_json(inspection)
    elif options.step is not None:
        told = "".join(
            f"\n(the note the model was sent after step {options.step}, {n['chars']:,} characters)\n{n['text']}\n"
            for n in notes(loaded.state, options.step)
            if n["text"]
        )
        _shown(options.raw)(view_at(loaded, options.step) + "\n" + told)  # the text the model got: never re-wrapped
    else:
        rows = [r for r in timeline(loaded.state) if keep_row(r, inspection.verdicts, inspection.classes)]
        print_inspection(loaded, plain_console(), rows, shown=visible_data)


def _shown(raw: bool) -> Callable[[str], Any]:
    """How text goes to stdout: byte for byte (``--raw``), or its control characters escaped."""
    return _exact if raw else (lambda text: sys.stdout.write(visible(text)))


def _exact(text: str) -> None:
    """``text`` on stdout byte for byte (bytes that were not UTF-8 as they were)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
    sys.stdout.buffer.flush()


def _print_outputs(inspection: Inspection) -> None:
    """``--output`` / ``--expand``: the text the model received for the step's commands, or what it
    stands for."""
    options, loaded = inspection.options, inspection.loaded
    found = outputs_at(loaded, options.step)
    if not found:
        fail(f"step {options.step} ran no command")
    show = _shown(options.raw)
    for i, (a, shown, expanded) in enumerate(found):
        if len(found) > 1:  # several commands in one model call: say which is which
            first = (a.command.splitlines() or [""])[0][:100]
            sys.stdout.write(f"{'' if i == 0 else chr(10)}--- {loaded.state.label(a.id)}: {visible(first)}\n")
        text = expanded if options.expand else shown
        why = loaded.damaged.get(a.shown_hash if a.shown_hash is not None else (a.output_hash or ""))
        if text is None and why:
            fail(f"{loaded.state.label(a.id)}: the text the model received does not read back from the ledger ({why})")
        show(text or "")  # never re-wrapped


def _write_page(inspection: Inspection, html: Path) -> None:
    """``--html``: the run as one page, with the agent's own record of it when there is one."""
    from ledger_runtime.cli.html_run import run_page
    from ledger_runtime.ledger.private import private_parents, write_private

    run, loaded = inspection.options.run, inspection.loaded
    record = inspection.options.trajectory
    if record is None and Path(run).is_file() and Path(run).resolve() != loaded.path.resolve():
        record = Path(run)  # a trajectory named as the run: the record is that file
    conversation = None  # the record as read once, for the check and the page
    if inspection.options.trajectory is not None:  # named by the user: one it is not is said, not only on the page
        from ledger_runtime.trajectories import conversation_of

        problems: list[str] = []
        conversation = conversation_of(loaded.path, record, problems)
        if conversation is None:
            why = "; ".join(problems).replace(f"{record}: ", "")
            fail(f"--trajectory {record}: no installed format reads it ({why})")
        else:
            other = _another_run(conversation, loaded.state.attempts)
            if other:  # the page would have put another run's calls, tokens and cost under this one's steps
                fail(f"--trajectory {record}: {other}")
    kept = not_a_page(html)
    if kept:
        fail(f"cannot write --html {html}: it is {kept}, not a page ledger-run wrote (the only file it replaces)")
    try:
        private_parents(html)  # as `report --png figs/x.png`: the folders it names are made, owner-only like the page
        write_private(html, run_page(loaded, record, conversation=conversation))
    except OSError as e:
        above = next((p for p in html.parents if os.path.lexists(p)), None)  # mkdir said only "Not a directory"
        file = above is not None and above.exists() and not above.is_dir()
        fail(f"cannot write --html {html}: {f'{above} is a file, not a directory' if file else e.strerror or e}")
    stderr.print(f"wrote {visible(str(html))}", highlight=False, markup=False, soft_wrap=True)  # one line, whole


def _another_run(conversation: Any, attempts: list[Any]) -> str | None:
    """Why ``conversation`` is not the record of the run of ``attempts``: under a quarter of the commands it asked
    for are the ledger's, and they are under a quarter of the ledger's too (two runs share a ``git diff``; a part of
    a resumed run's record matches in whole); None where either has no command."""
    from ledger_runtime.cli.record import align

    asked = sum(len(t.commands) for t in conversation.turns)
    attempts = [a for a in attempts if not a.agent]  # a subagent's call is not in the record
    if not asked or not attempts:
        return None
    matched = sum(len(e.attempts) for e in align(conversation.turns, attempts) if e.turn is not None)
    if 4 * matched >= asked or 4 * matched >= len(attempts):
        return None
    return (
        f"only {matched:,} of the {asked:,} commands it records {'is' if matched == 1 else 'are'} among this "
        f"ledger's {len(attempts):,}: the record of another run? (without --trajectory the page finds the run's own)"
    )


def _ours(head: bytes) -> bool:
    """Whether a file beginning ``head`` is a page ledger-run wrote: its generator named, or (written before it was)
    the head every page had, followed by its title."""
    from ledger_runtime.cli.html import GENERATOR, HEAD

    start = HEAD.encode()
    return head.startswith(start + GENERATOR.encode()) or head.startswith(start + b"<title>")


def not_a_page(html: Path) -> str | None:
    """What the file at ``html`` is when the page must not replace it: a file there that is not empty
    and not a page (the ledger being inspected, the agent's record, a file of the user's); None when
    it may be written (nothing there, an empty file, a page, or what ``write_private`` refuses itself,
    saying why: a link, a FIFO, another user's file)."""
    try:
        fd = os.open(html, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            return "a directory"
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        head = os.read(fd, 256)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not head or _ours(head):
        return None
    return "an SQLite database (a ledger)" if head.startswith(b"SQLite format 3") else "a file that exists"


def _print_json(inspection: Inspection) -> None:
    """``--json``: the step's commands (with ``--step``), or the summary and the timeline."""
    loaded, step = inspection.loaded, inspection.options.step
    data = _step_data(loaded, step) if step is not None else _run_data(inspection)
    data["damaged"] = dict(loaded.damaged)  # blobs that did not read back (their texts are null): why
    data["unchecked"] = sorted(loaded.unchecked)  # an older version's masked file contents: null, not damaged
    data["damaged_fields"] = list(loaded.state.damaged)  # event fields missing or of the wrong type: shown as
    json.dump(data, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def _step_data(loaded: Any, step: int) -> dict[str, Any]:
    """A step's state view and, per command, what the model received and what it changed."""
    return {
        "ledger": str(loaded.path),
        "step": step,
        "state_view": view_at(loaded, step),
        "notes": notes(loaded.state, step),  # what the model was told after this step, as it was told
        "commands": [
            {
                "attempt": a.id,
                "command": a.command,
                "shown": shown,
                "expanded": expanded,
                "modifications": changes(loaded, loaded.state.modifications_of_attempt(a.id)),
            }
            for a, shown, expanded in outputs_at(loaded, step)
        ],
    }


def _run_data(inspection: Inspection) -> dict[str, Any]:
    """The summary, the timeline (filtered; each row with the state view after its step and what its
    command changed) and the changes made between commands."""
    loaded = inspection.loaded
    state = loaded.state
    rows = [r for r in timeline(state, loaded.transcript()) if keep_row(r, inspection.verdicts, inspection.classes)]
    views = views_at(loaded, {r["step"] for r in rows})
    for r in rows:  # the state view after the row's step, and what its command changed
        r["state_view"] = views[r["step"]]
        r["modifications"] = changes(loaded, state.modifications_of_attempt(r["attempt"]))
    return {
        "ledger": str(loaded.path),
        "summary": summary(state),
        "timeline": rows,
        "between_commands": changes(loaded, [m for m in state.modifications if m.attempt is None]),
        "notes": notes(state),  # every note of the state view the model was sent, after its step
    }
