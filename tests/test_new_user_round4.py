"""What a new user met, round four: each case as the user met it, through the real ``ledger-run`` in a
subprocess with no terminal."""

from __future__ import annotations

import pytest
from cli_support import ledger_run


@pytest.mark.parametrize(
    "command, usage",
    [
        ("inspect", "inspect [OPTIONS] RUN"),
        ("replay", "replay [OPTIONS] TRAJECTORIES..."),
        ("report", "report [OPTIONS] OUT"),
        ("codex", "codex [OPTIONS] [CODEX_ARGS]..."),
    ],
)
def test_usage_names_arguments_in_capitals_and_types_once_per_value(command, usage):
    """typer wrote ``inspect [OPTIONS] {run}`` and ``<list[Path]>`` for a repeated path."""
    r = ledger_run(command, "--help", env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    assert usage in r.stdout, r.stdout[:400]
    assert "{" not in r.stdout.splitlines()[1] and "<list[" not in r.stdout, r.stdout
