"""What Codex's main model and its subagents are told, each of what it holds: the REAL codex binary (the pinned
npm package) with ``--enable multi_agent_v2`` (the ``collaboration`` tools: ``spawn_agent`` ...) against a fake
Responses API on loopback (tests/fake_responses.py) that scripts the main model and the subagent apart (the
subagent's requests carry the task its parent gave it). A subagent's hooks name its own rollout and carry an
``agent_id``: its conversation is not the main model's, and what the fake server received from each is what that
model read. Without a codex binary these tests skip, saying so (with LEDGER_REQUIRE_CODEX set, as CI sets it,
they fail)."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import make_repo
from fake_responses import FakeResponses, codex_run_env, developer_texts, function_outputs

from ledger_adapters.codex.cli import CODEX_VERSION, find_codex
from ledger_adapters.codex.rollout import locate
from ledger_runtime.inspection import load

CODEX = find_codex(None)
if CODEX is None and os.environ.get("LEDGER_REQUIRE_CODEX"):  # CI: a missing binary fails, as in test_codex_e2e.py
    raise RuntimeError(
        f"LEDGER_REQUIRE_CODEX is set but no codex binary was found (npm install -g @openai/codex@{CODEX_VERSION})"
    )
pytestmark = [
    pytest.mark.agent,
    pytest.mark.skipif(
        CODEX is None,
        reason=f"no codex binary on PATH or in $LEDGER_CODEX_BIN (npm install -g @openai/codex@{CODEX_VERSION})",
    ),
]

CALC = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(20))
BIG = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(300))  # its reference spares a note's worth
TASK = "SUBTASK_CALC"  # the subagent's task holds it: its requests take its script


def spawn(fork: str = "none") -> tuple[str, dict]:
    args = {"task_name": "helper", "message": f"{TASK}: look at calc.py", "fork_turns": fork}
    return ("tool", {"namespace": "collaboration", "name": "spawn_agent", "arguments": args})


def run(
    tmp_path: Path, main: list, sub: list, calc: str = CALC, more: dict[str, str] | None = None
) -> tuple[FakeResponses, Path]:
    """One ``ledger-run codex -- --enable multi_agent_v2 exec`` in a repo holding calc.py (and ``more``): the fake
    server (its ``by_agent``: each model's requests) and the run directory."""
    from test_codex_e2e import ledger_run

    repo = make_repo(tmp_path / "repo", {"calc.py": calc, **(more or {})})
    fake = FakeResponses(main, workdir=str(repo), subagents={TASK: sub})
    env = codex_run_env(dict(os.environ), fake, tmp_path / "user-codex", CODEX or "")
    run_dir = tmp_path / "run"
    try:
        argv = ["codex", "--workdir", str(repo), "-o", str(run_dir), "--", "--enable", "multi_agent_v2", "exec"]
        p = ledger_run(*argv, "--skip-git-repo-check", "look at calc.py", env=env, cwd=repo)
    finally:
        fake.close()
    assert p.returncode == 0, p.stderr[-3000:]
    assert len(fake.by_agent[TASK]) == len(sub), "the subagent ran its script"
    assert not (run_dir / "faults.log").exists(), (run_dir / "faults.log").read_text()
    return fake, run_dir


def test_each_model_is_referred_only_to_outputs_it_was_shown(tmp_path: Path) -> None:
    """The main model's `cat` runs while the subagent's first call begins (Codex runs them at once): then the
    subagent reads calc.py. It never saw the main model's output (spawned without its history, and the output
    came after): it gets the file, never "same as step N's output". The main model reads it again: a reference
    to its own output is true, to the subagent's never."""
    main = [spawn(), ("exec", "cat calc.py; sleep 4"), ("after", (TASK, ("exec", "cat calc.py"))), ("say", "done")]
    sub = [("delay", (1.5, ("exec", "true"))), ("delay", (5, ("exec", "cat calc.py"))), ("say", "read it")]
    fake, run_dir = run(tmp_path, main, sub)
    subs = function_outputs(fake.by_agent[TASK][-1])
    got = subs[f"{TASK}_call_1"]
    assert "[ledger" not in got and got.endswith("Output:\n" + CALC), got[-600:]
    mains = function_outputs(fake.by_agent[""][-1])
    assert mains["call_1"].endswith("Output:\n" + CALC)
    again = mains["call_2"]  # only the main model ran `cat calc.py; sleep 4`
    held = Counter((a.command, a.answer.get("held")) for a in load(run_dir).state.attempts)
    assert held == Counter(
        [("cat calc.py; sleep 4", None), ("true", False), ("cat calc.py", False), ("cat calc.py", None)]
    )
    assert re.search(
        r"\nOutput:\n\[ledger: same as step [\d.]+'s output \(`cat calc\.py; sleep 4`, exit 0\)\]\n$", again
    ), again


def test_a_subagents_edit_and_the_notes_are_told_to_the_model_they_are_true_for(tmp_path: Path) -> None:
    """The main model reads calc.py twice (the second a reference: a note of the state view is owed it),
    spawns a subagent that edits calc.py, then reads it again. The subagent gets none of the main model's
    notes; the main model is told of the change against the version it saw, by a step of the ledger."""
    edit = "sed -i 's/return x + 3$/return x + 30/' calc.py"
    main = [
        ("exec", "cat calc.py"),
        ("exec", "cat calc.py"),
        spawn(),
        ("after", (TASK, ("exec", "cat calc.py"))),
        ("say", "done"),
    ]
    sub = [("exec", edit), ("say", "edited")]
    fake, run_dir = run(tmp_path, main, sub, BIG)
    for request in fake.by_agent[TASK]:
        told = [t for t in developer_texts(request) if "ledger" in t.lower()]
        assert told == [], told
    mains = fake.by_agent[""]
    last = function_outputs(mains[-1])["call_3"]  # the version step 1 showed it, changed by the subagent's sed
    diff = "@@ -10,3 +10,3 @@\n def f3(x):\n-    return x + 3\n+    return x + 30\n \n"
    told = "[ledger: step 1's output (`cat calc.py`) with these changes, a unified diff; every other line is as there]"
    assert last.endswith(f"\nOutput:\n{told}\n{diff}"), last[-800:]
    notes = [t for t in developer_texts(mains[-1]) if t.startswith("(Ledger runtime:")]
    assert len(notes) == 1 and '<ledger_update step="2">\nAnswers: output you were already shown' in notes[0], notes
    rows = [(a.command, a.answer.get("held")) for a in load(run_dir).state.attempts]
    assert rows == [("cat calc.py", None), ("cat calc.py", None), (edit, False), ("cat calc.py", None)], rows
    [record] = locate(run_dir / "ledger.sqlite")  # the page's record of the model's side: the main model's rollout
    assert '"call_3"' in record.read_text() and f'"{TASK}_call_0"' not in record.read_text()


def test_a_subagent_with_the_main_models_history_patches_a_file_the_main_model_saw(tmp_path: Path) -> None:
    """Spawned with the main model's history (``fork_turns: all``), the subagent holds the main model's `cat` of
    calc.py; it reads calc.py (shown as it is: its outputs are never referred to) and patches it (apply_patch).
    The main model reads calc.py again: the change against the version it saw; the subagent got no note."""
    hunk = " def f3(x):\n-    return x + 3\n+    return x + 30\n"
    patch = f"*** Begin Patch\n*** Update File: calc.py\n@@\n{hunk}*** End Patch\n"
    main = [("exec", "cat calc.py"), spawn("all"), ("after", (TASK, ("exec", "cat calc.py"))), ("say", "done")]
    sub = [("exec", "cat calc.py"), ("patch", patch), ("say", "patched")]
    fake, run_dir = run(tmp_path, main, sub)
    subs = fake.by_agent[TASK]
    assert "call_0" in function_outputs(subs[0]), "the subagent holds the main model's history"
    assert function_outputs(subs[-1])[f"{TASK}_call_0"].endswith("Output:\n" + CALC)
    assert not [t for r in subs for t in developer_texts(r) if "ledger" in t.lower()]
    last = function_outputs(fake.by_agent[""][-1])["call_2"]
    told = "[ledger: step 1's output (`cat calc.py`) with these changes, a unified diff; every other line is as there]"
    assert last.endswith(
        f"\nOutput:\n{told}\n@@ -10,3 +10,3 @@\n def f3(x):\n-    return x + 3\n+    return x + 30\n \n"
    ), last
    rows = [(a.command.splitlines()[0], a.answer.get("held")) for a in load(run_dir).state.attempts]
    assert rows == [("cat calc.py", None), ("cat calc.py", False), ("*** Begin Patch", False), ("cat calc.py", None)]


def test_inspect_and_the_page_show_a_subagents_calls_as_the_subagents(tmp_path: Path) -> None:
    """The subagent reads calc.py before the main model reads it a second time. ``ledger-run inspect`` (the timeline,
    ``--json``) and its page say which steps are the subagent's, and the page puts the main model's call over the
    main model's step: before, the page matched the subagent's `cat` to the main model's call (its words, its time
    and tokens over the subagent's step) and left the main model's step without its call."""
    import json

    from test_codex_e2e import ledger_run

    from ledger_runtime.cli.record import align
    from ledger_runtime.trajectories import conversation_of

    main = [("exec", "cat calc.py"), spawn(), ("after", (TASK, ("exec", "cat calc.py"))), ("say", "done")]
    sub = [("exec", "cat calc.py"), ("say", "read it")]
    _, run_dir = run(tmp_path, main, sub)
    attempts = load(run_dir).state.attempts
    record = conversation_of(run_dir / "ledger.sqlite")
    assert record is not None
    whose = [(a.step, e.turn is not None) for e in align(record.turns, attempts) for a in e.attempts]
    assert whose == [(1, True), (2, False), (3, True)], whose  # the subagent's step 2 is no call of the main model
    p = ledger_run("inspect", str(run_dir), "--json", env=dict(os.environ), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["timeline"]
    assert [bool(r.get("agent")) for r in rows] == [False, True, False], rows
    p = ledger_run("inspect", str(run_dir), env={**os.environ, "COLUMNS": "120"}, cwd=tmp_path)
    assert [ln.split()[0] for ln in p.stdout.splitlines() if "subagent" in ln] == ["2"], p.stdout
    page = tmp_path / "page.html"
    assert ledger_run("inspect", str(run_dir), "--html", str(page), env=dict(os.environ), cwd=tmp_path).returncode == 0
    html = page.read_text()
    step2 = html[html.index('id="step-2"') :]
    step2 = step2[: step2.index("</section>")]
    assert "what the subagent received" in step2 and "the model</h3>" not in step2, step2[:2000]
    step3 = html[html.index('id="step-3"') :]
    assert "the model</h3>" in step3[: step3.index("</section>")]


def test_stale_edit_speaks_of_what_the_model_it_nudges_was_shown(tmp_path: Path) -> None:
    """The ledger keeps no record of what a subagent read: it reads other.py and edits it, and is not told "no read
    of it is on record; read the part you edit first". The subagent's edit of calc.py is not one the main model
    made: the main model, which read calc.py before it, is nudged to read it again before it edits it (before, a
    subagent's edit counted as the main model's own, and the main model edited a file it had not seen as it is)."""
    e3 = "sed -i 's/return x + 3$/return x + 30/' calc.py"
    e7 = "sed -i 's/return x + 7$/return x + 70/' calc.py"
    main = [("exec", "cat calc.py"), spawn(), ("after", (TASK, ("exec", e7))), ("say", "done")]
    sub = [("exec", "cat other.py"), ("exec", "sed -i 's/1/2/' other.py"), ("exec", e3), ("say", "edited")]
    fake, run_dir = run(tmp_path, main, sub, more={"other.py": "x = 1\n"})
    verdicts = [(a.command, a.verdict.kind.value, a.verdict.rule) for a in load(run_dir).state.attempts]
    assert verdicts == [
        ("cat calc.py", "RUN", None),
        ("cat other.py", "RUN", None),
        ("sed -i 's/1/2/' other.py", "RUN", None),
        (e3, "RUN", None),
        (e7, "NUDGE", "stale-edit"),
    ], verdicts
    subs = function_outputs(fake.by_agent[TASK][-1])
    assert not [k for k, v in subs.items() if "[ledger" in v], subs
    told = function_outputs(fake.by_agent[""][-1])["call_2"]
    assert (
        f"[ledger] NUDGE: stale-edit: calc.py changed at step 4 by a subagent's `{e3}` after its last read on record, "
        "at step 1" in told
    )


def test_a_run_with_subagents_resumed_refers_the_main_model_to_what_it_holds(tmp_path: Path) -> None:
    """``ledger-run codex -o RUN -- --enable multi_agent_v2 exec resume ID``, ID the main model's session of an earlier
    run in RUN whose subagent read calc.py: the run goes on in RUN (before, an option's value before ``exec`` hid
    the ``resume``, and it stopped: "it holds a run already"), and the main model's `cat` is a reference to its own
    step 1, which its conversation holds, never to the subagent's."""
    import json

    from test_codex_e2e import ledger_run

    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    main = [("exec", "cat calc.py"), spawn(), ("after", (TASK, ("say", "done")))]
    fake = FakeResponses(main, workdir=str(repo), subagents={TASK: [("exec", "cat calc.py"), ("say", "read it")]})
    env = codex_run_env(dict(os.environ), fake, tmp_path / "user-codex", CODEX or "")
    run_dir = tmp_path / "run"
    argv = ["codex", "--workdir", str(repo), "-o", str(run_dir), "--", "--enable", "multi_agent_v2", "exec"]
    try:
        p = ledger_run(*argv, "--skip-git-repo-check", "look at calc.py", env=env, cwd=repo)
        assert p.returncode == 0, p.stderr[-3000:]
        [rollout] = locate(run_dir / "ledger.sqlite")
        session = json.loads(rollout.read_text().splitlines()[0])["payload"]["id"]
        fake.steps = [*fake.steps, ("exec", "cat calc.py"), ("say", "again")]
        p = ledger_run(*argv, "--skip-git-repo-check", "resume", session, "look again", env=env, cwd=repo)
    finally:
        fake.close()
    assert p.returncode == 0, p.stderr[-3000:]
    assert not (run_dir / "faults.log").exists(), (run_dir / "faults.log").read_text()
    again = function_outputs(fake.by_agent[""][-1])["call_3"]
    assert again.endswith("\nOutput:\n[ledger: same as step 1's output (`cat calc.py`, exit 0)]\n"), again[-400:]


def test_a_subagents_edit_is_news_to_the_main_model(tmp_path: Path) -> None:
    """The main model read calc.py; a subagent edits it; the main model runs another command. Its note says calc.py
    changed at the subagent's step, the version it saw stale: before, the subagent's step was taken for one whose
    output had shown the main model the change, and the main model was never told."""
    e3 = "sed -i 's/return x + 3$/return x + 30/' calc.py"
    main = [("exec", "cat calc.py"), ("exec", "cat calc.py"), spawn(), ("after", (TASK, ("exec", "true")))]
    fake, _ = run(tmp_path, [*main, ("say", "done")], [("exec", e3), ("say", "edited")], BIG)  # its reference pays
    notes = [t for t in developer_texts(fake.by_agent[""][-1]) if "<ledger_update" in t]
    assert len(notes) == 2 and notes[1].startswith('<ledger_update step="4">\nSeen'), notes
    assert "calc.py: STALE, changed at step 3 by a subagent's `sed -i" in notes[1], notes


def test_a_subagent_running_a_command_the_main_model_failed_at_is_not_told_it_failed(tmp_path: Path) -> None:
    """The main model's script failed twice; a subagent runs it for its first time: it runs, and the subagent is told
    nothing of the main model's failures (before, it was refused: "change something before running it a 3rd time").
    The main model's third run is refused, citing its own two failures only."""
    fail = "python3 -c 'import sys; sys.exit(3)'"
    main = [("exec", fail), ("exec", fail), spawn(), ("after", (TASK, ("exec", fail))), ("say", "done")]
    sub = [("exec", fail), ("say", "ran it")]
    fake, run_dir = run(tmp_path, main, sub)
    got = function_outputs(fake.by_agent[TASK][-1])[f"{TASK}_call_0"]
    assert "[ledger" not in got and "Process exited with code 3\n" in got, got
    verdicts = [(bool(a.agent), a.verdict.kind.value, a.executed) for a in load(run_dir).state.attempts]
    assert verdicts == [(False, "RUN", True), (False, "NUDGE", True), (True, "RUN", True), (False, "REVISE", False)]
    told = function_outputs(fake.by_agent[""][-1])["call_3"]
    assert "REVISE by policy repeat-failure" in told and "it failed at steps 1, 2;" in told, told


def test_a_forked_subagent_holds_every_output_its_copied_references_name(tmp_path: Path) -> None:
    """The main model reads calc.py in one turn and again in the next (resumed): the second read is a reference to
    step 1. It spawns a subagent with ``fork_turns: "1"``, which Codex 0.171.0 takes (as ``"2"``; ``"0"`` and ``"x"``
    it refuses: "fork_turns must be `none` or `all`") and, as for ``all``, copies the whole history: the reference in
    the copy names an output the copy holds, the same text the main model got. Were the copy cut to the last turn,
    the subagent would read a reference to an output it never had (docs/codex.md). The subagent's own two reads are
    answered in full: a subagent is never answered with a reference, not even to the copy it holds."""
    import json

    from test_codex_e2e import ledger_run

    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    sub = [("exec", "cat calc.py"), ("exec", "cat calc.py"), ("say", "read it")]
    fake = FakeResponses([("exec", "cat calc.py"), ("say", "read it")], workdir=str(repo), subagents={TASK: sub})
    env = codex_run_env(dict(os.environ), fake, tmp_path / "user-codex", CODEX or "")
    run_dir = tmp_path / "run"
    argv = ["codex", "--workdir", str(repo), "-o", str(run_dir), "--", "--enable", "multi_agent_v2", "exec"]
    try:
        p = ledger_run(*argv, "--skip-git-repo-check", "look at calc.py", env=env, cwd=repo)
        assert p.returncode == 0, p.stderr[-3000:]
        [rollout] = locate(run_dir / "ledger.sqlite")
        session = json.loads(rollout.read_text().splitlines()[0])["payload"]["id"]
        fake.steps = [*fake.steps, ("exec", "cat calc.py"), spawn("1"), ("after", (TASK, ("say", "done")))]
        p = ledger_run(*argv, "--skip-git-repo-check", "resume", session, "look again", env=env, cwd=repo)
    finally:
        fake.close()
    assert p.returncode == 0, p.stderr[-3000:]
    assert not (run_dir / "faults.log").exists(), (run_dir / "faults.log").read_text()
    mains = function_outputs(fake.by_agent[""][-1])
    assert "fork_turns must be" not in mains["call_3"], mains["call_3"]
    assert mains["call_2"].endswith("\nOutput:\n[ledger: same as step 1's output (`cat calc.py`, exit 0)]\n")
    first = function_outputs(fake.by_agent[TASK][0])  # the subagent's first request: its copy of the history
    assert first.get("call_2") == mains["call_2"], sorted(first)
    assert first.get("call_0") == mains["call_0"] and mains["call_0"].endswith("Output:\n" + CALC), sorted(first)
    subs = function_outputs(fake.by_agent[TASK][-1])
    for call in (f"{TASK}_call_0", f"{TASK}_call_1"):
        assert "[ledger" not in subs[call] and subs[call].endswith("Output:\n" + CALC), subs[call][-400:]
    held = [(bool(a.agent), a.answer.get("held")) for a in load(run_dir).state.attempts]
    assert held == [(False, None), (False, None), (True, False), (True, False)], held


def test_a_subagents_repeat_failure_is_nudged_to_it(tmp_path: Path) -> None:
    """A subagent's second failing run of a script is a NUDGE of its own repeat (its own step cited), recorded as
    applied: the subagent is told so with the output, as the main model is."""
    fail = "python3 -c 'import sys; sys.exit(3)'"
    main = [spawn(), ("after", (TASK, ("say", "done")))]
    sub = [("exec", fail), ("exec", fail), ("say", "ran it")]
    fake, run_dir = run(tmp_path, main, sub)
    verdicts = [(bool(a.agent), a.verdict.kind.value) for a in load(run_dir).state.attempts]
    assert verdicts == [(True, "RUN"), (True, "NUDGE")], verdicts
    got = function_outputs(fake.by_agent[TASK][-1])[f"{TASK}_call_1"]
    assert "[ledger] NUDGE: repeat-failure: no tracked file changed since step 1," in got, got
