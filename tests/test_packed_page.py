"""A big run's page carries its steps' bulk packed (cli/html.py's ``Bodies``; issue 42 item 4): each
step's header and command in the page, what the model received, what the command printed, the diffs,
the state view, the model's words and the notes compressed in one inert element, which the page's
script unpacks and puts in place when a step is wanted. The packed page is the inline page: unpacked
in Python, every step's bulk put back gives the inline page of the same run, character for
character, so everything on it is escaped as there. A small run's page is inline as it was; past
the limit the first steps stay whole up to the head. In a real headless chromium (tests/browser.py)
a step far down is filled when the address names it or a reference link goes to it, the search finds
a step by an output no step has been filled with yet, the filters work on the skeletons, and the page
of a 5,000-step run shows its first steps at once."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from browser import Browser
from conftest import make_repo

from ledger_runtime.cli.html import Bodies, unpacked
from ledger_runtime.cli.html_run import NO_SCRIPT, run_page
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import ExecResult, LocalExecutor
from ledger_runtime.inspection import load
from ledger_runtime.runtime import LedgerRuntime

CALC = "def add(a, b):\n    return a - b\n" + "".join(f"\n\ndef f{i}(x):\n    return x + {i}\n" for i in range(20))
PACKED = re.compile(r'<script type="application/octet-stream" id="bodies">([^<]*)</script>')
EVERYTHING = 10**12  # an inline limit no run reaches: the page as it always was
# when the next frame after now is drawn, in ms since the page began to load
PAINTED = "new Promise(function(r){requestAnimationFrame(function(){setTimeout(function(){r(performance.now());});});})"


def filled(text: str) -> str:
    """A packed page with each step's bulk put back where the page's script puts it (after the step's
    header, and at the end of its section), without the packed element and the notice for readers
    without script: the page it is the packed form of."""
    bodies = unpacked(text)
    assert bodies is not None, "a packed page"
    text = PACKED.sub("", text.replace(NO_SCRIPT, "", 1), count=1)
    for section, (model, rest) in bodies.items():
        start = text.index(f'<section class="step" id="{section}"')
        header = text.index("</header>", start) + len("</header>")
        end = text.index("</section>", header)
        assert text[header:end].startswith('<pre class="cmd find">'), "the skeleton: the command after the header"
        text = text[:header] + model + text[header:end] + rest + text[end:]
    return text


def fake(outputs: dict[str, str]):
    """An executor that prints what ``outputs`` says for a command (no process: thousands of steps in seconds)."""
    return lambda command, cwd: ExecResult(outputs[command], 0)


def mini_record(path: Path, turns: list[tuple[str, str, list[str]]]) -> Path:
    """A mini-swe-agent trajectory of ``turns`` (reasoning, text, commands): the model's words on the page."""
    messages = [{"role": "system", "content": "You fix code."}, {"role": "user", "content": "Make add() add <b>"}]
    for reasoning, text, commands in turns:
        actions = [{"command": c} for c in commands]
        messages.append(
            {"role": "assistant", "content": text, "reasoning_content": reasoning, "extra": {"actions": actions}}
        )
        messages.append({"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"})
    path.write_text(json.dumps({"info": {}, "messages": messages}))
    return path


@pytest.fixture(scope="module")
def varied_run(tmp_path_factory):
    """A real run with every kind of step section: raw, whole, spans and delta answers, a file changed,
    a command that printed nothing, one that failed twice (NUDGE), markup and control characters in
    commands and outputs, a model call with two commands and one with none, and the model's words."""
    tmp = tmp_path_factory.mktemp("varied")
    repo = make_repo(tmp / "repo", {"calc.py": CALC, "fail.sh": "echo '<i>failing</i>' >&2; exit 1\n"})
    commands = [
        "cat calc.py",
        "cat calc.py",
        "sed -n '3,40p' calc.py",
        "bash fail.sh",
        "bash fail.sh",
        "sed -i 's/a - b/a + b/' calc.py",
        "cat calc.py",
        "printf 'bell\\a rlo\\u202e <b>bold</b>\\n'",
        "true",
        "cat calc.py <b>",
    ]
    rt = LedgerRuntime(repo, tmp / "run", LedgerConfig())
    try:
        for c in commands:
            rt.run(c, LocalExecutor())
    finally:
        rt.close()
    said = [(f"I think <b>{i}</b>\u202e", f"THOUGHT: step {i} & more", [c]) for i, c in enumerate(commands)]
    said[7:9] = [("both at once", "two commands", commands[7:9]), ("", "a format error: no command", [])]
    return tmp / "run", mini_record(tmp / "run.traj.json", said)


