"""The run's page (``ledger-run inspect RUN --html FILE``) against hostile or broken input: what it is
written over, a crafted ledger whose records collide, the page's own Content-Security-Policy, and
what a headless chromium runs of markup planted in the ledger and the agent's record."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from browser import Browser
from cli_support import ledger_run as cli
from conftest import make_repo

from ledger_runtime.cli.html import unpacked
from ledger_runtime.cli.html_run import run_page
from ledger_runtime.cli.record import _received_under_masks
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.inspection import load
from ledger_runtime.runtime import LedgerRuntime
from ledger_runtime.trajectories import TrajectoryError

FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n"
    + "".join(f"\n\ndef f{i}(x):\n    return x + {i}\n" for i in range(9))
}
COMMANDS = ["cat calc.py", "sed -n '1,4p' calc.py", "sed -i 's/a - b/a + b/' calc.py", "cat calc.py", "echo done"]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A real run's directory, with a mini-swe-agent record beside its ledger."""
    base = tmp_path_factory.mktemp("page-attacks")
    repo = make_repo(base / "repo", FILES)
    rt = LedgerRuntime(repo, base / "run", LedgerConfig(), task="make add add")
    try:
        for c in COMMANDS:
            rt.run(c, LocalExecutor())
    finally:
        rt.close()
    messages = [{"role": "system", "content": "You fix code."}, {"role": "user", "content": "make add add"}]
    for c in COMMANDS:
        messages += [
            {"role": "assistant", "content": f"run {c}", "extra": {"actions": [{"command": c}]}},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"},
        ]
    info = {"ledger": {"path": str(base / "run" / "ledger.sqlite")}}
    (base / "run" / "trajectory.traj.json").write_text(json.dumps({"info": info, "messages": messages}))
    return base / "run"


def made_repo(run_dir: Path) -> Path:
    """The work tree of the module's run (its copies name it)."""
    run = sqlite3.connect(run_dir / "ledger.sqlite").execute("SELECT body FROM events WHERE kind = 'run'").fetchone()
    return Path(json.loads(run[0])["workdir"])


@pytest.fixture
def run_dir(made: Path, tmp_path: Path) -> Path:
    """A copy of the run, the test's own to change, its record naming the copy's ledger."""
    shutil.copytree(made, tmp_path / "run")
    record = tmp_path / "run" / "trajectory.traj.json"
    data = json.loads(record.read_text())
    data["info"]["ledger"]["path"] = str(tmp_path / "run" / "ledger.sqlite")
    record.write_text(json.dumps(data))
    return tmp_path / "run"


def test_the_page_is_never_written_over_the_ledger_or_the_agent_s_record(run_dir: Path, tmp_path: Path) -> None:
    ledger, record = run_dir / "ledger.sqlite", run_dir / "trajectory.traj.json"
    before = ledger.read_bytes(), record.read_bytes()
    mine = tmp_path / "notes.txt"
    mine.write_text("the user's own notes\n")
    site = tmp_path / "index.html"  # a web project's page: an HTML page, not one of ledger-run's
    site.write_text(
        '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>Shop</title></head></html>\n'
    )
    minified = tmp_path / "min.html"
    minified.write_text('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport"></head>')
    for target in (ledger, record, mine, site, minified):
        r = cli("inspect", str(run_dir), "--html", str(target))
        assert r.returncode == 2 and r.stderr.startswith("error: cannot write --html "), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "not a page" in r.stderr, r.stderr
    assert (ledger.read_bytes(), record.read_bytes()) == before, "the ledger and the record are as they were"
    assert (
        mine.read_text() == "the user's own notes\n"
        and "Shop" in site.read_text()
        and "viewport" in minified.read_text()
    )
    assert len(load(run_dir).state.attempts) == len(COMMANDS)
    page = tmp_path / "run.html"
    for _ in range(2):  # a page, then a page over it
        r = cli("inspect", str(run_dir), "--html", str(page))
        assert r.returncode == 0, r.stderr
    assert page.read_text().startswith("<!DOCTYPE html>") and page.stat().st_mode & 0o777 == 0o600
    old = tmp_path / "old.html"  # a page of an earlier ledger-run (no generator named): replaced
    old.write_text('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Run</title></head></html>\n')
    assert cli("inspect", str(run_dir), "--html", str(old)).returncode == 0 and "ledger-run" in old.read_text()
    empty = tmp_path / "empty.html"
    empty.touch()  # made by mktemp, say: written
    assert cli("inspect", str(run_dir), "--html", str(empty)).returncode == 0 and empty.stat().st_size > 0


