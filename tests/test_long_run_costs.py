"""What a step costs must not grow with the steps before it (issue 42 item 4): each of these kept what
it found, or reads no further than it needs, where it looked at the whole history before. Each gives
exactly what looking at everything gives, and the counting tests fail on the code before.

``Delivered.identical`` keeps how far its scan of each digest's outputs went: over random histories of
repeated outputs (some cut by the agent, some not whole, some only references, some the same as an
earlier one, some out of the window held, added twice or forgotten), it gives exactly what scanning
every output of the digest from the latest down gives; and the hundredth repeat of an output looks at
the outputs added since the last call, not at all of them."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from ledger_runtime.answers.held_output import HeldOutput
from ledger_runtime.held.delivered import Delivered, output_digest
from ledger_runtime.inform import _steps, _with_steps
from ledger_runtime.ledger.state import LedgerState
from ledger_runtime.records import Modification

OUTPUTS = ["a\n", "b\nc\n", "d\n"]
WINDOWS = [None, (2, 0), (1, 1)]


def _scanning_all(d: Delivered, output: str, first_held: int, window) -> HeldOutput | None:
    """identical as it was before its scans were kept: every output of the digest, from the latest down."""
    fallback = None
    for a in reversed(d._by_digest.get(output_digest(output), [])):
        s = d._live(a, first_held)
        if s is None:
            continue
        if not d.whole_available(a, first_held):
            if window is not None and s.agent_cut == window and fallback is None:
                fallback = replace(s, seen_cut=s.agent_cut)
            continue
        if all(s.carried) and not s.refs:
            return s
        root = d._root(s, first_held)
        if root is not s and all(root.carried) and not root.refs:
            return root
        fallback = fallback or root
    return fallback


def _random_output(rng: random.Random, attempt: int, step: int, earlier: list[int]) -> HeldOutput:
    text = rng.choice(OUTPUTS)
    lines = text.splitlines(keepends=True)
    refs = tuple(rng.sample(earlier, min(len(earlier), rng.randint(0, 2)))) if rng.random() < 0.5 else ()
    same_as = rng.choice(earlier) if earlier and rng.random() < 0.3 else None
    return HeldOutput(
        attempt,
        step,
        f"step {step}",
        "cat x",
        0,
        lines,
        [rng.random() < 0.8 for _ in lines],
        refs + ((same_as,) if same_as is not None else ()),
        rng.random() < 0.85,
        output_digest(text),
        same_as=same_as,
        agent_cut=rng.choice(WINDOWS[1:]) if rng.random() < 0.2 else None,
    )


@pytest.mark.parametrize("seed", range(12))
def test_identical_with_its_scans_kept_is_identical_scanning_every_output(seed: int) -> None:
    rng = random.Random(seed)
    d = Delivered()
    attempts: list[int] = []
    step = 0
    for attempt in range(1, 400):
        step += 1 if rng.random() < 0.9 else -1  # now and then out of the order of the steps
        again = attempts and rng.random() < 0.02
        s = _random_output(rng, rng.choice(attempts) if again else attempt, max(step, 1), attempts)
        d.add(s)
        attempts.append(s.attempt)
        if rng.random() < 0.03:
            floor = rng.randint(0, step)
            d.forget(lambda h: h.step >= floor)
            attempts = list(d.items)
        for _ in range(3):
            output, window = rng.choice(OUTPUTS), rng.choice(WINDOWS)
            first_held = rng.choice([0, 0, 0, max(step - 30, 0)])
            assert d.identical(output, first_held, window) == _scanning_all(d, output, first_held, window)


def test_the_hundredth_repeat_looks_at_what_was_added_since_not_at_every_repeat(monkeypatch) -> None:
    """A command whose output repeats, each repeat answered with references (``git diff --stat`` in a long
    run): the latest output seen literally is the first, under every repeat since; each call looks at the
    outputs added since the last, a few, however many repeats there were."""
    d = Delivered()
    digest = output_digest("x\n")
    d.add(HeldOutput(1, 1, "step 1", "git diff --stat", 0, ["x\n"], [True], (), True, digest))
    looked: list[int] = []
    live = d._live
    monkeypatch.setattr(d, "_live", lambda a, first_held: looked.append(a) or live(a, first_held))
    for a in range(2, 2000):
        d.add(HeldOutput(a, a, f"step {a}", "git diff --stat", 0, ["x\n"], [False], (1,), True, digest))
        looked.clear()
        assert d.identical("x\n", 0, None).attempt == 1
        assert len(looked) <= 6, (a, len(looked))  # the new repeat and the first, with the references followed


def test_whether_an_output_before_a_step_is_held_is_known_without_a_look_at_each() -> None:
    """Every ``FORGET_EVERY`` outputs the held room drops what the model no longer holds; with the whole
    history held (no window, no compaction) nothing is, and ``held_before`` says so from the earliest
    step held (which an output added again, earlier, lowers)."""
    d = Delivered()
    for a in range(1, 500):
        d.add(HeldOutput(a, a, f"step {a}", "cat x", 0, [f"{a}\n"], [True], (), True, f"d{a}"))
    assert not d.held_before(1) and d.held_before(2) and not Delivered().held_before(10)
    d.add(HeldOutput(9, 0, "step 0", "cat x", 0, ["x\n"], [True], (), True, "d9"))  # added again, earlier
    assert d.held_before(1)


@pytest.mark.parametrize("seed", range(5))
def test_the_steps_of_a_files_reads_taken_a_read_at_a_time_are_those_sorted_anew(seed: int) -> None:
    rng = random.Random(seed)
    steps: tuple[int, ...] = ()
    every: list[int] = []
    for _ in range(300):
        new = [rng.randint(0, 400) if rng.random() < 0.1 else len(every) + rng.randint(0, 3) for _ in range(3)]
        new = new[: rng.randint(0, 3)]
        steps = _with_steps(steps, new)
        every += new
        assert steps == tuple(sorted(set(every)))
        assert _steps(every) == _steps(list(steps))


def _mod(step: int) -> Modification:
    return Modification("a.py", "h0", "h1", 1, 1, step, step, True)


@pytest.mark.parametrize("in_order", [True, False])
def test_the_modifications_from_a_step_read_one_at_a_time_are_those_after_it(in_order: bool) -> None:
    """``modifications_from`` gives ``modifications_after`` lazily, so the question whether anything changed
    since a long run's first step reads one modification, not a copy of all of them."""
    state = LedgerState()
    steps = list(range(1, 300)) if in_order else [5, 3, *range(6, 300)]
    for s in steps:
        state._add_modification(_mod(s), 1)
    for step in (0, 1, 4, 5, 150, 299, 400):
        assert list(state.modifications_from(step)) == state.modifications_after(step)
    if in_order:
        assert next(state.modifications_from(1)) is state.modifications[0]


