"""``ledger-run swebench``: mini-swe-agent's SWE-bench setup, once per arm, on the same instances.

Arms (the Ledger paper's A/B and its two ablations); every arm records a ledger, so all are
measured alike:

- ``baseline``: the plain agent; the ledger in shadow mode (records and decides, changes nothing);
- ``ledger``: inform (state view) and govern (verdicts) on;
- ``inform-only`` and ``govern-only``: one of the two;
- ``ledger+context``: the ledger, and the model sent only what still holds of its history
  (context ``validity+window:10``, docs/context.md).

Each arm writes ``OUT/<arm>/``: ``preds.json`` (SWE-bench's prediction format), per instance
``<iid>/<iid>.traj.json`` and ``<iid>/ledger/ledger.sqlite``, ``timings.json`` (wall seconds per
instance) and ``manifest.json`` (model, package versions, config and its hash, the instances,
start and end). Instances whose trajectory and prediction are both there are skipped on the next
run; a ``preds.json`` that cannot be read is set aside and rebuilt from the trajectories.
Containers carry the labels ``ledger-run.run``/``ledger-run.arm``; whatever the run leaves
(Ctrl-C included) is removed through the docker SDK.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import difflib
import hashlib
import json
import logging
import re
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator

from ledger_harness.swebench.protected import SWEBENCH_PROTECTED
from ledger_runtime import json_value, mask_json_file, masked_json, private_dir, write_private

ARMS: dict[str, dict[str, Any]] = {
    "ledger": {"inform": True, "govern": True, "shadow": False},
    # the ledger, and the model sent only what still holds (docs/context.md)
    "ledger+context": {"inform": True, "govern": True, "shadow": False, "context": "validity+window:10"},
    "baseline": {"inform": False, "govern": False, "shadow": True},
    "inform-only": {"inform": True, "govern": False, "shadow": False},
    "govern-only": {"inform": False, "govern": True, "shadow": False},
}
DEFAULT_ARMS = ("ledger", "baseline")
LABEL_RUN = "ledger-run.run"
LABEL_ARM = "ledger-run.arm"
ENV_CLASS = "ledger_adapters.mini.environment.LedgerEnvironment"
MODEL_CLASS = "ledger_adapters.mini.environment.LedgerModel"
# a config may name the wrappers by the class paths of earlier releases (adapters/mini_swe_agent.py)
OUR_ENV_CLASSES = (ENV_CLASS, "ledger_adapters.mini_swe_agent.LedgerEnvironment")
OUR_MODEL_CLASSES = (MODEL_CLASS, "ledger_adapters.mini_swe_agent.LedgerModel")
_FILE_LOCK = threading.Lock()


class RunInterrupted(Exception):
    """Raised inside an agent's step after Ctrl-C: the instance stops at once (no more model calls)."""


class BadInput(ValueError):
    """Input the run cannot use; the message says what and how to fix it, in one line."""


def parse_arms(text: str) -> list[str]:
    arms = [a.strip() for a in text.split(",") if a.strip()]
    for a in arms:
        if a not in ARMS:
            close = difflib.get_close_matches(a, list(ARMS), n=1)
            raise BadInput(
                f"unknown arm {a!r}"
                + (f" (did you mean {close[0]!r}?)" if close else "")
                + f"; arms: {', '.join(ARMS)}"
            )
    if not arms:
        raise BadInput(f"no arm given; arms: {', '.join(ARMS)}")
    return list(dict.fromkeys(arms))


# -- instances ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def _hub_quiet() -> Iterator[None]:
    """The Hub's own warnings held back while the dataset loads: with no network, a line per retry of each request
    ("... thrown while requesting HEAD ...") came before the one line that says what failed and what to do."""
    loggers = [logging.getLogger(name) for name in ("huggingface_hub", "datasets")]
    levels = [one.level for one in loggers]
    for one in loggers:
        one.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for one, level in zip(loggers, levels):
            one.setLevel(level)


