"""The adapter contract: what an adapter gives the runtime, and what it calls, in which order.

An adapter wraps one agent. For each run of it:

1. **Open** one ``LedgerRuntime(workdir, run_dir, config, task=..., submission=..., secrets=..., workspace=...)``. What
   the adapter knows of its agent goes in here and nowhere else: how it submits (``Submission``, or ``NO_SUBMISSION``),
   the values handed to its commands that must be masked (``secrets``), and a ``Workspace`` when the commands run
   elsewhere, such as in a container. What to protect goes into the config's policies.
2. **Before each model call**, put ``runtime.inform()`` (the state view; "" when inform is off) into the prompt, and
   optionally let ``to_send`` choose what of the history is sent.
3. **For each command** the agent asks for, either ``runtime.run(command, execute)``, which decides, runs
   ``execute(command, cwd)`` or not, records, and returns a ``RunResult`` whose ``output`` and ``returncode`` the agent
   gets; or, for an agent that runs the command itself (hooks), ``plan = runtime.propose(command)`` before it runs
   (None: a ledger fault, let it run). When ``plan.applied and not plan.verdict.kind.executes``,
   ``runtime.answer(plan)`` is what the agent gets instead; otherwise, after it ran, ``runtime.record(plan, result,
   elapsed)``. ``execute`` may raise the agent's own exceptions: the attempt is recorded and the exception goes on.
4. **Close** it: ``runtime.close()``, or ``with LedgerRuntime(...) as runtime``.

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
