"""The ``ledger-run`` executable. ``ledger-run hook EVENT`` runs once per agent event, so it goes
straight to hookclient.py (standard library only) without importing the command line; everything
else goes to cli.py."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["hook"] and not any(a in ("-h", "--help") for a in sys.argv[2:]):
        from .hookclient import main as hook_main

        sys.exit(hook_main(sys.argv[2:]))
    from .cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
