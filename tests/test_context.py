"""Context policies (ledger_runtime/held/context.py): what of the history is sent, decided from what
still holds; and the same through mini-swe-agent's real agent loop with a scripted model."""

from __future__ import annotations

import random

import pytest
from conftest import make_repo

from ledger_runtime.config import ConfigError, LedgerConfig
from ledger_runtime.held.context import (
    KEEP,
    PART,
    STUB,
    ContextPolicy,
    HistoryOutput,
    Line,
    RewriteSchedule,
    Stub,
    Treatment,
    stub_holds,
    stub_text,
    treatments,
    valid_unique_dropped,
)


def said(i, lines, key=None, refs=(), supersedable=True, attempt=None):
    return HistoryOutput(
        i,
        attempt if attempt is not None else i + 1,
        f"step {i + 1}",
        f"cmd{i}",
        key,
        supersedable,
        tuple(lines),
        tuple(refs),
        10_000,
    )


def fl(path, n, text):
    return Line(f"{n}\t{text}", path, n, text)


def test_policies_parse_and_bad_ones_are_named():
    assert ContextPolicy.parse("validity+window:10") == ContextPolicy(True, 10)
    assert [ContextPolicy.parse(t).name for t in ("full", "window:3", "validity")] == ["full", "window:3", "validity"]
    for bad in ("window:0", "window:x", "recent", ""):
        with pytest.raises(ConfigError, match="context"):
            LedgerConfig().with_(context=bad)


def test_validity_stubs_stale_superseded_and_repeated_and_keeps_what_is_unique():
    now = {("a.py", 1): "x = 2\n", ("b.py", 1): "y = 1\n"}

    def still_true(line):
        return now.get((line.path, line.number)) == line.was

    h = [
        said(0, [fl("a.py", 1, "x = 1\n")]),  # a.py changed since
        said(1, [fl("b.py", 1, "y = 1\n")]),  # shown again by step 5
        said(2, [Line("FAILED test_x\n")], key="run"),  # superseded by step 4
        said(3, [Line("ok\n")], key="run"),
        said(4, [fl("b.py", 1, "y = 1\n"), Line("unique note\n")], key="other"),
    ]
    t = treatments(h, ContextPolicy(validity=True), still_true)
    assert [x.kind for x in t] == [STUB, STUB, STUB, KEEP, KEEP]
    assert t[0].stub.reason() == "lines of it changed since"
    assert t[1].stub.later and t[1].stub.reason() == "shown again later" and t[2].stub.superseded_by == "step 4"
    assert (
        stub_text(h[2], t[2]) == "[ledger: step 3's output (`cmd2`) left out: superseded by step 4 (the same command)]"
    )
    assert all(stub_holds(h[j], t[j], list(zip(h[j + 1 :], t[j + 1 :])), still_true) for j in range(len(h)))
    assert valid_unique_dropped(h, t, still_true) == []
    # a stub whose claims are untrue is caught: step 2's line is not shown again once step 5 is a stub
    forged_after = list(zip(h[2:], t[2:4] + [Treatment(STUB, Stub(later=True))]))
    assert not stub_holds(h[1], t[1], forged_after, still_true)
    assert not stub_holds(h[0], Treatment(STUB, Stub(later=True)), list(zip(h[1:], t[1:])), still_true), (
        "it says nothing changed, but a line did"
    )
    assert not stub_holds(h[2], Treatment(STUB, Stub(superseded_by="step 5")), list(zip(h[3:], t[3:])), still_true)
    # the masking baseline drops by age alone: the unique line of step 2 goes
    w = treatments(h, ContextPolicy(window=2), still_true)
    assert [x.kind for x in w] == [STUB, STUB, STUB, KEEP, KEEP]
    assert valid_unique_dropped(h, w, still_true) == []  # here age and validity agree
    lone = [said(0, [Line("only here\n")]), said(1, [Line("x\n")])]
    assert valid_unique_dropped(lone, treatments(lone, ContextPolicy(window=1), still_true), still_true) == [(0, 0)]
    assert treatments(lone, ContextPolicy(validity=True), still_true)[0].kind == KEEP


