"""Checks on the directories a command writes into, made before any work starts."""

from __future__ import annotations

import os
from pathlib import Path

from ledger_runtime.ledger.private import DIR_MODE, DIRECTORY, InUse, lock_file, private_parents, refusal


def unwritable(path: Path) -> str | None:
    """Why ``path`` cannot take a run's files, or None when it can (tried by making it, and what was
    missing is removed again: a command that fails after this check leaves no empty folder). A
    symbolic link, or a directory of another user's (one planted in /tmp), is refused: the run
    would go where its owner chose. The directories above it may be links."""
    if path.is_symlink():
        return "it is a symbolic link, and a run directory is never followed through one"
    if path.exists() and not path.is_dir():
        return "it is a file, not a directory"
    missing = [p for p in (path, *path.parents) if not os.path.lexists(p)]  # the deepest first
    try:
        private_parents(path)
        path.mkdir(mode=DIR_MODE, exist_ok=True)
        why = refusal(os.lstat(path), os.geteuid(), DIRECTORY)  # after mkdir: one made meanwhile too
        if why is not None:
            return why
        probe = path / ".ledger-write-test"
        probe.unlink(missing_ok=True)  # one a killed run left
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        probe.unlink()
    except OSError as e:
        return e.strerror or str(e)
    finally:
        for made in missing:
            try:
                made.rmdir()
            except OSError:  # not empty (another process wrote there meanwhile), or not ours to remove
                break
    return None


DEFAULT_RUNS = "ledger-runs"  # the default home of run directories, beside (or in) the work tree: ignored in git


def misplaced(run_dir: Path, workdir: Path, *, resuming: bool = False) -> str | None:
    """Why ``run_dir`` cannot be the run directory of a run in ``workdir``, or None when it can: one
    another ledger-run writes now; one that holds a run already, unless the agent's own session is
    resumed (``resuming``: its ledger goes on with the conversation that was shown what it holds;
    another conversation never was: a new run gets a new directory); the work tree itself, a
    directory above it, or one inside it but ``ledger-runs/`` (the ledger's files would be the
    repository's, the tree made owner-only, its changes misread)."""
    run_dir, workdir = Path(os.path.abspath(run_dir)), Path(os.path.abspath(workdir))
    if (run_dir / "ledger.sqlite").exists():
        try:
            lock = lock_file(run_dir / ".lock", f"run directory {run_dir}")
        except (InUse, OSError) as e:
            return str(e)
        if lock is not None:
            lock.close()
        if not resuming:
            return "it holds a run already (its ledger.sqlite); a new run needs a new directory"
    real_run, real_work = Path(os.path.realpath(run_dir)), Path(os.path.realpath(workdir))
    if real_run == real_work:
        return "it is the work tree itself"
    if real_work.is_relative_to(real_run):
        return f"the work tree {workdir} is inside it"
    if real_run.is_relative_to(real_work) and not real_run.is_relative_to(real_work / DEFAULT_RUNS):
        return f"it is inside the work tree {workdir} (only its {DEFAULT_RUNS}/, which git ignores, may hold runs)"
    return None
