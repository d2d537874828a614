"""The policy gate on real repositories with real commands: each built-in rule firing and not
firing, configuration, user rules by dotted path, the fail-open rule, the state view, Codex's deny,
and a whole mini-swe-agent run where the gate refuses, revises and lets a submission through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import CALC_PROJECT, make_repo

from ledger_adapters.mini.format import SUBMISSION  # the agent whose marker these commands use
from ledger_harness.swebench.protected import SWEBENCH_PROTECTED
from ledger_runtime.config import ConfigError, LedgerConfig, load_config
from ledger_runtime.decide.policies import DESTRUCTIVE
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.inspection import load
from ledger_runtime.records import VerdictKind
from ledger_runtime.runtime import LedgerRuntime

EX = LocalExecutor(timeout=30)
TEST = "python3 -m unittest -q test_calc"
FILES = {
    **CALC_PROJECT,
    "tests/test_more.py": "def test_x():\n    assert True\n",
    "setup.cfg": "[metadata]\nname = calc\n",
}
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


def runtime(repo: Path, tmp_path: Path, policies: dict | None = None, **cfg) -> LedgerRuntime:
    return LedgerRuntime(
        repo,
        tmp_path / "run",
        LedgerConfig().with_(policies=policies or {}, **cfg),
        task="fix add",
        submission=SUBMISSION,
    )


def run(rt: LedgerRuntime, cmd: str):
    return rt.run(cmd, EX)


def test_stale_edit(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    never = run(rt, "sed -i '2s/a - b/a + b/' calc.py")
    assert never.verdict.kind is VerdictKind.NUDGE and never.verdict.rule == "stale-edit" and never.executed
    assert "no read of it is on record" in never.output and "calc.py" in never.output
    # read, then a script (not a recognised edit) changes it: the next in-place edit is stale
    run(rt, "cat calc.py")
    run(rt, "python3 -c \"import pathlib; p = pathlib.Path('calc.py'); p.write_text(p.read_text() + '# x\\n')\"")
    stale = run(rt, "sed -i 's/# x/# y/' calc.py")
    assert stale.verdict.rule == "stale-edit" and "changed at step 3 by `python3 -c" in stale.verdict.reason
    assert stale.verdict.evidence == {"stale-edit": {"path": str(repo / "calc.py"), "read_at": 2, "changed_at": 3}}
    # the agent's own edits after its read do not make the file stale; nor does a whole-file write
    run(rt, "cat calc.py")
    run(rt, "sed -i 's/# y/# z/' calc.py")
    assert run(rt, "sed -i 's/# z/# w/' calc.py").verdict.kind is VerdictKind.RUN
    assert run(rt, "printf 'x\\n' > fresh.txt").verdict.kind is VerdictKind.RUN
    revise = runtime(repo, tmp_path / "b", {"stale-edit": {"verdict": "REVISE"}})
    r = run(revise, "sed -i '3s/x/y/' test_calc.py")
    assert r.verdict.kind is VerdictKind.REVISE and not r.executed and "no read of it is on record" in r.output


def test_protected_paths(repo, tmp_path):
    rt = runtime(repo, tmp_path, {"protected-paths": {"globs": list(SWEBENCH_PROTECTED)}})
    run(rt, "cat test_calc.py tests/test_more.py setup.cfg")
    for cmd, glob in (
        ("sed -i 's/5)/6)/' test_calc.py", "test_*.py"),
        ("echo '# more' >> tests/test_more.py", "test_*.py"),
        ("sed -i 's/calc/calc2/' setup.cfg", "setup.cfg"),
    ):
        r = run(rt, cmd)
        assert r.verdict.kind is VerdictKind.REVISE and r.verdict.rule == "protected-paths" and not r.executed, cmd
        assert repr(glob) in r.output and "The command was not run" in r.output
    assert "assertEqual(add(2, 3), 5)" in (repo / "test_calc.py").read_text(), "the protected file is untouched"
    # a new test file of the agent's own, and the code under test, are not protected
    assert run(rt, "printf 'print(1)\\n' > test_repro.py").verdict.kind is VerdictKind.RUN
    run(rt, "cat calc.py")
    assert run(rt, "sed -i '2s/a - b/a + b/' calc.py").verdict.kind is VerdictKind.RUN
    assert run(runtime(repo, tmp_path / "off"), "sed -i 's/5)/7)/' test_calc.py").verdict.rule != "protected-paths"


@pytest.mark.parametrize(
    "cmd",
    [
        "git reset --hard",
        "git reset -q --hard HEAD~1",
        "git checkout -- .",
        "git checkout .",
        "git clean -fdx",
        "git clean -f -d",
        "rm -rf .",
        "cd /tmp && rm -rf {repo}",
        "rm -r -f {parent}",
        "rm -rf *",
        "git -C {repo} reset --hard",
        "git -c x.y=1 reset --hard",
        "git checkout ./",
        "git checkout -f",
        "rm -rf {repo}/*",
        "cd tests && rm -rf ../*",
        'rm -rf "{repo}"',
        "rm -rf $PWD",
        "cat > n.txt <<EOF\nhello\nEOF\ngit reset --hard",
        "python3 -c 'print(1<<3)'\ngit reset --hard",
    ],
)
def test_destructive_commands_are_blocked(repo, tmp_path, cmd):
    rt = runtime(repo, tmp_path)
    r = run(rt, cmd.format(repo=repo, parent=repo.parent))
    assert r.verdict.kind is VerdictKind.BLOCK and r.verdict.rule == "destructive" and not r.executed, cmd
    assert "refused outright" in r.output
    assert (repo / "calc.py").exists() and (repo / ".git").exists()


@pytest.mark.parametrize(
    "cmd",
    [
        "git checkout -- calc.py",
        "git reset HEAD calc.py",
        "rm -rf build",
        "rm -f calc.py.orig",
        "git clean -n",
        "git stash list",
        "echo 'git reset --hard' > notes.txt",
        "cat > notes.md <<'EOF'\ndo not run git clean -fdx here\nEOF",
        'rm -rf "build"',
        "rm -rf 'my dir'",
        'rm -rf "/tmp/scratch x"',
        "mkdir -p /tmp/lt && cd /tmp/lt && rm -rf *",
        "echo x # git reset --hard",
        "echo 'rm -rf .'",
        "git checkout -b fix",
    ],
)
def test_ordinary_commands_are_not_destructive(repo, tmp_path, cmd):
    r = run(runtime(repo, tmp_path), cmd)
    assert r.verdict.kind is not VerdictKind.BLOCK and r.executed, cmd


def test_destructive_list_is_configurable(repo, tmp_path):
    rt = runtime(repo, tmp_path, {"destructive": {"patterns": [r"\bgit\s+stash\s+drop\b"], "verdict": "REVISE"}})
    assert run(rt, "git stash drop").verdict.kind is VerdictKind.REVISE
    assert run(rt, "git clean -fdx -n").verdict.kind is not VerdictKind.BLOCK  # the default list was replaced


def test_verify_before_submit_revises_once(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    run(rt, "cat calc.py")
    run(rt, TEST)
    run(rt, "sed -i '2s/a - b/a + b/' calc.py")
    held = run(rt, SUBMIT)
    assert held.verdict.kind is VerdictKind.REVISE and not held.executed and "COMPLETE_TASK" not in held.output
    assert "after the last test or script run (step 2" in held.output and "calc.py (step 3)" in held.output
    view = rt.inform()
    assert "Refused at #4 (REVISE, verify-before-submit)" in view
    again = run(rt, SUBMIT)
    assert again.executed and again.verdict.kind is VerdictKind.RUN
    assert again.output.startswith("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git"), "the submission is intact"


def test_verify_before_submit_is_quiet_when_verified(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    run(rt, "cat calc.py")
    run(rt, "sed -i '2s/a - b/a + b/' calc.py")
    run(rt, TEST)
    run(rt, "git diff -- calc.py > patch.txt")  # the patch a submission prints is not code to test
    r = run(rt, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt")
    assert r.executed and r.verdict.kind is VerdictKind.RUN
    # nothing changed at all: nothing to verify
    assert run(runtime(repo, tmp_path / "b"), SUBMIT).verdict.kind is VerdictKind.RUN


def test_refusal_shows_in_the_view_until_the_state_changes(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    run(rt, "git reset --hard")
    assert "Refused at #1 (BLOCK, destructive)" in rt.inform()
    assert "Policies: BLOCK destructive; REVISE protected-paths, verify-before-submit;" in rt.inform()
    run(rt, "cat calc.py")
    assert "Refused at #1" in rt.inform(), "a read changes nothing"
    run(rt, "sed -i '2s/a - b/a + b/' calc.py")
    assert "Refused at" not in rt.inform()


def test_noop_edit(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    run(rt, "cat calc.py")
    nomatch = run(rt, "sed -i 's/no such text/x/' calc.py")
    assert nomatch.verdict.rule == "noop-edit" and "pattern that did not match" in nomatch.output
    missing = run(rt, "sed -i 's/a/b/' nowhere.py")
    assert missing.verdict.kind is VerdictKind.NUDGE and "noop-edit" in missing.verdict.rule
    assert "it failed" in missing.output or "file not found: nowhere.py" in missing.output
    assert run(rt, "sed -i '2s/a - b/a + b/' calc.py").verdict.kind is VerdictKind.RUN
    off = runtime(repo, tmp_path / "b", {"noop-edit": {"enabled": False}, "stale-edit": {"enabled": False}})
    assert run(off, "sed -i 's/no such text/x/' calc.py").verdict.kind is VerdictKind.RUN


def test_repeat_failure_nudges_then_revises(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    first, second, third = (run(rt, TEST) for _ in range(3))
    assert (first.verdict.kind, second.verdict.kind, third.verdict.kind) == (
        VerdictKind.RUN,
        VerdictKind.NUDGE,
        VerdictKind.REVISE,
    )
    assert second.verdict.rule == "repeat-failure" and second.executed and not third.executed
    assert "failed at steps 1, 2" in third.output
    run(rt, "cat calc.py")
    run(rt, "sed -i '2s/a - b/a + b/' calc.py")
    assert run(rt, TEST).verdict.kind is VerdictKind.RUN, "something changed: it runs"
    two = runtime(repo, tmp_path / "b", {"repeat-failure": {"revise_after": 2}})
    (repo / "calc.py").write_text(CALC_PROJECT["calc.py"])
    run(two, TEST)
    assert run(two, TEST).verdict.kind is VerdictKind.REVISE


def run_as(rt: LedgerRuntime, cmd: str, agent: str):
    """``cmd`` proposed by ``agent`` ("": the main model), as a hook adapter drives it: run unless refused."""
    plan = rt.propose(cmd, agent=agent)
    assert plan is not None
    if not plan.verdict.kind.executes:
        return rt.answer(plan)
    return rt.record(plan, EX(cmd, str(rt.workdir)), 0.1)


def test_repeat_failure_counts_each_agents_own_failures(repo, tmp_path):
    """The main model's test run failed twice; a subagent runs it for its first time: it runs, with no note (before, it
    was refused: "change something before running it a 3rd time", which it never ran). Its second run is nudged citing
    its own step only, and the main model's third is refused citing its own two."""
    with runtime(repo, tmp_path) as rt:
        assert [run_as(rt, TEST, "").verdict.kind for _ in range(2)] == [VerdictKind.RUN, VerdictKind.NUDGE]
        sub = run_as(rt, TEST, "helper")
        assert sub.verdict.kind is VerdictKind.RUN and sub.executed and "[ledger]" not in sub.output, sub.output
        again = run_as(rt, TEST, "helper")
        assert again.verdict.kind is VerdictKind.NUDGE and again.verdict.rule == "repeat-failure", again.verdict
        assert "changed since step 3, where this same command failed (exit 1)" in again.output, again.output
        assert "failed at steps" not in again.output, again.output
        main = run_as(rt, TEST, "")
        assert main.verdict.kind is VerdictKind.REVISE and not main.executed, main.verdict
        assert "changed since step 2, where" in main.output and "failed at steps 1, 2;" in main.output, main.output
    assert not (tmp_path / "run" / "faults.log").exists()