def test_the_spared_total_adds_the_new_attempts_and_is_the_sum_over_all(tmp_path, monkeypatch) -> None:
    """What the answers spared, summed for a hook adapter's note budget at every step: the attempts since
    the last call are added, not every attempt summed again; a completion (an attempt changed in place)
    sums anew. Always the sum of ``spared`` over every attempt."""
    from conftest import make_repo

    from ledger_runtime.config import LedgerConfig
    from ledger_runtime.executor import ExecResult, LocalExecutor
    from ledger_runtime.runtime import LedgerRuntime

    root = make_repo(tmp_path / "w", {"a.txt": "".join(f"line {i}\n" for i in range(40))})
    executor = LocalExecutor(timeout=30)
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:
        asked: list[int] = []
        spared = rt.spared
        monkeypatch.setattr(rt, "spared", lambda a: asked.append(a) or spared(a))

        def every() -> int:
            return sum(spared(a.id) for a in rt.state.attempts)

        for i in range(30):
            rt.run("cat a.txt" if i % 3 else "sed -n '1,20p' a.txt", executor)
            asked.clear()
            assert rt.spared_total() == every()
            assert len(asked) <= (30 if i == 0 else 1), (i, len(asked))
        assert every() > 0
        rt.finish_command(rt.state.attempts[-1].id, ExecResult("line 0\n", 0))
        asked.clear()
        assert rt.spared_total() == every() and len(asked) == len(rt.state.attempts)


