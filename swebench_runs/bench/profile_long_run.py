"""Profile: what grows from step 100 to step N of bench_long_run's cycle? cProfile over an early and a late window.

One ledger drives ``--steps`` commands of ``bench_long_run``'s cycle on its generated project. Over steps 101-500 and
over the last 400 it profiles, apart, the ledger's part of each step (``runtime.run``, the commands themselves left out:
the profiler is off while the executor runs), the render of the state view and the model's turn through the mini
adapter. It prints, per figure, the functions whose own time a step changed most between the two windows, and those
called more often a step late than early: a count that grows with the steps is work that grows with the history (the
times of small functions move with the machine's load; the counts do not).

    python swebench_runs/bench/profile_long_run.py --steps 3000 [--save /tmp/prof]   # (--save: the .prof files)
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_long_run as bench  # noqa: E402

FIGURES = ("run", "render", "turn")
WINDOW = 400


def profiled(steps: int) -> dict[tuple[str, str], cProfile.Profile]:
    """The profiles of each figure over steps 101-500 ("early") and the last 400 ("late"): a step as
    ``bench_long_run.Driven.step`` takes it, each part under its own profiler."""
    profiles = {(w, f): cProfile.Profile() for w in ("early", "late") for f in FIGURES}
    d = bench.Driven(Path(tempfile.mkdtemp(prefix="ledger-long-prof-")), None)
    try:
        for i in range(1, steps + 1):
            window = "early" if 101 <= i <= 500 else "late" if i > steps - WINDOW else None
            on = {f: profiles[window, f] if window else _OFF for f in FIGURES}
            cmd = bench.command(i)

            def execute(c: str, cwd: str, p=on["run"]):
                p.disable()  # the command's own time is not the ledger's
                try:
                    return d.execute(c, cwd)
                finally:
                    p.enable()

            on["run"].enable()
            result = d.rt.run(cmd, execute)
            on["run"].disable()
            on["render"].enable()
            d.rt.view()
            on["render"].disable()
            d.messages += [
                {"role": "assistant", "content": f"step {i}: THOUGHT ... ```bash\n{cmd}\n```"},
                {"role": "user", "content": result.output, "extra": {"ledger": {"attempt": result.attempt_id}}},
            ]
            on["turn"].enable()
            d.rt.prescan()
            bench.mini_context.history_for(d.messages, d.history, d.rt, bench._Model(), d.agent_messages)
            on["turn"].disable()
    finally:
        d.close()
    return profiles


class _Off:
    """A profiler that profiles nothing (steps outside both windows)."""

    def enable(self) -> None:
        pass

    def disable(self) -> None:
        pass


_OFF = _Off()


def compare(early: pstats.Stats, late: pstats.Stats, top: int) -> list[str]:
    """The functions whose own time a step changed most, then those called more often a step late than early."""
    e, la = early.stats, late.stats  # type: ignore[attr-defined]
    zero = (0, 0, 0.0, 0.0)
    per = 1e3 / WINDOW
    rows = [(la.get(k, zero)[2] - e.get(k, zero)[2], k) for k in set(e) | set(la)]
    out = [
        f"  own time, total: {sum(v[2] for v in e.values()) * per:.3f} -> {sum(v[2] for v in la.values()) * per:.3f}"
    ]
    for d, k in sorted(rows, key=lambda r: -abs(r[0]))[:top]:
        a, b = e.get(k, zero), la.get(k, zero)
        out.append(
            f"  {d * per:+.4f} ms/step  own {a[2] * per:.4f} -> {b[2] * per:.4f}, calls {a[1] / WINDOW:.1f} -> "
            f"{b[1] / WINDOW:.1f}  {_name(k)}"
        )
    grown = [k for k in set(e) | set(la) if la.get(k, zero)[1] > 1.2 * e.get(k, zero)[1] + WINDOW / 10]
    for k in sorted(grown, key=lambda k: e.get(k, zero)[1] - la.get(k, zero)[1]):
        out.append(
            f"  more calls: {e.get(k, zero)[1] / WINDOW:.1f} -> {la.get(k, zero)[1] / WINDOW:.1f} a step  {_name(k)}"
        )
    return out


def _name(key: tuple) -> str:
    return f"{key[0].split('/')[-1]}:{key[1]} {key[2]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--save", type=Path, help="write each profile to SAVE.{early,late}.{run,render,turn}.prof")
    args = ap.parse_args()
    if args.steps < 500 + WINDOW:
        ap.error(f"--steps must be at least {500 + WINDOW}")
    profiles = profiled(args.steps)
    for f in FIGURES:
        print(f"{f} (ms a step, steps 101-500 -> {args.steps - WINDOW + 1}-{args.steps}):")
        print("\n".join(compare(pstats.Stats(profiles["early", f]), pstats.Stats(profiles["late", f]), args.top)))
    if args.save:
        for (w, f), p in profiles.items():
            p.dump_stats(f"{args.save}.{w}.{f}.prof")
    return 0


if __name__ == "__main__":
    sys.exit(main())
