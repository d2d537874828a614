"""mini-swe-agent adapter: an environment wrapper and a model wrapper, usable by class path.

``LedgerEnvironment`` wraps ANY mini-swe-agent environment (``inner_class``: local, docker, or any
class path) and sends every command through the ledger runtime (govern, execute, record).
``LedgerModel`` wraps any model (``inner_class``) and sends it a copy of the agent's messages
through the ledger's ``History``: the notes of the state view (what changed that the model's own
commands cannot have told it) are appended once, after the newest output, and then kept where they
were sent, so the provider's cached prefix never changes because of them (context.py).

Both plug in through a YAML config, so they work in ``mini``, ``mini-extra swebench-single`` and
``mini-extra swebench`` (whose agent class is fixed)::

    environment:
      environment_class: ledger_adapters.mini.environment.LedgerEnvironment
      inner_class: docker            # the environment it wraps (default: local)
      ledger:                        # ledger settings; any key of ledger_runtime.config.LedgerConfig
        run_dir: /path/to/ledger     # default: next to the trajectory
        inform: true
        govern: true
        shadow: false
    model:
      model_class: ledger_adapters.mini.environment.LedgerModel
      inner_class: litellm           # the model it wraps (default: chosen by model_name, as mini does)

The two find each other per thread (mini-extra swebench runs one instance per worker thread).
Each verdict is recorded in the observation's ``extra["ledger"]``; the ledger's path in the
trajectory's ``info["ledger"]``. A fault of the ledger never breaks the agent's step.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from minisweagent.environments import get_environment_class
from minisweagent.exceptions import FormatError, Submitted
from minisweagent.models import get_model_class
from pydantic import BaseModel, ConfigDict, ValidationError

from ledger_adapters.mini.context import AgentMessages, history_for
from ledger_adapters.mini.format import MARKER as SUBMIT_MARKER
from ledger_adapters.mini.format import SUBMISSION
from ledger_runtime import (
    ConfigError,
    ExecResult,
    History,
    LedgerConfig,
    LedgerRuntime,
    RewriteSchedule,
    Truncation,
    ViewNotes,
    child_groups,
    kill_child_sessions,
    load_config,
    secret_values,
)

log = logging.getLogger("ledger_runtime.mini")
_sessions = threading.local()
_last_run: list["SharedRun"] = []


class Terminated(BaseException):
    """SIGTERM or SIGHUP to ``ledger-run mini``: the run ends as after a Ctrl-C, its command in flight with it.
    A BaseException, so that no agent takes it for an error of a step and goes on."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class SharedRun:
    """What the environment and the model wrappers of one run share: the runtime and the step."""

    def __init__(self, runtime: LedgerRuntime):
        self.runtime = runtime
        self.step = 0  # model queries so far; every command of one response shares its step


@contextlib.contextmanager
def closing_environments() -> Iterator[list["LedgerEnvironment"]]:
    """Every LedgerEnvironment made on this thread inside the block is cleaned up as the block ends.
    mini-swe-agent's runners never clean up an instance's environment (``ledger-run swebench`` runs each
    instance in one of these)."""
    outer = getattr(_sessions, "made", None)
    made: list[LedgerEnvironment] = []
    _sessions.made = made
    try:
        yield made
    finally:
        _sessions.made = outer
        for env in made:
            env.cleanup()


def stop_environment(env: Any) -> None:
    """Stop what a mini-swe-agent environment started, whatever its kind: its ``cleanup`` (docker,
    singularity, bubblewrap), else its ``stop`` (swerex_modal), else its SWE-ReX deployment's
    (swerex_docker has neither). SWE-ReX stops a deployment when it is garbage collected only where an
    event loop can be had, which is never in a worker thread (the arms' instances run in those), so the
    container, or the Modal sandbox, would run on. A failure is logged: the agent's work is done."""
    try:
        if callable(getattr(env, "cleanup", None)):
            env.cleanup()
            return
        deployment = getattr(env, "deployment", None)
        sandbox = getattr(deployment, "_sandbox", None)  # a Modal deployment's, read before stop forgets it
        if callable(getattr(env, "stop", None)):
            env.stop()
        elif callable(getattr(deployment, "stop", None)):
            asyncio.run(asyncio.wait_for(deployment.stop(), 60))
        if callable(getattr(sandbox, "terminate", None)):
            # swe-rex 1.4's ModalDeployment.stop terminates a sandbox only once it has exited by itself: a
            # running one would be billed until its deployment_timeout
            sandbox.terminate()
    except Exception as e:
        log.warning("could not stop the %s environment: %s: %s", type(env).__name__, type(e).__name__, e)


