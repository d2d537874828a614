"""The adapter contract: what an adapter gives the runtime, and what it calls, in which order.

For each run of its agent, an adapter:

1. **Opens** one ``LedgerRuntime(workdir, run_dir, config, task=..., submission=..., secrets=..., workspace=...)``. What
   it knows of its agent goes in here and nowhere else: how it submits, the values its commands get that must be masked,
   and a ``Workspace`` when commands run elsewhere, as in a container.
2. **Before each model call**, puts ``runtime.inform()`` into the prompt, and may let ``to_send`` choose what of the
   history is sent.
3. **For each command**, calls ``runtime.run(command, execute)`` and hands the agent ``result.output`` and
   ``result.returncode``. An agent that runs commands itself (hooks) calls ``runtime.propose(command)`` before (None: a
   ledger fault, let it run); then ``runtime.answer(plan)`` where ``plan.applied and not plan.verdict.kind.executes``,
   else ``runtime.record(plan, result, elapsed)`` after. An exception ``execute`` raises is recorded and goes on to the
   agent.
4. **Closes** it: ``runtime.close()``, or ``with LedgerRuntime(...)``.

The runtime never raises from these calls for a fault of its own: the fault is logged and the command runs as if there
were no ledger. ``docs/adapters.md`` has a whole adapter of about fifty lines.
"""

from __future__ import annotations

from typing import Protocol

from ledger_runtime.analysis.submission import Submission
from ledger_runtime.executor import ExecResult


class Execute(Protocol):
    """How the agent's command runs: in ``cwd``, output with stderr merged, and its return code."""

    def __call__(self, command: str, cwd: str) -> ExecResult: ...


class Adapter(Protocol):
    """What every adapter knows about its agent and hands the runtime when it opens it."""

    name: str  # recorded as the run's ``agent``
    submission: Submission  # how the agent submits (NO_SUBMISSION: it does not, through a command)

    def execute(self, command: str, cwd: str) -> ExecResult:
        """Runs one command as the agent would have run it without the ledger."""
        ...
