"""Benchmark: the page of a long run (``ledger-run inspect RUN --html PAGE``, issue 42 item 4): its
size, the time to write it, and the time chromium takes to show it, inline and packed.

For each run, the page in each form:

- ``inline``: this checkout's page with every step's bulk in the page (``run_page`` with no limit: the
  page as it was before the bulk could be packed, but for the style that lets the browser skip laying out
  the steps off the screen);
- ``packed``: this checkout's page with the steps' bulk packed, but for the first steps' (``run_page``
  with a limit of 0: what ``inspect --html`` writes past 2,000,000 characters of bulk);
- ``before``: with ``--before REV``, the page ``ledger-run inspect RUN --html`` of this repository's
  commit REV writes (main's, say: its files taken out with ``git archive`` into a temporary directory).

The form ``inspect --html`` writes by default for the run is starred. With ``--words`` (the default) a
made-up agent's record goes with the run (``--trajectory``): per model call about 1,500 characters of
reasoning and 300 of response, seeded random words, as a reasoning model's trajectory puts on the page.

- ``MB``: the page's size;
- ``write s``: the wall time of a process that loads the ledger, makes the page and writes it
  (``python -m ledger_runtime inspect RUN --html`` for ``before``; the same through ``run_page`` for this
  checkout's two forms): the median of ``--repeat``;
- ``shown ms``: chromium (headless, tests/browser.py: DevTools over a pipe), from the navigation to the
  first frame drawn once the first step's output is in the page; ``ready ms``: until the page's script
  has run (its filters and search work; a packed page has unpacked its bulk and filled the steps in
  view): medians of ``--repeat`` loads;
- ``search ms``: the first search, for a text no step has, over every step (a packed page parses every
  step's bulk once, apart from the page, then keeps the text);
- ``elements`` and ``heap MB``: the page's elements and its JavaScript heap (after a garbage collection)
  after the search.

The machine is shared and noisy: compare the forms within one run of the benchmark.

Reproduce (from the repository, venv active)::

    python swebench_runs/bench/bench_long_run.py --steps 5000 --keep --no-inspect --out /tmp/lr.json  # "ledger is RUN"
    python swebench_runs/bench/bench_page.py --run RUN --before main
    python swebench_runs/bench/bench_page.py --steps 100 --no-words --out /tmp/page_small.json

Without ``--run`` it makes the runs with bench_long_run.py (``--steps``; 5,000 steps take about ten
minutes). Results go to ``swebench_runs/bench/results/page.json`` unless ``--out`` says otherwise, with
the commits measured.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's code; tests/browser.py, the page tests' chromium

FIRST = "!!document.querySelector('section.step pre.shown')"
PAINTED = "new Promise(function(r){requestAnimationFrame(function(){setTimeout(function(){r(performance.now());});});})"
NOWHERE = "no step of this run says this"

# a process that makes this checkout's page in one form: load, run_page, write
WRITE = """
import sys
from pathlib import Path
from ledger_runtime.cli.html_run import run_page
from ledger_runtime.inspection import load
from ledger_runtime.ledger.private import write_private
run, page, record, limit = sys.argv[1:5]
write_private(Path(page), run_page(load(run), Path(record) if record else None, inline_limit=int(limit)))
"""
FORMS = {"inline": 10**15, "packed": 0}


def rev_of(rev: str) -> str:
    """The short commit id of ``rev`` in this repository."""
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True, text=True)
    return r.stdout.strip()


def checkout(rev: str, into: Path) -> Path:
    """This repository's files at commit ``rev``, written under ``into`` (no worktree, no checkout)."""
    into.mkdir(parents=True)
    files = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=files, check=True)
    return into


