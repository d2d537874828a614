"""A harness command (``replay``, ``swebench``) stopped by a SIGTERM to its own process (``kill PID``, a job
scheduler's end of time) stops as Ctrl-C stops it: what is done is kept, nothing it started outlives it, and it
exits 143 where Ctrl-C exits 130."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator


class Terminated(KeyboardInterrupt):
    """A SIGTERM to the command's own process, raised where Ctrl-C's KeyboardInterrupt would be."""


@dataclass
class Stop:
    """Whether a SIGTERM came while ``sigterm_as_ctrl_c`` was on."""

    terminated: bool = False

    def exit_code(self) -> int:
        """What the command exits with once stopped: 143 after a SIGTERM, 130 after Ctrl-C."""
        return 143 if self.terminated else 130


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[Stop]:
    """While on, a SIGTERM raises ``Terminated`` (a KeyboardInterrupt) in the main thread. A SIGTERM ignored
    when it starts (a parent's choice) stays ignored; off the main thread, where no handler can be set,
    nothing changes."""
    stop = Stop()

    def terminated(signum, frame) -> None:
        stop.terminated = True
        raise Terminated

    try:
        previous = (
            None if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN else signal.signal(signal.SIGTERM, terminated)
        )
    except ValueError:  # not the main thread
        previous = None
    try:
        yield stop
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