def add_events(run_dir: Path, *events: tuple[str, int, dict]) -> None:
    """Events (kind, step, body) appended to the run's ledger, as a crafted ledger may hold them."""
    db = sqlite3.connect(run_dir / "ledger.sqlite")
    for kind, step, body in events:
        db.execute("INSERT INTO events (kind, step, at, body) VALUES (?, ?, 0, ?)", (kind, step, json.dumps(body)))
    db.commit()
    db.close()


def sections(page: str) -> list[str]:
    return re.findall(r'<section class="step" id="([^"]*)"', page)


def test_attempts_that_share_an_id_each_keep_their_own_section_and_packed_body(run_dir: Path, tmp_path: Path) -> None:
    first = load(run_dir).state.attempts[0]
    copy = {**first.to_dict(), "step": 40, "command": "echo a later attempt under the same id"}
    add_events(run_dir, ("attempt", 40, copy))
    loaded = load(run_dir)
    assert len(loaded.state.attempts) == len(COMMANDS) + 1, "both records kept"
    inline = run_page(loaded)
    packed = run_page(load(run_dir), inline_limit=0, inline_head=0)
    for page in (inline, packed):
        ids = sections(page)
        assert len(ids) == len(COMMANDS) + 1 and len(set(ids)) == len(ids), ids
        assert ids[0] == "step-1" and ids[-1] == "step-40", "each section by its own step"
    bodies = unpacked(packed) or {}
    assert list(bodies) == sections(packed), "a packed body per section, none lost to another's id"
    assert "return a - b" in bodies["step-1"][1], "step 1's output is step 1's"
    r = cli("inspect", str(run_dir), "--html", str(tmp_path / "p.html"))
    assert r.returncode == 1 and "damaged: attempt event" in r.stderr and "its id 1 is" in r.stderr, r.stderr


# Markup as a run could hold it; were the page ever to leave it unescaped, each would set a mark
PLANTED = (
    '<img src="x" onerror="document.body.dataset.ran=1">'
    "<script>document.body.dataset.ran=2</script>"
    '<svg><animate onbegin="document.body.dataset.ran=3" attributeName="x" dur="1s"/></svg>'
    '<link rel="stylesheet" href="data:text/css,body{color:red}"><style>body{background:rgb(1,2,3)}</style>'
)


@pytest.mark.browser
def test_the_page_s_policy_runs_its_own_script_and_style_and_nothing_planted(made: Path, tmp_path: Path) -> None:
    """The page's Content-Security-Policy lets the browser run the page's script and apply its style,
    and nothing else: markup that reached the page unescaped (put in by hand here, as no text of the
    run does) runs no script and no handler, and loads no style. The inline and the packed page alike."""
    b = Browser(1280, 900)
    try:
        for name, limits in (("inline", {}), ("packed", {"inline_limit": 0, "inline_head": 0})):
            text = run_page(load(made), **limits)
            assert text.count('http-equiv="Content-Security-Policy"') == 1 and "default-src 'none'" in text
            page = tmp_path / f"{name}.html"
            page.write_text(text.replace("<h1>", PLANTED + "<h1>", 1))
            b.open(page)  # the page's own script ran: ready
            assert b.js("document.body.dataset.ran || ''") == "", name
            assert b.js("getComputedStyle(document.body).backgroundColor") != "rgb(1, 2, 3)", name
            assert b.js("getComputedStyle(document.body).color") == "rgb(29, 29, 31)", "the page's own style applies"
            assert b.js("document.body.dataset.errors || ''") == "", name
            b.js("location.hash='#step-5'")
            b.js("new Promise(function(r){setTimeout(r,500);})")
            assert "done" in b.js("document.querySelector('#step-5 pre.shown').textContent"), name
            b.type("#search", "sed -i")
            assert b.js("count.textContent") == f"1 of {len(COMMANDS)} steps", "the search works"
    finally:
        b.close()


TOKEN = "q8Zt2LmW9xPa4KcR"  # no token's shape: the ledger masks it as the run's environment's value alone


