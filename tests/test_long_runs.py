"""A long run through one ledger: what grows with the number of steps must not break it or slow it
down past what the view and the answers need (issue 26). Real runtime, real files in a git repo."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import make_repo

from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.inspection import load
from ledger_runtime.runtime import LedgerRuntime

BODY = "".join(f"line {i}: the same text every time\n" for i in range(30))


def test_a_long_chain_of_repeats_is_answered_from_the_first_output(tmp_path: Path) -> None:
    """The same output again and again, more times than Python's recursion limit: every repeat is a
    reference to the first output, never a fault (it was a RecursionError past ~1,000 repeats, each
    answer referring to the one before)."""
    root = make_repo(tmp_path / "w", {"a.txt": BODY})
    executor = LocalExecutor(timeout=30)
    printed = {}

    def execute(command: str, cwd: str):  # the command runs once for real; its output is the same after
        if command not in printed:
            printed[command] = executor(command, cwd)
        return printed[command]

    repeats = sys.getrecursionlimit() + 200
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:
        first = rt.run("cat a.txt", execute)
        answers = [rt.run("cat a.txt", execute) for _ in range(repeats)]
    assert first.output == BODY
    assert all(a.output.startswith("[ledger: same as step 1's output") for a in answers[-5:]), answers[-1].output
    assert not (tmp_path / "run" / "faults.log").exists()
    assert len(load(tmp_path / "run").state.attempts) == repeats + 1


def test_whether_the_model_holds_an_output_whole_is_found_without_recursion() -> None:
    """A long run makes long chains of references (an answer refers to lines only the one before it
    printed literally, and so on down): checking one must not recurse down the chain. In a 5,000-step
    run it raised RecursionError, and each such step's answer was lost to a fault."""
    from ledger_runtime.answers.delivered import Delivered, Shown

    pool = Delivered(alive=lambda step: True)
    n = sys.getrecursionlimit() * 3
    for a in range(1, n + 1):
        refs = (a - 1,) if a > 1 else ()
        pool.add(Shown(a, a, f"step {a}", "grep -rn x", 0, ["x"], [a == 1], refs, True, f"d{a}"), keys=["grep"])
    assert pool.complete(n)
    assert pool.base("grep") is not None
    pool.items[1].uncut = False  # the first one was cut: no output down the chain is whole
    assert not pool.complete(n)


def test_the_view_kept_between_renders_is_the_view_made_afresh(tmp_path: Path) -> None:
    """The state view keeps what it derived for the next render (a line per file seen, the last
    failing run): at every step it must read exactly as the view of the same events folded anew,
    through reads, edits by commands and between them, a failing run, its fix, a reversion."""
    from ledger_runtime.inform import render
    from ledger_runtime.ledger.state import LedgerState

    root = make_repo(tmp_path / "w", {"a.py": BODY, "b.py": BODY, "t.sh": "grep -q fixed a.py\n"})
    executor = LocalExecutor(timeout=30)
    commands = [
        "cat a.py",
        "sed -n '2,5p' b.py",
        "bash t.sh",
        "sed -i 's/line 3:/line 3 fixed:/' a.py",
        "nl -ba a.py | sed -n '1,10p'",
        "bash t.sh",
        "cat b.py",
        None,  # b.py changed between commands
        "grep -n line b.py",
        "git checkout a.py",
        "bash t.sh",
        "cat a.py",
    ]
    config = LedgerConfig()
    with LedgerRuntime(root, tmp_path / "run", config) as rt:
        for i, command in enumerate(commands * 3):
            if command is None:
                (root / "b.py").write_text(BODY + f"one more line {i}\n")
                continue
            rt.run(command, executor)
            kept = render(rt.state, config).text
            anew = render(LedgerState.from_events(rt.store.events()), config).text
            assert kept == anew, (i, command)
        assert "Last failing run" in kept and "a.py" in kept


