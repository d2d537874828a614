"""What a new user met, round six: each case as the user met it, through the real ``ledger-run`` in a
subprocess with no terminal."""

from __future__ import annotations

import shlex

import pytest
from cli_support import ledger_run, one_line_error
from conftest import make_repo


@pytest.fixture(scope="module")
def spaced_demo(tmp_path_factory):
    """The README's demo, its ``-o`` a path with a space and a non-ASCII letter in it."""
    out = tmp_path_factory.mktemp("demo") / "my runs" / "démo"
    r = ledger_run("demo", "-o", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return out, r


def _command_after(label: str, text: str) -> list[str]:
    """The words of the command printed after ``label`` on its line, as a shell would read them."""
    line = next(ln for ln in text.splitlines() if ln.startswith(label))
    return shlex.split(line[len(label) :])


def test_commands_to_copy_hold_a_path_with_a_space_as_one_word(spaced_demo, tmp_path):
    """``ledger-run demo -o "my runs/d"`` ended with ``look inside: ledger-run inspect /tmp/.../my runs/d/run``:
    pasted into a shell, that is two arguments, and inspect said ``Got unexpected extra argument``. So
    did the replay's ``look inside a replay's ledger:`` and ``config --write``'s ``use it with``."""
    out, r = spaced_demo
    run = str(out / "run")
    assert _command_after("look inside: ", r.stdout) == ["ledger-run", "inspect", run]
    assert _command_after("the state view at a step: ", r.stdout) == ["ledger-run", "inspect", run, "--step", "5"]

    replayed = ledger_run("replay", run, "-o", str(tmp_path / "replay out"))
    assert replayed.returncode == 0, replayed.stderr[-2000:]
    line = next(ln for ln in replayed.stderr.splitlines() if "look inside a replay's ledger: " in ln)
    words = shlex.split(line.split("look inside a replay's ledger: ", 1)[1])
    assert words[:2] == ["ledger-run", "inspect"] and len(words) == 3, replayed.stderr
    assert ledger_run("inspect", words[2]).returncode == 0

    starter = tmp_path / "my settings.toml"
    wrote = ledger_run("config", "--write", str(starter))
    assert wrote.returncode == 0, wrote.stderr
    assert shlex.split(wrote.stderr.split("use it with ", 1)[1]) == ["--ledger-config", str(starter)]


def test_a_run_still_going_is_said_so_by_inspect_and_not_replayed_as_finished(spaced_demo, tmp_path):
    """``ledger-run inspect`` of a run in progress showed its first steps as if that were the run (``--step 3``:
    "past the last step of this ledger"), and ``ledger-run replay`` of it replayed those steps, reported them
    as the whole run, and marked it done: the replay after the run ended skipped it ("1 already replayed")."""
    from ledger_runtime.ledger.private import lock_file

    out, _ = spaced_demo
    run = out / "run"
    lock = lock_file(run / ".lock", "the test's run")  # as the runtime of a run still going holds it
    assert lock is not None
    try:
        r = ledger_run("inspect", str(run))
        assert r.returncode == 0, r.stderr
        assert "the run is still going (pid" in r.stderr and "its ledger so far" in r.stderr
        assert "the run is still going" in one_line_error(ledger_run("inspect", str(run), "--step", "99"))

        replayed = ledger_run("replay", str(run), "-o", str(tmp_path / "replay"))
        said = one_line_error(replayed)
        assert "nothing to replay" in said and "the run is still going" in said and "when it has finished" in said
        assert not (tmp_path / "replay" / "ledgers").exists()
    finally:
        lock.close()
    r = ledger_run("inspect", str(run))
    assert r.returncode == 0 and "still going" not in r.stderr


@pytest.mark.parametrize(
    "policy, says",
    [
        ("bogus", "--context: context must be full, window:M, validity or validity+window:M, not 'bogus'"),
        ("window:0", "--context: context 'window:0': the window must be a whole number of outputs, 1 or more"),
    ],
)
def test_mini_s_context_option_is_named_as_the_user_gave_it(tmp_path, policy, says):
    """``ledger-run mini --context bogus`` said ``error: config: context: context must be ...``: no ``config``
    had been given, and the option was not named (``replay --context bogus`` names it)."""
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    r = ledger_run("mini", "-t", "x", "-w", str(repo), "-y", "--context", policy)
    assert one_line_error(r) == f"error: {says}"


def test_report_of_a_run_sends_the_user_to_inspect(spaced_demo, tmp_path):
    """After ``ledger-run demo`` (or ``mini``), ``ledger-run report RUN`` said ``no arm results here ...; run
    ledger-run swebench -o RUN first``: as if the run were a benchmark's output yet to be made. ``report`` is for
    the arms of ``ledger-run swebench``; a run is looked at with ``inspect``, and one arm's directory is not the
    output either."""
    out, _ = spaced_demo
    for given in (out, out / "run", out / "run" / "ledger.sqlite", out / "run" / "trajectory.traj.json"):
        said = one_line_error(ledger_run("report", str(given), "--no-png"))
        assert "not the output of ledger-run swebench" in said and "run ledger-run swebench" not in said, said
        assert shlex.split(said.split(": ledger-run inspect ", 1)[1]) == [str(given)]
    arm = tmp_path / "ab" / "ledger"
    arm.mkdir(parents=True)
    (arm / "preds.json").write_text("{}")
    said = one_line_error(ledger_run("report", str(arm), "--no-png"))
    assert said.endswith(f"is one arm's results: give the directory above it, which holds the arms ({arm.parent})")
    assert ledger_run("report", str(arm.parent), "--no-png").returncode == 0
    settings = tmp_path / "c.toml"
    settings.write_text("")
    assert "is a file: give the output directory of ledger-run swebench" in one_line_error(
        ledger_run("report", str(settings), "--no-png")
    )


# Gemini CLI ended by a signal (the OOM killer, a `kill` of it): its shell reports 128+15, ledger-run said 241
KILLED_GEMINI = """#!/bin/sh
case "$*" in *--version*) echo "0.61.0"; exit 0;; esac
kill -TERM $$
"""


def test_an_agent_ended_by_a_signal_exits_128_plus_the_signal(tmp_path):
    """An agent killed by SIGTERM made ``ledger-run`` exit 241 (its -15, taken modulo 256): a script checking
    ``$?`` for 143, as for any command a signal ended, saw a number no shell gives; and the warning sent the user
    to "its own message above", which a killed process never printed."""
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    fake = tmp_path / "gemini"
    fake.write_text(KILLED_GEMINI)
    fake.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    args = ("gemini", "--gemini-bin", str(fake), "-w", str(repo), "-o", str(tmp_path / "run"))
    r = ledger_run(*args, "--", "-p", "Fix it", "--yolo", "--skip-trust", env={"HOME": str(home)})
    assert r.returncode == 128 + 15, r.stderr[-2000:]
    said = " ".join(r.stderr.split())
    assert "Gemini CLI was ended by SIGTERM (exit code 143) before its first hook" in said, r.stderr
    assert "its own message above says why" not in said  # a process killed said nothing


def _running_in_group(group: int, grace: float = 10.0) -> list[int]:
    """The processes of process group ``group`` still running (a zombie is not: a killed one waits there until
    whoever inherited it reaps it, which a loaded machine's init takes its time over), after up to ``grace`` s."""
    import time
    from pathlib import Path

    deadline = time.monotonic() + grace
    while True:
        running = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                head, rest = stat.read_text().rsplit(")", 1)
                fields = rest.split()
                if int(fields[2]) == group and fields[0] != "Z":
                    running.append(int(head.split(" (", 1)[0]))
            except (OSError, IndexError, ValueError):
                continue
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.2)


