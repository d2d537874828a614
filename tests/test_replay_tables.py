"""The replay's cost tables on a terminal of 80 columns (or a pipe, which rich gives 80): every figure whole
on its line, every arm there."""

from __future__ import annotations

import io

from rich.console import Console

from ledger_harness.replay.report import context_tables

ARMS = ("recorded", "none", "answers", "ledger", "view-every-call", "window:10", "validity", "validity+window:10")


def _figures(i: int) -> dict:
    return {
        "prompt_tokens": 84_485_475 + i,
        "uncached_tokens": 14_763 * (i + 1),
        "cache_read_tokens": 81_735_201,
        "cache_write_tokens": 2_735_511,
        "input_cost_usd": 34.82 + i,
        "input_vs_none": 0.923,
        "runs": {"above_1": 101, "max": 1.344},
        "vs_bound": 0.219,
        "cost_usd": 53.29,
        "note_chars": 75_776,
        "rewrites": 487,
        "valid_unique_lines_dropped": 66_920,
        "lines_lost_independent": 56_354,
        "stubs": 56_298,
        "stubs_false": 0,
    }


def _printed(renderables, width: int = 80) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None)
    for r in renderables:
        console.print(r)
    return out.getvalue()


def test_the_cost_tables_keep_every_figure_whole_at_80_columns() -> None:
    """Eight arms of real-sized figures: folded into one table turned on its side, a figure broke over two
    lines ("189,0" / "99"); the arms now go over as many tables as fit, each figure whole."""
    ctx = {arm: {"gpt-5-mini": _figures(i)} for i, arm in enumerate(ARMS)}
    console = Console(file=io.StringIO(), width=80)

    def measure(t) -> int:
        return console.measure(t, options=console.options.update_width(10_000)).maximum

    tables = context_tables(ctx, "gpt-5-mini", 80, measure)
    text = _printed(tables)
    assert len(tables) > 1 and max(map(len, text.splitlines())) <= 80, text
    for i, arm in enumerate(ARMS):
        assert arm in text
        for figure in (f"{84_485_475 + i:,}", f"{14_763 * (i + 1):,}", f"{34.82 + i:.2f}", "101 (1.344)", "56,298 (0)"):
            assert figure in text, (figure, text)
    wide = context_tables(ctx, "gpt-5-mini", 400, measure)
    assert len(wide) == 1 and "validity+window:10" in _printed(wide, 400)
