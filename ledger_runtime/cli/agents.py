"""What a ``ledger-run <agent>`` command around an agent's own binary needs (``codex``, ``claude``):
finding the binary and its version, the ledger's settings with the command's switches, a run directory,
and the one-line errors of a run that cannot start."""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from ledger_runtime.cli.dirs import DEFAULT_RUNS, misplaced, unwritable
from ledger_runtime.cli.errors import fail, say, stderr
from ledger_runtime.cli.launch import hold_ctrl_c_to_the_end
from ledger_runtime.cli.printable import shell_word


def find_binary(explicit: str | None, env_var: str, name: str) -> str | None:
    """The agent's executable: ``explicit`` (and only it, when given), else ``$env_var`` (only it, when set: a
    variable naming a program not there is a mistake to say, never a reason to run another agent's version
    from PATH), else ``name`` on PATH; absolute (the agent starts in the work tree, never relative to here).
    None when there is none."""
    found = shutil.which(explicit or os.environ.get(env_var) or name)
    return os.path.abspath(found) if found else None


def binary_not_found(explicit: str | None, env_var: str, name: str, install: str, option: str) -> str:
    """The one-line error when ``find_binary`` found none: where it looked (``$env_var`` was blamed on PATH, a file
    that is there but not executable said "not found"), and how to install the pinned version."""
    if explicit:
        where = f"at {explicit}" + (" (not an executable file)" if os.path.exists(explicit) else "")
    elif os.environ.get(env_var):
        where = f"at {os.environ[env_var]} (${env_var}, set: it alone is looked for)"
    else:
        where = "on PATH"
    return f"{name} not found {where}: install the pinned version with `{install}` (or pass {option} PATH)"


VERSION_PATIENCE_S = 3.0  # then a line says what is being waited for (Gemini CLI takes 2.5 s on 2 shared cores)
VERSION_TIMEOUT_S = 30.0  # then the version is unknown, and the run goes on


