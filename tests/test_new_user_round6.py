"""What a new user met, round six: each case as the user met it, through the real ``ledger-run`` in a
subprocess with no terminal."""

from __future__ import annotations

import pytest
from cli_support import ledger_run, one_line_error


@pytest.fixture(scope="module")
def spaced_demo(tmp_path_factory):
    """The README's demo, its ``-o`` a path with a space and a non-ASCII letter in it."""
    out = tmp_path_factory.mktemp("demo") / "my runs" / "démo"
    r = ledger_run("demo", "-o", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return out, r


def test_a_run_still_going_is_said_so_by_inspect_and_not_replayed_as_finished(spaced_demo, tmp_path):
    """``ledger-run inspect`` of a run in progress showed its first steps as if that were the run (``--step 3``:
    "past the last step of this ledger"), and ``ledger-run replay`` of it replayed those steps, reported them
    as the whole run, and marked it done: the replay after the run ended skipped it ("1 already replayed")."""
    from ledger_runtime.ledger.private import lock_file

    out, _ = spaced_demo
    run = out / "run"
    lock = lock_file(run / ".lock", "the test's run")  # as the runtime of a run still going holds it
    assert lock is not None
    try:
        r = ledger_run("inspect", str(run))
        assert r.returncode == 0, r.stderr
        assert "the run is still going (pid" in r.stderr and "its ledger so far" in r.stderr
        assert "the run is still going" in one_line_error(ledger_run("inspect", str(run), "--step", "99"))

        replayed = ledger_run("replay", str(run), "-o", str(tmp_path / "replay"))
        said = one_line_error(replayed)
        assert "nothing to replay" in said and "the run is still going" in said and "when it has finished" in said
        assert not (tmp_path / "replay" / "ledgers").exists()
    finally:
        lock.close()
    r = ledger_run("inspect", str(run))
    assert r.returncode == 0 and "still going" not in r.stderr
