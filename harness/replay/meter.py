"""The open loop of what the model is sent, in money: for every model call of a recorded run, the
prompt each *arm* would have sent, billed as each provider bills it (replay/billing.py: uncached
input, cache reads, cache writes, output) at each price model's prices.

The arms:

- ``recorded``: the recorded messages, as the agent sent them in the recorded run.
- ``none``: the same without the ledger in the replay: each output as the command printed it now
  (cut as the agent cuts). Every other arm is measured against this one: the replay runs the
  commands again, not always in the recorded run's environment, and an output that differs from the
  recorded one is the replay's, not the ledger's.
- ``answers``: each output replaced by the answer the ledger gave in the replay (its visible part,
  cut as the agent cuts), no state view.
- ``ledger``: what the live adapters send by default: the answers and the notes of the state view,
  through ``prompt.History`` (the class ``LedgerModel`` sends with), under the default settings.
- ``view-every-call``: the answers and the whole state view re-rendered after the last message at
  every call (what the adapters sent before the notes: a change to a message already sent).
- every context policy asked for: ``window:M`` (the masking baseline over the outputs as they are, its
  placeholders scheduled against the cache), ``validity`` and ``validity+window:M`` (the ledger's
  answers and notes, outputs that hold nothing still true and shown nowhere later as stubs), each
  through ``prompt.History`` with a ``RewriteSchedule`` priced by the arm's own price model.
- ``bound`` (replay/bound.py): with the whole run known, the cheapest schedule of history rewrites
  that drops no still-true line shown nowhere later and sends no false stub.

Tokens are counted by a ``Pricing`` (an entry point of the group ``ledger_runtime.pricing``; the
package's own counts with litellm's ``token_counter`` and prices with its bundled table). Per arm
and stub policy: ``valid_unique_lines_dropped`` (distinct output lines left out at some call while
still true and shown nowhere later in what was sent: context.valid_unique_dropped) and stubs whose
claims do not hold (context.stub_holds), checked on what was sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Collection, Protocol, Sequence

from ledger_harness.replay.billing import Bill, Cache, Part, Rates
from ledger_runtime.held.context import (
    ContextPolicy,
    HistoryOutput,
    Line,
    RewriteSchedule,
    stub_holds,
    valid_unique_dropped,
)
from ledger_runtime.inform import VIEW_NOTE, StateView
from ledger_runtime.ledger.observe import Truncation
from ledger_runtime.prompt.history import History, Message, Sent, placed
from ledger_runtime.prompt.notes import ViewNotes
from ledger_runtime.trajectories import Trajectory

PRICING_GROUP = "ledger_runtime.pricing"
BASE_ARMS = ("recorded", "none", "answers", "ledger", "view-every-call")


class Pricing(Protocol):
    """Counts a message's tokens and prices tokens (per token, in USD) for one model."""

    model: str
    provider: str  # openai | anthropic | gemini (billing.py's rules) | none
    input_cost: float
    cached_cost: float
    cache_write_cost: float
    output_cost: float

    def tokens(self, role: str, text: str) -> int: ...

    def text_tokens(self, text: str) -> int: ...

    def overhead(self) -> int: ...  # tokens a prompt costs beyond its messages


def load_pricing(model: str) -> Pricing:
    """The pricing of the first installed ``ledger_runtime.pricing`` entry point, for ``model``."""
    found = list(entry_points(group=PRICING_GROUP))
    if not found:
        raise LookupError(f"no token counter installed (entry point group {PRICING_GROUP}): reinstall ledger-runtime")
    return found[0].load()(model)


def rates_of(p: Pricing) -> Rates:
    return Rates(p.model, p.provider, p.input_cost, p.cached_cost, p.cache_write_cost, p.output_cost)


def sticky_for(rates: Rates) -> RewriteSchedule:
    """The scheduler of history rewrites for a model's prices."""
    return RewriteSchedule(cache_ratio=rates.read_ratio, write_ratio=rates.write_ratio)


