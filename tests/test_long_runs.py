"""A long run through one ledger: what grows with the number of steps must not break it or slow it
down past what the view and the answers need (issue 26). Real runtime, real files in a git repo."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from conftest import git, make_repo

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
    from ledger_runtime.answers.held_output import HeldOutput as Shown
    from ledger_runtime.held.delivered import Delivered

    pool = Delivered()
    n = sys.getrecursionlimit() * 3
    for a in range(1, n + 1):
        refs = (a - 1,) if a > 1 else ()
        pool.add(Shown(a, a, f"step {a}", "grep -rn x", 0, ["x"], [a == 1], refs, True, f"d{a}"), keys=["grep"])
    assert pool.whole_available(n, first_held=0)
    assert pool.base("grep", first_held=0) is not None
    # the first one added again, cut: no output down the chain is whole (what was worked out before is dropped)
    pool.add(Shown(1, 1, "step 1", "grep -rn x", 0, ["x"], [True], (), False, "d1"), keys=["grep"])
    assert not pool.whole_available(n, first_held=0)
    cut = Delivered()  # and so when the chain is cut from the start
    for a in range(1, n + 1):
        cut.add(Shown(a, a, f"step {a}", "grep -rn x", 0, ["x"], [a == 1], (a - 1,) if a > 1 else (), a > 1, f"d{a}"))
    assert not cut.whole_available(n, first_held=0) and not cut.whole_available(n // 2, first_held=0)
    assert cut.whole_available(n, first_held=2) is False, "nor is one whose chain leaves the context"


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
            kept = render(rt.state, config.view).text
            anew = render(LedgerState.from_events(rt.store.events()), config.view).text
            assert kept == anew, (i, command)
        assert "Last failing run" in kept and "a.py" in kept


def test_the_pages_views_in_one_pass_are_the_views_at_each_step(tmp_path: Path) -> None:
    """inspect --html shows the state view after each step; folding the events once for all of them
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

    entries = [e for e in view_entries(state, config.view) if not e.quiet]
    open_tag, close_tag, omitted = f'<ledger_state step="{state.step}">', "</ledger_state>", 0

    def assemble() -> str:
        tail = [f"({omitted} older entries left out to stay within {config.view.budget_tokens} tokens)"]
        return _assemble(open_tag, close_tag, entries, tail if omitted else [])

    text = assemble()
    while len(text) > config.view.budget_tokens * 4 and any(e.section in (SEEN, COMMANDS, CHANGED) for e in entries):
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
    from ledger_runtime.inform import render

    root = make_repo(tmp_path / "w", {f"s{i}.py": BODY for i in range(30)})
    executor = LocalExecutor(timeout=30)
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:
        for k in range(3):
            rt.run(f"mkdir -p d{k} && for i in $(seq 1 60); do echo $i > d{k}/f$i.txt; done", executor)
        for i in range(30):
            rt.run(f"cat s{i}.py", executor)
        for budget in (40, 120, 300, 700, 1500, 5000):
            config = LedgerConfig().with_(view_budget_tokens=budget)
            view = render(rt.state, config.view)
            assert view.text == _view_dropping_one_at_a_time(rt.state, config), budget
            assert len(view.text) <= budget * 4 or view.text.endswith("…</ledger_state>")


# -- what grows with the tree and with the output (issue 26, items 3-5) ---------------------------


def test_long_texts_split_into_lines_as_short_ones_do() -> None:
    """A long text is split by ``str.splitlines`` where it holds no other line break than "\\n"; it
    must give exactly the lines the "\\n"-only split gives, whatever characters it holds."""
    import random

    from ledger_runtime.lines import split_lines

    def by_newline(text: str) -> list[str]:
        parts = text.split("\n")
        return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])

    rng = random.Random(7)
    for trial in range(400):
        alphabet = "ab \n" if trial % 2 else "ab \n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029é"
        text = "".join(rng.choice(alphabet) for _ in range(rng.choice([10, 5000, 9000])))
        assert split_lines(text) == by_newline(text), trial