def test_the_last_failing_run_a_subagent_made_is_named_the_subagents(repo, tmp_path):
    """The state view the main model reads names a subagent's command "(a subagent's)" in its list, but its "Last
    failing run" line gave the subagent's failed run as a plain "#2 python ...", a run the model never made. It
    names it the subagent's there too; the main model's own failure is named as before."""
    with runtime(repo, tmp_path) as rt:
        for _ in range(2):
            run_as(rt, TEST, "helper")
        view = rt.inform()
        assert "Last failing run: #2 (a subagent's) " in view, view
        run_as(rt, TEST, "")
        view = rt.inform()
        assert "Last failing run: #3 python" in view, view


def test_a_pass_a_subagent_made_since_the_last_failing_run_is_named_the_subagents(repo, tmp_path):
    """The main model's test run failed; a subagent fixed the code and ran the same tests, which passed. The view's
    "since passed: the same command exited 0 at #3" gave the subagent's run as if the model had seen it pass."""
    with runtime(repo, tmp_path) as rt:
        run_as(rt, TEST, "")
        run_as(rt, "sed -i '2s/a - b/a + b/' calc.py", "helper")
        passed = run_as(rt, TEST, "helper")
        assert passed.executed and passed.returncode == 0, passed.output
        view = rt.inform()
        assert "since passed: the same command exited 0 at #3, a subagent's run" in view, view