def load_instances(subset: str, split: str, instances: Path | None) -> list[dict[str, Any]]:
    """From ``--instances`` (a JSONL file, or a directory holding ``<split>.jsonl``), else the
    Hugging Face dataset of the subset."""
    if instances is not None:
        path = instances / f"{split}.jsonl" if instances.is_dir() else instances
        if not path.is_file():
            raise BadInput(
                f"--instances {instances}: no such file" + (f" ({path.name} in it)" if instances.is_dir() else "")
            )
        rows = []
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, ValueError) as e:  # ValueError: not UTF-8
            raise BadInput(f"--instances {path}: cannot be read: {e}") from None
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json_value(line)
            except ValueError as e:
                raise BadInput(f"{path}:{n}: not a JSON line: {e}") from None
            if (
                not isinstance(row, dict)
                or not isinstance(row.get("instance_id"), str)
                or not isinstance(row.get("problem_statement"), str)
            ):
                raise BadInput(f"{path}:{n}: an instance needs instance_id and problem_statement")
            rows.append(row)
        return rows
    from datasets import load_dataset
    from minisweagent.run.benchmarks.swebench import DATASET_MAPPING

    name = DATASET_MAPPING.get(subset, subset)
    try:
        with _hub_quiet():
            return [dict(r) for r in load_dataset(name, split=split)]
    except Exception as e:
        raise BadInput(
            f"cannot load the dataset {name} (split {split}): {type(e).__name__}: {e}; offline, pass "
            f"--instances FILE.jsonl"
        ) from None


def select(instances: list[dict[str, Any]], *, slice_spec: str = "", filter_spec: str = "") -> list[dict[str, Any]]:
    chosen = instances
    if filter_spec:
        try:
            pattern = re.compile(filter_spec)
        except re.error as e:
            raise BadInput(f"--filter {filter_spec!r} is not a regular expression: {e}") from None
        chosen = [i for i in chosen if pattern.match(i["instance_id"])]
        if not chosen:
            raise BadInput(f"no instance id matches --filter {filter_spec!r} ({len(instances)} instances loaded)")
    if slice_spec:
        try:
            parts = [int(x) if x else None for x in slice_spec.split(":")]
            chosen = chosen[slice(*parts)]
        except (ValueError, TypeError):
            raise BadInput(f"--slice {slice_spec!r} is not A:B") from None
    if not chosen:
        raise BadInput("no instances selected")
    return chosen


def image_name(instance: dict[str, Any]) -> str:
    from minisweagent.run.benchmarks.swebench import get_swebench_docker_image_name

    return get_swebench_docker_image_name(instance)


def missing_images(instances: list[dict[str, Any]], client: Any, *, pull: bool) -> dict[str, str]:
    """Images not on the engine (after trying to pull them when ``pull``), each with why it is not: its pull's
    error, or "" when none was tried."""
    import docker.errors

    missing = {}
    for name in dict.fromkeys(image_name(i) for i in instances):
        try:
            client.images.get(name)
            continue
        except docker.errors.ImageNotFound:
            pass
        why = ""
        if pull:
            try:
                client.images.pull(name)
                continue
            except docker.errors.APIError as e:
                why = " ".join(str(getattr(e, "explanation", None) or e).split())[:300] or type(e).__name__
        missing[name] = why
    return missing


def missing_image_error(missing: dict[str, str]) -> str:
    """The one line of a run whose images are not on the engine: the first, how many more, and what to do (a pull
    that failed said as such: "get it with docker pull" after the run's own pull failed sent the user round)."""
    name, why = next(iter(missing.items()))
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    if not why:
        how = f"get it with `docker pull {name}`, or build it with the SWE-bench harness"
        return f"image {name} is not on the Docker engine{more}: {how}"
    return (
        f"image {name} is not on the Docker engine{more}, and pulling it failed ({why}): build it with the SWE-bench "
        "harness, or pull it where the registry is reachable"
    )


# -- configuration -----------------------------------------------------------------------------------


DOCKER_CLASSES = ("docker", "minisweagent.environments.docker.DockerEnvironment")
# SWE-ReX's server in a container on this machine's engine: the protocol of its Modal and Fargate deployments
SWEREX_DOCKER_CLASSES = ("swerex_docker", "minisweagent.environments.extra.swerex_docker.SwerexDockerEnvironment")
SWEREX_MODAL_CLASSES = ("swerex_modal", "minisweagent.environments.extra.swerex_modal.SwerexModalEnvironment")
# what to install for an environment class whose packages are missing
INSTALL = {
    "swerex_docker": "pip install swe-rex",
    "swerex_modal": "pip install 'swe-rex[modal]' (then `modal setup`)",
    "contree": "pip install 'mini-swe-agent[contree]'",
}


