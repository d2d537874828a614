"""Compare shell parsers on the real commands of SWE-bench agent trajectories.

What it measures, for bashlex, tree-sitter-bash and (as a reference that is not a shell parser)
Python's ``shlex.split(posix=True)``, on every row of ``actions.jsonl.gz`` whose ``command`` is a
non-empty string (kinds action, submit, timeout):

- coverage: bashlex parses without raising; tree-sitter gives a tree with no ERROR or MISSING node
  (``root_node.has_error`` is False); shlex splits without raising;
- speed: every parse timed on its own with ``time.perf_counter`` (tree-sitter's time includes
  encoding the text to bytes and reading ``has_error``), after one untimed warm-up pass over all
  commands, with the garbage collector off while timing; reported as median and p95 microseconds
  per command and the total seconds;
- failures: grouped by category (the exception message with positions and line numbers taken out,
  or, for tree-sitter, the first ERROR/MISSING node and its parent), each with the construct the
  command uses (quoted heredoc, herestring, ...). Every failing command is also given to
  ``bash -n`` (syntax check only, nothing runs): "bash -n rejects" counts failures that are not
  valid bash anyway, so ``failed - bash -n rejects`` is what the parser wrongly refuses;
- a few example commands that tree-sitter fails on;
- a caveat on tree-sitter's coverage: trees without ERROR nodes that still have a known-wrong
  shape, a ``pipeline`` with a ``list`` among its stages. tree-sitter-bash 0.25 reads
  ``a | b | c && d`` as ``a | (b | c && d)`` (bash: ``(a | b | c) && d``), and with a line break
  before the ``&&`` line it even takes that line's first command as arguments of ``c``.

Counts are deterministic (files in sorted order, rows in file order); timings vary with the machine.

Reproduce, from the repository root (/work/main)::

    . .venv/bin/activate
    python swebench_runs/parsers/compare_parsers.py            # default data: ../shared/data/trajectories/*/
    python swebench_runs/parsers/compare_parsers.py --data '/path/to/*/actions.jsonl.gz' --out /tmp/res

Output: a rich table on stdout and ``results/compare_parsers.json`` (or ``--out DIR``).
"""

from __future__ import annotations

import argparse
import gc
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

try:
    import bashlex  # noqa: E402
except ImportError:
    sys.exit("compare_parsers.py needs bashlex: pip install -e '.[parsers]'")
import tree_sitter_bash  # noqa: E402
from _common import DEFAULT_DATA, DEFAULT_OUT, Row, load_commands, one_line, timing_summary, write_json  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from tree_sitter import Language, Parser  # noqa: E402

TS_PARSER = Parser(Language(tree_sitter_bash.language()))


# -- the three parsers: each returns None on success, else what went wrong -------------------------


def parse_bashlex(command: str) -> Exception | None:
    try:
        bashlex.parse(command)
    except Exception as e:  # ParsingError, MatchedPairError, NotImplementedError, ...
        return e
    return None


def parse_tree_sitter(command: str):
    tree = TS_PARSER.parse(command.encode("utf-8", "surrogateescape"))
    return tree if tree.root_node.has_error else None


def parse_shlex(command: str) -> Exception | None:
    try:
        shlex.split(command, posix=True)
    except Exception as e:  # ValueError: No closing quotation / No escaped character
        return e
    return None


PARSERS: dict[str, Callable[[str], object]] = {
    "bashlex": parse_bashlex,
    "tree-sitter-bash": parse_tree_sitter,
    "shlex.split (reference)": parse_shlex,
}


# -- failure categories --------------------------------------------------------------------------

_CONSTRUCTS: list[tuple[str, re.Pattern]] = [
    ("heredoc with quoted delimiter", re.compile(r"<<-?\s*(['\"])[^'\"\n]+\1")),
    ("heredoc", re.compile(r"<<-?\s*\\?[A-Za-z_]")),
    ("herestring", re.compile(r"<<<")),
    ("ANSI-C string $'...'", re.compile(r"\$'")),
    ("process substitution", re.compile(r"[<>]\(")),
    ("arithmetic", re.compile(r"\$?\(\(")),
    ("[[ test ]]", re.compile(r"\[\[")),
    ("command substitution", re.compile(r"\$\(|`")),
    ("escaped quote in single quotes", re.compile(r"'[^'\n]*\\'")),
    ("loop / conditional", re.compile(r"(^|[;&|\n]\s*)(for|while|until|if|case)\b")),
    ("line continuation", re.compile(r"\\\n")),
]


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z_0-9]*)\1")