def test_verify_before_submit_names_a_subagents_test_run_the_subagents(repo, tmp_path):
    """A subagent ran the tests; the main model edited and submitted: "files changed after the last test or script run
    (step 2: `python3 ...`)" gave the subagent's run as one the model had made and seen."""
    with runtime(repo, tmp_path) as rt:
        run_as(rt, "cat calc.py", "")
        run_as(rt, TEST, "helper")
        run_as(rt, "sed -i '2s/a - b/a + b/' calc.py", "")
        held = run_as(rt, SUBMIT, "")
        assert held.verdict.kind is VerdictKind.REVISE, held.verdict
        assert "after the last test or script run (step 2, a subagent's: `python3 -m unittest" in held.output, (
            held.output
        )
    with runtime(repo, tmp_path / "own") as rt:  # the model's own run is named as before
        run_as(rt, TEST, "")
        run_as(rt, "sed -i '2s/a + b/a - b/' calc.py", "")
        held = run_as(rt, SUBMIT, "")
        assert "after the last test or script run (step 1: `python3 -m unittest" in held.output, held.output


def test_stale_edit_reads_only_the_main_models_own_reads(repo, tmp_path):
    """A subagent's read showed calc.py to the subagent: the main model's in-place edit after a change it never saw is
    nudged citing its own read (step 1), not the subagent's (step 2, as 'its last read on record'); and a subagent's
    read after the change does not pass the main model's edit as one of a file it saw."""
    script = "python3 -c \"open('calc.py', 'a').write('# z\\n')\""
    with runtime(repo, tmp_path) as rt:
        run_as(rt, "cat calc.py", "")
        run_as(rt, "cat calc.py", "helper")
        run_as(rt, script, "helper")
        edit = run_as(rt, "sed -i 's/# z/# y/' calc.py", "")
        assert edit.verdict.rule == "stale-edit", edit.verdict
        assert "changed at step 3 by a subagent's `python3" in edit.output, edit.output
        assert "after its last read on record, at step 1;" in edit.output, edit.output
        run_as(rt, "cat calc.py", "")
        run_as(rt, script, "helper")
        run_as(rt, "cat calc.py", "helper")  # the subagent sees the change; the main model does not
        again = run_as(rt, "sed -i 's/# z/# w/' calc.py", "")
        assert again.verdict.rule == "stale-edit", again.verdict
        assert "changed at step 6 by" in again.output and "at step 5;" in again.output, again.output
    assert not (tmp_path / "run" / "faults.log").exists()