def inner_environment(config: dict[str, Any]) -> str:
    """The mini-swe-agent environment the arms' instances run in (inside the ledger's wrapper)."""
    env = config.get("environment") or {}
    inner = env.get("environment_class") or "docker"
    if inner in OUR_ENV_CLASSES:
        inner = env.get("inner_class") or "docker"
    return inner


def uses_docker(config: dict[str, Any]) -> bool:
    """Whether the arms' environment runs on this machine's Docker engine (the default)."""
    inner = inner_environment(config)
    return inner in DOCKER_CLASSES or inner in SWEREX_DOCKER_CLASSES


def check_environment(config: dict[str, Any]) -> None:
    """BadInput unless the arms' environment class can be loaded: a missing package or a misspelt name is
    one line before the run, not the same error once per instance."""
    from minisweagent.environments import _ENVIRONMENT_MAPPING, get_environment_class

    inner = inner_environment(config)
    try:
        get_environment_class(inner)
        return
    except ValueError as e:
        cause = e.__context__
    path = _ENVIRONMENT_MAPPING.get(inner, inner)
    if isinstance(cause, ImportError) and cause.name and "." in path:
        module = path.rsplit(".", 1)[0]
        if module != cause.name and not module.startswith(cause.name + "."):  # a package the class needs
            top = cause.name.split(".")[0]
            hint = INSTALL.get(inner, f"pip install {top}")
            raise BadInput(f"--environment-class {inner} needs {top}, which is not installed: {hint}")
        if inner not in _ENVIRONMENT_MAPPING:
            raise BadInput(f"--environment-class {inner}: no module named {cause.name}")
    close = difflib.get_close_matches(inner, list(_ENVIRONMENT_MAPPING), n=1)
    raise BadInput(
        f"unknown environment class {inner!r}"
        + (f" (did you mean {close[0]!r}?)" if close else "")
        + f"; mini-swe-agent's: {', '.join(_ENVIRONMENT_MAPPING)}, or a class path (package.module.Class)"
    )


