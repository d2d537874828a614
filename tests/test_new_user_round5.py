"""What a new user met, round five: each case as the user met it, through the real ``ledger-run`` in a
subprocess with no terminal."""

from __future__ import annotations

import json
import os

import pytest
from cli_support import ledger_run, one_line_error, prompt, scripted_mini_config
from conftest import make_repo


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The run the README's demo makes."""
    out = tmp_path_factory.mktemp("demo") / "d"
    r = ledger_run("demo", "-o", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return out / "run"


@pytest.mark.parametrize(
    "args, says",
    [
        (("--step", "3", "--output", "--expand"), "--output or --expand, not both"),
        (("--step", "3", "--output", "--json"), "not with --output or --expand"),
        (("--step", "3", "--expand", "--json"), "not with --output or --expand"),
        (("--step", "5", "--verdict", "NUDGE"), "--verdict and --class filter the timeline: not with --step"),
        (("--step", "5", "--json", "--class", "run"), "--verdict and --class filter the timeline: not with --step"),
    ],
)
def test_inspect_refuses_a_switch_it_would_drop(demo_run, args, says):
    """``--step 3 --output --json`` printed the plain text (a pipe into jq broke), ``--output --expand``
    only the expansion, ``--step 5 --verdict NUDGE`` the state view as if no filter were given."""
    assert says in one_line_error(ledger_run("inspect", str(demo_run), *args))


# Gemini CLI with no login ends at once, exit code 41, before any hook (as it does on a machine never signed in)
NO_LOGIN_GEMINI = """#!/bin/sh
case "$*" in *--version*) echo "0.61.0"; exit 0;; esac
echo "Please set an Auth method in your settings.json or specify one of the following environment variables" >&2
exit 41
"""


def test_gemini_that_stopped_for_its_login_is_not_blamed_on_trust(tmp_path):
    """The README's ``ledger-run gemini ... --yolo --skip-trust`` without a login: Gemini CLI said why and
    exited 41, then ledger-run warned that hooks run only in a trusted folder, "pass --skip-trust", which
    the user had passed."""
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    fake = tmp_path / "gemini"
    fake.write_text(NO_LOGIN_GEMINI)
    fake.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    args = ("gemini", "--gemini-bin", str(fake), "-w", str(repo), "-o", str(tmp_path / "run"))
    r = ledger_run(*args, "--", "-p", "Fix it", "--yolo", "--skip-trust", env={"HOME": str(home)})
    assert r.returncode == 41, r.stderr[-2000:]
    said = " ".join(r.stderr.split())
    assert "no hook of Gemini CLI reached the ledger" in said, said
    assert "trusted folder" not in said and "ended with exit code 41 before its first hook" in said, said


@pytest.mark.slow
def test_the_bound_s_row_of_the_cost_table_shows_only_what_it_has(demo_run, tmp_path):
    """docs/context.md's replay with --context and --price-model, on the demo's run: the bound (an input cost
    and its rewrites, nothing else) read 0 prompt tokens, 0 notes and a total of $0.00, below its own input cost."""
    report = tmp_path / "RESULTS.md"
    traj = demo_run / "trajectory.traj.json"
    args = ("--context", "full,validity", "--price-model", "gpt-5-mini", "--report", str(report))
    r = ledger_run("replay", str(traj), "-o", str(tmp_path / "out"), *args)
    assert r.returncode == 0, r.stderr[-2000:]
    row = next(ln for ln in report.read_text().splitlines() if ln.startswith("| bound |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:5] == ["-"] * 4 and cells[9] == "-" and cells[10] == "-", row  # tokens, total, notes
    assert cells[11] != "-", row  # its rewrites
    shown = {ln.split("  ")[1].strip(): ln.split() for ln in r.stdout.splitlines() if ln.startswith("  ")}
    assert shown["prompt tokens"][-1] == "-" and shown["total USD"][-1] == "-", r.stdout  # the bound is the last arm


def test_a_directory_with_no_ledger_is_named_as_given(tmp_path):
    """``inspect /tmp`` said "not a ledger: /tmp/ledger.sqlite: no ledger.sqlite in this directory"."""
    (tmp_path / "empty").mkdir()
    error = one_line_error(ledger_run("inspect", str(tmp_path / "empty")))
    assert error == f"error: not a ledger: {tmp_path / 'empty'}: no ledger.sqlite in this directory", error


@pytest.mark.slow
def test_a_replay_says_where_its_ledgers_are(demo_run, tmp_path):
    """docs/swebench.md's ``ledger-run demo -o d && ledger-run replay d/run/trajectory.traj.json -o replay-d``
    printed its tables and nothing of where anything went; ``inspect replay-d`` then found no ledger."""
    out = tmp_path / "replay-d-in-a-directory-whose-name-is-long-enough-to-break-a-line-at-80"
    r = ledger_run("replay", str(demo_run / "trajectory.traj.json"), "-o", str(out), env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr[-2000:]
    # and the lines naming paths are whole: --workdir's broke mid-name at 80 columns
    assert any(ln.startswith(f"--workdir: {out / 'worktree'} (the recorded") for ln in r.stderr.splitlines()), r.stderr
    line = next((ln for ln in r.stderr.splitlines() if ln.startswith("results: ")), r.stderr[-1000:])
    command = line.split("look inside a replay's ledger: ")[-1]
    assert command.startswith("ledger-run inspect "), line
    shown = ledger_run(*command.split()[1:])
    assert shown.returncode == 0 and "steps / commands" in shown.stdout, shown.stderr[-1000:]


def test_a_rule_of_your_own_that_does_not_import_says_what_to_do(tmp_path):
    """docs/policies.md's ``check = "my_rules:no_docs"``, with my_rules.py beside the file: "No module named
    'my_rules'" and nothing on how ledger-run finds a module (its directory on PYTHONPATH)."""
    (tmp_path / "my_rules.py").write_text("def no_docs(proposal, state, signatures, rule):\n    return None\n")
    settings = tmp_path / "ledger.toml"
    settings.write_text('[ledger.policies.no-docs]\ncheck = "my_rules:no_docs"\nverdict = "REVISE"\n')
    elsewhere = tmp_path / "elsewhere"  # not the current directory, which ``python -m`` would put on sys.path
    elsewhere.mkdir()
    error = one_line_error(ledger_run("config", "--check", str(settings), cwd=elsewhere))
    assert "No module named 'my_rules' (a module of your own: put its directory on PYTHONPATH)" in error, error
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    r = ledger_run("config", "--check", str(settings), cwd=elsewhere, env={"PYTHONPATH": path})
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("agent", ["codex", "claude", "gemini", "opencode"])
def test_an_agent_binary_not_found_says_where_it_was_looked_for(agent, tmp_path):
    """``LEDGER_CODEX_BIN=/x ledger-run codex`` said "codex not found on PATH", of a variable the docs name as the
    default of --codex-bin; ``--codex-bin FILE`` of a file that is not executable said "not found at FILE"."""
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    variable = f"LEDGER_{agent.upper()}_BIN"
    missing = tmp_path / "none"
    args = (agent, "-w", str(repo), "-o", str(tmp_path / "run"))
    error = one_line_error(
        ledger_run(*args, "--", *prompt(agent), env={variable: str(missing), "PATH": "/usr/bin:/bin"})
    )
    assert f"{agent} not found at {missing} (${variable}, set: it alone is looked for): install" in error, error
    # the agent on PATH is not taken in its place: a variable naming a program not there is a mistake to say
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / agent).write_text("#!/bin/sh\necho 0.0.1\n")
    (on_path / agent).chmod(0o755)
    env = {variable: str(missing), "PATH": f"{on_path}:/usr/bin:/bin"}
    error = one_line_error(ledger_run(*args, "--", *prompt(agent), env=env))
    assert f"{agent} not found at {missing} (${variable}, set: it alone is looked for): install" in error, error
    plain = tmp_path / "plain"
    plain.write_text("not a program\n")
    error = one_line_error(ledger_run(*args, f"--{agent}-bin", str(plain), "--", *prompt(agent)))
    assert f"{agent} not found at {plain} (not an executable file): install" in error, error


def test_report_html_never_replaces_a_file_it_did_not_write(tmp_path):
    """``ledger-run report OUT --html FILE`` wrote its page over any file: a note of the user's, or the arm's
    own preds.json (inspect --html replaces only a page ledger-run wrote)."""
    preds = tmp_path / "out" / "baseline" / "preds.json"
    preds.parent.mkdir(parents=True)
    preds.write_text(json.dumps({"a__b-1": {"model_patch": "", "model_name_or_path": "m"}}))
    before = preds.read_text()
    for target in (preds, tmp_path / "notes.txt"):
        if not target.exists():
            target.write_text("my notes\n")
        kept = target.read_text()
        error = one_line_error(ledger_run("report", str(tmp_path / "out"), "--no-png", "--html", str(target)))
        assert "not a page ledger-run wrote (the only file it replaces)" in error, error
        assert target.read_text() == kept
    assert preds.read_text() == before
    page = tmp_path / "arms.html"
    for _ in range(2):  # a page it wrote is replaced
        r = ledger_run("report", str(tmp_path / "out"), "--no-png", "--html", str(page))
        assert r.returncode == 0 and page.read_text().startswith("<!DOCTYPE html>"), r.stderr[-2000:]


def test_price_model_without_context_is_refused(demo_run, tmp_path):
    """``replay RUN --price-model claude-sonnet-4-5`` replayed and printed no cost at all: the option, whose help
    says "With --context", was dropped without a word."""
    traj = str(demo_run / "trajectory.traj.json")
    error = one_line_error(ledger_run("replay", traj, "--price-model", "claude-sonnet-4-5", "-o", str(tmp_path / "o")))
    assert "--price-model goes with --context" in error, error
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_mini_image_without_a_container_environment_is_refused(tmp_path):
    """``ledger-run mini --image python:3.11`` without --environment-class docker ran every command here, on
    this machine, the image dropped without a word."""
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    cfg = scripted_mini_config(tmp_path / "cfg.yaml", ["touch ran-here", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"])
    r = ledger_run(
        "mini", "-c", str(cfg), "-t", "x", "-w", str(repo), "-o", str(tmp_path / "run"), "-y", "--image", "python:3.11"
    )
    assert "--image python:3.11 is for a container environment" in one_line_error(r)
    assert not (repo / "ran-here").exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize("columns", [56, 60, 63])
def test_a_narrow_terminal_keeps_the_verdicts_in_the_timeline(demo_run, columns):
    """Below 64 columns (a terminal split in two) the timeline lost its verdict column whole: step 5's NUDGE and
    its rule were nowhere, while the files column kept 18 characters."""
    r = ledger_run("inspect", str(demo_run), env={"COLUMNS": str(columns)})
    assert r.returncode == 0, r.stderr[-2000:]
    timeline = r.stdout.split("Summary")[0]
    assert "NUDGE" in timeline and "repeat-failure" in timeline, timeline
    assert max(len(line) for line in timeline.splitlines()) <= columns, timeline


@pytest.mark.slow
def test_a_replay_of_several_runs_of_ledger_run_replays_each(tmp_path):
    """``ledger-run replay ledger-runs/`` (or two demos' trajectories): every run's trajectory is
    ``trajectory.traj.json``, all were the instance "trajectory", and all but the first were skipped as "a second
    trajectory of trajectory"."""
    for name in ("one", "two"):
        r = ledger_run("demo", "-o", str(tmp_path / name))
        assert r.returncode == 0, r.stderr[-2000:]
    trajs = [str(tmp_path / name / "run" / "trajectory.traj.json") for name in ("one", "two")]
    r = ledger_run("replay", *trajs, "-o", str(tmp_path / "out"), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["skipped"] == [], r.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "out" / "ledgers").iterdir()) == ["one", "two"]


def test_a_mini_config_that_is_not_yaml_is_named_with_its_line(tmp_path):
    """``ledger-run mini -c my.yaml`` with a YAML slip said "error: -c: while parsing a flow node": which of the
    -c files, and where in it, unsaid."""
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    bad = tmp_path / "my.yaml"
    bad.write_text("model:\n  model_kwargs: {temperature: 0\n")
    args = ("-c", "mini.yaml", "-c", str(bad), "-t", "x", "-w", str(repo), "-o", str(tmp_path / "run"), "-y")
    r = ledger_run("mini", *args, "-m", "openai/gpt-5-mini", env={"OPENAI_API_KEY": "x"})
    error = one_line_error(r)
    assert f"-c {bad}: not valid YAML: " in error and "at line 3, column 1" in error, error


def test_a_directory_of_runs_names_one_to_inspect(demo_run):
    """``ledger-run inspect ledger-runs`` (the README says ``ledger-runs/<timestamp>``), or the work tree, or a
    replay's -o: "no ledger.sqlite in this directory", and nothing of the runs under it."""
    holder = demo_run.parent.parent  # the demo's -o directory is in it
    error = one_line_error(ledger_run("inspect", str(holder)))
    assert f"no ledger.sqlite in this directory; it holds a run: ledger-run inspect {demo_run.parent}" in error, error
    r = ledger_run(*error.split("ledger-run ", 1)[1].split())
    assert r.returncode == 0 and "steps / commands" in r.stdout, r.stderr[-1000:]


def test_inspect_html_says_where_in_one_line(demo_run, tmp_path):
    """At 80 columns (any pipe or log) a page's path of 75 characters or more went to a line of its own under
    "wrote "."""
    page = tmp_path / ("a-page-with-a-name-long-enough-to-pass-eighty-columns" + "x" * 20 + ".html")
    r = ledger_run("inspect", str(demo_run), "--html", str(page), env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.splitlines() == [f"wrote {page}"], r.stderr


@pytest.mark.slow
def test_mini_s_last_lines_are_whole_at_80_columns(tmp_path):
    """``ledger-run mini -o LONG/PATH`` at 80 columns: "look inside: ledger-run inspect" on one line, the path
    broken mid-name over the next two (the demo's were made whole in round four)."""
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    cfg = scripted_mini_config(tmp_path / "cfg.yaml", ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"])
    run = tmp_path / "a-directory-with-a-name-long-enough-to-break-a-line" / "of-runs"
    r = ledger_run("mini", "-c", str(cfg), "-t", "x", "-w", str(repo), "-o", str(run), "-y", env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr[-2000:]
    lines = (r.stdout + r.stderr).splitlines()
    assert f"look inside: ledger-run inspect {run}" in lines, lines[-5:]
    assert f"ledger: {run / 'ledger.sqlite'}" in lines, lines[-5:]


def test_report_counts_one_instance_in_the_singular(tmp_path):
    """``ledger-run report`` of two arms of one instance: "1 common instances"."""
    for arm in ("baseline", "ledger"):
        (tmp_path / "out" / arm).mkdir(parents=True)
        preds = {"a__b-1": {"model_patch": "", "model_name_or_path": "m"}}
        (tmp_path / "out" / arm / "preds.json").write_text(json.dumps(preds))
    r = ledger_run("report", str(tmp_path / "out"), "--no-png")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ledger vs baseline: 1 common instance, not scored" in " ".join(r.stdout.split()), r.stdout