class _Memo:
    """A pricing's counter, each text counted once."""

    def __init__(self, p: Pricing):
        self.p = p
        self._m: dict[tuple[str, str], int] = {}
        self._t: dict[str, int] = {}
        self._overhead = p.overhead()

    def tokens(self, role: str, text: str) -> int:
        n = self._m.get((role, text))
        if n is None:
            n = self._m[(role, text)] = self.p.tokens(role, text)
        return n

    def text_tokens(self, text: str) -> int:
        n = self._t.get(text)
        if n is None:
            n = self._t[text] = self.p.text_tokens(text)
        return n

    def overhead(self) -> int:
        return self._overhead


def with_view_every_call(messages: list[tuple[str, str]], view: str) -> list[tuple[str, str]]:
    """The earlier adapters' prompt: the whole view after the last message, re-rendered every call."""
    if not view or not messages:
        return messages
    out = list(messages)
    role, text = out[-1]
    if role == "user":
        out[-1] = (role, text + "\n\n" + VIEW_NOTE + view)
    else:
        out.append(("user", VIEW_NOTE + view))
    return out


class _Raw:
    """The runtime as the masking baseline sees it: the lines of each output as it is."""

    def __init__(self, runtime):
        self.runtime = runtime

    def history(
        self, outputs: Sequence[tuple[int | None, int]], *, expanded: Collection[int] = ()
    ) -> list[HistoryOutput]:
        return self.runtime.history(outputs, raw=True)

    def still_true(self, line: Line) -> bool:
        return self.runtime.still_true(line)

    def view_for_notes(self) -> StateView | None:
        return None

    def resent_as(self, attempt_id: int) -> tuple[str, str] | None:
        return None  # the output as it is refers to nothing

    def standing(self) -> tuple[int, ...]:
        return ()


class _Views:
    """The runtime as the replay holds it, seen as the live run it measures (the replay is in shadow
    mode, whose own switch says no view, no policy in force): views on, verdicts in force."""

    def __init__(self, runtime):
        self.runtime = runtime

    def history(
        self, outputs: Sequence[tuple[int | None, int]], *, expanded: Collection[int] = ()
    ) -> list[HistoryOutput]:
        return self.runtime.history(outputs, expanded=expanded)

    def still_true(self, line: Line) -> bool:
        return self.runtime.still_true(line)

    def view_for_notes(self) -> StateView | None:
        return self.runtime.view(as_applied=True)

    def resent_as(self, attempt_id: int) -> tuple[str, str] | None:
        return self.runtime.resent_as(attempt_id)

    def standing(self):
        return self.runtime.standing()


@dataclass
class Tally:
    """One arm's figures under one price model."""

    bill: Bill = field(default_factory=Bill)
    stubs: int = 0  # outputs sent as a stub or as their kept lines, summed over calls
    stubs_false: int = 0
    dropped: set = field(default_factory=set)  # (step label, line index) pairs
    note_chars: int = 0  # characters of state-view notes sent (each counted once)
    rewrites: int = 0
    dangling: int = 0  # outputs sent whole whose references name an output not sent whole, summed over calls
    lost: set = field(default_factory=set)  # (step label, line index) the independent check finds lost

    def as_dict(self, rates: Rates) -> dict:
        return {
            **self.bill.as_dict(rates),
            "stubs": self.stubs,
            "stubs_false": self.stubs_false,
            "valid_unique_lines_dropped": len(self.dropped),
            "note_chars": self.note_chars,
            "rewrites": self.rewrites,
            "dangling_references": self.dangling,
            "lines_lost_independent": len(self.lost),
        }


