"""The replay benchmark's report: per-trajectory results summed per repository and in total,
printed as rich tables and written as RESULTS.md."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable

from rich import box
from rich.table import Table

TARGETS = {"unsound": 0, "spared_share": 0.15, "view_p95_tokens": 1200}
KINDS = ("whole", "spans", "delta", "reused")


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def aggregate(results: Iterable[dict]) -> dict[str, dict[str, Any]]:
    """Totals per repository and overall ('total')."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        groups[r.get("repo") or "?"].append(r)
        groups["total"].append(r)
    return {repo: _group(rs) for repo, rs in sorted(groups.items(), key=lambda kv: (kv[0] == "total", kv[0]))}


def _group(results: list[dict]) -> dict[str, Any]:
    rows = [row for r in results for row in r["rows"]]
    sums: dict[str, Any] = defaultdict(int)
    nested: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(int))
    by_class: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in results:
        for k, v in r["summary"].items():
            if isinstance(v, (int, float)):
                sums[k] += v
            elif isinstance(v, dict) and k != "by_class":
                for kk, vv in v.items():
                    nested[k][kk] += vv
        for cls, verdicts in r["summary"]["by_class"].items():
            for verdict, n in verdicts.items():
                by_class[cls][verdict] += n
    overhead = [row["overhead_ms"] for row in rows]
    ratio = [row["overhead_ms"] / row["exec_ms"] for row in rows if row["exec_ms"] and row["exec_ms"] > 0]
    views = [row["view_tokens"] for row in rows]
    prompts = [row["prompt_tokens"] for row in rows if row.get("prompt_tokens") is not None]
    red = sums["redundant"]
    visible = sums["visible_chars"]
    return {
        "instances": len(results),
        "commands": sums["commands"],
        "parsed": sums["parsed"],
        "parse_coverage": sums["parsed"] / sums["commands"] if sums["commands"] else None,
        "checked": sums["checked"],
        "checked_refs": sums["checked_refs"],
        "unsound": sums["unsound"],
        "unsound_masked": sums["unsound_masked"],
        "answers": dict(nested["answers"]),
        "output_chars": sums["output_chars"],
        "visible_chars": visible,
        "chars_spared": sums["chars_spared"],
        "tokens_spared": sums["chars_spared"] // 4,
        "spared_share": sums["chars_spared"] / visible if visible else None,
        "spared_by_kind": dict(nested["spared_by_kind"]),
        "spared_by_class": dict(nested["spared_by_class"]),
        "visible_by_class": dict(nested["visible_by_class"]),
        "repeated_chars": sums["repeated_chars"],
        "repeated_share": sums["repeated_chars"] / visible if visible else None,
        "redundant": red,
        "redundant_exact": sums["redundant_exact"],
        "redundant_subsumed": sums["redundant_subsumed"],
        "caught": sums["caught"],
        "coverage": sums["caught"] / red if red else None,
        "not_executed": sums["not_executed"],
        "exit_differs": sums["exit_differs"],
        "exit_recorded": sums["exit_recorded"],
        "overhead_ms_p50": _pct(overhead, 0.5),
        "overhead_ms_p95": _pct(overhead, 0.95),
        "overhead_ratio_p50": _pct(ratio, 0.5),
        "overhead_ratio_p95": _pct(ratio, 0.95),
        "view_tokens_p50": _pct(views, 0.5),
        "view_tokens_p95": _pct(views, 0.95),
        "prompt_tokens_p50": _pct(prompts, 0.5),
        "prompt_tokens_p95": _pct(prompts, 0.95),
        "by_class": {c: dict(v) for c, v in sorted(by_class.items())},
        "faults": sum(r.get("faults", 0) for r in results),
        "claims": _claims(results),
    }