def test_a_packed_page_is_the_inline_page_of_the_same_run(varied_run):
    run, record = varied_run
    inline = run_page(load(run), record, inline_limit=EVERYTHING)
    assert PACKED.search(inline) is None and unpacked(inline) is None and NO_SCRIPT not in inline
    assert "both at once" in inline and "a format error" in inline and "I think &lt;b&gt;0&lt;/b&gt;\\u202e" in inline
    assert inline.count('<section class="step"') == 10 and 'class="turn"' in inline
    for kind in ("raw", "whole", "spans", "delta"):
        assert f'data-answer="{kind}"' in inline, kind
    assert 'data-verdict="NUDGE"' in inline and '<span class="add">' in inline and "\\u202e" in inline
    packed = run_page(load(run), record, inline_limit=0, inline_head=0)
    assert len(unpacked(packed) or {}) == 10, "every step's bulk packed"
    assert NO_SCRIPT in packed, "a reader without script is told where the outputs are"
    assert re.fullmatch(r"[A-Za-z0-9+/=]+", PACKED.search(packed).group(1)), "nothing in the packed element is markup"
    assert "the model" not in packed.split('id="step-1"')[1].split("</section>")[0], "the model's words are packed"
    assert filled(packed) == inline


def bulk(page: str) -> dict[str, int]:
    """Each packed step's bulk in characters, in the page's order."""
    return {section: sum(map(len, parts)) for section, parts in (unpacked(page) or {}).items()}


def test_a_small_run_s_page_is_inline_as_it_always_was(varied_run):
    run, record = varied_run
    page = run_page(load(run), record)
    assert PACKED.search(page) is None and unpacked(page) is None and NO_SCRIPT not in page
    assert page == run_page(load(run), record, inline_limit=EVERYTHING)
    total = sum(bulk(run_page(load(run), record, inline_limit=0, inline_head=0)).values())
    assert unpacked(run_page(load(run), record, inline_limit=total)) is None, "at the limit: inline"
    assert unpacked(run_page(load(run), record, inline_limit=total - 1)) is not None, "one character past it: packed"


def test_past_the_limit_the_first_steps_stay_inline_up_to_the_head(varied_run):
    run, record = varied_run
    inline = run_page(load(run), record, inline_limit=EVERYTHING)
    sizes = bulk(run_page(load(run), record, inline_limit=0, inline_head=0))
    steps = list(sizes)
    for kept in (1, 3):
        head = sum(sizes[s] for s in steps[:kept])
        for limit, inline_steps in ((head, kept), (head - 1, kept - 1)):
            page = run_page(load(run), record, inline_limit=0, inline_head=limit)
            assert list(bulk(page)) == steps[inline_steps:], (limit, "the first steps whole, every later one packed")
            for s in steps[:inline_steps]:
                assert section(page, s) == section(inline, s), s
            assert filled(page) == inline


def section(page: str, step: str) -> str:
    return re.search(f'<section class="step" id="{step}".*?</section>', page, re.S).group()


def test_a_packed_page_is_the_inline_page_at_every_answer_of_a_long_run(tmp_path):
    """Hundreds of steps re-reading the same files (shared fragments, views a line apart): unpacked,
    each step's bulk is exactly the inline page's."""
    files = {f"m{k}.py": "".join(f"def f{j}():\n    return {k} + {j}  # <{k}>\n" for j in range(30)) for k in range(7)}
    repo = make_repo(tmp_path / "repo", files)
    outputs = {f"cat {n}": text for n, text in files.items()} | {f"head {n}": text[:200] for n, text in files.items()}
    with LedgerRuntime(repo, tmp_path / "run", LedgerConfig()) as rt:
        for i in range(300):
            rt.run(f"{'head' if i % 5 == 0 else 'cat'} m{i % 7}.py", fake(outputs))
    inline = run_page(load(tmp_path / "run"), inline_limit=EVERYTHING)
    packed = run_page(load(tmp_path / "run"), inline_limit=0, inline_head=0)
    assert filled(packed) == inline
    assert len(packed) < len(inline) / 3, (len(packed), len(inline))