def construct_of(command: str) -> str:
    """The first notable shell construct the command uses (a heuristic, for grouping)."""
    for m in _HEREDOC.finditer(command):  # a body line that is the delimiter word, indented
        if re.search(r"^[ \t]+" + re.escape(m.group(2)) + r"\b", command[m.end() :], re.M):
            return "heredoc body line starting with the indented delimiter"
    for name, rx in _CONSTRUCTS:
        if rx.search(command):
            return name
    return "plain"


def exception_category(e: Exception) -> str:
    """The exception type and message, with positions and line numbers taken out."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    msg = re.sub(r"\s*\(position \d+\)", "", msg)
    msg = re.sub(r"\bline \d+", "line N", msg)
    msg = re.sub(
        r"\(wanted (['\"])(.*)\1\)",
        lambda m: "(wanted a quoted delimiter)" if m.group(2)[:1] in "'\"" else "(wanted DELIM)",
        msg,
    )
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


def first_error_node(node):
    """The first ERROR or MISSING node in document order (the node itself may be the root)."""
    if node.type == "ERROR" or node.is_missing:
        return node
    for c in node.children:
        if c.has_error:
            found = first_error_node(c)
            if found is not None:
                return found
    return None


def tree_category(tree) -> tuple[str, object]:
    n = first_error_node(tree.root_node)
    if n is None:  # has_error without a visible node should not happen
        return "has_error without an ERROR/MISSING node", None
    if n.is_missing:
        return f"MISSING {n.type!r} in {n.parent.type}", n
    if n.parent is None:
        return "ERROR spanning the whole command", n
    return ("ERROR at top level" if n.parent.type == "program" else f"ERROR in {n.parent.type}"), n


# -- bash -n: is a failing command valid bash at all? ---------------------------------------------


def bash_rejects(commands: set[str]) -> dict[str, bool]:
    """For each command, whether ``bash -n`` (parse only, no execution) reports a syntax error."""
    bash = shutil.which("bash")
    if bash is None:
        return {}

    def check(cmd: str) -> tuple[str, bool]:
        try:
            p = subprocess.run(
                [bash, "-n"], input=cmd.encode("utf-8", "surrogateescape"), capture_output=True, timeout=30, check=False
            )
        except subprocess.TimeoutExpired:
            return cmd, False
        return cmd, p.returncode != 0

    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(pool.map(check, sorted(commands)))


def misassociated_pipelines(command: str) -> bool:
    """Whether tree-sitter's tree has a pipeline with a ``list`` stage (``a | b | c && d``)."""
    stack = [TS_PARSER.parse(command.encode("utf-8", "surrogateescape")).root_node]
    while stack:
        n = stack.pop()
        if n.type == "pipeline" and any(c.type == "list" for c in n.children):
            return True
        stack.extend(n.children)
    return False


# -- measuring -------------------------------------------------------------------------------------


