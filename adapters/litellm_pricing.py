"""Token counts and prices from litellm, offline: its ``token_counter`` and its bundled price table
(the ``ledger_runtime.pricing`` entry point the open-loop cost meter loads), with the provider whose
rule of prompt caching bills the model (harness/replay/billing.py: openai, anthropic, gemini)."""

from __future__ import annotations

import os
import re

# litellm's provider names -> the caching rule that bills them
_RULES = {
    "openai": "openai",
    "azure": "openai",
    "text-completion-openai": "openai",
    "anthropic": "anthropic",
    "bedrock": "anthropic",
    "vertex_ai-anthropic_models": "anthropic",
    "gemini": "gemini",
    "vertex_ai-language-models": "gemini",
}


ANTHROPIC_HOUR = "@1h"  # a price model's suffix: Anthropic's 1-hour cache (its writes cost 2x the input price)
OPENAI_WRITES_FROM = (5, 6)  # OpenAI bills cache writes (1.25x the input price) from GPT-5.6 on


def openai_bills_writes(model: str) -> bool:
    """Whether OpenAI bills writing ``model``'s prompts to its cache: GPT-5.6 and later (earlier gpt-5
    models write for free)."""
    m = re.search(r"gpt-(\d+)(?:\.(\d+))?", model.lower())
    return m is not None and (int(m.group(1)), int(m.group(2) or 0)) >= OPENAI_WRITES_FROM


def cache_prices(model: str, rule: str, price: dict, hour: bool = False) -> tuple[float, float]:
    """(cache read, cache write) USD per token of ``model`` under its provider's caching ``rule``, from
    litellm's ``price`` entry where it has them, else by the rule: OpenAI writes at 1.25x the input
    price from GPT-5.6 on (free before); Anthropic's 5-minute writes 1.25x, its 1-hour writes
    (``hour``) 2x; Gemini writes free. A write that is free costs the input price (nothing extra)."""
    base = float(price["input_cost_per_token"])
    read = float(price.get("cache_read_input_token_cost") or base)
    if rule == "anthropic":
        key = "cache_creation_input_token_cost_above_1hr" if hour else "cache_creation_input_token_cost"
        return read, float(price.get(key) or base * (2.0 if hour else 1.25))
    if rule == "openai" and openai_bills_writes(model):
        return read, float(price.get("cache_creation_input_token_cost") or base * 1.25)
    return read, base


def provider_of(model: str, price: dict) -> str:
    """The caching rule for a model of litellm's table ("none" where no rule is known)."""
    rule = _RULES.get(str(price.get("litellm_provider") or ""))
    if rule == "anthropic" or (rule is None and "claude" in model):
        return "anthropic"
    return rule or "none"


class LitellmPricing:
    """Counts a message as litellm's ``token_counter`` does and prices it by litellm's table."""

    def __init__(self, model: str = "gpt-5-mini"):
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the bundled table: no network
        import litellm

        self._litellm = litellm
        hour = model.endswith(ANTHROPIC_HOUR)
        name = model[: -len(ANTHROPIC_HOUR)] if hour else model
        price = litellm.model_cost.get(name)
        if not price or "input_cost_per_token" not in price:
            raise LookupError(f"litellm has no prices for {name!r}")
        self.model = model
        self.provider = provider_of(name, price)
        if hour and self.provider != "anthropic":
            raise LookupError(f"{model!r}: a 1-hour cache ({ANTHROPIC_HOUR}) is Anthropic's")
        self.input_cost = float(price["input_cost_per_token"])
        self.cached_cost, self.cache_write_cost = cache_prices(name, self.provider, price, hour)
        self.output_cost = float(price.get("output_cost_per_token") or 0.0)
        self._name = name  # the model as litellm counts its tokens
        self._priming = litellm.token_counter(model=name, messages=[])  # tokens every prompt adds

    def tokens(self, role: str, text: str) -> int:
        """The tokens one message adds to a prompt (a prompt: the sum, plus ``overhead``)."""
        return self._litellm.token_counter(model=self._name, messages=[{"role": role, "content": text}]) - self._priming

    def text_tokens(self, text: str) -> int:
        """The tokens of a bare piece of text."""
        return self._litellm.token_counter(model=self._name, text=text) if text else 0

    def overhead(self) -> int:
        return self._priming
