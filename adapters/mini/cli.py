"""``ledger-run mini`` and ``ledger-run demo``: the mini-swe-agent commands of the CLI.

Registered into the ``ledger-run`` app through the ``ledger_runtime.commands`` entry point, so the
core never imports an adapter. Heavy imports (mini-swe-agent, litellm) happen inside the commands.
"""

from __future__ import annotations

import os
import shutil
import sys
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, List, Optional

import typer
from rich.console import Console
from rich.markup import escape

from ledger_runtime import LedgerOptions, plain_console, shell_word


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
    _need_mini("ledger-run demo")
    from ledger_adapters.mini.demo import main_demo
    from ledger_runtime import fail, load, render_summary, summary, unwritable

    if out is not None:
        taken = [name for name in ("workspace", "run") if os.path.lexists(out / name)] if out.is_dir() else []
        if taken:
            fail(
                f"{out} already holds {' and '.join(f'{t}/' for t in taken)}, where a demo run goes: pass a new -o "
                "directory (or none, for a temporary one)"
            )
        problem = unwritable(out)
        if problem:
            fail(
                f"cannot write the demo into -o {out}: {problem} (pass a new -o directory, or none for a temporary one)"
            )
    missing = [tool for tool in ("git", "python3") if shutil.which(tool) is None]
    if missing:
        fail(f"the demo needs {' and '.join(missing)} on PATH")
    console = plain_console()
    run_dir = main_demo(out, console, shadow=shadow)
    loaded = load(run_dir)
    console.print(render_summary(summary(loaded.state)))
    console.print(
        f"\nledger: {loaded.path}\ntrajectory: {run_dir / 'trajectory.traj.json'}\n"
        f"look inside: [bold]ledger-run inspect {escape(shell_word(run_dir))}[/bold]\n"
        f"the state view at a step: ledger-run inspect {escape(shell_word(run_dir))} --step 5",
        soft_wrap=True,  # commands to copy: whole on their lines, at any width
    )


def quiet_startup() -> None:
    """Before mini-swe-agent and litellm are imported: no banner of mini's, no first-run set-up, and
    litellm's prices from the copy it ships (it otherwise fetches them at import, retrying for
    seconds without a network). The user's own settings of these win."""
    os.environ.setdefault("MSWEA_CONFIGURED", "1")
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _quiet_prompts() -> None:
    """With no terminal on stdin, mini-swe-agent's prompts (prompt_toolkit's, made when its interactive
    agent is imported) print "Warning: Input is not a terminal (fd=0)." before anything runs: a run
    from a script is told so once, here, by not asking (``-t`` is the task, the agent does not confirm
    its exit), so the warning is left out."""
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return
        fd = sys.stdin.fileno()
        from prompt_toolkit.input.vt100 import Vt100Input
    except (ImportError, OSError, ValueError):
        return
    Vt100Input._fds_not_a_terminal.add(fd)  # prompt_toolkit warns once per descriptor: as if it had


def _need_mini(what: str) -> None:
    """``what`` fails in one line where mini-swe-agent is missing; imported quietly (``quiet_startup``): no banner,
    even before an error."""
    from ledger_adapters.extras import require

    quiet_startup()
    require("mini", "minisweagent", what)


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
    from minisweagent.agents import get_agent_class

    settings = dict(agent_cfg)
    try:
        cls = get_agent_class(settings.pop("agent_class", "interactive"))
    except ValueError as e:
        return f"-c agent.agent_class: {e}"
    return _settings_problem(cls, settings, "agent")


def _environment_config_problem(env_cfg: dict, inner_env: str) -> str | None:
    """What the inner environment's class would reject in its config (-c environment.KEY=...), or None:
    known before the model is asked about and before a container starts."""
    from minisweagent.environments import get_environment_class

    settings = {k: v for k, v in env_cfg.items() if k not in ("environment_class", "inner_class", "ledger")}
    return _settings_problem(get_environment_class(inner_env), settings, "environment")


def _ledger_settings_problem(ledger: Any) -> str | None:
    """What the ledger would refuse in a -c file's ``environment.ledger`` (an unknown key, a value of the wrong kind),
    or None: said before the run, which otherwise went on without the ledger after a line that scrolled away."""
    from ledger_adapters.mini.environment import ledger_config, ledger_settings
    from ledger_runtime import ConfigError

    try:
        ledger_config(ledger_settings(ledger, origin="-c environment.ledger"), origin="-c environment.ledger")
    except ConfigError as e:
        return str(e)
    return None