def measure(fn: Callable[[str], object], commands: list[str]) -> tuple[list[object], list[float]]:
    """One untimed warm-up pass, then every command parsed and timed on its own."""
    for c in commands:
        fn(c)
    results: list[object] = []
    times: list[float] = []
    clock = time.perf_counter
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for c in commands:
            t0 = clock()
            r = fn(c)
            t1 = clock()
            times.append(t1 - t0)
            results.append(r)
    finally:
        if gc_was_enabled:
            gc.enable()
    return results, times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA, help="glob of actions.jsonl.gz files (default: %(default)s)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="folder for compare_parsers.json (default: %(default)s)")
    ap.add_argument("--examples", type=int, default=5, help="tree-sitter failures to print (default: %(default)s)")
    args = ap.parse_args(argv)

    console = Console(width=max(140, Console().width))
    rows, info = load_commands(args.data)
    commands = [r.command for r in rows]
    distinct = len(set(commands))
    console.print(
        f"[bold]{info['commands']}[/] commands ({distinct} distinct) from {info['instances']} trajectories "
        f"in {len(info['files'])} file(s); rows by kind: {info['rows_by_kind']}"
    )

    measured: dict[str, dict] = {}
    for name, fn in PARSERS.items():
        results, times = measure(fn, commands)
        failed_idx = [i for i, r in enumerate(results) if r is not None]
        measured[name] = {"results": results, "times": times, "failed": failed_idx}

    failing = {commands[i] for m in measured.values() for i in m["failed"]}
    rejects = bash_rejects(failing)
    have_bash = bool(rejects) or not failing

    summary_rows = []
    report: dict = {
        "data": info,
        "versions": {
            "python": platform.python_version(),
            "bashlex": version("bashlex"),
            "tree-sitter": version("tree-sitter"),
            "tree-sitter-bash": version("tree-sitter-bash"),
            "bash": _bash_version(),
        },
        "method": {
            "warmup_passes": 1,
            "timer": "time.perf_counter per command",
            "gc": "disabled while timing",
            "tree_sitter_ok": "root_node.has_error is False",
            "bashlex_ok": "bashlex.parse raises nothing",
            "shlex_ok": "shlex.split(posix=True) raises nothing",
            "bash_n": "failing commands checked with `bash -n` (syntax only)",
        },
        "parsers": {},
    }

    for name, m in measured.items():
        failed = m["failed"]
        n = len(commands)
        failed_distinct = {commands[i] for i in failed}
        categories: dict[str, dict] = {}
        groups: dict[str, list[int]] = defaultdict(list)
        for i in failed:
            r = m["results"][i]
            cat = tree_category(r)[0] if name == "tree-sitter-bash" else exception_category(r)
            groups[cat].append(i)
        for cat, idx in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            cmds = [commands[i] for i in idx]
            constructs = Counter(construct_of(c) for c in cmds)
            seen: list[int] = []
            for i in idx:
                if commands[i] not in {commands[j] for j in seen}:
                    seen.append(i)
                if len(seen) == 3:
                    break
            categories[cat] = {
                "count": len(idx),
                "distinct": len(set(cmds)),
                "bash_n_rejects": sum(rejects.get(c, False) for c in cmds) if have_bash else None,
                "constructs": dict(constructs.most_common()),
                "examples": [_where(rows[i]) | {"command": commands[i][:400]} for i in seen],
            }
        invalid = sum(rejects.get(commands[i], False) for i in failed) if have_bash else None
        entry = {
            "commands": n,
            "ok": n - len(failed),
            "failed": len(failed),
            "coverage": round((n - len(failed)) / n, 6),
            "coverage_distinct": round((distinct - len(failed_distinct)) / distinct, 6),
            "failed_but_bash_n_rejects_too": invalid,
            "rejects_valid_bash": None if invalid is None else len(failed) - invalid,
            "timing": timing_summary(m["times"]),
            "failure_categories": categories,
        }
        report["parsers"][name] = entry
        summary_rows.append((name, entry))

    # -- printing ------------------------------------------------------------------------------------
    t = Table(title="Parse coverage and speed (all commands; time per command)", title_justify="left")
    for col, just in [
        ("parser", "left"),
        ("ok", "right"),
        ("failed", "right"),
        ("coverage", "right"),
        ("distinct cov.", "right"),
        ("valid bash refused", "right"),
        ("median µs", "right"),
        ("p95 µs", "right"),
        ("max µs", "right"),
        ("total s", "right"),
    ]:
        t.add_column(col, justify=just)
    for name, e in summary_rows:
        tm = e["timing"]
        t.add_row(
            name,
            str(e["ok"]),
            str(e["failed"]),
            f"{e['coverage']:.2%}",
            f"{e['coverage_distinct']:.2%}",
            "?" if e["rejects_valid_bash"] is None else str(e["rejects_valid_bash"]),
            f"{tm['median_us']:.1f}",
            f"{tm['p95_us']:.1f}",
            f"{tm['max_us']:.0f}",
            f"{tm['total_s']:.3f}",
        )
    console.print(t)
    console.print("[dim]valid bash refused = failures that `bash -n` accepts (the parser's own limits)[/]")

    for name, e in summary_rows:
        if not e["failure_categories"]:
            console.print(f"[bold]{name}[/]: no failures")
            continue
        ft = Table(title=f"Top failure categories: {name}", title_justify="left")
        ft.add_column("category", overflow="fold", max_width=62)
        ft.add_column("count", justify="right")
        ft.add_column("distinct", justify="right")
        ft.add_column("bash -n rejects", justify="right")
        ft.add_column("constructs", overflow="fold", max_width=40)
        ft.add_column("example", overflow="fold", max_width=50)
        for cat, c in list(e["failure_categories"].items())[:8]:
            cons = ", ".join(f"{k} {v}" for k, v in list(c["constructs"].items())[:3])
            ft.add_row(
                cat,
                str(c["count"]),
                str(c["distinct"]),
                "?" if c["bash_n_rejects"] is None else str(c["bash_n_rejects"]),
                cons,
                one_line(c["examples"][0]["command"], 50),
            )
        if len(e["failure_categories"]) > 8:
            ft.caption = f"... and {len(e['failure_categories']) - 8} more categories in the JSON"
        console.print(ft)

    # -- tree-sitter failures, in full detail ------------------------------------------------------------
    ts = measured["tree-sitter-bash"]
    examples = []
    shown: set[str] = set()
    for i in ts["failed"]:
        c = commands[i]
        if c in shown:
            continue
        shown.add(c)
        cat, node = tree_category(ts["results"][i])
        src = c.encode("utf-8", "surrogateescape")
        at = node.start_byte if node is not None else 0
        ex = _where(rows[i]) | {
            "category": cat,
            "error_span": [list(node.start_point), list(node.end_point)] if node is not None else None,
            "bash_n_rejects": rejects.get(c) if have_bash else None,
            "construct": construct_of(c),
            "chars": len(c),
            "context": src[max(0, at - 60) : at + 60].decode("utf-8", "replace"),
            "command": c,
        }
        examples.append(ex)
    report["tree_sitter_failing_commands"] = examples
    if examples:
        et = Table(
            title=f"Commands tree-sitter-bash fails on ({len(examples)} distinct; first {args.examples})",
            title_justify="left",
        )
        et.add_column("where", overflow="fold", max_width=34)
        et.add_column("category", overflow="fold", max_width=28)
        et.add_column("bash -n", justify="center")
        et.add_column("construct", overflow="fold", max_width=22)
        et.add_column("command (first 120 chars)", overflow="fold", max_width=60)
        for ex in examples[: args.examples]:
            verdict = {True: "rejects", False: "accepts", None: "?"}[ex["bash_n_rejects"]]
            et.add_row(
                f"{ex['instance_id']} step {ex['step']}",
                ex["category"],
                verdict,
                ex["construct"],
                one_line(ex["command"], 120),
            )
        console.print(et)

    # -- tree-sitter trees without errors but with a known-wrong shape ---------------------------------
    ok_idx = [i for i, r in enumerate(ts["results"]) if r is None]
    wrong = [i for i in ok_idx if misassociated_pipelines(commands[i])]
    wrong_distinct = list(dict.fromkeys(commands[i] for i in wrong))
    report["tree_sitter_misassociated_pipelines"] = {
        "description": "parsed without error, but a pipeline has a list stage: `a | b | c && d` read as "
        "`a | (b | c && d)`",
        "count": len(wrong),
        "distinct": len(wrong_distinct),
        "examples": wrong_distinct[:10],
    }
    console.print(
        f"tree-sitter-bash caveat: {len(wrong)} commands ({len(wrong_distinct)} distinct) parse without "
        f"error into a pipeline with a list stage (`a | b | c && d` read as `a | (b | c && d)`), e.g. "
        f"{one_line(wrong_distinct[0], 90)!r}"
        if wrong
        else "tree-sitter-bash: no misassociated pipelines"
    )

    path = write_json(args.out, "compare_parsers.json", report)
    console.print(f"JSON written to {path}")
    return 0


def _where(row: Row) -> dict:
    return {"source": row.source, "instance_id": row.instance_id, "step": row.step, "kind": row.kind}


def _bash_version() -> str | None:
    bash = shutil.which("bash")
    if bash is None:
        return None
    out = subprocess.run([bash, "--version"], capture_output=True, text=True, check=False).stdout
    return out.splitlines()[0] if out else None


if __name__ == "__main__":
    sys.exit(main())
