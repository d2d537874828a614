"""Money, as providers bill it: the caching rules of harness/replay/billing.py checked call by call against
figures worked out by hand; the notes of the state view (prompt/notes.py, prompt/history.py) on a
real ledger; and what mini-swe-agent's real loop sends through LitellmModel to a loopback provider
(OpenAI's Chat Completions, Anthropic's Messages API with mini-swe-agent's cache_control) is, call
for call, what the replay's meter prices for the same run."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import make_repo
from fake_chat import FakeChat, breakpoints, message_texts

from ledger_harness.replay.billing import ANTHROPIC, GEMINI, OPENAI, Bill, Cache, Part, Rates
from ledger_runtime.config import ConfigError, LedgerConfig
from ledger_runtime.prompt.history import History, Message
from ledger_runtime.prompt.notes import ViewNotes
from ledger_runtime.runtime import LedgerRuntime


class OneTokenPerChar:
    """A tokenizer whose counts can be worked out by hand: a character is a token, a message adds 3."""

    def tokens(self, role: str, text: str) -> int:
        return len(text) + 3

    def text_tokens(self, text: str) -> int:
        return len(text)

    def overhead(self) -> int:
        return 0


def rates(provider: str, model: str = "m") -> Rates:
    write = 1.25 if provider == ANTHROPIC else 1.0
    return Rates(model, provider, input=1.0, cache_read=0.1, cache_write=write, output=2.0)


def prompt(*texts: str) -> list[Part]:
    return [Part("user", t, k == len(texts) - 1) for k, t in enumerate(texts)]


A, B, C = "a" * 1500, "b" * 700, "c" * 300


def test_openai_reads_the_shared_prefix_in_steps_of_128_from_1024_tokens():
    cache = Cache(rates(OPENAI), OneTokenPerChar())
    first = cache.bill(prompt(A))
    assert (first.uncached, first.cache_read, first.cache_write) == (1503, 0, 0)
    second = cache.bill(prompt(A, B), output_tokens=10)
    assert second.cache_read == 1408 and second.uncached == 1503 + 703 - 1408  # 1,503 shared -> 11 steps of 128
    assert second.cost(rates(OPENAI)) == pytest.approx(second.uncached + 0.1 * 1408 + 2.0 * 10)
    # a change inside the second message: the characters before it are still shared
    third = cache.bill(prompt(A, "b" * 600 + "X" + "b" * 99))
    assert third.cache_read == (1503 + 3 + 600 - 1) // 128 * 128
    # below 1,024 tokens nothing is cached
    small = Cache(rates(OPENAI), OneTokenPerChar())
    small.bill(prompt(C))
    assert small.bill(prompt(C, C)).cache_read == 0


def test_anthropic_reads_only_an_entry_it_wrote_at_a_breakpoint_and_bills_the_writes():
    cache = Cache(rates(ANTHROPIC, "claude-sonnet-4-5"), OneTokenPerChar())
    first = cache.bill(prompt(A))
    assert (first.uncached, first.cache_read, first.cache_write) == (0, 0, 1503)
    second = cache.bill(prompt(A, B))
    assert (second.cache_read, second.cache_write) == (1503, 703)
    # the last message rewritten (a view re-rendered into it): no entry is a prefix any more, all is written again
    third = cache.bill(prompt(A, B + "x"))
    assert (third.cache_read, third.cache_write) == (1503, 704), "the entry of the first call still is one"
    fourth = cache.bill(prompt(A + "y", B))
    assert (fourth.cache_read, fourth.cache_write) == (0, 1504 + 703)
    assert fourth.cost(rates(ANTHROPIC)) == pytest.approx(1.25 * (1504 + 703))
    # an entry further back than 20 blocks from the breakpoint is not found
    far = Cache(rates(ANTHROPIC), OneTokenPerChar())
    far.bill(prompt(A))
    assert far.bill(prompt(A, *["z"] * 20)).cache_read == 1503
    assert far.bill(prompt(A, *["w"] * 21)).cache_read == 0
    # below the model's minimum nothing is cached; Haiku 4.5's is 4,096
    haiku = Cache(rates(ANTHROPIC, "claude-haiku-4-5"), OneTokenPerChar())
    assert haiku.bill(prompt(A)).cache_write == 0
    assert haiku.bill(prompt(A, B)).uncached == 1503 + 703
    # no breakpoint (no set_cache_control): nothing cached at all
    plain = Cache(rates(ANTHROPIC), OneTokenPerChar())
    plain.bill([Part("user", A)])
    assert plain.bill([Part("user", A), Part("user", B)]).cache_read == 0


def test_gemini_reads_token_by_token_from_its_minimum():
    cache = Cache(rates(GEMINI, "gemini-2.5-pro"), OneTokenPerChar())
    cache.bill(prompt(A, B))
    assert cache.bill(prompt(A, B, C)).cache_read == 1503 + 703, "2,206 tokens: above 2,048, no steps"
    newer = Cache(rates(GEMINI, "gemini-3-pro-preview"), OneTokenPerChar())
    newer.bill(prompt(A, B))
    assert newer.bill(prompt(A, B, C)).cache_read == 0, "below 4,096"


def test_a_bill_adds_up():
    total = Bill()
    total.add(Bill(10, 20, 30, 4, 1))
    total.add(Bill(1, 2, 3, 0, 1))
    r = rates(ANTHROPIC)
    assert (total.prompt, total.calls) == (66, 2)
    assert total.input_cost(r) == pytest.approx(11 + 0.1 * 22 + 1.25 * 33)


@pytest.mark.slow
def test_litellm_pricing_names_each_providers_rule():
    from ledger_adapters.litellm_pricing import LitellmPricing

    got = {m: LitellmPricing(m) for m in ("gpt-5-mini", "claude-sonnet-4-5", "gemini/gemini-2.5-pro")}
    assert [p.provider for p in got.values()] == [OPENAI, ANTHROPIC, GEMINI]
    claude = got["claude-sonnet-4-5"]
    assert claude.cache_write_cost == pytest.approx(1.25 * claude.input_cost)
    assert claude.cached_cost == pytest.approx(0.1 * claude.input_cost)
    assert got["gpt-5-mini"].cache_write_cost == got["gpt-5-mini"].input_cost, "OpenAI bills no cache writes"
    assert got["gpt-5-mini"].text_tokens("hello world") == 2


# -- the notes of the state view -----------------------------------------------------------------


def test_view_share_is_checked():
    assert LedgerConfig().with_(view_share=float("inf")).context.view_share == float("inf")
    for bad in (-0.1, float("nan")):
        with pytest.raises(ConfigError, match="view_share"):
            LedgerConfig().with_(view_share=bad)


def _run(rt: LedgerRuntime, command: str, step: int):
    from ledger_runtime.executor import LocalExecutor

    return rt.run(command, LocalExecutor(timeout=30), step=step)


def _history_after(rt: LedgerRuntime, results, history: History) -> tuple[list[Message], list]:
    """The agent's history as text-based mini-swe-agent has it after these results, and what is sent."""
    msgs = [Message("system prompt"), Message("the task")]
    for r in results:
        msgs += [Message("a command"), Message(r.output, r.attempt_id, rt.spared(r.attempt_id))]
    return msgs, history.send(msgs, rt)


