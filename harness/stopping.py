"""A harness command (``replay``, ``swebench``) stopped by a SIGTERM to its own process (``kill PID``, a job
scheduler's end of time) or a SIGHUP (its terminal closed) stops as Ctrl-C stops it: what is done is kept,
nothing it started outlives it, and it exits 128 + the signal's number (143, 129) where Ctrl-C exits 130."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """A SIGTERM or SIGHUP to the command's own process, raised where Ctrl-C's KeyboardInterrupt would be."""


@dataclass
class Stop:
    """Which of ``SIGNALS`` came while ``stopped_as_ctrl_c`` was on, if one did."""

    signum: int | None = None

    def exit_code(self) -> int:
        """What the command exits with once stopped: 128 + the signal's number, 130 after Ctrl-C."""
        return 128 + (self.signum if self.signum is not None else signal.SIGINT)


@contextmanager
def stopped_as_ctrl_c() -> Iterator[Stop]:
    """While on, a SIGTERM or SIGHUP raises ``Terminated`` (a KeyboardInterrupt) in the main thread. One
    ignored when it starts stays ignored (``nohup``: a hangup is not a stop); off the main thread, where no
    handler can be set, nothing changes."""
    stop = Stop()

    def terminated(signum, frame) -> None:
        stop.signum = signum
        raise Terminated

    previous: dict[int, object] = {}
    try:
        for s in SIGNALS:
            if signal.getsignal(s) is not signal.SIG_IGN:
                previous[s] = signal.signal(s, terminated)
    except ValueError:  # not the main thread
        pass
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