def test_every_built_in_secret_shape_begins_with_the_literal_the_quick_test_looks_for() -> None:
    """Masking a long text skips a built-in pattern when the literal it opens with is not in the text:
    that literal must be what every match of the pattern begins with, or a secret would go unmasked."""
    import re._parser as sre_parse

    from ledger_runtime.ledger.redact import _BUILTIN, _BUILTIN_LITERAL, Redactor

    for rx in _BUILTIN:
        literal = _BUILTIN_LITERAL.get(rx, "")
        parsed = list(sre_parse.parse(rx.pattern))
        opening = ""
        for op, arg in parsed:
            if op is not sre_parse.LITERAL:
                break
            opening += chr(arg)
        assert opening.startswith(literal), (rx.pattern, literal, opening)
    text = "x = 1\n" * 20000 + "token: ghp_" + "a" * 36 + "\nAUTH_TOKEN=abcdefgh12345678\n"
    masked = Redactor.for_run({}).mask(text)
    assert "ghp_" + "a" * 36 not in masked and "abcdefgh12345678" not in masked and len(masked) == len(text)


def test_a_snapshot_keeps_what_it_saw_while_later_scans_change_the_tree(tmp_path: Path, monkeypatch) -> None:
    """Scans share what did not change instead of copying the map of every file: a snapshot taken
    earlier must still hold the tree as it was then, and the changes between any two snapshots (the
    ones in a row, and two far apart, compared whole) must be what happened, also after the shared
    part was made anew (here every few changes)."""
    from ledger_runtime.workspace.scanner import WorkspaceScanner, delta
    from ledger_runtime.workspace.scanning import filemap

    monkeypatch.setattr(filemap, "MIN_OVERLAY", 3)
    root = make_repo(tmp_path / "w", {f"f{i}.txt": f"{i}\n" for i in range(20)})
    scanner = WorkspaceScanner(str(root))
    snaps = [scanner.scan()]
    seen = [{p: fs.digest for p, fs in snaps[0].files.items()}]
    for i in range(12):
        if i % 3 == 2:
            (root / f"f{i}.txt").unlink()
        else:
            (root / f"f{i}.txt").write_text(f"changed {i}\n")
            (root / f"new{i}.txt").write_text("new\n")
        snaps.append(scanner.scan())
        seen.append({p: fs.digest for p, fs in snaps[-1].files.items()})
    for snap, was in zip(snaps, seen):
        assert {p: fs.digest for p, fs in snap.files.items()} == was
        assert len(snap.files) == len(was) and all(p in snap.files for p in was)
    first, last = snaps[0], snaps[-1]
    whole = {(c.path, c.before is None, c.after is None) for c in delta(first, last)}
    expected = set()
    for p in set(seen[0]) | set(seen[-1]):
        if seen[0].get(p) != seen[-1].get(p):
            expected.add((p, p not in seen[0], p not in seen[-1]))
    assert whole == expected and len(expected) == 12 + 8
    scanner.close()


def test_a_conflicted_file_that_the_ignore_rules_match_stays_in_the_workspace_once_resolved(tmp_path: Path) -> None:
    """git lists a conflicted path once per stage; when the index changes, what joined and left it is
    found between the entries both listings share: a path listed three times, then once, has not left
    (it was then dropped from the snapshot, and its later changes were never recorded)."""
    from ledger_runtime.workspace.scanner import WorkspaceScanner, delta

    root = make_repo(tmp_path / "w", {".gitignore": "*.log\n", "a.txt": "a\n"})
    (root / "c.log").write_text("base\n")
    git(root, "add", "-f", "c.log")
    git(root, "commit", "-qm", "c")
    git(root, "checkout", "-qb", "other")
    (root / "c.log").write_text("other\n")
    git(root, "commit", "-qam", "o")
    git(root, "checkout", "-q", "main")
    (root / "c.log").write_text("mine\n")
    git(root, "commit", "-qam", "m")
    scanner = WorkspaceScanner(str(root))
    snap = scanner.scan()
    with pytest.raises(subprocess.CalledProcessError):
        git(root, "merge", "-q", "other")  # conflicts: c.log listed three times
    snap = scanner.scan()
    (root / "c.log").write_text("resolved\n")
    git(root, "add", "-f", "c.log")  # listed once again
    snap = scanner.scan()
    assert str(root / "c.log") in snap.files
    (root / "c.log").write_text("changed after\n")
    after = scanner.scan()
    assert [c.path for c in delta(snap, after)] == [str(root / "c.log")]
    scanner.close()


