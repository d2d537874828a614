"""What a provider bills for each model call of a run: uncached input, cache reads, cache writes and
output, by the provider's rule of prompt caching, given the calls of the run before it.

- **OpenAI** (automatic): a call reads from the cache the longest prefix its prompt shares, token by
  token, with an earlier prompt of the run, counted in steps of 128 tokens and only from 1,024 on;
  writing to the cache costs nothing up to GPT-5.5; from GPT-5.6 on the prompt's prefix it caches
  (in steps of 128, from 1,024) beyond what it read is billed at the cache-write price, 1.25x the
  input price (``Rates.cache_write`` above ``input``).
- **Anthropic** (explicit breakpoints): a call writes a cache entry for its prompt up to each
  ``cache_control`` breakpoint (mini-swe-agent's ``set_cache_control: default_end`` puts one on the
  last message), billed at the cache-write price (the 5-minute one), once that prefix reaches the
  model's minimum (1,024 tokens; 2,048 for the Haiku 3 models; 4,096 for Opus 4.5 and Haiku 4.5), at
  1.25x the input price for the 5-minute cache, 2x for the 1-hour one (an option of the user's: the
  price model ``claude-...@1h``). It
  reads the longest earlier entry that its prompt holds whole, ending at a message boundary at most
  20 blocks before a breakpoint; what lies between that and the last breakpoint is written; what
  follows the last breakpoint is uncached. Without breakpoints nothing is cached.
- **Gemini** (implicit): like OpenAI, token by token, from the model's minimum (2,048 tokens for the
  2.5 models, 4,096 for later ones); nothing is billed for writing.

Assumptions, stated where the figures are quoted: every call comes within the cache's lifetime of
the one before it (agents call every few seconds; Anthropic keeps an entry 5 minutes, OpenAI 5 to 10);
OpenAI and Gemini route every call of a run to the same cache; a message is one block (Anthropic);
the prefix shared inside a message that differs is counted by the tokens of its common characters,
less one. Tokens come from the ``Pricing``'s counter (litellm's ``token_counter``), an estimate for
models whose own tokenizer litellm does not have.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol, Sequence

OPENAI, ANTHROPIC, GEMINI, NO_CACHE = "openai", "anthropic", "gemini", "none"
OPENAI_MIN, OPENAI_STEP = 1024, 128
ANTHROPIC_LOOKBACK_BLOCKS = 20
COMPARED = 16  # earlier prompts a prompt is compared with for its cached prefix (OpenAI, Gemini)
NEVER = 1 << 62  # the minimum of a model nothing is cached for


class Counter(Protocol):
    """Counts tokens as a model's tokenizer does."""

    def tokens(self, role: str, text: str) -> int: ...  # one message, with its framing

    def text_tokens(self, text: str) -> int: ...  # a bare piece of text

    def overhead(self) -> int: ...  # what every prompt adds beyond its messages


def min_cached(provider: str, model: str) -> int:
    """The fewest tokens a provider caches for ``model`` (its documented minimum)."""
    m = model.lower().rsplit("/", 1)[-1]
    if provider == ANTHROPIC:
        if "opus-4-5" in m or "haiku-4-5" in m or "opus-4.5" in m or "haiku-4.5" in m:
            return 4096
        if "haiku-3" in m or "3-haiku" in m or "3-5-haiku" in m:
            return 2048
        return 1024
    if provider == GEMINI:
        if any(old in m for old in ("gemini-1", "gemini-2.0", "gemini-pro")):
            return NEVER  # implicit caching came with the 2.5 models
        return 2048 if "gemini-2.5" in m else 4096
    return OPENAI_MIN


@dataclass(frozen=True)
class Rates:
    """A model's prices, in USD per token, and its provider's rule."""

    model: str
    provider: str
    input: float
    cache_read: float
    cache_write: float  # the cache-write price: Anthropic's, OpenAI's from GPT-5.6; the input price elsewhere
    output: float

    @property
    def read_ratio(self) -> float:
        return self.cache_read / self.input if self.input else 1.0

    @property
    def write_ratio(self) -> float:
        return self.cache_write / self.input if self.input else 1.0


@dataclass(frozen=True)
class Part:
    """One message of a prompt, as it is billed."""

    role: str
    text: str
    breakpoint: bool = False  # Anthropic: a cache_control breakpoint is on it


@dataclass
class Bill:
    """Tokens of one call (or a sum of calls) by how they are billed."""

    uncached: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    calls: int = 0

    @property
    def prompt(self) -> int:
        return self.uncached + self.cache_read + self.cache_write

    def cost(self, rates: Rates) -> float:
        return (
            self.uncached * rates.input
            + self.cache_read * rates.cache_read
            + self.cache_write * rates.cache_write
            + self.output * rates.output
        )

    def input_cost(self, rates: Rates) -> float:
        return self.cost(rates) - self.output * rates.output

    def add(self, other: Bill) -> None:
        self.uncached += other.uncached
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        self.output += other.output
        self.calls += other.calls

    def as_dict(self, rates: Rates) -> dict:
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt,
            "uncached_tokens": self.uncached,
            "cache_read_tokens": self.cache_read,
            "cache_write_tokens": self.cache_write,
            "output_tokens": self.output,
            "input_cost_usd": round(self.input_cost(rates), 6),
            "cost_usd": round(self.cost(rates), 6),
        }


