"""A SWE-ReX server in a container on the local engine, for tests: the protocol that Modal, Fargate and
Daytona deployments speak, exercised where no cloud can be reached.

The image is the Docker tests' instance image (docker_support.py: a small repository at /testbed) with
SWE-ReX installed as the cloud images have it: ``swerex-remote`` on PATH, in a virtualenv of its own
(the agent's ``python3`` stays the image's). Nothing is pulled from a container registry: the wheels
(swe-rex at the version installed here, its dependencies, and pip itself) are downloaded on this
machine from PyPI for the container's Python and platform, copied into the build context, and
installed in a build with no network (``--network none``). Tagged by content, so it is built once.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import pytest
from docker_support import _run, build_test_image, engine_problem

VENV = "/opt/swerex"


def swerex_version() -> str | None:
    try:
        return metadata.version("swe-rex")
    except metadata.PackageNotFoundError:
        return None


def _dockerfile(base: str, version: str, pip_wheel: str) -> str:
    return (
        f"FROM {base}\nCOPY wheels /tmp/swerex-wheels\n"
        # the image's python3, but a virtualenv of swe-rex's own: Debian's Python refuses pip installs
        # into the system (PEP 668), and the agent's python3 must not see swe-rex's packages
        f"RUN python3 -m venv --without-pip {VENV} "
        f"&& {VENV}/bin/python /tmp/swerex-wheels/{pip_wheel}/pip install -q --no-index "
        f"--find-links /tmp/swerex-wheels swe-rex=={version} "
        f"&& ln -s {VENV}/bin/swerex-remote /usr/local/bin/swerex-remote && rm -rf /tmp/swerex-wheels "
        "&& swerex-remote --version\n"
    )


def _container_platform(image: str) -> tuple[str, list[str]]:
    """The container Python's X.Y, and the wheel platforms it takes (manylinux tags down from its glibc)."""
    probe = "import platform, sys; print('%d.%d' % sys.version_info[:2], platform.machine(), platform.libc_ver()[1])"
    r = _run("docker", "run", "--rm", "--network", "none", image, "python3", "-c", probe, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"cannot ask {image} for its Python: {r.stderr[-300:]}")
    py, arch, glibc = r.stdout.split()
    minor = int(glibc.split(".")[1])
    platforms = [f"manylinux_2_{m}_{arch}" for m in range(minor, 4, -1)]
    return py, platforms + [f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}"]


def build_swerex_image() -> str:
    """The test image with swe-rex's server installed (built once; cached by tag)."""
    version = swerex_version()
    if version is None:
        raise RuntimeError("swe-rex is not installed here (it is in the test extra: pip install -e '.[test]')")
    base = build_test_image()
    tag = (
        "ledger-test/swerex:"
        + hashlib.sha256(json.dumps([base, version, _dockerfile("", "", "")]).encode()).hexdigest()[:12]
    )
    if _run("docker", "image", "inspect", tag).returncode == 0:
        return tag
    py, platforms = _container_platform(base)
    with tempfile.TemporaryDirectory() as d:
        ctx = Path(d)
        wheels = ctx / "wheels"
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--only-binary=:all:"]
        cmd += ["--python-version", py, "--implementation", "cp", "-d", str(wheels), f"swe-rex=={version}", "pip"]
        for p in platforms:
            cmd += ["--platform", p]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"pip download swe-rex=={version} for Python {py} failed: {r.stderr.strip()[-500:]}")
        pip_wheel = next(p.name for p in wheels.glob("pip-*.whl"))
        (ctx / "Dockerfile").write_text(_dockerfile(base, version, pip_wheel))
        r = subprocess.run(
            ["docker", "build", "-q", "--network", "none", "-t", tag, str(ctx)],
            capture_output=True,
            text=True,
            env={"DOCKER_BUILDKIT": "0", "PATH": "/usr/local/bin:/usr/bin:/bin"},
            timeout=600,
        )
        if r.returncode != 0:
            raise RuntimeError(f"building {tag} failed: {r.stderr[-800:]}")
    return tag


@pytest.fixture(scope="session")
def swerex_image() -> str:
    """The image's tag; skips (saying why) with no engine or no swe-rex, fails instead where CI requires
    the Docker tests (LEDGER_REQUIRE_DOCKER)."""
    required = bool(os.environ.get("LEDGER_REQUIRE_DOCKER"))
    problem = engine_problem()
    if problem is None and swerex_version() is None:
        problem = "swe-rex is not installed (it is in the test extra: pip install -e '.[test]')"
    if problem is None:
        try:
            return build_swerex_image()
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            problem = str(e)
    if required:
        pytest.fail(f"LEDGER_REQUIRE_DOCKER is set but {problem}")
    print(f"\nSKIP SWE-ReX tests: {problem}")
    pytest.skip(problem)
