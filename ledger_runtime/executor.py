"""Executors: how a command actually runs.

The runtime takes any ``execute(command, cwd) -> ExecResult``; adapters pass their agent's own. ``LocalExecutor`` runs a
fresh ``bash -c`` with stderr merged into stdout, like mini-swe-agent's local environment, and kills the whole process
group on timeout or when the wait is interrupted.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ExecResult:
    """What running a command gave: merged output, return code, and anything the executor adds."""

    output: str
    returncode: int | None
    exception_info: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    output_complete: bool = True  # False when the executor itself cut the output
    started: bool = True  # False: the executor could not start the command (``exception_info`` says why)


@dataclass
class LocalExecutor:
    """Runs a command with ``bash -c`` in ``cwd``; past ``timeout`` seconds its group is killed."""

    timeout: float = 60.0
    env: dict[str, str] | None = None
    shell: str = "/bin/bash"

    def __call__(self, command: str, cwd: str) -> ExecResult:
        env = {**os.environ, **(self.env or {})}
        try:
            proc = subprocess.Popen(
                [self.shell, "-c", command],
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except (OSError, ValueError) as e:  # ValueError: a NUL byte in the command (a model may write one)
            return ExecResult("", -1, f"could not start the command: {e}", started=False)
        try:
            out, _ = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_session(proc.pid)
            try:
                out, _ = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:  # a detached grandchild still holds the pipe
                proc.kill()
                out = b""
            text = out.decode("utf-8", "replace") if out else ""
            return ExecResult(text, -1, f"the command timed out after {self.timeout:g} s", {"timeout": True})
        except BaseException:  # Ctrl-C or a signal's exception while waiting: the command goes too
            _kill_session(proc.pid)
            proc.wait()
            raise
        return ExecResult(out.decode("utf-8", "replace"), proc.returncode)


def child_groups(pid: int | None = None) -> set[int]:
    """The children of ``pid``, this process by default, that lead a process group of their own, read from /proc."""
    from pathlib import Path

    parent, found = pid or os.getpid(), set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            head, rest = stat.read_text().rsplit(")", 1)
            child, fields = int(head.split(" (", 1)[0]), rest.split()
            if int(fields[1]) == parent and int(fields[2]) == child:  # ppid, pgrp
                found.add(child)
        except (OSError, IndexError, ValueError):  # gone, or unreadable
            continue
    return found


def kill_child_sessions(spare: set[int] | frozenset[int] = frozenset()) -> int:
    """Kills the process groups this process's children lead, but those in ``spare``; returns how many.

    These are commands started in a session of their own, which neither a terminal's Ctrl-C nor a signal to this process
    reaches. ``spare`` holds the groups, taken before the commands, that are not the ledger's."""
    killed = 0
    for leader in child_groups() - set(spare):
        try:
            os.killpg(leader, signal.SIGKILL)
            killed += 1
        except OSError:  # gone meanwhile
            continue
    return killed


def _kill_session(pid: int) -> None:
    """Kills the command's whole process group, whose own session a terminal's Ctrl-C does not reach."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