def test_a_packed_page_masks_what_the_inline_page_masks(tmp_path, monkeypatch):
    """The agent's record is masked before the page is made, packed or not: a value of the run's
    environment the ledger masked in a command, and a token's shape, are in no step's packed bulk, and
    a printed credential is masked in the packed output as in the ledger."""
    env_secret, shape = "tok-Zr81kq27Lm90Wp", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
    monkeypatch.setenv("DEPLOY_TOKEN", env_secret)
    printed = "s3cr3tPassw0rd"
    repo = make_repo(tmp_path / "repo", {"netrc": f"machine api.example.com login octo password {printed}\n"})
    command = f"echo {env_secret} | wc -c"
    with LedgerRuntime(repo, tmp_path / "run", LedgerConfig()) as rt:
        rt.run(command, LocalExecutor())
        rt.run("cat netrc", LocalExecutor())
    record = mini_record(
        tmp_path / "run.traj.json", [(f"the token {env_secret}", f"and {shape}", [command]), ("", "", ["cat netrc"])]
    )
    page = run_page(load(tmp_path / "run"), record, inline_limit=0, inline_head=0)
    bodies = unpacked(page)
    assert bodies is not None and set(bodies) == {"step-1", "step-2"}
    everything = page + "".join(part for parts in bodies.values() for part in parts)
    assert env_secret not in everything and shape not in everything and printed not in everything
    assert "the token ******************" in bodies["step-1"][0], "the model's words, masked, with their step"
    assert "password " in bodies["step-2"][1], "the output is there, its secret masked"


def test_each_fragment_and_each_line_is_stored_once():
    bodies = Bodies()
    view = "".join(f"line {i}\n" for i in range(100))
    output = "<pre>" + "x" * 5000 + "</pre>"
    for i in range(50):
        bodies.add(f"step-{i}", ["<h3>the model</h3>"], [output, view.replace("line 7\n", f"line 7 at {i}\n")])
    stored = [f for f in bodies.fragments if isinstance(f, str)]
    assert stored.count(output) == 1 and stored.count("<h3>the model</h3>") == 1
    assert len(stored) == 2 + 100 + 49, "a view that changed in one line adds that line"
    assert len(set(stored)) == len(stored)
    page = "<body>" + bodies.packed() + "</body>"
    got = unpacked(page)
    assert got is not None and len(got) == 50
    assert got["step-3"] == ["<h3>the model</h3>", output + view.replace("line 7\n", "line 7 at 3\n")]
    assert len(page) < 5000, "compressed"


def open_at(b: Browser, page: Path, where: str = "") -> None:
    """Load a page afresh (at ``#where``) and wait until its script has unpacked it and filled the steps in view."""
    b.call("Page.navigate", session=True, url="about:blank")
    b.call("Page.navigate", session=True, url=page.resolve().as_uri() + where)
    deadline = time.monotonic() + 60
    while b.js("document.readyState === 'complete' && document.body && document.body.dataset.ready") != "1":
        assert time.monotonic() < deadline, "the page did not get ready"
        time.sleep(0.02)


def is_filled(b: Browser, step: int) -> bool:
    return b.js(f"!!document.querySelector('#step-{step} pre.shown')")


def filled_soon(b: Browser, step: int) -> bool:
    """Whether the step is filled within a few seconds (what fills it runs in the page's own time)."""
    deadline = time.monotonic() + 10
    while not is_filled(b, step):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


SECTIONS = "[].map.call(document.querySelectorAll('section.step,section.turn'),function(s){return s.outerHTML;})"


@pytest.mark.browser
def test_in_the_browser_each_filled_step_is_the_inline_step(varied_run, tmp_path):
    """The page's script puts each step's bulk where the inline page has it: once every step is filled
    (each named in the address in turn), the browser's sections are the inline page's, the model's
    words, the diffs and the escapes included."""
    run, record = varied_run
    inline, packed = tmp_path / "inline.html", tmp_path / "packed.html"
    inline.write_text(run_page(load(run), record, inline_limit=EVERYTHING))
    packed.write_text(run_page(load(run), record, inline_limit=0, inline_head=0))
    b = Browser(1280, 900)
    try:
        b.open(inline)
        want = b.js(SECTIONS)
        open_at(b, packed)
        for n in range(1, 11):
            b.js(f"location.hash='#step-{n}'")
            assert filled_soon(b, n)
        assert b.js(SECTIONS) == want
        assert b.js("document.body.dataset.errors || ''") == ""
    finally:
        b.close()