def test_the_pages_views_in_one_pass_are_the_views_at_each_step(tmp_path: Path) -> None:
    """inspect --html shows the state view before each step; folding the events once for all of them
    must give each view exactly as folding them anew up to that step does."""
    from ledger_runtime.inspection import load, view_at, views_at

    root = make_repo(tmp_path / "w", {"a.py": BODY, "t.sh": "grep -q fixed a.py\n"})
    executor = LocalExecutor(timeout=30)
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:
        for i, command in enumerate(["cat a.py", "bash t.sh", "sed -i 's/line 3:/fixed:/' a.py", "bash t.sh"] * 3):
            if i == 5:
                (root / "a.py").write_text(BODY)  # a change between commands
            rt.run(command, executor)
    loaded = load(tmp_path / "run")
    steps = range(0, loaded.state.step + 1)
    assert views_at(loaded, steps) == {s: view_at(loaded, s) for s in steps}


def test_a_long_output_masked_in_what_is_kept_is_masked_as_the_whole_would_be() -> None:
    """A long output is stored as its head and tail; masking only those (with a margin) must give
    exactly what masking the whole output and then cutting it gives, secrets at the cut included."""
    import random

    from ledger_runtime.answers.build import MASK_MARGIN, kept_output, masked_kept
    from ledger_runtime.ledger.redact import Redactor

    secret = "hunter2-" + "s3cr3t-value"
    r = Redactor.for_run({"MY_API_TOKEN": secret})
    rng = random.Random(7)
    limit = 1000
    for _ in range(40):
        lines = []
        for i in range(rng.randint(200, 9000)):
            pick = rng.random()
            if pick < 0.05:
                lines.append(f"token {secret} in line {i}")
            elif pick < 0.1:
                lines.append(f"Authorization: Bearer abc{i}def{i}ghi{i}jkl")
            else:
                lines.append("x" * rng.randint(0, 90))
        text = "\n".join(lines) + rng.choice(["", "\n"])
        assert masked_kept(text, limit, r.mask) == kept_output(r.mask(text), limit)
    big = ("y" * 99 + "\n") * (4 * MASK_MARGIN // 100) + secret + "\n"  # the secret in the kept tail
    kept = masked_kept(big, limit, r.mask)
    assert secret not in kept and kept == kept_output(r.mask(big), limit)


def _view_dropping_one_at_a_time(state, config) -> str:
    """The state view as it was cut to its budget before: drop the oldest droppable entry, assemble
    the whole text again, until it fits (quadratic: 2.6 s at 4,000 changed files)."""
    from ledger_runtime.inform import CHANGED, COMMANDS, SEEN, _assemble, view_entries

    entries = [e for e in view_entries(state, config) if not e.quiet]
    open_tag, close_tag, omitted = f'<ledger_state step="{state.step}">', "</ledger_state>", 0

    def assemble() -> str:
        tail = [f"({omitted} older entries left out to stay within {config.view_budget_tokens} tokens)"]
        return _assemble(open_tag, close_tag, entries, tail if omitted else [])

    text = assemble()
    while len(text) > config.view_budget_tokens * 4 and any(e.section in (SEEN, COMMANDS, CHANGED) for e in entries):
        for section in (SEEN, COMMANDS, CHANGED):
            candidates = [i for i, e in enumerate(entries) if e.section == section]
            if candidates:
                entries.pop(min(candidates, key=lambda i: entries[i].order))
                omitted += 1
                break
        text = assemble()
    return text


def test_the_view_cut_to_its_budget_drops_what_it_dropped_one_at_a_time(tmp_path: Path) -> None:
    """With many changed and seen files the view is cut to its budget by a search for the fewest
    entries to leave out; it must read exactly as dropping them one at a time did."""
    from dataclasses import replace

    from ledger_runtime.inform import render

    root = make_repo(tmp_path / "w", {f"s{i}.py": BODY for i in range(30)})
    executor = LocalExecutor(timeout=30)
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:
        for k in range(3):
            rt.run(f"mkdir -p d{k} && for i in $(seq 1 60); do echo $i > d{k}/f$i.txt; done", executor)
        for i in range(30):
            rt.run(f"cat s{i}.py", executor)
        for budget in (40, 120, 300, 700, 1500, 5000):
            config = replace(LedgerConfig(), view_budget_tokens=budget)
            view = render(rt.state, config)
            assert view.text == _view_dropping_one_at_a_time(rt.state, config), budget
            assert len(view.text) <= budget * 4 or view.text.endswith("…</ledger_state>")