@pytest.mark.parametrize("shadow", [False, True])
def test_whether_any_answer_referred_is_asked_of_the_attempts_since_the_last_render(
    tmp_path, monkeypatch, shadow: bool
) -> None:
    """The state view says how answers refer to earlier output once one has; in shadow mode none takes
    effect, and each render asked every attempt of the run. Now each asks the attempts since the last
    render, and the view says what asking all of them says (the view as a shadow replay sees it too)."""
    from conftest import make_repo

    from ledger_runtime import inform
    from ledger_runtime.config import LedgerConfig
    from ledger_runtime.executor import LocalExecutor
    from ledger_runtime.runtime import LedgerRuntime

    root = make_repo(tmp_path / "w", {"a.txt": "".join(f"line {i}\n" for i in range(40))})
    executor = LocalExecutor(timeout=30)
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig(shadow=shadow)) as rt:
        asked = []
        monkeypatch.setattr(inform, "_REFERENCING", _Counting(inform._REFERENCING, asked))
        for i in range(20):
            rt.run("cat a.txt", executor)
            for as_applied in (False, True):
                asked.clear()
                view = rt.view(as_applied=as_applied)
                assert len(asked) <= 1, (i, as_applied, len(asked))
                kinds = [a.answer_kind for a in rt.state.attempts if a.applied or as_applied]
                every = any(k in ("whole", "spans", "delta") for k in kinds)
                assert (inform.ESCAPE_LINE.split(":")[0] in view.text) == every, (i, as_applied)
        assert shadow or every, "answers referred to earlier output"


class _Counting(tuple):
    """A tuple that counts the questions ``in`` asks of it."""

    def __new__(cls, items, asked):
        t = super().__new__(cls, items)
        t.asked = asked
        return t

    def __contains__(self, item) -> bool:
        self.asked.append(item)
        return super().__contains__(item)


def test_the_mini_adapters_turn_copies_no_list_the_caller_let_go_and_changes_none_it_kept(tmp_path) -> None:
    """The mini adapter's model call hands out a list the caller may keep (or litellm's logging, for a model that
    passes it on): at 5,000 steps a new one at every call copied 10,000 messages. Where the caller let the last one
    go, the next call builds on it in place: what a call allocates is the same at 8,000 messages as at 400. A list
    the caller kept is never changed: not by the messages added after, nor by an earlier message the agent replaced
    (every message sent from it on is made again), nor by the next call built on a list let go since."""
    import operator
    import tracemalloc

    from conftest import make_repo

    from ledger_adapters.mini.context import AgentMessages, history_for
    from ledger_runtime.config import LedgerConfig
    from ledger_runtime.executor import LocalExecutor
    from ledger_runtime.prompt.history import History
    from ledger_runtime.prompt.notes import ViewNotes
    from ledger_runtime.runtime import LedgerRuntime

    class Model:
        def format_message(self, **kwargs):
            return dict(kwargs)

    root = make_repo(tmp_path / "w", {"a.py": "x = 1\n"})
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:
        history, agent = History(notes=ViewNotes(limit_chars=rt.config.context.note_chars)), AgentMessages()
        r = rt.run("cat a.py", LocalExecutor(timeout=30))
        extra = {"ledger": {"attempt": r.attempt_id}}
        messages = [{"role": "system", "content": "s"}, {"role": "user", "content": r.output, "extra": extra}]

        def turn() -> list[dict]:
            rt.prescan()
            return history_for(messages, history, rt, Model(), agent)

        allocated = {}
        tracemalloc.start()
        try:
            for step in range(1, 4001):
                messages += [{"role": "assistant", "content": f"step {step}"}, {"role": "user", "content": f"{step}"}]
                rt.prescan()  # (not measured: it reads the watcher's events into a buffer)
                before, _ = tracemalloc.get_traced_memory()
                tracemalloc.reset_peak()
                history_for(messages, history, rt, Model(), agent)  # let go
                allocated[len(messages)] = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        grown = allocated[8002] - allocated[402]  # a copy of the list: 64 KB
        assert grown <= 1024, (allocated[402], allocated[8002])

        kept = turn()
        items = list(kept)
        messages.append({"role": "assistant", "content": "more"})
        assert turn()[: len(kept)] == kept  # let go: the next call builds on it
        messages[5] = {"role": "user", "content": "an earlier message replaced"}
        after = turn()
        assert after[5]["content"] == "an earlier message replaced" and after is not kept
        del after
        messages.append({"role": "user", "content": "and more"})
        assert turn()[-1]["content"] == "and more"
        assert len(kept) == len(items) and all(map(operator.is_, kept, items))
        assert kept[5]["content"] == "2"
