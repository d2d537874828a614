"""The code keeps one style: ``ruff check`` (pyflakes, pycodestyle, import order, complexity) and
``ruff format --check``, with the settings in pyproject.toml (120 columns). The same run as the
pre-commit hooks.

The complexity budget (C901, ``max-complexity`` in pyproject.toml) holds for the product's code,
``ledger_runtime/``, ``adapters/`` and ``harness/``: the functions over it when it came are marked ``# noqa: C901``
where they are defined. That list only shrinks: a new function over the budget fails, a marked one
brought under it must lose its mark, and ``LISTED`` (how many there are) goes down with it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the product's code, held to the complexity budget
BUDGETED = ("ledger_runtime", "adapters", "harness")
# how many functions are over the budget and marked so (see the module docstring): lower it, never raise it
LISTED = 40
_MARK = re.compile(r"#\s*NOQA:[^#]*\bC901\b", re.IGNORECASE)  # the mark, in any case (as ruff reads it)


def _ruff(*args: str) -> subprocess.CompletedProcess:
    try:
        import ruff  # noqa: F401  (the test extra installs it)
    except ImportError:
        pytest.fail("ruff is not installed: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_check_passes():
    r = _ruff("check", "--output-format", "concise", ".")
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format_leaves_every_file_as_it_is():
    r = _ruff("format", "--check", ".")
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_lint_catches_what_it_is_for(tmp_path):
    # the same settings on a file with an unused import and a 130-column line must fail
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\nx = '" + "y" * 124 + "'\n")
    r = _ruff("check", "--config", str(ROOT / "pyproject.toml"), "--output-format", "concise", str(bad))
    assert r.returncode == 1 and "F401" in r.stdout and "E501" in r.stdout, r.stdout + r.stderr


def _marked() -> set[tuple[str, int]]:
    """Where ``# noqa: C901`` stands: (file relative to the repository, line)."""
    return {
        (str(p.relative_to(ROOT)), n)
        for d in BUDGETED
        for p in sorted((ROOT / d).rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if _MARK.search(line)
    }


def _over_budget(*paths: str) -> dict[tuple[str, int], str]:
    """Every function over the budget, marked or not: (file, line of its def) -> ruff's message."""
    r = _ruff("check", "--select", "C901", "--ignore-noqa", "--output-format", "json", *paths)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return {
        (str(Path(d["filename"]).resolve().relative_to(ROOT)), d["location"]["row"]): d["message"]
        for d in json.loads(r.stdout)
    }


def test_the_complexity_budget_only_shrinks():
    over, marked = _over_budget(*BUDGETED), _marked()
    new = sorted(f"{f}:{n}: {msg}" for (f, n), msg in over.items() if (f, n) not in marked)
    stale = sorted(f"{f}:{n}" for f, n in marked - over.keys())
    assert not new, (
        f"{len(new)} function(s) over the complexity budget (split them into named steps; "
        f"{len(marked)} listed exceptions, and the list only shrinks):\n" + "\n".join(new)
    )
    assert not stale, "under the budget now: remove their `# noqa: C901` and lower LISTED:\n" + "\n".join(stale)
    assert len(marked) <= LISTED, (
        f"{len(marked)} listed exceptions, more than the {LISTED} allowed: the list only shrinks"
    )
    assert len(marked) == LISTED, f"{len(marked)} listed exceptions now: lower LISTED from {LISTED} to {len(marked)}"


def test_the_complexity_budget_catches_a_new_function(tmp_path):
    # the same settings on a function of 11 branches must fail C901; marked, it passes
    body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(11))
    bad = tmp_path / "bad.py"
    bad.write_text(f"def f(x):\n{body}    return -1\n")
    r = _ruff("check", "--config", str(ROOT / "pyproject.toml"), "--output-format", "concise", str(bad))
    assert r.returncode == 1 and "C901" in r.stdout, r.stdout + r.stderr
    bad.write_text(f"def f(x):  # noqa: C901\n{body}    return -1\n")
    r = _ruff("check", "--config", str(ROOT / "pyproject.toml"), "--output-format", "concise", str(bad))
    assert r.returncode == 0, r.stdout + r.stderr
