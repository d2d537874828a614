"""Shared fixtures: real git repositories in temporary directories."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

# mini-swe-agent and litellm read these at import: quiet, offline, and never the user's own config.
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_CONFIGURED", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# A config directory of this session's own (a fixed one in /tmp is shared with every other run on the machine).
if "MSWEA_GLOBAL_CONFIG_DIR" not in os.environ:
    os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = tempfile.mkdtemp(prefix="ledger-tests-mswea-")
    atexit.register(shutil.rmtree, os.environ["MSWEA_GLOBAL_CONFIG_DIR"], True)

# Builds of the compiled hook client (ledger_runtime/hooks/compiled.py) go to a cache of this session's own,
# not the user's: the first hook a test runs builds it (once per session), and nothing is left behind.
if "LEDGER_HOOK_CACHE" not in os.environ:
    os.environ["LEDGER_HOOK_CACHE"] = tempfile.mkdtemp(prefix="ledger-tests-hook-cache-")
    atexit.register(shutil.rmtree, os.environ["LEDGER_HOOK_CACHE"], True)

# The Ctrl-C tests send SIGINT to the commands they start: a shell that ran the suite in the background
# (no job control) leaves SIGINT ignored, and an ignored signal is inherited by every command started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


# A small project with a failing unittest: the agent-loop tests, locally and in the Docker image.
CALC_PROJECT = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\n"
    + "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(30)),
    "test_calc.py": "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
    ".gitignore": "__pycache__/\n",
}


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env={**os.environ, **GIT_ENV}
    ).stdout


def make_repo(root: Path, files: dict[str, str | bytes], *, commit: bool = True, age_s: float = 10.0) -> Path:
    """A git repository at ``root`` holding ``files``, committed, with timestamps ``age_s`` in the past
    (so the hash cache's racy window does not force re-reads in tests that count reads)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write_files(root, files)
    if commit:
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "initial")
    age(root, age_s)
    return root


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)


def age(root: Path, seconds: float) -> None:
    """Move every mtime under ``root`` (not .git) ``seconds`` into the past."""
    t = time.time() - seconds
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            os.utime(os.path.join(dirpath, name), (t, t), follow_symlinks=False)
        os.utime(dirpath, (t, t))


@pytest.fixture(params=["compiled", "python"])
def hook_client(request, monkeypatch):
    """Each hook client and wrapper in turn, as ``fast_launcher()`` gives them: the compiled one
    (ledger_runtime/hooks/compiled.py; skipped where none can be built, saying why, and required by CI:
    LEDGER_REQUIRE_COMPILED_HOOKS) and the Python one (``LEDGER_HOOK_CLIENT=python``)."""
    if request.param == "python":
        monkeypatch.setenv("LEDGER_HOOK_CLIENT", "python")
        return request.param
    monkeypatch.delenv("LEDGER_HOOK_CLIENT", raising=False)
    from ledger_runtime.hooks.compiled import found

    build = found()
    if build.path is None:
        if os.environ.get("LEDGER_REQUIRE_COMPILED_HOOKS") == "1":
            pytest.fail(f"no compiled hook client, and CI requires one: {build.why}")
        pytest.skip(f"no compiled hook client on this machine: {build.why}")
    from ledger_runtime import fast_launcher

    assert fast_launcher() == [build.path]
    return request.param


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small Python project with a failing test, in a real git repository."""
    return make_repo(
        tmp_path / "proj",
        {
            "calc.py": "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n",
            "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
            "README.md": "# calc\n" + "".join(f"line {i}\n" for i in range(2, 41)),
            "pkg/__init__.py": "",
            "pkg/util.py": "".join(f"def f{i}():\n    return {i}\n\n" for i in range(60)),
            ".gitignore": "*.log\nbuild/\n__pycache__/\n",
        },
    )


# -- markers: what a test needs beyond Python and git (pyproject.toml registers them; docs/testing.md) --------

NEEDS_DOCKER = {"docker_image", "swerex_image"}  # the session fixtures that need an engine
NEEDS_AGENT = {"test_codex_e2e.py", "test_claude_e2e.py", "test_gemini_e2e.py", "test_opencode_e2e.py"}  # real binaries


def pytest_collection_modifyitems(config, items):
    """Mark each test by what it needs: ``docker`` (it uses an engine's fixture), ``agent`` (it drives a
    real agent binary); ``browser`` and ``slow`` are on the tests themselves. A marker only selects: a
    test whose need is missing still skips and says what is missing (or fails where CI requires it)."""
    for item in items:
        if NEEDS_DOCKER & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.docker)
        if item.path.name in NEEDS_AGENT:
            item.add_marker(pytest.mark.agent)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test that starts a browser (tests/browser.py's ``launching``) is marked ``browser``."""
    os.environ.pop("LEDGER_TEST_STARTED_BROWSER", None)
    try:
        return (yield)
    finally:
        if os.environ.pop("LEDGER_TEST_STARTED_BROWSER", None) and item.get_closest_marker("browser") is None:
            pytest.fail(f"{item.nodeid} starts a browser: mark it @pytest.mark.browser", pytrace=False)


def _inotify_instances() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else ():
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            pass
    return n


@pytest.fixture(autouse=True)
def _closes_its_watchers():
    """A test closes the runtimes (and so the inotify watchers) it opens: the instances are the user's,
    fs.inotify.max_user_instances (128) for every process of theirs, and a suite that leaks them leaves
    later tests, and whatever else the user runs, without a watcher."""
    before = _inotify_instances()
    yield
    left = _inotify_instances() - before
    if left > 0:  # what the test dropped (a scanner of its own) is closed when it is collected
        gc.collect()
        left = _inotify_instances() - before
    if left > 0:
        pytest.fail(f"{left} inotify instance(s) left open: close the runtime (or env.cleanup())", pytrace=False)
