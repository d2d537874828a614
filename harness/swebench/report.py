"""``ledger-run report OUT``: the arms of a ``ledger-run swebench`` output side by side.

Per arm and per instance, from the files the run wrote:

- resolved (``results.json``, when scored), with, for every pair of arms, the instances only one of
  them resolved and McNemar's exact p-value on those;
- cost and model calls (the trajectory's ``info.model_stats``; unknown, never $0, when a call's model
  had no price: ``unpriced_calls``, which the ledger's model wrapper adds), prompt tokens with the cached ones
  and the cache writes, and output tokens (the usage the provider returned for each model response,
  in the trajectory; "n/a" when the model reported none), wall time (``timings.json``);
- from the ledgers, one definition for every arm (the baseline's ledger decides in shadow mode):
  redundant re-reads = commands whose output came back with what the model already held (a whole-output
  reference, line spans, a diff, a reused run; whether or not the arm acted on it), and
  the characters of output they stand for; reuses and nudges = the verdicts the arm acted on, and
  the characters spared; by command class.

``--json`` prints the whole report; a PNG figure (per-instance cost and tokens, each arm against
the baseline; characters spared by command class) goes to ``OUT/report.png``.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

from rich.markup import escape

from ledger_harness.swebench.run import ARMS, BadInput, read_json
from ledger_runtime import NotALedger, VerdictKind, load, shell_word


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant pairs at 1/2."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def _tokens(messages: list[Any]) -> tuple[int | None, int | None, int | None, int | None]:
    """Prompt, output, cached prompt and cache-write tokens the provider reported, summed over the
    model's calls, as litellm hands them on (cached: OpenAI's ``prompt_tokens_details.cached_tokens``,
    Anthropic's ``cache_read_input_tokens``; written: Anthropic's ``cache_creation_input_tokens``, which
    OpenAI and Gemini do not bill)."""
    inp = out = cached = written = 0
    seen = False
    for m in messages:
        usage = ((m.get("extra") or {}).get("response") or {}).get("usage") if isinstance(m, dict) else None
        if isinstance(usage, dict):
            seen = True
            inp += _int(usage.get("prompt_tokens") or usage.get("input_tokens"))
            out += _int(usage.get("completion_tokens") or usage.get("output_tokens"))
            details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
            cached += _int(
                (details.get("cached_tokens") if isinstance(details, dict) else 0)
                or usage.get("cache_read_input_tokens")
            )
            written += _int(usage.get("cache_creation_input_tokens"))
    return (inp, out, cached, written) if seen else (None, None, None, None)


def _int(v: Any) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError):  # a provider's odd usage field never breaks the report
        return 0


REFERENCING = ("whole", "spans", "delta", "reused")


def ledger_figures(path: Path) -> dict[str, Any]:
    state = load(path).state
    # an output that came back with what the model already held (answers.py): decided the same way
    # in every arm (the baseline's shadow ledger records what the model would have got)
    re_reads = [a for a in state.attempts if a.answer_kind in REFERENCING]
    acted = [a for a in re_reads if a.applied]
    by_class: Counter[str] = Counter()
    chars_by_class: Counter[str] = Counter()
    for a in re_reads:
        by_class[a.command_class.value] += 1
        chars_by_class[a.command_class.value] += a.output_chars
    return {
        "commands": len(state.attempts),
        "executed": sum(1 for a in state.attempts if a.executed),
        "re_reads": len(re_reads),
        "re_read_chars": sum(chars_by_class.values()),
        "reuses": len(acted),
        "nudges": sum(1 for a in state.attempts if a.applied and a.verdict.kind is VerdictKind.NUDGE),
        "chars_spared": sum(a.output_chars - a.shown_chars for a in acted),
        "re_reads_by_class": dict(by_class),
        "re_read_chars_by_class": dict(chars_by_class),
    }


@lru_cache(maxsize=64)
def _pricing(model: str):
    """litellm's prices of ``model`` under its rule (None: no price, or no litellm)."""
    try:
        from ledger_adapters.litellm_pricing import LitellmPricing

        return LitellmPricing(model)
    except (LookupError, ImportError):
        return None