def test_an_output_a_later_one_refers_to_is_kept_and_validity_window_keeps_unique_lines_only():
    h = [
        said(0, [Line("alpha\n"), Line("beta\n")]),
        said(1, [Line("alpha\n")], refs=(1,)),  # refers to step 1's lines
        said(2, [Line("gamma\n")]),
        said(3, [Line("delta\n")]),
    ]
    t = treatments(h, ContextPolicy(validity=True), lambda line: True)
    assert t[0].kind == KEEP, "step 2 refers to it"
    h2 = [
        said(0, [Line("alpha\n"), Line("beta\n")]),
        said(1, [Line("alpha\n")]),
        said(2, [Line("gamma\n")]),
        said(3, [Line("delta\n")]),
    ]
    t2 = treatments(h2, ContextPolicy(validity=True, window=2), lambda line: True)
    assert t2[0].kind == PART and t2[0].kept == (1,), "alpha is shown by step 2; beta is unique"
    assert "beta" in stub_text(h2[0], t2[0]) and "alpha" not in stub_text(h2[0], t2[0]).split("]\n", 1)[1]
    assert valid_unique_dropped(h2, t2, lambda line: True) == []


def test_validity_never_drops_a_line_that_still_holds_and_is_shown_nowhere_later():
    """Random histories, random truths: whatever validity and validity+window leave out, nothing
    still true and shown nowhere later among what is sent; every stub's claims check out."""
    rng = random.Random(11)
    texts = [f"t{i}\n" for i in range(6)] + ["\n"]
    for _ in range(400):
        truth = {(p, n): rng.choice(["v1\n", "v2\n"]) for p in ("a", "b") for n in (1, 2, 3)}
        h = []
        for i in range(rng.randint(1, 9)):
            lines = [
                fl(rng.choice("ab"), rng.randint(1, 3), rng.choice(["v1\n", "v2\n"]))
                if rng.random() < 0.5
                else Line(rng.choice(texts))
                for _ in range(rng.randint(0, 4))
            ]
            refs = (rng.randint(1, i),) if i and rng.random() < 0.2 else ()
            h.append(said(i, lines, key=rng.choice(["k1", "k2", None]), refs=refs, supersedable=rng.random() < 0.7))

        def still_true(line):
            return truth[(line.path, line.number)] == line.was

        for policy in (ContextPolicy(validity=True), ContextPolicy(validity=True, window=2)):
            t = treatments(h, policy, still_true)
            assert valid_unique_dropped(h, t, still_true) == [], (policy, h, t)
            for j in range(len(h)):
                assert stub_holds(h[j], t[j], list(zip(h[j + 1 :], t[j + 1 :])), still_true)
            kept = {h[j].attempt for j in range(len(h)) if t[j].kind == KEEP}
            assert all(r in kept for j in range(len(h)) if t[j].kind == KEEP for r in h[j].refs)


def test_sticky_restores_at_once_and_leaves_out_in_batches():
    h = [said(i, [Line(f"l{i}\n")]) for i in range(4)]
    sticky = RewriteSchedule(cache_ratio=0.1)
    size = lambda s, t: s.chars if t.kind == KEEP else 40  # noqa: E731
    after = [12_000, 2_000, 1_000, 500]
    small = [Treatment(STUB, Stub(later=True)), Treatment(KEEP), Treatment(KEEP), Treatment(KEEP)]
    tiny = HistoryOutput(**{**h[0].__dict__, "chars": 60})
    sent = sticky.apply(small, [tiny] + h[1:], after, size)
    assert sent[0].kind == KEEP, "saving 20 characters is not worth 12,000 uncached"
    sent = sticky.apply(small, h, after, size)
    assert sent[0].kind == STUB, "saving 10,000 characters on every call to come is"
    back = sticky.apply([Treatment(KEEP)] * 4, h, after, size)
    assert back[0].kind == KEEP, "what must come back comes back at once"


# -- through mini-swe-agent's real agent loop ----------------------------------------------------


