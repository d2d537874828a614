"""A real Docker engine for tests: skip (with the reason printed) only when none can be reached.

The engine and the base image come from scripts/docker-engine.sh (run by .ci/run). The test image
mimics a SWE-bench instance image: a small repository at /testbed with python3, git and a failing
test, built locally from that base, never pulled.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import CALC_PROJECT

BASE_IMAGE = "local/bookworm:py"
PROJECT = CALC_PROJECT


DOCKERFILE = (
    f"FROM {BASE_IMAGE}\nCOPY proj /testbed\n"
    "RUN cd /testbed && git init -q && git add -A && git -c user.email=t@t -c user.name=t commit -qm init\n"
    "WORKDIR /testbed\n"
)
# Tagged by content, so an image built from an older project is never taken for this one.
TEST_IMAGE = "ledger-test/testbed:" + hashlib.sha256(json.dumps([PROJECT, DOCKERFILE]).encode()).hexdigest()[:12]


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


def engine_problem() -> str | None:
    if shutil.which("docker") is None:
        return "no docker client on PATH (scripts/docker-engine.sh up installs one and starts an engine)"
    try:
        r = _run("docker", "version", "--format", "{{.Server.Version}}", timeout=15)
    except subprocess.TimeoutExpired:
        return "the docker engine did not answer within 15 s"
    if r.returncode != 0:
        return (
            f"no docker engine reachable ({r.stderr.strip().splitlines()[-1] if r.stderr.strip() else 'no answer'}); "
            "run scripts/docker-engine.sh up"
        )
    if _run("docker", "image", "inspect", BASE_IMAGE).returncode != 0:
        return f"base image {BASE_IMAGE} missing; scripts/docker-engine.sh up builds it"
    return None


def build_test_image() -> str:
    """Build TEST_IMAGE (cached by docker); returns its name."""
    if _run("docker", "image", "inspect", TEST_IMAGE).returncode == 0:
        return TEST_IMAGE
    with tempfile.TemporaryDirectory() as d:
        ctx = Path(d)
        for rel, text in PROJECT.items():
            (ctx / "proj" / rel).parent.mkdir(parents=True, exist_ok=True)
            (ctx / "proj" / rel).write_text(text)
        (ctx / "Dockerfile").write_text(DOCKERFILE)
        r = subprocess.run(
            ["docker", "build", "-q", "-t", TEST_IMAGE, str(ctx)],
            capture_output=True,
            text=True,
            env={"DOCKER_BUILDKIT": "0", "PATH": "/usr/local/bin:/usr/bin:/bin"},
            timeout=600,
        )
        if r.returncode != 0:
            raise RuntimeError(f"building {TEST_IMAGE} failed: {r.stderr[-500:]}")
    return TEST_IMAGE


@pytest.fixture(scope="session")
def docker_image() -> str:
    problem = engine_problem()
    if problem and os.environ.get("LEDGER_REQUIRE_DOCKER"):  # CI starts an engine: its absence is a failure
        pytest.fail(f"LEDGER_REQUIRE_DOCKER is set but {problem}")
    if problem:
        print(f"\nSKIP docker tests: {problem}")
        pytest.skip(problem)
    return build_test_image()