def rule_cost(model: str, inp: int | None, out: int | None, cached: int | None, written: int | None) -> float | None:
    """What a run's tokens cost under its model's own rule of prompt caching (adapters/litellm_pricing.py:
    reads at the cache-read price; writes at Anthropic's, or OpenAI's from GPT-5.6, price; the rest of
    the prompt at the input price); None where litellm has no price for the model or no tokens were
    reported."""
    if not model or inp is None:
        return None
    for name in dict.fromkeys((model, model.split("/", 1)[-1])):
        p = _pricing(name)
        if p is None:
            continue
        cached, written, out = cached or 0, written or 0, out or 0
        uncached = max(0, inp - cached - written)
        return uncached * p.input_cost + cached * p.cached_cost + written * p.cache_write_cost + out * p.output_cost
    return None


def instance_figures(arm_dir: Path, iid: str, timings: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"instance_id": iid}
    traj_path = arm_dir / iid / f"{iid}.traj.json"
    try:
        traj = read_json(traj_path)
        info = traj.get("info") or {}
        stats = info.get("model_stats") or {}
        inp, out, cached, written = _tokens(traj.get("messages") or [])
        model = str((((info.get("config") or {}).get("model") or {}).get("model_name")) or "")
        row.update(
            rule_cost=rule_cost(model, inp, out, cached, written),
            exit_status=info.get("exit_status"),
            cost=None if stats.get("unpriced_calls") else float(stats.get("instance_cost") or 0.0),
            cost_unknown=bool(stats.get("unpriced_calls")),
            calls=int(stats.get("api_calls") or 0),
            input_tokens=inp,
            output_tokens=out,
            cached_tokens=cached,
            cache_write_tokens=written,
            submitted=bool((info.get("submission") or "").strip()),
        )
        ledger = (info.get("ledger") or {}).get("path")
    except (OSError, ValueError, AttributeError) as e:
        row.update(problem=f"trajectory: {type(e).__name__}: {e}")
        ledger = None
    # the trajectory names its ledger (load finds it beside the trajectory when the run was moved)
    ledger_path = traj_path if ledger else arm_dir / iid / "ledger"
    try:
        row["ledger"] = ledger_figures(ledger_path)
    except NotALedger as e:
        row["ledger"] = None
        row["problem"] = str(e)
    row["wall_s"] = (timings.get(iid) or {}).get("wall_s")
    scored = (results.get("instances") or {}).get(iid)
    row["resolved"] = scored.get("resolved") if scored else None
    return row


def arm_report(arm_dir: Path) -> dict[str, Any]:
    from ledger_harness.swebench.eval import arm_preds

    preds = arm_preds(arm_dir)
    timings = read_json(arm_dir / "timings.json") if (arm_dir / "timings.json").exists() else {}
    results = read_json(arm_dir / "results.json") if (arm_dir / "results.json").exists() else {}
    rows = {iid: instance_figures(arm_dir, iid, timings, results) for iid in sorted(preds)}
    n = len(rows)

    def total(key: str) -> float | None:
        vals = [r.get(key) for r in rows.values() if r.get(key) is not None]
        return sum(vals) if vals else None  # instances without the figure (no trajectory) count as missing

    def ledger_total(key: str) -> int:
        return sum((r.get("ledger") or {}).get(key, 0) for r in rows.values())

    by_class: Counter[str] = Counter()
    chars_by_class: Counter[str] = Counter()
    for r in rows.values():
        by_class.update((r.get("ledger") or {}).get("re_reads_by_class", {}))
        chars_by_class.update((r.get("ledger") or {}).get("re_read_chars_by_class", {}))
    scored = [r["resolved"] for r in rows.values() if r["resolved"] is not None]
    totals = {
        k: total(k)
        for k in (
            "cost",
            "rule_cost",
            "calls",
            "input_tokens",
            "cached_tokens",
            "cache_write_tokens",
            "output_tokens",
            "wall_s",
        )
    }
    unpriced = sum(1 for r in rows.values() if r.get("cost_unknown"))
    if unpriced:  # a sum that leaves some instances out is not the arm's cost
        totals["cost"] = None
    return {
        "arm": arm_dir.name,
        "ledger_settings": ARMS.get(arm_dir.name),
        "instances": n,
        "submitted": sum(1 for r in rows.values() if r.get("submitted")),
        "cost_unknown_instances": unpriced,
        "scored": len(scored),
        "resolved": sum(scored) if scored else None,
        "resolved_rate": (sum(scored) / len(scored)) if scored else None,
        "totals": totals,
        "per_instance": {
            k: (v / sum(1 for r in rows.values() if r.get(k) is not None) if v is not None else None)
            for k, v in totals.items()
        },
        "re_reads": ledger_total("re_reads"),
        "re_read_chars": ledger_total("re_read_chars"),
        "reuses": ledger_total("reuses"),
        "nudges": ledger_total("nudges"),
        "chars_spared": ledger_total("chars_spared"),
        "re_reads_by_class": dict(by_class),
        "re_read_chars_by_class": dict(chars_by_class),
        "rows": rows,
    }