class CostMeter:
    """Measures the calls of one replayed trajectory for each arm and price model (module docstring).
    Call ``attempt_done`` after each replayed command and ``measure`` before each; ``result`` at the end."""

    def __init__(
        self,
        traj: Trajectory,
        policies: Sequence[ContextPolicy],
        pricings: Sequence[Pricing],
        trunc: Truncation,
        *,
        view_share: float | None = 0.5,
        note_chars: int = 600,
        bound: bool = True,
        keep: Sequence[str] = (),
        truth: tuple | None = None,
    ):
        self.traj, self.trunc = traj, trunc
        self.truth = truth  # (replay/truth.Files, its Tally): each stub sent is checked against the files too
        self.rates = {p.model: rates_of(p) for p in pricings}
        self.counters = {p.model: _Memo(p) for p in pricings}
        self.policies = [p for p in policies if not p.full]
        self.arms = list(BASE_ARMS) + [p.name for p in self.policies]
        self.tally = {(a, m): Tally() for a in self.arms for m in self.rates}
        self.caches = {(a, m): Cache(self.rates[m], self.counters[m]) for a in self.arms for m in self.rates}

        def notes() -> ViewNotes:
            return ViewNotes(limit_chars=note_chars)

        self.ledger = History(notes=notes(), view_share=view_share)
        self.histories = {
            (p.name, m): History(policy=p, notes=notes(), sticky=sticky_for(r), view_share=view_share)
            for p in self.policies
            for m, r in self.rates.items()
        }
        self.keep = tuple(keep)  # arms whose prompts ``result`` returns, call by call (tests compare them)
        self.kept: dict[str, list[list[tuple[str, str, bool]]]] = {a: [] for a in self.keep}
        # reply index -> (attempt, answer, chars spared, the output as printed now)
        self.answer_of: dict[int, tuple[int, str, int, str]] = {}
        self.done = 0
        self.calls = [k for k, (role, _) in enumerate(traj.messages) if role == "assistant"]
        self.bound = None
        if bound:
            from ledger_harness.replay.bound import OfflineBound

            self.bound = OfflineBound(self.rates, self.counters, self.policies)

    def attempt_done(self, reply: int | None, attempt: int, answer: str, output: str) -> None:
        """A replayed command: the answer the ledger gave, and the output as the command printed it now."""
        if reply is not None:
            spared = self.trunc.seen_chars(len(output)) - self.trunc.seen_chars(len(answer))
            self.answer_of[reply] = (attempt, answer, spared, output)

    def measure(self, upto: int | None, runtime: Any) -> None:
        """Every call up to the assistant message ``upto`` (None: all the rest), with the ledger as it is."""
        while self.done < len(self.calls) and (upto is None or self.calls[self.done] <= upto):
            self._call(self.calls[self.done], runtime)
            self.done += 1

    def result(self) -> dict:
        out: dict = {"arms": {}, "models": list(self.rates)}
        for (arm, model), t in self.tally.items():
            h = self.ledger if arm == "ledger" else self.histories.get((arm, model))
            if h is not None:
                t.note_chars, t.rewrites = h.notes_sent, h.rewrites
            out["arms"].setdefault(arm, {})[model] = t.as_dict(self.rates[model])
        if self.bound is not None:
            for model, b in self.bound.result().items():
                out["arms"].setdefault("bound", {})[model] = b
        if self.keep:
            out["prompts"] = self.kept
        return out

    # -- one call ----------------------------------------------------------------------------------

    def _call(self, c: int, runtime) -> None:
        recorded = self.traj.messages[:c]
        roles = [r for r, _ in recorded]
        replies = [k for k, (role, _) in enumerate(recorded) if k > 1 and role in ("user", "tool")]
        answered, fresh = list(recorded), list(recorded)
        messages: list[Message] = [Message(t) for _, t in recorded]
        raw_messages: list[Message] = list(messages)
        for k in replies:
            got = self.answer_of.get(k)
            if got is None:
                continue
            attempt, answer, spared, output = got
            answered[k] = (roles[k], self.traj.recorded.with_answer(recorded[k][1], answer, self.trunc))
            fresh[k] = (roles[k], self.traj.recorded.with_answer(recorded[k][1], output, self.trunc))
            messages[k] = Message(answered[k][1], attempt, spared)
            raw_messages[k] = Message(fresh[k][1], attempt)
        views = _Views(runtime)
        prompts: dict[str, list[tuple[str, str]]] = {"recorded": recorded, "none": fresh, "answers": answered}
        sent = self.ledger.send(messages, views)
        prompts["ledger"] = placed(roles, sent)
        every = runtime.view(as_applied=True).text if runtime.state.attempts else ""
        prompts["view-every-call"] = with_view_every_call(answered, every)
        output = self.traj.messages[c][1]
        for model in self.rates:
            out_tokens = self.counters[model].tokens("assistant", output)
            for arm, msgs in prompts.items():
                self._bill(arm, model, msgs, out_tokens)
            for p in self.policies:
                h = self.histories[(p.name, model)]
                msgs = messages if p.validity else raw_messages
                sent_p = h.send(msgs, views) if p.validity else h.send(msgs, _Raw(runtime), inform=False)
                self._checks(p.name, model, h, runtime)
                self._lost(p.name, model, h, msgs, sent_p)
                self._bill(p.name, model, placed(roles, sent_p), out_tokens)
        if self.bound is not None:
            self.bound.call(roles, messages, sent, views, output)

    def _bill(self, arm: str, model: str, msgs: list[tuple[str, str]], out_tokens: int) -> None:
        """One call of an arm, billed; the breakpoint where mini-swe-agent's set_cache_control puts it."""
        parts = [Part(r, t, k == len(msgs) - 1) for k, (r, t) in enumerate(msgs)]
        if arm in self.kept and model == next(iter(self.rates)):
            self.kept[arm].append([(p.role, p.text, p.breakpoint) for p in parts])
        self.tally[(arm, model)].bill.add(self.caches[(arm, model)].bill(parts, out_tokens))

    def _checks(self, arm: str, model: str, h: History, runtime) -> None:
        saids, treat = h.decisions
        tally = self.tally[(arm, model)]
        for n, t in enumerate(treat):
            if t.kind != "keep":
                tally.stubs += 1
                if not stub_holds(saids[n], t, list(zip(saids[n + 1 :], treat[n + 1 :])), runtime.still_true):
                    tally.stubs_false += 1
        for i, line in valid_unique_dropped(saids, treat, runtime.still_true):
            tally.dropped.add((saids[i].label, line))
        # what was sent, read as sent: an output sent whole that refers to one sent as a stub points at nothing
        sent_whole = {s.attempt for s, t in zip(saids, treat) if t.kind == "keep" and s.attempt is not None}
        for s, t in zip(saids, treat):
            if t.kind == "keep" and any(r not in sent_whole for r in s.refs):
                tally.dangling += 1

    def _lost(self, arm: str, model: str, h: History, msgs: list[Message], sent: list[Sent]) -> None:
        saids, treat = h.decisions
        self.tally[(arm, model)].lost |= lost_lines(saids, treat, msgs, sent)
        if self.truth is not None and arm.startswith("validity") and model == next(iter(self.rates)):
            check_stubs(saids, treat, msgs, sent, self.truth[1])


