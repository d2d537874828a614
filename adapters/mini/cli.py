"""``ledger-run mini`` and ``ledger-run demo``: the mini-swe-agent commands of the CLI.

Registered into the ``ledger-run`` app through the ``ledger_runtime.commands`` entry point, so the
core never imports an adapter. Heavy imports (mini-swe-agent, litellm) happen inside the commands.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    app.command(name="mini")(mini)
    app.command(name="demo")(demo)


def demo(
    out: Optional[Path] = typer.Option(
        None, "-o", "--out", help="Directory for the workspace and the run (default: a new temporary directory)."
    ),
    shadow: bool = typer.Option(False, "--shadow", help="Record and decide only: run every command, no state view."),
) -> None:
    """The main job, offline: mini-swe-agent with a scripted model fixes a small buggy project, with the ledger."""
    from ledger_adapters.mini.demo import main_demo
    from ledger_runtime import fail, load, render_summary, summary, unwritable

    if out is not None:
        if out.is_dir() and any((out / name).exists() for name in ("workspace", "run")):
            fail(f"{out} already holds a demo run: pass a new -o directory (or none, for a temporary one)")
        problem = unwritable(out)
        if problem:
            fail(
                f"cannot write the demo into -o {out}: {problem} (pass a new -o directory, or none for a temporary one)"
            )
    missing = [tool for tool in ("git", "python3") if shutil.which(tool) is None]
    if missing:
        fail(f"the demo needs {' and '.join(missing)} on PATH")
    console = Console()
    run_dir = main_demo(out, console, shadow=shadow)
    loaded = load(run_dir)
    console.print(render_summary(summary(loaded.state)))
    console.print(
        f"\nledger: {loaded.path}\ntrajectory: {run_dir / 'trajectory.traj.json'}\n"
        f"look inside: [bold]ledger-run inspect {run_dir}[/bold]   "
        f"(the state view at a step: ledger-run inspect {run_dir} --step 5)"
    )


def quiet_startup() -> None:
    """Before mini-swe-agent and litellm are imported: no banner of mini's, no first-run set-up, and
    litellm's prices from the copy it ships (it otherwise fetches them at import, retrying for
    seconds without a network). The user's own settings of these win."""
    os.environ.setdefault("MSWEA_CONFIGURED", "1")
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _config_fields(environment_class: str) -> set[str]:
    """The required fields of a mini-swe-agent environment's config (empty when it cannot be told)."""
    try:
        from minisweagent.environments import get_environment_class

        cls = get_environment_class(environment_class)
        import inspect

        init = inspect.signature(cls.__init__)
        config_class = init.parameters.get("config_class")
        model = config_class.default if config_class is not None else None
        fields = getattr(model, "model_fields", {}) or {}
        return {name for name, f in fields.items() if f.is_required()}
    except Exception:
        return set()


def _missing_api_keys(model_cfg: dict, model_class: str) -> list[str]:
    """The environment variables litellm needs for this model and does not find (checked offline,
    before a run that would otherwise retry for minutes). Empty when the model class is not litellm's,
    or a key or a server is configured."""
    name = model_cfg.get("model_name")
    kwargs = model_cfg.get("model_kwargs") or {}
    if (
        not isinstance(name, str)
        or not name
        or model_class not in ("", "litellm", "litellm_response")
        or any(kwargs.get(k) for k in ("api_key", "api_base", "base_url"))
    ):
        return []
    try:
        import litellm

        found = litellm.validate_environment(model=name)
    except Exception:
        return []
    return list(found.get("missing_keys") or []) if not found.get("keys_in_environment") else []


