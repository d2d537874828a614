"""Adapters: one module per wrapped agent (installed as the ``ledger_adapters`` package)."""
