"""Attacks on masking: a hook call whose body is not JSON is a fault, and the fault must not keep any
part of a secret in it. The ledger masks a secret it knows whole; a quote of the body cut at some byte
would keep the secret's start, which no mask matches."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_adapters.gemini.hooks import GeminiHooks
from ledger_runtime import LedgerRuntime
from ledger_runtime.hooks.client import ask
from ledger_runtime.hooks.server import HookServer

SECRET = "ghp_Q7x9Lm2Kp4Rt8Vn3Bw6Yz1Hc5Jd0Fg7Sa2E"


@pytest.mark.parametrize(
    "body",
    [
        b'{"tool_input": {"command": "curl -H \'token ' + SECRET.encode() + b"'",  # cut short
        b'["' + b"a" * 30 + b" " + SECRET.encode() + b'"]',  # JSON, not an object
    ],
)
def test_a_hook_body_that_is_not_a_json_object_leaves_no_part_of_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: bytes
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    repo = make_repo(tmp_path / "repo", {"calc.py": "x = 1\n"})
    rt = LedgerRuntime(repo, tmp_path / "run")
    server = HookServer(GeminiHooks(rt).handle, rt.report_fault)
    try:
        assert ask(server.socket_path, "BeforeTool", body, 30) == b""
        deadline = time.monotonic() + 10
        while not (tmp_path / "run" / "faults.log").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        server.close()
        rt.close()
    assert "BeforeTool payload is not" in (tmp_path / "run" / "faults.log").read_text()
    kept = b"".join(p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file())
    assert SECRET[:10].encode() not in kept
