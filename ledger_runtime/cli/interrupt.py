"""Ctrl-C ends any ``ledger-run`` command with one line and exit code 130 (128 + SIGINT, as a shell
does), never a traceback. Standard library only: entry.py installs it before the command line's
imports, which take a second or more."""

from __future__ import annotations

import os
import signal
import sys


def interrupted() -> None:
    """Say so in one line and leave with 130 at once. A leaving interpreter would run the shutdown of
    half-done imports and threads, where a second Ctrl-C (or the first, caught late) prints a
    traceback or kills it by the signal; what a command keeps is committed as it goes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    try:
        os.write(2, b"interrupted\n")  # the descriptor: a library may have put something else in sys.stderr
    except OSError:
        pass
    os._exit(130)


def on_ctrl_c() -> object:
    """From now on Ctrl-C leaves at once (``interrupted``); returns the handler it replaced."""
    return signal.signal(signal.SIGINT, lambda *_: interrupted())


def on_lost_ctrl_c() -> None:
    """A Ctrl-C that lands where Python cannot raise it (a weak reference's callback, such as the
    import system's module locks, or a destructor) is printed as "Exception ignored ..." with a
    traceback, and the command goes on as if never interrupted: from now on it leaves as any other
    (``interrupted``). Other unraisable exceptions are reported as before."""
    previous = sys.unraisablehook

    def hook(unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            interrupted()
        previous(unraisable)

    sys.unraisablehook = hook
