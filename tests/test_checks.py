"""Checks that can fail: each test here fails under one wrong change found by a mutation audit (the
check of a reference out of the model's context, the exit code a whole-output reference names, the
masking of Slack and JWT shapes, a hook call's one-time secret, the replay's own soundness count and
what it says was spared, the structure test's reading of imports through the public API), and the
check of a line reference compares whole lines at the numbers it names."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

from conftest import make_repo

from ledger_runtime.answers.build import SAME, Answer, AnswerKind, Piece, same_marker
from ledger_runtime.answers.transcript import Transcript
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime

EX = LocalExecutor(timeout=30)
BODY = "".join(f"line {i} of a file long enough to be worth a reference\n" for i in range(1, 30))


def test_a_reference_out_of_the_models_context_is_unsound_and_held_from_is_recorded(tmp_path: Path):
    root = make_repo(tmp_path / "w", {"a.txt": BODY})
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig().with_(context_steps=2)) as rt:
        rt.run("cat a.txt", EX, step=1)
        rt.run("echo one", EX, step=2)
        rt.run("echo two", EX, step=3)
        again = rt.run("cat a.txt", EX, step=4)
        assert again.answer == "raw", "step 1 is out of the last 2 steps: nothing refers to it"
        a = rt.state.attempts[-1]
        assert a.answer["held_from"] == 2, "the answer records which steps the model held"
        t = Transcript(rt.state, rt.store.text)
        assert t.check(a, BODY).sound
        # the same answer, had it referred to step 1: the check must see that the model no longer held it
        first = rt.state.attempts[0]
        marker = same_marker(rt.held.source(first))
        forged = replace(
            a,
            shown_hash=rt.store.put_text(marker),
            answer={**a.answer, "kind": "whole", "pieces": [Piece(SAME, 0, len(marker), first.id).to_list()]},
        )
        check = Transcript(rt.state, rt.store.text).check(forged, BODY)
        assert check.exact and not check.held and "out of the model's context" in check.why


def test_a_whole_output_reference_names_the_exit_code_of_the_output_it_stands_for(tmp_path: Path):
    root = make_repo(tmp_path / "w", {"fail.sh": "echo " + "x" * 200 + "\nexit 3\n"})
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:
        first = rt.run("bash fail.sh", EX, step=1)
        again = rt.run("bash fail.sh", EX, step=2)
    assert first.returncode == again.returncode == 3
    assert again.answer == "whole" and "exit 3)]" in again.output and "exit 0" not in again.output


def test_slack_and_jwt_shapes_are_masked():
    from ledger_runtime.ledger.redact import Redactor

    r = Redactor.for_run({})
    slack = "xoxb-" + "1234567890-abcdefghij"
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
    for secret in (slack, jwt):
        masked = r.mask(f"token: {secret} end")
        assert secret not in masked and len(masked) == len(secret) + len("token:  end"), masked


def test_a_wrappers_call_secret_is_traded_once_for_its_key(tmp_path: Path):
    from ledger_adapters.codex.hooks import CodexHooks

    root = make_repo(tmp_path / "w", {"a.txt": BODY})
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:
        hooks = CodexHooks(rt, token="run-secret")
        hooks.call_tokens["c1"] = "call-secret"
        hooks.pending["c1"] = object()  # type: ignore[assignment]  # a call waiting for its wrapper
        assert not hooks.authorize("Begin", "wrong", "c1"), "a wrong one is refused"
        assert not hooks.authorize("Answer", "call-secret", "c1"), "the command line's secret never answers"
        assert hooks.authorize("Begin", "call-secret", "c1")
        assert hooks.begin({"tool_use_id": "c1", "key": "k" * 32}) == {"ok": True}
        assert not hooks.authorize("Begin", "call-secret", "c1"), "spent before the command starts"
        assert not hooks.authorize("Answer", "call-secret", "c1"), "the secret a command could read answers nothing"
        assert hooks.authorize("Answer", "k" * 32, "c1")
        assert not hooks.authorize("Answer", "k" * 32, "c1"), "taken once"
        assert not hooks.authorize("Answer", "k" * 32, None), "an answer names its call"
        assert hooks.authorize("PreToolUse", "run-secret", None) and not hooks.authorize("PreToolUse", None, None)


def test_the_replay_counts_an_answer_that_does_not_stand_for_the_fresh_output(tmp_path: Path):
    from ledger_harness.replay.engine import _soundness, summarize_rows

    root = make_repo(tmp_path / "w", {"a.txt": BODY})
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig(shadow=True)) as rt:
        rt.run("cat a.txt", EX, step=1)
        rt.run("cat a.txt", EX, step=2)
        a = rt.state.attempts[-1]
        t = Transcript(rt.state, rt.store.text)
        assert _soundness(t, a, BODY, "whole")["sound"] is True
        bad = _soundness(t, a, BODY + "printed otherwise this time\n", "whole")
        assert bad["sound"] is False and bad["evidence"]["exact"] is False, "checked against the fresh output"
    row = {
        "verdict": "RUN",
        "class": "inspect",
        "answer": "whole",
        "parsed": True,
        "visible_chars": 100,
        "shown_visible_chars": 40,
        "output_chars": 100,
        "repeated_chars": 0,
        "redundant": None,
    }
    s = summarize_rows([{**row, "sound": False}, {**row, "sound": True}])
    assert s["checked"] == 2 and s["unsound"] == 1


def test_what_the_replay_says_was_spared_is_after_the_agents_cut():
    from ledger_harness.replay.engine import _spared, visible_chars
    from ledger_runtime.ledger.observe import Truncation

    trunc = Truncation(10_000, 5_000, 5_000)
    long_output, answer = "x" * 30_000, "y" * 12_000
    row = {
        "answer": "spans",
        "visible_chars": visible_chars(long_output, trunc),
        "shown_visible_chars": visible_chars(answer, trunc),
    }
    assert _spared(row) == 0, "both are cut to 10,000 characters: the model is spared nothing"
    assert _spared({**row, "shown_visible_chars": visible_chars("y" * 4_000, trunc)}) == 6_000


def test_the_structure_test_reads_an_import_through_the_public_api_as_the_module_it_loads(tmp_path: Path):
    import test_structure

    src = tmp_path / "mod.py"
    src.write_text("def f():\n    from ledger_runtime import LedgerRuntime\n    return LedgerRuntime\n")
    found = {r for t in test_structure._imports("ledger_runtime.some.mod", src) if (r := test_structure._resolve(t))}
    assert "ledger_runtime.runtime" in found, "a name of the API is the module that defines it"
    ast.parse(src.read_text())


def test_a_line_reference_names_whole_lines_where_it_says(tmp_path: Path):
    """The check of a line reference compares whole lines at the numbers it names: the same bytes
    shown elsewhere in the source, starting in the middle of a line, are not those lines."""
    from ledger_runtime.answers.build import LINES, lines_marker

    lines = BODY.splitlines(keepends=True)
    b = "".join(lines[:12]) + "X" + lines[2] + lines[3] + "the end of b\n"
    root = make_repo(tmp_path / "w", {"a.txt": BODY, "b.txt": b})
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:
        rt.run("cat a.txt", EX, step=1)
        second = rt.run("cat b.txt", EX, step=2)
        assert second.answer == "spans" and "lines 1-12 of step 1's output" in second.output
        src = rt.state.attempts[1]  # its lines 3-4 came as a reference; their bytes follow an X further down
        marker = lines_marker(rt.held.source(src), 3, 4)
        rt.run("echo three", EX, step=3)
        a = rt.state.attempts[-1]
        forged = replace(
            a,
            shown_hash=rt.store.put_text(marker),
            answer={**a.answer, "kind": "spans", "pieces": [Piece(LINES, 0, len(marker), src.id, 3, 4).to_list()]},
        )
        check = Transcript(rt.state, rt.store.text).check(forged, lines[2] + lines[3])
        assert check.exact and not check.held, "lines 3-4 of step 2 were never shown there literally"
        honest = lines_marker(rt.held.source(src), 13, 14)  # these were: after the X, lines 13-14 of b
        ok = replace(
            a,
            shown_hash=rt.store.put_text(honest),
            answer={**a.answer, "kind": "spans", "pieces": [Piece(LINES, 0, len(honest), src.id, 13, 14).to_list()]},
        )
        got = Transcript(rt.state, rt.store.text).check(ok, "X" + lines[2] + lines[3])
        assert got.exact and got.held, got.why


def test_every_answer_is_read_back_before_the_model_gets_it(tmp_path: Path):
    """The run-time check: an answer whose references do not stand for exactly the output (here one
    made wrong by hand, as a bug of the builder would) is replaced by the output as it is, a fault."""
    root = make_repo(tmp_path / "w", {"a.txt": BODY})
    with LedgerRuntime(root, tmp_path / "run", LedgerConfig()) as rt:
        rt.run("cat a.txt", EX, step=1)
        first = rt.state.attempts[0]
        marker = same_marker(rt.held.source(first))
        wrong = Answer(AnswerKind.WHOLE, marker, (Piece(SAME, 0, len(marker), first.id),))
        other = BODY + "one more line\n"
        assert rt._checked(wrong, other, []).text == other and rt.faults == 1
        right = rt._checked(wrong, BODY, [])
        assert right is wrong and rt.faults == 1
