"""Secrets in settings files the agent prints, in forms the masking missed: an HTTP credential after its scheme in a
quoted header value (JSON, TOML), and a random-looking value a lower-case secret's name is given bare (``api_key=``);
code stays as it is (``password = hunter2``, ``token = self.token``)."""

from __future__ import annotations

import json
from pathlib import Path

from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime

EX = LocalExecutor(timeout=30)
BEARER = "Zq8vN3kP0aLw7RtY2mXc"
BASIC = "dXNlcjpodW50ZXIycGFzcw"
TOML_TOKEN = "Hc4Ju8Pw2Lq6Rt0Ys3Vb"
BARE_KEY = "Kd9Wm2Xr7Tq4Np1Lz8Fb"
SETTINGS = f"""{{"mcpServers": {{"web": {{"headers": {{"Authorization": "Bearer {BEARER}"}}}}}}}}
[model_providers.proxy]
http_headers = {{ Authorization = "Basic {BASIC}" }}
headers = {{ "Proxy-Authorization" = "Token {TOML_TOKEN}" }}
api_key={BARE_KEY}
placeholder = {{ Authorization = "Bearer $API_TOKEN" }}
password = hunter2
token = self.token
"""


def test_header_credentials_and_bare_keys_are_masked(repo: Path, tmp_path: Path) -> None:
    (repo / "agent.conf").write_text(SETTINGS)
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    shown = rt.run("cat agent.conf", EX)
    text = rt.store.text(rt.state.attempts[0].output_hash) or ""
    rt.close()
    assert shown.output == SETTINGS, "what the model is shown is not changed"
    stored = b"".join(p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file())
    for secret in (BEARER, BASIC, TOML_TOKEN, BARE_KEY):
        assert secret.encode() not in stored, secret
    assert "Bearer ****" in text and "Basic ****" in text and f"api_key={'*' * len(BARE_KEY)}" in text
    assert "$API_TOKEN" in text and "password = hunter2" in text and "token = self.token" in text, "code is kept"


def test_a_trajectory_s_model_key_is_masked_by_its_name(tmp_path: Path) -> None:
    """mini-swe-agent writes its model's settings into the trajectory (``info.config.model.model_kwargs``): a key
    given there, of no known shape and in no environment variable, was left in clear by masking each string alone."""
    from ledger_runtime import mask_json_file
    from ledger_runtime.ledger.redact import Redactor

    trajectory = tmp_path / "trajectory.traj.json"
    kwargs = {"api_key": BARE_KEY, "api_base": "https://llm.example/v1", "temperature": 0.0}
    data = {"info": {"config": {"model": {"model_kwargs": kwargs}}}, "messages": [{"content": "a b\\nc"}]}
    trajectory.write_text(json.dumps(data))
    assert mask_json_file(trajectory, Redactor.for_run({})) is None
    kept = json.loads(trajectory.read_text())
    assert kept["info"]["config"]["model"]["model_kwargs"] == {**kwargs, "api_key": "*" * len(BARE_KEY)}
    assert kept["messages"] == data["messages"]


def test_a_mask_that_makes_two_keys_one_is_not_kept(tmp_path: Path) -> None:
    """Masked as one text, two keys of a JSON record that are tokens of one shape read the same: a reader keeps one
    of them, so the other's record was lost; each string is masked alone instead, every record kept."""
    from ledger_runtime import mask_json_file
    from ledger_runtime.ledger.redact import Redactor

    first, second = "ghp_" + "A1b2" * 9, "ghp_" + "C3d4" * 9
    trajectory = tmp_path / "trajectory.traj.json"
    trajectory.write_text(json.dumps({"seen": {first: "first", second: "second"}, "api_key": BARE_KEY}))
    assert mask_json_file(trajectory, Redactor.for_run({})) is None
    assert sorted(json.loads(trajectory.read_text())["seen"].values()) == ["first", "second"]


CODE = [  # code and docs the model reads: a name of code or a placeholder, never a credential
    "def f(api_key=DEFAULT_API_KEY_V2):",
    "def f(api_key=default_api_key_v2_value):",
    "    token_counts=token_counts_per_batch2,",
    "token=tokenizer_output_2024",
    "password=password_field_1234567",
    "sorted(items, key=key_function_for_sort_2)",
    "access_token=access_token_placeholder1",
    "Set the header `Authorization: Bearer YOUR_API_KEY` on each request",
    'Authorization = "Bearer YOUR_TOKEN_HERE"',
    '"Authorization": "Bearer your_token_here"',
]


def test_names_of_code_and_placeholders_are_not_masked() -> None:
    from ledger_runtime.ledger.redact import Redactor

    redactor = Redactor.for_run({})
    assert [line for line in CODE if redactor.mask(line) != line] == []
    for secret in (
        "api_key=Kd9Wm2Xr7Tq4Np1Lz8Fb",
        "key=sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        '"Authorization": "Bearer Zq8vN3kP0aLw7RtY2mXc"',
    ):
        assert redactor.mask(secret) != secret, secret