def test_notes_tell_only_what_no_output_showed_and_never_change_what_was_sent(tmp_path):
    repo = make_repo(tmp_path / "r", {"a.py": "".join(f"x{i} = {i}\n" for i in range(60))})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    history = History(view_share=None)  # every note paid: what is news, and when
    results, sent_before = [], []
    script = [
        "cat a.py",  # 1
        "cat a.py",  # 2: a reference: how answers read is news
        "sed -i 's/x1 = 1/x1 = 100/' a.py",  # 3: the model's own edit: its result told it
        "cat a.py",  # 4: a diff
        "python3 -c \"import re;p='a.py';open(p,'w').write(open(p).read().replace('x2 = 2','x2 = 200'))\"",  # 5
    ]
    notes = []
    for i, c in enumerate(script, 1):
        results.append(_run(rt, c, i))
        msgs, sent = _history_after(rt, results, history)
        for k, (before, now) in enumerate(zip(sent_before, sent)):
            assert now == before, f"message {k} was sent otherwise before: nothing already sent changes"
        sent_before = sent
        notes.append(sent[-1].note)
    assert notes[0].startswith("(Ledger runtime:") and "Policies: BLOCK destructive" in notes[0], "said once, first"
    assert "Answers: output you were already shown" in notes[1] and "Policies" not in notes[1]
    assert notes[2] == notes[3] == "", notes[2:4]
    assert "a.py: STALE, changed at step 5 by `python3 -c" in notes[4] and "Changed since start" in notes[4]
    assert not notes[4].startswith("(Ledger runtime:"), "said once"
    assert "Recent commands" not in "".join(notes)
    # a change between commands, by another program: news at the next call
    (repo / "a.py").write_text("gone = True\n")
    results.append(_run(rt, "echo hi", 6))
    _, sent = _history_after(rt, results, history)
    assert "a.py: +1 -60 (last at step 6, outside any command)" in sent[-1].note, "whose change it was"
    rt.close()


