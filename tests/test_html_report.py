"""`ledger-run inspect RUN --html FILE` and `ledger-run report OUT --html FILE`: one self-contained
page, loaded in a real headless browser (Debian's chromium): it runs its script without an error and
shows every step, what the model received beside what the command printed, and the diffs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
if BROWSER is None and os.environ.get("LEDGER_REQUIRE_BROWSER"):
    raise RuntimeError("LEDGER_REQUIRE_BROWSER is set but no chromium was found")
FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n"
    + "".join(f"\n\ndef f{i}(x):\n    return x + {i}\n" for i in range(20))
}


def dom(page: Path) -> str:
    """The page's DOM after load, as the browser built it (scripts run)."""
    if BROWSER is None:
        pytest.skip("no headless browser: apt-get install chromium (CI installs it)")
    r = subprocess.run(
        [
            BROWSER,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--virtual-time-budget=2000",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ledger_runtime", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_a_run_page_in_a_browser(tmp_path):
    repo = make_repo(tmp_path / "r", FILES)
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    try:
        for cmd in ("cat calc.py", "cat calc.py", "sed -i 's/a - b/a + b/' calc.py", "cat calc.py <b>"):
            rt.run(cmd, LocalExecutor())
    finally:
        rt.close()
    page = tmp_path / "run.html"
    r = cli("inspect", str(tmp_path / "run"), "--html", str(page))
    assert r.returncode == 0, r.stderr
    assert page.stat().st_mode & 0o777 == 0o600, "the page holds what the agent saw: owner only"
    text = page.read_text()
    assert "http://" not in text and "https://" not in text and "<link" not in text, "self-contained"
    built = dom(page)
    assert 'data-ready="1"' in built and "data-errors" not in built, "the script ran without an error"
    assert len(re.findall(r'<section class="step"', built)) == 4
    assert "what the model received" in built and "what the command printed" in built
    assert "[ledger: same as step 1's output (`cat calc.py`, exit 0)]" in built
    assert (
        '<span class="add">+    return a + b</span>' in built and '<span class="del">-    return a - b</span>' in built
    )
    assert "cat calc.py &lt;b&gt;" in built, "commands are escaped, never markup"
    assert "the state view before this step" in built


def test_an_arms_page_in_a_browser(tmp_path):
    out = tmp_path / "out"
    for arm in ("ledger", "baseline"):
        (out / arm).mkdir(parents=True)
        (out / arm / "preds.json").write_text(
            json.dumps(
                [{"instance_id": f"demo__calc-{i}", "model_patch": "d", "model_name_or_path": "m"} for i in (1, 2)]
            )
        )
    page = tmp_path / "arms.html"
    r = cli("report", str(out), "--no-png", "--html", str(page))
    assert r.returncode == 0, r.stderr
    built = dom(page)
    assert 'data-ready="1"' in built and "data-errors" not in built
    assert built.count("<h2>demo__calc-") == 2 and "<b>ledger</b>" in built and "<b>baseline</b>" in built
