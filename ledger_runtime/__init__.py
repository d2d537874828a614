"""Ledger runtime: an execution ledger around unmodified coding agents.

The core (this package) is agent-agnostic: records, store, workspace snapshots, command analysis,
govern, inform, the runtime and the CLI. Adapters for specific agents live in ``ledger_adapters``.
"""

__version__ = "0.1.0"