def _settings_problem(cls: type, settings: dict, section: str) -> str | None:
    """What ``cls``'s config (pydantic, its ``config_class``) rejects in ``settings``, or None."""
    import inspect

    from pydantic import ValidationError

    config_class = inspect.signature(cls.__init__).parameters.get("config_class")
    if config_class is None or not hasattr(config_class.default, "model_validate"):
        return None
    try:
        config_class.default.model_validate(settings)
    except ValidationError as e:
        return _invalid(e, section)
    return None


def _settings_alone(specs: tuple[str, ...], problem: str) -> str:
    """Why a required key can be missing when no ``-c`` is mini.yaml: a ``-c`` (KEY=VALUE, or a file of the user's
    that sets a few keys) replaces mini.yaml, which holds them (said after ``problem``, with every -c given), or
    nothing."""
    from ledger_runtime import shell_word

    files = [spec for spec in specs if "=" not in spec]
    if specs and problem.endswith("Field required") and not any(Path(f).name == "mini.yaml" for f in files):
        given = " ".join(f"-c {shell_word(spec)}" for spec in specs)
        return f" (a -c replaces mini.yaml, which sets it: -c mini.yaml {given})"
    return ""


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


@dataclass(frozen=True)
class MiniOptions:
    """What ``ledger-run mini`` was given: the ledger's options and mini-swe-agent's own."""

    ledger: LedgerOptions = LedgerOptions()
    model: str | None = None
    api_base: str | None = None
    task: str | None = None
    config: tuple[str, ...] = ()
    context: str | None = None
    yolo: bool = False
    exit_immediately: bool = False
    cost_limit: float | None = None
    model_class: str | None = None
    environment_class: str | None = None  # None: the config's, else local
    image: str | None = None


@dataclass(frozen=True)
class MiniRun:
    """A ``ledger-run mini`` that can start: the options checked, mini-swe-agent's config built around
    the ledger's environment and model (``cfg``); ``task`` empty when the user is to be asked for it."""

    options: MiniOptions
    workdir: Path
    run_dir: Path
    task: str
    cfg: dict[str, Any]
    inner_env: str
    inner_model: str


def validate(options: MiniOptions) -> MiniRun:
    """The run ``options`` ask for, or the one-line error (``fail``) of the first thing wrong with them:
    the work tree, the ledger's settings, the run directory, mini-swe-agent's config (``-c``), the
    environment's image and engine, a task where nobody can be asked for one. mini-swe-agent and
    litellm are imported here, quietly."""
    from ledger_runtime import ConfigError, checked_workdir, fail, load_config, run_dir_for, stderr

    workdir = checked_workdir(options.ledger.workdir)
    problem = _switch_problem(options)
    if problem:
        fail(problem)
    try:
        load_config(options.ledger.ledger_config, **({"context": options.context} if options.context else {}))
    except ConfigError as e:
        fail(str(e))
    quiet_startup()
    _quiet_prompts()
    import minisweagent.agents  # noqa: F401 (imported before its loggers are quieted)
    from minisweagent.config import builtin_config_dir
    from minisweagent.environments import get_environment  # noqa: F401
    from minisweagent.models import get_model  # noqa: F401

    quiet_logs()
    run_dir = run_dir_for(options.ledger.run_dir, workdir)
    base = _base_config(list(options.config or [str(builtin_config_dir / "mini.yaml")]))
    task = options.task or (base.get("run") or {}).get("task") or ""
    env_cfg, inner_env = _environment_config(base, options, workdir)
    model_cfg, inner_model = _model_config(base, options)
    given = {kind: f"-c {kind}.{kind}_class={spec}" for kind, spec in _classes_in(base).items()}
    for kind, switch in (("environment", options.environment_class), ("model", options.model_class)):
        if switch:  # the switch's, over the config's
            given.pop(kind, None)
    problem = _class_problem("environment", inner_env, given.get("environment"))
    problem = problem or (inner_model and _class_problem("model", inner_model, given.get("model")))
    if problem:
        fail(problem)
    unused = _unused_address(inner_model, options.api_base)
    if unused:  # said, and not put in the config the trajectory keeps as the run's
        stderr.print(f"warning: {unused}", highlight=False, markup=False, soft_wrap=True)
        model_cfg = _model_config(base, replace(options, api_base=None))[0]
    ledger = _ledger_settings(options, run_dir, task)
    cfg = _mini_config(base, options, workdir, run_dir, ledger, (env_cfg, inner_env), (model_cfg, inner_model))
    if not task and not sys.stdin.isatty():
        fail("no task: pass -t TASK (there is no terminal to ask for one)")
    if _confirms_each_command(cfg.get("agent") or {}) and not sys.stdin.isatty():
        fail("no terminal to confirm each command on: pass -y (--yolo) to run them without asking")
    return MiniRun(options, workdir, run_dir, task, cfg, inner_env, inner_model)