def test_a_value_the_ledger_masked_in_an_output_is_masked_in_the_model_s_words(tmp_path: Path, monkeypatch) -> None:
    """The run's environment held a secret, which a command printed: the ledger kept the output masked,
    and the model, which got it as printed, said it in its words. The page, which never knew the run's
    environment, reads the value off the agent's record where the ledger's output has it masked, and
    masks it in the model's words (inline and packed alike)."""
    monkeypatch.setenv("ACME_API_TOKEN", TOKEN)
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    commands = ["printenv ACME_API_TOKEN", "cat a.py"]
    with LedgerRuntime(repo, tmp_path / "run", LedgerConfig()) as rt:
        for c in commands:
            rt.run(c, LocalExecutor())
    monkeypatch.delenv("ACME_API_TOKEN")
    said = [("look", "let me see"), (f"So the token printed is {TOKEN}; now a.py", f"I got {TOKEN}.")]
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"}]
    for c, (text, thought), out in zip(commands, said, [TOKEN + "\n", "x = 1\n"]):
        messages += [
            {
                "role": "assistant",
                "content": text,
                "reasoning_content": thought,
                "extra": {"actions": [{"command": c}]},
            },
            {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{out}</output>"},
        ]
    info = {"ledger": {"path": str(tmp_path / "run" / "ledger.sqlite")}}
    (tmp_path / "run" / "trajectory.traj.json").write_text(json.dumps({"info": info, "messages": messages}))
    loaded = load(tmp_path / "run")
    assert TOKEN not in loaded.transcript().shown(loaded.state.attempts[0]), "the ledger kept it masked"
    for limits in ({}, {"inline_limit": 0, "inline_head": 0}):
        page = run_page(load(tmp_path / "run"), **limits)
        assert "So the token printed is" in page or unpacked(page), limits
        assert TOKEN not in page and TOKEN not in json.dumps(unpacked(page)), limits
    words = (unpacked(run_page(loaded, inline_limit=0, inline_head=0)) or {})["step-2"][0]
    assert "So the token printed is " + "*" * len(TOKEN) in words


def test_what_is_read_under_a_mask_is_the_record_s_text_in_the_same_place() -> None:
    kept = "user: admin\ntoken: ****************\nok\n"
    got = "<output>\nuser: admin\ntoken: " + TOKEN + "\nok\n</output>"
    assert _received_under_masks(kept, ["unrelated", got]) == {TOKEN}
    # a line all masked is found by the lines around it, not by any line of its length
    decoy = "<returncode>0</returncode>\nABCDEFGHIJKLMNOP\n"
    assert _received_under_masks("start\n****************\nend\n", [decoy, f"start\n{TOKEN}\nend\n"]) == {TOKEN}
    assert _received_under_masks("****************\n", [f"<output>\n{TOKEN}\n</output>"]) == {TOKEN}
    # stars the output itself holds are no mask; an output the record does not hold teaches nothing
    assert _received_under_masks("a ***** b\n", ["a ***** b\n"]) == set()
    assert _received_under_masks("token: ****************\n", ["token: short\n"]) == set()


def test_codex_s_record_keeps_each_call_s_outputs_for_what_the_ledger_masked(tmp_path: Path) -> None:
    from ledger_adapters.codex.rollout import conversation

    call = {"type": "function_call", "name": "shell", "arguments": json.dumps({"command": ["bash", "-lc", "env"]})}
    items = [
        {"type": "session_meta"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "t"}]},
        call,
        {"type": "function_call_output", "output": json.dumps({"output": f"TOKEN={TOKEN}\n", "metadata": {}})},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"it is {TOKEN}"}]},
    ]
    path = tmp_path / "rollout-1.jsonl"
    path.write_text("".join(json.dumps({"type": "response_item", "payload": p}) + "\n" for p in items))
    turns = conversation(path).turns
    assert turns[0].commands == ("env",) and f"TOKEN={TOKEN}\n" in turns[0].received
    assert _received_under_masks("TOKEN=****************\n", turns[0].received) == {TOKEN}


def test_gemini_s_record_keeps_each_call_s_output_for_what_the_ledger_masked(tmp_path: Path) -> None:
    """Gemini CLI's session file is read as it is (unmasked, in the run's own home): the page learns what the
    ledger masked from each call's output there, as for Codex, or the model saying it showed it on the page."""
    from ledger_adapters.gemini.session import conversation

    call = {"id": "c", "name": "run_shell_command", "args": {"command": "env"}, "status": "success"}
    call["result"] = [{"functionResponse": {"response": {"output": f"Output: TOKEN={TOKEN}\nExit Code: 0"}}}]
    lines = [
        {"sessionId": "s", "projectHash": "h"},
        {"id": "m1", "type": "user", "content": [{"text": "fix it"}]},
        {"id": "m2", "type": "gemini", "content": f"it is {TOKEN}", "toolCalls": [call, {"id": "d", "result": 5}]},
    ]
    path = tmp_path / "session-1.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    turns = conversation(path).turns
    assert turns[0].commands == ("env",) and turns[0].received[0] == f"Output: TOKEN={TOKEN}\nExit Code: 0"
    assert _received_under_masks("TOKEN=****************\n", turns[0].received) == {TOKEN}


