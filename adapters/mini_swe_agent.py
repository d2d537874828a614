"""The class paths that earlier configs name (``ledger_adapters.mini_swe_agent.LedgerEnvironment``,
``...LedgerModel``): the classes live in ``ledger_adapters.mini.environment`` now."""

from ledger_adapters.mini.environment import LedgerEnvironment, LedgerModel

__all__ = ["LedgerEnvironment", "LedgerModel"]