def _switch_problem(options: MiniOptions) -> str | None:
    """The first of the switches alone that is wrong (``--context``, ``-l``), in one line, or None."""
    from ledger_runtime import ContextError, ContextPolicy

    if options.context:  # named as the option, as replay's is (the settings' message named "config: context")
        try:
            ContextPolicy.parse(options.context)
        except ContextError as e:
            return f"--context: {e}"
    return _cost_limit_problem(options.cost_limit)


def _cost_limit_problem(limit: float | None) -> str | None:
    """Why ``-l`` is not a cost limit, or None. mini-swe-agent stops at ``0 < cost_limit <= cost``: a negative
    limit (or NaN) was taken without a word as no limit, which its help gives as 0 alone."""
    if limit is None or limit >= 0:
        return None
    return f"-l/--cost-limit must be 0 (no limit) or more dollars, not {limit:g}"


def _unused_address(inner_model: str, api_base: str | None) -> str | None:
    """Why ``--api-base`` goes unused with the model class ``inner_model`` names, or None: the class's config
    (``<Class>Config`` beside it, as mini-swe-agent pairs them) takes no ``model_kwargs``, where the address goes,
    and drops keys it does not know without a word (the scripted ``deterministic`` calls no server)."""
    import importlib

    if not api_base or not inner_model:  # none: litellm's, which takes it
        return None
    module_name, _, class_name = _known_classes("model").get(inner_model, inner_model).rpartition(".")
    try:
        config = getattr(importlib.import_module(module_name), f"{class_name}Config", None)
    except ImportError:
        return None
    fields = getattr(config, "model_fields", None)
    if not isinstance(fields, dict) or "model_kwargs" in fields:
        return None
    return f"--api-base {api_base} is not used: the model class {inner_model} takes no model_kwargs (its address)"


def _classes_in(base: dict[str, Any]) -> dict[str, str]:
    """The environment and model classes a ``-c`` config names (``environment.environment_class``, ...)."""
    sections = {kind: base.get(kind) for kind in ("environment", "model")}
    return {k: str(v[f"{k}_class"]) for k, v in sections.items() if isinstance(v, dict) and v.get(f"{k}_class")}


def _class_problem(kind: str, spec: str, given: str | None = None) -> str | None:
    """Why mini-swe-agent cannot load the ``kind`` class (environment, model) ``spec`` names (one of its
    short names or a class path), in one line, or None (mini's own error lists every class by path).
    ``given``: how the user named it, when not ``--environment-class``/``--model-class SPEC``."""
    import importlib

    known = _known_classes(kind)
    module_name, _, class_name = known.get(spec, spec).rpartition(".")
    given = given or f"--{kind}-class {spec}"
    unknown = f"{given}: not one of mini-swe-agent's ({', '.join(known)}) nor a class path (module.Class)"
    if not module_name:
        return unknown
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        missing = getattr(e, "name", None) or ""
        if spec not in known and (module_name == missing or module_name.startswith(f"{missing}.")):
            return unknown
        return f"{given} cannot be loaded: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    return None if hasattr(module, class_name) else unknown


def _known_classes(kind: str) -> dict[str, str]:
    """mini-swe-agent's short names of its ``kind`` classes (environment, model) and their class paths."""
    import minisweagent.environments
    import minisweagent.models

    if kind == "environment":
        return dict(getattr(minisweagent.environments, "_ENVIRONMENT_MAPPING", {}))
    return dict(getattr(minisweagent.models, "_MODEL_CLASS_MAPPING", {}))