@pytest.mark.parametrize("planted", ["fifo", "/dev/zero", "directory"])
def test_a_record_that_is_no_regular_file_is_never_read(run_dir: Path, tmp_path: Path, planted: str) -> None:
    """Beside the ledger, under a record's name of each format, a FIFO (a read blocks for ever), a link
    to /dev/zero (a read never ends) or a directory: the page is written without them, in seconds."""
    names = [
        run_dir / "planted.traj.json",  # mini-swe-agent
        run_dir / "codex-home" / "sessions" / "2026" / "rollout-1.jsonl",  # Codex
        run_dir / "gemini" / "home" / ".gemini" / "tmp" / "p" / "chats" / "session-1.jsonl",  # Gemini CLI
        run_dir / "sessions" / "ses_1.json",  # OpenCode
    ]
    for name in names:
        name.parent.mkdir(parents=True, exist_ok=True)
        if planted == "fifo":
            os.mkfifo(name)
        elif planted == "directory":
            name.mkdir()
        else:
            name.symlink_to(planted)
    page = tmp_path / "p.html"

    def written() -> str:
        argv = [sys.executable, "-m", "ledger_runtime", "inspect", str(run_dir), "--html", str(page)]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        return page.read_text()

    assert "run cat calc.py" in written(), "the run's own record is read as ever"
    (run_dir / "trajectory.traj.json").unlink()  # without it, the others are looked at: found, not read
    text = written()
    assert f"{names[1]}: not a regular file" in text or f"{names[2]}: not a regular file" in text, text[-3000:]
    fifo = names[0]
    r = cli("inspect", str(run_dir), "--html", str(page), "--trajectory", str(fifo))
    assert r.returncode == 2 and r.stderr.startswith("error: --trajectory"), r.stderr
    from ledger_adapters.mini.trajectories import conversation

    with pytest.raises(TrajectoryError, match="not a regular file|cannot read"):
        conversation(fifo)


def test_an_integer_too_long_for_python_is_a_damaged_field_and_the_record_stays(run_dir: Path, tmp_path: Path) -> None:
    """An event whose body holds an integer of 5,000 digits (Python reads none past 4,300) was read
    as a fault in the event's place: its attempt was gone from the page, the timeline and --json, with
    nothing said. The field is named as damaged; the attempt stays. A body that is no JSON at all is
    said too (its record cannot be had back)."""
    db = sqlite3.connect(run_dir / "ledger.sqlite")
    db.execute("DROP TRIGGER events_no_update")
    seq, body = db.execute("SELECT seq, body FROM events WHERE kind = 'attempt' ORDER BY seq LIMIT 1").fetchone()
    db.execute(
        "UPDATE events SET body = ? WHERE seq = ?", (body.replace('"exit_code":0', '"exit_code":' + "9" * 5000), seq)
    )
    db.commit()
    db.close()
    loaded = load(run_dir)
    assert len(loaded.state.attempts) == len(COMMANDS) and loaded.state.attempts[0].exit_code is None
    page = tmp_path / "p.html"
    r = cli("inspect", str(run_dir), "--html", str(page))
    assert r.returncode == 1 and f"damaged: attempt event {seq}: exit_code is" in r.stderr, r.stderr
    assert "cat calc.py</pre>" in page.read_text()
    db = sqlite3.connect(run_dir / "ledger.sqlite")
    db.execute("INSERT INTO events (kind, step, at, body) VALUES ('attempt', 9, 0, '{\"id\": 9, \"command\"')")
    db.commit()
    db.close()
    r = cli("inspect", str(run_dir))
    assert r.returncode == 1 and "damaged: event" in r.stderr and "its body does not read" in r.stderr, r.stderr