def test_what_a_held_output_shows_of_files_is_kept_only_for_a_context_policy_and_while_held(tmp_path: Path) -> None:
    """Which output lines are which file lines is what ``said`` tells a context policy: it is kept
    only where a policy asks (not ``full``), and only for outputs the model still holds (it grew by a
    dictionary a step, for the whole run)."""
    root = make_repo(tmp_path / "w", {"a.py": BODY, "b.py": BODY})
    executor = LocalExecutor(timeout=30)
    with LedgerRuntime(root, tmp_path / "full", LedgerConfig()) as rt:
        for _ in range(3):
            rt.run("cat a.py", executor)
            rt.run("sed -n '2,9p' b.py", executor)
        assert rt.held.file_lines == {}
    with LedgerRuntime(root, tmp_path / "window", LedgerConfig().with_(context="validity")) as rt:
        first = rt.run("cat a.py", executor)
        said = rt.said(first.attempt_id, 0)
        assert said is not None and said.lines[2].path is not None and said.lines[2].number == 3
        rt.forget_context()  # a compaction: the model holds none of it now
        rt.run("sed -n '2,9p' b.py", executor)
        assert first.attempt_id not in rt.held.file_lines


def test_a_long_output_like_a_clean_one_is_masked_exactly_as_masking_all_of_it() -> None:
    """A long output that begins and ends like an earlier one stored as printed is masked only in the
    lines between: whatever the outputs hold (secrets in the changed lines, in the shared ones, at
    their edges, in a line a shared part cuts through), the result is ``mask(output)``."""
    import random

    from ledger_runtime.ledger.clean_outputs import CleanOutputs
    from ledger_runtime.ledger.redact import Redactor

    redactor = Redactor.for_run({"API_TOKEN": "tok-3f9a7c1e5d"})
    rng = random.Random(11)
    # what masks only with what stands before it on its line (a value after NAME_TOKEN=, a token
    # shape at a word's start) or after it, and secrets whole
    pieces = ["plain line\n", "x = 1\n", "AUTH_TOKEN=abc\n", "ab\n", "key tok-3f9a7c1e5d here\n", "sk-", "A" * 24]
    inserts = ["defgh12345", "sk-" + "B" * 24, "x", "\n", "tok-3f9a7c1e5d", "ab"]
    clean = CleanOutputs(min_chars=200)
    base = [rng.choice(pieces[:4]) for _ in range(400)]
    for trial in range(2000):
        lines = list(base)
        for _ in range(rng.randint(0, 3)):
            at = rng.randrange(len(lines))
            if rng.random() < 0.5:  # within a line: before its end, or at its start
                line = lines[at]
                cut = rng.choice([len(line.rstrip("\n")), 0, rng.randint(0, len(line))])
                lines[at] = line[:cut] + rng.choice(inserts) + line[cut:]
            else:
                lines[at : at + rng.randint(0, 2)] = [rng.choice(pieces) + rng.choice(["", "\n"])]
        output = "".join(lines)
        got = clean.masked(output, redactor.mask)
        assert got == redactor.mask(output), trial
        if got == output:
            clean.remember(output)
            if rng.random() < 0.3:  # the next ones are edits of a clean one: the masking is then of what changed
                base = lines