def _confirms_each_command(agent_cfg: dict[str, Any]) -> bool:
    """Whether mini-swe-agent's agent would ask before each command (its interactive agent in its
    default mode, confirm); with no terminal it would read no answer and end the run."""
    agent_class = agent_cfg.get("agent_class", "interactive")
    mode = agent_cfg.get("mode")
    interactive = agent_class in ("interactive", "minisweagent.agents.interactive.InteractiveAgent")
    return interactive and mode in (None, "confirm") and not agent_cfg.get("whitelist_actions")


def _base_config(specs: list[str]) -> dict[str, Any]:
    """mini-swe-agent's config from ``-c`` (files, built-in names, KEY=VALUE), merged."""
    import yaml
    from minisweagent.utils.serialize import recursive_merge

    from ledger_runtime import fail

    try:
        base = recursive_merge(*[_config_of(spec) for spec in specs])
    except (OSError, ValueError, yaml.YAMLError) as e:
        fail(f"-c: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    if not isinstance(base, dict):
        fail(f"-c {specs[0]} is not a mini-swe-agent config (a YAML mapping)")
    return base


def _config_of(spec: str) -> Any:
    """One ``-c``: a config file or KEY=VALUE, as mini-swe-agent reads it; a file found nowhere is a
    one-line error naming the forms ``-c`` takes (mini's own lists every path it tried)."""
    import yaml
    from minisweagent.config import get_config_from_spec

    from ledger_runtime import fail

    try:
        return get_config_from_spec(spec)
    except FileNotFoundError:
        fail(
            f"-c {spec}: no such config file, here or built into mini-swe-agent (mini.yaml, ...); "
            "a setting is KEY=VALUE (-c agent.step_limit=30)"
        )
    except yaml.YAMLError as e:  # it said "-c: while parsing a flow node", naming neither the file nor the line
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        fail(f"-c {spec}: not valid YAML: {getattr(e, 'problem', None) or str(e).splitlines()[0]}{where}")


def _environment_config(base: dict[str, Any], options: MiniOptions, workdir: Path) -> tuple[dict[str, Any], str]:
    """The inner environment's config and class; a container one needs an image (docker: see
    ``_in_docker``)."""
    from ledger_runtime import fail

    env_cfg = dict(base.get("environment") or {})
    in_config = env_cfg.pop("environment_class", None)
    inner_env = options.environment_class or in_config or "local"  # the switch over the config, as mini has it
    if options.image and inner_env in ("local", "minisweagent.environments.local.LocalEnvironment"):
        # it was dropped without a word, and the commands ran here, not in the container asked for
        fail(
            f"--image {options.image} is for a container environment: pass --environment-class docker too "
            "(with local, the default, the commands run on this machine)"
        )
    if options.image:
        env_cfg["image"] = options.image
    if inner_env != "local" and "image" in _config_fields(inner_env) and not env_cfg.get("image"):
        fail(f"--environment-class {inner_env} needs an image: pass --image IMAGE")
    if inner_env in ("docker", "minisweagent.environments.docker.DockerEnvironment"):
        env_cfg = _in_docker(env_cfg, workdir)
    elif inner_env in ("swerex_docker", "minisweagent.environments.extra.swerex_docker.SwerexDockerEnvironment"):
        problem = _engine_problem("docker")  # SWE-ReX's deployment would log, fail, and warn at exit
        if problem:
            fail(problem)
    return env_cfg, inner_env


def _in_docker(env_cfg: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """A docker environment's config: the engine checked (a one-line error when it cannot run
    containers), the work tree mounted at the same path, and commands started there."""
    from ledger_runtime import fail

    problem = _engine_problem(str(env_cfg.get("executable") or os.getenv("MSWEA_DOCKER_EXECUTABLE", "docker")))
    if problem:
        fail(problem)
    run_args = [*(env_cfg.get("run_args") or ["--rm"]), "-v", f"{workdir}:{workdir}"]
    return {**env_cfg, "run_args": run_args, "cwd": env_cfg.get("cwd", str(workdir))}


def _model_config(base: dict[str, Any], options: MiniOptions) -> tuple[dict[str, Any], str]:
    """The inner model's config (with ``--api-base``) and class: ``--model-class`` over a config's ``model_class``,
    as ``-m`` over its ``model_name`` and as mini's own CLI has it (the config's won, the switch dropped unsaid)."""
    model_cfg = dict(base.get("model") or {})
    in_config = model_cfg.pop("model_class", None)
    inner_model = options.model_class or in_config or ""
    if options.api_base:
        model_cfg["model_kwargs"] = {**(model_cfg.get("model_kwargs") or {}), "api_base": options.api_base}
    return model_cfg, inner_model


def _ledger_settings(options: MiniOptions, run_dir: Path, task: str) -> dict[str, Any]:
    """The ledger's part of the environment's config (``environment.ledger``)."""
    ledger: dict[str, Any] = {
        "run_dir": str(run_dir),
        "inform": not options.ledger.no_inform,
        "govern": not options.ledger.no_govern,
        "shadow": options.ledger.shadow,
        "task": task,
    }
    if options.ledger.ledger_config:
        ledger["config_file"] = str(options.ledger.ledger_config)
    if options.context:
        ledger["context"] = options.context
    return ledger


def _mini_config(
    base: dict[str, Any],
    options: MiniOptions,
    workdir: Path,
    run_dir: Path,
    ledger: dict[str, Any],
    env: tuple[dict[str, Any], str],
    model: tuple[dict[str, Any], str],
) -> dict[str, Any]:
    """mini-swe-agent's config with the ledger's environment and model (``LedgerEnvironment``,
    ``LedgerModel``) around the inner ones (``env``, ``model``: their config and class)."""
    from minisweagent.utils.serialize import UNSET, recursive_merge

    (env_cfg, inner_env), (model_cfg, inner_model) = env, model
    return recursive_merge(
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
                "model_name": options.model or model_cfg.get("model_name") or UNSET,
            },
            "agent": {
                "mode": "yolo" if options.yolo else UNSET,
                "cost_limit": options.cost_limit if options.cost_limit is not None else UNSET,
                # no terminal to ask whether to finish (a script, CI): it finishes when the agent submits
                "confirm_exit": False if options.exit_immediately or not sys.stdin.isatty() else UNSET,
                "output_path": str(run_dir / "trajectory.traj.json"),
            },
        },
    )


