"""JSON nested past what Python's parser reads (a user's login file, an agent's record, 5,000 levels deep): its secrets
are still found and masked, with no traceback."""

from __future__ import annotations

import json
from pathlib import Path

from ledger_adapters.claude.cli import login_secrets as claude_login_secrets
from ledger_adapters.codex.cli import login_secrets as codex_login_secrets
from ledger_runtime import keep_masked_jsonl, mask_json_file
from ledger_runtime.ledger.json_strings import json_strings
from ledger_runtime.ledger.redact import Redactor

DEPTH = 5000
TOKEN = "ghp_" + "R4n7" * 9  # a GitHub token's shape: masked wherever it stands
LOGIN = "oat01-Qm93-deep-login-value"  # a login's value: no known shape, masked because the login file holds it


def deep(inner: str, depth: int = DEPTH) -> str:
    """``inner`` at the bottom of ``depth`` objects and lists."""
    return '{"a": [' * depth + inner + "]}" * depth


def test_codex_login_nested_past_the_parser_is_still_masked(tmp_path: Path) -> None:
    (tmp_path / "auth.json").write_text(deep(json.dumps({"tokens": {"refresh_token": LOGIN}})))
    assert LOGIN in codex_login_secrets(tmp_path), "before: RecursionError, a traceback at the run's start"


def test_claude_login_nested_past_the_parser_is_still_masked(tmp_path: Path) -> None:
    (tmp_path / ".credentials.json").write_text(deep(json.dumps({"accessToken": LOGIN})))
    state = tmp_path / ".claude.json"
    state.write_text('{"userID": "u-1234567890", "x": ' + deep('{"primaryApiKey": "sk-deep-key-value-0"}') + "}")
    found = claude_login_secrets(tmp_path, {"CLAUDE_CONFIG_DIR": str(tmp_path)})
    assert LOGIN in found and "sk-deep-key-value-0" in found, "before: none, so the login went unmasked"
    assert "u-1234567890" not in found, "a value under no secret's name is not the login's"


def test_a_trajectory_nested_past_the_parser_is_masked(tmp_path: Path) -> None:
    redactor = Redactor.for_run({}).with_values([LOGIN])
    trajectory = tmp_path / "trajectory.traj.json"
    text = '{"messages": [{"content": "' + TOKEN + '"}], "info": ' + deep(json.dumps(f"key {LOGIN}")) + "}"
    trajectory.write_text(text)
    assert mask_json_file(trajectory, redactor) is None, "before: RecursionError, a traceback at the run's end"
    out = trajectory.read_text()
    assert TOKEN not in out and LOGIN not in out and len(out) == len(text)
    assert [s.value for s in json_strings(out)][-1] == "key " + "*" * len(LOGIN), "still JSON, masked in place"
    assert trajectory.stat().st_mode & 0o777 == 0o600


def test_a_session_line_nested_past_the_parser_is_masked_as_json(tmp_path: Path) -> None:
    quoted = 'pa"ss-' + LOGIN  # a secret with a quote in it: escaped in JSON, so the line's text never holds it
    redactor = Redactor.for_run({}).with_values([quoted])
    session = tmp_path / "s.jsonl"
    session.write_text(deep(json.dumps(quoted)) + "\n")
    keep_masked_jsonl({"s": str(session)}, tmp_path / "out", redactor)
    kept = (tmp_path / "out" / "s.jsonl").read_text()
    assert LOGIN not in kept, "before: the line masked as text, where the secret stands escaped"
