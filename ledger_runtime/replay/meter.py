"""The open loop of the context policies: for every model call of a recorded run, the prompt it would
have been sent under each policy, measured in tokens, cached tokens and money.

``full`` and ``window:M`` are the recorded messages as the agent got them without the ledger
(``window:M`` with outputs older than the last M as the baseline's placeholder); ``validity`` and
``validity+window:M`` are the same messages with each output replaced by the answer the ledger gave
in the replay (its visible part, cut as mini-swe-agent cuts) and the state view after the last
message, as ``LedgerModel`` sends them, then the policy applied through ``Sticky``. Tokens are
counted by a ``Pricing`` (an entry point of the group ``ledger_runtime.pricing``; the package's own
counts with litellm's ``token_counter`` and prices with its bundled table). Cached tokens: the
messages a prompt shares, from its start, with the previous call's, counted as the provider caches
them (OpenAI: nothing below 1,024 tokens, then in steps of 128). ``valid_unique_lines_dropped``:
distinct output lines left out at some call while still true and shown nowhere later in what was
sent (context.valid_unique_dropped); stubs whose claims do not hold (context.stub_holds) are counted
too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Protocol

from ledger_runtime.decide.context import (
    KEEP,
    STUB,
    ContextPolicy,
    Said,
    Sticky,
    stub_holds,
    stub_text,
    to_send,
    valid_unique_dropped,
)
from ledger_runtime.inform import VIEW_NOTE
from ledger_runtime.ledger.observe import Truncation
from ledger_runtime.replay.trajectories import Trajectory

CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128
PRICING_GROUP = "ledger_runtime.pricing"


class Pricing(Protocol):
    """Counts a message's tokens and prices tokens (per token, in USD)."""

    model: str
    input_cost: float
    cached_cost: float
    output_cost: float

    def tokens(self, role: str, text: str) -> int: ...

    def overhead(self) -> int: ...  # tokens a prompt costs beyond its messages


def load_pricing(model: str) -> Pricing:
    """The pricing of the first installed ``ledger_runtime.pricing`` entry point, for ``model``."""
    found = list(entry_points(group=PRICING_GROUP))
    if not found:
        raise LookupError(f"no token counter installed (entry point group {PRICING_GROUP}): reinstall ledger-runtime")
    return found[0].load()(model)


def cached_of(tokens: int) -> int:
    """Tokens a provider bills at its cache price for a shared prefix of ``tokens`` (OpenAI's rule)."""
    return 0 if tokens < CACHE_MIN_TOKENS else tokens // CACHE_STEP_TOKENS * CACHE_STEP_TOKENS


@dataclass
class PolicyTally:
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    stubs: int = 0  # outputs sent as a stub or as their kept lines, summed over calls
    stubs_false: int = 0
    dropped: set = field(default_factory=set)  # (step, line) pairs

    def as_dict(self, pricing: Pricing) -> dict:
        cost = (
            (self.prompt_tokens - self.cached_tokens) * pricing.input_cost
            + self.cached_tokens * pricing.cached_cost
            + self.output_tokens * pricing.output_cost
        )
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(cost, 6),
            "stubs": self.stubs,
            "stubs_false": self.stubs_false,
            "valid_unique_lines_dropped": len(self.dropped),
        }


