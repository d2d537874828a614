"""`ledger-run inspect RUN --html FILE` and `ledger-run report OUT --html FILE`: one self-contained
page, loaded in a real headless browser (Debian's chromium): it runs its script without an error and
shows the whole run: the task, the model's own words at each step (from the agent's record), what
the model received beside what the command printed, the diffs, the submission; its filters and
search hide and show steps, and a reference takes the reader to the step it names. The browser is
driven as a person would (tests/browser.py: clicks, typing, screenshots) and the tests look at what
the screenshots show, not only at the page's source."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from browser import Browser, hex_rgb, launching, pixels
from cli_support import ledger_run as cli
from conftest import make_repo

from ledger_runtime.cli.html import STYLE
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime

FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n"
    + "".join(f"\n\ndef f{i}(x):\n    return x + {i}\n" for i in range(20))
}


def dom(page: Path) -> str:
    """The page's DOM after load, as the browser built it (scripts run)."""
    r = subprocess.run(
        [
            launching(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--virtual-time-budget=2000",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


@pytest.mark.browser
def test_a_run_page_in_a_browser(tmp_path):
    repo = make_repo(tmp_path / "r", FILES)
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    try:
        for cmd in ("cat calc.py", "cat calc.py", "sed -i 's/a - b/a + b/' calc.py", "cat calc.py <b>"):
            rt.run(cmd, LocalExecutor())
    finally:
        rt.close()
    page = tmp_path / "run.html"
    r = cli("inspect", str(tmp_path / "run"), "--html", str(page))
    assert r.returncode == 0, r.stderr
    assert page.stat().st_mode & 0o777 == 0o600, "the page holds what the agent saw: owner only"
    text = page.read_text()
    assert "http://" not in text and "https://" not in text and "<link" not in text, "self-contained"
    built = dom(page)
    assert 'data-ready="1"' in built and "data-errors" not in built, "the script ran without an error"
    assert len(re.findall(r'<section class="step"', built)) == 4
    assert "what the model received" in built and "what the command printed" in built
    assert '[ledger: same as <a class="ref" href="#step-1">step 1</a>\'s output (`cat calc.py`, exit 0)]' in built, (
        "a reference links to the step it names"
    )
    assert (
        '<span class="add">+    return a + b\n</span>' in built
        and '<span class="del">-    return a - b\n</span>' in built
    )
    assert "cat calc.py &lt;b&gt;" in built, "commands are escaped, never markup"
    assert "the state view after step 4" in built
    assert "none found beside the ledger" in built, "no agent's record: the page says so"
    garbage = tmp_path / "garbage.traj.json"
    garbage.write_text('{"messages": [{"role": "assistant", "extra": {"actions": 7}}]')
    r = cli("inspect", str(tmp_path / "run"), "--html", str(page), "--trajectory", str(garbage))
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "no installed format reads it" in r.stderr and "not JSON" in r.stderr, "a record named that cannot be read"
    assert "goes with --html" in cli("inspect", str(tmp_path / "run"), "--trajectory", str(garbage)).stderr
    assert '<section id="final"><h2>Final patch</h2>' in built and "+++ b/calc.py" in built


@pytest.mark.browser
def test_an_arms_page_in_a_browser(tmp_path):
    out = tmp_path / "out"
    for arm in ("ledger", "baseline"):
        (out / arm).mkdir(parents=True)
        (out / arm / "preds.json").write_text(
            json.dumps(
                [{"instance_id": f"demo__calc-{i}", "model_patch": "d", "model_name_or_path": "m"} for i in (1, 2)]
            )
        )
    page = tmp_path / "arms.html"
    r = cli("report", str(out), "--no-png", "--html", str(page))
    assert r.returncode == 0, r.stderr
    built = dom(page)
    assert 'data-ready="1"' in built and "data-errors" not in built
    assert built.count("<h2>demo__calc-") == 2 and "<b>ledger</b>" in built and "<b>baseline</b>" in built


def colour(name: str) -> tuple[int, int, int]:
    """The background colour the page's style gives a class (what a screenshot shows of it)."""
    m = re.search(r"\." + name + r"\{background:#([0-9a-f]{6})", STYLE)
    assert m, name
    return hex_rgb(m.group(1))


@pytest.mark.browser
def test_the_demo_s_page_shows_the_whole_run(tmp_path):
    from ledger_adapters.mini.demo import SCRIPT, TASK

    d = tmp_path / "demo"
    r = cli("demo", "-o", str(d))
    assert r.returncode == 0, r.stderr[-2000:]
    page = tmp_path / "run.html"
    r = cli("inspect", str(d), "--html", str(page))
    assert r.returncode == 0, r.stderr
    shots = tmp_path / "shots"
    shots.mkdir()
    b = Browser(1280, 900)
    try:
        b.open(page)
        assert b.js("document.body.dataset.errors || ''") == ""
        top = b.screenshot(shots / "1-top.png")
        # the task at the top, on the first screen; the model's own words for step 1 too
        assert b.on_screen("#task") and b.js("document.querySelector('#task pre').textContent") == TASK
        assert pixels(top, colour("said")) > 5000, "the model's text is on the first screen"
        assert pixels(top, colour("add")) == 0 and pixels(top, colour("del")) == 0, "no diff on the first screen"
        steps = b.visible(".step")
        assert steps == [f"step-{i}" for i in range(1, 12)] and b.js("count.textContent") == "11 of 11 steps"
        said = b.js("[].map.call(document.querySelectorAll('.step .said'), function(x){return x.textContent;})")
        assert [s.split("\n")[0] for s in said] == [f"THOUGHT: {thought}" for thought, _ in SCRIPT]
        facts = b.js("[].map.call(document.querySelectorAll('.step .facts'), function(x){return x.textContent;})")
        assert all(re.search(r"command \d+\.\d+ s", f) and "$0" in f for f in facts), facts

        # a raw answer once; a deduped one beside what the command printed
        assert b.js("document.querySelectorAll('#step-1 pre.shown').length") == 1
        assert b.js("document.querySelectorAll('#step-1 pre.printed').length") == 0
        assert b.js("document.querySelectorAll('#step-3 pre.printed').length") == 1

        # the filter by answer kind: only the delta re-read is left, its diff coloured on the screen
        b.click("button[data-group=answer][data-value=delta]")
        assert b.visible(".step") == ["step-8"] and b.js("count.textContent") == "1 of 11 steps"
        b.js("window.scrollTo(0, 0)")
        delta = b.screenshot(shots / "2-delta.png")
        assert pixels(delta, colour("add")) > 500 and pixels(delta, colour("del")) > 500, "the diff, coloured"
        assert pixels(delta, colour("ref")) > 500, "its reference line, marked"

        # its reference to step 2, which the filter hides: the link shows everything and goes there
        b.click("#step-8 a.ref")
        assert b.js("location.hash") == "#step-2" and b.on_screen("#step-2")
        assert len(b.visible(".step")) == 11
        b.screenshot(shots / "3-went-to-step-2.png")

        # the verdict filter
        b.click("button[data-group=verdict][data-value=NUDGE]")
        assert b.visible(".step") == ["step-5"]
        b.click("button[data-group=verdict][data-value=ALL]")

        # the search box finds a step by the model's words, and by what a command printed
        b.type("#search", "percent/100")
        assert b.visible(".step") == ["step-7"]
        b.js("window.scrollTo(0, 0)")
        found = b.screenshot(shots / "4-search.png")
        assert b.on_screen("#step-7") and pixels(found, colour("said")) > 2000
        b.js("search.value=''")
        b.type("#search", "AssertionError: 5000.0 != 150.0")
        assert b.visible(".step") == ["step-4", "step-5"]
        b.js("search.value=''")
        b.type("#search", "no step says this")
        assert b.visible(".step") == [] and b.js("count.textContent") == "0 of 11 steps"

        # the submission at the end, coloured as a diff
        b.js("search.value='';search.dispatchEvent(new Event('input'))")
        b.js("document.getElementById('final').scrollIntoView()")
        final = b.screenshot(shots / "5-submission.png")
        assert b.js("document.querySelector('#final h2').textContent") == "Submission"
        assert pixels(final, colour("add")) > 500 and pixels(final, colour("del")) > 500
    finally:
        b.close()


@pytest.mark.browser
def test_a_reasoning_model_s_words_tokens_and_cost(tmp_path):
    """The real mini-swe-agent loop with litellm against a loopback provider whose replies carry a
    reasoning model's thoughts: the page shows them, with each call's tokens, cost and time."""
    from fake_chat import FakeChat
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models import get_model

    from ledger_adapters.mini.environment import LedgerEnvironment

    repo = make_repo(tmp_path / "repo", FILES)
    commands = ["cat calc.py", "cat calc.py", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"]
    thoughts = [f"I should look <b>closely</b> at step {i}\u202e" for i in range(len(commands))]
    fake = FakeChat([f"THOUGHT: {i}.\n```mswea_bash_command\n{c}\n```" for i, c in enumerate(commands)], thoughts)
    model = get_model(
        "openai/gpt-5-mini",
        {
            "model_class": "ledger_adapters.mini.environment.LedgerModel",
            "inner_class": "litellm_textbased",
            "model_kwargs": {"api_base": fake.base_url + "/v1", "api_key": "x"},
            "cost_tracking": "ignore_errors",
        },
    )
    env = LedgerEnvironment(inner_class="local", cwd=str(repo), ledger={"run_dir": str(tmp_path / "run")})
    agent = DefaultAgent(
        model,
        env,
        system_template="You fix code.",
        instance_template="{{task}}",
        cost_limit=0,
        step_limit=10,
        output_path=tmp_path / "run" / "trajectory.traj.json",
    )
    try:
        agent.run("Make add() add")
    finally:
        env.cleanup()
        fake.close()
    page = tmp_path / "run.html"
    r = cli("inspect", str(tmp_path / "run"), "--html", str(page))
    assert r.returncode == 0, r.stderr
    source = page.read_text()
    assert "<b>closely</b>" not in source and "&lt;b&gt;closely&lt;/b&gt;" in source and "\\u202e" in source
    b = Browser(1280, 900)
    try:
        b.open(page)
        b.js("document.getElementById('step-2').scrollIntoView()")
        shot = b.screenshot(tmp_path / "reasoning.png")
        assert pixels(shot, colour("reasoning")) > 2000, "the reasoning is on the screen"
        thought = b.js("document.querySelector('#step-2 .reasoning').textContent")
        assert thought == "I should look <b>closely</b> at step 1\\u202e", "as text, the bidi character escaped"
        facts = b.js("document.querySelector('#step-2 .facts').textContent")
        assert re.search(r"model \d+\.\d+ s; [\d,]+ tokens in, \d+ out; \$0\.0\d+", facts), facts
        calls = b.js("document.querySelector('table.sum').textContent")
        assert re.search(r"model calls3, [\d,]+ tokens in, \d+ out, \$0\.0\d+", calls), calls
    finally:
        b.close()


def test_each_model_call_goes_with_the_steps_of_its_commands():
    from types import SimpleNamespace as Attempt

    from ledger_runtime.cli.record import align
    from ledger_runtime.trajectories import ModelTurn

    turns = [
        ModelTurn("look", commands=("ls",)),
        ModelTurn("bad format"),  # no command: stands alone
        ModelTurn("two at once", commands=("cat a", "cat b")),
        ModelTurn("unseen", commands=("rm -rf x",)),  # the ledger never saw it
        ModelTurn("again", commands=("ls",)),
        ModelTurn("done"),
    ]
    attempts = [Attempt(id=i, command=c) for i, c in enumerate(["ls", "cat a", " cat b\n", "ls", "pwd"], 1)]
    got = [(e.turn.text if e.turn else None, [a.id for a in e.attempts]) for e in align(turns, attempts)]
    assert got == [
        ("look", [1]),
        ("bad format", []),
        ("two at once", [2, 3]),
        ("unseen", []),
        ("again", [4]),
        (None, [5]),
        ("done", []),
    ]