def current_run() -> SharedRun | None:
    """The session of this thread (the environment wrapper made it), else the latest one."""
    s = getattr(_sessions, "session", None)
    if s is None and _last_run:
        s = _last_run[-1]
    return s


class LedgerSettings(BaseModel):
    """The ``ledger:`` section of the environment config."""

    model_config = ConfigDict(extra="allow")
    run_dir: str = ""
    config_file: str = ""
    task: str = ""
    workdir: str = ""
    helper_transport: str = "auto"  # how the helper reaches a non-local environment: docker exec, or its execute


def ledger_settings(ledger: Any, origin: str = "ledger settings") -> LedgerSettings:
    """The ``ledger:`` section read, or ConfigError naming what is wrong with it in one line: YAML's ``1: x`` or
    ``ledger: 3`` was a TypeError, ``run_dir: [a]`` a pydantic error, each a traceback from mini-swe-agent's CLI."""
    if ledger is None:
        return LedgerSettings()
    if not isinstance(ledger, dict):
        raise ConfigError(f"{origin}: must be a table of settings (docs/settings.md), not {ledger!r}")
    named = [k for k in ledger if not isinstance(k, str)]
    if named:
        raise ConfigError(f"{origin}: {named[0]!r} is not the name of a setting (docs/settings.md)")
    try:
        return LedgerSettings(**ledger)
    except ValidationError as e:
        first = e.errors()[0] if e.errors() else {}
        key = ".".join(str(x) for x in first.get("loc", ()))
        raise ConfigError(f"{origin}: {key}: {first.get('msg', 'invalid')} (got {first.get('input')!r})") from None


def ledger_config(settings: LedgerSettings, origin: str = "ledger settings") -> LedgerConfig:
    """The ledger's settings that the ``ledger:`` section gives: its ``config_file``, then its other keys (flat names
    or sections) over it; ConfigError names the one thing wrong (``origin``: what to call the section in it)."""
    extra = {
        k: v
        for k, v in settings.model_dump().items()
        if k not in ("run_dir", "config_file", "task", "workdir", "helper_transport")
    }
    config = load_config(settings.config_file) if settings.config_file else LedgerConfig()
    return config.updated(extra, origin=origin)


def _runner_context() -> dict[str, Any]:
    """What the mini-swe-agent runner that is building this environment knows (the instance, its
    output directory, the task), read from its frames: the runners pass none of it to a custom
    environment class. Empty outside the runners."""
    found: dict[str, Any] = {}
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_globals.get("__name__", "").startswith("minisweagent.run"):
                for name in ("instance", "instance_dir", "output_dir", "task", "run_task", "config", "image_name"):
                    if name in frame.f_locals and name not in found:
                        found[name] = frame.f_locals[name]
            frame = frame.f_back
    finally:
        del frame
    return found


def _runs_here(env: Any) -> bool:
    """Whether the environment's commands run on this machine, on this machine's files."""
    from minisweagent.environments.local import LocalEnvironment

    return isinstance(env, LocalEnvironment) and not getattr(env, "container_id", None)


