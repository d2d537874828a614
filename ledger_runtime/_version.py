"""The version of ledger-runtime (its own module: what reads it imports nothing else of the package)."""

__version__ = "0.1.0"
