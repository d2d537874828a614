"""Token counts and prices from litellm, offline: its ``token_counter`` and its bundled price table
(the ``ledger_runtime.pricing`` entry point the open-loop context measurement loads)."""

from __future__ import annotations

import os


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
        self.input_cost = float(price["input_cost_per_token"])
        self.cached_cost = float(price.get("cache_read_input_token_cost") or self.input_cost)
        self.output_cost = float(price.get("output_cost_per_token") or 0.0)
        self._priming = litellm.token_counter(model=model, messages=[])  # tokens every prompt adds

    def tokens(self, role: str, text: str) -> int:
        """The tokens one message adds to a prompt (a prompt: the sum, plus ``overhead``)."""
        return self._litellm.token_counter(model=self.model, messages=[{"role": role, "content": text}]) - self._priming

    def overhead(self) -> int:
        return self._priming