def test_a_short_password_the_ledger_masked_in_a_command_is_masked_in_the_model_s_words(tmp_path: Path) -> None:
    """The ledger masks a password of 7 characters given to mysql -p; the page read it off the record's
    command but kept only values of 8 characters or more (the bar for guessing at an environment's
    secrets), so the model's words showed it."""
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    c = "mysql -uroot -phunter2 shop -e 'select 1'"
    with LedgerRuntime(repo, tmp_path / "run", LedgerConfig()) as rt:
        rt.run(c, LocalExecutor())
    assert "hunter2" not in load(tmp_path / "run").state.attempts[0].command, "the ledger masked it"
    messages = [
        {"role": "user", "content": "t"},
        {
            "role": "assistant",
            "content": "The password hunter2 is in .env",
            "extra": {"actions": [{"command": c}]},
        },
        {"role": "user", "content": "<returncode>127</returncode>\n<output>\n</output>"},
    ]
    info = {"ledger": {"path": str(tmp_path / "run" / "ledger.sqlite")}}
    (tmp_path / "run" / "trajectory.traj.json").write_text(json.dumps({"info": info, "messages": messages}))
    page = run_page(load(tmp_path / "run"))
    assert "The password ******* is in .env" in page and "hunter2" not in page


def test_a_record_s_absurd_tokens_cost_and_times_are_unknown_on_the_page(run_dir: Path, tmp_path: Path) -> None:
    """The agent's record said a call took a number of tokens of 4,300 digits (as many as Python reads):
    the page's sum of two such calls cannot be printed, and the page failed with a traceback. Tokens,
    cost and time that no call could have (too long, negative, NaN, infinite) are shown as unknown."""
    record = run_dir / "trajectory.traj.json"
    data = json.loads(record.read_text())
    calls = [m for m in data["messages"] if m["role"] == "assistant"]
    for m, cost in zip(calls, ["NaN", "Infinity", "-1", "1e400", "0.5"]):
        m["extra"]["response"] = {"usage": {"prompt_tokens": "HUGE", "completion_tokens": -5}}
        m["extra"]["cost"] = cost
    text = json.dumps(data).replace('"HUGE"', "9" * 4300)
    for cost in ["NaN", "Infinity", "-1", "1e400"]:
        text = text.replace(f'"cost": "{cost}"', f'"cost": {cost}')
    record.write_text(text.replace('"cost": "0.5"', '"cost": 0.5'))
    page = tmp_path / "p.html"
    r = cli("inspect", str(run_dir), "--html", str(page))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    shown = page.read_text()
    assert "999999999" not in shown and "$nan" not in shown and "$inf" not in shown and "-5 out" not in shown
    assert "run cat calc.py" in shown and "$0.50" in shown, "the rest of the record is shown"


@pytest.mark.parametrize("field", ["duration_s", "exit_code", "output_chars"])
def test_an_integer_of_hundreds_of_digits_is_a_damaged_field_not_a_traceback(
    run_dir: Path, tmp_path: Path, field: str
) -> None:
    """A number field of 400 digits: its check converted it to a float (OverflowError), and every view
    of the ledger, the page too, failed with a traceback."""
    db = sqlite3.connect(run_dir / "ledger.sqlite")
    db.execute("DROP TRIGGER events_no_update")
    seq, body = db.execute("SELECT seq, body FROM events WHERE kind = 'attempt' ORDER BY seq LIMIT 1").fetchone()
    huge = re.sub(f'"{field}":[0-9.]+', f'"{field}":' + "9" * 400, body)
    assert huge != body
    db.execute("UPDATE events SET body = ? WHERE seq = ?", (huge, seq))
    db.commit()
    db.close()
    for args in ([], ["--json"], ["--html", str(tmp_path / "p.html")]):
        r = cli("inspect", str(run_dir), *args)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
        assert f"damaged: attempt event {seq}: {field} is a number out of range" in r.stderr, r.stderr


def test_a_crafted_integer_where_the_notes_and_the_held_outputs_take_one_is_a_fault_on_reopening(run_dir: Path) -> None:
    """Read as infinity, an integer of 5,000 digits reached ``int()`` in the folds of what the notes told and what
    the model holds (a ``told`` event's "since", a ``distrust`` event's attempt): OverflowError, which their guard
    did not name, so reopening the ledger (a resumed run) failed with a traceback. Each is a fault now: it opens."""
    db = sqlite3.connect(run_dir / "ledger.sqlite")
    huge = "9" * 5000
    for kind, body in (
        ("told", f'{{"since": {huge}, "at": {huge}, "text": "x"}}'),
        ("distrust", f'{{"attempt": {huge}}}'),
    ):
        db.execute("INSERT INTO events (kind, step, at, body) VALUES (?, 9, 0, ?)", (kind, body))
    db.commit()
    db.close()
    with LedgerRuntime(made_repo(run_dir), run_dir, LedgerConfig()) as rt:
        faults = " ".join(f["message"] for f in rt.state.faults)
        assert "unreadable told event" in faults and "unreadable distrust event" in faults, faults
        assert len(rt.state.attempts) == len(COMMANDS)
