"""User rules for the gate, loaded by dotted path in tests/test_policies.py (``custom_rules:no_docs``)."""

from __future__ import annotations

from ledger_runtime import Finding  # as docs/policies.md tells users


def no_docs(proposal, state, current, rule):
    """No edits to README files."""
    hits = [w for w in proposal.writes if w.rsplit("/", 1)[-1].startswith("README")]
    return Finding(f"{hits[0]} is documentation; this task is about code", {"path": hits[0]}) if hits else None


def broken(proposal, state, current, rule):
    return 1 / 0


def unserialisable(proposal, state, current, rule):
    return Finding("fires always", {"paths": {object()}})


def bad_verdict(proposal, state, current, rule):
    return Finding("fires always", verdict="MAYBE")


def slow(proposal, state, current, rule):
    import time

    time.sleep(10)
    return Finding("too late to matter")


def exits(proposal, state, current, rule):
    import sys

    sys.exit(3)


def interrupts(proposal, state, current, rule):
    raise KeyboardInterrupt
