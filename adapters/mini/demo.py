"""``ledger-run demo``: the real mini-swe-agent loop, offline, on a small buggy project.

The project below is laid out in a temporary git repository; a scripted model (mini-swe-agent's
DeterministicModel) behaves like a real agent: it looks around, reads a file, re-reads part of
it, runs the failing test, runs it again without changing anything, fixes the bug, reads the file
again, re-runs the test and submits. Every command goes through the ledger and runs; each step's
verdict and how its output came back (in full, or with what the model already had as references,
or as a diff from what it saw) are shown as they happen, then the inspection summary.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

PROJECT: dict[str, str] = {
    "README.md": "# inventory\n\nPrices, discounts and stock for a small shop.\n",
    ".gitignore": "__pycache__/\n*.pyc\n",
    "inventory/__init__.py": '"""A small shop\'s inventory: prices, discounts and stock."""\n',
    "inventory/pricing.py": '''"""Prices with tax and discounts."""

TAX_RATE = 0.2


def with_tax(price: float) -> float:
    """The price with tax added, rounded to cents."""
    return round(price * (1 + TAX_RATE), 2)


def bulk_price(unit_price: float, quantity: int) -> float:
    """Ten or more items cost 10% less each."""
    total = unit_price * quantity
    if quantity >= 10:
        total = apply_discount(total, 10)
    return round(total, 2)


def apply_discount(price: float, percent: float) -> float:
    """The price after taking ``percent`` percent off.

    >>> apply_discount(200.0, 25)
    150.0
    """
    if not 0 <= percent <= 100:
        raise ValueError(f"discount must be between 0 and 100, not {percent}")
    return round(price * percent, 2)


def price_label(name: str, price: float) -> str:
    """A shelf label: the name and the price with tax."""
    return f"{name}: {with_tax(price):.2f}"
''',
    "inventory/stock.py": '''"""Stock levels."""

from dataclasses import dataclass, field


@dataclass
class Stock:
    levels: dict[str, int] = field(default_factory=dict)

    def add(self, item: str, count: int) -> None:
        self.levels[item] = self.levels.get(item, 0) + count

    def take(self, item: str, count: int) -> None:
        if self.levels.get(item, 0) < count:
            raise ValueError(f"not enough {item}")
        self.levels[item] -= count
''',
    "tests/__init__.py": "",
    # the project's test runner: unittest without its timing line, so a run that fails the same way
    # prints the same bytes, and with paths relative to the project, so it prints them wherever the
    # project lies (the demo's figures are the same on any path)
    "run_tests.sh": '#!/bin/bash\nset -o pipefail\ncd "$(dirname "$0")"\n'
    "python3 -m unittest -q tests.test_pricing 2>&1 | grep -v '^Ran ' \\\n"
    "    | python3 -c 'import os, sys; sys.stdout.write(sys.stdin.read().replace(os.getcwd() + os.sep, \"\"))'\n",
    "tests/test_pricing.py": """import unittest

from inventory.pricing import apply_discount, bulk_price, with_tax


class PricingTest(unittest.TestCase):
    def test_with_tax(self):
        self.assertEqual(with_tax(10.0), 12.0)

    def test_apply_discount(self):
        self.assertEqual(apply_discount(200.0, 25), 150.0)

    def test_bulk_price(self):
        self.assertEqual(bulk_price(2.0, 10), 18.0)


if __name__ == "__main__":
    unittest.main()
""",
}

TASK = (
    "apply_discount(200.0, 25) returns 5000.0 instead of 150.0, and bulk prices are wrong too. "
    "Fix it so that the tests in tests/test_pricing.py pass."
)

TEST = "./run_tests.sh"
FIX = (
    "sed -i 's/return round(price \\* percent, 2)/return round(price * (1 - percent \\/ 100), 2)/' inventory/pricing.py"
)

# (what the agent thinks, the command it runs)
SCRIPT: list[tuple[str, str]] = [
    ("Let me look at the project layout first.", "find . -name '*.py' -not -path './.git/*' | sort"),
    ("The pricing logic is in inventory/pricing.py. Let me read it.", "cat inventory/pricing.py"),
    ("Let me look closely at bulk_price and apply_discount again.", "sed -n '11,28p' inventory/pricing.py"),
    ("Let me run the tests to see the failure.", TEST),
    ("Let me run the tests once more to be sure the failure is stable.", TEST),
    (
        "apply_discount multiplies by the percentage. Let me find every use of it.",
        "grep -n 'apply_discount' -r inventory",
    ),
    ("The discount must take percent/100 off the price. Let me fix the formula.", FIX),
    ("Let me check the file after the edit.", "cat inventory/pricing.py"),
    ("Now the tests should pass.", TEST),
    ("Let me review the change.", "git diff"),
    ("The fix is complete. Submitting.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"),
]


ANSWER_WORDS = {
    "whole": "identical to an earlier output",
    "spans": "lines seen before, as references",
    "delta": "a diff from the version seen",
}


def lay_out(root: Path) -> None:
    """Write the demo project into ``root`` as a git repository with one commit."""
    for rel, text in PROJECT.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if rel.endswith(".sh"):
            p.chmod(0o755)
    env = {**_without_git_variables(os.environ), **DEMO_GIT}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-verify", "-m", "inventory: initial import"]):
        # -c as well: a git before 2.32 reads no GIT_CONFIG_GLOBAL
        done = subprocess.run(
            ["git", "-C", str(root), "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, env=env
        )
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            raise DemoSetUpError(f"git {args[0]} in {root} failed: {said}")


def _without_git_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without git's own variables: ``GIT_DIR``, ``GIT_WORK_TREE``, ``GIT_INDEX_FILE`` (a git hook, a
    ``git rebase -x``, a script that exports them) sent the demo's commit, and its agent's git, to another
    repository, the user's. ``GIT_EXEC_PATH`` stays: where a relocated git finds its own programs."""
    return {k: v for k, v in environ.items() if not k.startswith("GIT_") or k == "GIT_EXEC_PATH"}