def test_the_real_loop_sends_stubs_where_the_rule_says_and_keeps_the_history(tmp_path):
    from test_mini_adapter import RecordingModel, agent_for, ledger_env, text_outputs

    from ledger_adapters.mini.environment import LedgerModel

    repo = make_repo(
        tmp_path / "r",
        {
            "a.py": "".join(f"x{i} = 1\n" for i in range(1, 7)),
            "b.py": "def f():\n    return 'only here'\n",
            "check.py": "import a\nfor i in range(1, 7):\n"
            "    print(f'x{i} is', getattr(a, f'x{i}'), 'with x6 at', a.x6)\n",
        },
    )
    script = [
        "cat -n a.py",  # 1: stale after step 2
        "sed -i 's/= 1/= 2/' a.py",  # 2
        "cat -n b.py",  # 3: unique, still true: kept
        "python3 check.py",  # 4: superseded by step 7
        "echo note-$((6*7))",  # 5: unique text: kept
        "sed -i 's/x6 = 2/x6 = 3/' a.py",  # 6: every line step 7 prints differs from step 4's
        "python3 check.py",  # 7
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    ]
    env = ledger_env(repo, tmp_path / "run", context="validity")
    model = LedgerModel(inner_class="deterministic", outputs=[], cost_per_call=0.0)
    model.inner = RecordingModel(outputs=text_outputs(script), cost_per_call=0.0)
    # priced with no cache discount, so every stub is applied at once (outputs this small would
    # otherwise wait for a batch worth the cache it costs: test_sticky_...)
    model.cache_ratios = (1.0, 1.0)
    agent = agent_for(model, env, tmp_path)
    try:
        agent.run("change x")
    finally:
        env.cleanup()  # the ledger's watcher and git process: the inotify instances are the machine's
    last = model.inner.received[-1]  # the call that wrote the submission: after step 7
    outputs = [m["content"] for m in last if m["role"] == "user"][1:]
    assert outputs[0] == "[ledger: step 1's output (`cat -n a.py`) left out: lines of it changed since]"
    assert "only here" in outputs[2], "step 3 still holds and is shown nowhere else"
    assert (
        outputs[3] == "[ledger: step 4's output (`python3 check.py`) left out: superseded by step 7 (the same command)]"
    )
    assert "note-42" in outputs[4] and "x6 is 3" in outputs[6]
    # the agent's own history is untouched
    history = [m["content"] for m in agent.messages if m["role"] == "user"][1:]
    assert "x1 = 1" in history[0] and "x6 is 2" in history[3]
    # full: nothing left out
    env2 = ledger_env(repo, tmp_path / "run2")
    model2 = LedgerModel(inner_class="deterministic", outputs=[], cost_per_call=0.0)
    model2.inner = RecordingModel(outputs=text_outputs(["cat -n b.py", "cat -n b.py", script[-1]]), cost_per_call=0.0)
    try:
        agent_for(model2, env2, tmp_path / "t2").run("look")
    finally:
        env2.cleanup()
    assert not any("left out" in m["content"] for m in model2.inner.received[-1] if m["role"] == "user")