def model_of(config: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The model's config in a base config, and the class that calls it ("" for the one its name picks)."""
    model = config.get("model") or {}
    inner = model.get("model_class") or ""
    return model, (model.get("inner_class") or "" if inner in OUR_MODEL_CLASSES else inner)


def base_config(
    config_files: list[Path], model: str | None, model_class: str | None, environment_class: str | None = None
) -> dict[str, Any]:
    """mini-swe-agent's swebench.yaml, then the user's files over it, then -m / --model-class /
    --environment-class (any of mini-swe-agent's environments: docker, singularity, swerex_modal...)."""
    from minisweagent.config import get_config_from_spec
    from minisweagent.run.benchmarks.swebench import DEFAULT_CONFIG_FILE
    from minisweagent.utils.serialize import recursive_merge

    specs = [get_config_from_spec(str(DEFAULT_CONFIG_FILE))]
    for f in config_files:
        if not f.is_file():
            raise BadInput(f"--config {f}: no such file")
        specs.append(get_config_from_spec(str(f)))
    options: dict[str, Any] = {"model": {}}
    if model:
        options["model"]["model_name"] = model
    if model_class:
        options["model"]["model_class"] = model_class
    if environment_class:
        options["environment"] = {"environment_class": environment_class}
    config = recursive_merge(*specs, options)
    if inner_environment(config) in SWEREX_MODAL_CLASSES:
        # mini-swe-agent's settings for SWE-bench on Modal (a start-up long enough to build the image, the
        # sandbox's lifetime), under the user's files; its model is not taken
        modal = get_config_from_spec("swebench_modal.yaml").get("environment") or {}
        config = recursive_merge(specs[0], {"environment": modal}, *specs[1:], options)
    if not (config.get("model") or {}).get("model_name"):
        raise BadInput("no model: pass -m MODEL (e.g. -m openai/gpt-5-mini) or set model.model_name in --config")
    return config


def _arm_policies(ledger: dict[str, Any]) -> dict[str, Any]:
    """The rules of an arm: the ones its ``config_file`` sets, then the ones set inline, with SWE-bench's protected
    paths as ``protected-paths``' globs unless they name their own. The table set inline replaces the file's whole
    (its stale-edit or own rules were dropped without a word), and one that only set protected-paths' verdict lost
    SWE-bench's globs."""
    from ledger_runtime import ConfigError, load_config

    rules: dict[str, Any] = {}
    if ledger.get("config_file"):
        try:
            rules = dict(load_config(ledger["config_file"]).policies.rules)
        except ConfigError:  # the environment says what is wrong with it, in one line
            pass
    rules.update(ledger.get("policies") or {})
    protected = dict(rules.get("protected-paths") or {})
    protected.setdefault("globs", list(SWEBENCH_PROTECTED))
    rules["protected-paths"] = protected
    return rules


def arm_config(config: dict[str, Any], arm: str, run_id: str) -> dict[str, Any]:
    """The config of one arm: the environment and the model wrapped by the ledger's classes."""
    env = dict(config.get("environment") or {})
    inner_env = env.pop("environment_class", None) or "docker"
    if inner_env in OUR_ENV_CLASSES:
        inner_env = env.pop("inner_class", "docker")
    ledger = {**(env.pop("ledger", None) or {}), **ARMS[arm]}
    # SWE-bench's prompt asks the agent to leave tests and configuration alone: the gate holds it to that
    ledger["policies"] = _arm_policies(ledger)
    labels = ["--label", f"{LABEL_RUN}={run_id}", "--label", f"{LABEL_ARM}={arm}"]
    if inner_env in DOCKER_CLASSES:  # labelled, so that an interrupted run leaves no container behind
        run_args = list(env.get("run_args") or ["--rm"])
        env["run_args"] = run_args + labels
    if inner_env in SWEREX_DOCKER_CLASSES:
        deployment = dict(env.get("deployment_extra_kwargs") or {})
        deployment["docker_args"] = list(deployment.get("docker_args") or []) + labels
        # the run has the images on the engine before it starts (pulled there, or refused with --no-pull)
        deployment.setdefault("pull", "never")
        env["deployment_extra_kwargs"] = deployment
    model, inner_model = model_of(config)
    model = {k: v for k, v in model.items() if k not in ("model_class", "inner_class")}
    return {
        **config,
        "environment": {**env, "environment_class": ENV_CLASS, "inner_class": inner_env, "ledger": ledger},
        "model": {**model, "model_class": MODEL_CLASS, "inner_class": inner_model},
    }


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def versions() -> dict[str, str | None]:
    out = {}
    for dist in ("ledger-runtime", "mini-swe-agent", "litellm", "docker", "swebench"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


# -- an arm's directory ------------------------------------------------------------------------------


def read_json(path: Path) -> Any:
    return json_value(path.read_text(encoding="utf-8"))


PREDS_FILES = ("preds.json", "preds.jsonl")


def preds_file(arm_dir: Path) -> Path | None:
    """The arm's predictions: ``preds.json`` (ours: instance -> prediction; or the harness's list) or
    ``preds.jsonl`` (one prediction per line)."""
    return next((arm_dir / n for n in PREDS_FILES if (arm_dir / n).is_file()), None)


def read_preds(path: Path) -> dict[str, dict[str, Any]]:
    """Instance id -> prediction, from any of the formats SWE-bench's harness reads. ValueError names
    what is wrong."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        rows = [json_value(line) for line in text.splitlines() if line.strip()]
    else:
        data = json_value(text)
        rows = data if isinstance(data, list) else None
        if isinstance(data, dict):
            if all(isinstance(v, dict) for v in data.values()):
                return {str(k): {**v, "instance_id": v.get("instance_id", k)} for k, v in data.items()}
            raise ValueError("a dict whose values are not predictions")
        if rows is None:
            raise ValueError(f"a JSON {type(data).__name__}, not predictions")
    out = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise ValueError(f"prediction {i + 1} has no instance_id")
        out[row["instance_id"]] = row
    return out


def write_json(path: Path, data: Any) -> None:
    """``data`` as JSON at ``path``, owner-only, through a fresh file renamed onto it (never through a link)."""
    write_private(path, json.dumps(data, indent=2, default=str) + "\n")


def finished(arm_dir: Path) -> set[str]:
    """Instances with both a prediction and a trajectory. A preds.json that cannot be read (a run
    killed while writing it) is set aside and rebuilt from the trajectories."""
    preds_path = arm_dir / "preds.json"
    preds: dict[str, Any] = {}
    if preds_path.exists():
        try:
            preds = read_json(preds_path)
            if not isinstance(preds, dict):
                raise ValueError("not an object")
        except ValueError:
            preds_path.rename(arm_dir / f"preds.json.unreadable-{int(time.time())}")
            preds = rebuild_preds(arm_dir)
    return {iid for iid in preds if (arm_dir / iid / f"{iid}.traj.json").is_file()}


def rebuild_preds(arm_dir: Path) -> dict[str, Any]:
    preds = {}
    try:
        timings = read_json(arm_dir / "timings.json") if (arm_dir / "timings.json").exists() else {}
    except ValueError:
        timings = {}
    for traj in sorted(arm_dir.glob("*/*.traj.json")):
        if (timings.get(traj.parent.name) or {}).get("exit_status") == "interrupted":
            continue  # cut short by Ctrl-C: to be run again
        try:
            data = read_json(traj)
            info = data.get("info") or {}
            iid = data.get("instance_id") or traj.parent.name
            preds[iid] = {
                "model_name_or_path": (info.get("config") or {}).get("model", {}).get("model_name", ""),
                "instance_id": iid,
                "model_patch": info.get("submission") or "",
            }
        except (ValueError, AttributeError):
            continue
    write_json(arm_dir / "preds.json", preds)
    return preds


def record_timing(arm_dir: Path, iid: str, seconds: float, exit_status: str | None) -> None:
    with _FILE_LOCK:
        path = arm_dir / "timings.json"
        try:
            data = read_json(path) if path.exists() else {}
        except ValueError:
            data = {}
        data[iid] = {"wall_s": round(seconds, 3), "exit_status": exit_status}
        write_json(path, data)


# -- running ---------------------------------------------------------------------------------------


@dataclass
class ArmProgress:
    """What mini-swe-agent's runner reports about an arm's instances, into a rich progress bar."""

    progress: Any
    task: Any
    arm: str
    stopping: threading.Event = field(default_factory=threading.Event)
    statuses: dict[str, int] = field(default_factory=dict)
    last: dict[str, str | None] = field(default_factory=dict)

    def on_instance_start(self, instance_id: str) -> None:
        pass

    def update_instance_status(self, instance_id: str, message: str) -> None:
        # mini-swe-agent's runner calls this before every step: after Ctrl-C, the step is not taken
        if self.stopping.is_set():
            raise RunInterrupted("stopped by Ctrl-C")
        self.progress.update(self.task, description=f"{self.arm}: {instance_id} {message.strip()}")

    def on_instance_end(self, instance_id: str, exit_status: str | None) -> None:
        key = exit_status or "none"
        self.statuses[key] = self.statuses.get(key, 0) + 1
        self.last[instance_id] = exit_status
        self.progress.update(
            self.task,
            advance=1,
            description=f"{self.arm}: " + ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items())),
        )

    def on_uncaught_exception(self, instance_id: str, exception: Exception) -> None:
        self.on_instance_end(instance_id, type(exception).__name__)


def remove_containers(client: Any, run_id: str) -> int:
    """Remove every container of this run (running or not); returns how many."""
    n = 0
    # sparse: listing inspects no container, so one that goes away meanwhile (an agent's own cleanup) is no error
    for c in client.containers.list(all=True, sparse=True, filters={"label": f"{LABEL_RUN}={run_id}"}):
        try:
            c.remove(force=True)
            n += 1
        except Exception:
            pass
    return n


def run_instance(
    instance: dict[str, Any], arm_dir: Path, config: dict[str, Any], progress: ArmProgress, stopping: threading.Event
) -> None:
    from minisweagent.run.benchmarks.swebench import process_instance, remove_from_preds_file

    from ledger_adapters.mini.environment import closing_environments

    iid = instance["instance_id"]
    if stopping.is_set():
        return
    started = time.monotonic()
    made: list[Any] = []
    try:
        with closing_environments() as made:  # the instance's container, or sandbox, stopped as it ends
            process_instance(instance, arm_dir, config, progress)
    finally:
        mask_trajectory(arm_dir / iid / f"{iid}.traj.json", made)
        status = progress.last.get(iid)
        if stopping.is_set():  # cut short by Ctrl-C: not finished, so the next run does it again
            remove_from_preds_file(arm_dir / "preds.json", iid)
            status = "interrupted"
        record_timing(arm_dir, iid, time.monotonic() - started, status)


def mask_trajectory(traj: Path, made: list[Any]) -> None:
    """An instance's trajectory (its settings in ``info.config``: a model's API key) masked as its ledger is, and
    owner-only; a trajectory that cannot be masked is said in one line, as it stands."""
    runtimes = [env.runtime for env in made if getattr(env, "runtime", None) is not None]
    if not runtimes or not traj.exists():
        return
    problem = mask_json_file(traj, runtimes[-1].redactor)
    if problem:
        print(f"warning: {problem}", file=sys.stderr)


def run(
    out: Path,
    arms: list[str],
    instances: list[dict[str, Any]],
    config: dict[str, Any],
    *,
    workers: int,
    console: Any,
    client: Any,
    command: list[str] | None = None,
    on_progress: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Run every arm on ``instances`` (the finished ones skipped); returns what was done."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    run_id = uuid.uuid4().hex[:12]
    ids = [i["instance_id"] for i in instances]
    todo: list[tuple[str, dict[str, Any], dict[str, Any], Path]] = []
    plans = {}
    for arm in arms:
        arm_dir = out / arm
        private_dir(arm_dir)
        done = finished(arm_dir)
        cfg = arm_config(config, arm, run_id)
        manifest_path = arm_dir / "manifest.json"
        old = read_json(manifest_path) if manifest_path.exists() else {}
        manifest = {
            "arm": arm,
            "ledger": ARMS[arm],
            "model": cfg["model"].get("model_name"),
            "model_class": cfg["model"].get("inner_class") or "(from the model name)",
            "versions": versions(),
            "config_hash": config_hash(cfg),
            "config": cfg,
            "instances": sorted(set(old.get("instances", [])) | set(ids)),
            "runs": old.get("runs", [])
            + [
                {
                    "run_id": run_id,
                    "started_at": time.time(),
                    "ended_at": None,
                    "status": "running",
                    "command": command,
                    "skipped_finished": sorted(set(ids) & done),
                }
            ],
        }
        write_private(manifest_path, masked_json(manifest))  # its config may hold an API key
        plans[arm] = (arm_dir, manifest)
        todo += [(arm, inst, cfg, arm_dir) for inst in instances if inst["instance_id"] not in done]
    status = "complete"
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as progress:
        stopping = threading.Event()
        bars = {
            arm: ArmProgress(progress, progress.add_task(arm, total=sum(1 for t in todo if t[0] == arm)), arm, stopping)
            for arm in arms
        }
        # arms interleaved, instance by instance: an interrupted run has every arm on the same instances
        position = {iid: n for n, iid in enumerate(ids)}
        order = sorted(todo, key=lambda t: (position[t[1]["instance_id"]], arms.index(t[0])))
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers))
        futures = {
            pool.submit(run_instance, inst, arm_dir, cfg, bars[arm], stopping): (arm, inst["instance_id"])
            for arm, inst, cfg, arm_dir in order
        }
        try:
            for f in concurrent.futures.as_completed(futures):
                try:
                    f.result()
                except Exception as e:
                    arm, iid = futures[f]
                    bars[arm].on_uncaught_exception(iid, e)
        except KeyboardInterrupt:
            status = "interrupted"
            stopping.set()
            console.print(
                "[yellow]interrupted: cancelling the instances not started, removing this run's containers..."
            )
            for f in futures:
                f.cancel()
            if client is not None:
                remove_containers(client, run_id)
        finally:
            try:
                pool.shutdown(wait=True, cancel_futures=True)
            except KeyboardInterrupt:  # a second Ctrl-C: stop waiting; the sweep below still runs
                status = "interrupted"
                stopping.set()
    left = remove_containers(client, run_id) if client is not None else 0
    for arm, (arm_dir, manifest) in plans.items():
        manifest["runs"][-1].update(ended_at=time.time(), status=status)
        write_private(arm_dir / "manifest.json", masked_json(manifest))
    return {
        "run_id": run_id,
        "status": status,
        "ran": len(todo),
        "containers_removed_at_end": left,
        "arms": {arm: bars[arm].statuses for arm in arms},
    }
