"""The script an agent's hook configuration runs: ``python -S -E fasthook.py hook EVENT ...`` and
``python -S -E fasthook.py wrap ... -- COMMAND``. The hook client (client.py) and the command
wrapper (wrapper.py) use the standard library alone; run by path without the interpreter's ``site``
start-up (most of it the finder of an editable install) and without importing the package, a hook
costs little more than the interpreter's own start. Its end costs nothing either: once its output
is flushed, the process ends at once (``_exit``), without the interpreter's tear-down (1-2 ms)."""

import posix
import sys


def _end(code: int) -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a reader gone: nothing more can be said
        pass
    posix._exit(code if isinstance(code, int) else 1)


if __name__ == "__main__":
    # run as a script: this directory is sys.path[0], so the two modules import by their own names
    if sys.argv[1:2] == ["hook"]:
        from client import main as hook_main

        _end(hook_main(sys.argv[2:]))
    if sys.argv[1:2] == ["wrap"]:
        from wrapper import main as wrap_main

        _end(wrap_main(sys.argv[2:]))
    print("usage: fasthook.py hook EVENT ... | fasthook.py wrap ... -- COMMAND", file=sys.stderr)
    sys.exit(2)