def _claims(results: list[dict]) -> dict[str, Any]:
    """The ledger's claims checked against the files (replay/truth.py), summed; the false ones named."""
    out: dict[str, Any] = {"checked": 0, "false": 0, "unknown": 0, "examples": [], "results": 0}
    for r in results:
        c = r.get("claims")
        if not isinstance(c, dict):
            continue
        out["results"] += 1
        for k in ("checked", "false", "unknown"):
            out[k] += int(c.get(k) or 0)
        out["examples"] += [f"{r.get('instance_id')}: {x}" for x in c.get("examples") or ()][
            : 20 - len(out["examples"])
        ]
    return out


def _f(v: Any, fmt: str = "{:,}") -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and fmt == "{:,}":
        return f"{v:,.1f}"
    return fmt.format(v)


SUMMARY_COLUMNS = ("repository", "runs", "commands", "unsound", "spared", "repeated", "caught", "ms p50", "view p95")


def table(
    agg: dict[str, dict[str, Any]], what: str = "recorded trajectories", columns: tuple[str, ...] = SUMMARY_COLUMNS
) -> Table:
    """The totals per repository; ``what``: what was replayed (the title names it); ``columns``: which (the
    repository is always the first)."""
    # fits 80 columns: short human headers, the repository by its name (RESULTS.md has owner/name)
    t = Table(
        title=f"Replay of {what} (shadow mode)",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1, 0, 0),
    )
    for c in columns:
        t.add_column(c, justify="left" if c == "repository" else "right", overflow="ellipsis", min_width=len(c))
    for repo, g in agg.items():
        cells = {
            "repository": repo.rsplit("/", 1)[-1],
            "runs": str(g["instances"]),
            "commands": _f(g["commands"]),
            "unsound": str(g["unsound"]),
            "spared": _f(g["spared_share"], "{:.1%}"),
            "repeated": _f(g["repeated_share"], "{:.1%}"),
            "caught": _f(g["coverage"], "{:.0%}"),
            "ms p50": _f(g["overhead_ms_p50"], "{:.1f}"),
            "view p95": _f(g["view_tokens_p95"], "{:.0f}"),
        }
        t.add_row(*(cells[c] for c in columns))
    return t


def tables(agg: dict[str, dict[str, Any]], what: str, width: int, measure: Callable[[Table], int]) -> list[Table]:
    """``table`` as it fits ``width`` columns (``measure``: a table's width unwrapped): whole where it fits, else
    its columns over as many tables as it takes, each with the repository; a narrow terminal cut the last columns
    off ("caugh", and no "ms p50" nor "view p95" at all) without a word."""
    if measure(table(agg, what)) <= width:
        return [table(agg, what)]
    parts: list[list[str]] = [[]]
    for c in SUMMARY_COLUMNS[1:]:
        if parts[-1] and measure(table(agg, what, ("repository", *parts[-1], c))) > width:
            parts.append([])
        parts[-1].append(c)
    split = [table(agg, what, ("repository", *p)) for p in parts]
    for t in split[1:]:
        t.title = "(the replay's table, continued)"
    return split


def class_table(g: dict[str, Any]) -> Table:
    t = Table(title="Characters spared by command class (all trajectories)")
    for c in ("class", "commands", "output seen", "spared", "share"):
        t.add_column(c, justify="left" if c == "class" else "right")
    counts = {cls: sum(v.values()) for cls, v in g["by_class"].items()}
    for cls in sorted(g["visible_by_class"]):
        vis = g["visible_by_class"][cls]
        sp = g["spared_by_class"].get(cls, 0)
        t.add_row(cls, str(counts.get(cls, 0)), f"{vis:,}", f"{sp:,}", _f(sp / vis if vis else None, "{:.1%}"))
    return t


def results_by_code(results: list[dict[str, Any]]) -> dict[str, int]:
    """How many of ``results`` each code made: its commit, marked ``+`` when it had uncommitted changes
    (``unknown`` when the result does not say)."""
    by: dict[str, int] = {}
    for r in results:
        code = r.get("code") or {}
        key = (code.get("commit") or "unknown") + ("+" if code.get("dirty") else "")
        by[key] = by.get(key, 0) + 1
    return by


