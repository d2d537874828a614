"""``python -m ledger_runtime.cli``: the ``ledger-run`` command line."""

from ledger_runtime.cli.main import main

main()