def test_a_reference_whose_source_the_model_no_longer_holds_is_sent_as_what_it_stands_for(tmp_path):
    """context_steps=3: once step 1 has left what the model holds, step 2's "same as step 1" would
    point at nothing; from then on the copy the model is sent holds step 2's output itself."""
    from test_mini_adapter import RecordingModel, agent_for, ledger_env, text_outputs

    from ledger_adapters.mini.environment import LedgerModel

    mid = "".join(f"M{i:03} = {i}  # a line of the module, long enough to refer to\n" for i in range(1, 41))
    repo = make_repo(tmp_path / "r", {"mid.py": mid})
    script = ["cat mid.py", "cat mid.py", "echo x", "echo y", "echo z", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
    env = ledger_env(repo, tmp_path / "run", context_steps=3)
    model = LedgerModel(inner_class="deterministic", outputs=[], cost_per_call=0.0)
    model.inner = RecordingModel(outputs=text_outputs(script), cost_per_call=0.0)
    agent = agent_for(model, env, tmp_path)
    try:
        agent.run("read it")
    finally:
        env.cleanup()

    def second(messages):  # step 2's output, as a list of messages holds it
        return [m["content"] for m in messages if m["role"] == "user"][2]

    assert "[ledger: same as step 1's output (`cat mid.py`, exit 0)]" in second(model.inner.received[2])
    last = second(model.inner.received[-1])
    assert "[ledger: same as step 1" not in last and mid in last, "sent as what it stands for"
    assert "[ledger: same as step 1's output" in second(agent.messages), "the agent's own history is its own"


def test_a_diff_is_what_the_model_holds_of_a_re_read_and_no_stub_says_otherwise(tmp_path):
    """validity, after a delta answer: the diff was the only place the model saw the edited line, so
    that output is never a stub that says it held nothing but blank lines."""
    from ledger_runtime.executor import LocalExecutor
    from ledger_runtime.prompt.history import History, Message
    from ledger_runtime.runtime import LedgerRuntime

    mid = "".join(f"M{i:03} = {i}  # a line of the module, long enough to refer to\n" for i in range(1, 41))
    repo = make_repo(tmp_path / "r", {"mid.py": mid})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig().with_(context="validity"))
    ex = LocalExecutor(timeout=30)
    script = ["cat mid.py", "sed -i 's/^M020 = 20 /M020 EDITED! /' mid.py", "cat mid.py", "echo one", "echo two"]
    history = History(policy=ContextPolicy(validity=True), sticky=RewriteSchedule(cache_ratio=1.0), view_share=None)
    msgs = [Message("system"), Message("task")]
    for i, c in enumerate(script, 1):
        r = rt.run(c, ex, step=i)
        if i == 3:
            assert r.answer == "delta" and "+M020 EDITED!" in r.output
        msgs += [Message(c), Message(r.output, r.attempt_id, rt.spared(r.attempt_id))]
        sent = history.send(msgs, rt)
    saids, treat = history.decisions
    delta = next(n for n, s in enumerate(saids) if s.label == "step 3")
    assert any("M020 EDITED!" in line.text for line in saids[delta].lines), "the diff's lines are the model's"
    assert treat[delta].kind == KEEP or "nothing but blank lines" not in sent[2 * delta + 3].text
    assert all(
        stub_holds(saids[j], treat[j], list(zip(saids[j + 1 :], treat[j + 1 :])), rt.still_true)
        for j in range(len(saids))
    )
    assert valid_unique_dropped(saids, treat, rt.still_true) == []
    rt.close()


def test_under_a_window_an_output_a_kept_one_refers_to_is_kept(tmp_path):
    """window:2, and the latest output is "same as step 1's output": step 1 is not a placeholder,
    or the reference would point at nothing the model was sent."""
    from ledger_runtime.executor import LocalExecutor
    from ledger_runtime.prompt.history import History, Message
    from ledger_runtime.runtime import LedgerRuntime

    body = "".join(f"line {i} of a file long enough to refer to\n" for i in range(40))
    repo = make_repo(tmp_path / "r", {"a.txt": body})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    ex = LocalExecutor(timeout=30)
    history = History(policy=ContextPolicy(window=2), sticky=RewriteSchedule(cache_ratio=1.0), view_share=None)
    msgs = [Message("system"), Message("task")]
    for i, c in enumerate(["cat a.txt", "echo x", "echo y", "echo z", "cat a.txt"], 1):
        r = rt.run(c, ex, step=i)
        msgs += [Message(c), Message(r.output, r.attempt_id)]
        sent = history.send(msgs, rt)
    assert "[ledger: same as step 1's output" in sent[-1].text
    assert sent[3].text == body and sent[5].text.startswith("Old environment output"), [s.text[:40] for s in sent]
    rt.close()


def test_a_dropped_file_line_that_still_holds_is_counted_and_a_line_is_its_number_too():
    """The meter's count of lost lines: a still-true file line left out and shown nowhere later is
    one; the same text at another line number of the file is another fact, not the same one."""
    now = {("a.py", 1): "x = 1\n", ("a.py", 2): "x = 1\n"}

    def still_true(line):
        return now.get((line.path, line.number)) == line.was

    first, second = fl("a.py", 1, "x = 1\n"), fl("a.py", 2, "x = 1\n")
    assert first.fact != second.fact, "a file line is its path, its number and its text"
    h = [said(0, [first]), said(1, [second])]
    left_out = [Treatment(STUB, Stub(later=True)), Treatment(KEEP)]
    assert valid_unique_dropped(h, left_out, still_true) == [(0, 0)], "line 1 is shown nowhere later"
    assert not stub_holds(h[0], left_out[0], list(zip(h[1:], left_out[1:])), still_true)
    assert treatments(h, ContextPolicy(validity=True), still_true)[0].kind == KEEP