def made_run(steps: int) -> Path:
    """A run of ``steps`` steps made by bench_long_run.py, kept: its run directory."""
    out = Path(tempfile.mkdtemp(prefix="ledger-page-")) / "long_run.json"
    argv = [sys.executable, str(HERE / "bench_long_run.py"), "--steps", str(steps), "--keep", "--no-inspect"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([*argv, "--out", str(out)], capture_output=True, text=True, check=True, env=env, cwd="/")
    kept = re.search(r"^kept .+: the long run's ledger is (.+)$", r.stdout, re.M)  # (bench_long_run's last line)
    assert kept, r.stdout[-2000:]
    return Path(kept.group(1))


def vocabulary(rng: random.Random, n: int = 2000) -> list[str]:
    syllables = [a + b for a in "bcdfghklmnprstvwz" for b in ("a", "e", "i", "o", "u", "ou", "ea")]
    return ["".join(rng.choice(syllables) for _ in range(rng.choice((1, 2, 2, 3)))) for _ in range(n)]


def words(rng: random.Random, vocab: list[str], weights: list[float], chars: int) -> str:
    out: list[str] = []
    while sum(map(len, out)) + len(out) < chars:
        out += rng.choices(vocab, weights, k=12)
    return " ".join(out)


def made_record(run: Path, path: Path) -> Path:
    """A mini-swe-agent trajectory for the run's steps, one model call per step, with made-up words."""
    from ledger_runtime.inspection import load

    state = load(run).state
    rng = random.Random(42)
    vocab = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(vocab))]  # Zipf's law, as words in a text
    by_step: dict[int, list[str]] = {}
    for a in state.attempts:
        by_step.setdefault(a.step, []).append(a.command)
    messages: list[dict] = [{"role": "system", "content": "bench"}, {"role": "user", "content": "the task"}]
    for step, commands in sorted(by_step.items()):
        text = f"THOUGHT: {words(rng, vocab, weights, 300)}"
        reasoning = words(rng, vocab, weights, 1500)
        usage = {"prompt_tokens": 1000 + 40 * step, "completion_tokens": 400}
        extra = {"actions": [{"command": c} for c in commands], "cost": 0.001, "response": {"usage": usage}}
        messages.append({"role": "assistant", "content": text, "reasoning_content": reasoning, "extra": extra})
        messages.append({"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"})
    path.write_text(json.dumps({"info": {}, "messages": messages}))
    return path


def write_page(form: str, run: Path, page: Path, record: Path | None, src: Path | None = None) -> float:
    """Make the page in ``form`` in a new process (``cli``: ``inspect --html`` of the checkout at ``src``);
    its wall time."""
    if form == "cli":
        argv = [sys.executable, "-m", "ledger_runtime", "inspect", str(run), "--html", str(page)]
        argv += ["--trajectory", str(record)] if record else []
    else:
        argv = [sys.executable, "-c", WRITE, str(run), str(page), str(record or ""), str(FORMS[form])]
    t0 = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(src or ROOT)}  # run from / : the code is PYTHONPATH's, not the cwd's
    subprocess.run(argv, env=env, cwd="/", check=True, capture_output=True)
    return time.perf_counter() - t0


def wait(b, expression: str, deadline: float) -> None:
    while not b.js(expression):
        if time.monotonic() > deadline:
            raise TimeoutError(expression)
        time.sleep(0.01)


def opened(b, page: Path, repeat: int) -> dict[str, float]:
    """Load the page ``repeat`` times: the medians of when its first steps show and when it is ready;
    then the first search, its elements and its heap."""
    shown, ready = [], []
    for _ in range(repeat):
        b.call("Page.navigate", session=True, url="about:blank")
        time.sleep(0.5)
        deadline = time.monotonic() + 300
        b.call("Page.navigate", session=True, url=page.resolve().as_uri())
        wait(b, FIRST, deadline)
        shown.append(b.js(PAINTED))
        wait(b, "document.body.dataset.ready==='1'", deadline)
        ready.append(b.js("performance.now()"))
    assert not b.js("document.body.dataset.errors || ''"), b.js("document.body.dataset.errors")
    t0 = time.perf_counter()
    b.js(f"search.value={json.dumps(NOWHERE)};search.dispatchEvent(new Event('input'));count.textContent")
    search = time.perf_counter() - t0
    b.call("HeapProfiler.collectGarbage", session=True)
    heap = b.call("Runtime.getHeapUsage", session=True)["usedSize"]
    return {
        "shown_ms": round(statistics.median(shown)),
        "ready_ms": round(statistics.median(ready)),
        "search_ms": round(search * 1e3),
        "elements": b.js("document.getElementsByTagName('*').length"),
        "heap_mb": round(heap / 1e6, 1),
    }