@pytest.mark.browser
def test_a_packed_page_fills_a_step_when_it_is_wanted(tmp_path):
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC})
    filler = {f"echo filler {i}": "".join(f"filler {i} line {k}\n" for k in range(40)) for i in range(100)}
    with LedgerRuntime(repo, tmp_path / "run", LedgerConfig()) as rt:
        for i in range(1, 91):
            if i in (45, 90):
                rt.run("cat calc.py", LocalExecutor())
            elif i == 80:
                rt.run("printf 'UNIQ%sTOKEN\\n' -80-", LocalExecutor())  # the token is in the output alone
            else:
                rt.run(f"echo filler {i}", fake(filler))
    page = tmp_path / "run.html"
    page.write_text(run_page(load(tmp_path / "run"), inline_limit=0, inline_head=0))
    b = Browser(1280, 900)
    try:
        open_at(b, page)
        assert b.js("document.body.dataset.errors || ''") == ""
        assert is_filled(b, 1) and not is_filled(b, 45) and not is_filled(b, 90), "the steps near the window only"
        assert b.js("count.textContent") == "90 of 90 steps"

        # the filters need nothing unpacked: each step's verdict and answer are in its skeleton
        b.click("button[data-group=answer][data-value=whole]")
        assert b.visible(".step") == ["step-90"] and b.js("count.textContent") == "1 of 90 steps"
        assert filled_soon(b, 90), "a step the filter shows is filled as it comes into view"
        b.click("button[data-group=answer][data-value=ALL]")

        # a step the address names is filled and shown; its reference takes the reader to a step
        # that was never near the window, filled on the way
        open_at(b, page, "#step-90")
        assert filled_soon(b, 90) and b.on_screen("#step-90") and not is_filled(b, 45)
        b.click("#step-90 a.ref")
        assert b.js("location.hash") == "#step-45" and b.on_screen("#step-45")
        assert b.js("document.querySelector('#step-45 pre.shown').textContent") == CALC
        b.screenshot(tmp_path / "went-to-step-45.png")

        # the search finds a step by what only its output says, before anything filled it
        open_at(b, page)
        assert not is_filled(b, 80)
        b.type("#search", "uniq-80-token")
        assert b.visible(".step") == ["step-80"] and b.js("count.textContent") == "1 of 90 steps"
        b.js("document.getElementById('step-80').scrollIntoView()")
        assert filled_soon(b, 80), "a step the search found is filled when it is shown"
        assert "UNIQ-80-TOKEN" in b.js("document.querySelector('#step-80 pre.shown').textContent")
        assert b.js("document.body.dataset.errors || ''") == ""
    finally:
        b.close()


@pytest.mark.slow
@pytest.mark.browser
def test_the_page_of_a_5000_step_run_opens_at_once(tmp_path):
    """5,000 steps re-reading 40 files (4,920 whole answers and their views): the page is packed by
    itself, under 5 MB, and chromium shows its first steps in well under the seconds the inline
    page takes (bench_page.py has the figures; the bound here leaves room for a busy machine)."""
    files = {f"mod{k}.py": "".join(f"def f{j}(x):\n    return x * {j} + {k}\n\n" for j in range(30)) for k in range(40)}
    repo = make_repo(tmp_path / "repo", files)
    outputs = {f"cat {n}": text for n, text in files.items()}
    outputs |= {f"head -20 {n}": "".join(text.splitlines(True)[:20]) for n, text in files.items()}
    with LedgerRuntime(repo, tmp_path / "run", LedgerConfig()) as rt:
        for i in range(1, 5001):
            rt.run(f"{'head -20' if i % 3 == 0 else 'cat'} mod{i % 40}.py", fake(outputs))
    page = tmp_path / "run.html"
    page.write_text(run_page(load(tmp_path / "run")))
    text = page.read_text()
    assert unpacked(text) is not None and page.stat().st_size < 5_000_000, page.stat().st_size
    b = Browser(1280, 900)
    try:
        b.call("Page.navigate", session=True, url="about:blank")
        t0 = time.monotonic()
        b.call("Page.navigate", session=True, url=page.resolve().as_uri())
        while not b.js("!!document.querySelector('section.step pre.shown')"):
            assert time.monotonic() - t0 < 30
            time.sleep(0.01)
        shown = b.js(PAINTED)
        while b.js("document.body.dataset.ready") != "1":
            assert time.monotonic() - t0 < 30
            time.sleep(0.01)
        ready = b.js("performance.now()")
        print(
            f"5,000 steps, {page.stat().st_size:,} bytes: first steps shown at {shown:.0f} ms, ready at {ready:.0f} ms"
        )
        assert shown < 3000 and ready < 5000, (shown, ready)
        assert b.js("document.body.dataset.errors || ''") == ""
        assert b.js("count.textContent") == "5000 of 5000 steps"
        assert b.js("document.querySelectorAll('pre.shown').length") < 200, "only the steps near the window"
    finally:
        b.close()