class DemoSetUpError(RuntimeError):
    """The demo's project could not be made (its git repository): said in one line."""


# The demo's repository is the demo's: none of the user's git settings (a commit signed, a hooks path for every
# repository: each stopped the demo before its first step), and one date, so that its commit is one hash everywhere.
DEMO_GIT = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "demo",
    "GIT_AUTHOR_EMAIL": "demo@example.com",
    "GIT_COMMITTER_NAME": "demo",
    "GIT_COMMITTER_EMAIL": "demo@example.com",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+0000",
}


def run_demo(out_dir: Path | None, console: Any, *, shadow: bool = False) -> Path:
    """Run the scripted agent with the ledger; returns the run directory."""
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models.test_models import make_output

    from ledger_adapters.mini.environment import LedgerEnvironment, LedgerModel
    from ledger_runtime import shell_word, touch_private

    for name in set(os.environ) - set(_without_git_variables(os.environ)):  # this process runs the demo alone
        del os.environ[name]
    base = out_dir or Path(tempfile.mkdtemp(prefix="ledger-demo-"))
    workspace, run_dir = base / "workspace", base / "run"
    workspace.mkdir(parents=True, exist_ok=True)
    lay_out(workspace)
    outputs = [
        make_output(f"THOUGHT: {thought}\n\n```mswea_bash_command\n{cmd}\n```", [{"command": cmd}], cost=0.0)
        for thought, cmd in SCRIPT
    ]
    env = LedgerEnvironment(
        inner_class="local",
        cwd=str(workspace),
        timeout=60,
        # the agent's `git diff` is the demo's too: not colored, nor without its a/ b/, by the user's ~/.gitconfig
        env={
            "PYTHONDONTWRITEBYTECODE": "1",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
        },
        ledger={"run_dir": str(run_dir), "task": TASK, "shadow": shadow},
    )
    model = LedgerModel(inner_class="deterministic", outputs=outputs, cost_per_call=0.0)
    from rich.padding import Padding
    from rich.text import Text

    started = time.perf_counter()

    def show(action: dict, out: dict) -> None:
        led = out.get("extra", {}).get("ledger", {})
        verdict = led.get("verdict", "?")
        style = {"REUSE": "bold green", "NUDGE": "bold yellow", "RUN": "white"}.get(verdict, "red")
        cmd = action.get("command", "").splitlines()[0]
        cmd = cmd if len(cmd) <= 62 else cmd[:61] + "…"
        line = Text(f"step {model.inner.current_index + 1:>2}  ")
        line.append(f"{verdict:<6}", style=style)
        line.append(f"  {cmd}")
        console.print(line, no_wrap=True, overflow="ellipsis")
        rt = env.runtime
        attempt = rt.state.attempt(led["attempt"]) if rt is not None and led.get("attempt") else None
        details = []
        if attempt is not None and led.get("answer") not in (None, "raw"):
            details.append(
                (
                    f"{led['answer']}: {attempt.shown_chars:,} of {attempt.output_chars:,} characters "
                    f"({ANSWER_WORDS.get(led['answer'], '')})",
                    "green",
                )
            )
        if verdict not in ("RUN", "REUSE") and led.get("reason"):
            details.append((led["reason"], "dim"))
        for text, detail_style in details:  # wrapped under the command, on word boundaries
            console.print(Padding(Text(text, style=detail_style), (0, 0, 0, 13)))

    env.observers.append(show)
    agent = DefaultAgent(
        model,
        env,
        system_template="You are a careful software engineer.",
        instance_template="{{task}}",
        step_limit=len(SCRIPT) + 2,
        cost_limit=0,
        output_path=run_dir / "trajectory.traj.json",
    )
    console.print(
        f"[bold]Ledger runtime demo[/bold]: mini-swe-agent, a scripted model, a buggy project in {workspace}\n"
    )
    touch_private(run_dir / "trajectory.traj.json")  # mini-swe-agent rewrites it in place after each step: owner-only
    try:
        info = agent.run(TASK)
    except KeyboardInterrupt:
        env.cleanup()
        console.file.flush()
        print(  # plain, on stderr, as every command's "interrupted": no wrapping, the paths are for copying
            f"\ninterrupted: the ledger of the steps so far is kept in {run_dir} "
            f"(ledger-run inspect {shell_word(run_dir)}), the project in {workspace}",
            file=sys.stderr,
        )
        sys.exit(130)
    env.cleanup()
    elapsed = time.perf_counter() - started
    status = info.get("exit_status")
    console.print(
        f"\nagent finished: [bold]{status}[/bold] in {elapsed:.1f} s; "
        f"notes of the state view reached the model {_times(model.views_injected)}"
        + (" (each sent once and kept where it was sent). The last one:\n" if model.last_view else ".\n")
    )
    if model.last_view:
        from rich.panel import Panel

        console.print(
            Panel(model.last_view, title="note of the state view", expand=False), markup=False, highlight=False
        )
    return run_dir


def _times(n: int) -> str:
    return "1 time" if n == 1 else f"{n} times"


def main_demo(out_dir: Path | None, console: Any, shadow: bool = False) -> Path:
    try:
        return run_demo(out_dir, console, shadow=shadow)
    except DemoSetUpError as e:
        console.print(f"[red]error:[/red] the demo could not make its project: {e}", highlight=False)
        sys.exit(2)
    except OSError as e:
        console.print(
            f"[red]error:[/red] the demo could not write {e.filename or 'its files'}: {e.strerror}", highlight=False
        )
        sys.exit(2)