def measure(run: Path, record: Path | None, before: Path | None, repeat: int, tmp: Path) -> dict:
    from browser import Browser

    from ledger_runtime.cli.html import unpacked
    from ledger_runtime.inspection import load

    steps = load(run).state.step
    forms = [*FORMS, *(["before"] if before else [])]
    before = before.resolve() if before else None
    pages = []
    b = Browser(1280, 900, timeout=300)
    try:
        for form in forms:
            page = tmp / f"{form}-{steps}.html"
            how = ("cli", before) if form == "before" else (form, ROOT)
            write = statistics.median(write_page(how[0], run, page, record, how[1]) for _ in range(repeat))
            pages.append({"form": form, "bytes": page.stat().st_size, "write_s": round(write, 2)})
            pages[-1] |= opened(b, page, repeat)
            pages[-1]["packed"] = unpacked(page.read_text()) is not None
    finally:
        b.close()
    default = tmp / "default.html"
    write_page("cli", run, default, record)  # what `inspect --html` of this checkout writes
    packed = unpacked(default.read_text()) is not None
    for p in pages:
        p["default"] = p["form"] == ("packed" if packed else "inline")
    return {"run": str(run), "steps": steps, "words": record is not None, "pages": pages}


def table(results: list[dict]) -> None:
    print(
        f"{'steps':>6} {'words':>5} {'form':>8} {'MB':>7} {'write s':>8} {'shown ms':>9} {'ready ms':>9} "
        f"{'search ms':>10} {'elements':>9} {'heap MB':>8}"
    )
    for r in results:
        for p in r["pages"]:
            form = p["form"] + ("*" if p.get("default") else "")
            print(
                f"{r['steps']:>6} {'yes' if r['words'] else 'no':>5} {form:>8} {p['bytes'] / 1e6:>7.2f} "
                f"{p['write_s']:>8.2f} {p['shown_ms']:>9} {p['ready_ms']:>9} {p['search_ms']:>10} "
                f"{p['elements']:>9,} {p['heap_mb']:>8.1f}"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", type=Path, action="append", help="a run directory (repeatable); else --steps makes them")
    ap.add_argument("--steps", type=int, action="append", help="steps of a run to make (default: 5000 and 100)")
    ap.add_argument("--before", metavar="REV", help="a commit whose page to measure beside (main, say)")
    ap.add_argument("--no-words", dest="words", action="store_false", help="no made-up agent's record")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "page.json")
    args = ap.parse_args()
    runs = [r.resolve() for r in args.run] if args.run else [made_run(n) for n in (args.steps or [5000, 100])]
    tmp = Path(tempfile.mkdtemp(prefix="ledger-page-"))
    before_commit = rev_of(args.before) if args.before else None  # once: the branch may move during the run
    before = checkout(before_commit, tmp / "before") if before_commit else None
    results = []
    for run in runs:
        for with_words in sorted({False, args.words}):
            record = made_record(run, tmp / "record.traj.json") if with_words else None
            results.append(measure(run, record, before, args.repeat, tmp))
            table(results[-1:])
    print()
    table(results)
    from bench_long_run import commit_of

    out = {
        "commit": commit_of(ROOT),
        "before": {"rev": args.before, "commit": before_commit} if args.before else None,
        "chromium": subprocess.run(["chromium", "--version"], capture_output=True, text=True).stdout.strip(),
        "repeat": args.repeat,
        "runs": results,
        "command": " ".join(["python", "swebench_runs/bench/bench_page.py", *sys.argv[1:]]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
