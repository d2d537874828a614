"""The policy gate's names where custom rules of earlier releases import them: ``from ledger_runtime.gate import ...``.

The gate is ``decide/gate.py``; a rule of today imports ``from ledger_runtime import Finding``."""

from ledger_runtime.decide.gate import Finding, Outcome, Rule

__all__ = ["Finding", "Outcome", "Rule"]
