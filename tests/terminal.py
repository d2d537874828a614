"""An agent's interactive session on a pseudo-terminal, for the end-to-end tests: what it draws is
read into a buffer, and its question of where the cursor is gets an answer."""

from __future__ import annotations

import os
import re
import select
import time


def pump(fd: int, screen: bytearray, seconds: float) -> None:
    """Read what the terminal's program writes to ``fd`` into ``screen`` for ``seconds``."""
    end = time.time() + seconds
    while time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                return
            screen.extend(data)
            if b"\x1b[6n" in data:  # the program asks where the cursor is
                os.write(fd, b"\x1b[1;1R")


# an OSC string (a window title), a CSI sequence (private ones included), a charset choice, a mode, a return
CONTROL = re.compile(
    rb"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-9;?<=>]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\r"
)


def visible(screen: bytes, tail: int = 1500) -> str:
    """The last ``tail`` characters of what was drawn, without the terminal's control sequences:
    what a failing assertion shows."""
    text = CONTROL.sub(b"", bytes(screen))
    return text.decode("utf-8", "replace")[-tail:]


def drawn(screen: bytes, text: str, tail: int | None = None) -> bool:
    """Whether ``text`` was drawn (among the last ``tail`` characters; None: at any time). A
    full-screen program draws a space as a cursor move when the cell already holds one, so spaces are
    not compared."""
    shown = CONTROL.sub(b"", bytes(screen)).decode("utf-8", "replace")
    return "".join(text.split()) in "".join((shown[-tail:] if tail else shown).split())
