"""The ``ledger-run`` executable: ``hook`` and ``wrap`` go straight to their modules, the rest to cli/main.py.

``ledger-run hook EVENT`` runs once per agent event and ``ledger-run wrap ... -- COMMAND`` once per command, so they
skip importing the command line. Ctrl-C at any moment, the seconds of imports included, ends a command with one line and
exit code 130, never a traceback (cli/interrupt.py)."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["hook"] and not any(a in ("-h", "--help") for a in sys.argv[2:]):
        from ledger_runtime.hooks.client import main as hook_main

        sys.exit(hook_main(sys.argv[2:]))
    if sys.argv[1:2] == ["wrap"]:
        from ledger_runtime.hooks.wrapper import main as wrap_main

        sys.exit(wrap_main(sys.argv[2:]))
    import signal

    from ledger_runtime.cli.interrupt import interrupted, on_ctrl_c, on_lost_ctrl_c

    # the imports of the command line and of the adapters' commands take a second or more: Ctrl-C in
    # them leaves at once; the commands handle it themselves from then on (the demo says what it kept),
    # but one Python could not raise (in a callback: "Exception ignored") leaves at once too
    on_lost_ctrl_c()
    before = on_ctrl_c()
    try:
        from ledger_runtime.cli.main import main as cli_main

        signal.signal(signal.SIGINT, before)
        cli_main()
    except KeyboardInterrupt:
        interrupted()
    finally:
        # The command is done: a Ctrl-C from now on would meet an interpreter shutting down, whose
        # handlers are back to the default (the process killed by the signal). One caught already
        # leaves as any other (130); one that comes later is held until the process has exited.
        on_ctrl_c()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


if __name__ == "__main__":
    main()
