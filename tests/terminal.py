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


class Terminal:
    """A program on a pseudo-terminal of 40 rows and 120 columns: ``argv`` started in ``cwd`` with
    ``env``; what it draws is kept in ``screen``."""

    def __init__(self, argv: list[str], cwd: str, env: dict[str, str]):
        import fcntl
        import pty
        import struct
        import termios

        self.screen = bytearray()
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the program in the terminal
            os.chdir(cwd)
            os.execve(argv[0], argv, {**env, "TERM": "xterm-256color", "PWD": cwd})
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))

    def pump(self, seconds: float) -> None:
        pump(self.fd, self.screen, seconds)

    def until(self, done, seconds: float = 60) -> bool:
        end = time.monotonic() + seconds
        while not done() and time.monotonic() < end:
            self.pump(0.2)
        return bool(done())

    def ask(self, text: bytes, requests: list) -> None:
        """Type a prompt and press Enter until the model is asked: a key pressed while the input box is
        still being drawn can be dropped (seen on a loaded machine)."""
        before = len(requests)
        os.write(self.fd, text)
        self.until(lambda: drawn(self.screen, text[-12:].decode(), 4000), 10)
        self.press_enter_until(lambda: len(requests) > before, "the prompt never reached the model")

    def press_enter_until(self, done, failure: str, tries: int = 3) -> None:
        """Press Enter until ``done()`` (Enter pressed while a box is still being drawn can be dropped)."""
        for _ in range(tries):
            os.write(self.fd, b"\r")
            if self.until(done, 15):
                return
        raise AssertionError(f"{failure}: {visible(self.screen)}")

    def wait(self, seconds: float = 30) -> int | None:
        """The program's exit status once it ends (None: it did not, and was killed)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.pump(0.2)
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                os.close(self.fd)
                return status
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        return None