@dataclass
class _Prompt:
    parts: tuple[Part, ...]
    tokens: tuple[int, ...]  # per part
    ends: tuple[int, ...]  # tokens up to and including each part


@dataclass
class Cache:
    """The calls of one run to one model: ``bill`` each prompt in order (see the module docstring)."""

    rates: Rates
    counter: Counter
    earlier: list[_Prompt] = field(default_factory=list)
    entries: dict[tuple[tuple[str, str], ...], int] = field(default_factory=dict)  # Anthropic: prefix -> tokens
    compared: int = COMPARED  # earlier prompts a prompt is compared with (OpenAI, Gemini)
    _counts: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def minimum(self) -> int:
        return min_cached(self.rates.provider, self.rates.model)

    def bill(self, parts: Sequence[Part], output_tokens: int = 0) -> Bill:
        """What this call is billed; it is one of the run's calls from now on."""
        return self._bill(tuple(parts), output_tokens, record=True)

    def quote(self, parts: Sequence[Part], output_tokens: int = 0) -> Bill:
        """What this call would be billed, the run's calls left as they are."""
        return self._bill(tuple(parts), output_tokens, record=False)

    def _bill(self, parts: tuple[Part, ...], output_tokens: int, record: bool) -> Bill:
        p = self._prompt(parts)
        total = (p.ends[-1] if p.ends else 0) + self.counter.overhead()
        if self.rates.provider == ANTHROPIC:
            read, write = self._anthropic(p, record)
        elif self.rates.provider in (OPENAI, GEMINI):
            read = self._prefix(p)
            write = self._openai_written(p, read) if self.rates.cache_write > self.rates.input else 0
        else:
            read, write = 0, 0
        if record:
            self.earlier.append(p)
            del self.earlier[: -self.compared]
        return Bill(total - read - write, read, write, output_tokens, 1)

    # -- the rules ---------------------------------------------------------------------------------

    def _prefix(self, p: _Prompt) -> int:
        shared = max((self._shared(q, p) for q in self.earlier), default=0)
        if shared < self.minimum:
            return 0
        if self.rates.provider == OPENAI:
            return shared // OPENAI_STEP * OPENAI_STEP
        return shared

    def _openai_written(self, p: _Prompt, read: int) -> int:
        """What a call writes to OpenAI's cache (billed from GPT-5.6 on): its prompt's prefix in steps of
        128 tokens, from the minimum on, beyond what it read."""
        total = (p.ends[-1] if p.ends else 0) + self.counter.overhead()
        if total < self.minimum:
            return 0
        return max(0, total // OPENAI_STEP * OPENAI_STEP - read)

    def _shared(self, q: _Prompt, p: _Prompt) -> int:
        """Tokens at the start of ``p`` that are the same as at the start of ``q``."""
        n = 0
        for a, b, t in zip(q.parts, p.parts, p.tokens):
            if a.role == b.role and a.text == b.text:  # a breakpoint is no part of the content
                n += t
                continue
            if a.role == b.role:
                common = os.path.commonprefix([a.text, b.text])
                framing = t - self.counter.text_tokens(b.text)
                n += max(0, framing) + (max(0, self.counter.text_tokens(common) - 1) if common else 0)
            break
        return n

    def _anthropic(self, p: _Prompt, record: bool = True) -> tuple[int, int]:
        keys = tuple((part.role, part.text) for part in p.parts)  # a breakpoint is no part of the content
        marks = [i for i, part in enumerate(p.parts) if part.breakpoint]
        read = 0
        for b in marks:
            for j in range(b, max(-1, b - ANTHROPIC_LOOKBACK_BLOCKS - 1), -1):  # the block itself and 20 before
                got = self.entries.get(keys[: j + 1])
                if got is not None:
                    read = max(read, got)
                    break
        cacheable = [b for b in marks if p.ends[b] >= self.minimum]
        for b in cacheable if record else ():
            self.entries.setdefault(keys[: b + 1], p.ends[b])
        if not cacheable:
            return 0, 0
        return read, p.ends[cacheable[-1]] - read

    def _prompt(self, parts: tuple[Part, ...]) -> _Prompt:
        tokens = tuple(self._count(part) for part in parts)
        ends, n = [], 0
        for t in tokens:
            n += t
            ends.append(n)
        return _Prompt(parts, tokens, tuple(ends))

    def _count(self, part: Part) -> int:
        key = (part.role, part.text)
        n = self._counts.get(key)
        if n is None:
            n = self._counts[key] = self.counter.tokens(part.role, part.text)
        return n


__all__ = ["Cache", "Bill", "Part", "Rates", "Counter", "min_cached", "OPENAI", "ANTHROPIC", "GEMINI", "NO_CACHE"]