def test_an_output_too_long_to_refer_to_is_said_to_be_as_printed_when_what_the_model_sees_reads_like_ours(
    tmp_path: Path,
) -> None:
    """An output longer than the ledger refers into is answered as it is, and the agent shows its head
    and tail: it carries the note that it is printed as it is when those hold text like the ledger's,
    and not for such text in the part the model never sees (looking through 100 MB for it cost more
    than the rest of the step)."""
    from ledger_runtime.answers.build import AS_PRINTED

    root = make_repo(tmp_path / "w", {"a.txt": "a\n"})
    middle = "x" * 3000 + "\n"
    lines = [middle] * 2000
    lines[1000] = "[ledger: same as step 1's output]\n"  # deep in the middle: never shown
    (root / "mid.txt").write_text("".join(lines))
    lines[1000] = middle
    lines[1] = "[ledger: same as step 1's output]\n"  # in the head the agent shows
    (root / "head.txt").write_text("".join(lines))
    executor = LocalExecutor(timeout=30)
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig().with_(max_stored_output_chars=1_000_000)) as rt:
        mid = rt.run("cat mid.txt", executor)
        head = rt.run("cat head.txt", executor)
    assert not mid.output.startswith(AS_PRINTED) and mid.output.endswith(middle)
    assert head.output.startswith(AS_PRINTED)


def test_what_the_history_sends_again_is_what_it_would_send_made_afresh(tmp_path: Path) -> None:
    """The copy of the history the model is sent reuses what it sent at the last call (a long run no
    longer pays a new object a message at every call): after every call, through new messages, notes
    of the state view, a message changed (a rewrite) and messages dropped, what it returns must be
    the texts it decided on with each note where it stands."""
    import random

    from ledger_runtime.prompt.history import History, Message, Sent

    root = make_repo(tmp_path / "w", {"a.py": BODY, "b.py": BODY})
    executor = LocalExecutor(timeout=30)
    rng = random.Random(3)
    history = History(view_share=None)
    messages: list[Message] = [Message("task")]
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:
        for i in range(60):
            roll = rng.random()
            if roll < 0.25:
                (root / rng.choice(["a.py", "b.py"])).write_text(BODY + f"edit {i}\n")  # the view changes
            if 0.15 <= roll < 0.25:
                pass  # the same messages again: the change between calls is news for the last one
            elif roll < 0.1 and len(messages) > 4:
                k = rng.randrange(1, len(messages))
                messages[k] = Message(messages[k].text + " (changed)", messages[k].attempt)
            elif roll < 0.15 and len(messages) > 6:
                del messages[-2:]
            else:
                r = rt.run(rng.choice(["cat a.py", "cat b.py", "git status --short"]), executor)
                messages += [Message(f"thought {i}"), Message(r.output, r.attempt_id, rt.spared(r.attempt_id))]
            rt.prescan()  # the model's turn, as the adapters start it: changes made since are taken
            got = history.send(messages, rt)
            notes = {n.at: n.text for n in history.notes.notes}
            assert got == [Sent(t, notes.get(k, "")) for k, t in enumerate(history.sent)], i
            assert [s.text for s in got] == [m.text for m in messages], i
        assert history.notes.notes, "no note of the view was sent: the test did not test notes"