def run(valid: MiniRun) -> None:
    """Run mini-swe-agent as ``valid`` says, with the ledger around it: the task asked for when there is
    none, then the model, the agent's config and the environment checked (one-line errors), and the run."""
    from minisweagent.agents import get_agent

    from ledger_runtime import fail

    cfg, task = valid.cfg, valid.task
    if not task:
        from minisweagent.agents.utils.prompt_user import _multiline_prompt

        Console().print("[bold yellow]What do you want to do?")
        task = _multiline_prompt()
        cfg["environment"]["ledger"]["task"] = task
    problem = _agent_config_problem(cfg.get("agent", {}))  # -c's own, then the model, before an environment starts
    problem = problem or _environment_config_problem(cfg.get("environment", {}), valid.inner_env)
    problem = problem or _ledger_settings_problem(cfg.get("environment", {}).get("ledger") or {})
    if problem:
        fail(problem + _settings_alone(valid.options.config, problem))
    model_cfg = cfg.get("model", {})
    problem = model_config_problem(model_cfg, valid.inner_model)
    if problem:
        fail(problem)
    model = _model(model_cfg)
    env = _environment(cfg.get("environment", {}), valid.inner_env)
    agent = get_agent(model, env, cfg.get("agent", {}), default_type="interactive")
    _run_agent(agent, env, task, valid.run_dir)


def model_config_problem(model_cfg: dict[str, Any], inner_model: str) -> str | None:
    """Why the model as configured cannot be called (models.py), in one line, or None: checked before
    a run that would otherwise retry for minutes (``ledger-run mini``'s, and each of ``ledger-run swebench``'s)."""
    from ledger_adapters.mini.models import address_problem, model_problem, server_of, unplaced_problem, unreachable

    known = _litellm_provider()
    given = (model_cfg.get("model_kwargs") or {}).get("api_base")
    problem = (
        address_problem(model_cfg, inner_model, known) if given else unplaced_problem(model_cfg, inner_model, known)
    )
    problem = problem or model_problem(
        model_cfg, inner_model, os.environ, _missing_api_keys(model_cfg.get("model_name"))
    )
    litellm = inner_model in ("", "litellm", "litellm_textbased")
    server = server_of(model_cfg, os.environ) if litellm else None
    return problem or (server and unreachable(server)) or None