def _resumed_from(prov: dict[str, Any]) -> list[str]:
    """A line naming the commits the results came from, when a resumed replay's are not all this code's."""
    by = prov.get("results_by") or {}
    this = (prov.get("commit") or "unknown") + ("+" if prov.get("dirty") else "")
    if not by or set(by) == {this}:
        return []
    parts = [
        f"`{k.rstrip('+')}`{' (with uncommitted changes)' if k.endswith('+') else ''}: {n}"
        for k, n in sorted(by.items())
    ]
    return ["- resumed: the results come from more than this code; trajectories by commit: " + ", ".join(parts)]


def results_md(
    agg: dict[str, dict[str, Any]],
    command: str,
    skipped: list[tuple[str, str]],
    notes: list[str],
    provenance: dict[str, Any] | None = None,
    what: str = "recorded trajectories",
) -> str:
    """RESULTS.md: only what the replay computed, with the code's commit and the settings it ran with;
    ``what``: what was replayed (the title names it)."""
    tot = agg["total"]
    prov = provenance or {}
    lines = [
        f"# Replay of {what}",
        "",
        "Every recorded command of each trajectory ran again, in order, through the ledger in shadow mode "
        "(verdicts and answers decided and recorded, every command executed), in a fresh checkout of its "
        "base commit. Definitions: `harness/replay/engine.py`.",
        "",
    ]
    if prov:
        lines += [
            f"- code: ledger-runtime {prov.get('version', '?')} at commit `{prov.get('commit') or 'unknown'}`"
            + (" (with uncommitted changes)" if prov.get("dirty") else ""),
            *_resumed_from(prov),
            f"- settings: {', '.join(f'`{k} = {v!r}`' for k, v in (prov.get('settings') or {}).items())}",
            f"- written: {prov.get('written', '?')}",
        ]
        if (prov.get("jobs") or 1) > 1:
            lines.append(f"- {prov['jobs']} trajectories replayed at a time: the overhead timings are contended")
        if prov.get("outputs") == "recorded":
            lines.append(
                "- outputs: the ones the agent got in the recorded run (`--outputs recorded`): each command still "
                "ran, for its effects, and the ledger was given its recorded output; answers are checked against it"
            )
        lines.append("")
    lines += [
        "Reproduce:",
        "",
        "```bash",
        command,
        "```",
        "",
        "| repository | trajectories | commands | parse coverage | answers checked | unsound | output seen (chars) | "
        "spared (chars) | spared | repeated lines (ceiling) | redundant (exact / subsumed) | caught | "
        "overhead ms p50 / p95 | overhead / command p50 / p95 | view tokens p50 / p95 |",
        "|" + "---|" * 15,
    ]
    for repo, g in agg.items():
        lines.append(
            f"| {repo} | {g['instances']} | {g['commands']} | {_f(g['parse_coverage'], '{:.2%}')} | {g['checked']} | "
            f"{g['unsound']} | {g['visible_chars']:,} | {g['chars_spared']:,} | {_f(g['spared_share'], '{:.1%}')} | "
            f"{_f(g['repeated_share'], '{:.1%}')} | "
            f"{g['redundant']} ({g['redundant_exact']} / {g['redundant_subsumed']}) | "
            f"{_f(g['coverage'], '{:.1%}')} | "
            f"{_f(g['overhead_ms_p50'], '{:.1f}')} / {_f(g['overhead_ms_p95'], '{:.1f}')} | "
            f"{_f(g['overhead_ratio_p50'], '{:.2f}')} / {_f(g['overhead_ratio_p95'], '{:.2f}')} | "
            f"{_f(g['view_tokens_p50'], '{:.0f}')} / {_f(g['view_tokens_p95'], '{:.0f}')} |"
        )
    vis = tot["visible_chars"]
    lines += [
        "",
        "## What the answers spared, by kind",
        "",
        "| answer | commands | chars spared | share of output seen |",
        "|---|---|---|---|",
    ]
    for kind in ("raw", *KINDS, "refused"):
        n = tot["answers"].get(kind, 0)
        sp = tot["spared_by_kind"].get(kind, 0)
        lines.append(f"| {kind} | {n} | {sp:,} | {_f(sp / vis if vis else None, '{:.1%}')} |")
    lines += [
        "",
        "## By command class",
        "",
        "| class | commands | output seen (chars) | spared (chars) | share |",
        "|---|---|---|---|---|",
    ]
    for cls in sorted(tot["visible_by_class"]):
        v = tot["visible_by_class"][cls]
        sp = tot["spared_by_class"].get(cls, 0)
        n = sum(tot["by_class"].get(cls, {}).values())
        lines.append(f"| {cls} | {n} | {v:,} | {sp:,} | {_f(sp / v if v else None, '{:.1%}')} |")
    lines += [
        "",
        "## Checks",
        "",
        f"- answers checked against the output the ledger was given, byte for byte: {tot['checked']:,}; unsound: "
        f"{tot['unsound']}; of them {tot.get('checked_refs', 0):,} hold a reference (the other "
        f"{tot['checked'] - tot.get('checked_refs', 0):,} are the output as it is, which only a wrong store could fail)"
        + (f" ({tot['unsound_masked']} even with volatile text masked)" if tot["unsound"] else ""),
        f"- characters spared: {tot['chars_spared']:,} of {vis:,} seen ({_f(tot['spared_share'], '{:.1%}')}); "
        f"whole lines already shown verbatim: {_f(tot['repeated_share'], '{:.1%}')} (an upper bound for spans)",
        f"- redundant commands (the oracle) answered with a reference: {_f(tot['coverage'], '{:.1%}')} "
        f"({tot['caught']} of {tot['redundant']})",
        f"- ledger overhead per command: p50 {_f(tot['overhead_ms_p50'], '{:.1f}')} ms, "
        f"p95 {_f(tot['overhead_ms_p95'], '{:.1f}')} ms",
        f"- state view: p50 {_f(tot['view_tokens_p50'], '{:.0f}')}, p95 {_f(tot['view_tokens_p95'], '{:.0f}')} tokens",
        *_claims_lines(tot.get("claims") or {}),
        f"- commands whose exit code differs from the recorded run's: {tot.get('exit_differs', 0):,} of "
        f"{tot.get('exit_recorded', 0):,} with one recorded (they run again on this machine, its Python and no "
        "project installed, not in the instance's image: docs/swebench.md)",
        "",
        "## Verdicts by command class",
        "",
        "| class | " + " | ".join(sorted({v for c in tot["by_class"].values() for v in c})) + " |",
        "|---|" + "---|" * len({v for c in tot["by_class"].values() for v in c}),
    ]
    verdicts = sorted({v for c in tot["by_class"].values() for v in c})
    for cls, counts in tot["by_class"].items():
        lines.append(f"| {cls} | " + " | ".join(str(counts.get(v, 0)) for v in verdicts) + " |")
    if skipped:
        lines += ["", "## Skipped", ""] + [f"- {iid}: {why}" for iid, why in skipped]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _claims_lines(c: dict[str, Any]) -> list[str]:
    if not c.get("results"):
        return ["- the ledger's claims against the files: not checked (results of a replay from before the check)"]
    lines = [
        f"- the ledger's claims checked against the files themselves (every line of the state view at every step, "
        f"every NUDGE and REVISE reason, every stub sent; replay/truth.py): {c['checked']:,}; false: {c['false']}; "
        f"not checkable: {c['unknown']:,}"
    ]
    return lines + [f"  - false: {x}" for x in c.get("examples") or ()]