def test_the_view_names_only_the_main_models_own_reads_as_seen(repo, tmp_path):
    """The main model read lines 1-3 of calc.py; a subagent read the whole file. The view it reads said "calc.py: whole
    file (steps 1, 2)": it never saw the whole file, nor read it at step 2. After a subagent's script changes it and
    the subagent reads it again, the main model's read is stale, and the view says so (it said the file fresh)."""
    with runtime(repo, tmp_path) as rt:
        run_as(rt, "sed -n 1,3p calc.py", "")
        run_as(rt, "cat calc.py", "helper")
        view = rt.inform()
        assert "calc.py: lines 1-3 (step 1)" in view and "whole file" not in view, view
        run_as(rt, "python3 -c \"open('calc.py', 'a').write('# z\\n')\"", "helper")
        run_as(rt, "cat calc.py", "helper")
        view = rt.inform()
        assert "calc.py: STALE, changed at step 3 by a subagent's `python3" in view, view
        assert "calc.py: +1 -0 (last at step 3 by a subagent's `python3" in view, view
        assert "seen at step 1" in view and "(steps 4)" not in view and "(step 4)" not in view, view
    assert not (tmp_path / "run" / "faults.log").exists()


def test_user_rules_by_dotted_path_and_fail_open(repo, tmp_path):
    rules = {
        "no-docs": {"check": "custom_rules:no_docs", "verdict": "REVISE"},
        "broken": {"check": "custom_rules:broken", "verdict": "BLOCK"},
    }
    rt = runtime(repo, tmp_path, rules)
    r = run(rt, "echo hi > README.md")
    assert r.verdict.kind is VerdictKind.REVISE and r.verdict.rule == "no-docs" and not (repo / "README.md").exists()
    ok = run(rt, "echo hi")
    assert ok.executed and ok.output == "hi\n", "the broken rule raised: treated as ALLOW"
    faults = [json.loads(line) for line in (tmp_path / "run" / "faults.log").read_text().splitlines()]
    assert any(f["where"] == "policy broken (treated as ALLOW)" and "ZeroDivisionError" in f["error"] for f in faults)