def test_the_independent_check_finds_a_still_true_line_left_out(tmp_path):
    """lost_lines reads the files from the disk and what was sent as text: a file line left out, shown
    in no later message and still in the file at that number, is lost; one the file no longer has,
    or one a later message shows, is not."""
    from ledger_harness.replay.meter import lost_lines
    from ledger_runtime.prompt.history import Message, Sent

    f = tmp_path / "a.py"
    f.write_text("x = 1\ny = 2\nz = 3\n")
    p = str(f)
    lines = [
        Line("1\tx = 1\n", p, 1, "x = 1\n"),
        Line("2\ty = 20\n", p, 2, "y = 20\n"),
        Line("3\tz = 3\n", p, 3, "z = 3\n"),
    ]
    h = [said(0, lines), said(1, [Line("other\n")])]
    msgs = [Message("sys"), Message("task"), Message("out1", 1), Message("out2", 2)]
    stub = Treatment(STUB, Stub(stale=1, later=True))
    sent = [Sent("sys"), Sent("task"), Sent("[ledger: stub]"), Sent("z = 3 is shown here\n")]
    assert lost_lines(h, [stub, Treatment(KEEP)], msgs, sent) == {("step 1", 0)}, (
        "line 1 is still in the file and shown nowhere later; line 2 the file no longer has; line 3 is shown"
    )
    assert lost_lines(h, [Treatment(KEEP), Treatment(KEEP)], msgs, sent) == set()


def test_an_expansion_once_sent_stays_as_it_was_sent(tmp_path):
    """The expansion of an answer whose source left is what the model is sent from then on: a later
    answer that fills the ledger's memory never turns it into the line that only names it."""
    from ledger_runtime.executor import LocalExecutor
    from ledger_runtime.prompt.history import History, Message
    from ledger_runtime.runtime import LedgerRuntime

    mid = "".join(f"M{i:03} = {i}  # a line of the module, long enough to refer to\n" for i in range(1, 41))
    repo = make_repo(tmp_path / "r", {"mid.py": mid, "b.py": mid.replace("M", "B")})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig().with_(context_steps=3))
    rt.held.answers.limit = 6000  # room for two answers and their expansions, not for three
    ex = LocalExecutor(timeout=30)
    history = History(view_share=None)
    msgs = [Message("system"), Message("task")]
    sent_at: list[str] = []
    script = ["cat mid.py", "cat mid.py", "cat b.py", "cat b.py", "echo x", "cat b.py", "cat b.py", "echo z"]
    for i, c in enumerate(script, 1):
        r = rt.run(c, ex, step=i)
        msgs += [Message(c), Message(r.output, r.attempt_id)]
        sent = history.send(msgs, rt)
        if len(sent) > 5:
            sent_at.append(sent[5].text)  # step 2's output
    first = next(k for k, t in enumerate(sent_at) if t == mid)
    assert all(t == mid for t in sent_at[first:]), [t[:50] for t in sent_at]
    rt.close()


@pytest.mark.parametrize(
    "saving, lost, ahead, cache, write, pays",
    [
        (1000, 5000, 2, 0.1, 1.0, False),  # 1000 * 1.2 = 1200 < 5000 * 0.9 = 4500: wait
        (1000, 5000, 40, 0.1, 1.0, True),  # 1000 * 5.0 = 5000 >= 4500: a long run ahead pays for it
        (1000, 1000, 0, 0.1, 1.0, True),  # 1000 >= 900: what it saves outweighs what it breaks
        (1000, 5000, 2, 0.1, 1.25, False),  # Anthropic's writes: 1000 * 1.45 = 1450 < 5000 * 1.15 = 5750
        (10, 10**6, 2, 1.0, 1.0, True),  # no cache discount: nothing is lost by a rewrite
        (0, 1, 100, 0.1, 1.0, False),  # saves nothing: never
    ],
)
def test_when_a_rewrite_pays(saving, lost, ahead, cache, write, pays):
    from ledger_runtime.held.context import rewrite_pays

    assert rewrite_pays(saving, lost, ahead, cache, write) is pays
