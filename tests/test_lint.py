"""The code keeps one style: ``ruff check`` (pyflakes, pycodestyle, import order) and ``ruff format
--check``, with the settings in pyproject.toml (120 columns). The same run as the pre-commit hooks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