def test_notes_are_paid_from_what_the_answers_spared(tmp_path):
    big = "".join(f"line {i} of a long file\n" for i in range(200))
    repo = make_repo(tmp_path / "r", {"big.txt": big, "small.txt": "tiny\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    history = History(view_share=0.5)
    results = [_run(rt, "cat small.txt", 1), _run(rt, "cat small.txt", 2)]
    _, sent = _history_after(rt, results, history)
    assert not any(s.note for s in sent) and rt.spared_total() <= 0, "nothing spared: no note, however much is news"
    results += [_run(rt, "cat big.txt", 3), _run(rt, "cat big.txt", 4)]
    msgs, sent = _history_after(rt, results, history)
    spared = sum(m.spared for m in msgs)
    assert spared > 4000 and sent[-1].note, "the reference spared the file: the note is paid"
    assert history.notes.chars <= 0.5 * spared
    rt.close()


def test_a_rewrite_takes_back_the_notes_after_it_and_says_them_once_at_the_end():
    notes = ViewNotes()
    from ledger_runtime.inform import SEEN, StateView, ViewEntry

    def view(step, *lines):
        entries = tuple(ViewEntry(SEEN, ("seen", f"f{i}"), t, step) for i, t in enumerate(lines))
        return StateView("", 0, 0, step, entries)

    first = notes.next(view(1, "  f0: STALE, changed at step 1"), 3)
    second = notes.next(view(2, "  f0: STALE, changed at step 1", "  f1: STALE, changed at step 2"), 5)
    assert "f0" in first and "f1" in second and "f0" not in second
    notes.rewind(4)  # the history is rewritten from message 4 on: the second note goes with it
    again = notes.next(view(3, "  f0: STALE, changed at step 1", "  f1: STALE, changed at step 2"), 7)
    assert "f1" in again and "f0" not in again and [n.at for n in notes.notes] == [3, 7]
    notes.reset(full=True)
    assert notes.next(view(4, "  f0: STALE, changed at step 1"), 9).startswith("(Ledger runtime: current")


def _read_twice(tmp_path: Path):
    """A file read twice through a real ledger (the second read a reference: a note to send)."""
    repo = make_repo(tmp_path / "r", {"a.txt": "".join(f"{i}\n" for i in range(400))})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    history = History(view_share=None)
    msgs, sent = _history_after(rt, [_run(rt, "cat a.txt", 1), _run(rt, "cat a.txt", 2)], history)
    return repo, rt, history, msgs, sent


def test_a_history_the_agent_rewrote_itself_starts_the_notes_again(tmp_path):
    _, rt, history, msgs, sent = _read_twice(tmp_path)
    assert sent[-1].note and history.anchors
    changed = [Message("a summary of the run so far")] + msgs[-2:]  # the agent compacted its history
    again = history.send(changed, rt)
    assert history.notes.notes and all(n.at < len(changed) for n in history.notes.notes)
    assert again[-1].note.startswith("(Ledger runtime:"), "told again, from the start"
    rt.close()


# -- what the live adapter sends is what the meter prices -------------------------------------------

SCRIPT = [
    "cat calc.py",
    "cat calc.py",
    "python3 -m unittest -q test_calc 2>&1 | tail -1",
    "sed -i 's/a - b/a + b/' calc.py",
    "python3 -c \"p='notes.txt';open(p,'w').write('written by a script\\n')\"",
    "cat calc.py",
    "python3 -m unittest -q test_calc 2>&1 | tail -1",
    "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff",
]
CALC = {
    "calc.py": "def add(a, b):\n    return a - b\n\n"
    + "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(30)),
    "test_calc.py": "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
}


def _templates() -> dict[str, str]:
    import yaml
    from minisweagent.config import builtin_config_dir

    agent = yaml.safe_load((builtin_config_dir / "mini_textbased.yaml").read_text())["agent"]
    return {k: agent[k] for k in ("system_template", "instance_template")}


TEMPLATES = _templates()


def _clone(src: Path, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    subprocess.run(["git", "clone", "-q", str(src), str(dest)], check=True)


@pytest.mark.parametrize(
    "model_name,price_model,cache_control",
    [("openai/gpt-5-mini", "gpt-5-mini", None), ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5", "default_end")],
)
@pytest.mark.slow
def test_what_mini_sends_through_litellm_is_what_the_meter_prices(tmp_path, model_name, price_model, cache_control):
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models import get_model

    from ledger_adapters.mini.environment import LedgerEnvironment
    from ledger_adapters.mini.trajectories import FORMAT
    from ledger_harness.replay.engine import ReplaySettings, replay_one

    src = make_repo(tmp_path / "src", CALC)
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    work = tmp_path / "work"  # the same path for both runs and the replay: commands and outputs name it
    replies = [f"Step {i}.\n```mswea_bash_command\n{c}\n```" for i, c in enumerate(SCRIPT)]

    def model(fake: FakeChat, ledger: bool):
        config = {
            "model_class": "ledger_adapters.mini.environment.LedgerModel" if ledger else "litellm_textbased",
            "model_kwargs": {"api_base": fake.base_url + ("" if "anthropic" in model_name else "/v1"), "api_key": "x"},
            "cost_tracking": "ignore_errors",
        }
        if ledger:
            config["inner_class"] = "litellm_textbased"
        m = get_model(model_name, config)
        inner = m.inner if ledger else m
        assert inner.config.set_cache_control == cache_control, "mini-swe-agent's own choice for the model"
        return m

    def run(ledger: bool) -> FakeChat:
        _clone(src, work)
        fake = FakeChat(replies)
        env = (
            LedgerEnvironment(inner_class="local", cwd=str(work), ledger={"run_dir": str(tmp_path / "run")})
            if ledger
            else LocalEnvironment(cwd=str(work))
        )
        agent = DefaultAgent(
            model(fake, ledger),
            env,
            **TEMPLATES,  # mini-swe-agent's own prompts: a run's prompt is above the providers' cache minimum
            cost_limit=0,
            step_limit=20,
            output_path=tmp_path / ("live.traj.json" if ledger else "recorded.traj.json"),
        )
        assert agent.run("Make test_add pass")["exit_status"] == "Submitted"
        fake.close()
        if ledger:
            env.cleanup()
        return fake

    recorded_run, live = run(False), run(True)
    sent = [message_texts(b) for b in live.requests]
    assert len(sent) == len(SCRIPT) and all(p.endswith("/messages") == ("anthropic" in model_name) for p in live.paths)
    assert any("<ledger_update" in t for _, t in sent[-1]), "a note reached the model"
    assert any("[ledger: same as step 1's output" in t for _, t in sent[-1]), "and an answer"

    (traj,) = list(FORMAT.load([tmp_path / "recorded.traj.json"], []))
    settings = ReplaySettings(
        repos=[src / ".git"],
        out=tmp_path / "replay",
        workdir=work,
        base_commits={traj.instance_id: commit},
        contexts=("full",),
        price_models=(price_model,),
        keep_prompts=("ledger", "none", "recorded"),
        force=True,
        fresh_python=False,
    )
    result = replay_one(traj, settings)
    metered = result["cost"]["prompts"]
    recorded = [message_texts(b) for b in recorded_run.requests]
    assert [[(r, t) for r, t, _ in call] for call in metered["recorded"]] == recorded, "the recorded run as sent"
    assert [[(r, t) for r, t, _ in call] for call in metered["none"]] == recorded, (
        "without the ledger, the replay's outputs are the recorded ones (the commands print the same)"
    )
    assert [[(r, t) for r, t, _ in call] for call in metered["ledger"]] == sent, (
        "the meter prices exactly what the live adapter sent"
    )
    if cache_control:
        for body, call in zip(live.requests, metered["ledger"]):
            assert breakpoints(body) == [k for k, (_, _, bp) in enumerate(call) if bp] == [len(call) - 1]
    arms = result["cost"]["arms"]
    assert arms["ledger"][price_model]["input_cost_usd"] < arms["none"][price_model]["input_cost_usd"]
    json.dumps(result)  # the result is plain JSON


def test_two_calls_on_the_same_history_send_one_note_and_change_nothing(tmp_path):
    """An adapter that asks twice before a new message: the second call sends what the first did."""
    repo, rt, history, msgs, first = _read_twice(tmp_path)
    (repo / "a.txt").write_text("changed by someone else\n")
    rt.prescan()
    again = history.send(msgs, rt)
    assert again == first and len(history.notes.notes) == 1
    rt.close()


def test_gemini_models_before_2_5_cache_nothing():
    from ledger_harness.replay.billing import min_cached

    assert min_cached(GEMINI, "gemini/gemini-2.0-flash") > 10**9 and min_cached(GEMINI, "gemini-1.5-pro") > 10**9
    assert min_cached(GEMINI, "gemini-2.5-flash") == 2048 and min_cached(GEMINI, "gemini-3-pro-preview") == 4096


def test_the_2026_rules_worked_by_hand():
    """Each provider's rule of 2026, on prompts of one token a character (OneTokenPerChar: a message's
    framing is 3 tokens), priced by hand."""
    from ledger_adapters.litellm_pricing import cache_prices, openai_bills_writes

    # OpenAI from GPT-5.6: the prefix it caches beyond what it read is written at 1.25x the input price
    assert openai_bills_writes("gpt-5.6") and openai_bills_writes("openai/gpt-6-mini")
    assert (
        not openai_bills_writes("gpt-5-mini") and not openai_bills_writes("gpt-5.4") and not openai_bills_writes("o3")
    )
    r56 = Rates("gpt-5.6", OPENAI, input=1.0, cache_read=0.1, cache_write=1.25, output=2.0)
    cache = Cache(r56, OneTokenPerChar())
    first = cache.bill(prompt(A))  # 1,503 tokens: 11 steps of 128 (1,408) written, 95 uncached
    assert (first.uncached, first.cache_read, first.cache_write) == (95, 0, 1408)
    assert first.cost(r56) == pytest.approx(95 + 1.25 * 1408)
    second = cache.bill(prompt(A, B))  # 2,206: 1,408 read, 2,176 cached (17 steps) so 768 written, 30 uncached
    assert (second.cache_read, second.cache_write, second.uncached) == (1408, 768, 30)
    assert second.cost(r56) == pytest.approx(0.1 * 1408 + 1.25 * 768 + 30)
    # earlier gpt-5: nothing written, the rest uncached
    r5 = Rates("gpt-5-mini", OPENAI, input=1.0, cache_read=0.1, cache_write=1.0, output=2.0)
    again = Cache(r5, OneTokenPerChar())
    again.bill(prompt(A))
    assert (lambda b: (b.cache_read, b.cache_write, b.uncached))(again.bill(prompt(A, B))) == (1408, 0, 798)
    # Anthropic's 1-hour cache: writes at 2x (litellm's own price where it has it)
    price = {"input_cost_per_token": 3e-06, "cache_read_input_token_cost": 3e-07}
    assert cache_prices("claude-x", "anthropic", price, hour=True) == (3e-07, pytest.approx(6e-06))
    assert cache_prices("claude-x", "anthropic", price) == (3e-07, pytest.approx(3.75e-06))
    assert (
        cache_prices("claude-x", "anthropic", {**price, "cache_creation_input_token_cost_above_1hr": 7e-06}, True)[1]
        == 7e-06
    )
    hour = Rates("claude-x@1h", ANTHROPIC, input=1.0, cache_read=0.1, cache_write=2.0, output=2.0)
    assert Cache(hour, OneTokenPerChar()).bill(prompt(A)).cost(hour) == pytest.approx(2.0 * 1503)
    # GPT-5.6 without litellm's write price: 1.25x by the rule; Gemini 3 writes free, from 4,096 tokens
    assert cache_prices("gpt-5.6", "openai", {"input_cost_per_token": 4e-06})[1] == pytest.approx(5e-06)
    assert cache_prices("gemini-3-pro", "gemini", {"input_cost_per_token": 2e-06})[1] == 2e-06
    g3 = Cache(Rates("gemini-3-pro", GEMINI, 1.0, 0.1, 1.0, 2.0), OneTokenPerChar())
    g3.bill(prompt(A * 3))
    assert g3.bill(prompt(A * 3, B)).cache_read == 4503, "4,503 tokens shared: above 4,096, no steps"


def test_litellm_pricing_takes_each_models_own_rule():
    from ledger_adapters.litellm_pricing import LitellmPricing

    p56 = LitellmPricing("gpt-5.6")
    assert p56.provider == "openai" and p56.cache_write_cost == pytest.approx(1.25 * p56.input_cost)
    mini = LitellmPricing("gpt-5-mini")
    assert mini.cache_write_cost == mini.input_cost
    hour = LitellmPricing("claude-sonnet-4-5@1h")
    assert hour.cache_write_cost == pytest.approx(2 * hour.input_cost) and hour.tokens("user", "hi") > 0
    with pytest.raises(LookupError):
        LitellmPricing("gpt-5-mini@1h")


def test_report_prices_a_runs_tokens_by_its_models_rule():
    from ledger_harness.swebench.report import rule_cost

    # gpt-5-mini: 4,000 uncached at $0.25/M, 6,000 read at $0.025/M, 100 out at $2/M
    assert rule_cost("openai/gpt-5-mini", 10_000, 100, 6_000, 0) == pytest.approx(
        4e3 * 2.5e-7 + 6e3 * 2.5e-8 + 100 * 2e-6
    )
    # gpt-5.6 bills what it wrote: 2,000 written at $5/M, 2,000 uncached at $4/M, 6,000 read at $0.4/M
    assert rule_cost("gpt-5.6", 10_000, 0, 6_000, 2_000) == pytest.approx(2e3 * 4e-6 + 6e3 * 4e-7 + 2e3 * 5e-6)
    assert rule_cost("no-such-model", 10, 1, 0, 0) is None and rule_cost("gpt-5-mini", None, None, None, None) is None