def test_policy_configuration_errors_name_the_problem(tmp_path):
    for policies, message in (
        ({"stale-edt": {}}, "unknown policy 'stale-edt'"),
        ({"destructive": {"verdict": "WARN"}}, "verdict must be NUDGE, REVISE or BLOCK"),
        ({"noop-edit": {"treshold": 2}}, "unknown key 'treshold'"),
        ({"noop-edit": {"verdict": "BLOCK"}}, "decided after the command ran"),
        ({"mine": {"check": "no.such.module:f"}}, "cannot load check"),
    ):
        with pytest.raises(ConfigError, match=message):
            LedgerConfig().with_(policies=policies)
    f = tmp_path / "ledger.toml"
    f.write_text(
        '[ledger.policies.protected-paths]\nglobs = ["tests/*"]\n[ledger.policies.stale-edit]\nverdict = "REVISE"\n'
    )
    cfg = load_config(f)
    assert (
        cfg.policies.rules["protected-paths"]["globs"] == ["tests/*"]
        and cfg.policies.rules["stale-edit"]["verdict"] == "REVISE"
    )


def test_codex_denies_a_refused_command(repo, tmp_path):
    from ledger_adapters.codex.hooks import CodexHooks

    rt = runtime(repo, tmp_path)
    hooks = CodexHooks(rt)
    answer = hooks.handle(
        "PreToolUse",
        {"tool_name": "Bash", "tool_input": {"command": "git reset --hard"}, "tool_use_id": "c1", "cwd": str(repo)},
    )
    decision = answer["hookSpecificOutput"]
    assert (
        decision["permissionDecision"] == "deny"
        and "BLOCK by policy destructive" in decision["permissionDecisionReason"]
    )
    assert (
        hooks.handle(
            "PostToolUse",
            {
                "tool_name": "Bash",
                "tool_input": {"command": "git reset --hard"},
                "tool_use_id": "c1",
                "cwd": str(repo),
                "tool_response": "",
            },
        )
        is None
    )
    assert [a.verdict.kind for a in load(tmp_path / "run").state.attempts] == [VerdictKind.BLOCK]