@pytest.mark.parametrize("seed", range(3))
def test_the_view_made_a_read_at_a_time_is_the_view_made_from_every_read(tmp_path: Path, seed: int) -> None:
    """The seen files' lines are kept up a read at a time (a render costs the reads that are new): after
    every step of a run of reads, searches, ranges, edits, reverts, deletions and reads through a link,
    the view is the one made from every read of the run (the memo emptied first)."""
    import os
    import random

    from ledger_runtime.inform import render

    rng = random.Random(seed)
    files = {f"m{k}.py": "".join(f"def f{i}():\n    return {i}\n" for i in range(40)) for k in range(3)}
    root = make_repo(tmp_path / "w", files)
    os.symlink("m0.py", root / "link.py")
    config = LedgerConfig()
    with LedgerRuntime(root, tmp_path / "run", config) as rt:
        for step in range(60):
            name = rng.choice(["m0.py", "m1.py", "m2.py", "link.py"])
            a, b = sorted(rng.sample(range(1, 80), 2))
            command = rng.choice(
                [
                    f"cat {name}",
                    f"sed -n '{a},{b}p' {name}",
                    f"grep -n 'return {rng.randint(0, 9)}' {name}",
                    f"nl -ba {name} | sed -n '{a},{b}p'",
                    f"sed -i 's/return {rng.randint(0, 39)}$/return {step}/' {name}",
                    f"git checkout -q -- {name} 2>/dev/null; true",
                    f"rm -f {name}; git checkout -q -- . 2>/dev/null; true" if rng.random() < 0.1 else f"cat {name}",
                ]
            )
            rt.run(command, LocalExecutor(timeout=30))
            kept = render(rt.state, config.view).text
            memo = dict(rt.state.view_memo)
            rt.state.view_memo.clear()
            again = render(rt.state, config.view).text
            rt.state.view_memo.update(memo)
            assert kept == again, (step, command)
        assert "Seen (fresh" in kept


class _ViewFailed(Exception):
    pass


class _Flaky:
    """The runtime as a history's source, whose note of the view fails when told to: a call that raises midway."""

    def __init__(self, runtime: LedgerRuntime) -> None:
        self.runtime, self.fail = runtime, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runtime, name)

    def view_for_notes(self) -> Any:
        if self.fail:
            raise _ViewFailed()
        return self.runtime.view_for_notes()