def check_stubs(
    saids: Sequence[HistoryOutput], treat: Sequence, msgs: Sequence[Message], sent: Sequence[Sent], tally
) -> None:
    """Each stub (or part) sent, its reason checked against the files and what is sent after it
    (replay/truth.stub_true), into ``tally``."""
    from ledger_harness.replay.truth import stub_true

    outs = [k for k, m in enumerate(msgs) if m.attempt is not None]
    if not saids or len(outs) != len(saids):
        return
    files: dict[str, list[str] | None] = {}

    def lines_now(path: str) -> list[str] | None:
        if path not in files:
            files[path] = _lines_now(path)
        return files[path]

    texts = [x.text for x in sent]
    for n, (s, t) in enumerate(zip(saids, treat)):
        if t.kind == "keep" or t.stub is None or t.stub.window:
            continue
        later = "\n".join(texts[outs[n] + 1 :])
        runs = {saids[j].key for j in range(n + 1, len(saids)) if treat[j].kind == "keep" and saids[j].key}
        tally.add(stub_true(s, t, later, runs, lines_now), f"{s.label}: {texts[outs[n]].splitlines()[0][:200]}")


def lost_lines(saids: Sequence[HistoryOutput], treat: Sequence, msgs: Sequence[Message], sent: Sequence[Sent]) -> set:  # noqa: C901
    """The check of what was sent that shares nothing with the decision but where a line came from:
    a line of an output sent as a stub or in part is lost when its text is in no message sent after
    it, the file itself (read here, from the disk, at the number the output showed it at) does not say
    otherwise now, and no later message is a run of the same command sent whole. (step label, line
    index) pairs."""
    outs = [k for k, m in enumerate(msgs) if m.attempt is not None]
    if not saids or len(outs) != len(saids):
        return set()  # the history's outputs and the decisions do not line up: nothing to say
    texts = [x.text for x in sent]
    files: dict[str, list[str] | None] = {}
    lost = set()
    for n, (s, t) in enumerate(zip(saids, treat)):
        if t.kind == "keep":
            continue
        after = "\n".join(texts[outs[n] + 1 :])
        later_runs = {saids[j].command for j in range(n + 1, len(saids)) if treat[j].kind == "keep"}
        for i, line in enumerate(s.lines):
            if t.keeps(i) or not line.text.strip():
                continue
            if line.text.rstrip("\n") in after or (line.was and line.was.rstrip("\n") in after):
                continue  # shown later, as text
            if line.path is not None and line.number is not None:
                if line.path not in files:
                    files[line.path] = _lines_now(line.path)
                now = files[line.path]
                if now is None or line.number > len(now) or now[line.number - 1] != line.was.rstrip("\n"):
                    continue  # the file says otherwise now
            elif s.supersedable and s.command in later_runs:
                continue  # the same command, sent whole later: it prints what it prints now
            lost.add((s.label, i))
    return lost


