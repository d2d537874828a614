"""What a new user met, round five: each case as the user met it, through the real ``ledger-run`` in a
subprocess with no terminal."""

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
    "args, says",
    [
        (("--step", "3", "--output", "--expand"), "--output or --expand, not both"),
        (("--step", "3", "--output", "--json"), "not with --output or --expand"),
        (("--step", "3", "--expand", "--json"), "not with --output or --expand"),
        (("--step", "5", "--verdict", "NUDGE"), "--verdict and --class filter the timeline: not with --step"),
        (("--step", "5", "--json", "--class", "run"), "--verdict and --class filter the timeline: not with --step"),
    ],
)
def test_inspect_refuses_a_switch_it_would_drop(demo_run, args, says):
    """``--step 3 --output --json`` printed the plain text (a pipe into jq broke), ``--output --expand``
    only the expansion, ``--step 5 --verdict NUDGE`` the state view as if no filter were given."""
    assert says in one_line_error(ledger_run("inspect", str(demo_run), *args))
