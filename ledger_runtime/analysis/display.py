"""One line of a command, for the state view, references and policy reasons."""

from __future__ import annotations

from ledger_runtime.analysis.patches import BEGIN, file_ops

MAX_COMMAND_CHARS = 72


def short_command(command: str, limit: int = MAX_COMMAND_CHARS) -> str:
    """The command's first line cut to ``limit`` characters; a patch shows its files."""
    if command.lstrip().startswith(BEGIN):
        ops = file_ops(command) or []
        command = "apply_patch " + " ".join(op.path for op in ops) + ("\n…" if ops else "")
    lines = command.strip().splitlines() or [""]
    first = lines[0]
    more = len(lines) > 1
    if len(first) > limit:
        first, more = first[: limit - 1], True
    return first + ("…" if more else "")