def load_results(out: Path) -> list[dict]:
    from ledger_runtime import json_value

    results = []
    for p in sorted(out.glob("*.json")):
        try:
            data = json_value(p.read_text())
        except (OSError, ValueError):  # a directory so named; UnreadableJSON (nested too deep too), not UTF-8
            continue
        if isinstance(data, dict) and data.get("status") == "done" and isinstance(data.get("instance_id"), str):
            results.append(data)
    return results


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


# -- the open loop of what the model is sent, in money (replay/meter.py) ----------------------------

CONTEXT_COLUMNS = (
    "arm",
    "prompt tokens",
    "uncached",
    "cache reads",
    "cache writes",
    "input USD",
    "vs none",
    "runs > 1.00 (max)",
    "vs bound",
    "total USD",
    "notes (chars)",
    "rewrites",
    "valid unique dropped",
    "lost (check)",
    "stubs (false)",
)


def summarize_context(results: Iterable[dict]) -> dict[str, dict[str, Any]]:
    """Per arm and price model, every trajectory's figures summed, with ratios against ``none``."""
    from ledger_harness.replay.meter import summarize

    return summarize([r for r in results if r.get("cost")])


def _context_row(arm: str, r: dict[str, Any]) -> list[str]:
    """An arm's figures; one the arm has not (the bound has its input cost and rewrites only) is "-", not 0: the
    bound's row read 0 prompt tokens and a total of $0.00 below its own input cost."""
    runs = r.get("runs") or {}

    def count(key: str) -> str:
        return f"{int(r[key]):,}" if key in r else "-"

    return [
        arm,
        count("prompt_tokens"),
        count("uncached_tokens"),
        count("cache_read_tokens"),
        count("cache_write_tokens"),
        _f(r.get("input_cost_usd"), "{:.2f}"),
        _f(r.get("input_vs_none"), "{:.3f}"),
        f"{runs.get('above_1', 0)} ({runs['max']:.3f})" if runs else "-",
        _f(r.get("vs_bound"), "{:+.1%}"),
        _f(r.get("cost_usd"), "{:.2f}"),
        count("note_chars"),
        count("rewrites"),
        count("valid_unique_lines_dropped"),
        count("lines_lost_independent"),
        f"{int(r['stubs']):,} ({int(r.get('stubs_false', 0))})" if "stubs" in r else "-",
    ]