def paired(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    common = sorted(set(a["rows"]) & set(b["rows"]))
    both = [i for i in common if a["rows"][i]["resolved"] is not None and b["rows"][i]["resolved"] is not None]
    if not both:
        return {"a": a["arm"], "b": b["arm"], "instances": len(common), "scored": 0}
    ra = {i: a["rows"][i]["resolved"] for i in both}
    rb = {i: b["rows"][i]["resolved"] for i in both}
    only_a = sorted(i for i in both if ra[i] and not rb[i])
    only_b = sorted(i for i in both if rb[i] and not ra[i])
    return {
        "a": a["arm"],
        "b": b["arm"],
        "instances": len(common),
        "scored": len(both),
        "both": sum(1 for i in both if ra[i] and rb[i]),
        "neither": sum(1 for i in both if not ra[i] and not rb[i]),
        "only_a": only_a,
        "only_b": only_b,
        "p_value": mcnemar_exact(len(only_a), len(only_b)),
    }


def build(out: Path) -> dict[str, Any]:
    from ledger_harness.swebench.eval import arm_dirs

    arms = {d.name: arm_report(d) for d in arm_dirs(out)}
    order = [a for a in ARMS if a in arms] + sorted(a for a in arms if a not in ARMS)
    pairs = [paired(arms[x], arms[y]) for i, x in enumerate(order) for y in order[i + 1 :]]
    return {"out": str(out), "arms": {a: arms[a] for a in order}, "paired": pairs}


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}"


