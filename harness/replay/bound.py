"""The offline bound of history rewrites: with the whole run known, the cheapest schedule of
rewrites that never drops a still-true line shown nowhere later and never sends a false stub.

A *schedule* is a set of calls at which the history is rewritten. At a rewrite at call ``s`` every
output the run has so far is sent as a validity policy would want it then (``treatments`` at ``s``:
``validity``, and ``validity+window:M`` for the windows measured: the *targets*); from then on, until
the next rewrite, those outputs stay so and every later output is sent whole. A schedule may go on
at a call only if what it sends there drops no still-true line shown nowhere later
(``valid_unique_dropped``) and every stub it sends holds (``stub_holds``), both judged with the
ledger as it is at that call. Its cost is the input cost the provider bills for its calls
(billing.py). Dynamic programming over the rewrite in force: ``f(t, s)``, the least cost of calls
``0..t`` with the rewrite made at ``s`` in force at ``t``, is ``f(t-1, s)`` plus call ``t`` under it,
and ``f(t, t)`` the least ``f(t-1, s')`` plus the rewrite at ``t`` after ``s'``. Never rewriting is
one schedule: the bound is never above the ``ledger`` arm.

Assumptions: a schedule picks when to rewrite, not what (the targets above); the notes of the state
view are those of the ``ledger`` arm (a rewrite does not take them back); at each call only the
``BEAM`` cheapest schedules so far are followed further; a call's cache holds the prompts sent since
the rewrite in force (Anthropic: the entries they wrote), and a rewrite reads what the schedule it
ends had written; every call comes within the cache's lifetime.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ledger_harness.replay.billing import Cache, Part, Rates
from ledger_runtime.held.context import (
    KEEP,
    ContextPolicy,
    HistoryOutput,
    Treatment,
    stub_holds,
    stub_text,
    treatments,
    valid_unique_dropped,
)
from ledger_runtime.prompt.history import Message, Sent, placed

BEAM = 24  # schedules followed per price model


@dataclass
class _Rewrite:
    """The history as one rewrite sends it, call after call."""

    call: int  # the call it was made at (-1: the history as it is, never rewritten)
    saids: list[HistoryOutput]
    treat: list[Treatment]
    texts: dict[int, str]  # message index -> the text sent in its place
    caches: dict[str, Cache] = field(default_factory=dict)  # per price model: what its calls wrote


@dataclass
class _Schedule:
    cost: float
    rewrites: tuple[int, ...]


class OfflineBound:
    """Follows, call by call, what the cheapest schedules cost (see the module docstring)."""

    def __init__(self, rates: dict[str, Rates], counters: dict, policies: Sequence[ContextPolicy] = ()):
        self.rates, self.counters = rates, counters
        self.targets = [p for p in policies if p.validity] or [ContextPolicy(validity=True)]
        self.rewrites: list[_Rewrite] = [_Rewrite(-1, [], [], {})]
        self.best: dict[str, dict[int, _Schedule]] = {m: {0: _Schedule(0.0, ())} for m in rates}
        self.calls = 0

    def call(  # noqa: C901
        self, roles: Sequence[str], messages: Sequence[Message], sent: Sequence[Sent], ledger, output: str
    ) -> None:
        """One model call: ``sent`` is the ledger arm's history (answers and notes, nothing rewritten)."""
        t = self.calls
        self.calls += 1
        outputs = [k for k, m in enumerate(messages) if m.attempt is not None]
        saids = ledger.history([(messages[k].attempt, len(messages[k].text)) for k in outputs])
        live = {i for m in self.best.values() for i in m}
        holds = {i: i == 0 or self._holds(self.rewrites[i], saids, ledger) for i in live}
        new: list[int] = []
        for policy in self.targets if outputs else ():
            treat = treatments(saids, policy, ledger.still_true)
            if any(x.kind != KEEP for x in treat):
                texts = {
                    k: stub_text(s, x, messages[k].text.count("\n") + 1)
                    for k, s, x in zip(outputs, saids, treat)
                    if x.kind != KEEP
                }
                self.rewrites.append(_Rewrite(t, saids, treat, texts))
                new.append(len(self.rewrites) - 1)
        for model, rates in self.rates.items():
            out_tokens = self.counters[model].tokens("assistant", output)
            before = self.best[model]
            after: dict[int, _Schedule] = {}
            for j in new:
                r = self.rewrites[j]
                parts = _parts(roles, sent, r)
                for i, sched in before.items():
                    cache = self.rewrites[i].caches.get(model)
                    cost = sched.cost + (
                        cache.quote(parts, out_tokens) if cache else _fresh(rates, self, model, parts, out_tokens)
                    ).input_cost(rates)
                    if j not in after or cost < after[j].cost:
                        after[j] = _Schedule(cost, (*sched.rewrites, t))
                r.caches[model] = c = Cache(rates, self.counters[model], compared=2)
                c.bill(parts, out_tokens)  # what the calls after it read
            for i, sched in before.items():
                if not holds[i]:
                    continue  # it would send something untrue here: only a rewrite goes on from it
                r = self.rewrites[i]
                cache = r.caches.setdefault(model, Cache(rates, self.counters[model], compared=2))
                after[i] = _Schedule(
                    sched.cost + cache.bill(_parts(roles, sent, r), out_tokens).input_cost(rates), sched.rewrites
                )
            kept = sorted(after, key=lambda i: after[i].cost)[:BEAM]
            if 0 in after and 0 not in kept:
                kept.append(0)  # never rewriting stays a schedule: the bound is never above the ledger arm
            self.best[model] = {i: after[i] for i in kept}
        alive = {i for m in self.best.values() for i in m}
        for i, r in enumerate(self.rewrites):
            if i not in alive:
                r.caches.clear()
                r.saids, r.treat, r.texts = [], [], {}

    def _holds(self, r: _Rewrite, saids: list[HistoryOutput], ledger) -> bool:
        """Whether the rewrite's stubs still say only true things and drop no still-true unique line,
        the outputs since it sent whole."""
        n = len(r.saids)
        now = list(r.saids) + list(saids[n:])
        treat = list(r.treat) + [Treatment(KEEP)] * (len(now) - n)
        for j in range(n):
            if treat[j].kind != KEEP and not stub_holds(
                now[j], treat[j], list(zip(now[j + 1 :], treat[j + 1 :])), ledger.still_true
            ):
                return False
        return not valid_unique_dropped(now, treat, ledger.still_true)

    def result(self) -> dict[str, dict]:
        """Per price model: the bound's input cost, and the calls its schedule rewrites at."""
        out = {}
        for model, best in self.best.items():
            if not best:
                continue
            s = min(best.values(), key=lambda x: x.cost)
            out[model] = {
                "input_cost_usd": round(s.cost, 6),
                "rewrites": len(s.rewrites),
                "rewrite_calls": list(s.rewrites),
            }
        return out


def _parts(roles, sent: Sequence[Sent], r: _Rewrite) -> list[Part]:
    msgs = placed(roles, [Sent(r.texts.get(k, s.text), s.note) for k, s in enumerate(sent)])
    return [Part(role, text, k == len(msgs) - 1) for k, (role, text) in enumerate(msgs)]


def _fresh(rates: Rates, bound: OfflineBound, model: str, parts, out_tokens: int):
    return Cache(rates, bound.counters[model]).quote(parts, out_tokens)


__all__ = ["OfflineBound", "BEAM"]
