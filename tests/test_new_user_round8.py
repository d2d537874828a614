"""What a new user met, round eight: each case as the user met it, through the real commands in a subprocess with
no terminal."""

from __future__ import annotations

import pytest
from cli_support import ledger_run, one_line_error


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The run the README's demo makes."""
    out = tmp_path_factory.mktemp("demo") / "d"
    r = ledger_run("demo", "-o", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return out / "run"


@pytest.mark.parametrize(
    "text, says",
    [
        ("[ledger.policies.repeat-failure]\nrevise_after = 2.0\n", "ledger.policies.repeat-failure.revise_after"),
        ("[ledger.dedupe]\nmin_lines = 4.0\n", "ledger.dedupe.min_lines = 4"),
        ("[ledger.view]\nbudget_tokens = 800.0\n", "ledger.view.budget_tokens = 800"),
    ],
)
def test_a_whole_number_written_as_a_float_is_taken(tmp_path, text, says):
    """``revise_after = 2.0`` was accepted before round seven made value types strict, and refused after it
    ("must be a whole number >= 1, not 2.0"): 2.0 is a whole number. A value that is not one is still refused."""
    path = tmp_path / "ledger.toml"
    path.write_text(text)
    r = ledger_run("config", "--check", str(path))
    assert r.returncode == 0 and says in r.stdout, r.stderr
    path.write_text(text.replace(".0\n", ".5\n"))
    error = one_line_error(ledger_run("config", "--check", str(path)))
    assert ".5" in error, error


def test_a_whole_number_written_as_a_float_is_the_rule_s_number():
    """The rule that takes ``revise_after = 2.0`` counts with 2, as it would with ``revise_after = 2``."""
    from ledger_runtime.decide.gate import build_rules
    from ledger_runtime.decide.policies import BUILTINS

    rules = build_rules({"repeat-failure": {"revise_after": 2.0}}, "/tmp", BUILTINS)
    rule = next(r for r in rules if r.name == "repeat-failure")
    assert rule.param("revise_after", 3) == 2 and type(rule.param("revise_after", 3)) is int
