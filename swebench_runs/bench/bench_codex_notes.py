"""What the ledger's notes cost a Codex run, in money, from a real rollout.

The real ``codex`` binary runs a scripted session against a fake Responses API on loopback
(tests/fake_responses.py), once plainly (``codex exec``) and once through ``ledger-run codex``. Each
model call's input is rebuilt from the run's rollout file (adapters/codex/rollout.py:
``model_inputs``; tests/test_codex_e2e.py checks it equals what Codex sent, less its base
instructions, which are sent first in every call and are added back here from the fake server's
first request) and billed call by call as each price model's provider bills it
(harness/replay/billing.py). Arms: ``plain`` (codex without the ledger), ``ledger`` (as
sent: answers and notes), ``ledger-without-notes`` (the same inputs, the ledger's notes taken out:
what the notes add). Codex keeps every note in its history (an ``additionalContext`` is appended
once), so a note costs its tokens once uncached and then at the cache price.

The session: a file read twice (a reference), the tests run twice (a NUDGE), a script that
rewrites the file (news: no output showed it), the file read again (a diff), the fix as a patch,
the tests again.

Run: ``python swebench_runs/bench/bench_codex_notes.py [--price-model gpt-5-mini,claude-sonnet-4-5]``;
prints a table and writes ``swebench_runs/bench/results/codex_notes.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "tests")]

from conftest import CALC_PROJECT, make_repo  # noqa: E402
from fake_responses import FakeResponses, codex_user_home  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from ledger_adapters.codex.cli import find_codex, hook_launcher  # noqa: E402
from ledger_adapters.codex.rollout import is_ledger_note, item_text, model_inputs  # noqa: E402
from ledger_harness.replay.billing import Bill, Cache, Part  # noqa: E402
from ledger_harness.replay.meter import load_pricing, rates_of  # noqa: E402

OUT = HERE / "results" / "codex_notes.json"
TEST = "python3 -m unittest -q test_calc"
SCRIPT_FILE = "rewrite.py"
FIX = (
    "*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
    "*** End Patch\n"
)
SESSION = [
    ("exec", "cat calc.py"),
    ("exec", "cat calc.py"),
    ("exec", TEST),
    ("exec", TEST),
    ("exec", f"python3 {SCRIPT_FILE}"),
    ("exec", "cat calc.py"),
    ("patch", FIX),
    ("exec", TEST),
    ("say", "Fixed add(); the test passes."),
]
REWRITE = "p = 'calc.py'\nopen(p, 'w').write(open(p).read().replace('return x + 3', 'return x + 30'))\n"


def run(codex: str, tmp: Path, ledger: bool) -> tuple[list[list[dict]], dict]:
    """One session; the input items of each model call (base instructions first), and the first request."""
    repo = make_repo(tmp / "repo", {**CALC_PROJECT, SCRIPT_FILE: REWRITE})
    fake = FakeResponses(SESSION, workdir=str(repo))
    home = codex_user_home(tmp / "user-codex", fake.base_url)
    env = {**os.environ, "CODEX_HOME": str(home), "LEDGER_FAKE_KEY": "test", "LEDGER_CODEX_BIN": codex}
    task = "Fix the failing test in test_calc.py"
    if ledger:
        cmd = [*hook_launcher(), "codex", "-w", str(repo), "-o", str(tmp / "run"), "--", "exec"]
        cmd += ["--skip-git-repo-check", task]
        sessions = tmp / "run" / "codex-home" / "sessions"
    else:
        cmd = [codex, "exec", "--skip-git-repo-check", task]
        sessions = home / "sessions"
    try:
        p = subprocess.run(cmd, env=env, cwd=repo, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise SystemExit(f"codex failed ({'ledger' if ledger else 'plain'}): {p.stderr[-2000:]}")
        (rollout,) = sessions.rglob("rollout-*.jsonl")
        base = fake.agent_requests[0]["input"][0]  # Codex's base instructions: not in the rollout
        return [[base, *items] for items in model_inputs(str(rollout))], fake.agent_requests[0]
    finally:
        fake.close()


def bill(calls: list[list[dict]], model: str, drop_notes: bool = False) -> dict:
    pricing = load_pricing(model)
    rates = rates_of(pricing)
    cache, total = Cache(rates, pricing), Bill()
    for items in calls:
        kept = [i for i in items if not (drop_notes and is_ledger_note(i))]
        parts = [Part(*item_text(i), k == len(kept) - 1) for k, i in enumerate(kept)]
        total.add(cache.bill(parts))
    notes = sum(len(item_text(i)[1]) for i in calls[-1] if is_ledger_note(i)) if calls else 0
    return {**total.as_dict(rates), "note_chars": 0 if drop_notes else notes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--price-model", default="gpt-5-mini,claude-sonnet-4-5,gemini/gemini-2.5-pro")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    codex = find_codex(None)
    if codex is None:
        raise SystemExit("no codex binary (npm install -g @openai/codex@0.171.0)")
    version = subprocess.run([codex, "--version"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as d:
        plain, _ = run(codex, Path(d) / "plain", ledger=False)
        led, _ = run(codex, Path(d) / "ledger", ledger=True)
    models = [m.strip() for m in args.price_model.split(",") if m.strip()]
    rows: dict[str, dict[str, dict]] = {}
    for m in models:
        rows.setdefault("plain", {})[m] = bill(plain, m)
        rows.setdefault("ledger", {})[m] = bill(led, m)
        rows.setdefault("ledger-without-notes", {})[m] = bill(led, m, drop_notes=True)
    table = Table(title="A Codex session's input cost, billed from its rollout")
    for col in ("price model", "arm", "calls", "prompt tokens", "cache reads", "cache writes", "input USD", "vs plain"):
        table.add_column(col, justify="left" if col in ("price model", "arm") else "right")
    for m in models:
        base = rows["plain"][m]["input_cost_usd"]
        for arm in rows:
            r = rows[arm][m]
            table.add_row(
                m,
                arm,
                str(r["calls"]),
                f"{r['prompt_tokens']:,}",
                f"{r['cache_read_tokens']:,}",
                f"{r['cache_write_tokens']:,}",
                f"{r['input_cost_usd']:.6f}",
                f"{r['input_cost_usd'] / base:.3f}" if base else "-",
            )
        share = 1 - rows["ledger-without-notes"][m]["input_cost_usd"] / rows["ledger"][m]["input_cost_usd"]
        rows["ledger"][m]["notes_share"] = round(share, 4)
    Console().print(table)
    for m in models:
        print(f"{m}: the notes' share of the ledger arm's input cost {rows['ledger'][m]['notes_share']:.2%}")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "commit": commit.strip(),
                "codex": version,
                "machine": platform.platform(),
                "session": [f"{k} {v.splitlines()[0]}" for k, v in SESSION],
                "arms": rows,
                "command": "python swebench_runs/bench/bench_codex_notes.py",
            },
            indent=1,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