def _litellm_provider() -> Any:
    """litellm's ``get_llm_provider`` (raises for a model name it cannot place); None without litellm.
    litellm's own banner of its providers' list, printed on stdout as it raises, is turned off."""
    try:
        import litellm
    except ImportError:
        return None
    litellm.suppress_debug_info = True
    return getattr(litellm, "get_llm_provider", None)


def _model(model_cfg: dict[str, Any]) -> Any:
    """The model mini-swe-agent calls (the ledger's around the inner one); a one-line error when its
    config is wrong."""
    from minisweagent.models import get_model
    from pydantic import ValidationError

    from ledger_runtime import fail

    try:
        return get_model(config=model_cfg)
    except ValidationError as e:
        fail(_invalid(e, "model"))
    except ValueError as e:
        fail(f"{e} (pass -m MODEL, e.g. -m openai/gpt-5-mini)")


def _environment(env_cfg: dict[str, Any], inner_env: str) -> Any:
    """The environment the agent's commands run in, started; a one-line error when it cannot start."""
    from minisweagent.environments import get_environment
    from pydantic import ValidationError

    from ledger_runtime import fail

    try:
        return get_environment(env_cfg)
    except ValidationError as e:
        fail(_invalid(e, "environment"))
    except Exception as e:  # an engine that is not there, an image that cannot start
        said = getattr(e, "stderr", None) if isinstance(getattr(e, "stderr", None), str) else None
        lines = [ln.strip() for ln in (said or str(e)).splitlines() if ln.strip()] or [type(e).__name__]
        more = f" ({'; '.join(lines[1:3])})" if lines[1:] else ""
        fail(f"the {inner_env} environment cannot start: {lines[0]}{more}")


def _run_agent(agent: Any, env: Any, task: str, run_dir: Path) -> None:
    """The agent's run on ``task``; then the environment cleaned up, the trajectory masked, where the run
    is, and a run the model's side stopped said in one line (exit 1)."""
    from ledger_runtime import fail, touch_private

    console = plain_console()
    trajectory = run_dir / "trajectory.traj.json"
    try:
        touch_private(trajectory)  # mini-swe-agent rewrites it in place after each step: owner-only
    except OSError:
        pass  # no run directory (the ledger could not start): mini-swe-agent writes it as it would
    from ledger_adapters.mini.environment import Terminated

    stopped: Exception | None = None
    ctrl_c: list[int] = []
    terminated: Terminated | None = None
    try:
        with _seeing_ctrl_c(ctrl_c), _ending_on_term():
            agent.run(task)
    except typer.Exit:
        raise
    except Terminated as t:
        terminated = t
    except Exception as e:  # the model's server gone, a model error after mini's retries: said in one line
        stopped = e
    finally:
        _after_run(env, trajectory, run_dir, console)
    if terminated is not None:  # plain, on stderr, as Ctrl-C's "interrupted"; 128+N, as a shell says it
        import signal

        name = signal.Signals(terminated.signum).name
        print(f"\n{name}: the run ended; the ledger of the steps so far is kept in {run_dir}", file=sys.stderr)
        sys.exit(128 + terminated.signum)
    if isinstance(stopped, EOFError) and ctrl_c:
        # Ctrl-C: mini asks the user what to do, and with no terminal to answer, its read ends the run
        from ledger_runtime import interrupted

        interrupted()
    if stopped is not None:
        said = next((ln.strip() for ln in str(stopped).splitlines() if ln.strip()), "")
        fail(f"the run stopped: {type(stopped).__name__}" + (f": {said}" if said else ""), code=1)