@pytest.mark.parametrize(
    "policy,seed",
    [
        ("full", 0),
        ("full", 1),
        ("window:3", 2),
        ("window:1", 3),
        ("validity", 4),
        ("validity+window:2", 5),
    ],
)
def test_the_mini_adapters_turn_sends_what_a_history_made_afresh_sends(tmp_path: Path, policy: str, seed: int) -> None:
    """The mini adapter's model call (``history_for`` with its ``AgentMessages``) builds on what it read and sent at
    the last call, and tells ``History`` how many messages it had: over random turns of new outputs, earlier messages
    replaced, the history cut short, the last few messages changed in place, the workspace changed (notes of the view),
    the context forgotten, and turns taken by the path that reads everything, what it sends must equal, at every call,
    what a ``History`` made afresh before each call from the public state of the one before (its caches left behind)
    sends for a deep copy of the messages through that path: every message read, every text and note made anew.
    The lists handed out are kept by the caller, changed by it and let go, or let go, at random: a list kept is never
    changed by a later call (however the messages changed), and a list let go is built on (not copied) by the next."""
    import copy
    import operator
    import random
    from dataclasses import fields

    from minisweagent.models.test_models import DeterministicModel

    from ledger_adapters.mini.context import AgentMessages, history_for
    from ledger_runtime.held.context import ContextPolicy, RewriteSchedule
    from ledger_runtime.prompt.history import History
    from ledger_runtime.prompt.notes import ViewNotes

    root = make_repo(tmp_path / "w", {"a.py": BODY, "b.py": BODY})
    executor = LocalExecutor(timeout=30)
    rng = random.Random(seed)
    model = DeterministicModel(outputs=[])
    messages: list[dict] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:

        def made() -> History:
            notes = ViewNotes(limit_chars=rt.config.context.note_chars)
            sticky = RewriteSchedule(cache_ratio=cache, min_calls_ahead=ahead)
            return History(policy=ContextPolicy.parse(policy), notes=notes, sticky=sticky, view_share=share)

        share, cache, ahead = rng.choice([None, 0.5, 0.05]), rng.choice([0.1, 1.0]), rng.choice([1, 4])
        incremental, afresh, agent = made(), made(), AgentMessages()
        source, faults = _Flaky(rt), random.Random(-seed)  # faults drawn apart: the turns are the same without them
        kept: list[tuple[list, list]] = []  # lists handed out that the caller kept, and their items as handed out
        built_on = []
        handed_back = agent._handed_back

        def counted():  # (the list handed back is not kept here: that would keep it from the next call)
            given = handed_back()
            built_on.append(given is not None)
            return given

        agent._handed_back = counted
        caller = random.Random(seed + 100)  # what the caller does with the lists, drawn apart as well

        def call(turn: Callable[[], list]) -> list | str:
            try:
                return turn()
            except _ViewFailed:
                return "raised"

        def step(i: int) -> None:
            r = rt.run(rng.choice(["cat a.py", "cat b.py", "git status --short", "sed -n 2,9p a.py"]), executor)
            thought = rng.choice([f"thought {i}", [{"type": "text", "text": f"thought {i}"}]])
            extra = {"ledger": {"attempt": r.attempt_id, "spared": rt.spared(r.attempt_id)}}
            messages.extend(
                [{"role": "assistant", "content": thought}, {"role": "user", "content": r.output, "extra": extra}]
            )

        def in_place(i: int) -> None:  # the agent's contract: only the last few messages change in place
            m = messages[rng.randrange(max(len(messages) - AgentMessages.RECHECK, 0), len(messages))]
            if isinstance(m.get("content"), list):
                m["content"][0]["text"] += f" (changed in place {i})"
            elif "extra" in m and rng.random() < 0.5:
                m["extra"]["ledger"]["spared"] += 7
            else:
                m["content"] += f" (changed in place {i})"

        for i in range(100):
            if rng.random() < 0.3:
                (root / rng.choice(["a.py", "b.py"])).write_text(BODY + f"edit {i}\n")  # the view changes: notes
            roll = rng.random()
            if roll < 0.1 and len(messages) > 4:
                k = rng.randrange(2, len(messages))  # an earlier message replaced by a new one
                messages[k] = {**messages[k], **rng.choice([{"content": f"replaced {i}"}, {"replaced": i}])}
            elif roll < 0.2:
                in_place(i)
            elif roll < 0.26 and len(messages) > 6:
                del messages[rng.randrange(2, len(messages)) :]  # cut short
            elif roll < 0.3:
                rt.forget_context()  # a compaction: the outputs so far are gone, a summary in their place
                messages[2:] = [{"role": "user", "content": f"summary {i}"}]
            elif roll < 0.35:
                pass  # the same messages again
            else:
                for _ in range(rng.choice([1, 1, 2])):
                    step(i)
            rt.prescan()
            bypass = rng.random() < 0.08  # a call through the path that reads everything: the next one is not built on
            source.fail = faults.random() < 0.08  # a call that raises midway, in both
            got = call(lambda: history_for(messages, incremental, source, model, None if bypass else agent))
            afresh = History(**{f.name: getattr(afresh, f.name) for f in fields(afresh) if not f.name.startswith("_")})
            want = call(lambda: history_for(copy.deepcopy(messages), afresh, source, model))
            source.fail = False
            assert got == want, i
            roll = caller.random()
            if roll < 0.2 and isinstance(got, list):
                kept.append((got, list(got)))
            elif roll < 0.35 and isinstance(got, list) and got:
                # the caller changes the list it was handed, then lets it go
                change = caller.randrange(3)
                if change == 0:
                    got.pop()
                elif change == 1:
                    got.clear()
                else:
                    got.insert(0, {"role": "user", "content": "its own"})
            del got  # let go, unless kept above
            for handed, items in kept:
                assert len(handed) == len(items) and all(map(operator.is_, handed, items)), i
            assert (incremental.sent, incremental.rewrites, incremental.notes_sent) == (
                afresh.sent,
                afresh.rewrites,
                afresh.notes_sent,
            ), i
        assert afresh.notes.notes and afresh.rewrites
        assert len(kept) > 5 and sum(built_on) > 20
