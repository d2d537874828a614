"""``ledger-run mini`` and ``ledger-run demo``: the mini-swe-agent commands of the CLI.

Registered into the ``ledger-run`` app through the ``ledger_runtime.commands`` entry point, so the
core never imports an adapter. Heavy imports (mini-swe-agent, litellm) happen inside the commands.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    app.command(name="mini")(mini)
    app.command(name="demo")(demo)


def demo(
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Directory for the workspace and the run "
                                                                "(default: a new temporary directory)."),
    shadow: bool = typer.Option(False, "--shadow", help="Record verdicts only; run every command."),
) -> None:
    """The main job, offline: mini-swe-agent with a scripted model fixes a small buggy project, with the ledger."""
    from ledger_runtime.inspection import load, render_summary, summary

    from .demo import main_demo

    if out is not None and any((out / name).exists() for name in ("workspace", "run")):
        from ledger_runtime.cli import fail

        fail(f"{out} already holds a demo run: pass a new -o directory (or none, for a temporary one)")
    console = Console()
    run_dir = main_demo(out, console, shadow=shadow)
    loaded = load(run_dir)
    console.print(render_summary(summary(loaded.state)))
    console.print(f"\nledger: {loaded.path}\ntrajectory: {run_dir / 'trajectory.traj.json'}\n"
                  f"look inside: [bold]ledger-run inspect {run_dir}[/bold]   "
                  f"(the state view at a step: ledger-run inspect {run_dir} --step 5)")


def mini(
    model: Optional[str] = typer.Option(None, "-m", "--model", help="Model name, any litellm supports "
                                                                   "(default: mini-swe-agent's configured model)."),
    task: Optional[str] = typer.Option(None, "-t", "--task", help="The task (asked for when not given)."),
    workdir: Path = typer.Option(Path("."), "--workdir", "-w", help="The repository the agent works in."),
    config: Optional[Path] = typer.Option(None, "--config", "-c",
                                          help="mini-swe-agent YAML config (default: its mini.yaml)."),
    ledger_config: Optional[Path] = typer.Option(None, "--ledger-config", help="Ledger settings (TOML)."),
    no_inform: bool = typer.Option(False, "--no-inform", help="Do not put the state view into the prompt."),
    no_govern: bool = typer.Option(False, "--no-govern", help="Run every command (verdicts are still recorded)."),
    shadow: bool = typer.Option(False, "--shadow", help="Record and decide only: run every command, no state view."),
    run_dir: Optional[Path] = typer.Option(None, "-o", "--run-dir", help="Where the ledger and trajectory go."),
    yolo: bool = typer.Option(False, "-y", "--yolo", help="Run commands without asking for confirmation."),
    exit_immediately: bool = typer.Option(False, "--exit-immediately",
                                          help="Finish when the agent submits, without asking."),
    cost_limit: Optional[float] = typer.Option(None, "-l", "--cost-limit", help="Cost limit (0: none)."),
    model_class: Optional[str] = typer.Option(None, "--model-class", help="mini-swe-agent model class to wrap."),
    environment_class: str = typer.Option("local", "--environment-class", help="mini-swe-agent environment to wrap."),
) -> None:
    """mini-swe-agent with the ledger around it, on any model litellm supports."""
    from ledger_runtime.cli import fail
    from ledger_runtime.config import ConfigError, load_config

    workdir = workdir.resolve()
    if not workdir.is_dir():
        fail(f"--workdir {workdir} is not a directory")
    try:
        load_config(ledger_config) if ledger_config else None
    except ConfigError as e:
        fail(str(e))
    if config is not None and not config.exists():
        fail(f"config file not found: {config}")
    os.environ.setdefault("MSWEA_CONFIGURED", "1")
    from minisweagent.agents import get_agent
    from minisweagent.config import builtin_config_dir, get_config_from_spec
    from minisweagent.environments import get_environment
    from minisweagent.models import get_model
    from minisweagent.utils.serialize import UNSET, recursive_merge

    import time

    run_dir = (run_dir or Path("ledger-runs") / time.strftime("%Y%m%d-%H%M%S")).resolve()
    base = get_config_from_spec(str(config or builtin_config_dir / "mini.yaml"))
    env_cfg = dict(base.get("environment") or {})
    inner_env = env_cfg.pop("environment_class", None) or environment_class
    model_cfg = dict(base.get("model") or {})
    inner_model = model_cfg.pop("model_class", None) or model_class or ""
    ledger = {"run_dir": str(run_dir), "inform": not no_inform and not shadow, "govern": not no_govern,
              "shadow": shadow, "task": task or ""}
    if ledger_config:
        ledger["config_file"] = str(ledger_config)
    cfg = recursive_merge(base, {
        "environment": {**env_cfg, "environment_class": "ledger_adapters.mini_swe_agent.LedgerEnvironment",
                        "inner_class": inner_env, "cwd": str(workdir), "ledger": ledger},
        "model": {**model_cfg, "model_class": "ledger_adapters.mini_swe_agent.LedgerModel", "inner_class": inner_model,
                  "model_name": model or model_cfg.get("model_name") or UNSET},
        "agent": {"mode": "yolo" if yolo else UNSET, "cost_limit": cost_limit if cost_limit is not None else UNSET,
                  "confirm_exit": False if exit_immediately else UNSET,
                  "output_path": str(run_dir / "trajectory.traj.json")},
    })
    if not task:
        from minisweagent.agents.utils.prompt_user import _multiline_prompt

        Console().print("[bold yellow]What do you want to do?")
        task = _multiline_prompt()
        cfg["environment"]["ledger"]["task"] = task
    try:
        mdl = get_model(config=cfg.get("model", {}))
    except ValueError as e:
        fail(f"{e} (pass -m MODEL, e.g. -m openai/gpt-5-mini)")
        return
    env = get_environment(cfg.get("environment", {}))
    agent = get_agent(mdl, env, cfg.get("agent", {}), default_type="interactive")
    console = Console()
    try:
        agent.run(task)
    finally:
        env.cleanup()
        console.print(f"\nledger: [bold]{run_dir / 'ledger.sqlite'}[/bold]\n"
                      f"trajectory: [bold]{run_dir / 'trajectory.traj.json'}[/bold]\n"
                      f"look inside: ledger-run inspect {run_dir}")