@contextmanager
def _ending_on_term() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP end the run as Ctrl-C does (``Terminated``: the command in flight killed,
    the trajectory saved, the summary printed) rather than killing this process at once, which left the command
    running on in the work tree. One ignored already (``nohup``) stays ignored; once the run has begun to end (out
    of this block: the summary), a second one ends the process as before. Off the main thread, nothing changes."""
    import signal

    from ledger_adapters.mini.environment import Terminated

    signals = tuple(s for s in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) is not signal.SIG_IGN)  # nohup

    def on_term(signum: int, _frame: Any) -> None:
        for s in signals:
            signal.signal(s, signal.SIG_IGN)
        raise Terminated(signum)

    try:
        previous = {s: signal.signal(s, on_term) for s in signals}
    except ValueError:  # not the main thread
        previous = {}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextmanager
def _seeing_ctrl_c(seen: list[int]) -> Iterator[None]:
    """While inside, each Ctrl-C adds an entry to ``seen`` and is then handled as before (mini-swe-agent's
    own KeyboardInterrupt). Nothing changes where Python does not handle SIGINT (ignored, as in a
    background job, or the default) or off the main thread."""
    import signal

    previous = signal.getsignal(signal.SIGINT)

    def on_ctrl_c(signum: int, frame: Any) -> None:
        seen.append(signum)
        previous(signum, frame)

    installed = False
    if callable(previous):
        try:
            signal.signal(signal.SIGINT, on_ctrl_c)
            installed = True
        except ValueError:  # not the main thread
            pass
    try:
        yield
    finally:
        if installed:
            signal.signal(signal.SIGINT, previous)


def _after_run(env: Any, trajectory: Path, run_dir: Path, console: Console) -> None:
    """After the agent's run, whatever its end: the environment cleaned up, the trajectory masked as
    the ledger is, where the run is and what the model cost."""
    from ledger_runtime import mask_json_file

    env.cleanup()
    runtime = getattr(env, "runtime", None)
    if runtime is not None:  # the secrets in it masked as in the ledger (the agent is done with it)
        problem = mask_json_file(trajectory, runtime.redactor)
        if problem:
            console.print(f"[yellow]warning:[/yellow] {problem}", highlight=False)
    if runtime is not None:  # was it worth it: the run's verdicts, answers, what they spared, the notes
        from ledger_runtime import render_summary, summary

        console.print(render_summary(summary(runtime.state)))
    console.print(
        f"\nledger: [bold]{run_dir / 'ledger.sqlite'}[/bold]\n"
        f"trajectory: [bold]{run_dir / 'trajectory.traj.json'}[/bold]\n"
        f"look inside: ledger-run inspect {escape(shell_word(run_dir))}",
        soft_wrap=True,  # paths and a command to copy: whole on their lines (a long one broke mid-name at 80)
    )


def mini(
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
    workdir: Path = LedgerOptions.workdir_option(),
    config: Optional[List[str]] = typer.Option(
        None,
        "--config",
        "-c",
        help="As in mini: a config file (path or a built-in name such as "
        "mini.yaml) or KEY=VALUE (agent.step_limit=3); repeat to "
        "merge. Given, mini.yaml is not used unless named "
        "(default: mini.yaml).",
    ),
    ledger_config: Optional[Path] = LedgerOptions.ledger_config_option(),
    no_inform: bool = LedgerOptions.switch_option("--no-inform", "Do not put the state view into the prompt."),
    no_govern: bool = LedgerOptions.switch_option("--no-govern"),
    shadow: bool = LedgerOptions.switch_option("--shadow"),
    context: Optional[str] = typer.Option(
        None,
        "--context",
        help="What of the earlier outputs the model is sent: "
        "full, window:M, validity or validity+window:M (docs/context.md).",
    ),
    run_dir: Optional[Path] = LedgerOptions.run_dir_option("the ledger and trajectory"),
    yolo: bool = typer.Option(
        False, "-y", "--yolo", help="Run commands without asking for confirmation (needed with no terminal to ask on)."
    ),
    exit_immediately: bool = typer.Option(
        False,
        "--exit-immediately",
        help="Finish when the agent submits, without asking (so it does with no terminal to ask on).",
    ),
    cost_limit: Optional[float] = typer.Option(None, "-l", "--cost-limit", help="Cost limit in dollars (0: none)."),
    model_class: Optional[str] = typer.Option(None, "--model-class", help="mini-swe-agent model class to wrap."),
    environment_class: Optional[str] = typer.Option(
        None,
        "--environment-class",
        help="mini-swe-agent environment to wrap (local, docker, singularity, ...; default: the config's, else local).",
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
    _need_mini("ledger-run mini")
    ledger = LedgerOptions(workdir, run_dir, ledger_config, no_inform, no_govern, shadow)
    options = MiniOptions(
        ledger,
        model=model,
        api_base=api_base,
        task=task,
        config=tuple(config or ()),
        context=context,
        yolo=yolo,
        exit_immediately=exit_immediately,
        cost_limit=cost_limit,
        model_class=model_class,
        environment_class=environment_class,
        image=image,
    )
    run(validate(options))