def _lines_now(path: str) -> list[str] | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace").split("\n")
    except OSError:
        return None


def summarize(results: list[dict]) -> dict:  # noqa: C901
    """Per arm and price model: every trajectory's figures summed (``input_vs_none``, ``cost_vs_none``:
    against the arm ``none``), and the run-by-run ratio of input cost to ``none``'s (``runs``: median,
    largest, how many runs above 1.00). ``view_share``: the part of the ``ledger`` arm's input cost
    that the notes of the state view cost (``ledger`` against ``answers``)."""
    total: dict[str, dict[str, dict]] = {}
    ratios: dict[str, dict[str, list[float]]] = {}
    for r in results:
        arms = (r.get("cost") or {}).get("arms") or {}
        for arm, by_model in arms.items():
            for model, row in by_model.items():
                t = total.setdefault(arm, {}).setdefault(model, {})
                for k, v in row.items():
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        t[k] = round(t.get(k, 0) + v, 6)
                none = (arms.get("none") or {}).get(model) or {}
                if none.get("input_cost_usd"):
                    ratios.setdefault(arm, {}).setdefault(model, []).append(
                        row.get("input_cost_usd", 0) / none["input_cost_usd"]
                    )
    for arm, by_model in total.items():
        for model, t in by_model.items():
            none = total.get("none", {}).get(model)
            if none and none.get("input_cost_usd"):
                t["input_vs_none"] = round(t["input_cost_usd"] / none["input_cost_usd"], 4)
                if "cost_usd" in t:
                    t["cost_vs_none"] = round(t["cost_usd"] / none["cost_usd"], 4)
            rs = sorted(ratios.get(arm, {}).get(model, []))
            if rs:
                t["runs"] = {
                    "n": len(rs),
                    "median": round(rs[len(rs) // 2], 4),
                    "max": round(rs[-1], 4),
                    "above_1": sum(x > 1.0 for x in rs),
                }
            bound = total.get("bound", {}).get(model)
            if bound and bound.get("input_cost_usd") and arm != "bound":
                t["vs_bound"] = round(t["input_cost_usd"] / bound["input_cost_usd"] - 1, 4)
    for model, t in total.get("ledger", {}).items():
        answers = total.get("answers", {}).get(model)
        if answers and t.get("input_cost_usd"):
            t["view_share"] = round(1 - answers["input_cost_usd"] / t["input_cost_usd"], 4)
    return total


__all__ = ["CostMeter", "Pricing", "load_pricing", "summarize", "rates_of", "sticky_for"]
