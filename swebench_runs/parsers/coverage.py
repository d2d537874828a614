"""How well the ledger's own command analysis reads real agent commands.

Runs ``ledger_runtime.analysis.commands.analyze(command, "/testbed")`` on every row of the trajectories'
``actions.jsonl.gz`` whose ``command`` is a non-empty string (kinds action, submit, timeout) and
reports:

- parse coverage: the share of commands with ``analysis.parsed`` True (goal: at least 99%);
- the class counts (``analysis.command_class.value``) and, per class, how many are ``pure``;
- the share of commands that are ``pure``, that have at least one read key (and of which kinds:
  f: file, d: listing, r: subtree, x: existence, m: stat data), at least one line view
  (``analysis.views`` of kind "lines"), at least one match view, at least one write (and how many
  may write any file, ``*``);
- the failure reasons (``analysis.problem``), grouped, with examples;
- the time ``analyze`` takes per command (median and p95 microseconds, total seconds). The lru_cache
  in front of ``analyze`` is bypassed (``analyze.__wrapped__``: the same never-raising function,
  uncached), every command is timed on its own with ``time.perf_counter`` after one untimed
  warm-up pass, with the garbage collector off while timing;
- a quality sample: ``--sample`` distinct commands (default 300) drawn with ``random.Random(--seed)``
  (default 0), printed as command (first 80 characters) -> class, pure, read keys, views, writes
  for a human to eyeball. Paths under /testbed are shown relative to it. The JSON holds the whole
  sample with the full commands and analyses.

Everything but the timings is deterministic.

Reproduce, from the repository root (/work/main)::

    . .venv/bin/activate
    python swebench_runs/parsers/coverage.py                    # default data: ../shared/data/trajectories/*/
    python swebench_runs/parsers/coverage.py --data '/path/to/*/actions.jsonl.gz' --seed 1 --sample 100 --out /tmp/res

Output: rich tables on stdout and ``results/coverage.json`` (or ``--out DIR``).
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DEFAULT_DATA, DEFAULT_OUT, Row, load_commands, one_line, timing_summary, write_json  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402

from ledger_adapters.mini.format import SUBMISSION  # noqa: E402  (the recorded agent's marker)
from ledger_runtime.analysis.commands import ANY_FILE, Analysis, analyze  # noqa: E402

CWD = "/testbed"
GOAL = 0.99
KEY_KINDS = {"f": "file content", "d": "directory listing", "r": "whole subtree", "x": "existence", "m": "stat data"}


def analyze_all(commands: list[str]) -> tuple[list[Analysis], list[float]]:
    """Analyse every command, uncached: one untimed warm-up pass, then each timed on its own."""
    fn = analyze.__wrapped__  # analyze without its lru_cache (same exception handling)
    analyze.cache_clear()
    for c in commands:
        fn(c, CWD, SUBMISSION)
    results: list[Analysis] = []
    times: list[float] = []
    clock = time.perf_counter
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for c in commands:
            t0 = clock()
            a = fn(c, CWD, SUBMISSION)
            t1 = clock()
            times.append(t1 - t0)
            results.append(a)
    finally:
        if gc_was_enabled:
            gc.enable()
    return results, times


# -- presentation -----------------------------------------------------------------------------------


def rel(path: str) -> str:
    """A path relative to /testbed when it lies under it ("." for /testbed itself)."""
    if path == CWD:
        return "."
    return path[len(CWD) + 1 :] if path.startswith(CWD + "/") else path


def show_key(key: str) -> str:
    kind, _, path = key.partition(":")
    return f"{kind}:{rel(path)}"


def show_selector(sel: tuple) -> str:
    kind = sel[0]
    if kind == "range":
        return f"{sel[1]}-{'$' if sel[2] is None else sel[2]}"
    if kind == "head":
        return f"head {sel[1]}"
    if kind == "head-all-but":
        return f"head -{sel[1]}"
    if kind == "tail":
        return f"tail {sel[1]}"
    if kind == "from":
        return f"from {sel[1]}"
    return str(sel)


def show_view(v) -> str:
    sel = " | ".join(show_selector(s) for s in v.selectors)
    num = " #" if v.numbered else ""
    return f"{v.kind} {rel(v.path)}{' [' + sel + ']' if sel else ''}{num}"


def analysis_dict(a: Analysis) -> dict:
    return {
        "class": a.command_class.value,
        "pure": a.pure,
        "parsed": a.parsed,
        "problem": a.problem,
        "cwd": a.cwd,
        "read_keys": list(a.read_keys),
        "views": [
            {"path": v.path, "kind": v.kind, "selectors": [list(s) for s in v.selectors], "numbered": v.numbered}
            for v in a.views
        ],
        "writes": list(a.writes),
        "outputs": a.outputs,
        "env_change": a.env_change,
        "submits": a.submits,
    }


def where(row: Row) -> dict:
    return {"source": row.source, "instance_id": row.instance_id, "step": row.step, "kind": row.kind}


def pct(n: int, total: int) -> str:
    return f"{n / total:.2%}" if total else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA, help="glob of actions.jsonl.gz files (default: %(default)s)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="folder for coverage.json (default: %(default)s)")
    ap.add_argument("--sample", type=int, default=300, help="distinct commands in the quality sample (default: 300)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the quality sample (default: 0)")
    args = ap.parse_args(argv)

    console = Console(width=max(220, Console().width))
    rows, info = load_commands(args.data)
    commands = [r.command for r in rows]
    n = len(commands)
    console.print(
        f"[bold]{n}[/] commands ({info['distinct_commands']} distinct) from {info['instances']} "
        f"trajectories in {len(info['files'])} file(s); analysed in cwd {CWD}"
    )

    results, times = analyze_all(commands)

    # -- counting ----------------------------------------------------------------------------------------
    parsed = sum(a.parsed for a in results)
    classes = Counter(a.command_class.value for a in results)
    pure_by_class = Counter(a.command_class.value for a in results if a.pure)
    pure = sum(a.pure for a in results)
    with_reads = sum(bool(a.read_keys) for a in results)
    key_kinds = Counter(k for a in results for k in {key.partition(":")[0] for key in a.read_keys})
    line_views = sum(any(v.kind == "lines" for v in a.views) for a in results)
    match_views = sum(any(v.kind == "matches" for v in a.views) for a in results)
    with_writes = sum(bool(a.writes) for a in results)
    writes_any = sum(ANY_FILE in a.writes for a in results)
    env_change = sum(a.env_change for a in results)
    submits = sum(a.submits for a in results)
    problems: dict[str, list[int]] = defaultdict(list)
    for i, a in enumerate(results):
        if not a.parsed or a.problem:
            problems[a.problem or "(no reason given)"].append(i)
    timing = timing_summary(times)
    coverage = parsed / n

    # -- printing -----------------------------------------------------------------------------------------
    t = Table(title="analyze(): coverage and what it finds (all commands)", title_justify="left")
    t.add_column("measure")
    t.add_column("commands", justify="right")
    t.add_column("share", justify="right")
    verdict = "[green]goal met[/]" if coverage >= GOAL else "[red]below goal[/]"
    t.add_row(f"parsed (goal ≥ {GOAL:.0%}: {verdict})", str(parsed), f"{coverage:.3%}")
    t.add_row("pure", str(pure), pct(pure, n))
    t.add_row("≥ 1 read key", str(with_reads), pct(with_reads, n))
    for k, label in KEY_KINDS.items():
        t.add_row(f"   with a {k}: key ({label})", str(key_kinds.get(k, 0)), pct(key_kinds.get(k, 0), n))
    t.add_row("≥ 1 line view", str(line_views), pct(line_views, n))
    t.add_row("≥ 1 match view", str(match_views), pct(match_views, n))
    t.add_row("≥ 1 write", str(with_writes), pct(with_writes, n))
    t.add_row("   may write any file (*)", str(writes_any), pct(writes_any, n))
    t.add_row("environment change", str(env_change), pct(env_change, n))
    t.add_row("submits", str(submits), pct(submits, n))
    console.print(t)

    ct = Table(title="Classes", title_justify="left")
    for col in ("class", "commands", "share", "pure", "pure share of class"):
        ct.add_column(col, justify="left" if col == "class" else "right")
    for cls, c in classes.most_common():
        ct.add_row(cls, str(c), pct(c, n), str(pure_by_class.get(cls, 0)), pct(pure_by_class.get(cls, 0), c))
    console.print(ct)

    tt = Table(title="Time of analyze() per command (uncached)", title_justify="left")
    for col in ("median µs", "p95 µs", "max µs", "mean µs", "total s"):
        tt.add_column(col, justify="right")
    tt.add_row(
        f"{timing['median_us']:.1f}",
        f"{timing['p95_us']:.1f}",
        f"{timing['max_us']:.0f}",
        f"{timing['mean_us']:.1f}",
        f"{timing['total_s']:.3f}",
    )
    console.print(tt)

    problem_report = {}
    if problems:
        pt = Table(title="Why analysis failed (analysis.problem)", title_justify="left")
        pt.add_column("problem", overflow="fold", max_width=60)
        pt.add_column("commands", justify="right")
        pt.add_column("distinct", justify="right")
        pt.add_column("example", overflow="fold", max_width=70)
        for prob, idx in sorted(problems.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            distinct = list(dict.fromkeys(commands[i] for i in idx))
            first = {c: i for i, c in reversed(list(enumerate(commands))) if c in set(distinct)}
            problem_report[prob] = {
                "count": len(idx),
                "distinct": len(distinct),
                "examples": [where(rows[first[c]]) | {"command": c} for c in distinct[:5]],
            }
            pt.add_row(escape(prob), str(len(idx)), str(len(distinct)), escape(one_line(distinct[0], 70)))
        console.print(pt)
    else:
        console.print("No analysis problems.")

    # -- the quality sample ---------------------------------------------------------------------------------
    first_seen: dict[str, int] = {}
    for i, c in enumerate(commands):
        first_seen.setdefault(c, i)
    distinct_cmds = list(first_seen)
    k = min(args.sample, len(distinct_cmds))
    picked = sorted(random.Random(args.seed).sample(range(len(distinct_cmds)), k))
    sample = []
    st = Table(
        title=f"Quality sample: {k} distinct commands (seed {args.seed}); paths relative to {CWD}",
        title_justify="left",
        show_lines=False,
    )
    st.add_column("#", justify="right")
    st.add_column("command (first 80 chars)", no_wrap=True, min_width=80)
    st.add_column("class")
    st.add_column("pure")
    st.add_column("read keys", overflow="fold", max_width=40)
    st.add_column("views", overflow="fold", max_width=36)
    st.add_column("writes", overflow="fold", max_width=28)
    for j, p in enumerate(picked, 1):
        cmd = distinct_cmds[p]
        i = first_seen[cmd]
        a = results[i]
        sample.append({"n": j, **where(rows[i]), "command": cmd, "analysis": analysis_dict(a)})
        st.add_row(
            str(j),
            escape(one_line(cmd, 80)),
            a.command_class.value,
            "yes" if a.pure else "no",
            escape(" ".join(show_key(x) for x in a.read_keys)),
            escape("; ".join(show_view(v) for v in a.views)),
            escape(" ".join(rel(w) for w in a.writes)),
        )
    console.print(st)

    report = {
        "data": info,
        "cwd": CWD,
        "method": {
            "function": "ledger_runtime.analysis.commands.analyze (uncached via __wrapped__)",
            "warmup_passes": 1,
            "timer": "time.perf_counter per command",
            "gc": "disabled while timing",
        },
        "summary": {
            "commands": n,
            "parsed": parsed,
            "coverage": round(coverage, 6),
            "coverage_goal": GOAL,
            "goal_met": coverage >= GOAL,
            "pure": pure,
            "pure_share": round(pure / n, 6),
            "with_read_keys": with_reads,
            "with_read_keys_share": round(with_reads / n, 6),
            "with_read_key_kind": {k: key_kinds.get(k, 0) for k in KEY_KINDS},
            "with_line_view": line_views,
            "with_line_view_share": round(line_views / n, 6),
            "with_match_view": match_views,
            "with_writes": with_writes,
            "with_writes_share": round(with_writes / n, 6),
            "writes_any_file": writes_any,
            "env_change": env_change,
            "submits": submits,
        },
        "classes": {
            cls: {"count": c, "share": round(c / n, 6), "pure": pure_by_class.get(cls, 0)}
            for cls, c in classes.most_common()
        },
        "timing": timing,
        "problems": problem_report,
        "sample": {"seed": args.seed, "size": k, "drawn_from": "distinct commands, first occurrence", "items": sample},
    }
    path = write_json(args.out, "coverage.json", report)
    console.print(f"JSON written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
