"""Running the real ``ledger-run`` as a user would (a subprocess, no terminal), and reading its
one-line errors: shared by the tests of what a new user meets."""

from __future__ import annotations

import os
import subprocess
import sys


def ledger_run(
    *args: str, timeout: float = 300, env: dict | None = None, without: tuple[str, ...] = (), **kw
) -> subprocess.CompletedProcess:
    """``ledger-run ARGS`` with mini's set-up and banner off and no standard input; ``without``:
    suffixes of variables to leave out of the environment (``_API_KEY``: no provider's key)."""
    base = {k: v for k, v in os.environ.items() if not (without and k.endswith(without))}
    base.update(
        {"MSWEA_SILENT_STARTUP": "1", "MSWEA_CONFIGURED": "1", "COLUMNS": "200", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    )
    return subprocess.run(
        [sys.executable, "-m", "ledger_runtime", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**base, **(env or {})},
        stdin=subprocess.DEVNULL,
        **kw,
    )


def one_line_error(r: subprocess.CompletedProcess) -> str:
    """The one ``error:`` line a failed command printed (and that it printed no traceback)."""
    assert r.returncode != 0, r.stdout[-1000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.stderr[-3000:]
    return errors[0]


def scripted_mini_config(path, steps: list[str], **environment):
    """mini-swe-agent's own config (mini.yaml) with its scripted model running ``steps``, one per turn
    (``environment``: keys of its environment section to set), written to ``path``."""
    import yaml
    from minisweagent.config import builtin_config_dir

    cfg = yaml.safe_load((builtin_config_dir / "mini.yaml").read_text())
    cfg["environment"] = {**(cfg.get("environment") or {}), **environment}
    cfg["model"] = {
        "model_class": "deterministic",
        "model_name": "deterministic",
        "cost_per_call": 0.0,
        "outputs": scripted_outputs(steps),
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def scripted_outputs(steps: list[str]) -> list[dict]:
    """The replies of mini-swe-agent's scripted (deterministic) model that run ``steps``, one per turn."""
    return [
        {"role": "assistant", "content": f"THOUGHT {i}", "extra": {"actions": [{"command": c}], "cost": 0.0}}
        for i, c in enumerate(steps)
    ]


def prompt(agent: str) -> list[str]:
    """Arguments after ``--`` that give the agent a prompt and name no directory: ``opencode x`` is its TUI started in a
    directory ``x`` (refused as another tree than the work tree), ``opencode run x`` a headless run."""
    return ["run", "x"] if agent == "opencode" else ["x"]