def test_mini_swe_agent_run_with_the_gate(repo, tmp_path):
    """A scripted agent: its destructive command is blocked, its edit of a test is revised, its
    submission after an unverified edit is revised once and then goes through, intact."""
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models.test_models import make_output

    from ledger_adapters.mini.environment import LedgerEnvironment, LedgerModel

    cmds = [
        "cat calc.py test_calc.py",
        "git reset --hard",
        "sed -i 's/5)/-1)/' test_calc.py",
        "sed -i '2s/a - b/a + b/' calc.py",
        SUBMIT,
        SUBMIT,
    ]
    outputs = [
        make_output(f"step {i}\n```mswea_bash_command\n{c}\n```", [{"command": c}], cost=0.0)
        for i, c in enumerate(cmds)
    ]
    env = LedgerEnvironment(
        inner_class="local",
        cwd=str(repo),
        timeout=60,
        ledger={"run_dir": str(tmp_path / "run"), "policies": {"protected-paths": {"globs": list(SWEBENCH_PROTECTED)}}},
    )
    model = LedgerModel(inner_class="deterministic", outputs=outputs, cost_per_call=0.0)
    agent = DefaultAgent(
        model,
        env,
        system_template="You fix bugs.",
        instance_template="{{task}}",
        cost_limit=0,
        step_limit=30,
        output_path=tmp_path / "traj.json",
    )
    try:
        info = agent.run("fix add")
    finally:
        env.cleanup()  # its ledger and watcher, as mini's runners do
    assert info["exit_status"] == "Submitted"
    assert "+    return a + b" in info["submission"] and "test_calc.py" not in info["submission"]
    state = load(tmp_path / "run").state
    assert [(a.verdict.kind.value, a.verdict.rule, a.executed) for a in state.attempts] == [
        ("RUN", None, True),
        ("BLOCK", "destructive", False),
        ("REVISE", "protected-paths", False),
        ("RUN", None, True),
        ("REVISE", "verify-before-submit", False),
        ("RUN", None, True),
    ]
    observations = [m["content"] for m in agent.messages if m["role"] == "user"][1:]
    assert any("[ledger] BLOCK by policy destructive" in o for o in observations)
    assert any("[ledger] REVISE by policy protected-paths" in o for o in observations)
    assert state.attempts[1].verdict.evidence == {"destructive": {"pattern": DESTRUCTIVE[0], "paths": []}}


def test_edit_and_test_in_one_command_counts_as_verified(repo, tmp_path):
    rt = runtime(repo, tmp_path)
    run(rt, "cat calc.py")
    run(rt, f"sed -i '2s/a - b/a + b/' calc.py && {TEST}")
    assert run(rt, SUBMIT).verdict.kind is VerdictKind.RUN


