"""``ledger-run mini`` and ``ledger-run demo``: the mini-swe-agent commands of the CLI.

Registered into the ``ledger-run`` app through the ``ledger_runtime.commands`` entry point, so the
core never imports an adapter. Heavy imports (mini-swe-agent, litellm) happen inside the commands.
"""

from __future__ import annotations

import os
import shutil
import sys
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


def _missing_api_keys(model_name: object) -> list[str]:
    """The variables litellm says it lacks for this model (checked offline); empty when it cannot tell."""
    if not isinstance(model_name, str) or not model_name:
        return []
    try:
        import litellm

        found = litellm.validate_environment(model=model_name)
    except Exception:
        return []
    return list(found.get("missing_keys") or []) if not found.get("keys_in_environment") else []


def quiet_logs() -> None:
    """mini-swe-agent sets its loggers to DEBUG (the command line of every container it starts): its
    information and warnings are shown, its debugging is not."""
    import logging

    if logging.getLogger("minisweagent").level < logging.INFO:
        logging.getLogger("minisweagent").setLevel(logging.INFO)


def _invalid(e: Exception, section: str) -> str:
    """A config that mini-swe-agent's classes reject (pydantic), in one line naming the key."""
    errors = getattr(e, "errors", None)
    try:
        first = errors()[0] if callable(errors) else None
    except Exception:
        first = None
    if not first:
        return f"-c {section}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    key = ".".join(str(x) for x in (section, *first.get("loc", ())))
    got = f" (got {first['input']!r})" if "input" in first and not isinstance(first["input"], dict) else ""
    return f"-c {key}: {first.get('msg', 'invalid')}{got}"


def _agent_config_problem(agent_cfg: dict) -> str | None:
    """What mini-swe-agent's agent class would reject in the agent's config (-c agent.KEY=...), or None."""
    import inspect

    from minisweagent.agents import get_agent_class
    from pydantic import ValidationError

    settings = dict(agent_cfg)
    try:
        cls = get_agent_class(settings.pop("agent_class", "interactive"))
    except ValueError as e:
        return f"-c agent.agent_class: {e}"
    config_class = inspect.signature(cls.__init__).parameters.get("config_class")
    if config_class is None or not hasattr(config_class.default, "model_validate"):
        return None
    try:
        config_class.default.model_validate(settings)
    except ValidationError as e:
        return _invalid(e, "agent")
    return None


def _engine_problem(executable: str) -> str | None:
    """Why a container engine's command line cannot run containers here (no command, no daemon), or None."""
    import subprocess

    if shutil.which(executable) is None:
        return f"no {executable} command on PATH: install Docker (or pass another --environment-class)"
    try:
        p = subprocess.run(
            [executable, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"`{executable} info` did not answer: {e}"
    if p.returncode != 0:
        said = next((ln.strip() for ln in (p.stderr or p.stdout).splitlines() if ln.strip()), "")
        return f"the {executable} daemon is not running (or not reachable): {said or f'exit {p.returncode}'}"
    return None


def mini(  # noqa: C901
    model: Optional[str] = typer.Option(
        None,
        "-m",
        "--model",
        help="Model name, any litellm supports (default: mini-swe-agent's configured model); a server of "
        "yours: hosted_vllm/NAME or openai/NAME with --api-base, ollama/NAME.",
    ),
    api_base: Optional[str] = typer.Option(
        None,
        "--api-base",
        help="The address of the server that serves the model (vLLM, ollama, any OpenAI-compatible "
        "one): http://HOST:PORT/v1.",
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
    run_dir: Optional[Path] = typer.Option(
        None, "-o", "--out", "--run-dir", help="Where the ledger and trajectory go (default: ledger-runs/<time>)."
    ),
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
    from pydantic import ValidationError

    from ledger_adapters.mini.models import model_problem, server_of, unreachable

    quiet_logs()

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
        problem = _engine_problem(str(env_cfg.get("executable") or os.getenv("MSWEA_DOCKER_EXECUTABLE", "docker")))
        if problem:
            fail(problem)
        # the work tree reaches the container at the same path, and commands start there
        env_cfg["run_args"] = [*(env_cfg.get("run_args") or ["--rm"]), "-v", f"{workdir}:{workdir}"]
        env_cfg.setdefault("cwd", str(workdir))
    model_cfg = dict(base.get("model") or {})
    inner_model = model_cfg.pop("model_class", None) or model_class or ""
    if api_base:
        model_cfg["model_kwargs"] = {**(model_cfg.get("model_kwargs") or {}), "api_base": api_base}
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
    if not task and not sys.stdin.isatty():
        fail("no task: pass -t TASK (there is no terminal to ask for one)")
    if not task:
        from minisweagent.agents.utils.prompt_user import _multiline_prompt

        Console().print("[bold yellow]What do you want to do?")
        task = _multiline_prompt()
        cfg["environment"]["ledger"]["task"] = task
    model_cfg = cfg.get("model", {})
    problem = model_problem(model_cfg, inner_model, os.environ, _missing_api_keys(model_cfg.get("model_name")))
    server = server_of(model_cfg, os.environ) if inner_model in ("", "litellm", "litellm_textbased") else None
    problem = problem or (server and unreachable(server))
    if problem:
        fail(problem)
    try:
        mdl = get_model(config=model_cfg)
    except ValidationError as e:
        fail(_invalid(e, "model"))
        return
    except ValueError as e:
        fail(f"{e} (pass -m MODEL, e.g. -m openai/gpt-5-mini)")
        return
    problem = _agent_config_problem(cfg.get("agent", {}))  # before an environment (a container) starts
    if problem:
        fail(problem)
    try:
        env = get_environment(cfg.get("environment", {}))
    except ValidationError as e:
        fail(_invalid(e, "environment"))
        return
    except Exception as e:  # an engine that is not there, an image that cannot start
        said = getattr(e, "stderr", None) if isinstance(getattr(e, "stderr", None), str) else None
        lines = [ln.strip() for ln in (said or str(e)).splitlines() if ln.strip()] or [type(e).__name__]
        more = f" ({'; '.join(lines[1:3])})" if lines[1:] else ""
        fail(f"the {inner_env} environment cannot start: {lines[0]}{more}")
        return
    agent = get_agent(mdl, env, cfg.get("agent", {}), default_type="interactive")
    console = Console()
    trajectory = run_dir / "trajectory.traj.json"
    from ledger_runtime import mask_json_file, touch_private

    try:
        touch_private(trajectory)  # mini-swe-agent rewrites it in place after each step: owner-only
    except OSError:
        pass  # no run directory (the ledger could not start): mini-swe-agent writes it as it would
    stopped: Exception | None = None
    try:
        agent.run(task)
    except typer.Exit:
        raise
    except Exception as e:  # the model's server gone, a model error after mini's retries: said in one line
        stopped = e
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
        if runtime is not None and runtime.state.model_calls:
            from ledger_runtime import model_cost_text, summary

            console.print(f"model calls: {runtime.state.model_calls}, cost: {model_cost_text(summary(runtime.state))}")
    if stopped is not None:
        said = next((ln.strip() for ln in str(stopped).splitlines() if ln.strip()), "")
        fail(f"the run stopped: {type(stopped).__name__}" + (f": {said}" if said else ""), code=1)