def binary_version(binary: str) -> str | None:
    """The version ``binary --version`` prints (x.y.z), or None. One that does not answer in a few seconds is said
    (it showed nothing for a minute), and given up on at ``VERSION_TIMEOUT_S``, with whatever it started."""
    try:
        proc = subprocess.Popen(
            [binary, "--version"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its children go with it when it is stopped
        )
    except (OSError, subprocess.SubprocessError):
        return None
    try:
        out = _answer(proc, binary)
    finally:
        if proc.poll() is None:  # only one that did not answer: what one that exited left running is not ours to end
            _end(proc)
        if proc.stdout:
            proc.stdout.close()
    m = re.search(r"(\d+\.\d+\.\d+\S*)", out or "")
    return m.group(1) if m else None


VERSION_OUTPUT_MAX = 1 << 16
LEFT_OPEN_S = 0.3  # after the binary exited, how long a pipe still held open (by a child it left) is read


def _answer(proc: subprocess.Popen, binary: str) -> str | None:
    """What ``proc`` printed by its exit, or None when it did not exit in ``VERSION_TIMEOUT_S`` (each wait said on
    stderr). Its exit is the answer, not the pipe's end: a wrapper that leaves a child holding the pipe has answered."""
    assert proc.stdout is not None
    fd, out, eof, said = proc.stdout.fileno(), bytearray(), False, False
    began = time.monotonic()
    exited: float | None = None
    while True:
        now = time.monotonic()
        if exited is None and proc.poll() is not None:
            exited = now
        if exited is not None and (eof or now - exited >= LEFT_OPEN_S):
            return out.decode(errors="replace")
        if exited is None and now - began >= VERSION_TIMEOUT_S:
            say("note:", f"`{binary} --version` did not answer in {VERSION_TIMEOUT_S:g} s: stopped it")
            return None
        if exited is None and not said and now - began >= VERSION_PATIENCE_S:
            up_to = f"the agent's version; up to {VERSION_TIMEOUT_S:g} s"
            say("note:", f"waiting for `{binary} --version` to answer ({up_to})")
            said = True
        if eof:
            time.sleep(0.05)
        elif select.select([fd], [], [], 0.05)[0]:
            chunk = os.read(fd, 65536)
            out += chunk[: max(0, VERSION_OUTPUT_MAX - len(out))]  # one that prints on and on is not kept whole
            eof = not chunk


def _end(proc: subprocess.Popen) -> None:
    """``proc``'s session killed, while it still runs (its group id is then its own, not reused)."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.SubprocessError, OSError):
        proc.wait(timeout=5)


def warn_version(name: str, binary: str, version: str | None, pinned: str, hint: str) -> None:
    """A warning on stderr when the agent is not the version this release is checked against."""
    if version != pinned:
        stderr.print(
            f"[yellow]warning:[/yellow] {name} {version or '(version unknown)'} at {binary}; ledger-run is "
            f"checked against {pinned} ({hint})",
            highlight=False,
        )


def warn_unheard(name: str, heard: int, hint: str = "") -> None:
    """A warning on stderr when no hook of the agent reached the ledger in a run (``heard``: the hook server's count):
    its hooks did not run, so no command of the run was recorded. ``hint``: why that may be, for this agent."""
    if heard == 0:
        stderr.print(
            f"[yellow]warning:[/yellow] no hook of {name} reached the ledger in this run: no command of it was "
            f"recorded{f' ({hint})' if hint else ''}",
            highlight=False,
        )


def agent_config(
    path: Path | None, *, no_inform: bool, no_govern: bool, shadow: bool, defaults: dict[str, Any] | None = None
) -> Any:
    """The ledger's settings (``--ledger-config``) with the command's ``--no-inform``, ``--no-govern``
    and ``--shadow``; a bad settings file is a one-line error."""
    from ledger_runtime.config import ConfigError, load_config

    try:
        config = load_config(path, defaults=defaults) if defaults is not None else load_config(path)
        return config.with_(
            inform=config.inform and not no_inform,
            govern=config.govern and not no_govern,
            shadow=config.shadow or shadow,
        )
    except ConfigError as e:
        fail(str(e))
        raise  # fail exits


def run_dir_for(given: Path | None, workdir: Path, *, resuming: bool = False) -> Path:
    """The run directory (``-o``, default ``ledger-runs/<time>``) of a run in ``workdir``: absolute, links
    not resolved (one that is a link is refused, never followed); a one-line error when it cannot be
    written, or holds a run already (but where the agent's own session is ``resuming``), or is the work
    tree or in it (``dirs.misplaced``)."""
    run_dir = Path(os.path.abspath(given or Path(DEFAULT_RUNS) / time.strftime("%Y%m%d-%H%M%S")))
    problem = misplaced(run_dir, workdir, resuming=resuming) or unwritable(run_dir)
    if problem:
        fail(f"cannot write the run into -o {run_dir}: {problem}")
    return run_dir


@contextmanager
def starting_run() -> Iterator[None]:
    """A run that cannot start says why in one line: no hook socket (SocketDirError says what to
    change), a file of the agent's it cannot write, a run directory another ledger-run writes, a resumed
    run's ledger that is not one (damaged, crafted, of a newer version)."""
    from ledger_runtime.ledger.private import InUse
    from ledger_runtime.ledger.store import NotALedger

    try:
        yield
    except OSError as e:
        fail(str(e) if not getattr(e, "filename", None) else f"{e.filename}: {e.strerror}")
    except (InUse, NotALedger) as e:
        fail(str(e))


def _summary_of(run_dir: Path) -> None:
    """The run's summary (verdicts, answers, what they spared, notes, model calls), on stderr; nothing
    where the run left no ledger to read."""
    from rich.console import Console

    from ledger_runtime.inspection import load, render_summary, summary
    from ledger_runtime.ledger.store import NotALedger

    try:
        loaded = load(run_dir)
    except (NotALedger, OSError):
        return
    Console(stderr=True).print(render_summary(summary(loaded.state)))


def run_pinned(
    name: str,
    binary: str,
    pinned: tuple[str, str],
    run_dir: Path | None,
    workdir: Path,
    start: Callable[[Path, str | None], int],
    kept: Callable[[Path], str],
    resuming: bool = False,
) -> int:
    """One run of an agent's own binary in ``workdir``: a warning when it is not the ``pinned`` version
    (the version and how to install it), the run directory (``-o``), the run (``start(run_dir,
    version)``, its exit code; one that cannot start says why in one line), then where the ledger and
    what the agent keeps (``kept(run_dir)``, a line) are."""
    version = binary_version(binary)
    warn_version(name, binary, version, *pinned)
    run_dir = run_dir_for(run_dir, workdir, resuming=resuming)
    # Ctrl-C is the agent's from its start to this command's end, never given back: one that lands after the agent
    # exited (a user's second, to leave it) cuts neither the ledger's finish nor the summary (``ctrl_c_is_the_agents``)
    hold_ctrl_c_to_the_end()
    with starting_run():
        rc = start(run_dir, version)
    _summary_of(run_dir)
    # plain lines (no wrapping): the paths are for copying
    print(
        f"\nledger: {run_dir / 'ledger.sqlite'}\n{kept(run_dir)}\n"
        f"look inside: ledger-run inspect {shell_word(run_dir)}",
        file=sys.stderr,
    )
    return rc