def test_a_submission_that_edits_a_protected_file_is_revised(repo, tmp_path):
    rt = runtime(repo, tmp_path, {"protected-paths": {"globs": ["test_*.py"]}})
    run(rt, "cat test_calc.py")
    r = run(rt, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && sed -i 's/5)/6)/' test_calc.py && git diff")
    assert r.verdict.kind is VerdictKind.REVISE and r.verdict.rule == "protected-paths" and not r.executed


def test_a_rule_with_bad_evidence_or_verdict_fails_open(repo, tmp_path):
    rt = runtime(
        repo,
        tmp_path,
        {
            "odd": {"check": "custom_rules:unserialisable", "verdict": "BLOCK"},
            "weak": {"check": "custom_rules:bad_verdict", "verdict": "NUDGE"},
        },
    )
    r = run(rt, "echo hi")
    assert r.executed and r.verdict.kind is VerdictKind.RUN and r.output == "hi\n"
    assert load(tmp_path / "run").state.attempts[0].command == "echo hi", "the record is kept"
    faults = (tmp_path / "run" / "faults.log").read_text()
    assert "policy odd" in faults and "policy weak" in faults


@pytest.mark.parametrize("check", ["deep", "just_under"])
def test_a_rules_evidence_nested_too_deep_is_its_fault_and_the_command_runs(repo, tmp_path, check):
    """Evidence nested past what json.dumps reaches raised RecursionError where the gate caught TypeError and
    ValueError: a fault before the command, which ran with no record of it. Evidence just under that depth passed the
    gate's check, then failed where the ledger wrote it, nested a few levels deeper in the verdict."""
    rt = runtime(repo, tmp_path, {"deep": {"check": f"custom_rules:{check}", "verdict": "BLOCK"}})
    r = run(rt, "echo hi")
    rt.close()
    assert r.executed and r.verdict.kind is VerdictKind.RUN and r.output == "hi\n"
    assert load(tmp_path / "run").state.attempts[0].command == "echo hi", "the record is kept"
    assert "policy deep" in (tmp_path / "run" / "faults.log").read_text()


def test_parameters_are_checked(tmp_path):
    for policies, message in (
        ({"destructive": {"patterns": "\\bdropdb\\b"}}, "must be a list of strings"),
        ({"destructive": {"extra_patterns": ["(unclosed"]}}, "is not a regular expression"),
        ({"protected-paths": {"globs": "tests/*"}}, "must be a list of strings"),
    ):
        with pytest.raises(ConfigError, match=message):
            LedgerConfig().with_(policies=policies)


def test_a_rule_escalates_but_never_weakens(repo, tmp_path):
    rt = runtime(repo, tmp_path, {"repeat-failure": {"verdict": "BLOCK"}})
    assert run(rt, TEST).verdict.kind is VerdictKind.RUN
    assert run(rt, TEST).verdict.kind is VerdictKind.BLOCK


def test_shadow_and_govern_off_views_tell_the_truth(repo, tmp_path):
    for name, cfg in (("shadow", {"shadow": True}), ("nogovern", {"govern": False})):
        rt = runtime(repo, tmp_path / name, **cfg)
        r = run(rt, "git reset --hard")
        assert r.executed and r.verdict.kind is VerdictKind.BLOCK  # decided and recorded, not acted on
        view = rt.view().text
        assert "not run" not in view and "Policies:" not in view and "Refused at" not in view


def test_a_user_rule_that_hangs_exits_or_interrupts_is_contained(repo, tmp_path):
    """A rule of the user's own has a time limit (past it: a fault, ALLOW); sys.exit() and
    KeyboardInterrupt from a rule are faults too: the command runs."""
    import time

    rules = {
        "slow": {"check": "custom_rules:slow", "verdict": "BLOCK", "time_limit_s": 0.5},
        "exits": {"check": "custom_rules:exits", "verdict": "BLOCK"},
        "interrupts": {"check": "custom_rules:interrupts", "verdict": "BLOCK"},
    }
    rt = runtime(repo, tmp_path, rules)
    t0 = time.monotonic()
    r = run(rt, "echo hi")
    # the rule sleeps 120 s: the step ends at its 0.5 s limit (a bound a loaded machine cannot reach)
    assert time.monotonic() - t0 < 60 and r.executed and r.output == "hi\n"
    text = (tmp_path / "run" / "faults.log").read_text()
    assert "took longer than 0.5 s" in text and "SystemExit" in text and "KeyboardInterrupt" in text
    for bad in (0, -1, "soon", True):
        try:
            LedgerConfig().with_(policies={"slow": {"check": "custom_rules:slow", "time_limit_s": bad}})
            raise AssertionError(f"time_limit_s = {bad!r} accepted")
        except ValueError as e:
            assert "time_limit_s must be a positive number" in str(e)


def test_a_rule_written_for_the_earlier_gate_path_still_loads(repo, tmp_path, monkeypatch):
    """Custom rules of earlier releases import ``ledger_runtime.gate``: they keep working."""
    (tmp_path / "old_rules.py").write_text(
        "from ledger_runtime.gate import Finding\n\n"
        "def no_readme(proposal, state, current, rule):\n"
        "    hits = [w for w in proposal.writes if w.endswith('README.md')]\n"
        "    return Finding('no README edits', {'path': hits[0]}) if hits else None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    rt = runtime(repo, tmp_path / "rt", {"old-readme": {"check": "old_rules:no_readme", "verdict": "REVISE"}})
    r = run(rt, "echo hi > README.md")
    assert r.verdict.kind is VerdictKind.REVISE and r.verdict.rule == "old-readme" and not r.executed


def test_a_destructive_command_is_refused_saying_what_the_ledger_knows_it_discards(repo, tmp_path):
    """In a clean tree 'would throw away work' was false: the refusal says the ledger knows of none;
    with changes, it names them."""
    rt = runtime(repo, tmp_path)
    clean = run(rt, "git checkout -- .")
    assert clean.verdict.kind is VerdictKind.BLOCK and "(the ledger knows of none now)" in clean.output
    assert "throw away" not in clean.output
    run(rt, "sed -i '2s/a - b/a + b/' calc.py")
    dirty = run(rt, "git reset --hard")
    assert dirty.verdict.kind is VerdictKind.BLOCK and "(the ledger knows of changes to calc.py)" in dirty.output
    assert "discards uncommitted work and the files git ignores" in run(rt, "git clean -fdx").output


def _unquoted_by_regex(command: str) -> str:
    """The policies' unquoting as written before its fast paths: every line searched, every regex run."""
    import re

    out: list[str] = []
    delimiter = None
    for line in command.splitlines():
        if delimiter is not None:
            if line.strip() == delimiter:
                delimiter = None
            continue
        out.append(line)
        m = re.search(r"<<-?\s*['\"]?([A-Za-z_][\w-]*)['\"]?", line)
        if m:
            delimiter = m.group(1)
    text = re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", "''", "\n".join(out))
    return re.sub(r"(^|\s)#[^\n]*", r"\1", text)


def test_unquoting_skips_only_regexes_that_cannot_match():
    # the destructive and stale-edit rules read a command through _unquoted, which skips a regex where the text lacks
    # the character it needs ("<<", a quote, "#"): on random commands built of those characters it cuts the same text
    import random

    from ledger_runtime.decide.policies import _unquoted, _unquoted_plain, _without_heredocs

    pieces = [
        "git reset --hard",
        "rm -rf .",
        " ",
        "\t",
        "\n",
        "'",
        '"',
        "\\",
        "#",
        "<<",
        "<<-",
        "EOF",
        "'EOF'",
        "a",
        "<",
    ]
    rng = random.Random(42)
    for _ in range(5000):
        command = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        assert _unquoted(command) == _unquoted_by_regex(command), repr(command)
        assert _unquoted_plain(_without_heredocs(command)) == _unquoted_by_regex(command), repr(command)