def _default_run_dir(ctx: dict[str, Any]) -> Path:
    if ctx.get("instance_dir") is not None:
        return Path(ctx["instance_dir"]) / "ledger"
    output = (
        (ctx.get("config") or {}).get("agent", {}).get("output_path") if isinstance(ctx.get("config"), dict) else None
    )
    if output:
        p = Path(str(output))
        return p.with_name(p.name.split(".")[0] + ".ledger")
    return Path("ledger-runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{threading.get_ident() % 10000}"


def _new_run_dir(path: Path) -> Path:
    """``path``, or where it holds a run already (an instance run again), the first of ``path-2``,
    ``path-3``, ... that does not: a new conversation starts a new ledger, never one that would tell
    it of outputs it was never shown."""
    n, out = 1, path
    while (out / "ledger.sqlite").exists():
        n += 1
        out = path.with_name(f"{path.name}-{n}")
    if out != path:
        log.warning("%s holds a run already: this run's ledger goes to %s", path, out)
    return out


def _instance_image(ctx: dict[str, Any]) -> str | None:
    instance = ctx.get("instance")
    if not isinstance(instance, dict):
        return None
    from minisweagent.run.benchmarks.swebench import get_swebench_docker_image_name

    return get_swebench_docker_image_name(instance)


def image_for(inner_class: str, class_name: str, instance_image: str | None) -> str | None:
    """The image an environment of this class runs a SWE-bench instance in, named as mini-extra
    swebench names it (get_sb_environment): the Docker image, or its ``docker://`` URI for the
    environments that pull through another runtime (Singularity, ConTree)."""
    if not instance_image:
        return None
    # mini-extra swebench hands swerex_docker no image at all: its instances would not start
    if inner_class in ("docker", "swerex_docker", "swerex_modal") or class_name in (
        "DockerEnvironment",
        "SwerexDockerEnvironment",
        "SwerexModalEnvironment",
    ):
        return instance_image
    if inner_class in ("singularity", "contree") or class_name in ("SingularityEnvironment", "ContreeEnvironment"):
        return "docker://" + instance_image
    return None


class LedgerEnvironment:
    """Any mini-swe-agent environment, with every command sent through the ledger."""

    _closed = False  # cleaned up already

    def __init__(self, *, inner_class: str = "local", ledger: dict[str, Any] | None = None, **inner_kwargs: Any):
        ctx = _runner_context()
        try:
            settings, refused = ledger_settings(ledger), None
        except ConfigError as e:  # said where a wrong setting is said, and the agent runs without the ledger
            settings, refused = LedgerSettings(), e
        self.inner_class = inner_class
        cls = get_environment_class(inner_class)
        if "image" not in inner_kwargs and (image := image_for(inner_class, cls.__name__, _instance_image(ctx))):
            inner_kwargs["image"] = image  # mini-extra swebench hands the image only to its own classes
        self.inner = cls(**inner_kwargs)
        self._groups_before = child_groups()  # what a Ctrl-C in a command spares (_inner_execute)
        if (made := getattr(_sessions, "made", None)) is not None:
            made.append(self)
        self.settings = settings
        self.session: SharedRun | None = None
        self.container = None  # a ContainerWorkspace when the inner environment is a container
        self.observers: list = []  # callables (action, output dict) run after each command, for live displays
        self.run_dir = _new_run_dir(Path(settings.run_dir) if settings.run_dir else _default_run_dir(ctx))
        task = settings.task or str(ctx.get("task") or ctx.get("run_task") or "")
        if not task and isinstance(ctx.get("instance"), dict):
            task = ctx["instance"].get("problem_statement", "")
        try:
            if refused is not None:
                raise refused
            self.session = SharedRun(self._runtime(task, inner_kwargs))
        except Exception as e:  # no ledger, but the agent runs as it would without one
            log.error("ledger disabled for this run: %s", e)
            return
        if self.container is not None:  # a helper that failed and was installed again is a fault of ours
            self.container.on_fault = self.session.runtime.report_fault
        _sessions.session = self.session
        _last_run.append(self.session)
        del _last_run[:-8]

    def _runtime(self, task: str, inner_kwargs: dict[str, Any]) -> LedgerRuntime:
        config = ledger_config(self.settings)
        workspace = None
        workdir = self.settings.workdir or getattr(getattr(self.inner, "config", None), "cwd", "") or os.getcwd()
        if not _runs_here(self.inner):
            from ledger_adapters.container.workspace import ContainerWorkspace

            workspace = self.container = ContainerWorkspace(
                self.inner, workdir or "/", transport=self.settings.helper_transport
            )
        meta = {"agent": "mini-swe-agent", "environment": f"{type(self.inner).__module__}.{type(self.inner).__name__}"}
        # the variables the environment sets for the agent's commands: secrets among them are masked too
        env = getattr(getattr(self.inner, "config", None), "env", None)
        secrets = tuple(secret_values(env)) if isinstance(env, dict) else ()
        return LedgerRuntime(
            workdir,
            self.run_dir,
            config,
            task=task,
            meta=meta,
            workspace=workspace,
            secrets=secrets,
            submission=SUBMISSION,
            truncation=Truncation(
                config.truncation.limit_chars, config.truncation.head_chars, config.truncation.tail_chars
            ),
        )

    @property
    def runtime(self) -> LedgerRuntime | None:
        return self.session.runtime if self.session else None

    @property
    def config(self) -> Any:
        return self.inner.config

    def _inner_execute(self, sent: dict, cwd: str, timeout: int | None) -> dict[str, Any]:
        """The inner environment's run of ``sent``. On Ctrl-C (or SIGTERM) the command goes too, as in a terminal:
        mini's local environment starts it in a session of its own, which the Ctrl-C does not reach,
        and left it running (process groups this process led before the environment was made are
        someone else's: spared)."""
        try:
            return self.inner.execute(sent, cwd, timeout=timeout)
        except (KeyboardInterrupt, Terminated):
            kill_child_sessions(spare=self._groups_before)
            raise

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        rt = self.runtime
        if rt is None:
            return self.inner.execute(action, cwd, timeout=timeout)
        command = action.get("command", "")
        held: dict[str, Any] = {}

        def run_inner(_command: str, _cwd: str) -> ExecResult:
            ws = self.container
            sent = {**action, "command": ws.wrap(command, _cwd)} if ws is not None else action
            try:
                out = self._inner_execute(sent, cwd, timeout)
                if sent is not action:  # error texts quote the command: show the agent its own
                    out = _unquote(out, sent["command"], command)
            except Submitted as s:  # let the ledger record it, then raise it as the agent would see it
                msg = s.messages[0] if s.messages else {}
                submission = msg.get("extra", {}).get("submission", "")
                if ws is not None:
                    clean = ws.unwrap(f"{SUBMIT_MARKER}\n{submission}")
                    submission = clean.split("\n", 1)[1] if "\n" in clean else ""
                    s = Submitted(
                        {
                            "role": "exit",
                            "content": submission,
                            "extra": {"exit_status": "Submitted", "submission": submission},
                        }
                    )
                held["submitted"] = s
                return ExecResult(f"{SUBMIT_MARKER}\n{submission}", 0)
            if ws is not None:
                out = {**out, "output": ws.unwrap(out.get("output", ""))}
            held["raw"] = out
            return ExecResult(
                out.get("output", ""),
                out.get("returncode"),
                out.get("exception_info") or "",
                dict(out.get("extra") or {}),
            )

        workdir = cwd or getattr(self.inner.config, "cwd", "") or rt.workdir
        step = self.session.step if self.session and self.session.step else None
        result = rt.run(command, run_inner, cwd=workdir, step=step)
        out = dict(held.get("raw") or {})
        out.update(
            {
                "output": result.output,
                "returncode": result.returncode,
                "exception_info": result.exception_info or out.get("exception_info", ""),
            }
        )
        v = result.verdict
        extra = dict(out.get("extra") or {})
        extra["ledger"] = {
            "verdict": v.kind.value,
            "reason": v.reason,
            "ref_step": v.ref_step,
            "executed": result.executed,
            "attempt": result.attempt_id,
            "answer": result.answer,
            "applied": rt.config.applies,
            "spared": rt.spared(result.attempt_id),
        }
        out["extra"] = extra
        for observe in self.observers:
            try:
                observe(action, out)
            except Exception as e:  # a display must never break the agent
                log.warning("observer failed: %s", e)
        if "submitted" in held:
            raise held["submitted"]
        return out

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return self.inner.get_template_vars(**kwargs)

    def serialize(self) -> dict:
        data = self.inner.serialize()
        info = data.setdefault("info", {})
        cfg = info.setdefault("config", {})
        cfg["environment_type"] = f"{type(self).__module__}.{type(self).__name__}"
        cfg["inner_environment_type"] = f"{type(self.inner).__module__}.{type(self.inner).__name__}"
        rt = self.runtime
        if rt is not None:
            info["ledger"] = {
                "path": str(rt.store.path.resolve()),
                "run_dir": str(rt.run_dir.resolve()),
                "config": rt.config.to_dict(),
            }
        return data

    def cleanup(self) -> None:
        """Close the ledger (the container helper's directory goes, through the environment), then stop
        the environment. Once; later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        if self.runtime is not None:
            self.runtime.close()
        stop_environment(self.inner)

    def __getattr__(self, name: str) -> Any:  # anything else the runner asks of the environment
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


class LedgerModel:
    """Any mini-swe-agent model, sent its history through the ledger: the answers as the agent holds
    them, the notes of the state view kept where they were first sent (never re-rendered into a
    message already sent: that would cost the provider's cache), outputs left out where the run's
    context policy says (context.py)."""

    def __init__(self, *, inner_class: str = "", **kwargs: Any):
        cls = get_model_class(kwargs.get("model_name", ""), inner_class)
        if "cost_tracking" not in kwargs and "MSWEA_COST_TRACKING" not in os.environ and _tracks_cost(cls):
            # mini-swe-agent stops at the first response of a model litellm has no price for (a local
            # one, a new one): the run goes on instead, and the ledger records the cost as unknown
            kwargs["cost_tracking"] = "ignore_errors"
        if _tracks_cost(cls) and "litellm" in sys.modules:
            # litellm prints a banner of its providers' list on every call it cannot price: the warning
            # below says it once
            sys.modules["litellm"].suppress_debug_info = True
        self.inner = cls(**kwargs)
        _abort_on_bad_requests(self.inner)
        self.inner_class = inner_class
        self.unpriced_calls = 0  # model calls whose cost is not known
        self._price_known: bool | None = None  # whether litellm has a price for the model (asked once)
        self.views_injected = 0  # notes of the state view sent
        self.last_view = ""  # the latest of them
        self.cache_ratios: tuple[float, float] | None = None  # (read, write) price over input; None: the model's
        self.history: History | None = None  # what the model was sent, call after call
        self.agent_messages = AgentMessages()  # the agent's messages as read at the last call
        self.last_sent: list[dict] = []  # what the model was sent at the last call

    @property
    def config(self) -> Any:
        return self.inner.config

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        session = current_run()
        if session is None:
            return self.inner.query(messages, **kwargs)
        session.step += 1
        rt = session.runtime
        rt.prescan()  # the model's turn starts: changes made from now on are made between commands
        sent = messages
        note = ""
        # the list sent at the last call is let go first: where nobody else kept it, this call's is made from it in
        # place, not copied (context.py); one kept elsewhere is never changed
        self.last_sent = []
        try:
            history = self._history(rt)
            made = history.notes_sent
            sent = history_for(messages, history, rt, self.inner, self.agent_messages)
            if history.notes_sent != made and history.notes.notes:
                self.views_injected += 1
                note = self.last_view = history.notes.notes[-1].text
                rt.note_injection("note", self.last_view)
        except Exception as e:  # a fault of ours never keeps the model from its history
            rt.report_fault("building what the model is sent", e)
            sent = messages
        self.last_sent = sent
        try:
            message = self.inner.query(sent, **kwargs)
        except FormatError as e:  # the call was billed before its answer failed to parse
            self._record_cost(rt, (e.messages[0].get("extra") or {}) if e.messages else {})
            raise
        self._record_cost(rt, message.get("extra") or {})
        if note and isinstance(message, dict):  # the trajectory keeps what the model was told with this call
            message.setdefault("extra", {})["ledger_note"] = note
        return message

    def _record_cost(self, rt: LedgerRuntime, extra: dict) -> None:
        cost = self._cost_of(extra)
        if cost is None:
            self.unpriced_calls += 1
            if self.unpriced_calls == 1:
                name = getattr(self.inner.config, "model_name", "") or "the model"
                log.warning(
                    "warning: litellm has no price for %s: the cost of its calls is recorded as unknown, and a cost "
                    "limit cannot stop the run (-c agent.step_limit=N can)",
                    name,
                )
        try:
            rt.note_model_call(cost)
        except Exception as e:  # a fault of ours never costs the agent its answer
            rt.report_fault("recording a model call", e)

    def _cost_of(self, extra: dict) -> float | None:
        """What a call cost in dollars, or None when nobody knows: mini-swe-agent's litellm models put
        $0 for a call they could not price (cost_tracking: ignore_errors), and $0 is then a price only
        when litellm's table says so (a free local model it lists)."""
        cost = extra.get("cost")
        if not isinstance(cost, (int, float)) or isinstance(cost, bool):
            return None
        if cost > 0 or getattr(self.inner.config, "cost_tracking", None) != "ignore_errors":
            return float(cost)
        if self._price_known is None:
            self._price_known = _litellm_prices(getattr(self.inner.config, "model_name", ""))
        return 0.0 if self._price_known else None

    def _history(self, rt: LedgerRuntime) -> History:
        if self.history is None:
            read, write = self.cache_ratios or _cache_ratios(getattr(self.inner.config, "model_name", ""))
            self.history = History(
                policy=rt.config.context_policy,
                notes=ViewNotes(limit_chars=rt.config.context.note_chars),
                sticky=RewriteSchedule(cache_ratio=read, write_ratio=write),
                view_share=rt.config.context.view_share,
            )
        return self.history

    def format_message(self, **kwargs: Any) -> dict:
        return self.inner.format_message(**kwargs)

    def format_observation_messages(
        self, message: dict, outputs: list[dict], template_vars: dict | None = None
    ) -> list[dict]:
        return self.inner.format_observation_messages(message, outputs, template_vars)

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return self.inner.get_template_vars(**kwargs)

    def serialize(self) -> dict:
        data = self.inner.serialize()
        cfg = data.setdefault("info", {}).setdefault("config", {})
        cfg["model_type"] = f"{type(self).__module__}.{type(self).__name__}"
        cfg["inner_model_type"] = f"{type(self.inner).__module__}.{type(self.inner).__name__}"
        # how many of the model's calls carried a note of the state view: 0 for an uninformed agent (a baseline)
        data["info"]["ledger_views"] = {"injected": self.views_injected}
        # mini-swe-agent's instance_cost counts an unpriced call as $0: how many there were, so a reader
        # can say the cost is unknown (ledger-run report does)
        data["info"].setdefault("model_stats", {})["unpriced_calls"] = self.unpriced_calls
        return data

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def _abort_on_bad_requests(model: Any) -> None:
    """A request the provider refuses as malformed (litellm's BadRequestError: no provider named, a
    parameter it does not take) fails the same way however often it is sent: mini-swe-agent's retries,
    minutes of them, end at the first (the run then stops with one line saying why)."""
    aborts = getattr(model, "abort_exceptions", None)
    bad = getattr(getattr(sys.modules.get("litellm"), "exceptions", None), "BadRequestError", None)
    if isinstance(aborts, list) and bad is not None and bad not in aborts:
        model.abort_exceptions = [*aborts, bad]  # on the instance: the class's list is mini's own


def _tracks_cost(cls: type) -> bool:
    """Whether a mini-swe-agent model class takes mini's ``cost_tracking`` setting: litellm's, and
    the others whose config (``config_class``, or the ``<Class>Config`` beside it) has the field."""
    if any(c.__name__ == "LitellmModel" and c.__module__.startswith("minisweagent.") for c in cls.__mro__):
        return True
    try:
        param = inspect.signature(cls.__init__).parameters.get("config_class")
    except (TypeError, ValueError):
        param = None
    config = (
        param.default if param is not None else getattr(sys.modules.get(cls.__module__), f"{cls.__name__}Config", None)
    )
    return "cost_tracking" in (getattr(config, "model_fields", None) or {})


def _litellm_prices(model_name: str) -> bool:
    """Whether litellm's price table (with any model registry mini-swe-agent loaded) has the model."""
    litellm = sys.modules.get("litellm")
    if litellm is None or not model_name:
        return False
    try:
        info = litellm.get_model_info(model=model_name)
    except Exception:
        return False
    return info.get("input_cost_per_token") is not None


def _cache_ratios(model_name: str) -> tuple[float, float]:
    """(cache read, cache write) price over the input price of a model, from litellm's table when
    litellm is loaded already (a model that is not litellm's does not pay its import), else a tenth
    and no write price (OpenAI's and Gemini's rule; gpt-5-mini's prices)."""
    litellm = sys.modules.get("litellm")
    price = None
    if litellm is not None and model_name:
        table = getattr(litellm, "model_cost", {}) or {}
        price = table.get(model_name) or table.get(model_name.split("/", 1)[-1])
    try:
        base = float(price["input_cost_per_token"])
        read = float(price.get("cache_read_input_token_cost") or base) / base
        write = float(price.get("cache_creation_input_token_cost") or base) / base
        return read, write
    except (TypeError, KeyError, ValueError, ZeroDivisionError):
        return 0.1, 1.0


def _unquote(out: dict, sent: str, original: str) -> dict:
    """The environment's result with the wrapped command replaced by the original wherever a message
    quotes it (mini-swe-agent's timeout message quotes the whole docker exec command line)."""

    def fix(text: Any) -> Any:
        if not isinstance(text, str):
            return text
        return text.replace(repr(sent), repr(original)).replace(sent, original)

    out = {**out, "exception_info": fix(out.get("exception_info"))}
    if isinstance(out.get("extra"), dict):
        out["extra"] = {k: fix(v) for k, v in out["extra"].items()}
    return out
