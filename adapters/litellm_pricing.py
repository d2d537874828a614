"""Token counts and prices from litellm, offline: its ``token_counter`` and its bundled price table
(the ``ledger_runtime.pricing`` entry point the open-loop cost meter loads), with the provider whose
rule of prompt caching bills the model (harness/replay/billing.py: openai, anthropic, gemini)."""

from __future__ import annotations

import os

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
        price = litellm.model_cost.get(model)
        if not price or "input_cost_per_token" not in price:
            raise LookupError(f"litellm has no prices for {model!r}")
        self.model = model
        self.provider = provider_of(model, price)
        self.input_cost = float(price["input_cost_per_token"])
        self.cached_cost = float(price.get("cache_read_input_token_cost") or self.input_cost)
        self.cache_write_cost = float(price.get("cache_creation_input_token_cost") or self.input_cost)
        self.output_cost = float(price.get("output_cost_per_token") or 0.0)
        self._priming = litellm.token_counter(model=model, messages=[])  # tokens every prompt adds

    def tokens(self, role: str, text: str) -> int:
        """The tokens one message adds to a prompt (a prompt: the sum, plus ``overhead``)."""
        return self._litellm.token_counter(model=self.model, messages=[{"role": role, "content": text}]) - self._priming

    def text_tokens(self, text: str) -> int:
        """The tokens of a bare piece of text."""
        return self._litellm.token_counter(model=self.model, text=text) if text else 0

    def overhead(self) -> int:
        return self._priming
