"""What the end-to-end tests of an agent's real binary share: a run of ``ledger-run <agent>`` in a
repository of its own (``AgentRun``: the rows of its ledger, its faults), and a fixture that makes them
and closes their fake model servers."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from conftest import CALC_PROJECT, make_repo

from ledger_runtime.inspection import load


class AgentRun:
    """A repository (``files``, the calc project by default) and the run directory of one agent's runs."""

    fake: Any  # the fake model server the subclass starts

    def __init__(self, tmp: Path, files: dict[str, str] | None = None):
        self.tmp = tmp
        self.repo = make_repo(tmp / "repo", files or CALC_PROJECT)
        self.run_dir = tmp / "run"

    def path(self, name: str) -> str:
        return str(self.repo / name)

    def rows(self) -> list[tuple[Any, ...]]:
        """(first line of the command, verdict, executed, exit code) of each attempt the ledger holds."""
        state = load(self.run_dir).state
        return [(a.command.splitlines()[0], a.verdict.kind, a.executed, a.exit_code) for a in state.attempts]

    def faults(self) -> str:
        f = self.run_dir / "faults.log"
        return f.read_text() if f.exists() else ""

    def inspected(self, env: dict[str, str]) -> tuple[dict[str, Any], str]:
        """``ledger-run inspect RUN --json`` and the run's page (``--html``), each of which must succeed."""
        import json
        import subprocess

        from ledger_runtime import hook_launcher

        out = subprocess.run(
            [*hook_launcher(), "inspect", str(self.run_dir), "--json"], capture_output=True, text=True, env=env
        )
        assert out.returncode == 0, out.stderr[-800:]
        page = self.tmp / "run.html"
        argv = [*hook_launcher(), "inspect", str(self.run_dir), "--html", str(page)]
        shown = subprocess.run(argv, capture_output=True, text=True, env=env)
        assert shown.returncode == 0, shown.stderr[-800:]
        return json.loads(out.stdout), page.read_text()


def sessions(tmp_path: Path, make: Callable[..., AgentRun]):
    """A fixture's body: yields a maker of runs (``make(steps, files)``), and closes their fakes after."""
    made: list[AgentRun] = []

    def new(steps: list[tuple], files: dict[str, str] | None = None) -> AgentRun:
        made.append(make(tmp_path, steps, files))
        return made[-1]

    yield new
    for s in made:
        s.fake.close()
