"""User rules for the gate, loaded by dotted path in tests/test_policies.py (``custom_rules:no_docs``)."""

from __future__ import annotations

import threading

from ledger_runtime import Finding  # as docs/policies.md tells users

# ``held`` signals that it has begun and runs until the test lets it go: a test can act while a rule
# is running, whatever the machine's load, instead of sleeping and hoping it has begun.
HELD_BEGUN = threading.Event()
HELD_RELEASE = threading.Event()


def no_docs(proposal, state, current, rule):
    """No edits to README files."""
    hits = [w for w in proposal.writes if w.rsplit("/", 1)[-1].startswith("README")]
    return Finding(f"{hits[0]} is documentation; this task is about code", {"path": hits[0]}) if hits else None


def broken(proposal, state, current, rule):
    return 1 / 0


def unserialisable(proposal, state, current, rule):
    return Finding("fires always", {"paths": {object()}})


def _nested(depth: int) -> list:
    evidence: list = []
    for _ in range(depth):
        evidence = [evidence]
    return evidence


def deep(proposal, state, current, rule):
    return Finding("fires always", {"paths": _nested(5000)})


def just_under(proposal, state, current, rule):  # what json.dumps reaches where the gate checks it
    return Finding("fires always", {"paths": _nested(990)})


def bad_verdict(proposal, state, current, rule):
    return Finding("fires always", verdict="MAYBE")


def slow(proposal, state, current, rule):
    import time

    time.sleep(120)
    return Finding("too late to matter")


def held(proposal, state, current, rule):
    HELD_BEGUN.set()
    HELD_RELEASE.wait(120)
    return None


def exits(proposal, state, current, rule):
    import sys

    sys.exit(3)


def interrupts(proposal, state, current, rule):
    raise KeyboardInterrupt