def print_report(report: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    arms = report["arms"]
    t = Table(title=f"SWE-bench arms: {report['out']}")
    t.add_column("")
    for a in arms:
        t.add_column(a, justify="right")

    def row(label: str, get) -> None:
        t.add_row(label, *[get(r) for r in arms.values()])

    row("instances (submitted)", lambda r: f"{r['instances']} ({r['submitted']})")
    row(
        "resolved",
        lambda r: (
            "not scored"
            if r["resolved"] is None
            else f"{r['resolved']}/{r['scored']} ({100 * r['resolved_rate']:.1f}%)"
        ),
    )
    row(
        "cost $ total / per instance",
        lambda r: (
            f"unknown ({r['cost_unknown_instances']} instances' model has no price)"
            if r.get("cost_unknown_instances")
            else f"{_fmt(r['totals']['cost'])} / {_fmt(r['per_instance']['cost'], 3)}"
        ),
    )
    row(
        "cost $ by the provider's caching rule (its tokens at litellm's prices)",
        lambda r: (
            f"{_fmt(r['totals']['rule_cost'])} / {_fmt(r['per_instance']['rule_cost'], 3)}"
            if r["totals"].get("rule_cost") is not None
            else "unknown (no price for the model, or no tokens)"
        ),
    )
    row(
        "model calls total / per instance",
        lambda r: f"{_fmt(r['totals']['calls'])} / {_fmt(r['per_instance']['calls'], 1)}",
    )
    row(
        "prompt tokens total / per instance",
        lambda r: f"{_fmt(r['totals']['input_tokens'])} / {_fmt(r['per_instance']['input_tokens'], 0)}",
    )
    row(
        "cached prompt tokens total / per instance",
        lambda r: f"{_fmt(r['totals']['cached_tokens'])} / {_fmt(r['per_instance']['cached_tokens'], 0)}",
    )
    row(
        "cache-write prompt tokens total / per instance",
        lambda r: f"{_fmt(r['totals']['cache_write_tokens'])} / {_fmt(r['per_instance']['cache_write_tokens'], 0)}",
    )
    row(
        "output tokens total / per instance",
        lambda r: f"{_fmt(r['totals']['output_tokens'])} / {_fmt(r['per_instance']['output_tokens'], 0)}",
    )
    row("redundant re-reads (chars)", lambda r: f"{r['re_reads']} ({r['re_read_chars']:,})")
    row("reuses / nudges acted on", lambda r: f"{r['reuses']} / {r['nudges']}")
    row("output chars spared", lambda r: f"{r['chars_spared']:,}")
    row(
        "wall time s total / per instance",
        lambda r: f"{_fmt(r['totals']['wall_s'], 1)} / {_fmt(r['per_instance']['wall_s'], 1)}",
    )
    console.print(t)
    for p in report["paired"]:
        if not p.get("scored"):
            console.print(
                f"{p['a']} vs {p['b']}: {p['instances']} common {'instance' if p['instances'] == 1 else 'instances'}, "
                "not scored "
                f"(ledger-run swebench evaluate {escape(shell_word(report['out']))})"
            )
            continue
        console.print(
            f"{p['a']} vs {p['b']}: {p['scored']} scored; both {p['both']}, neither {p['neither']}, "
            f"only {p['a']} {len(p['only_a'])}, only {p['b']} {len(p['only_b'])}; "
            f"McNemar exact p = {p['p_value']:.3g}"
        )


def figure_path(png: str | None, out: Path) -> Path:
    """Where ``--png`` asks the figure to go: OUT/report.png by default, report.png in a folder that
    is one or is written as one (``figs/``, made: it was a file named ``figs``), else the path itself,
    whatever its suffix (matplotlib would add .png beside it)."""
    if png is None:
        return out / "report.png"
    folder = png.endswith(("/", os.sep)) or Path(png).is_dir()
    return Path(png) / "report.png" if folder else Path(png)


def write_png(report: dict[str, Any], path: Path) -> Path:
    """Draw the figure and write it to ``path`` (its folders made), owner-only; BadInput says why not."""
    import io

    from ledger_runtime import write_private

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise BadInput(
            "the figure needs matplotlib: pip install 'ledger-runtime[swebench]' (or pass --no-png)"
        ) from None
    arms = report["arms"]
    base = arms.get("baseline") or next(iter(arms.values()))
    others = [r for r in arms.values() if r is not base]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, key, label in ((axes[0], "cost", "cost ($)"), (axes[1], "tokens", "input + output tokens")):
        top = 0.0
        for r in others:
            xs, ys = [], []
            for iid, row in r["rows"].items():
                b = base["rows"].get(iid)
                if b is None:
                    continue
                if key == "tokens":
                    bx = (b.get("input_tokens") or 0) + (b.get("output_tokens") or 0)
                    y = (row.get("input_tokens") or 0) + (row.get("output_tokens") or 0)
                else:
                    bx, y = b.get("cost") or 0.0, row.get("cost") or 0.0
                xs.append(bx)
                ys.append(y)
            ax.scatter(xs, ys, label=r["arm"], alpha=0.7)
            top = max([top, *xs, *ys])
        ax.plot([0, top or 1], [0, top or 1], color="grey", linewidth=0.8)
        ax.set_xlabel(f"{base['arm']}: {label}")
        ax.set_ylabel(f"arm: {label}")
        ax.set_title(f"per instance {label}")
        if others:
            ax.legend()
    classes = sorted({c for r in arms.values() for c in r["re_read_chars_by_class"]})
    width = 0.8 / max(1, len(arms))
    for k, r in enumerate(arms.values()):
        axes[2].bar(
            [i + k * width for i in range(len(classes))],
            [r["re_read_chars_by_class"].get(c, 0) for c in classes],
            width=width,
            label=r["arm"],
        )
    axes[2].set_xticks([i + 0.4 - width / 2 for i in range(len(classes))], classes)
    axes[2].set_ylabel("characters of redundant re-reads")
    axes[2].set_title("redundant re-reads by command class")
    axes[2].legend()
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, dpi=100, format="png")
    plt.close(fig)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private(path, png.getvalue())
    except OSError as e:
        above = next((p for p in path.parents if p.exists()), None)  # mkdir said only "File exists"
        why = f"{above} is a file, not a directory" if above is not None and not above.is_dir() else e.strerror or e
        raise BadInput(f"cannot write the figure to --png {path}: {why}") from None
    return path