def context_table(ctx: dict[str, dict[str, Any]], model: str, *, by_arm: bool = False) -> Table:
    """The arms' costs billed as ``model``: a row per arm, or (``by_arm``) a column per arm, a row per figure, which
    fits a narrow terminal."""
    return _arms_table(ctx, model, list(ctx), by_arm=by_arm)


def context_tables(
    ctx: dict[str, dict[str, Any]], model: str, width: int, measure: Callable[[Table], int]
) -> list[Table]:
    """``context_table`` as it fits ``width`` columns (``measure``: a table's width unwrapped): a row per arm where
    that fits, else a column per arm, the arms split over as many tables as it takes, so that no figure is cut
    or broken over lines (a table of one arm each is the narrowest there is)."""
    wide = context_table(ctx, model)
    if measure(wide) <= width:
        return [wide]
    arms = [arm for arm, by_model in ctx.items() if model in by_model]
    tables: list[Table] = []
    group: list[str] = []
    for arm in arms:
        if group and measure(_arms_table(ctx, model, [*group, arm], by_arm=True)) > width:
            tables.append(_arms_table(ctx, model, group, by_arm=True, part=(len(tables) + 1)))
            group = []
        group.append(arm)
    tables.append(_arms_table(ctx, model, group, by_arm=True, part=(len(tables) + 1) if tables else None))
    return tables


def _arms_table(
    ctx: dict[str, dict[str, Any]], model: str, arms: list[str], *, by_arm: bool, part: int | None = None
) -> Table:
    title = f"What the model is sent, every model call, billed as {model}" + (f" ({part})" if part else "")
    t = Table(title=title, box=box.SIMPLE)
    rows = [_context_row(arm, ctx[arm][model]) for arm in arms if model in ctx[arm]]
    if by_arm:
        t.add_column("", no_wrap=True)
        for row in rows:
            t.add_column(row[0], justify="right", no_wrap=True)
        for i, col in enumerate(CONTEXT_COLUMNS[1:], start=1):
            t.add_row(col, *(row[i] for row in rows))
        return t
    for col in CONTEXT_COLUMNS:
        t.add_column(col, justify="left" if col == "arm" else "right")
    for row in rows:
        t.add_row(*row)
    return t