class ContextMeter:
    """Measures the calls of one replayed trajectory under each policy (see the module docstring).
    Call ``attempt_done`` after each replayed command and ``measure`` before each; ``result`` at the end."""

    def __init__(self, traj: Trajectory, policies: list[ContextPolicy], pricing: Pricing, trunc: Truncation):
        self.traj, self.policies, self.pricing, self.trunc = traj, policies, pricing, trunc
        self.tally = {p.name: PolicyTally() for p in policies}
        self.sticky = {
            p.name: Sticky(cache_ratio=pricing.cached_cost / pricing.input_cost if pricing.input_cost else 1)
            for p in policies
        }
        self.previous: dict[str, list[tuple[str, str]]] = {}
        self.answer_of: dict[int, tuple[int, str]] = {}  # reply message index -> (attempt, answer text)
        self.done = 0  # assistant messages measured so far
        self.calls = [k for k, (role, _) in enumerate(traj.messages) if role == "assistant"]
        self._tokens: dict[tuple[str, str], int] = {}

    def attempt_done(self, reply: int | None, attempt: int, answer: str) -> None:
        if reply is not None:
            self.answer_of[reply] = (attempt, answer)

    def measure(self, upto: int | None, rt, view: str) -> None:
        """Every call up to the assistant message ``upto`` (None: all the rest), with the ledger as it is."""
        while self.done < len(self.calls) and (upto is None or self.calls[self.done] <= upto):
            self._call(self.calls[self.done], rt, view)
            self.done += 1

    def result(self) -> dict:
        return {name: t.as_dict(self.pricing) for name, t in self.tally.items()}

    # -- one call ----------------------------------------------------------------------------------

    def _call(self, c: int, rt, view: str) -> None:
        recorded = self.traj.messages[:c]
        output_tokens = self._count("assistant", self.traj.messages[c][1])
        replies = [k for k, (role, _) in enumerate(recorded) if k > 1 and role in ("user", "tool")]
        for policy in self.policies:
            if policy.validity:
                msgs, saids = self._ledger_messages(recorded, replies, rt)
            else:
                msgs, saids = list(recorded), self._saids(replies, recorded, rt, raw=True)
            treat = to_send(saids, policy, rt.still_true, self.sticky[policy.name], [t for _, t in msgs], replies)
            sent = list(msgs)
            tally = self.tally[policy.name]
            for n, (k, t) in enumerate(zip(replies, treat)):
                if t.kind != KEEP:
                    sent[k] = (sent[k][0], stub_text(saids[n], t, msgs[k][1].count("\n") + 1))
                    tally.stubs += 1
                    after = list(zip(saids[n + 1 :], treat[n + 1 :]))
                    if not stub_holds(saids[n], t, after, rt.still_true):
                        tally.stubs_false += 1
            if policy.validity and view and sent:
                role, text = sent[-1]
                sent[-1] = (role, text + "\n\n" + VIEW_NOTE + view)
            lost = valid_unique_dropped(saids, treat, rt.still_true)
            tally.dropped.update((saids[i].label, line) for i, line in lost)
            tokens = [self._count(r, t) for r, t in sent]
            prev = self.previous.get(policy.name, [])
            shared = 0
            for a, b, n in zip(prev, sent, tokens):
                if a != b:
                    break
                shared += n
            tally.calls += 1
            tally.prompt_tokens += sum(tokens) + self.pricing.overhead()
            tally.cached_tokens += cached_of(shared)
            tally.output_tokens += output_tokens
            self.previous[policy.name] = sent

    def _saids(self, replies, msgs, rt, raw: bool) -> list[Said]:
        out = []
        for n, k in enumerate(replies):
            got = self.answer_of.get(k)
            s = rt.said(got[0], n, len(msgs[k][1]), raw=raw) if got is not None else None
            out.append(s or Said(n, None, f"message {k}", "", None, False, (), (), len(msgs[k][1])))
        return out

    def _ledger_messages(self, recorded, replies, rt):
        msgs = list(recorded)
        for k in replies:
            got = self.answer_of.get(k)
            if got is not None:
                msgs[k] = (msgs[k][0], self.traj.recorded.with_answer(msgs[k][1], got[1], self.trunc))
        return msgs, self._saids(replies, msgs, rt, raw=False)

    def _count(self, role: str, text: str) -> int:
        key = (role, text)
        n = self._tokens.get(key)
        if n is None:
            n = self._tokens[key] = self.pricing.tokens(role, text)
        return n


def summarize(results: list[dict]) -> dict:
    """Per policy, the figures of every trajectory summed (ratios against ``full``)."""
    total: dict[str, dict] = {}
    for r in results:
        for name, row in (r.get("context") or {}).items():
            t = total.setdefault(name, {})
            for k, v in row.items():
                t[k] = round(t.get(k, 0) + v, 6)
    full = total.get("full")
    for name, t in total.items():
        if full and full.get("prompt_tokens"):
            t["prompt_vs_full"] = round(t["prompt_tokens"] / full["prompt_tokens"], 4)
            t["cost_vs_full"] = round(t["cost_usd"] / full["cost_usd"], 4) if full.get("cost_usd") else None
    return total


__all__ = ["ContextMeter", "Pricing", "load_pricing", "summarize", "cached_of", "STUB"]