def test_sigterm_to_mini_ends_its_command_and_keeps_the_run(tmp_path):
    """SIGTERM (a ``kill``, a CI job's timeout, a closed terminal's SIGHUP) killed ``ledger-run mini`` at once: no
    summary, no word of where the run was kept, and the command in flight ran on in the work tree after
    ``ledger-run`` had exited (here it would write late.txt 30 s later). It now ends as Ctrl-C does."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from cli_support import scripted_mini_config

    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    pid_file = tmp_path / "command.pid"
    steps = [
        "cat a.py",
        f"echo $$ > {pid_file}; sleep 30; echo late > late.txt",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    ]
    cfg = scripted_mini_config(tmp_path / "scripted.yaml", steps)
    run = tmp_path / "run"
    env = {**os.environ, "MSWEA_SILENT_STARTUP": "1", "MSWEA_CONFIGURED": "1", "COLUMNS": "200"}
    argv = [sys.executable, "-m", "ledger_runtime", "mini", "-c", str(cfg), "-t", "x", "-w", str(repo), "-o", str(run)]
    p = subprocess.Popen(
        [*argv, "-y"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
        written = pid_file.read_text().strip() if pid_file.exists() else ""
        left = _running_in_group(int(written)) if written else []
        for pid in left:  # a command left running is the test's to end (it leads a session of its own)
            os.kill(pid, signal.SIGKILL)
    assert not left, "the command in flight ran on after ledger-run had exited"
    assert p.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert f"SIGTERM: the run ended; the ledger of the steps so far is kept in {run}" in err, err[-2000:]
    assert "look inside: ledger-run inspect" in out and "Traceback" not in err
    assert ledger_run("inspect", str(run), "--step", "1", "--output").stdout == "x = 1\n"


def test_replay_of_a_run_outside_git_says_why_it_has_no_commit(tmp_path):
    """``ledger-run mini`` works in a directory that is not a git repository; replaying that run said only
    ``give --repo DIR ..., or --observations-only``: no word that the run had no repository, and
    --observations-only then refuses it (its outputs are the ledger's answers)."""
    from cli_support import scripted_mini_config

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.py").write_text("x = 1\n")
    cfg = scripted_mini_config(tmp_path / "s.yaml", ["cat a.py", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"])
    run = tmp_path / "runs" / "1"
    r = ledger_run("mini", "-c", str(cfg), "-t", "x", "-w", str(plain), "-o", str(run), "-y")
    assert r.returncode == 0, r.stderr[-2000:]
    said = one_line_error(ledger_run("replay", str(run), "-o", str(tmp_path / "replay")))
    assert f"the run worked in {plain}, which is not a git repository" in said
    assert "--repo DIR and --base-commit COMMIT" in said and "--observations-only" not in said
    # beside a run in a repository, it is skipped with the same reason, not "give --base-commit"
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    r = ledger_run("mini", "-c", str(cfg), "-t", "x", "-w", str(repo), "-o", str(tmp_path / "runs" / "2"), "-y")
    assert r.returncode == 0, r.stderr[-2000:]
    r = ledger_run("replay", str(tmp_path / "runs"), "-o", str(tmp_path / "replay2"))
    assert r.returncode == 0, r.stderr[-2000:]
    skipped = " ".join(r.stdout.split())
    assert f"skipped 1: no base commit: the run worked in {plain}, which is not a git repository" in skipped


def test_replay_s_output_and_report_are_checked_before_it_replays(spaced_demo, tmp_path):
    """``replay RUN -o FILE`` (a file where the results directory goes) ended in a FileExistsError traceback, and
    ``--report DIR`` (a directory) failed only after every trajectory had been replayed: hours, for a benchmark's
    runs. Each is one line now, before anything is replayed."""
    out, _ = spaced_demo
    a_file = tmp_path / "c.toml"
    a_file.write_text("")
    said = one_line_error(ledger_run("replay", str(out / "run"), "-o", str(a_file)))
    assert said == f"error: cannot write results into -o {a_file}: it is a file, not a directory"
    r = ledger_run("replay", str(out / "run"), "-o", str(tmp_path / "r1"), "--report", str(tmp_path))
    assert "it is a directory; name a file, such as" in one_line_error(r)
    assert "Replay of" not in r.stdout + r.stderr and not (tmp_path / "r1").exists()
    r = ledger_run("replay", str(out / "run"), "-o", str(tmp_path / "r2"), "--report", str(a_file / "RESULTS.md"))
    assert f"{a_file} is a file, not a directory" in one_line_error(r)


def test_tau2_gate_s_output_is_checked_before_the_gate_runs(tmp_path):
    """``ledger-run tau2-gate --domain airline -o DIR`` ran the whole gate (about a minute) and then ended in an
    IsADirectoryError traceback."""
    said = one_line_error(ledger_run("tau2-gate", "--domain", "airline", "-o", str(tmp_path)))
    assert (
        said == f"error: cannot write -o {tmp_path}: it is a directory; name a file, such as {tmp_path}/tau2-gate.json"
    )
    a_file = tmp_path / "c.toml"
    a_file.write_text("")
    said = one_line_error(ledger_run("tau2-gate", "--domain", "airline", "-o", str(a_file / "gate.json")))
    assert said == f"error: cannot write -o {a_file}/gate.json: {a_file} is a file, not a directory"


def test_swebench_s_output_that_is_a_file_is_one_line_first(tmp_path):
    """``ledger-run swebench ... -o FILE`` loaded the instances, checked the key and the images, and then ended in a
    FileExistsError traceback making the output directory."""
    instances = tmp_path / "instances.jsonl"
    instances.write_text('{"instance_id": "a__b-1", "repo": "a/b", "base_commit": "0", "problem_statement": "x"}\n')
    a_file = tmp_path / "out"
    a_file.write_text("")
    r = ledger_run("swebench", "--instances", str(instances), "-m", "openai/gpt-5-mini", "-o", str(a_file))
    assert one_line_error(r) == f"error: cannot write results into -o {a_file}: it is a file, not a directory"


def test_a_page_with_another_run_s_record_is_refused(spaced_demo, tmp_path):
    """``inspect RUN --html page --trajectory OTHER`` (another run's trajectory, picked by mistake) wrote the page
    with the other run's model calls, tokens and cost in this run's summary ("model calls 3" for a run of 11), and
    said only ``wrote page``."""
    from cli_support import scripted_mini_config

    out, _ = spaced_demo
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    cfg = scripted_mini_config(tmp_path / "s.yaml", ["cat a.py", "ls", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"])
    other = tmp_path / "other"
    assert ledger_run("mini", "-c", str(cfg), "-t", "x", "-w", str(repo), "-o", str(other), "-y").returncode == 0
    page = tmp_path / "page.html"
    record = other / "trajectory.traj.json"
    said = one_line_error(ledger_run("inspect", str(out / "run"), "--html", str(page), "--trajectory", str(record)))
    assert "only 0 of the 3 commands it records are among this ledger's 11: the record of another run?" in said
    assert not page.exists()
    own = out / "run" / "trajectory.traj.json"
    assert ledger_run("inspect", str(out / "run"), "--html", str(page), "--trajectory", str(own)).returncode == 0


def test_the_replay_s_table_keeps_every_column_at_60_columns(spaced_demo, tmp_path):
    """At ``COLUMNS=60`` the replay's summary lost its last columns without a word: "caugh" and "100" cut, and
    no "ms p50" nor "view p95" at all. Its columns now go over two tables, each with the repository."""
    out, _ = spaced_demo
    r = ledger_run("replay", str(out / "run"), "-o", str(tmp_path / "r"), env={"COLUMNS": "60"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert max(len(line) for line in r.stdout.splitlines()) <= 60, r.stdout
    for header in ("repository", "runs", "commands", "unsound", "spared", "repeated", "caught", "ms p50", "view p95"):
        assert f" {header} " in f" {r.stdout} ".replace("\n", " "), (header, r.stdout)
    assert r.stdout.count("workspace ") == 2 and "100%" in r.stdout


def test_report_s_figure_under_a_file_says_which_file(tmp_path):
    """``report OUT --png notes.txt/fig.png`` said ``cannot write the figure to --png notes.txt/fig.png: File
    exists``: which file, and why it mattered, left to guess."""
    pytest.importorskip("matplotlib")
    for arm in ("ledger", "baseline"):
        (tmp_path / "ab" / arm).mkdir(parents=True)
        (tmp_path / "ab" / arm / "preds.json").write_text("{}")
    notes = tmp_path / "notes.txt"
    notes.write_text("")
    said = one_line_error(ledger_run("report", str(tmp_path / "ab"), "--png", str(notes / "fig.png")))
    assert said == f"error: cannot write the figure to --png {notes}/fig.png: {notes} is a file, not a directory"


def test_html_naming_a_directory_says_so(spaced_demo, tmp_path):
    """``inspect RUN --html DIR`` said "it is not a regular file" of a directory."""
    out, _ = spaced_demo
    folder = tmp_path / "pages"
    folder.mkdir()
    said = one_line_error(ledger_run("inspect", str(out / "run"), "--html", str(folder)))
    assert said.startswith(f"error: cannot write --html {folder}: it is a directory"), said
    assert not any(folder.iterdir())


def test_inspect_of_a_run_without_commands_says_so(tmp_path):
    """A run that recorded no command showed a timeline of headers only."""
    from ledger_runtime.config import LedgerConfig
    from ledger_runtime.runtime import LedgerRuntime

    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    LedgerRuntime(repo, tmp_path / "run", LedgerConfig(), task="t").close()
    r = ledger_run("inspect", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr
    assert "no command is recorded in this ledger" in r.stdout