def context_md(ctx: dict[str, dict[str, Any]], models: Iterable[str]) -> str:
    lines = [
        "",
        "## What the model is sent, in money (open loop)",
        "",
        "For every model call of each trajectory, the prompt each arm would have sent "
        "(`harness/replay/meter.py`), billed as the model's provider bills it "
        "(`harness/replay/billing.py`: uncached input, cache reads, cache writes, output), tokens by "
        "litellm's `token_counter`, prices from litellm's table. `vs none`: input cost (uncached, cache reads "
        "and writes) against the arm `none` (the same outputs, without the ledger); `runs > 1.00`: runs whose "
        "input cost is above theirs without the ledger, and the largest ratio; `vs bound`: input cost above the "
        "offline bound; `notes`: characters of state-view notes sent; `rewrites`: calls that changed a message "
        "already sent; `valid unique dropped`: distinct output lines left out at some call while still true and "
        "shown nowhere later in what was sent; `lost (check)`: the same, found by an independent check (the "
        "text of what was sent, the files read from the disk); `stubs (false)`: outputs sent as a stub or as "
        "their kept lines, summed over calls, and how many said something untrue.",
    ]
    for model in models:
        share = (ctx.get("ledger", {}).get(model) or {}).get("view_share")
        lines += [
            "",
            f"### Billed as `{model}`"
            + (f" (the state view's share of the ledger arm's input cost: {share:.1%})" if share is not None else ""),
            "",
            "| " + " | ".join(CONTEXT_COLUMNS) + " |",
            "|" + "---|" * len(CONTEXT_COLUMNS),
        ]
        for arm, by_model in ctx.items():
            if model in by_model:
                lines.append("| " + " | ".join(_context_row(arm, by_model[model])) + " |")
        lines += ["", *cost_targets(ctx, model)]
    return "\n".join(lines) + "\n"


def cost_targets(ctx: dict[str, dict[str, Any]], model: str) -> list[str]:
    """The cost targets, each with the figure that meets or misses it (from ``ctx`` alone)."""
    ledger = (ctx.get("ledger") or {}).get(model) or {}
    out = []

    def line(ok: bool, text: str) -> None:
        out.append(f"- {'met' if ok else 'MISSED'}: {text}")

    ratio = ledger.get("input_vs_none")
    if ratio is not None:
        line(ratio <= 0.88, f"`ledger` (the default) input cost {ratio:.3f}x of `none` (target 0.88x at most)")
    runs = ledger.get("runs") or {}
    if runs:
        line(
            runs["above_1"] == 0,
            f"runs of `ledger` above 1.00x of `none`: {runs['above_1']} of {runs['n']} (largest {runs['max']:.3f}x)",
        )
    share = ledger.get("view_share")
    if share is not None:
        line(share <= 0.03, f"the state view's share of `ledger`'s input cost: {share:.2%} (target 3% at most)")
    validity = {a: r[model] for a, r in ctx.items() if a.startswith("validity") and model in r}
    if validity:
        arm, best = min(validity.items(), key=lambda kv: kv[1].get("input_cost_usd", float("inf")))
        v = best.get("input_vs_none")
        if v is not None:
            line(v <= 0.85, f"the best validity policy (`{arm}`) {v:.3f}x of `none` (target 0.85x at most)")
        gap = best.get("vs_bound")
        if gap is not None:
            line(gap <= 0.05, f"`{arm}` {gap:+.1%} against the offline bound (target within 5%)")
        dropped = sum(int(r.get("valid_unique_lines_dropped", 0)) for r in validity.values())
        false = sum(int(r.get("stubs_false", 0)) for r in validity.values())
        lost = sum(int(r.get("lines_lost_independent", 0)) for r in validity.values())
        line(
            dropped == 0 and false == 0 and lost == 0,
            f"validity policies: {dropped} valid unique lines dropped, {false} false stubs; "
            f"the independent check: {lost} lines lost",
        )
    return out