def mini(
    model: Optional[str] = typer.Option(
        None, "-m", "--model", help="Model name, any litellm supports (default: mini-swe-agent's configured model)."
    ),
    task: Optional[str] = typer.Option(None, "-t", "--task", help="The task (asked for when not given)."),
    workdir: Path = typer.Option(Path("."), "--workdir", "-w", help="The repository the agent works in."),
    config: Optional[List[str]] = typer.Option(
        None,
        "--config",
        "-c",
        help="As in mini: a config file (path or a built-in name such as "
        "mini.yaml) or KEY=VALUE (agent.step_limit=3); repeat to "
        "merge. Given, mini.yaml is not used unless named "
        "(default: mini.yaml).",
    ),
    ledger_config: Optional[Path] = typer.Option(None, "--ledger-config", help="Ledger settings (TOML)."),
    no_inform: bool = typer.Option(False, "--no-inform", help="Do not put the state view into the prompt."),
    no_govern: bool = typer.Option(False, "--no-govern", help="Run every command (verdicts are still recorded)."),
    shadow: bool = typer.Option(False, "--shadow", help="Record and decide only: run every command, no state view."),
    context: Optional[str] = typer.Option(
        None,
        "--context",
        help="What of the earlier outputs the model is sent: "
        "full, window:M, validity or validity+window:M (docs/context.md).",
    ),
    run_dir: Optional[Path] = typer.Option(None, "-o", "--run-dir", help="Where the ledger and trajectory go."),
    yolo: bool = typer.Option(False, "-y", "--yolo", help="Run commands without asking for confirmation."),
    exit_immediately: bool = typer.Option(
        False, "--exit-immediately", help="Finish when the agent submits, without asking."
    ),
    cost_limit: Optional[float] = typer.Option(None, "-l", "--cost-limit", help="Cost limit (0: none)."),
    model_class: Optional[str] = typer.Option(None, "--model-class", help="mini-swe-agent model class to wrap."),
    environment_class: str = typer.Option(
        "local", "--environment-class", help="mini-swe-agent environment to wrap (local, docker, singularity, ...)."
    ),
    image: Optional[str] = typer.Option(
        None,
        "--image",
        help="The image of a container environment (docker, "
        "singularity, ...); --workdir is mounted into it at "
        "the same path.",
    ),
) -> None:
    """mini-swe-agent with the ledger around it, on any model litellm supports."""
    from ledger_runtime import ConfigError, fail, load_config

    workdir = workdir.resolve()
    if not workdir.is_dir():
        fail(f"--workdir {workdir} is not a directory")
    try:
        load_config(ledger_config, **({"context": context} if context else {}))
    except ConfigError as e:
        fail(str(e))
    quiet_startup()
    import time

    import yaml
    from minisweagent.agents import get_agent
    from minisweagent.config import builtin_config_dir, get_config_from_spec
    from minisweagent.environments import get_environment
    from minisweagent.models import get_model
    from minisweagent.utils.serialize import UNSET, recursive_merge

    # absolute, links not resolved: a run directory that is a link is refused, never followed
    run_dir = Path(os.path.abspath(run_dir or Path("ledger-runs") / time.strftime("%Y%m%d-%H%M%S")))
    from ledger_runtime import unwritable

    problem = unwritable(run_dir)
    if problem:
        fail(f"cannot write the run into -o {run_dir}: {problem}")
    specs = list(config or [str(builtin_config_dir / "mini.yaml")])
    try:
        base = recursive_merge(*[get_config_from_spec(spec) for spec in specs])
    except (OSError, ValueError, yaml.YAMLError) as e:
        fail(f"-c: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        return
    if not isinstance(base, dict):
        fail(f"-c {specs[0]} is not a mini-swe-agent config (a YAML mapping)")
    task = task or (base.get("run") or {}).get("task") or None
    env_cfg = dict(base.get("environment") or {})
    inner_env = env_cfg.pop("environment_class", None) or environment_class
    if image:
        env_cfg["image"] = image
    if inner_env != "local" and "image" in _config_fields(inner_env) and not env_cfg.get("image"):
        fail(f"--environment-class {inner_env} needs an image: pass --image IMAGE")
    if inner_env in ("docker", "minisweagent.environments.docker.DockerEnvironment"):
        # the work tree reaches the container at the same path, and commands start there
        env_cfg["run_args"] = [*(env_cfg.get("run_args") or ["--rm"]), "-v", f"{workdir}:{workdir}"]
        env_cfg.setdefault("cwd", str(workdir))
    model_cfg = dict(base.get("model") or {})
    inner_model = model_cfg.pop("model_class", None) or model_class or ""
    ledger = {
        "run_dir": str(run_dir),
        "inform": not no_inform,
        "govern": not no_govern,
        "shadow": shadow,
        "task": task or "",
    }
    if ledger_config:
        ledger["config_file"] = str(ledger_config)
    if context:
        ledger["context"] = context
    cfg = recursive_merge(
        base,
        {
            "environment": {
                **env_cfg,
                "environment_class": "ledger_adapters.mini.environment.LedgerEnvironment",
                "inner_class": inner_env,
                "cwd": str(workdir),
                "ledger": ledger,
            },
            "model": {
                **model_cfg,
                "model_class": "ledger_adapters.mini.environment.LedgerModel",
                "inner_class": inner_model,
                "model_name": model or model_cfg.get("model_name") or UNSET,
            },
            "agent": {
                "mode": "yolo" if yolo else UNSET,
                "cost_limit": cost_limit if cost_limit is not None else UNSET,
                "confirm_exit": False if exit_immediately else UNSET,
                "output_path": str(run_dir / "trajectory.traj.json"),
            },
        },
    )
    if not task:
        from minisweagent.agents.utils.prompt_user import _multiline_prompt

        Console().print("[bold yellow]What do you want to do?")
        task = _multiline_prompt()
        cfg["environment"]["ledger"]["task"] = task
    missing = _missing_api_keys(cfg.get("model", {}), inner_model)
    if missing:
        fail(f"no API key for {cfg['model'].get('model_name')}: set {' or '.join(missing)} (or pass another -m)")
    try:
        mdl = get_model(config=cfg.get("model", {}))
    except ValueError as e:
        fail(f"{e} (pass -m MODEL, e.g. -m openai/gpt-5-mini)")
        return
    try:
        env = get_environment(cfg.get("environment", {}))
    except Exception as e:  # a config the environment rejects (pydantic), an engine that is not there
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        fail(
            f"the {inner_env} environment cannot start: {first}"
            + (f" ({'; '.join(ln.strip() for ln in str(e).splitlines()[1:3])})" if len(str(e).splitlines()) > 1 else "")
        )
        return
    agent = get_agent(mdl, env, cfg.get("agent", {}), default_type="interactive")
    console = Console()
    trajectory = run_dir / "trajectory.traj.json"
    from ledger_runtime import mask_json_file, touch_private

    try:
        touch_private(trajectory)  # mini-swe-agent rewrites it in place after each step: owner-only
    except OSError:
        pass  # no run directory (the ledger could not start): mini-swe-agent writes it as it would
    try:
        agent.run(task)
    finally:
        env.cleanup()
        runtime = getattr(env, "runtime", None)
        if runtime is not None:  # the secrets in it masked as in the ledger (the agent is done with it)
            problem = mask_json_file(trajectory, runtime.redactor)
            if problem:
                console.print(f"[yellow]warning:[/yellow] {problem}", highlight=False)
        console.print(
            f"\nledger: [bold]{run_dir / 'ledger.sqlite'}[/bold]\n"
            f"trajectory: [bold]{run_dir / 'trajectory.traj.json'}[/bold]\n"
            f"look inside: ledger-run inspect {run_dir}"
        )
