"""What a model served through litellm needs before ``ledger-run mini`` starts it: its key, the address
of a server of your own (vLLM, ollama, any OpenAI-compatible one), and that server up. Each is
checked offline and said in one line, before a run that would otherwise retry for minutes and end
in a traceback (docs/mini-swe-agent.md, "Local models")."""

from __future__ import annotations

import socket
from typing import Any, Mapping
from urllib.parse import urlsplit

# where litellm finds a provider's server when the model names none (model_kwargs.api_base)
BASE_VARIABLES = {
    "openai": ("OPENAI_API_BASE", "OPENAI_BASE_URL"),
    "hosted_vllm": ("HOSTED_VLLM_API_BASE",),
    "ollama": ("OLLAMA_API_BASE",),
    "ollama_chat": ("OLLAMA_API_BASE",),
}
# providers litellm reaches on this machine when no address is given
LOCAL_DEFAULTS = {"ollama": "http://localhost:11434", "ollama_chat": "http://localhost:11434"}
# providers that have no address of their own: a server of yours, named
NEEDS_ADDRESS = {"hosted_vllm"}
LITELLM_CLASSES = ("", "litellm", "litellm_textbased", "litellm_response")


def provider(model_name: str) -> str:
    return model_name.split("/", 1)[0] if "/" in model_name else ""


def server_of(model_cfg: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    """The address a server of your own is reached at (``--api-base``, the provider's variable, or
    the provider's local default); None for a provider's own service."""
    kwargs = model_cfg.get("model_kwargs") or {}
    for key in ("api_base", "base_url"):
        if isinstance(kwargs.get(key), str) and kwargs[key]:
            return kwargs[key]
    name = str(model_cfg.get("model_name") or "")
    for var in BASE_VARIABLES.get(provider(name), ()):
        if environ.get(var):
            return environ[var]
    return LOCAL_DEFAULTS.get(provider(name))


def model_problem(
    model_cfg: Mapping[str, Any], model_class: str, environ: Mapping[str, str], missing_keys: list[str]
) -> str | None:
    """Why the model cannot be called as configured (one line), or None. ``missing_keys`` are the
    variables litellm says it lacks (``litellm.validate_environment``)."""
    name = model_cfg.get("model_name")
    if not isinstance(name, str) or not name or model_class not in LITELLM_CLASSES:
        return None
    kwargs = model_cfg.get("model_kwargs") or {}
    server = server_of(model_cfg, environ)
    if provider(name) in NEEDS_ADDRESS and server is None:
        var = BASE_VARIABLES[provider(name)][0]
        return f"{name} is served by a server of yours: pass its address, --api-base http://HOST:PORT/v1 (or set {var})"
    if kwargs.get("api_key"):
        return None
    keys = list(missing_keys)
    if server is not None:  # an address is not a key, and litellm has one: given, or its local default
        keys = [k for k in keys if not k.endswith(("_API_BASE", "_BASE_URL"))]
    if not keys:
        return None
    if server is not None:
        return (
            f"no API key for {name}: set {' or '.join(keys)} (a server of yours that checks none takes any "
            f"value: {keys[0]}=dummy)"
        )
    return f"no API key for {name}: set {' or '.join(keys)} (or pass another -m)"


def address_problem(model_cfg: Mapping[str, Any], model_class: str, known: Any = None) -> str | None:
    """Why an address given for the model (``--api-base``) cannot work, in one line, or None: it has
    no scheme (``127.0.0.1:8089/v1``), or the model names no provider litellm can reach it with
    (``-m scripted``: litellm would retry "LLM Provider NOT provided" for minutes). ``known``: a
    function that raises for a model name litellm cannot place (``litellm.get_llm_provider``)."""
    name = str(model_cfg.get("model_name") or "")
    base = (model_cfg.get("model_kwargs") or {}).get("api_base")
    if not isinstance(base, str) or not base or model_class not in LITELLM_CLASSES:
        return None
    if not base.startswith(("http://", "https://")):
        return f"--api-base {base}: give its scheme, --api-base http://{base.split('://')[-1]}"
    if provider(name) or known is None:
        return None
    try:
        known(name)
    except Exception:
        return (
            f"-m {name} names no provider for --api-base: an OpenAI-compatible server is -m openai/{name} "
            f"(vLLM: hosted_vllm/{name}, ollama: ollama/{name})"
        )
    return None


def unplaced_problem(model_cfg: Mapping[str, Any], model_class: str, known: Any = None) -> str | None:
    """Why litellm cannot call the model, in one line, or None: its name places it with no provider
    (``-m scripted``, ``-m my-model``: litellm would answer "LLM Provider NOT provided" at the first call,
    after mini-swe-agent had printed its prompt). ``known`` as in ``address_problem``."""
    name = model_cfg.get("model_name")
    if not isinstance(name, str) or not name or known is None or model_class not in LITELLM_CLASSES:
        return None
    try:
        known(name)
    except Exception:
        return (
            f"-m {name}: litellm knows no provider for this name: give it one, e.g. -m openai/gpt-5-mini "
            f"(a server of yours: -m openai/{name} or hosted_vllm/{name} with --api-base URL)"
        )
    return None


def unreachable(url: str, timeout: float = 3.0) -> str | None:
    """Why nothing answers at ``url`` (a TCP connection to its host and port), or None."""
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        host = parts.hostname
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as e:
        return f"{url!r} is not an address: {e}"
    if not host:
        return f"{url!r} is not an address (http://HOST:PORT/v1)"
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        return f"nothing answers at {url}: {e.strerror or e} (is the server running?)"
    return None
